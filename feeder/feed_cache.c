/* feed_cache: the decoded-element cache (see feed_cache.h). */
#include "feed_cache.h"

#include <stdatomic.h>
#include <string.h>

#include "sl_alloc.h"

enum { SLOT_EMPTY = 0, SLOT_FILLING = 1, SLOT_READY = 2 };

struct feed_cache {
    size_t nfiles;
    uint64_t *first;  /* first[i]: the global number of file i's record 0; first[nfiles]: the elements */
    uint64_t *counts; /* records per file (a copy) */
    size_t row_bytes;
    uint64_t slots;
    uint8_t *arena;      /* slots * row_bytes */
    atomic_uchar *state; /* per slot: SLOT_* */
};

int feed_cache_create(struct feed_cache **out, const uint64_t *counts, size_t nfiles, size_t row_bytes,
                      uint64_t bound_bytes, struct sl_error *err)
{
    *out = NULL;
    if (row_bytes == 0)
        return sl_error_set(err, SL_EINVAL, "cache: rows of 0 bytes");
    struct feed_cache *c = sl_calloc(1, sizeof *c);
    if (c == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    c->nfiles = nfiles;
    c->row_bytes = row_bytes;
    c->first = sl_calloc(nfiles + 1, sizeof *c->first);
    c->counts = sl_calloc(nfiles ? nfiles : 1, sizeof *c->counts);
    if (c->first == NULL || c->counts == NULL) {
        feed_cache_destroy(c);
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < nfiles; i++) {
        c->counts[i] = counts[i];
        c->first[i + 1] = c->first[i] + counts[i];
    }
    uint64_t fit = bound_bytes / row_bytes;
    c->slots = c->first[nfiles] < fit ? c->first[nfiles] : fit;
    if (c->slots > 0) {
        if (c->slots > SIZE_MAX / row_bytes) {
            feed_cache_destroy(c);
            return sl_error_set(err, SL_ENOMEM, "cache: %llu rows of %zu bytes do not fit the address space",
                                (unsigned long long)c->slots, row_bytes);
        }
        c->arena = sl_malloc((size_t)c->slots * row_bytes);
        c->state = sl_calloc((size_t)c->slots, sizeof *c->state);
        if (c->arena == NULL || c->state == NULL) {
            uint64_t want = c->slots * row_bytes;
            feed_cache_destroy(c);
            return sl_error_set(err, SL_ENOMEM, "cache: out of memory for %llu bytes of rows",
                                (unsigned long long)want);
        }
    }
    *out = c;
    return 0;
}

void feed_cache_destroy(struct feed_cache *c)
{
    if (c == NULL)
        return;
    sl_free(c->arena);
    sl_free(c->state);
    sl_free(c->first);
    sl_free(c->counts);
    sl_free(c);
}

size_t feed_cache_row_bytes(const struct feed_cache *c)
{
    return c->row_bytes;
}

/* The element's slot, or UINT64_MAX when it has none. */
static uint64_t slot_of(const struct feed_cache *c, uint32_t file, uint64_t rec)
{
    if (file >= c->nfiles || rec >= c->counts[file])
        return UINT64_MAX;
    uint64_t g = c->first[file] + rec;
    return g < c->slots ? g : UINT64_MAX;
}

const uint8_t *feed_cache_get(const struct feed_cache *c, uint32_t file, uint64_t rec)
{
    uint64_t g = slot_of(c, file, rec);
    if (g == UINT64_MAX || atomic_load_explicit(&c->state[g], memory_order_acquire) != SLOT_READY)
        return NULL;
    return c->arena + g * c->row_bytes;
}

uint8_t *feed_cache_claim(struct feed_cache *c, uint32_t file, uint64_t rec)
{
    uint64_t g = slot_of(c, file, rec);
    if (g == UINT64_MAX)
        return NULL;
    unsigned char expect = SLOT_EMPTY;
    if (!atomic_compare_exchange_strong_explicit(&c->state[g], &expect, SLOT_FILLING, memory_order_acquire,
                                                 memory_order_relaxed))
        return NULL;
    return c->arena + g * c->row_bytes;
}

void feed_cache_publish(struct feed_cache *c, uint32_t file, uint64_t rec)
{
    uint64_t g = slot_of(c, file, rec);
    if (g != UINT64_MAX)
        atomic_store_explicit(&c->state[g], SLOT_READY, memory_order_release);
}

void feed_cache_abandon(struct feed_cache *c, uint32_t file, uint64_t rec)
{
    uint64_t g = slot_of(c, file, rec);
    if (g != UINT64_MAX)
        atomic_store_explicit(&c->state[g], SLOT_EMPTY, memory_order_relaxed);
}

void feed_cache_stats(const struct feed_cache *c, struct feed_cache_stats *out)
{
    memset(out, 0, sizeof *out);
    out->elements = c->first[c->nfiles];
    out->slots = c->slots;
    out->bytes = c->slots * c->row_bytes;
    for (uint64_t g = 0; g < c->slots; g++)
        out->ready += atomic_load_explicit(&c->state[g], memory_order_acquire) == SLOT_READY;
}
