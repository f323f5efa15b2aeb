/* fmt_array: .npy headers (a tiny reader for the one Python literal NumPy
 * writes there), IDX headers as arrays, and the "arrays"
 * format's table: a scan that reads each member's header and checks its
 * data's size (streaming a compressed member through once), a frame that
 * lends each member's row, a decode that converts them into the columns
 * (the rules from stored types to dtypes are fmt_types.c's).
 *
 * The .npy header is "\x93NUMPY", a version byte pair, a little-endian
 * length (u16 in 1.0, u32 in 2.0 and 3.0), then that many bytes holding a
 * dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * padded with spaces and a newline. Only that literal is read: string keys
 * and values without escapes, True/False, a tuple of decimal integers.
 */
#include "fmt_array.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fmt_features.h"
#include "fmt_format.h"
#include "fmt_job.h"
#include "fmt_idx.h"
#include "fmt_stream.h"
#include "sl_alloc.h"

static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

const char *fmt_array_shape(const struct fmt_array_info *a, char *buf, size_t cap)
{
    size_t n = 0;
    if (cap == 0)
        return buf;
    buf[0] = '\0';
    n += (size_t)snprintf(buf + n, cap - n, "(");
    for (int i = 0; i < a->ndims && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%" PRIu64, i ? ", " : "", a->dims[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, a->ndims == 1 ? ",)" : ")");
    return buf;
}

/* rows, row_values, row_bytes, data_bytes from dims; 0, or 1 when the
 * array would hold more than FMT_ARRAY_MAX_BYTES. */
static int sizes(struct fmt_array_info *a)
{
    uint64_t total = a->size;
    int zero = 0;
    a->row_values = 1;
    for (int i = 0; i < a->ndims; i++) {
        uint64_t d = a->dims[i];
        if (d == 0) {
            zero = 1;
            continue;
        }
        if (total > FMT_ARRAY_MAX_BYTES / d)
            return 1;
        total *= d;
        if (i > 0)
            a->row_values *= d;
    }
    /* a zero dimension makes the array empty, but the others still bound
     * the row: every product above stayed within 2^62 */
    for (int i = 1; i < a->ndims; i++)
        if (a->dims[i] == 0)
            a->row_values = 0;
    a->rows = a->dims[0];
    a->row_bytes = a->row_values * a->size;
    a->data_bytes = zero ? 0 : total;
    return 0;
}

/* ---- .npy headers ---- */

struct lex {
    const uint8_t *p;
    size_t pos, end; /* positions in the file */
};

static void ws(struct lex *l)
{
    while (l->pos < l->end &&
           (l->p[l->pos] == ' ' || l->p[l->pos] == '\t' || l->p[l->pos] == '\n' || l->p[l->pos] == '\r'))
        l->pos++;
}

static int at(const struct lex *l, char c)
{
    return l->pos < l->end && l->p[l->pos] == (uint8_t)c;
}

static int expect(struct lex *l, char c, struct sl_error *err)
{
    ws(l);
    if (!at(l, c))
        return sl_error_set(err, SL_ECORRUPT, "npy header: expected '%c' at %zu", c, l->pos);
    l->pos++;
    return 0;
}

/* A quoted string without escapes: its bytes [*s, *s + *len). */
static int string(struct lex *l, size_t *s, size_t *len, struct sl_error *err)
{
    ws(l);
    size_t start = l->pos;
    if (!at(l, '\'') && !at(l, '"'))
        return sl_error_set(err, SL_ECORRUPT, "npy header: expected a string at %zu", l->pos);
    uint8_t q = l->p[l->pos++];
    while (l->pos < l->end && l->p[l->pos] != q) {
        if (l->p[l->pos] == '\\')
            return sl_error_set(err, SL_ECORRUPT, "npy header: escapes are not supported in strings at %zu", l->pos);
        l->pos++;
    }
    if (l->pos == l->end)
        return sl_error_set(err, SL_ECORRUPT, "npy header: unterminated string at %zu", start);
    *s = start + 1;
    *len = l->pos - start - 1;
    l->pos++;
    return 0;
}

