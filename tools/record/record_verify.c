/* record count / verify / index: the commands that read every record and
 * keep only totals.
 *
 * count and verify share scan_file(), which reads a whole file (records or
 * tar samples) through the library's loop, so every CRC and every compressed
 * stream is checked in both; they differ in what they report. A bad file
 * never stops the run: its error is reported and the next file is read, and
 * the exit status is 1 at the end. verify prints the library's message
 * unadorned ("PATH: corrupted record at N"), one line per bad file, because
 * those lines are its output; count logs errors as every other command does.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "fmt_reader.h"
#include "fmt_tar.h"
#include "fmt_tfrecord.h"
#include "progress.h"
#include "record.h"
#include "sl_json.h"
#include "sl_log.h"
#include "sl_output.h"

struct scan_result {
    enum fmt_io io; /* how a plain file's bytes came (a compressed one's: READ) */
    int plain;      /* an uncompressed record file */
    uint64_t records;
    uint64_t bytes;        /* record payload bytes (tar: field bytes) */
    uint64_t dropped_tail; /* bytes of a partial TFRecord header dropped at EOF */
};

/* Progress counts compressed input bytes (what the file sizes total) for
 * record formats; tar reports only records. */
struct scan_progress {
    struct progress *bar;
    uint64_t records_base;
    uint64_t bytes_base;
};

static int scan_tar(const char *path, const struct record_read_opts *ro, struct scan_result *res,
                    struct scan_progress *sp, struct sl_error *err)
{
    struct fmt_tar *t = NULL;
    int rc = record_tar_open(&t, path, ro, err);
    if (rc != 0)
        return rc;
    struct fmt_tar_sample smp;
    while ((rc = fmt_tar_next(t, &smp, err)) == 0) {
        res->records++;
        for (size_t i = 0; i < smp.nfields; i++)
            res->bytes += smp.fields[i].len;
        progress_update(sp->bar, sp->records_base + res->records, sp->bytes_base + res->bytes);
    }
    fmt_tar_close(t);
    return rc == SL_END ? 0 : rc;
}

static int scan_file(const char *path, const struct record_read_opts *ro, struct scan_result *res,
                     struct scan_progress *sp, struct sl_error *err)
{
    memset(res, 0, sizeof *res);
    enum fmt_format f = record_file_format(ro, path);
    if (f == FMT_FORMAT_TAR)
        return scan_tar(path, ro, res, sp, err);
    struct fmt_reader *r = NULL;
    int rc = record_reader_open(&r, path, ro, f, err);
    if (rc != 0)
        return rc;
    struct fmt_stream *s = fmt_reader_stream(r);
    res->io = fmt_stream_io(s);
    res->plain = fmt_stream_compression(s) == FMT_COMP_NONE;
    struct fmt_record rec;
    while ((rc = fmt_reader_next(r, &rec, err)) == 0) {
        res->records++;
        res->bytes += rec.len;
        if (sp->bar->line.on)
            progress_update(sp->bar, sp->records_base + res->records, sp->bytes_base + fmt_stream_in_offset(s));
    }
    res->dropped_tail = fmt_reader_dropped_tail(r);
    fmt_reader_close(r);
    return rc == SL_END ? 0 : rc;
}

static uint64_t total_input_bytes(const struct record_read_opts *ro, int n, char **paths)
{
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (record_file_format(ro, paths[i]) == FMT_FORMAT_TAR)
            return 0; /* tar progress counts payload, not file bytes */
        total += record_file_size(paths[i]);
    }
    return total;
}

/* Options of count and verify: the reading options, --json, --help. */
enum { OPT_IO = RECORD_OPT_FIRST_PRIVATE, OPT_SHOW_IO };

