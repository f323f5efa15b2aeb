/* train_ps_server: a parameter server (train_ps_serve; see train_ps.h). */
#include "train_ps.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_bytes.h"
#include "sl_clock.h"
#include "sl_peer.h"
#include "sl_zsock.h"
#include "train_ps_int.h"

/* ---- the server ---- */

/* What a server holds. */
struct server {
    const struct train_ps_server_opts *o;
    const struct train_ps_layout *l; /* NULL until set up */
    size_t n;
    float *p, *v;
    char config[TRAIN_PS_MAX_CONFIG]; /* the first accepted description (setup) */
    size_t config_len;
    uint8_t *done;                     /* [workers]: 1 final pull or BYE, 2 BYE, 3 lost */
    uint8_t *final;                    /* [workers]: its final pull came */
    uint64_t *heard;                   /* [workers]: when last heard (ns) */
    uint64_t *session;                 /* [workers]: the session whose push was applied first (pushed[w]), or the one a
                           RESUME adopted since */
    uint8_t *pushed;                   /* [workers]: a push of it was applied */
    struct client_input_position *pos; /* [workers]: after its last push applied (pushed[w]) */
    uint8_t *adopted; /* [workers]: a RESUME adopted a new session (or a checkpoint was restored), no push of
                           it applied yet: 1, 2 once a skipped push was said */
    uint8_t *bound;   /* [workers]: its session was set by a WORLD: messages of other sessions are refused even
                       before a push of it (the previous world's processes) */
    uint8_t *rebase;  /* [workers]: set by a WORLD: its next push starts its position afresh, in epoch world_epoch */
    uint32_t workers; /* opts.workers, then the last WORLD's count */
    uint64_t changes; /* WORLDs applied */
    uint64_t world_epoch;    /* the epoch the last WORLD's world starts at */
    uint32_t not_done, left; /* not done; not BYE or lost */
    int lost_first;          /* the first worker lost, or -1 */
    int early_first;         /* the first worker whose BYE came before its final pull, or -1 */
    uint64_t incarnation;
    int ckpt_rc; /* a checkpoint failed: the server stops with ckpt_err */
    struct sl_error ckpt_err;
    uint64_t ckpt_version;         /* the version last checkpointed (restored) */
    enum train_ps_eval_state eval; /* the evaluator (not a worker) */
    int eval_served;               /* it was sent the final values */
    uint64_t eval_heard;           /* when last heard (ns) */
};

static void checkpoint(struct server *sv, struct train_ps_server_stats *st);
static void workers_free(struct server *sv);

/* ERROR (carrying the incarnation), counted, and told to opts.refused. */
static void refuse(struct server *sv, void *sock, zmq_msg_t *id, uint32_t worker, struct train_ps_server_stats *st,
                   const char *why)
{
    st->bad_messages++;
    struct train__ps_hdr h = {.type = TRAIN_PS_ERROR, .worker = worker, .incarnation = sv->incarnation};
    (void)train__ps_send(sock, id, &h, why, strlen(why));
    if (sv->o->refused != NULL)
        sv->o->refused(sv->o->refused_arg, worker, why);
}

/* Told to opts.said (a restart adopted, a push not applied again). */
static void say(struct server *sv, uint32_t worker, const char *what)
{
    if (sv->o->said != NULL)
        sv->o->said(sv->o->said_arg, worker, what);
}

/* The variables, once: from opts or from the first description the setup
 * accepts. On an error nothing is kept (a later description may set up). */
static int setup(struct server *sv, const void *cfg, size_t len, struct sl_error *err)
{
    const struct train_ps_server_opts *o = sv->o;
    const struct train_ps_layout *l = &o->layout;
    const float *init = o->init;
    int rc = 0;
    if (o->setup != NULL && (rc = o->setup(o->setup_arg, cfg, len, &l, &init, err)) != 0)
        return rc;
    if (o->index >= l->nps)
        return sl_error_set(err, SL_EINVAL, "parameter server %u of %u", o->index, l->nps);
    size_t n = train_ps_elements(l, o->index);
    float *p = sl_calloc(n ? n : 1, sizeof *p), *v = sl_calloc(n ? n : 1, sizeof *v);
    if (p == NULL || v == NULL) {
        sl_free(p);
        sl_free(v);
        return sl_error_set(err, SL_ENOMEM, "out of memory for %zu parameters", n);
    }
    sv->p = p;
    sv->v = v;
    train__ps_pack(l, o->index, init, sv->p);
    sv->l = l;
    sv->n = n;
    if (cfg != NULL) {
        memcpy(sv->config, cfg, len);
        sv->config_len = len;
    }
    return 0;
}

static void mark(struct server *sv, uint32_t w, uint8_t state)
{
    if (sv->done[w] == 0)
        sv->not_done--;
    if (sv->done[w] < 2 && state >= 2)
        sv->left--;
    if (state > sv->done[w])
        sv->done[w] = state;
}

/* A PULL: [body] the worker's description. Whatever is wrong is refused
 * (a description the setup refuses too); the server goes on. */
