/* feed_listener: the feeder's socket (a ZeroMQ ROUTER, CURVE and its ZAP
 * handler when asked) and what answers on it before the serving loop runs:
 * STATUS to trainers that say HELLO while the feeder scans its files, and
 * REFUSE to every trainer after a start-up failure (feed_server.h).
 */
#include "feed_server.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "feed_serve.h"
#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_log.h"
#include "sl_peer.h"
#include "sl_wire.h"
#include "sl_zsock.h"

/* ---- the socket ---- */

/* Read the allow-list again if SIGHUP asked for it. */
void feed__curve_reload(const struct feed_curve *curve)
{
    if (curve == NULL || curve->reload == NULL || !*curve->reload || curve->allow == NULL)
        return;
    *curve->reload = 0;
    struct sl_error err = {0};
    size_t before = sl_curve_allow_count(curve->allow);
    if (sl_curve_allow_reload(curve->allow, &err) != 0)
        sl_log(SL_LOG_ERROR, "SIGHUP: the allow-list was not reloaded, the %zu keys read before still stand: %s",
               before, err.msg);
    else
        sl_log(SL_LOG_INFO, "SIGHUP: allow-list reloaded: %zu trainer keys (%zu before)",
               sl_curve_allow_count(curve->allow), before);
}

/* The ZAP handler's figures, once at the end. */
void feed__curve_summary(const struct sl_zap *zap)
{
    if (zap != NULL)
        sl_log(SL_LOG_INFO,
               "CURVE: %" PRIu64 " trainer connections accepted, %" PRIu64 " refused by the allow-list (a client "
               "without CURVE or with the wrong server key fails before it is asked)",
               sl_zap_accepted(zap), sl_zap_refused(zap));
}

/* A ZeroMQ context and the feeder's ROUTER, bound to `listen`; with CURVE,
 * a CURVE server whose ZAP handler (*zap) is running before the bind. */
int feed__bind_router(const char *listen, const struct feed_curve *curve, const char *ipc_group, void **ctx,
                      void **router, struct sl_zap **zap, struct sl_error *err)
{
    *zap = NULL;
    *ctx = zmq_ctx_new();
    if (*ctx == NULL)
        return sl_error_sys(err, errno, "zmq_ctx_new");
    struct sl_zsock_opts zo = {
        .linger_ms = 2000,
        /* trainers send header frames only: a larger frame makes ZeroMQ
         * drop the connection before it is read (docs/protocol.md,
         * "Transport"); under CURVE the bound is on the encrypted frame */
        .max_msg = SL_WIRE_MAX_HEADER + (curve != NULL ? SL_CURVE_FRAME_OVERHEAD : 0),
        .unbounded_send = 1, /* credits bound what is queued */
        /* a connection that has not finished its handshake (ZMTP greeting,
         * CURVE) within 5 s is closed: a slow-loris peer holds an fd and
         * 3.5 kB for at most that long (docs/security.md, "Hostile clients") */
        .handshake_ms = FEED_HANDSHAKE_MS,
        .router_mandatory = 1,
    };
    *router = sl_zsock_open(*ctx, ZMQ_ROUTER, &zo, "the feeder's socket", err);
    if (*router == NULL)
        return SL_EIO;
    if (curve != NULL) {
        int rc = sl_curve_server(*router, curve->keys, err);
        if (rc == 0)
            rc = sl_zap_start(zap, *ctx, curve->allow, "feeder", err);
        if (rc != 0)
            return rc;
    }
    /* an ipc socket file only this user (or --ipc-group) can connect to */
    return sl_bind_private(*router, listen, ipc_group, err);
}

/* The version of a HELLO of another protocol version (magic "SLC1", type
 * HELLO), for a REFUSE the peer's decoder will report; 0 for anything
 * else. */
unsigned feed__other_version_hello(const zmq_msg_t *body)
{
    const uint8_t *p = zmq_msg_data((zmq_msg_t *)body);
    if (zmq_msg_size((zmq_msg_t *)body) < 8 || memcmp(p, "SLC1", 4) != 0 || p[6] != SL_WIRE_HELLO || p[7] != 0)
        return 0;
    unsigned v = (unsigned)p[4] | (unsigned)p[5] << 8;
    return v != SL_WIRE_VERSION ? v : 0;
}

/* ---- after a start-up failure: refusing every trainer ---- */

