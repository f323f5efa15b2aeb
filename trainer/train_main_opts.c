/* train_main_opts: sluice-trainer's options (the table `opt_rows`, parsed by
 * sl_opt), the cluster spec and the endpoint lists: configure(), after
 * which every usage error has exited 2 (see train_main_int.h). */
#include "train_main_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_env.h"
#include "sl_exit.h"
#include "sl_log.h"
#include "sl_opt.h"

const char *const trainer_mode_names[3] = {"mirrored", "tower", "ps"};
const char *const trainer_model_names[3] = {"none", "softmax", "mlp"};

static int set_devices(void *opts, const char *value, struct sl_error *err)
{
    struct trainer_opts *o = opts;
    return train_device_spec_parse(value, &o->devspec, err); /* its messages start "--devices: " */
}

/* --hidden: 1 to TRAIN_MODEL_MAX_HIDDEN sizes; the text itself goes into
 * the rendezvous' config as given. */
static int set_hidden(void *opts, const char *value, struct sl_error *err)
{
    struct trainer_opts *o = opts;
    int n = 0;
    for (const char *p = value;; p++) {
        char item[32];
        size_t len = strcspn(p, ",");
        uint64_t v;
        if (n == TRAIN_MODEL_MAX_HIDDEN)
            return sl_error_set(err, SL_EINVAL, "--hidden: at most %d sizes, got '%s'", TRAIN_MODEL_MAX_HIDDEN, value);
        snprintf(item, sizeof item, "%.*s", (int)(len < sizeof item ? len : sizeof item - 1), p);
        if (len >= sizeof item || sl_opt_parse_u64(item, 1, TRAIN_MODEL_MAX_WIDTH, &v, err) != 0)
            return sl_error_set(err, SL_EINVAL, "--hidden: expected sizes N[,N...] in [1, %d], got '%s'",
                                TRAIN_MODEL_MAX_WIDTH, value);
        o->hidden_sizes[n++] = (int)v;
        p += len;
        if (*p == '\0')
            break;
    }
    o->nhidden = n;
    o->hidden = value;
    return 0;
}

#define OFF(field) offsetof(struct trainer_opts, field)