static int parse_scan_opts(const char *cmd, const char *help, int argc, char **argv, struct record_read_opts *ro,
                           int *json, int *show_io, int *done)
{
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'f'},
        {"compression", required_argument, NULL, 'c'},
        {"max-record-bytes", required_argument, NULL, RECORD_OPT_MAX_RECORD_BYTES},
        {"json", no_argument, NULL, RECORD_OPT_JSON},
        {"on-error", required_argument, NULL, RECORD_OPT_ON_ERROR},
        {"io", required_argument, NULL, OPT_IO},
        {"show-io", no_argument, NULL, OPT_SHOW_IO},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c, bad;
    *done = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:c:h", longopts, NULL)) != -1) {
        if (c == RECORD_OPT_ON_ERROR && strcmp(cmd, "count") != 0)
            return record_usage_error(cmd, "unrecognized option '--on-error' (%s reads every file)", cmd);
        switch (c) {
        case 'h': *done = 1; return record_help(help);
        case RECORD_OPT_JSON:
            if (json == NULL)
                return record_usage_error(cmd, "unrecognized option '--json'");
            *json = 1;
            continue;
        case OPT_IO:
            if (show_io == NULL)
                return record_usage_error(cmd, "unrecognized option '--io'");
            if (fmt_io_parse(optarg, &ro->io) != 0)
                return record_usage_error(cmd, "--io: expected auto, map or read, got '%s'", optarg);
            continue;
        case OPT_SHOW_IO:
            if (show_io == NULL)
                return record_usage_error(cmd, "unrecognized option '--show-io'");
            *show_io = 1;
            continue;
        default:
            if ((bad = record_read_opt(cmd, argv, c, optarg, ro)) != 0)
                return bad;
        }
    }
    if (optind >= argc)
        return record_usage_error(cmd, "missing file argument");
    return 0;
}

#define READ_OPTS_HELP                                                              \
    "  -f, --format=FMT           tfrecord, text or tar (default: tar for *.tar,\n" \
    "                             *.tar.gz, *.tgz; text for *.txt, *.txt.gz;\n"     \
    "                             else tfrecord)\n"                                 \
    "  -c, --compression=C        auto (default), none, gzip or zlib\n"             \
    "      --max-record-bytes=N   refuse records larger than N bytes (default 64 MiB)\n"

static const char count_help[] =
    "Usage: sluice-record count [OPTION]... FILE...\n"
    "Count the records (tar: samples) of each FILE: one \"PATH<TAB>N\" line per\n"
    "file, then \"total<TAB>N\".\n"
    "\n" READ_OPTS_HELP
    "      --json                 print {\"files\":[{\"file\":..,\"records\":N},..],\"total\":N}\n" RECORD_ON_ERROR_HELP
    "  -h, --help                 show this help and exit\n"
    "\n"
    "Every record is read and checked. A file that cannot be read is reported\n"
    "and left out of the total; under --on-error=fail counting stops there and\n"
    "the exit status is 1.\n";

int record_count_main(int argc, char **argv)
{
    const char *cmd = "count";
    struct record_read_opts ro = {0};
    int json = 0, done;
    int st = parse_scan_opts(cmd, count_help, argc, argv, &ro, &json, NULL, &done);
    if (st != 0 || done)
        return st;

    struct progress bar;
    progress_init(&bar, cmd, 0, total_input_bytes(&ro, argc - optind, argv + optind));
    struct scan_progress sp = {.bar = &bar};
    struct record_out o;
    record_out_init(&o, stdout);
    struct sl_buf *b = &o.buf;
    int status = RECORD_EXIT_OK, rc = 0, nprinted = 0;
    uint64_t total = 0;
    if (json)
        rc = sl_buf_puts(b, "{\"files\":[");
    for (int i = optind; i < argc && rc == 0; i++) {
        struct scan_result res;
        struct sl_error err = {0};
        if (scan_file(argv[i], &ro, &res, &sp, &err) != 0) {
            progress_clear(&bar);
            (void)record_out_flush(&o);
            sl_log(SL_LOG_ERROR, "%s", err.msg);
            if (record_file_failed(&ro)) {
                status = RECORD_EXIT_DATA;
                break;
            }
        } else {
            total += res.records;
            if (json) {
                rc = sl_buf_puts(b, nprinted ? ",{\"file\":" : "{\"file\":");
                rc = rc ? rc : sl_json_string(b, argv[i], strlen(argv[i]));
                rc = rc ? rc : sl_buf_printf(b, ",\"records\":%llu}", (unsigned long long)res.records);
            } else {
                rc = sl_buf_printf(b, "%s\t%llu\n", argv[i], (unsigned long long)res.records);
            }
            nprinted++;
        }
        sp.records_base += res.records;
        sp.bytes_base += record_file_size(argv[i]);
    }
    progress_clear(&bar);
    record_report_skipped(cmd, &ro);
    if (rc == 0)
        rc = json ? sl_buf_printf(b, "],\"total\":%llu}\n", (unsigned long long)total)
                  : sl_buf_printf(b, "total\t%llu\n", (unsigned long long)total);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "out of memory");
        status = RECORD_EXIT_DATA;
    }
    if (record_out_flush(&o) != 0)
        status = RECORD_EXIT_DATA;
    record_out_free(&o);
    return status;
}

