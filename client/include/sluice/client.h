/* sluice/client.h: the sluice C client library (libsluice).
 *
 * A trainer process is worker w of W, each with R replicas. It connects to
 * every feeder of a job, and receives the job's stream step by step: each
 * step is R pieces (one per local replica, replica 0..R-1, empty pieces
 * included), each piece a few named tensors. The stream is the same
 * whatever the number of feeders and whatever their timing; it can be
 * stopped and resumed at a step boundary (sluice_client_position, then
 * resume_seq). docs/client.md has the whole story; docs/protocol.md the
 * wire.
 *
 * Lifetime of what sluice_client_next_step hands out (pieces, tensors,
 * names, shapes, data): borrowed from the client, read-only, valid until
 * the next sluice_client_next_step or sluice_client_release on the same
 * client, or its close, whichever comes first. A feeder on the same host
 * places pieces in its shared memory, and then `data` points straight into
 * that memory (no copy); otherwise it points into the received message.
 * Either way the memory goes back to the feeder (with the step's flow
 * control credit) when the step is released: copy what must live longer.
 * `data` has no alignment guarantee: read int64 / float32 values with
 * memcpy, or copy them out.
 *
 * Errors: every function that can fail returns an int: SLUICE_OK (0),
 * SLUICE_END (1, the end of the stream), or a negative SLUICE_E* code, and
 * fills the caller's struct sluice_error (may be NULL) with the code and a
 * message naming what failed ("feeder ipc:///tmp/f.sock: job 'x' refused:
 * ...").
 *
 * Thread-safe: no. A client belongs to one thread (its ZeroMQ sockets do);
 * distinct clients may be used from distinct threads.
 *
 * fork(): a client belongs to the process that opened it. In a child,
 * sluice_client_next_step, sluice_client_keep_step and
 * sluice_client_keepalive fail at once with SLUICE_EINVAL ("client used
 * after fork(): create a new client in the child (this one belongs to
 * process PID)"), handing out nothing; sluice_client_release does nothing
 * and sluice_client_close frees only the child's copy (no socket closed,
 * nothing sent): the parent's stream goes on.
 */
#ifndef SLUICE_CLIENT_H
#define SLUICE_CLIENT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SLUICE_API __attribute__((visibility("default")))
#define SLUICE_MUST_CHECK __attribute__((warn_unused_result))
#else
#define SLUICE_API
#define SLUICE_MUST_CHECK
#endif

/* Return codes. */
#define SLUICE_OK 0
#define SLUICE_END 1         /* the end of the stream */
#define SLUICE_EIO (-1)      /* a system call failed */
#define SLUICE_ENOMEM (-2)   /* an allocation failed */
#define SLUICE_EINVAL (-3)   /* bad argument, option or key file */
#define SLUICE_ECORRUPT (-4) /* a feeder met damaged data */
#define SLUICE_EPROTO (-5)   /* a feeder refused this trainer (REFUSE), or violated the wire protocol */
#define SLUICE_ETIMEOUT (-6) /* a feeder was lost: silent past its timeout, or its connection closed */
#define SLUICE_ECLOSED (-8)  /* closed, or stopped through `stop` */

#define SLUICE_ERROR_MAX 1024

/* A caller-owned error: the code and its message (NUL-terminated). */
struct sluice_error {
    int code;
    char message[SLUICE_ERROR_MAX];
};

/* The library's version ("0.1.0") and the name of a code (SLUICE_EINVAL: "invalid"). */
SLUICE_API const char *sluice_version(void);
SLUICE_API const char *sluice_code_name(int code);

/* The library's log lines (a feeder lost, taken over, back; shared memory
 * mapped): one line each on file descriptor `fd` (stderr: 2; -1: none),
 * with the program name `prog` (at most 63 bytes kept), at least at
 * `min_level`. The default: stderr, "sluice", SLUICE_LOG_INFO. Call it
 * before opening clients (not thread-safe against a client's work). */
#define SLUICE_LOG_DEBUG 0
#define SLUICE_LOG_INFO 1
#define SLUICE_LOG_WARNING 2
#define SLUICE_LOG_ERROR 3
SLUICE_API void sluice_log_setup(const char *prog, int fd, int min_level);