/* docs/trainer.md describes every row; --help is generated from them. */
static const struct sl_opt opt_rows[] = {
    {"connect", 'c', SL_OPT_STRING, OFF(connect), 0, 0, NULL, "ADDRS",
     "feeder endpoints, comma-separated, feeder 0 first", NULL, NULL},
    {"job", 'j', SL_OPT_STRING, OFF(job), 0, 0, NULL, "NAME", "the job's name (as in its job file)", NULL, NULL},
    {"worker", 'w', SL_OPT_U32, OFF(worker), 0, MAX_WORKERS - 1, "0", "W", "this worker's index", NULL, NULL},
    {"workers", 'n', SL_OPT_U32, OFF(workers), 1, MAX_WORKERS, "1", "N", "trainer workers in the job", NULL, NULL},
    {"replicas", 'r', SL_OPT_U32, OFF(replicas), 1, TRAIN_DEVICE_MAX_REPLICAS, NULL, "R",
     "replicas of this worker (default: from --devices)", NULL, NULL},
    {"devices", 0, SL_OPT_FUNC, 0, 0, 0, NULL, "SPEC",
     "auto (every GPU, else one CPU replica per core), cpu, cpu:N, gpu or gpu:0,1 (GPU replicas need a build "
     "with CUDA); without it, one CPU replica (or --replicas)",
     NULL, set_devices},
    {"model", 0, SL_OPT_CHOICE, OFF(model), 0, 0, "none", "M",
     "none (consume and count), softmax or mlp (one thread per replica, CPU or GPU)", "none|softmax|mlp", NULL},
    {"hidden", 0, SL_OPT_FUNC, 0, 0, 0, "256,128", "N,N", "MLP hidden sizes (at most 4)", NULL, set_hidden},
    {"lr", 0, SL_OPT_DOUBLE, OFF(lr), 1e-9, 1e3, "0.05", "X", "SGD learning rate", NULL, NULL},
    {"momentum", 0, SL_OPT_DOUBLE, OFF(momentum), 0, 0.999999, "0.9", "X", "SGD momentum", NULL, NULL},
    {"seed", 0, SL_OPT_U32, OFF(seed), 0, UINT32_MAX, "1", "N", "weight initialization seed", NULL, NULL},
    {"input", 0, SL_OPT_STRING, OFF(input), 0, 0, "image", "NAME", "the tensor to train on", NULL, NULL},
    {"label", 0, SL_OPT_STRING, OFF(label), 0, 0, "label", "NAME", "the labels' tensor", NULL, NULL},
    {"classes", 0, SL_OPT_U32, OFF(classes), 2, 100000, "10", "N", "label classes", NULL, NULL},
    {"save-weights", 0, SL_OPT_STRING, OFF(save_weights), 0, 0, NULL, "FILE",
     "the final weights as a NumPy .npy float32 vector", NULL, NULL},
    {"metrics", 0, SL_OPT_STRING, OFF(metrics), 0, 0, NULL, "FILE",
     "one JSON line per step: epoch, step, rows, loss, accuracy, step time, input wait and stall %, samples/s, "
     "H2D GB/s, weights hash",
     NULL, NULL},
    SL_OPT_ROW_METRICS_LISTEN(struct trainer_opts),
    {"predictions", 0, SL_OPT_STRING, OFF(predictions), 0, 0, NULL, "FILE",
     "with --eval-*: every evaluated element's prediction, gathered from all workers by its --trace-feature id "
     "(ids 0..N-1, each once) and written by worker 0 in id order, one JSON line each (CPU replicas)",
     NULL, NULL},
    {"eval-connect", 0, SL_OPT_STRING, OFF(eval_connect), 0, 0, NULL, "ADDRS",
     "after training, the accuracy of the final weights on the data these feeders serve (summed over workers)", NULL,
     NULL},
    {"eval-job", 0, SL_OPT_STRING, OFF(eval_job), 0, 0, NULL, "NAME", "the evaluation job's name (default: --job)",
     NULL, NULL},
    {"ring", 0, SL_OPT_STRING, OFF(ring), 0, 0, NULL, "ADDRS",
     "with --workers > 1: one endpoint per worker, in worker order; worker w binds its own (gradient all-reduce)", NULL,
     NULL},
    {"peers", 0, SL_OPT_STRING, OFF(peers), 0, 0, NULL, "HOST:PORT,...",
     "the same as worker addresses (TF_CONFIG style): worker w binds every interface on its port", NULL, NULL},
    {"rendezvous-timeout", 0, SL_OPT_U32, OFF(rendezvous_timeout_s), 1, 86400, "60", "S",
     "with a model and --workers > 1, the workers meet at worker 0's endpoint first and check that they agree "
     "(job, workers, model, replicas); fail naming the worker missing after S seconds",
     NULL, NULL},
    {"mode", 0, SL_OPT_CHOICE, OFF(mode), 0, 0, "mirrored", "M",
     "mirrored (a copy of the weights per replica), tower (replicate_model_fn: one copy, towers; one worker) or "
     "ps (ParameterServerStrategy: the weights live on the --ps servers; each worker pulls, trains its R replicas "
     "in sync and pushes its gradient without waiting for the other workers; CPU replicas)",
     "mirrored|tower|ps", NULL},
    {"ps", 0, SL_OPT_STRING, OFF(ps), 0, 0, NULL, "ADDRS",
     "the parameter servers (--mode ps, and a ps task), server 0 first: endpoints or bare HOST:PORT (tcp); or "
     "the cluster spec's 'ps' list",
     NULL, NULL},
    {"ps-task", 0, SL_OPT_U32, OFF(ps_task), 0, TRAIN_PS_MAX_SERVERS - 1, NULL, "I",
     "run as parameter server I of --ps (as a TF_CONFIG task of type 'ps' does): serve its share of the model "
     "given by the same model flags as the workers' until every one of --workers is done",
     NULL, NULL},
    {"ps-placement", 0, SL_OPT_CHOICE, OFF(ps_placement), 0, 0, "round-robin", NULL,
     "how the model's variables go to the parameter servers: round-robin in creation order (TensorFlow's) or "
     "balanced by size (the largest first, to the least loaded); the same on every process",
     "round-robin|balanced", NULL},
    {"evaluator", 0, SL_OPT_FLAG, OFF(evaluator), 0, 0, NULL, NULL,
     "run as the evaluator of a --mode ps job (as a TF_CONFIG task of type 'evaluator' does): once every worker "
     "is done, read the final weights from the --ps servers (never counted as a worker) and report the accuracy "
     "on the whole of its own --eval-connect job (and --predictions); the same model flags as the workers'",
     NULL, NULL},
    {"ps-evaluator", 0, SL_OPT_FLAG, OFF(ps_evaluator), 0, 0, NULL, NULL,
     "with --ps-task: the job has an evaluator task (as a TF_CONFIG cluster listing an 'evaluator' says): once "
     "the workers are done, serve on until it has read the final weights, or was silent --ps-worker-timeout",
     NULL, NULL},
    {"ps-worker-timeout", 0, SL_OPT_U32, OFF(ps_worker_timeout_s), 1, 86400, "60", "S",
     "a parameter server counts a worker lost when silent S seconds before it is done (never heard: S seconds "
     "from the start); the server serves the others to their end and exits 1 naming it",
     NULL, NULL},
    {"hash-every", 0, SL_OPT_U32, OFF(hash_every), 0, UINT32_MAX, "100", "K",
     "compare the weights' copies (replicas, workers) every K steps (0: at the end of each epoch only)", NULL, NULL},
    {"check-numerics", 0, SL_OPT_CHOICE, OFF(check_numerics), 0, 0, "on", NULL,
     "stop the run (exit 1, \"ok\":false, naming the step) when a step's loss or a weight is a NaN or an "
     "infinity, or (on) the loss is over 1000 x ln(classes), the mean loss of a uniform guess a thousand times: "
     "the training diverged; finite: the non-finite check alone; off: train on whatever comes (docs/trainer.md)",
     "on|finite|off", NULL},
    {"log-every", 0, SL_OPT_U32, OFF(log_every), 0, UINT32_MAX, "0", "N",
     "log loss and accuracy every N steps (0: per epoch)", NULL, NULL},
    {"progress", 0, SL_OPT_CHOICE, OFF(progress), 0, 0, "auto", NULL,
     "a progress line on stderr (epoch, step, loss, samples/s, input stall); auto: worker 0 on a terminal",
     "auto|on|off", NULL},
    {"step-ms", 0, SL_OPT_DOUBLE, OFF(step_ms), 0, 600000, "0", "MS",
     "after each step, spend MS ms (fractions allowed) as a stand-in for a model's compute, keeping the feeders' "
     "connections alive meanwhile: how an input pipeline keeps up with a step of that length",
     NULL, NULL},
    {"credits", 0, SL_OPT_U32, OFF(credits), 1, CLIENT_MAX_CREDITS, NULL, "N",
     "pieces each feeder may have in flight (default max(16, 4R))", NULL, NULL},
    {"trace", 0, SL_OPT_STRING, OFF(trace), 0, 0, NULL, "FILE", "one JSON line per piece, then a summary line", NULL,
     NULL},
    {"trace-feature", 0, SL_OPT_STRING, OFF(feature), 0, 0, "id", "NAME",
     "tensor whose values the trace lists as \"ids\": int64 values, or bytes as strings (text lines)", NULL, NULL},
    {"heartbeat-ms", 0, SL_OPT_U32, OFF(heartbeat_ms), CLIENT_MIN_HEARTBEAT_MS, CLIENT_MAX_HEARTBEAT_MS, NULL, "N",
     "heartbeat interval (default 1000)", NULL, NULL},
    {"timeout-ms", 0, SL_OPT_U32, OFF(timeout_ms), CLIENT_MIN_TIMEOUT_MS, CLIENT_MAX_TIMEOUT_MS, NULL, "N",
     "fail when a feeder is silent this long (default 10000); one whose connection closes fails the trainer at "
     "once",
     NULL, NULL},
    {"connect-timeout", 0, SL_OPT_U32, OFF(connect_timeout_s), 1, 86400, "60", "S",
     "fail when a feeder has not answered HELLO within S seconds; one still scanning its files answers at once "
     "and is waited for as long as it keeps answering (S seconds between answers); also how long the workers' "
     "ring waits for every worker to join",
     NULL, NULL},
    {"reconnect-s", 0, SL_OPT_U32, OFF(reconnect_s), 0, 86400, "0", "S",
     "instead, reconnect to a lost feeder and resume where it left off, waiting up to S s for it (or a restarted "
     "feeder on the same address) to answer (0: fail, or with two or more feeders wait --takeover-s and hand "
     "its share to a survivor)",
     NULL, NULL},
    {"takeover-s", 0, SL_OPT_DOUBLE, OFF(takeover_s), 0, 3600, "3", "S",
     "a feeder lost (its connection closed, silent past --timeout-ms, or stopped) and not back within S s has "
     "its share of the stream served by a surviving feeder, from the first piece this trainer lacks: nothing "
     "lost, nothing twice, the order unchanged (0: off; with every feeder lost the trainer fails after S s, or "
     "--reconnect-s if longer)",
     NULL, NULL},
    SL_OPT_ROW_CURVE_KEY(struct trainer_opts),
    {"curve-server-key", 0, SL_OPT_STRING, OFF(curve_server_key), 0, 0, NULL, "FILE|DIR",
     "with --curve-key: the feeders' public keys: one NAME.pub file for every feeder, or a directory holding "
     "feeder j's key at DIR/feeder-J.pub (and --eval-connect's feeder j's at DIR/eval-feeder-J.pub)",
     NULL, NULL},
    SL_OPT_ROW_INSECURE(struct trainer_opts),
    SL_OPT_ROW_NO_SHM(struct trainer_opts),
    {"checkpoint", 0, SL_OPT_STRING, OFF(checkpoint), 0, 0, NULL, "DIR",
     "write checkpoints into DIR (made if absent): this worker's weights, optimizer state and input position, "
     "one file per step (ckpt-STEP.wWofN), written atomically (docs/trainer.md); on a ps task, its variables, "
     "momentum, "
     "global step and each worker's input position (ckpt-VERSION.wPofN)",
     NULL, NULL},
    {"checkpoint-every", 0, SL_OPT_U32, OFF(checkpoint_every), 0, UINT32_MAX, "1000", "N",
     "with --checkpoint: every N steps (counted over all epochs) and after each epoch's last step (0: after each "
     "epoch's last step only); on a ps task, every N pushes it applied (0: only when stopped)",
     NULL, NULL},
    {"keep", 0, SL_OPT_U32, OFF(keep), 1, 1000000, "3", "K",
     "with --checkpoint: keep this worker's K newest "
     "checkpoints, remove older ones",
     NULL, NULL},
    {"restore", 0, SL_OPT_STRING, OFF(restore), 0, 0, NULL, "DIR",
     "continue from this worker's newest checkpoint in DIR: the weights, optimizer state and input position; a "
     "damaged or mismatched one is refused, naming the file (the workers must agree on the step); with --elastic, "
     "the newest step every worker of that step's world wrote; on a ps task, its "
     "newest checkpoint, the workers resuming where it recorded them",
     NULL, NULL},
    {"restore-step", 0, SL_OPT_U64, OFF(restore_step), 0, UINT64_C(1) << 48, NULL, "S",
     "with --restore: continue from step S's checkpoint instead of the newest (an explicit choice of an older one)",
     NULL, NULL},
    {"resume-epoch", 0, SL_OPT_U64, OFF(resume_epoch), 1, UINT64_C(1) << 48, NULL, "E",
     "start at the first piece of epoch E (the feeders compute where it is for this run's shape): to continue a "
     "job whose trainers stopped at an epoch's end, with --reshape when they ran with another --workers or "
     "--replicas",
     NULL, NULL},
    {"reshape", 0, SL_OPT_FLAG, OFF(reshape), 0, 0, NULL, NULL,
     "ask the feeders to replace the job's cluster shape (--workers x --replicas) with this run's, once no trainer "
     "of the old shape is heard from: at an epoch's start (with --resume-epoch, or --restore of a checkpoint of "
     "another shape taken at an epoch's end), or mid-epoch (--restore of another shape's checkpoint taken at step t "
     "of epoch e: the rest of epoch e is cut into this shape's pieces, then its plan; not twice within one epoch)",
     NULL, NULL},
    {"elastic", 0, SL_OPT_STRING, OFF(elastic), 0, 0, NULL, "EP",
     "workers join and leave the running job at a step boundary (docs/trainer.md, \"Elastic workers\"): worker 0 "
     "binds EP and admits the changes one or two steps later (one change of shape per epoch: a second waits for the "
     "next epoch's start), the others connect to it; a SIGTERM asks a worker other than 0 to leave (a second one "
     "stops it). --model softmax or mlp, --mode mirrored, CPU replicas; every step's row-count all-reduce "
     "carries one float more (the decision)",
     NULL, NULL},
    {"join", 0, SL_OPT_STRING, OFF(join), 0, 0, NULL, "EP",
     "with --elastic: this process asks worker 0 to join the running job, with EP as its ring endpoint; it is "
     "admitted at the job's next step that allows a change (no --worker, --workers or --ring: worker 0 gives "
     "them)",
     NULL, NULL},
    {"elastic-max-workers", 0, SL_OPT_U32, OFF(elastic_max_workers), 1, 4096, "4096", "N",
     "with --elastic, on worker 0: refuse a join that would make more than N workers", NULL, NULL},
    {"cluster", 0, SL_OPT_STRING, OFF(cluster), 0, 0, NULL, "SPEC",
     "TF_CONFIG-style spec (JSON or a file): the 'feeder' list gives --connect, the task (chief/worker) --worker "
     "and --workers, the chief and 'worker' list the ring's endpoints, as --peers (TF_CONFIG in the environment "
     "works too)",
     NULL, NULL},
    {"cluster-from", 0, SL_OPT_STRING, OFF(cluster_from), 0, 0, NULL, "SOURCE",
     "slurm[:feeders=F,feeder-port=P,ring-port=Q] or tf_config: --connect, --worker, --workers and the ring (as "
     "--peers) from the environment, Slurm's task variables (the first F tasks are the feeders, default 1, on ports "
     "P+j, default 5555; task F+w is worker w, its ring endpoint on port Q+w, default 7000) or TF_CONFIG (checked "
     "strictly); refused with those options (docs/deploy.md)",
     NULL, NULL},
    SL_OPT_COMMON_ROWS(struct trainer_opts),
};

