/* record convert: IDX arrays (MNIST, Fashion-MNIST) and JSON lines to
 * TFRecord files of tf.train.Example (ImageFolder trees: record_images.c).
 *
 * idx: element i of the images/labels pair becomes the Example
 * {image: bytes (the element's raw bytes), label: int64, id: int64 i} in
 * shard floor(i * N / count), so the shards hold contiguous ranges and their
 * sorted names list the source order. Output goes through record_shards
 * (temporary names, renamed at the end, all removed on error or signal).
 *
 * jsonl: one JSON object per line, read through the text-line reader (so a
 * .jsonl.gz works and '\r' is dropped) and parsed with jansson. Each value
 * maps to a feature list (integers int64, reals float, strings bytes,
 * {"base64": ..} bytes, arrays of those by their first element). A key keeps
 * the kind it had on earlier lines: an integer where floats came before is
 * written as a float, and an empty array takes the key's earlier kind
 * (int64 when the key is new), so every record of the file agrees on types.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fmt_example.h"
#include "fmt_idx.h"
#include "fmt_tfrecord.h"
#include "progress.h"
#include "record.h"
#include "sl_alloc.h"
#include "sl_base64.h"
#include "sl_log.h"
#include "sl_output.h"

static const char convert_help[] =
    "Usage: sluice-record convert idx --images FILE --labels FILE --output-dir DIR [OPTION]...\n"
    "  or:  sluice-record convert jsonl --input FILE --output PATH [OPTION]...\n"
    "  or:  sluice-record convert images --output-dir DIR [OPTION]... TREE\n"
    "Convert to TFRecord files of tf.train.Example.\n"
    "\n"
    "idx: MNIST / Fashion-MNIST IDX files (gzip or plain) to N shards\n"
    "DIR/PREFIX-00000-of-0000N.tfrecord (.tfrecord.gz with gzip, .tfrecord.zz with\n"
    "zlib). Element i becomes {image: bytes, label: int64, id: int64 i} in shard\n"
    "floor(i * N / count), so the shards hold contiguous ranges in source order.\n"
    "      --images=FILE         IDX file of the images (any type; raw element bytes)\n"
    "      --labels=FILE         IDX file of integer labels, one per image\n"
    "  -o, --output-dir=DIR      output folder (created if missing)\n"
    "      --prefix=NAME         shard name prefix (default train)\n"
    "  -n, --shards=N            number of shards (default 1)\n"
    "  -c, --compression=C       none (default), gzip or zlib\n"
    "      --index               also write DIR/NAME.idx for every shard\n"
    "\n"
    "jsonl: one JSON object per line, {\"name\": value, ...}, to one TFRecord file.\n"
    "Integers -> int64_list, reals -> float_list, strings -> bytes_list (UTF-8),\n"
    "{\"base64\": \"..\"} -> bytes, arrays of those -> lists (kind of the first\n"
    "element; integers and reals mixed -> float). A key keeps its kind across\n"
    "lines: integers after floats are written as floats; an empty array takes\n"
    "the kind seen before (int64 if none). Blank lines are skipped.\n"
    "  -i, --input=FILE          JSON lines (gzip or zlib compressed is fine)\n"
    "  -o, --output=PATH         the TFRecord file\n"
    "  -c, --compression=C       auto (default: by PATH's extension), none, gzip, zlib\n"
    "\n"
    "images: an ImageFolder TREE (TREE/CLASS/IMAGE, as torchvision's ImageFolder)\n"
    "to N shards as idx names them. Class folders sorted bytewise are labels\n"
    "0..K-1; their files sorted bytewise, one after another, are ids 0..count-1.\n"
    "Image i becomes {image: the file's bytes, untouched, label: int64, id: int64 i,\n"
    "class: bytes (the folder's name)} in shard floor(i * N / count). Files not\n"
    "named *.jpg, *.jpeg or *.png (any case), names starting with '.' and files in\n"
    "TREE itself are skipped and counted; a file so named must start as a JPEG\n"
    "(FF D8 FF) or PNG file does. Refused, naming the path (exit 1, nothing left\n"
    "written): a file that is not an image, a class folder without images, a\n"
    "folder inside a class folder (one level only), no class folder at all.\n"
    "  -o, --output-dir=DIR      output folder (created if missing)\n"
    "      --prefix=NAME         shard name prefix (default train)\n"
    "  -n, --shards=N            number of shards (default 1)\n"
    "  -c, --compression=C       none (default), gzip or zlib\n"
    "      --index               also write DIR/NAME.idx for every shard\n"
    "      --max-record-bytes=N  refuse an image whose record is over N bytes\n"
    "                            (default 64 MiB, the feeder's default)\n"
    "\n"
    "  -h, --help                show this help and exit\n"
    "\n"
    "Outputs are written under temporary names and renamed when complete; on an\n"
    "error, SIGINT or SIGTERM every partial output is removed (exit 1, 130, 143).\n";

enum {
    OPT_IMAGES = RECORD_OPT_FIRST_PRIVATE,
    OPT_LABELS,
};

/* ---- idx ---- */

