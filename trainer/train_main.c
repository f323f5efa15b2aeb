/* sluice-trainer: a trainer worker. With --model none it only consumes the
 * job's pieces (the input benchmark and the verification harness): every
 * piece can be written to a trace, one JSON line each, with the values of an
 * int64 feature (default `id`), and a summary line ends the run.
 *
 * With --model softmax|mlp it trains (train_loop.h) on CPU replicas, or on
 * GPU replicas (--devices gpu:..., builds with CUDA), receiving step s+1
 * while step s runs.
 *
 * main is a sequence: configure (the option table `opt_rows`, the cluster spec,
 * the endpoint lists; every usage error exits 2 before anything starts),
 * meet (the rendezvous), start (feeders, model, ring), run (the training
 * loop), evaluate, report (the summary); one cleanup ladder undoes what
 * was set up.
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <math.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_buf.h"
#include "sl_clock.h"
#include "sl_cluster.h"
#include "sl_curve.h"
#include "sl_env.h"
#include "sl_exit.h"
#include "sl_http_metrics.h"
#include "sl_json.h"
#include "sl_log.h"
#include "sl_opt.h"
#include "sl_output.h"
#include "sl_prom.h"
#include "sl_thread.h"
#include "train_ckpt.h"
#include "train_client.h"
#include "train_device.h"
#include "train_expose.h"
#include "train_loop.h"
#include "train_metrics.h"
#include "train_mirror.h"
#include "train_ps.h"
#include "train_ps_ckpt.h"
#include "train_ps_eval.h"
#include "train_rendezvous.h"

#define EXIT_USAGE 2
#define MAX_FEEDERS 64
#define MAX_WORKERS 65536

/* The stop signal's number (SIGINT, SIGTERM), 0 until one comes: every
 * wait checks it (the client's, the rendezvous', the ring's) and ends
 * within 250 ms; the trainer then exits 128 + the signal's number. */
static volatile sig_atomic_t stop_flag;

static void on_stop(int sig)
{
    stop_flag = sig;
}

/* ---- options ---- */

enum { MODEL_NONE, MODEL_SOFTMAX, MODEL_MLP };
enum { MODE_MIRRORED, MODE_TOWER, MODE_PS }; /* --mode */
static const char *const mode_names[] = {"mirrored", "tower", "ps"};
static const char *const model_names[] = {"none", "softmax", "mlp"};
enum { PROGRESS_AUTO, PROGRESS_ON, PROGRESS_OFF };

/* The command line, filled from `rows` once in main, then read-only. */
struct trainer_opts {
    const char *connect, *job, *cluster, *ring, *peers, *input, *label, *hidden;
    const char *trace, *feature, *save_weights, *metrics, *predictions, *eval_connect, *eval_job;
    const char *cluster_from; /* --cluster-from */
    const char *ps;           /* --ps ADDRS */
    uint32_t ps_task;         /* --ps-task I */
    uint32_t ps_worker_timeout_s;
    int ps_placement;         /* --ps-placement: enum train_ps_placement */
    int evaluator, ps_evaluator; /* --evaluator, --ps-evaluator */
    const char *metrics_listen; /* --metrics-listen HOST:PORT */
    const char *checkpoint, *restore; /* --checkpoint DIR, --restore DIR */
    const char *curve_key, *curve_server_key; /* --curve-key FILE, --curve-server-key FILE|DIR */
    int insecure;                             /* --insecure */
    int check_numerics;                       /* --check-numerics: CHECK_ON, CHECK_FINITE, CHECK_OFF */
    uint32_t checkpoint_every, keep;
    uint64_t restore_step;
    uint32_t worker, workers, replicas, credits, heartbeat_ms, timeout_ms, reconnect_s, seed, log_every, classes,
        hash_every, rendezvous_timeout_s, connect_timeout_s;
    double lr, momentum, takeover_s;
    double step_ms; /* --step-ms: a stand-in for a model's compute per step */
    int model, mode, progress, quiet, no_shm, log_level, log_format;
    struct train_device_spec devspec; /* --devices (count 0: not given) */
    int nhidden, hidden_sizes[TRAIN_MODEL_MAX_HIDDEN]; /* --hidden */
};

enum { CHECK_ON, CHECK_FINITE, CHECK_OFF };

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
     "with CUDA); without it, one CPU replica (or --replicas)", NULL, set_devices},
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
     "H2D GB/s, weights hash", NULL, NULL},
    {"metrics-listen", 0, SL_OPT_STRING, OFF(metrics_listen), 0, 0, NULL, "HOST:PORT",
     "serve the figures live for Prometheus at http://HOST:PORT/metrics (e.g. 127.0.0.1:9465; port 0: any free "
     "port, logged; docs/operations.md lists the metrics)", NULL, NULL},
    {"predictions", 0, SL_OPT_STRING, OFF(predictions), 0, 0, NULL, "FILE",
     "with --eval-*: every evaluated element's prediction, gathered from all workers by its --trace-feature id "
     "(ids 0..N-1, each once) and written by worker 0 in id order, one JSON line each (CPU replicas)", NULL, NULL},
    {"eval-connect", 0, SL_OPT_STRING, OFF(eval_connect), 0, 0, NULL, "ADDRS",
     "after training, the accuracy of the final weights on the data these feeders serve (summed over workers)",
     NULL, NULL},
    {"eval-job", 0, SL_OPT_STRING, OFF(eval_job), 0, 0, NULL, "NAME", "the evaluation job's name (default: --job)",
     NULL, NULL},
    {"ring", 0, SL_OPT_STRING, OFF(ring), 0, 0, NULL, "ADDRS",
     "with --workers > 1: one endpoint per worker, in worker order; worker w binds its own (gradient all-reduce)",
     NULL, NULL},
    {"peers", 0, SL_OPT_STRING, OFF(peers), 0, 0, NULL, "HOST:PORT,...",
     "the same as worker addresses (TF_CONFIG style): worker w binds every interface on its port", NULL, NULL},
    {"rendezvous-timeout", 0, SL_OPT_U32, OFF(rendezvous_timeout_s), 1, 86400, "60", "S",
     "with a model and --workers > 1, the workers meet at worker 0's endpoint first and check that they agree "
     "(job, workers, model, replicas); fail naming the worker missing after S seconds", NULL, NULL},
    {"mode", 0, SL_OPT_CHOICE, OFF(mode), 0, 0, "mirrored", "M",
     "mirrored (a copy of the weights per replica), tower (replicate_model_fn: one copy, towers; one worker) or "
     "ps (ParameterServerStrategy: the weights live on the --ps servers; each worker pulls, trains its R replicas "
     "in sync and pushes its gradient without waiting for the other workers; CPU replicas)",
     "mirrored|tower|ps", NULL},
    {"ps", 0, SL_OPT_STRING, OFF(ps), 0, 0, NULL, "ADDRS",
     "the parameter servers (--mode ps, and a ps task), server 0 first: endpoints or bare HOST:PORT (tcp); or "
     "the cluster spec's 'ps' list", NULL, NULL},
    {"ps-task", 0, SL_OPT_U32, OFF(ps_task), 0, TRAIN_PS_MAX_SERVERS - 1, NULL, "I",
     "run as parameter server I of --ps (as a TF_CONFIG task of type 'ps' does): serve its share of the model "
     "given by the same model flags as the workers' until every one of --workers is done", NULL, NULL},
    {"ps-placement", 0, SL_OPT_CHOICE, OFF(ps_placement), 0, 0, "round-robin", NULL,
     "how the model's variables go to the parameter servers: round-robin in creation order (TensorFlow's) or "
     "balanced by size (the largest first, to the least loaded); the same on every process", "round-robin|balanced",
     NULL},
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
     "from the start); the server serves the others to their end and exits 1 naming it", NULL, NULL},
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
     "connections alive meanwhile: how an input pipeline keeps up with a step of that length", NULL, NULL},
    {"credits", 0, SL_OPT_U32, OFF(credits), 1, 1 << 20, NULL, "N",
     "pieces each feeder may have in flight (default max(64, 4R))", NULL, NULL},
    {"trace", 0, SL_OPT_STRING, OFF(trace), 0, 0, NULL, "FILE", "one JSON line per piece, then a summary line",
     NULL, NULL},
    {"trace-feature", 0, SL_OPT_STRING, OFF(feature), 0, 0, "id", "NAME",
     "tensor whose values the trace lists as \"ids\": int64 values, or bytes as strings (text lines)", NULL, NULL},
    {"heartbeat-ms", 0, SL_OPT_U32, OFF(heartbeat_ms), 10, 600000, NULL, "N", "heartbeat interval (default 1000)",
     NULL, NULL},
    {"timeout-ms", 0, SL_OPT_U32, OFF(timeout_ms), 50, 3600000, NULL, "N",
     "fail when a feeder is silent this long (default 10000); one whose connection closes fails the trainer at "
     "once", NULL, NULL},
    {"connect-timeout", 0, SL_OPT_U32, OFF(connect_timeout_s), 1, 86400, "60", "S",
     "fail when a feeder has not answered HELLO within S seconds; one still scanning its files answers at once "
     "and is waited for as long as it keeps answering (S seconds between answers); also how long the workers' "
     "ring waits for every worker to join", NULL, NULL},
    {"reconnect-s", 0, SL_OPT_U32, OFF(reconnect_s), 0, 86400, "0", "S",
     "instead, reconnect to a lost feeder and resume where it left off, waiting up to S s for it (or a restarted "
     "feeder on the same address) to answer (0: fail, or with two or more feeders wait --takeover-s and hand "
     "its share to a survivor)", NULL, NULL},
    {"takeover-s", 0, SL_OPT_DOUBLE, OFF(takeover_s), 0, 3600, "3", "S",
     "a feeder lost (its connection closed, silent past --timeout-ms, or stopped) and not back within S s has "
     "its share of the stream served by a surviving feeder, from the first piece this trainer lacks: nothing "
     "lost, nothing twice, the order unchanged (0: off; with every feeder lost the trainer fails after S s, or "
     "--reconnect-s if longer)", NULL, NULL},
    {"curve-key", 0, SL_OPT_STRING, OFF(curve_key), 0, 0, NULL, "FILE",
     "this trainer's CURVE secret key (NAME.key from 'sluice-feeder keygen NAME'; mode 0600): the feeders' "
     "connections are encrypted, and each feeder lets in only keys on its --curve-allow list (docs/security.md)",
     NULL, NULL},
    {"curve-server-key", 0, SL_OPT_STRING, OFF(curve_server_key), 0, 0, NULL, "FILE|DIR",
     "with --curve-key: the feeders' public keys: one NAME.pub file for every feeder, or a directory holding "
     "feeder j's key at DIR/feeder-J.pub (and --eval-connect's feeder j's at DIR/eval-feeder-J.pub)", NULL,
     NULL},
    {"insecure", 0, SL_OPT_FLAG, OFF(insecure), 0, 0, NULL, NULL,
     "let this worker's ring (and worker 0's rendezvous) listen in plaintext on an address other hosts can reach; "
     "without it such a worker refuses to start unless it has --curve-key (the workers' links are then encrypted "
     "and let in only holders of the same key)", NULL, NULL},
    {"no-shm", 0, SL_OPT_FLAG, OFF(no_shm), 0, 0, NULL, NULL,
     "never map a feeder's shared piece memory: pieces always come by copy (by default a feeder on this host "
     "hands them over in shared memory; docs/protocol.md)", NULL, NULL},
    {"checkpoint", 0, SL_OPT_STRING, OFF(checkpoint), 0, 0, NULL, "DIR",
     "write checkpoints into DIR (made if absent): this worker's weights, optimizer state and input position, "
     "one file per step (ckpt-STEP.wWofN), written atomically (docs/trainer.md); on a ps task, its variables, momentum, "
     "global step and each worker's input position (ckpt-VERSION.wPofN)", NULL, NULL},
    {"checkpoint-every", 0, SL_OPT_U32, OFF(checkpoint_every), 0, UINT32_MAX, "1000", "N",
     "with --checkpoint: every N steps (counted over all epochs) and after each epoch's last step (0: after each "
     "epoch's last step only); on a ps task, every N pushes it applied (0: only when stopped)", NULL, NULL},
    {"keep", 0, SL_OPT_U32, OFF(keep), 1, 1000000, "3", "K", "with --checkpoint: keep this worker's K newest "
     "checkpoints, remove older ones", NULL, NULL},
    {"restore", 0, SL_OPT_STRING, OFF(restore), 0, 0, NULL, "DIR",
     "continue from this worker's newest checkpoint in DIR: the weights, optimizer state and input position; a "
     "damaged or mismatched one is refused, naming the file (the workers must agree on the step); on a ps task, its "
     "newest checkpoint, the workers resuming where it recorded them", NULL, NULL},
    {"restore-step", 0, SL_OPT_U64, OFF(restore_step), 0, UINT64_C(1) << 48, NULL, "S",
     "with --restore: continue from step S's checkpoint instead of the newest (an explicit choice of an older one)",
     NULL, NULL},
    {"cluster", 0, SL_OPT_STRING, OFF(cluster), 0, 0, NULL, "SPEC",
     "TF_CONFIG-style spec (JSON or a file): the 'feeder' list gives --connect, the task (chief/worker) --worker "
     "and --workers, the chief and 'worker' list the ring's endpoints, as --peers (TF_CONFIG in the environment "
     "works too)", NULL, NULL},
    {"cluster-from", 0, SL_OPT_STRING, OFF(cluster_from), 0, 0, NULL, "SOURCE",
     "slurm[:feeders=F,feeder-port=P,ring-port=Q] or tf_config: --connect, --worker, --workers and the ring (as "
     "--peers) from the environment, Slurm's task variables (the first F tasks are the feeders, default 1, on ports "
     "P+j, default 5555; task F+w is worker w, its ring endpoint on port Q+w, default 7000) or TF_CONFIG (checked "
     "strictly); refused with those options (docs/deploy.md)", NULL, NULL},
    {"quiet", 'q', SL_OPT_FLAG, OFF(quiet), 0, 0, NULL, NULL, "warnings and errors only (--log-level warning)", NULL,
     NULL},
    {"log-level", 0, SL_OPT_CHOICE, OFF(log_level), 0, 0, "info", NULL, "the least level logged",
     SL_LOG_LEVEL_CHOICES, NULL},
    {"log-format", 0, SL_OPT_CHOICE, OFF(log_format), 0, 0, "text", NULL,
     "log lines as text (an RFC 3339 time, the program, the level, the message) or as one JSON object each",
     SL_LOG_FORMAT_CHOICES, NULL},
    {"help", 'h', SL_OPT_HELP, 0, 0, 0, NULL, NULL, "this help", NULL, NULL},
    {"version", 0, SL_OPT_VERSION, 0, 0, 0, NULL, NULL,
     "the version, the commit it was built from, the build type and optional parts", NULL, NULL},
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


