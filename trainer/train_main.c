/* sluice-trainer: a trainer worker. With --model none it only consumes the
 * job's pieces (the input benchmark and the verification harness): every
 * piece can be written to a trace, one JSON line each, with the values of an
 * int64 feature (default `id`), and a summary line ends the run.
 *
 * With --model softmax|mlp it trains (train_loop.h) on CPU replicas, or on
 * GPU replicas (--devices gpu:..., builds with CUDA), receiving step s+1
 * while step s runs.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sl_alloc.h"
#include "sl_buf.h"
#include "sl_clock.h"
#include "sl_cluster.h"
#include "sl_json.h"
#include "sl_log.h"
#include "sl_output.h"
#include "train_client.h"
#include "train_device.h"
#include "train_loop.h"
#include "train_mirror.h"
#include "train_rendezvous.h"

static volatile sig_atomic_t stop_flag;

static void on_stop(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static const char usage[] =
    "Usage: sluice-trainer --connect ADDR[,ADDR...] --job NAME --worker W --workers N\n"
    "                      --replicas R [OPTION]...\n"
    "\n"
    "Receive a job's per-replica batches from its feeders (listed in feeder index\n"
    "order) as trainer worker W of N with R replicas.\n"
    "\n"
    "  -c, --connect=ADDRS      feeder endpoints, comma-separated, feeder 0 first\n"
    "  -j, --job=NAME           the job's name (as in its job file)\n"
    "  -w, --worker=W           this worker's index (default 0)\n"
    "  -n, --workers=N          trainer workers in the job (default 1)\n"
    "  -r, --replicas=R         replicas of this worker (default: from --devices)\n"
    "      --devices=SPEC       auto (every GPU, else one CPU replica per core), cpu,\n"
    "                           cpu:N, gpu or gpu:0,1 (GPU replicas need a build with\n"
    "                           CUDA); without it, one CPU replica (or --replicas)\n"
    "      --model=M            none (consume and count), softmax or mlp (one thread per\n"
    "                           replica, CPU or GPU)\n"
    "      --hidden=N,N         MLP hidden sizes (default 256,128)\n"
    "      --lr=X --momentum=X  SGD with momentum (default 0.05, 0.9)\n"
    "      --seed=N             weight initialization seed (default 1)\n"
    "      --input=NAME --label=NAME  tensors to train on (default image, label)\n"
    "      --classes=N          label classes (default 10)\n";
/* (in two parts: C99 compilers need only take string literals of 4095 bytes) */
static const char usage2[] =
    "      --save-weights=FILE  the final weights as a NumPy .npy float32 vector\n"
    "      --metrics=FILE       one JSON line per step: epoch, step, rows, loss, accuracy,\n"
    "                           step time, input wait and stall %, samples/s, H2D GB/s,\n"
    "                           weights hash\n"
    "      --predictions=FILE   with --eval-*: every evaluated element's prediction,\n"
    "                           gathered from all workers by its --trace-feature id\n"
    "                           (ids 0..N-1, each once) and written by worker 0 in id\n"
    "                           order, one JSON line each (CPU replicas)\n"
    "      --eval-connect=ADDRS --eval-job=NAME  after training, the accuracy of the\n"
    "                           final weights on that job's data (summed over workers)\n"
    "      --ring=ADDRS         with --workers > 1: one endpoint per worker, in worker\n"
    "                           order; worker w binds its own (gradient all-reduce)\n"
    "      --peers=HOST:PORT,...  the same as worker addresses (TF_CONFIG style): worker w\n"
    "                           binds every interface on its port\n"
    "      --rendezvous-timeout=S  with a model and --workers > 1, the workers meet at\n"
    "                           worker 0's endpoint first and check that they agree\n"
    "                           (job, workers, model, replicas); fail naming the worker\n"
    "                           missing after S seconds (default 60)\n"
    "      --mode=M             mirrored (default: a copy of the weights per replica) or\n"
    "                           tower (replicate_model_fn: one copy, towers; one worker)\n"
    "      --hash-every=K       compare the weights' copies (replicas, workers) every K\n"
    "                           steps (default 100; 0: at the end of each epoch only)\n"
    "      --log-every=N        log loss and accuracy every N steps (0: per epoch)\n"
    "      --progress=auto|on|off  a progress line on stderr (epoch, step, loss,\n"
    "                           samples/s, input stall); auto: worker 0 on a terminal\n"
    "      --credits=N          pieces each feeder may have in flight (default max(16, 4R))\n"
    "      --trace=FILE         one JSON line per piece, then a summary line\n"
    "      --trace-feature=NAME tensor whose values the trace lists as \"ids\" (default id):\n"
    "                           int64 values, or bytes as strings (text lines)\n"
    "      --heartbeat-ms=N     heartbeat interval (default 1000)\n"
    "      --timeout-ms=N       fail when a feeder is silent this long (default 10000); one\n"
    "                           whose connection closes fails the trainer at once\n"
    "      --reconnect-s=S      instead, reconnect to a lost feeder and resume where it\n"
    "                           left off, waiting up to S s for it (or a restarted feeder\n"
    "                           on the same address) to answer (default 0: fail)\n"
    "      --no-shm             never map a feeder's shared piece memory: pieces always\n"
    "                           come by copy (by default a feeder on this host hands\n"
    "                           them over in shared memory; docs/protocol.md)\n"
    "      --cluster=SPEC       TF_CONFIG-style spec (JSON or a file): the 'feeder' list\n"
    "                           gives --connect, the task (chief/worker) --worker and\n"
    "                           --workers, the chief and 'worker' list the ring's\n"
    "                           endpoints, as --peers (TF_CONFIG in the environment works too)\n"
    "  -q, --quiet              warnings and errors only\n"
    "  -h, --help               this help\n"
    "\n"
    "A summary line (JSON) goes to stdout at the end; logs go to stderr.\n"
    "Exit status: 0 all data received, 1 error (the feeder's message is printed), 2 usage.\n";

