/* train_main_int: what the parts of sluice-trainer share (train_main.c and
 * train_main_*.c); not for other code. main (train_main.c) is the table of
 * contents: configure (train_main_opts.c), the outputs
 * (train_main_output.c), the checkpoints (train_main_ckpt.c), the
 * training (train_main_run.c), and the parameter-server and evaluator tasks
 * (train_main_ps.c). Each function's contract is written at its
 * definition. */
#ifndef TRAIN_MAIN_INT_H
#define TRAIN_MAIN_INT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sl_buf.h"
#include "sl_cluster.h"
#include "sl_curve.h"
#include "sl_error.h"
#include "sl_output.h"
#include "sl_status_line.h"
#include "train_ckpt.h"
#include "client.h"
#include "train_device.h"
#include "train_elastic.h"
#include "train_expose.h"
#include "train_loop.h"
#include "train_metrics.h"

#define EXIT_USAGE 2
#define MAX_FEEDERS 64
#define MAX_WORKERS 65536

/* The stop signal's number (SIGINT, SIGTERM), 0 until one comes: every
 * wait checks it (the client's, the rendezvous', the ring's) and ends
 * within 250 ms; the trainer then exits 128 + the signal's number. */
extern volatile sig_atomic_t trainer_stop_flag;
/* --elastic: 1 once a SIGTERM asked this worker to leave the job (worker 0
 * refuses; a second SIGTERM stops, as trainer_stop_flag). */
extern volatile sig_atomic_t trainer_leave_flag;
/* A plain mirrored ring job on CPU replicas (trainer_run, while
 * trainer_stop_agree_begin .. _end): the first SIGINT/SIGTERM only sets
 * trainer_stop_wanted (its number) and arms a grace of G seconds; every
 * step then carries the wish in its control value, and when a step's sum
 * is not 0 every worker stops right after that same step. The grace's end
 * (SIGALRM) or a second signal sets trainer_stop_flag to the first signal:
 * the hard stop, for a peer that is gone. */
extern volatile sig_atomic_t trainer_stop_wanted;
void trainer_stop_agree_begin(unsigned grace_s);
void trainer_stop_agree_end(void);

enum { MODEL_NONE, MODEL_SOFTMAX, MODEL_MLP };
enum { MODE_MIRRORED, MODE_TOWER, MODE_PS };     /* --mode */
extern const char *const trainer_mode_names[3];  /* [MODE_*]: the --mode words */
extern const char *const trainer_model_names[3]; /* [MODEL_*]: the --model words */
enum { PROGRESS_AUTO, PROGRESS_ON, PROGRESS_OFF };

/* The command line, filled from `rows` once in main, then read-only but
 * for --elastic's worker and workers: this process's place in the world,
 * set again at each change of it (train_main_elastic.c). */
struct trainer_opts {
    const char *connect, *job, *cluster, *ring, *peers, *input, *label, *hidden;
    const char *trace, *feature, *save_weights, *metrics, *predictions, *eval_connect, *eval_job;
    const char *cluster_from; /* --cluster-from */
    const char *ps;           /* --ps ADDRS */
    uint32_t ps_task;         /* --ps-task I */
    uint32_t ps_worker_timeout_s;
    const char *elastic;                      /* --elastic EP: worker 0's coordinator endpoint */
    const char *join;                         /* --join EP: ask to join, this process's ring endpoint */
    uint32_t elastic_max_workers;             /* --elastic-max-workers N */
    int ps_placement;                         /* --ps-placement: enum train_ps_placement */
    int evaluator, ps_evaluator;              /* --evaluator, --ps-evaluator */
    const char *metrics_listen;               /* --metrics-listen HOST:PORT */
    const char *checkpoint, *restore;         /* --checkpoint DIR, --restore DIR */
    const char *curve_key, *curve_server_key; /* --curve-key FILE, --curve-server-key FILE|DIR */
    int insecure;                             /* --insecure */
    int check_numerics;                       /* --check-numerics: CHECK_ON, CHECK_FINITE, CHECK_OFF */
    uint32_t checkpoint_every, keep;
    uint64_t restore_step;
    uint64_t resume_epoch; /* --resume-epoch E: start at epoch E's first piece (0: not given) */
    int reshape;           /* --reshape: ask the feeders to take this run's cluster shape */
    uint32_t worker, workers, replicas, credits, heartbeat_ms, timeout_ms, reconnect_s, seed, log_every, classes,
        hash_every, rendezvous_timeout_s, connect_timeout_s;
    double lr, momentum, takeover_s;
    double step_ms; /* --step-ms: a stand-in for a model's compute per step */
    int model, mode, progress, quiet, no_shm, log_level, log_format;
    struct train_device_spec devspec;                  /* --devices (count 0: not given) */
    int nhidden, hidden_sizes[TRAIN_MODEL_MAX_HIDDEN]; /* --hidden */
};

