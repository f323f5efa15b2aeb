/* client: handshake, receive, reorder, credit.
 *
 * Received pieces live in slots (a header frame, its body frame and the
 * decoded descriptor), made once: the reorder window is F * credits, the
 * most pieces the feeders may have outstanding. A slot is handed to the
 * caller as part of a step and recycled, with its credit returned to its
 * feeder, at the next call.
 *
 * The parts: client_roster.c (feeders that join the running job: the
 * ROSTER, the reshape to a new count), client_rejoin.c (lost feeders,
 * rejoin, takeover and probes), client_handshake.c (HELLO, WELCOME, STATUS, the socket
 * and its monitor, the CURVE verdict), client_shm.c (a feeder's
 * shared piece memory, the slots), client_stats.c (the feeders'
 * STATS, the wait by feeder), client_common.c (errors naming a
 * feeder, sending), client_bounds.c (the options' bounds);
 * client_int.h holds what they share.
 */
#include "client.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_buf.h"
#include "sl_clock.h"
#include "sl_endpoint.h"
#include "sl_log.h"
#include "sl_zsock.h"
#include "client_int.h"
#include "client_metrics.h"
#include "client_reorder.h"

/* Credits go back in batches (one message per several pieces instead of
 * one per piece: each is a round of wake-ups in both processes), or all at
 * once when `all`. A batch is a quarter of the grant, but at most half of
 * what the feeder has been seen to let out: a feeder whose window is
 * smaller than the grant waits for those credits, and half its window
 * keeps it working while the other half comes back. */
static void give_credits(struct client *c, int all)
{
    client__settle(c);
    for (size_t j = 0; j < c->o.nfeeders; j++) {
        struct feeder *f = &c->f[j];
        uint32_t batch = c->o.credits / 4, half = f->peak / 2;
        if (batch > half)
            batch = half;
        if (batch == 0)
            batch = 1;
        /* a rejoining feeder's owed credits are folded into its next HELLO */
        if (f->owed == 0 || f->ended || f->rejoining || (!all && f->owed < batch))
            continue;
        struct sl_wire_credit cr = {.credits = f->owed};
        if (sl_wire_encode_credit(&cr, &c->buf) == 0 && client__send_buf(f->sock, &c->buf) == 0) {
            f->unreturned = f->unreturned > f->owed ? f->unreturned - f->owed : 0;
            f->owed = 0;
        }
    }
}

static void heartbeats(struct client *c)
{
    uint64_t now = sl_clock_ns();
    for (size_t j = 0; j < c->o.nfeeders; j++) {
        struct feeder *f = &c->f[j];
        if (f->rejoining || now - f->last_hb_ns < (uint64_t)c->o.heartbeat_ms * 1000000u)
            continue;
        struct sl_wire_heartbeat h = {.sent_ns = now};
        if (sl_wire_encode_heartbeat(&h, &c->buf) == 0)
            (void)client__send_buf(f->sock, &c->buf);
        f->last_hb_ns = now;
    }
}

/* A PIECE from feeder j, in slot s (c->msg): checked against the schema,
 * this worker and the share, then into the reorder window. On an error the
 * slot goes back, its credit with it. */