static const char verify_help[] =
    "Usage: sluice-record verify [OPTION]... FILE...\n"
    "Read every record of each FILE, checking every CRC and every compressed\n"
    "stream. Each bad file is reported on stderr with the reader's message\n"
    "(\"PATH: corrupted record at N\", \"PATH: truncated record at N\", or the\n"
    "compressed offset of a damaged stream) and the next file is read. A partial\n"
    "record header at the end of a file, which TensorFlow drops silently, is a\n"
    "warning. The last line, on stdout, is the summary:\n"
    "  verified K files, R records, B bytes: E errors[, W warnings]\n"
    "(B counts record payload bytes).\n"
    "\n" READ_OPTS_HELP "      --io=IO                how plain files are read: auto (default: the\n"
    "                             SLUICE_IO variable, else a short probe at the first\n"
    "                             file of 32 MiB or more picks the faster), map or read\n"
    "      --show-io              after the summary, say on stderr which path each\n"
    "                             plain file took and what the probe measured\n"
    "  -h, --help                 show this help and exit\n"
    "\n"
    "Exit status: 0 all files good, 1 any error, 2 usage.\n";

/* --show-io: the paths the plain files took, and where auto's choice
 * came from, with the probe's figures when it ran. */
static void print_io(const struct record_read_opts *ro, uint64_t nread, uint64_t nmapped)
{
    struct fmt_io_probe p;
    const char *source;
    enum fmt_io io = fmt_io_current(&p, &source);
    fprintf(stderr, "io: %llu plain files read(2), %llu mapped; ", (unsigned long long)nread,
            (unsigned long long)nmapped);
    if (ro->io != FMT_IO_AUTO)
        fprintf(stderr, "--io=%s\n", fmt_io_name(ro->io));
    else if (p.done)
        fprintf(stderr, "auto: %s, by the probe of %s: read()+crc32c %.2f GB/s, mmap+crc32c %.2f GB/s\n",
                fmt_io_name(io), p.path, p.read_bps / 1e9, p.map_bps / 1e9);
    else if (strcmp(source, "SLUICE_IO") == 0)
        fprintf(stderr, "auto: %s, from SLUICE_IO\n", fmt_io_name(io));
    else
        fprintf(stderr, "auto: read, not probed (no plain file of 32 MiB or more in the page cache)\n");
}

int record_verify_main(int argc, char **argv)
{
    const char *cmd = "verify";
    struct record_read_opts ro = {0};
    int done, show_io = 0;
    int st = parse_scan_opts(cmd, verify_help, argc, argv, &ro, NULL, &show_io, &done);
    if (st != 0 || done)
        return st;

    struct progress bar;
    progress_init(&bar, cmd, 0, total_input_bytes(&ro, argc - optind, argv + optind));
    struct scan_progress sp = {.bar = &bar};
    uint64_t files = 0, records = 0, bytes = 0, errors = 0, warnings = 0, nread = 0, nmapped = 0;
    for (int i = optind; i < argc; i++) {
        struct scan_result res;
        struct sl_error err = {0};
        int rc = scan_file(argv[i], &ro, &res, &sp, &err);
        files++;
        nread += res.plain && res.io == FMT_IO_READ;
        nmapped += res.plain && res.io == FMT_IO_MAP;
        records += res.records;
        bytes += res.bytes;
        if (rc != 0) {
            progress_clear(&bar);
            fprintf(stderr, "%s: verify: %s\n", RECORD_PROG, err.msg);
            errors++;
        } else if (res.dropped_tail) {
            progress_clear(&bar);
            fprintf(stderr,
                    "%s: verify: %s: warning: dropped a partial record header of %llu bytes at the end of "
                    "the file\n",
                    RECORD_PROG, argv[i], (unsigned long long)res.dropped_tail);
            warnings++;
        }
        sp.records_base += res.records;
        sp.bytes_base += record_file_size(argv[i]);
    }
    progress_clear(&bar);
    printf("verified %llu files, %llu records, %llu bytes: %llu errors", (unsigned long long)files,
           (unsigned long long)records, (unsigned long long)bytes, (unsigned long long)errors);
    if (warnings)
        printf(", %llu warnings", (unsigned long long)warnings);
    printf("\n");
    if (fflush(stdout) != 0)
        return RECORD_EXIT_DATA;
    if (show_io)
        print_io(&ro, nread, nmapped);
    return errors ? RECORD_EXIT_DATA : RECORD_EXIT_OK;
}