enum { CHECK_ON, CHECK_FINITE, CHECK_OFF };
/* What main sets up, in the order it does; trainer_report() reads it all. */
struct trainer {
    struct trainer_opts o;
    int done; /* --help or --version printed */
    struct sl_cluster_list feeders, ring_eps, eval_feeders, ps_eps;
    int is_ps;                                     /* this process is parameter server o.ps_task */
    int is_evaluator;                              /* this process is the evaluator task (--evaluator) */
    int ps_evaluator;                              /* a ps task: the job has an evaluator */
    uint64_t ps_global_step;                       /* --mode ps: the servers' count at the end */
    uint64_t ps_session;                           /* --mode ps: this worker process's session (ps_resume) */
    int ps_resumed;                                /* --mode ps: started again where the servers recorded */
    uint64_t ps_world_changes;                     /* --mode ps --elastic: the servers' WORLDs applied (a
                                                      restored job's worker 0 numbers its changes after them) */
    uint32_t ps_lost;                              /* --mode ps: workers lost or failed (the final pull's) */
    uint64_t ps_steps, ps_stale_sum, ps_stale_max; /* --mode ps: pushes, their staleness */
    double ps_pull_s, ps_push_s;                   /* --mode ps: the pulls' and pushes' time */
    char ring_bind[SL_CLUSTER_MAX_ADDR];           /* what this worker binds for the ring ("": its endpoint) */
    uint32_t replicas;
    int gpu;
    FILE *summary_out;           /* a private copy of stdout */
    struct sl_output *trace_out; /* --trace, until trainer_report() commits it */
    FILE *tf;
    int trace_failed;
    char group_id[TRAIN_LOOP_ID_BYTES]; /* GPU replicas across workers: the NCCL group id */
    int have_group_id;
    struct client_opts copts;
    /* CURVE (--curve-key; have_curve 0: none): this worker's key pair, and
     * each feeder's public key, [j] for feeders.items[j] (eval_: for
     * eval_feeders) */
    int have_curve;
    char *spec_curve_key, *spec_curve_server; /* the cluster spec's 'curve' paths (owned) */
    struct sl_curve_keys curve;
    char curve_server[MAX_FEEDERS][SL_CURVE_KEY_Z85 + 1], curve_eval[MAX_FEEDERS][SL_CURVE_KEY_Z85 + 1];
    const char *curve_server_z85[MAX_FEEDERS], *curve_eval_z85[MAX_FEEDERS];
    struct client *cl;
    struct train_ring *ring;
    struct train_loop *loop;
    struct trainer_elastic *el;     /* --elastic: the coordinator's socket and book (train_main_elastic.c) */
    struct trainer_ps_elastic *pel; /* --elastic --mode ps: the same at an epoch's end (train_main_ps_elastic.c) */
    struct sl_output *metrics_out;  /* --metrics, until the training ends */
    FILE *mf;
    struct sl_metrics *m;            /* the figures every report prints (train_metrics.h) */
    struct train_expose *expose;     /* --metrics-listen (NULL: off); --elastic tells it each world */
    double t0, t_first, t_train_end; /* t_first: the first step received */
    double last_loss, last_acc, test_rows, test_correct;
    int restoring, restore_step_given; /* --restore; --restore-step */
    struct train_ckpt ck;              /* the checkpoint restored, until its state is installed */
    uint64_t start_step;               /* steps trained before this run (restored) */
    uint64_t resume_epoch;             /* the epoch to start at: --resume-epoch's, or a checkpoint's of
                                          another shape taken at an epoch's end; 0: by seq */
    /* the stream's mid-epoch change of shape (docs/semantics.md 5.2; all 0:
     * none): a restored checkpoint's, or this run's (--restore --reshape of
     * another shape's checkpoint taken mid-epoch), sent in every HELLO and
     * recorded in every checkpoint */
    struct client_transition transition;
    uint64_t from_T;     /* with it: the old shape's steps per epoch */
    uint64_t step_base;  /* steps trained before the change: a step's number is step_base + seq / replicas */
    int changing;        /* this run makes the change: it starts at the change (resume_seq 0) */
    double ckpt_s_total; /* time spent writing checkpoints */
    uint64_t ckpts;      /* checkpoints written */
    uint64_t ckpt_last;  /* the step of the last one */
    int stop_agree;      /* a plain mirrored ring job on CPU replicas: the workers agree on the step a signal
                            stops them after, in each step's control value (trainer_stop_agree_begin) */
};

