/* sl_wire: every message type round trips; the HELLO and PIECE layouts are
 * pinned byte by byte; every truncation, every limit and random damage give
 * SL_EPROTO with a precise message, never a crash; the encoders refuse what
 * the decoder would refuse. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_alloc.h"
#include "sl_buf.h"
#include "sl_wire.h"
#include "sl_test.h"

static const unsigned ALL_TYPES[] = {SL_WIRE_HELLO, SL_WIRE_WELCOME, SL_WIRE_REFUSE,    SL_WIRE_CREDIT, SL_WIRE_PIECE,
                                     SL_WIRE_END,   SL_WIRE_ERROR,   SL_WIRE_HEARTBEAT, SL_WIRE_BYE,    SL_WIRE_STATUS,
                                     SL_WIRE_STATS, SL_WIRE_ROSTER,  SL_WIRE_JOIN};

/* a CURVE public key in Z85 (40 characters; ZeroMQ's test vector) */
static const char KEY[] = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
#define NTYPES (sizeof ALL_TYPES / sizeof ALL_TYPES[0])

static void set_field(struct sl_wire_field *f, const char *name, unsigned dtype, unsigned ragged, unsigned rank,
                      const int64_t *dims)
{
    f->name = name;
    f->name_len = strlen(name);
    f->dtype = (uint8_t)dtype;
    f->ragged = (uint8_t)ragged;
    f->rank = (uint8_t)rank;
    for (unsigned i = 0; i < rank; i++)
        f->dims[i] = dims[i];
}

static void set_tensor(struct sl_wire_tensor *t, unsigned dtype, unsigned rank, const int64_t *dims, uint64_t bytes)
{
    t->dtype = (uint8_t)dtype;
    t->rank = (uint8_t)rank;
    for (unsigned i = 0; i < rank; i++)
        t->dims[i] = dims[i];
    t->bytes = bytes;
}

/* A valid message of each type, with distinctive values in every field. */
static void sample(unsigned type, struct sl_wire_msg *m)
{
    memset(m, 0, sizeof *m);
    m->type = (uint16_t)type;
    switch (type) {
    case SL_WIRE_HELLO:
        m->hello = (struct sl_wire_hello){.worker = 1,
                                          .workers = 4,
                                          .replicas = 2,
                                          .credits = 8,
                                          .flags = 0x80,
                                          .heartbeat_ms = 500,
                                          .resume_epoch = 3,
                                          .resume_seq = 0x0102030405060708ull,
                                          .incarnation = 0x1112131415161718ull,
                                          .share = 2,
                                          .job = "mnist",
                                          .job_len = 5};
        break;
    case SL_WIRE_WELCOME: {
        struct sl_wire_welcome *w = &m->welcome;
        w->feeder = 2;
        w->feeders = 3;
        w->steps_per_epoch = 1875;
        w->epochs = 0;
        w->batch = 32;
        w->heartbeat_ms = 1000;
        w->ntensors = 5;
        static const int64_t img[] = {28, 28, 1};
        set_field(&w->fields[0], "image", SL_WIRE_UINT8, 0, 3, img);
        set_field(&w->fields[1], "label", SL_WIRE_INT64, 0, 0, NULL);
        set_field(&w->fields[2], "tokens", SL_WIRE_INT64, 1, 0, NULL);
        set_field(&w->fields[3], "tokens.row_splits", SL_WIRE_INT64, 1, 0, NULL);
        static const int64_t two[] = {2};
        set_field(&w->fields[4], "weights", SL_WIRE_FLOAT32, 0, 1, two);
        w->shm_pid = 4321;
        w->shm_fd = 7;
        w->shm_size = 4096 + 12 * 65536;
        w->shm_token = 0x8899aabbccddeeffull;
        break;
    }
    case SL_WIRE_REFUSE:
        m->refuse.reason = "job 'mnist' has 4 workers, trainer says 8";
        m->refuse.reason_len = strlen(m->refuse.reason);
        break;
    case SL_WIRE_CREDIT:
        m->credit.credits = 16;
        m->credit.flags = SL_WIRE_CREDIT_SHM;
        break;
    case SL_WIRE_PIECE: {
        struct sl_wire_piece *p = &m->piece;
        p->epoch = 2;
        p->step = 7;
        p->worker = 1;
        p->replica = 1;
        p->seq = 29;
        p->rows = 4;
        p->flags = SL_WIRE_PIECE_LAST_STEP;
        p->ntensors = 5;
        static const int64_t d0[] = {4, 28, 28, 1}, d1[] = {4}, d2[] = {11}, d3[] = {5}, d4[] = {4, 2};
        set_tensor(&p->tensors[0], SL_WIRE_UINT8, 4, d0, 4 * 28 * 28);
        set_tensor(&p->tensors[1], SL_WIRE_INT64, 1, d1, 32);
        set_tensor(&p->tensors[2], SL_WIRE_INT64, 1, d2, 88);
        set_tensor(&p->tensors[3], SL_WIRE_INT64, 1, d3, 40);
        set_tensor(&p->tensors[4], SL_WIRE_FLOAT32, 2, d4, 32);
        /* one after another in the body frame */
        for (unsigned i = 1; i < 5; i++)
            p->tensors[i].offset = p->tensors[i - 1].offset + p->tensors[i - 1].bytes;
        break;
    }
    case SL_WIRE_END: m->end = (struct sl_wire_end){.worker = 3, .pieces = 0x1122334455ull, .epochs = 10}; break;
    case SL_WIRE_ERROR:
        m->error.code = SL_ECORRUPT;
        m->error.msg = "a.tfrecord: corrupted record at 12";
        m->error.msg_len = strlen(m->error.msg);
        break;
    case SL_WIRE_HEARTBEAT: m->heartbeat.sent_ns = 0xfedcba9876543210ull; break;
    case SL_WIRE_STATUS:
        m->status = (struct sl_wire_status){.state = SL_WIRE_STATUS_SCANNING,
                                            .retry_ms = 250,
                                            .files_done = 3,
                                            .files = 10,
                                            .records = 0x123456,
                                            .bytes = 0x89abcdef01ull};
        break;
    case SL_WIRE_STATS:
        m->stats = (struct sl_wire_stats){
            .stage_ns = {1, 0x200, 0x30000, 0x4000000000ull, 5, 7}, .credit_wait_ns = 6, .with_map = 1};
        break;
    case SL_WIRE_ROSTER:
        m->roster.feeders = 4;
        m->roster.count = 2;
        m->roster.e[0] = (struct sl_wire_roster_entry){
            .index = 2, .endpoint = "tcp://f2:5555", .endpoint_len = 13, .key = KEY, .key_len = 40};
        m->roster.e[1] = (struct sl_wire_roster_entry){.index = 3, .endpoint = "ipc:///f3", .endpoint_len = 9};
        break;
    case SL_WIRE_JOIN:
        m->join = (struct sl_wire_join){.feeder = 2,
                                        .feeders = 4,
                                        .digest = 0x0102030405060708ull,
                                        .job = "mnist",
                                        .job_len = 5,
                                        .endpoint = "tcp://f2:5555",
                                        .endpoint_len = 13,
                                        .key = KEY,
                                        .key_len = 40};
        break;
    default: break;
    }
}

static void encode_sample(unsigned type, struct sl_buf *b)
{
    struct sl_wire_msg m;
    struct sl_error err = {0};
    sample(type, &m);
    sl_buf_init(b, 0);
    int rc = sl_wire_encode(&m, b, &err);
    ck_assert_msg(rc == 0, "encode %s: %s", sl_wire_type_name(type), err.msg);
}

/* Decode p[0..n) expecting SL_EPROTO with exactly `want`. */
static void expect_proto(const uint8_t *p, size_t n, const char *want)
{
    struct sl_wire_msg m;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_wire_decode(p, n, &m, &err), SL_EPROTO);
    ck_assert_int_eq(err.code, SL_EPROTO);
    ck_assert_str_eq(err.msg, want);
}

static void put_le(uint8_t *p, size_t off, uint64_t v, unsigned size)
{
    for (unsigned i = 0; i < size; i++)
        p[off + i] = (uint8_t)(v >> (8 * i));
}

