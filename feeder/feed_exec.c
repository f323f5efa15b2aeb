/* feed_exec: the executors (see feed_exec.h).
 *
 * Lock order: none held across calls; the two queues and the pools lock
 * internally, each alone.
 */
#include "feed_exec.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "feed_cache.h"
#include "feed_fetch.h"
#include "sl_alloc.h"
#include "sl_queue.h"
#include "sl_thread.h"
#include "sl_zsock.h"

struct executor {
    struct feed_exec *e;
    struct feed_assembler *as;
    void *push; /* wakes the owner's poll */
};

struct feed_exec {
    struct sl_queue *work, *done;
    struct feed_task *tasks;
    struct feed_task **free_tasks;
    size_t ntasks, nfree;
    void *pull;
    char addr[64];
    struct executor *exs;
    unsigned nexs; /* executors set up (assembler, socket) */
    pthread_t *threads;
    unsigned nthreads;        /* threads started */
    struct feed_cache *cache; /* borrowed: the decoded elements' cache; NULL: none */
};

static void *executor_main(void *arg)
{
    struct executor *ex = arg;
    struct feed_exec *e = ex->e;
    void *item;
    while (sl_queue_pop(e->work, &item) == 0) {
        struct feed_task *t = item;
        t->rc = sl_pool_get(t->pool, (void **)&t->buf);
        if (t->rc != 0) {
            t->buf = NULL;
            sl_error_set(&t->err, t->rc, "feeder is closing");
        } else {
            feed_assembler_use_fetch(ex->as, t->fetch);
            t->rc = feed_assembler_fill(ex->as, &t->piece, t->buf, sl_pool_bytes(t->pool), &t->layout, &t->err);
            feed_assembler_use_fetch(ex->as, NULL);
        }
        /* hand the task back through a locked queue (so the hand-over is a
         * real happens-before edge), then wake the owner's poll */
        if (sl_queue_push(e->done, t) != 0)
            break;
        if (zmq_send(ex->push, "", 0, 0) < 0)
            break; /* context terminated: the owner is gone */
    }
    return NULL;
}