int feed_server_refuse_all(struct feed_listener *l, const char *reason, int quiet_ms, volatile sig_atomic_t *stop_flag)
{
    if (l == NULL || l->router == NULL)
        return SL_EINVAL;
    struct sl_wire_refuse r = {.reason = reason, .reason_len = strlen(reason)};
    if (r.reason_len > SL_WIRE_MAX_REASON)
        r.reason_len = SL_WIRE_MAX_REASON;
    int rc = sl_wire_encode_refuse(&r, &l->buf);
    uint64_t last = sl_clock_ns();
    sl_log(SL_LOG_INFO, "refusing every trainer on %s until %d ms pass without one", l->listen, quiet_ms);
    while (rc == 0 && !(stop_flag && *stop_flag) && sl_clock_ns() - last < (uint64_t)quiet_ms * 1000000u) {
        feed__curve_reload(l->curve);
        zmq_pollitem_t it = {.socket = l->router, .events = ZMQ_POLLIN};
        if (zmq_poll(&it, 1, 100) <= 0)
            continue;
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        struct sl_error err = {0};
        if (zmq_msg_recv(&id, l->router, 0) >= 0 && zmq_msg_more(&id) && zmq_msg_recv(&body, l->router, 0) >= 0 &&
            sl_wire_decode(zmq_msg_data(&body), zmq_msg_size(&body), &l->msg, &err) == 0 &&
            l->msg.type == SL_WIRE_HELLO) {
            zmq_send(l->router, zmq_msg_data(&id), zmq_msg_size(&id), ZMQ_SNDMORE);
            zmq_send(l->router, l->buf.data, l->buf.len, 0);
            if (sl_log_allowed(&l->lim_refuse))
                sl_log(SL_LOG_INFO, "refused worker %u: %s", l->msg.hello.worker, reason);
            last = sl_clock_ns();
        }
        zmq_msg_close(&id);
        zmq_msg_close(&body);
        sl_log_limit_flush(&l->lim_refuse, 0);
    }
    sl_log_limit_flush(&l->lim_refuse, 1);
    return rc;
}

/* ---- before serving: the listener ---- */

