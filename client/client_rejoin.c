/* client_rejoin.c: lost feeders, rejoin and takeover.
 *
 * Rejoining (reconnect_ms > 0): a feeder silent past the timeout is taken
 * for gone. Its socket is closed (what it had in flight goes with it) and a
 * new one says HELLO again with resume_seq = the first of its pieces the
 * caller has not been handed; whatever of its pieces waits in the reorder
 * window is let go, to come again. The new connection starts with the full
 * grant, and the old connection's pieces still in the caller's step give
 * no credit back when released: a feeder counts every credit returned as
 * one of its own pieces consumed (its window), so a credit for a piece of
 * the old connection would make it think it had fewer pieces out than it
 * has, for good. Slots suffice: the step's R are counted apart from the
 * C per feeder. A REFUSE (the old process still holds the worker until
 * it drops it as silent) is retried every second on a fresh socket. The
 * other feeders go on meanwhile; their pieces wait in the reorder window.
 *
 * Takeover (takeover_ms > 0): a share whose feeder has not come back in
 * time is served by a surviving feeder, until a probe finds its own feeder
 * back (probes, below).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_endpoint.h"
#include "sl_log.h"
#include "sl_zsock.h"
#include "client_int.h"
#include "client_metrics.h"
#include "client_reorder.h"

uint64_t client__first_of_share(const struct client *c, uint64_t from, size_t j)
{
    uint64_t nf = c->o.nfeeders;
    return from + (j + nf - from % nf) % nf;
}

/* Rejoining feeder j: a new connection, HELLO with the resume point and
 * the full grant. */
int client__rejoin_connect(struct client *c, size_t j, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    f->owed = 0;
    f->retry_ns = 0;
    f->rehello_ns = 0;
    int rc = client__open_socket(c, j, err);
    if (rc == 0)
        rc = client__send_hello(c, j, c->o.credits, f->resume, err);
    return rc;
}

void client__close_probe(struct feeder *f, uint64_t next_ns)
{
    if (f->probe != NULL)
        zmq_close(f->probe); /* linger 0: nothing of it is owed */
    f->probe = NULL;
    f->probe_ns = next_ns;
}

int client__unshare_gathered(struct client *c, int j, struct sl_error *err)
{
    for (size_t r = 0; r < c->ngot; r++) {
        struct slot *s = c->step_slots[r];
        if ((j >= 0 && s->feeder != j) || s->map == NULL)
            continue;
        uint8_t *copy = sl_malloc(s->piece.shm_bytes ? (size_t)s->piece.shm_bytes : 1);
        if (copy == NULL)
            return client__feeder_error(c, s->feeder, err, SL_ENOMEM, "out of memory copying piece %" PRIu64,
                                        s->piece.seq);
        memcpy(copy, s->body, (size_t)s->piece.shm_bytes);
        s->copy = copy;
        s->body = copy;
        client__map_unref(s->map);
        s->map = NULL;
    }
    return 0;
}

/* Share j's connection is over: lost (back = 0), or handed back to its own
 * feeder, which answered a probe (back = 1). Its pieces not handed out are
 * let go, to come again on a new connection from the first one missing:
 * the share's own feeder's, and after takeover_ms (at once when the one
 * lost had itself taken the share over) a survivor's. */
