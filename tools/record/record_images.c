/* record convert images: an ImageFolder tree (TREE/CLASS/FILE, as
 * torchvision's ImageFolder reads it) to TFRecord shards of
 * tf.train.Example {image: the file's bytes, label: int64, id: int64,
 * class: bytes}.
 *
 * The tree is listed whole before anything is written: the class folders
 * (DIR's sub-folders, links followed, names starting with '.' left out)
 * sorted bytewise give the labels 0..K-1, and each class's files sorted
 * bytewise follow one another, so file i of that order is record id i and
 * lands in shard floor(i * N / count) (contiguous ranges, as convert idx).
 * One level only: a folder inside a class folder is refused, so no image
 * is left out unseen (and no link loop can be followed).
 *
 * A file is an image by its name (.jpg, .jpeg, .png, any case; other names
 * are skipped and counted) and must be one by its first bytes (JPEG's SOI
 * FF D8 FF or PNG's 8-byte signature, whatever its extension says): the
 * payload goes out untouched, nothing is decoded here. Every refusal (a
 * class without images, a file that is not an image, unreadable, not a
 * regular file, larger than --max-record-bytes) names the path; it ends the
 * run and the shards written so far are removed (record_shards_abort).
 *
 * Memory: the listing (one path per file) and one file's bytes at a time,
 * in a buffer reused for every file and bounded by --max-record-bytes.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "fmt_example.h"
#include "progress.h"
#include "record.h"
#include "sl_alloc.h"
#include "sl_log.h"

/* The largest record written unless --max-record-bytes says otherwise: the
 * feeder's default max_record_bytes (docs/job.md), so that every record
 * written is one a default job reads. */
#define IMAGES_DEFAULT_MAX_BYTES ((uint64_t)64 << 20)
#define IMAGES_MAX_MAX_BYTES ((uint64_t)4 << 30) /* the job's bound */

struct image_file {
    char *path; /* owned: DIR/CLASS/NAME */
    uint64_t size;
    unsigned label;
};

struct image_tree {
    char **classes; /* owned names, sorted */
    size_t nclasses, classes_cap;
    struct image_file *files; /* in record order */
    size_t nfiles, files_cap;
    uint64_t bytes;      /* sum of the files' sizes at listing */
    uint64_t skipped;    /* files whose names are not images, or start with '.' */
    uint64_t loose;      /* plain files in DIR itself (no class) */
    char *first_skipped; /* owned: one skipped path, for the message */
    uint64_t jpeg, png;  /* by magic bytes, counted as written */
};

struct images_args {
    const char *root;
    struct record_shard_opts output;
    uint64_t max_bytes;
};

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_image_ext(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot != NULL && dot != name &&
           (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0 || strcasecmp(dot, ".png") == 0);
}

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    int slash = n > 0 && a[n - 1] != '/';
    char *p = sl_malloc(n + (size_t)slash + m + 1);
    if (p == NULL)
        return NULL;
    memcpy(p, a, n);
    if (slash)
        p[n] = '/';
    memcpy(p + n + (size_t)slash, b, m + 1);
    return p;
}

/* The names in `dir` other than "." and "..", sorted bytewise (caller frees
 * each and the array). 0, or an error naming the folder. */
static int list_dir(const char *dir, char ***out, size_t *n, struct sl_error *err)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return sl_error_sys(err, errno, "opendir(%s)", dir);
    char **names = NULL;
    size_t cap = 0, len = 0;
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (e == NULL) {
            if (errno != 0)
                rc = sl_error_sys(err, errno, "readdir(%s)", dir);
            break;
        }
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (len == cap) {
            size_t c = cap ? cap * 2 : 64;
            char **g = sl_realloc(names, c * sizeof *g);
            if (g == NULL) {
                rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory", dir);
                break;
            }
            names = g;
            cap = c;
        }
        if ((names[len] = sl_strdup(e->d_name)) == NULL) {
            rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory", dir);
            break;
        }
        len++;
    }
    closedir(d);
    if (rc != 0) {
        for (size_t i = 0; i < len; i++)
            sl_free(names[i]);
        sl_free(names);
        return rc;
    }
    if (len > 1)
        qsort(names, len, sizeof *names, name_cmp);
    *out = names;
    *n = len;
    return 0;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sl_free(names[i]);
    sl_free(names);
}

