/* fmt_reader: the one record read loop every record format shares.
 *
 * The loop owns the stream (buffering, decompression, offsets), the record
 * size limit and the error text; a format (its fmt_format_ops table,
 * fmt_format.h) owns only its framing. Formats: TFRecord and text lines.
 * (Tar shards group members into samples and have their own reader,
 * fmt_tar.h.)
 *
 * fmt_reader_next() lends a record view valid until the next call on the
 * same reader; it allocates nothing per record.
 *
 * Errors are "<path>: <what> at <offset>" with TensorFlow's texts
 * ("corrupted record at N", "truncated record at N"), offsets in the
 * decompressed stream.
 *
 * Thread-safe: no; one owner.
 */
#ifndef FMT_READER_H
#define FMT_READER_H

#include <stddef.h>
#include <stdint.h>

#include "fmt_format.h" /* enum fmt_format, the formats' tables */
#include "fmt_stream.h"
#include "sl_error.h"

struct fmt_reader_opts {
    enum fmt_format format;           /* TFRECORD or TEXT */
    enum fmt_compression compression; /* AUTO by default */
    size_t max_record_bytes;          /* 0: FMT_DEFAULT_MAX_RECORD_BYTES */
    size_t buffer_size;               /* 0: fmt_stream's default (256 KiB plain, 1 MiB compressed) */
    int skip_crc;                     /* 1: do not verify TFRecord CRCs (never the default) */
    int use_zlib;                     /* 1: inflate with zlib even when ISA-L is present */
    enum fmt_io io;                   /* plain files: AUTO (default), READ or MAP (fmt_stream.h) */
    uint64_t max_output;              /* compressed files: most decompressed bytes (fmt_stream's
                                         max_output); 0: no limit */
};

/* A borrowed record: data valid until the next call on the reader. */
struct fmt_record {
    const uint8_t *data;
    size_t len;
    uint64_t offset; /* decompressed offset of the record's first byte of framing */
    uint64_t index;  /* 0-based record number in the file */
};

struct fmt_reader;

int fmt_reader_open(struct fmt_reader **out, const char *path, const struct fmt_reader_opts *opts,
                    struct sl_error *err) SL_MUST_CHECK;
/* The same over an open storage source (sto.h), owned by the reader from
 * the call on (closed with it, or at once on error). */
struct sto_src;
int fmt_reader_open_source(struct fmt_reader **out, struct sto_src *src, const struct fmt_reader_opts *opts,
                           struct sl_error *err) SL_MUST_CHECK;
int fmt_reader_open_mem(struct fmt_reader **out, const char *name, const void *data, size_t len,
                        const struct fmt_reader_opts *opts, struct sl_error *err) SL_MUST_CHECK;
void fmt_reader_close(struct fmt_reader *r);

/* 0 and a record; SL_END at the end of the file; negative on error (the
 * reader is then unusable: TensorFlow skips the rest of such a file). */
int fmt_reader_next(struct fmt_reader *r, struct fmt_record *rec, struct sl_error *err) SL_MUST_CHECK;

/* Position at the record that starts at decompressed offset `off` with
 * index `index` (from an index file). Uncompressed files only. */
int fmt_reader_seek(struct fmt_reader *r, uint64_t off, uint64_t index, struct sl_error *err) SL_MUST_CHECK;

/* Bytes of an incomplete TFRecord header at the end of the file that were
 * dropped as TensorFlow drops them (0 if none); callers warn about them. */
uint64_t fmt_reader_dropped_tail(const struct fmt_reader *r);
const char *fmt_reader_path(const struct fmt_reader *r);
struct fmt_stream *fmt_reader_stream(struct fmt_reader *r);

/* Internal state formats may use. */
struct fmt__reader_state {
    size_t max_record_bytes;
    int skip_crc;
    uint64_t dropped_tail;
    uint64_t index;
    struct fmt_stream *stream;
    uint8_t *scratch; /* text: a line with '\r' removed, or one longer than a window */
    size_t scratch_cap;
    /* TFRecord over a window the stream fills (read(2), inflate): what is
     * left of the last window after the records taken from it, still
     * valid (fmt_stream_consume moves no data), so the next record is
     * framed without another window call; ahead_len 0: ask the stream.
     * Not used for a lent block, whose window calls prefetch. */
    int lend_ahead;
    const uint8_t *ahead;
    size_t ahead_len;
    uint64_t ahead_off; /* decompressed offset of ahead[0] */
};
struct fmt__reader_state *fmt__reader_state(struct fmt_reader *r);

/* The scan of a record format through this loop (a format's ops->scan):
 * every record's offset, CRCs checked unless skip_crc. */
int fmt__reader_scan(struct fmt_scan **out, const char *path, enum fmt_format format, const struct fmt_scan_opts *opts,
                     struct sl_error *err) SL_MUST_CHECK;

#endif
