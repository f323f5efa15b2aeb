/* train_rendezvous with ranks as threads over ipc:// in a temp folder: the
 * blob broadcast (random bytes of several sizes, an NCCL id's 128 among
 * them) reaches every rank intact, and the option checks. The process-level
 * cases (missing ranks, disagreements, timing) are in
 * tests/ring/test_rendezvous.sh. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_test.h"
#include "train_rendezvous.h"

struct rank_arg {
    struct train_rendezvous_opts o;
    unsigned char got[TRAIN_RENDEZVOUS_MAX_BLOB];
    size_t len;
    int rc;
    struct sl_error err;
};

static void *run_rank(void *p)
{
    struct rank_arg *a = p;
    a->rc = train_rendezvous(&a->o, a->got, sizeof a->got, &a->len, &a->err);
    return NULL;
}

START_TEST(test_blob_reaches_every_rank)
{
    static const size_t sizes[] = {0, 1, 128, 1000, TRAIN_RENDEZVOUS_MAX_BLOB};
    static unsigned char blob[TRAIN_RENDEZVOUS_MAX_BLOB];
    unsigned seed = 12345;
    for (int p = 1; p <= 5; p++) {
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            size_t n = sizes[si];
            for (size_t i = 0; i < n; i++)
                blob[i] = (unsigned char)rand_r(&seed);
            char root[256];
            snprintf(root, sizeof root, "ipc://%s", sl_test_path("root"));
            struct rank_arg *args = calloc((size_t)p, sizeof *args);
            pthread_t th[5];
            ck_assert_ptr_nonnull(args);
            for (int r = p - 1; r >= 0; r--) { /* rank 0 last: the others wait for it */
                args[r].o = (struct train_rendezvous_opts){.rank = r,
                                                           .size = p,
                                                           .root = root,
                                                           .job = "j",
                                                           .config = "c",
                                                           .timeout_ms = 10000,
                                                           .blob = blob,
                                                           .blob_len = r == 0 ? n : 0};
                ck_assert_int_eq(pthread_create(&th[r], NULL, run_rank, &args[r]), 0);
            }
            for (int r = 0; r < p; r++) {
                pthread_join(th[r], NULL);
                ck_assert_msg(args[r].rc == 0, "P=%d n=%zu rank %d: %s", p, n, r, args[r].err.msg);
                ck_assert_uint_eq(args[r].len, n);
                ck_assert(n == 0 || memcmp(args[r].got, blob, n) == 0);
            }
            free(args);
        }
    }
}
END_TEST

START_TEST(test_blob_larger_than_buffer)
{
    unsigned char blob[200] = {1, 2, 3}, small[100];
    char root[256];
    snprintf(root, sizeof root, "ipc://%s", sl_test_path("root-small"));
    struct rank_arg a0 = {
        .o = {
            .rank = 0, .size = 2, .root = root, .job = "j", .timeout_ms = 5000, .blob = blob, .blob_len = sizeof blob}};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, run_rank, &a0), 0);
    struct train_rendezvous_opts o1 = {.rank = 1, .size = 2, .root = root, .job = "j", .timeout_ms = 5000};
    struct sl_error err = {0};
    size_t len = 7;
    ck_assert_int_eq(train_rendezvous(&o1, small, sizeof small, &len, &err), SL_EINVAL);
    ck_assert_msg(strstr(err.msg, "rendezvous: rank 0 (ipc://") == err.msg &&
                      strstr(err.msg, ") sent a 200-byte blob, more than the 100 expected") != NULL,
                  "%s", err.msg);
    ck_assert_uint_eq(len, 0);
    pthread_join(t, NULL);
    ck_assert_int_eq(a0.rc, 0); /* rank 0 did its part */
}
END_TEST

START_TEST(test_options)
{
    static const struct {
        struct train_rendezvous_opts o;
        const char *msg;
    } cases[] = {
        {{.rank = 0, .size = 0, .job = "j"}, "rendezvous: rank 0 of 0 (expected 0 <= rank < size <= 4096)"},
        {{.rank = 2, .size = 2, .job = "j"}, "rendezvous: rank 2 of 2 (expected 0 <= rank < size <= 4096)"},
        {{.rank = 0, .size = 2, .job = NULL}, "rendezvous: job name missing or longer than 256 bytes"},
        {{.rank = 1, .size = 2, .job = "j"}, "rendezvous: no root endpoint"},
        {{.rank = 0, .size = 2, .job = "j", .root = "ipc:///x", .timeout_ms = -1}, "rendezvous: negative timeout"},
        {{.rank = 0, .size = 1, .job = "j", .blob_len = 5000}, "rendezvous: blob of 5000 bytes (at most 4096)"},
        {{.rank = 0, .size = 1, .job = "j", .blob = "abc", .blob_len = 3},
         "rendezvous: blob of 3 bytes does not fit the 2-byte buffer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sl_error err = {0};
        char out[2];
        size_t len = 9;
        ck_assert_int_eq(train_rendezvous(&cases[i].o, out, sizeof out, &len, &err), SL_EINVAL);
        ck_assert_str_eq(err.msg, cases[i].msg);
        ck_assert_uint_eq(len, 0);
    }
    /* a cluster of one needs no endpoint and returns its own blob */
    struct train_rendezvous_opts one = {.rank = 0, .size = 1, .job = "j", .blob = "ab", .blob_len = 2};
    struct sl_error err = {0};
    char out[2];
    size_t len = 0;
    ck_assert_int_eq(train_rendezvous(&one, out, sizeof out, &len, &err), 0);
    ck_assert_uint_eq(len, 2);
    ck_assert(memcmp(out, "ab", 2) == 0);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_rendezvous");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_blob_reaches_every_rank);
    tcase_add_test(tc, test_blob_larger_than_buffer);
    tcase_add_test(tc, test_options);
    suite_add_tcase(s, tc);
    return s;
}
