/* train_ps: ParameterServerStrategy's parameter servers: the placement of
 * the model's variables on the servers, a server (train_ps_serve: a
 * sluice-trainer ps task) and the workers' client (pull and push, every
 * server at once), which the strategy's ps mode uses (train_strategy.h).
 *
 * The design:
 * - Variables (train_model_variables: W_1, b_1, ... in creation order) are
 *   placed on the ps tasks by train_ps_place, the same on every process of
 *   the job (a pure function of the variable list and the ps count).
 * - A ps task holds its variables and their momentum; it applies each
 *   pushed gradient on arrival with train_sgd_apply, the model's own
 *   arithmetic, so one worker with synchronous pulls trains bit for bit as
 *   mirrored training does.
 * - A worker pulls the current values at the start of each step (every ps
 *   at once, so a slow one does not hold the others up), reduces its
 *   replicas' gradients in-process, pushes each ps its part, and goes on
 *   without waiting for the other workers. The staleness of a push is the
 *   number of other pushes the server applied between the worker's pull
 *   and its push.
 * - Every PULL carries the worker's model description (train_ps_model's
 *   `config`): a server started without knowing the input width (a ps task
 *   has no feeder) builds its variables from the first description its
 *   setup accepts (a ps task accepts only its own flags' description with
 *   the named input width), and refuses a worker whose description
 *   differs, so a ps and its workers can never disagree on the model in
 *   silence. A description the setup refuses (malformed, foreign) is
 *   answered with ERROR and counted, and the server keeps waiting for a
 *   valid one: a stray peer cannot stop it.
 * - A worker process draws a random session when it starts; once a
 *   server applied a worker's push, it refuses that worker's messages from
 *   another session, except RESUME: every PUSH carries the worker's input
 *   position after its step, which each server records per worker, and a
 *   worker process that starts again asks the servers for it first
 *   (train_ps_resume): they adopt its new session (said in the logs) and
 *   it resumes its feeders exactly there. A push in flight when a worker
 *   died may have reached some servers and not others (and restored
 *   checkpoints of several servers are of different moments): the worker
 *   resumes at the lowest recorded position, and a server that had
 *   applied those steps already acknowledges their pushes again without
 *   applying them (until it is caught up), so every step's gradient is
 *   applied exactly once on every server. The final values tell every worker how many
 *   workers were lost or failed (train_ps_client_lost).
 * - A server draws a random incarnation when it starts; a worker fails
 *   when a server's incarnation changes or its version goes backwards (a
 *   restarted server starts again from the initial values: the job's
 *   progress on it is gone), unless it restored a checkpoint
 *   (train_ps_server_opts.restore, train_ps_ckpt.h): its workers, failed
 *   naming the restart, start again and resume where it recorded them. A
 *   server refuses a push with a NaN or an infinity, a version newer than
 *   its own, or another incarnation.
 * - With CURVE (the job's one trainer key pair, as the workers' ring has
 *   it) the server lets in only holders of that key (ZAP) and every
 *   message is encrypted.
 * - At the end, each worker's final pull (train_ps_pull_final) waits until
 *   every worker is done, so they all see the same final weights; BYE
 *   (train_ps_client_close) releases the server, which returns once every
 *   worker said BYE or was lost (silent past worker_timeout_ms).
 *
 * Thread-safety: the functions keep no state.
 */
#ifndef TRAIN_PS_H
#define TRAIN_PS_H

#include <stddef.h>
#include <stdint.h>

#include <signal.h>
#include <stdatomic.h>

#include "sl_curve.h"
#include "sl_error.h"
#include "train_model.h"
#include "client_position.h"

#define TRAIN_PS_MAX_SERVERS 256
#define TRAIN_PS_MAX_VARS 4096

enum train_ps_placement {
    TRAIN_PS_ROUND_ROBIN = 0, /* TensorFlow's default: creation order, server after server */
    TRAIN_PS_BALANCED = 1,    /* the largest first, each to the least loaded server */
};

