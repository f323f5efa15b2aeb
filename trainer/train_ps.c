/* train_ps: see train_ps.h. */
#include "train_ps.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_bytes.h"
#include "sl_clock.h"
#include "sl_endpoint.h"
#include "sl_peer.h"

/* unit u: its first variable, its total size, and the server it gets */
struct unit {
    size_t first;
    uint64_t size;
    uint32_t server;
};

int train_ps_place(const size_t *sizes, const int *group, size_t n, uint32_t nps, enum train_ps_placement how,
                   uint32_t *owner, struct sl_error *err)
{
    if (nps == 0 || nps > TRAIN_PS_MAX_SERVERS)
        return sl_error_set(err, SL_EINVAL, "%u parameter servers (1 to %d)", nps, TRAIN_PS_MAX_SERVERS);
    if (n > TRAIN_PS_MAX_VARS)
        return sl_error_set(err, SL_EINVAL, "%zu variables (at most %d)", n, TRAIN_PS_MAX_VARS);
    if (how != TRAIN_PS_ROUND_ROBIN && how != TRAIN_PS_BALANCED)
        return sl_error_set(err, SL_EINVAL, "unknown placement %d", (int)how);
    for (size_t i = 0; group != NULL && i < n; i++)
        if (group[i] < -1)
            return sl_error_set(err, SL_EINVAL, "variable %zu: colocation group %d (-1: none, or >= 0)", i, group[i]);
    if (n == 0)
        return 0;
    struct unit *units = sl_calloc(n, sizeof *units);
    size_t *unit_of = sl_calloc(n, sizeof *unit_of);
    if (units == NULL || unit_of == NULL) {
        sl_free(units);
        sl_free(unit_of);
        return sl_error_set(err, SL_ENOMEM, "out of memory placing %zu variables", n);
    }
    /* units in the order of their first variable (n^2 at most 16M steps) */
    size_t nu = 0;
    for (size_t i = 0; i < n; i++) {
        size_t u = nu;
        if (group != NULL && group[i] >= 0)
            for (size_t k = 0; k < i; k++)
                if (group[k] == group[i]) {
                    u = unit_of[k];
                    break;
                }
        if (u == nu)
            units[nu++] = (struct unit){.first = i};
        units[u].size += sizes[i];
        unit_of[i] = u;
    }
    if (how == TRAIN_PS_ROUND_ROBIN) {
        for (size_t u = 0; u < nu; u++)
            units[u].server = (uint32_t)(u % nps);
    } else {
        uint64_t load[TRAIN_PS_MAX_SERVERS] = {0};
        char *done = sl_calloc(nu, 1);
        if (done == NULL) {
            sl_free(units);
            sl_free(unit_of);
            return sl_error_set(err, SL_ENOMEM, "out of memory placing %zu variables", n);
        }
        for (size_t step = 0; step < nu; step++) {
            size_t best = nu;
            for (size_t u = 0; u < nu; u++) /* the largest left; the first on ties */
                if (!done[u] && (best == nu || units[u].size > units[best].size))
                    best = u;
            uint32_t s = 0;
            for (uint32_t k = 1; k < nps; k++)
                if (load[k] < load[s])
                    s = k;
            units[best].server = s;
            load[s] += units[best].size;
            done[best] = 1;
        }
        sl_free(done);
    }
    for (size_t i = 0; i < n; i++)
        owner[i] = units[unit_of[i]].server;
    sl_free(units);
    sl_free(unit_of);
    return 0;
}

/* ---- the wire ---- */

size_t train_ps_elements(const struct train_ps_layout *l, uint32_t ps)
{
    size_t n = 0;
    for (size_t i = 0; i < l->nvars; i++)
        if (l->owner[i] == ps)
            n += l->vars[i].count;
    return n;
}

struct hdr {
    uint8_t type;
    uint32_t worker, flags;
    uint64_t version, step, incarnation, session;
};

static void put_hdr(uint8_t *b, const struct hdr *h)
{
    memset(b, 0, TRAIN_PS_HEADER);
    memcpy(b, "SLPS", 4);
    b[4] = TRAIN_PS_WIRE_VERSION;
    b[5] = h->type;
    sl_store_le32(b + 8, h->worker);
    sl_store_le32(b + 12, h->flags);
    sl_store_le64(b + 16, h->version);
    sl_store_le64(b + 24, h->step);
    sl_store_le64(b + 32, h->incarnation);
    sl_store_le64(b + 40, h->session);
}

static int get_hdr(const uint8_t *b, size_t n, struct hdr *h)
{
    if (n != TRAIN_PS_HEADER || memcmp(b, "SLPS", 4) != 0 || b[4] != TRAIN_PS_WIRE_VERSION ||
        b[5] < TRAIN_PS_PULL || b[5] > TRAIN_PS_RESUME)
        return -1;
    h->type = b[5];
    h->worker = sl_load_le32(b + 8);
    h->flags = sl_load_le32(b + 12);
    h->version = sl_load_le64(b + 16);
    h->step = sl_load_le64(b + 24);
    h->incarnation = sl_load_le64(b + 32);
    h->session = sl_load_le64(b + 40);
    return 0;
}

int train_ps_hdr_check(const uint8_t *b, size_t n, uint8_t *back)
{
    struct hdr h;
    if (get_hdr(b, n, &h) != 0)
        return -1;
    put_hdr(back, &h);
    return 0;
}

char *train_ps_printable(char *out, size_t cap, const void *text, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const uint8_t *t = text;
    size_t at = 0;
    for (size_t i = 0; i < len; i++) {
        int plain = t[i] >= 0x20 && t[i] < 0x7f && t[i] != '\\';
        if (at + (plain ? 1 : 4) >= cap)
            break;
        if (plain) {
            out[at++] = (char)t[i];
        } else {
            out[at++] = '\\';
            out[at++] = 'x';
            out[at++] = hex[t[i] >> 4];
            out[at++] = hex[t[i] & 15];
        }
    }
    out[at] = '\0';
    return out;
}

/* Send [routing id?] header [body]. */
static int send_msg(void *sock, zmq_msg_t *id, const struct hdr *h, const void *body, size_t len)
{
    uint8_t b[TRAIN_PS_HEADER];
    put_hdr(b, h);
    int more = body != NULL ? ZMQ_SNDMORE : 0;
    if (id != NULL && zmq_msg_send(id, sock, ZMQ_SNDMORE) < 0)
        return -1;
    if (zmq_send(sock, b, sizeof b, more) < 0)
        return -1;
    if (body != NULL && zmq_send(sock, body, len, 0) < 0)
        return -1;
    return 0;
}

/* Receive one multipart message: its first `cap` frames into f (*nf of
 * them, each to be closed by the caller), the rest closed. Returns how
 * many frames the message had. */
static size_t recv_frames(void *sock, zmq_msg_t *f, size_t cap, size_t *nf)
{
    size_t frames = 0;
    int more = 1;
    *nf = 0;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, 0) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        frames++;
        if (*nf < cap)
            f[(*nf)++] = m;
        else
            zmq_msg_close(&m);
    }
    return frames;
}

/* ---- the model's placement ---- */

