/* Unit tests for fmt_example: the wire vectors of docs/semantics.md 1.4, the fast
 * parser's quirks, damaged input at every cut point, the encoder and the
 * JSON mapping. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt_example.h"
#include "fmt_features.h"
#include "sl_alloc.h"
#include "sl_buf.h"
#include "sl_test.h"

/* ---- helpers ----------------------------------------------------------- */

#define MAX_SEEN 16

struct seen {
    size_t n;
    struct fmt_feature_view v[MAX_SEEN];
};

static int collect(void *ctx, const struct fmt_feature_view *f)
{
    struct seen *s = ctx;
    if (s->n < MAX_SEEN)
        s->v[s->n] = *f;
    s->n++;
    return 0;
}

static size_t hex(const char *h, uint8_t *out)
{
    return sl_test_hex(h, out, 4096);
}

/* An exact-size heap copy, so that ASan sees any read past the end. */
static uint8_t *dup_bytes(const uint8_t *p, size_t n)
{
    uint8_t *d = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(d);
    if (n)
        memcpy(d, p, n);
    return d;
}

/* The views stay valid until the next walk() (the copy is kept). */
static int walk(const uint8_t *p, size_t n, struct seen *s, struct sl_error *err)
{
    static uint8_t *copy;
    free(copy);
    copy = dup_bytes(p, n);
    memset(s, 0, sizeof *s);
    sl_error_clear(err);
    return fmt_example_walk(copy, n, collect, s, err);
}

static int walk_hex(const char *h, struct seen *s, struct sl_error *err)
{
    uint8_t buf[4096];
    return walk(buf, hex(h, buf), s, err);
}

static void assert_key(const struct fmt_feature_view *v, const char *key, enum fmt_kind kind)
{
    ck_assert_uint_eq(v->key_len, strlen(key));
    ck_assert(memcmp(v->key, key, v->key_len) == 0);
    ck_assert_int_eq(v->kind, kind);
}

static void assert_int64s(const struct fmt_feature_view *v, const int64_t *want, size_t n)
{
    size_t count = 99;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_int64_list_count(v->list, v->list_len, &count, &err), 0);
    ck_assert_uint_eq(count, n);
    int64_t *got = malloc((n + 1) * sizeof *got);
    ck_assert_int_eq(fmt_int64_list_decode(v->list, v->list_len, got, count, &err), 0);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(got[i], want[i]);
    free(got);
}

/* Encode one single-feature Example and compare with the expected hex. */
static void assert_bytes_hex(const struct sl_buf *b, const char *h)
{
    uint8_t want[4096];
    size_t n = hex(h, want);
    ck_assert_uint_eq(b->len, n);
    ck_assert(memcmp(b->data, want, n) == 0);
}

static void json_of(const uint8_t *p, size_t n, const char *want)
{
    struct sl_buf out;
    struct sl_error err = {0};
    sl_buf_init(&out, 0);
    uint8_t *d = dup_bytes(p, n);
    int rc = fmt_example_to_json(d, n, &out, &err);
    free(d);
    ck_assert_msg(rc == 0, "json failed: %s", err.msg);
    ck_assert_uint_eq(out.len, strlen(want));
    ck_assert_msg(memcmp(out.data, want, out.len) == 0, "got %.*s", (int)out.len, (const char *)out.data);
    sl_buf_free(&out);
}

static void json_of_hex(const char *h, const char *want)
{
    uint8_t buf[4096];
    json_of(buf, hex(h, buf), want);
}

static const char *const V_INT64 = "0a0e 0a0c 0a0161 1207 1a05 0a03 010203";
static const char *const V_FLOAT = "0a0f 0a0d 0a0178 1208 1206 0a04 0000803f";
static const char *const V_BYTES = "0a0d 0a0b 0a0162 1206 0a04 0a02 6869";
static const char *const V_NEG = "0a15 0a13 0a016e 120e 1a0c 0a0a ffffffffffffffffff01";
static const char *const V_UNPACKED = "0a0f 0a0d 0a0161 1208 1a06 080108020803";

/* ---- docs/semantics.md 1.4 vectors -------------------------------------- */

