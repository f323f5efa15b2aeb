/* feed_plan: the plan, a pure deterministic function of (job, file list,
 * record counts, cluster shape) that says which elements go, in which
 * order, in which piece, to which worker and replica (docs/semantics.md 2-4).
 *
 * Nothing here reads data: the executor asks the plan for the next piece
 * and reads exactly the records the piece names. The plan is an iterator
 * with O(shuffle buffer + global batch) state, so a job of any size needs no
 * per-element table.
 *
 * Per worker w and epoch e the element stream is built as TensorFlow builds
 * it for experimental_distribute_dataset:
 *   files (FILE / AUTO / HINT=files: files j with j % W == w)
 *   -> interleave of `parallel_reads` files, block length 1
 *   -> (HINT=records: elements p with p % W == w)
 *   -> shuffle (buffer S, seeded; see below)
 *   -> batch by G (drop_remainder)
 *   -> (HINT=batches: global batches b with b % W == w)
 *   -> split: stream split with sizes(w) (OFF, FILE, AUTO, HINT), or the
 *      legacy split into N = W*R pieces per batch with piece p going to
 *      worker p % W (DATA)
 *   -> piece k of the worker's epoch to replica k % R at step k / R.
 * Every epoch has the same number of steps for all workers: the largest
 * ceil(pieces_w / R); replicas without a piece at a step get an empty one.
 *
 * Per-replica input mode (distribute_datasets_from_function): no auto-shard,
 * no split; the job may shard explicitly (files or records, W pipelines,
 * pipeline w); batches of G / N; batch k to replica k % R at step k / R.
 *
 * Shuffle (sluice's definition; TensorFlow's Philox stream is not
 * reproduced): the rng is splitmix64 with state
 *   seed ^ (reshuffle_each_epoch ? epoch * 0x9E3779B97F4A7C15 : 0);
 * the buffer is first filled with S elements (or all, if fewer); then
 * repeatedly i = next() % len, element i is emitted and replaced by the next
 * input element, or, once the input is exhausted, by the buffer's last
 * element (the buffer shrinks by one). The seed does not depend on the
 * worker, as in TensorFlow where every worker runs the same pipeline.
 *
 * Thread-safe: no; one owner. A config is caller-owned and borrowed for
 * the plan's life.
 */
#ifndef FEED_PLAN_H
#define FEED_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

enum feed_policy { FEED_SHARD_AUTO = 0, FEED_SHARD_OFF, FEED_SHARD_FILE, FEED_SHARD_DATA, FEED_SHARD_HINT };
enum feed_hint { FEED_HINT_FILES = 0, FEED_HINT_RECORDS, FEED_HINT_BATCHES };
/* Explicit sharding in per-replica input mode. */
enum feed_pr_shard { FEED_PR_SHARD_NONE = 0, FEED_PR_SHARD_FILES, FEED_PR_SHARD_RECORDS };

/* "auto", "off", "file", "data", "hint"; "files", "records", "batches";
 * "none", "files", "records". 0 or SL_EINVAL. */
int feed_policy_parse(const char *s, enum feed_policy *out) SL_MUST_CHECK;
int feed_hint_parse(const char *s, enum feed_hint *out) SL_MUST_CHECK;
int feed_pr_shard_parse(const char *s, enum feed_pr_shard *out) SL_MUST_CHECK;
const char *feed_policy_name(enum feed_policy p);
const char *feed_hint_name(enum feed_hint h);

struct feed_plan_config {
    size_t nfiles;
    const uint64_t *counts; /* records per file, file-list order */
    int source_is_files;    /* 1 (every sluice format): AUTO means FILE; 0: AUTO means DATA */
    enum feed_policy policy;
    enum feed_hint hint;   /* with FEED_SHARD_HINT */
    uint64_t global_batch; /* G >= 1 */
    int drop_remainder;
    uint64_t shuffle_buffer; /* 0: no shuffle */
    uint64_t seed;
    int reshuffle_each_epoch;
    uint64_t epochs;         /* 0: forever */
    uint32_t parallel_reads; /* interleave cycle length; 0 or 1: one file after another */
    int per_replica_input;
    enum feed_pr_shard pr_shard; /* per-replica input mode only */
    uint32_t workers;            /* W >= 1 */
    uint32_t replicas;           /* R >= 1 per worker */
};

