/* record cat: every record as one JSON line.
 *
 * Lines are built in one sl_buf that is written with fwrite once it holds
 * about a megabyte, so a record costs no allocation and no stdio call: the
 * buffer grows to the largest line once and is reused. The file name is
 * escaped once per file. Numbers are formatted by hand (no printf per field)
 * because cat of a large file is mostly this loop.
 */
#include <getopt.h>
#include <string.h>

#include "fmt_example.h"
#include "fmt_reader.h"
#include "fmt_tar.h"
#include "record.h"
#include "sl_base64.h"
#include "sl_json.h"
#include "sl_log.h"

static const char cat_help[] =
    "Usage: sluice-record cat [OPTION]... FILE...\n"
    "Print every record of each FILE as one JSON object per line:\n"
    "  {\"file\":..,\"index\":..,\"offset\":..,\"length\":..,\"data\":\"<base64>\"}\n"
    "Tar shards print one object per sample:\n"
    "  {\"file\":..,\"key\":..,\"index\":..,\"fields\":{\"<ext>\":\"<base64>\",..}}\n"
    "\n"
    "  -f, --format=FMT           tfrecord, text or tar (default: tar for *.tar,\n"
    "                             *.tar.gz, *.tgz; text for *.txt, *.txt.gz;\n"
    "                             else tfrecord)\n"
    "  -c, --compression=C        auto (default), none, gzip or zlib\n"
    "  -d, --decode=example       print each TFRecord record's tf.train.Example\n"
    "                             as \"example\" (protobuf JSON) instead of \"data\"\n"
    "      --max-record-bytes=N   refuse records larger than N bytes (default 64 MiB)\n" RECORD_ON_ERROR_HELP
    "  -h, --help                 show this help and exit\n"
    "\n"
    "Offsets are in the decompressed stream. The records of a bad file before the\n"
    "damage are printed. Exit status: 0 ok, 1 a file could not be read or held\n"
    "bad data, 2 usage.\n";

