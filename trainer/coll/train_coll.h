/* train_coll: the trainer's collectives behind one small ops table (as
 * NCCL's net plugin or SQLite's VFS): what a step needs from the other
 * replicas (sum a float32 buffer over all of them, hand one member's buffer
 * to all, give up) apart from how the data travels.
 *
 * A collective is a group of `size` members, each holding its own handle
 * (struct train_coll *) and known by its rank 0..size-1 and nothing else:
 * the interface has no neighbours, rounds, chunks or servers, so a backend
 * moves the data as it likes.
 *
 *   backend    members                            memory  made by
 *   ---------  ---------------------------------  ------  ---------------------------
 *   "local"    the R replica threads of a worker  host    train_local_coll_open
 *                                                         (train_collective_local.h)
 *   "ring"     one per worker process, ZeroMQ     host    train_ring_coll_open
 *                                                         (train_ring.h)
 *   "nccl"     every GPU replica of every worker  device  a device kind's collectives
 *                                                         (train_backend.h), CUDA builds
 *   "composed" every replica of every worker:     host    train_coll_compose (below)
 *              local sum, then across workers,
 *              then local broadcast
 *
 * The strategy (train_strategy.h) composes them: its replica calls sum
 * through "composed" (over "local" and the across-workers collective it was
 * given, the ring today), its cross-replica calls use the across-workers
 * collective alone, and GPU replicas sum device buffers through their
 * kind's device collective ("nccl"). A parameter-server backend would be
 * one more across-workers collective: all_reduce as a push of the buffer to
 * the servers and a pull of the sum, broadcast as the root's push and
 * everyone's pull.
 *
 * Every call except abort is a collective: all members make the same calls
 * in the same order with the same n (and root). A mismatch is an error
 * where the backend can see it (local) and a hang or a peer's timeout
 * where it cannot (ring, nccl), as with NCCL itself.
 *
 * Errors: 0 or a negative SL_E* code with `err` filled. After an error the
 * buffer is unspecified and the member should not be used again but to
 * abort and destroy it; the error does not by itself wake the other
 * members of this process that wait for this one: the caller aborts the
 * group (the strategy does on any failure).
 */
#ifndef TRAIN_COLL_H
#define TRAIN_COLL_H

#include <stddef.h>

#include "sl_error.h"

enum train_coll_mem {
    TRAIN_COLL_HOST = 0,   /* buffers are ordinary host memory */
    TRAIN_COLL_DEVICE = 1, /* buffers are device memory of the member's device */
};

struct train_coll;

struct train_coll_ops {
    /* "local", "ring", "nccl", "composed"; a static string. */
    const char *name;

    /* buf[0..n) (borrowed for the call) becomes the element-wise float32 SUM
     * over every member, the same bits on every member. The order of the
     * additions is the backend's and fixed for a given group (local:
     * replica order; ring: the ring's; nccl: NCCL's), so results repeat
     * run to run. Blocking; n == 0 is a valid call (buf may then be NULL). */
    int (*all_reduce)(struct train_coll *c, float *buf, size_t n, struct sl_error *err) SL_MUST_CHECK;

    /* buf[0..n) of member `root` into every member's buf, bit for bit, except
     * that a backend without a broadcast of its own (ring) sends it as a sum
     * with zeros from the others, which turns a -0.0 into +0.0 (the same on
     * every member). Blocking. */
    int (*broadcast)(struct train_coll *c, float *buf, size_t n, int root, struct sl_error *err) SL_MUST_CHECK;

    /* Fail the group with `code` (negative; anything else becomes SL_EINVAL)
     * and `msg` (copied): any thread, any time, without waiting for the
     * members. Members of this process blocked in a call wake with that
     * error where the backend can interrupt them (local at once; nccl
     * within its poll); every later call of this member fails at once with
     * it (ring: a call already on the wire ends by the ring's own failure
     * detection). The first abort's code and message are kept. */
    void (*abort)(struct train_coll *c, int code, const char *msg);

    /* Release this member's handle (what it borrowed stays with its owner).
     * Blocking; on the member's own thread where the backend says so
     * (nccl: each leaves on its own thread, all at once, unless aborted). */
    void (*destroy)(struct train_coll *c);
};

