/* train_reorder: puts pieces back in sequence order. Pieces of one worker's
 * stream arrive from F feeders (piece seq from feeder seq % F) and, within
 * a feeder, from several executor threads, so they come out of order; the
 * trainer must see exactly the order one feeder would have sent.
 *
 * A ring of `window` slots indexed by seq - next: the window is the most
 * pieces the trainer has granted credits for, so an arriving piece always
 * fits; one that does not (or a seq already delivered or already present)
 * is a protocol error, never silently dropped.
 *
 * Thread-safe: no; owned by the client thread.
 */
#ifndef TRAIN_REORDER_H
#define TRAIN_REORDER_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

struct train_reorder;

int train_reorder_create(struct train_reorder **out, size_t window, struct sl_error *err) SL_MUST_CHECK;
void train_reorder_destroy(struct train_reorder *r);

/* Hold `item` (non-NULL) for sequence number `seq`. SL_EPROTO when seq was
 * delivered already, is held already, or lies beyond next + window. */
int train_reorder_put(struct train_reorder *r, uint64_t seq, void *item, struct sl_error *err) SL_MUST_CHECK;
/* The item for the next sequence number if it has arrived (and advance),
 * else NULL. */
void *train_reorder_pop(struct train_reorder *r);
/* Remove and return the item held for `seq` (NULL when none is: seq not
 * arrived, already delivered or beyond the window). */
void *train_reorder_take(struct train_reorder *r, uint64_t seq);
uint64_t train_reorder_next(const struct train_reorder *r);
/* Start the sequence at `next` (a resumed stream). Only while nothing is
 * held: 0, else -1 and nothing changes. */
int train_reorder_restart(struct train_reorder *r, uint64_t next) SL_MUST_CHECK;
size_t train_reorder_held(const struct train_reorder *r);

#endif