static int str_eq(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

static void assert_same(const struct sl_wire_msg *a, const struct sl_wire_msg *b)
{
    ck_assert_uint_eq(a->type, b->type);
    switch (a->type) {
    case SL_WIRE_HELLO: {
        const struct sl_wire_hello *x = &a->hello, *y = &b->hello;
        ck_assert_uint_eq(x->worker, y->worker);
        ck_assert_uint_eq(x->workers, y->workers);
        ck_assert_uint_eq(x->replicas, y->replicas);
        ck_assert_uint_eq(x->credits, y->credits);
        ck_assert_uint_eq(x->flags, y->flags);
        ck_assert_uint_eq(x->feeders, y->feeders);
        ck_assert_uint_eq(x->from_workers, y->from_workers);
        ck_assert_uint_eq(x->from_replicas, y->from_replicas);
        ck_assert_uint_eq(x->from_epoch, y->from_epoch);
        ck_assert_uint_eq(x->from_step, y->from_step);
        ck_assert_uint_eq(x->heartbeat_ms, y->heartbeat_ms);
        ck_assert_uint_eq(x->resume_epoch, y->resume_epoch);
        ck_assert_uint_eq(x->resume_seq, y->resume_seq);
        ck_assert_uint_eq(x->incarnation, y->incarnation);
        ck_assert_uint_eq(x->share, y->share);
        ck_assert(str_eq(x->job, x->job_len, y->job, y->job_len));
        break;
    }
    case SL_WIRE_WELCOME: {
        const struct sl_wire_welcome *x = &a->welcome, *y = &b->welcome;
        ck_assert_uint_eq(x->feeder, y->feeder);
        ck_assert_uint_eq(x->feeders, y->feeders);
        ck_assert_uint_eq(x->steps_per_epoch, y->steps_per_epoch);
        ck_assert_uint_eq(x->epochs, y->epochs);
        ck_assert_uint_eq(x->batch, y->batch);
        ck_assert_uint_eq(x->heartbeat_ms, y->heartbeat_ms);
        ck_assert_uint_eq(x->ntensors, y->ntensors);
        for (unsigned i = 0; i < x->ntensors; i++) {
            const struct sl_wire_field *f = &x->fields[i], *g = &y->fields[i];
            ck_assert(str_eq(f->name, f->name_len, g->name, g->name_len));
            ck_assert_uint_eq(f->dtype, g->dtype);
            ck_assert_uint_eq(f->ragged, g->ragged);
            ck_assert_uint_eq(f->rank, g->rank);
            for (unsigned k = 0; k < f->rank; k++)
                ck_assert_int_eq(f->dims[k], g->dims[k]);
        }
        ck_assert_uint_eq(x->shm_pid, y->shm_pid);
        ck_assert_uint_eq(x->shm_fd, y->shm_fd);
        ck_assert_uint_eq(x->shm_size, y->shm_size);
        ck_assert_uint_eq(x->shm_token, y->shm_token);
        break;
    }
    case SL_WIRE_REFUSE:
        ck_assert(str_eq(a->refuse.reason, a->refuse.reason_len, b->refuse.reason, b->refuse.reason_len));
        break;
    case SL_WIRE_CREDIT:
        ck_assert_uint_eq(a->credit.credits, b->credit.credits);
        ck_assert_uint_eq(a->credit.flags, b->credit.flags);
        break;
    case SL_WIRE_PIECE: {
        const struct sl_wire_piece *x = &a->piece, *y = &b->piece;
        ck_assert_uint_eq(x->epoch, y->epoch);
        ck_assert_uint_eq(x->step, y->step);
        ck_assert_uint_eq(x->worker, y->worker);
        ck_assert_uint_eq(x->replica, y->replica);
        ck_assert_uint_eq(x->seq, y->seq);
        ck_assert_uint_eq(x->rows, y->rows);
        ck_assert_uint_eq(x->flags, y->flags);
        ck_assert_uint_eq(x->ntensors, y->ntensors);
        ck_assert_uint_eq(x->shm_offset, y->shm_offset);
        ck_assert_uint_eq(x->shm_bytes, y->shm_bytes);
        for (unsigned i = 0; i < x->ntensors; i++) {
            const struct sl_wire_tensor *s = &x->tensors[i], *t = &y->tensors[i];
            ck_assert_uint_eq(s->dtype, t->dtype);
            ck_assert_uint_eq(s->rank, t->rank);
            for (unsigned k = 0; k < s->rank; k++)
                ck_assert_int_eq(s->dims[k], t->dims[k]);
            ck_assert_uint_eq(s->bytes, t->bytes);
            ck_assert_uint_eq(s->offset, t->offset);
        }
        break;
    }
    case SL_WIRE_END:
        ck_assert_uint_eq(a->end.worker, b->end.worker);
        ck_assert_uint_eq(a->end.pieces, b->end.pieces);
        ck_assert_uint_eq(a->end.epochs, b->end.epochs);
        break;
    case SL_WIRE_ERROR:
        ck_assert_int_eq(a->error.code, b->error.code);
        ck_assert(str_eq(a->error.msg, a->error.msg_len, b->error.msg, b->error.msg_len));
        break;
    case SL_WIRE_HEARTBEAT: ck_assert_uint_eq(a->heartbeat.sent_ns, b->heartbeat.sent_ns); break;
    case SL_WIRE_STATUS:
        ck_assert_uint_eq(a->status.state, b->status.state);
        ck_assert_uint_eq(a->status.retry_ms, b->status.retry_ms);
        ck_assert_uint_eq(a->status.files_done, b->status.files_done);
        ck_assert_uint_eq(a->status.files, b->status.files);
        ck_assert_uint_eq(a->status.records, b->status.records);
        ck_assert_uint_eq(a->status.bytes, b->status.bytes);
        break;
    case SL_WIRE_STATS:
        for (int i = 0; i < SL_WIRE_STAGES; i++)
            ck_assert_uint_eq(a->stats.stage_ns[i], b->stats.stage_ns[i]);
        ck_assert_uint_eq(a->stats.credit_wait_ns, b->stats.credit_wait_ns);
        ck_assert_uint_eq(a->stats.with_map, b->stats.with_map);
        break;
    case SL_WIRE_ROSTER:
        ck_assert_uint_eq(a->roster.feeders, b->roster.feeders);
        ck_assert_uint_eq(a->roster.count, b->roster.count);
        for (unsigned i = 0; i < a->roster.count; i++) {
            const struct sl_wire_roster_entry *x = &a->roster.e[i], *y = &b->roster.e[i];
            ck_assert_uint_eq(x->index, y->index);
            ck_assert(str_eq(x->endpoint, x->endpoint_len, y->endpoint, y->endpoint_len));
            ck_assert(str_eq(x->key, x->key_len, y->key, y->key_len));
        }
        break;
    case SL_WIRE_JOIN:
        ck_assert_uint_eq(a->join.feeder, b->join.feeder);
        ck_assert_uint_eq(a->join.feeders, b->join.feeders);
        ck_assert_uint_eq(a->join.digest, b->join.digest);
        ck_assert(str_eq(a->join.job, a->join.job_len, b->join.job, b->join.job_len));
        ck_assert(str_eq(a->join.endpoint, a->join.endpoint_len, b->join.endpoint, b->join.endpoint_len));
        ck_assert(str_eq(a->join.key, a->join.key_len, b->join.key, b->join.key_len));
        break;
    default: break;
    }
}

/* Encode with the per-type function the feeder and trainer call. */
static int encode_typed(const struct sl_wire_msg *m, struct sl_buf *b)
{
    switch (m->type) {
    case SL_WIRE_HELLO: return sl_wire_encode_hello(&m->hello, b);
    case SL_WIRE_WELCOME: return sl_wire_encode_welcome(&m->welcome, b);
    case SL_WIRE_REFUSE: return sl_wire_encode_refuse(&m->refuse, b);
    case SL_WIRE_CREDIT: return sl_wire_encode_credit(&m->credit, b);
    case SL_WIRE_PIECE: return sl_wire_encode_piece(&m->piece, b);
    case SL_WIRE_END: return sl_wire_encode_end(&m->end, b);
    case SL_WIRE_ERROR: return sl_wire_encode_error(&m->error, b);
    case SL_WIRE_HEARTBEAT: return sl_wire_encode_heartbeat(&m->heartbeat, b);
    case SL_WIRE_BYE: return sl_wire_encode_bye(b);
    case SL_WIRE_STATUS: return sl_wire_encode_status(&m->status, b);
    case SL_WIRE_STATS: return sl_wire_encode_stats(&m->stats, b);
    case SL_WIRE_ROSTER: return sl_wire_encode_roster(&m->roster, b);
    case SL_WIRE_JOIN: return sl_wire_encode_join(&m->join, b);
    default: return SL_EINVAL;
    }
}

START_TEST(test_round_trip_every_type)
{
    for (size_t i = 0; i < NTYPES; i++) {
        struct sl_wire_msg in, out;
        struct sl_error err = {0};
        struct sl_buf b, b2;
        sl_buf_init(&b, 0);
        sl_buf_init(&b2, 0);
        sample(ALL_TYPES[i], &in);
        ck_assert_int_eq(encode_typed(&in, &b), 0);
        ck_assert_msg(sl_wire_decode(b.data, b.len, &out, &err) == 0, "%s: %s", sl_wire_type_name(in.type), err.msg);
        assert_same(&in, &out);
        /* strings are borrowed from the frame */
        if (in.type == SL_WIRE_HELLO)
            ck_assert(out.hello.job >= (const char *)b.data && out.hello.job < (const char *)b.data + b.len);
        /* decoding then encoding gives the same bytes */
        ck_assert_int_eq(sl_wire_encode(&out, &b2, &err), 0);
        ck_assert_uint_eq(b2.len, b.len);
        ck_assert_int_eq(memcmp(b.data, b2.data, b.len), 0);
        sl_buf_free(&b);
        sl_buf_free(&b2);
    }
}
END_TEST

START_TEST(test_round_trip_extremes)
{
    /* every field at its limit, and an all-zero empty piece */
    static char job[SL_WIRE_MAX_JOB], reason[SL_WIRE_MAX_REASON], msg[SL_WIRE_MAX_ERROR];
    static char names[SL_WIRE_MAX_TENSORS][SL_WIRE_MAX_NAME];
    memset(job, 'j', sizeof job);
    memset(reason, 'r', sizeof reason);
    memset(msg, 'm', sizeof msg);
    struct sl_wire_msg m[5], out;
    memset(m, 0, sizeof m);
    m[0].type = SL_WIRE_HELLO;
    m[0].hello = (struct sl_wire_hello){.worker = SL_WIRE_MAX_WORKERS - 1,
                                        .workers = SL_WIRE_MAX_WORKERS,
                                        .replicas = SL_WIRE_MAX_REPLICAS,
                                        .credits = SL_WIRE_MAX_CREDITS,
                                        /* every flag but FEEDERS (whose modulus bounds
                                         * share below 64: test_hello_feeders) */
                                        .flags = UINT32_MAX & ~SL_WIRE_HELLO_FEEDERS,
                                        .heartbeat_ms = UINT32_MAX,
                                        .resume_epoch = UINT64_MAX,
                                        .resume_seq = UINT64_MAX,
                                        .incarnation = UINT64_MAX,
                                        .share = SL_WIRE_MAX_FEEDERS - 1,
                                        .job = job,
                                        .job_len = sizeof job,
                                        .from_workers = SL_WIRE_MAX_WORKERS,
                                        .from_replicas = SL_WIRE_MAX_REPLICAS,
                                        .from_epoch = SL_WIRE_MAX_POSITION,
                                        .from_step = SL_WIRE_MAX_POSITION};
    m[1].type = SL_WIRE_WELCOME;
    struct sl_wire_welcome *w = &m[1].welcome;
    w->feeder = SL_WIRE_MAX_FEEDERS - 1;
    w->feeders = SL_WIRE_MAX_FEEDERS;
    w->steps_per_epoch = UINT64_MAX;
    w->epochs = UINT64_MAX;
    w->batch = SL_WIRE_MAX_ROWS;
    w->ntensors = SL_WIRE_MAX_TENSORS;
    for (unsigned i = 0; i < SL_WIRE_MAX_TENSORS; i++) {
        memset(names[i], 'a' + i % 26, SL_WIRE_MAX_NAME);
        w->fields[i] = (struct sl_wire_field){.name = names[i],
                                              .name_len = SL_WIRE_MAX_NAME,
                                              .dtype = (uint8_t)(i % 4),
                                              .ragged = (uint8_t)(i % 2),
                                              .rank = SL_WIRE_MAX_RANK};
        for (unsigned k = 0; k < SL_WIRE_MAX_RANK; k++)
            w->fields[i].dims[k] = 1;
        w->fields[i].dims[0] = 0;
        w->fields[i].dims[1] = (int64_t)SL_WIRE_MAX_ELEMS; /* the non-zero dims' product at its limit */
    }
    m[2].type = SL_WIRE_PIECE;
    struct sl_wire_piece *p = &m[2].piece;
    p->worker = SL_WIRE_MAX_WORKERS - 1;
    p->replica = SL_WIRE_MAX_REPLICAS - 1;
    p->rows = SL_WIRE_MAX_ROWS;
    p->ntensors = SL_WIRE_MAX_TENSORS;
    for (unsigned i = 0; i < SL_WIRE_MAX_TENSORS; i++) {
        struct sl_wire_tensor *t = &p->tensors[i];
        t->dtype = SL_WIRE_UINT8;
        t->rank = SL_WIRE_MAX_PIECE_RANK;
        t->dims[0] = SL_WIRE_MAX_ROWS;
        t->dims[1] = 64;
        for (unsigned k = 2; k < SL_WIRE_MAX_PIECE_RANK; k++)
            t->dims[k] = 1;
        t->bytes = SL_WIRE_MAX_MSG;
        t->offset = SL_WIRE_MAX_MSG;
    }
    m[3].type = SL_WIRE_REFUSE;
    m[3].refuse = (struct sl_wire_refuse){.reason = reason, .reason_len = sizeof reason};
    m[4].type = SL_WIRE_ERROR;
    m[4].error = (struct sl_wire_error){.code = SL_ECLOSED, .msg = msg, .msg_len = sizeof msg};
    for (int i = 0; i < 5; i++) {
        struct sl_buf b;
        struct sl_error err = {0};
        sl_buf_init(&b, 0);
        ck_assert_msg(sl_wire_encode(&m[i], &b, &err) == 0, "%d: %s", i, err.msg);
        ck_assert_uint_le(b.len, SL_WIRE_MAX_HEADER);
        ck_assert_int_eq(sl_wire_decode(b.data, b.len, &out, &err), 0);
        assert_same(&m[i], &out);
        sl_buf_free(&b);
    }
    /* the largest header: a full WELCOME */
    struct sl_buf b;
    sl_buf_init(&b, 0);
    ck_assert_int_eq(sl_wire_encode_welcome(&m[1].welcome, &b), 0);
    ck_assert_uint_eq(b.len, 42 + 64 * (2 + 160 + 3 + 8 * 8) + 24); /* + the shared memory's 4 fields */
    sl_buf_free(&b);

    /* an empty piece: no tensors, or tensors of zero rows */
    struct sl_wire_msg e;
    memset(&e, 0, sizeof e);
    e.type = SL_WIRE_PIECE;
    sl_buf_init(&b, 0);
    ck_assert_int_eq(sl_wire_encode_piece(&e.piece, &b), 0);
    ck_assert_uint_eq(b.len, 50 + 16); /* + shm_offset, shm_bytes */
    e.piece.ntensors = 1;
    static const int64_t zero_rows[] = {0, 3};
    set_tensor(&e.piece.tensors[0], SL_WIRE_FLOAT32, 2, zero_rows, 0);
    ck_assert_int_eq(sl_wire_encode_piece(&e.piece, &b), 0);
    struct sl_error err = {0};
    ck_assert_int_eq(sl_wire_decode(b.data, b.len, &out, &err), 0);
    assert_same(&e, &out);
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_hello_layout_pinned)
{
    struct sl_wire_msg m;
    sample(SL_WIRE_HELLO, &m);
    uint8_t want[128];
    size_t n = sl_test_hex("53 4c 43 31"             /* magic "SLC1" */
                           "04 00"                   /* version 4 */
                           "01 00"                   /* type HELLO */
                           "01 00 00 00"             /* worker 1 */
                           "04 00 00 00"             /* workers 4 */
                           "02 00 00 00"             /* replicas 2 */
                           "08 00 00 00"             /* credits 8 */
                           "80 00 00 00"             /* flags 0x80 */
                           "f4 01 00 00"             /* heartbeat_ms 500 */
                           "03 00 00 00 00 00 00 00" /* resume_epoch 3 */
                           "08 07 06 05 04 03 02 01" /* resume_seq 0x0102030405060708 */
                           "18 17 16 15 14 13 12 11" /* incarnation 0x1112131415161718 */
                           "02 00 00 00"             /* share 2 */
                           "05 00"                   /* job name length 5 */
                           "6d 6e 69 73 74",         /* "mnist" */
                           want, sizeof want);
    ck_assert_uint_eq(n, 67);
    struct sl_buf b;
    sl_buf_init(&b, 0);
    ck_assert_int_eq(sl_wire_encode_hello(&m.hello, &b), 0);
    ck_assert_uint_eq(b.len, n);
    ck_assert_int_eq(memcmp(b.data, want, n), 0);
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_status_layout_pinned)
{
    struct sl_wire_msg m;
    sample(SL_WIRE_STATUS, &m);
    uint8_t want[64];
    size_t n = sl_test_hex("53 4c 43 31"              /* magic "SLC1" */
                           "04 00"                    /* version 4 (STATUS came within 3: no layout changed) */
                           "0a 00"                    /* type STATUS (10) */
                           "01 00 00 00"              /* state 1: scanning */
                           "fa 00 00 00"              /* retry_ms 250 */
                           "03 00 00 00 00 00 00 00"  /* files_done 3 */
                           "0a 00 00 00 00 00 00 00"  /* files 10 */
                           "56 34 12 00 00 00 00 00"  /* records 0x123456 */
                           "01 ef cd ab 89 00 00 00", /* bytes 0x89abcdef01 */
                           want, sizeof want);
    ck_assert_uint_eq(n, 48);
    struct sl_buf b;
    sl_buf_init(&b, 0);
    ck_assert_int_eq(sl_wire_encode_status(&m.status, &b), 0);
    ck_assert_uint_eq(b.len, n);
    ck_assert_int_eq(memcmp(b.data, want, n), 0);
    ck_assert_str_eq(sl_wire_type_name(SL_WIRE_STATUS), "STATUS");
    /* the limits themselves are fine: every file done, the largest counts,
     * the longest retry; and the smallest values */
    struct sl_wire_msg out;
    struct sl_error err = {0};
    m.status = (struct sl_wire_status){.state = SL_WIRE_STATUS_SCANNING,
                                       .retry_ms = SL_WIRE_MAX_RETRY_MS,
                                       .files_done = SL_WIRE_MAX_FILES,
                                       .files = SL_WIRE_MAX_FILES,
                                       .records = SL_WIRE_MAX_COUNT,
                                       .bytes = SL_WIRE_MAX_COUNT};
    ck_assert_int_eq(sl_wire_encode_status(&m.status, &b), 0);
    ck_assert_int_eq(sl_wire_decode(b.data, b.len, &out, &err), 0);
    assert_same(&m, &out);
    m.status = (struct sl_wire_status){.state = SL_WIRE_STATUS_SCANNING, .retry_ms = 1, .files = 1};
    ck_assert_int_eq(sl_wire_encode_status(&m.status, &b), 0);
    ck_assert_int_eq(sl_wire_decode(b.data, b.len, &out, &err), 0);
    assert_same(&m, &out);
    /* the encoder refuses what the decoder would, with its words */
    m.status.files_done = 2;
    ck_assert_int_eq(sl_wire_encode_status(&m.status, &b), SL_EINVAL);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: STATUS header: files_done 2 exceeds files 1");
    m.status = (struct sl_wire_status){.state = 0, .retry_ms = 1, .files = 1};
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: STATUS header: state 0 is not 1 (scanning)");
    m.status = (struct sl_wire_status){.state = SL_WIRE_STATUS_SCANNING, .retry_ms = 0, .files = 1};
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: STATUS header: retry_ms 0 not in 1..600000");
    /* a HELLO's STATUS flag is bit 1, beside SHM */
    ck_assert_uint_eq(SL_WIRE_HELLO_STATUS, 2);
    ck_assert_uint_eq(SL_WIRE_HELLO_STATUS & SL_WIRE_HELLO_SHM, 0);
    sl_buf_free(&b);
}
END_TEST

/* STATS (issue #19): the layout, the limits, the flag. */
START_TEST(test_stats_layout_pinned)
{
    /* the form of trainers before the map stage: 56 bytes, as it always was */
    struct sl_wire_msg m;
    sample(SL_WIRE_STATS, &m);
    m.stats.with_map = 0;
    m.stats.stage_ns[SL_WIRE_STAGE_MAP] = 0;
    uint8_t want[72];
    size_t n = sl_test_hex("53 4c 43 31"              /* magic "SLC1" */
                           "04 00"                    /* version 4 (an optional message: no layout changed) */
                           "0b 00"                    /* type STATS (11) */
                           "01 00 00 00 00 00 00 00"  /* read_ns 1 */
                           "00 02 00 00 00 00 00 00"  /* decompress_ns 0x200 */
                           "00 00 03 00 00 00 00 00"  /* decode_ns 0x30000 */
                           "00 00 00 00 40 00 00 00"  /* assemble_ns 0x4000000000 */
                           "05 00 00 00 00 00 00 00"  /* send_ns 5 */
                           "06 00 00 00 00 00 00 00", /* credit_wait_ns 6 */
                           want, sizeof want);
    ck_assert_uint_eq(n, 56);
    struct sl_buf b;
    sl_buf_init(&b, 0);
    ck_assert_int_eq(sl_wire_encode_stats(&m.stats, &b), 0);
    ck_assert_uint_eq(b.len, n);
    ck_assert_int_eq(memcmp(b.data, want, n), 0);
    ck_assert_str_eq(sl_wire_type_name(SL_WIRE_STATS), "STATS");
    struct sl_wire_msg out;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_wire_decode(want, n, &out, &err), 0); /* map absent: 0, and the form kept */
    ck_assert_uint_eq(out.stats.with_map, 0);
    ck_assert_uint_eq(out.stats.stage_ns[SL_WIRE_STAGE_MAP], 0);
    assert_same(&m, &out);
    /* the form with the map stage: map_ns 7 after credit_wait_ns */
    n = sl_test_hex("53 4c 43 31 04 00 0b 00"
                    "01 00 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 00 03 00 00 00 00 00"
                    "00 00 00 00 40 00 00 00 05 00 00 00 00 00 00 00 06 00 00 00 00 00 00 00"
                    "07 00 00 00 00 00 00 00", /* map_ns 7 */
                    want, sizeof want);
    ck_assert_uint_eq(n, 64);
    sample(SL_WIRE_STATS, &m);
    ck_assert_int_eq(sl_wire_encode_stats(&m.stats, &b), 0);
    ck_assert_uint_eq(b.len, n);
    ck_assert_int_eq(memcmp(b.data, want, n), 0);
    ck_assert_int_eq(sl_wire_decode(want, n, &out, &err), 0);
    ck_assert_uint_eq(out.stats.with_map, 1);
    ck_assert_uint_eq(out.stats.stage_ns[SL_WIRE_STAGE_MAP], 7);
    /* present and 0 is not absent: the 64-byte form re-encodes as such */
    m.stats.stage_ns[SL_WIRE_STAGE_MAP] = 0;
    ck_assert_int_eq(sl_wire_encode_stats(&m.stats, &b), 0);
    ck_assert_uint_eq(b.len, 64);
    ck_assert_int_eq(sl_wire_decode(b.data, b.len, &out, &err), 0);
    ck_assert_uint_eq(out.stats.with_map, 1);
    for (int i = 0; i <= SL_WIRE_STAGES; i++) { /* each field at its limit passes, one past it does not */
        uint64_t *f = i < SL_WIRE_STAGES ? &m.stats.stage_ns[i] : &m.stats.credit_wait_ns;
        sample(SL_WIRE_STATS, &m);
        *f = SL_WIRE_MAX_COUNT;
        ck_assert_int_eq(sl_wire_encode_stats(&m.stats, &b), 0);
        ck_assert_int_eq(sl_wire_decode(b.data, b.len, &out, &err), 0);
        assert_same(&m, &out);
        *f = SL_WIRE_MAX_COUNT + 1;
        ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
        ck_assert_msg(strstr(err.msg, "exceeds 1152921504606846976") != NULL, "%s", err.msg);
        *f = UINT64_MAX;
        ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    }
    /* the message names the field: decode_ns over the limit */
    m.stats.stage_ns[SL_WIRE_STAGE_DECODE] = SL_WIRE_MAX_COUNT + 1;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: STATS header: decode_ns 1152921504606846977 exceeds 1152921504606846976");
    ck_assert_uint_eq(SL_WIRE_HELLO_STATS, 4);
    ck_assert_uint_eq(SL_WIRE_HELLO_STATS & (SL_WIRE_HELLO_SHM | SL_WIRE_HELLO_STATUS), 0);
    sl_buf_free(&b);
}
END_TEST