/* The weights as a NumPy .npy file (version 1.0, little-endian float32,
 * one flat vector in the model's parameter order: W1 [in][out], b1, W2,
 * b2, ...), written through sl_output: an exclusive temporary renamed over
 * a regular file, a device or FIFO written in place. */
static int save_weights(const char *path, const float *p, size_t n, struct sl_error *err)
{
    char header[128];
    int hl = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu,), }", n);
    size_t total = 10 + (size_t)hl + 1;
    size_t pad = (64 - total % 64) % 64;
    struct sl_output *out;
    int rc = sl_output_open(&out, path, SL_OUTPUT_FSYNC, err);
    if (rc != 0)
        return sl_error_prefix(err, "--save-weights: ");
    FILE *f = sl_output_stream(out);
    uint16_t hlen = (uint16_t)(hl + pad + 1);
    unsigned char magic[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                               (unsigned char)(hlen >> 8)};
    int ok = fwrite(magic, 1, 10, f) == 10 && fwrite(header, 1, (size_t)hl, f) == (size_t)hl;
    for (size_t i = 0; ok && i < pad; i++)
        ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF && fwrite(p, sizeof *p, n, f) == n; /* x86-64: little-endian */
    if (!ok) {
        rc = sl_error_sys(err, errno ? errno : EIO, "--save-weights: write(%s)", path);
        sl_output_abort(out);
        return rc;
    }
    if ((rc = sl_output_commit(out, err)) != 0)
        return sl_error_prefix(err, "--save-weights: ");
    return 0;
}

static int trace_piece(struct sl_buf *b, const struct train_piece *p, const char *feature, FILE *out)
{
    sl_buf_reset(b);
    int rc = sl_buf_printf(b,
                           "{\"worker\":%u,\"replica\":%u,\"epoch\":%" PRIu64 ",\"step\":%" PRIu64 ",\"seq\":%" PRIu64
                           ",\"size\":%u,\"ids\":[",
                           p->worker, p->replica, p->epoch, p->step, p->seq, p->rows);
    size_t flen = strlen(feature);
    for (size_t i = 0; rc == 0 && i < p->ntensors; i++) {
        const struct train_tensor *t = &p->t[i];
        if (strcmp(t->name, feature) != 0)
            continue;
        if (t->dtype == SL_WIRE_INT64) {
            uint64_t n = t->bytes / 8;
            for (uint64_t k = 0; rc == 0 && k < n; k++) {
                int64_t v;
                memcpy(&v, (const uint8_t *)t->data + 8 * k, 8);
                rc = sl_buf_printf(b, "%s%" PRId64, k ? "," : "", v);
            }
        } else if (t->dtype == SL_WIRE_BYTES) {
            /* strings: their boundaries are in the companion NAME.offsets */
            const struct train_tensor *o = NULL;
            for (size_t k = 0; k < p->ntensors; k++)
                if (strncmp(p->t[k].name, feature, flen) == 0 && strcmp(p->t[k].name + flen, ".offsets") == 0)
                    o = &p->t[k];
            uint64_t n = o != NULL && o->bytes >= 8 ? o->bytes / 8 - 1 : 0;
            for (uint64_t k = 0; rc == 0 && k < n; k++) {
                uint64_t lo, hi;
                memcpy(&lo, (const uint8_t *)o->data + 8 * k, 8);
                memcpy(&hi, (const uint8_t *)o->data + 8 * (k + 1), 8);
                if (lo > hi || hi > t->bytes) /* offsets are data: check before use */
                    return -1;
                rc = k ? sl_buf_putc(b, ',') : 0;
                if (rc == 0)
                    rc = sl_json_string(b, (const char *)t->data + lo, (size_t)(hi - lo));
            }
        }
        break;
    }
    if (rc == 0)
        rc = sl_buf_puts(b, "]}\n");
    if (rc != 0 || fwrite(b->data, 1, b->len, out) != b->len)
        return -1;
    return 0;
}

/* --trace-feature against the job's schema (the WELCOME's tensors): the
 * trace lists int64 values, or bytes as strings cut by NAME.offsets; any
 * other name would give "ids": [] on every line. */
static int check_trace_feature(const struct sl_wire_welcome *w, const char *feature, struct sl_error *err)
{
    size_t flen = strlen(feature);
    const struct sl_wire_field *f = NULL, *offsets = NULL;
    for (size_t i = 0; i < w->ntensors; i++) {
        const struct sl_wire_field *x = &w->fields[i];
        if (x->name_len == flen && memcmp(x->name, feature, flen) == 0)
            f = x;
        else if (x->name_len == flen + 8 && memcmp(x->name, feature, flen) == 0 &&
                 memcmp(x->name + flen, ".offsets", 8) == 0)
            offsets = x;
    }
    if (f == NULL) {
        char names[1024] = "";
        size_t used = 0;
        for (size_t i = 0; i < w->ntensors && used + 1 < sizeof names; i++) {
            int n = snprintf(names + used, sizeof names - used, "%s%.*s (%s)", i ? ", " : "", (int)w->fields[i].name_len,
                             w->fields[i].name, sl_wire_dtype_name(w->fields[i].dtype));
            if (n < 0)
                break;
            used += (size_t)n < sizeof names - used ? (size_t)n : sizeof names - used - 1;
        }
        return sl_error_set(err, SL_EINVAL, "--trace-feature: the job's pieces have no tensor '%s' (they have: %s)",
                            feature, w->ntensors ? names : "none");
    }
    if (f->dtype == SL_WIRE_BYTES && offsets == NULL)
        return sl_error_set(err, SL_EINVAL, "--trace-feature: bytes tensor '%s' comes without '%s.offsets'", feature,
                            feature);
    if (f->dtype != SL_WIRE_INT64 && f->dtype != SL_WIRE_BYTES)
        return sl_error_set(err, SL_EINVAL, "--trace-feature: tensor '%s' is %s; the trace lists int64 values or bytes "
                            "as strings", feature, sl_wire_dtype_name(f->dtype));
    return 0;
}

/* --predictions: each evaluated element's (id, label) kept as its piece
 * arrives (look-ahead: two steps' worth, by slot), joined with the
 * replicas' predictions after the step runs, then gathered over workers by
 * id with the ring's sum: per id a count (must end as 1), the prediction
 * and the label, all small integers, exact in float32. */
struct gather {
    int64_t *ids[2], *labels[2]; /* [slot]: the step's rows, replica by replica */
    uint32_t rows[2][64];        /* [slot][replica] */
    size_t cap[2];
    int64_t *out;                /* (id, prediction, label) triples of this worker */
    size_t n, out_cap;
};

static const struct train_tensor *find_int64(const struct train_piece *p, const char *name)
{
    for (size_t i = 0; i < p->ntensors; i++)
        if (strcmp(p->t[i].name, name) == 0 && p->t[i].dtype == SL_WIRE_INT64 && p->t[i].bytes == 8ull * p->rows)
            return &p->t[i];
    return NULL;
}

static int gather_keep(struct gather *g, int slot, const struct train_piece *pieces, uint32_t replicas,
                       const char *id_name, const char *label_name, struct sl_error *err)
{
    size_t total = 0;
    for (uint32_t r = 0; r < replicas && r < 64; r++)
        total += pieces[r].rows;
    if (total > g->cap[slot]) {
        int64_t *a = sl_realloc(g->ids[slot], total * sizeof *a), *b = a ? sl_realloc(g->labels[slot], total * sizeof *b) : NULL;
        if (a != NULL)
            g->ids[slot] = a;
        if (b == NULL)
            return sl_error_set(err, SL_ENOMEM, "--predictions: out of memory");
        g->labels[slot] = b;
        g->cap[slot] = total;
    }
    size_t k = 0;
    for (uint32_t r = 0; r < replicas && r < 64; r++) {
        const struct train_piece *p = &pieces[r];
        g->rows[slot][r] = p->rows;
        if (p->rows == 0)
            continue;
        const struct train_tensor *id = find_int64(p, id_name), *lb = find_int64(p, label_name);
        if (id == NULL || lb == NULL)
            return sl_error_set(err, SL_EINVAL, "--predictions: the evaluation pieces need int64 scalars '%s' and '%s'",
                                id_name, label_name);
        memcpy(g->ids[slot] + k, id->data, 8ull * p->rows);
        memcpy(g->labels[slot] + k, lb->data, 8ull * p->rows);
        k += p->rows;
    }
    return 0;
}

static int gather_add(struct gather *g, int slot, const struct train_loop *loop, uint32_t replicas,
                      struct sl_error *err)
{
    /* tower mode re-splits a step's rows into equal towers (in order), so
     * the replicas' predictions match the kept rows as a whole */
    size_t k = 0, kept = 0, predicted = 0;
    for (uint32_t r = 0; r < replicas && r < 64; r++) {
        uint32_t n;
        const int64_t *pred = train_loop_eval_predictions(loop, r, &n);
        kept += g->rows[slot][r];
        predicted += n;
        if (n > 0 && pred == NULL)
            return sl_error_set(err, SL_EINVAL, "--predictions: replica %u has no predictions", r);
    }
    if (predicted != kept)
        return sl_error_set(err, SL_EINVAL, "--predictions: the replicas predicted %zu rows of %zu", predicted, kept);
    for (uint32_t r = 0; r < replicas && r < 64; r++) {
        uint32_t n;
        const int64_t *pred = train_loop_eval_predictions(loop, r, &n);
        if (g->n + n > g->out_cap) {
            size_t cap = g->out_cap ? g->out_cap * 2 : 4096;
            while (cap < g->n + n)
                cap *= 2;
            int64_t *o = sl_realloc(g->out, cap * 3 * sizeof *o);
            if (o == NULL)
                return sl_error_set(err, SL_ENOMEM, "--predictions: out of memory");
            g->out = o;
            g->out_cap = cap;
        }
        for (uint32_t i = 0; i < n; i++, k++, g->n++) {
            g->out[3 * g->n] = g->ids[slot][k];
            g->out[3 * g->n + 1] = pred[i];
            g->out[3 * g->n + 2] = g->labels[slot][k];
        }
    }
    return 0;
}

/* Every worker takes part (the ring's sum); worker 0 writes the file. */
static int gather_write(const struct gather *g, struct train_loop *loop, uint32_t worker, double rows, double correct,
                        const char *path, struct sl_error *err)
{
    if (rows >= 16777216.0)
        return sl_error_set(err, SL_EINVAL, "--predictions: %.0f elements, more than float32 counts exactly", rows);
    size_t N = (size_t)rows;
    float *v = sl_calloc(3 * N + 1, sizeof *v);
    if (v == NULL)
        return sl_error_set(err, SL_ENOMEM, "--predictions: out of memory for %zu elements", N);
    int rc = 0;
    float bad = 0; /* ids outside 0..N-1 on this worker (summed, so every worker fails alike) */
    for (size_t i = 0; i < g->n; i++) {
        int64_t id = g->out[3 * i], pred = g->out[3 * i + 1], label = g->out[3 * i + 2];
        if (id < 0 || (uint64_t)id >= N || pred < 0 || pred >= 16777216 || label < 0 || label >= 16777216) {
            bad += 1;
            continue;
        }
        v[id] += 1;
        v[N + (size_t)id] += (float)pred;
        v[2 * N + (size_t)id] += (float)label;
    }
    v[3 * N] = bad;
    if ((rc = train_loop_sum(loop, v, 3 * N + 1, err)) != 0) {
        sl_free(v);
        return rc;
    }
    if (v[3 * N] != 0)
        rc = sl_error_set(err, SL_EINVAL, "--predictions: %.0f elements have an id outside 0..%zu (or a label or "
                          "prediction out of range)", (double)v[3 * N], N - 1);
    for (size_t i = 0; rc == 0 && i < N; i++)
        if (v[i] != 1)
            rc = sl_error_set(err, SL_EINVAL, "--predictions: element id %zu was evaluated %.0f times (ids must be "
                              "0..N-1, each once)", i, (double)v[i]);
    struct sl_output *out = NULL;
    FILE *f = NULL;
    if (rc == 0 && worker == 0) {
        if ((rc = sl_output_open(&out, path, 0, err)) != 0)
            sl_error_prefix(err, "--predictions: ");
        else
            f = sl_output_stream(out);
    }
    double right = 0;
    for (size_t i = 0; rc == 0 && i < N; i++) {
        right += v[N + i] == v[2 * N + i];
        if (f != NULL && fprintf(f, "{\"id\":%zu,\"prediction\":%.0f,\"label\":%.0f}\n", i, (double)v[N + i],
                                 (double)v[2 * N + i]) < 0)
            rc = sl_error_set(err, SL_EIO, "--predictions: writing %s: %s", path, strerror(errno));
    }
    if (rc == 0 && right != correct)
        rc = sl_error_set(err, SL_EINVAL, "--predictions: %.0f correct in the gathered predictions, %.0f counted",
                          right, correct);
    if (out != NULL && rc != 0)
        sl_output_abort(out); /* a failed evaluation leaves no partial file */
    else if (out != NULL && (rc = sl_output_commit(out, err)) != 0)
        sl_error_prefix(err, "--predictions: ");
    if (rc == 0 && worker == 0)
        sl_log(SL_LOG_INFO, "predictions of %zu elements in id order written to %s", N, path);
    sl_free(v);
    return rc;
}

static void gather_free(struct gather *g)
{
    for (int s = 0; s < 2; s++) {
        sl_free(g->ids[s]);
        sl_free(g->labels[s]);
    }
    sl_free(g->out);
}

/* A progress line on stderr, redrawn at most 5 times a second: epoch and
 * step (of the totals the feeder announced), the running loss, samples/s
 * and the input stall so far. Cleared before log lines. */
struct progress_line {
    int on, drawn;
    uint64_t steps_per_epoch, epochs;
    double next;
};

static void progress_line_draw(struct progress_line *b, uint64_t epoch, uint64_t step, double loss, double rate,
                               double stall_pct)
{
    double now = sl_clock_s();
    if (now < b->next)
        return;
    b->next = now + 0.2;
    char ep[48], st[48];
    if (b->epochs)
        snprintf(ep, sizeof ep, "%" PRIu64 "/%" PRIu64, epoch + 1, b->epochs);
    else
        snprintf(ep, sizeof ep, "%" PRIu64, epoch + 1);
    if (b->steps_per_epoch)
        snprintf(st, sizeof st, "%" PRIu64 "/%" PRIu64, step + 1, b->steps_per_epoch);
    else
        snprintf(st, sizeof st, "%" PRIu64, step + 1);
    fprintf(stderr, "\r\033[Kepoch %s step %s  loss %.4f  %.0f samples/s  input stall %.1f%%", ep, st, loss, rate,
            stall_pct);
    fflush(stderr);
    b->drawn = 1;
}

