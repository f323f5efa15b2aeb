/* sl_pool: one slab cut into `nbufs` buffers at a 64-byte stride, a stack
 * of free buffer indices, and a reference count per buffer, all under one
 * mutex. A put maps any pointer into a buffer back to its index by
 * arithmetic on the slab, so the ZeroMQ free callback needs only the data
 * pointer and the pool. Misuse that would corrupt the free list (a foreign
 * pointer, one reference too many put back) aborts at once rather than
 * handing the same buffer to two owners later.
 *
 * Lock order: one lock per pool (p->mu); nothing else is taken while it is
 * held. sl_pool_put may run on libzmq's I/O thread, so it only ever holds
 * p->mu for a few instructions and never waits.
 */
#define _GNU_SOURCE /* memfd_create, F_ADD_SEALS */
#include "sl_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "sl_alloc.h"

#define ALIGN 64

struct sl_pool {
    pthread_mutex_t mu;
    pthread_cond_t avail; /* getters wait for a free buffer */
    pthread_cond_t idle;  /* sl_pool_wait_idle waits for in_use == 0 */
    void *slab;           /* owned (private pools) */
    uint8_t *map;         /* shared pools: the memfd's mapping, map_size bytes */
    size_t map_size;
    int fd;         /* shared pools: the memfd; -1 otherwise */
    uint8_t *bufs;  /* slab rounded up to ALIGN: buffer i at bufs + i * stride */
    uintptr_t base; /* (uintptr_t)bufs */
    size_t nbufs, bytes_each, stride;
    uint32_t *refs;     /* per buffer; 0: free */
    size_t *free_stack; /* indices of free buffers */
    size_t nfree;
    int waiting_get, waiting_idle;
    int closed;
    size_t peak;
    uint64_t gets, waits;
};

/* The buffers in a sealed memfd, mapped shared: a header page (magic,
 * token), then the buffers. */
static int map_shared(struct sl_pool *p, size_t bytes, struct sl_pool_shm *shm)
{
    size_t size = SL_POOL_SHM_HEADER + bytes;
    int fd = memfd_create("sluice-pieces", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return SL_EIO;
    if (ftruncate(fd, (off_t)size) != 0) {
        close(fd);
        return SL_ENOMEM;
    }
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        close(fd);
        return SL_ENOMEM;
    }
    uint64_t token = 0;
    if (getrandom(&token, sizeof token, 0) != (ssize_t)sizeof token || token == 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        token = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^ (uintptr_t)m;
        token |= 1;
    }
    uint8_t *h = m;
    memcpy(h, "SLSHM001", 8);
    for (int i = 0; i < 8; i++)
        h[8 + i] = (uint8_t)(token >> (8 * i));
    /* nobody resizes it now: a reader that shrank it would fault the owner */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        munmap(m, size);
        close(fd);
        return SL_EIO;
    }
    p->map = m;
    p->map_size = size;
    p->fd = fd;
    p->bufs = h + SL_POOL_SHM_HEADER;
    shm->fd = fd;
    shm->size = size;
    shm->token = token;
    return 0;
}

static void release_memory(struct sl_pool *p)
{
    sl_free(p->slab);
    p->slab = NULL;
    if (p->map != NULL)
        munmap(p->map, p->map_size);
    if (p->fd >= 0)
        close(p->fd);
    p->map = NULL;
    p->fd = -1;
}

static int pool_create(struct sl_pool **out, size_t nbufs, size_t bytes_each, struct sl_pool_shm *shm)
{
    *out = NULL;
    if (nbufs == 0 || bytes_each == 0 || bytes_each > SIZE_MAX / 2)
        return SL_EINVAL;
    size_t stride = (bytes_each + ALIGN - 1) / ALIGN * ALIGN;
    if (nbufs > (SIZE_MAX - ALIGN - SL_POOL_SHM_HEADER) / stride)
        return SL_EINVAL;
    struct sl_pool *p = sl_calloc(1, sizeof *p);
    if (p == NULL)
        return SL_ENOMEM;
    p->fd = -1;
    int rc = SL_ENOMEM;
    if (shm == NULL) {
        p->slab = sl_malloc(nbufs * stride + ALIGN);
        if (p->slab == NULL)
            goto out_free_arrays;
        uintptr_t a = (uintptr_t)p->slab;
        p->bufs = (uint8_t *)p->slab + ((ALIGN - a % ALIGN) % ALIGN);
    } else if ((rc = map_shared(p, nbufs * stride, shm)) != 0) {
        goto out_free_arrays;
    }
    rc = SL_ENOMEM;
    p->refs = sl_calloc(nbufs, sizeof *p->refs);
    p->free_stack = sl_calloc(nbufs, sizeof *p->free_stack);
    if (p->refs == NULL || p->free_stack == NULL)
        goto out_free_arrays;
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        goto out_free_arrays;
    if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 || pthread_cond_init(&p->avail, &ca) != 0)
        goto out_destroy_attr;
    if (pthread_cond_init(&p->idle, &ca) != 0)
        goto out_destroy_avail;
    if (pthread_mutex_init(&p->mu, NULL) != 0)
        goto out_destroy_idle;
    pthread_condattr_destroy(&ca);
    p->base = (uintptr_t)p->bufs;
    p->nbufs = nbufs;
    p->bytes_each = bytes_each;
    p->stride = stride;
    /* handed out lowest address first */
    for (size_t i = 0; i < nbufs; i++)
        p->free_stack[i] = nbufs - 1 - i;
    p->nfree = nbufs;
    *out = p;
    return 0;

out_destroy_idle:
    pthread_cond_destroy(&p->idle);
out_destroy_avail:
    pthread_cond_destroy(&p->avail);
