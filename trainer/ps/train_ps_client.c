/* train_ps_client: a worker's (or the evaluator's) link to every
 * parameter server (see train_ps.h). */
#include "train_ps.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_bytes.h"
#include "sl_clock.h"
#include "sl_endpoint.h"
#include "sl_zsock.h"
#include "train_ps_int.h"

/* ---- the client ---- */

struct train_ps_client {
    const struct train_ps_layout *l;
    uint32_t worker;
    uint32_t flags; /* TRAIN_PS_READ_ONLY: the evaluator's */
    char config[TRAIN_PS_MAX_CONFIG];
    size_t config_len; /* 0: no description */
    int timeout_ms;
    int curve;                         /* the connections are CURVE clients */
    void **socks;                      /* [nps] DEALER */
    char **eps;                        /* [nps] */
    uint64_t *version;                 /* [nps] the version last pulled (or acknowledged) */
    uint64_t *incarnation;             /* [nps] the server's, from its first reply (0: none yet) */
    uint64_t session;                  /* this client's, in every PULL, PUSH and BYE */
    uint32_t lost, first_lost;         /* from the final values (train_ps_client_lost) */
    float *buf;                        /* the largest server's elements */
    struct client_input_position next; /* the position the next push carries */
    int next_set;                      /* train_ps_client_set_position since the last push */
    struct sl_error broken;            /* a server restarted or went backwards: every call fails with this */
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
    const struct sl_zsock_opts zo = {.send_timeout_ms = c->timeout_ms};
    for (uint32_t s = 0; s < l->nps; s++) {
        c->eps[s] = sl_strdup(eps[s]);
        c->socks[s] = sl_zsock_open(ctx, ZMQ_DEALER, &zo, "zmq_socket", err);
        if (c->eps[s] == NULL || c->socks[s] == NULL) {
            int rc = c->eps[s] == NULL ? sl_error_set(err, SL_ENOMEM, "out of memory") : SL_EIO;
            sl_error_prefix(err, "parameter server %u (%s): ", s, eps[s]);
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
        return sl_error_set(err, SL_ETIMEOUT, "parameter server %u (%s) did not answer within %.1f s%s", s, c->eps[s],
                            c->timeout_ms / 1000.0,
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
    struct train__ps_hdr h = {
        .type = TRAIN_PS_PULL, .worker = c->worker, .incarnation = c->incarnation[s], .session = c->session};
    if (train__ps_send(c->socks[s], NULL, &h, c->config_len ? c->config : NULL, c->config_len) != 0)
        return 0;
    uint64_t deadline = sl_clock_ns() + 2000000000u;
    for (uint64_t now = sl_clock_ns(); now < deadline; now = sl_clock_ns()) {
        zmq_pollitem_t it = {.socket = c->socks[s], .events = ZMQ_POLLIN};
        if (zmq_poll(&it, 1, (long)((deadline - now) / 1000000u) + 1) <= 0)
            continue;
        int more = 1, first = 1;
        struct train__ps_hdr r;
        int have = 0;
        while (more) { /* the header, then whatever body follows */
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, c->socks[s], 0) < 0) {
                zmq_msg_close(&m);
                break;
            }
            if (first && train__ps_get_hdr(zmq_msg_data(&m), zmq_msg_size(&m), &r) == 0)
                have = 1;
            first = 0;
            more = zmq_msg_more(&m);
            zmq_msg_close(&m);
        }
        if (have && r.incarnation != c->incarnation[s]) {
            sl_error_set(&c->broken, SL_EPROTO,
                         "parameter server %u (%s) restarted: its incarnation is %016" PRIx64
                         ", this worker pulled from %016" PRIx64 " (at version %" PRIu64 "): the values and updates "
                         "it held are gone (the request in flight was lost with it)",
                         s, c->eps[s], r.incarnation, c->incarnation[s], c->version[s]);
            return 1;
        }
    }
    return 0;
}

/* Wait for one reply from each server whose bit is set in want (then
 * cleared); on_reply handles it. */
typedef int (*reply_fn)(struct train_ps_client *c, uint32_t s, const struct train__ps_hdr *h, zmq_msg_t *body,
                        void *arg, struct sl_error *err);

static int gather(struct train_ps_client *c, uint8_t *want, uint8_t type, reply_fn fn, void *arg, struct sl_error *err)
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
            rc = sl_error_set(err, SL_ETIMEOUT, "parameter server %u (%s) did not answer within %.1f s%s", s, c->eps[s],
                              c->timeout_ms / 1000.0,
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
            struct train__ps_hdr h;
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
            int bad = !got || train__ps_get_hdr(zmq_msg_data(&h8), zmq_msg_size(&h8), &h) != 0;
            int answer = !bad && (h.type == TRAIN_PS_VALUES || h.type == TRAIN_PS_ACK);
            if (!bad && c->incarnation[s] != 0 && h.incarnation != c->incarnation[s])
                sl_error_set(&c->broken, SL_EPROTO,
                             "parameter server %u (%s) restarted: its incarnation is %016" PRIx64
                             ", this worker pulled from %016" PRIx64 " (at version %" PRIu64 "): the values "
                             "and updates it held are gone, and training on would start over in silence",
                             s, c->eps[s], h.incarnation, c->incarnation[s], c->version[s]);
            else if (answer && h.version < c->version[s])
                sl_error_set(&c->broken, SL_EPROTO,
                             "parameter server %u (%s): its version went backwards from %" PRIu64 " to %" PRIu64
                             " (incarnation %016" PRIx64 ")",
                             s, c->eps[s], c->version[s], h.version, h.incarnation);
            if (bad)
                rc = sl_error_set(err, SL_EPROTO, "parameter server %u (%s): a malformed reply", s, c->eps[s]);
            else if (c->broken.code != 0) {
                rc = c->broken.code;
                if (err != NULL)
                    *err = c->broken;
            } else if (h.type == TRAIN_PS_ERROR)
                rc = sl_error_set(
                    err, SL_EPROTO, "parameter server %u (%s) refused: %s", s, c->eps[s],
                    has_body ? train_ps_printable(text, sizeof text, zmq_msg_data(&body), zmq_msg_size(&body)) : "");
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

static int on_values(struct train_ps_client *c, uint32_t s, const struct train__ps_hdr *h, zmq_msg_t *body, void *arg,
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
        return sl_error_set(err, SL_EPROTO, "parameter server %u (%s): %zu bytes of values, expected %zu", s, c->eps[s],
                            body != NULL ? zmq_msg_size(body) : 0, n * sizeof(float));
    memcpy(c->buf, zmq_msg_data(body), n * sizeof(float));
    train__ps_unpack(c->l, s, c->buf, a->params);
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
static int pull_some(struct train_ps_client *c, uint8_t *want, uint32_t flags, struct pull_arg *a, struct sl_error *err)
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
        struct train__ps_hdr h = {.type = TRAIN_PS_PULL,
                                  .worker = c->worker,
                                  .flags = flags | c->flags,
                                  .incarnation = c->incarnation[s],
                                  .session = c->session};
        if (train__ps_send(c->socks[s], NULL, &h, c->config_len ? c->config : NULL, c->config_len) != 0)
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

int train_ps_pull_final(struct train_ps_client *c, float *params, uint64_t *global_step, volatile sig_atomic_t *stop,
                        struct sl_error *err)
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

static int on_ack(struct train_ps_client *c, uint32_t s, const struct train__ps_hdr *h, zmq_msg_t *body, void *arg,
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
        c->next = (struct client_input_position){
            .epoch = c->next.epoch, .step = c->next.step + 1, .seq = c->next.seq + r, .replicas = r};
    }
    c->next_set = 0;
    uint8_t pos[CLIENT_INPUT_POSITION_BYTES];
    client_input_position_encode(&c->next, pos);
    int rc = 0;
    for (uint32_t s = 0; s < nps && rc == 0; s++) {
        size_t n = grads != NULL ? train_ps_elements(c->l, s) : 0;
        if (grads != NULL)
            train__ps_pack(c->l, s, grads, c->buf);
        struct train__ps_hdr h = {.type = TRAIN_PS_PUSH,
                                  .worker = c->worker,
                                  .flags = grads == NULL          ? TRAIN_PS_PUSH_EMPTY
                                           : count_step && s == 0 ? 1u
                                                                  : 0u,
                                  .version = c->version[s],
                                  .incarnation = c->incarnation[s],
                                  .session = c->session};
        uint8_t b[TRAIN_PS_HEADER];
        train__ps_put_hdr(b, &h);
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

void train_ps_client_set_position(struct train_ps_client *c, const struct client_input_position *next)
{
    c->next = *next;
    c->next_set = 1;
}

/* The answer to RESUME from one server: 1 with *p its recorded position,
 * 0 for none, or -1 with err set. */
/* What each server answered a RESUME: its position, its world. */
struct resume_replies {
    struct client_input_position *pos;
    uint64_t (*world)[3]; /* [s]: WORLDs applied, the epoch its world starts at, its workers (0s from a plain
                             server) */
};

static int resume_reply(void *sock, uint32_t s, const char *ep, struct client_input_position *p, uint64_t world[3],
                        struct sl_error *err)
{
    zmq_msg_t f[2];
    size_t nf = 0, frames = train__ps_recv_frames(sock, f, 2, &nf);
    struct train__ps_hdr h;
    char text[720];
    int rc = -1;
    if (nf == 0 || frames > 2 || train__ps_get_hdr(zmq_msg_data(&f[0]), zmq_msg_size(&f[0]), &h) != 0)
        sl_error_set(err, SL_EPROTO, "parameter server %u (%s): a malformed reply to RESUME", s, ep);
    else if (h.type == TRAIN_PS_ERROR)
        sl_error_set(err, SL_EPROTO, "parameter server %u (%s) refused: %s", s, ep,
                     nf == 2 ? train_ps_printable(text, sizeof text, zmq_msg_data(&f[1]), zmq_msg_size(&f[1])) : "");
    else if (h.type != TRAIN_PS_ACK)
        sl_error_set(err, SL_EPROTO, "parameter server %u (%s): reply of type %u to RESUME, expected %u", s, ep, h.type,
                     TRAIN_PS_ACK);
    else {
        size_t len = nf == 2 ? zmq_msg_size(&f[1]) : 0, info = h.flags & TRAIN_PS_ACK_WORLD ? TRAIN_PS_WORLD_INFO : 0;
        const uint8_t *b = nf == 2 ? zmq_msg_data(&f[1]) : NULL;
        if ((h.flags & ~TRAIN_PS_ACK_WORLD) != 0 || len < info ||
            (len - info != 0 && len - info != CLIENT_INPUT_POSITION_BYTES))
            sl_error_set(err, SL_EPROTO,
                         "parameter server %u (%s): a malformed reply to RESUME (flags %08x, %zu bytes)", s, ep,
                         h.flags, len);
        else if (len == info)
            rc = 0;
        else if (client_input_position_decode(p, b, CLIENT_INPUT_POSITION_BYTES, err) == 0)
            rc = 1;
        else
            sl_error_prefix(err, "parameter server %u (%s): ", s, ep);
        if (rc >= 0 && info > 0) {
            world[0] = sl_load_le64(b + len - info);
            world[1] = sl_load_le64(b + len - info + 8);
            world[2] = sl_load_le32(b + len - info + 16);
            if (world[2] == 0 || sl_load_le32(b + len - info + 20) != 0)
                rc = sl_error_set(err, SL_EPROTO, "parameter server %u (%s): a malformed world in its reply to RESUME",
                                  s, ep);
        }
    }
    for (size_t k = 0; k < nf; k++)
        zmq_msg_close(&f[k]);
    return rc;
}

/* One request to every server at once (h and body, on a DEALER of its own
 * in socks[s]), then one reply from each, read by reply(sock, s, ep, arg):
 * below 0 an error (in err), else a value kept in got[s] as value + 1 (0:
 * no reply yet). what names the request in the timeouts. socks, it and
 * got have nps entries, zeroed; the caller closes the sockets. */
typedef int (*ps_reply_fn)(void *sock, uint32_t s, const char *ep, void *arg, struct sl_error *err);
static int ask_every_server(void *ctx, const char *const *eps, uint32_t nps, const struct train__ps_hdr *h,
                            const void *body, size_t len, const char *what, int timeout_ms,
                            const struct sl_curve_keys *curve, void **socks, zmq_pollitem_t *it, int8_t *got,
                            ps_reply_fn reply, void *arg, struct sl_error *err)
{
    int tmo = timeout_ms > 0 ? timeout_ms : 10000, rc = 0;
    const struct sl_zsock_opts zo = {.send_timeout_ms = tmo};
    for (uint32_t s = 0; s < nps && rc == 0; s++) {
        if ((socks[s] = sl_zsock_open(ctx, ZMQ_DEALER, &zo, "zmq_socket", err)) == NULL) {
            rc = sl_error_prefix(err, "parameter server %u (%s): ", s, eps[s]);
            break;
        }
        rc = curve != NULL ? sl_curve_client(socks[s], curve, curve->public_z85, err) : 0;
        if (rc == 0 && (rc = sl_endpoint_connect(socks[s], eps[s], err)) != 0)
            sl_error_prefix(err, "parameter server %u: ", s);
        if (rc == 0 && train__ps_send(socks[s], NULL, h, body, len) != 0)
            rc = sl_error_set(err, SL_ETIMEOUT, "parameter server %u (%s) did not take %s within %.1f s: %s", s, eps[s],
                              what, tmo / 1000.0, zmq_strerror(zmq_errno()));
    }
    uint64_t deadline = sl_clock_ns() + (uint64_t)tmo * 1000000u;
    for (uint32_t left = nps; rc == 0 && left > 0;) {
        uint64_t now = sl_clock_ns();
        if (now >= deadline) {
            uint32_t s = 0;
            while (got[s])
                s++;
            rc = sl_error_set(err, SL_ETIMEOUT, "parameter server %u (%s) did not answer %s within %.1f s", s, eps[s],
                              what, tmo / 1000.0);
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
            int r = reply(socks[s], s, eps[s], arg, err);
            if (r < 0)
                rc = err != NULL && err->code != 0 ? err->code : SL_EPROTO;
            got[s] = (int8_t)(r + 1);
            left--;
        }
    }
    return rc;
}

static int resume_reply_at(void *sock, uint32_t s, const char *ep, void *arg, struct sl_error *err)
{
    struct resume_replies *r = arg;
    return resume_reply(sock, s, ep, &r->pos[s], r->world[s], err);
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
    struct client_input_position *pos = sl_calloc(nps, sizeof *pos);
    int8_t *got = sl_calloc(nps, 1); /* 0 waiting, 1 none, 2 a position */
    uint64_t(*world)[3] = sl_calloc(nps, sizeof *world);
    struct resume_replies replies = {pos, world};
    int rc = 0;
    if (socks == NULL || it == NULL || pos == NULL || got == NULL || world == NULL) {
        rc = sl_error_set(err, SL_ENOMEM, "out of memory");
        goto out;
    }
    struct train__ps_hdr h = {.type = TRAIN_PS_RESUME, .worker = worker, .session = session};
    rc = ask_every_server(ctx, eps, nps, &h, NULL, 0, "RESUME", timeout_ms, curve, socks, it, got, resume_reply_at,
                          &replies, err);
    /* the lowest position (the servers ahead skip the steps up to theirs) */
    struct client_input_position lo = {.replicas = replicas};
    for (uint32_t s = 0; s < nps && rc == 0; s++) {
        if (got[s] != 2)
            continue;
        if (pos[s].replicas != replicas) {
            rc = sl_error_set(err, SL_EPROTO,
                              "parameter server %u (%s) recorded worker %u's position with %u "
                              "replicas a step; this process runs %u (start it with the same replicas)",
                              s, eps[s], worker, pos[s].replicas, replicas);
            break;
        }
        out->recorded++;
    }
    for (uint32_t s = 0; s < nps && rc == 0; s++) {
        struct client_input_position p = got[s] == 2 ? pos[s] : (struct client_input_position){.replicas = replicas};
        if (s == 0 || p.seq < lo.seq)
            lo = p;
    }
    for (uint32_t s = 0; s < nps && rc == 0; s++)
        out->ahead += got[s] == 2 && pos[s].seq > lo.seq;
    for (uint32_t s = 0; s < nps && rc == 0; s++) { /* the servers' world (they applied the same WORLDs) */
        if (world[s][0] > out->world_changes)
            out->world_changes = world[s][0];
        if (world[s][1] > out->world_epoch)
            out->world_epoch = world[s][1];
        if (out->world_workers != 0 && world[s][2] != out->world_workers)
            rc = sl_error_set(err, SL_EPROTO,
                              "parameter server %u (%s) serves %" PRIu64 " workers, parameter server 0 (%s) %u: "
                              "their checkpoints are of different worlds",
                              s, eps[s], world[s][2], eps[0], out->world_workers);
        else
            out->world_workers = (uint32_t)world[s][2];
    }
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
    sl_free(world);
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
            struct train__ps_hdr h = {.type = TRAIN_PS_BYE,
                                      .worker = c->worker,
                                      .flags = c->flags,
                                      .incarnation = c->incarnation[s],
                                      .session = c->session};
            sl_zsock_linger(c->socks[s], 1000); /* the BYE is given a second to leave */
            /* a server never connected: the BYE is not waited for long
             * (best effort: the send below is not checked either) */
            if (sl_zsock_set_int(c->socks[s], ZMQ_SNDTIMEO, 100, "", NULL) != 0)
                sl_zsock_linger(c->socks[s], 0);
            (void)train__ps_send(c->socks[s], NULL, &h, NULL, 0);
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

/* Server s's answer to a WORLD: 0 (its ACK), or -1 with err set. */
static int world_reply(void *sock, uint32_t s, const char *ep, uint32_t n, struct sl_error *err)
{
    zmq_msg_t f[2];
    size_t nf = 0, frames = train__ps_recv_frames(sock, f, 2, &nf);
    struct train__ps_hdr h;
    char text[720];
    int rc = -1;
    if (nf == 0 || frames > 2 || train__ps_get_hdr(zmq_msg_data(&f[0]), zmq_msg_size(&f[0]), &h) != 0)
        sl_error_set(err, SL_EPROTO, "parameter server %u (%s): a malformed reply to WORLD", s, ep);
    else if (h.type == TRAIN_PS_ERROR)
        sl_error_set(err, SL_EPROTO, "parameter server %u (%s) refused the workers' change: %s", s, ep,
                     nf == 2 ? train_ps_printable(text, sizeof text, zmq_msg_data(&f[1]), zmq_msg_size(&f[1])) : "");
    else if (h.type != TRAIN_PS_ACK || nf != 1 || h.flags != n)
        sl_error_set(err, SL_EPROTO,
                     "parameter server %u (%s): reply of type %u (%u workers) to WORLD, expected an "
                     "ACK of %u",
                     s, ep, h.type, h.flags, n);
    else
        rc = 0;
    for (size_t k = 0; k < nf; k++)
        zmq_msg_close(&f[k]);
    return rc;
}

static int world_reply_at(void *sock, uint32_t s, const char *ep, void *arg, struct sl_error *err)
{
    return world_reply(sock, s, ep, *(const uint32_t *)arg, err);
}

int train_ps_world(void *ctx, const char *const *eps, uint32_t nps, uint64_t session, uint64_t change, uint64_t epoch,
                   const struct train_ps_member *m, uint32_t n, int timeout_ms, const struct sl_curve_keys *curve,
                   struct sl_error *err)
{
    if (nps == 0 || nps > TRAIN_PS_MAX_SERVERS)
        return sl_error_set(err, SL_EINVAL, "%u parameter servers (1 to %d)", nps, TRAIN_PS_MAX_SERVERS);
    if (n == 0 || n > TRAIN_PS_MAX_WORKERS)
        return sl_error_set(err, SL_EINVAL, "WORLD: %u workers (1 to %d)", n, TRAIN_PS_MAX_WORKERS);
    void **socks = sl_calloc(nps, sizeof *socks);
    zmq_pollitem_t *it = sl_calloc(nps, sizeof *it);
    uint8_t *got = sl_calloc(nps, 1), *body = sl_calloc(n, TRAIN_PS_WORLD_ENTRY);
    int rc = 0;
    if (socks == NULL || it == NULL || got == NULL || body == NULL) {
        rc = sl_error_set(err, SL_ENOMEM, "out of memory");
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        sl_store_le32(body + (size_t)i * TRAIN_PS_WORLD_ENTRY, m[i].from);
        sl_store_le64(body + (size_t)i * TRAIN_PS_WORLD_ENTRY + 8, m[i].session);
    }
    struct train__ps_hdr h = {
        .type = TRAIN_PS_WORLD, .worker = 0, .version = epoch, .step = change, .session = session};
    rc = ask_every_server(ctx, eps, nps, &h, body, (size_t)n * TRAIN_PS_WORLD_ENTRY, "WORLD", timeout_ms, curve, socks,
                          it, (int8_t *)got, world_reply_at, &n, err);
out:
    for (uint32_t s = 0; socks != NULL && s < nps; s++)
        if (socks[s] != NULL)
            zmq_close(socks[s]);
    sl_free(socks);
    sl_free(it);
    sl_free(got);
    sl_free(body);
    return rc;
}