int train_ps_model_init(struct train_ps_model *pm, const struct train_model_config *cfg, uint32_t nps,
                        enum train_ps_placement how, struct sl_error *err)
{
    memset(pm, 0, sizeof *pm);
    int rc = train_model_create(&pm->model, cfg, err);
    if (rc != 0)
        return rc;
    size_t n = train_model_variables(pm->model, pm->vars, TRAIN_MODEL_MAX_VARS), sizes[TRAIN_MODEL_MAX_VARS];
    for (size_t i = 0; i < n; i++)
        sizes[i] = pm->vars[i].count;
    if ((rc = train_ps_place(sizes, NULL, n, nps, how, pm->owner, err)) != 0) {
        train_ps_model_free(pm);
        return rc;
    }
    pm->layout = (struct train_ps_layout){.vars = pm->vars, .nvars = n, .owner = pm->owner, .nps = nps};
    char hidden[64] = "-";
    for (int h = 0, at = 0; h < cfg->nhidden; h++)
        at += snprintf(hidden + at, sizeof hidden - (size_t)at, "%s%d", h ? "," : "", cfg->hidden[h]);
    snprintf(pm->config, sizeof pm->config,
             "inputs=%d classes=%d hidden=%s seed=%" PRIu64 " lr=%.9g momentum=%.9g servers=%u placement=%s",
             cfg->inputs, cfg->classes, hidden, cfg->seed, (double)cfg->lr, (double)cfg->momentum, nps,
             how == TRAIN_PS_BALANCED ? "balanced" : "round-robin");
    return 0;
}

void train_ps_model_free(struct train_ps_model *pm)
{
    train_model_destroy(pm->model);
    memset(pm, 0, sizeof *pm);
}

uint32_t train_ps_config_inputs(const char *config, size_t len)
{
    static const char key[] = "inputs=";
    if (len < sizeof key - 1 || memcmp(config, key, sizeof key - 1) != 0)
        return 0;
    uint64_t v = 0;
    size_t i = sizeof key - 1, start = i;
    for (; i < len && config[i] >= '0' && config[i] <= '9' && i - start < 9; i++)
        v = v * 10 + (uint64_t)(config[i] - '0');
    if (i == start || (i < len && config[i] != ' ') || v == 0 || v > TRAIN_MODEL_MAX_WIDTH)
        return 0;
    return (uint32_t)v;
}

/* ---- the server ---- */

/* Copy between the whole array and the server's packed elements. */
static void pack(const struct train_ps_layout *l, uint32_t ps, const float *whole, float *packed)
{
    for (size_t i = 0; i < l->nvars; i++)
        if (l->owner[i] == ps) {
            memcpy(packed, whole + l->vars[i].offset, l->vars[i].count * sizeof *packed);
            packed += l->vars[i].count;
        }
}

static void unpack(const struct train_ps_layout *l, uint32_t ps, const float *packed, float *whole)
{
    for (size_t i = 0; i < l->nvars; i++)
        if (l->owner[i] == ps) {
            memcpy(whole + l->vars[i].offset, packed, l->vars[i].count * sizeof *packed);
            packed += l->vars[i].count;
        }
}

/* What a server holds. */
struct server {
    const struct train_ps_server_opts *o;
    const struct train_ps_layout *l; /* NULL until set up */
    size_t n;
    float *p, *v;
    char config[TRAIN_PS_MAX_CONFIG]; /* the first accepted description (setup) */
    size_t config_len;
    uint8_t *done;      /* [workers]: 1 final pull or BYE, 2 BYE, 3 lost */
    uint8_t *final;     /* [workers]: its final pull came */
    uint64_t *heard;    /* [workers]: when last heard (ns) */
    uint64_t *session;  /* [workers]: the session whose push was applied first (pushed[w]), or the one a
                           RESUME adopted since */
    uint8_t *pushed;    /* [workers]: a push of it was applied */
    struct train_input_position *pos; /* [workers]: after its last push applied (pushed[w]) */
    uint8_t *adopted;   /* [workers]: a RESUME adopted a new session (or a checkpoint was restored), no push of
                           it applied yet: 1, 2 once a skipped push was said */
    uint32_t not_done, left; /* not done; not BYE or lost */
    int lost_first;     /* the first worker lost, or -1 */
    int early_first;    /* the first worker whose BYE came before its final pull, or -1 */
    uint64_t incarnation;
    int ckpt_rc;        /* a checkpoint failed: the server stops with ckpt_err */
    struct sl_error ckpt_err;
    uint64_t ckpt_version; /* the version last checkpointed (restored) */
    enum train_ps_eval_state eval; /* the evaluator (not a worker) */
    int eval_served;    /* it was sent the final values */
    uint64_t eval_heard; /* when last heard (ns) */
};

static void checkpoint(struct server *sv, struct train_ps_server_stats *st);

/* ERROR (carrying the incarnation), counted, and told to opts.refused. */
static void refuse(struct server *sv, void *sock, zmq_msg_t *id, uint32_t worker, struct train_ps_server_stats *st,
                   const char *why)
{
    st->bad_messages++;
    struct hdr h = {.type = TRAIN_PS_ERROR, .worker = worker, .incarnation = sv->incarnation};
    (void)send_msg(sock, id, &h, why, strlen(why));
    if (sv->o->refused != NULL)
        sv->o->refused(sv->o->refused_arg, worker, why);
}

/* Told to opts.said (a restart adopted, a push not applied again). */
static void say(struct server *sv, uint32_t worker, const char *what)
{
    if (sv->o->said != NULL)
        sv->o->said(sv->o->said_arg, worker, what);
}

/* A random nonzero id: getrandom, else the clock and the pid. */
uint64_t train_ps_draw_id(void)
{
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x || x == 0)
        x = (sl_clock_ns() ^ ((uint64_t)getpid() << 40)) | 1u;
    return x;
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
    pack(l, o->index, init, sv->p);
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
static void on_pull(struct server *sv, void *sock, zmq_msg_t *id, const struct hdr *h, zmq_msg_t *body,
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
        snprintf(why, sizeof why, "worker %u pulled before from incarnation %016" PRIx64 " of parameter server %u, "
                 "which now runs as %016" PRIx64 ": the server restarted and what it held is gone", h->worker,
                 h->incarnation, sv->o->index, sv->incarnation);
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
                 train_ps_printable(a, sizeof a, cfg, len), train_ps_printable(b, sizeof b, sv->config,
                                                                               sv->config_len));
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
            struct hdr r = {.type = TRAIN_PS_ACK, .worker = h->worker, .flags = sv->not_done,
                            .version = st->version, .step = st->global_step, .incarnation = sv->incarnation};
            (void)send_msg(sock, id, &r, NULL, 0);
            return;
        }
    }
    struct hdr r = {.type = TRAIN_PS_VALUES, .worker = h->worker, .flags = h->flags & TRAIN_PS_FINAL,
                    .version = st->version, .step = st->global_step, .incarnation = sv->incarnation};
    if (h->flags & TRAIN_PS_FINAL) { /* every worker is done: say who did not finish */
        uint32_t bad = 0;
        for (uint32_t w = sv->o->workers; w-- > 0;)
            if (sv->done[w] == 3 || sv->final[w] == 2) {
                bad++;
                r.session = (uint64_t)w + 1;
            }
        r.flags |= (bad < 0xffffffu ? bad : 0xffffffu) << 8;
    }
    (void)send_msg(sock, id, &r, sv->p, sv->n * sizeof *sv->p);
    if ((h->flags & TRAIN_PS_READ_ONLY) && (h->flags & TRAIN_PS_FINAL)) {
        sv->eval_served = 1;
        if (sv->eval < TRAIN_PS_EVAL_SERVED)
            sv->eval = TRAIN_PS_EVAL_SERVED;
    }
}

