/* train_stage on the cpu backend: exact bytes through both slots, the
 * enforced call order, view lifetime, empty pieces, refused pieces, the
 * counters, allocation failures at create and device failures (through a
 * wrapper around the cpu ops table). */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "sl_alloc.h"
#include "sl_test.h"
#include "train_stage.h"

/* A schema of three tensors: label (int64, rows), image (uint8-ish bytes
 * as float32 rows x 2 x 3), weight (float32, rows). */
enum { NT = 3, MAX_ROWS = 8 };
static const size_t caps[NT] = {MAX_ROWS * 8, MAX_ROWS * 2 * 3 * 4, MAX_ROWS * 4};
static const char *const names[NT] = {"label", "image", "weight"};

/* Backing store for hand-built pieces: one buffer per tensor per piece. */
struct piece_buf {
    struct client_piece p;
    unsigned char data[NT][MAX_ROWS * 2 * 3 * 4];
};

/* Piece `seq` with `rows` rows; byte j of tensor i is a function of
 * (seq, i, j) so any mix-up between pieces, tensors or offsets shows. */
static unsigned char pattern(uint64_t seq, size_t i, size_t j)
{
    return (unsigned char)(seq * 131u + i * 37u + j * 7u + 1u);
}

static void make_piece(struct piece_buf *b, uint64_t seq, uint32_t rows)
{
    memset(&b->p, 0, sizeof b->p);
    b->p.epoch = 2;
    b->p.step = seq / 2;
    b->p.seq = seq;
    b->p.worker = 1;
    b->p.replica = (uint32_t)(seq % 2);
    b->p.rows = rows;
    b->p.flags = rows == 0 ? 1u : 0u;
    b->p.ntensors = NT;
    const size_t row_bytes[NT] = {8, 2 * 3 * 4, 4};
    const uint8_t dtypes[NT] = {SL_WIRE_INT64, SL_WIRE_FLOAT32, SL_WIRE_FLOAT32};
    for (size_t i = 0; i < NT; i++) {
        struct client_tensor *t = &b->p.t[i];
        t->name = names[i];
        t->dtype = dtypes[i];
        t->rank = i == 1 ? 3 : 1;
        t->dims[0] = rows;
        if (i == 1) {
            t->dims[1] = 2;
            t->dims[2] = 3;
        }
        t->bytes = rows * row_bytes[i];
        for (size_t j = 0; j < t->bytes; j++)
            b->data[i][j] = pattern(seq, i, j);
        t->data = t->bytes > 0 ? b->data[i] : NULL;
    }
}

/* Everything get handed out matches the piece that was put. */
static void check_staged(const struct train_staged *s, uint64_t seq, uint32_t rows)
{
    ck_assert_uint_eq(s->seq, seq);
    ck_assert_uint_eq(s->epoch, 2);
    ck_assert_uint_eq(s->step, seq / 2);
    ck_assert_uint_eq(s->worker, 1);
    ck_assert_uint_eq(s->replica, seq % 2);
    ck_assert_uint_eq(s->rows, rows);
    ck_assert_uint_eq(s->flags, rows == 0 ? 1u : 0u);
    ck_assert_uint_eq(s->ntensors, NT);
    const size_t row_bytes[NT] = {8, 2 * 3 * 4, 4};
    for (size_t i = 0; i < NT; i++) {
        const struct train_staged_tensor *t = &s->t[i];
        ck_assert_ptr_nonnull(t->data);
        ck_assert_uint_eq((uintptr_t)t->data % TRAIN_DEVICE_ALIGN, 0);
        ck_assert_uint_eq(t->dtype, i == 0 ? SL_WIRE_INT64 : SL_WIRE_FLOAT32);
        ck_assert_int_eq(t->rank, i == 1 ? 3 : 1);
        ck_assert_int_eq(t->dims[0], rows);
        if (i == 1) {
            ck_assert_int_eq(t->dims[1], 2);
            ck_assert_int_eq(t->dims[2], 3);
            ck_assert_int_eq(t->dims[3], 0);
        } else {
            ck_assert_int_eq(t->dims[1], 0);
        }
        ck_assert_uint_eq(t->bytes, rows * row_bytes[i]);
        const unsigned char *d = t->data;
        for (size_t j = 0; j < t->bytes; j++)
            ck_assert_msg(d[j] == pattern(seq, i, j), "seq %" PRIu64 " tensor %zu byte %zu: %u", seq, i, j,
                          (unsigned)d[j]);
    }
}

