/* record_shards: the sharded TFRecord output of convert and gen.
 *
 * Shards are written one after another (records arrive in shard order), each
 * through sl_output to a hidden exclusive temporary in the output folder
 * (a random name, so nothing planted there is followed), so that a glob over
 * the folder never sees a half-written shard. Only commit makes the final
 * names appear: first the index files (built from the temporaries, which
 * also reads every record back and checks its CRCs), then the renames.
 * Whatever fails, and an interrupt, ends in abort, which removes every file
 * of the set (never a device or FIFO that stood at a final name).
 *
 * The TFRecord writer opens its file by name: it gets the temporary's name
 * (or the device's, sl_output_write_path) and is always closed, never
 * aborted, since its abort unlinks that name.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fmt_tfrecord.h"
#include "record.h"
#include "sl_alloc.h"
#include "sl_log.h"
#include "sl_output.h"

static char *path_printf(const char *fmt, ...) SL_PRINTF(1, 2);

static char *path_printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *p = sl_malloc((size_t)n + 1);
    if (p == NULL)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

static const char *compression_suffix(enum fmt_compression c)
{
    return c == FMT_COMP_GZIP ? ".gz" : c == FMT_COMP_ZLIB ? ".zz" : "";
}

/* mkdir -p: dir and its missing parents (0777 less the umask), as --help's
 * "created if missing" promises; the first mkdir that fails is named.
 * Folders made are left on a later error (as mkdir -p leaves them). */
static int make_dirs(const char *dir, struct sl_error *err)
{
    char *p = sl_strdup(dir);
    if (p == NULL)
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", dir);
    int rc = 0;
    for (char *c = p + 1; rc == 0 && *c != '\0'; c++) {
        if (*c != '/' || c[-1] == '/')
            continue;
        *c = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            rc = sl_error_sys(err, errno, "mkdir(%s)", p);
        *c = '/';
    }
    if (rc == 0 && mkdir(p, 0777) != 0 && errno != EEXIST)
        rc = sl_error_sys(err, errno, "mkdir(%s)", p);
    sl_free(p);
    return rc;
}

int record_shards_init(struct record_shards *s, const char *dir, const char *prefix, unsigned nshards,
                       enum fmt_compression compression, int with_index, struct sl_error *err)
{
    memset(s, 0, sizeof *s);
    s->nshards = nshards;
    s->compression = compression == FMT_COMP_AUTO ? FMT_COMP_NONE : compression;
    s->with_index = with_index;
    if (nshards == 0 || nshards > RECORD_MAX_SHARDS)
        return sl_error_set(err, SL_EINVAL, "shard count %u out of range 1..%u", nshards, RECORD_MAX_SHARDS);
    int rc = make_dirs(dir, err);
    if (rc != 0)
        return rc;
    struct stat st;
    if (stat(dir, &st) != 0)
        return sl_error_sys(err, errno, "stat(%s)", dir);
    if (!S_ISDIR(st.st_mode))
        return sl_error_set(err, SL_EINVAL, "%s: not a directory", dir);
    s->dir = sl_strdup(dir);
    s->prefix = sl_strdup(prefix);
    s->final_paths = sl_calloc(nshards, sizeof *s->final_paths);
    s->outs = sl_calloc(nshards, sizeof *s->outs);
    s->counts = sl_calloc(nshards, sizeof *s->counts);
    if (!s->dir || !s->prefix || !s->final_paths || !s->outs || !s->counts)
        goto out_nomem;
    for (unsigned i = 0; i < nshards; i++) {
        s->final_paths[i] =
            path_printf("%s/%s-%05u-of-%05u.tfrecord%s", dir, prefix, i, nshards, compression_suffix(s->compression));
        if (!s->final_paths[i])
            goto out_nomem;
    }
    return 0;

out_nomem:
    record_shards_free(s);
    return sl_error_set(err, SL_ENOMEM, "out of memory");
}

/* Close the open shard's writer and its output's own stream (the file
 * stays under its temporary name until commit). */
static int close_current(struct record_shards *s, struct sl_error *err)
{
    if (s->w == NULL)
        return 0;
    struct fmt_tfrecord_writer *w = s->w;
    s->w = NULL;
    int rc = fmt_tfrecord_writer_close(w, err);
    struct sl_output *o = s->outs[s->next_open - 1];
    return rc != 0 ? rc : sl_output_finish(o, err);
}

static int open_next(struct record_shards *s, struct sl_error *err)
{
    int rc = close_current(s, err);
    if (rc != 0)
        return rc;
    unsigned i = s->next_open;
    if ((rc = sl_output_open(&s->outs[i], s->final_paths[i], 0, err)) != 0)
        return rc;
    s->next_open++; /* abort removes it from here on */
    rc = fmt_tfrecord_writer_open(&s->w, sl_output_write_path(s->outs[i]), s->compression, -1, err);
    if (rc != 0)
        s->w = NULL;
    return rc;
}

/* Remove a file this set renamed into place, unless a device or FIFO stands
 * there (written to, never created by us). */
static void remove_regular(const char *path)
{
    struct stat st;
    if (path != NULL && lstat(path, &st) == 0 && S_ISREG(st.st_mode))
        unlink(path);
}

