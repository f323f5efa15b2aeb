/* feed_scan_cache: a file's scan (fmt_scan: where each record lies, the
 * count, the image's size and compression) kept on disk between starts of
 * a feeder, so a restart over many files does not read them all again.
 *
 * A cache is a directory holding one file per (data file, scan options):
 * "<16 hex digits>.scan", named by a 64-bit FNV-1a hash of the data file's
 * absolute path (realpath) and the options that change a scan's result
 * (format, the job's compression, max_record_bytes, count-only). Each is
 * written whole through sl_output (a temporary renamed over the name), so
 * a reader sees an old entry or a new one, never a part of one, however many
 * feeders share the directory.
 *
 * An entry holds the data file's identity when it was scanned: device,
 * inode, size, mtime and ctime with nanoseconds. A remote file (http(s)://,
 * s3://, issue #28) is named by its URL as written (no realpath), and its
 * identity is its size, a hash of its ETag and its Last-Modified time
 * (feed_file_id_remote); one without a strong ETag is never cached. It is used only when all
 * of them still match the file (ctime too: `cp -p` or `touch -d` over a
 * file keep its mtime, never its ctime). An entry is checked before it is
 * trusted: a header CRC-32C, every count bounded by the cache file's own
 * size before anything is allocated (so a damaged or hostile entry costs at
 * most what its file holds), every offset inside the image and in order,
 * tar parts inside the image with known names, and a CRC-32C over the whole
 * body. The checksums find damage, not intent: whoever can write the cache
 * directory can make the feeder serve other byte ranges of the same files,
 * so give the directory the permissions of the data.
 *
 * Layout (little-endian), FEED_SCAN_CACHE_HEADER bytes of header, then the
 * body, then the body's CRC-32C (4 bytes):
 *   0   "SLSCANC\0"  magic              8   u32 version (1)
 *   12  u32 format                      16  u32 compression asked (AUTO...)
 *   20  u32 flags (1: count-only)       24  u64 max_record_bytes
 *   32  u64 dev   40 u64 ino   48 u64 size
 *   56  i64 mtime s   64 u64 mtime ns   72 i64 ctime s   80 u64 ctime ns
 *   88  u64 count   96 u64 image bytes   104 u64 dropped tail
 *   112 u32 compression found (NONE, GZIP, ZLIB)   116 u32 names
 *   120 u64 parts   128 u32 path length   132 u32 CRC-32C of bytes 0..132
 * Body: the absolute path; count offsets (u64); for tar only (written and
 * read by the format's fmt_scan_keep, formats/fmt_tar_keep.c): count + 1
 * firsts (u64), the parts (u32 name, u32 0, u64 offset, u64 length) and the
 * names (64 bytes each, NUL-terminated).
 *
 * Thread-safe: a cache is read-only once open; load and store may run from
 * many threads at once (the scan's).
 */
#ifndef FEED_SCAN_CACHE_H
#define FEED_SCAN_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "fmt_format.h"
#include "sl_error.h"

#define FEED_SCAN_CACHE_VERSION 1u
#define FEED_SCAN_CACHE_HEADER 136u

/* What makes a file the same file: stat's fields. */
struct feed_file_id {
    uint64_t dev, ino, size;
    int64_t mtime_s, ctime_s;
    uint32_t mtime_ns, ctime_ns;
};

/* stat(path) into *out: 0 or SL_EIO ("stat(PATH): ..."). */
int feed_file_id_get(const char *path, struct feed_file_id *out, struct sl_error *err) SL_MUST_CHECK;
/* A remote object's identity from what its open found: dev
 * FEED_FILE_ID_REMOTE, ino a 64-bit FNV-1a hash of the ETag, the size, the
 * Last-Modified time as mtime (ns), ctime 0. SL_END when it has no strong
 * ETag (none sent, or a weak W/ one, which does not promise the same
 * bytes): such an object is not cached. */
#define FEED_FILE_ID_REMOTE UINT64_MAX
int feed_file_id_remote(uint64_t size, const char *etag, int64_t mtime_ns, struct feed_file_id *out) SL_MUST_CHECK;
/* 1 when every field is equal. */
int feed_file_id_equal(const struct feed_file_id *a, const struct feed_file_id *b);

/* The scan options that change a scan's result. */
struct feed_scan_key {
    enum fmt_format format;
    enum fmt_compression compression; /* as the job asks (AUTO: per file) */
    uint64_t max_record_bytes;        /* resolved: never 0 */
    int count_only;                   /* the scan checked no CRCs */
    uint64_t max_file;                /* most bytes a compressed file may inflate to: an entry
                                         over it is stale (the scan would refuse the file) */
};

struct feed_scan_cache;

/* Use directory `dir` (borrowed for the cache's life), creating it (one
 * level, mode 0777 less the umask) when it does not exist. 0, or SL_EIO /
 * SL_EINVAL with "scan cache DIR: ..." (not a directory, cannot be made). A
 * directory that cannot be written is not an error here: loads still work
 * and each store fails with the system's reason. */
int feed_scan_cache_open(struct feed_scan_cache **out, const char *dir, const struct feed_scan_key *key,
                         struct sl_error *err) SL_MUST_CHECK;
void feed_scan_cache_close(struct feed_scan_cache *c);

/* The entry's path for data file `path` (a local path, or a remote URL)
 * into out[cap]: 0, or SL_EIO when the path cannot be resolved, SL_EINVAL
 * when out is too small. */
int feed_scan_cache_entry(const struct feed_scan_cache *c, const char *path, char *out, size_t cap,
                          struct sl_error *err) SL_MUST_CHECK;

/* The scan of `path` whose identity is now `id`, from its entry:
 *   0           a hit: *out is the scan (the caller frees it with
 *               fmt_scan_free); its records were located by an earlier
 *               scan, so callers check them as they read them;
 *   SL_END      no entry, or a stale one (another identity, other options,
 *               another version, another path with the same hash): err says
 *               which, for a debug line;
 *   SL_ECORRUPT a damaged entry (bad magic or checksum, truncated, a count
 *               or offset out of bounds): err says what, naming the entry;
 *   SL_EIO      the entry cannot be read; SL_ENOMEM.
 * *out is NULL unless 0. */
int feed_scan_cache_load(const struct feed_scan_cache *c, const char *path, const struct feed_file_id *id,
                         struct fmt_scan **out, struct sl_error *err) SL_MUST_CHECK;

/* Write `scan`, found for `path` while it had identity `id`, as its entry
 * (replacing any). 0, or SL_EIO / SL_ENOMEM naming the entry and the call
 * that failed; the directory is then as it was. */
int feed_scan_cache_store(const struct feed_scan_cache *c, const char *path, const struct feed_file_id *id,
                          const struct fmt_scan *scan, struct sl_error *err) SL_MUST_CHECK;

#endif