/* A step's place, kept from its pieces (borrowed until the next receive)
 * for the metrics and logs written after it runs. */
struct staged_step {
    uint64_t epoch, step, seq; /* seq: the step's first piece's */
    uint32_t flags;
};

/* What the --metrics lines and the periodic log line measure from: the
 * metrics at the last line of each, and the means since the last log line. */
struct run_counters {
    double step_t0;            /* the previous step's end */
    double fw_m0[MAX_FEEDERS]; /* the wait by feeder at the last --metrics line */
    double fw_l0[MAX_FEEDERS]; /* at the last log line */
    struct train_counters m0;  /* at the last --metrics line */
    struct train_counters l0;  /* at the last log line */
    double loss_sum, acc_sum;  /* since the last log line */
    uint64_t loss_steps;
};

/* --predictions: each evaluated element's (id, label) kept as its piece
 * arrives (look-ahead: two steps' worth, by slot), joined with the
 * replicas' predictions after the step runs, then gathered over workers by
 * id with the ring's sum: per id a count (must end as 1), the prediction
 * and the label, all small integers, exact in float32. */
struct pred_gather {
    int64_t *ids[2], *labels[2]; /* [slot]: the step's rows, replica by replica */
    uint32_t rows[2][64];        /* [slot][replica] */
    size_t cap[2];
    int64_t *out; /* (id, prediction, label) triples of this worker */
    size_t n, out_cap;
};

/* A progress line on stderr, redrawn at most 5 times a second: epoch and
 * step (of the totals the feeder announced), the running loss, samples/s
 * and the input stall so far. Cleared before log lines. */
struct progress_line {
    struct sl_status_line line; /* on: --progress on, or auto on worker 0 at a terminal */
    uint64_t steps_per_epoch, epochs;
};

/* ---- train_main_opts.c: the options, the cluster spec, the endpoint lists ---- */

const char *trainer_plaintext_listen(const struct trainer *t);
void trainer_ps_bind_addr(const struct trainer *t, char *bind, size_t n);
int trainer_configure(struct trainer *t, int argc, char **argv);

/* ---- train_main_output.c: the trace, --predictions, the progress line, --metrics and the summary ---- */

int trainer_save_weights(const char *path, const float *p, size_t n, struct sl_error *err);
int trainer_trace_piece(struct sl_buf *b, const struct client_piece *p, const char *feature, FILE *out);
int trainer_check_trace_feature(const struct sl_wire_welcome *w, const char *feature, struct sl_error *err);
int trainer_gather_keep(struct pred_gather *g, int slot, const struct client_piece *pieces, uint32_t replicas,
                        const char *id_name, const char *label_name, struct sl_error *err);
