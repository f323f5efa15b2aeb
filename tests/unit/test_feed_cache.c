/* feed_cache: the decoded-element cache. Rows come back exactly as put,
 * only elements within the bound have a slot, each slot is filled once when
 * two threads race for it; and an assembler with the cache lays out
 * exactly the pieces one without it does, errors included. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feed_assemble.h"
#include "feed_cache.h"
#include "feed_source.h"
#include "fmt_example.h"
#include "fmt_tfrecord.h"
#include "sl_buf.h"
#include "sl_test.h"

static void pattern(uint8_t *row, size_t n, uint64_t g)
{
    for (size_t i = 0; i < n; i++)
        row[i] = (uint8_t)(g * 31 + i * 7 + 1);
}

START_TEST(test_rows_come_back_exactly)
{
    const uint64_t counts[3] = {3, 0, 5};
    struct feed_cache *c;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_cache_create(&c, counts, 3, 7, (uint64_t)1 << 20, &err), 0);
    ck_assert_uint_eq(feed_cache_row_bytes(c), 7);
    struct feed_cache_stats st;
    feed_cache_stats(c, &st);
    ck_assert_uint_eq(st.elements, 8);
    ck_assert_uint_eq(st.slots, 8);
    ck_assert_uint_eq(st.ready, 0);
    ck_assert_uint_eq(st.bytes, 56);
    const uint32_t files[8] = {0, 0, 0, 2, 2, 2, 2, 2};
    const uint64_t recs[8] = {0, 1, 2, 0, 1, 2, 3, 4};
    for (int g = 0; g < 8; g++) {
        ck_assert_ptr_null(feed_cache_get(c, files[g], recs[g]));
        uint8_t *slot = feed_cache_claim(c, files[g], recs[g]);
        ck_assert_ptr_nonnull(slot);
        ck_assert_ptr_null(feed_cache_claim(c, files[g], recs[g])); /* filling: nobody else */
        ck_assert_ptr_null(feed_cache_get(c, files[g], recs[g]));   /* not ready yet */
        pattern(slot, 7, (uint64_t)g);
        feed_cache_publish(c, files[g], recs[g]);
        ck_assert_ptr_null(feed_cache_claim(c, files[g], recs[g])); /* ready: filled once */
    }
    for (int g = 0; g < 8; g++) {
        uint8_t want[7];
        pattern(want, 7, (uint64_t)g);
        const uint8_t *row = feed_cache_get(c, files[g], recs[g]);
        ck_assert_ptr_nonnull(row);
        ck_assert_mem_eq(row, want, 7);
    }
    /* elements that are not the job's have no slot */
    ck_assert_ptr_null(feed_cache_get(c, 0, 3));
    ck_assert_ptr_null(feed_cache_claim(c, 0, 3));
    ck_assert_ptr_null(feed_cache_claim(c, 1, 0));
    ck_assert_ptr_null(feed_cache_claim(c, 3, 0));
    ck_assert_ptr_null(feed_cache_get(c, UINT32_MAX, UINT64_MAX));
    feed_cache_publish(c, 3, 0); /* no slot: nothing happens */
    feed_cache_abandon(c, 0, 99);
    feed_cache_stats(c, &st);
    ck_assert_uint_eq(st.ready, 8);
    feed_cache_destroy(c);
    feed_cache_destroy(NULL);
}
END_TEST

