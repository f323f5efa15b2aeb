/* sl_status_line: the one-line status every sluice program draws on a
 * terminal's stderr (sluice-record's and sluice-bench's progress bar,
 * sluice-trainer's epoch/step line): redrawn in place at most once an
 * interval, cleared before a log line so the log starts on a clean line.
 * Off (nothing drawn, nothing to clear) when stderr is not a terminal or
 * the caller says so.
 *
 * Thread-safe: no; one owner, the thread that writes stderr's log lines.
 */
#ifndef SL_STATUS_LINE_H
#define SL_STATUS_LINE_H

#include <stdint.h>

#include "sl_error.h" /* SL_PRINTF */

struct sl_status_line {
    int on, drawn;
    uint64_t interval_ns, next_ns;
};

/* on: draw at all (the caller's choice, e.g. stderr is a terminal);
 * interval_ns: the least time between draws; first_ns: how long after now
 * the first draw may come (0: at once). */
void sl_status_line_init(struct sl_status_line *l, int on, uint64_t interval_ns, uint64_t first_ns);

/* 1 when a draw is due (on, and its interval has passed: the next one is
 * then an interval away), else 0. Cheap: one clock read. */
int sl_status_line_due(struct sl_status_line *l);

/* Draw the line in place of the last one (when on). */
void sl_status_line_draw(struct sl_status_line *l, const char *fmt, ...) SL_PRINTF(2, 3);

/* Erase the line, if one is drawn. */
void sl_status_line_clear(struct sl_status_line *l);

#endif