/* The evaluator's PULL or BYE (TRAIN_PS_READ_ONLY): answered as a
 * worker's, but it is no worker: nothing of the workers' state changes. */
static void on_evaluator(struct server *sv, void *sock, zmq_msg_t *id, const struct hdr *h, zmq_msg_t *body,
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
static int push_position(struct server *sv, uint32_t w, zmq_msg_t *pm, struct train_input_position *p, int *dup,
                         char *why, size_t cap)
{
    struct sl_error e = {0};
    *dup = 0;
    if (pm == NULL) {
        snprintf(why, cap, "a push without its input position (a PUSH takes 3 frames: header, gradient, position)");
        return -1;
    }
    if (train_input_position_decode(p, zmq_msg_data(pm), zmq_msg_size(pm), &e) != 0) {
        snprintf(why, cap, "a push's %s", e.msg);
        return -1;
    }
    const struct train_input_position *r = &sv->pos[w];
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
        snprintf(why, cap, "worker %u pushed the step ending at input position %" PRIu64 " (epoch %" PRIu64 " step %"
                 PRIu64 "); this server expected %" PRIu64 " (epoch %" PRIu64 " or %" PRIu64 "), one step after "
                 "the last it applied: a step skipped or repeated", w, p->seq, p->epoch, p->step, want, epoch,
                 epoch + 1);
        return -1;
    }
    return 0;
}