int record_index_write(struct sl_output *out, const char *path, const struct fmt_reader_opts *opts, uint64_t *count,
                       struct sl_error *err)
{
    struct fmt_reader_opts o = opts ? *opts : (struct fmt_reader_opts){0};
    o.format = FMT_FORMAT_TFRECORD;
    struct fmt_reader *r;
    int rc = fmt_reader_open(&r, path, &o, err);
    if (rc != 0)
        return rc;
    FILE *f = sl_output_stream(out);
    uint64_t n = 0;
    struct fmt_record rec;
    while ((rc = fmt_reader_next(r, &rec, err)) == 0) {
        fprintf(f, "%llu %llu\n", (unsigned long long)rec.offset,
                (unsigned long long)(rec.len + FMT_TFRECORD_HEADER + FMT_TFRECORD_FOOTER));
        n++;
    }
    fmt_reader_close(r);
    if (rc != SL_END)
        return rc;
    *count = n;
    return 0;
}

static const char index_help[] = "Usage: sluice-record index [OPTION]... FILE...\n"
                                 "Write the index of each TFRecord FILE to FILE.idx, in DALI's tfrecord2idx\n"
                                 "format (\"<offset> <size>\" per record, offsets in the decompressed stream),\n"
                                 "reading and checking every record. Prints \"INDEX<TAB>N\" per file.\n"
                                 "\n"
                                 "  -o, --output=PATH          the index path (only with a single FILE)\n"
                                 "  -c, --compression=C        auto (default), none, gzip or zlib\n"
                                 "      --max-record-bytes=N   refuse records larger than N bytes (default 64 MiB)\n"
                                 "  -h, --help                 show this help and exit\n"
                                 "\n"
                                 "An index is written to a temporary name and renamed, so a failed run never\n"
                                 "leaves a partial index; an --output that is a device or FIFO (/dev/null,\n"
                                 "/dev/stdout) is written to, never replaced. Exit status: 0 ok, 1 a file\n"
                                 "failed, 2 usage.\n";

int record_index_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"compression", required_argument, NULL, 'c'},
        {"max-record-bytes", required_argument, NULL, RECORD_OPT_MAX_RECORD_BYTES},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = "index";
    struct record_read_opts ro = {0};
    const char *output = NULL;
    int c, bad;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:c:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': return record_help(index_help);
        case 'o': output = optarg; break;
        default:
            if ((bad = record_read_opt(cmd, argv, c, optarg, &ro)) != 0)
                return bad;
        }
    }
    if (optind >= argc)
        return record_usage_error(cmd, "missing file argument");
    if (output != NULL && argc - optind > 1)
        return record_usage_error(cmd, "--output needs exactly one FILE (%d given)", argc - optind);

    struct progress bar;
    progress_init(&bar, cmd, (uint64_t)(argc - optind), 0);
    struct fmt_reader_opts opts;
    record_reader_opts(&ro, FMT_FORMAT_TFRECORD, &opts);
    int status = RECORD_EXIT_OK;
    struct sl_buf idx;
    sl_buf_init(&idx, 0);
    for (int i = optind; i < argc; i++) {
        struct sl_error err = {0};
        uint64_t n = 0;
        sl_buf_reset(&idx);
        int rc = output ? sl_buf_puts(&idx, output) : sl_buf_printf(&idx, "%s.idx", argv[i]);
        rc = rc ? rc : sl_buf_putc(&idx, '\0');
        struct sl_output *out = NULL;
        if (rc != 0)
            rc = sl_error_set(&err, rc, "out of memory");
        else
            rc = sl_output_open(&out, (const char *)idx.data, 0, &err);
        if (rc == 0 && (rc = record_index_write(out, argv[i], &opts, &n, &err)) != 0)
            sl_output_abort(out);
        else if (rc == 0)
            rc = sl_output_commit(out, &err);
        progress_clear(&bar);
        if (rc != 0) {
            sl_log(SL_LOG_ERROR, "%s", err.msg);
            status = RECORD_EXIT_DATA;
        } else {
            printf("%s\t%llu\n", (const char *)idx.data, (unsigned long long)n);
        }
        /* the library indexes a file in one call: the bar moves per file */
        progress_update(&bar, (uint64_t)(i - optind + 1), 0);
        progress__tick(&bar);
    }
    progress_clear(&bar);
    sl_buf_free(&idx);
    if (fflush(stdout) != 0)
        return RECORD_EXIT_DATA;
    return status;
}
