/* sl_log: one line per event to a sink chosen by main (stderr by default).
 * Libraries do not log; stage loops and main do.
 * Thread-safe: yes (each line is written with one write call).
 */
#ifndef SL_LOG_H
#define SL_LOG_H

#include "sl_error.h"

enum sl_log_level { SL_LOG_DEBUG, SL_LOG_INFO, SL_LOG_WARN, SL_LOG_ERROR };

/* Set by main before threads start: the program name shown on each line,
 * the file descriptor written to, and the least level shown. */
void sl_log_setup(const char *prog, int fd, enum sl_log_level min_level);
void sl_log(enum sl_log_level level, const char *fmt, ...) SL_PRINTF(2, 3);

#endif