static void on_push(struct server *sv, void *sock, zmq_msg_t *id, const struct hdr *h, zmq_msg_t *body,
                    zmq_msg_t *posm, struct train_ps_server_stats *st)
{
    const struct train_ps_server_opts *o = sv->o;
    char why[1200];
    if (sv->l == NULL) {
        refuse(sv, sock, id, h->worker, st, "a push before any pull");
        return;
    }
    if (body == NULL || zmq_msg_size(body) != sv->n * sizeof(float)) {
        snprintf(why, sizeof why, "a push of %zu bytes (this server holds %zu floats: %zu bytes)",
                 body != NULL ? zmq_msg_size(body) : 0, sv->n, sv->n * sizeof(float));
        refuse(sv, sock, id, h->worker, st, why);
        return;
    }
    if (h->incarnation != sv->incarnation) {
        snprintf(why, sizeof why, "a push computed on incarnation %016" PRIx64 " of parameter server %u, which now "
                 "runs as %016" PRIx64 " (restarted: the values it was computed from are gone)", h->incarnation,
                 o->index, sv->incarnation);
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
    for (size_t k = 0; k < sv->n; k += 256) {
        size_t m = sv->n - k < 256 ? sv->n - k : 256;
        memcpy(g, g8 + k * sizeof(float), m * sizeof(float));
        for (size_t i = 0; i < m; i++)
            if (!isfinite(g[i])) {
                snprintf(why, sizeof why, "a gradient with a non-finite value (%s at element %zu of %zu): nothing "
                         "applied", isnan(g[i]) ? "nan" : g[i] > 0 ? "inf" : "-inf", k + i, sv->n);
                refuse(sv, sock, id, h->worker, st, why);
                return;
            }
    }
    struct train_input_position pos;
    int dup = 0;
    if (push_position(sv, h->worker, posm, &pos, &dup, why, sizeof why) != 0) {
        refuse(sv, sock, id, h->worker, st, why);
        return;
    }
    if (dup) { /* the old process's push reached this server: not again */
        st->skipped++;
        if (sv->adopted[h->worker] == 1) { /* said once an adoption: a restored server may skip many */
            const struct train_input_position *r = &sv->pos[h->worker];
            snprintf(why, sizeof why, "worker %u: its push of epoch %" PRIu64 " step %" PRIu64 " (input position %"
                     PRIu64 ") was applied here before its restart: acknowledged, not applied again (and so up to "
                     "step %" PRIu64 ", the position recorded here)", h->worker, pos.epoch, pos.step, pos.seq,
                     r->step);
            say(sv, h->worker, why);
            sv->adopted[h->worker] = 2;
        }
        struct hdr r = {.type = TRAIN_PS_ACK, .worker = h->worker, .flags = TRAIN_PS_ACK_SKIPPED,
                        .version = st->version, .step = st->global_step, .incarnation = sv->incarnation};
        (void)send_msg(sock, id, &r, NULL, 0);
        return;
    }
    if (!sv->pushed[h->worker]) {
        sv->pushed[h->worker] = 1;
        sv->session[h->worker] = h->session;
    }
    sv->pos[h->worker] = pos;
    sv->adopted[h->worker] = 0;
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
    struct hdr r = {.type = TRAIN_PS_ACK, .worker = h->worker,
                    .flags = (uint32_t)(stale > UINT32_MAX ? UINT32_MAX : stale), .version = st->version,
                    .step = st->global_step, .incarnation = sv->incarnation};
    (void)send_msg(sock, id, &r, NULL, 0);
}

/* A checkpoint of what the server holds now (opts.checkpoint). */
static void checkpoint(struct server *sv, struct train_ps_server_stats *st)
{
    const struct train_ps_server_opts *o = sv->o;
    if (o->checkpoint == NULL || sv->l == NULL || sv->ckpt_rc != 0)
        return;
    struct train_ps_state s = {.index = o->index, .servers = sv->l->nps, .workers = o->workers,
                               .version = st->version, .global_step = st->global_step, .config = sv->config,
                               .config_len = sv->config_len, .pos = sv->pos, .values = sv->p, .momentum = sv->v,
                               .n = sv->n};
    if ((sv->ckpt_rc = o->checkpoint(o->checkpoint_arg, &s, &sv->ckpt_err)) == 0) {
        st->checkpoints++;
        sv->ckpt_version = st->version;
    }
}

/* A RESUME: a worker process starting asks where its shard stands. A
 * session other than the recorded one is adopted (the old process is
 * gone: its messages are refused from now on); the answer is an ACK with
 * the recorded position (none: the worker has no push applied here). */
static void on_resume(struct server *sv, void *sock, zmq_msg_t *id, const struct hdr *h,
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
    const struct train_input_position *p = &sv->pos[w];
    if (sv->pushed[w] && h->session != sv->session[w]) {
        char old[40] = "restored from a checkpoint";
        if (sv->session[w] != 0)
            snprintf(old, sizeof old, "replaces %016" PRIx64, sv->session[w]);
        snprintf(why, sizeof why, "worker %u restarted: resuming at epoch %" PRIu64 " step %" PRIu64 " (input "
                 "position %" PRIu64 "; session %016" PRIx64 " %s)", w, p->epoch, p->step, p->seq, h->session, old);
        sv->session[w] = h->session;
        sv->adopted[w] = 1;
        st->restarts++;
        say(sv, w, why);
    }
    struct hdr r = {.type = TRAIN_PS_ACK, .worker = w, .version = st->version, .step = st->global_step,
                    .incarnation = sv->incarnation, .session = h->session};
    uint8_t b[TRAIN_INPUT_POSITION_BYTES];
    if (sv->pushed[w])
        train_input_position_encode(p, b);
    (void)send_msg(sock, id, &r, sv->pushed[w] ? b : NULL, sizeof b);
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
    for (uint32_t w = 0; w < sv->o->workers; w++)
        lost += sv->done[w] == 3;
    atomic_store_explicit(&l->lost, lost, memory_order_relaxed);
    atomic_store_explicit(&l->workers_done, sv->o->workers - sv->not_done, memory_order_relaxed);
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
    for (uint32_t w = 0; w < o->workers; w++)
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
        return sl_error_set(err, SL_EINVAL, "parameter server %u of %u workers: the state restored is server %u's of "
                            "%u workers", o->index, o->workers, r->index, r->workers);
    if (r->config_len > TRAIN_PS_MAX_CONFIG)
        return sl_error_set(err, SL_EINVAL, "parameter server %u: a restored description over %d bytes", o->index,
                            TRAIN_PS_MAX_CONFIG);
    int rc;
    if (sv->l == NULL && (rc = setup(sv, r->config_len ? r->config : NULL, r->config_len, err)) != 0)
        return sl_error_prefix(err, "parameter server %u: the restored model: ", o->index);
    if (r->servers != sv->l->nps || r->n != sv->n)
        return sl_error_set(err, SL_EINVAL, "parameter server %u: the state restored holds %zu floats of server %u of "
                            "%u; this server holds %zu of %u", o->index, r->n, r->index, r->servers, sv->n,
                            sv->l->nps);
    memcpy(sv->p, r->values, sv->n * sizeof *sv->p);
    memcpy(sv->v, r->momentum, sv->n * sizeof *sv->v);
    for (uint32_t w = 0; w < o->workers; w++) {
        sv->pos[w] = r->pos[w];
        sv->pushed[w] = sv->adopted[w] = r->pos[w].replicas != 0;
        sv->session[w] = 0; /* whoever comes is a new process: its RESUME adopts it */
    }
    st->version = sv->ckpt_version = r->version;
    st->global_step = r->global_step;
    return 0;
}

/* The socket: CURVE and its ZAP handler (opts.curve), then bound. */
static int listen_on(const struct train_ps_server_opts *o, void *sock, struct sl_curve_allow **allow,
                     struct sl_zap **zap, struct sl_error *err)
{
    int linger = 0, rc = 0;
    if (sock == NULL || zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger) != 0)
        return sl_error_set(err, SL_EIO, "parameter server %u: zmq_socket: %s", o->index, zmq_strerror(zmq_errno()));
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

int train_ps_serve(const struct train_ps_server_opts *o, struct train_ps_server_stats *st, struct sl_error *err)
{
    memset(st, 0, sizeof *st);
    if (o->workers == 0)
        return sl_error_set(err, SL_EINVAL, "parameter server %u: no workers", o->index);
    struct server sv = {.o = o, .not_done = o->workers, .left = o->workers, .lost_first = -1, .early_first = -1,
                        .incarnation = train_ps_draw_id()};
    st->incarnation = sv.incarnation;
    sv.done = sl_calloc(o->workers, 1);
    sv.final = sl_calloc(o->workers, 1);
    sv.heard = sl_calloc(o->workers, sizeof *sv.heard);
    sv.session = sl_calloc(o->workers, sizeof *sv.session);
    sv.pushed = sl_calloc(o->workers, 1);
    sv.pos = sl_calloc(o->workers, sizeof *sv.pos);
    sv.adopted = sl_calloc(o->workers, 1);
    void *sock = zmq_socket(o->ctx, ZMQ_ROUTER);
    struct sl_curve_allow *allow = NULL;
    struct sl_zap *zap = NULL;
    int rc = 0;
    if (sv.done == NULL || sv.final == NULL || sv.heard == NULL || sv.session == NULL || sv.pushed == NULL ||
        sv.pos == NULL || sv.adopted == NULL) {
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
    for (uint32_t w = 0; w < o->workers; w++)
        sv.heard[w] = start;
    sv.eval_heard = start;
    while (sv.left > 0 || eval_awaited(&sv, sl_clock_ns())) {
        if (o->stop != NULL && *o->stop) {
            if (st->version != sv.ckpt_version || st->checkpoints == 0)
                checkpoint(&sv, st);
            rc = sv.ckpt_rc != 0 ? sl_error_set(err, sv.ckpt_rc, "parameter server %u: stopped; %s", o->index,
                                                sv.ckpt_err.msg)
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
        /* [id] header [body [position]]: at most 4 frames are kept, the
         * rest counted and dropped */
        zmq_msg_t f[4];
        size_t nf = 0, frames = recv_frames(sock, f, 4, &nf);
        struct hdr h;
        char why[384];
        if (nf < 2 || get_hdr(zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), &h) != 0)
            refuse(&sv, sock, nf > 0 ? &f[0] : NULL, UINT32_MAX, st, "not a parameter-server message");
        else if (h.flags & TRAIN_PS_READ_ONLY) /* frames checked there: worker 0 may be lost, not the evaluator */
            on_evaluator(&sv, sock, &f[0], &h, nf == 3 ? &f[2] : NULL, frames, st);
        else if (h.worker >= o->workers)
            refuse(&sv, sock, &f[0], h.worker, st, "worker out of range");
        else if (sv.done[h.worker] == 3)
            refuse(&sv, sock, &f[0], h.worker, st, "this worker was silent past the timeout and is counted lost");
        else if (frames > 4 || (frames == 4 && h.type != TRAIN_PS_PUSH) ||
                 (frames == 3 && h.type != TRAIN_PS_PULL && h.type != TRAIN_PS_PUSH)) {
            snprintf(why, sizeof why, "a message of %zu frames (a %s takes %s)", frames - 1,
                     h.type == TRAIN_PS_PULL ? "PULL" : h.type == TRAIN_PS_PUSH ? "PUSH" : "message of its type",
                     h.type == TRAIN_PS_PULL ? "1 or 2" : h.type == TRAIN_PS_PUSH ? "3" : "1");
            refuse(&sv, sock, &f[0], h.worker, st, why);
        } else if (h.type == TRAIN_PS_BYE && o->restore != NULL && h.incarnation != 0 &&
                   h.incarnation != sv.incarnation) {
            /* restored: a worker of the server's previous run leaving (it failed naming the restart) is not
             * this run's worker, which is to come and resume (without a restore, such a BYE ends the job as
             * failed: nothing could resume it) */
            snprintf(why, sizeof why, "a BYE for incarnation %016" PRIx64 " of parameter server %u, which now runs as "
                     "%016" PRIx64 ": ignored", h.incarnation, o->index, sv.incarnation);
            refuse(&sv, sock, &f[0], h.worker, st, why);
        } else if (sv.pushed[h.worker] && h.session != sv.session[h.worker] &&
                   (h.type == TRAIN_PS_PULL || h.type == TRAIN_PS_PUSH || h.type == TRAIN_PS_BYE)) {
            snprintf(why, sizeof why, "worker %u is another process (session %016" PRIx64 ") than the one this "
                     "server serves (session %016" PRIx64 "): a process starting asks where to resume (RESUME) "
                     "before it pulls; one that did not would train its shard again from the start", h.worker,
                     h.session, sv.session[h.worker]);
            refuse(&sv, sock, &f[0], h.worker, st, why);
        } else {
            sv.heard[h.worker] = sl_clock_ns();
            if (h.type == TRAIN_PS_PULL)
                on_pull(&sv, sock, &f[0], &h, nf == 3 ? &f[2] : NULL, st);
            else if (h.type == TRAIN_PS_PUSH)
                on_push(&sv, sock, &f[0], &h, nf >= 3 ? &f[2] : NULL, nf == 4 ? &f[3] : NULL, st);
            else if (h.type == TRAIN_PS_RESUME)
                on_resume(&sv, sock, &f[0], &h, st);
            else if (h.type == TRAIN_PS_BYE)
                on_bye(&sv, h.worker);
            else
                refuse(&sv, sock, &f[0], h.worker, st, "a message of the wrong type or size");
        }
        for (size_t k = 0; k < nf; k++)
            zmq_msg_close(&f[k]);
        publish(&sv, st);
    }
    st->lost = 0;
    for (uint32_t w = 0; w < o->workers; w++) {
        st->lost += sv.done[w] == 3;
        st->left_early += sv.final[w] == 2;
    }
    if (rc == 0 && sv.lost_first >= 0)
        rc = sl_error_set(err, SL_ETIMEOUT, "parameter server %u: worker %d was silent for %.1f s and is lost (%u "
                          "lost in all); its pushes stopped there", o->index, sv.lost_first,
                          o->worker_timeout_ms / 1000.0, st->lost);
    else if (rc == 0 && sv.early_first >= 0)
        rc = sl_error_set(err, SL_EPROTO, "parameter server %u: worker %d left before its final pull (it failed or "
                          "was stopped; %u in all): the job did not finish", o->index, sv.early_first,
                          st->left_early);
out:
    st->elements = sv.n;
    st->evaluator = sv.eval;
    st->evaluator_served = sv.eval_served;
    if (sock != NULL)
        zmq_close(sock);
    sl_zap_stop(zap);
    sl_curve_allow_free(allow);
    sl_free(sv.done);
    sl_free(sv.final);
    sl_free(sv.heard);
    sl_free(sv.session);
    sl_free(sv.pushed);
    sl_free(sv.pos);
    sl_free(sv.adopted);
    sl_free(sv.v);
    sl_free(sv.p);
    return rc;
}

/* ---- the client ---- */

struct train_ps_client {
    const struct train_ps_layout *l;
    uint32_t worker;
    uint32_t flags;    /* TRAIN_PS_READ_ONLY: the evaluator's */
    char config[TRAIN_PS_MAX_CONFIG];
    size_t config_len; /* 0: no description */
    int timeout_ms;
    int curve;         /* the connections are CURVE clients */
    void **socks;      /* [nps] DEALER */
    char **eps;        /* [nps] */
    uint64_t *version; /* [nps] the version last pulled (or acknowledged) */
    uint64_t *incarnation; /* [nps] the server's, from its first reply (0: none yet) */
    uint64_t session;  /* this client's, in every PULL, PUSH and BYE */
    uint32_t lost, first_lost; /* from the final values (train_ps_client_lost) */
    float *buf;        /* the largest server's elements */
    struct train_input_position next; /* the position the next push carries */
    int next_set;      /* train_ps_client_set_position since the last push */
    struct sl_error broken; /* a server restarted or went backwards: every call fails with this */
};

int train_ps_client_open(struct train_ps_client **out, void *ctx, const char *const *eps,
                         const struct train_ps_layout *l, uint32_t worker, int timeout_ms, const char *config,
                         struct sl_error *err)
{
    return train_ps_client_open_keys(out, ctx, eps, l, worker, timeout_ms, config, NULL, err);
}

int train_ps_client_open_keys(struct train_ps_client **out, void *ctx, const char *const *eps,
                              const struct train_ps_layout *l, uint32_t worker, int timeout_ms, const char *config,
                              const struct sl_curve_keys *curve, struct sl_error *err)
{
    *out = NULL;
    if (l->nps == 0 || l->nps > TRAIN_PS_MAX_SERVERS)
        return sl_error_set(err, SL_EINVAL, "%u parameter servers (1 to %d)", l->nps, TRAIN_PS_MAX_SERVERS);
    if (config != NULL && strlen(config) >= TRAIN_PS_MAX_CONFIG)
        return sl_error_set(err, SL_EINVAL, "a model description over %d bytes", TRAIN_PS_MAX_CONFIG - 1);
    struct train_ps_client *c = sl_calloc(1, sizeof *c);
    if (c == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    if (config != NULL) {
        c->config_len = strlen(config);
        memcpy(c->config, config, c->config_len);
    }
    c->l = l;
    c->worker = worker;
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 10000;
    c->socks = sl_calloc(l->nps, sizeof *c->socks);
    c->eps = sl_calloc(l->nps, sizeof *c->eps);
    c->version = sl_calloc(l->nps, sizeof *c->version);
    c->incarnation = sl_calloc(l->nps, sizeof *c->incarnation);
    c->curve = curve != NULL;
    c->session = train_ps_draw_id();
    size_t most = 1;
    for (uint32_t s = 0; s < l->nps; s++)
        if (train_ps_elements(l, s) > most)
            most = train_ps_elements(l, s);
    c->buf = sl_calloc(most, sizeof *c->buf);
    if (c->socks == NULL || c->eps == NULL || c->version == NULL || c->incarnation == NULL || c->buf == NULL) {
        train_ps_client_close(c);
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    }
    int linger = 0;
    for (uint32_t s = 0; s < l->nps; s++) {
        c->eps[s] = sl_strdup(eps[s]);
        c->socks[s] = zmq_socket(ctx, ZMQ_DEALER);
        if (c->eps[s] == NULL || c->socks[s] == NULL ||
            zmq_setsockopt(c->socks[s], ZMQ_LINGER, &linger, sizeof linger) != 0 ||
            zmq_setsockopt(c->socks[s], ZMQ_SNDTIMEO, &c->timeout_ms, sizeof c->timeout_ms) != 0) {
            int rc = sl_error_set(err, SL_EIO, "parameter server %u (%s): %s", s, eps[s], zmq_strerror(zmq_errno()));
            train_ps_client_close(c);
            return rc;
        }
        int rc = curve != NULL ? sl_curve_client(c->socks[s], curve, curve->public_z85, err) : 0;
        /* checked, ZMQ_IPV6 for a bracketed host */
        if (rc == 0 && (rc = sl_endpoint_connect(c->socks[s], eps[s], err)) != 0)
            sl_error_prefix(err, "parameter server %u: ", s);
        if (rc != 0) {
            train_ps_client_close(c);
            return rc;
        }
    }
    *out = c;
    return 0;
}

/* A send to server s failed: a connection that never came up (a send
 * blocked past the timeout: ZMQ_SNDTIMEO) reads as a silent server. */
static int send_failed(const struct train_ps_client *c, uint32_t s, struct sl_error *err)
{
    if (zmq_errno() == EAGAIN)
        return sl_error_set(err, SL_ETIMEOUT, "parameter server %u (%s) did not answer within %.1f s%s", s,
                            c->eps[s], c->timeout_ms / 1000.0,
                            c->curve ? " (with CURVE: does it hold the workers' --curve-key?)" : "");
    return sl_error_set(err, SL_EIO, "parameter server %u (%s): %s", s, c->eps[s], zmq_strerror(zmq_errno()));
}

/* Server s did not answer in time. A killed server restarted at once
 * drops the request it had (ZeroMQ does not send it again), so the worker
 * would only see a timeout: ask it once more (a plain PULL, which changes
 * nothing) and wait up to 2 s. 1 when an answer names another incarnation
 * (c->broken then says so), else 0. */
static int probe_restart(struct train_ps_client *c, uint32_t s)
{
    if (c->incarnation[s] == 0)
        return 0;
    struct hdr h = {.type = TRAIN_PS_PULL, .worker = c->worker, .incarnation = c->incarnation[s],
                    .session = c->session};
    if (send_msg(c->socks[s], NULL, &h, c->config_len ? c->config : NULL, c->config_len) != 0)
        return 0;
    uint64_t deadline = sl_clock_ns() + 2000000000u;
    for (uint64_t now = sl_clock_ns(); now < deadline; now = sl_clock_ns()) {
        zmq_pollitem_t it = {.socket = c->socks[s], .events = ZMQ_POLLIN};
        if (zmq_poll(&it, 1, (long)((deadline - now) / 1000000u) + 1) <= 0)
            continue;
        int more = 1, first = 1;
        struct hdr r;
        int have = 0;
        while (more) { /* the header, then whatever body follows */
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, c->socks[s], 0) < 0) {
                zmq_msg_close(&m);
                break;
            }
            if (first && get_hdr(zmq_msg_data(&m), zmq_msg_size(&m), &r) == 0)
                have = 1;
            first = 0;
            more = zmq_msg_more(&m);
            zmq_msg_close(&m);
        }
        if (have && r.incarnation != c->incarnation[s]) {
            sl_error_set(&c->broken, SL_EPROTO, "parameter server %u (%s) restarted: its incarnation is %016" PRIx64
                         ", this worker pulled from %016" PRIx64 " (at version %" PRIu64 "): the values and updates "
                         "it held are gone (the request in flight was lost with it)", s, c->eps[s], r.incarnation,
                         c->incarnation[s], c->version[s]);
            return 1;
        }
    }
    return 0;
}

/* Wait for one reply from each server whose bit is set in want (then
 * cleared); on_reply handles it. */
typedef int (*reply_fn)(struct train_ps_client *c, uint32_t s, const struct hdr *h, zmq_msg_t *body,
                        void *arg, struct sl_error *err);

static int gather(struct train_ps_client *c, uint8_t *want, uint8_t type, reply_fn fn, void *arg,
                  struct sl_error *err)
{
    uint32_t nps = c->l->nps, left = 0;
    for (uint32_t s = 0; s < nps; s++)
        left += want[s];
    zmq_pollitem_t *it = sl_calloc(nps, sizeof *it);
    if (it == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    uint64_t deadline = sl_clock_ns() + (uint64_t)c->timeout_ms * 1000000u;
    int rc = 0;
    while (left > 0 && rc == 0) {
        for (uint32_t s = 0; s < nps; s++)
            it[s] = (zmq_pollitem_t){.socket = c->socks[s], .events = want[s] ? ZMQ_POLLIN : 0};
        uint64_t now = sl_clock_ns();
        if (now >= deadline) {
            uint32_t s = 0;
            while (!want[s])
                s++;
            if (probe_restart(c, s)) {
                rc = c->broken.code;
                if (err != NULL)
                    *err = c->broken;
                break;
            }
            rc = sl_error_set(err, SL_ETIMEOUT, "parameter server %u (%s) did not answer within %.1f s%s", s,
                              c->eps[s], c->timeout_ms / 1000.0,
                              c->curve ? " (with CURVE: does it hold the workers' --curve-key?)" : "");
            break;
        }
        int ready = zmq_poll(it, (int)nps, (long)((deadline - now) / 1000000u) + 1);
        if (ready < 0 && zmq_errno() != EINTR) {
            rc = sl_error_set(err, SL_EIO, "zmq_poll: %s", zmq_strerror(zmq_errno()));
            break;
        }
        for (uint32_t s = 0; s < nps && rc == 0 && ready > 0; s++) {
            if (!(it[s].revents & ZMQ_POLLIN))
                continue;
            zmq_msg_t h8, body;
            zmq_msg_init(&h8);
            zmq_msg_init(&body);
            struct hdr h;
            int got = zmq_msg_recv(&h8, c->socks[s], 0) >= 0;
            int has_body = got && zmq_msg_more(&h8) && zmq_msg_recv(&body, c->socks[s], 0) >= 0;
            while (got && zmq_msg_more(has_body ? &body : &h8)) { /* drop any extra frame */
                zmq_msg_t x;
                zmq_msg_init(&x);
                int ok = zmq_msg_recv(&x, c->socks[s], 0) >= 0 && zmq_msg_more(&x);
                zmq_msg_close(&x);
                if (!ok)
                    break;
            }
            char text[720];
            int bad = !got || get_hdr(zmq_msg_data(&h8), zmq_msg_size(&h8), &h) != 0;
            int answer = !bad && (h.type == TRAIN_PS_VALUES || h.type == TRAIN_PS_ACK);
            if (!bad && c->incarnation[s] != 0 && h.incarnation != c->incarnation[s])
                sl_error_set(&c->broken, SL_EPROTO, "parameter server %u (%s) restarted: its incarnation is %016"
                             PRIx64 ", this worker pulled from %016" PRIx64 " (at version %" PRIu64 "): the values "
                             "and updates it held are gone, and training on would start over in silence", s,
                             c->eps[s], h.incarnation, c->incarnation[s], c->version[s]);
            else if (answer && h.version < c->version[s])
                sl_error_set(&c->broken, SL_EPROTO, "parameter server %u (%s): its version went backwards from %"
                             PRIu64 " to %" PRIu64 " (incarnation %016" PRIx64 ")", s, c->eps[s], c->version[s],
                             h.version, h.incarnation);
            if (bad)
                rc = sl_error_set(err, SL_EPROTO, "parameter server %u (%s): a malformed reply", s, c->eps[s]);
            else if (c->broken.code != 0) {
                rc = c->broken.code;
                if (err != NULL)
                    *err = c->broken;
            } else if (h.type == TRAIN_PS_ERROR)
                rc = sl_error_set(err, SL_EPROTO, "parameter server %u (%s) refused: %s", s, c->eps[s],
                                  has_body ? train_ps_printable(text, sizeof text, zmq_msg_data(&body),
                                                                zmq_msg_size(&body))
                                           : "");
            else if (type != 0 ? h.type != type : !answer)
                rc = sl_error_set(err, SL_EPROTO, "parameter server %u (%s): reply of type %u, expected %u", s,
                                  c->eps[s], h.type, type);
            else
                rc = fn(c, s, &h, has_body ? &body : NULL, arg, err);
            if (rc == 0 && c->incarnation[s] == 0 && answer)
                c->incarnation[s] = h.incarnation;
            zmq_msg_close(&h8);
            zmq_msg_close(&body);
            want[s] = 0;
            left--;
        }
    }
    sl_free(it);
    return rc;
}

struct pull_arg {
    float *params;
    uint64_t step;
    uint32_t waiting; /* a final pull: the most workers any server still waits for */
};

static int on_values(struct train_ps_client *c, uint32_t s, const struct hdr *h, zmq_msg_t *body, void *arg,
                     struct sl_error *err)
{
    struct pull_arg *a = arg;
    if (h->type == TRAIN_PS_ACK) { /* a final pull answered "not yet" */
        if (h->flags > a->waiting)
            a->waiting = h->flags;
        return 0;
    }
    size_t n = train_ps_elements(c->l, s);
    if (body == NULL || zmq_msg_size(body) != n * sizeof(float))
        return sl_error_set(err, SL_EPROTO, "parameter server %u (%s): %zu bytes of values, expected %zu", s,
                            c->eps[s], body != NULL ? zmq_msg_size(body) : 0, n * sizeof(float));
    memcpy(c->buf, zmq_msg_data(body), n * sizeof(float));
    unpack(c->l, s, c->buf, a->params);
    c->version[s] = h->version;
    if (h->flags & TRAIN_PS_FINAL) { /* who did not finish, by this server's count */
        uint32_t bad = h->flags >> 8;
        if (bad > c->lost)
            c->lost = bad;
        if (h->session != 0 && (c->first_lost == 0 || h->session < c->first_lost))
            c->first_lost = (uint32_t)(h->session < UINT32_MAX ? h->session : UINT32_MAX);
    }
    if (s == 0)
        a->step = h->step;
    return 0;
}

/* PULL (flags) to every server whose want bit is set, then their answers. */
static int pull_some(struct train_ps_client *c, uint8_t *want, uint32_t flags, struct pull_arg *a,
                     struct sl_error *err)
{
    if (c->broken.code != 0) {
        if (err != NULL)
            *err = c->broken;
        return c->broken.code;
    }
    int rc = 0;
    for (uint32_t s = 0; s < c->l->nps && rc == 0; s++) {
        if (!want[s])
            continue;
        struct hdr h = {.type = TRAIN_PS_PULL, .worker = c->worker, .flags = flags | c->flags,
                        .incarnation = c->incarnation[s], .session = c->session};
        if (send_msg(c->socks[s], NULL, &h, c->config_len ? c->config : NULL, c->config_len) != 0)
            rc = send_failed(c, s, err);
    }
    return rc != 0 ? rc : gather(c, want, flags & TRAIN_PS_FINAL ? 0 : TRAIN_PS_VALUES, on_values, a, err);
}

int train_ps_pull(struct train_ps_client *c, float *params, uint64_t *global_step, struct sl_error *err)
{
    uint8_t *want = sl_malloc(c->l->nps);
    if (want == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    memset(want, 1, c->l->nps);
    struct pull_arg a = {.params = params};
    int rc = pull_some(c, want, 0, &a, err);
    if (rc == 0 && global_step != NULL)
        *global_step = a.step;
    sl_free(want);
    return rc;
}

int train_ps_pull_final(struct train_ps_client *c, float *params, uint64_t *global_step,
                        volatile sig_atomic_t *stop, struct sl_error *err)
{
    uint8_t *want = sl_malloc(c->l->nps);
    if (want == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    int rc = 0;
    /* every server says "not yet" until every worker is done, and then
     * all of them answer with the final values (nobody pushes after that) */
    for (;;) {
        memset(want, 1, c->l->nps);
        struct pull_arg a = {.params = params};
        if ((rc = pull_some(c, want, TRAIN_PS_FINAL, &a, err)) != 0)
            break;
        if (a.waiting == 0) {
            if (global_step != NULL)
                *global_step = a.step;
            break;
        }
        if (stop != NULL && *stop) {
            rc = sl_error_set(err, SL_ECLOSED, "stopped while waiting for %u workers to finish", a.waiting);
            break;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    sl_free(want);
    return rc;
}

int train_ps_pull_final_try(struct train_ps_client *c, float *params, uint64_t *global_step, uint32_t *waiting,
                            struct sl_error *err)
{
    uint8_t *want = sl_malloc(c->l->nps);
    if (want == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    memset(want, 1, c->l->nps);
    struct pull_arg a = {.params = params};
    int rc = pull_some(c, want, TRAIN_PS_FINAL, &a, err);
    if (rc == 0) {
        *waiting = a.waiting;
        if (a.waiting == 0 && global_step != NULL)
            *global_step = a.step;
    }
    sl_free(want);
    return rc;
}

static int on_ack(struct train_ps_client *c, uint32_t s, const struct hdr *h, zmq_msg_t *body, void *arg,
                  struct sl_error *err)
{
    (void)c;
    (void)s;
    (void)body;
    (void)err;
    uint64_t *stale = arg;
    uint32_t f = h->flags & ~TRAIN_PS_ACK_SKIPPED;
    if (f > *stale)
        *stale = f;
    return 0;
}

int train_ps_push(struct train_ps_client *c, const float *grads, int count_step, uint64_t *staleness,
                  struct sl_error *err)
{
    uint32_t nps = c->l->nps;
    if (c->flags & TRAIN_PS_READ_ONLY)
        return sl_error_set(err, SL_EINVAL, "the evaluator does not push");
    if (c->broken.code != 0) {
        if (err != NULL)
            *err = c->broken;
        return c->broken.code;
    }
    uint8_t *want = sl_calloc(nps, 1);
    if (want == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    if (!c->next_set) { /* no position given: one step past the last */
        uint32_t r = c->next.replicas ? c->next.replicas : 1;
        c->next = (struct train_input_position){.epoch = c->next.epoch, .step = c->next.step + 1,
                                                .seq = c->next.seq + r, .replicas = r};
    }
    c->next_set = 0;
    uint8_t pos[TRAIN_INPUT_POSITION_BYTES];
    train_input_position_encode(&c->next, pos);
    int rc = 0;
    for (uint32_t s = 0; s < nps && rc == 0; s++) {
        size_t n = train_ps_elements(c->l, s);
        pack(c->l, s, grads, c->buf);
        struct hdr h = {.type = TRAIN_PS_PUSH, .worker = c->worker, .flags = count_step && s == 0 ? 1u : 0u,
                        .version = c->version[s], .incarnation = c->incarnation[s], .session = c->session};
        uint8_t b[TRAIN_PS_HEADER];
        put_hdr(b, &h);
        if (zmq_send(c->socks[s], b, sizeof b, ZMQ_SNDMORE) < 0 ||
            zmq_send(c->socks[s], c->buf, n * sizeof(float), ZMQ_SNDMORE) < 0 ||
            zmq_send(c->socks[s], pos, sizeof pos, 0) < 0)
            rc = send_failed(c, s, err);
        want[s] = 1;
    }
    uint64_t stale = 0;
    if (rc == 0)
        rc = gather(c, want, TRAIN_PS_ACK, on_ack, &stale, err);
    if (rc == 0 && staleness != NULL)
        *staleness = stale;
    sl_free(want);
    return rc;
}

int train_ps_client_open_evaluator(struct train_ps_client **out, void *ctx, const char *const *eps,
                                   const struct train_ps_layout *l, int timeout_ms, const char *config,
                                   const struct sl_curve_keys *curve, struct sl_error *err)
{
    int rc = train_ps_client_open_keys(out, ctx, eps, l, 0, timeout_ms, config, curve, err);
    if (rc == 0)
        (*out)->flags = TRAIN_PS_READ_ONLY;
    return rc;
}

void train_ps_client_set_session(struct train_ps_client *c, uint64_t session)
{
    if (session != 0)
        c->session = session;
}

void train_ps_client_set_position(struct train_ps_client *c, const struct train_input_position *next)
{
    c->next = *next;
    c->next_set = 1;
}

/* The answer to RESUME from one server: 1 with *p its recorded position,
 * 0 for none, or -1 with err set. */
static int resume_reply(void *sock, uint32_t s, const char *ep, struct train_input_position *p, struct sl_error *err)
{
    zmq_msg_t f[2];
    size_t nf = 0, frames = recv_frames(sock, f, 2, &nf);
    struct hdr h;
    char text[720];
    int rc = -1;
    if (nf == 0 || frames > 2 || get_hdr(zmq_msg_data(&f[0]), zmq_msg_size(&f[0]), &h) != 0)
        sl_error_set(err, SL_EPROTO, "parameter server %u (%s): a malformed reply to RESUME", s, ep);
    else if (h.type == TRAIN_PS_ERROR)
        sl_error_set(err, SL_EPROTO, "parameter server %u (%s) refused: %s", s, ep,
                     nf == 2 ? train_ps_printable(text, sizeof text, zmq_msg_data(&f[1]), zmq_msg_size(&f[1])) : "");
    else if (h.type != TRAIN_PS_ACK)
        sl_error_set(err, SL_EPROTO, "parameter server %u (%s): reply of type %u to RESUME, expected %u", s, ep,
                     h.type, TRAIN_PS_ACK);
    else if (nf == 1)
        rc = 0;
    else if (train_input_position_decode(p, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), err) == 0)
        rc = 1;
    else
        sl_error_prefix(err, "parameter server %u (%s): ", s, ep);
    for (size_t k = 0; k < nf; k++)
        zmq_msg_close(&f[k]);
    return rc;
}

int train_ps_resume(void *ctx, const char *const *eps, uint32_t nps, uint32_t worker, uint64_t session,
                    uint32_t replicas, int timeout_ms, const struct sl_curve_keys *curve,
                    struct train_ps_resume_result *out, struct sl_error *err)
{
    memset(out, 0, sizeof *out);
    if (nps == 0 || nps > TRAIN_PS_MAX_SERVERS)
        return sl_error_set(err, SL_EINVAL, "%u parameter servers (1 to %d)", nps, TRAIN_PS_MAX_SERVERS);
    if (session == 0 || replicas == 0)
        return sl_error_set(err, SL_EINVAL, "RESUME: session and replicas must be nonzero");
    void **socks = sl_calloc(nps, sizeof *socks);
    zmq_pollitem_t *it = sl_calloc(nps, sizeof *it);
    struct train_input_position *pos = sl_calloc(nps, sizeof *pos);
    int8_t *got = sl_calloc(nps, 1); /* 0 waiting, 1 none, 2 a position */
    int rc = 0;
    if (socks == NULL || it == NULL || pos == NULL || got == NULL) {
        rc = sl_error_set(err, SL_ENOMEM, "out of memory");
        goto out;
    }
    int linger = 0, tmo = timeout_ms > 0 ? timeout_ms : 10000;
    for (uint32_t s = 0; s < nps && rc == 0; s++) {
        struct hdr h = {.type = TRAIN_PS_RESUME, .worker = worker, .session = session};
        if ((socks[s] = zmq_socket(ctx, ZMQ_DEALER)) == NULL ||
            zmq_setsockopt(socks[s], ZMQ_LINGER, &linger, sizeof linger) != 0 ||
            zmq_setsockopt(socks[s], ZMQ_SNDTIMEO, &tmo, sizeof tmo) != 0) {
            rc = sl_error_set(err, SL_EIO, "parameter server %u (%s): %s", s, eps[s], zmq_strerror(zmq_errno()));
            break;
        }
        rc = curve != NULL ? sl_curve_client(socks[s], curve, curve->public_z85, err) : 0;
        if (rc == 0 && (rc = sl_endpoint_connect(socks[s], eps[s], err)) != 0)
            sl_error_prefix(err, "parameter server %u: ", s);
        if (rc == 0 && send_msg(socks[s], NULL, &h, NULL, 0) != 0)
            rc = sl_error_set(err, SL_ETIMEOUT, "parameter server %u (%s) did not take RESUME within %.1f s: %s", s,
                              eps[s], tmo / 1000.0, zmq_strerror(zmq_errno()));
    }
    uint64_t deadline = sl_clock_ns() + (uint64_t)tmo * 1000000u;
    for (uint32_t left = nps; rc == 0 && left > 0;) {
        uint64_t now = sl_clock_ns();
        if (now >= deadline) {
            uint32_t s = 0;
            while (got[s])
                s++;
            rc = sl_error_set(err, SL_ETIMEOUT, "parameter server %u (%s) did not answer RESUME within %.1f s", s,
                              eps[s], tmo / 1000.0);
            break;
        }
        for (uint32_t s = 0; s < nps; s++)
            it[s] = (zmq_pollitem_t){.socket = socks[s], .events = got[s] ? 0 : ZMQ_POLLIN};
        int ready = zmq_poll(it, (int)nps, (long)((deadline - now) / 1000000u) + 1);
        if (ready < 0 && zmq_errno() != EINTR) {
            rc = sl_error_set(err, SL_EIO, "zmq_poll: %s", zmq_strerror(zmq_errno()));
            break;
        }
        for (uint32_t s = 0; s < nps && rc == 0 && ready > 0; s++) {
            if (!(it[s].revents & ZMQ_POLLIN))
                continue;
            int r = resume_reply(socks[s], s, eps[s], &pos[s], err);
            if (r < 0)
                rc = err != NULL && err->code != 0 ? err->code : SL_EPROTO;
            got[s] = (int8_t)(r + 1);
            left--;
        }
    }
    /* the lowest position (the servers ahead skip the steps up to theirs) */
    struct train_input_position lo = {.replicas = replicas};
    for (uint32_t s = 0; s < nps && rc == 0; s++) {
        if (got[s] != 2)
            continue;
        if (pos[s].replicas != replicas) {
            rc = sl_error_set(err, SL_EPROTO, "parameter server %u (%s) recorded worker %u's position with %u "
                              "replicas a step; this process runs %u (start it with the same replicas)", s, eps[s],
                              worker, pos[s].replicas, replicas);
            break;
        }
        out->recorded++;
    }
    for (uint32_t s = 0; s < nps && rc == 0; s++) {
        struct train_input_position p = got[s] == 2 ? pos[s] : (struct train_input_position){.replicas = replicas};
        if (s == 0 || p.seq < lo.seq)
            lo = p;
    }
    for (uint32_t s = 0; s < nps && rc == 0; s++)
        out->ahead += got[s] == 2 && pos[s].seq > lo.seq;
    if (rc == 0)
        out->pos = lo;
out:
    for (uint32_t s = 0; socks != NULL && s < nps; s++)
        if (socks[s] != NULL)
            zmq_close(socks[s]);
    sl_free(socks);
    sl_free(it);
    sl_free(pos);
    sl_free(got);
    return rc;
}

uint32_t train_ps_client_lost(const struct train_ps_client *c, uint32_t *first)
{
    if (first != NULL)
        *first = c->first_lost > 0 ? c->first_lost - 1 : 0;
    return c->lost;
}

size_t train_ps_client_params(const struct train_ps_client *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->l->nvars; i++)
        if (c->l->vars[i].offset + c->l->vars[i].count > n)
            n = c->l->vars[i].offset + c->l->vars[i].count;
    return n;
}

void train_ps_client_close(struct train_ps_client *c)
{
    if (c == NULL)
        return;
    for (uint32_t s = 0; c->socks != NULL && s < c->l->nps; s++) {
        if (c->socks[s] != NULL) {
            struct hdr h = {.type = TRAIN_PS_BYE, .worker = c->worker, .flags = c->flags,
                            .incarnation = c->incarnation[s], .session = c->session};
            int linger = 1000; /* the BYE is given a second to leave */
            zmq_setsockopt(c->socks[s], ZMQ_LINGER, &linger, sizeof linger);
            int quick = 100; /* a server never connected: the BYE is not waited for long */
            zmq_setsockopt(c->socks[s], ZMQ_SNDTIMEO, &quick, sizeof quick);
            (void)send_msg(c->socks[s], NULL, &h, NULL, 0);
            zmq_close(c->socks[s]);
        }
        if (c->eps != NULL)
            sl_free(c->eps[s]);
    }
    sl_free(c->socks);
    sl_free(c->eps);
    sl_free(c->version);
    sl_free(c->incarnation);
    sl_free(c->buf);
    sl_free(c);
}