struct idx_args {
    const char *images, *labels;
    struct record_shard_opts output;
};

static int convert_idx_run(const struct idx_args *a)
{
    struct sl_error err = {0};
    struct fmt_idx *img = NULL, *lab = NULL;
    struct record_shards out;
    int shards_open = 0, rc;
    struct sl_buf rec;
    sl_buf_init(&rec, 0);
    struct progress bar;

    if ((rc = fmt_idx_open(&img, a->images, &err)) != 0 || (rc = fmt_idx_open(&lab, a->labels, &err)) != 0)
        goto out_close;
    const struct fmt_idx_info *ii = fmt_idx_info(img), *li = fmt_idx_info(lab);
    if (ii->count != li->count) {
        rc = sl_error_set(&err, SL_EINVAL, "%s has %llu images but %s has %llu labels", a->images,
                          (unsigned long long)ii->count, a->labels, (unsigned long long)li->count);
        goto out_close;
    }
    if (li->elem_values != 1 || li->type == 0x0D || li->type == 0x0E) {
        rc = sl_error_set(&err, SL_EINVAL, "%s: labels must be one integer per element (type 0x%02x, %zu values each)",
                          a->labels, li->type, li->elem_values);
        goto out_close;
    }
    if ((rc = record_shards_init(&out, a->output.dir, a->output.prefix, a->output.shards, a->output.compression,
                                 a->output.index, &err)) != 0)
        goto out_close;
    shards_open = 1;
    record_signals_install();
    progress_init(&bar, "convert", ii->count, 0);

    uint64_t count = ii->count;
    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *image, *label;
        if ((rc = fmt_idx_next(img, &image, &err)) != 0 || (rc = fmt_idx_next(lab, &label, &err)) != 0) {
            if (rc == SL_END)
                rc = sl_error_set(&err, SL_ECORRUPT, "IDX data ended after %llu of %llu elements",
                                  (unsigned long long)i, (unsigned long long)count);
            break;
        }
        int64_t id = (int64_t)i, lv = fmt_idx_value_i64(lab, label, 0);
        size_t image_len = ii->elem_bytes;
        struct fmt_example_enc enc;
        sl_buf_reset(&rec);
        rc = fmt_example_enc_begin(&enc, &rec);
        if (rc == 0) {
            rc = fmt_example_enc_bytes(&enc, "image", &image, &image_len, 1);
            rc = rc ? rc : fmt_example_enc_int64(&enc, "label", &lv, 1);
            rc = rc ? rc : fmt_example_enc_int64(&enc, "id", &id, 1);
            if (rc == 0)
                rc = fmt_example_enc_end(&enc);
            else
                fmt_example_enc_abort(&enc);
        }
        if (rc != 0) {
            rc = sl_error_set(&err, rc, "element %llu: cannot encode the Example", (unsigned long long)i);
            break;
        }
        unsigned shard = (unsigned)(i * a->output.shards / count);
        if ((rc = record_shards_write(&out, shard, rec.data, rec.len, &err)) != 0)
            break;
        progress_update(&bar, i + 1, (i + 1) * (ii->elem_bytes + li->elem_bytes));
        if (record_interrupted())
            break;
    }
    progress_clear(&bar);
    if (rc == 0 && record_interrupted() == 0)
        rc = record_shards_commit(&out, &err);

out_close:
    if (shards_open)
        record_shards_finish(&out, rc == 0 && !record_interrupted());
    fmt_idx_close(img);
    fmt_idx_close(lab);
    sl_buf_free(&rec);
    return record_shards_exit("convert idx", rc, &err);
}

