/* feed_transition: a new worker's stream after a mid-epoch change of the
 * cluster shape (docs/semantics.md 5.2): the worked example's exact
 * pieces, a shuffled case, R > 1, empty pieces, the numbering of every
 * piece, every element of the change's epoch exactly once, a seek to every
 * resume_seq giving iteration's tail, the plain stream, and hostile
 * transitions refused with their messages. Element ids: record r of file
 * f is 2f + r (every file here holds 2 records). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feed_transition.h"
#include "sl_test.h"

static const uint64_t twos[16] = {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2};

static struct feed_plan_config make_cfg(size_t nfiles, uint64_t G, uint32_t W, uint32_t R, uint64_t epochs)
{
    struct feed_plan_config c;
    memset(&c, 0, sizeof c);
    c.nfiles = nfiles;
    c.counts = twos;
    c.source_is_files = 1;
    c.policy = FEED_SHARD_FILE;
    c.global_batch = G;
    c.epochs = epochs;
    c.reshuffle_each_epoch = 1;
    c.workers = W;
    c.replicas = R;
    return c;
}

/* The pieces of worker w's stream from its current position to the end,
 * as "[a,b] [] [c]" (ids 2f + r). Rotating static buffers. */
static const char *rest_text(struct feed_stream *st)
{
    static char bufs[4][8192];
    static int next;
    char *out = bufs[next++ % 4];
    size_t len = 0;
    struct feed_piece pc;
    struct sl_error err = {0};
    int rc;
    out[0] = '\0';
    while ((rc = feed_stream_next(st, &pc, &err)) == 0) {
        len += (size_t)snprintf(out + len, sizeof bufs[0] - len, "%s[", len ? " " : "");
        for (size_t i = 0; i < pc.n; i++)
            len += (size_t)snprintf(out + len, sizeof bufs[0] - len, "%s%llu", i ? "," : "",
                                    (unsigned long long)(2 * pc.elems[i].file + pc.elems[i].record));
        len += (size_t)snprintf(out + len, sizeof bufs[0] - len, "]");
        ck_assert_uint_lt(len, sizeof bufs[0] - 64);
    }
    ck_assert_msg(rc == SL_END, "stream: %s", err.msg);
    ck_assert_int_eq(feed_stream_next(st, &pc, &err), SL_END); /* and stays ended */
    return out;
}

static struct feed_stream *make_stream(const struct feed_plan_config *cfg, const struct feed_transition *x, uint32_t w)
{
    struct feed_stream *st;
    struct sl_error err = {0};
    ck_assert_msg(feed_stream_create(&st, cfg, x, w, &err) == 0, "create: %s", err.msg);
    return st;
}

static const char *stream_text(const struct feed_plan_config *cfg, const struct feed_transition *x, uint32_t w)
{
    struct feed_stream *st = make_stream(cfg, x, w);
    const char *s = rest_text(st);
    feed_stream_destroy(st);
    return s;
}

static uint64_t steps_of(const struct feed_plan_config *cfg)
{
    struct feed_plan_summary sum;
    struct sl_error err = {0};
    ck_assert_msg(feed_plan_summarize(cfg, 0, &sum, &err) == 0, "summarize: %s", err.msg);
    return sum.steps;
}

/* Every piece's header: seq k in order; k < (T - t) R' is step t + k / R',
 * replica k % R' of epoch e; then the new plan's epochs from e+1. Returns
 * the stream's length. */
static uint64_t check_headers(const struct feed_plan_config *cfg, const struct feed_transition *x, uint32_t w)
{
    struct feed_plan_config old = feed_transition_old_config(cfg, x);
    uint64_t T = steps_of(&old), T2 = steps_of(cfg), R2 = cfg->replicas, trans = (T - x->from_step) * R2, k = 0;
    struct feed_stream *st = make_stream(cfg, x, w);
    struct feed_piece pc;
    struct sl_error err = {0};
    while (feed_stream_next(st, &pc, &err) == 0) {
        ck_assert_uint_eq(pc.seq, k);
        ck_assert_uint_eq(pc.worker, w);
        ck_assert_uint_eq(pc.replica, k % R2);
        if (k < trans) {
            ck_assert_uint_eq(pc.epoch, x->from_epoch);
            ck_assert_uint_eq(pc.step, x->from_step + k / R2);
        } else {
            ck_assert_uint_eq(pc.epoch, x->from_epoch + 1 + (k - trans) / (T2 * R2));
            ck_assert_uint_eq(pc.step, (k - trans) % (T2 * R2) / R2);
        }
        k++;
    }
    feed_stream_destroy(st);
    ck_assert_uint_eq(k, feed_transition_total(x, T, T2, cfg->replicas, cfg->epochs));
    return k;
}

