/* feed_hold: the shared-memory offer's states and the held buffers (see
 * feed_hold.h). */
#include "feed_hold.h"

#include "sl_alloc.h"
#include "sl_wire.h"

enum feed_shm_state feed_shm_offer(int pool_shared, uint32_t hello_flags)
{
    return pool_shared && (hello_flags & SL_WIRE_HELLO_SHM) ? FEED_SHM_PENDING : FEED_SHM_NONE;
}

enum feed_shm_state feed_shm_answer(enum feed_shm_state s, uint32_t credit_flags)
{
    if (s != FEED_SHM_PENDING)
        return s;
    return (credit_flags & SL_WIRE_CREDIT_SHM) ? FEED_SHM_ON : FEED_SHM_DECLINED;
}

int feed_hold_init(struct feed_hold *h, uint64_t window)
{
    h->cap = 2 * (window ? window : 1);
    h->released = 0;
    h->slot = sl_calloc((size_t)h->cap, sizeof *h->slot);
    return h->slot != NULL ? 0 : SL_ENOMEM;
}

void feed_hold_free(struct feed_hold *h)
{
    sl_free(h->slot);
    h->slot = NULL;
    h->cap = 0;
}

int feed_hold_put(struct feed_hold *h, uint64_t ordinal, uint8_t *buf)
{
    if (h->slot == NULL || ordinal < h->released || ordinal - h->released >= h->cap ||
        h->slot[ordinal % h->cap] != NULL)
        return -1;
    h->slot[ordinal % h->cap] = buf;
    return 0;
}

void feed_hold_release(struct feed_hold *h, struct sl_pool *pool, uint64_t n, uint64_t scheduled)
{
    for (; h->slot != NULL && n > 0 && h->released < scheduled; n--, h->released++) {
        uint8_t **b = &h->slot[h->released % h->cap];
        if (*b != NULL)
            sl_pool_put(pool, *b);
        *b = NULL;
    }
}

void feed_hold_release_all(struct feed_hold *h, struct sl_pool *pool)
{
    for (uint64_t i = 0; h->slot != NULL && i < h->cap; i++)
        if (h->slot[i] != NULL) {
            sl_pool_put(pool, h->slot[i]);
            h->slot[i] = NULL;
        }
    h->released = 0;
}
