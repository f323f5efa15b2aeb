/* train_collective_local: all-reduce and broadcast across R replica
 * threads of one process (ReplicaContext.all_reduce, docs/semantics.md
 * 6.2); the "local" backend of train_coll.h.
 *
 * Every one of the R replicas calls train_local_all_reduce() once per round
 * with its own buffer of n floats; all calls return together and every
 * buffer then holds the same reduced values, bitwise identical: SUM, or
 * MEAN = SUM / R. Summation runs in replica order (replica 0's value, then
 * + replica 1, + replica 2, ...) in float32 whatever order the threads
 * arrive in, so a round is reproducible run to run.
 *
 * Errors: a replica that fails calls train_local_group_abort(); every
 * waiter wakes with the abort's code and message, and every later call
 * fails the same way (the first error wins). Misuse inside a round
 * (replica out of range, the same replica twice, replicas disagreeing on n
 * or op) aborts the group too, so no replica is left waiting.
 *
 * Thread-safe: train_local_all_reduce and train_local_group_abort may be
 * called from any thread; create/destroy are not (destroy only when no call
 * is in progress).
 */
#ifndef TRAIN_COLLECTIVE_LOCAL_H
#define TRAIN_COLLECTIVE_LOCAL_H

#include <stddef.h>

#include "sl_error.h"
#include "train_coll.h"
#include "train_reduce.h"

struct train_local_group;

/* A group of `replicas` (1..1024) threads. SL_EINVAL, SL_ENOMEM, SL_EIO
 * (pthread init failed). */
int train_local_group_create(struct train_local_group **out, int replicas, struct sl_error *err) SL_MUST_CHECK;
/* Accepts NULL. */
void train_local_group_destroy(struct train_local_group *g);

/* Replica `replica` contributes buf[0..n) (borrowed for the call; it is
 * overwritten with the result) and blocks until all R replicas have
 * contributed. Returns 0, or the abort's code (a copy of its message in
 * *err) when the group is or becomes aborted before this round completes:
 * then buf's contents are unspecified. n == 0 is a valid (empty) round and
 * buf may then be NULL. The last replica to arrive does the whole O(n * R)
 * reduction under the group lock: simple and deterministic, meant for
 * in-process CPU replicas, not for large tensors. */
int train_local_all_reduce(struct train_local_group *g, int replica, float *buf, size_t n, enum train_reduce_op op,
                           struct sl_error *err) SL_MUST_CHECK;

/* Replica `replica` takes part in a broadcast from replica `root`: root's
 * buf[0..n) is copied into every other replica's buf (bit for bit), and
 * every call returns together. Errors, misuse (a root outside 0..R-1, or
 * replicas disagreeing on n or root) and aborts as for all_reduce. */
int train_local_broadcast(struct train_local_group *g, int replica, int root, float *buf, size_t n,
                          struct sl_error *err) SL_MUST_CHECK;

/* Fail the group with `code` (negative; anything else is stored as
 * SL_EINVAL) and `msg` (copied): wakes every waiter. Only the first abort's
 * code and message are kept. */
void train_local_group_abort(struct train_local_group *g, int code, const char *msg);

/* The abort code (0 while the group is healthy). */
int train_local_group_status(struct train_local_group *g);

/* Replica `replica`'s member of the "local" collective (train_coll.h) over
 * g: all_reduce is train_local_all_reduce(SUM), broadcast
 * train_local_broadcast, abort train_local_group_abort (the whole group);
 * host memory, rank = replica, size = R. g is borrowed and must outlive the
 * member; *out is owned by the caller (train_coll_destroy). SL_EINVAL,
 * SL_ENOMEM. */
int train_local_coll_open(struct train_coll **out, struct train_local_group *g, int replica,
                          struct sl_error *err) SL_MUST_CHECK;

#endif