/* Every element of epoch e exactly once: steps < t from the old plans,
 * steps >= t from the new workers' transition pieces. Files of 2. */
static void check_exactly_once(const struct feed_plan_config *cfg, const struct feed_transition *x)
{
    struct feed_plan_config old = feed_transition_old_config(cfg, x);
    unsigned seen[32] = {0}, want[32] = {0};
    struct sl_error err = {0};
    struct feed_piece pc;
    ck_assert_uint_le(cfg->nfiles * 2, 32);
    for (uint32_t w = 0; w < old.workers; w++) {
        struct feed_plan *p;
        ck_assert_int_eq(feed_plan_create(&p, &old, w, &err), 0);
        while (feed_plan_next(p, &pc, &err) == 0)
            for (size_t i = 0; pc.epoch == x->from_epoch && i < pc.n; i++) {
                want[2 * pc.elems[i].file + pc.elems[i].record]++;
                if (pc.step < x->from_step)
                    seen[2 * pc.elems[i].file + pc.elems[i].record]++;
            }
        feed_plan_destroy(p);
    }
    for (uint32_t w = 0; w < cfg->workers; w++) {
        struct feed_stream *st = make_stream(cfg, x, w);
        while (feed_stream_next(st, &pc, &err) == 0)
            for (size_t i = 0; pc.epoch == x->from_epoch && i < pc.n; i++)
                seen[2 * pc.elems[i].file + pc.elems[i].record]++;
        feed_stream_destroy(st);
    }
    for (size_t i = 0; i < 32; i++)
        ck_assert_msg(seen[i] == want[i], "element %zu: %u times, the old plan's epoch has it %u times", i, seen[i],
                      want[i]);
}

/* A seek of a fresh stream to every seq (and one past the end) gives the
 * tail iteration gives. */
static void check_seeks(const struct feed_plan_config *cfg, const struct feed_transition *x, uint32_t w)
{
    uint64_t n = check_headers(cfg, x, w);
    char all[8192];
    snprintf(all, sizeof all, "%s", stream_text(cfg, x, w));
    for (uint64_t q = 0; q <= n + 1; q++) {
        struct feed_stream *st = make_stream(cfg, x, w);
        struct sl_error err = {0};
        int rc = feed_stream_seek(st, q, &err);
        ck_assert_int_eq(rc, q < n ? 0 : SL_END);
        /* the tail: all's pieces from q on */
        const char *tail = all;
        for (uint64_t k = 0; k < q && *tail != '\0'; k++) {
            tail = strchr(tail, ']') + 1;
            tail += *tail == ' ';
        }
        ck_assert_str_eq(rest_text(st), tail);
        feed_stream_destroy(st);
    }
}

/* docs/semantics.md 5.2's example: 12 records in 6 files, G = 6, FILE
 * sharding, 2 epochs; 2 x 1 -> 3 x 1 at step 1 of epoch 0. */