static void on_pull(struct server *sv, void *sock, zmq_msg_t *id, const struct train__ps_hdr *h, zmq_msg_t *body,
                    struct train_ps_server_stats *st)
{
    const void *cfg = body != NULL ? zmq_msg_data(body) : NULL;
    size_t len = body != NULL ? zmq_msg_size(body) : 0;
    char why[3 * TRAIN_PS_MAX_CONFIG + 256], a[2 * TRAIN_PS_MAX_CONFIG], b[2 * TRAIN_PS_MAX_CONFIG];
    if (len > TRAIN_PS_MAX_CONFIG) {
        refuse(sv, sock, id, h->worker, st, "a model description over 512 bytes");
        return;
    }
    if (h->incarnation != 0 && h->incarnation != sv->incarnation) {
        snprintf(why, sizeof why,
                 "worker %u pulled before from incarnation %016" PRIx64 " of parameter server %u, "
                 "which now runs as %016" PRIx64 ": the server restarted and what it held is gone",
                 h->worker, h->incarnation, sv->o->index, sv->incarnation);
        refuse(sv, sock, id, h->worker, st, why);
        return;
    }
    if (sv->l == NULL) {
        if (sv->o->setup != NULL && cfg == NULL) {
            refuse(sv, sock, id, h->worker, st, "a first pull without the model's description");
            return;
        }
        struct sl_error e = {0};
        if (setup(sv, cfg, len, &e) != 0) { /* refused; a later, valid description may set up */
            refuse(sv, sock, id, h->worker, st, e.msg);
            return;
        }
    } else if (sv->o->setup != NULL && (cfg == NULL || len != sv->config_len || memcmp(cfg, sv->config, len) != 0)) {
        snprintf(why, sizeof why, "worker %u's model '%s' is not the one this server holds ('%s')", h->worker,
                 train_ps_printable(a, sizeof a, cfg, len),
                 train_ps_printable(b, sizeof b, sv->config, sv->config_len));
        refuse(sv, sock, id, h->worker, st, why);
        return;
    }
    st->pulls++;
    if (h->flags & TRAIN_PS_FINAL) {
        if (!(h->flags & TRAIN_PS_READ_ONLY)) { /* the evaluator is no worker: nobody is marked */
            sv->final[h->worker] = 1;
            if (sv->done[h->worker] == 0)
                mark(sv, h->worker, 1);
        }
        if (sv->not_done > 0) { /* not yet: how many are still training */
            struct train__ps_hdr r = {.type = TRAIN_PS_ACK,
                                      .worker = h->worker,
                                      .flags = sv->not_done,
                                      .version = st->version,
                                      .step = st->global_step,
                                      .incarnation = sv->incarnation};
            (void)train__ps_send(sock, id, &r, NULL, 0);
            return;
        }
    }
    struct train__ps_hdr r = {.type = TRAIN_PS_VALUES,
                              .worker = h->worker,
                              .flags = h->flags & TRAIN_PS_FINAL,
                              .version = st->version,
                              .step = st->global_step,
                              .incarnation = sv->incarnation};
    if (h->flags & TRAIN_PS_FINAL) { /* every worker is done: say who did not finish */
        uint32_t bad = 0;
        for (uint32_t w = sv->workers; w-- > 0;)
            if (sv->done[w] == 3 || sv->final[w] == 2) {
                bad++;
                r.session = (uint64_t)w + 1;
            }
        r.flags |= (bad < 0xffffffu ? bad : 0xffffffu) << 8;
    }
    (void)train__ps_send(sock, id, &r, sv->p, sv->n * sizeof *sv->p);
    if ((h->flags & TRAIN_PS_READ_ONLY) && (h->flags & TRAIN_PS_FINAL)) {
        sv->eval_served = 1;
        if (sv->eval < TRAIN_PS_EVAL_SERVED)
            sv->eval = TRAIN_PS_EVAL_SERVED;
    }
}

/* The evaluator's PULL or BYE (TRAIN_PS_READ_ONLY): answered as a
 * worker's, but it is no worker: nothing of the workers' state changes. */
static void on_evaluator(struct server *sv, void *sock, zmq_msg_t *id, const struct train__ps_hdr *h, zmq_msg_t *body,
                         size_t frames, struct train_ps_server_stats *st)
{
    if (h->worker != 0) {
        refuse(sv, sock, id, h->worker, st, "evaluator out of range (a job has one evaluator, index 0)");
        return;
    }
    if (sv->eval == TRAIN_PS_EVAL_LOST) {
        refuse(sv, sock, id, h->worker, st, "the evaluator was silent past the timeout and is counted lost");
        return;
    }
    if (h->type == TRAIN_PS_BYE && frames == 2) {
        if (sv->eval != TRAIN_PS_EVAL_NONE) /* an evaluator never let in (another model) has not come */
            sv->eval = TRAIN_PS_EVAL_BYE;
        return;
    }
    if (h->type != TRAIN_PS_PULL || frames > 3) {
        refuse(sv, sock, id, h->worker, st, "the evaluator only pulls");
        return;
    }
    uint64_t bad = st->bad_messages;
    on_pull(sv, sock, id, h, body, st);
    if (st->bad_messages == bad) { /* a pull refused does not make an evaluator */
        sv->eval_heard = sl_clock_ns();
        if (sv->eval == TRAIN_PS_EVAL_NONE)
            sv->eval = TRAIN_PS_EVAL_HEARD;
    }
}

/* Once the workers are done: whether to serve on for the evaluator (one
 * expected or heard, not gone, not silent past the timeout). */
static int eval_awaited(struct server *sv, uint64_t now)
{
    const struct train_ps_server_opts *o = sv->o;
    if (sv->eval >= TRAIN_PS_EVAL_BYE || (sv->eval == TRAIN_PS_EVAL_NONE && !o->evaluator))
        return 0;
    if (o->worker_timeout_ms > 0 && now - sv->eval_heard > (uint64_t)o->worker_timeout_ms * 1000000u) {
        sv->eval = TRAIN_PS_EVAL_LOST;
        return 0;
    }
    return 1;
}

/* The position a push of worker w carries (pm: its frame): 0 and *dup 1
 * when, after an adoption and before any push of the new session was
 * applied, it is at or before the recorded one (applied here before the
 * restart or the checkpoint: the worker catches up with this server), 0
 * and *dup 0 when it is one step past the recorded one, else the reason
 * in why. */