/* owner[i] (0..nps-1) for each of the n variables of sizes[i] elements.
 * group (NULL: none): group[i] >= 0 puts variable i with the other
 * variables of that group (colocate_vars_with), on the server of the
 * group's first variable; -1 is a variable of its own. A placement unit is
 * a variable of its own or a whole group.
 * - Round robin: units in the order of their first variable, server 0, 1,
 *   ..., nps - 1, 0, ...
 * - Balanced: units by decreasing total size (ties: the order of their
 *   first variable), each to the server holding the fewest elements so far
 *   (ties: the lowest index).
 * Deterministic. SL_EINVAL: nps 0 or above TRAIN_PS_MAX_SERVERS, n above
 * TRAIN_PS_MAX_VARS, a group below -1, an unknown placement; owner is then
 * untouched. More servers than units leaves servers without variables. */
int train_ps_place(const size_t *sizes, const int *group, size_t n, uint32_t nps, enum train_ps_placement how,
                   uint32_t *owner, struct sl_error *err) SL_MUST_CHECK;

/* ---- the wire ----
 * Each message is a 48-byte header frame, and for VALUES, PUSH and ERROR a
 * body frame (PULL: optional; ACK to a RESUME: the recorded position, when
 * there is one), PUSH a third frame, the worker's input position after the
 * step (CLIENT_INPUT_POSITION_BYTES, client_input_position_encode); nothing
 * more (a message with another frame count is refused). Little-endian:
 *   0  4  magic "SLPS"
 *   4  1  version (2; a version-1 peer's header is refused as "not a
 *         parameter-server message")
 *   5  1  type: PULL 1, VALUES 2, PUSH 3, ACK 4, BYE 5, ERROR 6, RESUME 7
 *         (a worker process starting: answered with ACK and the position
 *         the server recorded for the worker, none when it applied no push
 *         of it; a session other than the recorded one is adopted. A
 *         server started with opts.elastic sets the ACK's flags bit 0 and
 *         appends its world to the body: u64 the WORLDs it applied, u64
 *         the epoch its world starts at, u32 its worker count, u32 0, so
 *         the body is 24 or 40 + 24 bytes)
 *   6  2  0
 *   8  4  worker
 *  12  4  flags: PUSH bit 0, count a global step; PUSH bit 2, a step with
 *         no rows (its body empty: the position alone is recorded, nothing
 *         applied, no version or global step counted); PULL bit 0, the final
 *         pull (answered once every worker is done); PULL and BYE bit 1,
 *         the evaluator (worker 0 then names evaluator 0, not a worker: it
 *         reads, it is never counted among the workers, and a PUSH with
 *         the bit is refused); VALUES bit 0, the final values, bits 8-31
 *         of a final VALUES: the workers lost or failed (capped at
 *         2^24 - 1); ACK to a final pull: the workers not done yet; ACK to
 *         a PUSH: the push's staleness
 *  16  8  version: VALUES and ACK the server's, PUSH the one its gradient
 *         was computed from (the version pulled; a server refuses one
 *         newer than its own)
 *  24  8  global step (VALUES, ACK)
 *  32  8  incarnation: VALUES, ACK and ERROR the server's (a random nonzero
 *         64-bit id drawn when it starts); PULL, PUSH and BYE the one the
 *         worker's earlier replies carried (0: none yet). A server refuses
 *         a PULL or PUSH naming another incarnation (it restarted: what
 *         the worker pulled is gone), and a worker fails when a server's
 *         incarnation changes or its version goes backwards.
 *  40  8  PULL, PUSH and BYE: the worker process's session (a random
 *         nonzero 64-bit id drawn when its client opens; 0: none). Once a
 *         server applied a push of worker w, it refuses worker w's
 *         messages from another session (a restarted worker would train
 *         its shard again from the start). A final VALUES: the first
 *         worker lost or failed, plus 1 (0: none).
 * VALUES' and PUSH's body: the server's variables' float32 elements, its
 * variables in creation order (a PUSH with a NaN or an infinity is
 * refused: nothing applied, no global step). A PUSH's position must be one
 * step (its replicas' pieces) after the one the server recorded for the
 * worker (none: seq 0), in the same or the next epoch, with the same
 * replicas; else it is refused (a step skipped or repeated). The one
 * exception: after a RESUME adopted a new session, until a push of it is
 * applied, a push at or before the recorded position (steps the old
 * process pushed, or pushed after a restored checkpoint of another
 * server, that reached this one) is ACKed with flags bit 31, not applied,
 * not counted. PULL's: the worker's model
 * description (at most TRAIN_PS_MAX_CONFIG bytes; optional for a server
 * given its layout); ERROR's: the message (text; a reader escapes its
 * control bytes before logging it). */
