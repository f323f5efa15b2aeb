/* feed_message: one message from a trainer, decoded and dispatched: HELLO
 * (feed_hello.c), CREDIT (credits and the shared memory's answer), HEARTBEAT,
 * BYE, and a joining feeder's JOIN (feed_join.c); anything malformed or
 * unexpected counted and logged, rate-limited.
 */
#include <inttypes.h>
#include <string.h>
#include <zmq.h>

#include "feed_serve.h"
#include "sl_clock.h"
#include "sl_log.h"
#include "sl_wire.h"

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

void feed__on_message(struct server *s)
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
        unsigned v = t == NULL ? feed__other_version_hello(&body) : 0;
        const uint8_t *b = zmq_msg_data(&body);
        if (t == NULL && zmq_msg_size(&body) >= 8 && memcmp(b, "SLC1", 4) == 0 && b[6] == SL_WIRE_JOIN && b[7] == 0)
            /* a joining feeder hears why (a peer's malformed JOIN) */
            feed__refuse_join(s, idp, id_len, "malformed JOIN: %s", err.msg);
        else if (v != 0)
            feed__refuse(s, idp, id_len,
                         "this feeder speaks protocol version %u, the trainer %u: use the same sluice release",
                         SL_WIRE_VERSION, v);
        goto out;
    }
    if (t != NULL)
        t->last_seen_ns = sl_clock_ns();
    switch (s->msg.type) {
    case SL_WIRE_HELLO:
        if (t != NULL)
            feed__refuse(s, idp, id_len, "HELLO twice on one connection");
        else
            feed__on_hello(s, idp, id_len, &s->msg.hello, zmq_msg_get(&body, ZMQ_SRCFD));
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
    case SL_WIRE_HEARTBEAT: break;
    case SL_WIRE_JOIN:
        /* a feeder joining the running job (feed_join.c); never on a
         * trainer's connection */
        if (t != NULL)
            feed__refuse_join(s, idp, id_len, "JOIN on a trainer's connection");
        else
            feed__on_join(s, idp, id_len, &s->msg.join);
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
            t->said_bye = 1;
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
    if (t == NULL &&
        (s->msg.type == SL_WIRE_CREDIT || s->msg.type == SL_WIRE_HEARTBEAT || s->msg.type == SL_WIRE_BYE)) {
        sl_metrics_add(s->m, FEED_M_BAD_MESSAGES, 1);
        if (sl_log_allowed(&s->lim_bad))
            sl_log(SL_LOG_WARN, "%s from an unknown peer (not a connected trainer) ignored",
                   sl_wire_type_name(s->msg.type));
    }
out:
    zmq_msg_close(&id);
    zmq_msg_close(&body);
}