START_TEST(test_the_bound_is_kept)
{
    const uint64_t counts[3] = {3, 0, 5};
    struct feed_cache *c;
    struct sl_error err = {0};
    /* room for 4 rows and a bit: the first 4 elements in file order */
    ck_assert_int_eq(feed_cache_create(&c, counts, 3, 7, 4 * 7 + 6, &err), 0);
    struct feed_cache_stats st;
    feed_cache_stats(c, &st);
    ck_assert_uint_eq(st.slots, 4);
    ck_assert_uint_eq(st.bytes, 28);
    ck_assert_ptr_nonnull(feed_cache_claim(c, 0, 2));
    ck_assert_ptr_nonnull(feed_cache_claim(c, 2, 0));
    ck_assert_ptr_null(feed_cache_claim(c, 2, 1)); /* beyond the bound: decoded every time */
    ck_assert_ptr_null(feed_cache_claim(c, 2, 4));
    /* abandoned: empty again, claimed again */
    feed_cache_abandon(c, 2, 0);
    ck_assert_ptr_null(feed_cache_get(c, 2, 0));
    ck_assert_ptr_nonnull(feed_cache_claim(c, 2, 0));
    feed_cache_destroy(c);
    /* a bound under one row: no slot at all */
    ck_assert_int_eq(feed_cache_create(&c, counts, 3, 7, 6, &err), 0);
    feed_cache_stats(c, &st);
    ck_assert_uint_eq(st.slots, 0);
    ck_assert_ptr_null(feed_cache_claim(c, 0, 0));
    ck_assert_ptr_null(feed_cache_get(c, 0, 0));
    feed_cache_destroy(c);
    /* a huge bound takes only what the job has */
    ck_assert_int_eq(feed_cache_create(&c, counts, 3, 7, (uint64_t)1 << 40, &err), 0);
    feed_cache_stats(c, &st);
    ck_assert_uint_eq(st.slots, 8);
    ck_assert_uint_eq(st.bytes, 56);
    feed_cache_destroy(c);
    /* no files */
    ck_assert_int_eq(feed_cache_create(&c, counts, 0, 7, (uint64_t)1 << 20, &err), 0);
    feed_cache_stats(c, &st);
    ck_assert_uint_eq(st.elements, 0);
    ck_assert_ptr_null(feed_cache_claim(c, 0, 0));
    feed_cache_destroy(c);
    /* rows of nothing: refused */
    ck_assert_int_eq(feed_cache_create(&c, counts, 3, 0, (uint64_t)1 << 20, &err), SL_EINVAL);
    ck_assert_ptr_null(c);
}
END_TEST

enum { RACE_FILES = 4, RACE_PER_FILE = 5000, RACE_ROW = 24 };

struct racer {
    struct feed_cache *c;
    int reverse;
    uint64_t claimed, hits, wrong;
};

static void *race(void *arg)
{
    struct racer *r = arg;
    for (int pass = 0; pass < 2; pass++)
        for (uint64_t i = 0; i < RACE_FILES * RACE_PER_FILE; i++) {
            uint64_t g = r->reverse ? RACE_FILES * RACE_PER_FILE - 1 - i : i;
            uint32_t f = (uint32_t)(g / RACE_PER_FILE);
            uint64_t rec = g % RACE_PER_FILE;
            uint8_t want[RACE_ROW];
            pattern(want, RACE_ROW, g);
            const uint8_t *row = feed_cache_get(r->c, f, rec);
            if (row != NULL) {
                r->hits++;
                r->wrong += memcmp(row, want, RACE_ROW) != 0;
                continue;
            }
            uint8_t *slot = feed_cache_claim(r->c, f, rec);
            if (slot != NULL) {
                memcpy(slot, want, RACE_ROW);
                feed_cache_publish(r->c, f, rec);
                r->claimed++;
            }
        }
    return NULL;
}