#define TRAIN_PS_HEADER 48
#define TRAIN_PS_WIRE_VERSION 2
#define TRAIN_PS_MAX_CONFIG 512
#define TRAIN_PS_FINAL 1u
#define TRAIN_PS_PUSH_EMPTY 4u           /* PUSH: a step with no rows, its position only */
#define TRAIN_PS_READ_ONLY 2u            /* PULL, BYE: from the evaluator task, not a worker */
#define TRAIN_PS_STALENESS_BUCKETS 17    /* staleness 0..15, then 16 or more */
#define TRAIN_PS_ACK_SKIPPED 0x80000000u /* ACK to a PUSH: applied before the worker's restart, not again */
#define TRAIN_PS_ACK_WORLD 1u            /* ACK to a RESUME: the elastic server's world ends the body */
#define TRAIN_PS_WORLD_INFO 24           /* its bytes: u64 WORLDs applied, u64 its world's epoch, u32 workers, u32 0 */
enum train_ps_type {
    TRAIN_PS_PULL = 1,
    TRAIN_PS_VALUES,
    TRAIN_PS_PUSH,
    TRAIN_PS_ACK,
    TRAIN_PS_BYE,
    TRAIN_PS_ERROR,
    TRAIN_PS_RESUME,
    TRAIN_PS_WORLD
};
/* WORLD (8; a server started with opts.elastic): worker 0, the elastic
 * workers' coordinator, announces the workers of the next epoch, at an
 * epoch boundary every worker reached (docs/trainer.md, "Parameter
 * servers"). Header: worker 0, version the epoch the new world starts at,
 * global step the change's number (1, 2, ...: the server's count of
 * changes plus 1, so a replayed WORLD is refused), session the sender's
 * (its old world's session). Body: for each worker of the new world, in
 * rank order, TRAIN_PS_WORLD_ENTRY bytes: u32 the old rank it had
 * (TRAIN_PS_JOINER: it joins), u32 0, u64 its session in the new world
 * (nonzero, distinct). Refused whole (nothing changes) when malformed, a
 * rank is out of range or named twice, or any worker made its final pull,
 * said BYE or was lost. Applied: the old workers not named are let go
 * (not failed: their BYE, as every message of a session of the old world,
 * is ignored), the count and the ranks are the new ones, each worker's
 * session is the one named (other sessions' messages refused, even before
 * its first push), and each one's first push starts its position afresh
 * (it must be in the new world's epoch: its stream was reopened for the
 * new shape; the old positions are forgotten), and with opts.checkpoint
 * the new world is checkpointed before the ACK. ACK: flags the new count. */
#define TRAIN_PS_WORLD_ENTRY 16
#define TRAIN_PS_JOINER UINT32_MAX
#define TRAIN_PS_MAX_WORKERS 65536

/* What a server and its clients agree on: the model's variables and their
 * placement (the same on every process). */
struct train_ps_layout {
    const struct train_model_var *vars; /* from train_model_variables */
    size_t nvars;
    const uint32_t *owner; /* [nvars], from train_ps_place */
    uint32_t nps;
};

/* Elements server `ps` holds. */
size_t train_ps_elements(const struct train_ps_layout *l, uint32_t ps);

/* The model's variables placed on nps servers, as a worker's loop and a ps
 * task both build them from the same flags (cfg.inputs must be set). */
