/* fmt_tfrecord: TFRecord framing shared by the reader (fmt_reader with
 * FMT_FORMAT_TFRECORD) and the writer below.
 *
 * Record: u64le length | u32le masked_crc32c(length bytes) | data |
 *         u32le masked_crc32c(data).
 */
#ifndef FMT_TFRECORD_H
#define FMT_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

#include "fmt_stream.h"
#include "sl_error.h"

#define FMT_TFRECORD_HEADER 12
#define FMT_TFRECORD_FOOTER 4

/* Fill the 12 header bytes for a record of `len` data bytes. */
void fmt_tfrecord_header(uint8_t out[FMT_TFRECORD_HEADER], uint64_t len);
/* The footer: masked crc32c of the data. */
uint32_t fmt_tfrecord_footer(const void *data, size_t len);

/* Does `head` (n >= 12) start with a valid TFRecord header? The plain-file
 * probe for FMT_COMP_AUTO. */
int fmt_tfrecord_looks_plain(const uint8_t *head, size_t n);

/* Check the record that starts at p, `avail` bytes being readable from p,
 * at decompressed offset `start`: TensorFlow's messages ("corrupted record
 * at N", "truncated record at N"), and a length over max_record_bytes, as
 * the reader reports them (without the path). CRCs are skipped with
 * skip_crc. On success *data / *len lend the record's data. For readers
 * that find records by offset (the feeder, index files). */
int fmt_tfrecord_frame(const uint8_t *p, size_t avail, uint64_t start, size_t max_record_bytes, int skip_crc,
                       const uint8_t **data, size_t *len, struct sl_error *err) SL_MUST_CHECK;

struct fmt_tfrecord_writer;

/* Create (truncate) `path`. Compression NONE, GZIP or ZLIB (whole file one
 * stream, TensorFlow's layout; written with zlib); AUTO picks by extension
 * (".gz" gzip, ".zz"/".zlib" zlib, else none). level: zlib level, -1 default. */
int fmt_tfrecord_writer_open(struct fmt_tfrecord_writer **out, const char *path, enum fmt_compression compression,
                             int level, struct sl_error *err) SL_MUST_CHECK;
int fmt_tfrecord_writer_write(struct fmt_tfrecord_writer *w, const void *data, size_t len,
                              struct sl_error *err) SL_MUST_CHECK;
/* Decompressed offset where the next record will start (for index files). */
uint64_t fmt_tfrecord_writer_offset(const struct fmt_tfrecord_writer *w);
uint64_t fmt_tfrecord_writer_count(const struct fmt_tfrecord_writer *w);
/* Flush, finish the compressed stream, fsync-free close; frees w even on
 * error. An error here means the file is incomplete. */
int fmt_tfrecord_writer_close(struct fmt_tfrecord_writer *w, struct sl_error *err) SL_MUST_CHECK;
/* Close and delete the partial file (after an error elsewhere). */
void fmt_tfrecord_writer_abort(struct fmt_tfrecord_writer *w);

#endif
