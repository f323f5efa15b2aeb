/* train_main_ps: a parameter-server task (serve_ps) and the evaluator
 * task (run_evaluator) of sluice-trainer (see train_main_int.h). */
#include "train_main_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <string.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_http_metrics.h"
#include "sl_log.h"
#include "sl_prom.h"
#include "train_ps.h"
#include "train_ps_ckpt.h"
#include "train_ps_eval.h"

/* ---- a parameter-server task ---- */

struct ps_serve {
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
    struct ps_serve *pt = arg;
    const struct trainer_opts *o = &pt->t->o;
    uint32_t inputs = train_ps_config_inputs(config, len);
    char text[2 * TRAIN_PS_MAX_CONFIG];
    train_ps_printable(text, sizeof text, config, len);
    if (inputs == 0)
        return sl_error_set(err, SL_EPROTO, "a worker's model description names no input width: '%.200s'", text);
    struct train_model_config mc;
    trainer_model_config_of(o, &mc);
    mc.inputs = (int)inputs;
    int rc =
        train_ps_model_init(&pt->pm, &mc, (uint32_t)pt->t->ps_eps.n, (enum train_ps_placement)o->ps_placement, err);
    if (rc != 0)
        return rc;
    if (strlen(pt->pm.config) != len || memcmp(pt->pm.config, config, len) != 0) {
        /* refused: the next description is tried afresh */
        rc = sl_error_set(err, SL_EINVAL,
                          "the workers' model '%s' is not this parameter server's '%s': start it "
                          "with the workers' model flags",
                          text, pt->pm.config);
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

static int ps_write(void *ctx, struct sl_buf *out)
{
    struct ps_expose *e = ctx;
    struct train_ps_live *l = &e->live;
    struct sl_prom p = {.b = out, .labels = (const char *)e->labels.data};
    sl_prom_process_info(&p, "ps");
#define LOAD(x) atomic_load_explicit(&l->x, memory_order_relaxed)
    sl_prom_counter(&p, "sluice_ps_pulls_total", "PULLs answered (a final pull asked again counts again).",
                    LOAD(pulls));
    sl_prom_counter(&p, "sluice_ps_pushes_total", "Gradients applied (one per worker step).", LOAD(pushes));
    sl_prom_gauge(&p, "sluice_ps_global_step", "Worker steps counted (server 0 counts; the others hold 0).",
                  LOAD(global_step));
    sl_prom_gauge(&p, "sluice_ps_elements", "float32 elements this server holds (0 before the first pull).",
                  LOAD(elements));
    sl_prom_gauge(&p, "sluice_ps_workers_done", "Workers done (final pull, BYE or lost).", LOAD(workers_done));
    sl_prom_gauge(&p, "sluice_ps_workers_lost", "Workers silent past --ps-worker-timeout.", LOAD(lost));
    sl_prom_counter(&p, "sluice_ps_bad_messages_total", "Malformed or refused messages.", LOAD(bad_messages));
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
    case TRAIN_PS_EVAL_NONE: return "none";
    case TRAIN_PS_EVAL_LOST: return "lost";
    case TRAIN_PS_EVAL_BYE: return st->evaluator_served ? "served" : "left";
    default: return st->evaluator_served ? "served" : "unserved";
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
    sl_log(SL_LOG_INFO,
           "parameter server %u: checkpoint: version %" PRIu64 " (global step %" PRIu64 ") written to "
           "%s/%s, %" PRIu64 " bytes in %.1f ms",
           s->index, s->version, s->global_step, o->checkpoint, name, bytes, 1e3 * (sl_clock_s() - t0));
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
        if (trainer_ckpt_dir_ready(o->checkpoint, &err) != 0 ||
            train_ckpt_clean(o->checkpoint, o->ps_task, nps, &removed, &err) != 0)
            goto fail;
        if (removed > 0)
            sl_log(SL_LOG_WARN,
                   "checkpoint: removed %zu temporary file(s) of parameter server %u of %u in %s (a "
                   "write cut short)",
                   removed, o->ps_task, nps, o->checkpoint);
        if (o->restore == NULL) {
            if (train_ckpt_list(o->checkpoint, o->ps_task, nps, &newest, 1, &n, &total, NULL, NULL, 0, &err) != 0)
                goto fail;
            if (n > 0) {
                sl_error_set(&err, SL_EINVAL,
                             "--checkpoint %s already holds %zu checkpoint(s) of parameter server "
                             "%u of %u (the newest: version %" PRIu64 "): give --restore %s to continue from it, or "
                             "another directory",
                             o->checkpoint, total, o->ps_task, nps, newest, o->checkpoint);
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
        if (err.code == SL_EINVAL && o->elastic != NULL) { /* the count is the world's at the checkpoint */
            struct sl_error hint = err;
            sl_error_set(&err, SL_EINVAL,
                         "%s (--elastic: the job goes on in the world its checkpoint was taken in: start the "
                         "servers and the workers with that --workers; joins and leaves change it at an epoch "
                         "boundary)",
                         hint.msg);
        }
        goto fail;
    }
    uint32_t with = 0;
    for (uint32_t w = 0; w < o->workers; w++)
        with += ck->state.pos[w].replicas != 0;
    char world[96] = "";
    if (ck->state.world_changes > 0)
        snprintf(world, sizeof world, "; the world of change %" PRIu64 " from epoch %" PRIu64, ck->state.world_changes,
                 ck->state.world_epoch);
    sl_log(SL_LOG_INFO,
           "parameter server %u: restoring version %" PRIu64 " (global step %" PRIu64 ", %u of %u "
           "workers' positions%s) from %s",
           o->ps_task, ck->state.version, ck->state.global_step, with, o->workers, world, path);
    return 0;
fail:
    sl_log(SL_LOG_ERROR, "%s", err.msg);
    return 1;
}

/* --metrics-listen: the server's figures served live. 0, or 1 with the
 * error logged. */
static int ps_start_metrics(struct trainer *t, struct ps_expose *ex, struct sl_http_metrics **http)
{
    const struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    char index[16];
    snprintf(index, sizeof index, "%u", o->ps_task);
    sl_buf_init(&ex->labels, 4096);
    int lrc = o->job != NULL ? sl_prom_label(&ex->labels, "sluice_job", o->job) : 0;
    if (lrc == 0)
        lrc = sl_prom_label(&ex->labels, "ps", index);
    struct sl_http_metrics_opts ho = {.listen = o->metrics_listen, .fn = ps_write, .ctx = ex};
    if (lrc != 0 || sl_http_metrics_start(http, &ho, &err) != 0) {
        sl_log(SL_LOG_ERROR, "--metrics-listen: %s", lrc != 0 ? "the job's name does not fit a label" : err.msg);
        sl_buf_free(&ex->labels);
        return 1;
    }
    sl_log(SL_LOG_INFO, "metrics: serving /metrics on %s (port %u)", o->metrics_listen, sl_http_metrics_port(*http));
    if (!sl_http_metrics_local(*http))
        sl_log(SL_LOG_WARN, SL_HTTP_METRICS_REACHABLE, o->metrics_listen);
    return 0;
}

/* The serve's outcome logged: the evaluator's, the refusals held back,
 * then the error or the figures. */
static void ps_log_outcome(const struct trainer *t, int rc, const struct train_ps_server_stats *st,
                           struct ps_refusals *refusals, double secs, const struct sl_error *err)
{
    const struct trainer_opts *o = &t->o;
    if (st->evaluator == TRAIN_PS_EVAL_LOST)
        sl_log(SL_LOG_WARN,
               "parameter server %u: the evaluator was silent for %.1f s once the workers were done and "
               "is lost: it read no final weights from this server",
               o->ps_task, o->ps_worker_timeout_s * 1.0);
    else if (st->evaluator == TRAIN_PS_EVAL_BYE && !st->evaluator_served)
        sl_log(SL_LOG_WARN, "parameter server %u: the evaluator left before reading the final weights", o->ps_task);
    sl_log_limit_flush(&refusals->limit, 1);
    if (rc != 0)
        sl_log(SL_LOG_ERROR, "%s", err->msg);
    else
        sl_log(SL_LOG_INFO,
               "parameter server %u: %" PRIu64 " pushes applied, global step %" PRIu64 ", staleness "
               "mean %.2f max %" PRIu64 ", %.1f s",
               o->ps_task, st->pushes, st->global_step,
               st->pushes ? (double)st->staleness_sum / (double)st->pushes : 0.0, st->staleness_max, secs);
}

/* The summary line on stdout: which variables this server held, and its
 * figures. 0, or nonzero when it did not fit. */
static int ps_write_summary(struct trainer *t, int rc, const struct train_ps_server_stats *st,
                            const struct train_ps_model *pm, uint64_t restored, double secs)
{
    const struct trainer_opts *o = &t->o;
    struct sl_buf b;
    sl_buf_init(&b, 0);
    int w = sl_buf_printf(&b, "{\"summary\":{\"ps\":%u,\"servers\":%zu,\"ok\":%s,\"workers\":%u,\"variables\":[",
                          o->ps_task, t->ps_eps.n, rc == 0 ? "true" : "false", o->workers);
    for (size_t i = 0, k = 0; w == 0 && i < pm->layout.nvars; i++)
        if (pm->owner[i] == o->ps_task)
            w = sl_buf_printf(&b, "%s\"%c%d\"", k++ ? "," : "", pm->vars[i].kind, pm->vars[i].layer);
    if (w == 0)
        w = sl_buf_printf(&b,
                          "],\"elements\":%zu,\"pulls\":%" PRIu64 ",\"pushes\":%" PRIu64 ",\"version\":%" PRIu64
                          ",\"global_step\":%" PRIu64 ",\"staleness_mean\":%.4f,\"staleness_max\":%" PRIu64
                          ",\"staleness_hist\":[",
                          st->elements, st->pulls, st->pushes, st->version, st->global_step,
                          st->pushes ? (double)st->staleness_sum / (double)st->pushes : 0.0, st->staleness_max);
    for (int k = 0; w == 0 && k < TRAIN_PS_STALENESS_BUCKETS; k++)
        w = sl_buf_printf(&b, "%s%" PRIu64, k ? "," : "", st->staleness_hist[k]);
    if (w == 0)
        w = sl_buf_printf(&b,
                          "],\"lost_workers\":%u,\"failed_workers\":%u,\"restarted_workers\":%u,"
                          "\"pushes_not_reapplied\":%" PRIu64 ",\"empty_steps\":%" PRIu64
                          ",\"restored_version\":%" PRIu64 ",\"checkpoints\":%" PRIu64 ",\"bad_messages\":%" PRIu64
                          ",\"incarnation\":\"%016" PRIx64 "\",\"evaluator\":"
                          "\"%s\",\"seconds\":%.3f",
                          st->lost, st->left_early, st->restarts, st->skipped, st->empty_pushes, restored,
                          st->checkpoints, st->bad_messages, st->incarnation, ps_eval_word(st), secs);
    if (w == 0 && o->elastic != NULL) /* the workers' changes (WORLD) and their count at the end */
        w = sl_buf_printf(&b, ",\"world_changes\":%" PRIu64 ",\"final_workers\":%u", st->world_changes, st->workers);
    if (w == 0)
        w = sl_buf_printf(&b, "}}\n");
    if (w == 0)
        fwrite(b.data, 1, b.len, t->summary_out);
    sl_buf_free(&b);
    return w;
}

/* Serve until every worker is done; the summary line on stdout. 0 or 1. */
int trainer_serve_ps(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    struct ps_serve pt = {.t = t};
    struct train_ps_server_stats st = {0};
    struct train_ps_ckpt ck = {0};
    struct ps_ckpt_writer cw = {.o = o, .servers = (uint32_t)t->ps_eps.n};
    if (ps_prepare_checkpoints(t, &ck) != 0)
        return 1;
    struct sl_error err = {0};
    static struct ps_expose ex; /* zero: every figure 0 */
    struct sl_http_metrics *http = NULL;
    if (o->metrics_listen != NULL && ps_start_metrics(t, &ex, &http) != 0) {
        train_ps_ckpt_free(&ck); /* what --restore read */
        return 1;
    }
    char bind[SL_CLUSTER_MAX_ADDR];
    trainer_ps_bind_addr(t, bind, sizeof bind);
    void *ctx = zmq_ctx_new();
    struct ps_refusals refusals = {.index = o->ps_task, .limit = {.kind = "refusals", .burst = 10}};
    struct train_ps_server_opts so = {.ctx = ctx,
                                      .listen = bind,
                                      .index = o->ps_task,
                                      .setup = ps_setup,
                                      .setup_arg = &pt,
                                      .lr = (float)o->lr,
                                      .momentum = (float)o->momentum,
                                      .workers = o->workers,
                                      .worker_timeout_ms = (int)(o->ps_worker_timeout_s * 1000),
                                      .stop = &trainer_stop_flag,
                                      .live = http != NULL ? &ex.live : NULL,
                                      .evaluator = t->ps_evaluator,
                                      .curve = t->have_curve ? &t->curve : NULL,
                                      .refused = ps_refused,
                                      .refused_arg = &refusals,
                                      .said = ps_said,
                                      .said_arg = &refusals,
                                      .restore = o->restore != NULL ? &ck.state : NULL,
                                      .checkpoint = o->checkpoint != NULL ? ps_checkpoint : NULL,
                                      .checkpoint_arg = &cw,
                                      .checkpoint_every = o->checkpoint_every,
                                      .elastic = o->elastic != NULL};
    if (!sl_endpoint_is_local(bind) && !t->have_curve)
        sl_log(SL_LOG_WARN,
               "parameter server %u: listening on %s in plaintext (--insecure): anyone who reaches it "
               "can read and change the weights",
               o->ps_task, bind);
    sl_log(SL_LOG_INFO, "parameter server %u of %zu: serving %u workers%s on %s%s", o->ps_task, t->ps_eps.n, o->workers,
           t->ps_evaluator ? " and the evaluator" : "", bind,
           t->have_curve ? " (CURVE: holders of the job's trainer key only)" : "");
    double t0 = sl_clock_s();
    int rc = ctx == NULL ? sl_error_set(&err, SL_EIO, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()))
                         : train_ps_serve(&so, &st, &err);
    double secs = sl_clock_s() - t0;
    ps_log_outcome(t, rc, &st, &refusals, secs, &err);
    int w = ps_write_summary(t, rc, &st, &pt.pm, o->restore != NULL ? ck.state.version : 0, secs);
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
    return client_keepalive(arg, ms, err);
}

/* The evaluator's summary line on stdout. */
static void eval_report(struct trainer *t, int status, const struct train_ps_eval_result *res, double secs)
{
    const struct trainer_opts *o = &t->o;
    fprintf(t->summary_out,
            "{\"summary\":{\"evaluator\":0,\"ok\":%s,\"mode\":\"ps\",\"model\":\"%s\",\"replicas\":%u,"
            "\"servers\":%zu,\"global_step\":%" PRIu64 ",\"wait_s\":%.3f,\"weights_hash\":\"%016" PRIx64 "\","
            "\"test_rows\":%.0f,\"test_correct\":%.0f,\"test_accuracy\":%.5f,\"lost_workers\":%u,\"seconds\":%.3f}}\n",
            status == 0 ? "true" : "false", trainer_model_names[o->model], t->replicas, t->ps_eps.n, res->global_step,
            res->wait_s, t->loop != NULL && status == 0 ? train_loop_weights_hash(t->loop) : (uint64_t)0, t->test_rows,
            t->test_correct, t->test_rows > 0 ? t->test_correct / t->test_rows : 0.0, res->lost_workers, secs);
    if (t->summary_out != stdout)
        fclose(t->summary_out);
    t->summary_out = NULL;
}

/* The evaluator (train_and_evaluate's): its evaluation feeders' schema
 * makes the model; it waits, keeping them alive, until every worker is
 * done, takes the final weights from the servers (never as a worker), and
 * evaluates them on its whole job (and --predictions). 0 or 1. */
int trainer_run_evaluator(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    struct train_ps_eval_result res = {0};
    double t0 = sl_clock_s();
    trainer_client_opts(t, &t->eval_feeders, o->eval_job ? o->eval_job : o->job, 0, 1, t->curve_eval_z85);
    struct train_loop_opts lo = {.input = o->input,
                                 .label = o->label,
                                 .replicas = t->replicas,
                                 .worker = 0,
                                 .workers = 1,
                                 .mode = TRAIN_STRATEGY_MIRRORED,
                                 .hash_every = 0,
                                 .device = "cpu"};
    trainer_model_config_of(o, &lo.model);
    float *params = NULL;
    const float *w, *v;
    size_t np = 0;
    void *ctx = NULL;
    int rc = client_open(&t->cl, &t->copts, &err);
    if (rc == 0)
        rc = trainer_loop_create_alive(&t->loop, &lo, t->cl, &err);
    if (rc == 0)
        rc = train_loop_state(t->loop, &w, &v, &np, &err);
    if (rc == 0 && (params = sl_calloc(2 * np, sizeof *params)) == NULL) /* the weights, then a zero velocity */
        rc = sl_error_set(&err, SL_ENOMEM, "out of memory for %zu parameters", np);
    if (rc == 0 && (ctx = zmq_ctx_new()) == NULL)
        rc = sl_error_set(&err, SL_EIO, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    if (rc == 0) {
        sl_log(SL_LOG_INFO, "evaluator: waiting for the workers to finish (%zu parameter servers)", t->ps_eps.n);
        struct train_ps_eval_opts eo = {.ctx = ctx,
                                        .ps = (const char *const *)t->ps_eps.items,
                                        .nps = (uint32_t)t->ps_eps.n,
                                        .placement = (enum train_ps_placement)o->ps_placement,
                                        .model = lo.model,
                                        .timeout_ms = (int)o->timeout_ms,
                                        .idle = eval_keepalive,
                                        .idle_arg = t->cl,
                                        .stop = &trainer_stop_flag,
                                        .curve = t->have_curve ? &t->curve : NULL};
        eo.model.inputs = (int)trainer_input_width(t);
        rc = train_ps_eval_final(&eo, params, np, &res, &err);
        if (rc == 0 && res.lost_workers > 0) /* the weights are an unfinished job's: said, as the workers say it */
            rc = sl_error_set(&err, SL_EPROTO,
                              "the job did not finish: %u of %u workers were lost or failed (worker "
                              "%u first; the servers' logs say which and why): the final weights are not the "
                              "trained model's (global step %" PRIu64 ")",
                              res.lost_workers, o->workers, res.first_lost, res.global_step);
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
        sl_log(SL_LOG_INFO,
               "evaluator: every worker is done; the final weights (global step %" PRIu64 ") read "
               "after %.1f s",
               res.global_step, res.wait_s);
        status = trainer_evaluate(t, t->cl);
    }
    eval_report(t, status, &res, sl_clock_s() - t0);
    train_loop_destroy(t->loop);
    t->loop = NULL;
    client_close(t->cl);
    t->cl = NULL;
    return status;
}
