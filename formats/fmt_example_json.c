/* fmt_example_json: an Example as protobuf's canonical JSON mapping
 * (fmt_example_to_json; its rules are in fmt_example.h), for `sluice-record
 * cat --decode example`. Entries are read and lists decoded through the
 * reader's own bounded helpers (fmt__example_iter, fmt__*_list_scan), so
 * the JSON says nothing the decoder would not.
 */
#include "fmt_example.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "sl_alloc.h"
#include "sl_base64.h"
#include "sl_json.h"

struct json_item {
    struct fmt_feature_view v;
    size_t idx;
};

static int cmp_keys(const struct fmt_feature_view *x, const struct fmt_feature_view *y)
{
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = n ? memcmp(x->key, y->key, n) : 0;
    if (c != 0)
        return c;
    return x->key_len < y->key_len ? -1 : x->key_len > y->key_len;
}

static int cmp_items(const void *a, const void *b)
{
    const struct json_item *x = a, *y = b;
    int c = cmp_keys(&x->v, &y->v);
    if (c != 0)
        return c;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int json_feature(struct sl_buf *out, const uint8_t *data, const struct fmt_feature_view *v, struct sl_error *err)
{
    size_t base = (size_t)(v->list - data);
    int rc;
    size_t n = 0;
    if (v->kind == FMT_KIND_NONE)
        return sl_buf_puts(out, "{}");
    if (v->kind == FMT_KIND_BYTES) {
        struct fmt_bytes_iter it;
        fmt_bytes_iter_init(&it, v->list, v->list_len);
        it.start = data;
        const uint8_t *s = NULL;
        size_t len = 0;
        while ((rc = fmt_bytes_iter_next(&it, &s, &len, err)) == 0)
            n++;
        if (rc != SL_END)
            return rc;
        if ((rc = sl_buf_puts(out, n ? "{\"bytesList\":{\"value\":[" : "{\"bytesList\":{")) != 0)
            return rc;
        fmt_bytes_iter_init(&it, v->list, v->list_len);
        for (size_t i = 0; (rc = fmt_bytes_iter_next(&it, &s, &len, err)) == 0; i++) {
            if ((i && (rc = sl_buf_putc(out, ',')) != 0) || (rc = sl_buf_putc(out, '"')) != 0 ||
                (rc = sl_base64_encode(out, s, len)) != 0 || (rc = sl_buf_putc(out, '"')) != 0)
                return rc;
        }
        if (rc != SL_END)
            return rc;
        return sl_buf_puts(out, n ? "]}}" : "}}");
    }
    if (v->kind == FMT_KIND_FLOAT)
        rc = fmt__float_list_scan(v->list, v->list_len, base, NULL, 0, &n, err);
    else
        rc = fmt__int64_list_scan(v->list, v->list_len, base, NULL, 0, &n, err);
    if (rc != 0)
        return rc;
    const char *name = v->kind == FMT_KIND_FLOAT ? "floatList" : "int64List";
    if (n == 0)
        return sl_buf_printf(out, "{\"%s\":{}}", name);
    void *vals = sl_malloc(n * (v->kind == FMT_KIND_FLOAT ? sizeof(float) : sizeof(int64_t)));
    if (vals == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory for %zu list values", n);
    size_t got;
    if (v->kind == FMT_KIND_FLOAT)
        rc = fmt__float_list_scan(v->list, v->list_len, base, vals, n, &got, err);
    else
        rc = fmt__int64_list_scan(v->list, v->list_len, base, vals, n, &got, err);
    if (rc == 0)
        rc = sl_buf_printf(out, "{\"%s\":{\"value\":[", name);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (i && (rc = sl_buf_putc(out, ',')) != 0)
            break;
        if (v->kind == FMT_KIND_FLOAT)
            rc = sl_json_float(out, ((const float *)vals)[i]);
        else
            rc = sl_buf_printf(out, "\"%" PRId64 "\"", ((const int64_t *)vals)[i]);
    }
    sl_free(vals);
    return rc != 0 ? rc : sl_buf_puts(out, "]}}");
}

static int check_list(const struct fmt_feature_view *v, const uint8_t *data, struct sl_error *err)
{
    size_t n, base = (size_t)(v->list - data);
    if (v->kind == FMT_KIND_INT64)
        return fmt__int64_list_scan(v->list, v->list_len, base, NULL, 0, &n, err);
    if (v->kind == FMT_KIND_FLOAT)
        return fmt__float_list_scan(v->list, v->list_len, base, NULL, 0, &n, err);
    if (v->kind == FMT_KIND_BYTES) {
        struct fmt_bytes_iter it;
        const uint8_t *s = NULL;
        int rc;
        fmt_bytes_iter_init(&it, v->list, v->list_len);
        it.start = data;
        while ((rc = fmt_bytes_iter_next(&it, &s, &n, err)) == 0)
            ;
        return rc == SL_END ? 0 : rc;
    }
    return 0;
}

static int json_body(const uint8_t *data, size_t len, struct sl_buf *out, struct json_item **itemsp, size_t **pickp,
                     struct sl_error *err)
{
    struct fmt__example_iter it;
    fmt__example_iter_init(&it, data, len);
    size_t n = 0, cap = 0;
    int rc;
    for (;;) {
        struct fmt__entry e;
        rc = fmt__example_iter_next(&it, &e, err);
        if (rc == SL_END)
            break;
        if (rc != 0)
            return rc;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct json_item *p = sl_realloc(*itemsp, ncap * sizeof *p);
            if (p == NULL)
                return sl_error_set(err, SL_ENOMEM, "out of memory for %zu map entries", ncap);
            *itemsp = p;
            cap = ncap;
        }
        struct json_item *item = &(*itemsp)[n];
        rc = fmt__feature_parse(e.feature, e.feature_len, (size_t)(e.feature - it.data), &item->v.kind, &item->v.list,
                                &item->v.list_len, err);
        if (rc != 0)
            return rc;
        /* every entry's list must be sound, not only the ones printed */
        if ((rc = check_list(&item->v, it.data, err)) != 0)
            return rc;
        item->v.key = (const char *)e.key;
        item->v.key_len = e.key_len;
        item->idx = n++;
    }
    if (!it.saw_features)
        return sl_buf_puts(out, "{}");
    if (n == 0)
        return sl_buf_puts(out, "{\"features\":{}}");

    /* A map keeps one value per key: the last one, shown where the key first
     * appeared. Sort by (key, index) to find both ends of each run. */
    struct json_item *items = *itemsp;
    size_t *pick = sl_malloc(n * sizeof *pick);
    if (pick == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory for %zu map entries", n);
    *pickp = pick;
    for (size_t i = 0; i < n; i++)
        pick[i] = SIZE_MAX;
    struct fmt_feature_view *views = sl_malloc(n * sizeof *views);
    if (views == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory for %zu map entries", n);
    for (size_t i = 0; i < n; i++)
        views[i] = items[i].v;
    qsort(items, n, sizeof *items, cmp_items);
    for (size_t a = 0, b; a < n; a = b) {
        for (b = a + 1; b < n && cmp_keys(&items[a].v, &items[b].v) == 0; b++)
            ;
        pick[items[a].idx] = items[b - 1].idx;
    }
    rc = sl_buf_puts(out, "{\"features\":{\"feature\":{");
    int first = 1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (pick[i] == SIZE_MAX)
            continue;
        const struct fmt_feature_view *v = &views[pick[i]];
        if ((!first && (rc = sl_buf_putc(out, ',')) != 0) ||
            (rc = sl_json_string(out, views[i].key, views[i].key_len)) != 0 || (rc = sl_buf_putc(out, ':')) != 0 ||
            (rc = json_feature(out, it.data, v, err)) != 0)
            break;
        first = 0;
    }
    sl_free(views);
    return rc != 0 ? rc : sl_buf_puts(out, "}}}");
}

int fmt_example_to_json(const uint8_t *data, size_t len, struct sl_buf *out, struct sl_error *err)
{
    size_t mark = out->len;
    sl_error_clear(err);
    struct json_item *items = NULL;
    size_t *pick = NULL;
    int rc = json_body(data, len, out, &items, &pick, err);
    sl_free(items);
    sl_free(pick);
    if (rc != 0) {
        out->len = mark;
        if (err != NULL && err->code == 0)
            sl_error_set(err, rc, "writing JSON: %s", rc == SL_ENOMEM ? "out of memory" : "output too large");
    }
    return rc;
}
