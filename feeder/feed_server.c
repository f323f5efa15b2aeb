/* feed_server: the serving loop (see feed_server.h for the threads and the
 * flow of credits).
 *
 * Trainer state lives in a table indexed by worker: a worker has at most
 * one trainer connection at a time. The cluster shape (W, R) and the rules
 * for HELLOs are in docs/protocol.md ("How sluice's feeder and trainer use
 * it").
 *
 * Tasks: max(prefetch, 2 x threads) of them (feed_exec.h) bound how many
 * pieces are assembled at once. The server takes a free one when a
 * trainer has a credit and its plan has a piece for this feeder, and
 * submits it; when it comes back done the server sends the piece and
 * recycles the task. A task whose trainer went away in the meantime is
 * dropped (its buffer goes back to its pool). Pieces a trainer reads in
 * shared memory are held for it by feed_hold.
 *
 * Lock order: none held across calls (the executors' queues and the pools
 * lock internally, each alone).
 */
#include "feed_server.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "feed_serve.h"
#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_log.h"
#include "sl_pool.h"
#include "sl_proc.h"
#include "sl_peer.h"
#include "sl_wire.h"
#include "sl_zsock.h"

/* ---- the socket ---- */

struct feed_listener {
    void *ctx, *router; /* NULL once feed_server_run has taken them */
    struct sl_zap *zap; /* the ZAP handler on ctx (CURVE), taken with it */
    const struct feed_curve *curve;
    const char *listen, *job;
    uint32_t retry_ms;
    struct sl_buf buf;
    struct sl_wire_msg msg; /* decoded input (large: kept here) */
    uint64_t statuses;      /* STATUS answers sent */
    uint64_t last_log_ns;   /* the last line saying so */
    struct sl_log_limit lim_refuse, lim_bad;
};

/* Read the allow-list again if SIGHUP asked for it. */
static void curve_reload(const struct feed_curve *curve)
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
static void curve_summary(const struct sl_zap *zap)
{
    if (zap != NULL)
        sl_log(SL_LOG_INFO,
               "CURVE: %" PRIu64 " trainer connections accepted, %" PRIu64 " refused by the allow-list (a client "
               "without CURVE or with the wrong server key fails before it is asked)",
               sl_zap_accepted(zap), sl_zap_refused(zap));
}

/* A ZeroMQ context and the feeder's ROUTER, bound to `listen`; with CURVE,
 * a CURVE server whose ZAP handler (*zap) is running before the bind. */
