/* fmt_types: dtype names and sizes, NumPy's names for array element
 * types, and the conversion of stored array values into a dtype (the rules
 * fmt_types.h states: the Example decoder's, which takes a feature's values
 * only from the list of its own kind).
 */
#include "fmt_types.h"

#include <string.h>

const char *fmt_dtype_name(enum fmt_dtype t)
{
    switch (t) {
    case FMT_DTYPE_INT64: return "int64";
    case FMT_DTYPE_FLOAT32: return "float32";
    case FMT_DTYPE_BYTES: return "bytes";
    case FMT_DTYPE_UINT8: return "uint8";
    case FMT_DTYPE_FLOAT16: return "float16";
    case FMT_DTYPE_BFLOAT16: return "bfloat16";
    default: return "unknown";
    }
}

int fmt_dtype_parse(const char *s, enum fmt_dtype *out)
{
    static const struct {
        const char *name;
        enum fmt_dtype t;
    } names[] = {
        {"int64", FMT_DTYPE_INT64}, {"float32", FMT_DTYPE_FLOAT32}, {"float", FMT_DTYPE_FLOAT32},
        {"bytes", FMT_DTYPE_BYTES}, {"string", FMT_DTYPE_BYTES},    {"uint8", FMT_DTYPE_UINT8},
    };
    if (s == NULL)
        return SL_EINVAL;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].t;
            return 0;
        }
    }
    return SL_EINVAL;
}

size_t fmt_dtype_size(enum fmt_dtype t)
{
    switch (t) {
    case FMT_DTYPE_INT64: return 8;
    case FMT_DTYPE_FLOAT32: return 4;
    case FMT_DTYPE_UINT8: return 1;
    case FMT_DTYPE_FLOAT16:
    case FMT_DTYPE_BFLOAT16: return 2;
    default: return 0;
    }
}

const char *fmt_array_type_name(const struct fmt_array_info *a)
{
    switch (a->kind) {
    case FMT_ARRAY_BOOL: return "bool";
    case FMT_ARRAY_UINT: return a->size == 1 ? "uint8" : a->size == 2 ? "uint16" : a->size == 4 ? "uint32" : "uint64";
    case FMT_ARRAY_INT: return a->size == 1 ? "int8" : a->size == 2 ? "int16" : a->size == 4 ? "int32" : "int64";
    case FMT_ARRAY_FLOAT: return a->size == 4 ? "float32" : "float64";
    }
    return "?";
}

/* ---- arrays into dtypes ---- */

int fmt_array_fits(const struct fmt_array_info *a, enum fmt_dtype t, struct sl_error *err)
{
    const char *name = fmt_array_type_name(a);
    switch (t) {
    case FMT_DTYPE_INT64:
        if (a->kind == FMT_ARRAY_FLOAT)
            return sl_error_set(err, SL_EINVAL, "%s values cannot fill an int64 feature (declare it float32)", name);
        if (a->kind == FMT_ARRAY_UINT && a->size == 8)
            return sl_error_set(err, SL_EINVAL, "uint64 values do not all fit int64");
        return 0;
    case FMT_DTYPE_FLOAT32:
        if (a->kind == FMT_ARRAY_FLOAT && a->size == 4)
            return 0;
        if (a->kind == FMT_ARRAY_FLOAT)
            return sl_error_set(err, SL_EINVAL, "float64 values do not fit float32 without loss (save as float32)");
        return sl_error_set(err, SL_EINVAL, "%s values cannot fill a float32 feature (declare it int64)", name);
    case FMT_DTYPE_UINT8:
        if ((a->kind == FMT_ARRAY_UINT && a->size == 1) || a->kind == FMT_ARRAY_BOOL)
            return 0;
        return sl_error_set(err, SL_EINVAL, "%s values do not all fit uint8 (declare it %s)", name,
                            a->kind == FMT_ARRAY_FLOAT ? "float32" : "int64");
    case FMT_DTYPE_BYTES: break;
    case FMT_DTYPE_FLOAT16: /* a map's output only: no job declares it */
    case FMT_DTYPE_BFLOAT16: return sl_error_set(err, SL_EINVAL, "arrays cannot fill a %s feature", fmt_dtype_name(t));
    }
    return sl_error_set(err, SL_EINVAL, "arrays cannot fill a bytes feature");
}

static uint64_t load(const uint8_t *q, uint32_t size, int big)
{
    uint64_t v = 0;
    if (big)
        for (uint32_t i = 0; i < size; i++)
            v = v << 8 | q[i];
    else
        for (uint32_t i = size; i-- > 0;)
            v = v << 8 | q[i];
    return v;
}

static int64_t signed_of(uint64_t v, uint32_t size)
{
    if (size == 8)
        return (int64_t)v;
    uint64_t sign = (uint64_t)1 << (8 * size - 1);
    return (int64_t)((v ^ sign) - sign);
}

void fmt_array_convert(const struct fmt_array_info *a, const uint8_t *src, size_t n, enum fmt_dtype t, void *dst)
{
    const uint32_t size = a->size;
    const int big = a->big_endian;
    static const uint16_t one = 1;
    const int host_little = *(const uint8_t *)&one == 1;
    if (t == FMT_DTYPE_UINT8) {
        uint8_t *d = dst;
        if (a->kind == FMT_ARRAY_BOOL)
            for (size_t i = 0; i < n; i++)
                d[i] = src[i] != 0;
        else
            memcpy(d, src, n);
        return;
    }
    if (t == FMT_DTYPE_FLOAT32) {
        if (big == !host_little) {
            memcpy(dst, src, n * 4);
            return;
        }
        float *d = dst;
        for (size_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)load(src + 4 * i, 4, big);
            memcpy(&d[i], &u, 4);
        }
        return;
    }
    int64_t *d = dst;
    if (a->kind == FMT_ARRAY_INT && size == 8 && big == !host_little) {
        memcpy(d, src, n * 8);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const uint8_t *q = src + (size_t)size * i;
        if (a->kind == FMT_ARRAY_BOOL)
            d[i] = q[0] != 0;
        else if (a->kind == FMT_ARRAY_UINT)
            d[i] = (int64_t)(size == 1 ? q[0] : load(q, size, big));
        else
            d[i] = size == 1 ? (int8_t)q[0] : signed_of(load(q, size, big), size);
    }
}