static int take_piece(struct client *c, int j, struct slot *s, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    struct sl_error derr = {0};
    int rc = 0;
    f->stalled = 0;
    if (f->awaiting_first) {
        f->awaiting_first = 0;
        sl_log(SL_LOG_INFO, "feeder %s: piece %" PRIu64 ", the share's first since its loss, came %.3f s after it",
               f->addr, c->msg.piece.seq, (double)(sl_clock_ns() - f->lost_ns) / 1e9);
    }
    if (f->joined_ns != 0) {
        sl_log(SL_LOG_INFO, "feeder %s (joined): its first piece, %" PRIu64 ", came %.3f s after the ROSTER", f->addr,
               c->msg.piece.seq, (double)(sl_clock_ns() - f->joined_ns) / 1e9);
        f->joined_ns = 0;
    }
    s->piece = c->msg.piece;
    const struct sl_wire_piece *p = &s->piece;
    int shared = (p->flags & SL_WIRE_PIECE_SHM) != 0;
    if (sl_wire_check_piece(p, &c->welcome, &derr) != 0)
        rc = client__feeder_error(c, j, err, SL_EPROTO, "piece %" PRIu64 ": %s", p->seq, derr.msg);
    else if (shared && f->map == NULL)
        rc = client__feeder_error(c, j, err, SL_EPROTO, "piece %" PRIu64 " is in shared memory, but none is mapped",
                                  p->seq);
    else if (shared && (s->nframes != 0 || p->shm_offset + p->shm_bytes > f->map->size))
        rc = client__feeder_error(c, j, err, SL_EPROTO,
                                  "piece %" PRIu64 ": shared memory [%" PRIu64 ", %" PRIu64 ") past its %zu bytes, or "
                                  "with %zu frames",
                                  p->seq, p->shm_offset, p->shm_offset + p->shm_bytes, f->map->size, s->nframes);
    else if (!shared && s->nframes != (p->ntensors > 0 ? 1u : 0u))
        rc = client__feeder_error(c, j, err, SL_EPROTO, "piece %" PRIu64 ": %u tensors in %zu frames (one body frame)",
                                  p->seq, p->ntensors, s->nframes);
    else if (p->worker != c->o.worker)
        rc = client__feeder_error(c, j, err, SL_EPROTO, "piece %" PRIu64 " is for worker %u, this is worker %u", p->seq,
                                  p->worker, c->o.worker);
    else if (p->seq % c->o.nfeeders != (uint64_t)j) /* the modulus in force: every connection is under it */
        rc = client__feeder_error(c, j, err, SL_EPROTO, "piece %" PRIu64 " does not belong to feeder %d of %zu", p->seq,
                                  j, c->o.nfeeders);
    if (rc == 0 && shared && sl_wire_check_body(p, (size_t)p->shm_bytes, &derr) != 0)
        rc = client__feeder_error(c, j, err, SL_EPROTO, "piece %" PRIu64 ": %s", p->seq, derr.msg);
    if (rc == 0 && !shared && s->nframes == 1 && sl_wire_check_body(p, zmq_msg_size(&s->frames[0]), &derr) != 0)
        rc = client__feeder_error(c, j, err, SL_EPROTO, "piece %" PRIu64 ": %s", p->seq, derr.msg);
    if (rc == 0 && shared) {
        s->map = f->map;
        s->map->refs++;
        s->body = f->map->base + p->shm_offset;
        sl_metrics_add(c->m, CLIENT_M_SHM_PIECES, 1);
    } else if (rc == 0 && s->nframes == 1) {
        s->body = zmq_msg_data(&s->frames[0]);
    }
    if (rc == 0 && c->o.resume_epoch != 0 && p->seq < c->o.resume_seq)
        rc = client__feeder_error(c, j, err, SL_EPROTO,
                                  "piece %" PRIu64 " is before this trainer's start, epoch %" PRIu64
                                  "'s first piece %" PRIu64
                                  ": the feeder predates resuming by epoch (upgrade it, or resume at a piece)",
                                  p->seq, c->o.resume_epoch, c->o.resume_seq);
    if (rc == 0 && (rc = client_reorder_put(c->reorder, p->seq, s, &derr)) != 0)
        rc = client__feeder_error(c, j, err, rc, "%s", derr.msg);
    if (rc != 0) {
        client__drop_slot(c, s);
    } else if (++f->unreturned > f->peak) {
        f->peak = f->unreturned;
    }
    return rc;
}

