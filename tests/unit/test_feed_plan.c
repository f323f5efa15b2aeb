/* feed_plan: the worked examples of docs/semantics.md sections 2-4 (the
 * splits of 4.1-4.5, interleave order, shuffle reproducibility, padding,
 * epochs and seq numbering), exactly-once delivery per policy, summaries,
 * errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feed_plan.h"
#include "sl_alloc.h"
#include "sl_test.h"

static struct feed_plan_config make_cfg(const uint64_t *counts, size_t nfiles, uint64_t G, uint32_t W, uint32_t R,
                                        enum feed_policy policy)
{
    struct feed_plan_config c;
    memset(&c, 0, sizeof c);
    c.nfiles = nfiles;
    c.counts = counts;
    c.source_is_files = 1;
    c.policy = policy;
    c.global_batch = G;
    c.epochs = 1;
    c.reshuffle_each_epoch = 1;
    c.workers = W;
    c.replicas = R;
    return c;
}

/* Every piece of worker w (padding included) for the config's epochs, as
 * "[a,b] [] [c]": records alone when `files` is 0, else "file:record".
 * Rotating static buffers, so two results can be compared. */
static const char *plan_text(const struct feed_plan_config *cfg, uint32_t w, int files)
{
    static char bufs[4][16384];
    static int next;
    char *out = bufs[next++ % 4];
    size_t len = 0;
    struct feed_plan *p;
    struct sl_error err = {0};
    ck_assert_msg(feed_plan_create(&p, cfg, w, &err) == 0, "create: %s", err.msg);
    struct feed_piece pc;
    int rc;
    out[0] = '\0';
    while ((rc = feed_plan_next(p, &pc, &err)) == 0) {
        len += (size_t)snprintf(out + len, sizeof bufs[0] - len, "%s[", len ? " " : "");
        for (size_t i = 0; i < pc.n; i++) {
            if (files)
                len += (size_t)snprintf(out + len, sizeof bufs[0] - len, "%s%u:%llu", i ? "," : "", pc.elems[i].file,
                                        (unsigned long long)pc.elems[i].record);
            else
                len += (size_t)snprintf(out + len, sizeof bufs[0] - len, "%s%llu", i ? "," : "",
                                        (unsigned long long)pc.elems[i].record);
        }
        len += (size_t)snprintf(out + len, sizeof bufs[0] - len, "]");
        ck_assert_uint_lt(len, sizeof bufs[0] - 64);
    }
    ck_assert_int_eq(rc, SL_END);
    feed_plan_destroy(p);
    return out;
}

static struct feed_plan_summary summary(const struct feed_plan_config *cfg, uint32_t w)
{
    struct feed_plan_summary s;
    struct sl_error err = {0};
    ck_assert_msg(feed_plan_summarize(cfg, w, &s, &err) == 0, "summarize: %s", err.msg);
    return s;
}

static void expect_error(const struct feed_plan_config *cfg, uint32_t w, const char *msg)
{
    struct feed_plan *p = (struct feed_plan *)&p; /* must come back NULL */
    struct feed_plan_summary s;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_plan_create(&p, cfg, w, &err), SL_EINVAL);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err.msg, msg);
    sl_error_clear(&err);
    ck_assert_int_eq(feed_plan_summarize(cfg, w, &s, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, msg);
}

/* ---- docs/semantics.md 4.1: the stream split -------------------------- */

/* feed_plan_seek: jumping to any seq, then skipping `within` pieces (none:
 * the seek goes all the way), gives exactly the pieces iterating from the
 * start gives from there on (shuffled, reshuffled each epoch, interleaved,
 * W = 2, R = 3, several epochs); past the end of a finite plan it is
 * SL_END; an endless plan seeks 2^40 at once. */
START_TEST(test_seek_matches_iteration)
{
    static const uint64_t counts[] = {7, 5, 9};
    struct feed_plan_config c = make_cfg(counts, 3, 5, 2, 3, FEED_SHARD_OFF);
    c.shuffle_buffer = 4;
    c.seed = 11;
    c.parallel_reads = 2;
    c.epochs = 3;
    struct sl_error err = {0};
    struct feed_plan *all, *p;
    ck_assert_int_eq(feed_plan_create(&all, &c, 1, &err), 0);
    enum { MAXP = 256 };
    struct feed_piece ref[MAXP];
    struct feed_elem elems[MAXP][8];
    size_t n = 0;
    while (n < MAXP && feed_plan_next(all, &ref[n], &err) == 0) {
        ck_assert_uint_le(ref[n].n, 8);
        memcpy(elems[n], ref[n].elems, ref[n].n * sizeof elems[n][0]);
        n++;
    }
    feed_plan_destroy(all);
    ck_assert_uint_gt(n, 12); /* several epochs' worth */
    for (size_t seq = 0; seq <= n; seq++) {
        ck_assert_int_eq(feed_plan_create(&p, &c, 1, &err), 0);
        uint64_t within = 99;
        int rc = feed_plan_seek(p, seq, &within);
        if (seq == n) {
            ck_assert_int_eq(rc, SL_END);
            struct feed_piece x;
            ck_assert_int_eq(feed_plan_next(p, &x, &err), SL_END);
            feed_plan_destroy(p);
            break;
        }
        ck_assert_int_eq(rc, 0);
        ck_assert_uint_le(within, seq);
        struct feed_piece got;
        for (uint64_t i = 0; i < within; i++)
            ck_assert_int_eq(feed_plan_next(p, &got, &err), 0);
        for (size_t k = seq; k < n; k++) {
            ck_assert_int_eq(feed_plan_next(p, &got, &err), 0);
            ck_assert_uint_eq(got.seq, ref[k].seq);
            ck_assert_uint_eq(got.epoch, ref[k].epoch);
            ck_assert_uint_eq(got.step, ref[k].step);
            ck_assert_uint_eq(got.replica, ref[k].replica);
            ck_assert_uint_eq(got.n, ref[k].n);
            for (size_t e = 0; e < got.n; e++) {
                ck_assert_uint_eq(got.elems[e].file, elems[k][e].file);
                ck_assert_uint_eq(got.elems[e].record, elems[k][e].record);
            }
        }
        ck_assert_int_eq(feed_plan_next(p, &got, &err), SL_END);
        feed_plan_destroy(p);
    }
    /* endless: a far seq is one division away; its epoch is numbered so */
    c.epochs = 0;
    ck_assert_int_eq(feed_plan_create(&p, &c, 0, &err), 0);
    uint64_t within;
    uint64_t per = ref[n - 1].seq + 1; /* 3 epochs' pieces */
    per /= 3;
    ck_assert_int_eq(feed_plan_seek(p, ((uint64_t)1 << 40) + 1, &within), 0);
    ck_assert_uint_eq(within, 0);
    struct feed_piece got;
    ck_assert_int_eq(feed_plan_next(p, &got, &err), 0);
    ck_assert_uint_eq(got.seq, ((uint64_t)1 << 40) + 1);
    ck_assert_uint_eq(got.epoch, (((uint64_t)1 << 40) + 1) / per);
    feed_plan_destroy(p);
}
END_TEST

/* Every piece of worker w's finite plan, elements flattened. */
struct plan_rec {
    size_t n, cap, ecap, nelems;
    struct feed_piece *pieces;
    size_t *first; /* index of piece k's first element in elems */
    struct feed_elem *elems;
};