static const struct sl_opt_cmd cmd = {
    .prog = "sluice-trainer",
    .usage = "Usage: sluice-trainer --connect ADDR[,ADDR...] --job NAME [OPTION]...\n"
             "\n"
             "Receive a job's per-replica batches from its feeders (listed in feeder index\n"
             "order) as trainer worker W of N (--worker, --workers) with R replicas\n"
             "(--replicas).\n"
             "\n",
    .footer = "\n"
              "A summary line (JSON) goes to stdout at the end; logs go to stderr.\n"
              "\n" SL_EXIT_STATUS_HELP,
    .rows = opt_rows,
    .nrows = sizeof opt_rows / sizeof opt_rows[0],
};

static int usage_error(const char *fmt, ...) SL_PRINTF(1, 2);

static int usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("sluice-trainer: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return EXIT_USAGE;
}

/* A key file's error, printed as a usage error is: exit 1 when the file
 * is not there or cannot be read (SL_EIO), 2 when its content or mode is
 * refused (sl_exit.h; the feeder's rule for the same files). */
static int key_error(const struct sl_error *err, const char *opt)
{
    fprintf(stderr, "sluice-trainer: %s: %s\n", opt, err->msg);
    return err->code == SL_EIO ? SL_EXIT_DATA : SL_EXIT_USAGE;
}

