/* train_elastic: the coordinator's messages (every type round trip, and
 * hostile frames: truncated, lengths past the frame or the limits, bad
 * fields) and worker 0's book (each refusal's exact text, repeated joins
 * and leaves, the next world's ranks and endpoints; a broken ring's
 * reports and the survivors' world). The processes are
 * tests/integration/test_elastic.py's and test_elastic_crash.py's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_bytes.h"
#include "sl_test.h"
#include "train_elastic.h"

static unsigned char frame[TRAIN_ELASTIC_MAX_FRAME + 64];

static struct train_elastic_msg join_msg(const char *job, const char *config, const char *ep, uint32_t replicas)
{
    return (struct train_elastic_msg){.type = TRAIN_ELASTIC_JOIN,
                                      .a = replicas,
                                      .s = {job, config, ep},
                                      .n = {(uint32_t)strlen(job), (uint32_t)strlen(config), (uint32_t)strlen(ep)}};
}

START_TEST(test_round_trip)
{
    struct train_elastic_msg in[] = {
        join_msg("job", "model=softmax", "ipc:///tmp/r2", 2),
        {.type = TRAIN_ELASTIC_LEAVE, .gen = 3, .a = 5},
        {.type = TRAIN_ELASTIC_ACK, .c = 7, .s = {"wait"}, .n = {4}},
        {.type = TRAIN_ELASTIC_REFUSE, .s = {"no"}, .n = {2}},
        {.type = TRAIN_ELASTIC_SYNC, .gen = 1, .a = 1},
        {.type = TRAIN_ELASTIC_BROKEN, .gen = 2, .a = 3, .c = 1, .d = 41, .f = 11},
        {.type = TRAIN_ELASTIC_WORLD, .gen = 2, .a = 1, .b = 2, .c = 4, .d = 120, .e = 170, .s = {"a,b"}, .n = {3}},
        {.type = TRAIN_ELASTIC_WORLD, .a = TRAIN_ELASTIC_RELEASED, .b = 1, .s = {"a"}, .n = {1}},
        {.type = TRAIN_ELASTIC_WORLD,
         .a = 2,
         .b = 3,
         .c = 1,
         .d = 37,
         .e = 170,
         .f = 7,
         .h = 30,
         .g = 2,
         .s = {"a,b,c"},
         .n = {5}},
        {.type = TRAIN_ELASTIC_WORLD,
         .a = 1,
         .b = 3,
         .c = 2,
         .d = 61,
         .e = 170,
         .h = 30,
         .g = 2,
         .i = 1,
         .j = 7,
         .k = 69,
         .s = {"a,b,c"},
         .n = {5}},
    };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        size_t n = train_elastic_encode(frame, sizeof frame, &in[i]);
        ck_assert_msg(n >= TRAIN_ELASTIC_HDR, "message %zu not encoded", i);
        struct train_elastic_msg m;
        const char *bad = train_elastic_decode(frame, n, &m);
        ck_assert_msg(bad == NULL, "message %zu: %s", i, bad);
        ck_assert_uint_eq(m.type, in[i].type);
        ck_assert_uint_eq(m.gen, in[i].gen);
        ck_assert_uint_eq(m.a, in[i].a);
        ck_assert_uint_eq(m.b, in[i].b);
        ck_assert_uint_eq(m.c, in[i].c);
        ck_assert_uint_eq(m.d, in[i].d);
        ck_assert_uint_eq(m.e, in[i].e);
        ck_assert_uint_eq(m.f, in[i].f);
        ck_assert_uint_eq(m.h, in[i].h);
        ck_assert_uint_eq(m.g, in[i].g);
        ck_assert_uint_eq(m.i, in[i].i);
        ck_assert_uint_eq(m.j, in[i].j);
        ck_assert_uint_eq(m.k, in[i].k);
        for (int k = 0; k < 3; k++) {
            ck_assert_uint_eq(m.n[k], in[i].n[k]);
            ck_assert(m.n[k] == 0 || memcmp(m.s[k], in[i].s[k], m.n[k]) == 0);
        }
        /* every truncation is refused, none read past the frame */
        for (size_t cut = 0; cut < n; cut++)
            ck_assert_msg(train_elastic_decode(frame, cut, &m) != NULL, "message %zu cut at %zu accepted", i, cut);
    }
}
END_TEST