static void plan_record(const struct feed_plan_config *cfg, uint32_t w, struct plan_rec *r)
{
    struct feed_plan *p;
    struct sl_error err = {0};
    struct feed_piece pc;
    int rc;
    memset(r, 0, sizeof *r);
    ck_assert_msg(feed_plan_create(&p, cfg, w, &err) == 0, "create: %s", err.msg);
    while ((rc = feed_plan_next(p, &pc, &err)) == 0) {
        if (r->n == r->cap) {
            r->cap = r->cap ? 2 * r->cap : 64;
            r->pieces = realloc(r->pieces, r->cap * sizeof *r->pieces);
            r->first = realloc(r->first, r->cap * sizeof *r->first);
            ck_assert(r->pieces != NULL && r->first != NULL);
        }
        while (r->nelems + pc.n > r->ecap) {
            r->ecap = r->ecap ? 2 * r->ecap : 256;
            r->elems = realloc(r->elems, r->ecap * sizeof *r->elems);
            ck_assert(r->elems != NULL);
        }
        if (pc.n > 0)
            memcpy(r->elems + r->nelems, pc.elems, pc.n * sizeof *pc.elems);
        r->first[r->n] = r->nelems;
        r->nelems += pc.n;
        r->pieces[r->n++] = pc;
    }
    ck_assert_int_eq(rc, SL_END);
    feed_plan_destroy(p);
}

static void plan_rec_free(struct plan_rec *r)
{
    free(r->pieces);
    free(r->first);
    free(r->elems);
}

/* The checks in these loops run millions of times: they call the framework
 * only to fail (each passing ck_assert is written to its log). */
static void expect_piece(const struct feed_piece *got, const struct plan_rec *r, size_t k, const char *what,
                         uint64_t seq)
{
    const struct feed_piece *want = &r->pieces[k];
    if (got->seq != want->seq || got->epoch != want->epoch || got->step != want->step ||
        got->replica != want->replica || got->worker != want->worker || got->n != want->n)
        ck_abort_msg("%s: after a seek to %llu, piece %zu: seq %llu n %zu, want seq %llu n %zu", what,
                     (unsigned long long)seq, k, (unsigned long long)got->seq, got->n, (unsigned long long)want->seq,
                     want->n);
    for (size_t e = 0; e < got->n; e++) {
        const struct feed_elem *a = &got->elems[e], *b = &r->elems[r->first[k] + e];
        if (a->file != b->file || a->record != b->record)
            ck_abort_msg("%s: after a seek to %llu, piece %zu element %zu: %u:%llu, want %u:%llu", what,
                         (unsigned long long)seq, k, e, a->file, (unsigned long long)a->record, b->file,
                         (unsigned long long)b->record);
    }
}

/* For every seq of worker w's finite plan: a fresh plan seeks there with
 * within == 0 and then gives exactly the pieces iteration gives, to the end
 * of that epoch and the first piece of the next (every epoch starts from
 * its number alone); a seek to the end is SL_END. Returns the piece count. */
static size_t check_seek_all(const struct feed_plan_config *cfg, uint32_t w, const char *what)
{
    struct plan_rec r;
    plan_record(cfg, w, &r);
    struct sl_error err = {0};
    struct feed_piece got;
    struct feed_plan *p;
    uint64_t per = r.n / (cfg->epochs ? cfg->epochs : 1);
    ck_assert_uint_eq(per * cfg->epochs, r.n);
    for (size_t seq = 0; seq <= r.n; seq++) {
        if (feed_plan_create(&p, cfg, w, &err) != 0)
            ck_abort_msg("%s: create: %s", what, err.msg);
        uint64_t within = 99;
        int rc = feed_plan_seek(p, seq, &within);
        if (within != 0 || rc != (seq == r.n ? SL_END : 0))
            ck_abort_msg("%s: seek to %zu of %zu: rc %d within %llu", what, seq, r.n, rc, (unsigned long long)within);
        if (seq == r.n) {
            ck_assert_int_eq(feed_plan_next(p, &got, &err), SL_END);
            feed_plan_destroy(p);
            break;
        }
        size_t end = (seq / per + 1) * per + 1;
        for (size_t k = seq; k < end && k < r.n; k++) {
            if (feed_plan_next(p, &got, &err) != 0)
                ck_abort_msg("%s: after a seek to %zu, piece %zu: no piece", what, seq, k);
            expect_piece(&got, &r, k, what, seq);
        }
        feed_plan_destroy(p);
    }
    size_t n = r.n;
    plan_rec_free(&r);
    return n;
}

/* The fast-forward of feed_plan_seek against iteration, every seq of 3
 * epochs: every policy and hint, per-replica input (no shard, files,
 * records), unshuffled and shuffled (buffer 1, 4, and larger than the
 * data), drop_remainder on and off, W x R of 1x1, 2x3, 3x2, 4x1, one file
 * at a time and interleaved (cycle 3, more slots than files), every worker.
 * Small files with an empty one, so that every stage's edges come by. */
START_TEST(test_seek_fast_forward_matrix)
{
    static const uint64_t counts[] = {7, 5, 9, 0, 13, 3, 1, 8};
    static const uint32_t shapes[][2] = {{1, 1}, {2, 3}, {3, 2}, {4, 1}};
    static const uint64_t buffers[] = {0, 1, 4, 1000};
    static const uint32_t cycles[] = {1, 3, 12};
    struct {
        int pr;
        enum feed_policy pol;
        enum feed_hint hint;
        enum feed_pr_shard prs;
    } kinds[] = {
        {0, FEED_SHARD_AUTO, FEED_HINT_FILES, 0},       {0, FEED_SHARD_OFF, FEED_HINT_FILES, 0},
        {0, FEED_SHARD_DATA, FEED_HINT_FILES, 0},       {0, FEED_SHARD_HINT, FEED_HINT_FILES, 0},
        {0, FEED_SHARD_HINT, FEED_HINT_RECORDS, 0},     {0, FEED_SHARD_HINT, FEED_HINT_BATCHES, 0},
        {1, FEED_SHARD_AUTO, 0, FEED_PR_SHARD_NONE},    {1, FEED_SHARD_AUTO, 0, FEED_PR_SHARD_FILES},
        {1, FEED_SHARD_AUTO, 0, FEED_PR_SHARD_RECORDS},
    };
    size_t configs = 0, pieces = 0;
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++)
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (size_t bi = 0; bi < sizeof buffers / sizeof buffers[0]; bi++)
                for (int drop = 0; drop <= 1; drop++)
                    for (size_t ci = 0; ci < sizeof cycles / sizeof cycles[0]; ci++) {
                        uint32_t W = shapes[si][0], R = shapes[si][1];
                        uint64_t G = kinds[ki].pr ? (uint64_t)W * R * 2 : 5;
                        struct feed_plan_config c = make_cfg(counts, 8, G, W, R, kinds[ki].pol);
                        c.hint = kinds[ki].hint;
                        c.per_replica_input = kinds[ki].pr;
                        c.pr_shard = kinds[ki].prs;
                        c.shuffle_buffer = buffers[bi];
                        c.seed = 1000 + ki * 7 + si;
                        c.drop_remainder = drop;
                        c.parallel_reads = cycles[ci];
                        c.epochs = 3;
                        char what[160];
                        snprintf(what, sizeof what, "kind %zu W %u R %u buffer %llu drop %d cycle %u", ki, W, R,
                                 (unsigned long long)buffers[bi], drop, cycles[ci]);
                        for (uint32_t w = 0; w < W; w++)
                            pieces += check_seek_all(&c, w, what);
                        configs++;
                    }
    ck_assert_uint_eq(configs, 9 * 4 * 4 * 2 * 3);
    ck_assert_uint_gt(pieces, 100000);
}
END_TEST

