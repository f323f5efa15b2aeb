/* sl_log: formats "<prog>: <level>: <message>\n" into a stack buffer and
 * writes it with a single write(2), so lines from threads never interleave. */
#include "sl_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

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