/* The map stage's field, hostile: cut short, repeated, over the limit, a
 * negative i64, in the form without it; and the flags that ask for it. */
START_TEST(test_stats_map_hostile)
{
    struct sl_wire_msg m, out;
    struct sl_error err = {0};
    struct sl_buf b;
    sample(SL_WIRE_STATS, &m);
    encode_sample(SL_WIRE_STATS, &b);
    ck_assert_uint_eq(b.len, 64);
    char want[128];
    for (size_t cut = 57; cut < 64; cut++) { /* 1-7 bytes of map_ns */
        snprintf(want, sizeof want, "STATS header: truncated at byte %zu of 64 (map_ns)", cut);
        expect_proto(b.data, cut, want);
    }
    /* map_ns twice: the second is trailing */
    uint8_t twice[72];
    memcpy(twice, b.data, 64);
    memcpy(twice + 64, b.data + 56, 8);
    expect_proto(twice, sizeof twice, "STATS header: 8 trailing bytes after byte 64");
    put_le(b.data, 56, SL_WIRE_MAX_COUNT, 8); /* at the limit: fine */
    ck_assert_int_eq(sl_wire_decode(b.data, 64, &out, &err), 0);
    ck_assert_uint_eq(out.stats.stage_ns[SL_WIRE_STAGE_MAP], SL_WIRE_MAX_COUNT);
    put_le(b.data, 56, SL_WIRE_MAX_COUNT + 1, 8);
    expect_proto(b.data, 64, "STATS header: map_ns 1152921504606846977 exceeds 1152921504606846976");
    put_le(b.data, 56, (uint64_t)-1, 8); /* -1 as an i64 */
    expect_proto(b.data, 64, "STATS header: map_ns 18446744073709551615 exceeds 1152921504606846976");
    /* the encoder: map_ns needs the form that carries it */
    m.stats.with_map = 0;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: STATS header: map_ns 7 in the form without the map stage");
    ck_assert_uint_eq(b.len, 0);
    m.stats.with_map = 2;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: STATS header: with_map 2 is not 0 or 1");
    /* the HELLO flags: distinct bits, unknown to older feeders (ignored) */
    ck_assert_uint_eq(SL_WIRE_HELLO_HALF, 8);
    ck_assert_uint_eq(SL_WIRE_HELLO_STATS_MAP, 16);
    ck_assert_uint_eq((SL_WIRE_HELLO_HALF | SL_WIRE_HELLO_STATS_MAP) &
                          (SL_WIRE_HELLO_SHM | SL_WIRE_HELLO_STATUS | SL_WIRE_HELLO_STATS),
                      0);
    sl_buf_free(&b);
}
END_TEST