static int parse_u32(const char *opt, const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (*s == '\0' || *s == '-' || *end != '\0' || errno || v < min || v > max) {
        fprintf(stderr, "sluice-trainer: --%s: expected an integer in [%u, %u], got '%s'\n", opt, min, max, s);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

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
    size_t k = 0;
    for (uint32_t r = 0; r < replicas && r < 64; r++) {
        uint32_t n;
        const int64_t *pred = train_loop_eval_predictions(loop, r, &n);
        if (n != g->rows[slot][r] || (n > 0 && pred == NULL))
            return sl_error_set(err, SL_EINVAL, "--predictions: replica %u predicted %u rows of %u", r, n,
                                g->rows[slot][r]);
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
    if (pthread_create(&t, NULL, loop_create_thread, &j) != 0)
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

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"connect", required_argument, NULL, 'c'},  {"job", required_argument, NULL, 'j'},
        {"worker", required_argument, NULL, 'w'},   {"workers", required_argument, NULL, 'n'},
        {"replicas", required_argument, NULL, 'r'}, {"devices", required_argument, NULL, 'D'},
        {"model", required_argument, NULL, 'M'},    {"credits", required_argument, NULL, 'C'},
        {"trace", required_argument, NULL, 'T'},    {"trace-feature", required_argument, NULL, 'F'},
        {"heartbeat-ms", required_argument, NULL, 'H'}, {"timeout-ms", required_argument, NULL, 'O'},
        {"quiet", no_argument, NULL, 'q'},          {"help", no_argument, NULL, 'h'},
        {"cluster", required_argument, NULL, 'S'},
        {"hidden", required_argument, NULL, 'L'},  {"lr", required_argument, NULL, 'R'},
        {"momentum", required_argument, NULL, 'U'}, {"seed", required_argument, NULL, 'E'},
        {"ring", required_argument, NULL, 'G'},     {"input", required_argument, NULL, 'I'},
        {"label", required_argument, NULL, 'B'},    {"log-every", required_argument, NULL, 'V'},
        {"classes", required_argument, NULL, 'K'},
        {"save-weights", required_argument, NULL, 'W'}, {"metrics", required_argument, NULL, 'Q'},
        {"eval-connect", required_argument, NULL, 'X'}, {"eval-job", required_argument, NULL, 'Y'},
        {"mode", required_argument, NULL, 1001},  {"hash-every", required_argument, NULL, 1002}, /* strategy */
        {"peers", required_argument, NULL, 'P'},    {"rendezvous-timeout", required_argument, NULL, 'Z'},
        {"progress", required_argument, NULL, 1003},     {"reconnect-s", required_argument, NULL, 1005},
        {"predictions", required_argument, NULL, 1004}, {"no-shm", no_argument, NULL, 1006},
        {NULL, 0, NULL, 0}};
    const char *connect = NULL, *job = NULL, *trace = NULL, *feature = "id", *cluster = NULL;
    int tower = 0;             /* --mode tower */
    uint32_t hash_every = 100; /* --hash-every */
    int progress_mode = -1;    /* --progress: -1 auto, 0 off, 1 on */
    const char *predictions_path = NULL; /* --predictions */
    uint64_t h2d_bytes0 = 0;   /* staging counters at the last report */
    double h2d_s0 = 0;
    int worker_set = 0;
    const char *model = "none", *hidden = "256,128", *ring_eps = NULL, *input = "image", *label = "label";
    double lr = 0.05, momentum = 0.9;
    uint32_t seed = 1, log_every = 0, classes = 10;
    const char *eval_connect = NULL, *eval_job = NULL, *save_path = NULL, *metrics_path = NULL;
    double test_rows = 0, test_correct = 0;
    uint32_t worker = 0, workers = 1, replicas = 0, dev_replicas = 0, credits = 0, hb = 0, to = 0, reconnect_s = 0;
    int quiet = 0, no_shm = 0, c;
    /* cluster rendezvous and devices (issue #4) */
    const char *peers = NULL;
    uint32_t rdv_timeout_s = 60;
    static struct train_device_spec devspec;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "c:j:w:n:r:qh", longopts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'c': connect = optarg; break;
        case 'j': job = optarg; break;
        case 'w': bad = parse_u32("worker", optarg, 0, 65535, &worker); worker_set = 1; break;
        case 'n': bad = parse_u32("workers", optarg, 1, 65536, &workers); worker_set = 1; break;
        case 'S': cluster = optarg; break;
        case 'r': bad = parse_u32("replicas", optarg, 1, 1024, &replicas); break;
        case 'C': bad = parse_u32("credits", optarg, 1, 1 << 20, &credits); break;
        case 'H': bad = parse_u32("heartbeat-ms", optarg, 10, 600000, &hb); break;
        case 'O': bad = parse_u32("timeout-ms", optarg, 50, 3600000, &to); break;
        case 1005: bad = parse_u32("reconnect-s", optarg, 0, 86400, &reconnect_s); break;
        case 'T': trace = optarg; break;
        case 'F': feature = optarg; break;
        case 'q': quiet = 1; break;
        case 1006: no_shm = 1; break;
        case 'D': {
            struct sl_error derr = {0};
            if (train_device_spec_parse(optarg, &devspec, &derr) != 0) {
                fprintf(stderr, "sluice-trainer: %s\n", derr.msg);
                return 2;
            }
            dev_replicas = (uint32_t)devspec.count;
            break;
        }
        case 'P': peers = optarg; break;
        case 'Z': bad = parse_u32("rendezvous-timeout", optarg, 1, 86400, &rdv_timeout_s); break;
        case 'M':
            if (strcmp(optarg, "none") != 0 && strcmp(optarg, "softmax") != 0 && strcmp(optarg, "mlp") != 0) {
                fprintf(stderr, "sluice-trainer: --model: none, softmax or mlp\n");
                return 2;
            }
            model = optarg;
            break;
        case 'L': hidden = optarg; break;
        case 'R': lr = atof(optarg); break;
        case 'U': momentum = atof(optarg); break;
        case 'E': bad = parse_u32("seed", optarg, 0, UINT32_MAX, &seed); break;
        case 'G': ring_eps = optarg; break;
        case 'I': input = optarg; break;
        case 'B': label = optarg; break;
        case 'V': bad = parse_u32("log-every", optarg, 0, UINT32_MAX, &log_every); break;
        case 'K': bad = parse_u32("classes", optarg, 2, 100000, &classes); break;
        case 'X': eval_connect = optarg; break;
        case 'W': save_path = optarg; break;
        case 'Q': metrics_path = optarg; break;
        case 'Y': eval_job = optarg; break;
        case 1001: /* --mode */
            if (strcmp(optarg, "mirrored") != 0 && strcmp(optarg, "tower") != 0) {
                fprintf(stderr, "sluice-trainer: --mode: mirrored or tower\n");
                return 2;
            }
            tower = strcmp(optarg, "tower") == 0;
            break;
        case 1002: bad = parse_u32("hash-every", optarg, 0, UINT32_MAX, &hash_every); break;
        case 1003:
            if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0) {
                fprintf(stderr, "sluice-trainer: --progress: auto, on or off, got '%s'\n", optarg);
                return 2;
            }
            progress_mode = optarg[0] == 'a' ? -1 : optarg[1] == 'n';
            break;
        case 1004: predictions_path = optarg; break;
        case 'h': fputs(usage, stdout); fputs(usage2, stdout); return 0;
        default:
            fprintf(stderr, "sluice-trainer: bad option '%s'\nTry 'sluice-trainer --help'\n", argv[optind - 1]);
            return 2;
        }
        if (bad)
            return 2;
    }
    /* a TF_CONFIG-style spec gives the feeders and this worker's place */
    if (cluster != NULL && connect != NULL) {
        fprintf(stderr, "sluice-trainer: --cluster gives the feeders (its 'feeder' list): give it or --connect, "
                        "not both\n");
        return 2;
    }
    const char *spec = cluster ? cluster : getenv("TF_CONFIG");
    char *cluster_list = NULL, *peer_list = NULL;
    /* an explicit --cluster is always read (so a bad one is an error);
     * TF_CONFIG only for what the options leave open */
    if (spec != NULL && (cluster != NULL || connect == NULL || !worker_set ||
                         (ring_eps == NULL && peers == NULL && workers > 1))) {
        struct sl_cluster cs;
        struct sl_error cerr = {0};
        if (sl_cluster_parse(&cs, spec, &cerr) != 0) {
            fprintf(stderr, "sluice-trainer: %s\n", cerr.msg);
            return 2;
        }
        if (!worker_set && sl_cluster_worker(&cs, &worker, &workers, &cerr) != 0) {
            fprintf(stderr, "sluice-trainer: %s\n", cerr.msg);
            sl_cluster_free(&cs);
            return 2;
        }
        if (connect == NULL && cs.nfeeders > 0) {
            cluster_list = sl_calloc(cs.nfeeders, SL_CLUSTER_MAX_ADDR + 1);
            for (size_t i = 0; cluster_list != NULL && i < cs.nfeeders; i++) {
                if (i)
                    strcat(cluster_list, ",");
                strcat(cluster_list, cs.feeders[i]);
            }
            connect = cluster_list;
        }
        /* the chief and workers are the ring, as with --peers */
        if (ring_eps == NULL && peers == NULL && cs.workers > 1 && cs.workers == workers) {
            peer_list = sl_calloc(cs.workers, SL_CLUSTER_MAX_ADDR + 1);
            for (size_t i = 0; peer_list != NULL && i < cs.workers; i++) {
                if (i)
                    strcat(peer_list, ",");
                strcat(peer_list, cs.worker_addrs[i]);
            }
            peers = peer_list;
        }
        sl_cluster_free(&cs);
    }
    if (optind < argc || connect == NULL || job == NULL) {
        fprintf(stderr, "sluice-trainer: --connect and --job are required\nTry 'sluice-trainer --help'\n");
        return 2;
    }
    /* --peers (or the cluster spec's workers): bare host:port is tcp, and
     * this worker binds its port on every interface */
    char *ring_from_peers = NULL, ring_bind[SL_CLUSTER_MAX_ADDR] = "";
    if (peers != NULL && ring_eps != NULL) {
        fprintf(stderr, "sluice-trainer: give --ring or --peers, not both\n");
        return 2;
    }
    if (peers != NULL) {
        char *pl = sl_strdup(peers), *ps = NULL;
        size_t np = 0;
        ring_from_peers = sl_calloc(strlen(peers) / 2 + 2, SL_CLUSTER_MAX_ADDR + 1);
        for (char *t = strtok_r(pl, ",", &ps); t != NULL && ring_from_peers != NULL; t = strtok_r(NULL, ",", &ps)) {
            if (strlen(t) + 6 >= SL_CLUSTER_MAX_ADDR) {
                fprintf(stderr, "sluice-trainer: --peers: '%s' is too long\n", t);
                sl_free(pl);
                sl_free(ring_from_peers);
                sl_free(peer_list);
                sl_free(cluster_list);
                return 2;
            }
            if (np)
                strcat(ring_from_peers, ",");
            if (strstr(t, "://") == NULL)
                strcat(ring_from_peers, "tcp://");
            strcat(ring_from_peers, t);
            np++;
        }
        sl_free(pl);
        /* this worker's own endpoint, the np-th of the list */
        char *own = ring_from_peers;
        for (uint32_t k = 0; own != NULL && k < worker && (own = strchr(own, ',')) != NULL; k++)
            own++;
        if (own != NULL && np == workers) {
            char ep[SL_CLUSTER_MAX_ADDR];
            snprintf(ep, sizeof ep, "%.*s", (int)strcspn(own, ","), own);
            sl_cluster_bind_addr(ep, ring_bind, sizeof ring_bind);
        }
        if (np != workers) {
            fprintf(stderr, "sluice-trainer: --peers needs one address per worker (%u), got %zu\n", workers, np);
            sl_free(ring_from_peers);
            sl_free(peer_list);
            sl_free(cluster_list);
            return 2;
        }
        ring_eps = ring_from_peers;
    }
    /* GPU replicas train with a model (the spec parser already refused GPU
     * lists in builds without CUDA); tower mode stays on CPU replicas */
    int gpu = devspec.count > 0 && strcmp(devspec.kind, "cpu") != 0 && strcmp(model, "none") != 0;
    if (gpu && tower) {
        fprintf(stderr, "sluice-trainer: --mode tower runs on CPU replicas only (got --devices with GPUs)\n");
        return 2;
    }
    /* stdout carries the JSON summary and nothing else. Libraries may
     * print there: NCCL writes its log (NCCL_DEBUG, if only its version
     * line) to stdout unless NCCL_DEBUG_FILE names a file, which it opens
     * truncating, so /dev/stderr is no answer. The summary keeps a private
     * duplicate of stdout, and fd 1 becomes a copy of stderr. */
    FILE *summary_out = stdout;
    {
        fflush(stdout);
        int fd = dup(STDOUT_FILENO);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (f != NULL && dup2(STDERR_FILENO, STDOUT_FILENO) >= 0)
            summary_out = f;
        else if (f != NULL)
            fclose(f);
        else if (fd >= 0)
            close(fd);
    }
    if (replicas == 0)
        replicas = dev_replicas ? dev_replicas : 1;
    if (dev_replicas && dev_replicas != replicas) {
        fprintf(stderr, "sluice-trainer: --replicas %u disagrees with --devices (%u replicas)\n", replicas,
                dev_replicas);
        return 2;
    }
    if (worker >= workers) {
        fprintf(stderr, "sluice-trainer: --worker %u must be below --workers %u\n", worker, workers);
        return 2;
    }
    if (tower && workers > 1) { /* replicate_model_fn is single-machine */
        fprintf(stderr, "sluice-trainer: --mode tower runs on one worker (got --workers %u)\n", workers);
        return 2;
    }
    sl_log_setup("sluice-trainer", 2, quiet ? SL_LOG_WARN : SL_LOG_INFO);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    /* split the endpoint list */
    char *list = sl_strdup(connect);
    const char *addrs[64];
    size_t naddrs = 0;
    char *save = NULL;
    for (char *tok = strtok_r(list, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (naddrs == 64) {
            fprintf(stderr, "sluice-trainer: at most 64 feeders\n");
            sl_free(list);
            return 2;
        }
        addrs[naddrs++] = tok;
    }
    /* --trace and --metrics grow in place (they are read while the run
     * goes on); a device or FIFO is written, never replaced (sl_output.h) */
    struct sl_output *trace_out = NULL;
    FILE *tf = NULL;
    int trace_failed = 0;
    if (trace != NULL) {
        struct sl_error oerr = {0};
        if (sl_output_open(&trace_out, trace, SL_OUTPUT_STREAM, &oerr) != 0) {
            sl_log(SL_LOG_ERROR, "--trace: %s", oerr.msg);
            sl_free(list);
            return 1;
        }
        tf = sl_output_stream(trace_out);
    }
    /* the workers meet at worker 0's ring endpoint and check that they
     * agree before anyone trains (issue #4: cluster rendezvous) */
    char group_id[TRAIN_LOOP_ID_BYTES];
    int have_group_id = 0;
    if (strcmp(model, "none") != 0 && workers > 1 && ring_eps != NULL) {
        char cfg[TRAIN_RENDEZVOUS_MAX_CONFIG], root[SL_CLUSTER_MAX_ADDR], root_bind[SL_CLUSTER_MAX_ADDR];
        snprintf(cfg, sizeof cfg,
                 "model=%s hidden=%s classes=%u input=%s label=%s lr=%g momentum=%g seed=%u replicas=%u devices=%s",
                 model, strcmp(model, "mlp") == 0 ? hidden : "-", classes, input, label, lr, momentum, seed,
                 replicas, devspec.count > 0 ? devspec.kind : "cpu");
        snprintf(root, sizeof root, "%.*s", (int)strcspn(ring_eps, ","), ring_eps);
        if (ring_bind[0] != '\0')
            sl_cluster_bind_addr(root, root_bind, sizeof root_bind);
        const char *names[64];
        char *nl = sl_strdup(ring_eps), *ns = NULL;
        size_t nn = 0;
        for (char *t = strtok_r(nl, ",", &ns); t != NULL && nn < 64; t = strtok_r(NULL, ",", &ns))
            names[nn++] = t;
        struct train_rendezvous_opts ro = {.rank = (int)worker, .size = (int)workers, .root = root,
                                           .bind = ring_bind[0] != '\0' ? root_bind : NULL,
                                           .names = nn == workers ? names : NULL, .job = job, .config = cfg,
                                           .timeout_ms = (int)(rdv_timeout_s * 1000)};
        struct sl_error rerr = {0};
        size_t blob_len = 0;
        double rt0 = sl_clock_s();
        /* GPU replicas: worker 0's NCCL group id travels in the blob */
        int rrc = gpu && worker == 0 ? train_loop_group_id(group_id, &rerr) : 0;
        ro.blob = gpu && worker == 0 ? group_id : NULL;
        ro.blob_len = gpu && worker == 0 ? sizeof group_id : 0;
        if (rrc == 0)
            rrc = train_rendezvous(&ro, gpu ? group_id : NULL, gpu ? sizeof group_id : 0, &blob_len, &rerr);
        if (rrc == 0 && gpu && blob_len != sizeof group_id)
            rrc = sl_error_set(&rerr, SL_EPROTO, "rendezvous: worker 0 sent a %zu-byte group id (expected %zu)",
                               blob_len, sizeof group_id);
        else if (rrc == 0 && gpu)
            have_group_id = 1;
        if (rrc != 0) {
            sl_log(SL_LOG_ERROR, "%s", rerr.msg);
            sl_free(nl);
            sl_free(list);
            sl_free(ring_from_peers);
            sl_free(peer_list);
            sl_free(cluster_list);
            sl_output_abort(trace_out);
            return 1;
        }
        sl_log(SL_LOG_INFO, "rendezvous: %u workers agree (worker %u, %.2f s; %s)", workers, worker,
               sl_clock_s() - rt0, cfg);
        sl_free(nl);
    }
    struct train_client_opts o = {.feeders = addrs, .nfeeders = naddrs, .job = job, .worker = worker,
                                  .workers = workers, .replicas = replicas, .credits = credits,
                                  .heartbeat_ms = (int)hb, .timeout_ms = (int)to,
                                  .reconnect_ms = (int)(reconnect_s * 1000), .no_shm = no_shm,
                                  .stop = &stop_flag};
    struct sl_error err = {0};
    struct train_client *cl = NULL;
    double t0 = sl_clock_s();
    int status = 0;
    if (train_client_open(&cl, &o, &err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        status = 1;
    } else if (trace != NULL && check_trace_feature(train_client_welcome(cl), feature, &err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg); /* the schema is known from the WELCOME: fail before any step */
        status = 1;
    }
    /* training: the model, and the ring across workers */
    struct train_loop *loop = NULL;
    struct train_ring *ring = NULL;
    char *ring_list = NULL;
    if (status == 0 && strcmp(model, "none") != 0) {
        struct train_loop_opts lo = {.input = input, .label = label, .replicas = replicas, .worker = worker,
                                     .workers = workers, .hash_every = hash_every,
                                     .mode = tower ? TRAIN_STRATEGY_TOWER : TRAIN_STRATEGY_MIRRORED,
                                     .device = gpu ? "cuda" : "cpu", .ordinals = gpu ? devspec.ordinals : NULL,
                                     .dev_id = have_group_id ? group_id : NULL};
        lo.model.classes = (int)classes;
        lo.model.seed = seed;
        lo.model.lr = (float)lr;
        lo.model.momentum = (float)momentum;
        if (strcmp(model, "mlp") == 0) {
            char *hl = sl_strdup(hidden), *hs = NULL;
            for (char *t = strtok_r(hl, ",", &hs); t != NULL && lo.model.nhidden < TRAIN_MODEL_MAX_HIDDEN;
                 t = strtok_r(NULL, ",", &hs))
                lo.model.hidden[lo.model.nhidden++] = atoi(t);
            sl_free(hl);
        }
        if (workers > 1) {
            const char *eps[64];
            size_t neps = 0;
            char *save2 = NULL;
            ring_list = sl_strdup(ring_eps ? ring_eps : "");
            for (char *t = strtok_r(ring_list, ",", &save2); t != NULL && neps < 64; t = strtok_r(NULL, ",", &save2))
                eps[neps++] = t;
            if (neps != workers) {
                sl_log(SL_LOG_ERROR, "--ring needs one endpoint per worker (%u), got %zu", workers, neps);
                status = 1;
            } else {
                struct train_ring_opts ro = {.rank = (int)worker, .size = (int)workers, .endpoints = eps,
                                             .timeout_ms = to ? (int)to : 0, .connect_timeout_ms = 30000,
                                             .bind = ring_bind[0] != '\0' ? ring_bind : NULL};
                if (train_ring_open(&ring, &ro, &err) != 0) {
                    sl_log(SL_LOG_ERROR, "%s", err.msg);
                    status = 1;
                }
            }
        }
        lo.ring = ring;
        if (status == 0 && loop_create_alive(&loop, &lo, cl, &err) != 0) {
            sl_log(SL_LOG_ERROR, "%s", err.msg);
            status = 1;
        }
    }
    struct sl_output *metrics_out = NULL;
    FILE *mf = NULL;
    if (status == 0 && metrics_path != NULL) {
        if (sl_output_open(&metrics_out, metrics_path, SL_OUTPUT_STREAM, &err) != 0) {
            sl_log(SL_LOG_ERROR, "--metrics: %s", err.msg);
            status = 1;
        } else {
            mf = sl_output_stream(metrics_out);
        }
    }
    double step_t0 = sl_clock_s();
    double loss_sum = 0, acc_sum = 0, last_loss = 0, last_acc = 0;
    uint64_t loss_steps = 0;
    struct sl_buf line;
    sl_buf_init(&line, 0);
    uint64_t steps = 0, epochs_seen = 0, last_epoch = UINT64_MAX;
    double t_first = 0; /* first step received: the stream's own time starts here */
    if (status == 0) {
        const struct sl_wire_welcome *w = train_client_welcome(cl);
        sl_log(SL_LOG_INFO, "worker %u of %u, %u replicas: %zu feeders, %" PRIu64 " steps per epoch, %u tensors",
               worker, workers, replicas, naddrs, w->steps_per_epoch, w->ntensors);
        const struct train_piece *pieces;
        int rc;
        struct progress_line bar = {.on = progress_mode == 1 || (progress_mode < 0 && worker == 0 && isatty(2)),
                                    .steps_per_epoch = w->steps_per_epoch, .epochs = w->epochs};
        /* Look-ahead: step s+1 is received and staged (its copies queued on
         * the replicas' devices) before step s runs, so on a GPU the copy
         * of s+1 overlaps step s; the last step runs after the stream ends.
         * A step's pieces are borrowed until the next receive: the stagers
         * have copied them by then (train_loop_put), and what the metrics
         * and logs need of the step is kept in `prev`. */
        struct staged_step {
            uint64_t epoch, step;
            uint32_t flags;
        } cur = {0}, prev = {0};
        int have_prev = 0;
        uint64_t m_h2d_bytes = 0; /* staging and input-wait counters at the last metrics line */
        double m_h2d_s = 0, m_wait = 0;
        uint64_t ran = 0;
        for (;;) {
            rc = stop_flag ? 0 : train_client_next_step(cl, &pieces, &err);
            if (stop_flag || (rc != 0 && rc != SL_END))
                break;
            int got = rc == 0;
            if (got) {
                if (steps++ == 0)
                    t_first = sl_clock_s();
                if (pieces[0].epoch != last_epoch) {
                    last_epoch = pieces[0].epoch;
                    epochs_seen++;
                }
                for (uint32_t r = 0; tf != NULL && r < replicas; r++)
                    if (trace_piece(&line, &pieces[r], feature, tf) != 0) {
                        sl_log(SL_LOG_ERROR, "cannot write the trace line to %s (I/O error or malformed string "
                                             "offsets)", trace);
                        trace_failed = 1;
                        rc = SL_EIO;
                        break;
                    }
                if (rc != 0)
                    break;
                if (loop != NULL) {
                    cur = (struct staged_step){.epoch = pieces[0].epoch, .step = pieces[0].step,
                                               .flags = pieces[0].flags};
                    if ((rc = train_loop_put(loop, pieces, replicas, &err)) != 0) {
                        progress_line_clear(&bar);
                        sl_log(SL_LOG_ERROR, "%s", err.msg);
                        rc = SL_EIO;
                        break;
                    }
                }
            }
            if (loop != NULL && have_prev) {
                struct train_step_result res;
                if ((rc = train_loop_run(loop, &res, &err)) != 0) {
                    progress_line_clear(&bar);
                    sl_log(SL_LOG_ERROR, "%s", err.msg);
                    rc = SL_EIO;
                    break;
                }
                ran++;
                if (mf != NULL) {
                    /* the step's time runs from the previous step's end
                     * (receiving and staging included); its H2D rate is
                     * the staging done since then */
                    double now = sl_clock_s(), dt = now - step_t0;
                    uint64_t sb;
                    double ss;
                    train_loop_stage_stats(loop, &sb, &ss);
                    /* the input wait within the same interval (with the
                     * look-ahead, that is the wait for the next step's
                     * pieces, received before this step ran) */
                    struct train_client_stats ws;
                    train_client_stats(cl, &ws);
                    double waited = ws.wait_s - m_wait;
                    m_wait = ws.wait_s;
                    fprintf(mf,
                            "{\"epoch\":%" PRIu64 ",\"step\":%" PRIu64 ",\"rows\":%" PRIu64
                            ",\"loss\":%.6f,\"accuracy\":%.6f,\"step_s\":%.6f,\"input_wait_s\":%.6f"
                            ",\"samples_per_s\":%.1f,\"input_stall_pct\":%.2f,\"h2d_gb_per_s\":%.3f"
                            ",\"weights_hash\":\"%016" PRIx64 "\"}\n",
                            prev.epoch, prev.step, res.rows, res.loss, res.accuracy, dt, waited,
                            dt > 0 ? (double)res.rows / dt : 0.0, dt > 0 ? 100.0 * waited / dt : 0.0,
                            ss > m_h2d_s ? (double)(sb - m_h2d_bytes) / (ss - m_h2d_s) / 1e9 : 0.0,
                            train_loop_weights_hash(loop));
                    m_h2d_bytes = sb;
                    m_h2d_s = ss;
                    step_t0 = now;
                }
                if (res.rows > 0) {
                    loss_sum += res.loss;
                    acc_sum += res.accuracy;
                    loss_steps++;
                }
                int last = (prev.flags & SL_WIRE_PIECE_LAST_STEP) != 0;
                if (last && (rc = train_loop_check_mirrored(loop, &err)) != 0) {
                    sl_log(SL_LOG_ERROR, "%s", err.msg);
                    rc = SL_EIO;
                    break;
                }
                if (bar.on) {
                    struct train_client_stats cs;
                    train_client_stats(cl, &cs);
                    double el = sl_clock_s() - t_first;
                    progress_line_draw(&bar, prev.epoch, prev.step, loss_steps ? loss_sum / (double)loss_steps : 0,
                                       el > 0 ? (double)cs.rows * workers / el : 0, el > 0 ? 100.0 * cs.wait_s / el : 0);
                }
                if ((log_every && ran % log_every == 0) || (!log_every && last)) {
                    progress_line_clear(&bar);
                    last_loss = loss_steps ? loss_sum / (double)loss_steps : 0;
                    last_acc = loss_steps ? acc_sum / (double)loss_steps : 0;
                    struct train_client_stats cs;
                    train_client_stats(cl, &cs);
                    double el = sl_clock_s() - t_first;
                    uint64_t h2d_bytes;
                    double h2d_s;
                    train_loop_stage_stats(loop, &h2d_bytes, &h2d_s);
                    sl_log(SL_LOG_INFO,
                           "epoch %" PRIu64 " step %" PRIu64 ": loss %.4f accuracy %.4f (mean since the last report), "
                           "%.0f samples/s, input stall %.1f%%, H2D %.2f GB/s, weights %016" PRIx64,
                           prev.epoch, prev.step, last_loss, last_acc,
                           el > 0 ? (double)cs.rows * workers / el : 0, el > 0 ? 100.0 * cs.wait_s / el : 0,
                           h2d_s > h2d_s0 ? (double)(h2d_bytes - h2d_bytes0) / (h2d_s - h2d_s0) / 1e9 : 0.0,
                           train_loop_weights_hash(loop));
                    h2d_bytes0 = h2d_bytes;
                    h2d_s0 = h2d_s;
                    loss_sum = acc_sum = 0;
                    loss_steps = 0;
                }
            }
            if (!got) {
                rc = SL_END;
                break;
            }
            prev = cur;
            have_prev = loop != NULL;
        }
        progress_line_clear(&bar);
        if (stop_flag) {
            sl_log(SL_LOG_INFO, "stopped by a signal after %" PRIu64 " steps", steps);
            status = 1;
        } else if (rc != SL_END) {
            if (rc != SL_EIO)
                sl_log(SL_LOG_ERROR, "%s", err.msg);
            status = 1;
        }
    }
    double t_train_end = sl_clock_s();
    if (metrics_out != NULL) { /* a failed run's metrics stay: they say how far it went */
        struct sl_error oerr = {0};
        if (sl_output_commit(metrics_out, &oerr) != 0 && status == 0) {
            sl_log(SL_LOG_ERROR, "--metrics: %s", oerr.msg);
            status = 1;
        }
    }
    if (status == 0 && loop != NULL && save_path != NULL) {
        struct train_model *mm = train_loop_model(loop);
        if (save_weights(save_path, train_model_params(mm), train_model_nparams(mm), &err) != 0) {
            sl_log(SL_LOG_ERROR, "%s", err.msg);
            status = 1;
        }
    }
    /* evaluation on a second job: every worker predicts its own pieces; the
     * counts are summed over workers */
    if (status == 0 && loop != NULL && eval_connect != NULL && !stop_flag) {
        char *elist = sl_strdup(eval_connect), *esave = NULL;
        const char *eaddrs[64];
        size_t neaddrs = 0;
        for (char *t = strtok_r(elist, ",", &esave); t != NULL && neaddrs < 64; t = strtok_r(NULL, ",", &esave))
            eaddrs[neaddrs++] = t;
        struct train_client_opts eo = o;
        eo.feeders = eaddrs;
        eo.nfeeders = neaddrs;
        eo.job = eval_job ? eval_job : job;
        struct train_client *ec = NULL;
        const struct train_piece *pieces;
        struct gather g = {0};
        int rc = train_client_open(&ec, &eo, &err);
        /* look-ahead as in training: stage step s+1, then predict step s */
        for (int have_prev = 0, slot = 0; rc == 0 && !stop_flag; slot ^= 1) {
            int got = (rc = train_client_next_step(ec, &pieces, &err)) == 0;
            if (rc != 0 && rc != SL_END)
                break;
            if (got && predictions_path != NULL && (rc = gather_keep(&g, slot, pieces, replicas, feature, label, &err)) != 0)
                break;
            if (got && (rc = train_loop_put(loop, pieces, replicas, &err)) != 0)
                break;
            if (have_prev && (rc = train_loop_eval_run(loop, &test_rows, &test_correct, &err)) != 0)
                break;
            if (have_prev && predictions_path != NULL && (rc = gather_add(&g, slot ^ 1, loop, replicas, &err)) != 0)
                break;
            if (!got) {
                rc = SL_END;
                break;
            }
            have_prev = 1;
        }
        if (rc == SL_END) {
            float counts[2] = {(float)test_rows, (float)test_correct};
            rc = train_loop_sum(loop, counts, 2, &err);
            test_rows = counts[0];
            test_correct = counts[1];
        }
        if (rc == 0 && predictions_path != NULL && !stop_flag) /* rc is the counts' sum's */
            rc = gather_write(&g, loop, worker, test_rows, test_correct, predictions_path, &err);
        gather_free(&g);
        if (rc != 0) {
            sl_log(SL_LOG_ERROR, "evaluation: %s", err.msg);
            status = 1;
        } else {
            sl_log(SL_LOG_INFO, "test accuracy %.4f over %.0f elements (all workers)",
                   test_rows > 0 ? test_correct / test_rows : 0, test_rows);
        }
        train_client_close(ec);
        sl_free(elist);
    }
    double t_end = t_train_end;
    double secs = t_end - t0, stream = t_first > 0 ? t_end - t_first : 0;
    struct train_client_stats st = {0};
    if (cl != NULL)
        train_client_stats(cl, &st);
    uint64_t h2d_bytes = 0; /* staged for training and evaluation */
    double h2d_s = 0;
    if (loop != NULL)
        train_loop_stage_stats(loop, &h2d_bytes, &h2d_s);
    char summary[1024];
    snprintf(summary, sizeof summary,
             "{\"summary\":{\"worker\":%u,\"replicas\":%u,\"ok\":%s,\"steps\":%" PRIu64 ",\"epochs\":%" PRIu64
             ",\"pieces\":%" PRIu64 ",\"elements\":%" PRIu64 ",\"bytes\":%" PRIu64
             ",\"seconds\":%.3f,\"elements_per_s\":%.1f,\"wait_s\":%.3f,\"stream_seconds\":%.3f,"
             "\"stream_elements_per_s\":%.1f,\"stream_bytes_per_s\":%.1f,\"model\":\"%s\",\"loss\":%.5f,"
             "\"accuracy\":%.5f,\"input_stall_pct\":%.2f,\"weights_hash\":\"%016" PRIx64 "\","
             "\"test_rows\":%.0f,\"test_accuracy\":%.5f,\"mode\":\"%s\",\"h2d_bytes\":%" PRIu64
             ",\"h2d_gb_per_s\":%.3f,\"feeder_rejoins\":%" PRIu64 ",\"shm_pieces\":%" PRIu64 "}}\n",
             worker, replicas, status == 0 ? "true" : "false", steps, epochs_seen, st.pieces, st.rows, st.bytes, secs,
             secs > 0 ? (double)st.rows / secs : 0.0, st.wait_s, stream, stream > 0 ? (double)st.rows / stream : 0.0,
             stream > 0 ? (double)st.bytes / stream : 0.0, model, last_loss, last_acc,
             stream > 0 ? 100.0 * st.wait_s / secs : 0.0, loop ? train_loop_weights_hash(loop) : (uint64_t)0,
             test_rows, test_rows > 0 ? test_correct / test_rows : 0.0, tower ? "tower" : "mirrored", h2d_bytes,
             h2d_s > 0 ? (double)h2d_bytes / h2d_s / 1e9 : 0.0, st.rejoins, st.shm_pieces);
    if (trace_out != NULL && trace_failed) {
        sl_output_abort(trace_out);
    } else if (trace_out != NULL) { /* a failed run's trace stays, its summary saying "ok":false */
        struct sl_error oerr = {0};
        fputs(summary, tf);
        if (sl_output_commit(trace_out, &oerr) != 0 && status == 0) {
            sl_log(SL_LOG_ERROR, "--trace: %s", oerr.msg);
            status = 1;
        }
    }
    fputs(summary, summary_out); /* the run's result, for scripts and sluice-bench */
    if (summary_out != stdout && fclose(summary_out) != 0)
        status = status != 0 ? status : 1;
    train_loop_destroy(loop);
    train_ring_close(ring);
    sl_free(ring_list);
    train_client_close(cl);
    sl_buf_free(&line);
    sl_free(list);
    sl_free(cluster_list);
    sl_free(peer_list);
    sl_free(ring_from_peers);
    return status;
}