int trainer_gather_add(struct pred_gather *g, int slot, const struct train_loop *loop, uint32_t replicas,
                       struct sl_error *err);
int trainer_gather_write(const struct pred_gather *g, struct train_loop *loop, uint32_t worker, double rows,
                         double correct, const char *path, struct sl_error *err);
void trainer_gather_free(struct pred_gather *g);
void trainer_progress_line_draw(struct progress_line *b, uint64_t epoch, uint64_t step, double loss, double rate,
                                double stall_pct);
void trainer_progress_line_clear(struct progress_line *b);
void trainer_split_stdout(struct trainer *t);
int trainer_open_trace(struct trainer *t);
void trainer_write_metrics(struct trainer *t, struct run_counters *c, const struct staged_step *s,
                           const struct train_step_result *res);
void trainer_log_progress(struct trainer *t, struct run_counters *c, const struct staged_step *s);
int trainer_report(struct trainer *t, int status);

/* ---- train_main_ckpt.c: the checkpoints (train_ckpt.h; docs/trainer.md, "Checkpoints") ---- */

uint32_t trainer_input_width(const struct trainer *t);
int trainer_ckpt_agree(struct trainer *t, struct sl_error *err);
int trainer_ckpt_dir_ready(const char *dir, struct sl_error *err);
int trainer_prepare_checkpoints(struct trainer *t);
int trainer_maybe_checkpoint(struct trainer *t, uint64_t epoch, uint64_t first_seq, uint32_t flags, int force);

/* ---- train_main_run.c: meet, start, train, evaluate ---- */

int trainer_loop_create_alive(struct train_loop **out, const struct train_loop_opts *lo, struct client *cl,
                              struct sl_error *err);
void trainer_model_config_of(const struct trainer_opts *o, struct train_model_config *mc);
void trainer_model_config_string(const struct trainer *t, char *cfg, size_t n);
int trainer_meet(struct trainer *t);
int trainer_ring_open(struct trainer *t, struct sl_error *err);
int trainer_loop_start(struct trainer *t, struct sl_error *err);
int trainer_start(struct trainer *t);
/* t->copts from the flags, for these feeders and job, as worker `worker`
 * of `workers` (the evaluation's client is worker 0 of 1). */
void trainer_client_opts(struct trainer *t, const struct sl_cluster_list *feeders, const char *job, uint32_t worker,
                         uint32_t workers, const char *const *curve_server);
int trainer_run(struct trainer *t);
int trainer_finish_training(struct trainer *t, int status);
int trainer_evaluate(struct trainer *t, struct client *ec);
int trainer_ps_finish(struct trainer *t);

/* ---- train_main_elastic_coord.c: the coordinator endpoint both elastic modes share ---- */

/* A member's end of the coordinator endpoint (--elastic): worker 0's
 * ROUTER and book, another member's DEALER. */
struct trainer_elastic_ep {
    void *ctx, *sock; /* worker 0: a ROUTER on --elastic; the others: a DEALER to it */
    void *mon;        /* a joiner, until it is taken in: its DEALER's monitor (the handshake's verdict) */
    int coordinator;
    /* --curve-key, worker 0: the allow-list of the job's one public key and
     * the ZAP handler of ctx that checks every peer against it */
    struct sl_curve_allow *allow;
    struct sl_zap *zap;
    struct train_elastic_coord coord; /* worker 0 */
    char config[TRAIN_ELASTIC_MAX_CONFIG + 1];
    uint32_t gen;      /* the world this member is in */
    int leave_noted;   /* the leave flag was acted on */
    uint64_t epoch;    /* of the newest step received */
    uint64_t acked_ns; /* worker 0: when the waiting joiners were last sent their ACK */
    unsigned char buf[TRAIN_ELASTIC_MAX_FRAME];
};

