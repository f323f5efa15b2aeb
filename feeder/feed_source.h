/* feed_source: random access to the records of a job's file list, so the
 * executor can read exactly the records a piece names, in the plan's order,
 * from any number of threads.
 *
 * Opening scans every file once (verifying every CRC and every compressed
 * stream) and keeps, per file, the offset of each record. That scan is also
 * where the data-error policy acts: under fail a damaged file stops the job
 * before any data moves; under skip-file the file is reported and left out
 * (counts it as holding zero records), so the plan, which is computed from
 * the counts, stays exact and deterministic.
 *
 * The scan streams every file: it keeps offsets, never a whole file, so
 * its memory is a few MiB whatever the files' sizes (tar shards included:
 * members are located, not read). A compressed file may inflate to at most
 * `max_file_bytes` (at most, and by default, the cache bound); one that
 * inflates past it is an error at the scan naming the file and the offsets
 * where the limit was passed. A tar member over max_record_bytes is refused
 * from its header, with the member's name and offset.
 *
 * Access: an uncompressed file is memory-mapped and records are lent from
 * the page cache. A compressed file is inflated into memory on first access
 * and kept in an LRU cache bounded by `cache_bytes`; a miss inflates it
 * again. A file is inflated by one thread at a time, straight into one
 * buffer of the size the scan found; other threads that want it wait for
 * it. The bound counts images being inflated: a reader that needs room
 * evicts unpinned images and otherwise waits until other readers let go of
 * theirs, so `cache_bytes` is never exceeded. TFRecord data CRCs are checked
 * again on every access (the file may have changed since the scan); a
 * failure then is an error under any policy.
 *
 * Thread-safe: feed_source_get may be called from many threads at once.
 * Lock order: the source's cache mutex only (never held while inflating).
 */
#ifndef FEED_SOURCE_H
#define FEED_SOURCE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "fmt_files.h"
#include "fmt_format.h"
#include "fmt_reader.h"
#include "sl_error.h"

enum { FEED_RANGES_NONE = 0, FEED_RANGES_ALL, FEED_RANGES_BIG };
#define FEED_RANGES_BIG_RECORD ((uint64_t)64 << 10)