static void progress_line_clear(struct progress_line *b)
{
    if (b->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
        b->drawn = 0;
    }
}

/* The training loop is created (CPU models, or each GPU's context, model
 * and NCCL rank: seconds, more across machines) on a helper thread, while
 * this thread keeps the feeders' connections alive: a trainer silent for
 * the feeders' timeout would be dropped before its first step. */
struct loop_create_job {
    struct train_loop *loop;
    const struct train_loop_opts *lo;
    const struct sl_wire_welcome *welcome;
    struct sl_error err;
    int rc;
    atomic_int done;
};

static void *loop_create_thread(void *arg)
{
    struct loop_create_job *j = arg;
    j->rc = train_loop_create(&j->loop, j->lo, j->welcome, &j->err);
    atomic_store(&j->done, 1);
    return NULL;
}

static int loop_create_alive(struct train_loop **out, const struct train_loop_opts *lo, struct train_client *cl,
                             struct sl_error *err)
{
    struct loop_create_job j = {.lo = lo, .welcome = train_client_welcome(cl)};
    atomic_init(&j.done, 0);
    pthread_t t;
    if (sl_thread_start(&t, loop_create_thread, &j) != 0)
        return train_loop_create(out, lo, j.welcome, err);
    struct sl_error kerr = {0};
    int krc = 0;
    while (!atomic_load(&j.done)) {
        if (krc == 0)
            krc = train_client_keepalive(cl, 20, &kerr);
        else
            nanosleep(&(struct timespec){.tv_nsec = 20000000}, NULL);
    }
    pthread_join(t, NULL);
    if (j.rc != 0) {
        *err = j.err;
        return j.rc;
    }
    if (krc != 0) { /* a feeder was lost meanwhile */
        train_loop_destroy(j.loop);
        *err = kerr;
        return krc;
    }
    *out = j.loop;
    return 0;
}


/* ---- main's steps ---- */

/* The model the flags describe (inputs: the schema's, set later). */
static void model_config_of(const struct trainer_opts *o, struct train_model_config *mc)
{
    memset(mc, 0, sizeof *mc);
    mc->classes = (int)o->classes;
    mc->seed = o->seed;
    mc->lr = (float)o->lr;
    mc->momentum = (float)o->momentum;
    if (o->model == MODEL_MLP) {
        mc->nhidden = o->nhidden;
        memcpy(mc->hidden, o->hidden_sizes, sizeof mc->hidden);
    }
}

/* What main sets up, in the order it does; report() reads it all. */
struct trainer {
    struct trainer_opts o;
    int done;                                   /* --help or --version printed */
    struct sl_cluster_list feeders, ring_eps, eval_feeders, ps_eps;
    int is_ps;                                  /* this process is parameter server o.ps_task */
    int is_evaluator;                           /* this process is the evaluator task (--evaluator) */
    int ps_evaluator;                           /* a ps task: the job has an evaluator */
    uint64_t ps_global_step;                    /* --mode ps: the servers' count at the end */
    uint64_t ps_session;                        /* --mode ps: this worker process's session (ps_resume) */
    int ps_resumed;                             /* --mode ps: started again where the servers recorded */
    uint32_t ps_lost;                           /* --mode ps: workers lost or failed (the final pull's) */
    uint64_t ps_steps, ps_stale_sum, ps_stale_max; /* --mode ps: pushes, their staleness */
    double ps_pull_s, ps_push_s;                /* --mode ps: the pulls' and pushes' time */
    char ring_bind[SL_CLUSTER_MAX_ADDR];        /* what this worker binds for the ring ("": its endpoint) */
    uint32_t replicas;
    int gpu;
    FILE *summary_out;                          /* a private copy of stdout */
    struct sl_output *trace_out;                /* --trace, until report() commits it */
    FILE *tf;
    int trace_failed;
    char group_id[TRAIN_LOOP_ID_BYTES];         /* GPU replicas across workers: the NCCL group id */
    int have_group_id;
    struct train_client_opts copts;
    /* CURVE (--curve-key; have_curve 0: none): this worker's key pair, and
     * each feeder's public key, [j] for feeders.items[j] (eval_: for
     * eval_feeders) */
    int have_curve;
    char *spec_curve_key, *spec_curve_server; /* the cluster spec's 'curve' paths (owned) */
    struct sl_curve_keys curve;
    char curve_server[MAX_FEEDERS][SL_CURVE_KEY_Z85 + 1], curve_eval[MAX_FEEDERS][SL_CURVE_KEY_Z85 + 1];
    const char *curve_server_z85[MAX_FEEDERS], *curve_eval_z85[MAX_FEEDERS];
    struct train_client *cl;
    struct train_ring *ring;
    struct train_loop *loop;
    struct sl_output *metrics_out;              /* --metrics, until the training ends */
    FILE *mf;
    struct sl_metrics *m;                       /* the figures every report prints (train_metrics.h) */
    double t0, t_first, t_train_end;            /* t_first: the first step received */
    double last_loss, last_acc, test_rows, test_correct;
    int restoring, restore_step_given;          /* --restore; --restore-step */
    struct train_ckpt ck;                       /* the checkpoint restored, until its state is installed */
    uint64_t start_step;                        /* steps trained before this run (restored) */
    double ckpt_s_total;                        /* time spent writing checkpoints */
    uint64_t ckpts;                             /* checkpoints written */
    uint64_t ckpt_last;                         /* the step of the last one */
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
            rc = sl_error_set(err, SL_EINVAL, "cluster spec: a 'ps' task needs the 'chief' or 'worker' list (the "
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
        rc = load_server_keys(o->curve_server_key, "eval-feeder", t->eval_feeders.n, t->curve_eval,
                              t->curve_eval_z85);
    return rc;
}

/* What this worker's ring listens on (worker 0's rendezvous too) when it
 * can be reached from other hosts and has no CURVE; NULL otherwise. */
static const char *plaintext_listen(const struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    if (o->model == MODEL_NONE || o->workers < 2 || t->ring_eps.n != o->workers || t->have_curve)
        return NULL;
    const char *bind = t->ring_bind[0] != '\0' ? t->ring_bind : t->ring_eps.items[o->worker];
    return sl_endpoint_is_local(bind) ? NULL : bind;
}

/* Safe by default (issue #16): a worker whose ring endpoint can be reached
 * from other hosts listens there only with CURVE, or with --insecure (then
 * meet() warns). 0, or the usage error printed. */
static int check_listen(const struct trainer *t)
{
    const char *bind = plaintext_listen(t);
    if (bind == NULL || t->o.insecure)
        return 0;
    return usage_error("this worker's ring endpoint %s can be reached from other hosts, and without --curve-key "
                       "anyone who reaches it could join the job and read its gradients: give every worker the same "
                       "--curve-key (docs/security.md), or --insecure to listen in plaintext anyway", bind);
}

/* What parameter server o.ps_task binds: its endpoint as given when that
 * is a loopback one (a spec naming 127.0.0.1 means this host only), else
 * every interface on its port, as the workers' ring does. */
static void ps_bind_addr(const struct trainer *t, char *bind, size_t n)
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
    /* CURVE: the job's one trainer key pair (the workers' --curve-key);
     * the feeders' keys (--curve-server-key) are not a server's business */
    struct sl_error err = {0};
    if (o->curve_key != NULL) {
        if (sl_curve_load_secret(o->curve_key, &t->curve, &err) != 0)
            return usage_error("--curve-key: %s", err.msg);
        t->have_curve = 1;
    }
    char bind[SL_CLUSTER_MAX_ADDR];
    ps_bind_addr(t, bind, sizeof bind);
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
    const char *const names[] = {"connect", "ring", "peers", "checkpoint", "restore",
                                 "trace", "metrics", "save-weights", "metrics-listen"};
    const char *const given[] = {o->connect, o->ring, o->peers, o->checkpoint, o->restore,
                                 o->trace, o->metrics, o->save_weights, o->metrics_listen};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (given[i] != NULL && i < 5)
            return usage_error("the evaluator trains nothing and meets no worker: drop --%s", names[i]);
        if (given[i] != NULL)
            return usage_error("the evaluator writes its summary and --predictions, nothing else: drop --%s "
                               "(the workers write the training's files)", names[i]);
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

static int configure(struct trainer *t, int argc, char **argv)
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
    if ((o->checkpoint != NULL && o->checkpoint[0] == '\0') || (o->restore != NULL && o->restore[0] == '\0'))
        return usage_error("--%s: an empty directory name", o->restore != NULL && o->restore[0] == '\0' ? "restore"
                                                                                                       : "checkpoint");
    if ((o->checkpoint != NULL || t->restoring) && strlen(o->job) > TRAIN_CKPT_MAX_JOB)
        return usage_error("--checkpoint and --restore take job names of at most %d bytes", TRAIN_CKPT_MAX_JOB);
    if ((o->checkpoint != NULL || t->restoring) && t->gpu)
        return usage_error("--checkpoint and --restore need CPU replicas (the GPU replicas' optimizer state stays "
                           "on the devices)");
    rc = load_curve(t);
    return rc != 0 ? rc : check_listen(t);
}

/* stdout carries the JSON summary and nothing else. Libraries may print
 * there: NCCL writes its log (NCCL_DEBUG, if only its version line) to
 * stdout unless NCCL_DEBUG_FILE names a file, which it opens truncating,
 * so /dev/stderr is no answer. The summary keeps a private duplicate of
 * stdout, and fd 1 becomes a copy of stderr. */
static void split_stdout(struct trainer *t)
{
    t->summary_out = stdout;
    fflush(stdout);
    int fd = dup(STDOUT_FILENO);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f != NULL && dup2(STDERR_FILENO, STDOUT_FILENO) >= 0)
        t->summary_out = f;
    else if (f != NULL)
        fclose(f);
    else if (fd >= 0)
        close(fd);
}

/* --trace and --metrics grow in place (they are read while the run goes
 * on); a device or FIFO is written, never replaced (sl_output.h). */
static int open_trace(struct trainer *t)
{
    struct sl_error err = {0};
    if (t->o.trace == NULL)
        return 0;
    if (sl_output_open(&t->trace_out, t->o.trace, SL_OUTPUT_STREAM, &err) != 0) {
        sl_log(SL_LOG_ERROR, "--trace: %s", err.msg);
        return 1;
    }
    t->tf = sl_output_stream(t->trace_out);
    return 0;
}

/* ---- checkpoints (train_ckpt.h; docs/trainer.md, "Checkpoints") ---- */

/* The input tensor's values per element, from the feeders' schema (0
 * before the client is open or without such a tensor). */
static uint32_t input_width(const struct trainer *t)
{
    const struct sl_wire_welcome *w = t->cl != NULL ? train_client_welcome(t->cl) : NULL;
    size_t len = strlen(t->o.input);
    for (size_t i = 0; w != NULL && i < w->ntensors; i++)
        if (w->fields[i].name_len == len && memcmp(w->fields[i].name, t->o.input, len) == 0 && w->fields[i].rank == 1)
            return w->fields[i].dims[0] > 0 && w->fields[i].dims[0] <= UINT32_MAX ? (uint32_t)w->fields[i].dims[0] : 0;
    return 0;
}

/* What this run's checkpoints say they were made for, and what a restored
 * one must match (inputs: 0, unknown before the feeders' schema). */
static void ckpt_meta_of(const struct trainer *t, struct train_ckpt_meta *m)
{
    const struct trainer_opts *o = &t->o;
    memset(m, 0, sizeof *m);
    snprintf(m->job, sizeof m->job, "%s", o->job);
    m->worker = o->worker;
    m->workers = o->workers;
    m->replicas = t->replicas;
    m->model = (uint32_t)o->model;
    if (o->model == MODEL_NONE)
        return;
    m->mode = (uint32_t)o->mode;
    m->classes = o->classes;
    if (o->model == MODEL_MLP) {
        m->nhidden = (uint32_t)o->nhidden;
        for (int h = 0; h < o->nhidden; h++)
            m->hidden[h] = (uint32_t)o->hidden_sizes[h];
    }
    m->lr = (float)o->lr;
    m->momentum = (float)o->momentum;
    m->seed = o->seed;
}

/* With --restore and several workers, over the ring before the feeders
 * are asked for anything: every worker's newest checkpoint step is
 * gathered (as 16-bit parts summed in float32: exact) and all continue
 * from the oldest of them, the newest step every worker has (a kill while
 * the workers wrote a step's files leaves some one step ahead; --keep is at
 * least 1, and the lockstep means the older step is the previous one they
 * all wrote). A worker that cannot load that step says why in its log, and
 * every worker fails naming the steps. 0 or an error. */
static int ckpt_agree(struct trainer *t, struct sl_error *err)
{
    const struct trainer_opts *o = &t->o;
    size_t W = o->workers;
    float *v = sl_calloc(4 * W, sizeof *v);
    if (v == NULL)
        return sl_error_set(err, SL_ENOMEM, "--restore: out of memory for %zu workers", W);
    for (int k = 0; k < 4; k++)
        v[4 * o->worker + (size_t)k] = (float)((t->start_step >> (16 * k)) & 0xffff);
    int rc = train_ring_all_reduce(t->ring, v, 4 * W, TRAIN_RING_SUM, err);
    uint64_t lo = UINT64_MAX, hi = 0;
    uint32_t lo_w = 0, hi_w = 0;
    for (size_t w = 0; rc == 0 && w < W; w++) {
        uint64_t st = 0;
        for (int k = 0; k < 4; k++)
            st |= (uint64_t)v[4 * w + (size_t)k] << (16 * k);
        if (st < lo) {
            lo = st;
            lo_w = (uint32_t)w;
        }
        if (st > hi) {
            hi = st;
            hi_w = (uint32_t)w;
        }
    }
    float bad = 0;
    if (rc == 0 && lo != t->start_step) {
        struct train_ckpt_meta want;
        struct train_ckpt older;
        struct sl_error lerr = {0};
        char name[96], path[TRAIN_CKPT_MAX_PATH];
        ckpt_meta_of(t, &want);
        train_ckpt_name(name, sizeof name, lo, o->worker, o->workers);
        snprintf(path, sizeof path, "%s/%s", o->restore, name);
        sl_log(SL_LOG_INFO, "--restore: worker %u's newest checkpoint is step %" PRIu64 ", this worker's step %" PRIu64
               ": every worker continues from step %" PRIu64, lo_w, lo, t->start_step, lo);
        if (train_ckpt_read(path, &want, &older, &lerr) != 0 || older.meta.pos.step != lo) {
            sl_log(SL_LOG_ERROR, "--restore: %s", lerr.msg[0] ? lerr.msg : "the file's step is not its name's");
            train_ckpt_free(&older);
            bad = 1;
        } else {
            train_ckpt_free(&t->ck);
            t->ck = older;
            t->start_step = lo;
            sl_log(SL_LOG_INFO, "restoring step %" PRIu64 " (epoch %" PRIu64 ", input position %" PRIu64 ") from %s",
                   lo, t->ck.meta.pos.epoch, t->ck.meta.pos.seq, path);
        }
    }
    if (rc == 0)
        rc = train_ring_all_reduce(t->ring, &bad, 1, TRAIN_RING_SUM, err);
    sl_free(v);
    if (rc == 0 && bad != 0)
        rc = sl_error_set(err, SL_EINVAL, "--restore: the workers' newest checkpoints are step %" PRIu64 " (worker %u) "
                          "and step %" PRIu64 " (worker %u), and %.0f worker(s) cannot load step %" PRIu64 " (their logs "
                          "say why): give every worker --restore-step S with a step each of them has", lo, lo_w, hi,
                          hi_w, (double)bad, lo);
    return rc;
}