START_TEST(test_worked_example)
{
    struct feed_plan_config c2 = make_cfg(6, 6, 2, 1, 2), c3 = make_cfg(6, 6, 3, 1, 2);
    struct feed_transition x = {.from_workers = 2, .from_replicas = 1, .from_epoch = 0, .from_step = 1};
    /* the old shape's epoch 0 (and the new shape's plain plan), as the
     * example states them */
    struct feed_stream *st = make_stream(&c2, NULL, 0);
    ck_assert_str_eq(rest_text(st), "[0,1,4] [5,8,9] [0,1,4] [5,8,9]");
    feed_stream_destroy(st);
    ck_assert_str_eq(stream_text(&c2, NULL, 1), "[2,3,6] [7,10,11] [2,3,6] [7,10,11]");
    ck_assert_str_eq(stream_text(&c3, NULL, 0), "[0,1] [6,7] [0,1] [6,7]");
    /* B_1 = [5 8 9 7 10 11] cut 3 ways, then epoch 1 of the 3-worker plan */
    ck_assert_str_eq(stream_text(&c3, &x, 0), "[5,8] [0,1] [6,7]");
    ck_assert_str_eq(stream_text(&c3, &x, 1), "[9,7] [2,3] [8,9]");
    ck_assert_str_eq(stream_text(&c3, &x, 2), "[10,11] [4,5] [10,11]");
    uint64_t T = 0;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_transition_check(&c3, &x, &T, &err), 0);
    ck_assert_uint_eq(T, 2);
    ck_assert_uint_eq(feed_transition_total(&x, 2, 2, 1, 2), 3);
    ck_assert_uint_eq(feed_transition_total(&x, 2, 2, 1, 0), UINT64_MAX);
    ck_assert_uint_eq(feed_transition_total(NULL, 2, 2, 1, 2), 4);
    for (uint32_t w = 0; w < 3; w++)
        check_seeks(&c3, &x, w);
    check_exactly_once(&c3, &x);
}
END_TEST

/* Shuffled (buffer 4, seed 7, reshuffled each epoch): 2 x 1 -> 1 x 3 at
 * step 1 of epoch 0; the pieces as tests/plan/ref_plan.py gives them. */
START_TEST(test_shuffled)
{
    struct feed_plan_config c = make_cfg(6, 6, 1, 3, 2);
    c.shuffle_buffer = 4;
    c.seed = 7;
    struct feed_plan_config old = c;
    old.workers = 2;
    old.replicas = 1;
    ck_assert_str_eq(stream_text(&old, NULL, 0), "[5,0,4] [9,8,1] [1,8,4] [9,0,5]");
    ck_assert_str_eq(stream_text(&old, NULL, 1), "[7,2,6] [11,10,3] [3,10,6] [11,2,7]");
    struct feed_transition x = {.from_workers = 2, .from_replicas = 1, .from_epoch = 0, .from_step = 1};
    ck_assert_str_eq(stream_text(&c, &x, 0), "[9,8] [1,11] [10,3] [1,4] [2,3] [6,7] [9,0] [10,8] [5,11]");
    check_seeks(&c, &x, 0);
    check_exactly_once(&c, &x);
}
END_TEST

/* R > 1 on both sides: 2 x 2 -> 3 x 1 (16 records, G = 8), and 2 x 1 ->
 * 2 x 2. */
START_TEST(test_replicas)
{
    struct feed_plan_config c = make_cfg(8, 8, 3, 1, 2);
    struct feed_transition x = {.from_workers = 2, .from_replicas = 2, .from_epoch = 0, .from_step = 1};
    /* B_1 = [8 9 12 13] (old worker 0's replicas) + [10 11 14 15]: 3, 3, 2 */
    ck_assert_str_eq(stream_text(&c, &x, 0), "[8,9,12] [0,1,6] [7,12,13] []");
    ck_assert_str_eq(stream_text(&c, &x, 1), "[13,10,11] [2,3,8] [9,14] [15]");
    ck_assert_str_eq(stream_text(&c, &x, 2), "[14,15] [4,5] [10,11] []");
    for (uint32_t w = 0; w < 3; w++)
        check_seeks(&c, &x, w);
    check_exactly_once(&c, &x);

    struct feed_plan_config d = make_cfg(8, 8, 2, 2, 3);
    struct feed_transition y = {.from_workers = 2, .from_replicas = 1, .from_epoch = 1, .from_step = 1};
    for (uint32_t w = 0; w < 2; w++)
        check_seeks(&d, &y, w);
    check_exactly_once(&d, &y);
}
END_TEST

/* A step with fewer elements than N': some new workers get empty pieces;
 * a change in the job's last epoch ends with the transition. */