static int push_position(struct server *sv, uint32_t w, zmq_msg_t *pm, struct client_input_position *p, int *dup,
                         char *why, size_t cap)
{
    struct sl_error e = {0};
    *dup = 0;
    if (pm == NULL) {
        snprintf(why, cap, "a push without its input position (a PUSH takes 3 frames: header, gradient, position)");
        return -1;
    }
    if (client_input_position_decode(p, zmq_msg_data(pm), zmq_msg_size(pm), &e) != 0) {
        snprintf(why, cap, "a push's %s", e.msg);
        return -1;
    }
    const struct client_input_position *r = &sv->pos[w];
    if (sv->rebase[w]) { /* the first push in a new world: its stream starts afresh at the change's epoch */
        if (p->epoch != sv->world_epoch || p->seq == 0) {
            snprintf(why, cap,
                     "worker %u's first push since the job's shape changed ends at input position %" PRIu64
                     " of epoch %" PRIu64 "; the new world starts at epoch %" PRIu64,
                     w, p->seq, p->epoch, sv->world_epoch);
            return -1;
        }
        return 0;
    }
    int have = sv->pushed[w] && r->replicas != 0;
    if (have && p->replicas != r->replicas) {
        snprintf(why, cap, "worker %u's position counts %u replicas a step, its earlier pushes %u", w, p->replicas,
                 r->replicas);
        return -1;
    }
    if (have && sv->adopted[w] && p->seq <= r->seq && p->epoch <= r->epoch) {
        *dup = 1;
        return 0;
    }
    uint64_t want = (have ? r->seq : 0) + p->replicas, epoch = have ? r->epoch : 0;
    if (p->seq != want || p->epoch < epoch || p->epoch > epoch + 1) {
        snprintf(why, cap,
                 "worker %u pushed the step ending at input position %" PRIu64 " (epoch %" PRIu64 " step %" PRIu64
                 "); this server expected %" PRIu64 " (epoch %" PRIu64 " or %" PRIu64 "), one step after "
                 "the last it applied: a step skipped or repeated",
                 w, p->seq, p->epoch, p->step, want, epoch, epoch + 1);
        return -1;
    }
    return 0;
}

static void on_push(struct server *sv, void *sock, zmq_msg_t *id, const struct train__ps_hdr *h, zmq_msg_t *body,
                    zmq_msg_t *posm, struct train_ps_server_stats *st)
{
    const struct train_ps_server_opts *o = sv->o;
    char why[1200];
    if (sv->l == NULL) {
        refuse(sv, sock, id, h->worker, st, "a push before any pull");
        return;
    }
    /* a step with no rows: its position, an empty body, no global step */
    int empty = (h->flags & TRAIN_PS_PUSH_EMPTY) != 0;
    if (empty && (h->flags & 1u)) {
        refuse(sv, sock, id, h->worker, st, "a push of a step with no rows that counts a global step");
        return;
    }
    if (body == NULL || zmq_msg_size(body) != (empty ? 0 : sv->n * sizeof(float))) {
        if (empty)
            snprintf(why, sizeof why, "a push of a step with no rows carrying %zu bytes (it carries none)",
                     body != NULL ? zmq_msg_size(body) : 0);
        else
            snprintf(why, sizeof why, "a push of %zu bytes (this server holds %zu floats: %zu bytes)",
                     body != NULL ? zmq_msg_size(body) : 0, sv->n, sv->n * sizeof(float));
        refuse(sv, sock, id, h->worker, st, why);
        return;
    }
    if (h->incarnation != sv->incarnation) {
        snprintf(why, sizeof why,
                 "a push computed on incarnation %016" PRIx64 " of parameter server %u, which now "
                 "runs as %016" PRIx64 " (restarted: the values it was computed from are gone)",
                 h->incarnation, o->index, sv->incarnation);
        refuse(sv, sock, id, h->worker, st, why);
        return;
    }
    if (h->version > st->version) {
        snprintf(why, sizeof why, "a push computed from version %" PRIu64 ", newer than this server's %" PRIu64,
                 h->version, st->version);
        refuse(sv, sock, id, h->worker, st, why);
        return;
    }
    /* the body is not aligned for floats: copied out in pieces; every
     * value is checked before anything is applied */
    const uint8_t *g8 = zmq_msg_data(body);
    float g[256];
    for (size_t k = 0; !empty && k < sv->n; k += 256) {
        size_t m = sv->n - k < 256 ? sv->n - k : 256;
        memcpy(g, g8 + k * sizeof(float), m * sizeof(float));
        for (size_t i = 0; i < m; i++)
            if (!isfinite(g[i])) {
                snprintf(why, sizeof why,
                         "a gradient with a non-finite value (%s at element %zu of %zu): nothing "
                         "applied",
                         isnan(g[i]) ? "nan"
                         : g[i] > 0  ? "inf"
                                     : "-inf",
                         k + i, sv->n);
                refuse(sv, sock, id, h->worker, st, why);
                return;
            }
    }
    struct client_input_position pos;
    int dup = 0;
    if (push_position(sv, h->worker, posm, &pos, &dup, why, sizeof why) != 0) {
        refuse(sv, sock, id, h->worker, st, why);
        return;
    }
    if (dup) { /* the old process's push reached this server: not again */
        st->skipped++;
        if (sv->adopted[h->worker] == 1) { /* said once an adoption: a restored server may skip many */
            const struct client_input_position *r = &sv->pos[h->worker];
            snprintf(why, sizeof why,
                     "worker %u: its push of epoch %" PRIu64 " step %" PRIu64 " (input position %" PRIu64
                     ") was applied here before its restart: acknowledged, not applied again (and so up to "
                     "step %" PRIu64 ", the position recorded here)",
                     h->worker, pos.epoch, pos.step, pos.seq, r->step);
            say(sv, h->worker, why);
            sv->adopted[h->worker] = 2;
        }
        struct train__ps_hdr r = {.type = TRAIN_PS_ACK,
                                  .worker = h->worker,
                                  .flags = TRAIN_PS_ACK_SKIPPED,
                                  .version = st->version,
                                  .step = st->global_step,
                                  .incarnation = sv->incarnation};
        (void)train__ps_send(sock, id, &r, NULL, 0);
        return;
    }
    if (!sv->pushed[h->worker]) {
        sv->pushed[h->worker] = 1;
        sv->session[h->worker] = h->session;
    }
    sv->pos[h->worker] = pos;
    sv->adopted[h->worker] = 0;
    sv->rebase[h->worker] = 0;
    if (empty) { /* recorded: the worker's next push is one step after it */
        st->empty_pushes++;
        struct train__ps_hdr r = {.type = TRAIN_PS_ACK,
                                  .worker = h->worker,
                                  .version = st->version,
                                  .step = st->global_step,
                                  .incarnation = sv->incarnation};
        (void)train__ps_send(sock, id, &r, NULL, 0);
        return;
    }
    uint64_t stale = st->version - h->version;
    for (size_t k = 0; k < sv->n; k += 256) {
        size_t m = sv->n - k < 256 ? sv->n - k : 256;
        memcpy(g, g8 + k * sizeof(float), m * sizeof(float));
        train_sgd_apply(sv->p + k, sv->v + k, g, m, o->lr, o->momentum);
    }
    st->version++;
    st->pushes++;
    st->staleness_sum += stale;
    st->staleness_hist[stale < TRAIN_PS_STALENESS_BUCKETS - 1 ? stale : TRAIN_PS_STALENESS_BUCKETS - 1]++;
    if (stale > st->staleness_max)
        st->staleness_max = stale;
    if (h->flags & 1u)
        st->global_step++;
    if (o->checkpoint_every > 0 && st->version % o->checkpoint_every == 0)
        checkpoint(sv, st);
    struct train__ps_hdr r = {.type = TRAIN_PS_ACK,
                              .worker = h->worker,
                              .flags = (uint32_t)(stale > UINT32_MAX ? UINT32_MAX : stale),
                              .version = st->version,
                              .step = st->global_step,
                              .incarnation = sv->incarnation};
    (void)train__ps_send(sock, id, &r, NULL, 0);
}

