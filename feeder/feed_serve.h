/* feed_serve: what the serving loop's parts share inside the feeder (not
 * an API): the server and its table of trainer connections, and the
 * cluster shape's lifetime (feed_shape.c). One owner: the serving thread.
 */
#ifndef FEED_SERVE_H
#define FEED_SERVE_H

#include <stdint.h>
#include <zmq.h>

#include "feed_assemble.h"
#include "feed_exec.h"
#include "feed_hold.h"
#include "feed_plan.h"
#include "feed_server.h"
#include "feed_transition.h"
#include "sl_buf.h"
#include "sl_log.h"
#include "sl_pool.h"
#include "sl_wire.h"

/* The feeder's socket, bound before the scan (feed_listener.c) */
struct feed_listener {
    void *ctx, *router; /* NULL once feed_server_run has taken them */
    struct sl_zap *zap; /* the ZAP handler on ctx (CURVE), taken with it */
    const struct feed_curve *curve;
    const char *listen, *job;
    uint32_t retry_ms;
    struct sl_buf buf;
    struct sl_wire_msg msg; /* decoded input (large: kept here) */
    uint64_t statuses;      /* STATUS answers sent */
    uint64_t last_log_ns;   /* the last line saying so */
    struct sl_log_limit lim_refuse, lim_bad;
};

#define MAX_IDENTITY 256
/* The furthest resume point a HELLO may ask for: no trainer can have taken
 * 2^48 pieces (at a million pieces a second, 9 years). */
#define MAX_RESUME ((uint64_t)1 << 48)
/* The most takeover connections a feeder keeps at once (each costs a plan
 * iterator): a lost feeder's share for every worker, for up to 3 lost
 * feeders at the largest shape, or more for smaller ones. */
#define MAX_TAKEOVERS 65536

/* One trainer connection: the pieces of worker `worker` whose seq % F is
 * `share` (this feeder's own index, or a lost feeder's it was asked to take
 * over). */
struct trainer {
    int active;
    uint32_t worker, share;
    uint32_t feeders;     /* the modulus of share on this connection: the HELLO's (SL_WIRE_HELLO_FEEDERS), else
                           * the feeder's own --feeders */
    int wants_roster;     /* its HELLO set SL_WIRE_HELLO_ROSTER: told of feeders that joined */
    uint64_t incarnation; /* the trainer process's, from its HELLO */
    uint8_t id[MAX_IDENTITY];
    size_t id_len;
    uint64_t generation;
    struct feed_stream *stream; /* its pieces: the plan, or the transition's stream (feed_transition.h) */
    int plan_done;
    uint64_t credits;   /* pieces it may still be scheduled */
    uint64_t initial;   /* credits of the HELLO */
    uint64_t granted;   /* credits received in all */
    uint64_t scheduled; /* pieces scheduled in all */
    uint64_t inflight;  /* scheduled, not yet sent */
    uint64_t sent;
    uint64_t last_seq; /* highest seq planned + 1 (for END) */
    uint64_t epochs;
    int end_sent;
    int said_bye;        /* its connection ended with a BYE (all_done) */
    uint64_t dropped_ns; /* when its connection was dropped (all_done: --end-wait-s) */
    uint64_t last_seen_ns;
    uint64_t last_hb_ns;
    uint32_t heartbeat_ms; /* the trainer's, from its HELLO */
    int wants_stats;       /* its HELLO set SL_WIRE_HELLO_STATS: a STATS every heartbeat interval */
    int stats_map;         /* ... and SL_WIRE_HELLO_STATS_MAP: STATS with the map stage (else in decode) */
    uint64_t last_stats_ns;
    /* Shared memory: offered in the WELCOME when the HELLO asked, used once
     * the trainer's CREDIT says it mapped it; the buffers of pieces sent
     * that way are held until their credits come back (feed_hold.h) */
    enum feed_shm_state shm;
    struct feed_hold hold;
};

/* The feeders of the job this feeder knows of, beyond the first ones:
 * those that JOINed it, and (on a joiner) those in the answers it got.
 * Bounded: at most SL_WIRE_MAX_ROSTER feeders in all. */
struct feed_roster_entry {
    char endpoint[SL_WIRE_MAX_ENDPOINT + 1];
    char key[SL_WIRE_KEY_Z85 + 1]; /* "" without CURVE */
    uint64_t answered_ns;          /* its JOIN's last answer: a repeated JOIN is answered at most twice a heartbeat */
};
struct feed_roster {
    uint32_t base;    /* the job's first feeders' count (indexes below it cannot join); 0: a joiner not yet
                       * counted in, which knows no base */
    uint32_t feeders; /* the modulus of the shares it tells trainers of: the largest modulus named (own
                       * --feeders, a JOIN's, an answer's) whose every index in [base, it) is known */
    uint64_t known;   /* bit i: entry i is known */
    uint64_t moduli;  /* bit F - 1: a modulus F named */
    struct feed_roster_entry e[SL_WIRE_MAX_ROSTER];
};

/* A feeder this one asks to count it in (--join): its own DEALER, so that
 * each answer (ROSTER or REFUSE) is known to be that feeder's. */