/* A header with the given fields, then `extra` payload bytes. */
static size_t raw(uint16_t version, uint16_t type, uint32_t a, uint32_t b, uint64_t e, uint32_t n1, uint32_t n2,
                  uint32_t n3, size_t extra)
{
    memset(frame, 'x', sizeof frame);
    memcpy(frame, "SLE1", 4);
    sl_store_le16(frame + 4, version);
    sl_store_le16(frame + 6, type);
    sl_store_le32(frame + 8, 0);
    sl_store_le32(frame + 12, a);
    sl_store_le32(frame + 16, b);
    sl_store_le64(frame + 20, 0);
    sl_store_le64(frame + 28, 0);
    sl_store_le64(frame + 36, e);
    sl_store_le32(frame + 44, n1);
    sl_store_le32(frame + 48, n2);
    sl_store_le32(frame + 52, n3);
    memset(frame + 56, 0, TRAIN_ELASTIC_HDR - 56); /* f, h, g, i, j, k */
    return TRAIN_ELASTIC_HDR + extra;
}

static void refused(size_t n, const char *why)
{
    struct train_elastic_msg m;
    const char *bad = train_elastic_decode(frame, n, &m);
    ck_assert_msg(bad != NULL && strcmp(bad, why) == 0, "got %s, want %s", bad ? bad : "(accepted)", why);
}

