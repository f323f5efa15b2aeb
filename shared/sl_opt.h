/* sl_opt: command-line options from one table, for every sluice binary.
 *
 * A program describes its options as rows {name, short name, type, field
 * offset, min, max, default, value name, help} over its own options struct
 * (style.md, "Configuration"; feeder/feed_job.c's key table is the model):
 *
 *     #define OFF(f) offsetof(struct trainer_opts, f)
 *     static const struct sl_opt rows[] = {
 *         {"workers", 'n', SL_OPT_U32, OFF(workers), 1, 65536, "1", "N", "trainer workers in the job"},
 *         {"lr", 0, SL_OPT_DOUBLE, OFF(lr), 1e-9, 1e3, "0.05", "X", "SGD learning rate"},
 *         ...
 *     };
 *     int rc = sl_opt_parse(&cmd, argc, argv, &opts, &given, &err);
 *
 * The parser applies every row's default, then the arguments in order
 * (a repeated option: the last one wins). It accepts --name=VALUE,
 * --name VALUE, -x VALUE and -xVALUE, and clusters of short flags (-qh);
 * names are never abbreviated. Numbers are strict: digits only for
 * integers (no sign, no blanks, no trailing junk), finite decimal numbers
 * for DOUBLE, each checked against [min, max]. --help is generated from
 * the same rows (sl_opt_help), so it cannot miss one.
 *
 * Errors (SL_EINVAL) name the option as the user wrote it, and an unknown
 * option suggests the nearest known one:
 *     --lr: not a number: 'abc'
 *     --workers: must be an integer in [1, 65536], got '0'
 *     --jb: unknown option; did you mean --job?
 *     --model: expected none, softmax or mlp, got 'cnn'
 *     --quiet takes no value
 *     --lr needs a value
 *     unexpected argument 'foo'
 * The caller prints them as "PROG: MSG" and exits 2.
 *
 * Thread-safety: none needed; parsing happens once, in main.
 */
#ifndef SL_OPT_H
#define SL_OPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sl_error.h"
#include "sl_log.h" /* SL_LOG_LEVEL_CHOICES, SL_LOG_FORMAT_CHOICES */

enum sl_opt_type {
    SL_OPT_FLAG,    /* int: 1 when given; takes no value */
    SL_OPT_STRING,  /* const char *: borrowed from argv (or the row's default) */
    SL_OPT_U32,     /* uint32_t in [min, max] */
    SL_OPT_U64,     /* uint64_t in [min, max] */
    SL_OPT_INT,     /* int in [min, max] (min >= 0: digits only, as U32) */
    SL_OPT_LONG,    /* long in [min, max] (min >= 0: digits only, as U64) */
    SL_OPT_BYTES,   /* uint64_t: digits then optionally K, M, G or T (powers of 1024), in [min, max] */
    SL_OPT_DOUBLE,  /* double, finite, in [min, max] */
    SL_OPT_CHOICE,  /* int: the index of the value in `choices` ("a|b|c") */
    SL_OPT_FUNC,    /* `fn` is called with the value (and the whole options struct) */
    SL_OPT_HELP,    /* print the generated help on stdout; sl_opt_parse returns 1 */
    SL_OPT_VERSION, /* print sl_opt_version's lines on stdout; sl_opt_parse returns 1 */
};

/* SL_OPT_FUNC: store `value` into *opts; 0, or an SL_E* code with the
 * whole message in err, naming the option ("--devices: ..."). */
typedef int (*sl_opt_fn)(void *opts, const char *value, struct sl_error *err);

