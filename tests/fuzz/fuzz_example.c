/* libFuzzer target for fmt_example and fmt_features: the input is one
 * serialized Example. Every entry point must either succeed or return an
 * error; on top of that the target checks a few invariants and traps:
 *  - the walk plus full list decodes succeed exactly when the JSON writer
 *    (which reads the same way) succeeds;
 *  - whatever decodes, re-encodes and decodes back to the same values;
 *  - a batch's columns stay self-consistent after every add.
 * Feature names are one letter so that the fuzzer finds them quickly. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fmt_example.h"
#include "fmt_features.h"
#include "sl_buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)              \
    do {                      \
        if (!(x))             \
            __builtin_trap(); \
    } while (0)

#define BATCH_ROWS 16

/* Two batches see every input: in batches[0] every fixed-length feature has
 * a default (so rows get added often), in batches[1] some are required. */
static struct fmt_batch *batches[2];

static struct fmt_batch *make_batch(int all_defaults)
{
    struct fmt_feature_spec specs[9];
    static const struct {
        const char *name;
        enum fmt_dtype t;
        int varlen, rank;
        int64_t d0, d1;
        int dflt;
    } table[] = {
        {"a", FMT_DTYPE_INT64, 0, 0, 0, 0, 0}, {"f", FMT_DTYPE_FLOAT32, 0, 2, 1, 2, 1},
        {"s", FMT_DTYPE_BYTES, 0, 1, 2, 0, 1}, {"u", FMT_DTYPE_UINT8, 0, 2, 2, 2, 1},
        {"i", FMT_DTYPE_INT64, 1, 0, 0, 0, 0}, {"g", FMT_DTYPE_FLOAT32, 1, 0, 0, 0, 0},
        {"b", FMT_DTYPE_BYTES, 1, 0, 0, 0, 0}, {"r", FMT_DTYPE_UINT8, 1, 0, 0, 0, 0},
        {"x", FMT_DTYPE_UINT8, 0, 1, 3, 0, 0},
    };
    for (size_t k = 0; k < 9; k++) {
        struct fmt_feature_spec *s = &specs[k];
        memset(s, 0, sizeof *s);
        strcpy(s->name, table[k].name);
        s->dtype = table[k].t;
        s->varlen = table[k].varlen;
        s->rank = table[k].rank;
        s->shape[0] = table[k].d0;
        s->shape[1] = table[k].d1;
        s->has_default = all_defaults || table[k].dflt;
        s->default_i64 = -1;
        s->default_f32 = 0.5f;
        s->default_u8 = 7;
        s->default_bytes = (const uint8_t *)"dflt";
        s->default_bytes_len = 4;
    }
    struct sl_error err = {0};
    struct fmt_batch *b = NULL;
    CHECK(fmt_batch_create(&b, specs, 9, BATCH_ROWS, &err) == 0);
    return b;
}

static void check_batch(const struct fmt_batch *batch)
{
    size_t rows = fmt_batch_rows(batch);
    for (size_t i = 0; i < fmt_batch_ncolumns(batch); i++) {
        struct fmt_column c;
        fmt_batch_column(batch, i, &c);
        CHECK(c.rows == rows);
        if (c.row_splits != NULL) {
            CHECK(c.row_splits[0] == 0);
            for (size_t r = 0; r < rows; r++)
                CHECK(c.row_splits[r] <= c.row_splits[r + 1]);
            CHECK(c.row_splits[rows] == c.nvalues);
        }
        if (c.bytes_offsets != NULL) {
            CHECK(c.bytes_offsets[0] == 0);
            for (size_t v = 0; v < c.nvalues; v++)
                CHECK(c.bytes_offsets[v] <= c.bytes_offsets[v + 1]);
            CHECK(c.bytes_offsets[c.nvalues] == c.value_bytes);
        }
        if (c.dtype != FMT_DTYPE_BYTES)
            CHECK(c.value_bytes == c.nvalues * fmt_dtype_size(c.dtype));
    }
}

/* Decode every list the walk reports and re-encode it. */
struct walk_state {
    struct fmt_example_enc enc;
    int enc_ok;
    size_t entries;
};