/* A checkpoint of what the server holds now (opts.checkpoint). */
static void checkpoint(struct server *sv, struct train_ps_server_stats *st)
{
    const struct train_ps_server_opts *o = sv->o;
    if (o->checkpoint == NULL || sv->l == NULL || sv->ckpt_rc != 0)
        return;
    struct train_ps_state s = {.index = o->index,
                               .servers = sv->l->nps,
                               .workers = sv->workers,
                               .version = st->version,
                               .global_step = st->global_step,
                               .config = sv->config,
                               .config_len = sv->config_len,
                               .pos = sv->pos,
                               .values = sv->p,
                               .momentum = sv->v,
                               .n = sv->n,
                               .world_changes = sv->changes,
                               .world_epoch = sv->world_epoch};
    if ((sv->ckpt_rc = o->checkpoint(o->checkpoint_arg, &s, &sv->ckpt_err)) == 0) {
        st->checkpoints++;
        sv->ckpt_version = st->version;
    }
}

/* A RESUME: a worker process starting asks where its shard stands. A
 * session other than the recorded one is adopted (the old process is
 * gone: its messages are refused from now on); the answer is an ACK with
 * the recorded position (none: the worker has no push applied here). */
static void on_resume(struct server *sv, void *sock, zmq_msg_t *id, const struct train__ps_hdr *h,
                      struct train_ps_server_stats *st)
{
    uint32_t w = h->worker;
    char why[384];
    if (h->session == 0) {
        refuse(sv, sock, id, w, st, "a RESUME without a session");
        return;
    }
    if (sv->done[w] != 0) {
        snprintf(why, sizeof why, "worker %u %s: there is nothing left of its shard to resume", w,
                 sv->final[w] == 1 ? "made its final pull already" : "said BYE already");
        refuse(sv, sock, id, w, st, why);
        return;
    }
    const struct client_input_position *p = &sv->pos[w];
    if (sv->pushed[w] && h->session != sv->session[w]) {
        char old[40] = "restored from a checkpoint";
        if (sv->session[w] != 0)
            snprintf(old, sizeof old, "replaces %016" PRIx64, sv->session[w]);
        snprintf(why, sizeof why,
                 "worker %u restarted: resuming at epoch %" PRIu64 " step %" PRIu64 " (input "
                 "position %" PRIu64 "; session %016" PRIx64 " %s)",
                 w, p->epoch, p->step, p->seq, h->session, old);
        sv->session[w] = h->session;
        sv->adopted[w] = 1;
        st->restarts++;
        say(sv, w, why);
    }
    struct train__ps_hdr r = {.type = TRAIN_PS_ACK,
                              .worker = w,
                              .version = st->version,
                              .step = st->global_step,
                              .incarnation = sv->incarnation,
                              .session = h->session};
    uint8_t b[CLIENT_INPUT_POSITION_BYTES + TRAIN_PS_WORLD_INFO];
    size_t len = 0;
    if (sv->pushed[w]) {
        client_input_position_encode(p, b);
        len = CLIENT_INPUT_POSITION_BYTES;
    }
    if (sv->o->elastic) { /* the world: a worker with no position here starts at its epoch */
        r.flags = TRAIN_PS_ACK_WORLD;
        sl_store_le64(b + len, sv->changes);
        sl_store_le64(b + len + 8, sv->world_epoch);
        sl_store_le32(b + len + 16, sv->workers);
        sl_store_le32(b + len + 20, 0);
        len += TRAIN_PS_WORLD_INFO;
    }
    (void)train__ps_send(sock, id, &r, len > 0 ? b : NULL, len);
}

