/* libFuzzer target for IDX headers (formats/fmt_idx.c's
 * fmt_idx_parse_header, and fmt_array.c's fmt_idx_parse_array over it):
 * any bytes as the start of an IDX file. Both return 0 or SL_ECORRUPT
 * with a message; they agree (the array view fails only where the header
 * does, or for an array past 2^62 bytes); an accepted header is written
 * again from what was decoded into exactly the bytes read, and its sizes
 * are consistent and within the 1 GiB element limit. */
#include "fmt_array.h"
#include "fmt_idx.h"
#include "fuzz_common.h"

static const int errors[] = {SL_ECORRUPT, 0};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *p = malloc(size ? size : 1);
    CHECK(p != NULL);
    if (size)
        memcpy(p, data, size);
    struct fmt_idx_info in;
    struct fmt_array_info a;
    struct sl_error err = {0}, aerr = {0};
    size_t hdr = 0;
    int rc = fmt_idx_parse_header(p, size, &in, &hdr, &err);
    int arc = fmt_idx_parse_array(p, size, &a, &aerr);
    fuzz_note("fmt_idx_parse_header", rc, err.msg);
    fuzz_note("fmt_idx_parse_array", arc, aerr.msg);
    if (rc != 0) {
        fuzz_check_error(rc, &err, errors);
        fuzz_check_error(arc, &aerr, errors);
        CHECK(strcmp(err.msg, aerr.msg) == 0);
        free(p);
        return 0;
    }
    CHECK(in.ndims >= 1 && in.ndims <= FMT_IDX_MAX_DIMS);
    CHECK(hdr == 4 + 4 * (size_t)in.ndims && hdr <= size);
    CHECK(in.type_size == 1 || in.type_size == 2 || in.type_size == 4 || in.type_size == 8);
    CHECK(in.count == in.dims[0]);
    CHECK(in.elem_bytes == in.elem_values * in.type_size && in.elem_bytes <= ((size_t)1 << 30));
    /* written again: the same bytes */
    uint8_t again[4 + 4 * FMT_IDX_MAX_DIMS] = {0, 0, in.type, (uint8_t)in.ndims};
    for (int i = 0; i < in.ndims; i++) {
        again[4 + 4 * i] = (uint8_t)(in.dims[i] >> 24);
        again[5 + 4 * i] = (uint8_t)(in.dims[i] >> 16);
        again[6 + 4 * i] = (uint8_t)(in.dims[i] >> 8);
        again[7 + 4 * i] = (uint8_t)in.dims[i];
    }
    CHECK(memcmp(again, p, hdr) == 0);
    if (arc != 0) {
        fuzz_check_error(arc, &aerr, errors);
        CHECK(strstr(aerr.msg, "more than 2^62 bytes") != NULL);
    } else {
        CHECK(a.data_offset == hdr && a.ndims == in.ndims && a.size == in.type_size);
        CHECK(a.big_endian == (in.type_size > 1));
        for (int i = 0; i < in.ndims; i++)
            CHECK(a.dims[i] == in.dims[i]);
        CHECK(a.rows == in.count && a.row_bytes == a.row_values * a.size && a.data_bytes <= FMT_ARRAY_MAX_BYTES);
        if (a.rows != 0 && a.row_values != 0)
            CHECK(a.row_values == in.elem_values && a.row_bytes == in.elem_bytes);
    }
    free(p);
    return 0;
}
