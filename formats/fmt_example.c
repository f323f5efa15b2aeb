/* fmt_example: tf.train.Example on the wire, read the way TensorFlow's fast
 * parser (example_proto_fast_parsing.cc) reads it and written the way
 * protobuf serializers write it.
 *
 * Reading never allocates and never copies: every view points into the
 * caller's bytes. All reads go through two bounded helpers (read_varint,
 * read_len) so that no length taken from the data is trusted before it is
 * checked against the bytes that are really left; errors name what was being
 * read and its byte offset. The fast parser's quirks are kept on purpose:
 * concatenated Features messages merge, a map entry is exactly two fields
 * (key / value, any order), a Feature is judged by its first byte only, and a
 * packed list is read from its first packed chunk only (anything after that
 * chunk inside the list is ignored). Where TensorFlow tolerates a length that
 * runs past its container, we report corruption instead.
 *
 * The encoder sizes every nested message up front, so each entry is written
 * in one pass into a scratch buffer with no back-patching.
 */
#include "fmt_example.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "sl_alloc.h"

#define TAG_LEN1 0x0A /* field 1, length-delimited */
#define TAG_LEN2 0x12 /* field 2, length-delimited */
#define TAG_LEN3 0x1A /* field 3, length-delimited */
#define TAG_VARINT1 0x08
#define TAG_FIXED32_1 0x0D

static const uint8_t empty_bytes[1];

const char *fmt_kind_name(enum fmt_kind k)
{
    switch (k) {
    case FMT_KIND_BYTES: return "bytes";
    case FMT_KIND_FLOAT: return "float";
    case FMT_KIND_INT64: return "int64";
    default: return "none";
    }
}

const char *fmt_kind_tf_name(enum fmt_kind k)
{
    switch (k) {
    case FMT_KIND_BYTES: return "string";
    case FMT_KIND_FLOAT: return "float";
    case FMT_KIND_INT64: return "int64";
    default: return "invalid"; /* DataTypeString(DT_INVALID) */
    }
}

/* ---- bounded primitives ------------------------------------------------ */

enum { VARINT_OK = 0, VARINT_TRUNCATED = -1, VARINT_TOO_LONG = -2 };

/* A base-128 varint of at most 10 bytes from [*pp, end); bits past 64 are
 * dropped, as protobuf does. */
static inline int read_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    const uint8_t *p = *pp;
    if (p < end && *p < 0x80) {
        *v = *p;
        *pp = p + 1;
        return VARINT_OK;
    }
    uint64_t r = 0;
    for (unsigned i = 0; i < 10; i++) {
        if (p == end)
            return VARINT_TRUNCATED;
        uint8_t b = *p++;
        r |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *v = r;
            *pp = p;
            return VARINT_OK;
        }
    }
    return VARINT_TOO_LONG;
}

/* Byte offset of `at` for error texts: `origin` sits at offset `base`. */
static inline size_t offset_of(const uint8_t *at, const uint8_t *origin, size_t base)
{
    return base + (size_t)(at - origin);
}

static int varint_error(struct sl_error *err, int why, const char *what, size_t off)
{
    return sl_error_set(err, SL_ECORRUPT, "%s %s at byte %zu",
                        why == VARINT_TRUNCATED ? "truncated" : "overlong (over 10 bytes)", what, off);
}

static int read_len_slow(const uint8_t **pp, const uint8_t *end, const char *what, const uint8_t *origin, size_t base,
                         size_t *len, struct sl_error *err);

/* A length prefix that must fit in the bytes left before `end`. The common
 * case (one or two bytes, in bounds) is inlined; the rest, errors included,
 * is not. */
static inline int read_len(const uint8_t **pp, const uint8_t *end, const char *what, const uint8_t *origin, size_t base,
                           size_t *len, struct sl_error *err)
{
    const uint8_t *p = *pp;
    size_t left = (size_t)(end - p);
    if (left >= 2) {
        if (p[0] < 0x80) {
            if (p[0] <= left - 1) {
                *len = p[0];
                *pp = p + 1;
                return 0;
            }
        } else if (p[1] < 0x80) {
            size_t v = (size_t)(p[0] & 0x7F) | (size_t)p[1] << 7;
            if (v <= left - 2) {
                *len = v;
                *pp = p + 2;
                return 0;
            }
        }
    }
    return read_len_slow(pp, end, what, origin, base, len, err);
}