START_TEST(test_hostile_frames)
{
    refused(0, "short header");
    refused(raw(2, 1, 1, 0, 0, 3, 0, 2, 5) - 1, "string lengths differ from the frame");
    size_t n = raw(2, 1, 1, 0, 0, 3, 0, 2, 5);
    frame[0] = 'X';
    refused(n, "bad magic");
    refused(raw(3, 1, 1, 0, 0, 3, 0, 2, 5), "unsupported version");
    refused(raw(1, 1, 1, 0, 0, 3, 0, 2, 5), "unsupported version"); /* stage A's layout */
    refused(raw(2, 0, 0, 0, 0, 0, 0, 0, 0), "unknown message type");
    refused(raw(2, 8, 0, 0, 0, 0, 0, 0, 0), "unknown message type");
    refused(raw(2, 0xffff, 0, 0, 0, 0, 0, 0, 0), "unknown message type");
    /* huge lengths: refused by the limits before the frame is looked at */
    refused(raw(2, 1, 1, 0, 0, UINT32_MAX, 0, 2, 5), "a string longer than its limit");
    refused(raw(2, 1, 1, 0, 0, 3, UINT32_MAX, 2, 5), "a string longer than its limit");
    refused(raw(2, 1, 1, 0, 0, 3, 0, UINT32_MAX, 5), "a string longer than its limit");
    refused(raw(2, 6, 0, 1, 1, UINT32_MAX, 0, 0, 0), "a string longer than its limit");
    refused(raw(2, 2, 1, 0, 0, 1, 0, 0, 1), "a string longer than its limit"); /* LEAVE has no strings */
    /* lengths that add past the frame, or leave bytes over */
    refused(raw(2, 1, 1, 0, 0, 256, 1024, 256, 100), "string lengths differ from the frame");
    refused(raw(2, 5, 1, 0, 0, 0, 0, 0, 1), "string lengths differ from the frame");
    /* fields */
    refused(raw(2, 1, 0, 0, 0, 3, 0, 2, 5), "JOIN: replicas out of range");
    refused(raw(2, 1, 1025, 0, 0, 3, 0, 2, 5), "JOIN: replicas out of range");
    refused(raw(2, 1, 1, 0, 0, 3, 0, 0, 3), "JOIN: empty job or endpoint");
    n = raw(2, 1, 1, 0, 0, 3, 0, 3, 6);
    frame[TRAIN_ELASTIC_HDR + 4] = ',';
    refused(n, "JOIN: a comma or NUL in the endpoint");
    frame[TRAIN_ELASTIC_HDR + 4] = '\0';
    refused(n, "JOIN: a comma or NUL in the endpoint");
    refused(raw(2, 2, 0, 0, 0, 0, 0, 0, 0), "rank out of range");
    refused(raw(2, 5, TRAIN_ELASTIC_MAX_WORKERS, 0, 0, 0, 0, 0, 0), "rank out of range");
    refused(raw(2, 4, 0, 0, 0, 0, 0, 0, 0), "REFUSE without a reason");
    refused(raw(2, 6, 0, 0, 1, 1, 0, 0, 1), "WORLD: size out of range");
    refused(raw(2, 6, 0, TRAIN_ELASTIC_MAX_WORKERS + 1, 1, 1, 0, 0, 1), "WORLD: size out of range");
    refused(raw(2, 6, 2, 2, 1, 1, 0, 0, 1), "WORLD: rank outside the world");
    refused(raw(2, 6, 1, 2, 0, 1, 0, 0, 1), "WORLD: no parameters");
    refused(raw(2, 6, 1, 2, UINT64_MAX, 1, 0, 0, 1), "WORLD: epoch, step or parameter count out of range");
    /* a mid-epoch WORLD: the step inside the old world's epoch, an old world */
    struct train_elastic_msg wm = {.type = TRAIN_ELASTIC_WORLD, .a = 0, .b = 2, .e = 5, .f = 30, .h = 30, .g = 2};
    static const struct {
        uint64_t f, h;
        uint32_t g;
    } bad_mid[] = {{30, 30, 2},
                   {31, 30, 2},
                   {1, 0, 2},
                   {1, 30, 0},
                   {1, 30, TRAIN_ELASTIC_MAX_WORKERS + 1},
                   {1, (UINT64_C(1) << 48) + 1, 2},
                   {UINT64_MAX, UINT64_MAX, 2}};
    for (size_t i = 0; i < sizeof bad_mid / sizeof bad_mid[0]; i++) {
        wm.f = bad_mid[i].f;
        wm.h = bad_mid[i].h;
        wm.g = bad_mid[i].g;
        ck_assert_uint_eq(train_elastic_encode(frame, sizeof frame, &wm), 0);
        n = raw(2, 6, 0, 2, 5, 0, 0, 0, 0);
        sl_store_le64(frame + 56, wm.f);
        sl_store_le64(frame + 64, wm.h);
        sl_store_le32(frame + 72, wm.g);
        refused(n, "WORLD: a mid-epoch step outside the old world's epoch, or no old world");
    }
    /* a kept change: before the epoch, its step inside its old epoch, both
     * kinds at once refused */
    static const struct {
        uint64_t f, h, i, j, k;
        uint32_t g;
        const char *why;
    } bad_kept[] = {
        {0, 30, 2, 7, 9, 2, "WORLD: a kept change not before the epoch, or out of range"},
        {0, 7, 1, 7, 9, 2, "WORLD: a kept change not before the epoch, or out of range"},
        {0, 30, 1, 7, 9, 0, "WORLD: a kept change not before the epoch, or out of range"},
        {0, 30, 1, 7, UINT64_MAX, 2, "WORLD: a kept change not before the epoch, or out of range"},
        {3, 30, 1, 7, 9, 2, "WORLD: a mid-epoch change and a kept one"},
        {3, 30, 0, 0, 9, 2, "WORLD: a mid-epoch change and a kept one"},
    };
    for (size_t i = 0; i < sizeof bad_kept / sizeof bad_kept[0]; i++) {
        wm = (struct train_elastic_msg){.type = TRAIN_ELASTIC_WORLD,
                                        .b = 2,
                                        .c = 2,
                                        .e = 5,
                                        .f = bad_kept[i].f,
                                        .h = bad_kept[i].h,
                                        .g = bad_kept[i].g,
                                        .i = bad_kept[i].i,
                                        .j = bad_kept[i].j,
                                        .k = bad_kept[i].k};
        ck_assert_uint_eq(train_elastic_encode(frame, sizeof frame, &wm), 0);
        n = raw(2, 6, 0, 2, 5, 0, 0, 0, 0);
        sl_store_le64(frame + 20, wm.c);
        sl_store_le64(frame + 56, wm.f);
        sl_store_le64(frame + 64, wm.h);
        sl_store_le32(frame + 72, wm.g);
        sl_store_le64(frame + 76, wm.i);
        sl_store_le64(frame + 84, wm.j);
        sl_store_le64(frame + 92, wm.k);
        refused(n, bad_kept[i].why);
    }
    /* the encoder refuses what the decoder would */
    struct train_elastic_msg m = join_msg("job", "c", "a,b", 1);
    ck_assert_uint_eq(train_elastic_encode(frame, sizeof frame, &m), 0);
    m = join_msg("job", "c", "ep", 1);
    ck_assert_uint_eq(train_elastic_encode(frame, TRAIN_ELASTIC_HDR, &m), 0); /* no room */
    m.n[0] = TRAIN_ELASTIC_MAX_JOB + 1;
    ck_assert_uint_eq(train_elastic_encode(frame, sizeof frame, &m), 0);
}
END_TEST