/* A BYE: the worker is gone; before its final pull, it failed. */
static void on_bye(struct server *sv, uint32_t w)
{
    if (!sv->final[w] && sv->done[w] < 2) {
        if (sv->early_first < 0)
            sv->early_first = (int)w;
        sv->final[w] = 2; /* counted once */
    }
    mark(sv, w, 2);
}

/* The per-worker arrays for n workers, zeroed (sv's are overwritten), or
 * -1 with none allocated. */
static int workers_alloc(struct server *sv, uint32_t n)
{
    sv->done = sl_calloc(n, 1);
    sv->final = sl_calloc(n, 1);
    sv->heard = sl_calloc(n, sizeof *sv->heard);
    sv->session = sl_calloc(n, sizeof *sv->session);
    sv->pushed = sl_calloc(n, 1);
    sv->pos = sl_calloc(n, sizeof *sv->pos);
    sv->adopted = sl_calloc(n, 1);
    sv->bound = sl_calloc(n, 1);
    sv->rebase = sl_calloc(n, 1);
    if (sv->done != NULL && sv->final != NULL && sv->heard != NULL && sv->session != NULL && sv->pushed != NULL &&
        sv->pos != NULL && sv->adopted != NULL && sv->bound != NULL && sv->rebase != NULL)
        return 0;
    workers_free(sv);
    return -1;
}

static void workers_free(struct server *sv)
{
    sl_free(sv->done);
    sl_free(sv->final);
    sl_free(sv->heard);
    sl_free(sv->session);
    sl_free(sv->pushed);
    sl_free(sv->pos);
    sl_free(sv->adopted);
    sl_free(sv->bound);
    sl_free(sv->rebase);
    sv->done = sv->final = sv->pushed = sv->adopted = sv->bound = sv->rebase = NULL;
    sv->heard = sv->session = NULL;
    sv->pos = NULL;
}

/* A WORLD (train_ps.h): the coordinator, worker 0, announces the workers
 * of the next epoch. Checked whole before anything changes: a refused one
 * leaves the server's workers as they were. */