START_TEST(test_empty_pieces)
{
    struct feed_plan_config c = make_cfg(7, 6, 3, 1, 2);
    struct feed_transition x = {.from_workers = 2, .from_replicas = 1, .from_epoch = 1, .from_step = 2};
    ck_assert_str_eq(stream_text(&c, &x, 0), "[12]");
    ck_assert_str_eq(stream_text(&c, &x, 1), "[13]");
    ck_assert_str_eq(stream_text(&c, &x, 2), "[]");
    for (uint32_t w = 0; w < 3; w++)
        check_seeks(&c, &x, w);
    check_exactly_once(&c, &x);
}
END_TEST

/* Other splits and modes: DATA (the legacy split), HINT records, per-
 * replica input, a shuffle, an endless job; shrinking and growing. */
START_TEST(test_policies)
{
    enum feed_policy pols[] = {FEED_SHARD_DATA, FEED_SHARD_HINT, FEED_SHARD_OFF, FEED_SHARD_FILE};
    for (size_t i = 0; i < sizeof pols / sizeof pols[0]; i++)
        for (int pr = 0; pr < 2; pr++) {
            struct feed_plan_config c = make_cfg(8, 12, 2, 3, pr ? 0 : 3);
            c.policy = pols[i];
            c.hint = FEED_HINT_RECORDS;
            c.per_replica_input = pr && pols[i] == FEED_SHARD_OFF;
            c.shuffle_buffer = pr ? 5 : 0;
            c.seed = 99;
            c.parallel_reads = 2;
            struct feed_transition x = {.from_workers = 4, .from_replicas = 1, .from_epoch = 1, .from_step = 1};
            if (c.epochs == 0) { /* endless: a window of the stream */
                struct feed_stream *st = make_stream(&c, &x, 1);
                struct feed_piece pc;
                struct sl_error err = {0};
                for (int k = 0; k < 40; k++) {
                    ck_assert_int_eq(feed_stream_next(st, &pc, &err), 0);
                    ck_assert_uint_eq(pc.seq, (uint64_t)k);
                }
                feed_stream_destroy(st);
                continue;
            }
            for (uint32_t w = 0; w < 2; w++)
                check_seeks(&c, &x, w);
            check_exactly_once(&c, &x);
        }
}
END_TEST

/* Without a transition the stream is the plan, seq for seq. */
START_TEST(test_plain)
{
    struct feed_plan_config c = make_cfg(6, 6, 2, 1, 2);
    struct feed_transition none = {0};
    ck_assert_str_eq(stream_text(&c, &none, 1), "[2,3,6] [7,10,11] [2,3,6] [7,10,11]");
    struct feed_stream *st = make_stream(&c, NULL, 1);
    struct sl_error err = {0};
    ck_assert_int_eq(feed_stream_seek(st, 3, &err), 0);
    ck_assert_str_eq(rest_text(st), "[7,10,11]");
    feed_stream_destroy(st);
    st = make_stream(&c, NULL, 1);
    ck_assert_int_eq(feed_stream_seek(st, 4, &err), SL_END);
    ck_assert_str_eq(rest_text(st), "");
    feed_stream_destroy(st);
    feed_stream_destroy(NULL);
}
END_TEST

static void expect_refused(const struct feed_plan_config *cfg, const struct feed_transition *x, const char *msg)
{
    struct feed_stream *st = (struct feed_stream *)&st; /* must come back NULL */
    struct sl_error err = {0};
    uint64_t T = 0;
    ck_assert_msg(feed_transition_check(cfg, x, &T, &err) == SL_EINVAL, "accepted, wanted: %s", msg);
    ck_assert_str_eq(err.msg, msg);
    sl_error_clear(&err);
    ck_assert_int_eq(feed_stream_create(&st, cfg, x, 0, &err), SL_EINVAL);
    ck_assert_ptr_null(st);
    ck_assert_str_eq(err.msg, msg);
}

