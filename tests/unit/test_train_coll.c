/* train_coll: the collectives seam. The "local" backend's members over a
 * real group (all_reduce in replica order, broadcast from every root,
 * misuse and abort); the composed collective over W x R threads in one
 * process, with a second local group standing in for the collective
 * across workers (any backend with one member per worker serves, which is
 * what a parameter-server backend will rely on): every replica of every
 * worker gets the bits of (worker 0's local sum + worker 1's ...), each
 * worker's local sum in replica order, and broadcasts from every global
 * root; compose refuses members that do not fit; the failure record keeps
 * the first abort. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "sl_test.h"
#include "train_coll.h"
#include "train_collective_local.h"

enum { W = 2, R = 3, N = 37 };

static float value(int worker, int replica, size_t j)
{
    static const float scale[5] = {1e-3f, 1.0f, 1e3f, 1e-1f, 1e2f};
    return ((float)((worker * 7 + replica * 13 + (int)j * 29) % 101) - 50.0f) * scale[(j + (size_t)replica) % 5];
}

struct member {
    struct train_coll *coll;
    int worker, replica;
    int rc;
    float sum[N];
    float bcast[W * R][N];
};

static void *member_main(void *arg)
{
    struct member *m = arg;
    struct sl_error err = {0};
    for (size_t j = 0; j < N; j++)
        m->sum[j] = value(m->worker, m->replica, j);
    m->rc = train_coll_all_reduce(m->coll, m->sum, N, &err);
    for (int root = 0; m->rc == 0 && root < W * R; root++) {
        for (size_t j = 0; j < N; j++)
            m->bcast[root][j] = value(m->worker, m->replica, j) + (float)root;
        m->rc = train_coll_broadcast(m->coll, m->bcast[root], N, root, &err);
    }
    return NULL;
}

START_TEST(test_composed_over_two_local_groups)
{
    struct sl_error err = {0};
    struct train_local_group *workers_group, *g[W];
    struct train_coll *across[W], *local[W][R];
    struct member m[W][R];
    ck_assert_int_eq(train_local_group_create(&workers_group, W, &err), 0);
    for (int w = 0; w < W; w++) {
        ck_assert_int_eq(train_local_group_create(&g[w], R, &err), 0);
        ck_assert_int_eq(train_local_coll_open(&across[w], workers_group, w, &err), 0);
        for (int r = 0; r < R; r++) {
            ck_assert_int_eq(train_local_coll_open(&local[w][r], g[w], r, &err), 0);
            m[w][r] = (struct member){.worker = w, .replica = r};
            ck_assert_int_eq(
                train_coll_compose(&m[w][r].coll, local[w][r], r == 0 ? across[w] : NULL, r, R, w, W, &err), 0);
            ck_assert_int_eq(m[w][r].coll->rank, w * R + r);
            ck_assert_int_eq(m[w][r].coll->size, W * R);
        }
    }
    pthread_t t[W][R];
    for (int w = 0; w < W; w++)
        for (int r = 0; r < R; r++)
            ck_assert_int_eq(pthread_create(&t[w][r], NULL, member_main, &m[w][r]), 0);
    for (int w = 0; w < W; w++)
        for (int r = 0; r < R; r++)
            pthread_join(t[w][r], NULL);
    for (size_t j = 0; j < N; j++) {
        float total = 0;
        for (int w = 0; w < W; w++) {
            float part = value(w, 0, j);
            for (int r = 1; r < R; r++)
                part += value(w, r, j);
            total = w == 0 ? part : total + part;
        }
        for (int w = 0; w < W; w++)
            for (int r = 0; r < R; r++) {
                ck_assert_int_eq(m[w][r].rc, 0);
                ck_assert_int_eq(memcmp(&m[w][r].sum[j], &total, sizeof total), 0);
                for (int root = 0; root < W * R; root++) {
                    float want = value(root / R, root % R, j) + (float)root;
                    ck_assert_int_eq(memcmp(&m[w][r].bcast[root][j], &want, sizeof want), 0);
                }
            }
    }
    for (int w = 0; w < W; w++) {
        for (int r = 0; r < R; r++) {
            train_coll_destroy(m[w][r].coll);
            train_coll_destroy(local[w][r]);
        }
        train_coll_destroy(across[w]);
        train_local_group_destroy(g[w]);
    }
    train_local_group_destroy(workers_group);
}
END_TEST

struct bcast_arg {
    struct train_coll *c;
    int root, rc;
    float v[3];
    struct sl_error err;
};

static void *bcast_main(void *arg)
{
    struct bcast_arg *a = arg;
    a->rc = train_coll_broadcast(a->c, a->v, 3, a->root, &a->err);
    return NULL;
}

START_TEST(test_local_broadcast_and_misuse)
{
    struct sl_error err = {0};
    struct train_local_group *g;
    struct train_coll *c[2];
    ck_assert_int_eq(train_local_group_create(&g, 2, &err), 0);
    for (int r = 0; r < 2; r++)
        ck_assert_int_eq(train_local_coll_open(&c[r], g, r, &err), 0);
    ck_assert_str_eq(c[0]->ops->name, "local");
    ck_assert_int_eq(c[1]->mem, TRAIN_COLL_HOST);
    struct train_coll *none;
    ck_assert_int_eq(train_local_coll_open(&none, g, 2, &err), SL_EINVAL);
    ck_assert_ptr_null(none);

    /* a -0.0 and a NaN travel bit for bit */
    struct bcast_arg a[2] = {{.c = c[0], .root = 1, .v = {1, 2, 3}}, {.c = c[1], .root = 1, .v = {-0.0f, 5, 6}}};
    memcpy(&a[1].v[2], &(uint32_t){0x7fc00123u}, sizeof(float));
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, bcast_main, &a[0]), 0);
    bcast_main(&a[1]);
    pthread_join(t, NULL);
    ck_assert_int_eq(a[0].rc, 0);
    ck_assert_int_eq(a[1].rc, 0);
    ck_assert_int_eq(memcmp(a[0].v, a[1].v, sizeof a[0].v), 0);

    /* a root outside the group is refused before the backend sees it */
    ck_assert_int_eq(train_coll_broadcast(c[0], a[0].v, 3, 2, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "local broadcast: root 2 is outside 0..1");
    ck_assert_int_eq(train_local_group_status(g), 0);

    /* members disagreeing on the root fail the round for both */
    a[0] = (struct bcast_arg){.c = c[0], .root = 0};
    a[1] = (struct bcast_arg){.c = c[1], .root = 1};
    ck_assert_int_eq(pthread_create(&t, NULL, bcast_main, &a[0]), 0);
    bcast_main(&a[1]);
    pthread_join(t, NULL);
    ck_assert_int_eq(a[0].rc, SL_EINVAL);
    ck_assert_int_eq(a[1].rc, SL_EINVAL);
    ck_assert_ptr_nonnull(strstr(a[0].err.msg, "a broadcast from 1"));
    ck_assert_str_eq(a[0].err.msg, a[1].err.msg);

    /* abort through any member fails the whole group; the first one wins */
    train_coll_abort(c[1], SL_EIO, "first");
    train_coll_abort(c[0], SL_EPROTO, "second");
    ck_assert_int_eq(train_local_group_status(g), SL_EINVAL); /* the misuse came first */
    train_coll_destroy(c[0]);
    train_coll_destroy(c[1]);
    train_coll_destroy(NULL);
    train_coll_abort(NULL, SL_EIO, "nothing");
    train_local_group_destroy(g);
}
END_TEST