/* The head of every member's handle (backends embed it first, as every
 * train_device starts with its ops). Read-only for callers. */
struct train_coll {
    const struct train_coll_ops *ops;
    int rank, size;          /* 0 <= rank < size */
    enum train_coll_mem mem; /* where the buffers of all_reduce and broadcast live */
};

/* The calls, through c->ops. train_coll_broadcast refuses a root outside
 * 0..size-1 (SL_EINVAL) without calling the backend; abort and destroy
 * accept NULL. */
int train_coll_all_reduce(struct train_coll *c, float *buf, size_t n, struct sl_error *err) SL_MUST_CHECK;
int train_coll_broadcast(struct train_coll *c, float *buf, size_t n, int root, struct sl_error *err) SL_MUST_CHECK;
void train_coll_abort(struct train_coll *c, int code, const char *msg);
void train_coll_destroy(struct train_coll *c);

/* The composition one worker's replica uses: a member of size W x R with
 * rank worker x R + replica. all_reduce sums over `local` (this replica's
 * member of the worker's local group; NULL when R == 1), then replica 0
 * alone sums the worker's result over `across` (a collective with one
 * member per worker, rank = worker; NULL on the other replicas and when
 * W == 1), then `local` hands replica 0's result to the others: the same
 * bits everywhere, each addition in a fixed order. broadcast goes the same
 * way from the root's worker. Both are borrowed and must outlive the
 * handle; `across` is used from replica 0's thread only (its sockets are
 * that thread's), except for abort. abort aborts both. *out is owned by
 * the caller. SL_EINVAL (sizes or ranks that do not fit), SL_ENOMEM. */
int train_coll_compose(struct train_coll **out, struct train_coll *local, struct train_coll *across, int replica,
                       int replicas, int worker, int workers, struct sl_error *err) SL_MUST_CHECK;

/* --- collectives over device memory (a device kind's, train_backend.h) --- */

/* Bytes of a group id (NCCL's unique id). */
#define TRAIN_COLL_ID_BYTES 128

struct train_device;

/* How the members of a device kind's collective find each other, as in
 * NCCL: one member (worker 0) makes a group id, the id travels to every
 * worker verbatim (the rendezvous blob), and every replica joins with it
 * from its own thread. */
struct train_coll_device_ops {
    /* "nccl"; a static string. */
    const char *name;

    /* A new group id into out. Any thread; once per job. 0 or SL_EDEVICE. */
    int (*group_id)(char out[TRAIN_COLL_ID_BYTES], struct sl_error *err) SL_MUST_CHECK;

    /* Join group `id` as member `rank` of `size` on `dev` (an open device of
     * this kind, borrowed: it must stay open until the member is
     * destroyed). Blocks until all `size` members have joined, so the
     * members of one process join from their own threads at once, before
     * anything else that could fail and keep the others waiting. The member
     * works in device memory (mem = TRAIN_COLL_DEVICE) and belongs to the
     * calling thread (abort: any thread). Its destroy leaves the group on
     * that thread, all members at once; after an abort it leaves without
     * waiting for anyone. *out owned by the caller. SL_EINVAL, SL_ENOMEM,
     * SL_EDEVICE. */
    int (*open)(struct train_coll **out, struct train_device *dev, int rank, int size,
                const char id[TRAIN_COLL_ID_BYTES], struct sl_error *err) SL_MUST_CHECK;
};

/* The "nccl" table (train_coll_nccl.c): defined only in builds with
 * SLUICE_HAVE_CUDA, and referenced only by train_backend.c. */
extern const struct train_coll_device_ops train__coll_nccl;

/* --- for backends --- */

/* A first-wins failure that any thread may set (abort) and the member's own
 * thread polls, lock-free. All zero is healthy. */
struct train__coll_failure {
    int claimed, code;
    char msg[SL_ERROR_MSG_MAX];
};
/* Record (code, msg) unless a failure is recorded already. */
void train__coll_fail(struct train__coll_failure *f, int code, const char *msg);
/* 0 while healthy, else the code with its message copied into err. */
int train__coll_failed(struct train__coll_failure *f, struct sl_error *err);

#endif
