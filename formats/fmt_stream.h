/* fmt_stream: a buffered input byte stream over a file (or memory) that
 * undoes whole-file compression: none, zlib (RFC 1950) or gzip (RFC 1952,
 * concatenated members read in turn).
 *
 * Reads go through a window: fmt_stream_window() makes at least `need`
 * contiguous bytes available and lends a pointer to them, valid until the
 * next window/seek/close call; fmt_stream_consume() only moves the position
 * (it never moves data), so a view taken before it stays valid.
 * Formats frame records straight out of the window, so a record view costs
 * no copy and no allocation.
 *
 * Offsets: fmt_stream_offset() is the position in the decompressed stream
 * (what record offsets use); fmt_stream_in_offset() the position in the
 * file. A corrupt or truncated compressed stream is SL_ECORRUPT with
 * "<path>: <what> at compressed offset N"; so is one that inflates past
 * max_output ("<path>: inflates past the limit of L bytes (at decompressed
 * offset L, compressed offset N)"), found before more than one input chunk
 * beyond it is inflated.
 *
 * An uncompressed regular file is either read(2) into the stream's reused
 * window, from which records are lent (only a record straddling two reads
 * is moved, to the window's start), or memory-mapped and lent from the page
 * cache (a file truncated by another process while mapped would raise
 * SIGBUS). Which one is the opts' `io`; FMT_IO_AUTO takes the environment's
 * SLUICE_IO (map, read or auto), else the process-wide choice of a short
 * probe (the measurement of fmt_io_probe_file, run once on the first plain
 * file of at least 32 MiB in the page cache: mapping wins or loses against
 * read(2) by up to 4x depending on the machine and its memory's state,
 * docs/performance.md "Map or read (issue #25)"); until a probe has run,
 * read.
 * Both paths give the same records, offsets and errors.
 *
 * A remote object (http(s)://, s3://) is read the read(2) way, through
 * storage's sto_read_at at sequential offsets.
 *
 * Inflate uses ISA-L's igzip when the build has it (about 2x zlib here) and
 * zlib otherwise; fmt_stream_inflater_name() says which.
 *
 * Thread-safe: a stream, no (one owner); the fmt_io_* functions and the
 * process-wide choice, yes.
 */
#ifndef FMT_STREAM_H
#define FMT_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "fmt_io.h" /* enum fmt_io: how a plain file is read */
#include "sl_error.h"

enum fmt_compression { FMT_COMP_AUTO = 0, FMT_COMP_NONE, FMT_COMP_GZIP, FMT_COMP_ZLIB };

/* "auto", "none", "gzip", "zlib" (also TensorFlow's "", "GZIP", "ZLIB").
 * Returns 0 or SL_EINVAL. */
int fmt_compression_parse(const char *s, enum fmt_compression *out) SL_MUST_CHECK;
const char *fmt_compression_name(enum fmt_compression c);
/* The names fmt_compression_parse takes (TensorFlow's aside), for messages. */
#define FMT_COMPRESSION_NAMES "auto, none, gzip or zlib"

/* Decides, for FMT_COMP_AUTO, whether bytes that carry a compression magic
 * number are in fact an uncompressed file of the caller's format (a TFRecord
 * whose first length happens to look like a zlib header). */
typedef int (*fmt_plain_probe_fn)(const uint8_t *head, size_t n);

struct fmt_stream_opts {
    enum fmt_compression compression; /* AUTO: by extension, then by magic */
    size_t buffer_size;               /* input chunk; 0: 256 KiB for a plain file read(2), 1 MiB for
                                          compressed input */
    size_t max_window;                /* largest window a caller may ask for; 0: 64 MiB + 64 */
    fmt_plain_probe_fn plain_probe;   /* optional, see above */
    int use_zlib;                     /* 1: inflate with zlib even when ISA-L is present */
    enum fmt_io io;                   /* uncompressed files: AUTO (default), READ or MAP */
    uint64_t max_output;              /* compressed streams: most decompressed bytes the file may
                                          hold (a gzip bomb stops there); 0: no limit */
};