/* Larger files than the buffer's coupon-collector span, so that the
 * backward replay stops early and the interleave skips whole turns: every
 * policy, shuffled (S = 6 and 61) and not, interleaved over 3 and 1 files,
 * every seq of 3 epochs. */
START_TEST(test_seek_fast_forward_long_files)
{
    static const uint64_t counts[] = {300, 251, 0, 410, 1, 97, 520};
    static const enum feed_policy pols[] = {FEED_SHARD_FILE, FEED_SHARD_OFF, FEED_SHARD_DATA, FEED_SHARD_HINT,
                                            FEED_SHARD_HINT};
    static const enum feed_hint hints[] = {FEED_HINT_FILES, FEED_HINT_FILES, FEED_HINT_FILES, FEED_HINT_RECORDS,
                                           FEED_HINT_BATCHES};
    static const uint64_t buffers[] = {0, 6, 61};
    for (size_t k = 0; k < 5; k++)
        for (size_t b = 0; b < 3; b++)
            for (uint32_t cyc = 1; cyc <= 3; cyc += 2) {
                struct feed_plan_config c = make_cfg(counts, 7, 23, 2, 2, pols[k]);
                c.hint = hints[k];
                c.shuffle_buffer = buffers[b];
                c.seed = 77 + k;
                c.parallel_reads = cyc;
                c.epochs = 3;
                c.drop_remainder = (int)(b % 2);
                char what[96];
                snprintf(what, sizeof what, "long files: policy %zu buffer %llu cycle %u", k,
                         (unsigned long long)buffers[b], cyc);
                for (uint32_t w = 0; w < 2; w++)
                    ck_assert_uint_gt(check_seek_all(&c, w, what), 100);
            }
    /* per-replica input, records sharded */
    struct feed_plan_config c = make_cfg(counts, 7, 12, 2, 3, FEED_SHARD_AUTO);
    c.per_replica_input = 1;
    c.pr_shard = FEED_PR_SHARD_RECORDS;
    c.shuffle_buffer = 9;
    c.parallel_reads = 2;
    c.epochs = 3;
    ck_assert_uint_gt(check_seek_all(&c, 1, "long files: per-replica"), 1000);
}
END_TEST

/* A far epoch of an endless plan: seeking to a seq in epoch 10^9 + 3 gives
 * what seeking to that epoch's first piece and iterating gives (the way
 * the feeder passed over pieces before the fast-forward), shuffled and
 * reshuffled each epoch, and one seek costs no more than a near one. */
START_TEST(test_seek_far_epoch)
{
    static const uint64_t counts[] = {300, 251, 0, 410, 1, 97, 520};
    struct feed_plan_config c = make_cfg(counts, 7, 23, 2, 2, FEED_SHARD_OFF);
    c.shuffle_buffer = 61;
    c.seed = 5;
    c.parallel_reads = 3;
    c.epochs = 0;
    struct sl_error err = {0};
    struct feed_plan_summary sum = summary(&c, 1);
    uint64_t per = sum.steps * c.replicas, epoch = 1000000003ull;
    for (uint64_t within = 0; within < per; within += 37) {
        struct feed_plan *a, *b;
        uint64_t wa = 1, wb = 1;
        ck_assert_int_eq(feed_plan_create(&a, &c, 1, &err), 0);
        ck_assert_int_eq(feed_plan_create(&b, &c, 1, &err), 0);
        ck_assert_int_eq(feed_plan_seek(a, epoch * per + within, &wa), 0);
        ck_assert_int_eq(feed_plan_seek(b, epoch * per, &wb), 0);
        ck_assert_uint_eq(wa, 0);
        ck_assert_uint_eq(wb, 0);
        struct feed_piece pa, pb;
        for (uint64_t i = 0; i < within; i++)
            ck_assert_int_eq(feed_plan_next(b, &pb, &err), 0);
        for (uint64_t i = within; i < per + 2; i++) {
            ck_assert_int_eq(feed_plan_next(a, &pa, &err), 0);
            ck_assert_int_eq(feed_plan_next(b, &pb, &err), 0);
            ck_assert_uint_eq(pa.seq, epoch * per + i);
            ck_assert_uint_eq(pa.epoch, epoch + i / per);
            ck_assert_uint_eq(pa.seq, pb.seq);
            ck_assert_uint_eq(pa.n, pb.n);
            for (size_t e = 0; e < pa.n; e++) {
                ck_assert_uint_eq(pa.elems[e].file, pb.elems[e].file);
                ck_assert_uint_eq(pa.elems[e].record, pb.elems[e].record);
            }
        }
        feed_plan_destroy(a);
        feed_plan_destroy(b);
    }
}
END_TEST

START_TEST(test_stream_split_last_batch_of_6)
{
    uint64_t n14[] = {14}, n11[] = {11};
    struct feed_plan_config c = make_cfg(n14, 1, 8, 1, 2, FEED_SHARD_OFF);
    /* batches [0..7] [8..13]: the last batch of 6 -> [e0..e3], [e4,e5] */
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1,2,3] [4,5,6,7] [8,9,10,11] [12,13]");
    c.policy = FEED_SHARD_AUTO;
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1,2,3] [4,5,6,7] [8,9,10,11] [12,13]");
    c.policy = FEED_SHARD_FILE;
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1,2,3] [4,5,6,7] [8,9,10,11] [12,13]");
    /* last batch of 3: [e0,e1,e2], then the stream ends; replica 1 pads */
    c.counts = n11;
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1,2,3] [4,5,6,7] [8,9,10] []");
    struct feed_plan_summary s = summary(&c, 0);
    ck_assert_uint_eq(s.steps, 2);
    ck_assert_uint_eq(s.pieces, 3);
    ck_assert_uint_eq(s.elements, 11);
    ck_assert_uint_eq(s.replica_elements[0], 7);
    ck_assert_uint_eq(s.replica_elements[1], 4);
}
END_TEST

START_TEST(test_g7_w2_r2_sizes)
{
    /* worker 0 sizes [2,2,2,1], worker 1 [2,1,2,2] */
    uint64_t two[] = {7, 7};
    struct feed_plan_config c = make_cfg(two, 2, 7, 2, 2, FEED_SHARD_FILE);
    ck_assert_str_eq(plan_text(&c, 0, 1), "[0:0,0:1] [0:2,0:3] [0:4,0:5] [0:6]");
    ck_assert_str_eq(plan_text(&c, 1, 1), "[1:0,1:1] [1:2] [1:3,1:4] [1:5,1:6]");
    struct feed_plan_summary s = summary(&c, 1);
    ck_assert_uint_eq(s.steps, 2);
    ck_assert_uint_eq(s.files, 1);
    ck_assert_uint_eq(s.replica_elements[0], 4);
    ck_assert_uint_eq(s.replica_elements[1], 3);
    /* OFF: worker 1 re-chunks the whole stream with its own sizes */
    uint64_t one[] = {14};
    c = make_cfg(one, 1, 7, 2, 2, FEED_SHARD_OFF);
    ck_assert_str_eq(plan_text(&c, 1, 0), "[0,1] [2] [3,4] [5,6] [7,8] [9] [10,11] [12,13]");
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1] [2,3] [4,5] [6] [7,8] [9,10] [11,12] [13]");
}
END_TEST