static void on_world(struct server *sv, void *sock, zmq_msg_t *id, const struct train__ps_hdr *h, zmq_msg_t *body,
                     struct train_ps_server_stats *st)
{
    const struct train_ps_server_opts *o = sv->o;
    char why[384];
    size_t len = body != NULL ? zmq_msg_size(body) : 0;
    if (!o->elastic) {
        refuse(sv, sock, id, h->worker, st,
               "a WORLD, but this parameter server was not started for elastic workers (--ps-elastic)");
        return;
    }
    if (h->worker != 0) {
        snprintf(why, sizeof why, "a WORLD from worker %u: only worker 0, the coordinator, announces the workers",
                 h->worker);
        refuse(sv, sock, id, h->worker, st, why);
        return;
    }
    if (h->session == 0) {
        refuse(sv, sock, id, h->worker, st, "a WORLD without a session");
        return;
    }
    if (len == 0 || len % TRAIN_PS_WORLD_ENTRY != 0 || len / TRAIN_PS_WORLD_ENTRY > TRAIN_PS_MAX_WORKERS) {
        snprintf(why, sizeof why, "a WORLD of %zu bytes (%d a worker, 1 to %d workers)", len, TRAIN_PS_WORLD_ENTRY,
                 TRAIN_PS_MAX_WORKERS);
        refuse(sv, sock, id, h->worker, st, why);
        return;
    }
    if (h->step != sv->changes + 1) {
        snprintf(why, sizeof why,
                 "a WORLD numbered %" PRIu64 "; this server applied %" PRIu64 " (the next is %" PRIu64 ")", h->step,
                 sv->changes, sv->changes + 1);
        refuse(sv, sock, id, h->worker, st, why);
        return;
    }
    for (uint32_t w = 0; w < sv->workers; w++)
        if (sv->done[w] != 0) {
            snprintf(why, sizeof why, "a WORLD after worker %u %s: the job's end has begun, its workers stay", w,
                     sv->done[w] == 3    ? "was lost"
                     : sv->final[w] == 1 ? "made its final pull"
                                         : "said BYE");
            refuse(sv, sock, id, h->worker, st, why);
            return;
        }
    uint32_t n = (uint32_t)(len / TRAIN_PS_WORLD_ENTRY), kept = 0;
    const uint8_t *b = zmq_msg_data(body);
    uint32_t *from = sl_calloc(n, sizeof *from);
    uint64_t *ses = sl_calloc(n, sizeof *ses);
    uint8_t *named = sl_calloc(sv->workers, 1);
    if (from == NULL || ses == NULL || named == NULL) {
        refuse(sv, sock, id, h->worker, st, "a WORLD: out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        from[i] = sl_load_le32(b + (size_t)i * TRAIN_PS_WORLD_ENTRY);
        ses[i] = sl_load_le64(b + (size_t)i * TRAIN_PS_WORLD_ENTRY + 8);
        why[0] = '\0';
        if (sl_load_le32(b + (size_t)i * TRAIN_PS_WORLD_ENTRY + 4) != 0)
            snprintf(why, sizeof why, "a WORLD whose worker %u has nonzero reserved bytes", i);
        else if (from[i] != TRAIN_PS_JOINER && from[i] >= sv->workers)
            snprintf(why, sizeof why, "a WORLD whose worker %u was worker %u, of %u", i, from[i], sv->workers);
        else if (from[i] != TRAIN_PS_JOINER && named[from[i]]++)
            snprintf(why, sizeof why, "a WORLD that names worker %u twice", from[i]);
        else if (ses[i] == 0)
            snprintf(why, sizeof why, "a WORLD whose worker %u has no session", i);
        for (uint32_t k = 0; k < i && why[0] == '\0'; k++)
            if (ses[k] == ses[i])
                snprintf(why, sizeof why, "a WORLD whose workers %u and %u have the same session", k, i);
        if (why[0] != '\0') {
            refuse(sv, sock, id, h->worker, st, why);
            goto out;
        }
        kept += from[i] != TRAIN_PS_JOINER;
    }
    struct server nw = *sv;
    if (workers_alloc(&nw, n) != 0) {
        refuse(sv, sock, id, h->worker, st, "a WORLD: out of memory");
        goto out;
    }
    uint64_t now = sl_clock_ns();
    for (uint32_t i = 0; i < n; i++) {
        nw.heard[i] = from[i] == TRAIN_PS_JOINER ? now : sv->heard[from[i]];
        nw.session[i] = ses[i];
        nw.bound[i] = nw.rebase[i] = 1; /* no position in this world yet (nw.pos zero): a checkpoint says none,
                                           and a worker restored so starts at the world's epoch */
    }
    snprintf(why, sizeof why,
             "parameter server %u: the workers change (change %" PRIu64 "): %u -> %u from epoch %" PRIu64
             " (%u kept, %u joined, %u let go)",
             o->index, h->step, sv->workers, n, h->version, kept, n - kept, sv->workers - kept);
    workers_free(sv);
    sv->done = nw.done;
    sv->final = nw.final;
    sv->heard = nw.heard;
    sv->session = nw.session;
    sv->pushed = nw.pushed;
    sv->pos = nw.pos;
    sv->adopted = nw.adopted;
    sv->bound = nw.bound;
    sv->rebase = nw.rebase;
    sv->workers = sv->not_done = sv->left = n;
    sv->changes = h->step;
    sv->world_epoch = h->version;
    st->world_changes = sv->changes;
    say(sv, 0, why);
    checkpoint(sv, st); /* the new world kept at once: a restore then serves this world, not the last one */
    struct train__ps_hdr r = {.type = TRAIN_PS_ACK,
                              .worker = 0,
                              .flags = n,
                              .version = st->version,
                              .step = st->global_step,
                              .incarnation = sv->incarnation,
                              .session = h->session};
    (void)train__ps_send(sock, id, &r, NULL, 0);
out:
    sl_free(from);
    sl_free(ses);
    sl_free(named);
}

/* The figures, for another thread (a /metrics endpoint). */
static void publish(const struct server *sv, const struct train_ps_server_stats *st)
{
    struct train_ps_live *l = sv->o->live;
    if (l == NULL)
        return;
    atomic_store_explicit(&l->pulls, st->pulls, memory_order_relaxed);
    atomic_store_explicit(&l->pushes, st->pushes, memory_order_relaxed);
    atomic_store_explicit(&l->global_step, st->global_step, memory_order_relaxed);
    atomic_store_explicit(&l->staleness_sum, st->staleness_sum, memory_order_relaxed);
    atomic_store_explicit(&l->bad_messages, st->bad_messages, memory_order_relaxed);
    atomic_store_explicit(&l->elements, sv->n, memory_order_relaxed);
    uint64_t lost = 0;
    for (uint32_t w = 0; w < sv->workers; w++)
        lost += sv->done[w] == 3;
    atomic_store_explicit(&l->lost, lost, memory_order_relaxed);
    atomic_store_explicit(&l->workers_done, sv->workers - sv->not_done, memory_order_relaxed);
    for (int k = 0; k < TRAIN_PS_STALENESS_BUCKETS; k++)
        atomic_store_explicit(&l->staleness_hist[k], st->staleness_hist[k], memory_order_relaxed);
}

/* Workers silent past the timeout are lost. */
static void check_lost(struct server *sv, uint64_t now)
{
    const struct train_ps_server_opts *o = sv->o;
    if (o->worker_timeout_ms <= 0)
        return;
    uint64_t limit = (uint64_t)o->worker_timeout_ms * 1000000u;
    for (uint32_t w = 0; w < sv->workers; w++)
        if (sv->done[w] < 2 && now - sv->heard[w] > limit) {
            if (sv->lost_first < 0)
                sv->lost_first = (int)w;
            mark(sv, w, 3);
        }
}

/* Start from opts.restore: the workers' positions (each to be adopted),
 * the version and global step, and (set up from its description) the
 * values and momentum. */
static int restore(struct server *sv, struct train_ps_server_stats *st, struct sl_error *err)
{
    const struct train_ps_state *r = sv->o->restore;
    const struct train_ps_server_opts *o = sv->o;
    if (r->index != o->index || r->workers != o->workers)
        return sl_error_set(err, SL_EINVAL,
                            "parameter server %u of %u workers: the state restored is server %u's of "
                            "%u workers",
                            o->index, o->workers, r->index, r->workers);
    if (r->config_len > TRAIN_PS_MAX_CONFIG)
        return sl_error_set(err, SL_EINVAL, "parameter server %u: a restored description over %d bytes", o->index,
                            TRAIN_PS_MAX_CONFIG);
    int rc;
    if (sv->l == NULL && (rc = setup(sv, r->config_len ? r->config : NULL, r->config_len, err)) != 0)
        return sl_error_prefix(err, "parameter server %u: the restored model: ", o->index);
    if (r->servers != sv->l->nps || r->n != sv->n)
        return sl_error_set(err, SL_EINVAL,
                            "parameter server %u: the state restored holds %zu floats of server %u of "
                            "%u; this server holds %zu of %u",
                            o->index, r->n, r->index, r->servers, sv->n, sv->l->nps);
    memcpy(sv->p, r->values, sv->n * sizeof *sv->p);
    memcpy(sv->v, r->momentum, sv->n * sizeof *sv->v);
    if (r->world_changes > 0 && !o->elastic)
        return sl_error_set(err, SL_EINVAL,
                            "parameter server %u: the state restored is of an elastic job (world change %" PRIu64
                            " from epoch %" PRIu64 "): restore it with --elastic",
                            o->index, r->world_changes, r->world_epoch);
    for (uint32_t w = 0; w < o->workers; w++) {
        sv->pos[w] = r->pos[w];
        sv->pushed[w] = sv->adopted[w] = r->pos[w].replicas != 0;
        sv->session[w] = 0; /* whoever comes is a new process: its RESUME adopts it */
        /* after a change, no position: its first push starts afresh in the world's epoch */
        sv->rebase[w] = r->world_changes > 0 && r->pos[w].replicas == 0;
    }
    sv->changes = r->world_changes;
    sv->world_epoch = r->world_epoch;
    st->world_changes = sv->changes;
    st->version = sv->ckpt_version = r->version;
    st->global_step = r->global_step;
    return 0;
}

/* The socket: CURVE and its ZAP handler (opts.curve), then bound. */
static int listen_on(const struct train_ps_server_opts *o, void *sock, struct sl_curve_allow **allow,
                     struct sl_zap **zap, struct sl_error *err)
{
    if (sock == NULL)
        return sl_error_set(err, SL_EIO, "parameter server %u: zmq_socket: %s", o->index, zmq_strerror(zmq_errno()));
    int rc = sl_zsock_set_int(sock, ZMQ_LINGER, 0, "parameter server", err);
    if (rc != 0)
        return rc;
    if (o->curve != NULL) {
        const char *pub = o->curve->public_z85;
        rc = sl_curve_allow_load(allow, NULL, &pub, 1, err);
        if (rc == 0)
            rc = sl_zap_start(zap, o->ctx, *allow, "parameter server", err);
        if (rc == 0)
            rc = sl_curve_server(sock, o->curve, err);
        if (rc != 0) {
            sl_error_prefix(err, "parameter server %u: ", o->index);
            return rc;
        }
    }
    /* checked, localhost and [::1] bound, a live server's ipc path refused */
    if ((rc = sl_bind_private(sock, o->listen, NULL, err)) != 0)
        sl_error_prefix(err, "parameter server %u: cannot listen: ", o->index);
    return rc;
}

/* One message on the server's socket: checked (its header, its worker,
 * its frames, its incarnation and session), then handled by its type or
 * refused with the reason. */
static void on_message(struct server *sv, void *sock, struct train_ps_server_stats *st)
{
    /* [id] header [body [position]]: at most 4 frames are kept, the
     * rest counted and dropped */
    zmq_msg_t f[4];
    size_t nf = 0, frames = train__ps_recv_frames(sock, f, 4, &nf);
    struct train__ps_hdr h;
    char why[384];
    if (nf < 2 || train__ps_get_hdr(zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), &h) != 0)
        refuse(sv, sock, nf > 0 ? &f[0] : NULL, UINT32_MAX, st, "not a parameter-server message");
    else if (h.flags & TRAIN_PS_READ_ONLY) /* frames checked there: worker 0 may be lost, not the evaluator */
        on_evaluator(sv, sock, &f[0], &h, nf == 3 ? &f[2] : NULL, frames, st);
    else if (h.type == TRAIN_PS_BYE && sv->changes > 0 &&
             (h.worker >= sv->workers || (sv->bound[h.worker] && h.session != sv->session[h.worker])))
        ; /* a process of a world before the last change closing its client: not this world's worker */
    else if (h.worker >= sv->workers)
        refuse(sv, sock, &f[0], h.worker, st, "worker out of range");
    else if (sv->done[h.worker] == 3)
        refuse(sv, sock, &f[0], h.worker, st, "this worker was silent past the timeout and is counted lost");
    else if (frames > 4 || (frames == 4 && h.type != TRAIN_PS_PUSH) ||
             (frames == 3 && h.type != TRAIN_PS_PULL && h.type != TRAIN_PS_PUSH && h.type != TRAIN_PS_WORLD)) {
        snprintf(why, sizeof why, "a message of %zu frames (a %s takes %s)", frames - 1,
                 h.type == TRAIN_PS_PULL   ? "PULL"
                 : h.type == TRAIN_PS_PUSH ? "PUSH"
                                           : "message of its type",
                 h.type == TRAIN_PS_PULL   ? "1 or 2"
                 : h.type == TRAIN_PS_PUSH ? "3"
                                           : "1");
        refuse(sv, sock, &f[0], h.worker, st, why);
    } else if (h.type == TRAIN_PS_BYE && sv->o->restore != NULL && h.incarnation != 0 &&
               h.incarnation != sv->incarnation) {
        /* restored: a worker of the server's previous run leaving (it failed naming the restart) is not
         * this run's worker, which is to come and resume (without a restore, such a BYE ends the job as
         * failed: nothing could resume it) */
        snprintf(why, sizeof why,
                 "a BYE for incarnation %016" PRIx64 " of parameter server %u, which now runs as "
                 "%016" PRIx64 ": ignored",
                 h.incarnation, sv->o->index, sv->incarnation);
        refuse(sv, sock, &f[0], h.worker, st, why);
    } else if ((sv->pushed[h.worker] || sv->bound[h.worker]) && h.session != sv->session[h.worker] &&
               (h.type == TRAIN_PS_PULL || h.type == TRAIN_PS_PUSH || h.type == TRAIN_PS_BYE ||
                h.type == TRAIN_PS_WORLD)) {
        snprintf(why, sizeof why,
                 "worker %u is another process (session %016" PRIx64 ") than the one this "
                 "server serves (session %016" PRIx64 "): a process starting asks where to resume (RESUME) "
                 "before it pulls; one that did not would train its shard again from the start",
                 h.worker, h.session, sv->session[h.worker]);
        refuse(sv, sock, &f[0], h.worker, st, why);
    } else {
        sv->heard[h.worker] = sl_clock_ns();
        if (h.type == TRAIN_PS_PULL)
            on_pull(sv, sock, &f[0], &h, nf == 3 ? &f[2] : NULL, st);
        else if (h.type == TRAIN_PS_PUSH)
            on_push(sv, sock, &f[0], &h, nf >= 3 ? &f[2] : NULL, nf == 4 ? &f[3] : NULL, st);
        else if (h.type == TRAIN_PS_RESUME)
            on_resume(sv, sock, &f[0], &h, st);
        else if (h.type == TRAIN_PS_BYE)
            on_bye(sv, h.worker);
        else if (h.type == TRAIN_PS_WORLD)
            on_world(sv, sock, &f[0], &h, nf == 3 ? &f[2] : NULL, st);
        else
            refuse(sv, sock, &f[0], h.worker, st, "a message of the wrong type or size");
    }
    for (size_t k = 0; k < nf; k++)
        zmq_msg_close(&f[k]);
}