int record_shards_write(struct record_shards *s, unsigned shard, const void *data, size_t len, struct sl_error *err)
{
    if (shard >= s->nshards || shard + 1 < s->next_open)
        return sl_error_set(err, SL_EINVAL, "record for shard %u out of order", shard);
    while (s->next_open <= shard) {
        int rc = open_next(s, err);
        if (rc != 0)
            return rc;
    }
    int rc = fmt_tfrecord_writer_write(s->w, data, len, err);
    if (rc != 0)
        return rc;
    s->counts[shard]++;
    return 0;
}

int record_shards_commit(struct record_shards *s, struct sl_error *err)
{
    int rc = close_current(s, err);
    while (rc == 0 && s->next_open < s->nshards) {
        rc = open_next(s, err); /* the shards no record went to: empty files */
        if (rc == 0)
            rc = close_current(s, err);
    }
    if (rc == 0 && s->with_index) {
        struct fmt_reader_opts ro;
        memset(&ro, 0, sizeof ro);
        ro.format = FMT_FORMAT_TFRECORD;
        ro.compression = s->compression;
        for (unsigned i = 0; rc == 0 && i < s->nshards; i++) {
            char *idx = path_printf("%s.idx", s->final_paths[i]);
            struct sl_output *io = NULL;
            uint64_t n = 0;
            if (idx == NULL) {
                rc = sl_error_set(err, SL_ENOMEM, "out of memory");
                break;
            }
            if ((rc = sl_output_open(&io, idx, 0, err)) == 0 &&
                (rc = record_index_write(io, sl_output_write_path(s->outs[i]), &ro, &n, err)) == 0 && n != s->counts[i])
                rc = sl_error_set(err, SL_ECORRUPT, "%s: index has %llu records, %llu were written", idx,
                                  (unsigned long long)n, (unsigned long long)s->counts[i]);
            if (rc != 0)
                sl_output_abort(io);
            else if ((rc = sl_output_commit(io, err)) == 0)
                s->indexed = i + 1;
            sl_free(idx);
        }
    }
    for (unsigned i = 0; rc == 0 && i < s->nshards; i++) {
        struct sl_output *o = s->outs[i];
        s->outs[i] = NULL; /* commit frees it, whatever happens */
        if ((rc = sl_output_commit(o, err)) == 0)
            s->committed = i + 1;
    }
    if (rc != 0)
        record_shards_abort(s);
    return rc;
}

void record_shards_abort(struct record_shards *s)
{
    if (s->w != NULL) {
        if (fmt_tfrecord_writer_close(s->w, NULL) != 0) {
            /* not _abort: it unlinks by name */
        }
        s->w = NULL;
    }
    for (unsigned i = 0; i < s->nshards && s->final_paths && s->final_paths[i]; i++) {
        if (i < s->indexed) {
            char *idx = path_printf("%s.idx", s->final_paths[i]);
            remove_regular(idx);
            sl_free(idx);
        }
        if (i < s->committed)
            remove_regular(s->final_paths[i]);
        if (s->outs != NULL) {
            sl_output_abort(s->outs[i]);
            s->outs[i] = NULL;
        }
    }
    s->indexed = s->committed = s->next_open = 0;
}

void record_shards_print(const struct record_shards *s, FILE *f)
{
    for (unsigned i = 0; i < s->nshards; i++)
        fprintf(f, "%s\t%llu\n", s->final_paths[i], (unsigned long long)s->counts[i]);
}

void record_shards_finish(struct record_shards *s, int ok)
{
    if (ok)
        record_shards_print(s, stdout);
    else
        record_shards_abort(s);
    record_shards_free(s);
}

int record_shards_exit(const char *what, int rc, const struct sl_error *err)
{
    if (record_interrupted()) {
        sl_log(SL_LOG_ERROR, "interrupted: partial outputs removed");
        return 128 + record_interrupted();
    }
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "%s: %s", what, err->msg);
        return RECORD_EXIT_DATA;
    }
    return RECORD_EXIT_OK;
}

int record_shard_opt(const char *cmd, int c, int shards_c, const char *arg, struct record_shard_opts *o)
{
    uint64_t v = 0;
    if (c == shards_c) {
        if (record_parse_u64(cmd, "--shards", arg, 1, RECORD_MAX_SHARDS, &v) != 0)
            return RECORD_EXIT_USAGE;
        o->shards = (unsigned)v;
        return 0;
    }
    switch (c) {
    case 'o': o->dir = arg; return 0;
    case RECORD_OPT_PREFIX:
        if (arg[0] == '\0' || strchr(arg, '/') != NULL)
            return record_usage_error(cmd, "invalid --prefix '%s': a non-empty name without '/'", arg);
        o->prefix = arg;
        return 0;
    case 'c':
        if (fmt_compression_parse(arg, &o->compression) != 0 || o->compression == FMT_COMP_AUTO)
            return record_usage_error(cmd, "invalid compression '%s' (none, gzip or zlib)", arg);
        return 0;
    case RECORD_OPT_INDEX: o->index = 1; return 0;
    default: return -1;
    }
}

void record_shards_free(struct record_shards *s)
{
    if (s->w != NULL)
        if (fmt_tfrecord_writer_close(s->w, NULL) != 0) {
            /* its output is removed below */
        }
    for (unsigned i = 0; i < s->nshards; i++) {
        if (s->final_paths)
            sl_free(s->final_paths[i]);
        if (s->outs)
            sl_output_abort(s->outs[i]);
    }
    sl_free(s->final_paths);
    sl_free(s->outs);
    sl_free(s->counts);
    sl_free(s->dir);
    sl_free(s->prefix);
    memset(s, 0, sizeof *s);
}