static int convert_idx(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"images", required_argument, NULL, OPT_IMAGES},
        {"labels", required_argument, NULL, OPT_LABELS},
        {"output-dir", required_argument, NULL, 'o'},
        {"prefix", required_argument, NULL, RECORD_OPT_PREFIX},
        {"shards", required_argument, NULL, 'n'},
        {"compression", required_argument, NULL, 'c'},
        {"index", no_argument, NULL, RECORD_OPT_INDEX},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = "convert";
    struct idx_args a = {.output = {.prefix = "train", .shards = 1, .compression = FMT_COMP_NONE}};
    int c, rc;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:n:c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': return record_help(convert_help);
        case OPT_IMAGES: a.images = optarg; break;
        case OPT_LABELS: a.labels = optarg; break;
        default:
            if ((rc = record_shard_opt(cmd, c, 'n', optarg, &a.output)) < 0)
                return record_getopt_error(cmd, argv, c);
            if (rc != 0)
                return rc;
        }
    }
    if (optind < argc)
        return record_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (a.images == NULL)
        return record_usage_error(cmd, "idx: missing --images");
    if (a.labels == NULL)
        return record_usage_error(cmd, "idx: missing --labels");
    if (a.output.dir == NULL)
        return record_usage_error(cmd, "idx: missing --output-dir");
    return convert_idx_run(&a);
}

/* ---- jsonl ---- */

struct key_kind {
    char *key;
    enum fmt_kind kind;
};

struct jsonl {
    const char *path; /* input, for messages */
    uint64_t line;
    struct key_kind *kinds; /* kind of every key met so far */
    size_t nkinds, cap;
    /* value scratch, reused for every record */
    int64_t *i64;
    float *f32;
    const uint8_t **bvals;
    size_t *blens;
    size_t vcap;
    struct sl_buf bytes; /* decoded base64 values */
    struct sl_error err;
};

static enum fmt_kind *kind_of(struct jsonl *j, const char *key)
{
    for (size_t i = 0; i < j->nkinds; i++)
        if (strcmp(j->kinds[i].key, key) == 0)
            return &j->kinds[i].kind;
    if (j->nkinds == j->cap) {
        size_t cap = j->cap ? j->cap * 2 : 16;
        struct key_kind *k = sl_realloc(j->kinds, cap * sizeof *k);
        if (k == NULL)
            return NULL;
        j->kinds = k;
        j->cap = cap;
    }
    char *dup = sl_strdup(key);
    if (dup == NULL)
        return NULL;
    j->kinds[j->nkinds] = (struct key_kind){.key = dup, .kind = FMT_KIND_NONE};
    return &j->kinds[j->nkinds++].kind;
}

static int jerr(struct jsonl *j, const char *key, const char *what)
{
    return sl_error_set(&j->err, SL_EINVAL, "%s:%llu: '%s': %s", j->path, (unsigned long long)j->line, key, what);
}

static int is_b64_object(json_t *v)
{
    return json_is_object(v) && json_object_size(v) == 1 && json_is_string(json_object_get(v, "base64"));
}

static enum fmt_kind value_kind(json_t *v)
{
    if (json_is_integer(v))
        return FMT_KIND_INT64;
    if (json_is_real(v))
        return FMT_KIND_FLOAT;
    if (json_is_string(v) || is_b64_object(v))
        return FMT_KIND_BYTES;
    return FMT_KIND_NONE;
}

static const char *json_type_name(json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object other than {\"base64\": \"...\"}";
    case JSON_ARRAY: return "a nested array";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    default: return "this value";
    }
}

static int grow_values(struct jsonl *j, size_t n)
{
    if (n <= j->vcap)
        return 0;
    size_t cap = j->vcap ? j->vcap : 64;
    while (cap < n)
        cap *= 2;
    int64_t *i64 = sl_realloc(j->i64, cap * sizeof *i64);
    if (i64)
        j->i64 = i64;
    float *f32 = sl_realloc(j->f32, cap * sizeof *f32);
    if (f32)
        j->f32 = f32;
    const uint8_t **bv = sl_realloc(j->bvals, cap * sizeof *bv);
    if (bv)
        j->bvals = bv;
    size_t *bl = sl_realloc(j->blens, cap * sizeof *bl);
    if (bl)
        j->blens = bl;
    if (!i64 || !f32 || !bv || !bl)
        return sl_error_set(&j->err, SL_ENOMEM, "out of memory");
    j->vcap = cap;
    return 0;
}