/* A TF_CONFIG-style spec (--cluster, else TF_CONFIG) gives the feeders,
 * this worker's place and the ring (the chief and workers, as --peers
 * would). An explicit --cluster is always read, so a bad one is an error;
 * TF_CONFIG only for what the options leave open. */
static int read_cluster(struct trainer *t, int worker_set, int *from_peers, struct sl_error *err)
{
    struct trainer_opts *o = &t->o;
    const char *spec = o->cluster != NULL ? o->cluster : getenv("TF_CONFIG");
    if (spec == NULL || !(o->cluster != NULL || o->connect == NULL || !worker_set ||
                          (o->ring == NULL && o->peers == NULL && o->workers > 1)))
        return 0;
    struct sl_cluster cs;
    int rc = sl_cluster_parse(&cs, spec, err);
    if (rc != 0)
        return rc;
    if (!t->is_ps && (t->is_evaluator || strcmp(cs.task_type, "evaluator") == 0)) {
        /* train_and_evaluate's evaluator: no worker (its data comes from
         * --eval-connect; the spec gives the servers) */
        t->is_evaluator = 1;
    } else if (strcmp(cs.task_type, "ps") == 0 && !t->is_ps) {
        /* a TF_CONFIG task of type ps: parameter server task.index */
        t->is_ps = 1;
        o->ps_task = cs.task_index;
        if (!worker_set)
            o->workers = cs.workers;
        if (cs.workers == 0)
            rc = sl_error_set(err, SL_EINVAL,
                              "cluster spec: a 'ps' task needs the 'chief' or 'worker' list (the "
                              "workers it serves)");
    } else if (!worker_set)
        rc = sl_cluster_worker(&cs, &o->worker, &o->workers, err);
    if (rc == 0 && o->ps == NULL && cs.nps > 0)
        rc = sl_cluster_ps_list(&cs, &t->ps_eps, err);
    if (cs.nevaluators > 0)
        t->ps_evaluator = 1;
    if (rc == 0 && o->connect == NULL && cs.nfeeders > 0)
        rc = sl_cluster_feeder_list(&cs, &t->feeders, err);
    if (rc == 0 && o->ring == NULL && o->peers == NULL && cs.workers > 1 && cs.workers == o->workers) {
        rc = sl_cluster_worker_list(&cs, &t->ring_eps, err);
        *from_peers = 1;
    }
    /* the spec's key files stand for --curve-key and --curve-server-key
     * when the command line does not give them */
    if (rc == 0 && o->curve_key == NULL && cs.curve_key != NULL) {
        t->spec_curve_key = cs.curve_key;
        cs.curve_key = NULL;
        o->curve_key = t->spec_curve_key;
    }
    if (rc == 0 && o->curve_server_key == NULL && cs.curve_server_keys != NULL) {
        t->spec_curve_server = cs.curve_server_keys;
        cs.curve_server_keys = NULL;
        o->curve_server_key = t->spec_curve_server;
    }
    sl_cluster_free(&cs);
    return rc;
}