static int read_len_slow(const uint8_t **pp, const uint8_t *end, const char *what, const uint8_t *origin, size_t base,
                         size_t *len, struct sl_error *err)
{
    const uint8_t *at = *pp;
    uint64_t v;
    *len = 0;
    int rc = read_varint(pp, end, &v);
    if (rc != VARINT_OK)
        return sl_error_set(err, SL_ECORRUPT, "%s %s length at byte %zu",
                            rc == VARINT_TRUNCATED ? "truncated" : "overlong", what, offset_of(at, origin, base));
    size_t left = (size_t)(end - *pp);
    if (v > left)
        return sl_error_set(err, SL_ECORRUPT, "%s length %" PRIu64 " past the end (%zu bytes left) at byte %zu", what,
                            v, left, offset_of(at, origin, base));
    *len = (size_t)v;
    return 0;
}

static inline int64_t to_int64(uint64_t v)
{
    /* protobuf's int64: the varint's 64 bits as two's complement */
    return v <= (uint64_t)INT64_MAX ? (int64_t)v : -(int64_t)(~v) - 1;
}

static inline float load_f32le(const uint8_t *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Skip one field of an unknown tag (Example level), as SkipExtraneousTag. */
static int skip_field(const uint8_t **pp, const uint8_t *end, const uint8_t *origin, struct sl_error *err)
{
    const uint8_t *at = *pp;
    uint64_t tag, v;
    int rc = read_varint(pp, end, &tag);
    if (rc != VARINT_OK)
        return varint_error(err, rc, "tag", offset_of(at, origin, 0));
    if (tag > UINT32_MAX || (tag >> 3) == 0)
        return sl_error_set(err, SL_ECORRUPT, "invalid tag 0x%" PRIx64 " at byte %zu", tag, offset_of(at, origin, 0));
    const uint8_t *val = *pp;
    size_t n, left = (size_t)(end - val);
    switch (tag & 7) {
    case 0:
        rc = read_varint(pp, end, &v);
        return rc == VARINT_OK ? 0 : varint_error(err, rc, "varint field", offset_of(val, origin, 0));
    case 1:
    case 5:
        n = (tag & 7) == 1 ? 8 : 4;
        if (left < n)
            return sl_error_set(err, SL_ECORRUPT, "truncated fixed%s field at byte %zu", n == 8 ? "64" : "32",
                                offset_of(at, origin, 0));
        *pp += n;
        return 0;
    case 2:
        rc = read_len(pp, end, "unknown field", origin, 0, &n, err);
        if (rc != 0)
            return rc;
        *pp += n;
        return 0;
    case 3:
    case 4:
        return sl_error_set(err, SL_ECORRUPT, "group %s (wire type %u) at byte %zu", (tag & 7) == 3 ? "start" : "end",
                            (unsigned)(tag & 7), offset_of(at, origin, 0));
    default:
        return sl_error_set(err, SL_ECORRUPT, "invalid wire type %u at byte %zu", (unsigned)(tag & 7),
                            offset_of(at, origin, 0));
    }
}

/* ---- entries ----------------------------------------------------------- */

void fmt__example_iter_init(struct fmt__example_iter *it, const uint8_t *data, size_t len)
{
    if (data == NULL)
        data = empty_bytes, len = 0;
    it->data = it->p = data;
    it->end = data + len;
    it->fend = NULL;
    it->saw_features = 0;
}

static int read_entry(struct fmt__example_iter *it, const uint8_t *p, struct fmt__entry *e, struct sl_error *err)
{
    const uint8_t *origin = it->data;
    size_t elen;
    int rc = read_len(&p, it->fend, "map entry", origin, 0, &elen, err);
    if (rc != 0)
        return rc;
    const uint8_t *eend = p + elen;
    e->key = eend;
    e->key_len = 0;
    e->feature = eend;
    e->feature_len = 0;
    /* Exactly two fields, key (1) and value (2) in any order; a repeated one
     * overwrites, as in ParseFeatureMapEntry. */
    for (int i = 0; i < 2; i++) {
        if (p == eend)
            return sl_error_set(err, SL_ECORRUPT, "map entry with fewer than 2 fields at byte %zu",
                                offset_of(p, origin, 0));
        const uint8_t *at = p;
        uint64_t tag;
        rc = read_varint(&p, eend, &tag);
        if (rc != VARINT_OK)
            return varint_error(err, rc, "map entry tag", offset_of(at, origin, 0));
        size_t n;
        if (tag == TAG_LEN1) {
            if ((rc = read_len(&p, eend, "key", origin, 0, &n, err)) != 0)
                return rc;
            e->key = p;
            e->key_len = n;
        } else if (tag == TAG_LEN2) {
            if ((rc = read_len(&p, eend, "feature", origin, 0, &n, err)) != 0)
                return rc;
            e->feature = p;
            e->feature_len = n;
        } else {
            return sl_error_set(err, SL_ECORRUPT, "unexpected tag 0x%" PRIx64 " in map entry at byte %zu", tag,
                                offset_of(at, origin, 0));
        }
        p += n;
    }
    if (p != eend)
        return sl_error_set(err, SL_ECORRUPT, "map entry with more than 2 fields at byte %zu", offset_of(p, origin, 0));
    it->p = p;
    return 0;
}

int fmt__example_iter_next(struct fmt__example_iter *it, struct fmt__entry *e, struct sl_error *err)
{
    const uint8_t *p = it->p;
    e->key = e->feature = p;
    e->key_len = e->feature_len = 0;
    for (;;) {
        if (it->fend != NULL) {
            if (p == it->fend) {
                it->fend = NULL;
                continue;
            }
            if (*p != TAG_LEN1)
                return sl_error_set(err, SL_ECORRUPT, "unexpected tag 0x%02x in Features at byte %zu", *p,
                                    offset_of(p, it->data, 0));
            return read_entry(it, p + 1, e, err);
        }
        if (p == it->end) {
            it->p = p;
            return SL_END;
        }
        int rc;
        if (*p == TAG_LEN1) {
            size_t n;
            p++;
            if ((rc = read_len(&p, it->end, "Features", it->data, 0, &n, err)) != 0)
                return rc;
            it->fend = p + n;
            it->saw_features = 1;
            it->p = p;
            continue;
        }
        if ((rc = skip_field(&p, it->end, it->data, err)) != 0)
            return rc;
        it->p = p;
    }
}

int fmt__feature_parse(const uint8_t *feature, size_t len, size_t base, enum fmt_kind *kind, const uint8_t **list,
                       size_t *list_len, struct sl_error *err)
{
    if (len == 0) {
        *kind = FMT_KIND_NONE;
        *list = feature != NULL ? feature : empty_bytes;
        *list_len = 0;
        return 0;
    }
    switch (feature[0]) {
    case TAG_LEN1: *kind = FMT_KIND_BYTES; break;
    case TAG_LEN2: *kind = FMT_KIND_FLOAT; break;
    case TAG_LEN3: *kind = FMT_KIND_INT64; break;
    default:
        *kind = FMT_KIND_NONE;
        return sl_error_set(err, SL_ECORRUPT, "Unsupported datatype (tag 0x%02x) at byte %zu", feature[0], base);
    }
    /* Only the first oneof field counts; bytes after it are not looked at. */
    const uint8_t *p = feature + 1;
    size_t n;
    int rc = read_len(&p, feature + len, "list", feature, base, &n, err);
    if (rc != 0)
        return rc;
    *list = p;
    *list_len = n;
    return 0;
}

int fmt_example_walk(const uint8_t *data, size_t len, fmt_feature_fn fn, void *ctx, struct sl_error *err)
{
    struct fmt__example_iter it;
    fmt__example_iter_init(&it, data, len);
    for (;;) {
        struct fmt__entry e;
        int rc = fmt__example_iter_next(&it, &e, err);
        if (rc == SL_END)
            return 0;
        if (rc != 0)
            return rc;
        struct fmt_feature_view v;
        rc = fmt__feature_parse(e.feature, e.feature_len, (size_t)(e.feature - it.data), &v.kind, &v.list, &v.list_len,
                                err);
        if (rc != 0)
            return rc;
        v.key = (const char *)e.key;
        v.key_len = e.key_len;
        if ((rc = fn(ctx, &v)) != 0)
            return rc;
    }
}

/* ---- lists ------------------------------------------------------------- */

int fmt__int64_list_scan(const uint8_t *list, size_t len, size_t base, int64_t *out, size_t cap, size_t *count,
                         struct sl_error *err)
{
    *count = 0;
    if (len == 0)
        return 0;
    const uint8_t *p = list, *end = list + len;
    size_t n = 0;
    int rc;
    if (*p == TAG_LEN1) {
        /* packed: the first chunk only */
        size_t plen;
        p++;
        if ((rc = read_len(&p, end, "packed int64", list, base, &plen, err)) != 0)
            return rc;
        const uint8_t *cend = p + plen;
        while (p < cend) {
            uint64_t v;
            if (*p < 0x80) {
                v = *p++;
            } else {
                const uint8_t *at = p;
                if ((rc = read_varint(&p, cend, &v)) != VARINT_OK)
                    return varint_error(err, rc, "int64 value", offset_of(at, list, base));
            }
            if (n < cap)
                out[n] = to_int64(v);
            n++;
        }
    } else if (*p == TAG_VARINT1) {
        while (p < end) {
            if (*p != TAG_VARINT1)
                return sl_error_set(err, SL_ECORRUPT, "unexpected tag 0x%02x in unpacked Int64List at byte %zu", *p,
                                    offset_of(p, list, base));
            p++;
            const uint8_t *at = p;
            uint64_t v;
            if ((rc = read_varint(&p, end, &v)) != VARINT_OK)
                return varint_error(err, rc, "int64 value", offset_of(at, list, base));
            if (n < cap)
                out[n] = to_int64(v);
            n++;
        }
    } else {
        return sl_error_set(err, SL_ECORRUPT, "unexpected tag 0x%02x in Int64List at byte %zu", *p, base);
    }
    *count = n;
    return 0;
}

int fmt__float_list_scan(const uint8_t *list, size_t len, size_t base, float *out, size_t cap, size_t *count,
                         struct sl_error *err)
{
    *count = 0;
    if (len == 0)
        return 0;
    const uint8_t *p = list, *end = list + len;
    size_t n = 0;
    if (*p == TAG_LEN1) {
        /* packed: the first chunk only; a ragged tail shorter than a float is
         * ignored, as the fast parser's packed_length / 4 does */
        size_t plen;
        p++;
        int rc = read_len(&p, end, "packed float", list, base, &plen, err);
        if (rc != 0)
            return rc;
        n = plen / 4;
        size_t k = n < cap ? n : cap;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (k)
            memcpy(out, p, k * 4);
#else
        for (size_t i = 0; i < k; i++)
            out[i] = load_f32le(p + 4 * i);
#endif
    } else if (*p == TAG_FIXED32_1) {
        while (p < end) {
            if (*p != TAG_FIXED32_1)
                return sl_error_set(err, SL_ECORRUPT, "unexpected tag 0x%02x in unpacked FloatList at byte %zu", *p,
                                    offset_of(p, list, base));
            if ((size_t)(end - p) < 5)
                return sl_error_set(err, SL_ECORRUPT, "truncated float value at byte %zu",
                                    offset_of(p + 1, list, base));
            if (n < cap)
                out[n] = load_f32le(p + 1);
            n++;
            p += 5;
        }
    } else {
        return sl_error_set(err, SL_ECORRUPT, "unexpected tag 0x%02x in FloatList at byte %zu", *p, base);
    }
    *count = n;
    return 0;
}

static int decode_count_check(size_t want, size_t got, const char *what, struct sl_error *err)
{
    if (want == got)
        return 0;
    return sl_error_set(err, SL_EINVAL, "%s has %zu values, caller expected %zu", what, got, want);
}

int fmt_int64_list_count(const uint8_t *list, size_t len, size_t *count, struct sl_error *err)
{
    return fmt__int64_list_scan(list, len, 0, NULL, 0, count, err);
}

int fmt_int64_list_decode(const uint8_t *list, size_t len, int64_t *out, size_t count, struct sl_error *err)
{
    size_t n;
    int rc = fmt__int64_list_scan(list, len, 0, out, count, &n, err);
    return rc != 0 ? rc : decode_count_check(count, n, "Int64List", err);
}

int fmt_float_list_count(const uint8_t *list, size_t len, size_t *count, struct sl_error *err)
{
    return fmt__float_list_scan(list, len, 0, NULL, 0, count, err);
}

int fmt_float_list_decode(const uint8_t *list, size_t len, float *out, size_t count, struct sl_error *err)
{
    size_t n;
    int rc = fmt__float_list_scan(list, len, 0, out, count, &n, err);
    return rc != 0 ? rc : decode_count_check(count, n, "FloatList", err);
}

void fmt_bytes_iter_init(struct fmt_bytes_iter *it, const uint8_t *list, size_t len)
{
    if (list == NULL)
        list = empty_bytes, len = 0;
    it->start = it->p = list;
    it->end = list + len;
}

int fmt_bytes_iter_next(struct fmt_bytes_iter *it, const uint8_t **v, size_t *n, struct sl_error *err)
{
    const uint8_t *p = it->p;
    if (p == it->end)
        return SL_END;
    const uint8_t *start = it->start != NULL ? it->start : p;
    if (*p != TAG_LEN1)
        return sl_error_set(err, SL_ECORRUPT, "unexpected tag 0x%02x in BytesList at byte %zu", *p,
                            offset_of(p, start, 0));
    p++;
    size_t len;
    int rc = read_len(&p, it->end, "bytes value", start, 0, &len, err);
    if (rc != 0)
        return rc;
    *v = p;
    *n = len;
    it->p = p + len;
    return 0;
}

int fmt_bytes_list_count(const uint8_t *list, size_t len, size_t *count, struct sl_error *err)
{
    struct fmt_bytes_iter it;
    fmt_bytes_iter_init(&it, list, len);
    size_t k = 0;
    const uint8_t *v = NULL;
    size_t n = 0;
    int rc;
    while ((rc = fmt_bytes_iter_next(&it, &v, &n, err)) == 0)
        k++;
    if (rc != SL_END)
        return rc;
    *count = k;
    return 0;
}

/* ---- encoder ----------------------------------------------------------- */

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Sizes of a length-delimited field and sums, with overflow reported. */
static int add_size(size_t *acc, size_t n)
{
    if (n > SIZE_MAX / 2 - *acc)
        return SL_EINVAL;
    *acc += n;
    return 0;
}

static int delimited_size(size_t body, size_t *out)
{
    *out = 1 + varint_size(body);
    return add_size(out, body);
}

/* Entries are written straight into `out` behind a gap of ENC_GAP bytes,
 * the most the Example's tag and length can take; end() writes the header
 * and closes the gap with one memmove. No scratch buffer, no allocation
 * beyond out's own growth, so encoding in a loop allocates nothing once out
 * has grown to the largest Example. */
#define ENC_GAP 11

int fmt_example_enc_begin(struct fmt_example_enc *e, struct sl_buf *out)
{
    e->out = out;
    e->start = out->len;
    int rc = sl_buf_reserve(out, ENC_GAP);
    if (rc != 0)
        return rc;
    out->len += ENC_GAP;
    return 0;
}

/* Reserve room for one map entry whose list body is `list_len` bytes and
 * write everything up to the list body; returns where the body goes. */
static int entry_open(struct fmt_example_enc *e, const char *key, uint8_t kind_tag, size_t list_len, uint8_t **body)
{
    size_t klen = strlen(key);
    size_t feature_len, key_field, value_field, entry_len, total;
    if (delimited_size(list_len, &feature_len) != 0 || delimited_size(klen, &key_field) != 0 ||
        delimited_size(feature_len, &value_field) != 0)
        return SL_EINVAL;
    entry_len = key_field;
    if (add_size(&entry_len, value_field) != 0 || delimited_size(entry_len, &total) != 0)
        return SL_EINVAL;
    int rc = sl_buf_reserve(e->out, total);
    if (rc != 0)
        return rc;
    uint8_t *p = e->out->data + e->out->len;
    *p++ = TAG_LEN1;
    p = put_varint(p, entry_len);
    *p++ = TAG_LEN1;
    p = put_varint(p, klen);
    if (klen)
        memcpy(p, key, klen);
    p += klen;
    *p++ = TAG_LEN2;
    p = put_varint(p, feature_len);
    *p++ = kind_tag;
    p = put_varint(p, list_len);
    *body = p;
    e->out->len += total;
    return 0;
}

int fmt_example_enc_int64(struct fmt_example_enc *e, const char *key, const int64_t *v, size_t n)
{
    size_t packed = 0, list_len = 0;
    if (n > SIZE_MAX / 16)
        return SL_EINVAL;
    for (size_t i = 0; i < n; i++)
        packed += varint_size((uint64_t)v[i]);
    if (n && delimited_size(packed, &list_len) != 0)
        return SL_EINVAL;
    uint8_t *p;
    int rc = entry_open(e, key, TAG_LEN3, list_len, &p);
    if (rc != 0 || n == 0)
        return rc;
    *p++ = TAG_LEN1;
    p = put_varint(p, packed);
    for (size_t i = 0; i < n; i++)
        p = put_varint(p, (uint64_t)v[i]);
    return 0;
}

int fmt_example_enc_float(struct fmt_example_enc *e, const char *key, const float *v, size_t n)
{
    size_t list_len = 0;
    if (n > SIZE_MAX / 16)
        return SL_EINVAL;
    if (n && delimited_size(4 * n, &list_len) != 0)
        return SL_EINVAL;
    uint8_t *p;
    int rc = entry_open(e, key, TAG_LEN2, list_len, &p);
    if (rc != 0 || n == 0)
        return rc;
    *p++ = TAG_LEN1;
    p = put_varint(p, 4 * n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &v[i], sizeof u);
        p[0] = (uint8_t)u;
        p[1] = (uint8_t)(u >> 8);
        p[2] = (uint8_t)(u >> 16);
        p[3] = (uint8_t)(u >> 24);
        p += 4;
    }
    return 0;
}

