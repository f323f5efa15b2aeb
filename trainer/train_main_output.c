/* train_main_output: what sluice-trainer writes: the trace, the gathered
 * --predictions, --save-weights, the progress line, the --metrics lines,
 * the periodic log line and the summary (see train_main_int.h). */
#include "train_main_int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_json.h"
#include "sl_log.h"

/* The weights as a NumPy .npy file (version 1.0, little-endian float32,
 * one flat vector in the model's parameter order: W1 [in][out], b1, W2,
 * b2, ...), written through sl_output: an exclusive temporary renamed over
 * a regular file, a device or FIFO written in place. */
int trainer_save_weights(const char *path, const float *p, size_t n, struct sl_error *err)
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
    unsigned char magic[10] = {
        0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff), (unsigned char)(hlen >> 8)};
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

int trainer_trace_piece(struct sl_buf *b, const struct client_piece *p, const char *feature, FILE *out)
{
    sl_buf_reset(b);
    int rc = sl_buf_printf(b,
                           "{\"worker\":%u,\"replica\":%u,\"epoch\":%" PRIu64 ",\"step\":%" PRIu64 ",\"seq\":%" PRIu64
                           ",\"size\":%u,\"ids\":[",
                           p->worker, p->replica, p->epoch, p->step, p->seq, p->rows);
    size_t flen = strlen(feature);
    for (size_t i = 0; rc == 0 && i < p->ntensors; i++) {
        const struct client_tensor *t = &p->t[i];
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
            const struct client_tensor *o = NULL;
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
int trainer_check_trace_feature(const struct sl_wire_welcome *w, const char *feature, struct sl_error *err)
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
            int n = snprintf(names + used, sizeof names - used, "%s%.*s (%s)", i ? ", " : "",
                             (int)w->fields[i].name_len, w->fields[i].name, sl_wire_dtype_name(w->fields[i].dtype));
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
        return sl_error_set(err, SL_EINVAL,
                            "--trace-feature: tensor '%s' is %s; the trace lists int64 values or bytes "
                            "as strings",
                            feature, sl_wire_dtype_name(f->dtype));
    return 0;
}

static const struct client_tensor *find_int64(const struct client_piece *p, const char *name)
{
    for (size_t i = 0; i < p->ntensors; i++)
        if (strcmp(p->t[i].name, name) == 0 && p->t[i].dtype == SL_WIRE_INT64 && p->t[i].bytes == 8ull * p->rows)
            return &p->t[i];
    return NULL;
}

int trainer_gather_keep(struct pred_gather *g, int slot, const struct client_piece *pieces, uint32_t replicas,
                        const char *id_name, const char *label_name, struct sl_error *err)
{
    size_t total = 0;
    for (uint32_t r = 0; r < replicas && r < 64; r++)
        total += pieces[r].rows;
    if (total > g->cap[slot]) {
        int64_t *a = sl_realloc(g->ids[slot], total * sizeof *a),
                *b = a ? sl_realloc(g->labels[slot], total * sizeof *b) : NULL;
        if (a != NULL)
            g->ids[slot] = a;
        if (b == NULL)
            return sl_error_set(err, SL_ENOMEM, "--predictions: out of memory");
        g->labels[slot] = b;
        g->cap[slot] = total;
    }
    size_t k = 0;
    for (uint32_t r = 0; r < replicas && r < 64; r++) {
        const struct client_piece *p = &pieces[r];
        g->rows[slot][r] = p->rows;
        if (p->rows == 0)
            continue;
        const struct client_tensor *id = find_int64(p, id_name), *lb = find_int64(p, label_name);
        if (id == NULL || lb == NULL)
            return sl_error_set(err, SL_EINVAL, "--predictions: the evaluation pieces need int64 scalars '%s' and '%s'",
                                id_name, label_name);
        memcpy(g->ids[slot] + k, id->data, 8ull * p->rows);
        memcpy(g->labels[slot] + k, lb->data, 8ull * p->rows);
        k += p->rows;
    }
    return 0;
}

int trainer_gather_add(struct pred_gather *g, int slot, const struct train_loop *loop, uint32_t replicas,
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
int trainer_gather_write(const struct pred_gather *g, struct train_loop *loop, uint32_t worker, double rows,
                         double correct, const char *path, struct sl_error *err)
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
        rc = sl_error_set(err, SL_EINVAL,
                          "--predictions: %.0f elements have an id outside 0..%zu (or a label or "
                          "prediction out of range)",
                          (double)v[3 * N], N - 1);
    for (size_t i = 0; rc == 0 && i < N; i++)
        if (v[i] != 1)
            rc = sl_error_set(err, SL_EINVAL,
                              "--predictions: element id %zu was evaluated %.0f times (ids must be "
                              "0..N-1, each once)",
                              i, (double)v[i]);
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

void trainer_gather_free(struct pred_gather *g)
{
    for (int s = 0; s < 2; s++) {
        sl_free(g->ids[s]);
        sl_free(g->labels[s]);
    }
    sl_free(g->out);
}

void trainer_progress_line_draw(struct progress_line *b, uint64_t epoch, uint64_t step, double loss, double rate,
                                double stall_pct)
{
    if (!sl_status_line_due(&b->line))
        return;
    char ep[48], st[48];
    if (b->epochs)
        snprintf(ep, sizeof ep, "%" PRIu64 "/%" PRIu64, epoch + 1, b->epochs);
    else
        snprintf(ep, sizeof ep, "%" PRIu64, epoch + 1);
    if (b->steps_per_epoch)
        snprintf(st, sizeof st, "%" PRIu64 "/%" PRIu64, step + 1, b->steps_per_epoch);
    else
        snprintf(st, sizeof st, "%" PRIu64, step + 1);
    sl_status_line_draw(&b->line, "epoch %s step %s  loss %.4f  %.0f samples/s  input stall %.1f%%", ep, st, loss, rate,
                        stall_pct);
}

void trainer_progress_line_clear(struct progress_line *b)
{
    sl_status_line_clear(&b->line);
}

/* stdout carries the JSON summary and nothing else. Libraries may print
 * there: NCCL writes its log (NCCL_DEBUG, if only its version line) to
 * stdout unless NCCL_DEBUG_FILE names a file, which it opens truncating,
 * so /dev/stderr is no answer. The summary keeps a private duplicate of
 * stdout, and fd 1 becomes a copy of stderr. */
void trainer_split_stdout(struct trainer *t)
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
int trainer_open_trace(struct trainer *t)
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
    size_t F = client_wait_by_feeder(t->cl, now, MAX_FEEDERS), at = 0;
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
    if (worst >= 0 && client_feeder_stages(t->cl, (size_t)worst, ns, &stage) != 0)
        stage = -1;
    if (at < cap)
        snprintf(out + at, cap - at, "],\"input_bound_feeder\":%d,\"input_bound_stage\":\"%s\"", worst,
                 worst >= 0 && stage >= 0 ? client_stage_name(stage) : "");
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

void trainer_write_metrics(struct trainer *t, struct run_counters *c, const struct staged_step *s,
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
            s->epoch, s->step, res->rows, json_real(loss, sizeof loss, 6, res->loss), res->accuracy, dt, waited,
            dt > 0 ? (double)res->rows / dt : 0.0, dt > 0 ? 100.0 * waited / dt : 0.0, h2d_rate(&m, &c->m0),
            train_loop_weights_hash(t->loop), fw, ps);
    fflush(t->mf); /* read while it grows (a benchmark's first step, a dashboard) */
    c->m0 = m;
    c->step_t0 = now;
}

/* The log line every --log-every steps (or per epoch): means since the
 * last one, the rates since the first step. */
void trainer_log_progress(struct trainer *t, struct run_counters *c, const struct staged_step *s)
{
    t->last_loss = c->loss_steps ? c->loss_sum / (double)c->loss_steps : 0;
    t->last_acc = c->loss_steps ? c->acc_sum / (double)c->loss_steps : 0;
    struct train_counters m;
    train_metrics_read(t->m, &m);
    double el = sl_clock_s() - t->t_first;
    /* who the input waited for since the last log line (several feeders) */
    char who[32 + 24 * MAX_FEEDERS] = "";
    double now[MAX_FEEDERS], total = 0;
    size_t F = client_wait_by_feeder(t->cl, now, MAX_FEEDERS), at = 0;
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
    if (total > 0 && client_feeder_stages(t->cl, top, ns, &stage) != 0)
        stage = -1;
    if (at > 0 && at < sizeof who)
        snprintf(who + at, sizeof who - at, "%s%s)", stage >= 0 ? "; its busiest stage: " : "",
                 stage >= 0 ? client_stage_name(stage) : "");
    else if (total > 0 && stage >= 0) /* one feeder */
        snprintf(who, sizeof who, " (the feeder's busiest stage: %s)", client_stage_name(stage));
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

/* The summary line: on stdout (the run's result, for scripts and
 * sluice-bench) and at the end of --trace, which is committed (a failed
 * run's trace stays, its summary saying "ok":false) unless writing it
 * failed. Returns the final status. */
int trainer_report(struct trainer *t, int status)
{
    const struct trainer_opts *o = &t->o;
    double secs = t->t_train_end - t->t0, stream = t->t_first > 0 ? t->t_train_end - t->t_first : 0;
    struct train_counters st; /* h2d: staged for training and evaluation */
    train_metrics_read(t->m, &st);
    char summary[1600 + 16 * MAX_FEEDERS], ps[256] = "", fw[32 + 16 * MAX_FEEDERS] = "", loss[64];
    if (t->cl != NULL) { /* the input wait by the feeder whose piece ended it */
        double w[MAX_FEEDERS];
        size_t F = client_wait_by_feeder(t->cl, w, MAX_FEEDERS), at = 0;
        at += (size_t)snprintf(fw, sizeof fw, ",\"input_wait_by_feeder_s\":[");
        for (size_t j = 0; j < F && at < sizeof fw; j++)
            at += (size_t)snprintf(fw + at, sizeof fw - at, "%s%.4f", j ? "," : "", w[j]);
        if (at < sizeof fw)
            snprintf(fw + at, sizeof fw - at, "]");
    }
    /* a run a signal cut short: this process's signal, or (a ring job's
     * agreed stop) another worker's */
    const char *stopped_by = !trainer_stop_flag || status == 0       ? "null"
                             : t->stop_agree && !trainer_stop_wanted ? "\"another worker's signal\""
                                                                     : "\"signal\"";
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
             ",\"h2d_gb_per_s\":%.3f,\"feeder_rejoins\":%" PRIu64 ",\"feeder_takeovers\":%" PRIu64
             ",\"feeder_joins\":%" PRIu64 ",\"shm_pieces\":%" PRIu64 ",\"restored_step\":%" PRIu64
             ",\"checkpoints\":%" PRIu64 ",\"checkpoint_s\":%.4f,\"stopped_by\":%s%s%s}}\n",
             o->worker, t->replicas, status == 0 ? "true" : "false", st.steps, st.epochs, st.pieces, st.rows, st.bytes,
             secs, secs > 0 ? (double)st.rows / secs : 0.0, st.wait_s, stream,
             stream > 0 ? (double)st.rows / stream : 0.0, stream > 0 ? (double)st.bytes / stream : 0.0,
             trainer_model_names[o->model], json_real(loss, sizeof loss, 5, t->last_loss), t->last_acc,
             stream > 0 ? 100.0 * st.wait_s / secs : 0.0, t->loop ? train_loop_weights_hash(t->loop) : (uint64_t)0,
             t->test_rows, t->test_rows > 0 ? t->test_correct / t->test_rows : 0.0, trainer_mode_names[o->mode],
             st.h2d_bytes, st.h2d_s > 0 ? (double)st.h2d_bytes / st.h2d_s / 1e9 : 0.0, st.rejoins, st.takeovers,
             st.joins, st.shm_pieces, t->start_step, t->ckpts, t->ckpt_s_total, stopped_by, fw, ps);
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
