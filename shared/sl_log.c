/* sl_log: formats one line (text or JSON, see sl_log.h) into a stack buffer
 * and writes it with a single write(2), so lines from threads never
 * interleave. */
#include "sl_log.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sl_clock.h"

static const char *log_prog = "sluice";
static int log_fd = 2;
static enum sl_log_level log_min = SL_LOG_INFO;
static enum sl_log_format log_format = SL_LOG_TEXT;

void sl_log_setup(const char *prog, int fd, enum sl_log_level min_level)
{
    log_prog = prog;
    log_fd = fd;
    log_min = min_level;
}

void sl_log_set_format(enum sl_log_format format)
{
    log_format = format;
}

void sl_log_time(uint64_t ns, char out[25])
{
    time_t secs = (time_t)(ns / 1000000000u);
    struct tm tm;
    if (gmtime_r(&secs, &tm) == NULL || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 0) {
        snprintf(out, 25, "0000-00-00T00:00:00.000Z");
        return;
    }
    char t[64]; /* the fields are in range: 24 characters and a NUL */
    snprintf(t, sizeof t, "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, (unsigned)(ns / 1000000u % 1000u));
    memcpy(out, t, 24);
    out[24] = '\0';
}

/* The message as a JSON string's body into out[0..cap): quotes,
 * backslashes and control characters escaped, bytes that do not start a
 * valid UTF-8 sequence as \u00XX; stops before a character that does not
 * fit. Returns the bytes written. */
static size_t json_body(char *out, size_t cap, const char *msg, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)msg[i];
        char esc[8];
        const char *w = NULL;
        size_t len = 1, wl;
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            w = esc;
            wl = 2;
        } else if (c < 0x20 || c == 0x7f) {
            wl = (size_t)snprintf(esc, sizeof esc, "\\u%04x", c);
            w = esc;
        } else if (c < 0x80) {
            w = msg + i;
            wl = 1;
        } else {
            /* a whole, shortest-form UTF-8 sequence, else the byte escaped */
            size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
            uint32_t cp = need ? (uint32_t)(c & (0x7F >> need)) : 0;
            int ok = need != 0 && i + need <= n;
            for (size_t k = 1; ok && k < need; k++) {
                unsigned char d = (unsigned char)msg[i + k];
                ok = (d & 0xC0) == 0x80;
                cp = cp << 6 | (d & 0x3F);
            }
            static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
            if (ok && cp >= min[need] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF)) {
                w = msg + i;
                wl = len = need;
            } else {
                wl = (size_t)snprintf(esc, sizeof esc, "\\u%04x", c);
                w = esc;
            }
        }
        if (o + wl > cap)
            break;
        for (size_t k = 0; k < wl; k++)
            out[o++] = w[k];
        i += len;
    }
    return o;
}

void sl_log(enum sl_log_level level, const char *fmt, ...)
{
    static const char *names[] = {"debug", "info", "warning", "error"};
    if (level < log_min)
        return;
    char when[25], msg[2048], line[4096];
    sl_log_time(sl_wall_ns(), when);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t mlen = m < 0 ? 0 : (size_t)m < sizeof msg ? (size_t)m : sizeof msg - 1;
    size_t len;
    if (log_format == SL_LOG_JSON) {
        int n = snprintf(line, sizeof line, "{\"time\":\"%s\",\"prog\":\"%s\",\"pid\":%ld,\"level\":\"%s\",\"msg\":\"",
                         when, log_prog, (long)getpid(), names[level]);
        len = (size_t)n;
        len += json_body(line + len, sizeof line - len - 3, msg, mlen);
        line[len++] = '"';
        line[len++] = '}';
    } else {
        int n = snprintf(line, sizeof line, "%s %s: %s: %.*s", when, log_prog, names[level], (int)mlen, msg);
        len = n < 0 ? 0 : (size_t)n < sizeof line - 1 ? (size_t)n : sizeof line - 2;
    }
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