/* Element types. A tensor's data is its values, little-endian. float16 is
 * IEEE 754 binary16; bfloat16 the top 16 bits of a float32 (widen it with
 * `(uint32_t)v << 16`). Both come only from a job's map (normalize, cast:
 * docs/map.md). FLOAT16 and BFLOAT16 were added after the first four (a
 * feeder refuses a library that predates them, in words); a program built
 * against this header's older version but run with this library can meet
 * them, and new types may come: refuse a dtype above SLUICE_DTYPE_MAX
 * rather than read its bytes as another. */
enum sluice_dtype {
    SLUICE_INT64 = 0,
    SLUICE_FLOAT32 = 1,
    SLUICE_BYTES = 2, /* variable-length values concatenated; their lengths in a companion tensor */
    SLUICE_UINT8 = 3,
    SLUICE_FLOAT16 = 4,  /* 2 bytes a value */
    SLUICE_BFLOAT16 = 5, /* 2 bytes a value */
};
/* The dtypes this header knows are 0..SLUICE_DTYPE_MAX (5 since float16
 * and bfloat16; 3 before them). */
#define SLUICE_DTYPE_MAX SLUICE_BFLOAT16

/* "int64", "float32", "bytes", "uint8", "float16", "bfloat16"; "?" for
 * another value. */
SLUICE_API const char *sluice_dtype_name(int dtype);

/* The options' bounds (sluice-trainer's flags have the same): a value
 * outside them makes sluice_client_open fail with SLUICE_EINVAL naming the
 * field. A time of 0 is its default. */
#define SLUICE_MAX_REPLICAS 65536
#define SLUICE_MAX_CREDITS 1048576
#define SLUICE_MIN_HEARTBEAT_MS 10
#define SLUICE_MAX_HEARTBEAT_MS 600000
#define SLUICE_MIN_TIMEOUT_MS 50
#define SLUICE_MAX_TIMEOUT_MS 3600000
#define SLUICE_MAX_WAIT_MS 86400000 /* connect_timeout_ms, reconnect_ms, takeover_ms */

/* Options: caller-owned; all-zero means the defaults. Strings and arrays
 * are borrowed for the duration of sluice_client_open only. */
struct sluice_options {
    const char *const *feeders; /* the job's feeder endpoints, feeder j at index j
                                   ("tcp://host:5555", "ipc:///run/f.sock") */
    size_t nfeeders;
    const char *job;                      /* the job's name, as the feeders know it */
    uint32_t worker, workers;             /* this trainer is worker `worker` of `workers` (0: 1) */
    uint32_t replicas;                    /* pieces per step (0: 1) */
    uint32_t credits;                     /* pieces in flight per feeder; 0: max(64, 4 * replicas) */
    int heartbeat_ms;                     /* 0: 1000 */
    int timeout_ms;                       /* a feeder silent this long is lost; 0: 10000 */
    int connect_timeout_ms;               /* wait for a feeder's first answer; 0: 60000 */
    int reconnect_ms;                     /* > 0: a lost feeder is reconnected to and resumes where it
                                   left off, if back within this long; 0: fail at once */
    int takeover_ms;                      /* > 0: a lost feeder not back within this long has its share
                                   served by a surviving feeder; 0: off */
    int no_shm;                           /* nonzero: never map a feeder's shared memory (always copy) */
    uint64_t resume_seq;                  /* the first piece wanted: 0, or an earlier client's
                                   sluice_client_position (a multiple of replicas) */
    const char *curve_key;                /* CURVE: this trainer's secret key file (NAME.key, mode
                                   0600; its public key is derived); NULL: no encryption */
    const char *const *curve_server_keys; /* with curve_key: [nfeeders] public key files
                                             (NAME.pub), that of feeders[j] at j */
    volatile sig_atomic_t *stop;          /* when it becomes nonzero (a signal handler may set it),
                                   every wait ends within a heartbeat tick with
                                   SLUICE_ECLOSED; NULL: never */
    const char *metrics_listen;           /* HOST:PORT: serve /metrics there (HOST an IPv4 address,
                                   [IPv6], localhost or *; PORT 0: any free one) from
                                   open to close, with sluice-trainer's input families
                                   (docs/operations.md); NULL: no server. A bad address
                                   or a port in use fails open (SLUICE_EINVAL, SLUICE_EIO).
                                   Added in 0.1 after the others: rebuild against this
                                   header (SOVERSION 0 promises no ABI yet) */
    uint64_t resume_epoch;                /* > 0: start at the first piece of this epoch (the feeders
                                   say where it is for this shape), with resume_seq 0 */
    int reshape;                          /* nonzero: ask the feeders to take this client's shape
                                   (workers x replicas) at an epoch's start, once no
                                   trainer of the old shape is heard from
                                   (docs/semantics.md 5.2). Both added after the others */
    struct sluice_transition {
        uint32_t from_workers, from_replicas; /* the shape before the change */
        uint64_t from_epoch, from_step;       /* where it changed: steps 0..from_step-1 of epoch
                                                 from_epoch were the old shape's (from_step >= 1) */
    } transition;                             /* all 0: none. Else the job's shape changed mid-epoch to
                                   this client's (docs/semantics.md 5.2): every HELLO says
                                   so, and resume_seq counts this worker's pieces from the
                                   change (0: its first). Not with resume_epoch. Added last */
};