static int put_u64(struct sl_buf *b, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[sizeof tmp - 1 - n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return sl_buf_append(b, tmp + sizeof tmp - n, n);
}

static int put_json_str(struct sl_buf *b, const char *s)
{
    return sl_json_string(b, s, strlen(s));
}

static void log_error(struct record_out *o, const struct sl_error *err)
{
    /* what was printed so far goes out first, so the error follows it */
    (void)record_out_flush(o);
    sl_log(SL_LOG_ERROR, "%s", err->msg);
}

static int cat_tar(struct record_out *o, const char *path, const struct record_read_opts *ro,
                   const struct sl_buf *file_json)
{
    struct sl_error err = {0};
    struct fmt_tar *t = NULL;
    int rc = record_tar_open(&t, path, ro, &err);
    if (rc != 0) {
        log_error(o, &err);
        return RECORD_EXIT_DATA;
    }
    struct fmt_tar_sample smp;
    while ((rc = fmt_tar_next(t, &smp, &err)) == 0) {
        struct sl_buf *b = &o->buf;
        rc = sl_buf_puts(b, "{\"file\":");
        rc = rc ? rc : sl_buf_append(b, file_json->data, file_json->len);
        rc = rc ? rc : sl_buf_puts(b, ",\"key\":");
        rc = rc ? rc : put_json_str(b, smp.key);
        rc = rc ? rc : sl_buf_puts(b, ",\"index\":");
        rc = rc ? rc : put_u64(b, smp.index);
        rc = rc ? rc : sl_buf_puts(b, ",\"fields\":{");
        for (size_t i = 0; rc == 0 && i < smp.nfields; i++) {
            const struct fmt_tar_field *fl = &smp.fields[i];
            rc = i ? sl_buf_putc(b, ',') : 0;
            rc = rc ? rc : put_json_str(b, fl->ext);
            rc = rc ? rc : sl_buf_puts(b, ":\"");
            rc = rc ? rc : sl_base64_encode(b, fl->data, fl->len);
            rc = rc ? rc : sl_buf_putc(b, '"');
        }
        rc = rc ? rc : sl_buf_puts(b, "}}\n");
        if (rc != 0) {
            rc = sl_error_set(&err, rc, "%s: sample %llu: out of memory", path, (unsigned long long)smp.index);
            break;
        }
        if ((rc = record_out_maybe_flush(o)) != 0)
            break;
    }
    fmt_tar_close(t);
    if (rc < 0) {
        if (err.code != 0)
            log_error(o, &err);
        return RECORD_EXIT_DATA;
    }
    return RECORD_EXIT_OK;
}

static int cat_records(struct record_out *o, const char *path, enum fmt_format f, const struct record_read_opts *ro,
                       int decode, const struct sl_buf *file_json)
{
    struct sl_error err = {0};
    struct fmt_reader *r = NULL;
    int rc = record_reader_open(&r, path, ro, f, &err);
    if (rc != 0) {
        log_error(o, &err);
        return RECORD_EXIT_DATA;
    }
    struct fmt_record rec;
    while ((rc = fmt_reader_next(r, &rec, &err)) == 0) {
        struct sl_buf *b = &o->buf;
        size_t line_start = b->len;
        rc = sl_buf_puts(b, "{\"file\":");
        rc = rc ? rc : sl_buf_append(b, file_json->data, file_json->len);
        rc = rc ? rc : sl_buf_puts(b, ",\"index\":");
        rc = rc ? rc : put_u64(b, rec.index);
        rc = rc ? rc : sl_buf_puts(b, ",\"offset\":");
        rc = rc ? rc : put_u64(b, rec.offset);
        rc = rc ? rc : sl_buf_puts(b, ",\"length\":");
        rc = rc ? rc : put_u64(b, rec.len);
        if (decode) {
            rc = rc ? rc : sl_buf_puts(b, ",\"example\":");
            if (rc == 0 && (rc = fmt_example_to_json(rec.data, rec.len, b, &err)) != 0) {
                b->len = line_start;
                sl_error_prefix(&err, "%s: record %llu at offset %llu: not a tf.train.Example: ", path,
                                (unsigned long long)rec.index, (unsigned long long)rec.offset);
                break;
            }
            rc = rc ? rc : sl_buf_puts(b, "}\n");
        } else {
            rc = rc ? rc : sl_buf_puts(b, ",\"data\":\"");
            rc = rc ? rc : sl_base64_encode(b, rec.data, rec.len);
            rc = rc ? rc : sl_buf_puts(b, "\"}\n");
        }
        if (rc != 0) {
            b->len = line_start;
            rc = sl_error_set(&err, rc, "%s: record %llu: out of memory", path, (unsigned long long)rec.index);
            break;
        }
        if ((rc = record_out_maybe_flush(o)) != 0)
            break;
    }
    uint64_t dropped = fmt_reader_dropped_tail(r);
    fmt_reader_close(r);
    if (rc < 0) {
        if (err.code != 0)
            log_error(o, &err);
        return RECORD_EXIT_DATA;
    }
    if (dropped) {
        (void)record_out_flush(o);
        sl_log(SL_LOG_WARN, "%s: dropped a partial record header of %llu bytes at the end of the file", path,
               (unsigned long long)dropped);
    }
    return RECORD_EXIT_OK;
}

int record_cat_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'f'},
        {"compression", required_argument, NULL, 'c'},
        {"decode", required_argument, NULL, 'd'},
        {"max-record-bytes", required_argument, NULL, RECORD_OPT_MAX_RECORD_BYTES},
        {"on-error", required_argument, NULL, RECORD_OPT_ON_ERROR},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = "cat";
    struct record_read_opts ro = {0};
    int decode = 0;
    int c, bad;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:c:d:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': return record_help(cat_help);
        case 'd':
            if (strcmp(optarg, "example") != 0)
                return record_usage_error(cmd, "invalid value '%s' for --decode (only 'example')", optarg);
            decode = 1;
            break;
        default:
            if ((bad = record_read_opt(cmd, argv, c, optarg, &ro)) != 0)
                return bad;
        }
    }
    if (optind >= argc)
        return record_usage_error(cmd, "missing file argument");
    if (decode) {
        for (int i = optind; i < argc; i++)
            if (record_file_format(&ro, argv[i]) != FMT_FORMAT_TFRECORD)
                return record_usage_error(cmd, "--decode example needs TFRecord input; '%s' is read as %s", argv[i],
                                          fmt_format_name(record_file_format(&ro, argv[i])));
    }

    struct record_out o;
    record_out_init(&o, stdout);
    struct sl_buf file_json;
    sl_buf_init(&file_json, 0);
    int status = RECORD_EXIT_OK;
    for (int i = optind; i < argc && !o.failed; i++) {
        const char *path = argv[i];
        sl_buf_reset(&file_json);
        if (put_json_str(&file_json, path) != 0) {
            sl_log(SL_LOG_ERROR, "out of memory");
            status = RECORD_EXIT_DATA;
            break;
        }
        enum fmt_format f = record_file_format(&ro, path);
        int st = f == FMT_FORMAT_TAR ? cat_tar(&o, path, &ro, &file_json)
                                     : cat_records(&o, path, f, &ro, decode, &file_json);
        if (st != RECORD_EXIT_OK && record_file_failed(&ro)) {
            status = st;
            break;
        }
    }
    record_report_skipped(cmd, &ro);
    if (record_out_flush(&o) != 0)
        status = RECORD_EXIT_DATA;
    sl_buf_free(&file_json);
    record_out_free(&o);
    return status;
}