/* Encode one key's value. */
static int encode_value(struct jsonl *j, struct fmt_example_enc *enc, const char *key, json_t *value)
{
    size_t n = json_is_array(value) ? json_array_size(value) : 1;
    enum fmt_kind kind = FMT_KIND_NONE;
    int any_real = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_is_array(value) ? json_array_get(value, i) : value;
        enum fmt_kind k = value_kind(v);
        if (k == FMT_KIND_NONE) {
            char what[96];
            snprintf(what, sizeof what, "unsupported value: %s", json_type_name(v));
            return jerr(j, key, what);
        }
        any_real |= k == FMT_KIND_FLOAT;
        if (i == 0)
            kind = k;
        else if ((kind == FMT_KIND_BYTES) != (k == FMT_KIND_BYTES))
            return jerr(j, key, "array mixes strings and numbers");
    }
    if (kind == FMT_KIND_INT64 && any_real)
        kind = FMT_KIND_FLOAT;

    enum fmt_kind *seen = kind_of(j, key);
    if (seen == NULL)
        return sl_error_set(&j->err, SL_ENOMEM, "out of memory");
    if (kind == FMT_KIND_NONE) /* empty array */
        kind = *seen != FMT_KIND_NONE ? *seen : FMT_KIND_INT64;
    else if (*seen == FMT_KIND_FLOAT && kind == FMT_KIND_INT64)
        kind = FMT_KIND_FLOAT;
    else if (*seen != FMT_KIND_NONE && *seen != kind) {
        char what[128];
        snprintf(what, sizeof what, "%s values, but earlier lines gave %s", fmt_kind_name(kind), fmt_kind_name(*seen));
        return jerr(j, key, what);
    }
    *seen = kind;

    int rc = grow_values(j, n);
    if (rc != 0)
        return rc;
    sl_buf_reset(&j->bytes);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_is_array(value) ? json_array_get(value, i) : value;
        if (kind == FMT_KIND_INT64) {
            j->i64[i] = (int64_t)json_integer_value(v);
        } else if (kind == FMT_KIND_FLOAT) {
            j->f32[i] = (float)json_number_value(v);
        } else if (json_is_string(v)) {
            j->blens[i] = json_string_length(v);
        } else {
            json_t *s = json_object_get(v, "base64");
            size_t at = j->bytes.len;
            if (sl_base64_decode(&j->bytes, json_string_value(s), json_string_length(s)) != 0)
                return jerr(j, key, "invalid base64");
            j->blens[i] = j->bytes.len - at;
        }
    }
    if (kind == FMT_KIND_BYTES) {
        /* pointers into j->bytes are taken only now: decoding may move it */
        size_t at = 0;
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_is_array(value) ? json_array_get(value, i) : value;
            if (json_is_string(v)) {
                j->bvals[i] = (const uint8_t *)json_string_value(v);
            } else {
                j->bvals[i] = j->bytes.data + at;
                at += j->blens[i];
            }
        }
    }
    if (kind == FMT_KIND_INT64)
        rc = fmt_example_enc_int64(enc, key, j->i64, n);
    else if (kind == FMT_KIND_FLOAT)
        rc = fmt_example_enc_float(enc, key, j->f32, n);
    else
        rc = fmt_example_enc_bytes(enc, key, j->bvals, j->blens, n);
    if (rc != 0)
        return sl_error_set(&j->err, rc, "%s:%llu: '%s': cannot encode the feature", j->path,
                            (unsigned long long)j->line, key);
    return 0;
}

static int blank(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t')
            return 0;
    return 1;
}

static int encode_line(struct jsonl *j, const struct fmt_record *line, struct sl_buf *out)
{
    json_error_t jerror;
    json_t *obj = json_loadb((const char *)line->data, line->len, JSON_ALLOW_NUL, &jerror);
    if (obj == NULL)
        return sl_error_set(&j->err, SL_EINVAL, "%s:%llu: invalid JSON at column %d: %s", j->path,
                            (unsigned long long)j->line, jerror.column, jerror.text);
    if (!json_is_object(obj)) {
        json_decref(obj);
        return sl_error_set(&j->err, SL_EINVAL, "%s:%llu: not a JSON object", j->path, (unsigned long long)j->line);
    }
    struct fmt_example_enc enc;
    int rc = fmt_example_enc_begin(&enc, out);
    if (rc != 0) {
        json_decref(obj);
        return sl_error_set(&j->err, rc, "out of memory");
    }
    const char *key;
    json_t *value;
    json_object_foreach(obj, key, value)
    {
        if ((rc = encode_value(j, &enc, key, value)) != 0)
            break;
    }
    if (rc == 0 && (rc = fmt_example_enc_end(&enc)) != 0)
        rc = sl_error_set(&j->err, rc, "%s:%llu: cannot encode the Example", j->path, (unsigned long long)j->line);
    else if (rc != 0)
        fmt_example_enc_abort(&enc);
    json_decref(obj);
    return rc;
}

