/* sl_queue: a ring of pointers under one mutex with two condition variables
 * (not_full for producers, not_empty for consumers), both on the monotonic
 * clock so a timed pop is immune to wall-clock jumps.
 *
 * A close sets `closed` and `code` once and broadcasts both condition
 * variables; every wait loop re-checks `closed` after waking, so no waiter
 * can sleep through a close. Signals go out only when someone waits.
 *
 * Lock order: one lock per queue (q->mu); nothing else is taken while it is
 * held and no callback runs under it.
 */
/* pthread_condattr_setclock, clock_gettime (CMake defines it too) */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "sl_queue.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "sl_alloc.h"

struct sl_queue {
    pthread_mutex_t mu;
    pthread_cond_t not_full;  /* producers wait here */
    pthread_cond_t not_empty; /* consumers wait here */
    void **ring;
    size_t cap, head, len; /* items at ring[(head + i) % cap], i < len */
    int waiting_push, waiting_pop;
    int closed; /* set once, under mu */
    int code;   /* 0: normal close; < 0: the error */
    char msg[SL_ERROR_MSG_MAX];
    size_t capacity; /* == cap; readable without the lock */
};

int sl_queue_create(struct sl_queue **out, size_t capacity)
{
    *out = NULL;
    if (capacity == 0 || capacity > SIZE_MAX / sizeof(void *))
        return SL_EINVAL;
    struct sl_queue *q = sl_calloc(1, sizeof *q);
    if (q == NULL)
        return SL_ENOMEM;
    q->ring = sl_malloc(capacity * sizeof(void *));
    if (q->ring == NULL)
        goto out_free_queue;
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        goto out_free_ring;
    if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 || pthread_cond_init(&q->not_full, &ca) != 0)
        goto out_destroy_attr;
    if (pthread_cond_init(&q->not_empty, &ca) != 0)
        goto out_destroy_not_full;
    if (pthread_mutex_init(&q->mu, NULL) != 0)
        goto out_destroy_not_empty;
    pthread_condattr_destroy(&ca);
    q->cap = q->capacity = capacity;
    *out = q;
    return 0;

out_destroy_not_empty:
    pthread_cond_destroy(&q->not_empty);
out_destroy_not_full:
    pthread_cond_destroy(&q->not_full);
out_destroy_attr:
    pthread_condattr_destroy(&ca);
out_free_ring:
    sl_free(q->ring);
out_free_queue:
    sl_free(q);
    return SL_ENOMEM;
}

void sl_queue_destroy(struct sl_queue *q)
{
    if (q == NULL)
        return;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->not_full);
    pthread_cond_destroy(&q->not_empty);
    sl_free(q->ring);
    sl_free(q);
}

/* The code push/pop report once closed: SL_ECLOSED or the error. */
static int close_code(const struct sl_queue *q)
{
    return q->code < 0 ? q->code : SL_ECLOSED;
}

static void put_locked(struct sl_queue *q, void *item)
{
    q->ring[(q->head + q->len) % q->cap] = item;
    q->len++;
    if (q->waiting_pop > 0)
        pthread_cond_signal(&q->not_empty);
}

static void *take_locked(struct sl_queue *q)
{
    void *item = q->ring[q->head];
    q->head = (q->head + 1) % q->cap;
    q->len--;
    if (q->waiting_push > 0)
        pthread_cond_signal(&q->not_full);
    return item;
}

/* now + ms on the monotonic clock */
static struct timespec deadline_in(long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* timeout_ms < 0: wait forever; 0: not at all. */
static int push_common(struct sl_queue *q, void *item, long timeout_ms)
{
    pthread_mutex_lock(&q->mu);
    int rc = 0;
    while (!q->closed && q->len == q->cap) {
        if (timeout_ms == 0) {
            rc = SL_ETIMEOUT;
            break;
        }
        q->waiting_push++;
        pthread_cond_wait(&q->not_full, &q->mu);
        q->waiting_push--;
    }
    if (rc == 0 && q->closed)
        rc = close_code(q);
    if (rc == 0)
        put_locked(q, item);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

int sl_queue_push(struct sl_queue *q, void *item)
{
    return push_common(q, item, -1);
}

int sl_queue_try_push(struct sl_queue *q, void *item)
{
    return push_common(q, item, 0);
}

static int pop_common(struct sl_queue *q, void **item, long timeout_ms)
{
    struct timespec until;
    if (timeout_ms > 0)
        until = deadline_in(timeout_ms);
    pthread_mutex_lock(&q->mu);
    int rc = 0;
    /* an error close fails at once; a normal close still drains */
    while (q->len == 0 && !q->closed) {
        if (timeout_ms == 0) {
            rc = SL_ETIMEOUT;
            break;
        }
        q->waiting_pop++;
        int w = timeout_ms < 0 ? pthread_cond_wait(&q->not_empty, &q->mu)
                               : pthread_cond_timedwait(&q->not_empty, &q->mu, &until);
        q->waiting_pop--;
        if (w == ETIMEDOUT && q->len == 0 && !q->closed) {
            rc = SL_ETIMEOUT;
            break;
        }
    }
    if (rc == 0 && q->closed && (q->code < 0 || q->len == 0))
        rc = close_code(q);
    if (rc == 0)
        *item = take_locked(q);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

int sl_queue_pop(struct sl_queue *q, void **item)
{
    return pop_common(q, item, -1);
}

int sl_queue_pop_timeout(struct sl_queue *q, void **item, long timeout_ms)
{
    return pop_common(q, item, timeout_ms < 0 ? 0 : timeout_ms);
}

int sl_queue_try_pop(struct sl_queue *q, void **item)
{
    return pop_common(q, item, 0);
}

void sl_queue_close(struct sl_queue *q, int code, const char *msg)
{
    pthread_mutex_lock(&q->mu);
    if (!q->closed) {
        q->closed = 1;
        q->code = code < 0 ? code : 0;
        snprintf(q->msg, sizeof q->msg, "%s", msg != NULL ? msg : q->code < 0 ? sl_code_name(q->code) : "queue closed");
        pthread_cond_broadcast(&q->not_full);
        pthread_cond_broadcast(&q->not_empty);
    }
    pthread_mutex_unlock(&q->mu);
}

int sl_queue_error(struct sl_queue *q, struct sl_error *err)
{
    pthread_mutex_lock(&q->mu);
    int rc = q->closed ? close_code(q) : 0;
    if (err != NULL) {
        if (rc != 0)
            sl_error_set(err, rc, "%s", q->msg);
        else
            sl_error_clear(err);
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

int sl_queue_reclaim(struct sl_queue *q, void **item)
{
    pthread_mutex_lock(&q->mu);
    int rc = SL_END;
    if (q->len > 0) {
        *item = take_locked(q);
        rc = 0;
    }
    pthread_mutex_unlock(&q->mu);
    return rc;
}

size_t sl_queue_len(struct sl_queue *q)
{
    pthread_mutex_lock(&q->mu);
    size_t n = q->len;
    pthread_mutex_unlock(&q->mu);
    return n;
}

size_t sl_queue_capacity(const struct sl_queue *q)
{
    return q->capacity;
}