/* One option. Integer bounds must be below 2^53 (they are doubles). */
struct sl_opt {
    const char *name; /* long name, without the dashes */
    char short_name;  /* 0: none */
    enum sl_opt_type type;
    size_t offset;       /* of the field in the options struct (unused for FUNC, HELP, VERSION) */
    double min, max;     /* numbers: inclusive bounds */
    const char *def;     /* the default as the option's text, applied before parsing (FUNC: passed
                              to fn); NULL: the field is left as the caller set it (zero, usually) */
    const char *arg;     /* the value's name in --help ("N", "FILE"); NULL for FLAG, HELP, VERSION */
    const char *help;    /* one paragraph, wrapped by sl_opt_help; "(default DEF)" is appended when def
                              is set, unless the text already says "default" */
    const char *choices; /* CHOICE: "none|softmax|mlp" */
    sl_opt_fn fn;        /* FUNC */
};

/* The last rows of every sluice program's table, the same words in each
 * --help: --quiet, --log-level, --log-format (int fields quiet, log_level
 * and log_format of `type`; the choices are sl_log.h's), --help and
 * --version. */
#define SL_OPT_COMMON_ROWS(type)                                                                                 \
    {"quiet",                                                                                                    \
     'q',                                                                                                        \
     SL_OPT_FLAG,                                                                                                \
     offsetof(type, quiet),                                                                                      \
     0,                                                                                                          \
     0,                                                                                                          \
     NULL,                                                                                                       \
     NULL,                                                                                                       \
     "log warnings and errors only (--log-level warning)",                                                       \
     NULL,                                                                                                       \
     NULL},                                                                                                      \
        {"log-level", 0,      SL_OPT_CHOICE, offsetof(type, log_level), 0,                                       \
         0,           "info", NULL,          "the least level logged",  SL_LOG_LEVEL_CHOICES,                    \
         NULL},                                                                                                  \
        {"log-format",                                                                                           \
         0,                                                                                                      \
         SL_OPT_CHOICE,                                                                                          \
         offsetof(type, log_format),                                                                             \
         0,                                                                                                      \
         0,                                                                                                      \
         "text",                                                                                                 \
         NULL,                                                                                                   \
         "log lines as text (an RFC 3339 time, the program, the level, the message) or as one JSON object each", \
         SL_LOG_FORMAT_CHOICES,                                                                                  \
         NULL},                                                                                                  \
        {"help", 'h', SL_OPT_HELP, 0, 0, 0, NULL, NULL, "this help", NULL, NULL},                                \
    {                                                                                                            \
        "version", 0, SL_OPT_VERSION, 0, 0, 0, NULL, NULL,                                                       \
            "the version, the commit it was built from, the build type and optional parts", NULL, NULL           \
    }

/* Rows that sluice-feeder and sluice-trainer share: the same option, name,
 * field type (int flags, const char * strings) and help in both tables.
 * Each program keeps its own place for them in its --help. */
#define SL_OPT_ROW_METRICS_LISTEN(type)                                                                                \
    {                                                                                                                  \
        "metrics-listen", 0, SL_OPT_STRING, offsetof(type, metrics_listen), 0, 0, NULL, "HOST:PORT",                   \
            "serve this process's figures live for Prometheus at http://HOST:PORT/metrics (e.g. 127.0.0.1:9464 for a " \
            "feeder, 127.0.0.1:9465 for a trainer; port 0: any free port, logged; docs/operations.md lists the "       \
            "metrics)",                                                                                                \
            NULL, NULL                                                                                                 \
    }
#define SL_OPT_ROW_CURVE_KEY(type)                                                                                   \
    {                                                                                                                \
        "curve-key", 0, SL_OPT_STRING, offsetof(type, curve_key), 0, 0, NULL, "FILE",                                \
            "this process's CURVE secret key (NAME.key from 'sluice-feeder keygen NAME'; mode 0600): its links are " \
            "encrypted; a feeder lets in only the trainers whose public key is in its --curve-allow, a trainer's "   \
            "ring "                                                                                                  \
            "only holders of the same key (docs/security.md)",                                                       \
            NULL, NULL                                                                                               \
    }