START_TEST(test_vectors_decode)
{
    struct seen s;
    struct sl_error err = {0};
    const int64_t a[] = {1, 2, 3}, neg[] = {-1};

    ck_assert_int_eq(walk_hex(V_INT64, &s, &err), 0);
    ck_assert_uint_eq(s.n, 1);
    assert_key(&s.v[0], "a", FMT_KIND_INT64);
    assert_int64s(&s.v[0], a, 3);

    ck_assert_int_eq(walk_hex(V_UNPACKED, &s, &err), 0);
    ck_assert_uint_eq(s.n, 1);
    assert_key(&s.v[0], "a", FMT_KIND_INT64);
    assert_int64s(&s.v[0], a, 3);

    ck_assert_int_eq(walk_hex(V_NEG, &s, &err), 0);
    ck_assert_uint_eq(s.n, 1);
    assert_key(&s.v[0], "n", FMT_KIND_INT64);
    assert_int64s(&s.v[0], neg, 1);

    ck_assert_int_eq(walk_hex(V_FLOAT, &s, &err), 0);
    ck_assert_uint_eq(s.n, 1);
    assert_key(&s.v[0], "x", FMT_KIND_FLOAT);
    size_t count;
    float f[4];
    ck_assert_int_eq(fmt_float_list_count(s.v[0].list, s.v[0].list_len, &count, &err), 0);
    ck_assert_uint_eq(count, 1);
    ck_assert_int_eq(fmt_float_list_decode(s.v[0].list, s.v[0].list_len, f, 1, &err), 0);
    ck_assert(f[0] == 1.0f);

    ck_assert_int_eq(walk_hex(V_BYTES, &s, &err), 0);
    ck_assert_uint_eq(s.n, 1);
    assert_key(&s.v[0], "b", FMT_KIND_BYTES);
    ck_assert_int_eq(fmt_bytes_list_count(s.v[0].list, s.v[0].list_len, &count, &err), 0);
    ck_assert_uint_eq(count, 1);
    struct fmt_bytes_iter it;
    const uint8_t *v = NULL;
    size_t n = 0;
    fmt_bytes_iter_init(&it, s.v[0].list, s.v[0].list_len);
    ck_assert_int_eq(fmt_bytes_iter_next(&it, &v, &n, &err), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert(memcmp(v, "hi", 2) == 0);
    ck_assert_int_eq(fmt_bytes_iter_next(&it, &v, &n, &err), SL_END);

    /* tf.train.Example() and Example(features=Features()) */
    ck_assert_int_eq(walk(NULL, 0, &s, &err), 0);
    ck_assert_uint_eq(s.n, 0);
    ck_assert_int_eq(walk_hex("0a00", &s, &err), 0);
    ck_assert_uint_eq(s.n, 0);
}
END_TEST

START_TEST(test_vectors_encode)
{
    struct sl_buf b;
    struct fmt_example_enc e;
    sl_buf_init(&b, 0);
    const int64_t a[] = {1, 2, 3}, neg[] = {-1};
    const float x[] = {1.0f};
    const uint8_t *vals[] = {(const uint8_t *)"hi"};
    const size_t lens[] = {2};

    ck_assert_int_eq(fmt_example_enc_begin(&e, &b), 0);
    ck_assert_int_eq(fmt_example_enc_int64(&e, "a", a, 3), 0);
    ck_assert_int_eq(fmt_example_enc_end(&e), 0);
    assert_bytes_hex(&b, V_INT64);

    sl_buf_reset(&b);
    ck_assert_int_eq(fmt_example_enc_begin(&e, &b), 0);
    ck_assert_int_eq(fmt_example_enc_float(&e, "x", x, 1), 0);
    ck_assert_int_eq(fmt_example_enc_end(&e), 0);
    assert_bytes_hex(&b, V_FLOAT);

    sl_buf_reset(&b);
    ck_assert_int_eq(fmt_example_enc_begin(&e, &b), 0);
    ck_assert_int_eq(fmt_example_enc_bytes(&e, "b", vals, lens, 1), 0);
    ck_assert_int_eq(fmt_example_enc_end(&e), 0);
    assert_bytes_hex(&b, V_BYTES);

    sl_buf_reset(&b);
    ck_assert_int_eq(fmt_example_enc_begin(&e, &b), 0);
    ck_assert_int_eq(fmt_example_enc_int64(&e, "n", neg, 1), 0);
    ck_assert_int_eq(fmt_example_enc_end(&e), 0);
    assert_bytes_hex(&b, V_NEG);

    sl_buf_reset(&b);
    ck_assert_int_eq(fmt_example_enc_begin(&e, &b), 0);
    ck_assert_int_eq(fmt_example_enc_end(&e), 0);
    assert_bytes_hex(&b, "0a00");

    /* appending: a second Example goes after the first, untouched */
    ck_assert_int_eq(fmt_example_enc_begin(&e, &b), 0);
    ck_assert_uint_eq(e.start, 2);
    ck_assert_int_eq(fmt_example_enc_int64(&e, "a", a, 3), 0);
    ck_assert_int_eq(fmt_example_enc_end(&e), 0);
    assert_bytes_hex(&b, "0a00 0a0e 0a0c 0a0161 1207 1a05 0a03 010203");
    sl_buf_free(&b);
}
END_TEST

/* Encode -> walk -> decode round trip over many shapes, then re-encode the
 * decoded values and compare bytes. */
START_TEST(test_roundtrip)
{
    struct sl_buf b, b2;
    struct fmt_example_enc e;
    struct sl_error err = {0};
    sl_buf_init(&b, 0);
    sl_buf_init(&b2, 0);
    int64_t iv[300];
    float fv[300];
    for (int i = 0; i < 300; i++) {
        iv[i] = (i % 2 ? -1 : 1) * ((int64_t)1 << (i % 63)) + i;
        fv[i] = (float)i * 0.25f - 3.0f;
    }
    iv[0] = INT64_MIN;
    iv[1] = INT64_MAX;
    uint8_t big[200];
    for (int i = 0; i < 200; i++)
        big[i] = (uint8_t)(i * 7);
    const uint8_t *vals[] = {big, (const uint8_t *)"", big + 3};
    const size_t lens[] = {200, 0, 129};

    ck_assert_int_eq(fmt_example_enc_begin(&e, &b), 0);
    ck_assert_int_eq(fmt_example_enc_int64(&e, "ints", iv, 300), 0);
    ck_assert_int_eq(fmt_example_enc_float(&e, "floats", fv, 300), 0);
    ck_assert_int_eq(fmt_example_enc_bytes(&e, "strs", vals, lens, 3), 0);
    ck_assert_int_eq(fmt_example_enc_int64(&e, "empty_i", NULL, 0), 0);
    ck_assert_int_eq(fmt_example_enc_float(&e, "empty_f", NULL, 0), 0);
    ck_assert_int_eq(fmt_example_enc_bytes(&e, "empty_b", NULL, NULL, 0), 0);
    ck_assert_int_eq(fmt_example_enc_end(&e), 0);

    struct seen s;
    ck_assert_int_eq(walk(b.data, b.len, &s, &err), 0);
    ck_assert_uint_eq(s.n, 6);
    assert_key(&s.v[0], "ints", FMT_KIND_INT64);
    assert_key(&s.v[1], "floats", FMT_KIND_FLOAT);
    assert_key(&s.v[2], "strs", FMT_KIND_BYTES);
    assert_key(&s.v[3], "empty_i", FMT_KIND_INT64);
    assert_key(&s.v[4], "empty_f", FMT_KIND_FLOAT);
    assert_key(&s.v[5], "empty_b", FMT_KIND_BYTES);
    assert_int64s(&s.v[0], iv, 300);
    ck_assert_uint_eq(s.v[3].list_len, 0);

    int64_t iv2[300];
    float fv2[300];
    ck_assert_int_eq(fmt_int64_list_decode(s.v[0].list, s.v[0].list_len, iv2, 300, &err), 0);
    ck_assert_int_eq(fmt_float_list_decode(s.v[1].list, s.v[1].list_len, fv2, 300, &err), 0);
    ck_assert(memcmp(fv2, fv, sizeof fv) == 0);
    const uint8_t *bv[3];
    size_t bl[3], k = 0;
    struct fmt_bytes_iter it;
    fmt_bytes_iter_init(&it, s.v[2].list, s.v[2].list_len);
    while (k < 3 && fmt_bytes_iter_next(&it, &bv[k], &bl[k], &err) == 0)
        k++;
    ck_assert_uint_eq(k, 3);
    ck_assert_uint_eq(bl[0], 200);
    ck_assert_uint_eq(bl[1], 0);
    ck_assert_uint_eq(bl[2], 129);
    ck_assert(memcmp(bv[2], big + 3, 129) == 0);

    ck_assert_int_eq(fmt_example_enc_begin(&e, &b2), 0);
    ck_assert_int_eq(fmt_example_enc_int64(&e, "ints", iv2, 300), 0);
    ck_assert_int_eq(fmt_example_enc_float(&e, "floats", fv2, 300), 0);
    ck_assert_int_eq(fmt_example_enc_bytes(&e, "strs", bv, bl, 3), 0);
    ck_assert_int_eq(fmt_example_enc_int64(&e, "empty_i", NULL, 0), 0);
    ck_assert_int_eq(fmt_example_enc_float(&e, "empty_f", NULL, 0), 0);
    ck_assert_int_eq(fmt_example_enc_bytes(&e, "empty_b", NULL, NULL, 0), 0);
    ck_assert_int_eq(fmt_example_enc_end(&e), 0);
    ck_assert_uint_eq(b.len, b2.len);
    ck_assert(memcmp(b.data, b2.data, b.len) == 0);
    sl_buf_free(&b);
    sl_buf_free(&b2);
}
END_TEST

START_TEST(test_int64_extremes)
{
    struct sl_error err = {0};
    uint8_t buf[64];
    /* packed list body: 0a len varints */
    size_t n = hex("0a 13 ffffffffffffffff7f 80808080808080808001", buf);
    size_t count;
    int64_t v[2];
    ck_assert_int_eq(fmt_int64_list_count(buf, n, &count, &err), 0);
    ck_assert_uint_eq(count, 2);
    ck_assert_int_eq(fmt_int64_list_decode(buf, n, v, 2, &err), 0);
    ck_assert_int_eq(v[0], INT64_MAX);
    ck_assert_int_eq(v[1], INT64_MIN);
    /* an 11-byte varint is refused */
    n = hex("0a 0b ffffffffffffffffffff01", buf);
    ck_assert_int_eq(fmt_int64_list_count(buf, n, &count, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "overlong (over 10 bytes) int64 value at byte 2");
    /* a varint running off the packed chunk */
    n = hex("0a 01 80 01", buf);
    ck_assert_int_eq(fmt_int64_list_count(buf, n, &count, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "truncated int64 value at byte 2");
}
END_TEST

START_TEST(test_first_packed_chunk_only)
{
    struct sl_error err = {0};
    uint8_t buf[64];
    size_t count, n;
    int64_t iv[4];
    float fv[4];
    /* two packed chunks: only [5] counts */
    n = hex("0a01 05 0a01 06", buf);
    ck_assert_int_eq(fmt_int64_list_count(buf, n, &count, &err), 0);
    ck_assert_uint_eq(count, 1);
    ck_assert_int_eq(fmt_int64_list_decode(buf, n, iv, 1, &err), 0);
    ck_assert_int_eq(iv[0], 5);
    /* packed then unpacked then garbage: ignored */
    n = hex("0a02 0708 0809 ff ff", buf);
    ck_assert_int_eq(fmt_int64_list_decode(buf, n, iv, 2, &err), 0);
    ck_assert_int_eq(iv[0], 7);
    ck_assert_int_eq(iv[1], 8);
    /* floats: same rule; a ragged tail inside the chunk is dropped */
    n = hex("0a06 0000803f 0000 0a04 00000040", buf);
    ck_assert_int_eq(fmt_float_list_count(buf, n, &count, &err), 0);
    ck_assert_uint_eq(count, 1);
    ck_assert_int_eq(fmt_float_list_decode(buf, n, fv, 1, &err), 0);
    ck_assert(fv[0] == 1.0f);
    /* unpacked: every tag must be the value tag */
    n = hex("0d 0000803f 0d 00000040", buf);
    ck_assert_int_eq(fmt_float_list_decode(buf, n, fv, 2, &err), 0);
    ck_assert(fv[0] == 1.0f && fv[1] == 2.0f);
    n = hex("0d 0000803f 0a04 00000040", buf);
    ck_assert_int_eq(fmt_float_list_count(buf, n, &count, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "unexpected tag 0x0a in unpacked FloatList at byte 5");
    n = hex("0801 0a01 02", buf);
    ck_assert_int_eq(fmt_int64_list_count(buf, n, &count, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "unexpected tag 0x0a in unpacked Int64List at byte 2");
    n = hex("0d 0000", buf);
    ck_assert_int_eq(fmt_float_list_count(buf, n, &count, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "truncated float value at byte 1");
    /* a first tag that is neither form */
    n = hex("1001", buf);
    ck_assert_int_eq(fmt_int64_list_count(buf, n, &count, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "unexpected tag 0x10 in Int64List at byte 0");
    ck_assert_int_eq(fmt_float_list_count(buf, n, &count, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "unexpected tag 0x10 in FloatList at byte 0");
    /* the decode call wants exactly the count */
    n = hex("0a03 010203", buf);
    ck_assert_int_eq(fmt_int64_list_decode(buf, n, iv, 2, &err), SL_EINVAL);
    ck_assert_int_eq(fmt_int64_list_decode(buf, n, iv, 4, &err), SL_EINVAL);
    /* a packed length past the list */
    n = hex("0a05 0102", buf);
    ck_assert_int_eq(fmt_int64_list_count(buf, n, &count, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "packed int64 length 5 past the end (2 bytes left) at byte 1");
}
END_TEST

/* The decoders write at most `cap` values (the caller's slots) however
 * many the list holds, and still count them all. Every cap from 0 to N + 1
 * for a list of N = 5 values, in each of the four encodings: the values
 * below min(N, cap) are right, and every slot from there on, the one just
 * past cap included, still holds its guard. The same calls into exact-size
 * heap buffers let ASan see a write past the end. A one-slot overflow
 * (`n <= cap`) fails the guard check here, not only glibc's heap checks
 * later. */
#define NV 5
#define GUARD_I64 INT64_C(0x5a5a5a5a5a5a5a5a)
#define GUARD_F32 (-12345.5f)

static const int64_t want_i64[NV] = {1, -1, 300, INT64_MAX, 0};
static const float want_f32[NV] = {1.0f, -2.5f, 0.5f, 3.0f, -0.0f};

static size_t min_sz(size_t a, size_t b)
{
    return a < b ? a : b;
}

static void check_i64_slots(const int64_t *slots, size_t cap, const char *what)
{
    for (size_t i = 0; i < min_sz(NV, cap); i++)
        ck_assert_msg(slots[i] == want_i64[i], "%s cap %zu: value %zu", what, cap, i);
    for (size_t i = min_sz(NV, cap); i < NV + 2; i++)
        ck_assert_msg(slots[i] == GUARD_I64, "%s cap %zu: slot %zu written (only %zu slots given)", what, cap, i, cap);
}

static void check_f32_slots(const float *slots, size_t cap, const char *what)
{
    for (size_t i = 0; i < min_sz(NV, cap); i++)
        ck_assert_msg(memcmp(&slots[i], &want_f32[i], 4) == 0, "%s cap %zu: value %zu", what, cap, i);
    for (size_t i = min_sz(NV, cap); i < NV + 2; i++)
        ck_assert_msg(slots[i] == GUARD_F32, "%s cap %zu: slot %zu written (only %zu slots given)", what, cap, i, cap);
}

START_TEST(test_decode_stays_within_cap)
{
    static const char *const i64_lists[2] = {
        /* packed: 1, -1 (ten bytes), 300, INT64_MAX (nine bytes), 0 */
        "0a 17 01 ffffffffffffffffff01 ac02 ffffffffffffffff7f 00",
        "08 01  08 ffffffffffffffffff01  08 ac02  08 ffffffffffffffff7f  08 00",
    };
    static const char *const f32_lists[2] = {
        "0a 14 0000803f 000020c0 0000003f 00004040 00000080",
        "0d 0000803f 0d 000020c0 0d 0000003f 0d 00004040 0d 00000080",
    };
    struct sl_error err = {0};
    uint8_t raw[128];
    for (int form = 0; form < 2; form++) {
        const char *what = form == 0 ? "packed" : "unpacked";
        size_t len = hex(i64_lists[form], raw);
        uint8_t *list = dup_bytes(raw, len);
        for (size_t cap = 0; cap <= NV + 1; cap++) {
            int64_t slots[NV + 2];
            size_t count = 99;
            for (size_t i = 0; i < NV + 2; i++)
                slots[i] = GUARD_I64;
            ck_assert_int_eq(fmt__int64_list_scan(list, len, 0, cap ? slots : NULL, cap, &count, &err), 0);
            ck_assert_uint_eq(count, NV);
            check_i64_slots(slots, cap, what);
            /* the public decode: the same slots, then the count must match */
            for (size_t i = 0; i < NV + 2; i++)
                slots[i] = GUARD_I64;
            int rc = fmt_int64_list_decode(list, len, slots, cap, &err);
            check_i64_slots(slots, cap, what);
            if (cap == NV) {
                ck_assert_int_eq(rc, 0);
            } else {
                char msg[96];
                snprintf(msg, sizeof msg, "Int64List has 5 values, caller expected %zu", cap);
                ck_assert_int_eq(rc, SL_EINVAL);
                ck_assert_str_eq(err.msg, msg);
            }
            /* exactly cap slots on the heap: ASan sees any write past them */
            int64_t *exact = malloc(cap ? cap * sizeof *exact : 1);
            ck_assert_ptr_nonnull(exact);
            ck_assert_int_eq(fmt__int64_list_scan(list, len, 0, exact, cap, &count, &err), 0);
            rc = fmt_int64_list_decode(list, len, exact, cap, &err);
            ck_assert_int_eq(rc, cap == NV ? 0 : SL_EINVAL);
            free(exact);
        }
        free(list);

        len = hex(f32_lists[form], raw);
        list = dup_bytes(raw, len);
        for (size_t cap = 0; cap <= NV + 1; cap++) {
            float slots[NV + 2];
            size_t count = 99;
            for (size_t i = 0; i < NV + 2; i++)
                slots[i] = GUARD_F32;
            ck_assert_int_eq(fmt__float_list_scan(list, len, 0, cap ? slots : NULL, cap, &count, &err), 0);
            ck_assert_uint_eq(count, NV);
            check_f32_slots(slots, cap, what);
            for (size_t i = 0; i < NV + 2; i++)
                slots[i] = GUARD_F32;
            int rc = fmt_float_list_decode(list, len, slots, cap, &err);
            check_f32_slots(slots, cap, what);
            if (cap == NV) {
                ck_assert_int_eq(rc, 0);
            } else {
                char msg[96];
                snprintf(msg, sizeof msg, "FloatList has 5 values, caller expected %zu", cap);
                ck_assert_int_eq(rc, SL_EINVAL);
                ck_assert_str_eq(err.msg, msg);
            }
            float *exact = malloc(cap ? cap * sizeof *exact : 1);
            ck_assert_ptr_nonnull(exact);
            ck_assert_int_eq(fmt__float_list_scan(list, len, 0, exact, cap, &count, &err), 0);
            rc = fmt_float_list_decode(list, len, exact, cap, &err);
            ck_assert_int_eq(rc, cap == NV ? 0 : SL_EINVAL);
            free(exact);
        }
        free(list);
    }
    /* the count calls agree, and a packed float chunk's ragged tail (3
     * bytes) is neither counted nor copied */
    size_t count = 0;
    size_t len = hex("0a 0b 0000803f 000020c0 aabbcc", raw);
    float two[NV + 2];
    for (size_t i = 0; i < NV + 2; i++)
        two[i] = GUARD_F32;
    ck_assert_int_eq(fmt_float_list_count(raw, len, &count, &err), 0);
    ck_assert_uint_eq(count, 2);
    ck_assert_int_eq(fmt__float_list_scan(raw, len, 0, two, 3, &count, &err), 0);
    ck_assert_uint_eq(count, 2);
    ck_assert(two[0] == 1.0f && two[1] == -2.5f);
    for (size_t i = 2; i < NV + 2; i++)
        ck_assert(two[i] == GUARD_F32);
}
END_TEST

/* The same contract where it matters most: Examples decoded into a column
 * bound to caller memory (the feeder decodes into the buffer it sends). A
 * row whose list holds one value more than the shape, at the last row
 * that fits, is refused with TensorFlow's text and writes nothing past the
 * buffer; so is a row beyond the bound rows. The buffers end in guard
 * slots, checked after every call. */
static void add_row(struct fmt_batch *b, struct sl_buf *buf, const int64_t *iv, size_t ni, const float *fv, size_t nf,
                    int want_rc, const char *want_msg)
{
    struct fmt_example_enc e;
    struct sl_error err = {0};
    sl_buf_reset(buf);
    ck_assert_int_eq(fmt_example_enc_begin(&e, buf), 0);
    ck_assert_int_eq(fmt_example_enc_int64(&e, "i", iv, ni), 0);
    ck_assert_int_eq(fmt_example_enc_float(&e, "f", fv, nf), 0);
    ck_assert_int_eq(fmt_example_enc_end(&e), 0);
    uint8_t *copy = dup_bytes(buf->data, buf->len);
    int rc = fmt_batch_add(b, copy, buf->len, &err);
    free(copy);
    ck_assert_msg(rc == want_rc, "rc %d (%s), expected %d", rc, err.msg, want_rc);
    if (want_msg)
        ck_assert_str_eq(err.msg, want_msg);
}

START_TEST(test_bound_column_stays_within_buffer)
{
    struct fmt_feature_spec specs[2] = {
        {.name = "i", .dtype = FMT_DTYPE_INT64, .rank = 1, .shape = {3}},
        {.name = "f", .dtype = FMT_DTYPE_FLOAT32, .rank = 1, .shape = {2}},
    };
    struct fmt_batch *b;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_batch_create(&b, specs, 2, 4, &err), 0);
    /* room for exactly 2 rows, then guard slots */
    int64_t idst[2 * 3 + 3];
    float fdst[2 * 2 + 3];
    for (size_t k = 0; k < sizeof idst / sizeof idst[0]; k++)
        idst[k] = GUARD_I64;
    for (size_t k = 0; k < sizeof fdst / sizeof fdst[0]; k++)
        fdst[k] = GUARD_F32;
    ck_assert_int_eq(fmt_batch_bind(b, 0, idst, 2 * 3 * sizeof(int64_t), &err), 0);
    ck_assert_int_eq(fmt_batch_bind(b, 1, fdst, 2 * 2 * sizeof(float), &err), 0);
    struct sl_buf buf;
    sl_buf_init(&buf, 1 << 16);
    const int64_t i0[3] = {1, 2, 3}, i1[4] = {7, 8, 9, 10};
    const float f0[2] = {0.5f, 1.5f}, f1[3] = {2.5f, 3.5f, 4.5f};

    add_row(b, &buf, i0, 3, f0, 2, 0, NULL);
    /* the last row that fits: one value too many in each column */
    add_row(b, &buf, i1, 4, f1, 2, SL_EINVAL,
            "Key: i, Index: 1.  Number of int64 values != expected.  Values size: 4 but output shape: [3]");
    add_row(b, &buf, i1, 3, f1, 3, SL_EINVAL,
            "Key: f, Index: 1.  Number of float values != expected.  Values size: 3 but output shape: [2]");
    ck_assert_uint_eq(fmt_batch_rows(b), 1);
    for (size_t k = 6; k < sizeof idst / sizeof idst[0]; k++)
        ck_assert_msg(idst[k] == GUARD_I64, "int64 slot %zu past the buffer written", k);
    for (size_t k = 4; k < sizeof fdst / sizeof fdst[0]; k++)
        ck_assert_msg(fdst[k] == GUARD_F32, "float slot %zu past the buffer written", k);
    add_row(b, &buf, i1, 3, f1, 2, 0, NULL);
    /* a third row does not fit the bound buffers */
    add_row(b, &buf, i0, 3, f0, 2, SL_EINVAL, "feature i: the bound buffer holds 2 rows");
    ck_assert_uint_eq(fmt_batch_rows(b), 2);
    const int64_t iwant[6] = {1, 2, 3, 7, 8, 9};
    const float fwant[4] = {0.5f, 1.5f, 2.5f, 3.5f};
    ck_assert_mem_eq(idst, iwant, sizeof iwant);
    ck_assert_mem_eq(fdst, fwant, sizeof fwant);
    for (size_t k = 6; k < sizeof idst / sizeof idst[0]; k++)
        ck_assert_msg(idst[k] == GUARD_I64, "int64 slot %zu past the buffer written", k);
    for (size_t k = 4; k < sizeof fdst / sizeof fdst[0]; k++)
        ck_assert_msg(fdst[k] == GUARD_F32, "float slot %zu past the buffer written", k);
    sl_buf_free(&buf);
    fmt_batch_destroy(b);
}
END_TEST

START_TEST(test_unknown_fields_skipped)
{
    struct seen s;
    struct sl_error err = {0};
    const int64_t a[] = {1, 2, 3};
    /* before and after the Features: varint field 2, fixed64 field 3,
     * length-delimited field 4, fixed32 field 5, and a 2-byte tag (field 16) */
    const char *h = "1096 01 19 0102030405060708 2203 616263 2d 01020304 8001 05"
                    "0a0e 0a0c 0a0161 1207 1a05 0a03 010203"
                    "10ff ffff ffff ffff ffff 01";
    ck_assert_int_eq(walk_hex(h, &s, &err), 0);
    ck_assert_uint_eq(s.n, 1);
    assert_key(&s.v[0], "a", FMT_KIND_INT64);
    assert_int64s(&s.v[0], a, 3);
    /* the Feature's bytes after its first oneof field are not looked at */
    ck_assert_int_eq(walk_hex("0a12 0a10 0a0161 120b 1a05 0a03 010203 1202 ffff", &s, &err), 0);
    ck_assert_uint_eq(s.n, 1);
    assert_int64s(&s.v[0], a, 3);
}
END_TEST

START_TEST(test_group_wire_types_rejected)
{
    struct seen s;
    struct sl_error err = {0};
    ck_assert_int_eq(walk_hex("0a00 13", &s, &err), SL_ECORRUPT);
    ck_assert_int_eq(err.code, SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "group start (wire type 3) at byte 2");
    ck_assert_int_eq(walk_hex("14", &s, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "group end (wire type 4) at byte 0");
    ck_assert_int_eq(walk_hex("16 00", &s, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "invalid wire type 6 at byte 0");
    ck_assert_int_eq(walk_hex("00 00", &s, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "invalid tag 0x0 at byte 0");
}
END_TEST

/* Framing errors, each with its exact text. */
START_TEST(test_bad_framing)
{
    static const struct {
        const char *hex, *msg;
    } cases[] = {
        {"0a", "truncated Features length at byte 1"},
        {"0a05 0a03", "Features length 5 past the end (2 bytes left) at byte 1"},
        {"0a02 1200", "unexpected tag 0x12 in Features at byte 2"},
        {"0a02 0a05", "map entry length 5 past the end (0 bytes left) at byte 3"},
        {"0a02 0a00", "map entry with fewer than 2 fields at byte 4"},
        {"0a04 0a02 0a00", "map entry with fewer than 2 fields at byte 6"},
        {"0a08 0a06 0a00 1200 1200", "map entry with more than 2 fields at byte 8"},
        {"0a06 0a04 0a00 2200", "unexpected tag 0x22 in map entry at byte 6"},
        {"0a06 0a04 0a05 1200", "key length 5 past the end (2 bytes left) at byte 5"},
        {"0a06 0a04 0a00 1209", "feature length 9 past the end (0 bytes left) at byte 7"},
        {"0a07 0a05 0a00 1201 2a", "Unsupported datatype (tag 0x2a) at byte 8"},
        {"0a08 0a06 0a00 1202 1a05", "list length 5 past the end (0 bytes left) at byte 9"},
        {"08", "truncated varint field at byte 1"},
        {"09 0102", "truncated fixed64 field at byte 0"},
        {"0d 0102", "truncated fixed32 field at byte 0"},
        {"12 05 00", "unknown field length 5 past the end (1 bytes left) at byte 1"},
        {"80", "truncated tag at byte 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct seen s;
        struct sl_error err = {0};
        ck_assert_msg(walk_hex(cases[i].hex, &s, &err) == SL_ECORRUPT, "case %zu accepted", i);
        ck_assert_msg(strcmp(err.msg, cases[i].msg) == 0, "case %zu: got '%s' want '%s'", i, err.msg, cases[i].msg);
    }
}
END_TEST

START_TEST(test_map_entry_forms)
{
    struct seen s;
    struct sl_error err = {0};
    const int64_t a[] = {1, 2, 3};
    /* value before key */
    ck_assert_int_eq(walk_hex("0a0e 0a0c 1207 1a05 0a03 010203 0a0161", &s, &err), 0);
    ck_assert_uint_eq(s.n, 1);
    assert_key(&s.v[0], "a", FMT_KIND_INT64);
    assert_int64s(&s.v[0], a, 3);
    /* an empty Feature: no kind */
    ck_assert_int_eq(walk_hex("0a07 0a05 0a0161 1200", &s, &err), 0);
    ck_assert_uint_eq(s.n, 1);
    assert_key(&s.v[0], "a", FMT_KIND_NONE);
    /* two Features messages merge; field order kept */
    ck_assert_int_eq(walk_hex("0a07 0a05 0a0161 1200 0a0d 0a0b 0a0162 1206 0a04 0a02 6869", &s, &err), 0);
    ck_assert_uint_eq(s.n, 2);
    assert_key(&s.v[0], "a", FMT_KIND_NONE);
    assert_key(&s.v[1], "b", FMT_KIND_BYTES);
    /* duplicates are reported as they come */
    ck_assert_int_eq(walk_hex("0a0e 0a05 0a0161 1200 0a05 0a0161 1200", &s, &err), 0);
    ck_assert_uint_eq(s.n, 2);
}
END_TEST

static int stop_at_second(void *ctx, const struct fmt_feature_view *f)
{
    (void)f;
    return ++*(int *)ctx == 2 ? 42 : 0;
}

START_TEST(test_walk_stops)
{
    uint8_t buf[64];
    int calls = 0;
    struct sl_error err = {0};
    size_t n = hex("0a0e 0a05 0a0161 1200 0a05 0a0162 1200", buf);
    ck_assert_int_eq(fmt_example_walk(buf, n, stop_at_second, &calls, &err), 42);
    ck_assert_int_eq(calls, 2);
}
END_TEST

START_TEST(test_bytes_iter_errors)
{
    uint8_t buf[64];
    struct sl_error err = {0};
    size_t n = hex("0a01 61 1201 62", buf), count;
    ck_assert_int_eq(fmt_bytes_list_count(buf, n, &count, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "unexpected tag 0x12 in BytesList at byte 3");
    n = hex("0a01 61 0a05 6263", buf);
    ck_assert_int_eq(fmt_bytes_list_count(buf, n, &count, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "bytes value length 5 past the end (2 bytes left) at byte 4");
    n = hex("0a01 61 0a00 0a02 6263", buf);
    ck_assert_int_eq(fmt_bytes_list_count(buf, n, &count, &err), 0);
    ck_assert_uint_eq(count, 3);
    ck_assert_int_eq(fmt_bytes_list_count(NULL, 0, &count, &err), 0);
    ck_assert_uint_eq(count, 0);
}
END_TEST

/* Every prefix of a valid multi-feature Example: never a crash or an
 * over-read (exact-size copies under ASan); either an error or a walk that
 * is a faithful prefix. */
START_TEST(test_every_cut_point)
{
    struct sl_buf b;
    struct fmt_example_enc e;
    sl_buf_init(&b, 0);
    const int64_t iv[] = {-5, 300, 1 << 20};
    const float fv[] = {1.5f, -2.0f};
    static uint8_t long_value[150]; /* two-byte lengths all the way up */
    const uint8_t *vals[] = {(const uint8_t *)"hello", (const uint8_t *)"", long_value};
    const size_t lens[] = {5, 0, sizeof long_value};
    ck_assert_int_eq(fmt_example_enc_begin(&e, &b), 0);
    ck_assert_int_eq(fmt_example_enc_int64(&e, "i", iv, 3), 0);
    ck_assert_int_eq(fmt_example_enc_float(&e, "f", fv, 2), 0);
    ck_assert_int_eq(fmt_example_enc_bytes(&e, "b", vals, lens, 3), 0);
    ck_assert_int_eq(fmt_example_enc_end(&e), 0);
    size_t ok = 0;
    for (size_t cut = 0; cut <= b.len; cut++) {
        struct seen s;
        struct sl_error err = {0};
        uint8_t *d = dup_bytes(b.data, cut);
        memset(&s, 0, sizeof s);
        int rc = fmt_example_walk(d, cut, collect, &s, &err);
        if (rc == 0) {
            ok++;
            for (size_t i = 0; i < s.n && i < MAX_SEEN; i++) {
                size_t count;
                const struct fmt_feature_view *v = &s.v[i];
                int r2 = v->kind == FMT_KIND_INT64   ? fmt_int64_list_count(v->list, v->list_len, &count, &err)
                         : v->kind == FMT_KIND_FLOAT ? fmt_float_list_count(v->list, v->list_len, &count, &err)
                                                     : fmt_bytes_list_count(v->list, v->list_len, &count, &err);
                ck_assert(r2 == 0 || r2 == SL_ECORRUPT);
            }
        } else {
            ck_assert_int_eq(rc, SL_ECORRUPT);
            ck_assert(strstr(err.msg, " at byte ") != NULL);
        }
        struct sl_buf js;
        sl_buf_init(&js, 0);
        rc = fmt_example_to_json(d, cut, &js, &err);
        ck_assert(rc == 0 || rc == SL_ECORRUPT);
        if (rc != 0)
            ck_assert_uint_eq(js.len, 0);
        sl_buf_free(&js);
        free(d);
    }
    /* only the empty prefix and the whole Example parse */
    ck_assert_uint_eq(ok, 2);
    sl_buf_free(&b);
}
END_TEST

/* Damage each byte of a valid Example in turn. */
START_TEST(test_every_byte_flipped)
{
    uint8_t buf[256];
    size_t n = hex("0a2c 0a0e 0a0161 1209 1a07 0a05 7f8001ff01"
                   "0a0f 0a0178 120a 1208 0a06 0000803f 0000"
                   "0a09 0a0162 1204 0a02 0a00",
                   buf);
    static const uint8_t xors[] = {0x01, 0x80, 0xff, 0x10};
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < sizeof xors; k++) {
            uint8_t *d = dup_bytes(buf, n);
            d[i] ^= xors[k];
            struct seen s;
            struct sl_error err = {0};
            memset(&s, 0, sizeof s);
            int rc = fmt_example_walk(d, n, collect, &s, &err);
            ck_assert(rc == 0 || rc == SL_ECORRUPT);
            struct sl_buf js;
            sl_buf_init(&js, 0);
            rc = fmt_example_to_json(d, n, &js, &err);
            ck_assert(rc == 0 || rc == SL_ECORRUPT);
            sl_buf_free(&js);
            free(d);
        }
    }
}
END_TEST

START_TEST(test_encoder_alloc_failure)
{
    struct sl_buf b;
    struct fmt_example_enc e;
    sl_buf_init(&b, 0);
    int64_t big[100];
    for (int i = 0; i < 100; i++)
        big[i] = -1 - i; /* 10 bytes each: outgrows the first allocation */

    /* begin on an empty buffer allocates: its failure leaves out untouched */
    sl_alloc_fail_after(1);
    ck_assert_int_eq(fmt_example_enc_begin(&e, &b), SL_ENOMEM);
    sl_alloc_fail_reset();
    ck_assert_uint_eq(b.len, 0);

    /* growth fails inside an add: abort restores out */
    ck_assert_int_eq(fmt_example_enc_begin(&e, &b), 0);
    sl_alloc_fail_after(1);
    ck_assert_int_eq(fmt_example_enc_int64(&e, "a", big, 100), SL_ENOMEM);
    sl_alloc_fail_reset();
    fmt_example_enc_abort(&e);
    ck_assert_uint_eq(b.len, 0);

    /* once out has grown, encoding again into it allocates nothing */
    ck_assert_int_eq(fmt_example_enc_begin(&e, &b), 0);
    ck_assert_int_eq(fmt_example_enc_int64(&e, "a", big, 100), 0);
    ck_assert_int_eq(fmt_example_enc_end(&e), 0);
    size_t first_len = b.len;
    uint8_t *first = malloc(first_len);
    memcpy(first, b.data, first_len);
    sl_buf_reset(&b);
    sl_alloc_fail_after(1);
    ck_assert_int_eq(fmt_example_enc_begin(&e, &b), 0);
    ck_assert_int_eq(fmt_example_enc_int64(&e, "a", big, 100), 0);
    ck_assert_int_eq(fmt_example_enc_end(&e), 0);
    sl_alloc_fail_reset();
    ck_assert_uint_eq(b.len, first_len);
    ck_assert_int_eq(memcmp(b.data, first, first_len), 0);
    free(first);

    /* an out buffer with a small max refuses a big Example */
    const int64_t a[] = {1, 2, 3};
    struct sl_buf small;
    sl_buf_init(&small, 12);
    ck_assert_int_eq(fmt_example_enc_begin(&e, &small), 0);
    ck_assert_int_eq(fmt_example_enc_int64(&e, "a", a, 3), SL_EINVAL);
    fmt_example_enc_abort(&e);
    ck_assert_uint_eq(small.len, 0);
    sl_buf_free(&small);
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_kind_names)
{
    ck_assert_str_eq(fmt_kind_name(FMT_KIND_BYTES), "bytes");
    ck_assert_str_eq(fmt_kind_name(FMT_KIND_FLOAT), "float");
    ck_assert_str_eq(fmt_kind_name(FMT_KIND_INT64), "int64");
    ck_assert_str_eq(fmt_kind_tf_name(FMT_KIND_BYTES), "string");
    ck_assert_str_eq(fmt_kind_tf_name(FMT_KIND_FLOAT), "float");
    ck_assert_str_eq(fmt_kind_tf_name(FMT_KIND_INT64), "int64");
}
END_TEST

/* ---- JSON -------------------------------------------------------------- */

START_TEST(test_json_vectors)
{
    json_of_hex(V_INT64, "{\"features\":{\"feature\":{\"a\":{\"int64List\":{\"value\":[\"1\",\"2\",\"3\"]}}}}}");
    json_of_hex(V_UNPACKED, "{\"features\":{\"feature\":{\"a\":{\"int64List\":{\"value\":[\"1\",\"2\",\"3\"]}}}}}");
    json_of_hex(V_FLOAT, "{\"features\":{\"feature\":{\"x\":{\"floatList\":{\"value\":[1]}}}}}");
    json_of_hex(V_BYTES, "{\"features\":{\"feature\":{\"b\":{\"bytesList\":{\"value\":[\"aGk=\"]}}}}}");
    json_of_hex(V_NEG, "{\"features\":{\"feature\":{\"n\":{\"int64List\":{\"value\":[\"-1\"]}}}}}");
    json_of(NULL, 0, "{}");
    json_of_hex("0a00", "{\"features\":{}}");
    json_of_hex("1001", "{}"); /* only an unknown field */
}
END_TEST

START_TEST(test_json_mixed)
{
    struct sl_buf b;
    struct fmt_example_enc e;
    sl_buf_init(&b, 0);
    const int64_t k[] = {1, -2};
    const float x[] = {1.5f, NAN, INFINITY, -INFINITY, 0.1f};
    const uint8_t *vals[] = {(const uint8_t *)"hi", (const uint8_t *)"", (const uint8_t *)"\xff\x00\x01"};
    const size_t lens[] = {2, 0, 3};
    ck_assert_int_eq(fmt_example_enc_begin(&e, &b), 0);
    ck_assert_int_eq(fmt_example_enc_int64(&e, "k", k, 2), 0);
    ck_assert_int_eq(fmt_example_enc_bytes(&e, "b", vals, lens, 3), 0);
    ck_assert_int_eq(fmt_example_enc_float(&e, "x", x, 5), 0);
    ck_assert_int_eq(fmt_example_enc_int64(&e, "e\"q\n", NULL, 0), 0);
    ck_assert_int_eq(fmt_example_enc_bytes(&e, "eb", NULL, NULL, 0), 0);
    ck_assert_int_eq(fmt_example_enc_float(&e, "ef", NULL, 0), 0);
    ck_assert_int_eq(fmt_example_enc_end(&e), 0);
    json_of(b.data, b.len,
            "{\"features\":{\"feature\":{"
            "\"k\":{\"int64List\":{\"value\":[\"1\",\"-2\"]}},"
            "\"b\":{\"bytesList\":{\"value\":[\"aGk=\",\"\",\"/wAB\"]}},"
            "\"x\":{\"floatList\":{\"value\":[1.5,\"NaN\",\"Infinity\",\"-Infinity\",0.1]}},"
            "\"e\\\"q\\n\":{\"int64List\":{}},"
            "\"eb\":{\"bytesList\":{}},"
            "\"ef\":{\"floatList\":{}}}}}");
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_json_duplicates)
{
    /* a=[1], b="hi", a=[2]: a keeps its first place and its last value */
    json_of_hex("0a0c 0a0a 0a0161 1205 1a03 0a0101"
                "0a0d 0a0b 0a0162 1206 0a04 0a02 6869"
                "0a0c 0a0a 0a0161 1205 1a03 0a0102",
                "{\"features\":{\"feature\":{\"a\":{\"int64List\":{\"value\":[\"2\"]}},"
                "\"b\":{\"bytesList\":{\"value\":[\"aGk=\"]}}}}}");
    /* a Feature with no kind is {} and, as in protobuf's map, replaces */
    json_of_hex("0a0c 0a0a 0a0161 1205 1a03 0a0101 0a07 0a05 0a0161 1200", "{\"features\":{\"feature\":{\"a\":{}}}}");
    /* an empty key */
    json_of_hex("0a06 0a04 0a00 1200", "{\"features\":{\"feature\":{\"\":{}}}}");
}
END_TEST

START_TEST(test_json_errors)
{
    struct sl_buf out;
    struct sl_error err = {0};
    uint8_t buf[64];
    sl_buf_init(&out, 0);
    ck_assert_int_eq(sl_buf_puts(&out, "keep"), 0);
    size_t n = hex("0a09 0a07 0a0161 1202 1a01", buf);
    ck_assert_int_eq(fmt_example_to_json(buf, n, &out, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "list length 1 past the end (0 bytes left) at byte 10");
    ck_assert_uint_eq(out.len, 4);
    /* a bad list inside a Feature */
    n = hex("0a0a 0a08 0a0161 1203 1a01 10", buf);
    ck_assert_int_eq(fmt_example_to_json(buf, n, &out, &err), SL_ECORRUPT);
    ck_assert_str_eq(err.msg, "unexpected tag 0x10 in Int64List at byte 11");
    ck_assert_uint_eq(out.len, 4);
    /* allocation failure: an error, out unchanged */
    n = hex(V_INT64, buf);
    sl_alloc_fail_after(1);
    ck_assert_int_eq(fmt_example_to_json(buf, n, &out, &err), SL_ENOMEM);
    sl_alloc_fail_reset();
    ck_assert_uint_eq(out.len, 4);
    ck_assert_int_eq(err.code, SL_ENOMEM);
    sl_buf_free(&out);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("fmt_example");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_vectors_decode);
    tcase_add_test(tc, test_vectors_encode);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_int64_extremes);
    tcase_add_test(tc, test_first_packed_chunk_only);
    tcase_add_test(tc, test_decode_stays_within_cap);
    tcase_add_test(tc, test_bound_column_stays_within_buffer);
    tcase_add_test(tc, test_unknown_fields_skipped);
    tcase_add_test(tc, test_group_wire_types_rejected);
    tcase_add_test(tc, test_bad_framing);
    tcase_add_test(tc, test_map_entry_forms);
    tcase_add_test(tc, test_walk_stops);
    tcase_add_test(tc, test_bytes_iter_errors);
    tcase_add_test(tc, test_every_cut_point);
    tcase_add_test(tc, test_every_byte_flipped);
    tcase_add_test(tc, test_encoder_alloc_failure);
    tcase_add_test(tc, test_kind_names);
    tcase_add_test(tc, test_json_vectors);
    tcase_add_test(tc, test_json_mixed);
    tcase_add_test(tc, test_json_duplicates);
    tcase_add_test(tc, test_json_errors);
    suite_add_tcase(s, tc);
    return s;
}
