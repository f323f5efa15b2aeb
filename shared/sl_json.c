/* sl_json: escaping per RFC 8259; control characters as \uXXXX. UTF-8 is
 * validated so that arbitrary bytes (paths, tar keys) still give valid JSON. */
#include "sl_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t min;
    if (c < 0x80)
        return 1;
    else if ((c & 0xE0) == 0xC0) {
        len = 2;
        min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3;
        min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4;
        min = 0x10000;
    } else
        return 0;
    if (len > n)
        return 0;
    uint32_t cp = c & (0x7F >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

int sl_json_string(struct sl_buf *b, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    int rc = sl_buf_reserve(b, n + 2);
    if (rc != 0)
        return rc;
    b->data[b->len++] = '"';
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && s[run] >= 0x20 && s[run] < 0x80 && s[run] != '"' && s[run] != '\\')
            run++;
        if (run > i) {
            if ((rc = sl_buf_append(b, s + i, run - i)) != 0)
                return rc;
            i = run;
            continue;
        }
        unsigned char c = s[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            rc = sl_buf_append(b, esc, 2);
            i++;
        } else if (c < 0x20) {
            const char *short_esc = c == '\n'   ? "\\n"
                                    : c == '\t' ? "\\t"
                                    : c == '\r' ? "\\r"
                                    : c == '\b' ? "\\b"
                                    : c == '\f' ? "\\f"
                                                : NULL;
            rc = short_esc ? sl_buf_puts(b, short_esc) : sl_buf_printf(b, "\\u%04x", c);
            i++;
        } else {
            size_t len = utf8_seq_len(s + i, n - i);
            if (len == 0) {
                rc = sl_buf_printf(b, "\\u%04x", c);
                i++;
            } else {
                rc = sl_buf_append(b, s + i, len);
                i += len;
            }
        }
        if (rc != 0)
            return rc;
    }
    return sl_buf_putc(b, '"');
}

int sl_json_float(struct sl_buf *b, float v)
{
    if (isnan(v))
        return sl_buf_puts(b, "\"NaN\"");
    if (isinf(v))
        return sl_buf_puts(b, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    char tmp[32];
    for (int prec = 1; prec <= 9; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, (double)v);
        if (strtof(tmp, NULL) == v)
            break;
    }
    return sl_buf_puts(b, tmp);
}