/* float16 and bfloat16: 2 bytes a value in WELCOME and PIECE, their
 * names; a dtype past them is refused wherever it comes. */
START_TEST(test_half_dtypes)
{
    struct sl_wire_msg w, p, out;
    struct sl_error err = {0};
    struct sl_buf b;
    sl_buf_init(&b, 0);
    sample(SL_WIRE_WELCOME, &w);
    static const int64_t chw[] = {3, 2, 2};
    w.welcome.ntensors = 2;
    set_field(&w.welcome.fields[0], "image", SL_WIRE_FLOAT16, 0, 3, chw);
    set_field(&w.welcome.fields[1], "mask", SL_WIRE_BFLOAT16, 0, 0, NULL);
    ck_assert_int_eq(sl_wire_encode(&w, &b, &err), 0);
    ck_assert_uint_eq(b.data[49], SL_WIRE_FLOAT16); /* the first field's dtype byte, after "image" */
    ck_assert_int_eq(sl_wire_decode(b.data, b.len, &out, &err), 0);
    ck_assert_uint_eq(out.welcome.fields[0].dtype, 4);
    ck_assert_uint_eq(out.welcome.fields[1].dtype, 5);
    memset(&p, 0, sizeof p);
    p.type = SL_WIRE_PIECE;
    p.piece.rows = 4;
    p.piece.ntensors = 2;
    static const int64_t d0[] = {4, 3, 2, 2}, d1[] = {4};
    set_tensor(&p.piece.tensors[0], SL_WIRE_FLOAT16, 4, d0, 4 * 12 * 2);
    set_tensor(&p.piece.tensors[1], SL_WIRE_BFLOAT16, 1, d1, 8);
    p.piece.tensors[1].offset = 128;
    ck_assert_int_eq(sl_wire_encode(&p, &b, &err), 0);
    ck_assert_int_eq(sl_wire_decode(b.data, b.len, &out, &err), 0);
    ck_assert_int_eq(sl_wire_check_piece(&out.piece, &w.welcome, &err), 0);
    ck_assert_int_eq(sl_wire_check_body(&out.piece, 136, &err), 0);
    ck_assert_int_eq(sl_wire_check_body(&out.piece, 135, &err), SL_EPROTO);
    /* a value is 2 bytes: 1 or 4 a value is refused */
    p.piece.tensors[0].bytes = 48;
    ck_assert_int_eq(sl_wire_encode(&p, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: PIECE header: tensor 0: bytes 48, but 48 float16 values take 96");
    p.piece.tensors[0].bytes = 96;
    p.piece.tensors[1].bytes = 16;
    ck_assert_int_eq(sl_wire_encode(&p, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: PIECE header: tensor 1: bytes 16, but 4 bfloat16 values take 8");
    /* float16 where the schema says bfloat16, and the other way */
    p.piece.tensors[1].bytes = 8;
    p.piece.tensors[0].dtype = SL_WIRE_BFLOAT16;
    ck_assert_int_eq(sl_wire_encode(&p, &b, &err), 0);
    ck_assert_int_eq(sl_wire_decode(b.data, b.len, &out, &err), 0);
    ck_assert_int_eq(sl_wire_check_piece(&out.piece, &w.welcome, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg, "tensor 0 'image': dtype bfloat16, schema says float16");
    /* past the last dtype: refused in both headers, and by the encoder */
    for (unsigned bad = SL_WIRE_DTYPE_MAX + 1; bad <= 255; bad += bad < 8 ? 1 : 247) {
        sample(SL_WIRE_WELCOME, &w);
        w.welcome.fields[0].dtype = (uint8_t)bad;
        ck_assert_int_eq(sl_wire_encode(&w, &b, &err), SL_EINVAL);
        char want[96];
        snprintf(want, sizeof want, "cannot encode: WELCOME header: tensor 0: unknown dtype %u", bad);
        ck_assert_str_eq(err.msg, want);
        p.piece.tensors[0].dtype = (uint8_t)bad;
        ck_assert_int_eq(sl_wire_encode(&p, &b, &err), SL_EINVAL);
        snprintf(want, sizeof want, "cannot encode: PIECE header: tensor 0: unknown dtype %u", bad);
        ck_assert_str_eq(err.msg, want);
    }
    ck_assert_str_eq(sl_wire_dtype_name(SL_WIRE_FLOAT16), "float16");
    ck_assert_str_eq(sl_wire_dtype_name(SL_WIRE_BFLOAT16), "bfloat16");
    ck_assert_str_eq(sl_wire_dtype_name(6), "?");
    ck_assert_uint_eq(sl_wire_dtype_size(SL_WIRE_FLOAT16), 2);
    ck_assert_uint_eq(sl_wire_dtype_size(SL_WIRE_BFLOAT16), 2);
    ck_assert_uint_eq(sl_wire_dtype_size(6), 0);
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_piece_layout_pinned)
{
    struct sl_wire_piece p;
    memset(&p, 0, sizeof p);
    p.epoch = 2;
    p.step = 7;
    p.worker = 1;
    p.replica = 0;
    p.seq = 29;
    p.rows = 4;
    p.flags = SL_WIRE_PIECE_LAST_STEP;
    p.ntensors = 2;
    static const int64_t d0[] = {4, 3}, d1[] = {4};
    set_tensor(&p.tensors[0], SL_WIRE_FLOAT32, 2, d0, 48);
    set_tensor(&p.tensors[1], SL_WIRE_INT64, 1, d1, 32);
    uint8_t want[128];
    p.tensors[1].offset = 64;
    size_t n = sl_test_hex("53 4c 43 31 04 00 05 00"  /* magic, version 4, type PIECE */
                           "02 00 00 00 00 00 00 00"  /* epoch 2 */
                           "07 00 00 00 00 00 00 00"  /* step 7 */
                           "01 00 00 00"              /* worker 1 */
                           "00 00 00 00"              /* replica 0 */
                           "1d 00 00 00 00 00 00 00"  /* seq 29 */
                           "04 00 00 00"              /* rows 4 */
                           "01 00 00 00"              /* flags LAST_STEP */
                           "02 00"                    /* ntensors 2 */
                           "01 02"                    /* tensor 0: float32, rank 2 */
                           "04 00 00 00 00 00 00 00"  /*   dims[0] 4 */
                           "03 00 00 00 00 00 00 00"  /*   dims[1] 3 */
                           "30 00 00 00 00 00 00 00"  /*   bytes 48 */
                           "00 00 00 00 00 00 00 00"  /*   offset 0 in the body */
                           "00 01"                    /* tensor 1: int64, rank 1 */
                           "04 00 00 00 00 00 00 00"  /*   dims[0] 4 */
                           "20 00 00 00 00 00 00 00"  /*   bytes 32 */
                           "40 00 00 00 00 00 00 00"  /*   offset 64 */
                           "00 00 00 00 00 00 00 00"  /* shm_offset: none (a body frame follows) */
                           "00 00 00 00 00 00 00 00", /* shm_bytes */
                           want, sizeof want);
    ck_assert_uint_eq(n, 126);
    struct sl_buf b;
    sl_buf_init(&b, 0);
    ck_assert_int_eq(sl_wire_encode_piece(&p, &b), 0);
    ck_assert_uint_eq(b.len, n);
    ck_assert_int_eq(memcmp(b.data, want, n), 0);
    /* and the decoder reads the hand-written bytes */
    struct sl_wire_msg m;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_wire_decode(want, n, &m, &err), 0);
    ck_assert_uint_eq(m.type, SL_WIRE_PIECE);
    ck_assert_uint_eq(m.piece.seq, 29);
    ck_assert_int_eq(m.piece.tensors[0].dims[1], 3);
    ck_assert_uint_eq(m.piece.tensors[1].bytes, 32);
    ck_assert_uint_eq(m.piece.tensors[1].offset, 64);
    sl_buf_free(&b);
}
END_TEST

/* Version 3: a piece handed over in shared memory carries where its body
 * lies instead of a body frame; the fields are pinned at the end of the
 * header, and each rule about them is checked both ways. */
START_TEST(test_shm_piece)
{
    struct sl_wire_msg m, d;
    sample(SL_WIRE_PIECE, &m);
    m.piece.flags |= SL_WIRE_PIECE_SHM;
    m.piece.shm_offset = 4096 + 3 * 4160;         /* 16576 */
    m.piece.shm_bytes = 3136 + 32 + 88 + 40 + 32; /* 3328 */
    struct sl_buf b;
    sl_buf_init(&b, 0);
    struct sl_error err = {0};
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), 0);
    ck_assert_int_eq(sl_wire_decode(b.data, b.len, &d, &err), 0);
    assert_same(&m, &d);
    ck_assert_int_eq(sl_wire_check_body(&d.piece, (size_t)d.piece.shm_bytes, &err), 0);
    /* the last 16 bytes, little-endian */
    uint8_t want[16];
    ck_assert_uint_eq(sl_test_hex("c0 40 00 00 00 00 00 00"  /* shm_offset 16576 */
                                  "00 0d 00 00 00 00 00 00", /* shm_bytes 3328 */
                                  want, sizeof want),
                      16);
    ck_assert_int_eq(memcmp(b.data + b.len - 16, want, 16), 0);
    size_t n = b.len;
    uint8_t *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    /* inside the header page */
    memcpy(p, b.data, n);
    put_le(p, n - 16, 4095, 8);
    expect_proto(p, n, "PIECE header: shm_offset 4095 is inside the shared memory's 4096-byte header");
    /* a body larger than any message */
    memcpy(p, b.data, n);
    put_le(p, n - 8, (uint64_t)SL_WIRE_MAX_MSG + 1, 8);
    expect_proto(p, n, "PIECE header: shm_offset 16576 or shm_bytes 1073741825 out of range");
    /* the fields without the flag */
    memcpy(p, b.data, n);
    p[44] &= (uint8_t)~SL_WIRE_PIECE_SHM; /* flags at 44 */
    expect_proto(p, n, "PIECE header: shm_offset or shm_bytes set without the SHM flag");
    free(p);
    /* the encoder refuses what the decoder would */
    m.piece.shm_offset = 100;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg,
                     "cannot encode: PIECE header: shm_offset 100 is inside the shared memory's 4096-byte header");
    m.piece.flags &= ~SL_WIRE_PIECE_SHM;
    m.piece.shm_offset = 8192;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: PIECE header: shm_offset or shm_bytes set without the SHM flag");
    sl_buf_free(&b);
}
END_TEST

/* WELCOME's shared memory: all four fields or none, a size in range. */
START_TEST(test_shm_welcome)
{
    struct sl_wire_msg m;
    sample(SL_WIRE_WELCOME, &m);
    struct sl_buf b;
    sl_buf_init(&b, 0);
    struct sl_error err = {0};
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), 0);
    size_t n = b.len;
    /* shm_pid, shm_fd, shm_size, shm_token: the last 24 bytes */
    uint8_t want[24];
    ck_assert_uint_eq(sl_test_hex("e1 10 00 00"              /* shm_pid 4321 */
                                  "07 00 00 00"              /* shm_fd 7 */
                                  "00 10 0c 00 00 00 00 00"  /* shm_size 4096 + 12 x 65536 */
                                  "ff ee dd cc bb aa 99 88", /* shm_token */
                                  want, sizeof want),
                      24);
    ck_assert_int_eq(memcmp(b.data + n - 24, want, 24), 0);
    uint8_t *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    memcpy(p, b.data, n);
    put_le(p, n - 16, 100, 8);
    expect_proto(p, n, "WELCOME header: shm_size 100 not in 4096..1099511627776");
    memcpy(p, b.data, n);
    put_le(p, n - 16, 0, 8);
    expect_proto(p, n, "WELCOME header: shm_pid, shm_fd or shm_token set without shm_size");
    memcpy(p, b.data, n);
    memset(p + n - 24, 0, 24); /* none offered */
    struct sl_wire_msg d;
    ck_assert_int_eq(sl_wire_decode(p, n, &d, &err), 0);
    ck_assert_uint_eq(d.welcome.shm_size, 0);
    free(p);
    m.welcome.shm_size = ((uint64_t)1 << 40) + 1;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: WELCOME header: shm_size 1099511627777 not in 4096..1099511627776");
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_fixed_sizes)
{
    static const struct {
        unsigned type;
        size_t len;
    } sizes[] = {
        {SL_WIRE_CREDIT, 16},      {SL_WIRE_END, 28},        {SL_WIRE_HEARTBEAT, 16}, {SL_WIRE_BYE, 8},
        {SL_WIRE_REFUSE, 10 + 41}, {SL_WIRE_ERROR, 14 + 34}, {SL_WIRE_STATUS, 48},    {SL_WIRE_STATS, 64},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        struct sl_buf b;
        encode_sample(sizes[i].type, &b);
        ck_assert_msg(b.len == sizes[i].len, "%s: %zu bytes", sl_wire_type_name(sizes[i].type), b.len);
        sl_buf_free(&b);
    }
}
END_TEST