/* Printable, bounded: for messages. */
static const char *shown(const struct lex *l, size_t s, size_t len, char *buf, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < len && n + 4 < cap; i++) {
        uint8_t c = l->p[s + i];
        buf[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (len > 0 && n < len && n + 3 < cap) {
        buf[n++] = '.';
        buf[n++] = '.';
        buf[n++] = '.';
    }
    buf[n] = '\0';
    return buf;
}

static int parse_descr(struct lex *l, struct fmt_array_info *a, struct sl_error *err)
{
    size_t s, len;
    ws(l);
    size_t where = l->pos;
    int rc = string(l, &s, &len, err);
    if (rc != 0)
        return rc;
    const uint8_t *d = l->p + s;
    int ok = len == 3 && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=');
    if (ok) {
        a->size = (uint32_t)(d[2] - '0');
        a->big_endian = d[0] == '>';
        switch (d[1]) {
        case 'b':
            a->kind = FMT_ARRAY_BOOL;
            ok = a->size == 1;
            break;
        case 'u':
            a->kind = FMT_ARRAY_UINT;
            ok = a->size == 1 || a->size == 2 || a->size == 4 || a->size == 8;
            break;
        case 'i':
            a->kind = FMT_ARRAY_INT;
            ok = a->size == 1 || a->size == 2 || a->size == 4 || a->size == 8;
            break;
        case 'f':
            a->kind = FMT_ARRAY_FLOAT;
            ok = a->size == 4 || a->size == 8;
            break;
        default: ok = 0;
        }
        if (a->size == 1)
            a->big_endian = 0;
    }
    if (!ok) {
        char b[40];
        return sl_error_set(err, SL_ECORRUPT,
                            "npy header: dtype '%s' is not supported (bool, int8-64, uint8-64, float32, float64) "
                            "at %zu",
                            shown(l, s, len, b, sizeof b), where);
    }
    return 0;
}

static int parse_bool(struct lex *l, int *out, struct sl_error *err)
{
    ws(l);
    size_t left = l->end - l->pos;
    if (left >= 4 && memcmp(l->p + l->pos, "True", 4) == 0) {
        *out = 1;
        l->pos += 4;
        return 0;
    }
    if (left >= 5 && memcmp(l->p + l->pos, "False", 5) == 0) {
        *out = 0;
        l->pos += 5;
        return 0;
    }
    return sl_error_set(err, SL_ECORRUPT, "npy header: expected True or False at %zu", l->pos);
}

static int parse_shape(struct lex *l, struct fmt_array_info *a, struct sl_error *err)
{
    int rc = expect(l, '(', err);
    if (rc != 0)
        return rc;
    a->ndims = 0;
    for (;;) {
        ws(l);
        if (at(l, ')')) {
            l->pos++;
            return 0;
        }
        if (!(l->pos < l->end && l->p[l->pos] >= '0' && l->p[l->pos] <= '9'))
            return sl_error_set(err, SL_ECORRUPT, "npy header: expected a dimension or ')' at %zu", l->pos);
        if (a->ndims == FMT_ARRAY_MAX_DIMS)
            return sl_error_set(err, SL_ECORRUPT, "npy header: more than %d dimensions at %zu", FMT_ARRAY_MAX_DIMS,
                                l->pos);
        size_t start = l->pos;
        uint64_t v = 0;
        while (l->pos < l->end && l->p[l->pos] >= '0' && l->p[l->pos] <= '9') {
            v = v * 10 + (uint64_t)(l->p[l->pos++] - '0');
            if (v > FMT_ARRAY_MAX_BYTES)
                return sl_error_set(err, SL_ECORRUPT, "npy header: dimension over 2^62 at %zu", start);
        }
        if (at(l, 'L')) /* Python 2's long */
            l->pos++;
        a->dims[a->ndims++] = v;
        ws(l);
        if (at(l, ','))
            l->pos++;
        else if (!at(l, ')'))
            return sl_error_set(err, SL_ECORRUPT, "npy header: expected ',' or ')' at %zu", l->pos);
    }
}

int fmt_npy_parse_header(const uint8_t *p, size_t n, struct fmt_array_info *out, struct sl_error *err)
{
    memset(out, 0, sizeof *out);
    size_t m = n < sizeof npy_magic ? n : sizeof npy_magic;
    if (memcmp(p, npy_magic, m) != 0) {
        char got[32] = "";
        for (size_t i = 0, k = 0; i < m; i++)
            k += (size_t)snprintf(got + k, sizeof got - k, "%s%02x", i ? " " : "", p[i]);
        return sl_error_set(err, SL_ECORRUPT, "not an npy file at 0 (magic %s: expected 93 4e 55 4d 50 59)", got);
    }
    if (n < 8)
        return sl_error_set(err, SL_ECORRUPT, "truncated npy header at %zu (the preamble ends at 10)", n);
    if (!((p[6] == 1 || p[6] == 2 || p[6] == 3) && p[7] == 0))
        return sl_error_set(err, SL_ECORRUPT, "npy version %u.%u is not supported (1.0, 2.0 or 3.0) at 6", p[6], p[7]);
    size_t start = p[6] == 1 ? 10 : 12;
    if (n < start)
        return sl_error_set(err, SL_ECORRUPT, "truncated npy header at %zu (the preamble ends at %zu)", n, start);
    uint64_t hlen = p[6] == 1 ? (uint64_t)p[8] | (uint64_t)p[9] << 8
                              : (uint64_t)p[8] | (uint64_t)p[9] << 8 | (uint64_t)p[10] << 16 | (uint64_t)p[11] << 24;
    if (hlen > FMT_NPY_MAX_HEADER)
        return sl_error_set(err, SL_ECORRUPT, "npy header of %" PRIu64 " bytes is over the limit of %d at 8", hlen,
                            FMT_NPY_MAX_HEADER);
    if (start + hlen > n)
        return sl_error_set(err, SL_ECORRUPT, "truncated npy header at %zu (the header ends at %" PRIu64 ")", n,
                            start + hlen);
    struct lex l = {p, start, start + (size_t)hlen};
    int rc = expect(&l, '{', err);
    if (rc != 0)
        return rc;
    size_t descr_at = 0, fortran_at = 0, shape_at = 0;
    int fortran = 0;
    for (;;) {
        ws(&l);
        if (at(&l, '}')) {
            l.pos++;
            break;
        }
        size_t key_at = l.pos, s, len;
        if ((rc = string(&l, &s, &len, err)) != 0)
            return rc;
        const char *k = (const char *)p + s;
        size_t *seen = len == 5 && memcmp(k, "descr", 5) == 0             ? &descr_at
                       : len == 13 && memcmp(k, "fortran_order", 13) == 0 ? &fortran_at
                       : len == 5 && memcmp(k, "shape", 5) == 0           ? &shape_at
                                                                          : NULL;
        char b[40];
        if (seen == NULL)
            return sl_error_set(err, SL_ECORRUPT, "npy header: unknown key '%s' at %zu", shown(&l, s, len, b, sizeof b),
                                key_at);
        if (*seen != 0)
            return sl_error_set(err, SL_ECORRUPT, "npy header: key '%s' given twice at %zu",
                                shown(&l, s, len, b, sizeof b), key_at);
        if ((rc = expect(&l, ':', err)) != 0)
            return rc;
        ws(&l);
        *seen = l.pos;
        rc = seen == &descr_at     ? parse_descr(&l, out, err)
             : seen == &fortran_at ? parse_bool(&l, &fortran, err)
                                   : parse_shape(&l, out, err);
        if (rc != 0)
            return rc;
        ws(&l);
        if (at(&l, ','))
            l.pos++;
        else if (!at(&l, '}'))
            return sl_error_set(err, SL_ECORRUPT, "npy header: expected ',' or '}' at %zu", l.pos);
    }
    size_t close_at = l.pos - 1;
    ws(&l);
    if (l.pos != l.end)
        return sl_error_set(err, SL_ECORRUPT, "npy header: the dictionary does not end the header at %zu", l.pos);
    const char *missing = descr_at == 0 ? "descr" : fortran_at == 0 ? "fortran_order" : shape_at == 0 ? "shape" : NULL;
    if (missing != NULL)
        return sl_error_set(err, SL_ECORRUPT, "npy header: no key '%s' at %zu", missing, close_at);
    char sh[256];
    if (out->ndims == 0)
        return sl_error_set(err, SL_ECORRUPT, "npy header: a 0-d array has no rows (shape ()) at %zu", shape_at);
    if (sizes(out) != 0)
        return sl_error_set(err, SL_ECORRUPT, "npy header: shape %s of %s holds more than 2^62 bytes at %zu",
                            fmt_array_shape(out, sh, sizeof sh), fmt_array_type_name(out), shape_at);
    int big = 0;
    for (int i = 0; i < out->ndims; i++)
        big += out->dims[i] > 1;
    if (fortran && big > 1)
        return sl_error_set(err, SL_ECORRUPT,
                            "npy header: fortran_order True for shape %s: only C-order rows can be served "
                            "(np.ascontiguousarray) at %zu",
                            fmt_array_shape(out, sh, sizeof sh), fortran_at);
    out->data_offset = start + hlen;
    return 0;
}

/* ---- IDX headers ---- */

int fmt_idx_parse_array(const uint8_t *p, size_t n, struct fmt_array_info *out, struct sl_error *err)
{
    memset(out, 0, sizeof *out);
    struct fmt_idx_info in;
    size_t hdr;
    int rc = fmt_idx_parse_header(p, n, &in, &hdr, err);
    if (rc != 0)
        return rc;
    switch (in.type) {
    case 0x08: out->kind = FMT_ARRAY_UINT; break;
    case 0x0D:
    case 0x0E: out->kind = FMT_ARRAY_FLOAT; break;
    default: out->kind = FMT_ARRAY_INT;
    }
    out->size = (uint32_t)in.type_size;
    out->big_endian = in.type_size > 1;
    out->ndims = in.ndims;
    for (int i = 0; i < in.ndims; i++)
        out->dims[i] = in.dims[i];
    if (sizes(out) != 0) /* eight u32 dimensions can multiply past 2^62 */
        return sl_error_set(err, SL_ECORRUPT, "IDX array holds more than 2^62 bytes at 4");
    out->data_offset = hdr;
    return 0;
}

/* ---- the "arrays" format ---- */

#define HEAD_WINDOW (FMT_NPY_MAX_HEADER + 16)

/* Read one member's header and make sure its data is all there: its
 * decompressed size is exactly the header's plus the data's. */
static int scan_member(const char *path, const struct fmt_scan_opts *opts, struct fmt__array_part *part,
                       struct sl_error *err)
{
    struct fmt_stream_opts so = {
        .compression = opts->compression, .max_window = HEAD_WINDOW, .max_output = opts->max_output};
    struct fmt_stream *st;
    int rc = fmt_stream_open(&st, path, &so, err);
    if (rc != 0)
        return rc;
    const uint8_t *p;
    size_t avail;
    struct fmt_array_info *a = &part->info;
    rc = fmt_stream_window(st, HEAD_WINDOW, &p, &avail, err);
    if (rc == 0) {
        if (avail >= 1 && p[0] == npy_magic[0])
            rc = fmt_npy_parse_header(p, avail, a, err);
        else if (avail >= 2 && p[0] == 0 && p[1] == 0)
            rc = fmt_idx_parse_array(p, avail, a, err);
        else if (avail == 0)
            rc = sl_error_set(err, SL_ECORRUPT, "empty file: not an npy or IDX array at 0");
        else
            rc = sl_error_set(err, SL_ECORRUPT,
                              "not an npy or IDX array at 0 (first byte %02x: expected 93 for npy, 00 00 for IDX)",
                              p[0]);
        if (rc != 0)
            sl_error_prefix(err, "%s: ", path);
    }
    char sh[256];
    uint64_t want = a->data_offset + a->data_bytes;
    size_t max_row = opts->max_record_bytes ? opts->max_record_bytes : FMT_DEFAULT_MAX_RECORD_BYTES;
    if (rc == 0 && a->row_bytes > max_row)
        rc = sl_error_set(err, SL_ECORRUPT,
                          "%s: rows of %" PRIu64 " bytes (shape %s of %s) exceed max_record_bytes (%zu) at %" PRIu64,
                          path, a->row_bytes, fmt_array_shape(a, sh, sizeof sh), fmt_array_type_name(a), max_row,
                          a->data_offset);
    enum fmt_compression comp = fmt_stream_compression(st);
    if (rc == 0 && comp != FMT_COMP_NONE && opts->max_output != 0 && want > opts->max_output)
        rc = sl_error_set(err, SL_ECORRUPT,
                          "%s: shape %s of %s declares %" PRIu64 " bytes, over the inflate limit of %" PRIu64
                          " (inflate_cache_bytes) at %" PRIu64,
                          path, fmt_array_shape(a, sh, sizeof sh), fmt_array_type_name(a), want, opts->max_output,
                          a->data_offset);
    uint64_t have = 0;
    if (rc == 0 && comp == FMT_COMP_NONE) {
        rc = fmt_file_size(path, &have, err);
    } else if (rc == 0) {
        /* the whole stream, once: its size, and its damage found now */
        static const size_t chunk = (size_t)1 << 20;
        for (;;) {
            if ((rc = fmt_stream_window(st, 1, &p, &avail, err)) != 0 || avail == 0)
                break;
            size_t take = avail < chunk ? avail : chunk;
            fmt_stream_consume(st, take);
            have += take;
            if (opts->stop != NULL && *opts->stop) {
                rc = sl_error_set(err, SL_ECLOSED, "%s: scan interrupted", path);
                break;
            }
        }
    }
    if (rc == 0 && have < want)
        rc = sl_error_set(
            err, SL_ECORRUPT,
            "%s: truncated array data at %" PRIu64 " (shape %s of %s needs %" PRIu64 " bytes of data from %" PRIu64 ")",
            path, have, fmt_array_shape(a, sh, sizeof sh), fmt_array_type_name(a), a->data_bytes, a->data_offset);
    if (rc == 0 && have > want)
        rc = sl_error_set(err, SL_ECORRUPT,
                          "%s: %" PRIu64 " bytes after the array's data at %" PRIu64 " (shape %s of %s ends there)",
                          path, have - want, want, fmt_array_shape(a, sh, sizeof sh), fmt_array_type_name(a));
    part->image_bytes = have;
    part->compression = comp;
    fmt_stream_close(st);
    return rc;
}

static int arrays_scan_group(struct fmt_scan **out, const char *const *paths, size_t n,
                             const struct fmt_scan_opts *opts, struct sl_error *err)
{
    *out = NULL;
    if (n == 0 || n > FMT_MAX_FIELDS)
        return sl_error_set(err, SL_EINVAL, "a group holds 1 to %d arrays (got %zu)", FMT_MAX_FIELDS, n);
    if (opts->specs != NULL && opts->nspecs != n)
        return sl_error_set(err, SL_EINVAL, "%s: a group of %zu arrays for %zu features", paths[0], n, opts->nspecs);
    struct fmt_scan *s = fmt__scan_new(opts);
    if (s == NULL || (s->arrays = sl_calloc(n, sizeof *s->arrays)) == NULL) {
        fmt_scan_free(s);
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", paths[0]);
    }
    s->narrays = n;
    int rc = 0;
    uint64_t off = 0;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        struct fmt__array_part *part = &s->arrays[k];
        if ((rc = scan_member(paths[k], opts, part, err)) != 0)
            break;
        part->image_off = off;
        off += part->image_bytes;
        const struct fmt_array_info *a = &part->info;
        char sh[256];
        if (k > 0 && a->rows != s->arrays[0].info.rows) {
            rc = sl_error_set(err, SL_ECORRUPT,
                              "%s: %" PRIu64 " rows (shape %s), but %s has %" PRIu64
                              ": the arrays of a group need as many rows at %" PRIu64,
                              paths[k], a->rows, fmt_array_shape(a, sh, sizeof sh), paths[0], s->arrays[0].info.rows,
                              a->data_offset);
            break;
        }
        if (opts->specs == NULL)
            continue;
        const struct fmt_feature_spec *f = &opts->specs[k];
        struct sl_error why = {0};
        if (fmt_array_fits(a, f->dtype, &why) != 0) {
            rc = sl_error_set(err, SL_EINVAL, "%s: feature '%s' (%s): %s at %" PRIu64, paths[k], f->name,
                              fmt_dtype_name(f->dtype), why.msg, a->data_offset);
            break;
        }
        uint64_t want = fmt_feature_spec_count(f);
        if (a->row_values != want) {
            rc =
                sl_error_set(err, SL_EINVAL,
                             "%s: shape %s gives %" PRIu64 " values a row, feature '%s' wants %" PRIu64 " at %" PRIu64,
                             paths[k], fmt_array_shape(a, sh, sizeof sh), a->row_values, f->name, want, a->data_offset);
            break;
        }
    }
    if (rc != 0) {
        fmt_scan_free(s);
        return rc;
    }
    s->count = s->arrays[0].info.rows;
    s->image_bytes = off;
    s->compression = n == 1 ? s->arrays[0].compression : FMT_COMP_NONE;
    for (size_t k = 0; k < n; k++)
        if (s->arrays[k].compression != FMT_COMP_NONE)
            s->compression = s->arrays[k].compression;
    *out = s;
    return 0;
}