/* 3, 5, 1, 6, 2, 7, 3, 8 (full), 4, 0 (empty), 5, ... */
static uint32_t rows_of(uint64_t k)
{
    return (uint32_t)((k * 5 + 3) % (MAX_ROWS + 1));
}

static struct train_stage *make_stager(const struct train_device_ops **ops, struct train_device **dev)
{
    struct sl_error err = {0};
    *ops = train_device_find("cpu");
    ck_assert_ptr_nonnull(*ops);
    ck_assert_int_eq((*ops)->open(dev, 0, &err), 0);
    struct train_stage *st = NULL;
    int rc = train_stage_create(&st, *ops, *dev, caps, NT, &err);
    ck_assert_msg(rc == 0, "create: %s", err.msg);
    ck_assert_ptr_nonnull(st);
    ck_assert_uint_eq(train_stage_outstanding(st), 0);
    return st;
}

static void put_ok(struct train_stage *st, const struct piece_buf *b)
{
    struct sl_error err = {0};
    int rc = train_stage_put(st, &b->p, &err);
    ck_assert_msg(rc == 0, "put %" PRIu64 ": %s", b->p.seq, err.msg);
}

static void get_ok(struct train_stage *st, struct train_staged *s)
{
    struct sl_error err = {0};
    int rc = train_stage_get(st, s, &err);
    ck_assert_msg(rc == 0, "get: %s", err.msg);
}

/* The overlapping order over many steps: put(0) put(1) get(0) put(2)
 * get(1) ... Rows vary, full pieces included; the two slots alternate. */
START_TEST(test_pipeline)
{
    const struct train_device_ops *ops;
    struct train_device *dev;
    struct train_stage *st = make_stager(&ops, &dev);
    enum { STEPS = 11 };
    static struct piece_buf b[2];
    struct train_staged s;
    const void *slot_ptr[2] = {NULL, NULL};
    make_piece(&b[0], 0, rows_of(0));
    put_ok(st, &b[0]);
    for (uint64_t k = 0; k < STEPS; k++) {
        if (k + 1 < STEPS) {
            /* piece k+1 is put while piece k is still outstanding */
            make_piece(&b[(k + 1) % 2], k + 1, rows_of(k + 1));
            put_ok(st, &b[(k + 1) % 2]);
            ck_assert_uint_eq(train_stage_outstanding(st), 2);
        }
        get_ok(st, &s);
        check_staged(&s, k, rows_of(k));
        /* slot k % 2's device buffer, stable for the stager's life */
        if (k < 2)
            slot_ptr[k] = s.t[1].data;
        else
            ck_assert_ptr_eq(s.t[1].data, slot_ptr[k % 2]);
    }
    ck_assert_ptr_ne(slot_ptr[0], slot_ptr[1]);
    ck_assert_uint_eq(train_stage_outstanding(st), 0);
    train_stage_destroy(st);
    ops->close(dev);
}
END_TEST

/* The plain order put get put get, and FIFO order across both slots. */
START_TEST(test_plain_order)
{
    const struct train_device_ops *ops;
    struct train_device *dev;
    struct train_stage *st = make_stager(&ops, &dev);
    static struct piece_buf b;
    struct train_staged s;
    for (uint64_t k = 0; k < 5; k++) {
        make_piece(&b, k, (uint32_t)(k + 1));
        put_ok(st, &b);
        ck_assert_uint_eq(train_stage_outstanding(st), 1);
        get_ok(st, &s);
        check_staged(&s, k, (uint32_t)(k + 1));
        ck_assert_uint_eq(train_stage_outstanding(st), 0);
    }
    train_stage_destroy(st);
    ops->close(dev);
}
END_TEST