START_TEST(test_sizes_g3_n4_zero_wants)
{
    /* G=3, N=4: sizes [1,1,1,0]; a want of 0 is an empty piece of the split */
    uint64_t three[] = {3}, four[] = {4}, none[] = {0};
    struct feed_plan_config c = make_cfg(three, 1, 3, 1, 4, FEED_SHARD_OFF);
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0] [1] [2] []");
    ck_assert_uint_eq(summary(&c, 0).pieces, 4);
    /* input ends at a piece boundary, the 0-want still yields an empty
     * piece, the next want > 0 ends the stream; then padding */
    c.counts = four;
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0] [1] [2] [] [3] [] [] []");
    ck_assert_uint_eq(summary(&c, 0).pieces, 5);
    ck_assert_uint_eq(summary(&c, 0).steps, 2);

    /* W=4, R=1: rotations [1,1,1,0] [1,1,0,1] [1,0,1,1] [0,1,1,1] */
    c = make_cfg(three, 1, 3, 4, 1, FEED_SHARD_OFF);
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0] [1] [2] [] []");
    ck_assert_str_eq(plan_text(&c, 1, 0), "[0] [1] [] [2] []");
    ck_assert_str_eq(plan_text(&c, 2, 0), "[0] [] [1] [2] []");
    ck_assert_str_eq(plan_text(&c, 3, 0), "[] [0] [1] [2] []");
    ck_assert_uint_eq(summary(&c, 3).pieces, 5);
    ck_assert_uint_eq(summary(&c, 0).pieces, 4);
    ck_assert_uint_eq(summary(&c, 0).steps, 5);
    /* fewer elements: worker 3 stops at its first want > 0 with nothing */
    uint64_t two[] = {2};
    c.counts = two;
    ck_assert_str_eq(plan_text(&c, 3, 0), "[] [0] [1]");
    ck_assert_uint_eq(summary(&c, 3).pieces, 3);

    /* no data at all: a worker whose sizes start with 0 still yields one
     * empty piece (an element of batch 0), which makes a step */
    c = make_cfg(none, 1, 1, 2, 1, FEED_SHARD_OFF);
    ck_assert_str_eq(plan_text(&c, 1, 0), "[]");
    ck_assert_str_eq(plan_text(&c, 0, 0), "[]");
    ck_assert_uint_eq(summary(&c, 0).pieces, 0);
    ck_assert_uint_eq(summary(&c, 1).pieces, 1);
    ck_assert_uint_eq(summary(&c, 0).steps, 1);
    /* W=1: no step at all, the plan ends at once (even when forever) */
    c = make_cfg(none, 1, 4, 1, 2, FEED_SHARD_OFF);
    c.epochs = 0;
    ck_assert_str_eq(plan_text(&c, 0, 0), "");
    ck_assert_uint_eq(summary(&c, 0).steps, 0);
}
END_TEST

/* ---- docs/semantics.md 4.2: the legacy split -------------------------- */

START_TEST(test_legacy_split)
{
    uint64_t r8[] = {8}, r6[] = {6}, r4[] = {4};
    /* range(8).batch(4), N = 3 */
    struct feed_plan_config c = make_cfg(r8, 1, 4, 1, 3, FEED_SHARD_DATA);
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1] [2,3] [] [4,5] [6,7] []");
    struct feed_plan_summary s = summary(&c, 0);
    ck_assert_uint_eq(s.pieces, 6);
    ck_assert_uint_eq(s.steps, 2);
    ck_assert_uint_eq(s.replica_elements[2], 0);
    /* AUTO on a source that is not files is DATA */
    c.policy = FEED_SHARD_AUTO;
    c.source_is_files = 0;
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1] [2,3] [] [4,5] [6,7] []");
    /* the distributed-input guide: range(6).batch(4) on 2, range(4).batch(4) on 5 */
    c = make_cfg(r6, 1, 4, 1, 2, FEED_SHARD_DATA);
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1] [2,3] [4] [5]");
    c = make_cfg(r4, 1, 4, 1, 5, FEED_SHARD_DATA);
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0] [1] [2] [3] []");
}
END_TEST

START_TEST(test_mwms_data_range9_batch2)
{
    uint64_t r9[] = {9};
    struct feed_plan_config c = make_cfg(r9, 1, 2, 2, 1, FEED_SHARD_DATA);
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0] [2] [4] [6] [8]");
    ck_assert_str_eq(plan_text(&c, 1, 0), "[1] [3] [5] [7] []");
    ck_assert_uint_eq(summary(&c, 1).pieces, 5);
    ck_assert_uint_eq(summary(&c, 1).elements, 4);
    ck_assert_uint_eq(summary(&c, 0).files, 1);
    c.policy = FEED_SHARD_AUTO;
    c.source_is_files = 0;
    ck_assert_str_eq(plan_text(&c, 1, 0), "[1] [3] [5] [7] []");
}
END_TEST

/* ---- docs/semantics.md 4.5: the two splits side by side --------------- */

START_TEST(test_worked_examples_5_8)
{
    uint64_t e20[] = {20}, e8[] = {8}, e12[] = {12}, two8[] = {8, 8};
    struct feed_plan_config c = make_cfg(e20, 1, 8, 1, 2, FEED_SHARD_FILE);
    /* replica 0: 0-3, 8-11, 16-19; replica 1: 4-7, 12-15, [] */
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1,2,3] [4,5,6,7] [8,9,10,11] [12,13,14,15] [16,17,18,19] []");
    c.policy = FEED_SHARD_DATA; /* replica 0 ... 16,17; replica 1 ... 18,19 */
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1,2,3] [4,5,6,7] [8,9,10,11] [12,13,14,15] [16,17] [18,19]");
    c = make_cfg(e8, 1, 8, 1, 3, FEED_SHARD_FILE); /* sizes [3,3,2] */
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1,2] [3,4,5] [6,7]");
    c.policy = FEED_SHARD_DATA; /* interval 3 */
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1,2] [3,4,5] [6,7]");
    /* last global batch of 4: V2 e0-e2, e3, []; legacy e0,e1 / e2,e3 / [] */
    c = make_cfg(e12, 1, 8, 1, 3, FEED_SHARD_FILE);
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1,2] [3,4,5] [6,7] [8,9,10] [11] []");
    c.policy = FEED_SHARD_DATA;
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1,2] [3,4,5] [6,7] [8,9] [10,11] []");
    /* MWMS W=2 R=1 FILE: one local batch of G feeds W steps */
    c = make_cfg(two8, 2, 8, 2, 1, FEED_SHARD_FILE);
    ck_assert_str_eq(plan_text(&c, 0, 1), "[0:0,0:1,0:2,0:3] [0:4,0:5,0:6,0:7]");
    ck_assert_str_eq(plan_text(&c, 1, 1), "[1:0,1:1,1:2,1:3] [1:4,1:5,1:6,1:7]");
}
END_TEST

