/* sl_pool: N fixed-size buffers allocated once at create; the hot path
 * takes and returns them and never allocates.
 *
 * The cycle: a stage takes a buffer (sl_pool_get), fills it, and hands it
 * on; whoever is last to hold it returns it (sl_pool_put). A buffer sent
 * zero-copy is returned by libzmq's I/O thread through sl_pool_zmq_free:
 *
 *     zmq_msg_init_data(&frame, buf + off, len, sl_pool_zmq_free, pool);
 *
 * One buffer may go out as several frames (one per tensor of a piece): take
 * one extra reference per extra frame with sl_pool_ref; the buffer returns
 * to the free list when the last reference is put back. sl_pool_put and
 * sl_pool_zmq_free accept any pointer INTO a buffer, so a frame may start
 * anywhere inside it (a zero-length frame should be sent without a free
 * function: libzmq calls it for empty frames too).
 *
 * Thread-safe: yes, every function but create and destroy. Destroy the pool
 * only when no buffer is out: with ZeroMQ, after the sockets are closed and
 * zmq_ctx_term() has returned (it waits for pending messages to be freed);
 * sl_pool_wait_idle() helps.
 */
#ifndef SL_POOL_H
#define SL_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

struct sl_pool;

/* Counters, a snapshot. */
struct sl_pool_stats {
    size_t nbufs;      /* buffers in the pool */
    size_t bytes_each; /* usable bytes per buffer */
    size_t in_use;     /* buffers out now */
    size_t peak;       /* most buffers out at once */
    uint64_t gets;     /* buffers handed out */
    uint64_t waits;    /* gets that had to wait for a put */
};

/* `nbufs` (>= 1) buffers of `bytes_each` (>= 1) bytes, each aligned to 64
 * bytes, in one allocation. 0, SL_EINVAL or SL_ENOMEM. */
int sl_pool_create(struct sl_pool **out, size_t nbufs, size_t bytes_each) SL_MUST_CHECK;

/* Bytes before the first buffer of a shared pool: "SLSHM001", then the
 * token (u64 little-endian), then zeros. */
#define SL_POOL_SHM_HEADER 4096u

/* A shared pool's memory, for another process to map read-only. */
struct sl_pool_shm {
    int fd;         /* the memfd (owned by the pool, close-on-exec); others open /proc/<pid>/fd/<fd> */
    uint64_t size;  /* bytes: SL_POOL_SHM_HEADER + nbufs x stride */
    uint64_t token; /* random, also written after the magic: proves a mapping is this pool's */
};

/* As sl_pool_create, with the buffers in a memfd sealed against resizing
 * (so no reader can shrink it under the owner), mapped shared; *shm says
 * how others find it. The memory lives on while any process maps it, after
 * destroy too. 0, SL_EINVAL, or SL_EIO (no memfd here: the caller may fall
 * back to sl_pool_create). */
int sl_pool_create_shared(struct sl_pool **out, size_t nbufs, size_t bytes_each, struct sl_pool_shm *shm) SL_MUST_CHECK;

/* Where `ptr` (in a buffer of a shared pool) lies in its memfd; 0 for a
 * pointer of a private pool or outside every buffer. */
uint64_t sl_pool_offset(const struct sl_pool *p, const void *ptr);

/* Frees the pool. A buffer still out is a bug that would turn into a write
 * to freed memory later: destroy reports it on stderr and aborts. NULL is
 * accepted. */
void sl_pool_destroy(struct sl_pool *p);

/* A free buffer (one reference, sl_pool_bytes() usable bytes, contents
 * undefined) into *buf, waiting while none is free. 0, or SL_ECLOSED once
 * the pool is closed (also when the close happens while waiting). */
int sl_pool_get(struct sl_pool *p, void **buf) SL_MUST_CHECK;

/* As get, without waiting: SL_ETIMEOUT when none is free. */
int sl_pool_try_get(struct sl_pool *p, void **buf) SL_MUST_CHECK;

/* Add `n` references to the buffer holding `ptr` (which is out). 0, or
 * SL_EINVAL when ptr is in no buffer that is out. */
int sl_pool_ref(struct sl_pool *p, void *ptr, unsigned n) SL_MUST_CHECK;

/* Drop one reference to the buffer holding `ptr`; at zero it is free again
 * and one waiting get wakes. From any thread. A pointer outside every
 * buffer, or into a buffer that is not out, is a bug that would corrupt
 * the free list: reported on stderr, then abort(). Works after close. */
void sl_pool_put(struct sl_pool *p, void *ptr);

/* sl_pool_put(hint, data), shaped as ZeroMQ's zmq_free_fn. */
void sl_pool_zmq_free(void *data, void *hint);

/* Close: every waiting and later get returns SL_ECLOSED; puts still work. */
void sl_pool_close(struct sl_pool *p);

/* Wait until every buffer is back, at most timeout_ms (< 0: forever).
 * 0 or SL_ETIMEOUT. */
int sl_pool_wait_idle(struct sl_pool *p, long timeout_ms) SL_MUST_CHECK;

/* Usable bytes per buffer. */
size_t sl_pool_bytes(const struct sl_pool *p);

void sl_pool_stats(struct sl_pool *p, struct sl_pool_stats *out);

#endif
