/* fmt_format: one ops table per record format, the only way the feeder
 * reaches a format (it names none: it passes the job's enum fmt_format to
 * fmt_format_get and calls through the table).
 *
 * A table holds everything a format knows, for both ways of reading it:
 *   - sequential, behind the shared read loop (fmt_reader): `next` frames
 *     the next record out of the stream;
 *   - random access, as the feeder reads (scan once, then any record in
 *     any order from the file's decompressed image):
 *       scan   a file, streamed once -> a fmt_scan: where every record lies
 *              in the decompressed image, the count, the image's size, with
 *              the format's framing errors ("<path>: <what> at N");
 *       frame  one record out of an image (mapped or inflated, the caller's
 *              business) by its number -> its bytes, or its named fields;
 *       decode a framed record into the next row of an fmt_batch (whose
 *              fixed-size columns the caller may have bound to its own
 *              memory, fmt_batch_bind).
 * The caller (the loop) owns buffering, mapping, caching, the images and
 * the error text around a record; a format owns its framing and decoding.
 *
 * Formats: TFRecord (records are tf.train.Examples), text lines (a line is
 * one scalar bytes column), tar shards in the WebDataset layout (a record
 * is a sample: its members by extension fill the columns of their name),
 * arrays (.npy or IDX files, one per feature: a record is a row of each,
 * fmt_array.h; its "file" is such a group of arrays, scan_group).
 *
 * Thread-safe: the tables are immutable; a fmt_scan is read-only after its
 * scan and may be read from many threads; a fmt_frame has one owner.
 */
#ifndef FMT_FORMAT_H
#define FMT_FORMAT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "fmt_stream.h"
#include "fmt_types.h" /* struct fmt_array_info */
#include "sl_error.h"

enum fmt_format { FMT_FORMAT_TFRECORD = 0, FMT_FORMAT_TEXT, FMT_FORMAT_TAR, FMT_FORMAT_ARRAYS };

/* "tfrecord", "text", "tar", "arrays". Returns 0 or SL_EINVAL. */
int fmt_format_parse(const char *s, enum fmt_format *out) SL_MUST_CHECK;
const char *fmt_format_name(enum fmt_format f);
/* The names fmt_format_parse takes, for messages. */
#define FMT_FORMAT_NAMES "tfrecord, text, tar or arrays"

#define FMT_DEFAULT_MAX_RECORD_BYTES ((size_t)64 << 20)

struct fmt_batch;
struct fmt_feature_spec;
struct fmt_job_input;
struct fmt_reader;
struct fmt_record;

/* ---- scan: a file's records, located -------------------------------- */

struct sto_src;
struct fmt_index_entry;

struct fmt_scan_opts {
    enum fmt_compression compression;     /* AUTO: per file */
    size_t max_record_bytes;              /* 0: FMT_DEFAULT_MAX_RECORD_BYTES (tar: per member) */
    uint64_t max_output;                  /* most bytes a compressed file may inflate to; 0: none */
    int skip_crc;                         /* 1: walk the framing only (counting) */
    int use_index;                        /* 1: take offsets from FILE.idx where the format has
                                         index files (TFRecord), instead of reading the file */
    volatile sig_atomic_t *stop;          /* when set, the scan stops (SL_ECLOSED), checked every
                                         64Ki records; may be NULL */
    const struct fmt_feature_spec *specs; /* arrays: the features their members fill, in order; the
                                         scan checks each member's dtype and row size against its
                                         feature (NULL: not checked) */
    size_t nspecs;
    struct sto_src *source; /* TFRECORD and TEXT: read the file through this open source (sto.h)
                               instead of opening its name; the scan owns it from the call on
                               (closed whatever happens; with an index, its probe for the
                               compression and its size for the index's check); the other
                               formats: must be NULL */
    /* TFRECORD with use_index: 1 when the caller has already looked for FILE.idx
     * (fmt_index_find): index_found says whether there is one, index[0, nindex) its
     * entries (the caller's, read only); 0: the scan looks for it itself */
    int index_known, index_found;
    const struct fmt_index_entry *index;
    size_t nindex;
};