/* ---- errors ----------------------------------------------------------- */

START_TEST(test_file_sharding_errors)
{
    uint64_t two[] = {5, 5};
    struct feed_plan_config c = make_cfg(two, 2, 4, 4, 1, FEED_SHARD_FILE);
    for (uint32_t w = 0; w < 4; w++)
        expect_error(&c, w, "FILE sharding needs at least 4 files, found 2");
    c.policy = FEED_SHARD_AUTO; /* AUTO does not fall back to DATA */
    expect_error(&c, 3, "FILE sharding needs at least 4 files, found 2");
    c.source_is_files = 0; /* AUTO on a non-file source is DATA: fine */
    ck_assert_str_eq(plan_text(&c, 3, 1), "[0:3] [1:2] []");
    c.policy = FEED_SHARD_FILE; /* FILE on a non-file source */
    expect_error(&c, 0, "FILE sharding needs a file source (found an unshardable source dataset)");
    c.workers = 1; /* FILE with one worker rewrites nothing */
    ck_assert_str_eq(plan_text(&c, 0, 1), "[0:0,0:1,0:2,0:3] [0:4,1:0,1:1,1:2] [1:3,1:4]");
    c.source_is_files = 1;
    c.workers = 2;
    ck_assert_str_eq(plan_text(&c, 1, 1), "[1:0,1:1] [1:2,1:3] [1:4]");
    c.workers = 4;
    c.policy = FEED_SHARD_OFF;
    ck_assert_uint_eq(summary(&c, 3).elements, 10);
    /* no files at all: every worker's shard is empty, as in TensorFlow */
    c = make_cfg(NULL, 0, 4, 3, 1, FEED_SHARD_FILE);
    ck_assert_str_eq(plan_text(&c, 2, 1), "");
}
END_TEST

START_TEST(test_per_replica_errors_and_validation)
{
    uint64_t one[] = {10};
    struct feed_plan_config c = make_cfg(one, 1, 7, 2, 2, FEED_SHARD_AUTO);
    c.per_replica_input = 1;
    expect_error(&c, 0, "The global_batch_size 7 is not divisible by num_replicas_in_sync 4");
    c.global_batch = 8;
    ck_assert_uint_eq(summary(&c, 0).pieces, 5); /* 10 elements in batches of 2 */

    c = make_cfg(one, 1, 0, 1, 1, FEED_SHARD_OFF);
    expect_error(&c, 0, "global_batch_size must be >= 1");
    c = make_cfg(one, 1, 4, 0, 1, FEED_SHARD_OFF);
    expect_error(&c, 0, "workers must be >= 1");
    c = make_cfg(one, 1, 4, 1, 0, FEED_SHARD_OFF);
    expect_error(&c, 0, "replicas per worker must be >= 1");
    c = make_cfg(NULL, 2, 4, 1, 1, FEED_SHARD_OFF);
    expect_error(&c, 0, "plan: record counts missing for 2 files");
    c = make_cfg(one, 1, 4, 2, 1, FEED_SHARD_OFF);
    expect_error(&c, 2, "worker 2 out of range (workers = 2)");
    c.policy = (enum feed_policy)9;
    expect_error(&c, 0, "plan: unknown auto-shard policy 9");
}
END_TEST

START_TEST(test_hint_sharding)
{
    uint64_t three[] = {3, 4, 5}, five[] = {5}, ten[] = {10};
    struct feed_plan_config c = make_cfg(three, 3, 100, 2, 1, FEED_SHARD_HINT);
    c.hint = FEED_HINT_FILES;
    ck_assert_uint_eq(summary(&c, 0).files, 2);
    ck_assert_uint_eq(summary(&c, 0).elements, 8);
    ck_assert_uint_eq(summary(&c, 1).elements, 4);
    /* records: elements p % W == w of the interleaved stream, before shuffle */
    c = make_cfg(five, 1, 2, 2, 1, FEED_SHARD_HINT);
    c.hint = FEED_HINT_RECORDS;
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0] [2] [4]");
    ck_assert_str_eq(plan_text(&c, 1, 0), "[1] [3] []");
    /* batches: global batches b % W == w, then the stream split */
    c = make_cfg(ten, 1, 2, 2, 1, FEED_SHARD_HINT);
    c.hint = FEED_HINT_BATCHES;
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0] [1] [4] [5] [8] [9]");
    ck_assert_str_eq(plan_text(&c, 1, 0), "[2] [3] [6] [7] [] []");
    ck_assert_uint_eq(summary(&c, 1).files, 1);
    /* the hinted shard requires W elements there (require_non_empty) */
    uint64_t ones[] = {1, 1}, r2[] = {2}, r4[] = {4}, r5[] = {5};
    c = make_cfg(ones, 2, 2, 3, 1, FEED_SHARD_HINT);
    c.hint = FEED_HINT_FILES;
    expect_error(&c, 0, "HINT sharding needs at least 3 files, found 2");
    c.counts = r2;
    c.nfiles = 1;
    c.hint = FEED_HINT_RECORDS;
    expect_error(&c, 0, "HINT sharding needs at least 3 records, found 2");
    c.counts = r4;
    c.hint = FEED_HINT_BATCHES;
    expect_error(&c, 0, "HINT sharding needs at least 3 batches, found 2");
    c.counts = r5;
    ck_assert_str_eq(plan_text(&c, 2, 0), "[] [4] []"); /* sizes [0,1,1] */
    c.drop_remainder = 1;
    expect_error(&c, 1, "HINT sharding needs at least 3 batches, found 2");
}
END_TEST

/* ---- per-replica input ------------------------------------------------ */

START_TEST(test_per_replica_input)
{
    uint64_t three[] = {5, 3, 4}, six[] = {6};
    struct feed_plan_config c = make_cfg(three, 3, 8, 2, 2, FEED_SHARD_DATA);
    c.per_replica_input = 1;
    c.pr_shard = FEED_PR_SHARD_FILES; /* batches of G / N = 2, files j % 2 */
    ck_assert_str_eq(plan_text(&c, 0, 1), "[0:0,0:1] [0:2,0:3] [0:4,2:0] [2:1,2:2] [2:3] []");
    ck_assert_str_eq(plan_text(&c, 1, 1), "[1:0,1:1] [1:2] [] [] [] []");
    struct feed_plan_summary s = summary(&c, 0);
    ck_assert_uint_eq(s.steps, 3);
    ck_assert_uint_eq(s.pieces, 5);
    ck_assert_uint_eq(s.files, 2);
    ck_assert_uint_eq(s.replica_elements[0], 5);
    ck_assert_uint_eq(s.replica_elements[1], 4);
    c.drop_remainder = 1;
    ck_assert_str_eq(plan_text(&c, 0, 1), "[0:0,0:1] [0:2,0:3] [0:4,2:0] [2:1,2:2]");
    /* no explicit shard: every worker reads everything */
    c.pr_shard = FEED_PR_SHARD_NONE;
    ck_assert_uint_eq(summary(&c, 1).elements, 12);
    c = make_cfg(six, 1, 4, 2, 1, FEED_SHARD_FILE);
    c.per_replica_input = 1;
    c.pr_shard = FEED_PR_SHARD_RECORDS;
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,2] [4]");
    ck_assert_str_eq(plan_text(&c, 1, 0), "[1,3] [5]");
    c.drop_remainder = 1;
    ck_assert_str_eq(plan_text(&c, 1, 0), "[1,3]");
}
END_TEST