/* What differs between the modes in worker 0's handling of a request. */
struct trainer_elastic_hooks {
    const char *joiner;   /* the log's words before a joiner's name ("ring endpoint ", or none) */
    const char *admitted; /* after "admitted" in the log (when the joiner comes in) */
    const char *change;   /* when a member asking to leave is let go, a joiner comes in */
    const char *asking;   /* the JOIN's log line: "asking worker 0 (EP) to join the <asking> <--join>" */
    /* a JOIN's checks before the book's (NULL: none): 0, or the refusal in err */
    int (*join_check)(struct trainer *t, const struct train_elastic_msg *m, const char *name, struct sl_error *err);
    /* a JOIN admitted (NULL: nothing more) */
    void (*joined)(struct trainer *t, const struct train_elastic_msg *m, const char *name);
    /* another message: 1 when taken, 0 to log it as unexpected (NULL: none taken) */
    int (*other)(struct trainer *t, const unsigned char *id, size_t idlen, const struct train_elastic_msg *m);
};

int trainer_elastic_send(struct trainer_elastic_ep *e, const void *id, size_t idlen, const struct train_elastic_msg *m,
                         struct sl_error *err);
int trainer_elastic_recv(struct trainer_elastic_ep *e, int ms, unsigned char *id, size_t *idlen,
                         struct train_elastic_msg *m, struct sl_error *err);
uint32_t trainer_elastic_window_credits(const struct trainer *t);
int trainer_elastic_check_window(const struct trainer *t, struct sl_error *err);
int trainer_elastic_ep_open(struct trainer *t, struct trainer_elastic_ep *e, int coordinator, struct sl_error *err);
int trainer_elastic_ep_book(struct trainer *t, struct trainer_elastic_ep *e, const char *const *names, uint32_t n,
                            struct sl_error *err);
void trainer_elastic_ep_close(struct trainer_elastic_ep *e);
void trainer_elastic_ep_message(struct trainer *t, struct trainer_elastic_ep *e, const struct trainer_elastic_hooks *h,
                                const unsigned char *id, size_t idlen, const struct train_elastic_msg *m);
void trainer_elastic_ack_joiners(struct trainer_elastic_ep *e);
int trainer_elastic_ep_join(struct trainer *t, struct trainer_elastic_ep *e, const struct trainer_elastic_hooks *h,
                            uint64_t session, struct train_elastic_msg *w, struct sl_error *err);
void trainer_elastic_ep_poll(struct trainer *t, struct trainer_elastic_ep *e, const struct trainer_elastic_hooks *h,
                             uint64_t epoch);

/* ---- train_main_elastic.c: workers join and leave at a step boundary (--elastic) ---- */

int trainer_elastic_open(struct trainer *t);
int trainer_elastic_join(struct trainer *t);
void trainer_elastic_poll(struct trainer *t, uint64_t epoch);
int trainer_elastic_changes_after(const struct trainer *t, const struct staged_step *s);
float trainer_elastic_want(struct trainer *t, const struct staged_step *s);
int trainer_elastic_boundary(struct trainer *t, const struct staged_step *s, uint64_t steps, int *released);
int trainer_elastic_broken(struct trainer *t, const struct staged_step *s, uint64_t *steps);
void trainer_elastic_close(struct trainer *t);

/* ---- train_main_ps_elastic.c: ps workers join and leave at an epoch boundary (--elastic --mode ps) ---- */

int trainer_ps_elastic_open(struct trainer *t);
int trainer_ps_elastic_join(struct trainer *t);
void trainer_ps_elastic_poll(struct trainer *t, uint64_t epoch);
int trainer_ps_elastic_after(const struct trainer *t, const struct staged_step *s);
int trainer_ps_elastic_boundary(struct trainer *t, const struct staged_step *s, uint64_t steps, int *released);
void trainer_ps_elastic_close(struct trainer *t);

/* ---- train_main_ps.c: a parameter-server task and the evaluator task ---- */

int trainer_serve_ps(struct trainer *t);
int trainer_run_evaluator(struct trainer *t);

#endif
