/* record.h: declarations shared by the files of the sluice-record tool.
 *
 * Every subcommand is `int record_<cmd>_main(int argc, char **argv)` with
 * argv[0] the subcommand's name; it returns the process exit status:
 * RECORD_EXIT_OK, RECORD_EXIT_DATA (a file or its data was bad),
 * RECORD_EXIT_USAGE (bad command line), or 128 + signal after SIGINT/SIGTERM
 * interrupted a writer. Data errors are logged with sl_log and the command
 * goes on with the next file where that makes sense.
 */
#ifndef RECORD_H
#define RECORD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fmt_files.h"
#include "fmt_reader.h"
#include "fmt_stream.h"
#include "sl_buf.h"
#include "sl_error.h"

#define RECORD_PROG "sluice-record"

#define RECORD_EXIT_OK 0
#define RECORD_EXIT_DATA 1
#define RECORD_EXIT_USAGE 2

/* Long-only option codes (above any char) shared by the subcommands. */
enum record_opt {
    RECORD_OPT_HELP = 0x100,
    RECORD_OPT_FORMAT,
    RECORD_OPT_COMPRESSION,
    RECORD_OPT_MAX_RECORD_BYTES,
    RECORD_OPT_JSON,
    RECORD_OPT_ON_ERROR,
    RECORD_OPT_PREFIX, /* convert and gen (record_shard_opt) */
    RECORD_OPT_INDEX,
    RECORD_OPT_FIRST_PRIVATE /* subcommands number their own options from here */
};

int record_cat_main(int argc, char **argv);
int record_count_main(int argc, char **argv);
int record_verify_main(int argc, char **argv);
int record_index_main(int argc, char **argv);
int record_stats_main(int argc, char **argv);
int record_convert_main(int argc, char **argv);
int record_gen_main(int argc, char **argv);
/* convert images (record_images.c); `help` is convert's --help text. */
int record_convert_images(int argc, char **argv, const char *help);
/* What p[0..n) is by its first bytes: a JPEG (SOI, FF D8 FF), a PNG (its
 * 8-byte signature) or neither. Nothing is decoded. */
enum record_image { RECORD_IMAGE_NONE, RECORD_IMAGE_JPEG, RECORD_IMAGE_PNG };
enum record_image record_image_kind(const uint8_t *p, size_t n);

/* ---- command line (record_main.c) ---- */

/* Print "sluice-record: <cmd>: <message>" and the --help hint on stderr;
 * returns RECORD_EXIT_USAGE. */
int record_usage_error(const char *cmd, const char *fmt, ...) SL_PRINTF(2, 3);
/* The usage error for what getopt_long returned as '?' or ':' (opterr must be 0). */
int record_getopt_error(const char *cmd, char **argv, int c);
/* Print the help text on stdout; returns RECORD_EXIT_OK. */
int record_help(const char *text);

/* Parse an unsigned decimal in [min, max] for option `opt`; 0 or a usage error. */
int record_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* Reading options common to cat, count, verify, index and stats. */
struct record_read_opts {
    int format_set; /* --format given: otherwise by file name */
    enum fmt_format format;
    enum fmt_compression compression;
    size_t max_record_bytes;    /* 0: the library default */
    enum fmt_on_error on_error; /* --on-error: fail (default) or skip-file */
    uint64_t skipped;           /* files skipped under skip-file so far */
    enum fmt_io io;             /* verify --io: plain files mapped or read (auto: fmt_stream's choice) */
};

/* The help line of --on-error, for the commands that take it. */
#define RECORD_ON_ERROR_HELP                                                             \
    "      --on-error=POLICY      fail (default): stop at the first bad file, exit 1;\n" \
    "                             skip-file: report it, skip the rest of that file\n"    \
    "                             and go on (tf.data's ignore_errors); exit 0\n"

/* A file failed with a data error (already logged): under fail, returns 1
 * (stop, exit 1); under skip-file counts it and returns 0 (go on). */
int record_file_failed(struct record_read_opts *ro);
/* After the last file: warn about skipped files; returns the exit status
 * the policy gives (RECORD_EXIT_OK under skip-file). */
void record_report_skipped(const char *cmd, const struct record_read_opts *ro);

/* Handle --format (-f), --compression (-c), --max-record-bytes, --on-error,
 * the rest of a reading command's option loop: 0 when `c` (getopt's code,
 * the short letter or RECORD_OPT_*) was one of them and valid, else
 * RECORD_EXIT_USAGE, reported: a bad value, or `c` no reading option
 * (record_getopt_error). */
int record_read_opt(const char *cmd, char **argv, int c, const char *arg, struct record_read_opts *ro);
/* The format for `path`: --format, else tar for *.tar, *.tar.gz, *.tgz, text
 * for *.txt and *.txt.gz, else TFRecord. */
enum fmt_format record_file_format(const struct record_read_opts *ro, const char *path);
void record_reader_opts(const struct record_read_opts *ro, enum fmt_format f, struct fmt_reader_opts *out);
/* fmt_reader_open of `path` as format f with the reading options
 * (record_reader_opts). */