int train_ps_serve(const struct train_ps_server_opts *o, struct train_ps_server_stats *st, struct sl_error *err)
{
    memset(st, 0, sizeof *st);
    if (o->workers == 0)
        return sl_error_set(err, SL_EINVAL, "parameter server %u: no workers", o->index);
    struct server sv = {.o = o,
                        .workers = o->workers,
                        .not_done = o->workers,
                        .left = o->workers,
                        .lost_first = -1,
                        .early_first = -1,
                        .incarnation = train_ps_draw_id()};
    st->incarnation = sv.incarnation;
    int walloc = workers_alloc(&sv, o->workers);
    void *sock = zmq_socket(o->ctx, ZMQ_ROUTER);
    struct sl_curve_allow *allow = NULL;
    struct sl_zap *zap = NULL;
    int rc = 0;
    if (walloc != 0) {
        rc = sl_error_set(err, SL_ENOMEM, "out of memory for %u workers", o->workers);
        goto out;
    }
    if (o->setup == NULL && (rc = setup(&sv, NULL, 0, err)) != 0)
        goto out;
    if (o->restore != NULL && (rc = restore(&sv, st, err)) != 0)
        goto out;
    if ((rc = listen_on(o, sock, &allow, &zap, err)) != 0)
        goto out;
    uint64_t start = sl_clock_ns();
    for (uint32_t w = 0; w < sv.workers; w++)
        sv.heard[w] = start;
    sv.eval_heard = start;
    while (sv.left > 0 || eval_awaited(&sv, sl_clock_ns())) {
        /* an atomic read: a signal handler sets it in sluice-trainer, another
         * thread in the tests */
        if (o->stop != NULL && __atomic_load_n(o->stop, __ATOMIC_RELAXED)) {
            if (st->version != sv.ckpt_version || st->checkpoints == 0)
                checkpoint(&sv, st);
            rc = sv.ckpt_rc != 0
                     ? sl_error_set(err, sv.ckpt_rc, "parameter server %u: stopped; %s", o->index, sv.ckpt_err.msg)
                     : sl_error_set(err, SL_ECLOSED, "parameter server %u: stopped", o->index);
            break;
        }
        if (sv.ckpt_rc != 0) {
            rc = sl_error_set(err, sv.ckpt_rc, "parameter server %u: %s", o->index, sv.ckpt_err.msg);
            break;
        }
        zmq_pollitem_t it = {.socket = sock, .events = ZMQ_POLLIN};
        int ready = zmq_poll(&it, 1, 100);
        if (ready < 0 && zmq_errno() != EINTR) {
            rc = sl_error_set(err, SL_EIO, "parameter server %u: zmq_poll: %s", o->index, zmq_strerror(zmq_errno()));
            break;
        }
        check_lost(&sv, sl_clock_ns());
        if (ready <= 0) {
            publish(&sv, st);
            continue;
        }
        on_message(&sv, sock, st);
        publish(&sv, st);
    }
    st->lost = 0;
    st->workers = sv.workers;
    for (uint32_t w = 0; w < sv.workers; w++) {
        st->lost += sv.done[w] == 3;
        st->left_early += sv.final[w] == 2;
    }
    if (rc == 0 && sv.lost_first >= 0)
        rc = sl_error_set(err, SL_ETIMEOUT,
                          "parameter server %u: worker %d was silent for %.1f s and is lost (%u "
                          "lost in all); its pushes stopped there",
                          o->index, sv.lost_first, o->worker_timeout_ms / 1000.0, st->lost);
    else if (rc == 0 && sv.early_first >= 0)
        rc = sl_error_set(err, SL_EPROTO,
                          "parameter server %u: worker %d left before its final pull (it failed or "
                          "was stopped; %u in all): the job did not finish",
                          o->index, sv.early_first, st->left_early);
out:
    st->elements = sv.n;
    st->evaluator = sv.eval;
    st->evaluator_served = sv.eval_served;
    if (sock != NULL)
        zmq_close(sock);
    sl_zap_stop(zap);
    sl_curve_allow_free(allow);
    workers_free(&sv);
    sl_free(sv.v);
    sl_free(sv.p);
    return rc;
}