static int convert_jsonl_run(const char *input, const char *output, enum fmt_compression compression)
{
    struct jsonl j;
    memset(&j, 0, sizeof j);
    j.path = input;
    sl_buf_init(&j.bytes, 0);
    struct sl_buf rec;
    sl_buf_init(&rec, 0);
    struct fmt_reader *r = NULL;
    struct fmt_tfrecord_writer *w = NULL;
    struct sl_output *out = NULL; /* a temporary renamed on success; a device written in place */
    int rc;
    uint64_t written = 0;
    struct progress bar;

    struct fmt_reader_opts ro = {.format = FMT_FORMAT_TEXT};
    if ((rc = fmt_reader_open(&r, input, &ro, &j.err)) != 0)
        goto out_free;
    if ((rc = sl_output_open(&out, output, 0, &j.err)) != 0)
        goto out_free;
    /* the writer opens by name: the temporary (or the device) */
    if ((rc = fmt_tfrecord_writer_open(&w, sl_output_write_path(out), record_output_compression(output, compression),
                                       -1, &j.err)) != 0) {
        w = NULL;
        goto out_free;
    }
    record_signals_install();
    progress_init(&bar, "convert", 0, record_file_size(input));
    struct fmt_record line;
    while ((rc = fmt_reader_next(r, &line, &j.err)) == 0) {
        j.line = line.index + 1;
        if (blank(line.data, line.len))
            continue;
        sl_buf_reset(&rec);
        if ((rc = encode_line(&j, &line, &rec)) != 0)
            break;
        if ((rc = fmt_tfrecord_writer_write(w, rec.data, rec.len, &j.err)) != 0)
            break;
        written++;
        progress_update(&bar, written, fmt_stream_in_offset(fmt_reader_stream(r)));
        if (record_interrupted())
            break;
    }
    progress_clear(&bar);
    if (rc == SL_END)
        rc = 0;
    if (rc == 0 && !record_interrupted()) {
        struct fmt_tfrecord_writer *done = w;
        struct sl_output *o = out;
        w = NULL;
        out = NULL;
        if ((rc = fmt_tfrecord_writer_close(done, &j.err)) != 0)
            sl_output_abort(o);
        else
            rc = sl_output_commit(o, &j.err);
    }

out_free:
    if (w != NULL) /* not _abort: it would unlink the name, a device's too */
        if (fmt_tfrecord_writer_close(w, NULL) != 0) {
            /* removed below */
        }
    sl_output_abort(out);
    fmt_reader_close(r);
    for (size_t i = 0; i < j.nkinds; i++)
        sl_free(j.kinds[i].key);
    sl_free(j.kinds);
    sl_free(j.i64);
    sl_free(j.f32);
    sl_free(j.bvals);
    sl_free(j.blens);
    sl_buf_free(&j.bytes);
    sl_buf_free(&rec);
    if (record_interrupted()) {
        sl_log(SL_LOG_ERROR, "interrupted: partial output removed");
        return 128 + record_interrupted();
    }
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "convert jsonl: %s", j.err.msg);
        return RECORD_EXIT_DATA;
    }
    printf("%s\t%llu\n", output, (unsigned long long)written);
    return RECORD_EXIT_OK;
}

static int convert_jsonl(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"input", required_argument, NULL, 'i'},
        {"output", required_argument, NULL, 'o'},
        {"compression", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = "convert";
    const char *input = NULL, *output = NULL;
    enum fmt_compression compression = FMT_COMP_AUTO;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":i:o:c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': return record_help(convert_help);
        case 'i': input = optarg; break;
        case 'o': output = optarg; break;
        case 'c':
            if (fmt_compression_parse(optarg, &compression) != 0)
                return record_usage_error(cmd, "invalid compression '%s' (auto, none, gzip or zlib)", optarg);
            break;
        default: return record_getopt_error(cmd, argv, c);
        }
    }
    if (optind < argc)
        return record_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (input == NULL)
        return record_usage_error(cmd, "jsonl: missing --input");
    if (output == NULL)
        return record_usage_error(cmd, "jsonl: missing --output");
    return convert_jsonl_run(input, output, compression);
}

int record_convert_main(int argc, char **argv)
{
    const char *cmd = "convert";
    if (argc < 2)
        return record_usage_error(cmd, "missing mode (idx, jsonl or images)");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
        return record_help(convert_help);
    if (strcmp(argv[1], "idx") == 0)
        return convert_idx(argc - 1, argv + 1);
    if (strcmp(argv[1], "jsonl") == 0)
        return convert_jsonl(argc - 1, argv + 1);
    if (strcmp(argv[1], "images") == 0)
        return record_convert_images(argc - 1, argv + 1, convert_help);
    return record_usage_error(cmd, "unknown mode '%s' (idx, jsonl or images)", argv[1]);
}
