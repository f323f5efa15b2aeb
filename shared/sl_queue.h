/* sl_queue: a bounded multi-producer multi-consumer FIFO of pointers, the
 * only link between a feeder's stages.
 *
 * A full queue blocks its producers (backpressure); an empty one blocks its
 * consumers. Closing ends the stream; the first close wins:
 *   - sl_queue_close(q, 0, NULL): normal end. Pushes fail with SL_ECLOSED;
 *     pops drain what is left, then return SL_ECLOSED.
 *   - sl_queue_close(q, SL_Exxx, "why"): failure. Every waiter wakes at once
 *     and every push and pop from then on returns that code (items still
 *     queued are not handed out; take them back with sl_queue_reclaim).
 *     The message is kept for sl_queue_error().
 * The queue never owns its items: it stores the pointers it is given.
 *
 * Thread-safe: yes, every function but create and destroy (destroy once no
 * thread can call it any more).
 */
#ifndef SL_QUEUE_H
#define SL_QUEUE_H

#include <stddef.h>

#include "sl_error.h"

struct sl_queue;

/* A queue holding at most `capacity` (>= 1) items. 0, SL_EINVAL (capacity
 * 0) or SL_ENOMEM. */
int sl_queue_create(struct sl_queue **out, size_t capacity) SL_MUST_CHECK;

/* Frees the queue, not the items still in it. NULL is accepted. */
void sl_queue_destroy(struct sl_queue *q);

/* Append `item` (any pointer, NULL included), waiting while the queue is
 * full. 0, or the close code once closed: SL_ECLOSED after a normal close,
 * the error code after a close with an error (also when that close happens
 * while waiting). */
int sl_queue_push(struct sl_queue *q, void *item) SL_MUST_CHECK;

/* As push, without waiting: SL_ETIMEOUT when the queue is full. */
int sl_queue_try_push(struct sl_queue *q, void *item) SL_MUST_CHECK;

/* Take the oldest item into *item, waiting while the queue is empty. 0; after
 * a normal close, the remaining items and then SL_ECLOSED; after a close
 * with an error, that error code at once. */
int sl_queue_pop(struct sl_queue *q, void **item) SL_MUST_CHECK;

/* As pop, waiting at most `timeout_ms` milliseconds (0: not at all):
 * SL_ETIMEOUT when nothing came. */
int sl_queue_pop_timeout(struct sl_queue *q, void **item, long timeout_ms) SL_MUST_CHECK;

/* As pop without waiting: SL_ETIMEOUT when empty. */
int sl_queue_try_pop(struct sl_queue *q, void **item) SL_MUST_CHECK;

/* Close the queue (see above). code: 0 for a normal end, else a negative
 * SL_E* code (a positive code counts as 0); msg may be NULL. Only the first
 * close has an effect. */
void sl_queue_close(struct sl_queue *q, int code, const char *msg);

/* The close state: 0 while open, SL_ECLOSED after a normal close, else the
 * close's error code; err (may be NULL) receives the code and message
 * ("queue closed" after a normal close). */
int sl_queue_error(struct sl_queue *q, struct sl_error *err);

/* Take the oldest item whatever the close state, never waiting: 0, or
 * SL_END when empty. For cleanup after a close with an error. */
int sl_queue_reclaim(struct sl_queue *q, void **item) SL_MUST_CHECK;

/* Items now queued, and the capacity. */
size_t sl_queue_len(struct sl_queue *q);
size_t sl_queue_capacity(const struct sl_queue *q);

#endif