struct train_ps_model {
    struct train_model *model; /* the seeded model: its parameters are the initial values */
    struct train_model_var vars[TRAIN_MODEL_MAX_VARS];
    uint32_t owner[TRAIN_MODEL_MAX_VARS];
    struct train_ps_layout layout;    /* over vars and owner */
    char config[TRAIN_PS_MAX_CONFIG]; /* the description every PULL carries */
};
/* SL_EINVAL (the model's or the placement's), SL_ENOMEM. On error *pm is
 * empty (train_ps_model_free accepts it). */
int train_ps_model_init(struct train_ps_model *pm, const struct train_model_config *cfg, uint32_t nps,
                        enum train_ps_placement how, struct sl_error *err) SL_MUST_CHECK;
void train_ps_model_free(struct train_ps_model *pm);
/* The input width a description names (its "inputs=N"), or 0 when it
 * names none in [1, TRAIN_MODEL_MAX_WIDTH]. */
uint32_t train_ps_config_inputs(const char *config, size_t len);

/* A server that learns its variables from the first worker's description:
 * return the layout and the whole parameter array's initial values
 * (borrowed until train_ps_serve returns), or an error (sent to that worker
 * as ERROR; the server then returns it). */
typedef int (*train_ps_setup_fn)(void *arg, const char *config, size_t len, const struct train_ps_layout **layout,
                                 const float **init, struct sl_error *err);

/* A message the server refused (its ERROR's text, control bytes escaped),
 * for the caller's log; worker is UINT32_MAX when the header was not read. */
typedef void (*train_ps_refused_fn)(void *arg, uint32_t worker, const char *why);

/* What a server's checkpoint keeps (train_ps_ckpt.h): its variables'
 * values and momentum, its version and global step, the description that
 * set it up, and each worker's recorded position. Borrowed. */
struct train_ps_state {
    uint32_t index, servers, workers;
    uint64_t version, global_step;
    const char *config; /* the model description it holds (config_len 0: none, a server
                                               given its layout) */
    size_t config_len;
    const struct client_input_position *pos; /* [workers]: after the worker's last push applied; replicas 0: none */
    const float *values, *momentum;          /* [n] each, the server's variables in creation order */
    size_t n;
    uint64_t world_changes; /* opts.elastic: the WORLDs applied (0: the first world; at most UINT32_MAX) */
    uint64_t world_epoch;   /* the epoch the world of `workers` started at (0 with no change); a worker with
                               no position then has pushed nothing in this world yet: it starts at this
                               epoch's first piece, in this world's shape */
};
/* Write s (a checkpoint); an error stops the server with it. */
typedef int (*train_ps_checkpoint_fn)(void *arg, const struct train_ps_state *s, struct sl_error *err);

struct train_ps_server_opts {
    void *ctx;                     /* the ZeroMQ context */
    const char *listen;            /* endpoint to bind */
    uint32_t index;                /* this server, 0..nps-1 */
    struct train_ps_layout layout; /* or setup (layout.nps 0) */
    const float *init;             /* the whole parameter array's initial values (the seeded model's) */
    train_ps_setup_fn setup;
    void *setup_arg;
    float lr, momentum;                /* the model's optimizer */
    uint32_t workers;                  /* it returns once each has said BYE (or was lost) */
    int worker_timeout_ms;             /* a worker not done and silent this long (since its last message, or since the
                               start for one never heard) is lost (0: never) */
    volatile sig_atomic_t *stop;       /* nonzero: return SL_ECLOSED within 100 ms */
    struct train_ps_live *live;        /* NULL, or where the figures are published as they change */
    int evaluator;                     /* 1: the job has an evaluator task: once the workers are done, serve on until it
                               has said BYE (after reading the final values), or was silent worker_timeout_ms.
                               0: wait so only for an evaluator heard from before the workers were done */
    const struct sl_curve_keys *curve; /* NULL: plaintext; else the job's trainer key pair: the socket is a
                                          CURVE server letting in only clients holding it (a ZAP handler
                                          in ctx for the server's life: ctx must have none) */
    train_ps_refused_fn refused;       /* NULL, or told of each refused message */
    void *refused_arg;
    train_ps_refused_fn said; /* NULL, or told of each worker restart adopted and each push not applied
                                    again (text, for the log) */
    void *said_arg;
    const struct train_ps_state *restore; /* NULL, or where to start from (a checkpoint's state: its index and
                                             workers must be these; the description sets the server up at once,
                                             a setup refusing it is the error returned; each worker with a
                                             position is to be adopted by its RESUME and catches up) */
    train_ps_checkpoint_fn checkpoint;    /* NULL, or called with the state every checkpoint_every pushes applied
                                          (version a multiple of it; 0: never so), when a WORLD was applied
                                          (the new world, no positions yet) and when stopped (opts.stop)
                                          once the server holds variables */
    void *checkpoint_arg;
    uint64_t checkpoint_every;
    int elastic; /* 1: worker 0 may change the workers at an epoch boundary (WORLD); workers is the first count
                    (restored: the count of the checkpoint's world, whose changes and epoch it goes on from) */
};

