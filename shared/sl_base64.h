/* sl_base64: standard base64 (RFC 4648, with padding), as protobuf's JSON
 * mapping writes bytes. */
#ifndef SL_BASE64_H
#define SL_BASE64_H

#include <stddef.h>
#include <stdint.h>

#include "sl_buf.h"

static inline size_t sl_base64_encoded_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

/* Append the encoding of p[0..n) to b. */
int sl_base64_encode(struct sl_buf *b, const void *p, size_t n) SL_MUST_CHECK;

/* Decode s[0..n) (padding optional, whitespace not allowed) and append to b.
 * SL_EINVAL on a character outside the alphabet or a bad length. */
int sl_base64_decode(struct sl_buf *b, const char *s, size_t n) SL_MUST_CHECK;

#endif
