/* feed_server: one feeder process's serving loop.
 *
 * Threads: the server thread owns the ROUTER socket (ZeroMQ sockets belong
 * to one thread) and every trainer's state; `threads` executor threads take
 * tasks from a bounded work queue, read and decode the records of a piece
 * into a pool buffer (feed_assemble) and hand the task back through a
 * done queue, waking the server's poll with an empty message on an inproc
 * PUSH socket of their own.
 *
 * Flow control: a trainer grants credits (HELLO, then CREDIT); a piece is
 * scheduled only against a credit, so a slow trainer never holds up
 * another and nothing is dropped at a high-water mark. Memory is bounded by
 * the pool, made when the first trainer gives the cluster shape: a
 * trainer's window is `prefetch` steps (prefetch x R pieces scheduled and
 * not yet consumed), and the pool holds every worker's window plus one
 * buffer per task, each buffer sized for ceil(G / (W R)) rows.
 *
 * Pieces are sent zero-copy: each tensor frame points into the pool buffer
 * and holds a reference that ZeroMQ's free callback drops.
 *
 * Heartbeats both ways; a trainer silent past the timeout is logged and
 * dropped (its worker may connect again and resume at a sequence number).
 * A data error while assembling is sent to every trainer as ERROR (with the
 * file and offset) and ends the run with that error.
 */
#ifndef FEED_SERVER_H
#define FEED_SERVER_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "feed_assemble.h"
#include "feed_job.h"
#include "feed_metrics.h"
#include "feed_source.h"
#include "sl_curve.h"
#include "sl_error.h"

/* How long a connection may take over its handshake (ZMTP greeting and
 * CURVE) before the feeder closes it: bounds what slow-loris peers hold. */
#define FEED_HANDSHAKE_MS 5000

/* The piece pool's default bound (--piece-memory): 1 GiB. */
#define FEED_DEFAULT_PIECE_MEMORY ((uint64_t)1 << 30)

/* The least a trainer's window holds in bytes, whatever `prefetch`: small
 * windows (8 pieces of 204 KB) made every few pieces a round of wake-ups
 * through the credit loop, and a virtual machine's cores paid for it
 * (docs/performance.md, issue #25). The window grows to this many bytes
 * of pieces only where the pool then still fits --piece-memory. */
#define FEED_WINDOW_MIN_BYTES ((uint64_t)8 << 20)

/* The feeder's ROUTER socket, bound before the start-up scan so that a
 * trainer started first is answered at once: a HELLO for this job gets a
 * STATUS ("scanning, k of n files"; only when the HELLO says it
 * understands one, else a REFUSE saying why), a HELLO for another job a
 * REFUSE naming both; nothing else is answered, since no trainer is
 * connected yet. feed_server_run then serves on the same socket, or
 * feed_server_refuse_all tells every trainer why the feeder cannot start.
 * One owner thread (ZeroMQ sockets belong to one). */
struct feed_listener;

/* Where the start-up scan stands, as a STATUS tells it. */
struct feed_scan_status {
    uint64_t files_done, files; /* files is at least 1 */
    uint64_t records, bytes;    /* found so far */
};

/* CURVE on the feeder's socket (issue #16, docs/security.md): the ROUTER
 * is a CURVE server with `keys`, and a ZAP handler started on its context
 * before the bind lets in only trainers whose public key is in `allow`; a
 * refused trainer fails the handshake and never reaches the feeder's code
 * (nor gets a byte of data). The handler logs each refusal (rate-limited)
 * with the key and the peer's address. When *reload is set (SIGHUP), the
 * listener and the serving loop clear it and read the allow-list again
 * (sl_curve_allow_reload), logging the new count or why the old list
 * stays. All borrowed; they outlive the listener and the run. */
struct feed_curve {
    const struct sl_curve_keys *keys; /* the feeder's key pair */
    struct sl_curve_allow *allow;     /* the trainers' public keys */
    volatile sig_atomic_t *reload;    /* may be NULL */
};

/* Bind `listen` (the socket options feed_server_run uses). job: the job's
 * name (borrowed); retry_ms: how soon a STATUS asks the trainer to say
 * HELLO again (1..SL_WIRE_MAX_RETRY_MS); curve: NULL for no CURVE (the
 * caller decides whether that is allowed: sl_endpoint_is_local). */
int feed_listener_open(struct feed_listener **out, const char *listen, const char *job, int retry_ms,
                       const struct feed_curve *curve, const char *ipc_group, struct sl_error *err) SL_MUST_CHECK;
/* Answer every message waiting on the socket, without blocking (at most
 * a few hundred a call). */
void feed_listener_answer(struct feed_listener *l, const struct feed_scan_status *st);
/* Close the socket, unless feed_server_run has taken it, and free. NULL
 * is ignored. */
void feed_listener_close(struct feed_listener *l);