struct fmt_stream;

/* Open `name`: a local path or file:// name (open(2), as above: read(2)
 * or mapped), or an http(s):// or s3:// object read through storage's
 * seam (sto.h) in chunks of buffer_size (0: 4 MiB) into the same window,
 * or inflate input; never mapped; seekable when uncompressed; its size
 * and ETag fixed at open). On error *out is NULL and err says
 * "open(<path>): ..." for a local file, or names the URL. Other errors
 * name `name` as given. */
int fmt_stream_open(struct fmt_stream **out, const char *name, const struct fmt_stream_opts *opts,
                    struct sl_error *err) SL_MUST_CHECK;
/* Read an open storage source (sto.h) of any kind, a local one too (then
 * not mapped: read as a remote one is), through sto_read_at. The stream
 * owns `src` from the call on (closed with it, or at once on error); its
 * name is the stream's. */
struct sto_src;
int fmt_stream_open_source(struct fmt_stream **out, struct sto_src *src, const struct fmt_stream_opts *opts,
                           struct sl_error *err) SL_MUST_CHECK;
/* Read from memory (borrowed for the stream's life); `name` is used in errors
 * and for AUTO's extension rule. */
int fmt_stream_open_mem(struct fmt_stream **out, const char *name, const void *data, size_t len,
                        const struct fmt_stream_opts *opts, struct sl_error *err) SL_MUST_CHECK;
/* Read from an open file descriptor (not closed by the stream). */
int fmt_stream_open_fd(struct fmt_stream **out, const char *name, int fd, const struct fmt_stream_opts *opts,
                       struct sl_error *err) SL_MUST_CHECK;
void fmt_stream_close(struct fmt_stream *s);

/* Make at least `need` bytes (need <= max_window) available at *p.
 * Returns 0 with *avail >= need; or 0 with *avail < need when the stream
 * ends first (*avail is then everything left); or a negative code. */
int fmt_stream_window(struct fmt_stream *s, size_t need, const uint8_t **p, size_t *avail,
                      struct sl_error *err) SL_MUST_CHECK;
/* Copy the next decompressed bytes into dst (the caller's buffer: a
 * compressed stream inflates straight into it, with no window of its own),
 * moving the position. *got < n only at the end of the stream; the end is
 * checked (trailer, CRC) before *got = 0 is returned. */
int fmt_stream_read(struct fmt_stream *s, void *dst, size_t n, size_t *got, struct sl_error *err) SL_MUST_CHECK;
/* Move past n bytes of the current window (n <= *avail of the last call). */
void fmt_stream_consume(struct fmt_stream *s, size_t n);

/* Reposition an uncompressed file stream at decompressed offset `off`.
 * SL_EINVAL on a compressed stream. */
int fmt_stream_seek(struct fmt_stream *s, uint64_t off, struct sl_error *err) SL_MUST_CHECK;

uint64_t fmt_stream_offset(const struct fmt_stream *s);
uint64_t fmt_stream_in_offset(const struct fmt_stream *s);
const char *fmt_stream_path(const struct fmt_stream *s);
enum fmt_compression fmt_stream_compression(const struct fmt_stream *s); /* resolved, never AUTO */
const char *fmt_stream_inflater_name(const struct fmt_stream *s);        /* "none", "isa-l", "zlib" */
/* How the stream's bytes arrive: MAP for a mapped file or memory lent,
 * READ for read(2) into the window (compressed files: their input). */
enum fmt_io fmt_stream_io(const struct fmt_stream *s);

/* A data file's size, wherever it lives: stat(2) for a local (or file://)
 * name, "stat(<path>): ..." when that fails; a remote object's size at
 * open (one request), its open error otherwise. */
int fmt_file_size(const char *name, uint64_t *size, struct sl_error *err) SL_MUST_CHECK;
/* 1 when `name` can be opened for reading: access(2) for a local name; a
 * remote object that opens (any failure, a 404 or an unreachable server,
 * reads as 0: callers use it for optional sidecars such as FILE.idx). */
int fmt_file_readable(const char *name);

#endif