struct feed_joiner {
    const char *endpoint; /* borrowed from the options */
    void *sock;
    int accepted;                    /* it answered ROSTER at least once */
    int gone;                        /* accepted, then silent past --timeout-ms (logged once) */
    uint64_t last_send_ns, heard_ns; /* the last JOIN sent, the last answer */
    char refusal[160];               /* its last REFUSE ("" none) */
};

struct server {
    const struct feed_server_opts *o;
    struct sl_metrics *m; /* every figure (feed_metrics.h) */
    void *ctx;
    void *router;
    struct feed_exec *exec;
    struct feed_cache *cache; /* the decoded-element cache (cache_bytes); NULL: off */
    struct sl_pool *pool;
    size_t ntasks;
    unsigned nthreads;
    struct feed_schema schema;
    /* cluster shape, from the first HELLO */
    uint32_t workers, replicas;
    uint64_t steps;
    struct feed_plan_config cfg;
    /* A change of the shape mid-epoch (docs/semantics.md 5.2): set with
     * the shape by a HELLO that carries it (the first one, or a granted
     * reshape), forgotten with the shape or by a reshape at an epoch's
     * start; every HELLO of the shape must carry the same. tr_steps: the
     * old shape's steps per epoch, T. from_workers 0: none. */
    struct feed_transition tr;
    uint64_t tr_steps;
    /* Connections: [0, workers) the own share of worker w at w (these
     * have hold rings: shared memory); [workers, ntrainers) takeovers of
     * lost feeders' shares, made as HELLOs ask, by copy only; at most
     * workers + max_takeovers entries. */
    struct trainer *trainers;
    size_t ntrainers, cap_trainers, max_takeovers;
    uint64_t generation;
    uint32_t ended;         /* workers whose last connection got END */
    size_t rr_next;         /* the connection feed__schedule serves first next time (round robin) */
    struct sl_buf hbuf;     /* header frames */
    struct sl_wire_msg msg; /* decoded input (large: kept here) */
    uint64_t piece_bytes;   /* one pool buffer */
    size_t max_rows;        /* G: the assemblers' capacity */
    size_t piece_rows;      /* ceil(G / (W R)): the most rows a piece has */
    size_t prefetch;        /* steps */
    uint64_t window;        /* pieces outstanding per trainer: prefetch x R */
    struct sl_pool_shm shm; /* the pool's memfd when shared (shm.size 0: private pool) */
    /* The shape is the first HELLO's until a trainer consumes a piece
     * (`consumed`), or the feeder's own from the start (`fixed`): a shape
     * nobody consumed is released once its last trainer has gone, so a
     * wrong or hostile HELLO cannot hold the job. A released pool may still
     * have frames in ZeroMQ: it waits in `retired` until they are back. */
    int fixed, consumed, release_pending;
    struct sl_pool *retired[4];
    int fatal;
    struct sl_error fatal_err;
    /* log lines anybody on the network can cause: at most 10 a second each */
    struct sl_log_limit lim_refuse, lim_bad;
    /* feeders joining the running job (feed_join.c) */
    uint64_t digest; /* the plan's inputs hashed (feed__job_digest) */
    struct feed_roster roster;
    struct feed_joiner *joiners; /* --join: one DEALER per feeder asked (njoiners), NULL when not joining */
    size_t njoiners;
    uint64_t join_start_ns; /* when the first JOIN went out */
    int join_accepted;      /* some feeder of the job counted this one in */
};

/* ---- the cluster shape (feed_shape.c) ---- */

/* Size and allocate what a W x R shape needs (the pool checked against
 * --piece-memory before anything is allocated, a hold ring per worker),
 * plan it, and make it the server's shape. */
int feed__shape_setup(struct server *s, uint32_t W, uint32_t R, struct sl_error *err);
/* Destroy retired pools whose every buffer is back. */
void feed__shape_reap(struct server *s);
/* The transition a HELLO carries (SL_WIRE_HELLO_TRANSITION; unset
 * without it). */
struct feed_transition feed__hello_transition(const struct sl_wire_hello *h);
/* Whether transition x may come with the shape W x R (the job planned
 * for W x R, feed_transition_check): 0 (*old_steps: the old shape's T), or
 * the error, its message naming the change. */
int feed__transition_check(const struct server *s, uint32_t W, uint32_t R, const struct feed_transition *x,
                           uint64_t *old_steps, struct sl_error *err);
/* Forget a shape no trainer consumed a piece of, its last trainer gone.
 * 0, or -1 while that cannot be done yet. */
int feed__shape_release(struct server *s);
/* A HELLO of another shape: release an unconsumed shape whose trainers
 * are all silent past their grace. 0 when released. */
int feed__shape_take_over(struct server *s);
/* A HELLO of another shape that asks to replace the shape
 * (SL_WIRE_HELLO_RESHAPE), when feed__shape_take_over would not: 1 when
 * the old shape was released and the HELLO's set up, -1 when it may not
 * (why[n] names the rule, for the REFUSE), 0 when the HELLO did not ask.
 * Trainers whose connection has closed are the caller's to drop first. */
