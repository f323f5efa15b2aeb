/* feed_source_impl: what the two halves of a record source share (not for
 * callers above: feed_source.h is their interface). feed_source.c opens a
 * source (the scan, the scan cache, a remote file read once); feed_reader.c
 * reads its records (mapped images, the cache of inflated and remote ones,
 * pins and eviction).
 *
 * Thread-safety: as feed_source.h; the source's mutex guards `cached`,
 * `clock`, `captured` and every file's img and loading fields once the scan
 * is over (the scan threads each own the files they take).
 */
#ifndef FEED_SOURCE_IMPL_H
#define FEED_SOURCE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "feed_source.h"
#include "fmt_format.h"
#include "sl_error.h"
#include "sto.h"

struct image {
    uint8_t *data;
    size_t size;
    int mapped; /* mmap (never evicted) vs inflated (cached) */
    int pins;
    uint64_t used; /* LRU clock */
};

struct file {
    const char *path;           /* the file, or a group's first array */
    const char *const *members; /* a group's arrays (nmembers), path the first */
    size_t nmembers;
    struct fmt_scan *scan; /* where each record lies in the image; NULL when skipped */
    uint64_t count;
    enum fmt_compression comp;
    uint64_t image_size;   /* decompressed size */
    struct image img;      /* img.data NULL while not loaded */
    int loading;           /* a reader is inflating it (its size is reserved in `cached`) */
    int verify;            /* check records as they are read whatever trust_scan says (a cache hit) */
    uint8_t cache_state;   /* CACHE_*, set by the scan thread that took the file */
    uint8_t cache_damaged; /* its entry was damaged */
    uint8_t whole;         /* uncompressed, but read whole into the cache (remote) */
    uint8_t ranged;        /* remote, indexed: read record by record, by range (feed_fetch.h) */
    char *etag;            /* a remote file's ETag when its scan began ("": none sent); NULL: local */
    uint64_t src_size;     /* with etag: its size then */
    int64_t src_mtime_ns;  /* with etag: its Last-Modified then (0: none) */
    /* a remote file's FILE.idx, looked for once during its scan (has_index):
     * IDX_* and, with IDX_FOUND, its entries, freed when the scan ends */
    uint8_t idx_state;
    struct fmt_index_entry *idx;
    size_t nidx;
};

enum { IDX_UNKNOWN = 0, IDX_NONE, IDX_FOUND, IDX_BAD /* there but unusable: the scan looks again and says why */ };

struct feed_source {
    struct feed_source_opts o;
    const struct fmt_format_ops *ops;
    size_t nfiles;
    struct file *files;
    uint64_t *counts;
    uint64_t total_bytes;
    uint64_t disk_bytes; /* the files' sizes on disk */
    uint64_t max_file;   /* most bytes a compressed file may inflate to */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* an image loaded or failed, a pin let go */
    size_t cached;     /* bytes of inflated images held or being inflated */
    size_t captured;   /* remote files whose image the scan kept (read once) */
    uint64_t clock;
    struct feed_scan_cache *cache;      /* NULL: none */
    atomic_int cache_warned;            /* a failed write was reported */
    struct feed_fetcher *fetcher;       /* the fetch threads, when a file is read by range; NULL: none */
    struct feed_diskcache *disk;        /* remote objects kept on disk; NULL: none */
    atomic_int disk_warned;             /* a failed write was reported */
    atomic_uint_fast64_t fetched_alone; /* records a reader fetched alone, not ahead */
};

/* A source kept open between reads by range of one file (its connection
 * reused); src NULL: none open. */
struct feed_range_src {
    struct sto_src *src;
    uint32_t file;
};

struct feed_reader {
    struct feed_source *s;
    struct file *pinned;
    struct fmt_frame frame; /* the last record framed, and its storage */
    struct feed_field fields[FEED_MAX_FIELDS];
    uint64_t inflate_cpu_ns, inflate_wall_ns; /* time spent inflating files */
    struct feed_fetch *fetch;                 /* the piece's records fetched ahead (feed_reader_use); NULL: none */
    struct feed_range_src alone;              /* a record read by range that no fetch holds: its source */
    uint8_t *alone_buf;
    size_t alone_cap;
};

/* The object opened for a read of f is the one scanned: its size and ETag
 * as the scan found them; otherwise SL_ECORRUPT naming both. */
int feed__check_identity(const struct file *f, const struct sto_src *src, struct sl_error *err) SL_MUST_CHECK;

/* feed_fetch.c's, for the source and the reader */
struct feed_fetcher;
struct feed_fetch;
int feed__fetcher_create(struct feed_fetcher **out, struct feed_source *s, unsigned threads,
                         struct sl_error *err) SL_MUST_CHECK;
void feed__fetcher_destroy(struct feed_fetcher *p);
void feed__fetcher_count_records(struct feed_source *s, uint64_t bytes);
/* Bytes [off, off + len) of file `file` into dst, exactly that range, as
 * the scan found the object (sto_open_known), through c (opened on file,
 * kept open for the next read of the same file, closed after an error or
 * for a local file). */
int feed__read_range(struct feed_source *s, struct feed_range_src *c, uint32_t file, uint64_t off, uint8_t *dst,
                     size_t len, struct sl_error *err) SL_MUST_CHECK;
/* The bytes read for record `rec` of f: its extent, at most its framing
 * and max_record_bytes whatever its index says of the next offset. */
uint64_t feed__range_extent(const struct feed_source *s, const struct file *f, uint64_t rec);
/* Record `rec` of `file` in fetch f, once its parts came: *at, *len (its
 * extent); *at NULL when f does not hold it; a failed part's error. */
int feed__fetch_find(struct feed_fetch *f, uint32_t file, uint64_t rec, const uint8_t **at, size_t *len,
                     struct sl_error *err) SL_MUST_CHECK;

#endif