struct feed_source_opts {
    enum fmt_format format;               /* TFRECORD, TEXT, TAR (records are samples), or ARRAYS (a
                                         "file" is a group of arrays, a record a row of each) */
    size_t group_size;                    /* ARRAYS: the paths make groups of this many, one array
                                         per feature (0: 1); every other format: 0 or 1 */
    const struct fmt_feature_spec *specs; /* ARRAYS: the features, checked against each array at
                                         the scan (fmt_scan_opts); may be NULL */
    size_t nspecs;
    enum fmt_compression compression; /* AUTO: per file */
    size_t max_record_bytes;          /* 0: the formats default */
    enum fmt_on_error on_error;
    size_t cache_bytes;    /* compressed files held inflated; 0: 1 GiB */
    size_t max_file_bytes; /* most bytes a compressed file may inflate to; 0 or more
                                         than cache_bytes: cache_bytes */
    int trust_scan;        /* 1: do not check CRCs again on access */
    int count_only;        /* 1: the scan only walks the framing (no CRC checks), for
                                         counting; damaged data then surfaces on access */
    int use_index;         /* 1: a TFRecord file with an index FILE.idx (tfrecord2idx
                                         format, sluice-record index) takes its offsets from it
                                         instead of being scanned; its CRCs are then checked on
                                         access (verify_on_read), not at start */
    /* Called for each file left out under skip-file, and for each file whose
     * partial trailing header was dropped; may be NULL. */
    void (*on_skip)(void *ctx, const char *path, const struct sl_error *err);
    void (*on_tail)(void *ctx, const char *path, uint64_t bytes);
    /* Called from the opening thread about every `progress_ms` (0: 2000)
     * while the scan runs longer than that; may be NULL. */
    void (*on_progress)(void *ctx, size_t files_done, size_t nfiles, uint64_t bytes_done, uint64_t records);
    unsigned progress_ms;
    void *ctx;
    unsigned scan_threads;       /* files scanned at once; 0: 1 */
    volatile sig_atomic_t *stop; /* when set, the scan stops: SL_ECLOSED */
    /* The scan cache (feed_scan_cache.h): a directory keeping each file's
     * scan between starts; NULL: none. A file whose entry matches its
     * identity is not scanned; its records are then checked as they are
     * read, whatever trust_scan says (TFRecord CRCs and framing), as for a
     * file read through its index. Other files are scanned and their
     * entries written, except a file changed less than scan_cache_settle_ms
     * (0: 2000) before its scan began: its timestamps may not yet tell a
     * later change apart. A TFRecord file read through FILE.idx (use_index)
     * does not use the cache. */
    const char *scan_cache;
    unsigned scan_cache_settle_ms;
    /* Called, from the scan threads (possibly at once), for a damaged entry
     * that was ignored (the file is scanned again and its entry rewritten),
     * for the first entry that could not be written, and once, with `path`
     * the directory, when the cache cannot be used at all; may be NULL. */
    void (*on_cache)(void *ctx, const char *path, const struct sl_error *why);
    /* Remote TFRecord files with an index (use_index): FEED_RANGES_ALL
     * reads them record by record, each piece's records fetched ahead by
     * byte range (feed_fetch.h), so a feeder reading a share of a file
     * fetches only that share; FEED_RANGES_BIG those whose records average
     * FEED_RANGES_BIG_RECORD bytes or more (a request a record costs
     * little then, and the fetch runs ahead of the decoding); 0 none. Any
     * other is read whole into the cache at its first access, except one
     * larger than max_file_bytes, read by range. */
    int remote_ranges;
    unsigned remote_requests; /* requests in flight at once for ranges (0: 8; at most 64) */
    /* Remote plain files read whole are kept in this directory, within
     * disk_cache_bytes, for later epochs and runs (feed_diskcache.h); a
     * later first access reads them from there; NULL: none. Objects
     * without a strong ETag are not kept. A failed write is reported once
     * through on_cache and never fails a read. */
    const char *disk_cache_dir;
    uint64_t disk_cache_bytes;
    /* Tests only (never set by the feeder): read plain local files as
     * remote ones are read, whole into the cache through the storage seam,
     * their size checked against the scan's, so that path runs without a
     * server. */
    int test_whole_read;
};

/* What the scan cache did at open, in files. */
struct feed_source_cache_stats {
    size_t hits;      /* taken from the cache, not scanned */
    size_t scanned;   /* scanned (no entry, a stale or damaged one, or no cache) */
    size_t damaged;   /* entries ignored as damaged (counted in scanned too) */
    size_t written;   /* entries written */
    size_t unwritten; /* entries that could not be written */
    size_t recent;    /* not written: the file changed too recently */
};

struct feed_source;

/* Scan `paths` (borrowed for the source's life). On a fail-policy error the
 * message names the file and offset. With a group_size G > 1, paths hold
 * npaths / G groups one after the other (npaths a multiple of G): file i is
 * group i, named by its first path; its image is its arrays' decompressed
 * bytes one after the other, held in the cache as a compressed file's is. */
int feed_source_open(struct feed_source **out, const char *const *paths, size_t npaths,
                     const struct feed_source_opts *opts, struct sl_error *err) SL_MUST_CHECK;
void feed_source_close(struct feed_source *s);

size_t feed_source_nfiles(const struct feed_source *s);
/* Records in file i (0 for a skipped file). */
uint64_t feed_source_count(const struct feed_source *s, size_t i);
const uint64_t *feed_source_counts(const struct feed_source *s);
uint64_t feed_source_total_bytes(const struct feed_source *s);
/* The files' sizes on disk (compressed where they are). */
uint64_t feed_source_disk_bytes(const struct feed_source *s);
/* Remote files the scan read whole and kept as their cached image (read
 * once: the first access finds them in the cache while they stay there). */