out_destroy_attr:
    pthread_condattr_destroy(&ca);
out_free_arrays:
    release_memory(p);
    sl_free(p->refs);
    sl_free(p->free_stack);
    sl_free(p);
    return rc;
}

int sl_pool_create(struct sl_pool **out, size_t nbufs, size_t bytes_each)
{
    return pool_create(out, nbufs, bytes_each, NULL);
}

int sl_pool_create_shared(struct sl_pool **out, size_t nbufs, size_t bytes_each, struct sl_pool_shm *shm)
{
    memset(shm, 0, sizeof *shm);
    shm->fd = -1;
    return pool_create(out, nbufs, bytes_each, shm);
}

uint64_t sl_pool_offset(const struct sl_pool *p, const void *ptr)
{
    uintptr_t a = (uintptr_t)ptr;
    if (p->map == NULL || a < p->base || a >= p->base + p->nbufs * p->stride)
        return 0;
    return (uint64_t)(a - (uintptr_t)p->map);
}

void sl_pool_destroy(struct sl_pool *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    size_t out = p->nbufs - p->nfree;
    pthread_mutex_unlock(&p->mu);
    if (out != 0) {
        fprintf(stderr, "sl_pool_destroy: %zu of %zu buffers still out\n", out, p->nbufs);
        abort();
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->avail);
    pthread_cond_destroy(&p->idle);
    release_memory(p);
    sl_free(p->refs);
    sl_free(p->free_stack);
    sl_free(p);
}

static int get_common(struct sl_pool *p, void **buf, int wait)
{
    pthread_mutex_lock(&p->mu);
    int rc = 0, waited = 0;
    while (!p->closed && p->nfree == 0) {
        if (!wait) {
            rc = SL_ETIMEOUT;
            break;
        }
        waited = 1;
        p->waiting_get++;
        pthread_cond_wait(&p->avail, &p->mu);
        p->waiting_get--;
    }
    if (rc == 0 && p->closed)
        rc = SL_ECLOSED;
    if (rc == 0) {
        size_t i = p->free_stack[--p->nfree];
        p->refs[i] = 1;
        p->gets++;
        p->waits += (uint64_t)waited;
        if (p->nbufs - p->nfree > p->peak)
            p->peak = p->nbufs - p->nfree;
        *buf = p->bufs + i * p->stride;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int sl_pool_get(struct sl_pool *p, void **buf)
{
    return get_common(p, buf, 1);
}

int sl_pool_try_get(struct sl_pool *p, void **buf)
{
    return get_common(p, buf, 0);
}

/* The index of the buffer holding ptr, or nbufs when it is in none (before
 * or after the slab, or in the padding between two buffers). Integer
 * arithmetic: comparing unrelated pointers is undefined. */
static size_t index_of(const struct sl_pool *p, const void *ptr)
{
    uintptr_t a = (uintptr_t)ptr;
    if (a < p->base || a - p->base >= p->nbufs * p->stride)
        return p->nbufs;
    size_t off = (size_t)(a - p->base);
    if (off % p->stride >= p->bytes_each)
        return p->nbufs;
    return off / p->stride;
}

int sl_pool_ref(struct sl_pool *p, void *ptr, unsigned n)
{
    pthread_mutex_lock(&p->mu);
    size_t i = index_of(p, ptr);
    int rc = SL_EINVAL;
    if (i < p->nbufs && p->refs[i] > 0 && n <= UINT32_MAX - p->refs[i]) {
        p->refs[i] += n;
        rc = 0;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void sl_pool_put(struct sl_pool *p, void *ptr)
{
    pthread_mutex_lock(&p->mu);
    size_t i = index_of(p, ptr);
    if (i == p->nbufs || p->refs[i] == 0) {
        fprintf(stderr, "sl_pool_put: %p is %s\n", ptr,
                i == p->nbufs ? "not in any buffer of the pool" : "in a buffer that is not out");
        abort();
    }
    if (--p->refs[i] == 0) {
        p->free_stack[p->nfree++] = i;
        if (p->waiting_get > 0)
            pthread_cond_signal(&p->avail);
        if (p->nfree == p->nbufs && p->waiting_idle > 0)
            pthread_cond_broadcast(&p->idle);
    }
    pthread_mutex_unlock(&p->mu);
}

void sl_pool_zmq_free(void *data, void *hint)
{
    sl_pool_put(hint, data);
}

void sl_pool_close(struct sl_pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->closed = 1;
    pthread_cond_broadcast(&p->avail);
    pthread_mutex_unlock(&p->mu);
}

int sl_pool_wait_idle(struct sl_pool *p, long timeout_ms)
{
    struct timespec until;
    if (timeout_ms >= 0) {
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&p->mu);
    int rc = 0;
    while (p->nfree != p->nbufs) {
        if (timeout_ms == 0) {
            rc = SL_ETIMEOUT;
            break;
        }
        p->waiting_idle++;
        int w = timeout_ms < 0 ? pthread_cond_wait(&p->idle, &p->mu) : pthread_cond_timedwait(&p->idle, &p->mu, &until);
        p->waiting_idle--;
        if (w == ETIMEDOUT && p->nfree != p->nbufs) {
            rc = SL_ETIMEOUT;
            break;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

size_t sl_pool_bytes(const struct sl_pool *p)
{
    return p->bytes_each;
}

void sl_pool_stats(struct sl_pool *p, struct sl_pool_stats *out)
{
    pthread_mutex_lock(&p->mu);
    out->nbufs = p->nbufs;
    out->bytes_each = p->bytes_each;
    out->in_use = p->nbufs - p->nfree;
    out->peak = p->peak;
    out->gets = p->gets;
    out->waits = p->waits;
    pthread_mutex_unlock(&p->mu);
}