/* The options, the cluster spec and the endpoint lists, and every check
 * that needs nothing started: 0, or EXIT_USAGE with the reason printed. */
/* --curve-key and --curve-server-key: this worker's keys and the n
 * feeders' public keys into out[] ("feeder-J.pub" in a directory, named
 * by `prefix`). 0, or the usage error printed. */
static int load_server_keys(const char *arg, const char *prefix, size_t n, char out[][SL_CURVE_KEY_Z85 + 1],
                            const char **ptrs)
{
    struct sl_error err = {0};
    struct stat st;
    if (stat(arg, &st) != 0) {
        sl_error_sys(&err, errno, "stat(%s)", arg);
        return key_error(&err, "--curve-server-key");
    }
    for (size_t j = 0; j < n; j++) {
        char path[4200];
        if (S_ISDIR(st.st_mode))
            snprintf(path, sizeof path, "%s/%s-%zu.pub", arg, prefix, j);
        else
            snprintf(path, sizeof path, "%s", arg);
        if (sl_curve_load_public(path, out[j], &err) != 0)
            return key_error(&err, "--curve-server-key");
        ptrs[j] = out[j];
    }
    return 0;
}

static int load_curve(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    if (o->curve_key == NULL && o->curve_server_key == NULL)
        return 0;
    if (o->curve_key == NULL || o->curve_server_key == NULL)
        return usage_error("--curve-key (this trainer's secret key) and --curve-server-key (the feeders' public "
                           "keys) go together");
    if (sl_curve_load_secret(o->curve_key, &t->curve, &err) != 0)
        return key_error(&err, "--curve-key");
    t->have_curve = 1;
    int rc = load_server_keys(o->curve_server_key, "feeder", t->feeders.n, t->curve_server, t->curve_server_z85);
    if (rc == 0 && t->eval_feeders.n > 0)
        rc = load_server_keys(o->curve_server_key, "eval-feeder", t->eval_feeders.n, t->curve_eval, t->curve_eval_z85);
    return rc;
}

/* What this worker's ring listens on (worker 0's rendezvous too) when it
 * can be reached from other hosts and has no CURVE; NULL otherwise. */
const char *trainer_plaintext_listen(const struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    if (o->model == MODEL_NONE || o->workers < 2 || t->ring_eps.n != o->workers || t->have_curve)
        return NULL;
    const char *bind = t->ring_bind[0] != '\0' ? t->ring_bind : t->ring_eps.items[o->worker];
    return sl_endpoint_is_local(bind) ? NULL : bind;
}

/* Safe by default (issue #16): a worker whose ring endpoint can be reached
 * from other hosts listens there only with CURVE, or with --insecure (then
 * trainer_meet() warns). 0, or the usage error printed. */
static int check_listen(const struct trainer *t)
{
    const char *bind = trainer_plaintext_listen(t);
    if (bind == NULL || t->o.insecure)
        return 0;
    return usage_error("this worker's ring endpoint %s can be reached from other hosts, and without --curve-key "
                       "anyone who reaches it could join the job and read its gradients: give every worker the same "
                       "--curve-key (docs/security.md), or --insecure to listen in plaintext anyway",
                       bind);
}

/* What parameter server o.ps_task binds: its endpoint as given when that
 * is a loopback one (a spec naming 127.0.0.1 means this host only), else
 * every interface on its port, as the workers' ring does. */
void trainer_ps_bind_addr(const struct trainer *t, char *bind, size_t n)
{
    const char *ep = t->ps_eps.items[t->o.ps_task];
    if (sl_endpoint_is_local(ep))
        snprintf(bind, n, "%s", ep);
    else
        sl_cluster_bind_addr(ep, bind, n);
}

/* A parameter-server task (--ps-task, or a TF_CONFIG task of type ps):
 * the model flags, the servers and the workers; no feeder, no job. 0, or
 * EXIT_USAGE with the reason printed. */
static int configure_ps(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    if (o->model == MODEL_NONE)
        return usage_error("a parameter server needs the workers' model flags (--model softmax or mlp, --hidden, "
                           "--classes, --seed, --lr, --momentum)");
    if (t->ps_eps.n == 0)
        return usage_error("a parameter server needs the servers' list: --ps ADDRS or the cluster spec's 'ps' list");
    if (o->ps_task >= t->ps_eps.n)
        return usage_error("--ps-task %u: --ps names %zu parameter servers", o->ps_task, t->ps_eps.n);
    if (o->mode != MODE_PS)
        return usage_error("a parameter server serves --mode ps workers: give the workers' --mode ps");
    if (o->restore_step != 0 || (o->restore != NULL && o->restore[0] == '\0') ||
        (o->checkpoint != NULL && o->checkpoint[0] == '\0'))
        return usage_error(o->restore_step != 0 ? "--restore-step: a parameter server restores its newest checkpoint"
                                                : "--checkpoint and --restore: an empty directory name");
    if (o->checkpoint == NULL && (o->checkpoint_every != 1000 || o->keep != 3))
        return usage_error("--%s needs --checkpoint DIR", o->keep != 3 ? "keep" : "checkpoint-every");
    /* --elastic EP on a ps task: worker 0 (the coordinator on EP) may change
     * the workers it serves at an epoch boundary (its WORLD) */
    if (o->join != NULL)
        return usage_error("--join is a worker's: a parameter server is never one of the workers");
    if (o->elastic != NULL && o->elastic[0] == '\0')
        return usage_error("--elastic: an empty endpoint");
    /* with --elastic, --workers is the world's count: the first one, or
     * with --restore the one the checkpoint was taken in (checked there) */
    /* CURVE: the job's one trainer key pair (the workers' --curve-key);
     * the feeders' keys (--curve-server-key) are not a server's business */
    struct sl_error err = {0};
    if (o->curve_key != NULL) {
        if (sl_curve_load_secret(o->curve_key, &t->curve, &err) != 0)
            return usage_error("--curve-key: %s", err.msg);
        t->have_curve = 1;
    }
    char bind[SL_CLUSTER_MAX_ADDR];
    trainer_ps_bind_addr(t, bind, sizeof bind);
    if (!sl_endpoint_is_local(bind) && !o->insecure && !t->have_curve)
        return usage_error("parameter server %u would listen on %s, which other hosts can reach, and without "
                           "--curve-key anyone who reaches it could read and change the weights: give it the "
                           "workers' --curve-key (docs/security.md), or --insecure to listen in plaintext anyway",
                           o->ps_task, bind);
    return 0;
}

