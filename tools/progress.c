/* progress: the bar is one stderr line rewritten in place with "\r" and
 * erased with "\r\033[K". It never writes when stderr is not a terminal, so
 * logs and test output stay clean. Rates are averages since the start: a
 * record tool's rate is steady and an average does not flicker. */
#include "progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "sl_clock.h"

#define DRAW_INTERVAL_NS 100000000u /* 10 redraws a second at most */

void progress_init(struct progress *p, const char *label, uint64_t total_records, uint64_t total_bytes)
{
    p->label = label;
    p->unit = NULL;
    p->total_records = total_records;
    p->total_bytes = total_bytes;
    p->records = 0;
    p->bytes = 0;
    p->start_ns = sl_clock_ns();
    /* no bar for runs that end within half a second */
    sl_status_line_init(&p->line, isatty(STDERR_FILENO), DRAW_INTERVAL_NS, 5 * DRAW_INTERVAL_NS);
    p->check_bytes = 0;
    p->calls = 0;
}

static void human(char *out, size_t n, double v)
{
    if (v >= 1e9)
        snprintf(out, n, "%.2fG", v / 1e9);
    else if (v >= 1e6)
        snprintf(out, n, "%.2fM", v / 1e6);
    else if (v >= 1e3)
        snprintf(out, n, "%.1fk", v / 1e3);
    else
        snprintf(out, n, "%.0f", v);
}

void progress__tick(struct progress *p)
{
    if (!p->line.on)
        return;
    p->check_bytes = p->bytes;
    if (!sl_status_line_due(&p->line))
        return;
    double secs = (double)(sl_clock_ns() - p->start_ns) / 1e9;
    if (secs <= 0)
        secs = 1e-9;
    if (p->unit != NULL) {
        sl_status_line_draw(&p->line, "%s: %" PRIu64 "/%" PRIu64 " %s done, %.0f s", p->label, p->records,
                            p->total_records, p->unit, secs);
        return;
    }
    char pct[16] = "";
    if (p->total_records)
        snprintf(pct, sizeof pct, "%5.1f%% ", 100.0 * (double)p->records / (double)p->total_records);
    else if (p->total_bytes)
        snprintf(pct, sizeof pct, "%5.1f%% ", 100.0 * (double)p->bytes / (double)p->total_bytes);
    char recs[24], rate[24];
    human(recs, sizeof recs, (double)p->records);
    human(rate, sizeof rate, (double)p->records / secs);
    sl_status_line_draw(&p->line, "%s: %s%s records, %.1f MB | %s rec/s, %.1f MB/s", p->label, pct, recs,
                        (double)p->bytes / 1e6, rate, (double)p->bytes / 1e6 / secs);
}

void progress_draw(struct progress *p)
{
    progress__tick(p);
}

void progress_clear(struct progress *p)
{
    sl_status_line_clear(&p->line);
}