int fmt_example_enc_bytes(struct fmt_example_enc *e, const char *key, const uint8_t *const *vals, const size_t *lens,
                          size_t n)
{
    size_t list_len = 0;
    for (size_t i = 0; i < n; i++) {
        size_t item;
        if (delimited_size(lens[i], &item) != 0 || add_size(&list_len, item) != 0)
            return SL_EINVAL;
    }
    uint8_t *p;
    int rc = entry_open(e, key, TAG_LEN1, list_len, &p);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < n; i++) {
        *p++ = TAG_LEN1;
        p = put_varint(p, lens[i]);
        if (lens[i])
            memcpy(p, vals[i], lens[i]);
        p += lens[i];
    }
    return 0;
}

int fmt_example_enc_end(struct fmt_example_enc *e)
{
    /* Features is always set, so an Example without features is 0a00, as
     * Example(features=Features()) serializes. */
    uint8_t *base = e->out->data + e->start;
    size_t body = e->out->len - e->start - ENC_GAP;
    uint8_t head[ENC_GAP];
    head[0] = TAG_LEN1;
    size_t hlen = (size_t)(put_varint(head + 1, body) - head);
    if (body)
        memmove(base + hlen, base + ENC_GAP, body);
    memcpy(base, head, hlen);
    e->out->len = e->start + hlen + body;
    return 0;
}

void fmt_example_enc_abort(struct fmt_example_enc *e)
{
    e->out->len = e->start;
}