/* The evaluator task (--evaluator, or a TF_CONFIG task of type
 * evaluator): the workers' model flags, the servers, and its own
 * evaluation feeders; no training feeders. 0, or EXIT_USAGE with the
 * reason printed. */
static int configure_evaluator(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    if (o->mode != MODE_PS)
        return usage_error("the evaluator evaluates a --mode ps job: give the workers' --mode ps");
    if (o->model == MODEL_NONE)
        return usage_error("the evaluator needs the workers' model flags (--model softmax or mlp, --hidden, "
                           "--classes, --seed, --lr, --momentum)");
    if (t->ps_eps.n == 0)
        return usage_error("the evaluator reads the weights from the parameter servers: --ps ADDRS or the cluster "
                           "spec's 'ps' list");
    if (o->eval_connect == NULL)
        return usage_error("the evaluator evaluates on its own evaluation feeders: give --eval-connect ADDRS (and "
                           "--eval-job NAME)");
    if (o->eval_job == NULL && o->job == NULL)
        return usage_error("the evaluator needs the evaluation job's name: --eval-job NAME (or --job)");
    const char *const names[] = {"connect", "ring",    "peers",        "checkpoint",    "restore",
                                 "trace",   "metrics", "save-weights", "metrics-listen"};
    const char *const given[] = {o->connect, o->ring,    o->peers,        o->checkpoint,    o->restore,
                                 o->trace,   o->metrics, o->save_weights, o->metrics_listen};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (given[i] != NULL && i < 5)
            return usage_error("the evaluator trains nothing and meets no worker: drop --%s", names[i]);
        if (given[i] != NULL)
            return usage_error("the evaluator writes its summary and --predictions, nothing else: drop --%s "
                               "(the workers write the training's files)",
                               names[i]);
    }
    if (o->devspec.count > 0 && strcmp(o->devspec.kind, "cpu") != 0)
        return usage_error("the evaluator runs on CPU replicas (got --devices with GPUs)");
    uint32_t dev_replicas = (uint32_t)o->devspec.count;
    t->replicas = o->replicas ? o->replicas : dev_replicas ? dev_replicas : 1;
    if (dev_replicas && dev_replicas != t->replicas)
        return usage_error("--replicas %u disagrees with --devices (%u replicas)", t->replicas, dev_replicas);
    sl_cluster_list_free(&t->feeders); /* the spec's training feeders: not the evaluator's */
    if (sl_cluster_list_split(&t->eval_feeders, o->eval_connect, MAX_FEEDERS, 0, "--eval-connect", &err) != 0)
        return usage_error("%s", err.msg);
    return load_curve(t);
}

/* --elastic, --join, --elastic-max-workers: what an elastic job needs and
 * what it does not support yet. 0, or EXIT_USAGE with the reason printed. */