START_TEST(test_two_threads_fill_each_slot_once)
{
    uint64_t counts[RACE_FILES];
    for (int i = 0; i < RACE_FILES; i++)
        counts[i] = RACE_PER_FILE;
    struct feed_cache *c;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_cache_create(&c, counts, RACE_FILES, RACE_ROW, (uint64_t)1 << 20, &err), 0);
    struct racer r[2] = {{.c = c, .reverse = 0}, {.c = c, .reverse = 1}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, race, &r[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    ck_assert_uint_eq(r[0].claimed + r[1].claimed, RACE_FILES * RACE_PER_FILE);
    ck_assert_uint_eq(r[0].wrong + r[1].wrong, 0);
    ck_assert_uint_ge(r[0].hits + r[1].hits, RACE_FILES * RACE_PER_FILE); /* the second passes at least */
    struct feed_cache_stats st;
    feed_cache_stats(c, &st);
    ck_assert_uint_eq(st.ready, RACE_FILES * RACE_PER_FILE);
    feed_cache_destroy(c);
}
END_TEST

/* ---- an assembler with the cache, against one without ---- */

enum { NREC = 40, BAD = 29 };

/* Examples with id (int64), v (float32 [3]) and img (uint8 [5] from
 * bytes); record BAD's id is a float (a decode error naming its row). */
static const char *write_examples(const char *name)
{
    const char *path = sl_test_path(name);
    struct fmt_tfrecord_writer *w;
    struct sl_error err = {0};
    ck_assert_int_eq(fmt_tfrecord_writer_open(&w, path, FMT_COMP_NONE, -1, &err), 0);
    struct sl_buf b;
    memset(&b, 0, sizeof b);
    sl_buf_init(&b, 1 << 20);
    for (int r = 0; r < NREC; r++) {
        struct fmt_example_enc e;
        sl_buf_reset(&b);
        int64_t id = 1000 + r;
        float v[3] = {(float)r, (float)r * 0.5f, -(float)r};
        uint8_t img[5];
        for (int i = 0; i < 5; i++)
            img[i] = (uint8_t)(r * 5 + i);
        const uint8_t *vals[1] = {img};
        size_t lens[1] = {5};
        ck_assert_int_eq(fmt_example_enc_begin(&e, &b), 0);
        if (r == BAD)
            ck_assert_int_eq(fmt_example_enc_float(&e, "id", v, 1), 0);
        else
            ck_assert_int_eq(fmt_example_enc_int64(&e, "id", &id, 1), 0);
        ck_assert_int_eq(fmt_example_enc_float(&e, "v", v, 3), 0);
        ck_assert_int_eq(fmt_example_enc_bytes(&e, "img", vals, lens, 1), 0);
        ck_assert_int_eq(fmt_example_enc_end(&e), 0);
        ck_assert_int_eq(fmt_tfrecord_writer_write(w, b.data, b.len, &err), 0);
    }
    sl_buf_free(&b);
    ck_assert_int_eq(fmt_tfrecord_writer_close(w, &err), 0);
    return path;
}

static void specs3(struct fmt_feature_spec s[3])
{
    memset(s, 0, 3 * sizeof *s);
    snprintf(s[0].name, sizeof s[0].name, "id");
    s[0].dtype = FMT_DTYPE_INT64;
    snprintf(s[1].name, sizeof s[1].name, "v");
    s[1].dtype = FMT_DTYPE_FLOAT32;
    s[1].rank = 1;
    s[1].shape[0] = 3;
    snprintf(s[2].name, sizeof s[2].name, "img");
    s[2].dtype = FMT_DTYPE_UINT8;
    s[2].rank = 1;
    s[2].shape[0] = 5;
}

enum { ROW = 8 + 12 + 5, CAP = 1 << 14 };

START_TEST(test_assembler_lays_out_the_same_pieces)
{
    const char *paths[2] = {write_examples("a.tfrecord"), write_examples("b.tfrecord")};
    struct feed_source *src;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_source_open(&src, paths, 2, NULL, &err), 0);
    struct fmt_feature_spec specs[3];
    specs3(specs);
    struct feed_assembler *plain, *cached[2];
    ck_assert_int_eq(feed_assembler_create(&plain, src, specs, 3, FMT_FORMAT_TFRECORD, 16, NULL, &err), 0);
    /* a bound of 50 rows: file 0's 40 and 10 of file 1's; the rest decoded each time */
    struct feed_cache *c;
    const uint64_t counts[2] = {NREC, NREC};
    ck_assert_int_eq(feed_cache_create(&c, counts, 2, ROW, 50 * ROW, &err), 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(feed_assembler_create(&cached[i], src, specs, 3, FMT_FORMAT_TFRECORD, 16, NULL, &err), 0);
        ck_assert_int_eq(feed_assembler_use_cache(cached[i], c, &err), 0);
    }
    static uint8_t want[CAP], got[CAP];
    struct feed_layout lw, lg;
    struct feed_elem elems[16];
    unsigned seed = 12345;
    for (int round = 0; round < 60; round++) {
        size_t n = 1 + (size_t)(rand_r(&seed) % 16);
        for (size_t i = 0; i < n; i++) {
            elems[i].file = (uint32_t)(rand_r(&seed) % 2);
            elems[i].record = (uint64_t)(rand_r(&seed) % NREC);
            if (elems[i].record == BAD && round % 7 != 3)
                elems[i].record = BAD + 1;
        }
        struct feed_piece piece = {.n = n, .elems = elems};
        memset(want, 0xAA, sizeof want);
        memset(got, 0xAA, sizeof got);
        struct sl_error e1 = {0}, e2 = {0};
        int rc1 = feed_assembler_fill(plain, &piece, want, sizeof want, &lw, &e1);
        int rc2 = feed_assembler_fill(cached[round % 2], &piece, got, sizeof got, &lg, &e2);
        ck_assert_int_eq(rc2, rc1);
        if (rc1 != 0) { /* the same words, the row in the piece included */
            ck_assert_str_eq(e2.msg, e1.msg);
            continue;
        }
        ck_assert_mem_eq(&lg, &lw, sizeof lw);
        ck_assert_mem_eq(got, want, lw.total);
    }
    /* an empty piece (a worker's share ran out): the same empty tensors */
    struct feed_piece none = {.n = 0, .elems = elems};
    ck_assert_int_eq(feed_assembler_fill(plain, &none, want, sizeof want, &lw, &err), 0);
    ck_assert_int_eq(feed_assembler_fill(cached[0], &none, got, sizeof got, &lg, &err), 0);
    ck_assert_uint_eq(lg.ntensors, 3);
    ck_assert_mem_eq(&lg, &lw, sizeof lw);
    struct feed_cache_stats st;
    feed_cache_stats(c, &st);
    ck_assert_uint_gt(st.ready, 0);
    ck_assert_uint_le(st.ready, 50);
    /* a bad record's error, with the cache, names its row in the piece */
    struct feed_elem bad[3] = {{0, 0}, {0, 1}, {0, BAD}};
    struct feed_piece piece = {.n = 3, .elems = bad};
    struct sl_error e1 = {0}, e2 = {0};
    ck_assert_int_ne(feed_assembler_fill(cached[0], &piece, got, sizeof got, &lg, &e2), 0);
    ck_assert_int_ne(feed_assembler_fill(plain, &piece, want, sizeof want, &lw, &e1), 0);
    ck_assert_str_eq(e2.msg, e1.msg);
    ck_assert_msg(strstr(e2.msg, "Index: 2") != NULL, "%s", e2.msg);
    /* a piece over its buffer: refused as without the cache */
    ck_assert_int_eq(feed_assembler_fill(cached[1], &piece, got, 40, &lg, &e2), SL_EINVAL);
    ck_assert_int_eq(feed_assembler_fill(plain, &piece, want, 40, &lw, &e1), SL_EINVAL);
    ck_assert_str_eq(e2.msg, e1.msg);
    for (int i = 0; i < 2; i++)
        feed_assembler_destroy(cached[i]);
    feed_assembler_destroy(plain);
    feed_cache_destroy(c);
    feed_source_close(src);
}
END_TEST