static int start_rejoin(struct client *c, size_t j, int back, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    uint64_t nf = c->o.nfeeders, next = client_reorder_next(c->reorder);
    /* its first piece the caller has not had: every seq before next was */
    uint64_t resume = client__first_of_share(c, next, j);
    /* a new connection: nothing of the old one gives credit back now */
    f->conn++;
    f->unreturned = f->peak = 0;
    /* what of it waits in the reorder window comes again */
    for (uint64_t seq = resume; seq < next + c->nslots; seq += nf) {
        struct slot *s = client_reorder_take(c->reorder, seq);
        if (s != NULL)
            client__release_slot(c, s);
    }
    /* what of it is already in the step being gathered stays, out of its
     * shared memory */
    int rc = client__unshare_gathered(c, (int)j, err);
    if (rc != 0)
        return rc;
    client__detach_shm(f);
    /* its lent steps too (their other feeders' mappings made anew) */
    client__detach_lent(c, (int)j, 1);
    client__close_probe(f, 0);
    if (back && f->sock != NULL && sl_wire_encode_bye(&c->buf) == 0) {
        /* the survivor lets the share go at once */
        sl_zsock_linger(f->sock, 100);
        (void)client__send_buf(f->sock, &c->buf);
    }
    client__close_socket(f);
    f->rejoining = 1;
    f->welcomed = 0;
    f->ended = 0;
    f->resume = resume;
    f->lost_ns = sl_clock_ns();
    /* A feeder that comes back and is lost again before it sends a piece
     * (e.g. one that fails on the same record each time) keeps its first
     * deadline, so the trainer cannot rejoin it for ever. */
    uint64_t wait_ms = (uint64_t)(c->o.reconnect_ms > c->o.takeover_ms ? c->o.reconnect_ms : c->o.takeover_ms);
    if (!f->stalled)
        f->deadline_ns = f->lost_ns + wait_ms * 1000000u;
    f->stalled = 1;
    f->awaiting_first = 1;
    f->refused[0] = '\0';
    f->refused_by = 0;
    if (!back)
        sl_metrics_add(c->m, CLIENT_M_REJOINS, 1);
    uint32_t was = f->host;
    /* the share's own feeder first (it may be back at its address); a
     * survivor takes the share after takeover_ms, or at once when the one
     * lost was itself a survivor that had taken it */
    f->host = (uint32_t)j;
    f->addr = c->o.feeders[j];
    f->takeover_ns = c->o.takeover_ms <= 0 ? 0
                     : was != j && !back   ? f->lost_ns
                                           : f->lost_ns + (uint64_t)c->o.takeover_ms * 1000000u;
    if (back)
        sl_log(SL_LOG_INFO, "feeder %s is back: it takes its share back from feeder %s at piece %" PRIu64, f->addr,
               c->o.feeders[was], resume);
    else if (was != j)
        sl_log(SL_LOG_WARN,
               "feeder %s, which had taken over feeder %zu's share: %s; another feeder takes it, from "
               "piece %" PRIu64,
               c->o.feeders[was], j, f->lost, resume);
    else if (c->o.takeover_ms > 0)
        sl_log(SL_LOG_WARN,
               "feeder %s: %s; waiting %.1f s for it to come back, then a surviving feeder takes its "
               "share, from piece %" PRIu64,
               f->addr, f->lost, (double)c->o.takeover_ms / 1e3, resume);
    else
        sl_log(SL_LOG_WARN, "feeder %s: %s; waiting up to %.0f s for it to come back, to resume at piece %" PRIu64,
               f->addr, f->lost, (double)c->o.reconnect_ms / 1e3, resume);
    return client__rejoin_connect(c, j, err);
}

/* Shares served by a survivor: every max(1 s, takeover_ms) their own
 * feeder is asked, on a probe connection, with a HELLO for the share and no
 * credits (so it sends nothing); a WELCOME from it (the right feeder, index
 * and count) means it is back and serving: the share goes back to it, from
 * the first piece not handed out, as in a rejoin (its new connection, of
 * the same incarnation, replaces the probe's at once). A STATUS (still
 * scanning), a REFUSE or silence for the heartbeat timeout: asked again
 * later. The survivor serves on meanwhile. */