static int on_feature(void *ctx, const struct fmt_feature_view *f)
{
    struct walk_state *w = ctx;
    struct sl_error err = {0};
    char key[64];
    size_t count = 0;
    int rc = 0;
    /* the encoder takes C strings: only keys it can reproduce */
    int encodable = f->key_len < sizeof key && memchr(f->key, '\0', f->key_len) == NULL;
    if (encodable) {
        memcpy(key, f->key, f->key_len);
        key[f->key_len] = '\0';
    }
    w->entries++;
    if (f->kind == FMT_KIND_INT64) {
        if ((rc = fmt_int64_list_count(f->list, f->list_len, &count, &err)) != 0)
            return rc;
        int64_t *v = malloc((count ? count : 1) * sizeof *v);
        CHECK(v != NULL);
        CHECK(fmt_int64_list_decode(f->list, f->list_len, v, count, &err) == 0);
        if (encodable && w->enc_ok)
            w->enc_ok = fmt_example_enc_int64(&w->enc, key, v, count) == 0;
        free(v);
    } else if (f->kind == FMT_KIND_FLOAT) {
        if ((rc = fmt_float_list_count(f->list, f->list_len, &count, &err)) != 0)
            return rc;
        float *v = malloc((count ? count : 1) * sizeof *v);
        CHECK(v != NULL);
        CHECK(fmt_float_list_decode(f->list, f->list_len, v, count, &err) == 0);
        if (encodable && w->enc_ok)
            w->enc_ok = fmt_example_enc_float(&w->enc, key, v, count) == 0;
        free(v);
    } else if (f->kind == FMT_KIND_BYTES) {
        if ((rc = fmt_bytes_list_count(f->list, f->list_len, &count, &err)) != 0)
            return rc;
        const uint8_t **vals = malloc((count ? count : 1) * sizeof *vals);
        size_t *lens = malloc((count ? count : 1) * sizeof *lens);
        CHECK(vals != NULL && lens != NULL);
        struct fmt_bytes_iter it;
        fmt_bytes_iter_init(&it, f->list, f->list_len);
        for (size_t k = 0; k < count; k++)
            CHECK(fmt_bytes_iter_next(&it, &vals[k], &lens[k], &err) == 0);
        CHECK(fmt_bytes_iter_next(&it, &vals[0], &lens[0], &err) == SL_END);
        if (encodable && w->enc_ok)
            w->enc_ok = fmt_example_enc_bytes(&w->enc, key, vals, lens, count) == 0;
        free(vals);
        free(lens);
    }
    return 0;
}

/* The JSON of an Example's values, ignoring its key order and duplicates,
 * compared across a re-encode: same entries, same values. */
static int json_of(const uint8_t *p, size_t n, struct sl_buf *out)
{
    struct sl_error err = {0};
    sl_buf_init(out, 0);
    return fmt_example_to_json(p, n, out, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (batches[0] == NULL) {
        batches[0] = make_batch(1);
        batches[1] = make_batch(0);
    }

    struct sl_error err = {0};
    struct sl_buf reenc;
    struct walk_state w;
    memset(&w, 0, sizeof w);
    sl_buf_init(&reenc, 0);
    CHECK(fmt_example_enc_begin(&w.enc, &reenc) == 0);
    w.enc_ok = 1;
    int walk_rc = fmt_example_walk(data, size, on_feature, &w, &err);
    CHECK(walk_rc == 0 || walk_rc == SL_ECORRUPT);

    struct sl_buf js;
    int json_rc = json_of(data, size, &js);
    CHECK(json_rc == walk_rc);

    /* Round trip: when every entry decoded and could be re-encoded (no
     * kind-less Features, plain keys), the re-encoded Example must walk and
     * print the same, entry for entry. */
    if (walk_rc == 0 && w.enc_ok) {
        CHECK(fmt_example_enc_end(&w.enc) == 0);
        struct walk_state w2;
        memset(&w2, 0, sizeof w2);
        size_t reenc_len = reenc.len;
        CHECK(fmt_example_enc_begin(&w2.enc, &reenc) == 0); /* not encoded into: enc_ok = 0 */
        w2.enc_ok = 0;
        CHECK(fmt_example_walk(reenc.data, reenc_len, on_feature, &w2, &err) == 0);
        fmt_example_enc_abort(&w2.enc);
        CHECK(reenc.len == reenc_len);
        struct sl_buf js2;
        CHECK(json_of(reenc.data, reenc.len, &js2) == 0);
        if (w2.entries == w.entries && w.entries > 0)
            CHECK(js2.len == js.len && memcmp(js2.data, js.data, js.len) == 0);
        sl_buf_free(&js2);
    } else {
        fmt_example_enc_abort(&w.enc);
    }
    sl_buf_free(&js);
    sl_buf_free(&reenc);

    for (int k = 0; k < 2; k++) {
        struct fmt_batch *batch = batches[k];
        size_t before = fmt_batch_rows(batch);
        sl_error_clear(&err);
        int rc = fmt_batch_add(batch, data, size, &err);
        CHECK(rc == 0 || rc == SL_ECORRUPT || rc == SL_EINVAL);
        CHECK(fmt_batch_rows(batch) == before + (rc == 0));
        if (rc != 0)
            CHECK(err.msg[0] != '\0');
        /* the batch reads a subset of what the walk reads, the same way */
        if (rc == SL_ECORRUPT)
            CHECK(walk_rc == SL_ECORRUPT);
        check_batch(batch);
        if (fmt_batch_rows(batch) == BATCH_ROWS)
            fmt_batch_reset(batch);
    }
    return 0;
}