/* ---- interleave ------------------------------------------------------- */

START_TEST(test_interleave_order)
{
    uint64_t a[] = {3, 0, 1, 4, 2};
    struct feed_plan_config c = make_cfg(a, 5, 100, 1, 1, FEED_SHARD_OFF);
    c.parallel_reads = 2;
    /* the empty file 1 takes a turn of slot 1; file 2 ends and file 0 ends,
     * both slots then open files 3 and 4 in turn */
    ck_assert_str_eq(plan_text(&c, 0, 1), "[0:0,0:1,2:0,0:2,3:0,4:0,3:1,4:1,3:2,3:3]");
    c.parallel_reads = 1;
    ck_assert_str_eq(plan_text(&c, 0, 1), "[0:0,0:1,0:2,2:0,3:0,3:1,3:2,3:3,4:0,4:1]");
    c.parallel_reads = 0;
    ck_assert_str_eq(plan_text(&c, 0, 1), "[0:0,0:1,0:2,2:0,3:0,3:1,3:2,3:3,4:0,4:1]");
    uint64_t b[] = {2, 1, 3};
    c = make_cfg(b, 3, 100, 1, 1, FEED_SHARD_OFF);
    c.parallel_reads = 3;
    ck_assert_str_eq(plan_text(&c, 0, 1), "[0:0,1:0,2:0,0:1,2:1,2:2]");
    uint64_t d[] = {0, 2, 2};
    c = make_cfg(d, 3, 100, 1, 1, FEED_SHARD_OFF);
    c.parallel_reads = 2;
    ck_assert_str_eq(plan_text(&c, 0, 1), "[1:0,2:0,1:1,2:1]");
    uint64_t e[] = {2, 2}; /* more slots than files */
    c = make_cfg(e, 2, 100, 1, 1, FEED_SHARD_OFF);
    c.parallel_reads = 3;
    ck_assert_str_eq(plan_text(&c, 0, 1), "[0:0,1:0,0:1,1:1]");
    /* FILE: the interleave runs over the worker's own files */
    uint64_t f[] = {2, 9, 3, 9, 1};
    c = make_cfg(f, 5, 100, 2, 1, FEED_SHARD_FILE);
    c.parallel_reads = 2;
    ck_assert_str_eq(plan_text(&c, 0, 1), "[0:0,2:0,0:1,2:1,2:2,4:0]");
}
END_TEST

/* ---- shuffle ---------------------------------------------------------- */

static uint64_t ref_splitmix(uint64_t *s)
{
    *s += 0x9E3779B97F4A7C15ull;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

START_TEST(test_shuffle)
{
    uint64_t n50[] = {50};
    struct feed_plan_config c = make_cfg(n50, 1, 50, 1, 1, FEED_SHARD_OFF);
    c.shuffle_buffer = 10;
    c.seed = 42;
    c.epochs = 2;
    char e0[1024], e1[1024], again[1024];
    const char *t = plan_text(&c, 0, 0);
    ck_assert_ptr_nonnull(strchr(t, ' '));
    size_t cut = (size_t)(strchr(t, ' ') - t);
    memcpy(e0, t, cut);
    e0[cut] = '\0';
    snprintf(e1, sizeof e1, "%s", t + cut + 1);
    snprintf(again, sizeof again, "%s", plan_text(&c, 0, 0));
    ck_assert_str_eq(again, t); /* same seed, same order */
    ck_assert_str_ne(e0, e1);   /* reshuffled each epoch */

    /* the header's definition, step by step */
    uint64_t st = 42, buf[10], len = 0, in = 0;
    char want[1024];
    size_t wl = (size_t)snprintf(want, sizeof want, "[");
    while (len < 10)
        buf[len++] = in++;
    for (int k = 0; len > 0; k++) {
        uint64_t i = ref_splitmix(&st) % len;
        wl += (size_t)snprintf(want + wl, sizeof want - wl, "%s%llu", k ? "," : "", (unsigned long long)buf[i]);
        if (in < 50)
            buf[i] = in++;
        else
            buf[i] = buf[--len];
    }
    snprintf(want + wl, sizeof want - wl, "]");
    ck_assert_str_eq(e0, want);

    /* a permutation: every record once */
    int seen[50] = {0};
    for (const char *q = e1 + 1; *q != '\0' && *q != ']';) {
        char *end;
        unsigned long v = strtoul(q, &end, 10);
        ck_assert_uint_lt(v, 50);
        seen[v]++;
        q = *end == ',' ? end + 1 : end;
    }
    for (int i = 0; i < 50; i++)
        ck_assert_int_eq(seen[i], 1);

    c.reshuffle_each_epoch = 0;
    t = plan_text(&c, 0, 0);
    ck_assert_str_eq(strchr(t, ' ') + 1, e0); /* same order every epoch */
    ck_assert_int_eq(strncmp(t, e0, strlen(e0)), 0);
    c.seed = 43;
    ck_assert_int_ne(strncmp(plan_text(&c, 0, 0), e0, strlen(e0)), 0);

    /* the seed is the job's, not the worker's: under OFF both workers
     * shuffle the stream alike (sizes [1,1] keep the order visible) */
    c = make_cfg(n50, 1, 2, 2, 1, FEED_SHARD_OFF);
    c.shuffle_buffer = 7;
    c.seed = 5;
    char w0[1024];
    snprintf(w0, sizeof w0, "%s", plan_text(&c, 0, 0));
    ck_assert_str_eq(plan_text(&c, 1, 0), w0);
    c.shuffle_buffer = 0;
    ck_assert_int_eq(strncmp(plan_text(&c, 0, 0), "[0] [1] [2] [3]", 15), 0);
}
END_TEST

/* ---- padding, epochs, seq ---------------------------------------------- */

START_TEST(test_padding_pieces)
{
    uint64_t two[] = {5, 1};
    struct feed_plan_config c = make_cfg(two, 2, 2, 2, 1, FEED_SHARD_FILE);
    ck_assert_str_eq(plan_text(&c, 0, 1), "[0:0] [0:1] [0:2] [0:3] [0:4]");
    ck_assert_str_eq(plan_text(&c, 1, 1), "[1:0] [] [] [] []");
    ck_assert_uint_eq(summary(&c, 1).pieces, 1);
    ck_assert_uint_eq(summary(&c, 1).steps, 5);
    struct feed_plan *p;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_plan_create(&p, &c, 1, &err), 0);
    struct feed_piece pc;
    for (uint64_t k = 0; k < 5; k++) {
        ck_assert_int_eq(feed_plan_next(p, &pc, &err), 0);
        ck_assert_uint_eq(pc.worker, 1);
        ck_assert_uint_eq(pc.replica, 0);
        ck_assert_uint_eq(pc.step, k);
        ck_assert_uint_eq(pc.seq, k);
        ck_assert_uint_eq(pc.epoch, 0);
        ck_assert_uint_eq(pc.n, k == 0 ? 1 : 0);
    }
    ck_assert_int_eq(feed_plan_next(p, &pc, &err), SL_END);
    ck_assert_int_eq(feed_plan_next(p, &pc, &err), SL_END);
    feed_plan_destroy(p);
}
END_TEST

