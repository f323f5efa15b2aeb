/* sluice-record: inspect, check, index, convert and generate record files.
 *
 * main() only dispatches on the subcommand; each subcommand parses its own
 * options with getopt_long (opterr off: the messages and the exit status 2
 * come from record_getopt_error). This file also holds what several
 * subcommands share: option value parsing, the format/compression rules for
 * file names, the buffered stdout writer and the signal flag.
 *
 * The one mutable global besides the log sink is the signal number set by
 * the SIGINT/SIGTERM handler (a sig_atomic_t, the only thing a handler may
 * portably write).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fmt_stream.h"
#include "fmt_tar.h"
#include "record.h"
#include "sl_exit.h"
#include "sl_log.h"
#include "sl_opt.h"
#include "sto.h"

static const char main_help[] = "Usage: sluice-record COMMAND [OPTION]... [FILE]...\n"
                                "Inspect, check, index, convert and generate TFRecord, text-line and tar files.\n"
                                "\n"
                                "Commands:\n"
                                "  cat       print every record as one JSON object per line\n"
                                "  count     count the records of each file\n"
                                "  verify    read every record, checking every CRC and compressed stream\n"
                                "  index     write DALI-style index files (FILE.idx)\n"
                                "  stats     record sizes, and feature keys of tf.train.Example records\n"
                                "  convert   IDX (MNIST) or JSON lines to TFRecord files of Examples\n"
                                "  gen       write a synthetic, seeded dataset of Examples\n"
                                "\n"
                                "  -h, --help     show this help and exit\n"
                                "      --version  show the version (commit, build type, optional parts) and exit\n"
                                "\n"
                                "Run 'sluice-record COMMAND --help' for a command's options.\n"
                                "An interrupted writer removes its partial outputs.\n"
                                "\n" SL_EXIT_STATUS_HELP;

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
};

static const struct command commands[] = {
    {"cat", record_cat_main},     {"count", record_count_main}, {"verify", record_verify_main},
    {"index", record_index_main}, {"stats", record_stats_main}, {"convert", record_convert_main},
    {"gen", record_gen_main},
};

int main(int argc, char **argv)
{
    sl_log_setup(RECORD_PROG, 2, SL_LOG_INFO);
    if (argc < 2) {
        fprintf(stderr, "%s: missing command\nTry '%s --help' for more information.\n", RECORD_PROG, RECORD_PROG);
        return RECORD_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0)
        return record_help(main_help);
    if (strcmp(cmd, "--version") == 0) {
        sl_opt_version(RECORD_PROG, stdout); /* version, commit, build type, optional parts */
        return RECORD_EXIT_OK;
    }
    /* "sluice-record help CMD" is "sluice-record CMD --help" */
    if (strcmp(cmd, "help") == 0) {
        if (argc < 3)
            return record_help(main_help);
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
            if (strcmp(argv[2], commands[i].name) == 0) {
                static char help_opt[] = "--help";
                char *args[] = {argv[2], help_opt, NULL};
                return commands[i].run(2, args);
            }
        }
        cmd = argv[2];
    } else {
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
            if (strcmp(cmd, commands[i].name) == 0)
                return commands[i].run(argc - 1, argv + 1);
    }
    if (cmd[0] == '-')
        fprintf(stderr, "%s: unrecognized option '%s'\n", RECORD_PROG, cmd);
    else
        fprintf(stderr, "%s: unknown command '%s'\n", RECORD_PROG, cmd);
    fprintf(stderr, "Try '%s --help' for more information.\n", RECORD_PROG);
    return RECORD_EXIT_USAGE;
}

/* ---- command line helpers ---- */

int record_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: %s: ", RECORD_PROG, cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s %s --help' for more information.\n", RECORD_PROG, cmd);
    return RECORD_EXIT_USAGE;
}

int record_getopt_error(const char *cmd, char **argv, int c)
{
    /* getopt_long leaves the offending word at argv[optind - 1]; for a short
     * option optopt holds the letter, for a long one the option's value (0
     * when the name matched nothing). */
    const char *word = optind > 0 ? argv[optind - 1] : "";
    int is_long = word[0] == '-' && word[1] == '-';
    int name_len = (int)strcspn(word, "=");
    if (!is_long && c == ':')
        return record_usage_error(cmd, "option requires an argument -- '%c'", optopt);
    if (!is_long)
        return record_usage_error(cmd, "invalid option -- '%c'", optopt);
    if (c == ':')
        return record_usage_error(cmd, "option '%.*s' requires an argument", name_len, word);
    if (optopt)
        return record_usage_error(cmd, "option '%.*s' doesn't allow an argument", name_len, word);
    return record_usage_error(cmd, "unrecognized option '%.*s'", name_len, word);
}

int record_help(const char *text)
{
    fputs(text, stdout);
    return RECORD_EXIT_OK;
}

int record_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    /* sl_opt's parser decides what is a number; this command's messages
     * say non-negative (a sign, a blank, trailing text or over 2^64 - 1:
     * not one) and the range apart */
    struct sl_error ignored = {0};
    uint64_t v = 0;
    if (s[0] < '0' || s[0] > '9' || sl_opt_parse_u64(s, 0, UINT64_MAX, &v, &ignored) != 0)
        return record_usage_error(cmd, "invalid value '%s' for %s: not a non-negative integer", s, opt);
    if (v < min || v > max)
        return record_usage_error(cmd, "invalid value '%s' for %s: must be between %llu and %llu", s, opt,
                                  (unsigned long long)min, (unsigned long long)max);
    *out = v;
    return 0;
}