/* The evaluator as a server saw it (train_ps_server_stats.evaluator). */
enum train_ps_eval_state {
    TRAIN_PS_EVAL_NONE = 0, /* never heard (and not expected) */
    TRAIN_PS_EVAL_HEARD,    /* pulled, but not the final values (the server was stopped) */
    TRAIN_PS_EVAL_SERVED,   /* the final values sent */
    TRAIN_PS_EVAL_BYE,      /* said BYE (after the final values, or before: it gave up) */
    TRAIN_PS_EVAL_LOST,     /* silent worker_timeout_ms once the workers were done (or expected, never heard) */
};

struct train_ps_server_stats {
    uint64_t pulls, pushes, bad_messages, version, global_step;
    uint64_t staleness_max, staleness_sum; /* over the pushes: version at apply - version pulled */
    uint64_t staleness_hist[TRAIN_PS_STALENESS_BUCKETS];
    uint32_t lost;                      /* workers lost */
    uint32_t left_early;                /* workers that said BYE before their final pull (failed) */
    uint32_t restarts;                  /* worker restarts adopted (RESUME with another session) */
    uint64_t skipped;                   /* pushes ACKed as applied before a restart, not applied again */
    uint64_t empty_pushes;              /* steps with no rows: positions recorded, nothing applied */
    uint64_t checkpoints;               /* opts.checkpoint calls that succeeded */
    uint64_t incarnation;               /* this run's random id (nonzero) */
    size_t elements;                    /* floats this server holds */
    enum train_ps_eval_state evaluator; /* the evaluator's end; EVAL_BYE only after the final values
                                              counts as served (evaluator_served) */
    int evaluator_served;               /* 1: the evaluator was sent the final values */
    uint64_t world_changes;             /* WORLDs applied (opts.elastic) */
    uint32_t workers;                   /* the workers at the end (opts.workers, or the last WORLD's) */
};

/* The server's figures as it goes, for a /metrics endpoint on another
 * thread: the serving loop stores them (relaxed) after every message. */
struct train_ps_live {
    _Atomic uint64_t pulls, pushes, global_step, staleness_sum, bad_messages, lost, elements, workers_done;
    _Atomic uint64_t staleness_hist[TRAIN_PS_STALENESS_BUCKETS];
};

/* Serve: bind, answer PULLs with the values, apply each PUSH on arrival
 * (train_sgd_apply) and ACK it, until every worker said BYE. A malformed
 * or refused message (a description the setup refuses included) gets an
 * ERROR, is counted (bad_messages) and changes nothing; the server goes
 * on. Lost workers (worker_timeout_ms): the others are served to their
 * end, then SL_ETIMEOUT names the first one lost. A worker whose BYE came
 * before its final pull failed: SL_EPROTO names the first such one (the
 * job did not finish). The evaluator (PULL and BYE with
 * TRAIN_PS_READ_ONLY, worker 0) is answered as a worker is, its final pull
 * too ("not yet" until every worker is done), but it is not a worker: it
 * neither holds the workers' final pull up nor counts among the workers
 * done, lost or failed; the server waits for its BYE after the workers'
 * (see opts.evaluator). An evaluator lost is not an error of the server's
 * (its own task fails): st->evaluator says so. */