START_TEST(test_hostile)
{
    struct feed_plan_config c = make_cfg(6, 6, 3, 1, 2);
    struct feed_transition x = {.from_workers = 2, .from_replicas = 1, .from_epoch = 0, .from_step = 0};
    expect_refused(&c, &x,
                   "the change at step 0 of epoch 0 is not within that epoch: 2 x 1 take 2 steps per epoch, and a "
                   "change mid-epoch comes at step 1..1 (at step 0 or 2, it is an epoch's start: resume by epoch)");
    x.from_step = 2;
    expect_refused(&c, &x,
                   "the change at step 2 of epoch 0 is not within that epoch: 2 x 1 take 2 steps per epoch, and a "
                   "change mid-epoch comes at step 1..1 (at step 0 or 2, it is an epoch's start: resume by epoch)");
    x.from_step = UINT64_MAX;
    struct sl_error err = {0};
    uint64_t T = 0;
    ck_assert_int_eq(feed_transition_check(&c, &x, &T, &err), SL_EINVAL);
    x.from_step = 1;
    x.from_epoch = 2;
    expect_refused(&c, &x, "the change at step 1 of epoch 2 is past the end of the job (2 epochs)");
    x.from_epoch = UINT64_MAX;
    expect_refused(&c, &x, "the change at step 1 of epoch 18446744073709551615 is past the end of the job (2 epochs)");
    /* an endless job: an epoch whose numbers pass 64 bits */
    c.epochs = 0;
    expect_refused(&c, &x, "the change at step 1 of epoch 18446744073709551615 is past any trainer's reach");
    x.from_epoch = (uint64_t)1 << 48; /* the wire's largest: fine */
    ck_assert_int_eq(feed_transition_check(&c, &x, &T, &err), 0);
    struct feed_stream *st = make_stream(&c, &x, 2);
    struct feed_piece pc;
    ck_assert_int_eq(feed_stream_next(st, &pc, &err), 0);
    ck_assert_uint_eq(pc.epoch, (uint64_t)1 << 48);
    ck_assert_uint_eq(pc.step, 1);
    ck_assert_int_eq(feed_stream_next(st, &pc, &err), 0);
    ck_assert_uint_eq(pc.epoch, ((uint64_t)1 << 48) + 1);
    ck_assert_uint_eq(pc.step, 0);
    ck_assert_uint_eq(pc.seq, 1);
    ck_assert_uint_eq(pc.n, 2);
    feed_stream_destroy(st);
    c.epochs = 2;
    x.from_epoch = 0;
    /* the old shape does not plan: its error, named */
    x.from_workers = 65536;
    expect_refused(&c, &x, "the shape before the change, 65536 x 1: FILE sharding needs at least 65536 files, found 6");
    /* huge old shapes are bounded: W plans (each with its shuffle buffer)
     * per new worker */
    static uint64_t big[1] = {10000000};
    struct feed_plan_config b = make_cfg(1, 64, 1, 1, 1);
    b.counts = big;
    b.policy = FEED_SHARD_OFF;
    b.shuffle_buffer = 1000000;
    struct feed_transition y = {.from_workers = 32, .from_replicas = 2, .from_epoch = 0, .from_step = 1};
    expect_refused(
        &b, &y,
        "a change from 32 x 2 needs 32 plans of the old shape for each new worker, about 512037504 bytes, over "
        "the bound of 268435456 bytes: change the shape at an epoch's start instead");
    y.from_workers = 8;
    ck_assert_int_eq(feed_transition_check(&b, &y, &T, &err), 0);
    ck_assert_uint_eq(T, 10000000 / 64 * 8); /* OFF: every worker reads all, 16 pieces a batch */
    y.from_workers = 65536;
    y.from_replicas = 1024;
    expect_refused(
        &b, &y,
        "a change from 65536 x 1024 needs 65536 plans of the old shape for each new worker, about 1049722356736 "
        "bytes, over the bound of 268435456 bytes: change the shape at an epoch's start instead");
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("feed_transition");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_worked_example);
    tcase_add_test(tc, test_shuffled);
    tcase_add_test(tc, test_replicas);
    tcase_add_test(tc, test_empty_pieces);
    tcase_add_test(tc, test_policies);
    tcase_add_test(tc, test_plain);
    tcase_add_test(tc, test_hostile);
    suite_add_tcase(s, tc);
    return s;
}