/* --checkpoint DIR made if absent (one level) and a directory. */
static int ckpt_dir_ready(const char *dir, struct sl_error *err)
{
    struct stat st;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return sl_error_sys(err, errno, "--checkpoint: mkdir(%s)", dir);
    if (stat(dir, &st) != 0)
        return sl_error_sys(err, errno, "--checkpoint: stat(%s)", dir);
    if (!S_ISDIR(st.st_mode))
        return sl_error_set(err, SL_EINVAL, "--checkpoint %s: not a directory", dir);
    return 0;
}

/* Find and read the checkpoint to restore: this worker's newest in
 * --restore DIR, or --restore-step's. A damaged or mismatched file is
 * refused naming it; the message names the previous one, to be chosen
 * with --restore-step (never taken silently). */
static int ckpt_load(struct trainer *t, struct sl_error *err)
{
    const struct trainer_opts *o = &t->o;
    uint64_t steps[2];
    size_t n, total, other;
    char other_name[256] = "", name[96], path[TRAIN_CKPT_MAX_PATH];
    int rc = train_ckpt_list(o->restore, o->worker, o->workers, steps, 2, &n, &total, &other, other_name,
                             sizeof other_name, err);
    if (rc != 0)
        return sl_error_prefix(err, "--restore: ");
    train_ckpt_name(name, sizeof name, 0, o->worker, o->workers);
    if (n == 0 && !t->restore_step_given)
        return sl_error_set(err, SL_EINVAL, "--restore %s: no checkpoint of worker %u of %u (%s and later)%s%s%s",
                            o->restore, o->worker, o->workers, name, other ? "; it holds checkpoints of another worker "
                            "count, such as " : "", other_name, other ? " (--workers must be the same)" : "");
    uint64_t step = t->restore_step_given ? o->restore_step : steps[0];
    train_ckpt_name(name, sizeof name, step, o->worker, o->workers);
    if ((size_t)snprintf(path, sizeof path, "%s/%s", o->restore, name) >= sizeof path)
        return sl_error_set(err, SL_EINVAL, "--restore: the path %s/%s is too long", o->restore, name);
    struct train_ckpt_meta want;
    ckpt_meta_of(t, &want);
    double t0 = sl_clock_s();
    if ((rc = train_ckpt_read(path, &want, &t->ck, err)) != 0) {
        sl_error_prefix(err, "--restore: ");
        /* the next older one, for the message */
        uint64_t prev = UINT64_MAX;
        for (size_t i = 0; i < n; i++)
            if (steps[i] < step) {
                prev = steps[i];
                break;
            }
        if (!t->restore_step_given && prev != UINT64_MAX) {
            size_t len = strlen(err->msg);
            snprintf(err->msg + len, sizeof err->msg - len, "; the previous checkpoint of this worker is step %" PRIu64
                     ": give --restore-step %" PRIu64 " to continue from it", prev, prev);
        }
        return rc;
    }
    if (t->ck.meta.pos.step != step) {
        rc = sl_error_set(err, SL_ECORRUPT, "--restore: %s holds step %" PRIu64 " (the name says %" PRIu64 ")", path,
                          t->ck.meta.pos.step, step);
        train_ckpt_free(&t->ck);
        return rc;
    }
    t->start_step = step;
    sl_log(SL_LOG_INFO, "restoring step %" PRIu64 " (epoch %" PRIu64 ", input position %" PRIu64 ") from %s: %" PRIu64
           " parameters, read and checked in %.1f ms", step, t->ck.meta.pos.epoch, t->ck.meta.pos.seq, path,
           t->ck.meta.nparams, 1e3 * (sl_clock_s() - t0));
    if (o->model != MODEL_NONE && (t->ck.meta.lr != want.lr || t->ck.meta.momentum != want.momentum))
        sl_log(SL_LOG_WARN, "--restore: %s was made with --lr %g --momentum %g; training continues with --lr %g "
               "--momentum %g", path, (double)t->ck.meta.lr, (double)t->ck.meta.momentum, (double)want.lr,
               (double)want.momentum);
    return 0;
}

/* Before the rendezvous: --checkpoint's directory ready and cleaned of this
 * worker's temporaries (a write a kill cut short), --restore's checkpoint
 * read and checked. A fresh run (no --restore) into a directory that
 * already holds this worker's checkpoints is refused: its files would mix
 * with theirs. 0, or 1 with the error logged. */
static int prepare_checkpoints(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    size_t removed = 0;
    const char *dirs[2] = {o->checkpoint, o->restore};
    if (o->checkpoint != NULL && ckpt_dir_ready(o->checkpoint, &err) != 0)
        goto fail;
    for (int i = 0; i < 2; i++) {
        if (dirs[i] == NULL || (i == 1 && dirs[0] != NULL && strcmp(dirs[0], dirs[1]) == 0))
            continue;
        if (train_ckpt_clean(dirs[i], o->worker, o->workers, &removed, &err) != 0) {
            if (i == 0)
                goto fail;
            continue; /* --restore's directory: read-only is fine; the listing reports a missing one */
        }
        if (removed > 0)
            sl_log(SL_LOG_WARN, "checkpoint: removed %zu temporary file(s) of worker %u of %u in %s (a write cut "
                   "short)", removed, o->worker, o->workers, dirs[i]);
    }
    if (t->restoring && ckpt_load(t, &err) != 0)
        goto fail;
    if (o->checkpoint != NULL && !t->restoring) {
        uint64_t newest;
        size_t n, total;
        if (train_ckpt_list(o->checkpoint, o->worker, o->workers, &newest, 1, &n, &total, NULL, NULL, 0, &err) != 0)
            goto fail;
        if (n > 0) {
            sl_error_set(&err, SL_EINVAL, "--checkpoint %s already holds %zu checkpoint(s) of worker %u of %u (the "
                         "newest: step %" PRIu64 "): give --restore %s to continue from it, or another directory",
                         o->checkpoint, total, o->worker, o->workers, newest, o->checkpoint);
            goto fail;
        }
    }
    return 0;
fail:
    sl_log(SL_LOG_ERROR, "%s", err.msg);
    return 1;
}

/* After the step whose first piece is first_seq has trained: a checkpoint
 * when one is due (every --checkpoint-every steps, and after each epoch's
 * last step; `force`: now, unless this step's is written already: a stop
 * signal), the weights after the step and the position of the next.
 * --trace and --metrics are flushed first, so their lines up to the
 * checkpoint outlive a kill. 0, or 1 with the error logged. */
static int maybe_checkpoint(struct trainer *t, uint64_t epoch, uint64_t first_seq, uint32_t flags, int force)
{
    const struct trainer_opts *o = &t->o;
    if (o->checkpoint == NULL)
        return 0;
    uint64_t next = first_seq + t->replicas, steps = next / t->replicas;
    if (force ? t->ckpts > 0 && t->ckpt_last == steps
              : !(flags & SL_WIRE_PIECE_LAST_STEP) && (o->checkpoint_every == 0 || steps % o->checkpoint_every != 0))
        return 0;
    struct sl_error err = {0};
    struct train_ckpt_meta m;
    const float *w = NULL, *v = NULL;
    size_t np = 0;
    ckpt_meta_of(t, &m);
    int rc = train_input_position_at(&m.pos, next, t->replicas, epoch, &err);
    if (rc == 0 && t->loop != NULL && (rc = train_loop_state(t->loop, &w, &v, &np, &err)) == 0) {
        m.nparams = np;
        m.inputs = input_width(t);
    }
    if (t->tf != NULL)
        fflush(t->tf);
    if (t->mf != NULL)
        fflush(t->mf);
    double t0 = sl_clock_s();
    uint64_t bytes = 0;
    if (rc == 0)
        rc = train_ckpt_write(o->checkpoint, &m, w, v, &bytes, &err);
    if (rc == 0 && (rc = train_ckpt_prune(o->checkpoint, o->worker, o->workers, steps, o->keep, &err)) != 0)
        sl_error_prefix(&err, "checkpoint: ");
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    double dt = sl_clock_s() - t0;
    t->ckpt_s_total += dt;
    t->ckpts++;
    t->ckpt_last = steps;
    char name[96];
    train_ckpt_name(name, sizeof name, steps, o->worker, o->workers);
    sl_log(SL_LOG_INFO, "checkpoint: step %" PRIu64 " (epoch %" PRIu64 ") written to %s/%s, %" PRIu64 " bytes in %.1f ms",
           steps, epoch, o->checkpoint, name, bytes, 1e3 * dt);
    return 0;
}

/* The workers meet at worker 0's ring endpoint and check that they agree
 * before anyone trains (issue #4: cluster rendezvous); with GPU replicas,
 * worker 0's NCCL group id travels in the rendezvous' blob. */
static int meet(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    if (o->model == MODEL_NONE || o->workers < 2 || t->ring_eps.n == 0)
        return 0;
    if (plaintext_listen(t) != NULL)
        sl_log(SL_LOG_WARN, "ring: listening on %s in plaintext (--insecure): anyone who reaches it can join the job "
               "and read its gradients", plaintext_listen(t));
    char cfg[TRAIN_RENDEZVOUS_MAX_CONFIG], root_bind[SL_CLUSTER_MAX_ADDR], restored[32] = "none";
    if (t->restoring && t->restore_step_given)
        snprintf(restored, sizeof restored, "step-%" PRIu64, t->o.restore_step);
    else if (t->restoring)
        snprintf(restored, sizeof restored, "newest");
    /* the workers restore alike (all or none; the same --restore-step), or
     * fail here with both choices in the message; which step "newest" is
     * they settle over the ring (ckpt_agree) */
    snprintf(cfg, sizeof cfg,
             "model=%s hidden=%s classes=%u input=%s label=%s lr=%g momentum=%g seed=%u replicas=%u devices=%s restore=%s",
             model_names[o->model], o->model == MODEL_MLP ? o->hidden : "-", o->classes, o->input, o->label, o->lr,
             o->momentum, o->seed, t->replicas, o->devspec.count > 0 ? o->devspec.kind : "cpu", restored);
    const char *root = t->ring_eps.items[0];
    if (t->ring_bind[0] != '\0')
        sl_cluster_bind_addr(root, root_bind, sizeof root_bind);
    struct train_rendezvous_opts ro = {.rank = (int)o->worker, .size = (int)o->workers, .root = root,
                                       .bind = t->ring_bind[0] != '\0' ? root_bind : NULL,
                                       .names = (const char *const *)t->ring_eps.items, .job = o->job,
                                       .config = cfg, .timeout_ms = (int)(o->rendezvous_timeout_s * 1000),
                                       .stop = &stop_flag, .curve = t->have_curve ? &t->curve : NULL};
    struct sl_error err = {0};
    size_t blob_len = 0;
    double t0 = sl_clock_s();
    int sender = t->gpu && o->worker == 0;
    int rc = sender ? train_loop_group_id(t->group_id, &err) : 0;
    ro.blob = sender ? t->group_id : NULL;
    ro.blob_len = sender ? sizeof t->group_id : 0;
    if (rc == 0)
        rc = train_rendezvous(&ro, t->gpu ? t->group_id : NULL, t->gpu ? sizeof t->group_id : 0, &blob_len, &err);
    if (rc == 0 && t->gpu && blob_len != sizeof t->group_id)
        rc = sl_error_set(&err, SL_EPROTO, "rendezvous: worker 0 sent a %zu-byte group id (expected %zu)", blob_len,
                          sizeof t->group_id);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    t->have_group_id = t->gpu;
    sl_log(SL_LOG_INFO, "rendezvous: %u workers agree (worker %u, %.2f s; %s)", o->workers, o->worker,
           sl_clock_s() - t0, cfg);
    return 0;
}

/* ps mode, before the feeders' connections: where this worker's shard
 * stands on the servers (a process started again resumes there: the
 * servers adopt its session), its feeders' resume_seq. */
static int ps_resume(struct trainer *t, struct sl_error *err)
{
    const struct trainer_opts *o = &t->o;
    struct train_ps_resume_result r;
    t->ps_session = train_ps_draw_id();
    void *ctx = zmq_ctx_new();
    int rc = ctx == NULL ? sl_error_set(err, SL_EIO, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()))
                         : train_ps_resume(ctx, (const char *const *)t->ps_eps.items, (uint32_t)t->ps_eps.n, o->worker,
                                           t->ps_session, t->replicas, (int)o->timeout_ms,
                                           t->have_curve ? &t->curve : NULL, &r, err);
    if (ctx != NULL)
        zmq_ctx_term(ctx);
    if (rc != 0) {
        sl_error_prefix(err, "worker %u: where to resume: ", o->worker);
        return rc;
    }
    if (r.recorded == 0)
        return 0; /* a fresh start: nothing of this worker's shard was trained */
    sl_log(SL_LOG_INFO, "worker %u restarted: resuming at epoch %" PRIu64 " step %" PRIu64 " (input position %" PRIu64
           ", as %u of %zu parameter servers recorded it%s)", o->worker, r.pos.epoch, r.pos.step, r.pos.seq,
           r.recorded - r.ahead, t->ps_eps.n,
           r.ahead > 0 ? "; the others are ahead: they acknowledge the steps they applied without applying them "
                         "again" : "");
    t->copts.resume_seq = r.pos.seq;
    t->start_step = r.pos.step;
    t->ps_resumed = 1;
    return 0;
}

/* With a model and several workers the ring across workers, then the
 * feeders' connections (their WELCOME gives the schema), the training loop
 * and --metrics. */