/* Look for a TFRecord index (FILE.idx, fmt_index.h) and load it in one go:
 * 1 and its entries (a new array, sl_free; *n of them), each line checked
 * as fmt_index_load checks it; 0 (*entries NULL) when there is none to read
 * (a local file that is not readable; a remote one that cannot be opened:
 * absent, refused, unreachable); an error (fmt_index_load's) when it is
 * there but too large, malformed or unreadable past its open. A remote
 * index costs one open and its read, no separate check. */
int fmt_index_find(const char *idx_path, struct fmt_index_entry **entries, size_t *n,
                   struct sl_error *err) SL_MUST_CHECK;

/* What a scan found (opaque; one owner, read-only once made). */
struct fmt_scan;

void fmt_scan_free(struct fmt_scan *s);
/* Records (tar: samples) in the file. */
uint64_t fmt_scan_count(const struct fmt_scan *s);
/* Where record `rec` starts in the decompressed image (TFRecord: its length
 * field; text: the line; tar: the header of the sample's first member);
 * 0 past the end. */
uint64_t fmt_scan_offset(const struct fmt_scan *s, uint64_t rec);
/* The bytes record `rec` spans in the image: from its offset to the next
 * record's, or the image's end for the last; 0 for a record that does
 * not exist, or rows of arrays. */
uint64_t fmt_scan_extent(const struct fmt_scan *s, uint64_t rec);
/* Bytes of the decompressed image (the file's size when uncompressed). */
uint64_t fmt_scan_image_bytes(const struct fmt_scan *s);
/* The compression the file turned out to have (never AUTO). */
enum fmt_compression fmt_scan_compression(const struct fmt_scan *s);
/* Bytes of a partial TFRecord header at the end, dropped as TensorFlow
 * drops them (callers warn); 0 otherwise. */
uint64_t fmt_scan_dropped_tail(const struct fmt_scan *s);
/* The files whose decompressed bytes, one after the other, make the image:
 * 1, or the arrays of a group (scan_group). Part k's size in the image and
 * its compression (one part: the image's). */
size_t fmt_scan_parts(const struct fmt_scan *s);
uint64_t fmt_scan_part_bytes(const struct fmt_scan *s, size_t k);
enum fmt_compression fmt_scan_part_compression(const struct fmt_scan *s, size_t k);

/* ---- keep: a scan on disk (the feeder's scan cache) ------------------ */

/* A scan holds record offsets, which any keeper stores as it likes; a
 * format whose records are made of parts (tar) holds more, and its table's
 * `keep` writes and reads that much (the keeper owns the file, its header,
 * buffering and checksums, and lends these byte streams). */

/* How much more: the counts a keeper stores in its header. */
struct fmt_scan_extra {
    uint64_t nparts;
    uint32_t nnames;
};

/* A run of `n` values of `each` bytes in the keeper's body. */
struct fmt_scan_block {
    uint64_t n, each;
};

#define FMT_SCAN_MAX_BLOCKS 4

/* put: append n bytes (failures are the keeper's to note). take: lend the
 * next n bytes (n <= 64 KiB), or NULL with err set, naming the entry, at a
 * short entry or a read error. `name` names the entry in messages. */
struct fmt_scan_sink {
    void (*put)(void *ctx, const void *p, size_t n);
    void *ctx;
};
struct fmt_scan_source {
    const uint8_t *(*take)(void *ctx, size_t n, struct sl_error *err);
    void *ctx;
    const char *name;
};