START_TEST(test_every_truncation)
{
    for (size_t i = 0; i < NTYPES; i++) {
        struct sl_buf b;
        encode_sample(ALL_TYPES[i], &b);
        for (size_t k = 0; k < b.len; k++) {
            /* a copy of exactly k bytes, so ASan sees any read past the end */
            uint8_t *cut = sl_malloc(k);
            if (k)
                memcpy(cut, b.data, k);
            struct sl_wire_msg m;
            struct sl_error err = {0};
            int rc = sl_wire_decode(cut, k, &m, &err);
            if (ALL_TYPES[i] == SL_WIRE_STATS && k == 56) { /* the form without map_ns: whole */
                ck_assert_msg(rc == 0 && m.stats.with_map == 0, "STATS cut at 56: %s", err.msg);
                sl_free(cut);
                continue;
            }
            ck_assert_msg(rc == SL_EPROTO, "%s cut at %zu: rc %d", sl_wire_type_name(ALL_TYPES[i]), k, rc);
            ck_assert_msg(strstr(err.msg, "truncated at byte") != NULL, "%s cut at %zu: %s",
                          sl_wire_type_name(ALL_TYPES[i]), k, err.msg);
            sl_free(cut);
        }
        sl_buf_free(&b);
    }
    struct sl_buf b;
    encode_sample(SL_WIRE_HELLO, &b);
    expect_proto(b.data, 0, "header: truncated at byte 0 of 4 (magic)");
    expect_proto(b.data, 5, "header: truncated at byte 5 of 6 (version)");
    expect_proto(b.data, 7, "header: truncated at byte 7 of 8 (type)");
    expect_proto(b.data, 18, "HELLO header: truncated at byte 18 of 20 (replicas)");
    expect_proto(b.data, 49, "HELLO header: truncated at byte 49 of 56 (incarnation)");
    expect_proto(b.data, 58, "HELLO header: truncated at byte 58 of 60 (share)");
    expect_proto(b.data, 61, "HELLO header: truncated at byte 61 of 62 (job name)");
    expect_proto(b.data, 64, "HELLO header: truncated at byte 64 of 67 (job name)");
    sl_buf_free(&b);
    encode_sample(SL_WIRE_PIECE, &b);
    /* tensor 0 (rank 4) starts at 50: dtype, rank, dims[0..4) at 52..84, bytes */
    expect_proto(b.data, 60, "PIECE header: truncated at byte 60 of 68 (dims)");
    expect_proto(b.data, 90, "PIECE header: truncated at byte 90 of 92 (bytes)");
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_trailing_bytes)
{
    for (size_t i = 0; i < NTYPES; i++) {
        struct sl_buf b;
        encode_sample(ALL_TYPES[i], &b);
        size_t n = b.len;
        ck_assert_int_eq(sl_buf_append(&b, "\0\0\0", 3), 0);
        char want[128];
        snprintf(want, sizeof want, "%s header: 1 trailing byte after byte %zu", sl_wire_type_name(ALL_TYPES[i]), n);
        expect_proto(b.data, n + 1, want);
        snprintf(want, sizeof want, "%s header: 3 trailing bytes after byte %zu", sl_wire_type_name(ALL_TYPES[i]), n);
        expect_proto(b.data, n + 3, want);
        sl_buf_free(&b);
    }
}
END_TEST

/* A damaged copy of a sample: `patch` writes `size` bytes of `value` at
 * `off`; `cut` (if non-zero) is the frame length to decode. */
struct damage {
    unsigned type;
    size_t off;
    uint64_t value;
    unsigned size;
    size_t cut;
    const char *want;
};

/* Offsets in the samples: HELLO fields at 8 + 4k, incarnation at 48, share
 * at 56, job length at 60; WELCOME
 * ntensors at 40, tensor 0 ("image") at 42: name length, 5 bytes, dtype 49,
 * ragged 50, rank 51, dims 52..76; PIECE worker 24, replica 28, rows 40,
 * ntensors 48, tensor 0 at 50: dtype, rank, dims 52..84, bytes 84. */
