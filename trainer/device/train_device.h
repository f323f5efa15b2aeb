/* train_device: the trainer's device backends behind one small ops table
 * (as NCCL's net plugin or SQLite's VFS): a device stages host buffers into
 * its own memory on two copy streams (double buffering) and joins in
 * all-reduces.
 *
 * Backends: "cpu" is always built (host memory, synchronous copies);
 * "cuda" exists only when the build found CUDA and NCCL (SLUICE_HAVE_CUDA),
 * and its NCCL setup lives in train_nccl.h. The kinds built are listed in
 * train_backend.c, which also defines train_device_find, _count and
 * _describe.
 *
 * Thread-safety: train_device_find, train_device_count and
 * train_device_describe may be called from any thread. An open device has
 * one owner thread at a time (one thread per replica); a device may be
 * handed to another thread between calls, with the caller providing the
 * happens-before (a queue, a join).
 *
 * Errors: every int-returning member returns 0 or a negative SL_E* code and
 * fills `err` (which may be NULL). CUDA and NCCL failures are SL_EDEVICE with
 * the call, the size, the GPU and cudaGetErrorString / ncclGetErrorString:
 * "cudaMalloc(123 bytes) on GPU 0: out of memory".
 */
#ifndef TRAIN_DEVICE_H
#define TRAIN_DEVICE_H

#include <stddef.h>

#include "sl_error.h"

/* Copy streams per device: 0 and 1, so one batch is copied while the step
 * on the previous one runs. */
#define TRAIN_DEVICE_STREAMS 2

/* Alignment of every buffer the cpu backend hands out (the cuda backend's
 * allocations are at least this aligned too). */
#define TRAIN_DEVICE_ALIGN 64

/* An open device (opaque; the backend owns it). */
struct train_device;

/* A communicator over the replicas of one all-reduce group (opaque; the
 * backend that created it owns it). The cuda backend's comes from
 * train_nccl_comm_init(). */
struct train_comm;

struct train_device_ops {
    /* "cpu" or "cuda"; a static string. */
    const char *name;

    /* Number of devices of this kind. cuda: cudaGetDeviceCount, 0 when there
     * is no GPU or no driver (never an error, never a crash). cpu: 1, the
     * host; cpu ordinals name replicas sharing it. Blocking, cheap. */
    int (*count)(void);

    /* One line for logs, e.g. "GPU 0: NVIDIA H200 (139.8 GiB)", into
     * buf[0..n) (truncated, always NUL-terminated when n > 0). 0, SL_EINVAL
     * (ordinal out of range) or SL_EDEVICE. Does not open the device. */
    int (*describe)(int ordinal, char *buf, size_t n, struct sl_error *err) SL_MUST_CHECK;

    /* Open device `ordinal` and create its copy streams. On success *out
     * is owned by the caller until close(). SL_EINVAL for a bad ordinal,
     * SL_ENOMEM, SL_EDEVICE. Blocking (a CUDA context may take a second). */
    int (*open)(struct train_device **out, int ordinal, struct sl_error *err) SL_MUST_CHECK;

    /* Page-locked host memory of n bytes (n > 0) for staging: *host is owned
     * by the caller until free_pinned() on the same device, and must be freed
     * before close(). cpu: ordinary memory, TRAIN_DEVICE_ALIGN-aligned.
     * SL_EINVAL (n == 0), SL_ENOMEM (cpu), SL_EDEVICE (cuda). Blocking and
     * slow on cuda: allocate at start, never on the hot path. */
    int (*alloc_pinned)(struct train_device *d, size_t n, void **host, struct sl_error *err) SL_MUST_CHECK;
    /* Free what alloc_pinned gave; NULL is a no-op. No copy reading it may
     * still be in flight (sync its stream first). */
    void (*free_pinned)(struct train_device *d, void *host);

    /* Device memory of n bytes (n > 0): *dev is owned by the caller until
     * free_device() on the same device, before close(). Not addressable
     * from the host on cuda. Same errors and cost as alloc_pinned. */
    int (*alloc_device)(struct train_device *d, size_t n, void **dev, struct sl_error *err) SL_MUST_CHECK;
    /* Free what alloc_device gave; NULL is a no-op. Blocking on cuda (waits
     * for work using it). */
    void (*free_device)(struct train_device *d, void *dev);