int train_ps_serve(const struct train_ps_server_opts *o, struct train_ps_server_stats *st,
                   struct sl_error *err) SL_MUST_CHECK;

/* A worker's connections to every server. */
struct train_ps_client;
/* config: the model description every PULL carries (copied; NULL: none).
 * Plaintext: train_ps_client_open_keys with curve NULL. */
int train_ps_client_open(struct train_ps_client **out, void *ctx, const char *const *eps,
                         const struct train_ps_layout *l, uint32_t worker, int timeout_ms, const char *config,
                         struct sl_error *err) SL_MUST_CHECK;
/* curve (NULL: plaintext): the job's trainer key pair (copied), which the
 * servers hold too: each connection is a CURVE client of that public key. */
int train_ps_client_open_keys(struct train_ps_client **out, void *ctx, const char *const *eps,
                              const struct train_ps_layout *l, uint32_t worker, int timeout_ms, const char *config,
                              const struct sl_curve_keys *curve, struct sl_error *err) SL_MUST_CHECK;
/* Every server's values into params (nparams floats; each server's
 * variables at their offsets), asked of all at once; *global_step from
 * server 0. A server silent past the timeout: SL_ETIMEOUT naming it; one
 * whose incarnation changed (restarted) or whose version went backwards:
 * SL_EPROTO naming it (every call after that fails the same way). */
int train_ps_pull(struct train_ps_client *c, float *params, uint64_t *global_step, struct sl_error *err) SL_MUST_CHECK;
/* Each server its part of grads (nparams floats), sent to all at once,
 * then every ACK; count_step: server 0 counts a global step. *staleness:
 * the largest over the servers (NULL: not wanted). grads NULL: a step
 * with no rows (an empty piece on every replica, as a worker whose shard
 * ended early gets at its epoch's end): every server records its
 * position (TRAIN_PS_PUSH_EMPTY) and applies nothing, so the next step's
 * push is one step after it. */
int train_ps_push(struct train_ps_client *c, const float *grads, int count_step, uint64_t *staleness,
                  struct sl_error *err) SL_MUST_CHECK;
/* The final pull: this worker is done; waits (asking every 20 ms, each
 * answer within the timeout) until every worker is done, then pulls as
 * train_ps_pull: the same values on every worker. *stop nonzero:
 * SL_ECLOSED. */
int train_ps_pull_final(struct train_ps_client *c, float *params, uint64_t *global_step, volatile sig_atomic_t *stop,
                        struct sl_error *err) SL_MUST_CHECK;
/* The evaluator's connections (worker 0 on the wire, with
 * TRAIN_PS_READ_ONLY on every PULL and BYE): as train_ps_client_open_keys
 * (curve NULL: plaintext); its train_ps_push fails (SL_EINVAL). */
int train_ps_client_open_evaluator(struct train_ps_client **out, void *ctx, const char *const *eps,
                                   const struct train_ps_layout *l, int timeout_ms, const char *config,
                                   const struct sl_curve_keys *curve, struct sl_error *err) SL_MUST_CHECK;
/* One round of the final pull, without waiting: *waiting 0 and params
 * filled (every server sent its final values; *global_step from server 0),
 * or *waiting the most workers any server is still waiting for (params
 * then partly filled: ask again). For an evaluator's client this reads and
 * marks nobody done. */
int train_ps_pull_final_try(struct train_ps_client *c, float *params, uint64_t *global_step, uint32_t *waiting,
                            struct sl_error *err) SL_MUST_CHECK;
/* text (len bytes, from a peer) into out (cap > 0, NUL-terminated,
 * truncated to fit): bytes outside printable ASCII and '\\' as \xNN.
 * Returns out. */