static int arrays_scan(struct fmt_scan **out, const char *path, const struct fmt_scan_opts *opts, struct sl_error *err)
{
    return arrays_scan_group(out, &path, 1, opts, err);
}

static int arrays_frame(const struct fmt_scan *s, const uint8_t *img, size_t size, uint64_t rec, int verify,
                        struct fmt_frame *out, struct sl_error *err)
{
    (void)verify;
    if (rec >= s->count || s->arrays == NULL)
        return sl_error_set(err, SL_EINVAL, "row %" PRIu64 " does not exist", rec);
    for (size_t k = 0; k < s->narrays; k++) {
        const struct fmt__array_part *part = &s->arrays[k];
        uint64_t off = part->image_off + part->info.data_offset + rec * part->info.row_bytes;
        if (off > size || part->info.row_bytes > size - off)
            return sl_error_set(err, SL_ECORRUPT,
                                "row %" PRIu64 " of array %zu at %" PRIu64 " is past the end of the image (%zu bytes)",
                                rec, k, off, size);
        out->field_buf[k] = (struct fmt_field){"", img + off, (size_t)part->info.row_bytes, &part->info};
    }
    out->data = NULL;
    out->len = 0;
    out->fields = out->field_buf;
    out->nfields = s->narrays;
    return 0;
}

