/* feed_diskcache: remote objects kept on local disk for later epochs and
 * later runs (issue #28: --cache-dir, --cache-bytes).
 *
 * An entry is one whole remote object, named by its URL, size and ETag:
 * DIR/<hash of the URL>-<hash of the ETag>-<size>.obj, with beside it a
 * .key file holding the URL and the ETag (checked at each lookup, so a
 * hash collision is a miss, never another object's bytes). An object
 * replaced on the server has another ETag: its old entry is never read
 * again, and is removed when the new one is kept.
 *
 * Admission, not eviction: an object is kept while the entries' bytes stay
 * within the bound; once it is full, later objects are not kept. That is
 * what "evict what is needed last" comes to for sluice's plans: every
 * epoch reads a worker's files in the same order (docs/semantics.md: files
 * are never shuffled, only elements within the shuffle buffer), so when an
 * object X is read and the cache is full, every cached object is needed
 * again before X is (they come earlier in the next epoch): X is the one
 * the optimal policy (Belady's) drops. LRU, by contrast, would evict each
 * object just before it is needed again and hit nothing on a cyclic scan
 * larger than the cache.
 *
 * At open the directory (made if absent) is read: partial writes of an
 * earlier run (.tmp) are removed, and entries past the bound, oldest
 * first; what remains is counted in the bound. Entries are written to a
 * temporary name and renamed into place, so a reader never sees half of
 * one. The feeder's data, not a secret: files are 0644 under the umask.
 *
 * Thread-safe: any number of threads may look up and put at once.
 */
#ifndef FEED_DISKCACHE_H
#define FEED_DISKCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

struct feed_diskcache;

/* Open (or make) `dir`, bound to `bytes` (>= 1). SL_EINVAL naming the
 * directory when it cannot be made or is not a directory. */
int feed_diskcache_open(struct feed_diskcache **out, const char *dir, uint64_t bytes,
                        struct sl_error *err) SL_MUST_CHECK;
void feed_diskcache_close(struct feed_diskcache *c); /* NULL: no-op */

/* Read url's entry for an object of `size` bytes with `etag` into dst:
 * 1 when it was there (dst holds it), 0 when not (a miss, or an entry that
 * could not be read: removed). */
int feed_diskcache_get(struct feed_diskcache *c, const char *url, uint64_t size, const char *etag, uint8_t *dst);

/* Keep `size` bytes at data as url's entry, if they fit the bound: 1 kept,
 * 0 not (full, or already there); SL_EIO with the file and the cause when
 * it could not be written (the caller reports it once: a cache that cannot
 * be written never fails a read). */
int feed_diskcache_put(struct feed_diskcache *c, const char *url, uint64_t size, const char *etag, const uint8_t *data,
                       struct sl_error *err);

struct feed_diskcache_stats {
    uint64_t bytes;   /* entries' bytes now */
    uint64_t entries; /* entries now */
    uint64_t hits;    /* objects read from the cache */
    uint64_t kept;    /* objects written this run */
    uint64_t full;    /* objects not kept: the bound was reached */
    uint64_t removed; /* entries removed at open (past the bound, stale, partial) */
};
void feed_diskcache_stats(struct feed_diskcache *c, struct feed_diskcache_stats *out);

#endif
