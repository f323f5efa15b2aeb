/* sl_log: one line per event to a sink chosen by main (stderr by default).
 * Libraries do not log; stage loops and main do.
 *
 * Every line starts with its time in RFC 3339 (UTC, milliseconds):
 *     2026-12-01T15:54:21.123Z sluice-feeder: warning: MESSAGE
 * or, in the JSON format, is one object:
 *     {"time":"2026-12-01T15:54:21.123Z","prog":"sluice-feeder","pid":4242,
 *      "level":"warning","msg":"MESSAGE"}
 * (the message escaped; bytes that are not UTF-8 as \u00XX).
 * Thread-safe: yes (each line is written with one write call).
 */
#ifndef SL_LOG_H
#define SL_LOG_H

#include <stdint.h>

#include "sl_error.h"

enum sl_log_level { SL_LOG_DEBUG, SL_LOG_INFO, SL_LOG_WARN, SL_LOG_ERROR };
enum sl_log_format { SL_LOG_TEXT, SL_LOG_JSON };

/* The --log-level and --log-format choices, in enum order (for option
 * tables: "debug|info|warning|error", "text|json"). */
#define SL_LOG_LEVEL_CHOICES "debug|info|warning|error"
#define SL_LOG_FORMAT_CHOICES "text|json"

/* Set by main before threads start: the program name shown on each line,
 * the file descriptor written to, and the least level shown. */
void sl_log_setup(const char *prog, int fd, enum sl_log_level min_level);
/* The line format (text by default); before threads start. */
void sl_log_set_format(enum sl_log_format format);

/* Write the RFC 3339 time of `ns` (nanoseconds since the epoch, UTC, at
 * millisecond precision: "2026-12-01T15:54:21.123Z", 24 characters) into
 * out[0..25). */
void sl_log_time(uint64_t ns, char out[25]);
void sl_log(enum sl_log_level level, const char *fmt, ...) SL_PRINTF(2, 3);

/* A rate limit for log lines anybody can cause (a peer's malformed
 * messages, refusals): at most `burst` lines a second are logged; the rest
 * are counted, and the count is logged in one line once the second is
 * over ("2990 more malformed messages were not logged in 1.0 s (at most 10
 * a second are)"). All-zero but `kind` and `burst` is a fresh limit.
 * Thread-safe: no; one owner. */
struct sl_log_limit {
    const char *kind;  /* "refusals", ...: the summary line's subject */
    unsigned burst;    /* lines a second */
    uint64_t start_ns; /* the current second's start (0: not started) */
    unsigned lines;    /* logged in it */
    uint64_t held;     /* not logged in it */
};

/* 1: log this line; 0: hold it back (it is counted). */
int sl_log_allowed(struct sl_log_limit *l);
/* Log the count held back, if the second is over (or `force`), and start
 * a new second. Call it now and then, and once at the end. */
void sl_log_limit_flush(struct sl_log_limit *l, int force);

#endif