struct fmt_scan_keep {
    /* The counts of scan `s`. */
    void (*extra)(const struct fmt_scan *s, struct fmt_scan_extra *out);
    /* The blocks these counts take, in body order, for `count` records:
     * how many (at most FMT_SCAN_MAX_BLOCKS), or -1 when the counts cannot
     * be those of `count` records. Sizes nothing; the keeper bounds the
     * blocks by its file's size before any allocation. */
    int (*layout)(const struct fmt_scan_extra *x, uint64_t count, struct fmt_scan_block *out);
    /* Room in `s` for `count` records of these counts (bounded by now):
     * 0 or SL_ENOMEM. */
    int (*alloc)(struct fmt_scan *s, uint64_t count, const struct fmt_scan_extra *x);
    void (*write)(const struct fmt_scan *s, const struct fmt_scan_sink *out);
    /* Read the blocks into `s` (count and image_bytes set), each value
     * checked against the image: 0, or SL_ECORRUPT "<name>: <what> (a, b)",
     * or the source's error. */
    int (*read)(struct fmt_scan *s, const struct fmt_scan_extra *x, const struct fmt_scan_source *in,
                struct sl_error *err);
};

/* ---- frame: one record out of an image ------------------------------ */

#define FMT_MAX_FIELDS 64

/* A named part of a record (a tar member: its extension and data), or a
 * typed one (an array's row: its values, stored as `array` says). */
struct fmt_field {
    const char *name;
    const uint8_t *data;
    size_t len;
    const struct fmt_array_info *array; /* NULL: bytes (or numbers as text) */
};

/* A framed record, valid until the next frame into the same fmt_frame and
 * while the image it came from stays put. Caller-owned and all-zero to
 * start; its storage (fields, a scratch for text lines with '\r') is reused
 * from call to call; fmt_frame_free releases it. */
struct fmt_frame {
    const uint8_t *data; /* the record's bytes; NULL when it is made of fields */
    size_t len;
    const struct fmt_field *fields; /* its named fields, in file order; NULL for bytes */
    size_t nfields;
    /* storage */
    struct fmt_field field_buf[FMT_MAX_FIELDS];
    uint8_t *scratch;
    size_t scratch_cap;
};
void fmt_frame_free(struct fmt_frame *f);

/* ---- the table ------------------------------------------------------ */

struct fmt_format_ops {
    const char *name;    /* "tfrecord", "text", "tar" */
    const char *element; /* what one record is called in messages: "record", "line", "sample" */

    /* Sequential reading (fmt_reader): decides AUTO compression for bytes
     * that look compressed (may be NULL), and frames the next record out of
     * the stream: 0, SL_END, or an error whose message is the bare "<what>
     * at <offset>" (the loop adds the path). NULL: the format has its own
     * reader (tar: fmt_tar.h). */
    fmt_plain_probe_fn plain_probe;
    int (*next)(struct fmt_reader *r, struct fmt_stream *s, struct fmt_record *rec, struct sl_error *err);
    /* Its framing limits: the bytes a record's framing adds before its data
     * and, at most, after it (TFRecord: a 12-byte header, a 4-byte footer;
     * text: none, and the '\n'). The loop's window holds max_record_bytes
     * plus both, so any record within the limit is lent whole; a TFRecord
     * index entry (fmt_index.h) spans both. 0 for formats without `next`. */
    size_t frame_head, frame_tail;

    /* Can records of this format fill these features? 0 or SL_EINVAL
     * saying which feature cannot be. */
    int (*check_specs)(const struct fmt_feature_spec *specs, size_t nspecs, struct sl_error *err);

    /* What a job may declare (fmt_job.h: fmt_format_check_job, whose
     * messages these write): its input rules (NULL: the input is 'files', and no feature
     * names arrays) and its features rules (NULL: any features, or none). */
    int (*job_input)(const struct fmt_job_input *in, struct sl_error *err);
    int (*job_features)(const struct fmt_job_input *in, struct sl_error *err);