int feed_exec_create(struct feed_exec **out, const struct feed_exec_opts *o, struct sl_error *err)
{
    *out = NULL;
    if (o->threads == 0 || o->ntasks == 0)
        return sl_error_set(err, SL_EINVAL, "executors: %u threads, %zu tasks", o->threads, o->ntasks);
    struct feed_exec *e = sl_calloc(1, sizeof *e);
    if (e == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    int rc;
    e->ntasks = o->ntasks;
    e->cache = o->cache;
    if ((rc = sl_queue_create(&e->work, e->ntasks)) != 0 || (rc = sl_queue_create(&e->done, e->ntasks)) != 0) {
        feed_exec_destroy(e);
        return sl_error_set(err, rc, "out of memory");
    }
    e->tasks = sl_calloc(e->ntasks, sizeof *e->tasks);
    e->free_tasks = sl_calloc(e->ntasks, sizeof *e->free_tasks);
    e->exs = sl_calloc(o->threads, sizeof *e->exs);
    e->threads = sl_calloc(o->threads, sizeof *e->threads);
    if (e->tasks == NULL || e->free_tasks == NULL || e->exs == NULL || e->threads == NULL) {
        feed_exec_destroy(e);
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < e->ntasks; i++) {
        e->free_tasks[e->nfree++] = &e->tasks[i];
        if ((rc = feed_fetch_open(&e->tasks[i].fetch, o->src, err)) != 0) {
            feed_exec_destroy(e);
            return rc;
        }
    }
    snprintf(e->addr, sizeof e->addr, "inproc://sluice-done-%p", (void *)e);
    e->pull = zmq_socket(o->zmq_ctx, ZMQ_PULL);
    if (e->pull == NULL || zmq_bind(e->pull, e->addr) != 0) {
        rc = sl_error_set(err, SL_EIO, "bind(%s): %s", e->addr, zmq_strerror(errno));
        feed_exec_destroy(e);
        return rc;
    }
    /* a task's done message waits for the serving thread, however many */
    const struct sl_zsock_opts zo = {.unbounded_send = 1};
    for (unsigned i = 0; i < o->threads; i++) {
        struct executor *ex = &e->exs[i];
        ex->e = e;
        e->nexs = i + 1;
        rc = feed_assembler_create(&ex->as, o->src, o->specs, o->nspecs, o->format, o->max_rows, o->metrics, err);
        if (rc == 0 && o->map != NULL)
            rc = feed_assembler_use_map(ex->as, o->map, o->map_seed, o->map_op_ns, err);
        if (rc == 0 && o->cache != NULL)
            rc = feed_assembler_use_cache(ex->as, o->cache, err);
        if (rc == 0) {
            ex->push = sl_zsock_open(o->zmq_ctx, ZMQ_PUSH, &zo, "a decode thread's done queue", err);
            if (ex->push == NULL)
                rc = SL_EIO;
        }
        if (rc == 0 && zmq_connect(ex->push, e->addr) != 0)
            rc = sl_error_set(err, SL_EIO, "connect(%s): %s", e->addr, zmq_strerror(errno));
        if (rc == 0 && sl_thread_start(&e->threads[i], executor_main, ex) != 0)
            rc = sl_error_set(err, SL_EIO, "pthread_create failed");
        if (rc != 0) {
            feed_exec_destroy(e);
            return rc;
        }
        e->nthreads = i + 1;
    }
    *out = e;
    return 0;
}

void feed_exec_recycle(struct feed_exec *e, struct feed_task *t)
{
    if (t->buf != NULL) {
        sl_pool_put(t->pool, t->buf);
        t->buf = NULL;
    }
    e->free_tasks[e->nfree++] = t;
}

void feed_exec_destroy(struct feed_exec *e)
{
    if (e == NULL)
        return;
    if (e->work != NULL)
        sl_queue_close(e->work, SL_ECLOSED, "feeder is stopping");
    for (unsigned i = 0; i < e->nthreads; i++)
        pthread_join(e->threads[i], NULL);
    /* tasks still queued, or done but not collected */
    void *item;
    while (e->work != NULL && sl_queue_reclaim(e->work, &item) == 0)
        feed_exec_recycle(e, item);
    while (e->done != NULL && sl_queue_reclaim(e->done, &item) == 0)
        feed_exec_recycle(e, item);
    for (unsigned i = 0; i < e->nexs; i++) {
        if (e->exs[i].push != NULL)
            zmq_close(e->exs[i].push);
        feed_assembler_destroy(e->exs[i].as);
    }
    if (e->pull != NULL)
        zmq_close(e->pull);
    sl_queue_destroy(e->work);
    sl_queue_destroy(e->done);
    for (size_t i = 0; e->tasks != NULL && i < e->ntasks; i++) {
        feed_fetch_close(e->tasks[i].fetch); /* after the executors: none reads it */
        sl_free(e->tasks[i].elems);
        sl_free(e->tasks[i].uncached);
    }
    sl_free(e->tasks);
    sl_free(e->free_tasks);
    sl_free(e->exs);
    sl_free(e->threads);
    sl_free(e);
}

void *feed_exec_socket(struct feed_exec *e)
{
    return e->pull;
}

struct feed_task *feed_exec_task(struct feed_exec *e)
{
    return e->nfree > 0 ? e->free_tasks[--e->nfree] : NULL;
}

int feed_exec_submit(struct feed_exec *e, struct feed_task *t, const struct feed_piece *piece)
{
    if (piece->n > t->cap) {
        struct feed_elem *el = sl_realloc(t->elems, piece->n * sizeof *el);
        if (el == NULL)
            return SL_ENOMEM;
        t->elems = el;
        if (t->fetch != NULL && e->cache != NULL) {
            struct feed_elem *u = sl_realloc(t->uncached, piece->n * sizeof *u);
            if (u == NULL)
                return SL_ENOMEM;
            t->uncached = u;
        }
        t->cap = piece->n;
    }
    if (piece->n)
        memcpy(t->elems, piece->elems, piece->n * sizeof *t->elems);
    t->piece = *piece;
    t->piece.elems = t->elems;
    t->rc = 0;
    t->buf = NULL;
    sl_error_clear(&t->err);
    /* its records read by range start coming now, but for those the
     * decoded elements' cache holds (a slot once ready stays ready) */
    const struct feed_elem *want = t->elems;
    size_t nwant = piece->n;
    if (t->fetch != NULL && e->cache != NULL) {
        nwant = 0;
        for (size_t i = 0; i < piece->n; i++)
            if (feed_cache_get(e->cache, t->elems[i].file, t->elems[i].record) == NULL)
                t->uncached[nwant++] = t->elems[i];
        want = t->uncached;
    }
    struct sl_error ignored = {0};
    if (t->fetch != NULL && feed_fetch_start(t->fetch, want, nwant, &ignored) != 0) {
        /* out of memory for its ranges: its records are fetched one by one
         * as they are read */
    }
    if (sl_queue_push(e->work, t) != 0) {
        feed_fetch_cancel(t->fetch);
        return SL_ECLOSED;
    }
    return 0;
}

struct feed_task *feed_exec_done(struct feed_exec *e)
{
    char wake;
    while (zmq_recv(e->pull, &wake, sizeof wake, ZMQ_DONTWAIT) >= 0)
        ;
    void *t;
    return sl_queue_try_pop(e->done, &t) == 0 ? t : NULL;
}

size_t feed_exec_free(const struct feed_exec *e)
{
    return e->nfree;
}

size_t feed_exec_tasks(const struct feed_exec *e)
{
    return e->ntasks;
}