int feed_listener_open(struct feed_listener **out, const char *listen, const char *job, int retry_ms,
                       const struct feed_curve *curve, const char *ipc_group, struct sl_error *err)
{
    *out = NULL;
    struct feed_listener *l = sl_calloc(1, sizeof *l);
    if (l == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    l->listen = listen;
    l->job = job;
    l->retry_ms = retry_ms < 1 ? 1 : retry_ms > (int)SL_WIRE_MAX_RETRY_MS ? SL_WIRE_MAX_RETRY_MS : (uint32_t)retry_ms;
    l->lim_refuse = (struct sl_log_limit){.kind = "refusals", .burst = 10};
    l->lim_bad = (struct sl_log_limit){.kind = "malformed or unexpected messages", .burst = 10};
    sl_buf_init(&l->buf, SL_WIRE_MAX_HEADER);
    l->curve = curve;
    int rc = feed__bind_router(listen, curve, ipc_group, &l->ctx, &l->router, &l->zap, err);
    if (rc != 0) {
        feed_listener_close(l);
        return rc;
    }
    *out = l;
    return 0;
}

static void listener_refuse(struct feed_listener *l, const zmq_msg_t *id, const char *fmt, ...) SL_PRINTF(3, 4);

static void listener_refuse(struct feed_listener *l, const zmq_msg_t *id, const char *fmt, ...)
{
    char reason[SL_WIRE_MAX_REASON];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    if (sl_log_allowed(&l->lim_refuse))
        sl_log(SL_LOG_WARN, "refused a trainer: %s", reason);
    struct sl_wire_refuse r = {.reason = reason, .reason_len = strlen(reason)};
    if (sl_wire_encode_refuse(&r, &l->buf) == 0 &&
        zmq_send(l->router, zmq_msg_data((zmq_msg_t *)id), zmq_msg_size((zmq_msg_t *)id), ZMQ_SNDMORE) >= 0)
        zmq_send(l->router, l->buf.data, l->buf.len, 0);
}

/* One message from the socket, if any: 1 when one was taken. */
static int listener_take(struct feed_listener *l, const struct feed_scan_status *st)
{
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    if (zmq_msg_recv(&id, l->router, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&id);
        zmq_msg_close(&body);
        return 0;
    }
    if (!zmq_msg_more(&id) || zmq_msg_recv(&body, l->router, 0) < 0)
        goto out;
    while (zmq_msg_more(&body)) { /* trainers send single-frame messages */
        zmq_msg_t extra;
        zmq_msg_init(&extra);
        zmq_msg_recv(&extra, l->router, 0);
        int m = zmq_msg_more(&extra);
        zmq_msg_close(&extra);
        if (!m)
            break;
    }
    struct sl_error err = {0};
    if (sl_wire_decode(zmq_msg_data(&body), zmq_msg_size(&body), &l->msg, &err) != 0) {
        if (sl_log_allowed(&l->lim_bad))
            sl_log(SL_LOG_WARN, "bad message from an unknown peer: %s", err.msg);
        unsigned v = feed__other_version_hello(&body);
        if (v != 0)
            listener_refuse(l, &id,
                            "this feeder speaks protocol version %u, the trainer %u: use the same sluice "
                            "release",
                            SL_WIRE_VERSION, v);
        goto out;
    }
    /* a feeder joining asks again every heartbeat interval */
    if (l->msg.type == SL_WIRE_JOIN) {
        listener_refuse(l, &id, "this feeder is still scanning its files (%" PRIu64 " of %" PRIu64 " done)",
                        st->files_done, st->files);
        goto out;
    }
    /* no trainer is connected while the feeder scans: only a HELLO is
     * answered (a heartbeat or credit from before a restart is not) */
    if (l->msg.type != SL_WIRE_HELLO)
        goto out;
    const struct sl_wire_hello *h = &l->msg.hello;
    if (h->job_len != strlen(l->job) || memcmp(h->job, l->job, h->job_len) != 0) {
        listener_refuse(l, &id, "job '%.*s' is not served here (this feeder serves '%s')", (int)h->job_len, h->job,
                        l->job);
        goto out;
    }
    if (!(h->flags & SL_WIRE_HELLO_STATUS)) {
        /* a trainer that predates STATUS would take one for a protocol
         * error: say in words what it cannot be told */
        listener_refuse(l, &id,
                        "this feeder is still scanning its files (%" PRIu64 " of %" PRIu64
                        " done) and this trainer cannot be told to wait (it predates STATUS): start it again "
                        "once the feeder logs 'serving job'",
                        st->files_done, st->files);
        goto out;
    }
    struct sl_wire_status m = {.state = SL_WIRE_STATUS_SCANNING,
                               .retry_ms = l->retry_ms,
                               .files_done = st->files_done,
                               .files = st->files,
                               .records = st->records < SL_WIRE_MAX_COUNT ? st->records : SL_WIRE_MAX_COUNT,
                               .bytes = st->bytes < SL_WIRE_MAX_COUNT ? st->bytes : SL_WIRE_MAX_COUNT};
    if (m.files == 0 || m.files > SL_WIRE_MAX_FILES)
        m.files = m.files == 0 ? 1 : SL_WIRE_MAX_FILES;
    if (m.files_done > m.files)
        m.files_done = m.files;
    uint32_t worker = h->worker;
    if (sl_wire_encode_status(&m, &l->buf) == 0 &&
        zmq_send(l->router, zmq_msg_data(&id), zmq_msg_size(&id), ZMQ_SNDMORE) >= 0 &&
        zmq_send(l->router, l->buf.data, l->buf.len, 0) >= 0) {
        uint64_t now = sl_clock_ns();
        if (l->statuses++ == 0 || now - l->last_log_ns >= 10000000000u) {
            sl_log(SL_LOG_INFO,
                   "worker %u said HELLO while scanning: told to wait (%" PRIu64 " of %" PRIu64 " files; %" PRIu64
                   " such answers so far)",
                   worker, m.files_done, m.files, l->statuses);
            l->last_log_ns = now;
        }
    }
out:
    zmq_msg_close(&id);
    zmq_msg_close(&body);
    return 1;
}

void feed_listener_answer(struct feed_listener *l, const struct feed_scan_status *st)
{
    if (l == NULL || l->router == NULL)
        return;
    feed__curve_reload(l->curve);
    for (int k = 0; k < 256 && listener_take(l, st); k++)
        ;
    sl_log_limit_flush(&l->lim_refuse, 0);
    sl_log_limit_flush(&l->lim_bad, 0);
}

void feed_listener_close(struct feed_listener *l)
{
    if (l == NULL)
        return;
    sl_log_limit_flush(&l->lim_refuse, 1);
    sl_log_limit_flush(&l->lim_bad, 1);
    if (l->router != NULL)
        zmq_close(l->router);
    feed__curve_summary(l->zap);
    sl_zap_stop(l->zap); /* before the context ends */
    if (l->ctx != NULL)
        zmq_ctx_term(l->ctx);
    sl_buf_free(&l->buf);
    sl_free(l);
}
