/* sl_status_line: see sl_status_line.h. */
#include "sl_status_line.h"

#include <stdarg.h>
#include <stdio.h>

#include "sl_clock.h"

void sl_status_line_init(struct sl_status_line *l, int on, uint64_t interval_ns, uint64_t first_ns)
{
    l->on = on;
    l->drawn = 0;
    l->interval_ns = interval_ns;
    l->next_ns = sl_clock_ns() + first_ns;
}

int sl_status_line_due(struct sl_status_line *l)
{
    if (!l->on)
        return 0;
    uint64_t now = sl_clock_ns();
    if (now < l->next_ns)
        return 0;
    l->next_ns = now + l->interval_ns;
    return 1;
}

void sl_status_line_draw(struct sl_status_line *l, const char *fmt, ...)
{
    if (!l->on)
        return;
    fputs("\r\033[K", stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
    l->drawn = 1;
}

void sl_status_line_clear(struct sl_status_line *l)
{
    if (l->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        l->drawn = 0;
    }
}