int record_reader_open(struct fmt_reader **out, const char *path, const struct record_read_opts *ro, enum fmt_format f,
                       struct sl_error *err);
/* fmt_tar_open of `path` with the reading options (--max-record-bytes
 * bounds a member). */
struct fmt_tar;
int record_tar_open(struct fmt_tar **out, const char *path, const struct record_read_opts *ro, struct sl_error *err);

/* Does `path` end with `suffix`? */
int record_has_suffix(const char *path, const char *suffix);
/* The compression AUTO means for an output file name: ".gz" gzip, ".zz" and
 * ".zlib" zlib, else none. */
enum fmt_compression record_output_compression(const char *path, enum fmt_compression c);
/* Size of a file in bytes, 0 when it cannot be stat'ed. */
uint64_t record_file_size(const char *path);

/* ---- buffered stdout: one sl_buf written with fwrite when large ---- */

struct record_out {
    struct sl_buf buf;
    FILE *f;
    int failed; /* a write failed: the error is already logged */
};
void record_out_init(struct record_out *o, FILE *f);
/* Write out the buffer once it holds more than ~1 MiB. 0 or SL_EIO. */
int record_out_maybe_flush(struct record_out *o);
/* Write everything and fflush. 0 or SL_EIO. */
int record_out_flush(struct record_out *o);
void record_out_free(struct record_out *o);

/* ---- SIGINT / SIGTERM for the writers (record_main.c) ----
 * The handler only records the signal; writers poll record_interrupted()
 * between records, remove what they wrote and exit 128 + signal. */
void record_signals_install(void);
/* The signal number received, 0 if none. */
int record_interrupted(void);

/* ---- index files (record_verify.c) ---- */
struct sl_output;
/* Read the TFRecord file `path` (checking every record) and write its index
 * in DALI's tfrecord2idx format ("<offset> <size>" per record) to `out`,
 * which the caller commits or aborts. *count gets the number of records. */
int record_index_write(struct sl_output *out, const char *path, const struct fmt_reader_opts *opts, uint64_t *count,
                       struct sl_error *err) SL_MUST_CHECK;

/* ---- sharded TFRecord output (record_shards.c), for convert and gen ----
 *
 * N shards "DIR/PREFIX-00000-of-0000N.tfrecord" (+ ".gz" for gzip, ".zz" for
 * zlib), written in shard order through sl_output (hidden exclusive
 * temporaries ".NAME.XXXXXXXXXXXX.tmp") and renamed only by
 * record_shards_commit(); record_shards_abort() removes every file this set
 * created (temporaries, indexes, renamed shards). */
struct fmt_tfrecord_writer;
struct record_shards {
    char *dir;
    char *prefix;
    unsigned nshards;
    enum fmt_compression compression;
    int with_index;
    char **final_paths;
    struct sl_output **outs; /* shard i's output until it is renamed */
    uint64_t *counts;
    unsigned next_open;            /* shards [0, next_open) were opened */
    unsigned committed;            /* shards [0, committed) were renamed */
    unsigned indexed;              /* index files [0, indexed) were written */
    struct fmt_tfrecord_writer *w; /* open writer of shard next_open - 1 */
};

#define RECORD_MAX_SHARDS 99999u

int record_shards_init(struct record_shards *s, const char *dir, const char *prefix, unsigned nshards,
                       enum fmt_compression compression, int with_index, struct sl_error *err);
/* Append a record to `shard`; shards must come in non-decreasing order (the
 * skipped ones are created empty). */
int record_shards_write(struct record_shards *s, unsigned shard, const void *data, size_t len, struct sl_error *err);
/* Close, index (when asked) and rename every shard. On error everything is
 * removed, as by record_shards_abort(). */
int record_shards_commit(struct record_shards *s, struct sl_error *err);
void record_shards_abort(struct record_shards *s);
/* Print "PATH\tCOUNT" per shard to `f`. */
void record_shards_print(const struct record_shards *s, FILE *f);
void record_shards_free(struct record_shards *s);
/* The end of a run that opened the set: printed on stdout when `ok`, else
 * removed (record_shards_abort); then freed. */
void record_shards_finish(struct record_shards *s, int ok);
/* The exit status of a command that writes shards, logged: interrupted,
 * "interrupted: partial outputs removed" and 128 + the signal; rc != 0,
 * "WHAT: <err's message>" and RECORD_EXIT_DATA; else RECORD_EXIT_OK. */
int record_shards_exit(const char *what, int rc, const struct sl_error *err);

/* The output options of convert and gen: -o/--output-dir, --prefix,
 * --shards, -c/--compression (none, gzip or zlib), --index. */
struct record_shard_opts {
    const char *dir; /* NULL: not given */
    const char *prefix;
    unsigned shards; /* 1..RECORD_MAX_SHARDS */
    enum fmt_compression compression;
    int index;
};
/* Handle getopt's `c` (`shards_c`: the code of --shards, 'n' in convert,
 * 's' in gen): 0 when it was one of those options and valid,
 * RECORD_EXIT_USAGE when its value was bad (reported), -1 when `c` is not
 * one of them. */
int record_shard_opt(const char *cmd, int c, int shards_c, const char *arg, struct record_shard_opts *o);

#endif
