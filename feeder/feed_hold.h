/* feed_hold: what a feeder owes a trainer that reads pieces in its shared
 * memory: whether the memory is offered and taken (the offer's state), and
 * the buffers of the pieces sent that way, held until their credits come
 * back (docs/protocol.md, "Shared memory").
 *
 * A piece sent in shared memory keeps its buffer held at its ordinal (the
 * order it was scheduled in, which is its seq order, whatever order the
 * executors finish in). The trainer consumes pieces in seq order and gives
 * a credit for each, so the k-th credit releases ordinal k. A connection
 * that ends keeps its buffers held (its trainer may still be reading them,
 * e.g. one stopped and dropped as silent) until the worker's next HELLO: a
 * trainer rejoining copies what it still holds out of the shared memory
 * before it says HELLO.
 *
 * Thread-safe: no; one owner (the serving thread).
 */
#ifndef FEED_HOLD_H
#define FEED_HOLD_H

#include <stdint.h>

#include "sl_error.h"
#include "sl_pool.h"

enum feed_shm_state {
    FEED_SHM_NONE,    /* not offered (not asked for, or a private pool) */
    FEED_SHM_PENDING, /* offered; the trainer's answer (a CREDIT) not in yet: no piece goes before it */
    FEED_SHM_ON,      /* mapped: pieces go in shared memory */
    FEED_SHM_DECLINED /* the trainer could not map it: pieces go by copy */
};

/* The state after a HELLO: offered when the pool is shared and the HELLO
 * asked (its SHM flag). */
enum feed_shm_state feed_shm_offer(int pool_shared, uint32_t hello_flags);
/* The state after a CREDIT: the first one after an offer answers it (its
 * SHM flag: mapped or not); any other leaves the state as it is. */
enum feed_shm_state feed_shm_answer(enum feed_shm_state s, uint32_t credit_flags);

struct feed_hold {
    uint8_t **slot;    /* [cap], indexed by ordinal % cap */
    uint64_t cap;      /* twice the window: what honest credits leave outstanding, twice over */
    uint64_t released; /* ordinals below it are consumed */
};

/* Room for a window of `window` pieces (>= 1). 0 or SL_ENOMEM. */
int feed_hold_init(struct feed_hold *h, uint64_t window) SL_MUST_CHECK;
/* Frees the ring (the buffers must have been released). */
void feed_hold_free(struct feed_hold *h);

/* Hold buf at `ordinal`. -1 when the ordinal is already consumed, past the
 * ring, or its place is taken (credits were not honest). */
int feed_hold_put(struct feed_hold *h, uint64_t ordinal, uint8_t *buf) SL_MUST_CHECK;

/* n more pieces were consumed, in order: their buffers (if held) go back
 * to pool. Never past `scheduled`: a trainer returning more credits than
 * it had pieces gains nothing. */
void feed_hold_release(struct feed_hold *h, struct sl_pool *pool, uint64_t n, uint64_t scheduled);

/* Every buffer held goes back to pool; the count starts again at 0 (a new
 * connection's ordinals). */
void feed_hold_release_all(struct feed_hold *h, struct sl_pool *pool);

#endif