static int bind_router(const char *listen, const struct feed_curve *curve, const char *ipc_group, void **ctx,
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
static unsigned other_version_hello(const zmq_msg_t *body)
{
    const uint8_t *p = zmq_msg_data((zmq_msg_t *)body);
    if (zmq_msg_size((zmq_msg_t *)body) < 8 || memcmp(p, "SLC1", 4) != 0 || p[6] != SL_WIRE_HELLO || p[7] != 0)
        return 0;
    unsigned v = (unsigned)p[4] | (unsigned)p[5] << 8;
    return v != SL_WIRE_VERSION ? v : 0;
}

/* ---- sending ---- */

static int send_frames(struct server *s, const struct trainer *t, const struct sl_buf *hdr, int more)
{
    if (zmq_send(s->router, t->id, t->id_len, ZMQ_SNDMORE) < 0)
        return -1;
    return zmq_send(s->router, hdr->data, hdr->len, more ? ZMQ_SNDMORE : 0) < 0 ? -1 : 0;
}

static void fail_all(struct server *s, const struct sl_error *e);

/* Send the header in s->hbuf, just encoded with status rc_encode. A
 * message that does not encode is a fatal error (every trainer is told);
 * one that cannot be sent drops the trainer, which will rejoin and resume
 * where it stopped: nothing is lost without somebody hearing of it. */
static void send_simple(struct server *s, struct trainer *t, int rc_encode, const char *what)
{
    if (rc_encode != 0) {
        struct sl_error e;
        sl_error_set(&e, SL_EINVAL, "cannot encode the %s for worker %u (%s)", what, t->worker,
                     sl_code_name(rc_encode));
        fail_all(s, &e);
        return;
    }
    if (send_frames(s, t, &s->hbuf, 0) != 0) {
        char why[160];
        snprintf(why, sizeof why, "could not be sent the %s (%s) and was dropped", what, zmq_strerror(errno));
        sl_metrics_add(s->m, FEED_M_DROPPED, 1);
        feed__drop(s, t, why);
    }
}

static void send_error_all(struct server *s, int code, const char *msg)
{
    struct sl_wire_error e = {.code = code, .msg = msg, .msg_len = strlen(msg)};
    if (e.msg_len > SL_WIRE_MAX_ERROR)
        e.msg_len = SL_WIRE_MAX_ERROR;
    if (e.code < SL_ECLOSED || e.code > SL_EIO) /* the wire carries SL_E* codes only */
        e.code = SL_EIO;
    for (size_t i = 0; i < s->ntrainers; i++) {
        struct trainer *t = &s->trainers[i];
        if (t->active && sl_wire_encode_error(&e, &s->hbuf) == 0 && send_frames(s, t, &s->hbuf, 0) != 0)
            sl_log(SL_LOG_WARN, "could not tell worker %u of the error: %s", t->worker, zmq_strerror(errno));
    }
}

/* A fatal error: the first one is logged, sent to every trainer as ERROR
 * and ends the run (feed_server_run returns it). */
static void fail_all(struct server *s, const struct sl_error *e)
{
    if (s->fatal)
        return;
    s->fatal = 1;
    s->fatal_err = *e;
    if (s->fatal_err.code == 0)
        s->fatal_err.code = SL_EINVAL;
    sl_log(SL_LOG_ERROR, "%s", e->msg);
    send_error_all(s, s->fatal_err.code, s->fatal_err.msg);
}

static void refuse(struct server *s, const uint8_t *id, size_t id_len, const char *fmt, ...) SL_PRINTF(4, 5);

static void refuse(struct server *s, const uint8_t *id, size_t id_len, const char *fmt, ...)
{
    char reason[SL_WIRE_MAX_REASON];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    if (sl_log_allowed(&s->lim_refuse))
        sl_log(SL_LOG_WARN, "refused a trainer: %s", reason);
    sl_metrics_add(s->m, FEED_M_REFUSED, 1);
    struct sl_wire_refuse r = {.reason = reason, .reason_len = strlen(reason)};
    if (sl_wire_encode_refuse(&r, &s->hbuf) != 0)
        return;
    if (zmq_send(s->router, id, id_len, ZMQ_SNDMORE) >= 0)
        zmq_send(s->router, s->hbuf.data, s->hbuf.len, 0);
}

static void send_piece(struct server *s, struct trainer *t, struct feed_task *k)
{
    struct sl_wire_piece *p = &s->msg.piece;
    memset(p, 0, sizeof *p);
    p->epoch = k->piece.epoch;
    p->step = k->piece.step;
    p->worker = k->piece.worker;
    p->replica = k->piece.replica;
    p->seq = k->piece.seq;
    p->rows = (uint32_t)k->piece.n;
    p->flags = k->piece.step + 1 == s->steps ? SL_WIRE_PIECE_LAST_STEP : 0;
    p->ntensors = (uint16_t)k->layout.ntensors;
    uint64_t bytes = 0, body = 0;
    for (size_t i = 0; i < k->layout.ntensors; i++) {
        const struct feed_tensor *ft = &k->layout.t[i];
        p->tensors[i].dtype = (uint8_t)ft->dtype;
        p->tensors[i].rank = (uint8_t)ft->rank;
        for (int d = 0; d < ft->rank; d++)
            p->tensors[i].dims[d] = ft->dims[d];
        p->tensors[i].bytes = ft->bytes;
        p->tensors[i].offset = ft->off;
        bytes += ft->bytes;
        if (ft->off + ft->bytes > body)
            body = ft->off + ft->bytes;
    }
    s->msg.type = SL_WIRE_PIECE;
    /* to a trainer that mapped the pool: where the body lies, no copy; the
     * buffer is held (a reference of its own) until the piece's credit
     * comes back */
    int shared = t->shm == FEED_SHM_ON && body > 0;
    p->shm_offset = shared ? sl_pool_offset(s->pool, k->buf) : 0;
    p->shm_bytes = shared ? body : 0;
    if (shared)
        p->flags |= SL_WIRE_PIECE_SHM;
    /* a piece that cannot go is never skipped in silence: one that does
     * not encode (or whose buffer cannot be referenced) is an error every
     * trainer hears of; one the socket refuses drops its trainer, which
     * rejoins and resumes at it */
    struct sl_error err = {0};
    int rc = sl_wire_encode(&s->msg, &s->hbuf, &err);
    if (rc != 0) {
        sl_error_prefix(&err, "worker %u piece %" PRIu64 " (epoch %" PRIu64 " step %" PRIu64 "): ", p->worker, p->seq,
                        p->epoch, p->step);
        fail_all(s, &err);
        return;
    }
    if (shared && sl_pool_ref(s->pool, k->buf, 1) != 0) {
        sl_error_set(&err, SL_EINVAL, "worker %u piece %" PRIu64 ": its buffer is not out of the pool", p->worker,
                     p->seq);
        fail_all(s, &err);
        return;
    }
    if (send_frames(s, t, &s->hbuf, p->ntensors > 0 && !shared) != 0) {
        char why[160];
        snprintf(why, sizeof why, "could not be sent piece %" PRIu64 " (%s) and was dropped", p->seq,
                 zmq_strerror(errno));
        if (shared)
            sl_pool_put(s->pool, k->buf);
        sl_metrics_add(s->m, FEED_M_DROPPED, 1);
        feed__drop(s, t, why);
        return;
    }
    if (shared && feed_hold_put(&t->hold, k->ordinal, k->buf) != 0) {
        /* cannot happen while credits are honest (at most `window`
         * outstanding, and the ring holds twice that) */
        sl_pool_put(s->pool, k->buf);
        sl_metrics_add(s->m, FEED_M_DROPPED, 1);
        feed__drop(s, t, "had more pieces outstanding than its window and was dropped");
        return;
    }
    if (shared) {
        sl_metrics_add(s->m, FEED_M_SHM_PIECES, 1);
    } else if (p->ntensors > 0) {
        /* every tensor in one body frame: the pool buffer as laid out
         * (ZeroMQ moves one large frame much faster than several) */
        zmq_msg_t m;
        if (body == 0) {
            zmq_msg_init(&m);
        } else if (sl_pool_ref(s->pool, k->buf, 1) != 0) {
            /* the header went without its body: the trainer would wait
             * for it for ever */
            sl_error_set(&err, SL_EINVAL, "worker %u piece %" PRIu64 ": its buffer is not out of the pool", p->worker,
                         p->seq);
            fail_all(s, &err);
            return;
        } else {
            zmq_msg_init_data(&m, k->buf, (size_t)body, sl_pool_zmq_free, s->pool);
        }
        if (zmq_msg_send(&m, s->router, 0) < 0) {
            zmq_msg_close(&m);
            char why[160];
            snprintf(why, sizeof why, "could not be sent the body of piece %" PRIu64 " (%s) and was dropped", p->seq,
                     zmq_strerror(errno));
            sl_metrics_add(s->m, FEED_M_DROPPED, 1);
            feed__drop(s, t, why);
            return;
        }
    }
    t->sent++;
    if (!shared)
        sl_metrics_add(s->m, FEED_M_COPY_PIECES, 1);
    sl_metrics_add(s->m, FEED_M_PIECES, 1);
    sl_metrics_add(s->m, FEED_M_RECORDS, k->piece.n);
    sl_metrics_add(s->m, FEED_M_BYTES, bytes);
}

/* ---- tasks ---- */

static void on_done(struct server *s, struct feed_task *k)
{
    struct trainer *t = k->conn < s->ntrainers ? &s->trainers[k->conn] : NULL;
    if (k->rc != 0 && k->rc != SL_ECLOSED) {
        sl_metrics_add(s->m, FEED_M_ERRORS, 1);
        if (k->err.code == 0)
            k->err.code = k->rc;
        fail_all(s, &k->err);
    } else if (k->rc == 0 && t != NULL && t->active && t->generation == k->generation) {
        send_piece(s, t, k);
    }
    if (t != NULL && t->generation == k->generation && t->inflight > 0)
        t->inflight--;
    feed_exec_recycle(s->exec, k);
}

static void drain_done(struct server *s)
{
    struct feed_task *k;
    while ((k = feed_exec_done(s->exec)) != NULL)
        on_done(s, k);
}

/* Schedule pieces for trainers with credits, round-robin one piece each. */
static int schedule(struct server *s)
{
    int progress = 1, waiting = 0;
    while (progress && feed_exec_free(s->exec) > 0 && !s->fatal) {
        progress = 0;
        for (size_t i = 0; i < s->ntrainers && feed_exec_free(s->exec) > 0; i++) {
            struct trainer *t = &s->trainers[i];
            if (!t->active || t->plan_done || t->shm == FEED_SHM_PENDING)
                continue;
            /* pieces scheduled and not yet consumed (each CREDIT returns
             * one); a trainer returning more than it was sent only loses
             * its own window, it cannot wrap the count */
            uint64_t returned = t->granted - t->initial;
            uint64_t outstanding = t->scheduled > returned ? t->scheduled - returned : 0;
            if (t->credits == 0 || outstanding >= s->window) {
                waiting = 1;
                continue;
            }
            struct feed_piece piece;
            struct sl_error err = {0};
            int rc;
            /* the connection's share: seq % F == j, this feeder's own j or
             * the lost feeder's it took over */
            while ((rc = feed_plan_next(t->plan, &piece, &err)) == 0 && piece.seq % s->o->feeders != t->share)
                ;
            if (rc == SL_END) {
                t->plan_done = 1;
                continue;
            }
            if (rc != 0) {
                fail_all(s, &err);
                return rc;
            }
            struct feed_task *k = feed_exec_task(s->exec);
            k->conn = (uint32_t)i;
            k->generation = t->generation;
            k->ordinal = t->scheduled;
            k->pool = s->pool;
            rc = feed_exec_submit(s->exec, k, &piece);
            if (rc != 0) {
                feed_exec_recycle(s->exec, k);
                if (rc == SL_ECLOSED) /* stopping */
                    return 0;
                sl_error_set(&err, rc, "out of memory for a piece of %zu rows", piece.n);
                fail_all(s, &err);
                return rc;
            }
            t->last_seq = piece.seq + 1;
            t->epochs = piece.epoch;
            t->credits--;
            t->scheduled++;
            t->inflight++;
            progress = 1;
        }
    }
    return waiting;
}

/* ---- incoming messages ---- */

static struct trainer *find(struct server *s, const uint8_t *id, size_t id_len)
{
    for (size_t i = 0; i < s->ntrainers; i++) {
        struct trainer *t = &s->trainers[i];
        if (t->active && t->id_len == id_len && memcmp(t->id, id, id_len) == 0)
            return t;
    }
    return NULL;
}

/* The entry of a connection this feeder dropped (its send failed, it was
 * silent), by its routing id: what it sent before it went may still be
 * queued behind the drop. NULL when there is none. */
static struct trainer *find_dropped(struct server *s, const uint8_t *id, size_t id_len)
{
    for (size_t i = 0; i < s->ntrainers; i++) {
        struct trainer *t = &s->trainers[i];
        if (!t->active && t->id_len == id_len && id_len > 0 && memcmp(t->id, id, id_len) == 0)
            return t;
    }
    return NULL;
}

/* The connection entry for a takeover of `share` for `worker`: the one it
 * had (active or not), else a free one, else a new one while there is
 * room (NULL when there is none). */
static struct trainer *takeover_entry(struct server *s, uint32_t worker, uint32_t share, int make)
{
    struct trainer *spare = NULL;
    for (size_t i = s->workers; i < s->ntrainers; i++) {
        struct trainer *t = &s->trainers[i];
        if (t->worker == worker && t->share == share)
            return t;
        if (!t->active && spare == NULL)
            spare = t;
    }
    if (!make || spare != NULL)
        return spare;
    if (s->ntrainers - s->workers >= s->max_takeovers)
        return NULL;
    if (s->ntrainers == s->cap_trainers) {
        size_t cap = s->cap_trainers + (s->cap_trainers - s->workers) + 4, most = s->workers + s->max_takeovers;
        if (cap > most)
            cap = most;
        struct trainer *grown = sl_realloc(s->trainers, cap * sizeof *grown);
        if (grown == NULL)
            return NULL;
        s->trainers = grown;
        s->cap_trainers = cap;
    }
    struct trainer *t = &s->trainers[s->ntrainers++];
    memset(t, 0, sizeof *t);
    return t;
}

/* A HELLO for the place of t, which is connected: 1 when it may take the
 * place (the old connection is dropped), 0 when it was refused. The same
 * trainer process (its incarnation) connecting again always may; another
 * one may when the old connection has closed (a restarted trainer: a
 * HEARTBEAT to it then fails at once, since the ROUTER is mandatory) or
 * has been silent for 2.5 of its heartbeats; a second live process is
 * refused. */
static int may_replace(struct server *s, struct trainer *t, const uint8_t *id, size_t id_len,
                       const struct sl_wire_hello *h)
{
    uint64_t now = sl_clock_ns(), silent = now - t->last_seen_ns;
    const char *why = NULL;
    if (h->incarnation != 0 && h->incarnation == t->incarnation) {
        why = "the same trainer process connects again: the new connection takes the old one's place";
    } else if (silent >= feed__grace_ns(t)) {
        why = "a new connection takes the place of one silent for 2.5 heartbeats";
    } else {
        struct sl_wire_heartbeat hb = {.sent_ns = now};
        if (sl_wire_encode_heartbeat(&hb, &s->hbuf) == 0 && send_frames(s, t, &s->hbuf, 0) != 0 &&
            errno == EHOSTUNREACH)
            why = "a new trainer process takes the place of one whose connection has closed";
    }
    if (why == NULL) {
        refuse(s, id, id_len, "worker %u is already connected (another trainer process, heard from %.1f s ago)",
               h->worker, (double)silent / 1e9);
        return 0;
    }
    sl_log(SL_LOG_WARN, "worker %u: %s (silent %.1f s)", h->worker, why, (double)silent / 1e9);
    feed__drop(s, t, "was replaced");
    return 1;
}

/* Shared memory goes only to a trainer of this feeder's own user: the
 * peer's uid, from the connection's socket (the kernel's SO_PEERCRED on
 * ipc, /proc/net/tcp on loopback; sl_peer.h). Anything else (another
 * user, another host, a socket that cannot tell) gets pieces by copy. The
 * memfd itself is safe from other users anyway (opening it through
 * /proc/PID/fd needs the feeder's own credentials): this keeps the offer,
 * its pid, fd and token, from them too. */
static int peer_is_us(struct server *s, int fd, uint32_t worker)
{
    uid_t uid;
    struct sl_error err = {0};
    if (fd >= 0 && sl_peer_uid(fd, &uid, &err) == 0 && uid == geteuid())
        return 1;
    if (sl_log_allowed(&s->lim_refuse)) {
        if (fd >= 0 && err.code == 0)
            sl_log(SL_LOG_INFO, "worker %u: shared memory not offered: the trainer runs as uid %u, this feeder as %u; "
                   "pieces go by copy", worker, (unsigned)uid, (unsigned)geteuid());
        else
            sl_log(SL_LOG_INFO, "worker %u: shared memory not offered (%s); pieces go by copy", worker,
                   fd < 0 ? "the connection's socket is unknown" : err.msg);
    }
    return 0;
}

static void on_hello(struct server *s, const uint8_t *id, size_t id_len, const struct sl_wire_hello *hello, int fd)
{
    /* s->msg is reused for the answer: keep the HELLO */
    const struct sl_wire_hello copy = *hello, *h = &copy;
    const struct feed_job *job = s->o->job;
    if (h->job_len != strlen(job->name) || memcmp(h->job, job->name, h->job_len) != 0) {
        refuse(s, id, id_len, "job '%.*s' is not served here (this feeder serves '%s')", (int)h->job_len, h->job,
               job->name);
        return;
    }
    if (s->workers != 0 && (h->workers != s->workers || h->replicas != s->replicas) && feed__shape_take_over(s) != 0) {
        refuse(s, id, id_len, "cluster shape disagrees: this trainer says %u workers x %u replicas, the job runs with "
               "%u x %u (%s)",
               h->workers, h->replicas, s->workers, s->replicas,
               s->fixed             ? "the feeder's --workers and --replicas, or its job's"
               : s->consumed        ? "set by the first trainer, which has taken pieces"
               : s->release_pending ? "set by trainers that left without taking a piece: it is being released, "
                                      "try again in a moment"
                                    : "set by a trainer still connected, which has taken no piece yet; give the "
                                      "feeder --workers and --replicas to settle the shape");
        return;
    }
    if (s->workers == 0) {
        struct sl_error err = {0};
        if (feed__shape_setup(s, h->workers, h->replicas, &err) != 0) {
            refuse(s, id, id_len, "%s", err.msg);
            return;
        }
    }
    if (h->worker >= s->workers) {
        refuse(s, id, id_len, "worker %u is out of range (%u workers)", h->worker, s->workers);
        return;
    }
    /* a resume point the trainer cannot have reached is refused before it
     * costs anything (past the job's end, or past any trainer's reach) */
    uint64_t total = UINT64_MAX, per = s->steps * s->replicas;
    if ((job->epochs != 0 || per == 0) && __builtin_mul_overflow(per, job->epochs, &total))
        total = UINT64_MAX;
    if (h->resume_seq > total) {
        refuse(s, id, id_len,
               "worker %u asks to resume at piece %" PRIu64 ", past the end of the job (%" PRIu64
               " pieces per worker: %" PRIu64 " epochs of %" PRIu64 " steps x %u replicas)",
               h->worker, h->resume_seq, total, job->epochs, s->steps, s->replicas);
        return;
    }
    if (h->resume_seq > MAX_RESUME) {
        refuse(s, id, id_len,
               "worker %u asks to resume at piece %" PRIu64 ", which no trainer can have reached (at most %" PRIu64
               ")",
               h->worker, h->resume_seq, MAX_RESUME);
        return;
    }
    if (h->share >= s->o->feeders) {
        refuse(s, id, id_len, "worker %u asks for feeder %u's share, but the job has %u feeders", h->worker, h->share,
               s->o->feeders);
        return;
    }
    if (id_len > MAX_IDENTITY) {
        refuse(s, id, id_len, "identity too long");
        return;
    }
    if (h->share != s->o->feeder_index && s->o->no_takeover) {
        refuse(s, id, id_len, "this feeder serves its own share only (--no-takeover), not feeder %u's", h->share);
        return;
    }
    /* its own share, or a lost feeder's taken over (by copy: the shared
     * pool is sized for the own shares' windows) */
    int takeover = h->share != s->o->feeder_index;
    struct trainer *t = takeover ? takeover_entry(s, h->worker, h->share, 0) : &s->trainers[h->worker];
    if (t != NULL && t->active && !may_replace(s, t, id, id_len, h))
        return;
    if (t == NULL && (t = takeover_entry(s, h->worker, h->share, 1)) == NULL) {
        refuse(s, id, id_len, "this feeder serves %zu takeovers of lost feeders' shares already (at most %zu)",
               s->ntrainers - s->workers, s->max_takeovers);
        return;
    }
    struct sl_error err = {0};
    feed_plan_destroy(t->plan);
    t->plan = NULL;
    if (feed_plan_create(&t->plan, &s->cfg, h->worker, &err) != 0) {
        refuse(s, id, id_len, "%s", err.msg);
        return;
    }
    /* resume: the plan fast-forwards without reading data (whole epochs
     * by arithmetic, then the shuffle's draws replayed: about 1 ms at a
     * buffer of 10^4, 0.1-0.25 s at 10^6, on the serving thread) */
    uint64_t within = 0;
    int rc = feed_plan_seek(t->plan, h->resume_seq, &within);
    if (rc == 0 && within != 0) { /* the plan reaches the piece itself */
        refuse(s, id, id_len, "internal: the plan stopped %" PRIu64 " pieces short of piece %" PRIu64, within,
               h->resume_seq);
        return;
    }
    /* the worker's previous connection is over, and a trainer rejoining has
     * copied out what it still held: its buffers go back */
    feed_hold_release_all(&t->hold, s->pool);
    t->shm = takeover ? FEED_SHM_NONE : feed_shm_offer(s->shm.size != 0, h->flags);
    if (t->shm == FEED_SHM_PENDING && !peer_is_us(s, fd, h->worker))
        t->shm = FEED_SHM_NONE;
    t->worker = h->worker;
    t->share = h->share;
    t->incarnation = h->incarnation;
    memcpy(t->id, id, id_len);
    t->id_len = id_len;
    t->active = 1;
    t->generation = ++s->generation;
    t->plan_done = rc == SL_END;
    s->release_pending = 0;
    t->credits = h->credits;
    t->initial = t->granted = h->credits;
    t->scheduled = 0;
    t->inflight = 0;
    t->sent = 0;
    t->last_seq = h->resume_seq; /* the plan stands there */
    /* a worker that connects again after its END must get it again */
    if (t->end_sent && !takeover)
        s->ended--;
    t->end_sent = 0;
    t->last_seen_ns = t->last_hb_ns = sl_clock_ns();
    t->heartbeat_ms = h->heartbeat_ms;
    t->wants_stats = (h->flags & SL_WIRE_HELLO_STATS) != 0;
    t->last_stats_ns = 0; /* the first tick sends one */

    struct sl_wire_welcome *wm = &s->msg.welcome;
    memset(wm, 0, sizeof *wm);
    wm->feeder = s->o->feeder_index;
    wm->feeders = s->o->feeders;
    wm->steps_per_epoch = s->steps;
    wm->epochs = job->epochs;
    wm->batch = (uint32_t)s->max_rows;
    wm->heartbeat_ms = (uint32_t)s->o->heartbeat_ms;
    wm->ntensors = (uint16_t)s->schema.ntensors;
    for (size_t i = 0; i < s->schema.ntensors; i++) {
        const struct feed_schema_tensor *st = &s->schema.t[i];
        struct sl_wire_field *f = &wm->fields[i];
        f->name = st->name;
        f->name_len = strlen(st->name);
        f->dtype = (uint8_t)st->dtype;
        f->ragged = (uint8_t)st->ragged;
        f->rank = (uint8_t)st->rank;
        for (int d = 0; d < st->rank; d++)
            f->dims[d] = st->shape[d];
    }
    if (t->shm == FEED_SHM_PENDING) {
        wm->shm_pid = (uint32_t)getpid();
        wm->shm_fd = (uint32_t)s->shm.fd;
        wm->shm_size = s->shm.size;
        wm->shm_token = s->shm.token;
    }
    struct sl_error werr = {0};
    s->msg.type = SL_WIRE_WELCOME;
    if (sl_wire_encode(&s->msg, &s->hbuf, &werr) != 0) {
        /* the job cannot be described on the wire: say why, serve nothing */
        t->active = 0;
        t->generation = ++s->generation;
        refuse(s, id, id_len, "this feeder cannot describe the job on the wire: %s", werr.msg);
        return;
    }
    sl_metrics_add(s->m, FEED_M_TRAINERS, 1);
    send_simple(s, t, 0, "WELCOME");
    if (takeover)
        sl_log(SL_LOG_WARN,
               "worker %u: taking over feeder %u's share (pieces %u mod %u) from piece %" PRIu64 " (%u credits)",
               h->worker, h->share, h->share, s->o->feeders, h->resume_seq, h->credits);
    else
        sl_log(SL_LOG_INFO, "worker %u connected (%u credits, resume at piece %" PRIu64 ")", h->worker, h->credits,
               h->resume_seq);
}

static void on_message(struct server *s)
{
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    if (zmq_msg_recv(&id, s->router, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&id);
        zmq_msg_close(&body);
        return;
    }
    int more = zmq_msg_more(&id);
    if (!more || zmq_msg_recv(&body, s->router, 0) < 0) {
        zmq_msg_close(&id);
        zmq_msg_close(&body);
        return;
    }
    /* discard any further frames: trainers send single-frame messages */
    while (zmq_msg_more(&body)) {
        zmq_msg_t extra;
        zmq_msg_init(&extra);
        zmq_msg_recv(&extra, s->router, 0);
        int m = zmq_msg_more(&extra);
        zmq_msg_close(&extra);
        if (!m)
            break;
    }
    const uint8_t *idp = zmq_msg_data(&id);
    size_t id_len = zmq_msg_size(&id);
    struct sl_error err = {0};
    struct trainer *t = find(s, idp, id_len);
    if (sl_wire_decode(zmq_msg_data(&body), zmq_msg_size(&body), &s->msg, &err) != 0) {
        sl_metrics_add(s->m, FEED_M_BAD_MESSAGES, 1);
        if (t != NULL || sl_log_allowed(&s->lim_bad))
            sl_log(SL_LOG_WARN, "bad message from %s: %s", t ? "a trainer" : "an unknown peer", err.msg);
        if (t != NULL) {
            sl_metrics_add(s->m, FEED_M_DROPPED, 1);
            feed__drop(s, t, "sent a malformed message and was dropped");
        }
        unsigned v = t == NULL ? other_version_hello(&body) : 0;
        if (v != 0)
            refuse(s, idp, id_len, "this feeder speaks protocol version %u, the trainer %u: use the same sluice release",
                   SL_WIRE_VERSION, v);
        goto out;
    }
    if (t != NULL)
        t->last_seen_ns = sl_clock_ns();
    switch (s->msg.type) {
    case SL_WIRE_HELLO:
        if (t != NULL)
            refuse(s, idp, id_len, "HELLO twice on one connection");
        else
            on_hello(s, idp, id_len, &s->msg.hello, zmq_msg_get(&body, ZMQ_SRCFD));
        break;
    case SL_WIRE_CREDIT:
        if (t == NULL && !s->fixed && !s->consumed) {
            /* a trainer that took pieces, returned their credit and left:
             * a send to it may fail (and drop it) before its CREDIT is
             * read here; that CREDIT still says the shape was consumed,
             * and the release the drop asked for is called off */
            struct trainer *gone = find_dropped(s, idp, id_len);
            if (gone != NULL && gone->sent > 0 && gone->granted + s->msg.credit.credits > gone->initial) {
                s->consumed = 1;
                s->release_pending = 0;
            }
        }
        if (t != NULL) {
            t->credits += s->msg.credit.credits;
            t->granted += s->msg.credit.credits;
            /* a piece consumed: the shape is this job's for good */
            if (t->granted > t->initial && t->sent > 0)
                s->consumed = 1;
            feed_hold_release(&t->hold, s->pool, s->msg.credit.credits, t->scheduled);
            if (t->shm == FEED_SHM_PENDING) {
                /* the answer to the offer: pieces go one way or the other from the first */
                t->shm = feed_shm_answer(t->shm, s->msg.credit.flags);
                sl_log(SL_LOG_INFO, "worker %u: pieces %s", t->worker,
                       t->shm == FEED_SHM_ON ? "through shared memory"
                                             : "by copy (the trainer could not map the memory)");
            }
        }
        break;
    case SL_WIRE_HEARTBEAT:
        break;
    case SL_WIRE_BYE:
        /* a trainer says BYE once it is done with every piece: its
         * buffers go back at once */
        if (t != NULL) {
            /* one that had its END had every piece of its stream: taken,
             * though a window as wide as the stream let it return no
             * credit first (the shape is this job's for good) */
            if (t->end_sent && t->sent > 0)
                s->consumed = 1;
            feed_hold_release_all(&t->hold, s->pool);
            feed__drop(s, t, "said goodbye");
        }
        break;
    default:
        sl_metrics_add(s->m, FEED_M_BAD_MESSAGES, 1);
        if (sl_log_allowed(&s->lim_bad))
            sl_log(SL_LOG_WARN, "unexpected %s message from %s", sl_wire_type_name(s->msg.type),
                   t ? "a trainer" : "an unknown peer");
        break;
    }
    /* a CREDIT, HEARTBEAT or BYE from a peer that is no trainer: nothing
     * to act on, counted (and logged, rate-limited) */
    if (t == NULL && (s->msg.type == SL_WIRE_CREDIT || s->msg.type == SL_WIRE_HEARTBEAT || s->msg.type == SL_WIRE_BYE)) {
        sl_metrics_add(s->m, FEED_M_BAD_MESSAGES, 1);
        if (sl_log_allowed(&s->lim_bad))
            sl_log(SL_LOG_WARN, "%s from an unknown peer (not a connected trainer) ignored",
                   sl_wire_type_name(s->msg.type));
    }
out:
    zmq_msg_close(&id);
    zmq_msg_close(&body);
}

/* ---- housekeeping ---- */

static void heartbeats_and_ends(struct server *s)
{
    uint64_t now = sl_clock_ns();
    sl_log_limit_flush(&s->lim_refuse, 0);
    sl_log_limit_flush(&s->lim_bad, 0);
    uint64_t hb = (uint64_t)s->o->heartbeat_ms * 1000000u, to = (uint64_t)s->o->timeout_ms * 1000000u;
    for (size_t i = 0; i < s->ntrainers; i++) {
        struct trainer *t = &s->trainers[i];
        if (!t->active)
            continue;
        if (now - t->last_seen_ns > to) {
            sl_log(SL_LOG_WARN, "worker %u silent for %.1f s (heartbeat timeout %.1f s)", t->worker,
                   (double)(now - t->last_seen_ns) / 1e9, (double)s->o->timeout_ms / 1e3);
            sl_metrics_add(s->m, FEED_M_DROPPED, 1);
            feed__drop(s, t, "timed out");
            continue;
        }
        if (now - t->last_hb_ns >= hb) {
            struct sl_wire_heartbeat h = {.sent_ns = now};
            send_simple(s, t, sl_wire_encode_heartbeat(&h, &s->hbuf), "HEARTBEAT");
            t->last_hb_ns = now;
        }
        if (t->wants_stats && now - t->last_stats_ns >= hb) {
            /* the feeder's CPU by stage so far, for the trainer to say which
             * stage bounds it when it waits for this feeder (issue #19) */
            struct sl_wire_stats st = {.credit_wait_ns = sl_metrics_get(s->m, FEED_M_BLOCKED_NS)};
            st.stage_ns[SL_WIRE_STAGE_READ] = sl_metrics_get(s->m, FEED_M_READ_NS);
            st.stage_ns[SL_WIRE_STAGE_DECOMPRESS] = sl_metrics_get(s->m, FEED_M_DECOMPRESS_NS);
            st.stage_ns[SL_WIRE_STAGE_DECODE] = sl_metrics_get(s->m, FEED_M_DECODE_NS);
            st.stage_ns[SL_WIRE_STAGE_ASSEMBLE] = sl_metrics_get(s->m, FEED_M_ASSEMBLE_NS);
            st.stage_ns[SL_WIRE_STAGE_SEND] = sl_metrics_get(s->m, FEED_M_SERVE_NS) + sl_metrics_get(s->m, FEED_M_ZMQ_IO_NS);
            for (int k = 0; k < SL_WIRE_STAGES; k++) /* a counter past the wire's limit is clamped, not refused */
                st.stage_ns[k] = st.stage_ns[k] < SL_WIRE_MAX_COUNT ? st.stage_ns[k] : SL_WIRE_MAX_COUNT;
            if (st.credit_wait_ns > SL_WIRE_MAX_COUNT)
                st.credit_wait_ns = SL_WIRE_MAX_COUNT;
            send_simple(s, t, sl_wire_encode_stats(&st, &s->hbuf), "STATS");
            t->last_stats_ns = now;
        }
        if (t->plan_done && t->inflight == 0 && !t->end_sent) {
            struct sl_wire_end e = {.worker = t->worker, .pieces = t->last_seq, .epochs = s->o->job->epochs};
            send_simple(s, t, sl_wire_encode_end(&e, &s->hbuf), "END");
            t->end_sent = 1;
            if (t->share == s->o->feeder_index) /* a worker's own share: counted for the feeder's end */
                s->ended++;
            sl_log(SL_LOG_INFO, "worker %u: end of data after %" PRIu64 " pieces from this feeder%s", t->worker,
                   t->sent, t->share == s->o->feeder_index ? "" : " (a taken-over share)");
        }
    }
}

/* Every worker got its END and has gone: said BYE (a trainer does once its
 * stream is over), or was dropped, silent past the timeout. Exiting as soon
 * as the ENDs were queued lost them now and then: the trainers' heartbeats
 * unread in the socket made the kernel close it with a reset, which can
 * discard an END still on its way (seen on a shaped link). */
static int all_done(const struct server *s)
{
    if (s->workers == 0 || s->ended != s->workers)
        return 0;
    for (size_t i = 0; i < s->ntrainers; i++)
        if (s->trainers[i].active)
            return 0;
    return 1;
}

/* The live gauges (connections served, those held back for want of
 * credit) and the serving thread's CPU so far: on every tick,
 * for the /metrics endpoint. */
static void update_gauges(struct server *s, uint64_t *cpu_mark)
{
    uint64_t connected = 0, starved = 0;
    for (size_t i = 0; i < s->ntrainers; i++) {
        const struct trainer *t = &s->trainers[i];
        if (!t->active)
            continue;
        connected++;
        uint64_t returned = t->granted - t->initial;
        uint64_t outstanding = t->scheduled > returned ? t->scheduled - returned : 0;
        if (!t->plan_done && (t->credits == 0 || outstanding >= s->window))
            starved++;
    }
    sl_metrics_set(s->m, FEED_M_CONNECTED, connected);
    sl_metrics_set(s->m, FEED_M_STARVED, starved);
    uint64_t cpu = sl_clock_thread_cpu_ns();
    sl_metrics_add(s->m, FEED_M_SERVE_NS, cpu - *cpu_mark);
    *cpu_mark = cpu;
}

/* The figures now, typed, with the run's elapsed time. */
static void snapshot(const struct server *s, double t0, struct feed_counters *c)
{
    struct sl_metrics_snap snap;
    sl_metrics_snapshot(s->m, &snap);
    feed_counters_from(&snap, c);
    c->elapsed_s = sl_clock_s() - t0;
}

/* ---- setup and teardown ---- */

static int start(struct server *s, struct sl_zap **zap, struct sl_error *err)
{
    const struct feed_server_opts *o = s->o;
    const struct feed_job *job = o->job;
    int rc = feed_schema_build(o->specs, o->nspecs, &s->schema, err);
    if (rc != 0)
        return rc;
    s->max_rows = (size_t)job->global_batch_size;
    /* piece buffers are sized when the cluster shape is known (setup_cluster) */
    size_t prefetch = job->prefetch ? (size_t)job->prefetch : 4;
    s->prefetch = prefetch;
    s->nthreads = o->threads ? o->threads : 1;
    /* tasks: pieces being assembled at once (they are recycled when sent) */
    s->ntasks = prefetch > 2 * (size_t)s->nthreads ? prefetch : 2 * (size_t)s->nthreads;
    sl_buf_init(&s->hbuf, SL_WIRE_MAX_HEADER);

    if (o->listener != NULL) {
        /* bound before the scan: the same socket, HELLOs waiting in it included */
        s->ctx = o->listener->ctx;
        s->router = o->listener->router;
        *zap = o->listener->zap;
    } else if ((rc = bind_router(o->listen, o->curve, o->ipc_group, &s->ctx, &s->router, zap, err)) != 0) {
        return rc;
    }
    struct feed_exec_opts eo = {.zmq_ctx = s->ctx, .metrics = s->m, .src = o->src, .specs = o->specs, .nspecs = o->nspecs,
                                .format = job->format, .max_rows = s->max_rows, .threads = s->nthreads,
                                .ntasks = s->ntasks};
    return feed_exec_create(&s->exec, &eo, err);
}

static void stop(struct server *s)
{
    /* executors may wait for a buffer: closing the pool wakes them */
    if (s->pool != NULL)
        sl_pool_close(s->pool);
    feed_exec_destroy(s->exec);
    s->exec = NULL;
    if (s->ctx != NULL) /* before the I/O threads end */
        sl_metrics_add(s->m, FEED_M_ZMQ_IO_NS, (uint64_t)(sl_proc_threads_cpu_s("ZMQbg/IO/") * 1e9));
    if (s->router != NULL)
        zmq_close(s->router); /* lingers up to 2 s to deliver what is queued */
    if (s->ctx != NULL)
        zmq_ctx_term(s->ctx); /* waits for ZeroMQ to release every frame */
    for (size_t i = 0; s->trainers != NULL && i < s->ntrainers; i++) {
        feed_plan_destroy(s->trainers[i].plan);
        /* nothing writes the pool any more: trainers still mapping it keep
         * their view of it */
        feed_hold_release_all(&s->trainers[i].hold, s->pool);
        feed_hold_free(&s->trainers[i].hold);
    }
    if (s->pool != NULL && sl_pool_wait_idle(s->pool, 5000) == 0)
        sl_pool_destroy(s->pool);
    else if (s->pool != NULL)
        sl_log(SL_LOG_WARN, "piece buffers still referenced at exit; not freed");
    for (size_t i = 0; i < sizeof s->retired / sizeof s->retired[0]; i++)
        if (s->retired[i] != NULL && sl_pool_wait_idle(s->retired[i], 5000) == 0)
            sl_pool_destroy(s->retired[i]);
        else if (s->retired[i] != NULL)
            sl_log(SL_LOG_WARN, "piece buffers of a released shape still referenced at exit; not freed");
    sl_free(s->trainers);
    sl_buf_free(&s->hbuf);
}

/* The run's fatal error into err; its code. */
static int fatal_error(struct server *s, struct sl_error *err)
{
    if (s->fatal_err.code != 0 && s->fatal_err.msg[0] != '\0')
        *err = s->fatal_err;
    else
        sl_error_set(err, SL_ECORRUPT, "data error");
    return err->code;
}

int feed_server_run(const struct feed_server_opts *opts, struct feed_counters *c, struct sl_error *err)
{
    struct feed_server_opts o = *opts;
    if (o.heartbeat_ms <= 0)
        o.heartbeat_ms = 1000;
    if (o.timeout_ms <= 0)
        o.timeout_ms = 10000;
    if (o.feeders == 0)
        o.feeders = 1;
    if (o.piece_memory == 0)
        o.piece_memory = FEED_DEFAULT_PIECE_MEMORY;
    memset(c, 0, sizeof *c);
    struct server *s = sl_calloc(1, sizeof *s);
    if (s == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    struct sl_metrics *own = NULL;
    if (o.metrics == NULL && sl_metrics_create(&own, feed_metric_defs, FEED_M_COUNT) != 0) {
        sl_free(s);
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    }
    s->o = &o;
    s->m = o.metrics != NULL ? o.metrics : own;
    s->lim_refuse = (struct sl_log_limit){.kind = "refusals", .burst = 10};
    s->lim_bad = (struct sl_log_limit){.kind = "malformed or unexpected messages", .burst = 10};
    double t0 = sl_clock_s();
    uint64_t cpu0 = sl_clock_thread_cpu_ns();
    struct sl_zap *zap = NULL;
    const struct feed_curve *curve = o.listener != NULL ? o.listener->curve : o.curve;
    int rc = start(s, &zap, err);
    if (rc == 0 && o.workers != 0) {
        /* the shape from the feeder's side: no HELLO can change it */
        s->fixed = 1;
        if ((rc = feed__shape_setup(s, o.workers, o.replicas ? o.replicas : 1, err)) != 0)
            sl_error_prefix(err, "--workers %u --replicas %u: ", o.workers, o.replicas ? o.replicas : 1);
    }
    int started = rc == 0;
    if (rc == 0) {
        snapshot(s, t0, c);
        sl_log(SL_LOG_INFO, "serving job '%s' on %s as feeder %u of %u (%u threads, %" PRIu64 " bytes of piece buffers)",
               o.job->name, o.listen, o.feeder_index, o.feeders, s->nthreads, c->pool_bytes);
    }
    zmq_pollitem_t items[2];
    uint64_t last_tick = sl_clock_ns(), idle_since = last_tick;
    int idle = 0;
    struct report_mark {
        double at, next; /* the last report's time and the next one's */
        uint64_t bytes;
        double blocked;
    } rep = {.at = sl_clock_s(), .next = sl_clock_s() + o.report_ms / 1000.0};
    while (rc == 0) {
        if (o.stop != NULL && *o.stop) {
            sl_log(SL_LOG_INFO, "stopping on signal");
            send_error_all(s, SL_ECLOSED, "feeder stopped by a signal");
            break;
        }
        curve_reload(curve);
        if (o.dump != NULL && *o.dump) {
            *o.dump = 0;
            char line[512];
            snapshot(s, t0, c);
            feed_counters_format(c, line, sizeof line);
            sl_log(SL_LOG_INFO, "counters: %s", line);
        }
        if (o.report_ms > 0 && sl_clock_s() >= rep.next) {
            /* progress: what went out since the last report */
            double now = sl_clock_s(), span = now - rep.at;
            snapshot(s, t0, c);
            uint32_t active = 0;
            for (size_t i = 0; i < s->ntrainers; i++)
                active += s->trainers[i].active != 0;
            sl_log(SL_LOG_INFO,
                   "served %" PRIu64 " pieces, %" PRIu64 " records (%.1f MB/s over the last %.0f s), %u of %u "
                   "trainers connected, waiting for credits %.0f%% of that time",
                   c->pieces, c->records, span > 0 ? (double)(c->bytes - rep.bytes) / span / 1e6 : 0.0, span, active,
                   s->workers, span > 0 ? 100.0 * (c->blocked_s - rep.blocked) / span : 0.0);
            rep = (struct report_mark){.at = now, .next = now + o.report_ms / 1000.0, .bytes = c->bytes,
                                       .blocked = c->blocked_s};
        }
        if (s->release_pending)
            (void)feed__shape_release(s);
        if (s->retired[0] != NULL || s->retired[1] != NULL || s->retired[2] != NULL || s->retired[3] != NULL)
            feed__shape_reap(s);
        int waiting = schedule(s);
        if (s->fatal) {
            rc = fatal_error(s, err); /* the ERRORs go out while the router lingers */
            break;
        }
        items[0] = (zmq_pollitem_t){.socket = s->router, .events = ZMQ_POLLIN};
        items[1] = (zmq_pollitem_t){.socket = feed_exec_socket(s->exec), .events = ZMQ_POLLIN};
        int timeout = o.heartbeat_ms / 4 > 0 ? o.heartbeat_ms / 4 : 1;
        uint64_t before = sl_clock_ns();
        int n = zmq_poll(items, 2, timeout);
        if (n < 0 && errno != EINTR) {
            rc = sl_error_set(err, SL_EIO, "zmq_poll: %s", zmq_strerror(errno));
            break;
        }
        if (waiting && feed_exec_free(s->exec) > 0)
            sl_metrics_add(s->m, FEED_M_BLOCKED_NS, sl_clock_ns() - before);
        if (n > 0 && (items[0].revents & ZMQ_POLLIN))
            for (int k = 0; k < 64; k++) {
                int ev = 0;
                size_t len = sizeof ev;
                zmq_getsockopt(s->router, ZMQ_EVENTS, &ev, &len);
                if (!(ev & ZMQ_POLLIN))
                    break;
                on_message(s);
            }
        drain_done(s);
        if (s->fatal) {
            /* an error found by the executors or while sending ends the
             * run before any END goes out (a feeder that met an error
             * never exits 0) */
            rc = fatal_error(s, err);
            break;
        }
        uint64_t now = sl_clock_ns();
        if (now - last_tick >= (uint64_t)o.heartbeat_ms * 250000u) {
            heartbeats_and_ends(s);
            update_gauges(s, &cpu0);
            last_tick = now;
        } else {
            /* ENDs promptly, heartbeats on the tick */
            for (size_t i = 0; i < s->ntrainers; i++) {
                struct trainer *t = &s->trainers[i];
                if (t->active && t->plan_done && t->inflight == 0 && !t->end_sent) {
                    heartbeats_and_ends(s);
                    break;
                }
            }
        }
        if (all_done(s)) {
            sl_log(SL_LOG_INFO, "every worker has its data: done");
            break;
        }
        if (o.idle_exit_ms > 0) {
            /* idle: no trainer connected for idle_exit_ms */
            int busy = 0;
            for (size_t i = 0; i < s->ntrainers && !busy; i++)
                busy = s->trainers[i].active;
            if (busy) {
                idle_since = now;
            } else if (now - idle_since >= (uint64_t)o.idle_exit_ms * 1000000u) {
                char served[64] = "no trainer came";
                if (s->workers > 0)
                    snprintf(served, sizeof served, "%u of %u workers served to their end", s->ended, s->workers);
                sl_log(SL_LOG_WARN, "idle: no trainer connected for %.0f s (--idle-exit %.0f): stopping with exit "
                       "status 3 (%s)", (double)(now - idle_since) / 1e9, o.idle_exit_ms / 1e3, served);
                idle = 1;
                break;
            }
        }
    }
    sl_metrics_add(s->m, FEED_M_SERVE_NS, sl_clock_thread_cpu_ns() - cpu0);
    sl_metrics_set(s->m, FEED_M_CONNECTED, 0);
    sl_metrics_set(s->m, FEED_M_STARVED, 0);
    sl_log_limit_flush(&s->lim_refuse, 1);
    sl_log_limit_flush(&s->lim_bad, 1);
    if (o.listener != NULL && !started) {
        /* a start-up failure: the socket stays bound, for refuse_all (no
         * frame of the pool ever went out on it) */
        s->router = NULL;
        s->ctx = NULL;
        zap = NULL; /* the listener's still */
    } else if (o.listener != NULL) {
        o.listener->router = NULL; /* stop() closes them */
        o.listener->ctx = NULL;
        o.listener->zap = NULL; /* stopped here */
    }
    /* before the context ends (its REP socket would hold zmq_ctx_term);
     * a trainer connecting while the router lingers finds no handler and
     * is refused (ZMQ_ZAP_ENFORCE_DOMAIN) */
    curve_summary(zap);
    sl_zap_stop(zap);
    stop(s); /* adds the executors' and ZeroMQ's last figures */
    snapshot(s, t0, c);
    c->started = started;
    c->idle = idle;
    sl_free(s);
    sl_metrics_destroy(own);
    return rc;
}

int feed_server_refuse_all(struct feed_listener *l, const char *reason, int quiet_ms,
                           volatile sig_atomic_t *stop_flag)
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
        curve_reload(l->curve);
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
    int rc = bind_router(listen, curve, ipc_group, &l->ctx, &l->router, &l->zap, err);
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
        unsigned v = other_version_hello(&body);
        if (v != 0)
            listener_refuse(l, &id, "this feeder speaks protocol version %u, the trainer %u: use the same sluice "
                            "release", SL_WIRE_VERSION, v);
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
    struct sl_wire_status m = {.state = SL_WIRE_STATUS_SCANNING, .retry_ms = l->retry_ms,
                               .files_done = st->files_done, .files = st->files,
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
            sl_log(SL_LOG_INFO, "worker %u said HELLO while scanning: told to wait (%" PRIu64 " of %" PRIu64
                   " files; %" PRIu64 " such answers so far)", worker, m.files_done, m.files, l->statuses);
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
    curve_reload(l->curve);
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
    curve_summary(l->zap);
    sl_zap_stop(l->zap); /* before the context ends */
    if (l->ctx != NULL)
        zmq_ctx_term(l->ctx);
    sl_buf_free(&l->buf);
    sl_free(l);
}