static int add_file(struct image_tree *t, char *path, uint64_t size, unsigned label, struct sl_error *err)
{
    if (t->nfiles == t->files_cap) {
        size_t c = t->files_cap ? t->files_cap * 2 : 256;
        struct image_file *g = sl_realloc(t->files, c * sizeof *g);
        if (g == NULL) {
            sl_free(path);
            return sl_error_set(err, SL_ENOMEM, "out of memory listing the images");
        }
        t->files = g;
        t->files_cap = c;
    }
    t->files[t->nfiles++] = (struct image_file){.path = path, .size = size, .label = label};
    t->bytes += size;
    return 0;
}

static void note_skipped(struct image_tree *t, const char *path)
{
    t->skipped++;
    if (t->first_skipped == NULL)
        t->first_skipped = sl_strdup(path); /* only for the message: NULL is fine */
}

/* List class folder `label` (its files sorted) into t. */
static int list_class(struct image_tree *t, const struct images_args *a, unsigned label, struct sl_error *err)
{
    char *cdir = join(a->root, t->classes[label]);
    if (cdir == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory listing the images");
    char **names = NULL;
    size_t n = 0, before = t->nfiles;
    int rc = list_dir(cdir, &names, &n, err);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char *path = join(cdir, names[i]);
        struct stat st;
        int hidden = names[i][0] == '.', image = !hidden && has_image_ext(names[i]);
        if (path == NULL) {
            rc = sl_error_set(err, SL_ENOMEM, "out of memory listing the images");
        } else if (stat(path, &st) != 0) {
            if (image)
                rc = sl_error_sys(err, errno, "stat(%s)", path);
            else
                note_skipped(t, path); /* a dangling link named like no image */
        } else if (S_ISDIR(st.st_mode) && !hidden) {
            rc = sl_error_set(err, SL_EINVAL,
                              "%s: a folder inside a class folder (convert images reads TREE/CLASS/FILE, one "
                              "level: move its images up or make it a class of its own)",
                              path);
        } else if (!image) {
            note_skipped(t, path);
        } else if (!S_ISREG(st.st_mode)) {
            rc = sl_error_set(err, SL_EINVAL, "%s: not a regular file", path);
        } else if ((uint64_t)st.st_size > a->max_bytes) {
            rc = sl_error_set(err, SL_EINVAL,
                              "%s: %llu bytes: its record would be over the limit of %llu bytes "
                              "(--max-record-bytes)",
                              path, (unsigned long long)st.st_size, (unsigned long long)a->max_bytes);
        } else {
            rc = add_file(t, path, (uint64_t)st.st_size, label, err);
            path = NULL; /* owned by the tree now (or freed by add_file) */
        }
        sl_free(path);
    }
    if (rc == 0 && t->nfiles == before)
        rc = sl_error_set(err, SL_EINVAL, "class folder %s holds no .jpg, .jpeg or .png file", cdir);
    free_names(names, n);
    sl_free(cdir);
    return rc;
}

/* List the whole tree: the classes, then every class's files. */
static int list_tree(struct image_tree *t, const struct images_args *a, struct sl_error *err)
{
    char **names = NULL;
    size_t n = 0;
    int rc = list_dir(a->root, &names, &n, err);
    if (rc != 0)
        return rc;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char *path = join(a->root, names[i]);
        struct stat st;
        if (path == NULL) {
            rc = sl_error_set(err, SL_ENOMEM, "out of memory listing the images");
        } else if (stat(path, &st) != 0) {
            rc = sl_error_sys(err, errno, "stat(%s)", path);
        } else if (!S_ISDIR(st.st_mode)) {
            t->loose += names[i][0] != '.'; /* hidden ones (a data set's notes) quietly */
        } else if (names[i][0] != '.') {
            if (t->nclasses == t->classes_cap) {
                size_t c = t->classes_cap ? t->classes_cap * 2 : 16;
                char **g = sl_realloc(t->classes, c * sizeof *g);
                if (g == NULL)
                    rc = sl_error_set(err, SL_ENOMEM, "out of memory listing the images");
                else {
                    t->classes = g;
                    t->classes_cap = c;
                }
            }
            if (rc == 0) {
                t->classes[t->nclasses++] = names[i]; /* sorted already */
                names[i] = NULL;
            }
        }
        sl_free(path);
    }
    free_names(names, n);
    if (rc == 0 && t->nclasses == 0)
        rc = sl_error_set(err, SL_EINVAL, "%s holds no class folder (expected TREE/CLASS/IMAGE.jpg)", a->root);
    if (rc == 0 && t->nclasses > (size_t)INT32_MAX)
        rc = sl_error_set(err, SL_EINVAL, "%s: %zu class folders: too many", a->root, t->nclasses);
    for (size_t c = 0; rc == 0 && c < t->nclasses; c++)
        rc = list_class(t, a, (unsigned)c, err);
    return rc;
}