static int arrays_decode(struct fmt_batch *b, const struct fmt_frame *f, struct sl_error *err)
{
    return fmt_batch_add_arrays(b, f->fields, f->nfields, err);
}

static int arrays_specs(const struct fmt_feature_spec *specs, size_t nspecs, struct sl_error *err)
{
    if (nspecs == 0 || nspecs > FMT_MAX_FIELDS)
        return sl_error_set(err, SL_EINVAL, "arrays need 1 to %d features (one per array)", FMT_MAX_FIELDS);
    for (size_t i = 0; i < nspecs; i++)
        if (specs[i].varlen || specs[i].dtype == FMT_DTYPE_BYTES)
            return sl_error_set(err, SL_EINVAL,
                                "feature %s: an array fills a fixed-shape int64, float32 or uint8 "
                                "feature",
                                specs[i].name);
    return 0;
}

/* A job names no 'files': each feature names its arrays (group g is the
 * g-th of each), and fills a fixed-shape numeric feature from them, a
 * value in every row. */
static int arrays_job_input(const struct fmt_job_input *in, struct sl_error *err)
{
    if (in->files_given)
        return sl_error_set(err, SL_EINVAL,
                            "'files' does not apply with format \"arrays\" (each feature names its arrays: "
                            "features.NAME.array)");
    if (in->nfeatures == 0)
        return sl_error_set(err, SL_EINVAL, "'features' is required with format \"arrays\" (one per array)");
    for (size_t i = 0; i < in->nfeatures; i++) {
        const struct fmt_feature_spec *f = &in->features[i];
        if (in->names_arrays == NULL || !in->names_arrays(in->ctx, i))
            return sl_error_set(err, SL_EINVAL, "'features.%s.array' is required with format \"arrays\"", f->name);
        if (f->varlen || f->dtype == FMT_DTYPE_BYTES)
            return sl_error_set(err, SL_EINVAL,
                                "'features.%s': an array fills a fixed-shape int64, float32 or uint8 feature", f->name);
        if (f->has_default)
            return sl_error_set(err, SL_EINVAL,
                                "'features.%s.default': an array feature has a value in every row, no default",
                                f->name);
    }
    if (in->nfeatures > FMT_MAX_FIELDS)
        return sl_error_set(err, SL_EINVAL, "'features': at most %d arrays a group", FMT_MAX_FIELDS);
    return 0;
}

const struct fmt_format_ops fmt__arrays_format = {
    .name = "arrays",
    .element = "row",
    .plain_probe = NULL,
    .next = NULL,
    .check_specs = arrays_specs,
    .job_input = arrays_job_input,
    .scan = arrays_scan,
    .scan_group = arrays_scan_group,
    .frame = arrays_frame,
    .decode = arrays_decode,
};
