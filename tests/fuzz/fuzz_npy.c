/* libFuzzer target for fmt_npy_parse_header (formats/fmt_array.c): any
 * bytes as the start of an .npy file. The parser must return 0 or
 * SL_ECORRUPT with a message; what it accepts must be self-consistent
 * (dimensions, sizes, the data's offset inside the bytes given) and must
 * mean the same array once written again as NumPy writes a header (the
 * shape printed by fmt_array_shape, the dtype by its name's code), which
 * parses back to the same fields. When a whole row follows the header it
 * is converted to every dtype fmt_array_fits allows, so ASan sees the
 * conversions read within the row. */
#include <inttypes.h>

#include "fmt_array.h"
#include "fuzz_common.h"

static const int errors[] = {SL_ECORRUPT, 0};

static void check_info(const struct fmt_array_info *a, size_t n)
{
    CHECK(a->ndims >= 1 && a->ndims <= FMT_ARRAY_MAX_DIMS);
    CHECK(a->size == 1 || a->size == 2 || a->size == 4 || a->size == 8);
    CHECK(a->kind != FMT_ARRAY_BOOL || a->size == 1);
    CHECK(a->kind != FMT_ARRAY_FLOAT || a->size == 4 || a->size == 8);
    CHECK(a->size > 1 || !a->big_endian);
    CHECK(a->rows == a->dims[0]);
    CHECK(a->data_offset <= n);
    CHECK(a->data_bytes <= FMT_ARRAY_MAX_BYTES);
    CHECK(a->row_bytes == a->row_values * a->size);
    /* a zero dimension empties the array; one after the first empties each row */
    uint64_t values = 1;
    int zero_row = 0;
    for (int i = 1; i < a->ndims; i++) {
        if (a->dims[i] == 0)
            zero_row = 1;
        else
            values *= a->dims[i]; /* bounded: the parser checked the product */
    }
    CHECK(a->row_values == (zero_row ? 0 : values));
    CHECK(a->data_bytes == (zero_row || a->rows == 0 ? 0 : a->rows * a->row_bytes));
}

/* The header NumPy would write for a (version 1.0): 0 and its length, or
 * -1 when it does not fit buf. */
static int write_header(const struct fmt_array_info *a, uint8_t *buf, size_t cap, size_t *len)
{
    char shape[256], dict[512];
    static const char kinds[] = {'b', 'u', 'i', 'f'};
    char order = a->size == 1 ? '|' : a->big_endian ? '>' : '<';
    int d = snprintf(dict, sizeof dict, "{'descr': '%c%c%u', 'fortran_order': False, 'shape': %s, }\n", order,
                     kinds[a->kind], a->size, fmt_array_shape(a, shape, sizeof shape));
    if (d < 0 || (size_t)d >= sizeof dict || 10 + (size_t)d > cap)
        return -1;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)(d & 0xff);
    buf[9] = (uint8_t)(d >> 8);
    memcpy(buf + 10, dict, (size_t)d);
    *len = 10 + (size_t)d;
    return 0;
}

static void convert_row(const struct fmt_array_info *a, const uint8_t *data, size_t size)
{
    if (a->rows == 0 || a->row_values == 0 || a->row_bytes > 4096 || size - a->data_offset < a->row_bytes)
        return;
    static const enum fmt_dtype dtypes[] = {FMT_DTYPE_INT64, FMT_DTYPE_FLOAT32, FMT_DTYPE_UINT8, FMT_DTYPE_BYTES};
    for (size_t k = 0; k < sizeof dtypes / sizeof dtypes[0]; k++) {
        struct sl_error err = {0};
        int rc = fmt_array_fits(a, dtypes[k], &err);
        if (rc != 0) {
            static const int einval[] = {SL_EINVAL, 0};
            fuzz_check_error(rc, &err, einval);
            continue;
        }
        CHECK(dtypes[k] != FMT_DTYPE_BYTES);
        size_t n = (size_t)a->row_values;
        uint8_t *out = malloc(n * 8);
        CHECK(out != NULL);
        /* a copy of exactly one row, so a read past it is caught */
        uint8_t *row = malloc((size_t)a->row_bytes);
        CHECK(row != NULL);
        memcpy(row, data + a->data_offset, (size_t)a->row_bytes);
        fmt_array_convert(a, row, n, dtypes[k], out);
        if (dtypes[k] == FMT_DTYPE_UINT8 && a->kind == FMT_ARRAY_BOOL)
            for (size_t i = 0; i < n; i++)
                CHECK(out[i] == (row[i] != 0));
        free(row);
        free(out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy of exactly `size` bytes, so a read past the end is caught */
    uint8_t *p = malloc(size ? size : 1);
    CHECK(p != NULL);
    if (size)
        memcpy(p, data, size);
    struct fmt_array_info a;
    struct sl_error err = {0};
    int rc = fmt_npy_parse_header(p, size, &a, &err);
    fuzz_note("fmt_npy_parse_header", rc, err.msg);
    if (rc != 0) {
        fuzz_check_error(rc, &err, errors);
        free(p);
        return 0;
    }
    check_info(&a, size);
    /* the header starts with the magic and a known version, and the data
     * right after the header length's field plus that length */
    CHECK(size >= 10 && memcmp(p, "\x93NUMPY", 6) == 0);
    uint64_t hlen = p[6] == 1 ? (uint64_t)p[8] | (uint64_t)p[9] << 8
                              : (uint64_t)p[8] | (uint64_t)p[9] << 8 | (uint64_t)p[10] << 16 | (uint64_t)p[11] << 24;
    CHECK(a.data_offset == (p[6] == 1 ? 10u : 12u) + hlen);

    /* written again and parsed back: the same array */
    uint8_t again[600];
    size_t len;
    if (write_header(&a, again, sizeof again, &len) == 0) {
        struct fmt_array_info b;
        CHECK(fmt_npy_parse_header(again, len, &b, &err) == 0);
        CHECK(b.data_offset == len);
        b.data_offset = a.data_offset;
        CHECK(memcmp(&a, &b, sizeof a) == 0);
    }
    convert_row(&a, p, size);
    free(p);
    return 0;
}
