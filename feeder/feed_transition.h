/* feed_transition: a worker's piece stream, either a plain plan
 * (feed_plan.h) or the stream of a new worker after a mid-epoch change of
 * the cluster shape (docs/semantics.md 5.2).
 *
 * The transition X = (from_workers W, from_replicas R, from_epoch e,
 * from_step t): a W x R shape took steps 0..t-1 of epoch e, a W' x R'
 * shape (N' = W' R') takes the rest. For each step s = t..T-1 of epoch e
 * (T: the old shape's steps per epoch), B_s is the concatenation, old
 * worker 0..W-1 then old replica 0..R-1, of the old plan's pieces at step
 * s; it is cut into N' contiguous pieces, the first |B_s| % N' of
 * |B_s| / N' + 1 elements, the others of |B_s| / N'; piece p goes to new
 * worker p / R', replica p % R', keeping epoch e and step s. From epoch
 * e+1 on the stream is the plain W' x R' plan.
 *
 * Numbering (the seq of a piece, and of a HELLO's resume_seq): the
 * transition's pieces are seq (s - t) R' + r'; epoch E >= e+1, step u,
 * replica r' is (T - t) R' + ((E - e - 1) T' + u) R' + r'.
 *
 * Memory: a transition stream holds W plans of the old shape (each seeked
 * to step t of epoch e, each yielding R pieces a step) and a buffer of
 * G + W R elements for B_s, until its transition is over; their estimated
 * size (feed_transition_bytes) is bounded by FEED_TRANSITION_MAX_BYTES
 * per stream (feed_transition_check refuses more). A seek costs what W + 1 plan seeks
 * cost (O(S log S) each); iterating allocates nothing per element.
 *
 * Thread-safe: no; one owner. Configs are copied (their counts borrowed
 * for the stream's life).
 */
#ifndef FEED_TRANSITION_H
#define FEED_TRANSITION_H

#include <stddef.h>
#include <stdint.h>

#include "feed_plan.h"
#include "sl_error.h"

/* The most bytes a transition stream's old plans and B_s buffer may take
 * (estimated from the shuffle buffer, the batch and the files): 256 MiB. */
#define FEED_TRANSITION_MAX_BYTES ((uint64_t)256 << 20)

/* A mid-epoch change of the cluster shape; from_workers 0: none. */
struct feed_transition {
    uint32_t from_workers, from_replicas;
    uint64_t from_epoch, from_step;
};

/* Whether x names a transition. */
static inline int feed_transition_set(const struct feed_transition *x)
{
    return x != NULL && x->from_workers != 0;
}

/* The old shape's config: cfg (the new shape's) with x's workers and
 * replicas. */
struct feed_plan_config feed_transition_old_config(const struct feed_plan_config *cfg, const struct feed_transition *x);

/* Check transition x against cfg (the new shape's plan config): the old
 * shape plans (its errors prefixed "the shape before the change, W x R:
 * "), 1 <= from_step < T, from_epoch below the job's epochs (when finite),
 * the numbers within 64 bits, and the old plans within
 * FEED_TRANSITION_MAX_BYTES. *old_steps: T. 0, or SL_EINVAL with the
 * reason in err. */
int feed_transition_check(const struct feed_plan_config *cfg, const struct feed_transition *x, uint64_t *old_steps,
                          struct sl_error *err) SL_MUST_CHECK;

/* The estimated bytes one transition stream of x holds until its
 * transition is over (its W old plans and B_s's buffer; UINT64_MAX past
 * 64 bits): what feed_transition_check bounds, per stream. */
uint64_t feed_transition_bytes(const struct feed_plan_config *cfg, const struct feed_transition *x);

/* Pieces in a worker's whole stream (UINT64_MAX: no end, or past 64
 * bits): steps x R x epochs for a plain plan (x NULL or unset); with x,
 * (T - t) R + (epochs - e - 1) steps R, where steps and R are the new
 * shape's and T = old_steps. */
uint64_t feed_transition_total(const struct feed_transition *x, uint64_t old_steps, uint64_t steps, uint32_t replicas,
                               uint64_t epochs);

struct feed_stream;

/* The stream of worker `worker` of cfg's shape: a plain plan when x is
 * NULL or unset, else the transition stream of x (checked as
 * feed_transition_check does). Positioned at seq 0. 0, or the error. */
int feed_stream_create(struct feed_stream **out, const struct feed_plan_config *cfg, const struct feed_transition *x,
                       uint32_t worker, struct sl_error *err) SL_MUST_CHECK;
void feed_stream_destroy(struct feed_stream *st);

/* The next piece in seq order (elems borrowed until the next call): 0,
 * SL_END after the last, or an error. */
int feed_stream_next(struct feed_stream *st, struct feed_piece *piece, struct sl_error *err) SL_MUST_CHECK;

/* Move the stream to piece `seq`, so that the next feed_stream_next
 * returns it: 0, SL_END when seq is at or past the end (the stream is then
 * done), or an error. */
int feed_stream_seek(struct feed_stream *st, uint64_t seq, struct sl_error *err) SL_MUST_CHECK;

#endif