    /* Stream `path` once and locate every record: 0 and *out (the caller
     * frees it), or an error naming the file ("<path>: <what> at N"), *out
     * NULL. Holds a few MiB whatever the file's size. */
    int (*scan)(struct fmt_scan **out, const char *path, const struct fmt_scan_opts *opts, struct sl_error *err);
    /* For formats whose "file" is a group of files (arrays: one per
     * feature, in the features' order), the scan of such a group; the
     * image is then the group's files' decompressed bytes one after the
     * other (fmt_scan_parts). NULL for the others. */
    int (*scan_group)(struct fmt_scan **out, const char *const *paths, size_t n, const struct fmt_scan_opts *opts,
                      struct sl_error *err);

    /* Keeping a scan beyond its record offsets (above); NULL: there is
     * nothing more to keep. */
    const struct fmt_scan_keep *keep;

    /* Frame record `rec` of the file `s` describes out of its image
     * (`size` bytes at `img`): 0 and *out; or a bare error ("<what> at N",
     * the caller adds the path), SL_EINVAL for a record that does not
     * exist. `verify`: check what the scan checked again (TFRecord CRCs),
     * the file may have changed since. */
    int (*frame)(const struct fmt_scan *s, const uint8_t *img, size_t size, uint64_t rec, int verify,
                 struct fmt_frame *out, struct sl_error *err);
    /* frame for a record read by its byte range alone: `len` bytes at
     * `at` are the image's from the record's offset (fmt_scan_offset) on,
     * at least its extent (fmt_scan_extent). The same checks and errors,
     * offsets in them the image's. NULL: the format's records are framed
     * only out of whole images. */
    int (*frame_at)(const struct fmt_scan *s, const uint8_t *at, size_t len, uint64_t rec, int verify,
                    struct fmt_frame *out, struct sl_error *err);

    /* Decode a framed record into the next row of `b` (its features passed
     * check_specs): TensorFlow's texts on bad data, bare (the caller adds
     * "<path>: <element> N at <offset>: "); the batch is unchanged then. */
    int (*decode)(struct fmt_batch *b, const struct fmt_frame *f, struct sl_error *err);
};

/* The table of format `f`; NULL for a value that is no format. */
const struct fmt_format_ops *fmt_format_get(enum fmt_format f);

/* ---- internal: what formats share ----------------------------------- */

extern const struct fmt_format_ops fmt__tfrecord_format;
extern const struct fmt_format_ops fmt__text_format;
extern const struct fmt_format_ops fmt__tar_format;
extern const struct fmt_format_ops fmt__arrays_format;
extern const struct fmt_scan_keep fmt__tar_keep;

/* A record made of named parts (tar members): where each lies. */
struct fmt__part {
    uint32_t name; /* index into the scan's names */
    uint64_t off, len;
};

/* A member of a group of arrays, as the scan found it (fmt_scan.arrays). */
struct fmt__array_part {
    struct fmt_array_info info;
    uint64_t image_off, image_bytes; /* its decompressed bytes in the group's image */
    int compression;                 /* enum fmt_compression: its own */
};

#define FMT__MAX_NAMES 256
#define FMT__MAX_NAME_LEN 64

struct fmt_scan {
    uint64_t count;
    uint64_t *offsets; /* count entries (at least one allocated) */
    uint64_t image_bytes;
    enum fmt_compression compression;
    uint64_t dropped_tail;
    size_t max_record_bytes;
    /* records made of parts: record i is parts[first[i] .. first[i + 1]) */
    uint64_t *first; /* count + 1 entries; NULL for records of bytes */
    struct fmt__part *parts;
    char (*names)[FMT__MAX_NAME_LEN];
    size_t nnames;
    /* a group of arrays (fmt_array.h): its members, in order; NULL otherwise */
    struct fmt__array_part *arrays;
    size_t narrays;
};

/* A new, empty scan (count 0, room for offsets); NULL when out of memory. */
struct fmt_scan *fmt__scan_new(const struct fmt_scan_opts *opts);
/* Append record offset `off` (growing geometrically). 0 or SL_ENOMEM. */
int fmt__scan_push(struct fmt_scan *s, uint64_t off, size_t *cap);
/* (The scan through the shared read loop: fmt__reader_scan, fmt_reader.h.) */

#endif
