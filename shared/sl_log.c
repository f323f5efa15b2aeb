/* sl_log: formats "<prog>: <level>: <message>\n" into a stack buffer and
 * writes it with a single write(2), so lines from threads never interleave. */
#include "sl_log.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "sl_clock.h"

static const char *log_prog = "sluice";
static int log_fd = 2;
static enum sl_log_level log_min = SL_LOG_INFO;

void sl_log_setup(const char *prog, int fd, enum sl_log_level min_level)
{
    log_prog = prog;
    log_fd = fd;
    log_min = min_level;
}

void sl_log(enum sl_log_level level, const char *fmt, ...)
{
    static const char *names[] = {"debug", "info", "warning", "error"};
    if (level < log_min)
        return;
    char line[2048];
    int n = snprintf(line, sizeof line, "%s: %s: ", log_prog, names[level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(log_fd, line, len);
    (void)w; /* nothing useful to do if the log sink fails */
}

void sl_log_limit_flush(struct sl_log_limit *l, int force)
{
    uint64_t now = sl_clock_ns();
    if (l->start_ns != 0 && now - l->start_ns < 1000000000u && !force)
        return;
    if (l->held > 0)
        sl_log(SL_LOG_WARN, "%" PRIu64 " more %s were not logged in %.1f s (at most %u a second are)", l->held, l->kind,
               (double)(now - l->start_ns) / 1e9, l->burst);
    l->start_ns = now;
    l->lines = 0;
    l->held = 0;
}

int sl_log_allowed(struct sl_log_limit *l)
{
    sl_log_limit_flush(l, 0);
    if (l->lines < l->burst) {
        l->lines++;
        return 1;
    }
    l->held++;
    return 0;
}