static void book(struct train_elastic_coord *c, uint32_t size, uint32_t max, uint64_t epochs)
{
    static const char *const eps[] = {"ipc://r0", "ipc://r1", "ipc://r2", "ipc://r3"};
    memset(c, 0, sizeof *c);
    c->job = "job";
    c->config = "model=softmax";
    c->endpoint = "ipc://coord";
    c->replicas = 1;
    c->max_workers = max;
    c->epochs = epochs;
    struct sl_error err = {0};
    ck_assert_int_eq(train_elastic_coord_init(c, eps, size, &err), 0);
}

static void join_refused(struct train_elastic_coord *c, struct train_elastic_msg m, uint64_t epoch, const char *text)
{
    struct sl_error err = {0};
    ck_assert_int_eq(train_elastic_coord_join(c, &m, "id", 2, epoch, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg, text);
}

/* BROKEN's frame: no strings, a rank 1 .. 4095, epoch and steps of at
 * most 2^48 */
START_TEST(test_broken_frames)
{
    refused(raw(2, 7, 0, 0, 0, 0, 0, 0, 0), "rank out of range"); /* rank 0: the coordinator */
    refused(raw(2, 7, 4096, 0, 0, 0, 0, 0, 0), "rank out of range");
    refused(raw(2, 7, UINT32_MAX, 0, 0, 0, 0, 0, 0), "rank out of range");
    refused(raw(2, 7, 1, 0, 0, 1, 0, 0, 1), "a string longer than its limit"); /* BROKEN has no strings */
    refused(raw(2, 7, 1, 0, 0, 0, 0, 5, 5), "a string longer than its limit");
    refused(raw(2, 7, 1, 0, 0, 0, 0, 0, 1), "string lengths differ from the frame"); /* a byte over */
    refused(raw(2, 7, 1, 0, 0, 0, 0, 0, 0) - 1, "short header");
    size_t n = raw(2, 7, 1, 0, 0, 0, 0, 0, 0);
    sl_store_le64(frame + 28, (UINT64_C(1) << 48) + 1); /* d: the steps it trained */
    refused(n, "BROKEN: epoch or step out of range");
    n = raw(2, 7, 1, 0, 0, 0, 0, 0, 0);
    sl_store_le64(frame + 20, UINT64_MAX); /* c: the epoch */
    refused(n, "BROKEN: epoch or step out of range");
    n = raw(2, 7, 1, 0, 0, 0, 0, 0, 0);
    sl_store_le64(frame + 56, UINT64_C(1) << 60); /* f: the step */
    refused(n, "BROKEN: epoch or step out of range");
    n = raw(2, 7, 4095, 0, 0, 0, 0, 0, 0);
    sl_store_le64(frame + 28, UINT64_C(1) << 48);
    struct train_elastic_msg m;
    ck_assert_ptr_null(train_elastic_decode(frame, n, &m));
    ck_assert_uint_eq(m.a, 4095);
    ck_assert_uint_eq(m.d, UINT64_C(1) << 48);
    /* encode refuses what decode would */
    struct train_elastic_msg b = {.type = TRAIN_ELASTIC_BROKEN, .a = 0};
    ck_assert_uint_eq(train_elastic_encode(frame, sizeof frame, &b), 0);
    b = (struct train_elastic_msg){.type = TRAIN_ELASTIC_BROKEN, .a = 1, .s = {"x"}, .n = {1}};
    ck_assert_uint_eq(train_elastic_encode(frame, sizeof frame, &b), 0);
}
END_TEST

static void broken_refused(struct train_elastic_coord *c, struct train_elastic_msg m, const char *text)
{
    struct sl_error err = {0};
    uint32_t before = train_elastic_coord_survivors(c);
    ck_assert_int_eq(train_elastic_coord_broken(c, &m, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg, text);
    ck_assert_uint_eq(train_elastic_coord_survivors(c), before);
}

/* A broken ring: the reports (hostile ones refused with the book
 * unchanged), the survivors' world (rank order, worker 0 first, the
 * joiners waiting, a survivor's leave kept) and its commit. */
START_TEST(test_book_broken)
{
    struct train_elastic_coord c;
    book(&c, 4, 8, 3);
    struct sl_error err = {0};
    ck_assert_uint_eq(train_elastic_coord_survivors(&c), 1); /* worker 0 alone until reports come */
    struct train_elastic_msg m = {.type = TRAIN_ELASTIC_BROKEN, .a = 0, .c = 0, .d = 9, .f = 9};
    broken_refused(&c, m, "elastic: a BROKEN from rank 0, which is the coordinator's own");
    m.a = 4;
    broken_refused(&c, m, "elastic: a BROKEN from rank 4, but the world has 4 workers");
    m.a = UINT32_MAX;
    broken_refused(&c, m, "elastic: a BROKEN from rank 4294967295, but the world has 4 workers");
    m.a = 1;
    m.gen = 1;
    broken_refused(&c, m, "elastic: a BROKEN from rank 1 of world 1, but the world is 0 now");
    m.gen = 0;
    ck_assert_int_eq(train_elastic_coord_broken(&c, &m, &err), 0);
    ck_assert_int_eq(train_elastic_coord_broken(&c, &m, &err), 0); /* the same report again: one survivor */
    ck_assert_uint_eq(train_elastic_coord_survivors(&c), 2);
    m.d = 10;
    broken_refused(&c, m, "elastic: worker 1 reported the broken ring twice, after global step 9 and then 10");
    ck_assert_uint_eq(c.broken_at[1], 9);
    m.a = 3;
    m.d = 8; /* behind worker 0: it gets worker 0's state */
    ck_assert_int_eq(train_elastic_coord_broken(&c, &m, &err), 0);
    ck_assert_uint_eq(train_elastic_coord_survivors(&c), 3);
    /* a join and a leave meanwhile: the joiner waits, the leave stays asked */
    struct train_elastic_msg j = join_msg("job", "model=softmax", "ipc://j", 1);
    ck_assert_int_eq(train_elastic_coord_join(&c, &j, "id", 2, 0, &err), 0);
    struct train_elastic_msg l = {.type = TRAIN_ELASTIC_LEAVE, .a = 3};
    ck_assert_int_eq(train_elastic_coord_leave(&c, &l, &err), 0);
    /* worker 2 never reported: dead */
    uint32_t rank[4], size = 0;
    char list[64];
    uint64_t left = 0;
    ck_assert_int_eq(train_elastic_survive_defer(&c, 0, 9, 30, 3, 0, 8, &left), TRAIN_ELASTIC_NOW);
    ck_assert_int_eq(train_elastic_survive_defer(&c, 0, 9, 30, 3, 1, 8, &left), TRAIN_ELASTIC_SECOND);
    ck_assert_int_eq(train_elastic_survive_defer(&c, 1, 0, 30, 3, 1, 8, &left), TRAIN_ELASTIC_NOW); /* by epoch */
    ck_assert_int_eq(train_elastic_survive_defer(&c, 2, 22, 30, 3, 0, 8, &left), TRAIN_ELASTIC_WINDOW);
    ck_assert_uint_eq(left, 8);
    ck_assert_int_eq(train_elastic_coord_survive_next(&c, rank, &size, list, sizeof list, &err), 0);
    ck_assert_uint_eq(size, 3);
    ck_assert_str_eq(list, "ipc://r0,ipc://r1,ipc://r3");
    ck_assert_uint_eq(rank[0], 0);
    ck_assert_uint_eq(rank[1], 1);
    ck_assert_uint_eq(rank[2], TRAIN_ELASTIC_RELEASED);
    ck_assert_uint_eq(rank[3], 2);
    ck_assert_int_eq(train_elastic_coord_survive_next(&c, rank, &size, list, 12, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "elastic: the new world's endpoints take more than 12 bytes");
    ck_assert_int_eq(train_elastic_coord_survive_commit(&c, &err), 0);
    ck_assert_uint_eq(c.gen, 1);
    ck_assert_uint_eq(c.size, 3);
    ck_assert_str_eq(c.eps[2], "ipc://r3");
    ck_assert_uint_eq(c.njoins, 1); /* the joiner waits for the next change */
    ck_assert(c.leaving[2] && !c.leaving[0] && !c.leaving[1]);
    ck_assert_uint_eq(train_elastic_coord_survivors(&c), 1); /* the reports forgotten */
    ck_assert(train_elastic_coord_pending(&c));
    /* a late report of the old world, and one of the new */
    m.a = 2;
    m.gen = 0;
    broken_refused(&c, m, "elastic: a BROKEN from rank 2 of world 0, but the world is 1 now");
    m.gen = 1;
    ck_assert_int_eq(train_elastic_coord_broken(&c, &m, &err), 0);
    /* every member reported (none died): mid-epoch the size would stay */
    m.a = 1;
    ck_assert_int_eq(train_elastic_coord_broken(&c, &m, &err), 0);
    ck_assert_uint_eq(train_elastic_coord_survivors(&c), 3);
    ck_assert_int_eq(train_elastic_survive_defer(&c, 1, 4, 30, 3, 0, 8, &left), TRAIN_ELASTIC_SAME_SIZE);
    ck_assert_int_eq(train_elastic_survive_defer(&c, 1, 0, 30, 3, 0, 8, &left), TRAIN_ELASTIC_NOW);
    /* a regular change after: the joiner comes in, the leaver goes, the reports forgotten */
    uint32_t rank2[3];
    ck_assert_int_eq(train_elastic_coord_next(&c, rank2, &size, list, sizeof list, &err), 0);
    ck_assert_str_eq(list, "ipc://r0,ipc://r1,ipc://j");
    ck_assert_int_eq(train_elastic_coord_commit(&c, &err), 0);
    ck_assert_uint_eq(c.size, 3);
    ck_assert_uint_eq(c.njoins, 0);
    ck_assert_uint_eq(train_elastic_coord_survivors(&c), 1);
    train_elastic_coord_free(&c);
    /* worker 0 alone survives: a world of one */
    book(&c, 2, 8, 3);
    ck_assert_int_eq(train_elastic_coord_survive_next(&c, rank, &size, list, sizeof list, &err), 0);
    ck_assert_uint_eq(size, 1);
    ck_assert_str_eq(list, "ipc://r0");
    ck_assert_int_eq(train_elastic_coord_survive_commit(&c, &err), 0);
    ck_assert_uint_eq(c.size, 1);
    train_elastic_coord_free(&c);
}
END_TEST

START_TEST(test_book_refusals)
{
    struct train_elastic_coord c;
    book(&c, 2, 3, 4);
    struct sl_error err = {0};
    join_refused(&c, join_msg("other", "model=softmax", "ipc://j", 1), 0,
                 "elastic: the joining worker (ipc://j) is in job 'other', but worker 0 is in job 'job'");
    join_refused(&c, join_msg("job", "model=softmax", "ipc://j", 2), 0,
                 "elastic: the joining worker (ipc://j) has 2 replicas, but the job's workers have 1: every worker of "
                 "an elastic job has the same --replicas");
    join_refused(&c, join_msg("job", "model=mlp", "ipc://j", 1), 0,
                 "elastic: the joining worker (ipc://j) has config 'model=mlp', but worker 0 has 'model=softmax'");
    join_refused(&c, join_msg("job", "model=softmax", "ipc://j", 1), 3,
                 "elastic: the job is in its last epoch (epoch 3 of 4): no epoch boundary is left to admit the "
                 "joining worker (ipc://j) at");
    join_refused(&c, join_msg("job", "model=softmax", "ipc://r1", 1), 0,
                 "elastic: the joining worker's ring endpoint ipc://r1 is already worker 1's");
    struct train_elastic_msg j = join_msg("job", "model=softmax", "ipc://j", 1);
    ck_assert_int_eq(train_elastic_coord_join(&c, &j, "id", 2, 2, &err), 0);
    ck_assert(train_elastic_coord_pending(&c));
    /* the same JOIN again (a retry, a second process with that endpoint) */
    join_refused(&c, j, 2,
                 "elastic: a worker with ring endpoint ipc://j already asked to join: it is admitted at the next "
                 "change (a repeated JOIN)");
    join_refused(&c, join_msg("job", "model=softmax", "ipc://k", 1), 2,
                 "elastic: the joining worker (ipc://k) would make 4 workers, more than --elastic-max-workers 3");
    /* a routing id too long for the book */
    static unsigned char longid[300];
    struct train_elastic_msg k = join_msg("job", "model=softmax", "ipc://k", 1);
    c.max_workers = 10;
    ck_assert_int_eq(train_elastic_coord_join(&c, &k, longid, sizeof longid, 0, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg, "elastic: the joining worker's routing id is 300 bytes");
    /* leaves */
    struct train_elastic_msg l = {.type = TRAIN_ELASTIC_LEAVE, .a = 0};
    ck_assert_int_eq(train_elastic_coord_leave(&c, &l, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg,
                     "elastic: worker 0 cannot leave the job: it holds the coordinator endpoint (ipc://coord)");
    l.a = 2;
    ck_assert_int_eq(train_elastic_coord_leave(&c, &l, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg, "elastic: a LEAVE from rank 2, but the world has 2 workers");
    l.a = 1;
    l.gen = 1;
    ck_assert_int_eq(train_elastic_coord_leave(&c, &l, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg, "elastic: a LEAVE from rank 1 of world 1, but the world is 0 now");
    train_elastic_coord_free(&c);
    /* an unbounded job: no last epoch */
    book(&c, 1, 8, 0);
    ck_assert_int_eq(train_elastic_coord_join(&c, &j, "id", 2, UINT64_C(1) << 40, &err), 0);
    train_elastic_coord_free(&c);
}
END_TEST

START_TEST(test_book_next_world)
{
    struct train_elastic_coord c;
    book(&c, 4, 8, 0);
    struct sl_error err = {0};
    ck_assert(!train_elastic_coord_pending(&c));
    ck_assert_uint_eq(train_elastic_coord_next_size(&c), 4);
    struct train_elastic_msg l = {.type = TRAIN_ELASTIC_LEAVE, .a = 1};
    ck_assert_int_eq(train_elastic_coord_leave(&c, &l, &err), 0);
    ck_assert_int_eq(train_elastic_coord_leave(&c, &l, &err), 0); /* repeated: the same request */
    ck_assert_uint_eq(train_elastic_coord_next_size(&c), 3);
    struct train_elastic_msg j1 = join_msg("job", "model=softmax", "ipc://j1", 1),
                             j2 = join_msg("job", "model=softmax", "ipc://j2", 1);
    ck_assert_int_eq(train_elastic_coord_join(&c, &j1, "a", 1, 0, &err), 0);
    ck_assert_int_eq(train_elastic_coord_join(&c, &j2, "b", 1, 0, &err), 0);
    struct train_elastic_msg j3 = join_msg("job", "model=softmax", "ipc://j3", 1);
    ck_assert_int_eq(train_elastic_coord_join(&c, &j3, "c", 1, 0, &err), 0);
    train_elastic_coord_drop_join(&c, 0); /* j1 went away: forgotten, the others keep their order */
    train_elastic_coord_drop_join(&c, 7); /* out of range: nothing */
    ck_assert_uint_eq(c.njoins, 2);
    ck_assert_int_eq(train_elastic_coord_join(&c, &j1, "a", 1, 0, &err), 0); /* it may ask again */
    train_elastic_coord_drop_join(&c, 1);                                    /* j3 */
    ck_assert(train_elastic_coord_pending(&c));
    ck_assert_uint_eq(train_elastic_coord_next_size(&c), 5);
    uint32_t rank[4], size = 0;
    char list[256];
    ck_assert_int_eq(train_elastic_coord_next(&c, rank, &size, list, sizeof list, &err), 0);
    ck_assert_uint_eq(size, 5);
    ck_assert_uint_eq(rank[0], 0);
    ck_assert_uint_eq(rank[1], TRAIN_ELASTIC_RELEASED);
    ck_assert_uint_eq(rank[2], 1);
    ck_assert_uint_eq(rank[3], 2);
    ck_assert_str_eq(list, "ipc://r0,ipc://r2,ipc://r3,ipc://j2,ipc://j1");
    char small[20];
    ck_assert_int_eq(train_elastic_coord_next(&c, rank, &size, small, sizeof small, &err), SL_EINVAL);
    ck_assert_int_eq(train_elastic_coord_commit(&c, &err), 0);
    ck_assert_uint_eq(c.gen, 1);
    ck_assert_uint_eq(c.size, 5);
    ck_assert(!train_elastic_coord_pending(&c));
    ck_assert_str_eq(c.eps[3], "ipc://j2");
    /* the joiner that became a member cannot join again */
    join_refused(&c, j1, 0, "elastic: the joining worker's ring endpoint ipc://j1 is already worker 4's");
    train_elastic_coord_free(&c);
    /* bad books */
    memset(&c, 0, sizeof c);
    const char *const bad[] = {"a,b"};
    ck_assert_int_eq(train_elastic_coord_init(&c, bad, 1, &err), SL_EINVAL);
    ck_assert_int_eq(train_elastic_coord_init(&c, bad, 0, &err), SL_EINVAL);
    ck_assert_int_eq(train_elastic_coord_init(&c, bad, TRAIN_ELASTIC_MAX_WORKERS + 1, &err), SL_EINVAL);
}
END_TEST

/* When a waiting change may come: mid-epoch only to another size, once
 * per epoch, and not when the job's rest fits a worker's window. */
START_TEST(test_defer)
{
    struct train_elastic_coord c;
    book(&c, 2, 8, 3);
    struct sl_error err = {0};
    uint64_t left = 0;
    /* nothing waits: the size is kept */
    ck_assert_int_eq(train_elastic_defer(&c, 0, 5, 30, 3, 0, 8, &left), TRAIN_ELASTIC_SAME_SIZE);
    ck_assert_uint_eq(left, 25 + 2 * 30);
    ck_assert_int_eq(train_elastic_defer(&c, 1, 0, 30, 3, 0, 8, &left), TRAIN_ELASTIC_NOW); /* an epoch's start */
    struct train_elastic_msg j = join_msg("job", "model=softmax", "ipc://j", 1);
    ck_assert_int_eq(train_elastic_coord_join(&c, &j, "id", 2, 0, &err), 0);
    ck_assert_int_eq(train_elastic_defer(&c, 0, 1, 30, 3, 0, 8, &left), TRAIN_ELASTIC_NOW);
    ck_assert_int_eq(train_elastic_defer(&c, 0, 29, 30, 3, 1, 8, &left), TRAIN_ELASTIC_SECOND);
    ck_assert_int_eq(train_elastic_defer(&c, 1, 0, 30, 3, 1, 8, &left), TRAIN_ELASTIC_NOW);
    /* the last epoch: 9 steps left pass a window of 8, 8 do not */
    ck_assert_int_eq(train_elastic_defer(&c, 2, 21, 30, 3, 0, 8, &left), TRAIN_ELASTIC_NOW);
    ck_assert_uint_eq(left, 9);
    ck_assert_int_eq(train_elastic_defer(&c, 2, 22, 30, 3, 0, 8, &left), TRAIN_ELASTIC_WINDOW);
    ck_assert_uint_eq(left, 8);
    c.replicas = 2; /* pieces, not steps: 5 steps of 2 replicas are 10 pieces */
    ck_assert_int_eq(train_elastic_defer(&c, 2, 25, 30, 3, 0, 9, &left), TRAIN_ELASTIC_NOW);
    ck_assert_int_eq(train_elastic_defer(&c, 2, 25, 30, 3, 0, 10, &left), TRAIN_ELASTIC_WINDOW);
    c.replicas = 1;
    /* unbounded, huge and hostile: saturated, never wrapped into a small rest */
    ck_assert_int_eq(train_elastic_defer(&c, 5, 3, 30, 0, 0, UINT64_MAX - 1, &left), TRAIN_ELASTIC_NOW);
    ck_assert_uint_eq(left, UINT64_MAX);
    ck_assert_int_eq(train_elastic_defer(&c, 0, 1, UINT64_C(1) << 48, UINT64_C(1) << 48, 0, 8, &left),
                     TRAIN_ELASTIC_NOW);
    ck_assert_uint_eq(left, UINT64_MAX);
    c.replicas = 1024;
    ck_assert_int_eq(train_elastic_defer(&c, 0, 1, UINT64_C(1) << 40, UINT64_C(1) << 30, 0, 8, &left),
                     TRAIN_ELASTIC_NOW); /* rest x replicas overflows: more than any window */
    ck_assert_int_eq(train_elastic_defer(&c, 3, 1, 30, 3, 0, 8, &left), TRAIN_ELASTIC_WINDOW); /* past the end */
    ck_assert_uint_eq(left, 0);
    ck_assert_int_eq(train_elastic_defer(&c, 2, 31, 30, 3, 0, 8, &left), TRAIN_ELASTIC_WINDOW);
    ck_assert_uint_eq(left, 0);
    train_elastic_coord_free(&c);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_elastic");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_hostile_frames);
    tcase_add_test(tc, test_book_refusals);
    tcase_add_test(tc, test_broken_frames);
    tcase_add_test(tc, test_book_broken);
    tcase_add_test(tc, test_book_next_world);
    tcase_add_test(tc, test_defer);
    suite_add_tcase(s, tc);
    return s;
}