static int configure_elastic(struct trainer *t, uint64_t given)
{
    const struct trainer_opts *o = &t->o;
    if (o->elastic == NULL) {
        if (o->join != NULL || sl_opt_given(&cmd, given, "elastic-max-workers"))
            return usage_error("--%s needs --elastic EP (worker 0's coordinator endpoint)",
                               o->join != NULL ? "join" : "elastic-max-workers");
        return 0;
    }
    if (o->elastic[0] == '\0' || (o->join != NULL && o->join[0] == '\0'))
        return usage_error("--%s: an empty endpoint", o->elastic[0] == '\0' ? "elastic" : "join");
    if (o->join != NULL && strchr(o->join, ',') != NULL)
        return usage_error("--join takes this process's one ring endpoint, got '%s'", o->join);
    if (strlen(o->elastic) >= SL_CLUSTER_MAX_ADDR || (o->join != NULL && strlen(o->join) >= SL_CLUSTER_MAX_ADDR))
        return usage_error("--elastic and --join take endpoints of at most %d bytes", SL_CLUSTER_MAX_ADDR - 1);
    int ps = o->mode == MODE_PS; /* the servers hold the state; no ring (trainer/train_main_ps_elastic.c) */
    if (o->model == MODEL_NONE || (o->mode != MODE_MIRRORED && !ps) || t->gpu)
        return usage_error("--elastic trains a model on CPU replicas with --mode mirrored or ps (the ring or the "
                           "servers carry the new world's state): give --model softmax or mlp%s",
                           o->mode != MODE_MIRRORED && !ps ? ", not --mode tower"
                           : t->gpu                        ? ", not GPU --devices"
                                                           : "");
    static const char *const unsupported[] = {"resume-epoch", "eval-connect", "predictions"};
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (sl_opt_given(&cmd, given, unsupported[i]))
            return usage_error("--elastic does not support --%s yet (the world changes under it)", unsupported[i]);
    /* the ring's members checkpoint and restore (train_main_ckpt.c); the ps
     * mode's state is on its servers (their --checkpoint and --restore: a
     * worker's are refused below), and a restored job goes on in the world
     * they recorded: its count changes at an epoch boundary as it runs */
    if (ps && o->reshape)
        return usage_error("--elastic --mode ps: --reshape is not needed: the job restored goes on with the worker "
                           "count the parameter servers recorded, and joins and leaves change it at an epoch boundary");
    /* --curve-key (or the cluster spec's key, read by now): the coordinator
     * endpoint, the ring and the feeders' links all use CURVE; load_curve
     * checks the key files */
    int curve = o->curve_key != NULL;
    if (!sl_endpoint_is_local(o->elastic) && !o->insecure && !curve)
        return usage_error("--elastic %s is not a loopback or ipc endpoint, and without --curve-key the "
                           "coordinator's messages travel in plaintext: give every worker the job's --curve-key "
                           "(docs/security.md), or --insecure to accept that",
                           o->elastic);
    if (o->join != NULL) {
        if (sl_opt_given(&cmd, given, "worker") || sl_opt_given(&cmd, given, "workers") || t->ring_eps.n > 0)
            return usage_error("--join: worker 0 gives this process its index, the worker count and the ring's "
                               "endpoints: drop --worker, --workers, --ring and --peers");
        if (sl_opt_given(&cmd, given, "elastic-max-workers"))
            return usage_error("--elastic-max-workers is worker 0's (it admits the joins)");
        if (o->restore != NULL || o->reshape)
            return usage_error("--join: the joining worker takes the job's state and place from worker 0: drop "
                               "--%s (the job's members restore)",
                               o->restore != NULL ? "restore" : "reshape");
        if (!ps && !sl_endpoint_is_local(o->join) && !o->insecure && !curve) /* ps: a name, never bound */
            return usage_error("--join: this worker's ring endpoint %s can be reached from other hosts, and without "
                               "--curve-key the ring carries the weights in plaintext: give it the job's --curve-key "
                               "(docs/security.md), or --insecure to listen in plaintext anyway",
                               o->join);
        return 0;
    }
    if (ps && t->ring_eps.n > 0)
        return usage_error("--elastic --mode ps: the workers have no ring, drop --ring and --peers");
    if (!ps && t->ring_eps.n != o->workers)
        return usage_error("--elastic needs every worker's ring endpoint (--ring or --peers, one per worker, %u), got "
                           "%zu",
                           o->workers, t->ring_eps.n);
    if (o->workers > o->elastic_max_workers)
        return usage_error("--workers %u is more than --elastic-max-workers %u", o->workers, o->elastic_max_workers);
    for (size_t k = 0; k < t->ring_eps.n; k++)
        if (strcmp(t->ring_eps.items[k], o->elastic) == 0)
            return usage_error("--elastic %s is worker %zu's ring endpoint: give the coordinator its own", o->elastic,
                               k);
    return 0;
}