static void tree_free(struct image_tree *t)
{
    free_names(t->classes, t->nclasses);
    for (size_t i = 0; i < t->nfiles; i++)
        sl_free(t->files[i].path);
    sl_free(t->files);
    sl_free(t->first_skipped);
}

/* Read the whole file into buf (bounded by max). */
static int read_file(const char *path, uint64_t max, struct sl_buf *buf, struct sl_error *err)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return sl_error_sys(err, errno, "open(%s)", path);
    sl_buf_reset(buf);
    int rc = 0;
    for (;;) {
        if (sl_buf_reserve(buf, 1 << 16) != 0) {
            rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory", path);
            break;
        }
        size_t room = buf->cap - buf->len, got = fread(buf->data + buf->len, 1, room, f);
        buf->len += got;
        if (buf->len > max) {
            rc = sl_error_set(err, SL_EINVAL, "%s: grew over the limit of %llu bytes (--max-record-bytes) while read",
                              path, (unsigned long long)max);
            break;
        }
        if (got < room) {
            if (ferror(f))
                rc = sl_error_sys(err, errno ? errno : EIO, "read(%s)", path);
            break;
        }
    }
    fclose(f);
    return rc;
}

enum record_image record_image_kind(const uint8_t *p, size_t n)
{
    static const uint8_t png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff)
        return RECORD_IMAGE_JPEG;
    if (n >= sizeof png && memcmp(p, png, sizeof png) == 0)
        return RECORD_IMAGE_PNG;
    return RECORD_IMAGE_NONE;
}

static int encode_image(struct sl_buf *rec, const struct sl_buf *img, int64_t label, int64_t id, const char *cls)
{
    struct fmt_example_enc enc;
    sl_buf_reset(rec);
    int rc = fmt_example_enc_begin(&enc, rec);
    if (rc != 0)
        return rc;
    const uint8_t *iv = img->data, *cv = (const uint8_t *)cls;
    size_t il = img->len, cl = strlen(cls);
    rc = fmt_example_enc_bytes(&enc, "image", &iv, &il, 1);
    rc = rc ? rc : fmt_example_enc_int64(&enc, "label", &label, 1);
    rc = rc ? rc : fmt_example_enc_int64(&enc, "id", &id, 1);
    rc = rc ? rc : fmt_example_enc_bytes(&enc, "class", &cv, &cl, 1);
    if (rc == 0)
        return fmt_example_enc_end(&enc);
    fmt_example_enc_abort(&enc);
    return rc;
}

/* Write every listed file as one record. */
static int write_images(struct image_tree *t, const struct images_args *a, struct record_shards *out,
                        struct sl_error *err)
{
    struct sl_buf img, rec;
    sl_buf_init(&img, 0);
    sl_buf_init(&rec, 0);
    struct progress bar;
    progress_init(&bar, "convert", t->nfiles, t->bytes);
    uint64_t done_bytes = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < t->nfiles && !record_interrupted(); i++) {
        const struct image_file *f = &t->files[i];
        if ((rc = read_file(f->path, a->max_bytes, &img, err)) != 0)
            break;
        enum record_image k = record_image_kind(img.data, img.len);
        if (k == RECORD_IMAGE_NONE) {
            rc = sl_error_set(err, SL_ECORRUPT, "%s: not a JPEG or PNG image (%s)", f->path,
                              img.len == 0 ? "an empty file"
                                           : "its first bytes are neither FF D8 FF nor PNG's signature");
            break;
        }
        t->jpeg += k == RECORD_IMAGE_JPEG;
        t->png += k == RECORD_IMAGE_PNG;
        if ((rc = encode_image(&rec, &img, f->label, (int64_t)i, t->classes[f->label])) != 0) {
            rc = sl_error_set(err, rc, "%s: cannot encode the Example", f->path);
            break;
        }
        if (rec.len > a->max_bytes) {
            rc = sl_error_set(err, SL_EINVAL,
                              "%s: its record of %zu bytes is over the limit of %llu bytes "
                              "(--max-record-bytes)",
                              f->path, rec.len, (unsigned long long)a->max_bytes);
            break;
        }
        unsigned shard = (unsigned)((uint64_t)i * a->output.shards / t->nfiles);
        if ((rc = record_shards_write(out, shard, rec.data, rec.len, err)) != 0)
            break;
        done_bytes += img.len;
        progress_update(&bar, i + 1, done_bytes);
    }
    progress_clear(&bar);
    sl_buf_free(&img);
    sl_buf_free(&rec);
    return rc;
}

