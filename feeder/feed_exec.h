/* feed_exec: the feeder's executors, the threads that assemble pieces.
 *
 * A fixed set of tasks (made at create: they bound how many pieces are
 * assembled at once) cycles free -> submitted -> done -> free. The owner
 * (the serving thread) takes a free task, says which piece to make and in
 * which pool (feed_exec_submit); an executor takes a buffer of that pool,
 * assembles the piece into it (feed_assemble) and hands the task back
 * through a done queue, waking the owner's poll with an empty message on
 * an inproc socket (feed_exec_socket). The owner collects it
 * (feed_exec_done), sends the piece or not, and recycles the task, whose
 * buffer then goes back to its pool. A task carries its pool, so executors
 * never read the owner's state.
 *
 * Thread-safe: no: one owner. The executors touch only the tasks handed to
 * them, through the queues (a locked hand-over each way).
 */
#ifndef FEED_EXEC_H
#define FEED_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "feed_assemble.h"
#include "feed_plan.h"
#include "sl_error.h"
#include "sl_pool.h"

struct feed_task {
    /* the owner's, set before feed_exec_submit and kept as they are */
    uint32_t conn;           /* the server's connection entry it was made for */
    uint64_t generation;     /* the trainer connection it was made for */
    uint64_t ordinal;        /* its place among the pieces scheduled for that connection */
    struct feed_piece piece; /* elems: the task's own copy (feed_exec_submit) */
    struct sl_pool *pool;    /* where its buffer comes from, and goes back to */
    /* the executor's: a buffer of `pool` holding the piece laid out, or an error */
    uint8_t *buf;
    struct feed_layout layout;
    int rc;
    struct sl_error err;
    /* private */
    struct feed_elem *elems;
    size_t cap;
    struct feed_fetch *fetch;   /* its records read by range, fetched from submit on; NULL: none */
    struct feed_elem *uncached; /* with the element cache: the elements to fetch (cap of them) */
};

struct feed_exec_opts {
    void *zmq_ctx;              /* borrowed: the owner's ZeroMQ context */
    struct sl_metrics *metrics; /* borrowed: where the executors add their stage times; NULL: none */
    struct feed_source *src;    /* borrowed */
    const struct fmt_feature_spec *specs;
    size_t nspecs;
    enum fmt_format format;
    size_t max_rows; /* G: each assembler's capacity */
    /* borrowed: the decoded-element cache every assembler uses; NULL: none */
    struct feed_cache *cache;
    /* borrowed: the map stage's plan every assembler runs (feed_assembler_use_map), keyed by map_seed; NULL: none */
    const struct map_plan *map;
    uint64_t map_seed;
    uint64_t *map_op_ns; /* borrowed: each op's CPU ns, added to by every assembler; NULL: not kept */
    unsigned threads;    /* executor threads, >= 1 */
    size_t ntasks;       /* tasks, >= 1 */
};

struct feed_exec;

/* Make the tasks, the queues, the wake-up socket and the threads. On error
 * what was made is undone. */
int feed_exec_create(struct feed_exec **out, const struct feed_exec_opts *o, struct sl_error *err) SL_MUST_CHECK;

/* Stop: close the work queue, join the threads (the caller first closes
 * the pool an executor may be waiting on), put back the buffers of tasks
 * not collected, close the sockets (before the owner terminates the ZeroMQ
 * context), free everything. NULL is accepted. */
void feed_exec_destroy(struct feed_exec *e);

/* The socket to poll for ZMQ_POLLIN: some task may be done. */
void *feed_exec_socket(struct feed_exec *e);

/* A free task, or NULL when every task is out. */
struct feed_task *feed_exec_task(struct feed_exec *e);

/* Hand task t (from feed_exec_task; conn, generation, ordinal and pool
 * set) to the executors, to make `piece` (its elements are copied; those
 * read by range start coming at once: feed_fetch.h). 0;
 * SL_ENOMEM (the task stays the caller's: recycle it); SL_ECLOSED when
 * stopping (likewise). */
int feed_exec_submit(struct feed_exec *e, struct feed_task *t, const struct feed_piece *piece) SL_MUST_CHECK;

/* The next task done, or NULL when none is (wake-up messages are drained). */
struct feed_task *feed_exec_done(struct feed_exec *e);

/* A task the owner is finished with: its buffer (if any) goes back to its
 * pool, the task is free again. */
void feed_exec_recycle(struct feed_exec *e, struct feed_task *t);

/* Tasks free (not submitted, not done-and-uncollected). */
size_t feed_exec_free(const struct feed_exec *e);
size_t feed_exec_tasks(const struct feed_exec *e);

#endif