size_t feed_source_captured(const struct feed_source *s);

/* The disk cache's figures (all zero without one). */
struct feed_diskcache_stats;
void feed_source_disk_cache_stats(const struct feed_source *s, struct feed_diskcache_stats *out);

/* Remote files read by range (feed_fetch.h), not whole. */
size_t feed_source_ranged(const struct feed_source *s);

const char *feed_source_path(const struct feed_source *s, size_t i);
/* The scan cache's work at open (all zero without a cache). */
void feed_source_cache_stats(const struct feed_source *s, struct feed_source_cache_stats *out);
/* Decompressed offset of record `rec` of file `file` (for error messages). */
uint64_t feed_source_offset(const struct feed_source *s, size_t file, uint64_t rec);

/* A handle for one thread's reads: holds its references to cached files and
 * the storage of the record it last framed. */
struct feed_reader;
int feed_reader_open(struct feed_reader **out, struct feed_source *s, struct sl_error *err) SL_MUST_CHECK;
void feed_reader_close(struct feed_reader *r);

/* Frame record `rec` of file `file` through the format's ops (its bytes,
 * or its named fields): lent until the next read on this reader or its
 * close. Errors name the file first ("<path>: corrupted record at N"), once;
 * the image is pinned until the reader moves to another file or lets go. */
int feed_reader_frame(struct feed_reader *r, uint32_t file, uint64_t rec, const struct fmt_frame **out,
                      struct sl_error *err) SL_MUST_CHECK;

/* A record's named field (a tar sample's member: its extension and data). */
#define FEED_MAX_FIELDS FMT_MAX_FIELDS
struct feed_field {
    const char *name;
    const uint8_t *data;
    size_t len;
};

/* feed_reader_frame for records made of fields (tar samples: fields in
 * archive order), valid until the next call on this reader; SL_EINVAL for
 * records of bytes. Tar shards are served uncompressed or gzip-compressed
 * (other filters: an error at open). */
int feed_reader_sample(struct feed_reader *r, uint32_t file, uint64_t sample, const struct feed_field **fields,
                       size_t *n, struct sl_error *err) SL_MUST_CHECK;

/* feed_reader_frame for records of bytes (TFRecord, text lines): lent until
 * the next read on this reader or its close; SL_EINVAL for records made of
 * fields. */
int feed_reader_get(struct feed_reader *r, uint32_t file, uint64_t rec, const uint8_t **data, size_t *len,
                    struct sl_error *err) SL_MUST_CHECK;

/* Let go of the image this reader holds (its views become invalid), so
 * that a reader waiting for cache room is not kept waiting by an idle one.
 * Callers that keep a reader between batches of reads call this after
 * each batch. */
void feed_reader_release(struct feed_reader *r);

/* Time this reader has spent inflating compressed files (thread CPU and
 * wall nanoseconds, since it was opened). */
void feed_reader_inflate_ns(const struct feed_reader *r, uint64_t *cpu_ns, uint64_t *wall_ns);

/* Read the records of files read by range out of `fetch` (feed_fetch.h:
 * the piece's, started ahead), waiting for each record's bytes; NULL: no
 * fetch (each such record is then fetched alone, when it is read). The
 * fetch must stay open until this reader is given another or NULL. */
struct feed_fetch;
void feed_reader_use(struct feed_reader *r, struct feed_fetch *fetch);

/* Hint that record `rec` of `file` will be read soon: for memory-mapped
 * files, asks the CPU to start loading its first bytes (up to 2 KiB) into
 * the cache, so a shuffled piece's scattered records arrive while earlier
 * ones are checked and decoded. Does nothing for other files or a bad
 * index; never faults, never blocks. */
void feed_reader_prefetch(const struct feed_reader *r, uint32_t file, uint64_t rec);

#endif
