/* train_main_elastic_coord: the coordinator endpoint both elastic modes
 * share (--elastic, train_main_elastic.c; --mode ps --elastic,
 * train_main_ps_elastic.c): the socket (worker 0's ROUTER, the others'
 * DEALER), a message sent and received, the window rule, and worker 0's
 * handling of JOIN and LEAVE between steps (the book is train_elastic.h's).
 * What differs between the modes (the log's words, a JOIN's extra checks,
 * the messages only one mode takes) comes in struct trainer_elastic_hooks.
 *
 * With --curve-key the endpoint is secured as the ring is, with the job's
 * one trainer key pair: worker 0's ROUTER is a CURVE server whose ZAP
 * handler (on the endpoint's own context) accepts only that pair's public
 * key, and every DEALER is a CURVE client of it. A peer without the key,
 * or with another one, never completes a handshake, so worker 0 never
 * reads its JOIN; the joiner learns why from its DEALER's monitor
 * (sl_handshake.h) and fails saying so. */
#include "train_main_int.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <string.h>
#include <zmq.h>

#include "sl_clock.h"
#include "sl_endpoint.h"
#include "sl_handshake.h"
#include "sl_log.h"
#include "sl_peer.h"
#include "sl_zsock.h"

#define ACK_EVERY_NS 1000000000u /* worker 0 repeats a waiting joiner's ACK: it knows worker 0 is alive */
#define JOIN_MONITOR "inproc://sluice-elastic-join-monitor" /* unique: the endpoint has a context of its own */

/* ---- messages ---- */

/* One message: to the peer with routing id `id` on worker 0's ROUTER
 * (never blocks), to worker 0 on a DEALER (id NULL). 0; SL_ECLOSED when the
 * peer is gone; SL_EINVAL, SL_EIO. */