START_TEST(test_epochs_and_seq)
{
    uint64_t five[] = {5};
    struct feed_plan_config c = make_cfg(five, 1, 2, 1, 2, FEED_SHARD_OFF);
    c.epochs = 3; /* 5 pieces of 1 -> 3 steps -> 6 pieces per epoch */
    struct feed_plan *p;
    struct sl_error err = {0};
    ck_assert_int_eq(feed_plan_create(&p, &c, 0, &err), 0);
    struct feed_piece pc;
    const struct feed_elem *first = NULL;
    for (uint64_t s = 0; s < 18; s++) {
        ck_assert_int_eq(feed_plan_next(p, &pc, &err), 0);
        ck_assert_uint_eq(pc.seq, s);
        ck_assert_uint_eq(pc.epoch, s / 6);
        ck_assert_uint_eq(pc.step, (s % 6) / 2);
        ck_assert_uint_eq(pc.replica, s % 2);
        ck_assert_uint_eq(pc.n, s % 6 == 5 ? 0 : 1);
        if (pc.n)
            ck_assert_uint_eq(pc.elems[0].record, s % 6);
        if (first == NULL)
            first = pc.elems;
        ck_assert_ptr_eq(pc.elems, first); /* the piece array is reused */
    }
    ck_assert_int_eq(feed_plan_next(p, &pc, &err), SL_END);
    feed_plan_destroy(p);

    /* a piece never spans epochs: each epoch re-chunks afresh */
    c = make_cfg(five, 1, 4, 1, 2, FEED_SHARD_OFF);
    c.epochs = 2;
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1] [2,3] [4] [] [0,1] [2,3] [4] []");
    c.drop_remainder = 1;
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1] [2,3] [0,1] [2,3]");

    /* forever */
    c = make_cfg(five, 1, 2, 1, 2, FEED_SHARD_OFF);
    c.epochs = 0;
    ck_assert_int_eq(feed_plan_create(&p, &c, 0, &err), 0);
    for (uint64_t s = 0; s < 600; s++) {
        ck_assert_int_eq(feed_plan_next(p, &pc, &err), 0);
        ck_assert_uint_eq(pc.seq, s);
        ck_assert_uint_eq(pc.epoch, s / 6);
    }
    feed_plan_destroy(p);
}
END_TEST

START_TEST(test_drop_remainder)
{
    uint64_t ten[] = {10}, eight[] = {8};
    struct feed_plan_config c = make_cfg(ten, 1, 4, 1, 2, FEED_SHARD_OFF);
    c.drop_remainder = 1;
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1] [2,3] [4,5] [6,7]");
    ck_assert_uint_eq(summary(&c, 0).elements, 8);
    c = make_cfg(ten, 1, 4, 1, 3, FEED_SHARD_DATA);
    c.drop_remainder = 1;
    ck_assert_str_eq(plan_text(&c, 0, 0), "[0,1] [2,3] [] [4,5] [6,7] []");
    /* a single worker with drop_remainder and G % N == 0 never sees empties */
    c = make_cfg(ten, 1, 4, 1, 2, FEED_SHARD_FILE);
    c.drop_remainder = 1;
    c.shuffle_buffer = 4;
    const char *t = plan_text(&c, 0, 0);
    ck_assert_ptr_null(strstr(t, "[]"));
    c.counts = eight;
    c.drop_remainder = 0;
    ck_assert_ptr_null(strstr(plan_text(&c, 0, 0), "[]"));
}
END_TEST

/* ---- exactly once ----------------------------------------------------- */

/* Deliver epoch `e` of every worker; count each element; compare with the
 * summaries. Returns the number of elements delivered. */
static uint64_t deliver(const struct feed_plan_config *cfg, uint64_t e, int *seen, size_t nseen)
{
    const uint64_t *counts = cfg->counts;
    uint64_t total = 0;
    for (uint32_t w = 0; w < cfg->workers; w++) {
        struct feed_plan *p;
        struct sl_error err = {0};
        ck_assert_msg(feed_plan_create(&p, cfg, w, &err) == 0, "%s", err.msg);
        struct feed_plan_summary s = summary(cfg, w);
        uint64_t rep[64] = {0}, mine = 0, n = 0;
        struct feed_piece pc;
        while (feed_plan_next(p, &pc, &err) == 0 && pc.epoch <= e) {
            n++;
            if (pc.epoch != e)
                continue;
            rep[pc.replica] += pc.n;
            for (size_t i = 0; i < pc.n; i++) {
                size_t at = pc.elems[i].record;
                for (uint32_t f = 0; f < pc.elems[i].file; f++)
                    at += counts[f];
                ck_assert_uint_lt(at, nseen);
                seen[at]++;
            }
            mine += pc.n;
        }
        ck_assert_uint_eq(n, (e + 1) * s.steps * cfg->replicas);
        ck_assert_uint_eq(mine, s.elements);
        for (uint32_t r = 0; r < cfg->replicas; r++)
            ck_assert_uint_eq(rep[r], s.replica_elements[r]);
        total += mine;
        feed_plan_destroy(p);
    }
    return total;
}

START_TEST(test_exactly_once)
{
    uint64_t counts[] = {7, 0, 13, 5, 9, 1};
    int seen[35];
    struct {
        enum feed_policy pol;
        enum feed_hint hint;
        int source_is_files, per_replica;
        enum feed_pr_shard prs;
        int copies; /* times each element comes per epoch */
    } kinds[] = {
        {FEED_SHARD_FILE, 0, 1, 0, 0, 1},
        {FEED_SHARD_AUTO, 0, 1, 0, 0, 1},
        {FEED_SHARD_DATA, 0, 1, 0, 0, 1},
        {FEED_SHARD_AUTO, 0, 0, 0, 0, 1},
        {FEED_SHARD_HINT, FEED_HINT_FILES, 1, 0, 0, 1},
        {FEED_SHARD_HINT, FEED_HINT_RECORDS, 1, 0, 0, 1},
        {FEED_SHARD_HINT, FEED_HINT_BATCHES, 1, 0, 0, 1},
        {FEED_SHARD_AUTO, 0, 1, 1, FEED_PR_SHARD_FILES, 1},
        {FEED_SHARD_AUTO, 0, 1, 1, FEED_PR_SHARD_RECORDS, 1},
        {FEED_SHARD_OFF, 0, 1, 0, 0, -1},
        {FEED_SHARD_AUTO, 0, 1, 1, FEED_PR_SHARD_NONE, -1},
    };
    uint64_t gs[] = {1, 3, 5, 8, 11};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (uint32_t W = 1; W <= 3; W++)
            for (uint32_t R = 1; R <= 3; R++)
                for (size_t g = 0; g < 5; g++) {
                    struct feed_plan_config c = make_cfg(counts, 6, gs[g], W, R, kinds[k].pol);
                    c.hint = kinds[k].hint;
                    c.source_is_files = kinds[k].source_is_files;
                    c.per_replica_input = kinds[k].per_replica;
                    c.pr_shard = kinds[k].prs;
                    if (c.per_replica_input)
                        c.global_batch *= (uint64_t)W * R;
                    c.shuffle_buffer = 6;
                    c.seed = 7 + g;
                    c.parallel_reads = 2;
                    c.epochs = 2;
                    int copies = kinds[k].copies < 0 ? (int)W : kinds[k].copies;
                    memset(seen, 0, sizeof seen);
                    uint64_t total = deliver(&c, 1, seen, 35);
                    for (int i = 0; i < 35; i++)
                        ck_assert_msg(seen[i] == copies, "kind %zu W=%u R=%u G=%llu: element %d seen %d times", k, W, R,
                                      (unsigned long long)c.global_batch, i, seen[i]);
                    ck_assert_uint_eq(total, 35u * (unsigned)copies);
                    /* drop_remainder: at most once, exactly the summaries */
                    c.drop_remainder = 1;
                    memset(seen, 0, sizeof seen);
                    total = deliver(&c, 0, seen, 35);
                    uint64_t sum = 0;
                    for (int i = 0; i < 35; i++) {
                        ck_assert_int_le(seen[i], copies);
                        sum += (uint64_t)seen[i];
                    }
                    ck_assert_uint_eq(sum, total);
                }
}
END_TEST