/* Receive one message from feeder j (it is readable). */
static int receive(struct client *c, int j, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    if (c->nfree == 0)
        return client__feeder_error(c, j, err, SL_EPROTO, "sent more pieces than it had credits for");
    struct slot *s = c->free_slots[--c->nfree];
    zmq_msg_init(&s->hdr);
    s->nframes = 0;
    s->feeder = j;
    s->conn = f->conn;
    s->busy = 1;
    int rc = 0;
    if (zmq_msg_recv(&s->hdr, f->sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&s->hdr);
        s->busy = 0;
        c->free_slots[c->nfree++] = s;
        return errno == EAGAIN ? 0 : client__feeder_error(c, j, err, SL_EIO, "receive: %s", zmq_strerror(errno));
    }
    f->last_seen_ns = sl_clock_ns();
    int more = zmq_msg_more(&s->hdr);
    while (more) {
        if (s->nframes == sizeof s->frames / sizeof s->frames[0]) {
            rc = client__feeder_error(c, j, err, SL_EPROTO,
                                      "more than %zu frames after a header (a PIECE has one body frame)", s->nframes);
            break;
        }
        zmq_msg_t *m = &s->frames[s->nframes];
        zmq_msg_init(m);
        if (zmq_msg_recv(m, f->sock, 0) < 0) {
            zmq_msg_close(m);
            rc = client__feeder_error(c, j, err, SL_EIO, "receive: %s", zmq_strerror(errno));
            break;
        }
        s->nframes++;
        more = zmq_msg_more(m);
    }
    struct sl_error derr = {0};
    if (rc == 0 && sl_wire_decode(zmq_msg_data(&s->hdr), zmq_msg_size(&s->hdr), &c->msg, &derr) != 0) {
        /* a malformed ROSTER is a bad ROSTER: logged and ignored (a
         * header: the magic, the version (u16), the type (u16)) */
        const uint8_t *h = zmq_msg_data(&s->hdr);
        if (zmq_msg_size(&s->hdr) >= 8 && memcmp(h, "SLC1", 4) == 0 && (h[4] | h[5] << 8) == SL_WIRE_VERSION &&
            (h[6] | h[7] << 8) == SL_WIRE_ROSTER && !zmq_msg_more(&s->hdr))
            client__bad_roster(c, (size_t)j, derr.msg);
        else
            rc = client__feeder_error(c, j, err, SL_EPROTO, "%s", derr.msg);
        if (rc == 0) {
            zmq_msg_close(&s->hdr);
            s->busy = 0;
            c->free_slots[c->nfree++] = s;
            return 0;
        }
    }
    if (rc != 0) {
        client__drop_slot(c, s);
        return rc;
    }
    switch (c->msg.type) {
    case SL_WIRE_PIECE: return take_piece(c, j, s, err);
    case SL_WIRE_END:
        f->ended = 1;
        f->end_pieces = c->msg.end.pieces;
        break;
    case SL_WIRE_ERROR:
        if (c->msg.error.code == SL_ECLOSED && (c->o.reconnect_ms > 0 || c->o.takeover_ms > 0)) {
            /* the feeder was stopped (a signal): lost, as if it had been
             * killed; its share is rejoined or taken over */
            f->stopped = 1;
            snprintf(f->lost, sizeof f->lost, "stopped (it said: %.*s)",
                     (int)(c->msg.error.msg_len < 80 ? c->msg.error.msg_len : 80), c->msg.error.msg);
            break;
        }
        rc = client__feeder_error(c, j, err, c->msg.error.code < 0 ? c->msg.error.code : SL_EPROTO, "%.*s",
                                  (int)c->msg.error.msg_len, c->msg.error.msg);
        break;
    case SL_WIRE_HEARTBEAT: break;
    case SL_WIRE_STATS: client__note_stats(c, j, &c->msg.stats); break;
    case SL_WIRE_ROSTER: client__note_roster(c, (size_t)j, &c->msg.roster); break;
    case SL_WIRE_REFUSE:
        rc = client__feeder_error(c, j, err, SL_EPROTO, "refused: %.*s", (int)c->msg.refuse.reason_len,
                                  c->msg.refuse.reason);
        break;
    default:
        rc = client__feeder_error(c, j, err, SL_EPROTO, "unexpected %s message", sl_wire_type_name(c->msg.type));
        break;
    }
    /* not a piece: the slot goes back unused */
    zmq_msg_close(&s->hdr);
    for (size_t i = 0; i < s->nframes; i++)
        zmq_msg_close(&s->frames[i]);
    s->nframes = 0;
    s->busy = 0;
    c->free_slots[c->nfree++] = s;
    return rc;
}

/* A pause of our own longer than a quarter of the timeout: not counted as
 * any feeder's silence. */
static void forgive_pause(struct client *c, uint64_t pause_ns)
{
    if (pause_ns <= (uint64_t)c->o.timeout_ms * 250000u)
        return;
    uint64_t now = sl_clock_ns();
    for (size_t j = 0; j < c->o.nfeeders; j++) {
        uint64_t *seen = &c->f[j].last_seen_ns;
        *seen = *seen + pause_ns < now ? *seen + pause_ns : now; /* never in the future */
    }
}

/* Poll every feeder once (up to timeout_ms) and take what arrived. It is
 * called when no step is ready: whatever credit is owed goes back first,
 * since a feeder whose window is full waits for exactly that (holding a
 * partial batch back while blocking would stall both sides until the poll
 * timed out). */
