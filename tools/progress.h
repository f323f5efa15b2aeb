/* progress: a one-line progress bar on stderr for long tool runs.
 *
 * Drawn only when stderr is a terminal; redrawn at most ~10 times a second
 * (the clock is read only every 64 updates or 4 MiB, so progress_update is
 * cheap enough to call per record). Shows records/s and MB/s, and a
 * percentage when a total (records or bytes) is known.
 *
 * Thread-safe: no; one owner.
 */
#ifndef PROGRESS_H
#define PROGRESS_H

#include <stdint.h>

#include "sl_status_line.h"

struct progress {
    struct sl_status_line line; /* on when stderr is a terminal */
    const char *label;          /* borrowed */
    const char *unit;           /* borrowed; NULL: records and bytes. Else the bar
                               counts `records` in this unit ("3/9 runs") */
    uint64_t total_records;     /* 0: unknown */
    uint64_t total_bytes;       /* 0: unknown */
    uint64_t records;
    uint64_t bytes;
    uint64_t start_ns;
    uint64_t check_bytes; /* bytes at the last clock check */
    unsigned calls;
};

/* Start a bar; `label` must outlive it. A total of 0 means unknown; the
 * percentage follows records when total_records is set, else bytes. */
void progress_init(struct progress *p, const char *label, uint64_t total_records, uint64_t total_bytes);

void progress__tick(struct progress *p);

/* Set the running totals (absolute, not increments). */
static inline void progress_update(struct progress *p, uint64_t records, uint64_t bytes)
{
    p->records = records;
    p->bytes = bytes;
    if (p->line.on && ((++p->calls & 63) == 0 || bytes - p->check_bytes >= ((uint64_t)4 << 20)))
        progress__tick(p);
}

/* Redraw now if the last draw is old enough (for callers that update
 * rarely, such as once per run). */
void progress_draw(struct progress *p);

/* Erase the bar (if drawn) so that following stderr lines start clean;
 * call before printing messages and at the end. */
void progress_clear(struct progress *p);

#endif
