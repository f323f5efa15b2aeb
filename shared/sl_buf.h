/* sl_buf: a growable byte buffer with a hard size limit (as curl's dynbuf).
 * Owned by the caller; all-zero plus sl_buf_init() is an empty buffer.
 * Growth past `max` fails with SL_EINVAL, so a length read
 * from data can never size an unbounded allocation.
 */
#ifndef SL_BUF_H
#define SL_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

struct sl_buf {
    uint8_t *data; /* owned; NULL while empty */
    size_t len;
    size_t cap;
    size_t max; /* 0: SIZE_MAX / 2 */
};

void sl_buf_init(struct sl_buf *b, size_t max);
void sl_buf_free(struct sl_buf *b);
static inline void sl_buf_reset(struct sl_buf *b)
{
    b->len = 0;
}

/* Make room for `extra` more bytes. 0 or SL_ENOMEM / SL_EINVAL (over max). */
int sl_buf_reserve(struct sl_buf *b, size_t extra) SL_MUST_CHECK;
int sl_buf_append(struct sl_buf *b, const void *p, size_t n) SL_MUST_CHECK;
int sl_buf_putc(struct sl_buf *b, int c) SL_MUST_CHECK;
int sl_buf_puts(struct sl_buf *b, const char *s) SL_MUST_CHECK;
int sl_buf_printf(struct sl_buf *b, const char *fmt, ...) SL_PRINTF(2, 3) SL_MUST_CHECK;

#endif
