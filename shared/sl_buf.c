/* sl_buf: geometric growth, bounded by b->max. */
#include "sl_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sl_alloc.h"

void sl_buf_init(struct sl_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max ? max : SIZE_MAX / 2;
}

void sl_buf_free(struct sl_buf *b)
{
    sl_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

int sl_buf_reserve(struct sl_buf *b, size_t extra)
{
    size_t max = b->max ? b->max : SIZE_MAX / 2;
    if (extra > max || b->len > max - extra)
        return SL_EINVAL;
    size_t need = b->len + extra;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap > max / 2 ? max : cap * 2;
    uint8_t *p = sl_realloc(b->data, cap);
    if (p == NULL)
        return SL_ENOMEM;
    b->data = p;
    b->cap = cap;
    return 0;
}

int sl_buf_append(struct sl_buf *b, const void *p, size_t n)
{
    int rc = sl_buf_reserve(b, n);
    if (rc != 0)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

int sl_buf_putc(struct sl_buf *b, int c)
{
    uint8_t ch = (uint8_t)c;
    return sl_buf_append(b, &ch, 1);
}

int sl_buf_puts(struct sl_buf *b, const char *s)
{
    return sl_buf_append(b, s, strlen(s));
}

int sl_buf_printf(struct sl_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return SL_EINVAL;
    int rc = sl_buf_reserve(b, (size_t)n + 1);
    if (rc != 0)
        return rc;
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}
