/* feed_fetch: the records a piece needs from remote files that are read by
 * range (issue #28), fetched ahead of the piece's assembly.
 *
 * A remote TFRecord file with an index can be read record by record: its
 * scan took every record's offset from FILE.idx, so a piece's records are
 * byte ranges of known objects. When the serving thread hands a piece to
 * the executors (feed_exec_submit), its task's fetch (one per task) sorts
 * those records by file and offset, joins neighbours into ranges (a gap
 * of at most FEED_FETCH_GAP_MAX is fetched while the gaps' bytes stay
 * within 1/16 of the records'),
 * cuts ranges into parts of at most FEED_FETCH_PART bytes and queues the
 * parts on the source's fetch threads (a bounded number: the requests one
 * feeder has in flight), in the plan's order. The executor that assembles
 * the piece then reads its records out of the fetch's buffer
 * (feed_reader_use), waiting only for what has not come yet. Tasks are
 * handed out ahead of the executors (as many as the feeder's tasks), so
 * the fetch of the next pieces overlaps the decoding of this one.
 *
 * Every part is read as the scan found the object (sto_open_known: its
 * size and ETag, If-Match on each range), so an object that changed is an
 * error naming both, and every record's CRCs are checked as it is framed.
 * A failed part fails the piece with the storage's error (the URL, the
 * range, the status or cause), after the retries sto allows.
 *
 * Memory: a fetch holds its piece's records and the gaps joined in: at
 * most 17/16 of the records' bytes; nothing per record beyond an entry.
 *
 * Thread-safety: a fetch is started by one thread (the task's owner) and
 * read by one executor at a time; the fetch threads fill its parts. A
 * fetch may be started again only once its last piece was read
 * (feed_reader_use(r, NULL)) or cancelled (feed_fetch_cancel).
 */
#ifndef FEED_FETCH_H
#define FEED_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "feed_plan.h"
#include "feed_source.h"
#include "sl_error.h"

#define FEED_FETCH_PART ((size_t)4 << 20) /* bytes of one request at most */
/* the largest gap between two records fetched with them: a larger one
 * costs more than a request of its own (bench_remote: records of 100 KiB
 * joined across gaps of a record fetched 1.033x their bytes, 0.940x curl
 * at 1 Gbit/s against 0.966x whole) */
#define FEED_FETCH_GAP_MAX ((uint64_t)16 << 10)
#define FEED_FETCH_THREADS_MAX 64

struct feed_fetch;

/* A fetch for pieces of `s`'s records: NULL in *out (and 0) when `s` reads
 * no file by range. */
int feed_fetch_open(struct feed_fetch **out, struct feed_source *s, struct sl_error *err) SL_MUST_CHECK;
/* Cancel what is queued, wait for the parts in flight, free. NULL: no-op. */
void feed_fetch_close(struct feed_fetch *f);

/* Queue the byte ranges of the records among elems[0..n) that are read by
 * range; the others are left to the reader. Returns at once. SL_ENOMEM:
 * nothing is queued (the reader then reads each record alone). */
int feed_fetch_start(struct feed_fetch *f, const struct feed_elem *elems, size_t n, struct sl_error *err) SL_MUST_CHECK;
/* Take back what is still queued and wait for the parts in flight. */
void feed_fetch_cancel(struct feed_fetch *f);

/* What fetches have done since the source opened (all of them). */
struct feed_fetch_stats {
    uint64_t requests;     /* parts fetched */
    uint64_t bytes;        /* bytes fetched (records and joined gaps) */
    uint64_t record_bytes; /* of them, the records' */
    uint64_t alone;        /* records a reader fetched alone (not in its fetch) */
};
void feed_source_fetch_stats(const struct feed_source *s, struct feed_fetch_stats *out);

#endif