int trainer_configure(struct trainer *t, int argc, char **argv)
{
    struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    uint64_t given = 0;
    int rc = sl_opt_parse(&cmd, argc, argv, o, &given, &err), from_peers = 0;
    if (rc == 1) {
        t->done = 1;
        return 0;
    }
    if (rc != 0)
        return usage_error("%s\nTry 'sluice-trainer --help'", err.msg);
    /* --cluster-from: the spec made from the environment stands for
     * --cluster while the cluster is read (docs/deploy.md) */
    static const char *const from_env[] = {"cluster", "connect", "worker", "workers", "ring", "peers"};
    char *env_spec = NULL;
    if (o->cluster_from != NULL && sl_env_refuse_given(&cmd, given, o->cluster_from, from_env, 6, &err) != 0)
        return usage_error("%s", err.msg);
    if (o->cluster_from != NULL && sl_env_cluster_spec(&env_spec, o->cluster_from, NULL, &err) != 0)
        return usage_error("--cluster-from %s: %s", o->cluster_from, err.msg);
    if (env_spec != NULL)
        o->cluster = env_spec;
    if (o->cluster != NULL && o->connect != NULL)
        return usage_error("--cluster gives the feeders (its 'feeder' list): give it or --connect, not both");
    int worker_set = sl_opt_given(&cmd, given, "worker") || sl_opt_given(&cmd, given, "workers");
    t->is_ps = sl_opt_given(&cmd, given, "ps-task");
    t->is_evaluator = o->evaluator;
    t->ps_evaluator = o->ps_evaluator;
    if (t->is_ps && t->is_evaluator)
        return usage_error("a task is a parameter server (--ps-task) or the evaluator (--evaluator), not both");
    rc = read_cluster(t, worker_set, &from_peers, &err);
    if (env_spec != NULL) { /* read; o->cluster is not used again */
        sl_free(env_spec);
        o->cluster = NULL;
    }
    if (rc != 0)
        return usage_error("%s", err.msg);
    if (o->ps_evaluator && !t->is_ps)
        return usage_error("--ps-evaluator tells a parameter server (--ps-task) that the job has an evaluator");
    if (o->ps != NULL &&
        sl_cluster_list_split(&t->ps_eps, o->ps, TRAIN_PS_MAX_SERVERS, SL_CLUSTER_BARE_TCP, "--ps", &err) != 0)
        return usage_error("%s", err.msg);
    if (t->is_ps)
        return configure_ps(t);
    if (t->is_evaluator)
        return configure_evaluator(t);
    if (o->mode != MODE_PS && (t->ps_eps.n > 0 && o->ps != NULL))
        return usage_error("--ps names parameter servers: give --mode ps too (or --ps-task I to be one)");
    if ((o->connect == NULL && t->feeders.n == 0) || o->job == NULL)
        return usage_error("--connect and --job are required\nTry 'sluice-trainer --help'");
    if (o->connect != NULL && sl_cluster_list_split(&t->feeders, o->connect, MAX_FEEDERS, 0, "--connect", &err) != 0)
        return usage_error("%s", err.msg);
    if (o->peers != NULL && o->ring != NULL)
        return usage_error("give --ring or --peers, not both");
    /* --peers: bare host:port is tcp, and this worker binds its port on
     * every interface */
    if (o->peers != NULL &&
        sl_cluster_list_split(&t->ring_eps, o->peers, MAX_WORKERS, SL_CLUSTER_BARE_TCP, "--peers", &err) != 0)
        return usage_error("%s", err.msg);
    if (o->ring != NULL && sl_cluster_list_split(&t->ring_eps, o->ring, MAX_WORKERS, 0, "--ring", &err) != 0)
        return usage_error("%s", err.msg);
    if (o->peers != NULL && t->ring_eps.n != o->workers)
        return usage_error("--peers needs one address per worker (%u), got %zu", o->workers, t->ring_eps.n);
    if ((o->peers != NULL || from_peers) && o->worker < t->ring_eps.n)
        sl_cluster_bind_addr(t->ring_eps.items[o->worker], t->ring_bind, sizeof t->ring_bind);
    if (o->eval_connect != NULL &&
        sl_cluster_list_split(&t->eval_feeders, o->eval_connect, MAX_FEEDERS, 0, "--eval-connect", &err) != 0)
        return usage_error("%s", err.msg);
    /* GPU replicas train with a model (the spec parser already refused GPU
     * lists in builds without CUDA); tower mode stays on CPU replicas */
    t->gpu = o->devspec.count > 0 && strcmp(o->devspec.kind, "cpu") != 0 && o->model != MODEL_NONE;
    if (t->gpu && o->mode == MODE_TOWER)
        return usage_error("--mode tower runs on CPU replicas only (got --devices with GPUs)");
    uint32_t dev_replicas = (uint32_t)o->devspec.count;
    t->replicas = o->replicas ? o->replicas : dev_replicas ? dev_replicas : 1;
    if (dev_replicas && dev_replicas != t->replicas)
        return usage_error("--replicas %u disagrees with --devices (%u replicas)", t->replicas, dev_replicas);
    if ((rc = configure_elastic(t, given)) != 0)
        return rc;
    if (o->worker >= o->workers)
        return usage_error("--worker %u must be below --workers %u", o->worker, o->workers);
    if (o->mode == MODE_TOWER && o->workers > 1) /* replicate_model_fn is single-machine */
        return usage_error("--mode tower runs on one worker (got --workers %u)", o->workers);
    if (o->mode == MODE_PS) {
        /* the workers meet only at the parameter servers: no ring */
        if (o->model == MODEL_NONE)
            return usage_error("--mode ps trains a model: give --model softmax or mlp");
        if (t->ps_eps.n == 0)
            return usage_error("--mode ps needs the parameter servers: --ps ADDRS or the cluster spec's 'ps' list");
        if (o->ring != NULL || o->peers != NULL)
            return usage_error("--mode ps has no ring: the workers meet only at the parameter servers (drop --%s)",
                               o->ring != NULL ? "ring" : "peers");
        if (o->checkpoint != NULL || o->restore != NULL)
            return usage_error("--mode ps keeps the weights and the optimizer state on the parameter servers: give "
                               "--checkpoint and --restore to the ps tasks (a worker started again resumes where "
                               "the servers recorded by itself)");
        if (o->predictions != NULL)
            return usage_error("--predictions in --mode ps are the evaluator's (--evaluator, or a TF_CONFIG task of "
                               "type 'evaluator'): the workers have no ring to gather them over");
        sl_cluster_list_free(&t->ring_eps);
        t->ring_bind[0] = '\0';
    } else if (o->model != MODEL_NONE && o->workers > 1 && t->ring_eps.n != o->workers)
        return usage_error("--ring needs one endpoint per worker (%u), got %zu", o->workers, t->ring_eps.n);
    static const char *const need_ckpt[] = {"checkpoint-every", "keep"};
    for (int i = 0; i < 2; i++)
        if (o->checkpoint == NULL && sl_opt_given(&cmd, given, need_ckpt[i]))
            return usage_error("--%s needs --checkpoint DIR", need_ckpt[i]);
    t->restoring = o->restore != NULL;
    t->restore_step_given = sl_opt_given(&cmd, given, "restore-step");
    if (t->restore_step_given && !t->restoring)
        return usage_error("--restore-step needs --restore DIR");
    if (o->resume_epoch != 0 && (t->restoring || o->mode == MODE_PS))
        return usage_error("--resume-epoch: %s", t->restoring
                                                     ? "--restore's checkpoint gives where to continue"
                                                     : "--mode ps resumes where the parameter servers recorded");
    t->resume_epoch = o->resume_epoch;
    if ((o->checkpoint != NULL && o->checkpoint[0] == '\0') || (o->restore != NULL && o->restore[0] == '\0'))
        return usage_error("--%s: an empty directory name",
                           o->restore != NULL && o->restore[0] == '\0' ? "restore" : "checkpoint");
    if ((o->checkpoint != NULL || t->restoring) && strlen(o->job) > TRAIN_CKPT_MAX_JOB)
        return usage_error("--checkpoint and --restore take job names of at most %d bytes", TRAIN_CKPT_MAX_JOB);
    if ((o->checkpoint != NULL || t->restoring) && t->gpu)
        return usage_error("--checkpoint and --restore need CPU replicas (the GPU replicas' optimizer state stays "
                           "on the devices)");
    rc = load_curve(t);
    return rc != 0 ? rc : check_listen(t);
}
