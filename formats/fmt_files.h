/* fmt_files: records from a list of files, one after another, with the
 * job's policy on data errors (docs/semantics.md 1.1):
 *
 *   FAIL       the first error ends the stream with that error (default);
 *   SKIP_FILE  as tf.data's ignore_errors(): the rest of the damaged file
 *              is skipped, the error is counted and reported through the
 *              on_skip callback, and reading goes on with the next file.
 *
 * Never silent: every skipped file reaches on_skip (or, without one, is
 * still counted in fmt_files_skipped). A TFRecord file that ends inside a
 * header is not an error (TensorFlow drops such a tail); it is reported to
 * on_tail so callers can warn.
 *
 * Thread-safe: no; one owner.
 */
#ifndef FMT_FILES_H
#define FMT_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "fmt_reader.h"
#include "sl_error.h"

enum fmt_on_error { FMT_ON_ERROR_FAIL = 0, FMT_ON_ERROR_SKIP_FILE };

/* "fail", "skip-file". 0 or SL_EINVAL. */
int fmt_on_error_parse(const char *s, enum fmt_on_error *out) SL_MUST_CHECK;
const char *fmt_on_error_name(enum fmt_on_error p);
/* The names fmt_on_error_parse takes, for messages. */
#define FMT_ON_ERROR_NAMES "fail or skip-file"

struct fmt_files_opts {
    struct fmt_reader_opts reader;
    enum fmt_on_error on_error;
    /* Called for each skipped file with the error that ended it. */
    void (*on_skip)(void *ctx, size_t file, const struct sl_error *err);
    /* Called when a TFRecord file ended inside a header (bytes dropped). */
    void (*on_tail)(void *ctx, size_t file, const char *path, uint64_t bytes);
    void *ctx;
};

struct fmt_files;

/* paths are borrowed for the object's life. */
int fmt_files_open(struct fmt_files **out, const char *const *paths, size_t npaths, const struct fmt_files_opts *opts,
                   struct sl_error *err) SL_MUST_CHECK;
/* 0 and a record (borrowed until the next call) from file *file; SL_END
 * after the last file; negative on a FAIL-policy error (message with path
 * and offset) or a system error opening a file under FAIL. */
int fmt_files_next(struct fmt_files *f, struct fmt_record *rec, size_t *file, struct sl_error *err) SL_MUST_CHECK;
uint64_t fmt_files_skipped(const struct fmt_files *f);
void fmt_files_close(struct fmt_files *f);

#endif