struct feed_server_opts {
    const struct feed_job *job; /* prepared (validated, expanded) */
    /* the features pieces carry: job->features, or for text lines the one
     * bytes feature holding each line */
    const struct fmt_feature_spec *specs;
    size_t nspecs;
    /* the map stage (feed_job_map_plan of job; NULL: none) and the features
     * leaving it (feed_map_out_specs), which the pieces carry; with a map
     * the decoded-element cache is off */
    const struct map_plan *map;
    const struct fmt_feature_spec *out_specs;
    size_t nout_specs;
    uint64_t *map_op_ns; /* each op's CPU ns, added to atomically by the executors (map_plan_nops entries; NULL:
                          * not kept); read after feed_server_run returns */
    struct feed_source *src;
    const char *listen;             /* a ZeroMQ endpoint, tcp or ipc */
    const struct feed_curve *curve; /* CURVE when binding `listen` here (a listener has its own); NULL: none */
    struct feed_listener *listener; /* bound already (feed_listener_open): served on instead of binding
                                     * `listen`; taken once serving starts (closed at the end), left
                                     * bound after a start-up failure, for feed_server_refuse_all */
    uint32_t feeder_index;          /* j < feeders: this feeder makes the pieces with seq % F == j */
    uint32_t feeders;               /* F >= 1 */
    unsigned threads;               /* executor threads; 0: 1 */
    uint64_t max_piece_bytes;       /* buffer per piece; 0: computed from the features */
    uint64_t piece_memory;          /* bound on the piece pool in bytes; 0: FEED_DEFAULT_PIECE_MEMORY */
    uint32_t workers, replicas;     /* the cluster shape, fixed from the start; 0: the first HELLO's
                                 * (released again if its trainers leave without taking a piece) */
    int heartbeat_ms;               /* 0: 1000 */
    int timeout_ms;                 /* 0: 10000 */
    int report_ms;                  /* log a progress line this often (0: never) */
    int idle_exit_ms;               /* > 0: stop when no trainer has been connected this long
                                 * (c->idle says so); 0: serve for ever */
    int end_wait_ms;                /* a worker whose connection was dropped after its END without a
                                 * BYE (a trainer killed) is waited for this long, for its trainer
                                 * to come back and resume; 0: not at all */
    int no_shm;                     /* never offer pieces in shared memory (--no-shm) */
    int no_takeover;                /* refuse to serve other feeders' shares (--no-takeover) */
    const char *ipc_group;          /* an ipc:// socket file's group (0660), NULL: 0600 (sl_bind_private) */
    volatile sig_atomic_t *stop;    /* set by SIGINT/SIGTERM: finish cleanly */
    volatile sig_atomic_t *dump;    /* set by SIGUSR1: log the counters and clear it */
    struct sl_metrics *metrics;     /* borrowed, over feed_metric_defs: where every figure goes
                                   * (another thread may read snapshots); NULL: a private one */
    /* --join: this feeder joins a running job (docs/feeder.md, "Joining a
     * running job"): it asks the feeders at join[0..njoin) (borrowed
     * endpoints, at most SL_WIRE_MAX_ROSTER) to count it in, as feeder
     * feeder_index of `feeders`, serving at `advertise` (borrowed; NULL:
     * `listen`). njoin 0: a feeder of the job's start. */
    const char *const *join;
    size_t njoin;
    const char *advertise;
};

/* 1 when ep binds every interface or any port (host "*", 0.0.0.0,
 * [::], port "*" or 0): nobody can connect to it as written. */
int feed_endpoint_is_wildcard(const char *ep);

/* The options --join EP[,EP...] and --advertise EP of a feeder with
 * --feeder-index, --feeders, --listen and --serve-runs as given: checked
 * (what a joiner needs; every endpoint one trainers and feeders can
 * connect to), the list split into *eps (owned, *n of them: sl_free each
 * and the array, after an error too). 0, SL_EINVAL (err says why) or
 * SL_ENOMEM. */
int feed_join_options(const char *join, const char *advertise, const char *listen, uint64_t feeder_index,
                      uint64_t feeders, int serve_runs, char ***eps, size_t *n, struct sl_error *err) SL_MUST_CHECK;

/* Serve until every worker of the job has received its END (0), a stop
 * signal (0 after telling the trainers), idle_exit_ms without a trainer (0,
 * with c->idle set), or a fatal error (negative, err says what). The figures go to o->metrics as they happen (a private table
 * when it is NULL); *c is filled from their last snapshot in every case. */
int feed_server_run(const struct feed_server_opts *o, struct feed_counters *c, struct sl_error *err) SL_MUST_CHECK;

/* After a failure before serving (a damaged file under on_error=fail, a
 * pool over --piece-memory): answer every trainer's HELLO on l's socket
 * (trainers that waited through the scan included) with REFUSE carrying
 * `reason` (so the trainer fails with the file and offset), until
 * `quiet_ms` pass without a HELLO or the stop flag is set. */
int feed_server_refuse_all(struct feed_listener *l, const char *reason, int quiet_ms, volatile sig_atomic_t *stop_flag);

#endif
