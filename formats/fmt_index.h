/* fmt_index: TFRecord index files in DALI's tfrecord2idx format: one line
 * per record, "<offset> <size>\n", offset of the length field, size =
 * 12 + length + 4, offsets in the decompressed stream. */
#ifndef FMT_INDEX_H
#define FMT_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "fmt_reader.h"
#include "sl_error.h"

struct fmt_index_entry {
    uint64_t offset;
    uint64_t size;
};

/* Scan the TFRecord file `path` (verifying every CRC) and write its index to
 * `idx_path` (written to a temporary name and renamed, so a failed run never
 * leaves a partial index). *count gets the number of records. */
int fmt_index_build(const char *path, const char *idx_path, const struct fmt_reader_opts *opts, uint64_t *count,
                    struct sl_error *err) SL_MUST_CHECK;

/* A remote index (http(s)://, s3://) is read whole into memory: one larger
 * than this is refused, naming its size. */
#define FMT_INDEX_MAX_REMOTE_BYTES ((uint64_t)1 << 30)

/* Load an index file into a new array (caller frees with sl_free). Every line
 * is checked: "<idx_path>:<line>: <what>" on a malformed line, a size < 16,
 * or offsets that overlap or go backwards. `idx_path` may be a local path,
 * a file:// name or a remote one (FMT_INDEX_MAX_REMOTE_BYTES). */
int fmt_index_load(const char *idx_path, struct fmt_index_entry **entries, size_t *n,
                   struct sl_error *err) SL_MUST_CHECK;

/* fmt_index_find: fmt_format.h (the feeder's way to it). */

#endif