static int start(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    t->copts = (struct train_client_opts){.feeders = (const char *const *)t->feeders.items,
                                          .nfeeders = t->feeders.n, .job = o->job, .worker = o->worker,
                                          .workers = o->workers, .replicas = t->replicas, .credits = o->credits,
                                          .heartbeat_ms = (int)o->heartbeat_ms, .timeout_ms = (int)o->timeout_ms,
                                          .connect_timeout_ms = (int)(o->connect_timeout_s * 1000),
                                          .reconnect_ms = (int)(o->reconnect_s * 1000), .no_shm = o->no_shm,
                                          .takeover_ms = (int)(o->takeover_s * 1000 + 0.5),
                                          .curve = t->have_curve ? &t->curve : NULL,
                                          .curve_server = t->curve_server_z85,
                                          .stop = &stop_flag, .metrics = t->m};
    /* the workers' ring first: its open waits for every worker, and a
     * client already connected would send its feeders no heartbeat
     * meanwhile (they would drop it after --timeout-ms) */
    if (o->model != MODEL_NONE && o->workers > 1 && o->mode != MODE_PS) {
        struct train_ring_opts ro = {.rank = (int)o->worker, .size = (int)o->workers,
                                     .endpoints = (const char *const *)t->ring_eps.items,
                                     .timeout_ms = (int)o->timeout_ms,
                                     .connect_timeout_ms = (int)(o->connect_timeout_s * 1000),
                                     .bind = t->ring_bind[0] != '\0' ? t->ring_bind : NULL, .stop = &stop_flag,
                                     .curve = t->have_curve ? &t->curve : NULL};
        if (train_ring_open(&t->ring, &ro, &err) != 0)
            goto fail;
        if (t->restoring && ckpt_agree(t, &err) != 0)
            goto fail;
    }
    /* the restored position, once the workers agreed on the step */
    t->copts.resume_seq = t->restoring ? t->ck.meta.pos.seq : 0;
    if (o->model != MODEL_NONE && o->mode == MODE_PS && ps_resume(t, &err) != 0)
        goto fail;
    if (train_client_open(&t->cl, &t->copts, &err) != 0)
        goto fail;
    if (o->trace != NULL && check_trace_feature(train_client_welcome(t->cl), o->feature, &err) != 0)
        goto fail; /* the schema is known from the WELCOME: fail before any step */
    if (o->model != MODEL_NONE) {
        struct train_loop_opts lo = {.input = o->input, .label = o->label, .replicas = t->replicas,
                                     .worker = o->worker, .workers = o->workers, .hash_every = o->hash_every,
                                     .mode = o->mode == MODE_TOWER ? TRAIN_STRATEGY_TOWER
                                             : o->mode == MODE_PS  ? TRAIN_STRATEGY_PS
                                                                   : TRAIN_STRATEGY_MIRRORED,
                                     .ps = (const char *const *)t->ps_eps.items, .nps = (uint32_t)t->ps_eps.n,
                                     .ps_placement = (enum train_ps_placement)o->ps_placement,
                                     .ps_timeout_ms = (int)o->timeout_ms, .ps_session = t->ps_session,
                                     .device = t->gpu ? "cuda" : "cpu", .ordinals = t->gpu ? o->devspec.ordinals : NULL,
                                     .dev_id = t->have_group_id ? t->group_id : NULL, .metrics = t->m,
                                     .ps_curve = t->have_curve ? &t->curve : NULL};
        model_config_of(o, &lo.model);
        lo.ring = t->ring;
        if (loop_create_alive(&t->loop, &lo, t->cl, &err) != 0)
            goto fail;
        if (t->restoring && train_loop_set_state(t->loop, t->ck.weights, t->ck.velocity, (size_t)t->ck.meta.nparams,
                                                 &err) != 0) {
            sl_error_prefix(&err, "--restore: %s (made for inputs of %u values, the job's have %u): ", t->ck.path,
                            t->ck.meta.inputs, input_width(t));
            goto fail;
        }
    }
    train_ckpt_free(&t->ck); /* installed (or nothing to install: --model none) */
    if (o->metrics != NULL) {
        if (sl_output_open(&t->metrics_out, o->metrics, SL_OUTPUT_STREAM, &err) != 0) {
            sl_log(SL_LOG_ERROR, "--metrics: %s", err.msg);
            return 1;
        }
        t->mf = sl_output_stream(t->metrics_out);
    }
    return 0;
fail:
    sl_log(SL_LOG_ERROR, "%s", err.msg);
    return 1;
}

/* A step's place, kept from its pieces (borrowed until the next receive)
 * for the metrics and logs written after it runs. */
struct staged_step {
    uint64_t epoch, step, seq; /* seq: the step's first piece's */
    uint32_t flags;
};

/* What the --metrics lines and the periodic log line measure from: the
 * metrics at the last line of each, and the means since the last log line. */
struct run_counters {
    double step_t0;             /* the previous step's end */
    double fw_m0[MAX_FEEDERS];  /* the wait by feeder at the last --metrics line */
    double fw_l0[MAX_FEEDERS];  /* at the last log line */
    struct train_counters m0;   /* at the last --metrics line */
    struct train_counters l0;   /* at the last log line */
    double loss_sum, acc_sum;   /* since the last log line */
    uint64_t loss_steps;
};

/* GB/s staged to the devices between two readings (0 without staging). */
static double h2d_rate(const struct train_counters *now, const struct train_counters *then)
{
    return now->h2d_s > then->h2d_s ? (double)(now->h2d_bytes - then->h2d_bytes) / (now->h2d_s - then->h2d_s) / 1e9
                                    : 0.0;
}

/* The input wait by feeder since *then (updated to now) as JSON
 * ",\"input_wait_by_feeder_s\":[...],\"input_bound_feeder\":J" (J: the
 * feeder that caused most of it, -1 when no feeder was waited for 1 us or
 * more). */
static void wait_by_feeder(struct trainer *t, double *then, char *out, size_t cap)
{
    double now[MAX_FEEDERS];
    size_t F = train_client_wait_by_feeder(t->cl, now, MAX_FEEDERS), at = 0;
    int worst = -1;
    double most = 0;
    at += (size_t)snprintf(out + at, cap - at, ",\"input_wait_by_feeder_s\":[");
    for (size_t j = 0; j < F && at < cap; j++) {
        double d = now[j] - then[j];
        then[j] = now[j];
        if (d > most && d >= 1e-6) { /* a wait under 1 us (the line shows 6 decimals) names nobody */
            most = d;
            worst = (int)j;
        }
        at += (size_t)snprintf(out + at, cap - at, "%s%.6f", j ? "," : "", d);
    }
    /* and that feeder's busiest stage lately, from its STATS */
    uint64_t ns[SL_WIRE_STAGES];
    int stage = -1;
    if (worst >= 0 && train_client_feeder_stages(t->cl, (size_t)worst, ns, &stage) != 0)
        stage = -1;
    if (at < cap)
        snprintf(out + at, cap - at, "],\"input_bound_feeder\":%d,\"input_bound_stage\":\"%s\"", worst,
                 worst >= 0 && stage >= 0 ? train_client_stage_name(stage) : "");
}

/* One --metrics line. The step's time runs from the previous step's end
 * (receiving and staging included); its H2D rate is the staging done since
 * then, and its input wait the wait within the same interval (with the
 * look-ahead, the wait for the next step's pieces, received before this
 * step ran). */
/* v with `decimals` decimals, or null when it is a NaN or an infinity
 * (--check-numerics off): JSON has no such numbers. Returns buf or "null". */
static const char *json_real(char *buf, size_t n, int decimals, double v)
{
    if (!isfinite(v))
        return "null";
    snprintf(buf, n, "%.*f", decimals, v);
    return buf;
}

static void write_metrics(struct trainer *t, struct run_counters *c, const struct staged_step *s,
                          const struct train_step_result *res)
{
    double now = sl_clock_s(), dt = now - c->step_t0;
    struct train_counters m;
    train_metrics_read(t->m, &m);
    double waited = m.wait_s - c->m0.wait_s;
    char ps[192] = "", fw[96 + 16 * MAX_FEEDERS], loss[64];
    wait_by_feeder(t, c->fw_m0, fw, sizeof fw);
    if (t->o.mode == MODE_PS) /* the step's pull and push */
        snprintf(ps, sizeof ps,
                 ",\"global_step\":%" PRIu64 ",\"staleness\":%" PRIu64 ",\"pull_s\":%.6f,\"push_s\":%.6f",
                 res->ps.global_step, res->ps.staleness, res->ps.pull_s, res->ps.push_s);
    fprintf(t->mf,
            "{\"epoch\":%" PRIu64 ",\"step\":%" PRIu64 ",\"rows\":%" PRIu64
            ",\"loss\":%s,\"accuracy\":%.6f,\"step_s\":%.6f,\"input_wait_s\":%.6f"
            ",\"samples_per_s\":%.1f,\"input_stall_pct\":%.2f,\"h2d_gb_per_s\":%.3f"
            ",\"weights_hash\":\"%016" PRIx64 "\"%s%s}\n",
            s->epoch, s->step, res->rows, json_real(loss, sizeof loss, 6, res->loss), res->accuracy, dt, waited, dt > 0 ? (double)res->rows / dt : 0.0,
            dt > 0 ? 100.0 * waited / dt : 0.0, h2d_rate(&m, &c->m0), train_loop_weights_hash(t->loop), fw, ps);
    c->m0 = m;
    c->step_t0 = now;
}

/* The log line every --log-every steps (or per epoch): means since the
 * last one, the rates since the first step. */
static void log_progress(struct trainer *t, struct run_counters *c, const struct staged_step *s)
{
    t->last_loss = c->loss_steps ? c->loss_sum / (double)c->loss_steps : 0;
    t->last_acc = c->loss_steps ? c->acc_sum / (double)c->loss_steps : 0;
    struct train_counters m;
    train_metrics_read(t->m, &m);
    double el = sl_clock_s() - t->t_first;
    /* who the input waited for since the last log line (several feeders) */
    char who[32 + 24 * MAX_FEEDERS] = "";
    double now[MAX_FEEDERS], total = 0;
    size_t F = train_client_wait_by_feeder(t->cl, now, MAX_FEEDERS), at = 0;
    for (size_t j = 0; j < F; j++)
        total += now[j] - c->fw_l0[j];
    for (size_t j = 0; F > 1 && total > 0 && j < F && at < sizeof who; j++)
        at += (size_t)snprintf(who + at, sizeof who - at, "%s%zu %.0f%%", j ? ", " : " (waiting for feeder ", j,
                               100.0 * (now[j] - c->fw_l0[j]) / total);
    size_t top = 0;
    for (size_t j = 1; j < F; j++)
        if (now[j] - c->fw_l0[j] > now[top] - c->fw_l0[top])
            top = j;
    uint64_t ns[SL_WIRE_STAGES];
    int stage = -1;
    if (total > 0 && train_client_feeder_stages(t->cl, top, ns, &stage) != 0)
        stage = -1;
    if (at > 0 && at < sizeof who)
        snprintf(who + at, sizeof who - at, "%s%s)", stage >= 0 ? "; its busiest stage: " : "",
                 stage >= 0 ? train_client_stage_name(stage) : "");
    else if (total > 0 && stage >= 0) /* one feeder */
        snprintf(who, sizeof who, " (the feeder's busiest stage: %s)", train_client_stage_name(stage));
    memcpy(c->fw_l0, now, F * sizeof *now);
    sl_log(SL_LOG_INFO,
           "epoch %" PRIu64 " step %" PRIu64 ": loss %.4f accuracy %.4f (mean since the last report), "
           "%.0f samples/s, input stall %.1f%%%s, H2D %.2f GB/s, weights %016" PRIx64,
           s->epoch, s->step, t->last_loss, t->last_acc, el > 0 ? (double)m.rows * t->o.workers / el : 0,
           el > 0 ? 100.0 * m.wait_s / el : 0, who, h2d_rate(&m, &c->l0), train_loop_weights_hash(t->loop));
    c->l0 = m;
    c->loss_sum = c->acc_sum = 0;
    c->loss_steps = 0;
}

/* --check-numerics: the step's loss and the weights (the host copy: in ps
 * mode the values pulled). 0, or 1 with the step named in the log. */
static int check_numerics(struct trainer *t, uint64_t epoch, uint64_t step, const struct train_step_result *res)
{
    const struct trainer_opts *o = &t->o;
    if (o->check_numerics == CHECK_OFF)
        return 0;
    long long bad = train_loop_first_non_finite(t->loop);
    double bound = 1000.0 * log((double)(o->classes > 1 ? o->classes : 2));
    const char *how = "--check-numerics off trains on anyway";
    if (res->rows > 0 && !isfinite(res->loss))
        sl_log(SL_LOG_ERROR, "epoch %" PRIu64 " step %" PRIu64 ": the loss is %s: the training diverged (a lower --lr "
               "may help; %s)", epoch, step, isnan(res->loss) ? "nan" : "inf", how);
    else if (bad >= 0)
        sl_log(SL_LOG_ERROR, "epoch %" PRIu64 " step %" PRIu64 ": weight %lld is not finite%s: the training diverged "
               "(a lower --lr may help; %s)", epoch, step, bad, o->mode == MODE_PS ? " (as pulled from the servers)"
               : "", how);
    else if (o->check_numerics == CHECK_ON && res->rows > 0 && res->loss > bound)
        sl_log(SL_LOG_ERROR, "epoch %" PRIu64 " step %" PRIu64 ": the loss is %.6g, over %.6g (1000 x ln %u classes: "
               "a uniform guess scores ln %u): the training diverged (a lower --lr may help; --check-numerics finite "
               "stops only for NaN or infinity, off never)", epoch, step, res->loss, bound, o->classes, o->classes);
    else
        return 0;
    t->last_loss = res->loss; /* the summary shows the loss that stopped the run (null when not finite) */
    return 1;
}

/* Run step `prev` (its pieces staged before the next step's arrived):
 * metrics, the mirrored check at an epoch's end, progress and logs. 0, or
 * SL_EIO with the error logged. */