/* The cluster of TF_CONFIG, as TensorFlow's MultiWorkerMirroredStrategy
 * reads it, with sluice's "feeder" list:
 *   {"cluster": {"chief": ["h0:2222"], "worker": ["h1:2222", "h2:2222"],
 *                "feeder": ["tcp://f0:5555", "f1:5555"]},
 *    "task": {"type": "worker", "index": 1}}
 * The chief (when present) is worker 0 and worker[i] is worker i + 1
 * (without a chief, worker i); a bare host:port feeder becomes
 * tcp://host:port. `tf_config`: the JSON text, or NULL for the TF_CONFIG
 * environment variable. Checked as hostile input: at most 4 MiB, one JSON
 * object without repeated keys, at most 64 feeders, a task that is a
 * chief or worker of the cluster; the message says what and where
 * ("TF_CONFIG:1:45: duplicate object key near '\"worker\"'"). */
struct sluice_cluster;
SLUICE_API int sluice_cluster_from_tf_config(struct sluice_cluster **out, const char *tf_config,
                                             struct sluice_error *err) SLUICE_MUST_CHECK;

/* Fill o->feeders, o->nfeeders (borrowed from `cl`: keep it until
 * sluice_client_open returns), o->worker and o->workers from the cluster;
 * the other options are left as they are. */
SLUICE_API void sluice_cluster_apply(const struct sluice_cluster *cl, struct sluice_options *o);

/* Free a cluster (NULL: nothing). */
SLUICE_API void sluice_cluster_free(struct sluice_cluster *cl);

/* A tensor of a piece. All borrowed (see the lifetime rule above). */
struct sluice_tensor {
    const char *name; /* the feature's name in the job's schema */
    int dtype;        /* enum sluice_dtype */
    int rank;
    const int64_t *shape; /* [rank]; shape[0] is the piece's row count for batched tensors */
    const void *data;     /* NULL when bytes == 0 */
    uint64_t bytes;
};

/* One replica's share of a step. */
struct sluice_piece {
    uint64_t epoch; /* 0-based */
    uint64_t step;  /* within the epoch */
    uint64_t seq;   /* the piece's sequence number over the whole stream */
    uint32_t worker, replica;
    uint32_t rows;      /* 0: an empty piece (the data ran out for this replica) */
    uint32_t last_step; /* nonzero: the last step of its epoch */
    uint32_t shm;       /* nonzero: data lies in the feeder's shared memory */
    size_t ntensors;
    const struct sluice_tensor *tensors; /* [ntensors] */
};

struct sluice_client;

/* Connect to every feeder, say who this trainer is and wait for each to
 * accept: *out is the client. A feeder still scanning its files is waited
 * for while it keeps answering. */
SLUICE_API int sluice_client_open(struct sluice_client **out, const struct sluice_options *o,
                                  struct sluice_error *err) SLUICE_MUST_CHECK;

/* Say goodbye to the feeders and free everything (NULL: nothing). */
SLUICE_API void sluice_client_close(struct sluice_client *c);

