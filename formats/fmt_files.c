/* fmt_files: a cursor over a file list. Opening is lazy (one open file at
 * a time); a failed open counts as a data error of that file under the
 * policy, as a missing or unreadable shard is under ignore_errors(). */
#include "fmt_files.h"

#include <string.h>

#include "sl_alloc.h"

struct fmt_files {
    const char *const *paths;
    size_t npaths;
    size_t cur;
    struct fmt_reader *r;
    struct fmt_files_opts o;
    uint64_t skipped;
};

int fmt_on_error_parse(const char *s, enum fmt_on_error *out)
{
    if (strcmp(s, "fail") == 0)
        *out = FMT_ON_ERROR_FAIL;
    else if (strcmp(s, "skip-file") == 0)
        *out = FMT_ON_ERROR_SKIP_FILE;
    else
        return SL_EINVAL;
    return 0;
}

const char *fmt_on_error_name(enum fmt_on_error p)
{
    return p == FMT_ON_ERROR_SKIP_FILE ? "skip-file" : "fail";
}

int fmt_files_open(struct fmt_files **out, const char *const *paths, size_t npaths, const struct fmt_files_opts *opts,
                   struct sl_error *err)
{
    *out = NULL;
    struct fmt_files *f = sl_calloc(1, sizeof *f);
    if (f == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    f->paths = paths;
    f->npaths = npaths;
    if (opts)
        f->o = *opts;
    *out = f;
    return 0;
}

static int skip_or_fail(struct fmt_files *f, int rc, struct sl_error *err)
{
    if (f->o.on_error == FMT_ON_ERROR_FAIL)
        return rc;
    f->skipped++;
    if (f->o.on_skip)
        f->o.on_skip(f->o.ctx, f->cur, err);
    sl_error_clear(err);
    return 0;
}

int fmt_files_next(struct fmt_files *f, struct fmt_record *rec, size_t *file, struct sl_error *err)
{
    while (f->cur < f->npaths) {
        if (f->r == NULL) {
            int rc = fmt_reader_open(&f->r, f->paths[f->cur], &f->o.reader, err);
            if (rc != 0) {
                if ((rc = skip_or_fail(f, rc, err)) != 0)
                    return rc;
                f->cur++;
                continue;
            }
        }
        int rc = fmt_reader_next(f->r, rec, err);
        if (rc == 0) {
            *file = f->cur;
            return 0;
        }
        if (rc == SL_END && fmt_reader_dropped_tail(f->r) > 0 && f->o.on_tail)
            f->o.on_tail(f->o.ctx, f->cur, f->paths[f->cur], fmt_reader_dropped_tail(f->r));
        fmt_reader_close(f->r);
        f->r = NULL;
        if (rc < 0 && (rc = skip_or_fail(f, rc, err)) != 0) {
            f->cur++; /* as TensorFlow: a retry moves on to the next file */
            return rc;
        }
        f->cur++;
    }
    return SL_END;
}

uint64_t fmt_files_skipped(const struct fmt_files *f)
{
    return f->skipped;
}

void fmt_files_close(struct fmt_files *f)
{
    if (f == NULL)
        return;
    fmt_reader_close(f->r);
    sl_free(f);
}