START_TEST(test_compose_refuses_what_does_not_fit)
{
    struct sl_error err = {0};
    struct train_local_group *g;
    struct train_coll *l0, *c;
    ck_assert_int_eq(train_local_group_create(&g, 2, &err), 0);
    ck_assert_int_eq(train_local_coll_open(&l0, g, 0, &err), 0);
    /* one replica and one worker: nothing to compose over, every call a no-op */
    ck_assert_int_eq(train_coll_compose(&c, NULL, NULL, 0, 1, 0, 1, &err), 0);
    float v[2] = {-0.0f, 7};
    ck_assert_int_eq(train_coll_all_reduce(c, v, 2, &err), 0);
    ck_assert_int_eq(train_coll_broadcast(c, v, 2, 0, &err), 0);
    uint32_t bits;
    memcpy(&bits, &v[0], sizeof bits);
    ck_assert(v[1] == 7 && bits == 0x80000000u);
    train_coll_destroy(c);
    /* a local member of another rank, a missing local group, a missing or
     * surplus collective across workers */
    ck_assert_int_eq(train_coll_compose(&c, l0, NULL, 1, 2, 0, 1, &err), SL_EINVAL);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(strstr(err.msg, "replica 1 of 2 on worker 0 of 1"));
    ck_assert_int_eq(train_coll_compose(&c, NULL, NULL, 0, 2, 0, 1, &err), SL_EINVAL);
    ck_assert_int_eq(train_coll_compose(&c, l0, NULL, 0, 2, 0, 2, &err), SL_EINVAL);
    ck_assert_int_eq(train_coll_compose(&c, NULL, l0, 0, 1, 1, 2, &err), SL_EINVAL); /* l0 is rank 0 of 2 */
    ck_assert_int_eq(train_coll_compose(&c, NULL, l0, 0, 1, 0, 2, &err), 0);
    ck_assert_str_eq(c->ops->name, "composed");
    train_coll_destroy(c);
    train_coll_destroy(l0);
    train_local_group_destroy(g);
}
END_TEST

START_TEST(test_failure_record_first_wins)
{
    struct train__coll_failure f = {0};
    struct sl_error err = {0};
    ck_assert_int_eq(train__coll_failed(&f, &err), 0);
    train__coll_fail(&f, SL_ETIMEOUT, "ring: rank 1 went away");
    train__coll_fail(&f, SL_EIO, "later");
    ck_assert_int_eq(train__coll_failed(&f, &err), SL_ETIMEOUT);
    ck_assert_str_eq(err.msg, "ring: rank 1 went away");
    struct train__coll_failure g = {0};
    train__coll_fail(&g, 3, NULL); /* not a code: SL_EINVAL, empty message */
    ck_assert_int_eq(train__coll_failed(&g, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "");
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_coll");
    TCase *tc = tcase_create("coll");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_composed_over_two_local_groups);
    tcase_add_test(tc, test_local_broadcast_and_misuse);
    tcase_add_test(tc, test_compose_refuses_what_does_not_fit);
    tcase_add_test(tc, test_failure_record_first_wins);
    suite_add_tcase(s, tc);
    return s;
}