int client__probes(struct client *c, uint64_t now, struct sl_error *err)
{
    uint64_t every = (uint64_t)(c->o.takeover_ms > 1000 ? c->o.takeover_ms : 1000) * 1000000u;
    for (size_t j = 0; j < c->o.nfeeders; j++) {
        struct feeder *f = &c->f[j];
        if (f->host == j || f->rejoining || !f->welcomed || f->ended || c->o.takeover_ms <= 0) {
            client__close_probe(f, 0);
            continue;
        }
        if (f->probe == NULL) {
            if (f->probe_ns == 0) {
                f->probe_ns = now + every;
            } else if (now >= f->probe_ns) {
                const struct sl_zsock_opts zo = {.max_msg = SL_WIRE_MAX_HEADER +
                                                            (c->o.curve != NULL ? SL_CURVE_FRAME_OVERHEAD : 0)};
                f->probe = sl_zsock_open(c->ctx, ZMQ_DEALER, &zo, c->o.feeders[j], err);
                if (f->probe == NULL)
                    return SL_EIO;
                /* the share's own feeder: its key (a failed handshake is
                 * silence here; the probe is asked again later) */
                if (c->o.curve != NULL && sl_curve_client(f->probe, c->o.curve, c->o.curve_server[j], err) != 0)
                    return sl_error_prefix(err, "feeder %s: ", c->o.feeders[j]);
                struct sl_wire_hello h = {.worker = c->o.worker,
                                          .workers = c->o.workers,
                                          .replicas = c->o.replicas,
                                          .credits = 0,
                                          .flags = SL_WIRE_HELLO_STATUS,
                                          .heartbeat_ms = (uint32_t)c->o.heartbeat_ms,
                                          .resume_seq = client__first_of_share(c, client_reorder_next(c->reorder), j),
                                          .incarnation = c->o.incarnation,
                                          .share = (uint32_t)j,
                                          .job = c->o.job,
                                          .job_len = strlen(c->o.job)};
                client__set_trailing(c, &h);
                if (sl_endpoint_connect(f->probe, c->o.feeders[j], NULL) != 0 ||
                    sl_wire_encode_hello(&h, &c->buf) != 0 || client__send_buf(f->probe, &c->buf) != 0)
                    client__close_probe(f, now + every);
                else
                    f->probe_ns = now;
            }
            continue;
        }
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, f->probe, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            if (now - f->probe_ns > (uint64_t)c->o.timeout_ms * 1000000u)
                client__close_probe(f, now + every);
            continue;
        }
        struct sl_error derr = {0};
        int back = !zmq_msg_more(&m) && sl_wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), &c->msg, &derr) == 0 &&
                   c->msg.type == SL_WIRE_WELCOME && c->msg.welcome.feeder == j &&
                   c->msg.welcome.feeders == c->o.nfeeders;
        zmq_msg_close(&m);
        client__close_probe(f, back ? 0 : now + every);
        if (back) {
            int rc = start_rejoin(c, j, 1, err);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/* Feeder k is alive: a connection to it is up (welcomed, not lost). */
static int host_alive(const struct client *c, uint32_t k)
{
    for (size_t i = 0; i < c->o.nfeeders; i++) {
        const struct feeder *f = &c->f[i];
        if (f->host == k && f->welcomed && !f->rejoining && f->closed_ns == 0 && !f->stopped)
            return 1;
    }
    return 0;
}

/* Share j's feeder has not come back within takeover_ms: ask a surviving
 * feeder to serve the share from the first piece the caller lacks, the one
 * with the fewest shares (then the next after j), never one that refused.
 * When none is alive, the own feeder's address is tried on, until the
 * deadline. */
static int try_takeover(struct client *c, size_t j, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    uint32_t nf = (uint32_t)c->o.nfeeders, best = nf;
    size_t best_load = SIZE_MAX;
    for (uint32_t d = 1; d < nf; d++) {
        uint32_t k = (uint32_t)((j + d) % nf);
        if ((f->refused_by >> k) & 1u || !host_alive(c, k))
            continue;
        size_t load = 0;
        for (size_t i = 0; i < nf; i++)
            load += c->f[i].host == k;
        if (load < best_load) {
            best = k;
            best_load = load;
        }
    }
    uint64_t now = sl_clock_ns();
    if (best == nf) {
        f->takeover_ns = now + 250000000u; /* look again: one may come back */
        return 0;
    }
    client__close_socket(f);
    f->host = best;
    f->addr = c->o.feeders[best];
    f->takeover_ns = 0;
    /* a survivor answers at once: its answer is waited for at least a
     * heartbeat timeout */
    uint64_t by = now + (uint64_t)c->o.timeout_ms * 1000000u;
    if (by > f->deadline_ns)
        f->deadline_ns = by;
    sl_log(SL_LOG_WARN,
           "feeder %s: not back within %.1f s; asking feeder %s to take over its share from piece %" PRIu64,
           c->o.feeders[j], (double)(now - f->lost_ns) / 1e9, f->addr, f->resume);
    return client__rejoin_connect(c, j, err);
}

/* Share j has had no feeder for too long: the error names every feeder
 * and why it could not serve the share. */
static int lost_for_good(struct client *c, size_t j, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    char why[SL_ERROR_MSG_MAX];
    size_t n = 0;
    uint64_t waited = f->deadline_ns - f->lost_ns;
    n += (size_t)snprintf(why + n, sizeof why - n, "feeder %s: %s, and did not come back within %.1f s%s%s%s",
                          c->o.feeders[j], f->lost, (double)waited / 1e9,
                          f->refused[0] && f->host == j ? " (its last answer: " : "",
                          f->refused[0] && f->host == j ? f->refused : "", f->refused[0] && f->host == j ? ")" : "");
    if (c->o.takeover_ms > 0 && c->o.nfeeders > 1) {
        n += (size_t)snprintf(why + n, n < sizeof why ? sizeof why - n : 0, "; no other feeder took its share:");
        for (uint32_t k = 0; k < c->o.nfeeders && n < sizeof why; k++) {
            if (k == j)
                continue;
            const char *state = (f->refused_by >> k) & 1u ? "refused"
                                : host_alive(c, k)        ? "did not answer"
                                                          : "lost too";
            n += (size_t)snprintf(why + n, sizeof why - n, " %s %s;", c->o.feeders[k], state);
        }
        if (n < sizeof why && why[n - 1] == ';')
            why[n - 1] = '\0';
    }
    return sl_error_set(err, SL_ETIMEOUT, "%s", why);
}

/* The answer to a rejoining HELLO. */
int client__rejoin_receive(struct client *c, size_t j, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, f->sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return errno == EAGAIN ? 0 : client__feeder_error(c, (int)j, err, SL_EIO, "receive: %s", zmq_strerror(errno));
    }
    int rc = 0;
    struct sl_error derr = {0};
    if (zmq_msg_more(&m))
        rc = client__feeder_error(c, (int)j, err, SL_EPROTO, "expected WELCOME, got a message of several frames");
    else if (sl_wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), &c->msg, &derr) != 0)
        rc = client__feeder_error(c, (int)j, err, SL_EPROTO, "%s", derr.msg);
    else if (c->msg.type == SL_WIRE_WELCOME) {
        if ((rc = client__check_welcome(c, j, &c->msg.welcome, 0, err)) == 0 &&
            (rc = client__attach_shm(c, j, &c->msg.welcome, err)) == 0) {
            f->rejoining = 0;
            f->welcomed = 1;
            f->takeover_ns = 0;
            f->last_seen_ns = f->last_hb_ns = sl_clock_ns();
            if (f->reshaping) {
                f->reshaping = 0;
                f->stalled = 0;
                sl_log(SL_LOG_DEBUG, "feeder %s: serving share %zu of %zu from piece %" PRIu64, f->addr, j,
                       c->o.nfeeders, f->resume);
            } else if (f->host != j) {
                sl_metrics_add(c->m, CLIENT_M_TAKEOVERS, 1);
                sl_log(SL_LOG_WARN,
                       "feeder %s took over feeder %s's share %.1f s after its loss: resuming at piece %" PRIu64,
                       f->addr, c->o.feeders[j], (double)(f->last_seen_ns - f->lost_ns) / 1e9, f->resume);
            } else {
                sl_log(SL_LOG_INFO, "feeder %s is back after %.1f s: resuming at piece %" PRIu64, f->addr,
                       (double)(f->last_seen_ns - f->lost_ns) / 1e9, f->resume);
            }
        }
    } else if (c->msg.type == SL_WIRE_STATUS) {
        /* back, and scanning its files (a restarted feeder): wait for it
         * as long as it keeps answering, as at start */
        client__note_status(c, j, &c->msg.status);
        if (f->answer_by_ns > f->deadline_ns)
            f->deadline_ns = f->answer_by_ns;
    } else if (c->msg.type == SL_WIRE_REFUSE) {
        /* e.g. the old process still holds this worker: ask again shortly;
         * a survivor that will not take the share over is not asked again,
         * another one is (at once), else the share's own feeder */
        snprintf(f->refused, sizeof f->refused, "%.*s", (int)c->msg.refuse.reason_len, c->msg.refuse.reason);
        client__close_socket(f);
        f->retry_ns = sl_clock_ns() + 1000000000u;
        if (f->host != j) {
            sl_log(SL_LOG_WARN, "feeder %s will not take over feeder %s's share: %s", f->addr, c->o.feeders[j],
                   f->refused);
            f->refused_by |= (uint64_t)1 << f->host;
            f->host = (uint32_t)j;
            f->addr = c->o.feeders[j];
            f->takeover_ns = sl_clock_ns();
        }
    } else if (c->msg.type != SL_WIRE_HEARTBEAT) {
        rc =
            client__feeder_error(c, (int)j, err, SL_EPROTO, "expected WELCOME, got %s", sl_wire_type_name(c->msg.type));
    }
    zmq_msg_close(&m);
    return rc;
}

