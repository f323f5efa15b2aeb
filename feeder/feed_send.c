/* feed_send: what the serving loop sends (pieces, the simple messages,
 * REFUSE, the fatal ERROR to every trainer) and the tasks that assemble the
 * pieces: scheduling them for trainers with credits, sending the finished
 * ones (feed_server.h for the flow of credits).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "feed_serve.h"
#include "sl_log.h"
#include "sl_pool.h"
#include "sl_wire.h"

/* ---- sending ---- */

int feed__send_frames(struct server *s, const struct trainer *t, const struct sl_buf *hdr, int more)
{
    if (zmq_send(s->router, t->id, t->id_len, ZMQ_SNDMORE) < 0)
        return -1;
    return zmq_send(s->router, hdr->data, hdr->len, more ? ZMQ_SNDMORE : 0) < 0 ? -1 : 0;
}

/* Send the header in s->hbuf, just encoded with status rc_encode. A
 * message that does not encode is a fatal error (every trainer is told);
 * one that cannot be sent drops the trainer, which will rejoin and resume
 * where it stopped: nothing is lost without somebody hearing of it. */
void feed__send_simple(struct server *s, struct trainer *t, int rc_encode, const char *what)
{
    if (rc_encode != 0) {
        struct sl_error e;
        sl_error_set(&e, SL_EINVAL, "cannot encode the %s for worker %u (%s)", what, t->worker,
                     sl_code_name(rc_encode));
        feed__fail_all(s, &e);
        return;
    }
    if (feed__send_frames(s, t, &s->hbuf, 0) != 0) {
        char why[200];
        /* after its END without a BYE: the feeder waits --end-wait-s for
         * it (all_done), a trainer killed before its last pieces may resume */
        snprintf(why, sizeof why, "could not be sent the %s (%s) and was dropped%s", what, zmq_strerror(errno),
                 t->end_sent ? " (it had its END but said no BYE: it may come back within --end-wait-s)" : "");
        sl_metrics_add(s->m, FEED_M_DROPPED, 1);
        feed__drop(s, t, why);
    }
}

void feed__send_error_all(struct server *s, int code, const char *msg)
{
    struct sl_wire_error e = {.code = code, .msg = msg, .msg_len = strlen(msg)};
    if (e.msg_len > SL_WIRE_MAX_ERROR)
        e.msg_len = SL_WIRE_MAX_ERROR;
    if (e.code < SL_ECLOSED || e.code > SL_EIO) /* the wire carries SL_E* codes only */
        e.code = SL_EIO;
    for (size_t i = 0; i < s->ntrainers; i++) {
        struct trainer *t = &s->trainers[i];
        if (t->active && sl_wire_encode_error(&e, &s->hbuf) == 0 && feed__send_frames(s, t, &s->hbuf, 0) != 0)
            sl_log(SL_LOG_WARN, "could not tell worker %u of the error: %s", t->worker, zmq_strerror(errno));
    }
}

/* A fatal error: the first one is logged, sent to every trainer as ERROR
 * and ends the run (feed_server_run returns it). */
void feed__fail_all(struct server *s, const struct sl_error *e)
{
    if (s->fatal)
        return;
    s->fatal = 1;
    s->fatal_err = *e;
    if (s->fatal_err.code == 0)
        s->fatal_err.code = SL_EINVAL;
    sl_log(SL_LOG_ERROR, "%s", e->msg);
    feed__send_error_all(s, s->fatal_err.code, s->fatal_err.msg);
}

void feed__refuse(struct server *s, const uint8_t *id, size_t id_len, const char *fmt, ...)
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
    /* the epoch of a change mid-epoch has the old shape's steps */
    uint64_t steps = feed_transition_set(&s->tr) && k->piece.epoch == s->tr.from_epoch ? s->tr_steps : s->steps;
    p->flags = k->piece.step + 1 == steps ? SL_WIRE_PIECE_LAST_STEP : 0;
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
        feed__fail_all(s, &err);
        return;
    }
    if (shared && sl_pool_ref(s->pool, k->buf, 1) != 0) {
        sl_error_set(&err, SL_EINVAL, "worker %u piece %" PRIu64 ": its buffer is not out of the pool", p->worker,
                     p->seq);
        feed__fail_all(s, &err);
        return;
    }
    if (feed__send_frames(s, t, &s->hbuf, p->ntensors > 0 && !shared) != 0) {
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
            feed__fail_all(s, &err);
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
        feed__fail_all(s, &k->err);
    } else if (k->rc == 0 && t != NULL && t->active && t->generation == k->generation) {
        send_piece(s, t, k);
    }
    if (t != NULL && t->generation == k->generation && t->inflight > 0)
        t->inflight--;
    feed_exec_recycle(s->exec, k);
}

void feed__drain_done(struct server *s)
{
    struct feed_task *k;
    while ((k = feed_exec_done(s->exec)) != NULL)
        on_done(s, k);
}

/* Schedule pieces for trainers with credits, round-robin one piece each. */
int feed__schedule(struct server *s)
{
    int progress = 1, waiting = 0;
    while (progress && feed_exec_free(s->exec) > 0 && !s->fatal) {
        progress = 0;
        /* round robin from the connection after the last one served: each
         * call starts where the previous one stopped (it is called each
         * time a task frees), else the first connection with credits took
         * every free task and the others waited for its end */
        size_t n = s->ntrainers, start = n > 0 ? s->rr_next % n : 0;
        for (size_t step = 0; step < n && feed_exec_free(s->exec) > 0; step++) {
            size_t i = (start + step) % n;
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
             * the lost feeder's it took over, F the connection's modulus */
            while ((rc = feed_stream_next(t->stream, &piece, &err)) == 0 && piece.seq % t->feeders != t->share)
                ;
            if (rc == SL_END) {
                t->plan_done = 1;
                continue;
            }
            if (rc != 0) {
                feed__fail_all(s, &err);
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
                feed__fail_all(s, &err);
                return rc;
            }
            t->last_seq = piece.seq + 1;
            t->epochs = piece.epoch;
            t->credits--;
            t->scheduled++;
            t->inflight++;
            s->rr_next = i + 1;
            progress = 1;
        }
    }
    return waiting;
}
