/* train_stage: double-buffered staging of pieces onto one replica's device.
 *
 * A stager owns two slots. Each slot holds, per tensor of the schema, a
 * page-locked host buffer (alloc_pinned) and a device buffer (alloc_device),
 * all allocated at create: put and get allocate nothing. Slot k uses the
 * device's copy stream k, so the host-to-device copy of step s+1 runs while
 * the step on s computes.
 *
 * train_stage_put copies a received piece into the next free slot's pinned
 * buffers (after which the piece's network frames may be released) and
 * queues the copies to the device; train_stage_get waits for the oldest
 * staged slot's copies and hands out its device pointers.
 *
 * Call order (enforced; a violation is SL_EINVAL and changes nothing):
 * the slots are a FIFO of depth 2. put needs a free slot (fewer than 2
 * pieces put and not yet taken by get); get needs a staged piece, and
 * returns pieces in the order they were put. The overlapping order is
 *
 *     put(0) put(1) get(0) [step 0] put(2) get(1) [step 1] put(3) get(2) ...
 *
 * so the copy of s+1 runs during step s; the plain order put(0) get(0)
 * put(1) get(1) ... is allowed too. A third put with two pieces
 * outstanding, or a get with none, is refused.
 *
 * View lifetime: what get(s) hands out is valid until put(s+2), the put
 * that refills its slot. Before that put the caller must be done with the
 * view's device buffers, including device work still reading them (sync
 * the compute stream first): put(s+2) overwrites them asynchronously.
 *
 * Errors: an argument or order error (SL_EINVAL) is detected before any copy
 * and leaves the stager as it was. A device error from copy_h2d_async or
 * sync (SL_EDEVICE, SL_EINVAL from the backend) leaves the stager failed:
 * every later put and get returns that code again ("stager failed earlier:
 * <first message>"); only destroy remains.
 *
 * Thread-safe: no; one owner thread (the replica's), like the device.
 */
#ifndef TRAIN_STAGE_H
#define TRAIN_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"
#include "sl_wire.h"
#include "train_device.h"
#include "client_piece.h"

/* Pieces in flight per stager: one computing, one copying. */
#define TRAIN_STAGE_SLOTS TRAIN_DEVICE_STREAMS

/* One staged tensor. `data` is device memory (host memory on the cpu
 * backend), borrowed from the stager for the view's lifetime (see the top
 * of this file); NULL only when the tensor's slot capacity is 0. `bytes` is
 * what the piece carried (<= capacity); the rest of the buffer is stale. */
struct train_staged_tensor {
    uint8_t dtype; /* enum sl_wire_dtype */
    int rank;      /* 0..SL_WIRE_MAX_PIECE_RANK */
    int64_t dims[SL_WIRE_MAX_PIECE_RANK];
    void *data;
    uint64_t bytes;
};

/* A staged piece, caller-owned; the piece's header fields are copied, the
 * tensor data pointers are borrowed. Tensor names are not kept: tensor i is
 * the schema's tensor i. */
struct train_staged {
    uint64_t epoch, step, seq;
    uint32_t worker, replica;
    uint32_t rows;  /* 0: an empty piece (every tensor 0 bytes) */
    uint32_t flags; /* SL_WIRE_PIECE_* */
    size_t ntensors;
    struct train_staged_tensor t[SL_WIRE_MAX_TENSORS];
};

/* Counters since create, for the step metrics (H2D GB/s, input stall). */
struct train_stage_stats {
    uint64_t puts, gets;
    uint64_t bytes_h2d; /* bytes queued to the device by successful puts */
    double pack_s;      /* time memcpy'ing pieces into pinned buffers */
    double sync_s;      /* time get spent waiting for copies (the stall) */
};

struct train_stage;

/* Create a stager for `ntensors` (0..SL_WIRE_MAX_TENSORS) tensors on an
 * open device. tensor_capacity[i] is the byte size of tensor i's buffers in
 * each slot (the caller derives it from the schema and the largest piece's
 * rows); 0 gives that tensor no buffers, so only empty tensors fit.
 * `ops` and `dev` are borrowed and must outlive the stager; `ops` is the
 * table every device call goes through (normally train_device_ops_of(dev);
 * a wrapper table is allowed, for tracing and tests). tensor_capacity is
 * copied. On success *out is owned by the caller until destroy.
 * 0, SL_EINVAL (NULL argument, too many tensors), SL_ENOMEM, SL_EDEVICE
 * (the backend's allocation errors, prefixed "train_stage_create: tensor
 * <i> slot <k>: "). Blocking and slow on cuda (pinned allocation): call at
 * start. */
int train_stage_create(struct train_stage **out, const struct train_device_ops *ops, struct train_device *dev,
                       const size_t *tensor_capacity, size_t ntensors, struct sl_error *err) SL_MUST_CHECK;

/* Waits for copies still in flight, then frees every buffer. NULL is a
 * no-op. Call before closing the device. */
void train_stage_destroy(struct train_stage *st);

/* Stage piece `p` (borrowed for the call only) into the next free slot: its
 * tensors are memcpy'd into the slot's pinned buffers, then copy_h2d_async
 * is queued for each non-empty tensor on the slot's stream. Returns when the
 * copies are queued (cpu: done); `p` and its frames may be released at once.
 * SL_EINVAL, changing nothing, when: the order forbids a put (2
 * outstanding), p->ntensors differs from the stager's, a tensor's rank is
 * out of range, a non-empty tensor has NULL data, or a tensor exceeds its
 * capacity ("tensor 2 'label': 4096 bytes exceed the slot capacity of 1024
 * bytes"). A device error fails the stager (see above). */
int train_stage_put(struct train_stage *st, const struct client_piece *p, struct sl_error *err) SL_MUST_CHECK;

/* Wait until the oldest staged piece is on the device (sync of its slot's
 * stream; the wait counts in sync_s) and describe it in *out (see "View
 * lifetime" above). SL_EINVAL when nothing is staged; a device error fails
 * the stager. */
int train_stage_get(struct train_stage *st, struct train_staged *out, struct sl_error *err) SL_MUST_CHECK;

/* Pieces put and not yet taken by get: 0, 1 or 2. */
size_t train_stage_outstanding(const struct train_stage *st);

void train_stage_stats(const struct train_stage *st, struct train_stage_stats *out);

#endif