char *train_ps_printable(char *out, size_t cap, const void *text, size_t len);
/* A message header as a server and a client read it, for tests
 * (tests/fuzz/fuzz_ps.c): 0 with what the n bytes at b decode to encoded
 * again into back (TRAIN_PS_HEADER bytes), or -1 when they are refused. */
int train_ps_hdr_check(const uint8_t *b, size_t n, uint8_t *back);

/* After train_ps_pull_final: the workers the servers counted lost (silent
 * past their timeout), failed (BYE before their final pull) or restarted,
 * the largest count over the servers, and *first (may be NULL) the lowest
 * such worker; 0 when every worker finished. */
uint32_t train_ps_client_lost(const struct train_ps_client *c, uint32_t *first);

/* A random nonzero id (a worker process's session). */
uint64_t train_ps_draw_id(void);
/* Use session (nonzero) in every message from now on instead of the one
 * drawn at open: the one train_ps_resume was given. */
void train_ps_client_set_session(struct train_ps_client *c, uint64_t session);
/* The input position after the step about to be pushed (the next
 * train_ps_push carries it). Without one, a push carries the last one
 * advanced by a step (from epoch 0, seq 0, 1 replica). */
void train_ps_client_set_position(struct train_ps_client *c, const struct client_input_position *next);

/* Where a worker process starting resumes: RESUME to every server (each
 * adopts `session` for the worker), then the lowest position they
 * recorded (seq 0 for none). */
struct train_ps_resume_result {
    struct client_input_position pos; /* where to open the feeders (pos.seq: their resume_seq) */
    uint32_t recorded;                /* servers that had a position for the worker (0: a fresh start) */
    uint32_t ahead;                   /* servers past pos (the old process's last push reached them, or their
                                        checkpoints are newer): they skip the steps up to theirs */
    uint64_t world_changes;           /* elastic servers: the most WORLDs any of them applied (0: none, or plain
                                        servers) */
    uint64_t world_epoch;             /* the epoch their world starts at (the largest said): a worker some
                                        server has no position for starts there (pos is then of no use) */
    uint32_t world_workers;           /* elastic servers: their worker count (they must all say the same:
                                        SL_EPROTO otherwise); 0 from plain servers */
};
/* SL_ETIMEOUT (a server silent timeout_ms), SL_EPROTO (a server's ERROR,
 * a malformed reply, a position for another replica count than
 * `replicas`), SL_EIO. curve NULL: plaintext. */
int train_ps_resume(void *ctx, const char *const *eps, uint32_t nps, uint32_t worker, uint64_t session,
                    uint32_t replicas, int timeout_ms, const struct sl_curve_keys *curve,
                    struct train_ps_resume_result *out, struct sl_error *err) SL_MUST_CHECK;

/* One worker of a new world (train_ps_world): the old rank it had
 * (TRAIN_PS_JOINER: it joins) and its session in the new world. */
struct train_ps_member {
    uint32_t from;
    uint64_t session;
};
/* WORLD to every server (worker 0's old session `session`, the change's
 * number `change`, the new world starting at `epoch`), then every ACK.
 * SL_EINVAL (n 0 or above TRAIN_PS_MAX_WORKERS, nps out of range),
 * SL_ETIMEOUT (a server silent timeout_ms), SL_EPROTO (a server refused:
 * its ERROR), SL_EIO. curve NULL: plaintext. A server that refused keeps
 * the old world; the others applied it: the job cannot go on then. */
int train_ps_world(void *ctx, const char *const *eps, uint32_t nps, uint64_t session, uint64_t change, uint64_t epoch,
                   const struct train_ps_member *m, uint32_t n, int timeout_ms, const struct sl_curve_keys *curve,
                   struct sl_error *err) SL_MUST_CHECK;

/* The floats of the whole parameter array the layout covers. */
size_t train_ps_client_params(const struct train_ps_client *c);
/* Say BYE to every server and close (NULL: nothing). */
void train_ps_client_close(struct train_ps_client *c);

#endif