/* After a poll: each share's connection is looked at. One lost (closed
 * past the grace with no END, stopped, or silent past the timeout) is
 * rejoined or taken over, or is an error when neither is on; a share
 * being rejoined moves on to a survivor when its time comes, and is lost
 * for good at its deadline. */
int client__find_lost(struct client *c, uint64_t now, struct sl_error *err)
{
    for (size_t j = 0; j < c->o.nfeeders; j++) {
        struct feeder *f = &c->f[j];
        if (f->rejoining) {
            /* the survivor asked to take the share over was lost itself
             * before it answered: ask another at once */
            if (c->o.takeover_ms > 0 && f->host != j && f->takeover_ns == 0 && !host_alive(c, f->host)) {
                sl_log(SL_LOG_WARN, "feeder %s, asked to take over feeder %s's share, was lost too; asking another",
                       f->addr, c->o.feeders[j]);
                client__close_socket(f); /* meanwhile, the share's own address again */
                f->host = (uint32_t)j;
                f->addr = c->o.feeders[j];
                f->retry_ns = now;
                f->takeover_ns = now;
            }
            if (f->takeover_ns != 0 && now >= f->takeover_ns) {
                int rc = try_takeover(c, j, err);
                if (rc != 0)
                    return rc;
            }
            if (now >= f->deadline_ns)
                return lost_for_good(c, j, err);
            continue;
        }
        if (f->ended)
            continue; /* it may have exited: every piece it had to send is here */
        uint64_t silent = now - f->last_seen_ns;
        if (f->stopped) {
            /* f->lost says so already */
        } else if (f->closed_ns != 0 && now - f->closed_ns >= CLOSED_GRACE_NS) {
            /* closed, and no END came before it: it is gone */
            snprintf(f->lost, sizeof f->lost, "connection closed (the feeder exited or was killed?)");
        } else if (silent > (uint64_t)c->o.timeout_ms * 1000000u) {
            snprintf(f->lost, sizeof f->lost, "silent for %.1f s (heartbeat timeout %.1f s)", (double)silent / 1e9,
                     (double)c->o.timeout_ms / 1e3);
        } else {
            continue;
        }
        if (c->o.reconnect_ms <= 0 && c->o.takeover_ms <= 0)
            return client__feeder_error(c, (int)j, err, SL_ETIMEOUT, "%s", f->lost);
        int rc = start_rejoin(c, j, 0, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}