static int pump(struct client *c, int timeout_ms, struct sl_error *err)
{
    if (client__stopped(c, "waiting for the feeders", err) != 0)
        return SL_ECLOSED;
    client__unblock_lent(c);
    /* feeders joined: every share's new connection, before the poll */
    if (c->pending != 0) {
        int rc = client__reshape(c, err);
        if (rc != 0)
            return rc;
    }
    give_credits(c, 1);
    /* every share: its socket and its monitor */
    zmq_pollitem_t items[2 * CLIENT_MAX_FEEDERS];
    size_t idx[2 * CLIENT_MAX_FEEDERS], n = 0;
    uint64_t now = sl_clock_ns();
    /* A feeder is silent only while we listen: after a long pause of our
     * own (the caller busy, the process stopped or swapped out) its
     * heartbeats may still sit in the socket, so the pause is not counted
     * against it (forgive_pause). Pauses under a quarter of the timeout
     * (ordinary steps) are, so a feeder that hangs is still found within
     * the timeout. */
    if (c->listened_ns != 0 && now > c->listened_ns)
        forgive_pause(c, now - c->listened_ns);
    for (size_t j = 0; j < c->o.nfeeders; j++) {
        struct feeder *f = &c->f[j];
        if (f->rejoining && f->sock == NULL) {
            if (now >= f->retry_ns) {
                int rc = client__rejoin_connect(c, j, err);
                if (rc != 0)
                    return rc;
            } else if ((f->retry_ns - now) / 1000000u < (uint64_t)timeout_ms) {
                timeout_ms = (int)((f->retry_ns - now) / 1000000u) + 1;
            }
        } else if (f->rejoining && f->rehello_ns != 0) {
            /* a restarted feeder still scanning: ask again when it said */
            if (now >= f->rehello_ns) {
                f->rehello_ns = 0;
                int rc = client__send_hello(c, j, c->o.credits, f->resume, err);
                if (rc != 0)
                    return rc;
            } else if ((f->rehello_ns - now) / 1000000u < (uint64_t)timeout_ms) {
                timeout_ms = (int)((f->rehello_ns - now) / 1000000u) + 1;
            }
        }
        if (f->sock != NULL) {
            items[n] = (zmq_pollitem_t){.socket = f->sock, .events = ZMQ_POLLIN};
            idx[n++] = j;
        }
        if (f->closed_ns != 0 && !f->rejoining && !f->ended) {
            /* wake when the grace for a closed connection is over */
            uint64_t at = f->closed_ns + CLOSED_GRACE_NS;
            int left = at > now ? (int)((at - now) / 1000000u) + 1 : 0;
            if (left < timeout_ms)
                timeout_ms = left;
        }
    }
    /* the monitors after the feeders, so a message that came before the
     * connection closed is taken first */
    size_t nsock = n;
    for (size_t i = 0; i < nsock; i++)
        if (c->f[idx[i]].mon != NULL) {
            items[n] = (zmq_pollitem_t){.socket = c->f[idx[i]].mon, .events = ZMQ_POLLIN};
            idx[n++] = idx[i];
        }
    int r = zmq_poll(items, (int)n, timeout_ms);
    if (r < 0 && errno != EINTR)
        return sl_error_set(err, SL_EIO, "zmq_poll: %s", zmq_strerror(errno));
    /* the poll itself may have lasted far past its timeout: the process
     * was stopped (or starved) while it waited */
    uint64_t polled = sl_clock_ns() - now, allowed = (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
    if (polled > allowed)
        forgive_pause(c, polled - allowed);
    for (size_t i = 0; r > 0 && i < n; i++) {
        size_t j = idx[i];
        if (!(items[i].revents & ZMQ_POLLIN))
            continue;
        if (i >= nsock) {
            if (c->f[j].mon != NULL)
                client__read_monitor(&c->f[j]);
            int rc = client__handshake_failed(c, j, err);
            if (rc != 0)
                return rc;
            continue;
        }
        for (int k = 0; k < 256 && c->f[j].sock != NULL; k++) {
            int ev = 0;
            size_t len = sizeof ev;
            zmq_getsockopt(c->f[j].sock, ZMQ_EVENTS, &ev, &len);
            if (!(ev & ZMQ_POLLIN))
                break;
            int rc = c->f[j].rejoining ? client__rejoin_receive(c, j, err) : receive(c, (int)j, err);
            if (rc != 0)
                return rc;
        }
    }
    now = sl_clock_ns();
    int rc = client__find_lost(c, now, err);
    if (rc != 0)
        return rc;
    rc = client__probes(c, now, err);
    if (rc != 0)
        return rc;
    heartbeats(c);
    c->listened_ns = sl_clock_ns();
    return 0;
}

int client_open(struct client **out, const struct client_opts *opts, struct sl_error *err)
{
    *out = NULL;
    if (opts->nfeeders == 0 || opts->nfeeders > CLIENT_MAX_FEEDERS)
        return sl_error_set(err, SL_EINVAL, "between 1 and %d feeders, not %zu", CLIENT_MAX_FEEDERS, opts->nfeeders);
    if (opts->replicas == 0 || opts->workers == 0 || opts->worker >= opts->workers)
        return sl_error_set(err, SL_EINVAL, "worker %u of %u with %u replicas is not a valid place", opts->worker,
                            opts->workers, opts->replicas);
    int rc = client_check_bounds(opts, err);
    if (rc != 0)
        return rc;
    if (opts->resume_seq % opts->replicas != 0 || opts->resume_seq > ((uint64_t)1 << 48))
        return sl_error_set(err, SL_EINVAL,
                            "resume at piece %" PRIu64 ": not the first piece of a step (a multiple of %u replicas), "
                            "or past 2^48",
                            opts->resume_seq, opts->replicas);
    if (opts->resume_epoch != 0 && (opts->resume_seq != 0 || opts->resume_epoch > ((uint64_t)1 << 48)))
        return sl_error_set(err, SL_EINVAL,
                            "resume at epoch %" PRIu64 " and at piece %" PRIu64
                            ": give one or the other (an epoch at most 2^48)",
                            opts->resume_epoch, opts->resume_seq);
    const struct client_transition *x = &opts->transition;
    if (opts->resume_epoch != 0 && x->from_workers != 0)
        return sl_error_set(err, SL_EINVAL,
                            "resume at epoch %" PRIu64 " with a transition (from %" PRIu32 " x %" PRIu32
                            " at step %" PRIu64 " of epoch %" PRIu64
                            "): give one or the other (with a transition, resume_seq counts from the change)",
                            opts->resume_epoch, x->from_workers, x->from_replicas, x->from_step, x->from_epoch);
    for (size_t j = 0; j < opts->nfeeders; j++)
        if (sl_endpoint_check(opts->feeders[j], err) != 0)
            return sl_error_prefix(err, "feeder %zu: ", j);
    for (size_t j = 0; opts->curve != NULL && j < opts->nfeeders; j++)
        if (opts->curve_server == NULL || opts->curve_server[j] == NULL ||
            strlen(opts->curve_server[j]) != SL_CURVE_KEY_Z85)
            return sl_error_set(err, SL_EINVAL, "feeder %s: no CURVE server key (%d Z85 characters) for it",
                                opts->feeders[j], SL_CURVE_KEY_Z85);
    struct client *c = sl_calloc(1, sizeof *c);
    if (c == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    c->o = *opts;
    c->pid = getpid();
    /* the feeders' addresses and keys, the caller's for now (feeders that
     * join add theirs) */
    c->nfeeders0 = opts->nfeeders;
    c->takeover_ms0 = opts->takeover_ms > 0 ? opts->takeover_ms : 0;
    for (size_t j = 0; j < opts->nfeeders; j++) {
        c->addr[j] = opts->feeders[j];
        c->key[j] = opts->curve != NULL ? opts->curve_server[j] : NULL;
    }
    c->o.feeders = c->addr;
    c->o.curve_server = c->key;
    c->roster_log = (struct sl_log_limit){.kind = "bad ROSTERs", .burst = 2};
    if (c->o.credits == 0) /* CLIENT_DEFAULT_CREDITS, or 4 steps */
        c->o.credits = 4 * c->o.replicas < CLIENT_DEFAULT_CREDITS ? CLIENT_DEFAULT_CREDITS : 4 * c->o.replicas;
    if (c->o.heartbeat_ms <= 0)
        c->o.heartbeat_ms = 1000;
    if (c->o.timeout_ms <= 0)
        c->o.timeout_ms = 10000;
    if (c->o.connect_timeout_ms <= 0)
        c->o.connect_timeout_ms = CLIENT_CONNECT_TIMEOUT_MS;
    if (c->o.nfeeders == 1 || c->o.takeover_ms < 0) /* nobody to take a share over */
        c->o.takeover_ms = 0;
    /* a step needs R pieces at once: credits below R would deadlock */
    if (c->o.credits * c->o.nfeeders < c->o.replicas)
        c->o.credits = (uint32_t)((c->o.replicas + c->o.nfeeders - 1) / c->o.nfeeders);
    sl_buf_init(&c->buf, SL_WIRE_MAX_HEADER);
    c->nslots = c->nslots0 = (size_t)c->o.credits * c->o.nfeeders + c->o.replicas;
    c->f = sl_calloc(CLIENT_MAX_FEEDERS, sizeof *c->f); /* room for feeders that join */
    c->slots = sl_calloc(c->nslots, sizeof *c->slots);
    c->free_slots = sl_calloc(c->nslots, sizeof *c->free_slots);
    c->step_slots = sl_calloc(c->o.replicas, sizeof *c->step_slots);
    c->pieces = sl_calloc(c->o.replicas, sizeof *c->pieces);
    if (c->f == NULL || c->slots == NULL || c->free_slots == NULL || c->step_slots == NULL || c->pieces == NULL)
        rc = sl_error_set(err, SL_ENOMEM, "out of memory");
    if (rc == 0)
        rc = client_reorder_create(&c->reorder, c->nslots, err);
    if (rc == 0 && client_reorder_restart(c->reorder, c->o.resume_seq) != 0)
        rc = sl_error_set(err, SL_EINVAL, "reorder window not empty"); /* cannot happen: just made */
    /* the process's incarnation: random, never 0 */
    while (rc == 0 && c->o.incarnation == 0)
        if (getrandom(&c->o.incarnation, sizeof c->o.incarnation, 0) != (ssize_t)sizeof c->o.incarnation)
            rc = sl_error_sys(err, errno, "getrandom");
    c->m = c->o.metrics;
    if (rc == 0 && c->m == NULL && client_metrics_create(&c->own_m) != 0)
        rc = sl_error_set(err, SL_ENOMEM, "out of memory");
    if (c->m == NULL)
        c->m = c->own_m;
    for (size_t i = 0; rc == 0 && i < c->nslots; i++)
        c->free_slots[c->nfree++] = &c->slots[i];
    if (rc == 0 && (c->ctx = zmq_ctx_new()) == NULL)
        rc = sl_error_sys(err, errno, "zmq_ctx_new");
    for (size_t j = 0; rc == 0 && j < c->o.nfeeders; j++) {
        c->f[j].addr = c->o.feeders[j];
        c->f[j].host = (uint32_t)j;
        zmq_msg_init(&c->f[j].welcome_frame);
        rc = client__open_socket(c, j, err);
    }
    if (rc == 0)
        rc = client__handshake(c, err);
    if (rc != 0) {
        client_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* BYE to every feeder that welcomed us (once): it takes its buffers back
 * and, its stream over, may exit. */
static void say_bye(struct client *c)
{
    if (c->said_bye || sl_wire_encode_bye(&c->buf) != 0)
        return;
    client__detach_lent(c, -1, 0); /* the feeders take every buffer back */
    for (size_t j = 0; c->f != NULL && j < c->o.nfeeders; j++)
        if (c->f[j].sock != NULL && c->f[j].welcomed && !c->f[j].rejoining)
            (void)client__send_buf(c->f[j].sock, &c->buf);
    c->said_bye = 1;
}

/* The client's own memory, and nothing else: the end of close, and all
 * of it in a forked child. There, closing a socket or terminating the
 * context would wait for I/O threads that did not follow the fork (a
 * hang), and a BYE or a credit would speak on the parent's connections;
 * the messages and mappings are left to the child's exit or exec. */
static void free_own(struct client *c)
{
    client_reorder_destroy(c->reorder);
    sl_free(c->f);
    sl_free(c->slots);
    for (size_t g = 0; g < c->ngrowths; g++)
        sl_free(c->grown[g]);
    sl_free(c->free_slots);
    sl_free(c->step_slots);
    sl_free(c->pieces);
    sl_buf_free(&c->buf);
    sl_metrics_destroy(c->own_m);
    sl_free(c);
}

void client_close(struct client *c)
{
    if (c == NULL)
        return;
    if (client__forked(c)) {
        free_own(c);
        return;
    }
    client__drop_lent(c);
    sl_log_limit_flush(&c->roster_log, 1); /* the bad ROSTERs not logged */
    for (size_t r = 0; c->have_step && r < c->o.replicas; r++)
        client__release_slot(c, c->step_slots[r]);
    struct slot *s;
    while (c->reorder != NULL && (s = client_reorder_pop(c->reorder)) != NULL)
        client__release_slot(c, s);
    /* pieces held beyond a gap */
    for (size_t i = 0; c->slots != NULL && i < c->nslots0; i++)
        if (c->slots[i].busy)
            client__release_slot(c, &c->slots[i]);
    for (size_t g = 0; g < c->ngrowths; g++)
        for (size_t i = 0; i < c->ngrown[g]; i++)
            if (c->grown[g][i].busy)
                client__release_slot(c, &c->grown[g][i]);
    /* done with every piece: then BYE (a feeder takes its buffers back) */
    for (size_t j = 0; c->f != NULL && j < c->o.nfeeders; j++)
        client__detach_shm(&c->f[j]);
    say_bye(c);
    for (size_t j = 0; c->f != NULL && j < c->o.nfeeders; j++) {
        if (c->f[j].sock != NULL)
            sl_zsock_linger(c->f[j].sock, 200); /* let BYE out */
        client__close_socket(&c->f[j]);
        client__close_probe(&c->f[j], 0);
        zmq_msg_close(&c->f[j].welcome_frame);
    }
    if (c->ctx != NULL)
        zmq_ctx_term(c->ctx);
    free_own(c);
}

const struct sl_wire_welcome *client_welcome(const struct client *c)
{
    return &c->welcome;
}

static int all_ended(struct client *c)
{
    for (size_t j = 0; j < c->o.nfeeders; j++)
        if (!c->f[j].ended)
            return 0;
    return 1;
}

static void fill_piece(struct client *c, const struct slot *s, struct client_piece *p)
{
    const struct sl_wire_piece *w = &s->piece;
    p->epoch = w->epoch;
    p->step = w->step;
    p->seq = w->seq;
    p->worker = w->worker;
    p->replica = w->replica;
    p->rows = w->rows;
    p->flags = w->flags;
    p->ntensors = w->ntensors;
    for (size_t i = 0; i < w->ntensors; i++) {
        struct client_tensor *t = &p->t[i];
        t->name = c->names[i];
        t->dtype = w->tensors[i].dtype;
        t->rank = w->tensors[i].rank;
        memcpy(t->dims, w->tensors[i].dims, sizeof t->dims);
        t->bytes = w->tensors[i].bytes;
        t->data = t->bytes ? s->body + w->tensors[i].offset : NULL;
    }
}

int client_keepalive(struct client *c, int ms, struct sl_error *err)
{
    if (client__forked(c))
        return client__refuse_forked(c, err);
    heartbeats(c);
    uint64_t end = sl_clock_ns() + (uint64_t)(ms > 0 ? ms : 0) * 1000000u;
    int tick = c->o.heartbeat_ms / 4 > 0 ? c->o.heartbeat_ms / 4 : 1;
    for (uint64_t now = sl_clock_ns(); now < end; now = sl_clock_ns()) {
        uint64_t left = (end - now) / 1000000u + 1;
        int rc = pump(c, left < (uint64_t)tick ? (int)left : tick, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

void client_release(struct client *c)
{
    if (c->have_step && !client__forked(c)) {
        for (size_t r = 0; r < c->o.replicas; r++)
            client__release_slot(c, c->step_slots[r]);
        c->have_step = 0;
        give_credits(c, 0);
    }
}

/* The step taken out (client_keep.c), then released here: its credits
 * go back, lent pieces' excepted. */
static int take_step(struct client *c, struct client_kept **out, int lend, struct sl_error *err)
{
    int rc = client__take_step(c, out, lend, err);
    if (rc == 0)
        client_release(c);
    return rc;
}

int client_keep(struct client *c, struct client_kept **out, struct sl_error *err)
{
    return take_step(c, out, 0, err);
}

int client_lend(struct client *c, struct client_kept **out, struct sl_error *err)
{
    return take_step(c, out, !c->lend_off, err);
}

int client_next_step(struct client *c, const struct client_piece **pieces, struct sl_error *err)
{
    if (client__forked(c))
        return client__refuse_forked(c, err);
    /* here too, not only while waiting: a trainer whose pieces are always
     * ready would otherwise be heard only through its credits */
    heartbeats(c);
    client_release(c);
    /* a ROSTER read while the caller held its step (a keepalive): the
     * reshape now, before the next step is taken from what was buffered
     * (a trainer never short of pieces would otherwise never reach it) */
    if (c->pending != 0) {
        int rc = client__reshape(c, err);
        if (rc != 0)
            return rc;
    }
    uint64_t t0 = sl_clock_ns(), waited_since = 0; /* waited_since: the first pump since the last piece */
    /* c->ngot: the slots gathered so far, for a rejoin meanwhile to see */
    c->ngot = 0;
    while (c->ngot < c->o.replicas) {
        struct slot *s = client_reorder_pop(c->reorder);
        if (s != NULL && waited_since != 0) {
            /* the wait since the last piece was for this one: its feeder's */
            if (s->feeder >= 0 && (size_t)s->feeder < CLIENT_MAX_FEEDERS)
                __atomic_fetch_add(&c->wait_by_feeder[s->feeder], sl_clock_ns() - waited_since, __ATOMIC_RELAXED);
            waited_since = 0;
        }
        if (s != NULL) {
            if (s->piece.replica != c->ngot) {
                client__release_slot(c, s);
                size_t had = c->ngot;
                for (size_t r = 0; r < had; r++)
                    client__release_slot(c, c->step_slots[r]);
                c->ngot = 0;
                return sl_error_set(err, SL_EPROTO, "piece %" PRIu64 " is for replica %u, expected replica %zu",
                                    s->piece.seq, s->piece.replica, had);
            }
            c->step_slots[c->ngot++] = s;
            continue;
        }
        if (all_ended(c)) {
            uint64_t total = 0;
            for (size_t j = 0; j < c->o.nfeeders; j++)
                if (c->f[j].end_pieces > total)
                    total = c->f[j].end_pieces;
            if (client_reorder_next(c->reorder) >= total) {
                size_t had = c->ngot;
                for (size_t r = 0; r < had; r++)
                    client__release_slot(c, c->step_slots[r]);
                c->ngot = 0;
                if (had != 0)
                    return sl_error_set(err, SL_EPROTO, "the stream ended inside a step (%zu of %u pieces)", had,
                                        c->o.replicas);
                /* no piece is borrowed any more: the feeders may go */
                say_bye(c);
                sl_metrics_add(c->m, CLIENT_M_WAIT_NS, sl_clock_ns() - t0);
                return SL_END;
            }
        }
        if (waited_since == 0)
            waited_since = sl_clock_ns();
        int rc = pump(c, c->o.heartbeat_ms / 4 > 0 ? c->o.heartbeat_ms / 4 : 1, err);
        if (rc != 0) {
            for (size_t r = 0; r < c->ngot; r++)
                client__release_slot(c, c->step_slots[r]);
            c->ngot = 0;
            return rc;
        }
    }
    c->ngot = 0; /* handed out: have_step now */
    sl_metrics_add(c->m, CLIENT_M_WAIT_NS, sl_clock_ns() - t0);
    uint64_t rows = 0, bytes = 0;
    for (size_t r = 0; r < c->o.replicas; r++) {
        fill_piece(c, c->step_slots[r], &c->pieces[r]);
        rows += c->pieces[r].rows;
        for (size_t i = 0; i < c->pieces[r].ntensors; i++)
            bytes += c->pieces[r].t[i].bytes;
    }
    sl_metrics_add(c->m, CLIENT_M_PIECES, c->o.replicas);
    sl_metrics_add(c->m, CLIENT_M_ROWS, rows);
    sl_metrics_add(c->m, CLIENT_M_BYTES, bytes);
    c->have_step = 1;
    *pieces = c->pieces;
    return 0;
}

struct sl_metrics *client_metrics(const struct client *c)
{
    return c->m;
}

uint64_t client_position(const struct client *c)
{
    /* every seq below the reorder's next was handed out; the step being
     * gathered (none between calls) is not */
    return client_reorder_next(c->reorder) - c->ngot;
}

size_t client_feeders(const struct client *c)
{
    return __atomic_load_n(&c->o.nfeeders, __ATOMIC_RELAXED);
}

uint64_t client_incarnation(const struct client *c)
{
    return c->o.incarnation;
}