int record_read_opt(const char *cmd, char **argv, int c, const char *arg, struct record_read_opts *ro)
{
    uint64_t v = 0;
    switch (c) {
    case 'f':
    case RECORD_OPT_FORMAT:
        if (fmt_format_parse(arg, &ro->format) != 0 || ro->format == FMT_FORMAT_ARRAYS)
            return record_usage_error(cmd, "invalid format '%s' (tfrecord, text or tar)", arg);
        ro->format_set = 1;
        return 0;
    case 'c':
    case RECORD_OPT_COMPRESSION:
        if (fmt_compression_parse(arg, &ro->compression) != 0)
            return record_usage_error(cmd, "invalid compression '%s' (auto, none, gzip or zlib)", arg);
        return 0;
    case RECORD_OPT_ON_ERROR:
        if (fmt_on_error_parse(arg, &ro->on_error) != 0)
            return record_usage_error(cmd, "invalid value '%s' for --on-error (fail or skip-file)", arg);
        return 0;
    case RECORD_OPT_MAX_RECORD_BYTES:
        if (record_parse_u64(cmd, "--max-record-bytes", arg, 1, (uint64_t)SIZE_MAX / 4, &v) != 0)
            return RECORD_EXIT_USAGE;
        ro->max_record_bytes = (size_t)v;
        return 0;
    default: return record_getopt_error(cmd, argv, c);
    }
}

int record_has_suffix(const char *path, const char *suffix)
{
    size_t n = strlen(path), m = strlen(suffix);
    return n >= m && strcmp(path + n - m, suffix) == 0;
}

int record_file_failed(struct record_read_opts *ro)
{
    if (ro->on_error == FMT_ON_ERROR_FAIL)
        return 1;
    ro->skipped++;
    return 0;
}

void record_report_skipped(const char *cmd, const struct record_read_opts *ro)
{
    if (ro->skipped > 0)
        sl_log(SL_LOG_WARN, "%s: skipped %llu file(s) with data errors (--on-error=skip-file)", cmd,
               (unsigned long long)ro->skipped);
}

enum fmt_format record_file_format(const struct record_read_opts *ro, const char *path)
{
    if (ro->format_set)
        return ro->format;
    if (record_has_suffix(path, ".tar") || record_has_suffix(path, ".tar.gz") || record_has_suffix(path, ".tgz"))
        return FMT_FORMAT_TAR;
    if (record_has_suffix(path, ".txt") || record_has_suffix(path, ".txt.gz"))
        return FMT_FORMAT_TEXT;
    return FMT_FORMAT_TFRECORD;
}

void record_reader_opts(const struct record_read_opts *ro, enum fmt_format f, struct fmt_reader_opts *out)
{
    memset(out, 0, sizeof *out);
    out->format = f;
    out->compression = ro->compression;
    out->max_record_bytes = ro->max_record_bytes;
    out->io = ro->io;
}

int record_reader_open(struct fmt_reader **out, const char *path, const struct record_read_opts *ro, enum fmt_format f,
                       struct sl_error *err)
{
    struct fmt_reader_opts opts;
    record_reader_opts(ro, f, &opts);
    return fmt_reader_open(out, path, &opts, err);
}

int record_tar_open(struct fmt_tar **out, const char *path, const struct record_read_opts *ro, struct sl_error *err)
{
    struct fmt_tar_opts topts = {.max_member_bytes = ro->max_record_bytes};
    return fmt_tar_open(out, path, &topts, err);
}

enum fmt_compression record_output_compression(const char *path, enum fmt_compression c)
{
    if (c != FMT_COMP_AUTO)
        return c;
    if (record_has_suffix(path, ".gz"))
        return FMT_COMP_GZIP;
    if (record_has_suffix(path, ".zz") || record_has_suffix(path, ".zlib"))
        return FMT_COMP_ZLIB;
    return FMT_COMP_NONE;
}

uint64_t record_file_size(const char *path)
{
    struct stat st;
    if (sto_is_remote(path)) {
        uint64_t size = 0;
        struct sl_error ignored = {0};
        return fmt_file_size(path, &size, &ignored) == 0 ? size : 0;
    }
    if (stat(sto_local_path(path), &st) != 0 || !S_ISREG(st.st_mode))
        return 0;
    return (uint64_t)st.st_size;
}

/* ---- buffered output ---- */

#define OUT_FLUSH_AT ((size_t)1 << 20)

void record_out_init(struct record_out *o, FILE *f)
{
    sl_buf_init(&o->buf, 0);
    o->f = f;
    o->failed = 0;
}

static int out_write(struct record_out *o)
{
    if (o->buf.len && !o->failed && fwrite(o->buf.data, 1, o->buf.len, o->f) != o->buf.len) {
        o->failed = 1;
        sl_log(SL_LOG_ERROR, "write error: %s", strerror(errno));
    }
    sl_buf_reset(&o->buf);
    return o->failed ? SL_EIO : 0;
}

int record_out_maybe_flush(struct record_out *o)
{
    return o->buf.len >= OUT_FLUSH_AT ? out_write(o) : (o->failed ? SL_EIO : 0);
}

int record_out_flush(struct record_out *o)
{
    int rc = out_write(o);
    if (!o->failed && fflush(o->f) != 0) {
        o->failed = 1;
        sl_log(SL_LOG_ERROR, "write error: %s", strerror(errno));
        rc = SL_EIO;
    }
    return rc;
}

void record_out_free(struct record_out *o)
{
    sl_buf_free(&o->buf);
}

/* ---- signals ---- */

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    got_signal = sig;
}

void record_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* SA_RESTART: a write interrupted by the signal completes; the writers
     * notice the flag at the next record. */
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int record_interrupted(void)
{
    return got_signal;
}