int feed__shape_reshape(struct server *s, const struct sl_wire_hello *h, char *why, size_t n);
/* The connection of t ends (why: for the log); tasks in flight for it are
 * dropped; the last trainer of an unconsumed shape leaving asks for its
 * release. */
void feed__drop(struct server *s, struct trainer *t, const char *why);
/* How long a trainer may be silent before another connection may take its
 * place: 2.5 of its heartbeats (1 s when it sends none). */
uint64_t feed__grace_ns(const struct trainer *t);

/* ---- the socket (feed_listener.c) ---- */

/* A ZeroMQ context and the feeder's ROUTER, bound to `listen`; with CURVE,
 * a CURVE server whose ZAP handler (*zap) is running before the bind. */
int feed__bind_router(const char *listen, const struct feed_curve *curve, const char *ipc_group, void **ctx,
                      void **router, struct sl_zap **zap, struct sl_error *err);
/* Read the allow-list again if SIGHUP asked for it. */
void feed__curve_reload(const struct feed_curve *curve);
/* The ZAP handler's figures, once at the end. */
void feed__curve_summary(const struct sl_zap *zap);
/* The version of a HELLO of another protocol version (magic "SLC1", type
 * HELLO), for a REFUSE the peer's decoder will report; 0 for anything
 * else. */
unsigned feed__other_version_hello(const zmq_msg_t *body);

/* ---- sending and tasks (feed_send.c) ---- */

/* The routing id of t, then the header hdr (more: a body frame follows).
 * 0, or -1 with errno set by ZeroMQ. */
int feed__send_frames(struct server *s, const struct trainer *t, const struct sl_buf *hdr, int more);
/* Send the header in s->hbuf, just encoded with status rc_encode (what:
 * the message's name for the log): one that does not encode is a fatal
 * error, one that cannot be sent drops t. */
void feed__send_simple(struct server *s, struct trainer *t, int rc_encode, const char *what);
/* An ERROR (code, msg) to every connected trainer. */
void feed__send_error_all(struct server *s, int code, const char *msg);
/* A fatal error: the first one is logged, sent to every trainer as ERROR
 * and ends the run (feed_server_run returns it). */
void feed__fail_all(struct server *s, const struct sl_error *e);
/* REFUSE to the peer of routing id `id`, the reason formatted; logged
 * (rate-limited) and counted. */
void feed__refuse(struct server *s, const uint8_t *id, size_t id_len, const char *fmt, ...) SL_PRINTF(4, 5);
/* Schedule pieces for trainers with credits, round-robin one piece each:
 * 1 when a trainer waits for credits (or its window), 0 when none does, or
 * the error (every trainer told) that made it stop. */
int feed__schedule(struct server *s);
/* Send every piece the executors finished, and recycle their tasks. */
void feed__drain_done(struct server *s);

/* ---- feeders joining the running job (feed_join.c) ---- */

/* FNV-1a 64 over what the plan depends on (the job's name, its files'
 * names and record counts, the plan settings, the schema): the same on
 * every feeder of a job. After start() built the schema. */
uint64_t feed__job_digest(const struct server *s);
/* The roster at start: this feeder's own --feeders; a joiner's own entry
 * (--advertise, its public key under CURVE). */
void feed__roster_init(struct server *s);
/* A JOIN from routing id `id`: answered ROSTER (counted in; the roster
 * grown and told to every trainer that reads ROSTER) or REFUSE (why;
 * logged rate-limited and counted). */
void feed__on_join(struct server *s, const uint8_t *id, size_t id_len, const struct sl_wire_join *join);
/* A JOIN that did not decode (err: why): REFUSE saying so. */
void feed__refuse_join(struct server *s, const uint8_t *id, size_t id_len, const char *fmt, ...) SL_PRINTF(4, 5);
/* The ROSTER to t, after its WELCOME, when the roster counts more feeders
 * than its modulus. */
void feed__roster_welcome(struct server *s, struct trainer *t);
/* --join: a DEALER connected to each feeder listed. 0, or the error. */
int feed__join_open(struct server *s, struct sl_error *err) SL_MUST_CHECK;
/* --join, on every turn of the loop: JOIN sent (again every heartbeat
 * interval), answers read, the roster merged. 1 when the joiner is done
 * (every feeder it joined gone, no trainer connected: logged), 0 to go on;
 * no feeder counting it in within --timeout-ms is fatal (feed__fail_all). */
int feed__join_tick(struct server *s);
/* Close the DEALERs (before the context ends). */
void feed__join_close(struct server *s);

/* ---- incoming messages (feed_message.c, feed_hello.c) ---- */

/* Read and act on one message from the socket, if one is there. */
void feed__on_message(struct server *s);
/* A HELLO from routing id `id` (fd: its connection's socket, -1 when
 * unknown): refused, or the connection made and WELCOMEd. */
void feed__on_hello(struct server *s, const uint8_t *id, size_t id_len, const struct sl_wire_hello *hello, int fd);

#endif