static int convert_images_run(const struct images_args *a)
{
    struct sl_error err = {0};
    struct image_tree t;
    memset(&t, 0, sizeof t);
    struct record_shards out;
    int shards_open = 0;
    record_signals_install();
    int rc = list_tree(&t, a, &err);
    if (rc == 0 && !record_interrupted()) {
        rc = record_shards_init(&out, a->output.dir, a->output.prefix, a->output.shards, a->output.compression,
                                a->output.index, &err);
        shards_open = rc == 0;
    }
    if (rc == 0 && !record_interrupted())
        rc = write_images(&t, a, &out, &err);
    if (rc == 0 && !record_interrupted())
        rc = record_shards_commit(&out, &err);
    if (shards_open)
        record_shards_finish(&out, rc == 0 && !record_interrupted());
    if (rc == 0 && !record_interrupted()) {
        sl_log(SL_LOG_INFO, "convert images: %zu images (%llu JPEG, %llu PNG) in %zu classes, labels 0..%zu", t.nfiles,
               (unsigned long long)t.jpeg, (unsigned long long)t.png, t.nclasses, t.nclasses - 1);
        if (t.skipped)
            sl_log(SL_LOG_WARN,
                   "convert images: skipped %llu file(s) not named *.jpg, *.jpeg or *.png, or named .* (one: %s)",
                   (unsigned long long)t.skipped, t.first_skipped ? t.first_skipped : "?");
        if (t.loose)
            sl_log(SL_LOG_WARN, "convert images: skipped %llu file(s) in %s itself, outside any class folder",
                   (unsigned long long)t.loose, a->root);
    }
    tree_free(&t);
    return record_shards_exit("convert images", rc, &err);
}

int record_convert_images(int argc, char **argv, const char *help)
{
    static const struct option longopts[] = {
        {"output-dir", required_argument, NULL, 'o'},
        {"prefix", required_argument, NULL, RECORD_OPT_PREFIX},
        {"shards", required_argument, NULL, 'n'},
        {"compression", required_argument, NULL, 'c'},
        {"index", no_argument, NULL, RECORD_OPT_INDEX},
        {"max-record-bytes", required_argument, NULL, RECORD_OPT_MAX_RECORD_BYTES},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = "convert";
    struct images_args a = {.output = {.prefix = "train", .shards = 1, .compression = FMT_COMP_NONE},
                            .max_bytes = IMAGES_DEFAULT_MAX_BYTES};
    uint64_t v = 0;
    int c, rc;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:n:c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': return record_help(help);
        case RECORD_OPT_MAX_RECORD_BYTES:
            if (record_parse_u64(cmd, "--max-record-bytes", optarg, 1, IMAGES_MAX_MAX_BYTES, &v) != 0)
                return RECORD_EXIT_USAGE;
            a.max_bytes = v;
            break;
        default:
            if ((rc = record_shard_opt(cmd, c, 'n', optarg, &a.output)) < 0)
                return record_getopt_error(cmd, argv, c);
            if (rc != 0)
                return rc;
        }
    }
    if (optind >= argc)
        return record_usage_error(cmd, "images: missing TREE (the ImageFolder folder: TREE/CLASS/IMAGE)");
    if (optind + 1 < argc)
        return record_usage_error(cmd, "unexpected argument '%s'", argv[optind + 1]);
    if (argv[optind][0] == '\0')
        return record_usage_error(cmd, "images: empty TREE name");
    a.root = argv[optind];
    if (a.output.dir == NULL)
        return record_usage_error(cmd, "images: missing --output-dir");
    return convert_images_run(&a);
}