/* One element: record `record` (0-based) of file `file` (index into the
 * file list). */
struct feed_elem {
    uint32_t file;
    uint64_t record;
};

/* A piece (one per-replica batch). `elems` is borrowed until the next call
 * on the plan. n == 0 is an empty piece. */
struct feed_piece {
    uint32_t worker, replica;
    uint64_t epoch, step;
    uint64_t seq; /* position in the worker's piece stream, over all epochs */
    size_t n;
    const struct feed_elem *elems;
};

/* Per-epoch figures (the same every epoch). */
struct feed_plan_summary {
    uint64_t steps;                /* steps per epoch, common to all workers */
    uint64_t files;                /* files this worker reads */
    uint64_t elements;             /* elements this worker delivers per epoch */
    uint64_t pieces;               /* non-padding pieces (empty ones of the split included) */
    uint64_t replica_elements[64]; /* per local replica (first 64) */
};

struct feed_plan;

/* Validate cfg and make the plan of worker `worker`. Errors (SL_EINVAL)
 * read as the job file would: "FILE sharding needs at least W files, found
 * N", "The global_batch_size G is not divisible by num_replicas_in_sync N",
 * "global_batch_size must be >= 1", ...
 * The sharding errors are TensorFlow's require_non_empty rule for the job:
 * some worker w has w < #items < W, i.e. 1 <= #items < W (no files at all
 * is no error: every shard is empty). FILE (and AUTO on files) counts
 * files; HINT counts what it shards: "HINT sharding needs at least W
 * files|records|batches, found N". FILE with W > 1 on a source that is not
 * files: "FILE sharding needs a file source (found an unshardable source
 * dataset)". Every worker gets the same error. */
int feed_plan_create(struct feed_plan **out, const struct feed_plan_config *cfg, uint32_t worker,
                     struct sl_error *err) SL_MUST_CHECK;
/* feed_plan_create with the config's steps per epoch given (steps:
 * feed_plan_summarize's, for any worker; UINT64_MAX: computed here), for a
 * caller that makes plans of many workers of one config: finding the
 * steps looks at every worker's files, W x files for each plan. */
int feed_plan_create_steps(struct feed_plan **out, const struct feed_plan_config *cfg, uint32_t worker, uint64_t steps,
                           struct sl_error *err) SL_MUST_CHECK;
void feed_plan_destroy(struct feed_plan *p);

/* The worker's next piece, in seq order: 0, or SL_END after the last epoch.
 * Pieces come step by step, replica by replica (seq = (epoch * steps + step)
 * * R + replica). When no worker has a piece (steps == 0) every epoch is
 * empty and the plan ends at once, even with epochs == 0. */
int feed_plan_next(struct feed_plan *p, struct feed_piece *piece, struct sl_error *err) SL_MUST_CHECK;

/* Move a fresh or running plan to piece `seq` of the worker's stream, so
 * that the next feed_plan_next returns it, without making the pieces before
 * it: whole epochs by arithmetic (an epoch's pieces depend only on its
 * number), then, within the epoch, the interleave a turn of its cycle at a
 * time and the shuffle by replaying its buffer's choices backwards from
 * `seq` until each slot's last one is known (about S (ln S + 0.58) draws
 * for a buffer of S, never more than the epoch's draws so far). Cost
 * O(S log S + files x parallel_reads), whatever the records' count; no
 * memory beyond the plan's. *within is always 0 (pieces the caller would
 * still pass over with feed_plan_next; kept for callers that do). 0, or
 * SL_END when `seq` is at or past the end of a finite plan (the plan is
 * then done). */
int feed_plan_seek(struct feed_plan *p, uint64_t seq, uint64_t *within) SL_MUST_CHECK;

/* Figures for worker `worker` without iterating the plan: what
 * `sluice-feeder plan` prints. */
int feed_plan_summarize(const struct feed_plan_config *cfg, uint32_t worker, struct feed_plan_summary *out,
                        struct sl_error *err) SL_MUST_CHECK;

/* The file indices worker `worker` reads, in order (writes at most cap;
 * returns the count, which may exceed cap: call with cap 0 to size). */
size_t feed_plan_worker_files(const struct feed_plan_config *cfg, uint32_t worker, uint32_t *out, size_t cap);

#endif