int trainer_elastic_send(struct trainer_elastic_ep *e, const void *id, size_t idlen, const struct train_elastic_msg *m,
                         struct sl_error *err)
{
    size_t n = train_elastic_encode(e->buf, sizeof e->buf, m);
    if (n == 0)
        return sl_error_set(err, SL_EINVAL, "elastic: a message of type %u does not fit its limits", m->type);
    /* the ROUTER is ZMQ_ROUTER_MANDATORY: a peer whose connection is gone
     * (a joiner that died while it waited) fails the send */
    if (id != NULL && zmq_send(e->sock, id, idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        int x = zmq_errno(); /* EHOSTUNREACH: gone; EAGAIN: its queue is full, it is slow, not gone */
        return sl_error_set(err, x == EHOSTUNREACH ? SL_ECLOSED : SL_EIO, "elastic: %s (%s)",
                            x == EHOSTUNREACH ? "the peer is gone" : "cannot send to the peer now", zmq_strerror(x));
    }
    if (zmq_send(e->sock, e->buf, n, id != NULL ? ZMQ_DONTWAIT : 0) < 0 && id == NULL)
        return sl_error_set(err, SL_EIO, "elastic: cannot send to worker 0: %s", zmq_strerror(zmq_errno()));
    return 0;
}

/* One message within ms (0: only one already waiting): 0 with it decoded
 * into *m (the frame copied to e->buf, where its strings point), and on
 * the ROUTER the sender's routing id in id (*idlen); SL_ETIMEOUT when none
 * came; SL_EPROTO with the reason for a malformed one (read and dropped);
 * SL_EIO. */
int trainer_elastic_recv(struct trainer_elastic_ep *e, int ms, unsigned char *id, size_t *idlen,
                         struct train_elastic_msg *m, struct sl_error *err)
{
    zmq_pollitem_t it = {e->sock, 0, ZMQ_POLLIN, 0};
    int rc = zmq_poll(&it, 1, ms);
    if (rc < 0 && zmq_errno() == EINTR)
        return SL_ETIMEOUT;
    if (rc < 0)
        return sl_error_set(err, SL_EIO, "elastic: zmq_poll: %s", zmq_strerror(zmq_errno()));
    if (rc == 0)
        return SL_ETIMEOUT;
    const char *bad = NULL;
    if (e->coordinator) { /* the routing id ZeroMQ puts first (at most 255 bytes) */
        int n = zmq_recv(e->sock, id, 256, ZMQ_DONTWAIT);
        if (n < 0)
            return SL_ETIMEOUT;
        int more = 0;
        size_t ml = sizeof more;
        zmq_getsockopt(e->sock, ZMQ_RCVMORE, &more, &ml);
        if (!more)
            return SL_ETIMEOUT;
        bad = n > 256 ? "a routing id over 256 bytes" : NULL;
        *idlen = (size_t)(n > 256 ? 256 : n);
    }
    zmq_msg_t frame;
    zmq_msg_init(&frame);
    if (zmq_msg_recv(&frame, e->sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&frame);
        return SL_ETIMEOUT;
    }
    int more = zmq_msg_more(&frame);
    size_t n = zmq_msg_size(&frame);
    if (bad == NULL)
        bad = more ? "more than one frame" : n > sizeof e->buf ? "longer than any message" : NULL;
    if (bad == NULL) {
        memcpy(e->buf, zmq_msg_data(&frame), n);
        bad = train_elastic_decode(e->buf, n, m);
    }
    zmq_msg_close(&frame);
    while (more) { /* drop surplus frames */
        zmq_msg_t x;
        zmq_msg_init(&x);
        more = zmq_msg_recv(&x, e->sock, 0) >= 0 && zmq_msg_more(&x);
        zmq_msg_close(&x);
    }
    if (bad != NULL)
        return sl_error_set(err, SL_EPROTO, "elastic: a malformed message %s: %s",
                            e->coordinator ? "on the coordinator endpoint" : "from worker 0", bad);
    return 0;
}

/* ---- setup ---- */

/* The credits this worker's client gives each feeder (client_open's
 * default when --credits is not given). */
uint32_t trainer_elastic_window_credits(const struct trainer *t)
{
    if (t->o.credits != 0)
        return t->o.credits;
    return 4u * t->replicas < CLIENT_DEFAULT_CREDITS ? CLIENT_DEFAULT_CREDITS : 4u * t->replicas;
}

/* The feeders send a worker's END once its last piece is sent, and a
 * feeder whose workers all had their END and said BYE is done: a worker
 * whose window (credits x feeders) held the job's remaining pieces at a
 * boundary would end the job when it closes its client there. The
 * smallest remainder at a boundary is one epoch (none comes after the
 * last one), so the window must hold less than an epoch. 0, or SL_EINVAL
 * saying so. */
int trainer_elastic_check_window(const struct trainer *t, struct sl_error *err)
{
    const struct sl_wire_welcome *w = client_welcome(t->cl);
    uint64_t credits = trainer_elastic_window_credits(t);
    uint64_t window = credits * t->feeders.n, epoch = w->steps_per_epoch * t->replicas;
    if (w->epochs == 0 || window < epoch)
        return 0;
    return sl_error_set(err, SL_EINVAL,
                        "elastic: this worker's window of %" PRIu64 " pieces (--credits %" PRIu64 " x %zu feeders) "
                        "holds a whole epoch (%" PRIu64 " steps x %u replicas): the feeders could send the job's end "
                        "before a change, and take the old workers' goodbye at it for the job's end; give --credits "
                        "below %" PRIu64,
                        window, credits, t->feeders.n, w->steps_per_epoch, t->replicas,
                        (epoch + t->feeders.n - 1) / t->feeders.n);
}

/* --curve-key: worker 0's ROUTER a CURVE server that lets in only the
 * job's key (the ZAP handler before the bind), another's DEALER a CURVE
 * client of that key. 0 or the error. */
static int endpoint_curve(struct trainer *t, struct trainer_elastic_ep *e, struct sl_error *err)
{
    if (!e->coordinator)
        return sl_curve_client(e->sock, &t->curve, t->curve.public_z85, err);
    const char *pub = t->curve.public_z85;
    int rc = sl_curve_allow_load(&e->allow, NULL, &pub, 1, err);
    if (rc == 0)
        rc = sl_zap_start(&e->zap, e->ctx, e->allow, "elastic coordinator", err);
    if (rc == 0)
        rc = sl_curve_server(e->sock, &t->curve, err);
    return rc;
}

/* e (zeroed by the caller): the model's config, and the window
 * check_window bounds (a joiner with another --credits or feeder count is
 * refused by it), then the socket on --elastic: worker 0 (coordinator)
 * binds a ROUTER, the others connect a DEALER (a joiner's watched by a
 * monitor until it is taken in); with --curve-key, CURVE on both ends.
 * 0 or the error. */
int trainer_elastic_ep_open(struct trainer *t, struct trainer_elastic_ep *e, int coordinator, struct sl_error *err)
{
    const struct trainer_opts *o = &t->o;
    e->coordinator = coordinator;
    trainer_model_config_string(t, e->config, sizeof e->config);
    size_t cl = strlen(e->config);
    snprintf(e->config + cl, sizeof e->config - cl, " credits=%u feeders=%zu", trainer_elastic_window_credits(t),
             t->feeders.n);
    if ((e->ctx = zmq_ctx_new()) == NULL)
        return sl_error_set(err, SL_EIO, "elastic: zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    /* ZMQ_MAXMSGSIZE bounds a frame as it arrives: under CURVE, encrypted */
    const struct sl_zsock_opts zo = {.linger_ms = 1000,
                                     .max_msg = TRAIN_ELASTIC_MAX_FRAME + (t->have_curve ? SL_CURVE_FRAME_OVERHEAD : 0),
                                     .router_mandatory = coordinator};
    e->sock = sl_zsock_open(e->ctx, coordinator ? ZMQ_ROUTER : ZMQ_DEALER, &zo, "elastic coordinator", err);
    if (e->sock == NULL)
        return SL_EIO;
    if (!coordinator && o->join != NULL &&
        (e->mon = sl_zsock_monitor_open(e->ctx, e->sock, JOIN_MONITOR, SL_HANDSHAKE_EVENTS, "elastic coordinator",
                                        err)) == NULL)
        return SL_EIO;
    int rc = t->have_curve ? endpoint_curve(t, e, err) : 0;
    if (rc == 0)
        rc = coordinator ? sl_bind_private(e->sock, o->elastic, NULL, err)
                         : sl_endpoint_connect(e->sock, o->elastic, err);
    if (rc != 0)
        sl_error_prefix(err, "elastic: %s: ", o->elastic);
    return rc;
}

/* Worker 0: its book, of the world the job started with (`names`, n of
 * them: the members' names in the book). 0 or the error. */
int trainer_elastic_ep_book(struct trainer *t, struct trainer_elastic_ep *e, const char *const *names, uint32_t n,
                            struct sl_error *err)
{
    const struct trainer_opts *o = &t->o;
    struct train_elastic_coord *c = &e->coord;
    c->job = o->job;
    c->config = e->config;
    c->endpoint = o->elastic;
    c->replicas = t->replicas;
    c->max_workers = o->elastic_max_workers;
    c->epochs = client_welcome(t->cl)->epochs;
    return train_elastic_coord_init(c, names, n, err);
}

/* Worker 0 tells the joiners still waiting that no change comes (the job
 * has no boundary left); then the socket and the book go. */
void trainer_elastic_ep_close(struct trainer_elastic_ep *e)
{
    if (e->coordinator && e->sock != NULL) {
        const char *why = "elastic: the job ended (or worker 0 stopped) before the change";
        for (uint32_t k = 0; k < e->coord.njoins; k++) {
            struct train_elastic_msg m = {.type = TRAIN_ELASTIC_REFUSE, .s = {why}, .n = {(uint32_t)strlen(why)}};
            struct sl_error ignore = {0};
            (void)trainer_elastic_send(e, e->coord.joins[k].id, e->coord.joins[k].idlen, &m, &ignore);
        }
    }
    /* the socket first: the ZAP handler must outlive its listener (the
     * REFUSEs still leaving need no handshake) */
    sl_zsock_monitor_close(e->sock, e->mon);
    e->sock = e->mon = NULL;
    sl_zap_stop(e->zap);
    sl_curve_allow_free(e->allow);
    e->zap = NULL;
    e->allow = NULL;
    if (e->ctx != NULL)
        while (zmq_ctx_term(e->ctx) < 0 && zmq_errno() == EINTR) {
        }
    train_elastic_coord_free(&e->coord);
}

/* ---- between steps ---- */

/* Worker 0: a request on its endpoint (from routing id `id`): a JOIN judged
 * at once (ACK, or REFUSE with the reason), a LEAVE recorded, another
 * message to h->other. */
void trainer_elastic_ep_message(struct trainer *t, struct trainer_elastic_ep *e, const struct trainer_elastic_hooks *h,
                                const unsigned char *id, size_t idlen, const struct train_elastic_msg *m)
{
    struct sl_error err = {0};
    if (m->type == TRAIN_ELASTIC_JOIN) {
        char name[TRAIN_ELASTIC_MAX_ENDPOINT + 1];
        snprintf(name, sizeof name, "%.*s", (int)m->n[2], m->s[2]);
        struct train_elastic_msg r = {.type = TRAIN_ELASTIC_ACK, .gen = e->coord.gen, .c = e->epoch};
        int rc = h->join_check != NULL ? h->join_check(t, m, name, &err) : 0;
        if (rc == 0)
            rc = train_elastic_coord_join(&e->coord, m, id, idlen, e->epoch, &err);
        if (rc != 0) {
            sl_log(SL_LOG_WARN, "%s: refused", err.msg);
            r = (struct train_elastic_msg){
                .type = TRAIN_ELASTIC_REFUSE, .gen = e->coord.gen, .s = {err.msg}, .n = {(uint32_t)strlen(err.msg)}};
        } else {
            if (h->joined != NULL)
                h->joined(t, m, name);
            sl_log(SL_LOG_INFO, "elastic: a worker (%s%s) asks to join in epoch %" PRIu64 ": admitted%s", h->joiner,
                   name, e->epoch, h->admitted);
        }
        (void)trainer_elastic_send(e, id, idlen, &r, &err);
    } else if (m->type == TRAIN_ELASTIC_LEAVE) {
        if (train_elastic_coord_leave(&e->coord, m, &err) != 0)
            sl_log(SL_LOG_WARN, "%s: ignored", err.msg);
        else
            sl_log(SL_LOG_INFO, "elastic: worker %u asks to leave in epoch %" PRIu64 ": let go at %s", m->a, e->epoch,
                   h->change);
    } else if (h->other == NULL || !h->other(t, id, idlen, m)) {
        sl_log(SL_LOG_WARN, "elastic: an unexpected message (type %u) on the coordinator endpoint: ignored", m->type);
    }
}

/* Worker 0: the waiting joiners' ACK again (they know it is alive); one
 * whose connection is gone is forgotten (a dead joiner in the new world
 * would keep its ring from opening). */
void trainer_elastic_ack_joiners(struct trainer_elastic_ep *e)
{
    struct train_elastic_msg a = {.type = TRAIN_ELASTIC_ACK, .gen = e->coord.gen, .c = e->epoch};
    for (uint32_t k = 0; k < e->coord.njoins;) {
        struct sl_error err = {0};
        if (trainer_elastic_send(e, e->coord.joins[k].id, e->coord.joins[k].idlen, &a, &err) == SL_ECLOSED) {
            sl_log(SL_LOG_WARN, "elastic: the joining worker (%s) went away before its change: forgotten",
                   e->coord.joins[k].ep);
            train_elastic_coord_drop_join(&e->coord, k);
        } else {
            k++;
        }
    }
}

/* The leave flag, acted on once: a member asks worker 0 to let it go;
 * worker 0 says it cannot leave. */
static void note_leave(struct trainer *t, struct trainer_elastic_ep *e, const struct trainer_elastic_hooks *h)
{
    if (!trainer_leave_flag || e->leave_noted)
        return;
    e->leave_noted = 1;
    if (e->coordinator) {
        sl_log(SL_LOG_ERROR,
               "elastic: worker 0 cannot leave the job: it holds the coordinator endpoint (--elastic %s); it trains "
               "on (SIGINT, or a second SIGTERM, stops it, and the job with it)",
               t->o.elastic);
        return;
    }
    struct sl_error err = {0};
    struct train_elastic_msg m = {.type = TRAIN_ELASTIC_LEAVE, .gen = e->gen, .a = t->o.worker};
    if (trainer_elastic_send(e, NULL, 0, &m, &err) != 0)
        sl_log(SL_LOG_ERROR, "%s", err.msg);
    else
        sl_log(SL_LOG_INFO, "elastic: SIGTERM: asked worker 0 to let worker %u go at %s", t->o.worker, h->change);
}

/* Between steps: the requests waiting on worker 0's endpoint, the leave
 * flag. `epoch`: the newest step's. Never blocks. */
void trainer_elastic_ep_poll(struct trainer *t, struct trainer_elastic_ep *e, const struct trainer_elastic_hooks *h,
                             uint64_t epoch)
{
    e->epoch = epoch;
    note_leave(t, e, h);
    if (!e->coordinator)
        return;
    unsigned char id[256];
    size_t idlen = 0;
    struct train_elastic_msg m;
    struct sl_error err = {0};
    for (int k = 0; k < 64; k++) { /* a bounded batch: a flood waits for the next step */
        int rc = trainer_elastic_recv(e, 0, id, &idlen, &m, &err);
        if (rc == SL_ETIMEOUT)
            break;
        if (rc != 0) {
            sl_log(SL_LOG_WARN, "%s: ignored", err.msg);
            continue;
        }
        trainer_elastic_ep_message(t, e, h, id, idlen, &m);
    }
    uint64_t now = sl_clock_ns();
    if (e->coord.njoins > 0 && now - e->acked_ns >= ACK_EVERY_NS) {
        e->acked_ns = now;
        trainer_elastic_ack_joiners(e);
    }
}

/* ---- joining ---- */

/* A joiner taken in: its DEALER's monitor goes (a member's handshakes are
 * the ring's business). */
static void stop_join_monitor(struct trainer_elastic_ep *e)
{
    if (e->mon == NULL)
        return;
    zmq_socket_monitor(e->sock, NULL, 0);
    sl_zsock_monitor_close(NULL, e->mon);
    e->mon = NULL;
}

/* A process started with --join, its socket open: the JOIN to worker 0
 * (with `session` in c; 0: none), then its answers until the WORLD that
 * takes this process in (and, with a session, names it in k). 0 with that
 * WORLD in *w (its strings in e->buf); the error of a REFUSE, another
 * answer, a failed handshake with worker 0 (one end with CURVE and the
 * other without, or another trainer key: the monitor's verdict, within
 * about a second), worker 0's silence past --rendezvous-timeout-s or a
 * stop signal. */
int trainer_elastic_ep_join(struct trainer *t, struct trainer_elastic_ep *e, const struct trainer_elastic_hooks *h,
                            uint64_t session, struct train_elastic_msg *w, struct sl_error *err)
{
    const struct trainer_opts *o = &t->o;
    struct train_elastic_msg m = {
        .type = TRAIN_ELASTIC_JOIN,
        .a = t->replicas,
        .c = session,
        .s = {o->job, e->config, o->join},
        .n = {(uint32_t)strlen(o->job), (uint32_t)strlen(e->config), (uint32_t)strlen(o->join)}};
    int rc = trainer_elastic_send(e, NULL, 0, &m, err);
    if (rc == 0)
        sl_log(SL_LOG_INFO, "elastic: asking worker 0 (%s) to join the %s %s", o->elastic, h->asking, o->join);
    uint64_t heard = sl_clock_ns(), wait = (uint64_t)o->rendezvous_timeout_s * 1000000000u;
    int acked = 0;
    struct sl_handshake hs;
    sl_handshake_init(&hs, SL_HANDSHAKE_PEERS, t->have_curve);
    while (rc == 0) {
        if (e->mon != NULL) {
            sl_handshake_read(&hs, e->mon, sl_clock_ns());
            if (sl_handshake_failed(&hs, sl_clock_ns())) {
                char peer[SL_ERROR_MSG_MAX / 2];
                snprintf(peer, sizeof peer, "worker 0 (%s)", o->elastic);
                return sl_handshake_peers_error(&hs, "elastic", peer, err);
            }
        }
        if (trainer_leave_flag && !trainer_stop_flag)
            trainer_stop_flag = SIGTERM; /* not a member yet: nothing to leave, the process stops */
        if (trainer_stop_flag)
            return sl_error_set(err, SL_ECLOSED, "elastic: stopped by a signal while waiting to join");
        if (sl_clock_ns() - heard >= wait)
            return sl_error_set(err, SL_ETIMEOUT, "elastic: worker 0 (%s) %s within %u s", o->elastic,
                                acked ? "fell silent before the change" : "did not answer the JOIN",
                                o->rendezvous_timeout_s);
        rc = trainer_elastic_recv(e, 250, NULL, NULL, w, err);
        if (rc == SL_ETIMEOUT) {
            rc = 0;
            continue;
        }
        if (rc != 0)
            break;
        heard = sl_clock_ns();
        if (w->type == TRAIN_ELASTIC_REFUSE) {
            rc = sl_error_set(err, SL_EPROTO, "%.*s (reported by worker 0, %s)", (int)w->n[0], w->s[0], o->elastic);
        } else if (w->type == TRAIN_ELASTIC_ACK) {
            if (!acked)
                sl_log(SL_LOG_INFO, "elastic: admitted in epoch %" PRIu64 ": joining at %s", w->c, h->change);
            acked = 1;
        } else if (w->type == TRAIN_ELASTIC_WORLD && w->a != TRAIN_ELASTIC_RELEASED &&
                   (session == 0 || w->k == session)) {
            stop_join_monitor(e);
            return 0;
        } else {
            rc = sl_error_set(err, SL_EPROTO, "elastic: worker 0 answered the JOIN with a message of type %u", w->type);
        }
    }
    return rc;
}