static const struct damage DAMAGE[] = {
    {SL_WIRE_HELLO, 0, 0x20544547, 4, 0, "bad magic 47 45 54 20 (expected \"SLC1\")"},
    {SL_WIRE_HELLO, 4, 5, 2, 0, "unsupported version 5 (this build speaks 4)"},
    {SL_WIRE_HELLO, 4, 0, 2, 0, "unsupported version 0 (this build speaks 4)"},
    {SL_WIRE_HELLO, 4, 1, 2, 0, "unsupported version 1 (this build speaks 4)"}, /* a peer from before the body frame */
    {SL_WIRE_HELLO, 4, 2, 2, 0, "unsupported version 2 (this build speaks 4)"}, /* from before shared memory */
    {SL_WIRE_HELLO, 4, 3, 2, 0, "unsupported version 3 (this build speaks 4)"}, /* from before takeover */
    {SL_WIRE_HELLO, 56, 4096, 4, 0, "HELLO header: share 4096 not below 4096"},
    {SL_WIRE_HELLO, 56, UINT32_MAX, 4, 0, "HELLO header: share 4294967295 not below 4096"},
    {SL_WIRE_HELLO, 48, 7, 8, 52, "HELLO header: truncated at byte 52 of 56 (incarnation)"},
    {SL_WIRE_HELLO, 6, 14, 2, 0, "unknown message type 14"},
    {SL_WIRE_HELLO, 6, 0, 2, 0, "unknown message type 0"},
    {SL_WIRE_HELLO, 60, 300, 2, 0, "HELLO header: job name length 300 exceeds 256"},
    {SL_WIRE_HELLO, 60, 0, 2, 62, "HELLO header: empty job name"},
    {SL_WIRE_HELLO, 12, 0, 4, 0, "HELLO header: workers 0 not in 1..65536"},
    {SL_WIRE_HELLO, 12, 65537, 4, 0, "HELLO header: workers 65537 not in 1..65536"},
    {SL_WIRE_HELLO, 8, 4, 4, 0, "HELLO header: worker 4 not below workers 4"},
    {SL_WIRE_HELLO, 16, 0, 4, 0, "HELLO header: replicas 0 not in 1..1024"},
    {SL_WIRE_HELLO, 16, 1025, 4, 0, "HELLO header: replicas 1025 not in 1..1024"},
    {SL_WIRE_HELLO, 20, (1u << 20) + 1, 4, 0, "HELLO header: credits 1048577 exceeds 1048576"},
    {SL_WIRE_WELCOME, 12, 0, 4, 0, "WELCOME header: feeders 0 not in 1..4096"},
    {SL_WIRE_WELCOME, 12, 4097, 4, 0, "WELCOME header: feeders 4097 not in 1..4096"},
    {SL_WIRE_WELCOME, 8, 3, 4, 0, "WELCOME header: feeder 3 not below feeders 3"},
    {SL_WIRE_WELCOME, 32, 0, 4, 0, "WELCOME header: batch 0 not in 1..16777216"},
    {SL_WIRE_WELCOME, 32, (1u << 24) + 1, 4, 0, "WELCOME header: batch 16777217 not in 1..16777216"},
    {SL_WIRE_WELCOME, 40, 65, 2, 0, "WELCOME header: ntensors 65 exceeds 64"},
    {SL_WIRE_WELCOME, 42, 161, 2, 0, "WELCOME header: tensor name length 161 exceeds 160"},
    {SL_WIRE_WELCOME, 42, 0, 2, 0, "WELCOME header: empty tensor name"},
    {SL_WIRE_WELCOME, 49, 6, 1, 0, "WELCOME header: tensor 0: unknown dtype 6"}, /* past bfloat16 */
    {SL_WIRE_WELCOME, 49, 255, 1, 0, "WELCOME header: tensor 0: unknown dtype 255"},
    {SL_WIRE_WELCOME, 50, 2, 1, 0, "WELCOME header: tensor 0: ragged 2 is not 0 or 1"},
    {SL_WIRE_WELCOME, 51, 9, 1, 0, "WELCOME header: tensor 0: rank 9 exceeds 8"},
    {SL_WIRE_WELCOME, 60, (uint64_t)-5, 8, 0, "WELCOME header: tensor 0: dims[1] = -5 is negative"},
    {SL_WIRE_WELCOME, 60, (uint64_t)1 << 29, 8, 0, "WELCOME header: tensor 0: shape has more than 1073741824 elements"},
    {SL_WIRE_REFUSE, 8, 1025, 2, 0, "REFUSE header: reason length 1025 exceeds 1024"},
    {SL_WIRE_CREDIT, 8, (1u << 20) + 1, 4, 0, "CREDIT header: credits 1048577 exceeds 1048576"},
    {SL_WIRE_PIECE, 24, 65536, 4, 0, "PIECE header: worker 65536 exceeds 65535"},
    {SL_WIRE_PIECE, 28, 1024, 4, 0, "PIECE header: replica 1024 exceeds 1023"},
    {SL_WIRE_PIECE, 40, (1u << 24) + 1, 4, 0, "PIECE header: rows 16777217 exceeds 16777216"},
    {SL_WIRE_PIECE, 48, 70, 2, 0, "PIECE header: ntensors 70 exceeds 64"},
    {SL_WIRE_PIECE, 48, 0xffff, 2, 0, "PIECE header: ntensors 65535 exceeds 64"},
    {SL_WIRE_PIECE, 50, 6, 1, 0, "PIECE header: tensor 0: unknown dtype 6"},
    {SL_WIRE_PIECE, 50, 255, 1, 0, "PIECE header: tensor 0: unknown dtype 255"},
    {SL_WIRE_PIECE, 50, 4, 1, 0, "PIECE header: tensor 0: bytes 3136, but 3136 float16 values take 6272"},
    {SL_WIRE_PIECE, 51, 0, 1, 0, "PIECE header: tensor 0: rank 0 not in 1..9"},
    {SL_WIRE_PIECE, 51, 10, 1, 0, "PIECE header: tensor 0: rank 10 not in 1..9"},
    {SL_WIRE_PIECE, 52, (uint64_t)-1, 8, 0, "PIECE header: tensor 0: dims[0] = -1 is negative"},
    {SL_WIRE_PIECE, 60, (uint64_t)INT64_MAX, 8, 0, "PIECE header: tensor 0: shape has more than 1073741824 elements"},
    {SL_WIRE_PIECE, 84, (uint64_t)SL_WIRE_MAX_MSG + 1, 8, 0,
     "PIECE header: tensor 0: bytes 1073741825 exceeds 1073741824"},
    {SL_WIRE_PIECE, 92, (uint64_t)SL_WIRE_MAX_MSG + 1, 8, 0,
     "PIECE header: tensor 0: offset 1073741825 exceeds 1073741824"},
    {SL_WIRE_PIECE, 84, 3135, 8, 0, "PIECE header: tensor 0: bytes 3135, but 3136 uint8 values take 3136"},
    {SL_WIRE_PIECE, 60, 0, 8, 0, "PIECE header: tensor 0: bytes 3136, but 0 uint8 values take 0"},
    {SL_WIRE_END, 8, 65536, 4, 0, "END header: worker 65536 exceeds 65535"},
    {SL_WIRE_ERROR, 8, 0, 4, 0, "ERROR header: code 0 is not an error code (-8..-1)"},
    {SL_WIRE_ERROR, 8, (uint32_t)-9, 4, 0, "ERROR header: code -9 is not an error code (-8..-1)"},
    {SL_WIRE_ERROR, 8, 1, 4, 0, "ERROR header: code 1 is not an error code (-8..-1)"},
    {SL_WIRE_ERROR, 12, 4097, 2, 0, "ERROR header: message length 4097 exceeds 4096"},
    /* STATUS: state 8, retry_ms 12, files_done 16, files 24, records 32, bytes 40 */
    {SL_WIRE_STATUS, 8, 0, 4, 0, "STATUS header: state 0 is not 1 (scanning)"},
    {SL_WIRE_STATUS, 8, 2, 4, 0, "STATUS header: state 2 is not 1 (scanning)"},
    {SL_WIRE_STATUS, 8, UINT32_MAX, 4, 0, "STATUS header: state 4294967295 is not 1 (scanning)"},
    {SL_WIRE_STATUS, 12, 0, 4, 0, "STATUS header: retry_ms 0 not in 1..600000"},
    {SL_WIRE_STATUS, 12, 600001, 4, 0, "STATUS header: retry_ms 600001 not in 1..600000"},
    {SL_WIRE_STATUS, 12, (uint32_t)-1, 4, 0, "STATUS header: retry_ms 4294967295 not in 1..600000"},
    {SL_WIRE_STATUS, 24, 0, 8, 0, "STATUS header: files 0 not in 1..4294967296"},
    {SL_WIRE_STATUS, 24, ((uint64_t)1 << 32) + 1, 8, 0, "STATUS header: files 4294967297 not in 1..4294967296"},
    {SL_WIRE_STATUS, 24, (uint64_t)-1, 8, 0, "STATUS header: files 18446744073709551615 not in 1..4294967296"},
    {SL_WIRE_STATUS, 16, 11, 8, 0, "STATUS header: files_done 11 exceeds files 10"},
    {SL_WIRE_STATUS, 16, (uint64_t)-1, 8, 0, "STATUS header: files_done 18446744073709551615 exceeds files 10"},
    {SL_WIRE_STATUS, 32, ((uint64_t)1 << 60) + 1, 8, 0,
     "STATUS header: records 1152921504606846977 exceeds 1152921504606846976"},
    {SL_WIRE_STATUS, 32, (uint64_t)-1, 8, 0, "STATUS header: records 18446744073709551615 exceeds 1152921504606846976"},
    {SL_WIRE_STATUS, 40, ((uint64_t)1 << 60) + 1, 8, 0,
     "STATUS header: bytes 1152921504606846977 exceeds 1152921504606846976"},
    {SL_WIRE_STATUS, 40, (uint64_t)-1, 8, 0, "STATUS header: bytes 18446744073709551615 exceeds 1152921504606846976"},
    {SL_WIRE_STATUS, 40, 0, 8, 44, "STATUS header: truncated at byte 44 of 48 (bytes)"},
    {SL_WIRE_STATUS, 8, 1, 4, 12, "STATUS header: truncated at byte 12 of 16 (retry_ms)"},
};

START_TEST(test_limits_exact_messages)
{
    for (size_t i = 0; i < sizeof DAMAGE / sizeof DAMAGE[0]; i++) {
        const struct damage *d = &DAMAGE[i];
        struct sl_buf b;
        encode_sample(d->type, &b);
        ck_assert_uint_le(d->off + d->size, b.len);
        put_le(b.data, d->off, d->value, d->size);
        struct sl_wire_msg m;
        struct sl_error err = {0};
        ck_assert_int_eq(sl_wire_decode(b.data, d->cut ? d->cut : b.len, &m, &err), SL_EPROTO);
        ck_assert_msg(strcmp(err.msg, d->want) == 0, "case %zu: got \"%s\", want \"%s\"", i, err.msg, d->want);
        sl_buf_free(&b);
    }
}
END_TEST

START_TEST(test_header_size_limit)
{
    static uint8_t big[SL_WIRE_MAX_HEADER + 1];
    memcpy(big, "SLC1\x04\x00\x09\x00", 8);
    expect_proto(big, sizeof big, "header frame of 65537 bytes exceeds 65536");
    /* the limit itself is fine until the trailing bytes */
    expect_proto(big, SL_WIRE_MAX_HEADER, "BYE header: 65528 trailing bytes after byte 8");
}
END_TEST