/* Two outstanding at most: a third put is refused until a get; a get with
 * nothing staged is refused; refusals change nothing. */
START_TEST(test_order_enforced)
{
    const struct train_device_ops *ops;
    struct train_device *dev;
    struct train_stage *st = make_stager(&ops, &dev);
    static struct piece_buf b[3];
    struct train_staged s;
    struct sl_error err = {0};
    ck_assert_int_eq(train_stage_get(st, &s, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "train_stage_get: nothing staged (call train_stage_put before each get)");
    for (uint64_t k = 0; k < 3; k++)
        make_piece(&b[k], k, (uint32_t)(k + 2));
    put_ok(st, &b[0]);
    put_ok(st, &b[1]);
    ck_assert_int_eq(train_stage_put(st, &b[2].p, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "train_stage_put: 2 pieces already staged and not taken "
                              "(call train_stage_get before the next put)");
    ck_assert_uint_eq(train_stage_outstanding(st), 2);
    /* the refused put overwrote neither slot */
    get_ok(st, &s);
    check_staged(&s, 0, 2);
    put_ok(st, &b[2]);
    ck_assert_int_eq(train_stage_put(st, &b[2].p, &err), SL_EINVAL);
    get_ok(st, &s);
    check_staged(&s, 1, 3);
    get_ok(st, &s);
    check_staged(&s, 2, 4);
    ck_assert_int_eq(train_stage_get(st, &s, &err), SL_EINVAL);
    ck_assert_uint_eq(train_stage_outstanding(st), 0);
    struct train_stage_stats stats;
    train_stage_stats(st, &stats);
    ck_assert_uint_eq(stats.puts, 3);
    ck_assert_uint_eq(stats.gets, 3);
    /* NULL arguments */
    ck_assert_int_eq(train_stage_put(NULL, &b[0].p, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "train_stage_put: stager is NULL");
    ck_assert_int_eq(train_stage_put(st, NULL, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "train_stage_put: piece is NULL");
    ck_assert_int_eq(train_stage_get(NULL, &s, &err), SL_EINVAL);
    ck_assert_int_eq(train_stage_get(st, NULL, NULL), SL_EINVAL);
    ck_assert_uint_eq(train_stage_outstanding(NULL), 0);
    train_stage_destroy(st);
    train_stage_destroy(NULL);
    ops->close(dev);
}
END_TEST

/* The pack copy: once put returns, the piece's frames may be reused; the
 * view from get(s) survives put(s+1) and get(s+1), and put(s+2) refills it. */
START_TEST(test_view_lifetime)
{
    const struct train_device_ops *ops;
    struct train_device *dev;
    struct train_stage *st = make_stager(&ops, &dev);
    static struct piece_buf b;
    struct train_staged s0, s1;
    make_piece(&b, 0, 4);
    put_ok(st, &b);
    make_piece(&b, 1, 5); /* overwrites the frames piece 0 came from */
    put_ok(st, &b);
    memset(b.data, 0xee, sizeof b.data);
    get_ok(st, &s0);
    check_staged(&s0, 0, 4);
    get_ok(st, &s1);
    check_staged(&s1, 1, 5);
    check_staged(&s0, 0, 4);
    make_piece(&b, 2, 6);
    put_ok(st, &b); /* put(2) reuses piece 0's slot */
    check_staged(&s1, 1, 5);
    const unsigned char *d = s0.t[0].data;
    ck_assert_uint_eq(d[0], pattern(2, 0, 0));
    train_stage_destroy(st);
    ops->close(dev);
}
END_TEST

/* Empty pieces: rows 0, every tensor 0 bytes with NULL data; mixed with
 * full ones; a zero-capacity tensor; a stager with no tensors. */
START_TEST(test_empty)
{
    const struct train_device_ops *ops;
    struct train_device *dev;
    struct train_stage *st = make_stager(&ops, &dev);
    static struct piece_buf b;
    struct train_staged s;
    struct train_stage_stats stats;
    make_piece(&b, 0, 0);
    for (size_t i = 0; i < NT; i++)
        ck_assert_ptr_null(b.p.t[i].data);
    put_ok(st, &b);
    make_piece(&b, 1, MAX_ROWS);
    put_ok(st, &b);
    get_ok(st, &s);
    check_staged(&s, 0, 0);
    make_piece(&b, 2, 0);
    put_ok(st, &b);
    get_ok(st, &s);
    check_staged(&s, 1, MAX_ROWS);
    get_ok(st, &s);
    check_staged(&s, 2, 0);
    train_stage_stats(st, &stats);
    ck_assert_uint_eq(stats.bytes_h2d, MAX_ROWS * (8 + 24 + 4));
    train_stage_destroy(st);

    /* capacity 0: no buffers, only empty tensors fit */
    struct sl_error err = {0};
    const size_t zcaps[2] = {0, 16};
    ck_assert_int_eq(train_stage_create(&st, ops, dev, zcaps, 2, &err), 0);
    struct client_piece p;
    memset(&p, 0, sizeof p);
    p.ntensors = 2;
    p.rows = 2;
    p.t[0].rank = 1;
    p.t[1].rank = 1;
    p.t[1].dims[0] = 2;
    const unsigned char two[16] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};
    p.t[1].data = two;
    p.t[1].bytes = sizeof two;
    ck_assert_int_eq(train_stage_put(st, &p, &err), 0);
    get_ok(st, &s);
    ck_assert_ptr_null(s.t[0].data);
    ck_assert_uint_eq(s.t[0].bytes, 0);
    ck_assert_int_eq(memcmp(s.t[1].data, two, sizeof two), 0);
    p.t[0].data = two;
    p.t[0].bytes = 1;
    p.t[0].name = "z";
    ck_assert_int_eq(train_stage_put(st, &p, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "train_stage_put: tensor 0 'z': 1 bytes exceed the slot capacity of 0 bytes");
    train_stage_destroy(st);

    /* no tensors at all: rows and header still travel */
    ck_assert_int_eq(train_stage_create(&st, ops, dev, NULL, 0, &err), 0);
    memset(&p, 0, sizeof p);
    p.seq = 41;
    p.rows = 0;
    ck_assert_int_eq(train_stage_put(st, &p, &err), 0);
    get_ok(st, &s);
    ck_assert_uint_eq(s.seq, 41);
    ck_assert_uint_eq(s.ntensors, 0);
    train_stage_destroy(st);
    ops->close(dev);
}
END_TEST

/* A tensor over its capacity is refused with its name, size and capacity;
 * exactly the capacity fits; the stager is unchanged by refusals. */
START_TEST(test_oversize)
{
    const struct train_device_ops *ops;
    struct train_device *dev;
    struct train_stage *st = make_stager(&ops, &dev);
    static struct piece_buf b;
    static unsigned char big[1024];
    struct sl_error err = {0};
    struct train_staged s;
    make_piece(&b, 7, MAX_ROWS);
    b.p.t[2].data = big;
    b.p.t[2].bytes = caps[2] + 1;
    ck_assert_int_eq(train_stage_put(st, &b.p, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "train_stage_put: tensor 2 'weight': 33 bytes exceed the slot capacity of 32 bytes");
    b.p.t[1].bytes = 1000;
    ck_assert_int_eq(train_stage_put(st, &b.p, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "train_stage_put: tensor 1 'image': 1000 bytes exceed the slot capacity of 192 bytes");
    b.p.t[2].name = NULL;
    b.p.t[1].bytes = caps[1];
    ck_assert_int_eq(train_stage_put(st, &b.p, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "train_stage_put: tensor 2 '': 33 bytes exceed the slot capacity of 32 bytes");
    ck_assert_uint_eq(train_stage_outstanding(st), 0);
    struct train_stage_stats stats;
    train_stage_stats(st, &stats);
    ck_assert_uint_eq(stats.puts, 0);
    ck_assert_uint_eq(stats.bytes_h2d, 0);
    make_piece(&b, 7, MAX_ROWS); /* exactly at capacity */
    put_ok(st, &b);
    get_ok(st, &s);
    check_staged(&s, 7, MAX_ROWS);
    train_stage_destroy(st);
    ops->close(dev);
}
END_TEST

/* Malformed pieces and create arguments. */
START_TEST(test_bad_arguments)
{
    const struct train_device_ops *ops;
    struct train_device *dev;
    struct train_stage *st = make_stager(&ops, &dev);
    static struct piece_buf b;
    struct sl_error err = {0};
    make_piece(&b, 9, 2);
    b.p.ntensors = 2;
    ck_assert_int_eq(train_stage_put(st, &b.p, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "train_stage_put: piece 9 has 2 tensors, the stager 3");
    make_piece(&b, 9, 2);
    b.p.t[1].rank = SL_WIRE_MAX_PIECE_RANK + 1;
    ck_assert_int_eq(train_stage_put(st, &b.p, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "train_stage_put: tensor 1 'image': rank 10 (expected 0..9)");
    b.p.t[1].rank = -1;
    ck_assert_int_eq(train_stage_put(st, &b.p, &err), SL_EINVAL);
    make_piece(&b, 9, 2);
    b.p.t[0].data = NULL;
    ck_assert_int_eq(train_stage_put(st, &b.p, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "train_stage_put: tensor 0 'label': 16 bytes at NULL");
    ck_assert_uint_eq(train_stage_outstanding(st), 0);
    train_stage_destroy(st);

    struct train_stage *bad = (struct train_stage *)&err;
    ck_assert_int_eq(train_stage_create(&bad, NULL, dev, caps, NT, &err), SL_EINVAL);
    ck_assert_ptr_null(bad);
    ck_assert_str_eq(err.msg, "train_stage_create: ops is NULL");
    ck_assert_int_eq(train_stage_create(&bad, ops, NULL, caps, NT, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "train_stage_create: dev is NULL");
    ck_assert_int_eq(train_stage_create(&bad, ops, dev, NULL, NT, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "train_stage_create: tensor_capacity is NULL");
    ck_assert_int_eq(train_stage_create(NULL, ops, dev, caps, NT, &err), SL_EINVAL);
    static size_t many[SL_WIRE_MAX_TENSORS + 1];
    ck_assert_int_eq(train_stage_create(&bad, ops, dev, many, SL_WIRE_MAX_TENSORS + 1, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "train_stage_create: 65 tensors (at most 64)");
    ck_assert_ptr_null(bad);
    ck_assert_int_eq(train_stage_create(&bad, ops, dev, many, SL_WIRE_MAX_TENSORS, NULL), 0);
    train_stage_destroy(bad);
    ops->close(dev);
}
END_TEST

/* Counters: bytes queued to the device by successful puts only; time in
 * sync and in the pack copy accumulate, never negative. */
START_TEST(test_counters)
{
    const struct train_device_ops *ops;
    struct train_device *dev;
    struct train_stage *st = make_stager(&ops, &dev);
    static struct piece_buf b;
    struct train_staged s;
    struct train_stage_stats stats;
    struct sl_error err = {0};
    train_stage_stats(st, &stats);
    ck_assert_uint_eq(stats.puts, 0);
    ck_assert_uint_eq(stats.gets, 0);
    ck_assert_uint_eq(stats.bytes_h2d, 0);
    ck_assert(stats.pack_s == 0.0 && stats.sync_s == 0.0);
    uint64_t want = 0;
    for (uint32_t k = 0; k < 6; k++) {
        make_piece(&b, k, k);
        put_ok(st, &b);
        want += (uint64_t)k * (8 + 24 + 4);
        get_ok(st, &s);
    }
    make_piece(&b, 6, MAX_ROWS);
    b.p.t[0].bytes = caps[0] + 8; /* refused: not counted */
    ck_assert_int_eq(train_stage_put(st, &b.p, &err), SL_EINVAL);
    ck_assert_int_eq(train_stage_get(st, &s, &err), SL_EINVAL);
    train_stage_stats(st, &stats);
    ck_assert_uint_eq(stats.puts, 6);
    ck_assert_uint_eq(stats.gets, 6);
    ck_assert_uint_eq(stats.bytes_h2d, want);
    ck_assert(stats.pack_s >= 0.0 && stats.sync_s >= 0.0);
    train_stage_stats(NULL, &stats);
    ck_assert_uint_eq(stats.puts, 0);
    train_stage_stats(st, NULL);
    train_stage_destroy(st);
    ops->close(dev);
}
END_TEST

/* Every allocation create makes can fail: an error, nothing leaked (ASan),
 * *out NULL; past the last one create succeeds. */
START_TEST(test_alloc_failure)
{
    const struct train_device_ops *ops = train_device_find("cpu");
    struct train_device *dev;
    struct sl_error err = {0};
    ck_assert_int_eq(ops->open(&dev, 0, &err), 0);
    int failures = 0;
    for (long n = 1;; n++) {
        struct train_stage *st = (struct train_stage *)&err;
        sl_alloc_fail_after(n);
        int rc = train_stage_create(&st, ops, dev, caps, NT, &err);
        sl_alloc_fail_reset();
        if (rc == 0) {
            train_stage_destroy(st);
            break;
        }
        failures++;
        ck_assert_int_eq(rc, SL_ENOMEM);
        ck_assert_ptr_null(st);
        if (n > 1)
            ck_assert_msg(strncmp(err.msg, "train_stage_create: tensor ", 27) == 0, "got '%s'", err.msg);
        ck_assert_msg(n < 100, "create never succeeded");
    }
    /* the stager, then a pinned and a device buffer per tensor per slot */
    ck_assert_int_eq(failures, 1 + 2 * NT * TRAIN_STAGE_SLOTS);
    ops->close(dev);
}
END_TEST

/* Device failures, through a wrapper around the cpu table: the copy or the
 * sync of call number N fails. */
static struct train_device_ops faulty;
static int copy_calls, copy_fail_at, sync_calls, sync_fail_at;

static int faulty_copy(struct train_device *d, void *dev, const void *host, size_t n, int stream, struct sl_error *err)
{
    if (++copy_calls == copy_fail_at)
        return sl_error_set(err, SL_EDEVICE, "cudaMemcpyAsync(%zu bytes) on GPU 0: unspecified launch failure", n);
    return train_device_find("cpu")->copy_h2d_async(d, dev, host, n, stream, err);
}

static int faulty_sync(struct train_device *d, int stream, struct sl_error *err)
{
    if (++sync_calls == sync_fail_at)
        return sl_error_set(err, SL_EDEVICE, "cudaStreamSynchronize(stream %d) on GPU 0: illegal address", stream);
    return train_device_find("cpu")->sync(d, stream, err);
}

static struct train_stage *make_faulty(struct train_device **dev)
{
    struct sl_error err = {0};
    faulty = *train_device_find("cpu");
    faulty.copy_h2d_async = faulty_copy;
    faulty.sync = faulty_sync;
    copy_calls = copy_fail_at = sync_calls = sync_fail_at = 0;
    ck_assert_int_eq(faulty.open(dev, 0, &err), 0);
    struct train_stage *st = NULL;
    ck_assert_int_eq(train_stage_create(&st, &faulty, *dev, caps, NT, &err), 0);
    return st;
}

START_TEST(test_copy_failure)
{
    struct train_device *dev;
    struct train_stage *st = make_faulty(&dev);
    static struct piece_buf b;
    struct train_staged s;
    struct sl_error err = {0};
    make_piece(&b, 0, 2);
    put_ok(st, &b);
    ck_assert_int_eq(copy_calls, NT);
    copy_fail_at = NT + 2; /* the second tensor of the next piece */
    make_piece(&b, 1, 2);
    ck_assert_int_eq(train_stage_put(st, &b.p, &err), SL_EDEVICE);
    ck_assert_str_eq(err.msg, "train_stage_put: piece 1 tensor 1 'image': cudaMemcpyAsync(48 bytes) on GPU 0: "
                              "unspecified launch failure");
    /* failed for good, with the first message */
    ck_assert_int_eq(train_stage_get(st, &s, &err), SL_EDEVICE);
    ck_assert_str_eq(err.msg, "train_stage_get: stager failed earlier: train_stage_put: piece 1 tensor 1 'image': "
                              "cudaMemcpyAsync(48 bytes) on GPU 0: unspecified launch failure");
    ck_assert_int_eq(train_stage_put(st, &b.p, &err), SL_EDEVICE);
    ck_assert_msg(strncmp(err.msg, "train_stage_put: stager failed earlier: ", 40) == 0, "got '%s'", err.msg);
    struct train_stage_stats stats;
    train_stage_stats(st, &stats);
    ck_assert_uint_eq(stats.puts, 1);
    ck_assert_uint_eq(stats.bytes_h2d, 2 * (8 + 24 + 4));
    train_stage_destroy(st);
    faulty.close(dev);
    /* a NULL err still fails the stager */
    st = make_faulty(&dev);
    copy_fail_at = 1;
    ck_assert_int_eq(train_stage_put(st, &b.p, NULL), SL_EDEVICE);
    ck_assert_int_eq(train_stage_get(st, &s, &err), SL_EDEVICE);
    ck_assert_str_eq(err.msg, "train_stage_get: stager failed earlier: train_stage_put: piece 1 tensor 0 'label': "
                              "cudaMemcpyAsync(16 bytes) on GPU 0: unspecified launch failure");
    train_stage_destroy(st);
    faulty.close(dev);
}
END_TEST

START_TEST(test_sync_failure)
{
    struct train_device *dev;
    struct train_stage *st = make_faulty(&dev);
    static struct piece_buf b;
    struct train_staged s;
    struct sl_error err = {0};
    make_piece(&b, 0, 1);
    put_ok(st, &b);
    make_piece(&b, 1, 1);
    put_ok(st, &b);
    get_ok(st, &s);
    check_staged(&s, 0, 1);
    sync_fail_at = sync_calls + 1;
    ck_assert_int_eq(train_stage_get(st, &s, &err), SL_EDEVICE);
    ck_assert_str_eq(err.msg, "train_stage_get: piece 1: cudaStreamSynchronize(stream 1) on GPU 0: illegal address");
    ck_assert_int_eq(train_stage_put(st, &b.p, &err), SL_EDEVICE);
    ck_assert_str_eq(err.msg, "train_stage_put: stager failed earlier: train_stage_get: piece 1: "
                              "cudaStreamSynchronize(stream 1) on GPU 0: illegal address");
    int before = sync_calls;
    train_stage_destroy(st); /* still syncs both streams before freeing */
    ck_assert_int_eq(sync_calls, before + TRAIN_STAGE_SLOTS);
    faulty.close(dev);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_stage");
    TCase *tc = tcase_create("cpu");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_pipeline);
    tcase_add_test(tc, test_plain_order);
    tcase_add_test(tc, test_order_enforced);
    tcase_add_test(tc, test_view_lifetime);
    tcase_add_test(tc, test_empty);
    tcase_add_test(tc, test_oversize);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_counters);
    tcase_add_test(tc, test_alloc_failure);
    tcase_add_test(tc, test_copy_failure);
    tcase_add_test(tc, test_sync_failure);
    suite_add_tcase(s, tc);
    return s;
}
