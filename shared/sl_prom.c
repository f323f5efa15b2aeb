/* sl_prom: the Prometheus text format (see sl_prom.h). Everything goes
 * through put(), which keeps the first error. */
#include "sl_prom.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sl_version.h"

static void put(struct sl_prom *p, const char *s, size_t n)
{
    if (p->rc == 0)
        p->rc = sl_buf_append(p->b, s, n);
}

static void puts_(struct sl_prom *p, const char *s)
{
    put(p, s, strlen(s));
}

/* s with each of `special` escaped by a backslash, newline as \n */
static int escape(struct sl_buf *b, const char *s, const char *special)
{
    int rc = 0;
    for (; rc == 0 && *s != '\0'; s++) {
        if (*s == '\n') {
            rc = sl_buf_append(b, "\\n", 2);
            continue;
        }
        if (strchr(special, *s) != NULL)
            rc = sl_buf_putc(b, '\\');
        if (rc == 0)
            rc = sl_buf_putc(b, *s);
    }
    return rc;
}

int sl_prom_label(struct sl_buf *b, const char *name, const char *value)
{
    int rc = b->len > 0 ? sl_buf_putc(b, ',') : 0;
    if (rc == 0)
        rc = sl_buf_printf(b, "%s=\"", name);
    if (rc == 0)
        rc = escape(b, value != NULL ? value : "", "\\\"");
    if (rc == 0)
        rc = sl_buf_putc(b, '"');
    if (rc == 0)
        rc = sl_buf_reserve(b, 1);
    if (rc == 0)
        b->data[b->len] = '\0'; /* a C string, the NUL not counted */
    return rc;
}

void sl_prom_family(struct sl_prom *p, const char *name, const char *type, const char *help)
{
    puts_(p, "# HELP ");
    puts_(p, name);
    put(p, " ", 1);
    if (p->rc == 0)
        p->rc = escape(p->b, help, "\\");
    puts_(p, "\n# TYPE ");
    puts_(p, name);
    put(p, " ", 1);
    puts_(p, type);
    put(p, "\n", 1);
}

void sl_prom_counter(struct sl_prom *p, const char *name, const char *help, uint64_t v)
{
    sl_prom_family(p, name, "counter", help);
    sl_prom_u64(p, name, NULL, v);
}

void sl_prom_gauge(struct sl_prom *p, const char *name, const char *help, uint64_t v)
{
    sl_prom_family(p, name, "gauge", help);
    sl_prom_u64(p, name, NULL, v);
}

void sl_prom_process_info(struct sl_prom *p, const char *program)
{
    /* both constants of ours (no quote, backslash or newline to escape) */
    char extra[96];
    snprintf(extra, sizeof extra, "program=\"%s\",version=\"%s\"", program, SL_VERSION);
    sl_prom_family(p, SL_PROM_PROCESS_INFO, "gauge",
                   "Always 1: a sluice process serving /metrics (program: feeder, trainer, ps or client; version: "
                   "sluice's), with its job and index labels.");
    sl_prom_u64(p, SL_PROM_PROCESS_INFO, extra, 1);
}

void sl_prom_counter_seconds(struct sl_prom *p, const char *name, const char *help, uint64_t ns)
{
    sl_prom_family(p, name, "counter", help);
    sl_prom_seconds(p, name, NULL, ns);
}

/* name{labels,a,b} and a space (a and b may be NULL or empty) */
static void sample_name(struct sl_prom *p, const char *name, const char *a, const char *b)
{
    const char *parts[3] = {p->labels, a, b};
    int any = 0;
    puts_(p, name);
    for (int i = 0; i < 3; i++) {
        if (parts[i] == NULL || parts[i][0] == '\0')
            continue;
        put(p, any ? "," : "{", 1);
        puts_(p, parts[i]);
        any = 1;
    }
    if (any)
        put(p, "}", 1);
    put(p, " ", 1);
}

static void value_line(struct sl_prom *p, const char *fmt, ...) SL_PRINTF(2, 3);

static void value_line(struct sl_prom *p, const char *fmt, ...)
{
    char v[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    put(p, v, n > 0 && (size_t)n < sizeof v ? (size_t)n : 0);
    put(p, "\n", 1);
}

void sl_prom_u64(struct sl_prom *p, const char *name, const char *extra, uint64_t v)
{
    sample_name(p, name, extra, NULL);
    value_line(p, "%" PRIu64, v);
}

void sl_prom_seconds(struct sl_prom *p, const char *name, const char *extra, uint64_t ns)
{
    sample_name(p, name, extra, NULL);
    value_line(p, "%" PRIu64 ".%09" PRIu64, ns / 1000000000u, ns % 1000000000u);
}

void sl_prom_double(struct sl_prom *p, const char *name, const char *extra, double v)
{
    sample_name(p, name, extra, NULL);
    if (isnan(v))
        value_line(p, "NaN");
    else if (isinf(v))
        value_line(p, "%s", v > 0 ? "+Inf" : "-Inf");
    else
        value_line(p, "%.17g", v);
}

/* ns as the shortest decimal seconds ("0.00025", "1", "10") */
static void seconds_text(uint64_t ns, char *out, size_t n)
{
    snprintf(out, n, "%" PRIu64 ".%09" PRIu64, ns / 1000000000u, ns % 1000000000u);
    size_t len = strlen(out);
    while (len > 0 && out[len - 1] == '0')
        out[--len] = '\0';
    if (len > 0 && out[len - 1] == '.')
        out[--len] = '\0';
}

void sl_prom_hist(struct sl_prom *p, const char *name, const char *help, const char *extra,
                  const struct sl_hist_snap *h)
{
    char sub[160], le[64];
    sl_prom_family(p, name, "histogram", help);
    snprintf(sub, sizeof sub, "%s_bucket", name);
    for (size_t i = 0; i <= h->n; i++) {
        char secs[40] = "+Inf";
        if (i < h->n)
            seconds_text(h->bounds_ns[i], secs, sizeof secs);
        snprintf(le, sizeof le, "le=\"%s\"", secs);
        sample_name(p, sub, extra, le);
        value_line(p, "%" PRIu64, h->cum[i]);
    }
    snprintf(sub, sizeof sub, "%s_sum", name);
    sl_prom_seconds(p, sub, extra, h->sum_ns);
    snprintf(sub, sizeof sub, "%s_count", name);
    sl_prom_u64(p, sub, extra, h->cum[h->n]);
}
