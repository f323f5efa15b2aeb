/* feed_cache: the feeder's decoded-element cache (the job key cache_bytes;
 * docs/job.md), like tf.data's Dataset.cache() placed right after decoding.
 *
 * Below the plan: it maps an element, (file index, record index), to its
 * decoded row (every fixed-size column's bytes for that row, one after
 * another in feature order), so that the epochs after the first copy rows
 * instead of reading and decoding records. What is sent, and in which order,
 * does not depend on it.
 *
 * One arena of `slots` rows, slot g holding the element whose global number
 * (records of the files before it, plus its record index) is g: the first
 * `slots` elements of the job in file order have a slot, the rest are
 * decoded every time. slots = min(elements, bound / row_bytes). The arena is
 * allocated once at create; its pages are taken as rows are filled.
 *
 * Each slot is filled once: empty -> filling (one thread's claim, a CAS) ->
 * ready (published with release); a reader uses a row only once it reads
 * ready (acquire), else it decodes the element itself.
 *
 * Thread-safe: get/claim/publish/abandon from any thread; create, destroy
 * and stats with no other call in flight.
 */
#ifndef FEED_CACHE_H
#define FEED_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

struct feed_cache;

/* A cache for the files whose record counts are counts[0..nfiles), of rows
 * of row_bytes (>= 1) bytes, bounded by bound_bytes (rows that do not fit
 * have no slot). SL_EINVAL when row_bytes is 0; SL_ENOMEM. */
int feed_cache_create(struct feed_cache **out, const uint64_t *counts, size_t nfiles, size_t row_bytes,
                      uint64_t bound_bytes, struct sl_error *err) SL_MUST_CHECK;
void feed_cache_destroy(struct feed_cache *c); /* NULL is accepted */

size_t feed_cache_row_bytes(const struct feed_cache *c);

/* The element's decoded row when its slot is ready, else NULL (no slot,
 * or not filled yet). */
const uint8_t *feed_cache_get(const struct feed_cache *c, uint32_t file, uint64_t rec);

/* Claim the element's empty slot to fill it: where its row_bytes go, or
 * NULL when it has no slot or some thread has claimed it already. A claim
 * ends with publish (the row written: readers may use it from now on) or
 * abandon (back to empty). */
uint8_t *feed_cache_claim(struct feed_cache *c, uint32_t file, uint64_t rec);
void feed_cache_publish(struct feed_cache *c, uint32_t file, uint64_t rec);
void feed_cache_abandon(struct feed_cache *c, uint32_t file, uint64_t rec);

struct feed_cache_stats {
    uint64_t elements; /* the job's elements */
    uint64_t slots;    /* of those, how many have a slot */
    uint64_t ready;    /* slots filled */
    uint64_t bytes;    /* the arena: slots * row_bytes */
};
void feed_cache_stats(const struct feed_cache *c, struct feed_cache_stats *out);

#endif