#define SL_OPT_ROW_INSECURE(type)                                                                                    \
    {                                                                                                                \
        "insecure", 0, SL_OPT_FLAG, offsetof(type, insecure), 0, 0, NULL, NULL,                                      \
            "listen in plaintext on an address other hosts can reach (a feeder's --listen; a trainer worker's ring " \
            "and "                                                                                                   \
            "worker 0's rendezvous; a parameter server): without it such a process refuses to start unless it has "  \
            "--curve-key",                                                                                           \
            NULL, NULL                                                                                               \
    }
#define SL_OPT_ROW_NO_SHM(type)                                                                                     \
    {                                                                                                               \
        "no-shm", 0, SL_OPT_FLAG, offsetof(type, no_shm), 0, 0, NULL, NULL,                                         \
            "pieces always by copy, never in a feeder's shared memory (by default a feeder hands a trainer on its " \
            "host that can map that memory its pieces there, without copies; docs/protocol.md)",                    \
            NULL, NULL                                                                                              \
    }

/* A program's options, and optionally a second family of names accepted as
 * `--NAME=VALUE` or `--NAME VALUE` (the feeder's job keys): a name that is
 * not a row goes to `extra_fn` when it is one of `extra_names` or starts
 * with `extra_prefix`; unknown names are suggested the nearest row or
 * extra name. All borrowed. */
struct sl_opt_cmd {
    const char *prog;   /* "sluice-trainer": --help and --version start with it */
    const char *usage;  /* --help text before the options (ends with a blank line) */
    const char *footer; /* --help text after them (NULL: none) */
    const struct sl_opt *rows;
    size_t nrows; /* at most 64 */
    const char *const *extra_names;
    size_t nextra;
    const char *extra_prefix;
    const char *extra_what; /* "job key": the unknown-name message says "unknown option or job key" */
    int (*extra_fn)(void *opts, const char *name, const char *value, struct sl_error *err);
    /* Any other --NAME=VALUE (NAME neither a row nor an extra name) goes
     * whole to pass_fn when it is set, `arg` borrowed from argv
     * (sluice-bench's job overrides, passed on to its feeders); a name
     * without "=VALUE" is still an unknown option. */
    int (*pass_fn)(void *opts, const char *arg, struct sl_error *err);
};

/* Parse argv[1..argc) into *opts (defaults first). *given (may be NULL)
 * gets bit i set for each row i given on the command line. Returns 0; 1
 * when --help or --version was printed (exit 0); SL_EINVAL with the reason
 * in err (a usage error: exit 2); SL_ENOMEM. */
int sl_opt_parse(const struct sl_opt_cmd *cmd, int argc, char **argv, void *opts, uint64_t *given,
                 struct sl_error *err) SL_MUST_CHECK;

/* Whether the row named `name` is set in a `given` mask from sl_opt_parse. */
int sl_opt_given(const struct sl_opt_cmd *cmd, uint64_t given, const char *name);

/* The generated help: cmd->usage, one entry per row ("  -c, --connect=ADDRS"
 * then its help wrapped to 79 columns), cmd->footer. */
void sl_opt_help(const struct sl_opt_cmd *cmd, FILE *f);

/* What --version prints: "PROG VERSION", then the git commit it was built
 * from ("unknown" outside a git checkout), the build type and sanitizers,
 * and which optional parts were built (CUDA, NCCL, ISA-L). */
void sl_opt_version(const char *prog, FILE *f);

/* The nearest of `names` to `s` (of length len) within a small edit
 * distance, or a name of which s is a prefix; NULL when none is near. */
const char *sl_opt_nearest(const char *s, size_t len, const char *const *names, size_t n);

/* Strict numbers, as the table parses them; on error err says what is
 * wrong with `s` (without an option's name). */
int sl_opt_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out, struct sl_error *err) SL_MUST_CHECK;
int sl_opt_parse_double(const char *s, double min, double max, double *out, struct sl_error *err) SL_MUST_CHECK;

#endif