START_TEST(test_encoder_refuses)
{
    struct sl_buf b;
    struct sl_error err = {0};
    struct sl_wire_msg m;
    sl_buf_init(&b, 0);

    sample(SL_WIRE_PIECE, &m);
    m.piece.ntensors = 70;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: PIECE header: ntensors 70 exceeds 64");
    ck_assert_uint_eq(b.len, 0);
    ck_assert_int_eq(sl_wire_encode_piece(&m.piece, &b), SL_EINVAL);

    sample(SL_WIRE_PIECE, &m);
    m.piece.tensors[2].rank = 10;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: PIECE header: tensor 2: rank 10 not in 1..9");

    sample(SL_WIRE_PIECE, &m);
    m.piece.tensors[1].bytes = 33;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: PIECE header: tensor 1: bytes 33, but 4 int64 values take 32");
    ck_assert_uint_eq(b.len, 0);

    sample(SL_WIRE_HELLO, &m);
    m.hello.worker = 4;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: HELLO header: worker 4 not below workers 4");
    ck_assert_int_eq(sl_wire_encode_hello(&m.hello, &b), SL_EINVAL);

    sample(SL_WIRE_HELLO, &m);
    m.hello.job_len = 70000;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: HELLO header: job name length 70000 exceeds 256");
    m.hello.job = NULL;
    m.hello.job_len = 3;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: HELLO header: job name is NULL with length 3");

    sample(SL_WIRE_WELCOME, &m);
    m.welcome.fields[1].rank = 9;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: WELCOME header: tensor 1: rank 9 exceeds 8");

    sample(SL_WIRE_ERROR, &m);
    m.error.code = 0;
    ck_assert_int_eq(sl_wire_encode_error(&m.error, &b), SL_EINVAL);

    memset(&m, 0, sizeof m);
    m.type = 99;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: unknown message type 99");
    sl_buf_free(&b);

    /* the buffer's own limit and allocation failures */
    sl_buf_init(&b, 20);
    sample(SL_WIRE_HELLO, &m);
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: HELLO header: over the buffer's limit");
    ck_assert_uint_eq(b.len, 0);
    sl_buf_free(&b);
    sl_buf_init(&b, 0);
    sl_alloc_fail_after(1);
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_ENOMEM);
    sl_alloc_fail_reset();
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), 0);
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_check_body_and_piece)
{
    struct sl_wire_msg w, p;
    struct sl_error err = {0};
    sample(SL_WIRE_WELCOME, &w);
    sample(SL_WIRE_PIECE, &p);
    /* the sample's tensors lie end to end: 3136 + 32 + 88 + 40 + 32 bytes */
    ck_assert_int_eq(sl_wire_check_body(&p.piece, 3328, &err), 0);
    ck_assert_int_eq(sl_wire_check_body(&p.piece, 3327, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg, "tensor 4: bytes [3296, 3328) past the body's 3327");
    p.piece.tensors[1].offset = 1u << 30; /* each field at its limit: the sum does not wrap */
    ck_assert_int_eq(sl_wire_check_body(&p.piece, 3328, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg, "tensor 1: bytes [1073741824, 1073741856) past the body's 3328");
    p.piece.tensors[1].offset = 3136;
    ck_assert_int_eq(sl_wire_check_piece(&p.piece, &w.welcome, &err), 0);

    /* ragged tensors have a free dims[0]; the others must have rows */
    p.piece.tensors[2].dims[0] = 1000;
    p.piece.tensors[2].bytes = 8000;
    ck_assert_int_eq(sl_wire_check_piece(&p.piece, &w.welcome, &err), 0);
    p.piece.tensors[1].dims[0] = 5;
    ck_assert_int_eq(sl_wire_check_piece(&p.piece, &w.welcome, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg, "tensor 1 'label': dims [5], schema says [4]");

    sample(SL_WIRE_PIECE, &p);
    p.piece.tensors[0].dims[2] = 27;
    ck_assert_int_eq(sl_wire_check_piece(&p.piece, &w.welcome, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg, "tensor 0 'image': dims [4, 28, 27, 1], schema says [4, 28, 28, 1]");

    sample(SL_WIRE_PIECE, &p);
    p.piece.tensors[3].rank = 2;
    p.piece.tensors[3].dims[1] = 1;
    ck_assert_int_eq(sl_wire_check_piece(&p.piece, &w.welcome, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg, "tensor 3 'tokens.row_splits': dims [5, 1], schema says [4] (dims[0] free: ragged)");

    sample(SL_WIRE_PIECE, &p);
    p.piece.tensors[4].dtype = SL_WIRE_INT64;
    ck_assert_int_eq(sl_wire_check_piece(&p.piece, &w.welcome, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg, "tensor 4 'weights': dtype int64, schema says float32");

    sample(SL_WIRE_PIECE, &p);
    p.piece.ntensors = 4;
    ck_assert_int_eq(sl_wire_check_piece(&p.piece, &w.welcome, &err), SL_EPROTO);
    ck_assert_str_eq(err.msg, "piece has 4 tensors, schema says 5");

    /* an empty piece of a schema: rows 0, every tensor with zero rows */
    sample(SL_WIRE_PIECE, &p);
    p.piece.rows = 0;
    for (unsigned i = 0; i < p.piece.ntensors; i++) {
        p.piece.tensors[i].dims[0] = i == 3 ? 1 : 0; /* row_splits of 0 rows has one entry */
        p.piece.tensors[i].bytes = i == 3 ? 8 : 0;
    }
    ck_assert_int_eq(sl_wire_check_piece(&p.piece, &w.welcome, &err), 0);
}
END_TEST

/* HELLO's trailing modulus (SL_WIRE_HELLO_FEEDERS), ROSTER and JOIN:
 * the layouts of docs/protocol.md, byte for byte, and every rule. */
START_TEST(test_hello_feeders)
{
    struct sl_wire_msg m, out;
    struct sl_error err = {0};
    struct sl_buf b;
    sl_buf_init(&b, 0);
    sample(SL_WIRE_HELLO, &m);
    ck_assert_uint_eq(SL_WIRE_HELLO_ROSTER, 0x20);
    ck_assert_uint_eq(SL_WIRE_HELLO_FEEDERS, 0x40);
    ck_assert_uint_eq(SL_WIRE_HELLO_EPOCH, 0x80); /* no layout change: resume_epoch is always there */
    ck_assert_uint_eq(SL_WIRE_HELLO_RESHAPE, 0x100);
    m.hello.flags = SL_WIRE_HELLO_EPOCH | SL_WIRE_HELLO_RESHAPE;
    m.hello.resume_epoch = 3;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), 0);
    ck_assert_uint_eq(b.len, 67);
    ck_assert_int_eq(sl_wire_decode(b.data, b.len, &out, &err), 0);
    ck_assert_uint_eq(out.hello.flags, SL_WIRE_HELLO_EPOCH | SL_WIRE_HELLO_RESHAPE);
    ck_assert_uint_eq(out.hello.resume_epoch, 3);
    /* ROSTER alone changes nothing in the layout */
    m.hello.flags = SL_WIRE_HELLO_ROSTER;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), 0);
    ck_assert_uint_eq(b.len, 67);
    ck_assert_int_eq(sl_wire_decode(b.data, b.len, &out, &err), 0);
    ck_assert_uint_eq(out.hello.feeders, 0);
    /* FEEDERS: 4 more bytes after the job name */
    m.hello.flags = SL_WIRE_HELLO_ROSTER | SL_WIRE_HELLO_FEEDERS;
    m.hello.feeders = 5;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), 0);
    ck_assert_uint_eq(b.len, 71);
    static const uint8_t tail[] = {'m', 'n', 'i', 's', 't', 5, 0, 0, 0};
    ck_assert_int_eq(memcmp(b.data + 62, tail, sizeof tail), 0);
    ck_assert_int_eq(sl_wire_decode(b.data, b.len, &out, &err), 0);
    ck_assert_uint_eq(out.hello.feeders, 5);
    ck_assert_uint_eq(out.hello.share, 2);
    uint8_t copy[80];
    memcpy(copy, b.data, b.len);
    expect_proto(copy, 69, "HELLO header: truncated at byte 69 of 71 (feeders)");
    put_le(copy, 67, 0, 4);
    expect_proto(copy, 71, "HELLO header: feeders 0 not in 1..64");
    put_le(copy, 67, 65, 4);
    expect_proto(copy, 71, "HELLO header: feeders 65 not in 1..64");
    put_le(copy, 67, 0xffffffffu, 4);
    expect_proto(copy, 71, "HELLO header: feeders 4294967295 not in 1..64");
    put_le(copy, 67, 2, 4); /* share 2 of 2 */
    expect_proto(copy, 71, "HELLO header: share 2 not below feeders 2");
    /* the flag off: the 4 bytes are trailing, as a feeder that predates
     * joins would see them (why the trainer sends them only after a join) */
    put_le(copy, 24, SL_WIRE_HELLO_ROSTER, 4);
    expect_proto(copy, 71, "HELLO header: 4 trailing bytes after byte 67");
    /* the encoder refuses a modulus without the flag, and a bad one */
    m.hello.flags = SL_WIRE_HELLO_ROSTER;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: HELLO header: feeders 5 without the FEEDERS flag");
    m.hello.flags = SL_WIRE_HELLO_FEEDERS;
    m.hello.feeders = 2;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: HELLO header: share 2 not below feeders 2");
    ck_assert_uint_eq(b.len, 0);
    sl_buf_free(&b);
}
END_TEST

/* HELLO's trailing transition (SL_WIRE_HELLO_TRANSITION): 24 bytes after
 * the job name, or after the modulus when FEEDERS is set too; every
 * field's range, absent, truncated and huge. */
