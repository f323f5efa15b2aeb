/* train_stage: two slots, used as a FIFO of depth TRAIN_STAGE_SLOTS.
 *
 * `head` is the oldest staged slot and `count` how many are staged; put
 * fills slot (head + count) % SLOTS and get empties slot head. Slot k copies
 * on the device's stream k, and a slot only becomes free again through get,
 * which has synced its stream: so when put memcpy's into a slot's pinned
 * buffers, no earlier copy can still be reading them, and no per-step
 * bookkeeping beyond head and count is needed.
 *
 * Each slot keeps a ready-made struct train_staged whose data pointers are
 * set once at create; put fills in the piece's fields and get copies it
 * out. Every check a piece can fail is done before the first byte moves, so
 * a refused piece leaves the stager untouched. Device failures, which may
 * leave copies half queued, fail the stager for good.
 */
#include "train_stage.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "sl_alloc.h"
#include "sl_clock.h"

struct train_stage {
    const struct train_device_ops *ops; /* borrowed */
    struct train_device *dev;           /* borrowed */
    size_t ntensors;
    size_t cap[SL_WIRE_MAX_TENSORS];
    void *pinned[TRAIN_STAGE_SLOTS][SL_WIRE_MAX_TENSORS]; /* owned; NULL when cap is 0 */
    struct train_staged view[TRAIN_STAGE_SLOTS];          /* t[i].data: owned device buffers */
    unsigned head, count;
    int failed; /* 0, or the code of the device error that failed it */
    char failure[SL_ERROR_MSG_MAX];
    struct train_stage_stats stats;
};

/* Record a device error for good; returns its code. */
static int fail(struct train_stage *st, int rc, struct sl_error *err)
{
    st->failed = rc;
    snprintf(st->failure, sizeof st->failure, "%s", err->msg);
    return rc;
}

static int refuse_failed(const struct train_stage *st, const char *call, struct sl_error *err)
{
    return sl_error_set(err, st->failed, "%s: stager failed earlier: %s", call, st->failure);
}

int train_stage_create(struct train_stage **out, const struct train_device_ops *ops, struct train_device *dev,
                       const size_t *tensor_capacity, size_t ntensors, struct sl_error *err)
{
    if (out == NULL)
        return sl_error_set(err, SL_EINVAL, "train_stage_create: out is NULL");
    *out = NULL;
    if (ops == NULL || dev == NULL || (tensor_capacity == NULL && ntensors > 0))
        return sl_error_set(err, SL_EINVAL, "train_stage_create: %s is NULL",
                            ops == NULL   ? "ops"
                            : dev == NULL ? "dev"
                                          : "tensor_capacity");
    if (ntensors > SL_WIRE_MAX_TENSORS)
        return sl_error_set(err, SL_EINVAL, "train_stage_create: %zu tensors (at most %d)", ntensors,
                            SL_WIRE_MAX_TENSORS);
    struct train_stage *st = sl_calloc(1, sizeof *st);
    if (st == NULL)
        return sl_error_set(err, SL_ENOMEM, "train_stage_create: out of memory (%zu bytes)", sizeof *st);
    st->ops = ops;
    st->dev = dev;
    st->ntensors = ntensors;
    for (size_t i = 0; i < ntensors; i++)
        st->cap[i] = tensor_capacity[i];
    for (int k = 0; k < TRAIN_STAGE_SLOTS; k++) {
        st->view[k].ntensors = ntensors;
        for (size_t i = 0; i < ntensors; i++) {
            if (st->cap[i] == 0)
                continue;
            int rc = ops->alloc_pinned(dev, st->cap[i], &st->pinned[k][i], err);
            if (rc == 0)
                rc = ops->alloc_device(dev, st->cap[i], &st->view[k].t[i].data, err);
            if (rc != 0) {
                sl_error_prefix(err, "train_stage_create: tensor %zu slot %d: ", i, k);
                train_stage_destroy(st);
                return rc;
            }
        }
    }
    *out = st;
    return 0;
}

void train_stage_destroy(struct train_stage *st)
{
    if (st == NULL)
        return;
    /* A failed stager may have copies queued that still read the pinned
     * buffers; a sync error here has nobody left to tell. */
    for (int k = 0; k < TRAIN_STAGE_SLOTS; k++) {
        int rc = st->ops->sync(st->dev, k, NULL);
        (void)rc;
    }
    for (int k = 0; k < TRAIN_STAGE_SLOTS; k++) {
        for (size_t i = 0; i < st->ntensors; i++) {
            st->ops->free_pinned(st->dev, st->pinned[k][i]);
            st->ops->free_device(st->dev, st->view[k].t[i].data);
        }
    }
    sl_free(st);
}