static int run_step(struct trainer *t, struct run_counters *c, struct progress_line *bar, const struct staged_step *prev,
                    uint64_t ran)
{
    struct train_step_result res;
    struct sl_error err = {0};
    if (train_loop_run(t->loop, &res, &err) != 0) {
        progress_line_clear(bar);
        sl_log(SL_LOG_ERROR, "epoch %" PRIu64 " step %" PRIu64 ": %s", prev->epoch, prev->step, err.msg);
        return SL_EIO;
    }
    if (check_numerics(t, prev->epoch, prev->step, &res) != 0) {
        progress_line_clear(bar);
        return SL_EIO;
    }
    if (res.ps.pushed) {
        t->ps_steps++;
        t->ps_stale_sum += res.ps.staleness;
        if (res.ps.staleness > t->ps_stale_max)
            t->ps_stale_max = res.ps.staleness;
    }
    t->ps_pull_s += res.ps.pull_s;
    t->ps_push_s += res.ps.push_s;
    if (t->mf != NULL)
        write_metrics(t, c, prev, &res);
    if (res.rows > 0) {
        c->loss_sum += res.loss;
        c->acc_sum += res.accuracy;
        c->loss_steps++;
    }
    int last = (prev->flags & SL_WIRE_PIECE_LAST_STEP) != 0;
    if (last && train_loop_check_mirrored(t->loop, &err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return SL_EIO;
    }
    if (bar->on) {
        struct train_counters m;
        train_metrics_read(t->m, &m);
        double el = sl_clock_s() - t->t_first;
        progress_line_draw(bar, prev->epoch, prev->step, c->loss_steps ? c->loss_sum / (double)c->loss_steps : 0,
                           el > 0 ? (double)m.rows * t->o.workers / el : 0, el > 0 ? 100.0 * m.wait_s / el : 0);
    }
    if ((t->o.log_every && ran % t->o.log_every == 0) || (!t->o.log_every && last)) {
        progress_line_clear(bar);
        log_progress(t, c, prev);
    }
    return 0;
}

/* ps mode, before step s runs: the input position after it, which its
 * push carries (the servers record it: a restart resumes there); --trace
 * flushed first, so its lines for the steps pushed outlive a kill. 0, or
 * 1 with the error logged. */
static int ps_position(struct trainer *t, const struct staged_step *s)
{
    struct train_input_position next;
    struct sl_error err = {0};
    if (t->tf != NULL)
        fflush(t->tf);
    if (train_input_position_at(&next, s->seq + t->replicas, t->replicas, s->epoch, &err) != 0 ||
        train_loop_ps_position(t->loop, &next, &err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    return 0;
}

/* Receive every step, trace its pieces, and with a model train on it.
 * Look-ahead: step s+1 is received and staged (its copies queued on the
 * replicas' devices) before step s runs, so on a GPU the copy of s+1
 * overlaps step s; the last step runs after the stream ends. A step's
 * pieces are borrowed until the next receive: the stagers have copied
 * them by then (train_loop_put). 0, or 1 with the error logged. */
/* --step-ms: ms of a stand-in compute with the step in hand. Whole
 * milliseconds go to train_client_keepalive (heartbeats out, pieces in,
 * as a real step's wait would); the fraction is slept. A signal ends it
 * early (the loop then sees stop_flag). */
static int simulated_step(struct trainer *t, double ms, struct sl_error *err)
{
    int whole = (int)ms;
    for (int left = whole; left > 0 && !stop_flag; left -= 100) { /* a signal is seen within 0.1 s */
        int rc = train_client_keepalive(t->cl, left < 100 ? left : 100, err);
        if (rc != 0)
            return rc;
    }
    long frac_ns = (long)((ms - whole) * 1e6);
    struct timespec left = {.tv_nsec = frac_ns};
    while (frac_ns > 0 && !stop_flag && nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
    return 0;
}

static int run(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    const struct sl_wire_welcome *w = train_client_welcome(t->cl);
    sl_log(SL_LOG_INFO, "worker %u of %u, %u replicas: %zu feeders, %" PRIu64 " steps per epoch, %u tensors",
           o->worker, o->workers, t->replicas, t->feeders.n, w->steps_per_epoch, w->ntensors);
    struct progress_line bar = {.on = o->progress == PROGRESS_ON ||
                                      (o->progress == PROGRESS_AUTO && o->worker == 0 && isatty(2)),
                                .steps_per_epoch = w->steps_per_epoch, .epochs = w->epochs};
    struct run_counters c = {.step_t0 = sl_clock_s()};
    struct staged_step cur = {0}, prev = {0};
    struct sl_buf line;
    struct sl_error err = {0};
    sl_buf_init(&line, 0);
    const struct train_piece *pieces;
    uint64_t ran = t->start_step, last_epoch = UINT64_MAX; /* ran: steps trained, for --log-every */
    struct staged_step last = {0}; /* the last step trained (traced, without a model) */
    int have_prev = 0, have_last = 0, rc;
    for (;;) {
        rc = stop_flag ? 0 : train_client_next_step(t->cl, &pieces, &err);
        if (stop_flag || (rc != 0 && rc != SL_END))
            break;
        int got = rc == 0;
        if (got) {
            if (t->t_first == 0)
                t->t_first = sl_clock_s();
            sl_metrics_add(t->m, TRAIN_M_STEPS, 1);
            if (pieces[0].epoch != last_epoch) {
                last_epoch = pieces[0].epoch;
                sl_metrics_add(t->m, TRAIN_M_EPOCHS, 1);
            }
            for (uint32_t r = 0; t->tf != NULL && r < t->replicas; r++)
                if (trace_piece(&line, &pieces[r], o->feature, t->tf) != 0) {
                    sl_log(SL_LOG_ERROR, "cannot write the trace line to %s (I/O error or malformed string offsets)",
                           o->trace);
                    t->trace_failed = 1;
                    rc = SL_EIO;
                    break;
                }
            if (rc != 0)
                break;
            if (o->step_ms > 0 && (rc = simulated_step(t, o->step_ms, &err)) != 0) {
                progress_line_clear(&bar);
                sl_log(SL_LOG_ERROR, "%s", err.msg);
                rc = SL_EIO;
                break;
            }
            if (t->loop == NULL) {
                last = (struct staged_step){.epoch = pieces[0].epoch, .seq = pieces[0].seq, .flags = pieces[0].flags};
                have_last = 1;
                if (maybe_checkpoint(t, last.epoch, last.seq, last.flags, 0) != 0) {
                    rc = SL_EIO;
                    break;
                }
            }
            if (t->loop != NULL) {
                cur = (struct staged_step){.epoch = pieces[0].epoch, .step = pieces[0].step, .seq = pieces[0].seq,
                                           .flags = pieces[0].flags};
                if (train_loop_put(t->loop, pieces, t->replicas, &err) != 0) {
                    progress_line_clear(&bar);
                    sl_log(SL_LOG_ERROR, "%s", err.msg);
                    rc = SL_EIO;
                    break;
                }
            }
        }
        if (t->loop != NULL && have_prev && o->mode == MODE_PS && ps_position(t, &prev) != 0) {
            rc = SL_EIO;
            break;
        }
        if (t->loop != NULL && have_prev && (rc = run_step(t, &c, &bar, &prev, ++ran)) != 0)
            break;
        if (t->loop != NULL && have_prev) {
            last = prev;
            have_last = 1;
        }
        if (t->loop != NULL && have_prev && maybe_checkpoint(t, prev.epoch, prev.seq, prev.flags, 0) != 0) {
            progress_line_clear(&bar);
            rc = SL_EIO;
            break;
        }
        if (!got) {
            rc = SL_END;
            break;
        }
        prev = cur;
        have_prev = t->loop != NULL;
    }
    progress_line_clear(&bar);
    sl_buf_free(&line);
    if (stop_flag) {
        struct train_counters m;
        train_metrics_read(t->m, &m);
        sl_log(SL_LOG_INFO, "stopped by a signal after %" PRIu64 " steps", m.steps);
        /* preempted: the last step trained is not lost (a step cut short by
         * the signal, e.g. in its all-reduce, was not trained) */
        if (have_last && maybe_checkpoint(t, last.epoch, last.seq, last.flags, 1) != 0)
            sl_log(SL_LOG_ERROR, "the checkpoint at the stop could not be written");
        return 1;
    }
    if (rc != SL_END) {
        if (rc != SL_EIO)
            sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    return 0;
}

/* The end of training: --metrics committed (a failed run's metrics stay:
 * they say how far it went), then --save-weights after a good run. */
static int finish_training(struct trainer *t, int status)
{
    struct sl_error err = {0};
    if (t->metrics_out != NULL) {
        int rc = sl_output_commit(t->metrics_out, &err);
        t->metrics_out = NULL;
        if (rc != 0 && status == 0) {
            sl_log(SL_LOG_ERROR, "--metrics: %s", err.msg);
            status = 1;
        }
    }
    if (status == 0 && t->loop != NULL && t->o.save_weights != NULL) {
        struct train_model *m = train_loop_model(t->loop);
        if (save_weights(t->o.save_weights, train_model_params(m), train_model_nparams(m), &err) != 0) {
            sl_log(SL_LOG_ERROR, "%s", err.msg);
            status = 1;
        }
    }
    return status;
}

/* Evaluation on a second job: every worker predicts its own pieces; the
 * counts are summed over workers (and --predictions gathered). Look-ahead
 * as in training: stage step s+1, then predict step s. ec: the evaluation
 * job's client when already open (the evaluator's, borrowed), or NULL:
 * opened and closed here. 0, or 1 with the error logged. */
static int evaluate(struct trainer *t, struct train_client *ec)
{
    const struct trainer_opts *o = &t->o;
    struct train_client_opts eo = t->copts;
    eo.feeders = (const char *const *)t->eval_feeders.items;
    eo.nfeeders = t->eval_feeders.n;
    eo.curve_server = t->curve_eval_z85;
    eo.job = o->eval_job ? o->eval_job : o->job;
    eo.metrics = NULL; /* the training's figures stay the training's */
    int own = ec == NULL;
    const struct train_piece *pieces;
    struct gather g = {0};
    struct sl_error err = {0};
    int rc = own ? train_client_open(&ec, &eo, &err) : 0;
    for (int have_prev = 0, slot = 0; rc == 0 && !stop_flag; slot ^= 1) {
        int got = (rc = train_client_next_step(ec, &pieces, &err)) == 0;
        if (rc != 0 && rc != SL_END)
            break;
        if (got && o->predictions != NULL &&
            (rc = gather_keep(&g, slot, pieces, t->replicas, o->feature, o->label, &err)) != 0)
            break;
        if (got && (rc = train_loop_put(t->loop, pieces, t->replicas, &err)) != 0)
            break;
        if (have_prev && (rc = train_loop_eval_run(t->loop, &t->test_rows, &t->test_correct, &err)) != 0)
            break;
        if (have_prev && o->predictions != NULL && (rc = gather_add(&g, slot ^ 1, t->loop, t->replicas, &err)) != 0)
            break;
        if (!got) {
            rc = SL_END;
            break;
        }
        have_prev = 1;
    }
    if (rc == SL_END) {
        float counts[2] = {(float)t->test_rows, (float)t->test_correct};
        rc = train_loop_sum(t->loop, counts, 2, &err);
        t->test_rows = counts[0];
        t->test_correct = counts[1];
    }
    if (rc == 0 && o->predictions != NULL && !stop_flag) /* rc is the counts' sum's */
        rc = gather_write(&g, t->loop, o->worker, t->test_rows, t->test_correct, o->predictions, &err);
    gather_free(&g);
    if (own)
        train_client_close(ec);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "evaluation: %s", err.msg);
        return 1;
    }
    sl_log(SL_LOG_INFO, "test accuracy %.4f over %.0f elements (%s)",
           t->test_rows > 0 ? t->test_correct / t->test_rows : 0, t->test_rows,
           t->is_evaluator        ? "the whole test set: the evaluator, with the final weights"
           : o->mode == MODE_PS ? "this worker's share; every worker holds the same final weights"
                                : "all workers");
    return 0;
}

/* The summary line: on stdout (the run's result, for scripts and
 * sluice-bench) and at the end of --trace, which is committed (a failed
 * run's trace stays, its summary saying "ok":false) unless writing it
 * failed. Returns the final status. */
static int report(struct trainer *t, int status)
{
    const struct trainer_opts *o = &t->o;
    double secs = t->t_train_end - t->t0, stream = t->t_first > 0 ? t->t_train_end - t->t_first : 0;
    struct train_counters st; /* h2d: staged for training and evaluation */
    train_metrics_read(t->m, &st);
    char summary[1536 + 16 * MAX_FEEDERS], ps[256] = "", fw[32 + 16 * MAX_FEEDERS] = "", loss[64];
    if (t->cl != NULL) { /* the input wait by the feeder whose piece ended it */
        double w[MAX_FEEDERS];
        size_t F = train_client_wait_by_feeder(t->cl, w, MAX_FEEDERS), at = 0;
        at += (size_t)snprintf(fw, sizeof fw, ",\"input_wait_by_feeder_s\":[");
        for (size_t j = 0; j < F && at < sizeof fw; j++)
            at += (size_t)snprintf(fw + at, sizeof fw - at, "%s%.4f", j ? "," : "", w[j]);
        if (at < sizeof fw)
            snprintf(fw + at, sizeof fw - at, "]");
    }
    if (o->mode == MODE_PS && o->model != MODEL_NONE)
        snprintf(ps, sizeof ps,
                 ",\"ps_global_step\":%" PRIu64 ",\"ps_steps\":%" PRIu64 ",\"ps_staleness_mean\":%.4f"
                 ",\"ps_staleness_max\":%" PRIu64 ",\"ps_pull_s\":%.4f,\"ps_push_s\":%.4f,\"lost_workers\":%u",
                 t->ps_global_step, t->ps_steps, t->ps_steps ? (double)t->ps_stale_sum / (double)t->ps_steps : 0.0,
                 t->ps_stale_max, t->ps_pull_s, t->ps_push_s, t->ps_lost);
    snprintf(summary, sizeof summary,
             "{\"summary\":{\"worker\":%u,\"replicas\":%u,\"ok\":%s,\"steps\":%" PRIu64 ",\"epochs\":%" PRIu64
             ",\"pieces\":%" PRIu64 ",\"elements\":%" PRIu64 ",\"bytes\":%" PRIu64
             ",\"seconds\":%.3f,\"elements_per_s\":%.1f,\"wait_s\":%.3f,\"stream_seconds\":%.3f,"
             "\"stream_elements_per_s\":%.1f,\"stream_bytes_per_s\":%.1f,\"model\":\"%s\",\"loss\":%s,"
             "\"accuracy\":%.5f,\"input_stall_pct\":%.2f,\"weights_hash\":\"%016" PRIx64 "\","
             "\"test_rows\":%.0f,\"test_accuracy\":%.5f,\"mode\":\"%s\",\"h2d_bytes\":%" PRIu64
             ",\"h2d_gb_per_s\":%.3f,\"feeder_rejoins\":%" PRIu64 ",\"feeder_takeovers\":%" PRIu64 ",\"shm_pieces\":%" PRIu64
             ",\"restored_step\":%" PRIu64 ",\"checkpoints\":%" PRIu64 ",\"checkpoint_s\":%.4f%s%s}}\n",
             o->worker, t->replicas, status == 0 ? "true" : "false", st.steps, st.epochs, st.pieces, st.rows,
             st.bytes, secs, secs > 0 ? (double)st.rows / secs : 0.0, st.wait_s, stream,
             stream > 0 ? (double)st.rows / stream : 0.0, stream > 0 ? (double)st.bytes / stream : 0.0,
             model_names[o->model], json_real(loss, sizeof loss, 5, t->last_loss), t->last_acc, stream > 0 ? 100.0 * st.wait_s / secs : 0.0,
             t->loop ? train_loop_weights_hash(t->loop) : (uint64_t)0, t->test_rows,
             t->test_rows > 0 ? t->test_correct / t->test_rows : 0.0, mode_names[o->mode], st.h2d_bytes,
             st.h2d_s > 0 ? (double)st.h2d_bytes / st.h2d_s / 1e9 : 0.0, st.rejoins, st.takeovers, st.shm_pieces,
             t->start_step, t->ckpts, t->ckpt_s_total, fw, ps);
    if (t->trace_out != NULL && !t->trace_failed) {
        struct sl_error err = {0};
        fputs(summary, t->tf);
        int rc = sl_output_commit(t->trace_out, &err);
        t->trace_out = NULL;
        if (rc != 0 && status == 0) {
            sl_log(SL_LOG_ERROR, "--trace: %s", err.msg);
            status = 1;
        }
    }
    fputs(summary, t->summary_out);
    if (t->summary_out != stdout && fclose(t->summary_out) != 0)
        status = status != 0 ? status : 1;
    return status;
}

/* ---- a parameter-server task ---- */

struct ps_task {
    const struct trainer *t;
    struct train_ps_model pm; /* built from the first worker's input width */
};

/* The server's variables: this task's model flags with the input width a
 * worker's description names, and that description must then be this
 * task's own, word for word. A description refused here (malformed, or
 * another model) is answered with ERROR and the server waits for the next:
 * the first description that matches this task's flags sets the model.
 * Only the input width comes from the peer (a ps task has no feeder to
 * learn it from); with --curve-key only holders of the job's key get here. */
static int ps_setup(void *arg, const char *config, size_t len, const struct train_ps_layout **layout,
                    const float **init, struct sl_error *err)
{
    struct ps_task *pt = arg;
    const struct trainer_opts *o = &pt->t->o;
    uint32_t inputs = train_ps_config_inputs(config, len);
    char text[2 * TRAIN_PS_MAX_CONFIG];
    train_ps_printable(text, sizeof text, config, len);
    if (inputs == 0)
        return sl_error_set(err, SL_EPROTO, "a worker's model description names no input width: '%.200s'", text);
    struct train_model_config mc;
    model_config_of(o, &mc);
    mc.inputs = (int)inputs;
    int rc = train_ps_model_init(&pt->pm, &mc, (uint32_t)pt->t->ps_eps.n, (enum train_ps_placement)o->ps_placement,
                                 err);
    if (rc != 0)
        return rc;
    if (strlen(pt->pm.config) != len || memcmp(pt->pm.config, config, len) != 0) {
        /* refused: the next description is tried afresh */
        rc = sl_error_set(err, SL_EINVAL, "the workers' model '%s' is not this parameter server's '%s': start it "
                          "with the workers' model flags", text, pt->pm.config);
        train_ps_model_free(&pt->pm);
        return rc;
    }
    *layout = &pt->pm.layout;
    *init = train_model_params(pt->pm.model);
    return 0;
}

/* A parameter server's /metrics (--metrics-listen). */
struct ps_expose {
    struct train_ps_live live;
    struct sl_buf labels;
};

static void ps_family(struct sl_prom *p, const char *name, const char *type, const char *help, uint64_t v)
{
    sl_prom_family(p, name, type, help);
    sl_prom_u64(p, name, NULL, v);
}

static int ps_write(void *ctx, struct sl_buf *out)
{
    struct ps_expose *e = ctx;
    struct train_ps_live *l = &e->live;
    struct sl_prom p = {.b = out, .labels = (const char *)e->labels.data};
#define LOAD(x) atomic_load_explicit(&l->x, memory_order_relaxed)
    ps_family(&p, "sluice_ps_pulls_total", "counter", "PULLs answered (a final pull asked again counts again).",
              LOAD(pulls));
    ps_family(&p, "sluice_ps_pushes_total", "counter", "Gradients applied (one per worker step).", LOAD(pushes));
    ps_family(&p, "sluice_ps_global_step", "gauge", "Worker steps counted (server 0 counts; the others hold 0).",
              LOAD(global_step));
    ps_family(&p, "sluice_ps_elements", "gauge", "float32 elements this server holds (0 before the first pull).",
              LOAD(elements));
    ps_family(&p, "sluice_ps_workers_done", "gauge", "Workers done (final pull, BYE or lost).", LOAD(workers_done));
    ps_family(&p, "sluice_ps_workers_lost", "gauge", "Workers silent past --ps-worker-timeout.", LOAD(lost));
    ps_family(&p, "sluice_ps_bad_messages_total", "counter", "Malformed or refused messages.", LOAD(bad_messages));
    /* staleness: other workers' pushes applied between a push's pull and
     * it; integer buckets 0..15 and +Inf */
    const char *h = "sluice_ps_push_staleness";
    sl_prom_family(&p, h, "histogram", "Each push's staleness: pushes applied between its pull and it.");
    uint64_t cum = 0;
    char le[24];
    for (int k = 0; k < TRAIN_PS_STALENESS_BUCKETS; k++) {
        cum += LOAD(staleness_hist[k]);
        if (k < TRAIN_PS_STALENESS_BUCKETS - 1)
            snprintf(le, sizeof le, "le=\"%d\"", k);
        else
            snprintf(le, sizeof le, "le=\"+Inf\"");
        sl_prom_u64(&p, "sluice_ps_push_staleness_bucket", le, cum);
    }
    sl_prom_u64(&p, "sluice_ps_push_staleness_sum", NULL, LOAD(staleness_sum));
    sl_prom_u64(&p, "sluice_ps_push_staleness_count", NULL, cum);
#undef LOAD
    return p.rc;
}

/* The evaluator as the server saw it, for its summary. */
static const char *ps_eval_word(const struct train_ps_server_stats *st)
{
    switch (st->evaluator) {
    case TRAIN_PS_EVAL_NONE:
        return "none";
    case TRAIN_PS_EVAL_LOST:
        return "lost";
    case TRAIN_PS_EVAL_BYE:
        return st->evaluator_served ? "served" : "left";
    default:
        return st->evaluator_served ? "served" : "unserved";
    }
}

/* A refused message, logged (rate-limited: anyone who reaches the port
 * can cause these); the text comes escaped from train_ps. */
struct ps_refusals {
    uint32_t index;
    struct sl_log_limit limit;
};

static void ps_refused(void *arg, uint32_t worker, const char *why)
{
    struct ps_refusals *r = arg;
    if (!sl_log_allowed(&r->limit))
        return;
    if (worker == UINT32_MAX)
        sl_log(SL_LOG_WARN, "parameter server %u refused a message: %s", r->index, why);
    else
        sl_log(SL_LOG_WARN, "parameter server %u refused worker %u's message: %s", r->index, worker, why);
}

/* A worker restart adopted, a push not applied twice: said, never limited. */
static void ps_said(void *arg, uint32_t worker, const char *what)
{
    const struct ps_refusals *r = arg;
    (void)worker;
    sl_log(SL_LOG_INFO, "parameter server %u: %s", r->index, what);
}

/* A ps task's --checkpoint: the server's state every --checkpoint-every
 * pushes it applied, and when stopped (train_ps_ckpt.h), the --keep
 * newest kept. */
struct ps_ckpt_writer {
    const struct trainer_opts *o;
    uint32_t servers;
    uint64_t written;
};

static int ps_checkpoint(void *arg, const struct train_ps_state *s, struct sl_error *err)
{
    struct ps_ckpt_writer *cw = arg;
    const struct trainer_opts *o = cw->o;
    double t0 = sl_clock_s();
    uint64_t bytes = 0;
    int rc = train_ps_ckpt_write(o->checkpoint, s, &bytes, err);
    if (rc == 0 && (rc = train_ckpt_prune(o->checkpoint, s->index, s->servers, s->version, o->keep, err)) != 0)
        sl_error_prefix(err, "checkpoint: ");
    if (rc != 0)
        return rc;
    char name[96];
    train_ckpt_name(name, sizeof name, s->version, s->index, s->servers);
    sl_log(SL_LOG_INFO, "parameter server %u: checkpoint: version %" PRIu64 " (global step %" PRIu64 ") written to "
           "%s/%s, %" PRIu64 " bytes in %.1f ms", s->index, s->version, s->global_step, o->checkpoint, name, bytes,
           1e3 * (sl_clock_s() - t0));
    cw->written++;
    return 0;
}

/* --checkpoint DIR ready (a fresh run into a directory that already holds
 * this server's checkpoints is refused), and --restore DIR's newest
 * checkpoint of this server read into *ck. 0, or 1 with the error logged. */
static int ps_prepare_checkpoints(struct trainer *t, struct train_ps_ckpt *ck)
{
    const struct trainer_opts *o = &t->o;
    uint32_t nps = (uint32_t)t->ps_eps.n;
    struct sl_error err = {0};
    size_t removed = 0, n = 0, total = 0;
    uint64_t newest = 0;
    char name[96], path[TRAIN_CKPT_MAX_PATH];
    if (o->checkpoint != NULL) {
        if (ckpt_dir_ready(o->checkpoint, &err) != 0 ||
            train_ckpt_clean(o->checkpoint, o->ps_task, nps, &removed, &err) != 0)
            goto fail;
        if (removed > 0)
            sl_log(SL_LOG_WARN, "checkpoint: removed %zu temporary file(s) of parameter server %u of %u in %s (a "
                   "write cut short)", removed, o->ps_task, nps, o->checkpoint);
        if (o->restore == NULL) {
            if (train_ckpt_list(o->checkpoint, o->ps_task, nps, &newest, 1, &n, &total, NULL, NULL, 0, &err) != 0)
                goto fail;
            if (n > 0) {
                sl_error_set(&err, SL_EINVAL, "--checkpoint %s already holds %zu checkpoint(s) of parameter server "
                             "%u of %u (the newest: version %" PRIu64 "): give --restore %s to continue from it, or "
                             "another directory", o->checkpoint, total, o->ps_task, nps, newest, o->checkpoint);
                goto fail;
            }
        }
    }
    if (o->restore == NULL)
        return 0;
    if (train_ckpt_list(o->restore, o->ps_task, nps, &newest, 1, &n, &total, NULL, NULL, 0, &err) != 0) {
        sl_error_prefix(&err, "--restore: ");
        goto fail;
    }
    train_ckpt_name(name, sizeof name, newest, o->ps_task, nps);
    if (n == 0) {
        sl_error_set(&err, SL_EINVAL, "--restore %s: no checkpoint of parameter server %u of %u there (ckpt-*.w%uof%u)",
                     o->restore, o->ps_task, nps, o->ps_task, nps);
        goto fail;
    }
    if ((size_t)snprintf(path, sizeof path, "%s/%s", o->restore, name) >= sizeof path) {
        sl_error_set(&err, SL_EINVAL, "--restore: the path %s/%s is too long", o->restore, name);
        goto fail;
    }
    if (train_ps_ckpt_read(path, o->ps_task, nps, o->workers, ck, &err) != 0) {
        sl_error_prefix(&err, "--restore: ");
        goto fail;
    }
    uint32_t with = 0;
    for (uint32_t w = 0; w < o->workers; w++)
        with += ck->state.pos[w].replicas != 0;
    sl_log(SL_LOG_INFO, "parameter server %u: restoring version %" PRIu64 " (global step %" PRIu64 ", %u of %u "
           "workers' positions) from %s", o->ps_task, ck->state.version, ck->state.global_step, with, o->workers,
           path);
    return 0;
fail:
    sl_log(SL_LOG_ERROR, "%s", err.msg);
    return 1;
}

/* Serve until every worker is done; the summary line on stdout. 0 or 1. */
static int serve_ps(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    struct ps_task pt = {.t = t};
    struct train_ps_server_stats st = {0};
    struct train_ps_ckpt ck = {0};
    struct ps_ckpt_writer cw = {.o = o, .servers = (uint32_t)t->ps_eps.n};
    if (ps_prepare_checkpoints(t, &ck) != 0)
        return 1;
    struct sl_error err = {0};
    static struct ps_expose ex; /* zero: every figure 0 */
    struct sl_http_metrics *http = NULL;
    if (o->metrics_listen != NULL) {
        char index[16];
        snprintf(index, sizeof index, "%u", o->ps_task);
        sl_buf_init(&ex.labels, 4096);
        int lrc = o->job != NULL ? sl_prom_label(&ex.labels, "sluice_job", o->job) : 0;
        if (lrc == 0)
            lrc = sl_prom_label(&ex.labels, "ps", index);
        struct sl_http_metrics_opts ho = {.listen = o->metrics_listen, .fn = ps_write, .ctx = &ex};
        if (lrc != 0 || sl_http_metrics_start(&http, &ho, &err) != 0) {
            sl_log(SL_LOG_ERROR, "--metrics-listen: %s", lrc != 0 ? "the job's name does not fit a label" : err.msg);
            sl_buf_free(&ex.labels);
            return 1;
        }
        sl_log(SL_LOG_INFO, "metrics: serving /metrics on %s (port %u)", o->metrics_listen, sl_http_metrics_port(http));
        if (!sl_http_metrics_local(http))
            sl_log(SL_LOG_WARN, SL_HTTP_METRICS_REACHABLE, o->metrics_listen);
    }
    char bind[SL_CLUSTER_MAX_ADDR];
    ps_bind_addr(t, bind, sizeof bind);
    void *ctx = zmq_ctx_new();
    struct ps_refusals refusals = {.index = o->ps_task, .limit = {.kind = "refusals", .burst = 10}};
    struct train_ps_server_opts so = {.ctx = ctx, .listen = bind, .index = o->ps_task, .setup = ps_setup,
                                      .setup_arg = &pt, .lr = (float)o->lr, .momentum = (float)o->momentum,
                                      .workers = o->workers,
                                      .worker_timeout_ms = (int)(o->ps_worker_timeout_s * 1000), .stop = &stop_flag,
                                      .live = http != NULL ? &ex.live : NULL, .evaluator = t->ps_evaluator,
                                      .curve = t->have_curve ? &t->curve : NULL, .refused = ps_refused,
                                      .refused_arg = &refusals, .said = ps_said, .said_arg = &refusals,
                                      .restore = o->restore != NULL ? &ck.state : NULL,
                                      .checkpoint = o->checkpoint != NULL ? ps_checkpoint : NULL,
                                      .checkpoint_arg = &cw, .checkpoint_every = o->checkpoint_every};
    if (!sl_endpoint_is_local(bind) && !t->have_curve)
        sl_log(SL_LOG_WARN, "parameter server %u: listening on %s in plaintext (--insecure): anyone who reaches it "
               "can read and change the weights", o->ps_task, bind);
    sl_log(SL_LOG_INFO, "parameter server %u of %zu: serving %u workers%s on %s%s", o->ps_task, t->ps_eps.n,
           o->workers, t->ps_evaluator ? " and the evaluator" : "", bind,
           t->have_curve ? " (CURVE: holders of the job's trainer key only)" : "");
    double t0 = sl_clock_s();
    int rc = ctx == NULL ? sl_error_set(&err, SL_EIO, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()))
                         : train_ps_serve(&so, &st, &err);
    double secs = sl_clock_s() - t0;
    if (st.evaluator == TRAIN_PS_EVAL_LOST)
        sl_log(SL_LOG_WARN, "parameter server %u: the evaluator was silent for %.1f s once the workers were done and "
               "is lost: it read no final weights from this server", o->ps_task, o->ps_worker_timeout_s * 1.0);
    else if (st.evaluator == TRAIN_PS_EVAL_BYE && !st.evaluator_served)
        sl_log(SL_LOG_WARN, "parameter server %u: the evaluator left before reading the final weights", o->ps_task);
    sl_log_limit_flush(&refusals.limit, 1);
    if (rc != 0)
        sl_log(SL_LOG_ERROR, "%s", err.msg);
    else
        sl_log(SL_LOG_INFO, "parameter server %u: %" PRIu64 " pushes applied, global step %" PRIu64 ", staleness "
               "mean %.2f max %" PRIu64 ", %.1f s", o->ps_task, st.pushes, st.global_step,
               st.pushes ? (double)st.staleness_sum / (double)st.pushes : 0.0, st.staleness_max, secs);
    /* the summary: which variables this server held, and its figures */
    struct sl_buf b;
    sl_buf_init(&b, 0);
    int w = sl_buf_printf(&b, "{\"summary\":{\"ps\":%u,\"servers\":%zu,\"ok\":%s,\"workers\":%u,\"variables\":[",
                          o->ps_task, t->ps_eps.n, rc == 0 ? "true" : "false", o->workers);
    for (size_t i = 0, k = 0; w == 0 && i < pt.pm.layout.nvars; i++)
        if (pt.pm.owner[i] == o->ps_task)
            w = sl_buf_printf(&b, "%s\"%c%d\"", k++ ? "," : "", pt.pm.vars[i].kind, pt.pm.vars[i].layer);
    if (w == 0)
        w = sl_buf_printf(&b, "],\"elements\":%zu,\"pulls\":%" PRIu64 ",\"pushes\":%" PRIu64 ",\"version\":%" PRIu64
                          ",\"global_step\":%" PRIu64 ",\"staleness_mean\":%.4f,\"staleness_max\":%" PRIu64
                          ",\"staleness_hist\":[",
                          st.elements, st.pulls, st.pushes, st.version, st.global_step,
                          st.pushes ? (double)st.staleness_sum / (double)st.pushes : 0.0, st.staleness_max);
    for (int k = 0; w == 0 && k < TRAIN_PS_STALENESS_BUCKETS; k++)
        w = sl_buf_printf(&b, "%s%" PRIu64, k ? "," : "", st.staleness_hist[k]);
    if (w == 0)
        w = sl_buf_printf(&b, "],\"lost_workers\":%u,\"failed_workers\":%u,\"restarted_workers\":%u,"
                          "\"pushes_not_reapplied\":%" PRIu64 ",\"restored_version\":%" PRIu64 ",\"checkpoints\":%"
                          PRIu64 ",\"bad_messages\":%" PRIu64 ",\"incarnation\":\"%016" PRIx64 "\",\"evaluator\":"
                          "\"%s\",\"seconds\":%.3f}}\n",
                          st.lost, st.left_early, st.restarts, st.skipped, o->restore != NULL ? ck.state.version : 0,
                          st.checkpoints, st.bad_messages, st.incarnation, ps_eval_word(&st), secs);
    if (w == 0)
        fwrite(b.data, 1, b.len, t->summary_out);
    sl_buf_free(&b);
    if (t->summary_out != stdout)
        fclose(t->summary_out);
    t->summary_out = NULL;
    train_ps_model_free(&pt.pm);
    train_ps_ckpt_free(&ck);
    if (ctx != NULL)
        zmq_ctx_term(ctx);
    if (http != NULL) {
        sl_http_metrics_stop(http);
        sl_buf_free(&ex.labels);
    }
    return rc == 0 && w == 0 ? 0 : 1;
}

/* ---- the evaluator task ---- */

static int eval_keepalive(void *arg, int ms, struct sl_error *err)
{
    return train_client_keepalive(arg, ms, err);
}

/* The evaluator's summary line on stdout. */
static void eval_report(struct trainer *t, int status, const struct train_ps_eval_result *res, double secs)
{
    const struct trainer_opts *o = &t->o;
    fprintf(t->summary_out,
            "{\"summary\":{\"evaluator\":0,\"ok\":%s,\"mode\":\"ps\",\"model\":\"%s\",\"replicas\":%u,"
            "\"servers\":%zu,\"global_step\":%" PRIu64 ",\"wait_s\":%.3f,\"weights_hash\":\"%016" PRIx64 "\","
            "\"test_rows\":%.0f,\"test_correct\":%.0f,\"test_accuracy\":%.5f,\"lost_workers\":%u,\"seconds\":%.3f}}\n",
            status == 0 ? "true" : "false", model_names[o->model], t->replicas, t->ps_eps.n, res->global_step,
            res->wait_s, t->loop != NULL && status == 0 ? train_loop_weights_hash(t->loop) : (uint64_t)0,
            t->test_rows, t->test_correct, t->test_rows > 0 ? t->test_correct / t->test_rows : 0.0, res->lost_workers,
            secs);
    if (t->summary_out != stdout)
        fclose(t->summary_out);
    t->summary_out = NULL;
}

/* The evaluator (train_and_evaluate's): its evaluation feeders' schema
 * makes the model; it waits, keeping them alive, until every worker is
 * done, takes the final weights from the servers (never as a worker), and
 * evaluates them on its whole job (and --predictions). 0 or 1. */
static int run_evaluator(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    struct train_ps_eval_result res = {0};
    double t0 = sl_clock_s();
    t->copts = (struct train_client_opts){.feeders = (const char *const *)t->eval_feeders.items,
                                          .nfeeders = t->eval_feeders.n, .job = o->eval_job ? o->eval_job : o->job,
                                          .worker = 0, .workers = 1, .replicas = t->replicas, .credits = o->credits,
                                          .heartbeat_ms = (int)o->heartbeat_ms, .timeout_ms = (int)o->timeout_ms,
                                          .connect_timeout_ms = (int)(o->connect_timeout_s * 1000),
                                          .reconnect_ms = (int)(o->reconnect_s * 1000), .no_shm = o->no_shm,
                                          .takeover_ms = (int)(o->takeover_s * 1000 + 0.5),
                                          .curve = t->have_curve ? &t->curve : NULL,
                                          .curve_server = t->curve_eval_z85, .stop = &stop_flag, .metrics = t->m};
    struct train_loop_opts lo = {.input = o->input, .label = o->label, .replicas = t->replicas, .worker = 0,
                                 .workers = 1, .mode = TRAIN_STRATEGY_MIRRORED, .hash_every = 0, .device = "cpu"};
    model_config_of(o, &lo.model);
    float *params = NULL;
    const float *w, *v;
    size_t np = 0;
    void *ctx = NULL;
    int rc = train_client_open(&t->cl, &t->copts, &err);
    if (rc == 0)
        rc = loop_create_alive(&t->loop, &lo, t->cl, &err);
    if (rc == 0)
        rc = train_loop_state(t->loop, &w, &v, &np, &err);
    if (rc == 0 && (params = sl_calloc(2 * np, sizeof *params)) == NULL) /* the weights, then a zero velocity */
        rc = sl_error_set(&err, SL_ENOMEM, "out of memory for %zu parameters", np);
    if (rc == 0 && (ctx = zmq_ctx_new()) == NULL)
        rc = sl_error_set(&err, SL_EIO, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    if (rc == 0) {
        sl_log(SL_LOG_INFO, "evaluator: waiting for the workers to finish (%zu parameter servers)", t->ps_eps.n);
        struct train_ps_eval_opts eo = {.ctx = ctx, .ps = (const char *const *)t->ps_eps.items,
                                        .nps = (uint32_t)t->ps_eps.n,
                                        .placement = (enum train_ps_placement)o->ps_placement, .model = lo.model,
                                        .timeout_ms = (int)o->timeout_ms, .idle = eval_keepalive,
                                        .idle_arg = t->cl, .stop = &stop_flag,
                                        .curve = t->have_curve ? &t->curve : NULL};
        eo.model.inputs = (int)input_width(t);
        rc = train_ps_eval_final(&eo, params, np, &res, &err);
        if (rc == 0 && res.lost_workers > 0) /* the weights are an unfinished job's: said, as the workers say it */
            rc = sl_error_set(&err, SL_EPROTO, "the job did not finish: %u of %u workers were lost or failed (worker "
                              "%u first; the servers' logs say which and why): the final weights are not the "
                              "trained model's (global step %" PRIu64 ")", res.lost_workers, o->workers,
                              res.first_lost, res.global_step);
    }
    if (rc == 0)
        rc = train_loop_set_state(t->loop, params, params + np, np, &err);
    if (ctx != NULL)
        zmq_ctx_term(ctx);
    sl_free(params);
    int status = 0;
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "evaluator: %s", err.msg);
        status = 1;
    } else {
        sl_log(SL_LOG_INFO, "evaluator: every worker is done; the final weights (global step %" PRIu64 ") read "
               "after %.1f s", res.global_step, res.wait_s);
        status = evaluate(t, t->cl);
    }
    eval_report(t, status, &res, sl_clock_s() - t0);
    train_loop_destroy(t->loop);
    t->loop = NULL;
    train_client_close(t->cl);
    t->cl = NULL;
    return status;
}

/* --mode ps after the last step: the final pull (waiting for every
 * worker: they all end with the same weights) releases the servers. */
static int ps_finish(struct trainer *t)
{
    struct sl_error err = {0};
    if (train_loop_ps_finish(t->loop, &stop_flag, &t->ps_global_step, &err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    uint32_t first = 0;
    t->ps_lost = train_loop_ps_lost(t->loop, &first);
    if (t->ps_lost > 0) {
        sl_log(SL_LOG_ERROR, "the job did not finish: %u of %u workers were lost or failed (worker %u first; the "
               "servers' logs say which and why): their shards were not trained to the end (global step %" PRIu64
               ")", t->ps_lost, t->o.workers, first, t->ps_global_step);
        return 1;
    }
    long long bad = t->o.check_numerics != CHECK_OFF ? train_loop_first_non_finite(t->loop) : -1;
    if (bad >= 0) {
        sl_log(SL_LOG_ERROR, "the final pull (global step %" PRIu64 "): weight %lld is not finite: the training "
               "diverged (--check-numerics off trains on anyway)", t->ps_global_step, bad);
        return 1;
    }
    sl_log(SL_LOG_INFO, "parameter servers: every worker is done; global step %" PRIu64 " (this worker's %" PRIu64
           " steps, staleness mean %.2f max %" PRIu64 ")", t->ps_global_step, t->ps_steps,
           t->ps_steps ? (double)t->ps_stale_sum / (double)t->ps_steps : 0.0, t->ps_stale_max);
    return 0;
}

int main(int argc, char **argv)
{
    static struct trainer t; /* a device spec and three lists: kept off the stack, all zero */
    struct train_expose *expose = NULL; /* --metrics-listen */
    int status = configure(&t, argc, argv);
    if (status != 0 || t.done)
        goto out_free_lists;
    split_stdout(&t);
    /* ZeroMQ allocates every received piece of a copied stream (one malloc
     * per message, ~200 KB for the Fashion-MNIST job) and the client frees
     * them out of order. glibc's defaults map large blocks afresh and give
     * the heap's top back to the kernel, so each piece's pages were faulted
     * in again: 13% of the receiving I/O thread's time, and 25% more
     * throughput by copy without it (docs/performance.md, "The copy path
     * across hosts"). Blocks below 64 MiB now come from the heap, and the
     * heap keeps up to 1 GiB it no longer uses: at most what the client's
     * window needed at peak. */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    sl_log_setup("sluice-trainer", 2,
                 t.o.quiet && t.o.log_level < SL_LOG_WARN ? SL_LOG_WARN : (enum sl_log_level)t.o.log_level);
    sl_log_set_format((enum sl_log_format)t.o.log_format);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (train_metrics_create(&t.m) != 0) {
        sl_log(SL_LOG_ERROR, "out of memory");
        status = 1;
        goto out_free_lists;
    }
    if (t.is_ps) { /* its own /metrics (serve_ps) */
        status = serve_ps(&t);
        goto out_free_lists;
    }
    if (t.is_evaluator) {
        status = run_evaluator(&t);
        goto out_free_lists;
    }
    if ((status = train_expose_start(&expose, t.o.metrics_listen, t.m, &t.loop, &t.cl, t.o.job, t.o.worker)) != 0)
        goto out_free_lists;
    if (open_trace(&t) != 0) {
        status = 1;
        goto out_free_lists;
    }
    if (prepare_checkpoints(&t) != 0 || meet(&t) != 0) {
        status = 1;
        goto out_abort_trace;
    }
    t.t0 = sl_clock_s();
    status = start(&t);
    if (status == 0)
        status = run(&t);
    if (status == 0 && t.o.mode == MODE_PS && t.loop != NULL)
        status = ps_finish(&t);
    t.t_train_end = sl_clock_s();
    status = finish_training(&t, status);
    if (status == 0 && stop_flag && t.loop != NULL && t.o.eval_connect != NULL) {
        sl_log(SL_LOG_INFO, "stopped by a signal before the evaluation");
        status = 1;
    }
    if (status == 0 && t.loop != NULL && t.o.eval_connect != NULL && !stop_flag)
        status = evaluate(&t, NULL);
    status = report(&t, status);
    train_loop_destroy(t.loop);
    train_ring_close(t.ring);
    train_client_close(t.cl);
out_abort_trace:
    sl_output_abort(t.trace_out); /* what report() did not commit */
    train_ckpt_free(&t.ck);
out_free_lists:
    train_expose_stop(expose); /* every thread adding to t.m has ended */
    sl_metrics_destroy(t.m);
    sl_cluster_list_free(&t.eval_feeders);
    sl_cluster_list_free(&t.ps_eps);
    sl_cluster_list_free(&t.ring_eps);
    sl_free(t.spec_curve_key);
    sl_free(t.spec_curve_server);
    sl_cluster_list_free(&t.feeders);
    /* a run a signal cut short: 130 (SIGINT) or 143 (SIGTERM); one that had
     * finished when the signal came keeps its 0 */
    return stop_flag && status != 0 ? 128 + (int)stop_flag : status;
}
