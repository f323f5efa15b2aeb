/* sl_base64: table-driven; encodes straight into the output buffer. */
#include "sl_base64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int sl_base64_encode(struct sl_buf *b, const void *src, size_t n)
{
    int rc = sl_buf_reserve(b, sl_base64_encoded_len(n));
    if (rc != 0)
        return rc;
    const uint8_t *p = src;
    char *o = (char *)b->data + b->len;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = alphabet[(v >> 6) & 63];
        *o++ = alphabet[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        *o++ = alphabet[v >> 18];
        *o++ = alphabet[(v >> 12) & 63];
        *o++ = i + 1 < n ? alphabet[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    b->len = (size_t)((uint8_t *)o - b->data);
    return 0;
}

static int value_of(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62; /* '-' and '_': URL-safe input too */
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

int sl_base64_decode(struct sl_buf *b, const char *s, size_t n)
{
    while (n > 0 && s[n - 1] == '=')
        n--;
    if (n % 4 == 1)
        return SL_EINVAL;
    int rc = sl_buf_reserve(b, n / 4 * 3 + 2);
    if (rc != 0)
        return rc;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = value_of(s[i]);
        if (v < 0)
            return SL_EINVAL;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            b->data[b->len++] = (uint8_t)(acc >> bits);
        }
    }
    return 0;
}