/* Everything that can be wrong with a piece, before anything moves. */
static int check_piece(const struct train_stage *st, const struct client_piece *p, struct sl_error *err)
{
    if (p->ntensors != st->ntensors)
        return sl_error_set(err, SL_EINVAL, "train_stage_put: piece %" PRIu64 " has %zu tensors, the stager %zu",
                            p->seq, p->ntensors, st->ntensors);
    for (size_t i = 0; i < p->ntensors; i++) {
        const struct client_tensor *t = &p->t[i];
        const char *name = t->name != NULL ? t->name : "";
        if (t->rank < 0 || t->rank > SL_WIRE_MAX_PIECE_RANK)
            return sl_error_set(err, SL_EINVAL, "train_stage_put: tensor %zu '%s': rank %d (expected 0..%d)", i, name,
                                t->rank, SL_WIRE_MAX_PIECE_RANK);
        if (t->bytes > st->cap[i])
            return sl_error_set(err, SL_EINVAL,
                                "train_stage_put: tensor %zu '%s': %" PRIu64
                                " bytes exceed the slot capacity of %zu bytes",
                                i, name, t->bytes, st->cap[i]);
        if (t->bytes > 0 && t->data == NULL)
            return sl_error_set(err, SL_EINVAL, "train_stage_put: tensor %zu '%s': %" PRIu64 " bytes at NULL", i, name,
                                t->bytes);
    }
    return 0;
}

int train_stage_put(struct train_stage *st, const struct client_piece *p, struct sl_error *err)
{
    if (st == NULL || p == NULL)
        return sl_error_set(err, SL_EINVAL, "train_stage_put: %s is NULL", st == NULL ? "stager" : "piece");
    if (st->failed != 0)
        return refuse_failed(st, "train_stage_put", err);
    if (st->count == TRAIN_STAGE_SLOTS)
        return sl_error_set(err, SL_EINVAL,
                            "train_stage_put: %d pieces already staged and not taken "
                            "(call train_stage_get before the next put)",
                            TRAIN_STAGE_SLOTS);
    int rc = check_piece(st, p, err);
    if (rc != 0)
        return rc;

    const unsigned k = (st->head + st->count) % TRAIN_STAGE_SLOTS;
    struct train_staged *v = &st->view[k];
    v->epoch = p->epoch;
    v->step = p->step;
    v->seq = p->seq;
    v->worker = p->worker;
    v->replica = p->replica;
    v->rows = p->rows;
    v->flags = p->flags;

    /* The pack copy is the one that lets the caller release the network
     * frames before the device has seen a byte. */
    uint64_t t0 = sl_clock_ns();
    for (size_t i = 0; i < p->ntensors; i++) {
        const struct client_tensor *t = &p->t[i];
        struct train_staged_tensor *d = &v->t[i];
        d->dtype = t->dtype;
        d->rank = t->rank;
        memset(d->dims, 0, sizeof d->dims);
        memcpy(d->dims, t->dims, (size_t)t->rank * sizeof t->dims[0]);
        d->bytes = t->bytes;
        if (t->bytes > 0)
            memcpy(st->pinned[k][i], t->data, (size_t)t->bytes);
    }
    st->stats.pack_s += (double)(sl_clock_ns() - t0) / 1e9;

    struct sl_error local = {0};
    struct sl_error *e = err != NULL ? err : &local;
    uint64_t queued = 0;
    for (size_t i = 0; i < p->ntensors; i++) {
        if (v->t[i].bytes == 0)
            continue;
        rc = st->ops->copy_h2d_async(st->dev, v->t[i].data, st->pinned[k][i], (size_t)v->t[i].bytes, (int)k, e);
        if (rc != 0) {
            sl_error_prefix(e, "train_stage_put: piece %" PRIu64 " tensor %zu '%s': ", p->seq, i,
                            p->t[i].name != NULL ? p->t[i].name : "");
            return fail(st, rc, e);
        }
        queued += v->t[i].bytes;
    }
    st->count++;
    st->stats.puts++;
    st->stats.bytes_h2d += queued;
    return 0;
}

int train_stage_get(struct train_stage *st, struct train_staged *out, struct sl_error *err)
{
    if (st == NULL || out == NULL)
        return sl_error_set(err, SL_EINVAL, "train_stage_get: %s is NULL", st == NULL ? "stager" : "out");
    if (st->failed != 0)
        return refuse_failed(st, "train_stage_get", err);
    if (st->count == 0)
        return sl_error_set(err, SL_EINVAL, "train_stage_get: nothing staged (call train_stage_put before each get)");
    const unsigned k = st->head;
    struct sl_error local = {0};
    struct sl_error *e = err != NULL ? err : &local;
    uint64_t t0 = sl_clock_ns();
    int rc = st->ops->sync(st->dev, (int)k, e);
    st->stats.sync_s += (double)(sl_clock_ns() - t0) / 1e9;
    if (rc != 0) {
        sl_error_prefix(e, "train_stage_get: piece %" PRIu64 ": ", st->view[k].seq);
        return fail(st, rc, e);
    }
    *out = st->view[k];
    st->head = (k + 1) % TRAIN_STAGE_SLOTS;
    st->count--;
    st->stats.gets++;
    return 0;
}

size_t train_stage_outstanding(const struct train_stage *st)
{
    return st != NULL ? st->count : 0;
}

void train_stage_stats(const struct train_stage *st, struct train_stage_stats *out)
{
    if (out == NULL)
        return;
    if (st == NULL) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = st->stats;
}