START_TEST(test_hello_transition)
{
    struct sl_wire_msg m, out;
    struct sl_error err = {0};
    struct sl_buf b;
    sl_buf_init(&b, 0);
    sample(SL_WIRE_HELLO, &m);
    ck_assert_uint_eq(SL_WIRE_HELLO_TRANSITION, 0x200);
    m.hello.flags = SL_WIRE_HELLO_TRANSITION | SL_WIRE_HELLO_RESHAPE;
    m.hello.from_workers = 2;
    m.hello.from_replicas = 3;
    m.hello.from_epoch = 7;
    m.hello.from_step = 11;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), 0);
    ck_assert_uint_eq(b.len, 67 + 24);
    static const uint8_t tail[] = {'t', 2, 0, 0, 0, 3, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 11, 0, 0, 0, 0, 0, 0, 0};
    ck_assert_int_eq(memcmp(b.data + 66, tail, sizeof tail), 0);
    ck_assert_int_eq(sl_wire_decode(b.data, b.len, &out, &err), 0);
    ck_assert_uint_eq(out.hello.from_workers, 2);
    ck_assert_uint_eq(out.hello.from_replicas, 3);
    ck_assert_uint_eq(out.hello.from_epoch, 7);
    ck_assert_uint_eq(out.hello.from_step, 11);
    ck_assert_uint_eq(out.hello.feeders, 0);
    uint8_t c[128];
    memcpy(c, b.data, b.len);
    expect_proto(c, 67, "HELLO header: truncated at byte 67 of 71 (from_workers)");
    expect_proto(c, 90, "HELLO header: truncated at byte 90 of 91 (from_step)");
    put_le(c, 67, 0, 4);
    expect_proto(c, 91, "HELLO header: from_workers 0 not in 1..65536");
    put_le(c, 67, 65537, 4);
    expect_proto(c, 91, "HELLO header: from_workers 65537 not in 1..65536");
    put_le(c, 67, 2, 4);
    put_le(c, 71, 0, 4);
    expect_proto(c, 91, "HELLO header: from_replicas 0 not in 1..1024");
    put_le(c, 71, 0xffffffffu, 4);
    expect_proto(c, 91, "HELLO header: from_replicas 4294967295 not in 1..1024");
    put_le(c, 71, 3, 4);
    put_le(c, 75, (1ull << 48) + 1, 8);
    expect_proto(c, 91, "HELLO header: from_epoch 281474976710657 above 2^48");
    put_le(c, 75, 7, 8);
    put_le(c, 83, 0, 8);
    expect_proto(c, 91, "HELLO header: from_step 0 not in 1..2^48");
    put_le(c, 83, UINT64_MAX, 8);
    expect_proto(c, 91, "HELLO header: from_step 18446744073709551615 not in 1..2^48");
    /* the flag off: the 24 bytes are trailing */
    put_le(c, 83, 11, 8);
    put_le(c, 24, SL_WIRE_HELLO_RESHAPE, 4);
    expect_proto(c, 91, "HELLO header: 24 trailing bytes after byte 67");
    /* with FEEDERS: the modulus first, then the transition */
    m.hello.flags = SL_WIRE_HELLO_TRANSITION | SL_WIRE_HELLO_FEEDERS;
    m.hello.feeders = 4;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), 0);
    ck_assert_uint_eq(b.len, 67 + 4 + 24);
    ck_assert_uint_eq(b.data[67], 4);
    ck_assert_uint_eq(b.data[71], 2);
    ck_assert_int_eq(sl_wire_decode(b.data, b.len, &out, &err), 0);
    ck_assert_uint_eq(out.hello.feeders, 4);
    ck_assert_uint_eq(out.hello.from_step, 11);
    /* without the flag the decoder leaves the transition 0, and the
     * encoder refuses one */
    m.hello.flags = 0;
    m.hello.feeders = 0;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: HELLO header: a transition (from 2 x 3) without the TRANSITION flag");
    m.hello.from_workers = m.hello.from_replicas = 0;
    m.hello.from_epoch = m.hello.from_step = 0;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), 0);
    ck_assert_int_eq(sl_wire_decode(b.data, b.len, &out, &err), 0);
    ck_assert_uint_eq(out.hello.from_workers + out.hello.from_replicas, 0);
    ck_assert_uint_eq(out.hello.from_epoch + out.hello.from_step, 0);
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_roster_join_layout_pinned)
{
    struct sl_buf b;
    encode_sample(SL_WIRE_ROSTER, &b);
    /* header 8, feeders 4, count 2; entry: index 4, endpoint 2 + N, key 1 + K */
    ck_assert_uint_eq(b.len, 8 + 4 + 2 + (4 + 2 + 13 + 1 + 40) + (4 + 2 + 9 + 1));
    static const uint8_t head[] = {'S', 'L', 'C', '1', 4, 0, 12, 0, 4, 0, 0, 0, 2, 0, 2, 0, 0, 0, 13, 0};
    ck_assert_int_eq(memcmp(b.data, head, sizeof head), 0);
    ck_assert_int_eq(memcmp(b.data + 20, "tcp://f2:5555", 13), 0);
    ck_assert_uint_eq(b.data[33], 40);
    ck_assert_int_eq(memcmp(b.data + 34, KEY, 40), 0);
    static const uint8_t e1[] = {3, 0, 0, 0, 9, 0, 'i', 'p', 'c', ':', '/', '/', '/', 'f', '3', 0};
    ck_assert_int_eq(memcmp(b.data + 74, e1, sizeof e1), 0);
    uint8_t c[128];
    memcpy(c, b.data, b.len);
    size_t n = b.len;
    put_le(c, 8, 0, 4);
    expect_proto(c, n, "ROSTER header: feeders 0 not in 1..64");
    put_le(c, 8, 65, 4);
    expect_proto(c, n, "ROSTER header: feeders 65 not in 1..64");
    put_le(c, 8, 1, 4);
    expect_proto(c, n, "ROSTER header: count 2 exceeds feeders 1");
    put_le(c, 8, 3, 4);
    expect_proto(c, n, "ROSTER header: entry 1: index 3 not below feeders 3");
    memcpy(c, b.data, n);
    put_le(c, 74, 2, 4);
    expect_proto(c, n, "ROSTER header: entry 1: index 2 after 2 (not increasing)");
    memcpy(c, b.data, n);
    put_le(c, 18, 0, 2);
    expect_proto(c, n, "ROSTER header: empty endpoint");
    memcpy(c, b.data, n);
    put_le(c, 18, 257, 2);
    expect_proto(c, n, "ROSTER header: endpoint length 257 exceeds 256");
    memcpy(c, b.data, n);
    c[25] = 0;
    expect_proto(c, n, "ROSTER header: endpoint has a NUL byte");
    memcpy(c, b.data, n);
    c[33] = 39;
    expect_proto(c, n, "ROSTER header: key length 39 is not 0 or 40");
    memcpy(c, b.data, n);
    c[34 + 7] = '~';
    expect_proto(c, n, "ROSTER header: key byte 7 (0x7e) is not Z85");
    c[34 + 7] = '"';
    expect_proto(c, n, "ROSTER header: key byte 7 (0x22) is not Z85");
    sl_buf_free(&b);

    encode_sample(SL_WIRE_JOIN, &b);
    /* feeder, feeders, digest, job, endpoint, key */
    ck_assert_uint_eq(b.len, 8 + 4 + 4 + 8 + (2 + 5) + (2 + 13) + (1 + 40));
    static const uint8_t jh[] = {'S', 'L', 'C', '1', 4, 0, 13, 0, 2, 0,   0,   0,   4,   0,   0,  0, 8,
                                 7,   6,   5,   4,   3, 2, 1,  5, 0, 'm', 'n', 'i', 's', 't', 13, 0};
    ck_assert_int_eq(memcmp(b.data, jh, sizeof jh), 0);
    n = b.len;
    memcpy(c, b.data, n);
    put_le(c, 12, 1, 4);
    expect_proto(c, n, "JOIN header: feeders 1 not in 2..64");
    put_le(c, 12, 1000, 4);
    expect_proto(c, n, "JOIN header: feeders 1000 not in 2..64");
    put_le(c, 12, 2, 4);
    expect_proto(c, n, "JOIN header: feeder 2 not below feeders 2");
    memcpy(c, b.data, n);
    put_le(c, 24, 0, 2);
    expect_proto(c, n, "JOIN header: empty job name");
    memcpy(c, b.data, n);
    c[n - 41] = 41;
    expect_proto(c, n, "JOIN header: key length 41 is not 0 or 40");
    sl_buf_free(&b);

    /* the largest roster: 64 entries of 256-byte endpoints and keys fits a
     * header frame (64 x 307 + 14 bytes) */
    struct sl_wire_msg m;
    memset(&m, 0, sizeof m);
    m.type = SL_WIRE_ROSTER;
    m.roster.feeders = SL_WIRE_MAX_ROSTER;
    m.roster.count = SL_WIRE_MAX_ROSTER;
    char ep[SL_WIRE_MAX_ENDPOINT];
    memset(ep, 'x', sizeof ep);
    for (unsigned i = 0; i < SL_WIRE_MAX_ROSTER; i++)
        m.roster.e[i] = (struct sl_wire_roster_entry){
            .index = i, .endpoint = ep, .endpoint_len = sizeof ep, .key = KEY, .key_len = 40};
    struct sl_error err = {0};
    sl_buf_init(&b, 0);
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), 0);
    ck_assert_uint_eq(b.len, 14 + 64 * (4 + 2 + 256 + 1 + 40));
    struct sl_wire_msg out;
    ck_assert_int_eq(sl_wire_decode(b.data, b.len, &out, &err), 0);
    assert_same(&m, &out);
    m.roster.count = SL_WIRE_MAX_ROSTER + 1;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: ROSTER header: count 65 exceeds 64");
    m.roster.count = 1;
    m.roster.e[0].key_len = 12;
    ck_assert_int_eq(sl_wire_encode(&m, &b, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cannot encode: ROSTER header: key length 12 is not 0 or 40");
    sl_buf_free(&b);
    ck_assert_str_eq(sl_wire_type_name(SL_WIRE_ROSTER), "ROSTER");
    ck_assert_str_eq(sl_wire_type_name(SL_WIRE_JOIN), "JOIN");
}
END_TEST

START_TEST(test_names)
{
    ck_assert_str_eq(sl_wire_type_name(SL_WIRE_HEARTBEAT), "HEARTBEAT");
    ck_assert_str_eq(sl_wire_type_name(0), "?");
    ck_assert_str_eq(sl_wire_dtype_name(SL_WIRE_FLOAT32), "float32");
    ck_assert_str_eq(sl_wire_dtype_name(9), "?");
    ck_assert_uint_eq(sl_wire_dtype_size(SL_WIRE_INT64), 8);
    ck_assert_uint_eq(sl_wire_dtype_size(SL_WIRE_BYTES), 0);
    ck_assert_uint_eq(sl_wire_dtype_size(SL_WIRE_UINT8), 1);
}
END_TEST

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

START_TEST(test_random_damage)
{
    /* flip 1-4 random bytes, maybe cut or extend; the decoder returns 0 or
     * SL_EPROTO, and whatever it accepts re-encodes to the same bytes */
    uint64_t seed = 42;
    size_t accepted = 0, refused = 0;
    for (size_t i = 0; i < NTYPES; i++) {
        struct sl_buf b;
        encode_sample(ALL_TYPES[i], &b);
        for (int iter = 0; iter < 20000; iter++) {
            size_t n = b.len;
            uint64_t r = rng_next(&seed);
            if (r % 8 == 0)
                n = (size_t)(rng_next(&seed) % (b.len + 1));
            else if (r % 8 == 1)
                n = b.len + 1 + (size_t)(rng_next(&seed) % 16);
            uint8_t *copy = sl_malloc(n);
            for (size_t k = 0; k < n; k++)
                copy[k] = k < b.len ? b.data[k] : (uint8_t)rng_next(&seed);
            int flips = 1 + (int)(rng_next(&seed) % 4);
            for (int f = 0; f < flips && n > 0; f++)
                copy[rng_next(&seed) % n] ^= (uint8_t)(1 + rng_next(&seed) % 255);
            struct sl_wire_msg m;
            struct sl_error err = {0};
            int rc = sl_wire_decode(copy, n, &m, &err);
            ck_assert(rc == 0 || rc == SL_EPROTO);
            if (rc == 0) {
                struct sl_buf again;
                sl_buf_init(&again, 0);
                ck_assert_msg(sl_wire_encode(&m, &again, &err) == 0, "%s", err.msg);
                ck_assert_uint_eq(again.len, n);
                ck_assert_int_eq(memcmp(again.data, copy, n), 0);
                sl_buf_free(&again);
                accepted++;
            } else {
                ck_assert(err.msg[0] != '\0');
                refused++;
            }
            sl_free(copy);
        }
        sl_buf_free(&b);
    }
    ck_assert_uint_gt(accepted, 0);
    ck_assert_uint_gt(refused, 0);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_wire");
    TCase *tc = tcase_create("wire");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_round_trip_every_type);
    tcase_add_test(tc, test_round_trip_extremes);
    tcase_add_test(tc, test_hello_layout_pinned);
    tcase_add_test(tc, test_stats_layout_pinned);
    tcase_add_test(tc, test_stats_map_hostile);
    tcase_add_test(tc, test_half_dtypes);
    tcase_add_test(tc, test_piece_layout_pinned);
    tcase_add_test(tc, test_status_layout_pinned);
    tcase_add_test(tc, test_shm_piece);
    tcase_add_test(tc, test_shm_welcome);
    tcase_add_test(tc, test_fixed_sizes);
    tcase_add_test(tc, test_every_truncation);
    tcase_add_test(tc, test_trailing_bytes);
    tcase_add_test(tc, test_limits_exact_messages);
    tcase_add_test(tc, test_header_size_limit);
    tcase_add_test(tc, test_encoder_refuses);
    tcase_add_test(tc, test_check_body_and_piece);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_hello_feeders);
    tcase_add_test(tc, test_hello_transition);
    tcase_add_test(tc, test_roster_join_layout_pinned);
    tcase_add_test(tc, test_random_damage);
    suite_add_tcase(s, tc);
    return s;
}