START_TEST(test_assembler_refuses_what_it_cannot_cache)
{
    const char *path = write_examples("c.tfrecord");
    struct feed_source *src;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_source_open(&src, &path, 1, NULL, &err), 0);
    struct fmt_feature_spec specs[3];
    specs3(specs);
    specs[2].dtype = FMT_DTYPE_BYTES; /* a bytes column: no cache */
    struct feed_assembler *a;
    ck_assert_int_eq(feed_assembler_create(&a, src, specs, 3, FMT_FORMAT_TFRECORD, 4, NULL, &err), 0);
    struct feed_cache *c;
    const uint64_t counts[1] = {NREC};
    ck_assert_int_eq(feed_cache_create(&c, counts, 1, ROW, (uint64_t)1 << 20, &err), 0);
    ck_assert_int_eq(feed_assembler_use_cache(a, c, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "feature 'img' is not fixed-size: no cache");
    feed_assembler_destroy(a);
    /* rows of another size than the features' */
    specs3(specs);
    ck_assert_int_eq(feed_assembler_create(&a, src, specs, 2, FMT_FORMAT_TFRECORD, 4, NULL, &err), 0);
    ck_assert_int_eq(feed_assembler_use_cache(a, c, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "the cache's rows are 25 bytes, the features' 20");
    feed_assembler_destroy(a);
    feed_cache_destroy(c);
    feed_source_close(src);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("feed_cache");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_rows_come_back_exactly);
    tcase_add_test(tc, test_the_bound_is_kept);
    tcase_add_test(tc, test_two_threads_fill_each_slot_once);
    tcase_add_test(tc, test_assembler_lays_out_the_same_pieces);
    tcase_add_test(tc, test_assembler_refuses_what_it_cannot_cache);
    suite_add_tcase(s, tc);
    return s;
}