    /* Queue a copy of n bytes from host to dev on copy stream `stream`
     * (0 or 1). Both buffers are borrowed and must stay valid and untouched
     * until sync(stream) returns; copies on one stream run in order, the two
     * streams run independently. Does not block on cuda when `host` came from
     * alloc_pinned; cpu copies at once (memcpy) before returning. SL_EINVAL
     * (bad stream), SL_EDEVICE. */
    int (*copy_h2d_async)(struct train_device *d, void *dev, const void *host, size_t n, int stream,
                          struct sl_error *err) SL_MUST_CHECK;

    /* Block until everything queued on `stream` (0 or 1) has finished.
     * cpu: nothing to wait for. SL_EINVAL (bad stream), SL_EDEVICE (an
     * earlier asynchronous failure surfaces here). */
    int (*sync)(struct train_device *d, int stream, struct sl_error *err) SL_MUST_CHECK;

    /* In-place sum of n floats at dev_buf (device memory of the comm's
     * device) across every rank of `c`; returns when the result is in
     * dev_buf. Every rank must call it with the same n, in the same order
     * relative to other collectives on c. Runs on the device's own
     * collective stream, not on a copy stream: data written by a copy must
     * be synced first. Blocking; SL_EDEVICE on failure.
     * cpu: NULL. This is the primitive under the "nccl" collective
     * (train_coll.h, train_coll_nccl.c), which is what the trainer calls;
     * collectives among cpu replicas are the "local" and "ring" ones. */
    int (*all_reduce_sum_f32)(struct train_comm *c, float *dev_buf, size_t n, struct sl_error *err) SL_MUST_CHECK;

    /* Destroy the streams and release the device; NULL is a no-op. Waits for
     * queued work. Buffers still allocated are the caller's leak. */
    void (*close)(struct train_device *d);
};

/* The backend named `kind` ("cpu" or "cuda"), or NULL when unknown or not
 * built. Returned tables are static and const. */
const struct train_device_ops *train_device_find(const char *kind);

/* Devices of `kind`: find(kind)->count(), and 0 for an unknown or absent
 * backend. */
int train_device_count(const char *kind);

/* One line naming device `ordinal` of `kind` and its memory, for logs.
 * 0; SL_EINVAL for an unknown kind or ordinal; SL_EDEVICE. On failure buf
 * holds "<kind> <ordinal>: unavailable" so a log line still reads. */
int train_device_describe(const char *kind, int ordinal, char *buf, size_t n, struct sl_error *err) SL_MUST_CHECK;

/* Replicas one trainer can have (the --devices and --replicas limit). */
#define TRAIN_DEVICE_MAX_REPLICAS 1024

/* The trainer's --devices option, resolved (caller-owned value struct). */
struct train_device_spec {
    char kind[8];                            /* "cpu" or "cuda" */
    int count;                               /* replicas, >= 1 */
    int ordinals[TRAIN_DEVICE_MAX_REPLICAS]; /* cuda: the GPUs, in replica
                                                  order; cpu: 0 .. count-1 */
    int automatic;                           /* chosen by "auto" */
};

/* Parse and resolve `text` (NULL means "auto"): "auto" (every GPU when the
 * cuda backend is built and finds one, else one CPU replica per online
 * core), "cpu" (one per core), "cpu:N", "gpu" (every GPU), "gpu:0,1" (also
 * "gpu:0,gpu:1"). Asks the cuda backend how many GPUs there are for auto
 * and gpu forms. 0, or SL_EINVAL with a message that starts "--devices: "
 * (bad syntax, N out of [1, 1024], GPUs asked of a build without CUDA, a
 * GPU absent or listed twice). */
int train_device_spec_parse(const char *text, struct train_device_spec *out, struct sl_error *err) SL_MUST_CHECK;

/* The ordinal a device was opened with; the ops table it belongs to. */
int train_device_ordinal(const struct train_device *d);
const struct train_device_ops *train_device_ops_of(const struct train_device *d);

#endif