/* The next step: *pieces points at `replicas` pieces, borrowed until the
 * next call, sluice_client_release or close. SLUICE_OK, SLUICE_END after
 * the last step of the last epoch, or an error (the stream is then over). */
SLUICE_API int sluice_client_next_step(struct sluice_client *c, const struct sluice_piece **pieces,
                                       struct sluice_error *err) SLUICE_MUST_CHECK;

/* A step kept beyond the next (sluice_client_keep_step). */
struct sluice_step;

/* Keep the step handed out by the last sluice_client_next_step: *out owns
 * it, and *pieces points at its pieces, valid until sluice_step_free (the
 * client may be closed first; the step may be freed from any thread).
 * The client's step is released as by sluice_client_release (its credits
 * go back to the feeders), so keeping steps does not slow the stream. A
 * received body is moved over, not copied; a body in a feeder's shared
 * memory is copied out once (that memory goes back to the feeder), and
 * the kept pieces say shm 0. No alignment is promised (as above). SLUICE_OK,
 * SLUICE_EINVAL (no step held: none handed out, or already released or
 * kept) or SLUICE_ENOMEM (the step then stays held). */
SLUICE_API int sluice_client_keep_step(struct sluice_client *c, struct sluice_step **out,
                                       const struct sluice_piece **pieces, struct sluice_error *err) SLUICE_MUST_CHECK;

/* As sluice_client_keep_step, without the copy: a body in a feeder's
 * shared memory stays there, lent to the caller read-only (its pieces say
 * shm 1), and the credits of that feeder's pieces from it on wait until
 * sluice_step_free (which may run in any thread, and after close). Lent
 * steps freed within a few steps cost nothing; a caller that keeps them
 * longer (half the credits, or a feeder's whole window) has them copied
 * out where they lie (their addresses stay valid) and its later steps
 * copied, as by keep. Where nothing lies in shared memory, the same as
 * keep. A lent step's memory must not be written; in a child of fork() it
 * may change once the parent's credits go back. Same returns as keep. */
SLUICE_API int sluice_client_lend_step(struct sluice_client *c, struct sluice_step **out,
                                       const struct sluice_piece **pieces, struct sluice_error *err) SLUICE_MUST_CHECK;

/* Free a kept or lent step (NULL: nothing). */
SLUICE_API void sluice_step_free(struct sluice_step *s);

/* Give the current step's pieces back now (their memory and credits go
 * back to the feeders) rather than at the next step. None held: nothing. */
SLUICE_API void sluice_client_release(struct sluice_client *c);

/* Where the stream stands: the seq of the first piece not handed out yet
 * (a multiple of replicas). Save it with a checkpoint; pass it as
 * resume_seq to continue exactly there. */
SLUICE_API uint64_t sluice_client_position(const struct sluice_client *c);

/* Where /metrics is served (metrics_listen): "HOST:PORT" with the port as
 * bound (the kernel's pick for port 0; HOST "*" reads 127.0.0.1), owned by
 * the client until close; NULL without metrics_listen. */
SLUICE_API const char *sluice_client_metrics_address(const struct sluice_client *c);

/* The replicas per step; what the feeders announced: the steps per epoch
 * (0: not known in advance) and the epochs (0: forever). */
SLUICE_API uint32_t sluice_client_replicas(const struct sluice_client *c);
SLUICE_API uint64_t sluice_client_steps_per_epoch(const struct sluice_client *c);
SLUICE_API uint64_t sluice_client_epochs(const struct sluice_client *c);

/* The feeders the stream comes from now: those given at open, plus those
 * that joined the running job since (a feeder's ROSTER; the stream is
 * unchanged). */
SLUICE_API uint32_t sluice_client_feeders(const struct sluice_client *c);

/* Keep the connections alive for about ms milliseconds while the caller is
 * busy elsewhere (a long model initialization): heartbeats go out, pieces
 * come in and wait. SLUICE_OK or an error. */
SLUICE_API int sluice_client_keepalive(struct sluice_client *c, int ms, struct sluice_error *err) SLUICE_MUST_CHECK;

#ifdef __cplusplus
}
#endif

#endif