/* ---- helpers, worker files, allocation --------------------------------- */

START_TEST(test_names_and_parse)
{
    enum feed_policy p;
    enum feed_hint h;
    enum feed_pr_shard s;
    const char *pols[] = {"auto", "off", "file", "data", "hint"};
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(feed_policy_parse(pols[i], &p), 0);
        ck_assert_int_eq(p, i);
        ck_assert_str_eq(feed_policy_name(p), pols[i]);
    }
    const char *hints[] = {"files", "records", "batches"};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(feed_hint_parse(hints[i], &h), 0);
        ck_assert_int_eq(h, i);
        ck_assert_str_eq(feed_hint_name(h), hints[i]);
    }
    ck_assert_int_eq(feed_pr_shard_parse("none", &s), 0);
    ck_assert_int_eq(s, FEED_PR_SHARD_NONE);
    ck_assert_int_eq(feed_pr_shard_parse("files", &s), 0);
    ck_assert_int_eq(s, FEED_PR_SHARD_FILES);
    ck_assert_int_eq(feed_pr_shard_parse("records", &s), 0);
    ck_assert_int_eq(s, FEED_PR_SHARD_RECORDS);
    ck_assert_int_eq(feed_policy_parse("FILE", &p), SL_EINVAL);
    ck_assert_int_eq(feed_policy_parse("", &p), SL_EINVAL);
    ck_assert_int_eq(feed_policy_parse(NULL, &p), SL_EINVAL);
    ck_assert_int_eq(feed_hint_parse("batch", &h), SL_EINVAL);
    ck_assert_int_eq(feed_pr_shard_parse("data", &s), SL_EINVAL);
    ck_assert_str_eq(feed_policy_name((enum feed_policy)17), "?");
}
END_TEST

START_TEST(test_worker_files)
{
    uint64_t c7[] = {1, 1, 1, 1, 1, 1, 1};
    uint32_t out[8];
    struct feed_plan_config c = make_cfg(c7, 7, 4, 3, 1, FEED_SHARD_FILE);
    ck_assert_uint_eq(feed_plan_worker_files(&c, 1, out, 8), 2);
    ck_assert_uint_eq(out[0], 1);
    ck_assert_uint_eq(out[1], 4);
    ck_assert_uint_eq(feed_plan_worker_files(&c, 0, out, 1), 3); /* the count, even past cap */
    ck_assert_uint_eq(out[0], 0);
    ck_assert_uint_eq(feed_plan_worker_files(&c, 0, NULL, 0), 3);
    ck_assert_uint_eq(feed_plan_worker_files(&c, 3, out, 8), 0);
    c.policy = FEED_SHARD_DATA;
    ck_assert_uint_eq(feed_plan_worker_files(&c, 2, out, 8), 7);
    ck_assert_uint_eq(out[6], 6);
    c.policy = FEED_SHARD_HINT;
    c.hint = FEED_HINT_RECORDS;
    ck_assert_uint_eq(feed_plan_worker_files(&c, 2, out, 8), 7);
    c.hint = FEED_HINT_FILES;
    ck_assert_uint_eq(feed_plan_worker_files(&c, 2, out, 8), 2);
    c.per_replica_input = 1;
    c.pr_shard = FEED_PR_SHARD_NONE;
    ck_assert_uint_eq(feed_plan_worker_files(&c, 2, out, 8), 7);
    c.pr_shard = FEED_PR_SHARD_FILES;
    ck_assert_uint_eq(feed_plan_worker_files(&c, 2, out, 8), 2);
    ck_assert_uint_eq(out[1], 5);
}
END_TEST

START_TEST(test_allocation_failures)
{
    uint64_t counts[] = {40, 3, 9};
    struct feed_plan_config c = make_cfg(counts, 3, 5, 2, 2, FEED_SHARD_OFF);
    c.shuffle_buffer = 16;
    c.parallel_reads = 2;
    const char *want = plan_text(&c, 1, 1);
    int failed = 0, passed = 0;
    for (long n = 1; n <= 8; n++) {
        struct feed_plan *p;
        struct sl_error err = {0};
        sl_alloc_fail_after(n);
        int rc = feed_plan_create(&p, &c, 1, &err);
        sl_alloc_fail_reset();
        if (rc == SL_ENOMEM) {
            ck_assert_ptr_null(p);
            failed++;
            continue;
        }
        ck_assert_int_eq(rc, 0);
        passed++;
        feed_plan_destroy(p);
    }
    ck_assert_int_gt(failed, 0);
    ck_assert_int_gt(passed, 0);
    ck_assert_str_eq(plan_text(&c, 1, 1), want);
    feed_plan_destroy(NULL);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("feed_plan");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_stream_split_last_batch_of_6);
    tcase_add_test(tc, test_g7_w2_r2_sizes);
    tcase_add_test(tc, test_sizes_g3_n4_zero_wants);
    tcase_add_test(tc, test_legacy_split);
    tcase_add_test(tc, test_mwms_data_range9_batch2);
    tcase_add_test(tc, test_worked_examples_5_8);
    tcase_add_test(tc, test_seek_matches_iteration);
    tcase_add_test(tc, test_seek_fast_forward_matrix);
    tcase_add_test(tc, test_seek_fast_forward_long_files);
    tcase_add_test(tc, test_seek_far_epoch);
    tcase_add_test(tc, test_file_sharding_errors);
    tcase_add_test(tc, test_per_replica_errors_and_validation);
    tcase_add_test(tc, test_hint_sharding);
    tcase_add_test(tc, test_per_replica_input);
    tcase_add_test(tc, test_interleave_order);
    tcase_add_test(tc, test_shuffle);
    tcase_add_test(tc, test_padding_pieces);
    tcase_add_test(tc, test_epochs_and_seq);
    tcase_add_test(tc, test_drop_remainder);
    tcase_add_test(tc, test_exactly_once);
    tcase_add_test(tc, test_names_and_parse);
    tcase_add_test(tc, test_worker_files);
    tcase_add_test(tc, test_allocation_failures);
    suite_add_tcase(s, tc);
    return s;
}
