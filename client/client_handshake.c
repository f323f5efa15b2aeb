/* client_handshake.c: a feeder's connection and its handshake.
 *
 * The socket to a feeder and the monitor that tells at once when its
 * connection closes or its handshake fails (CURVE: the verdict, worded for
 * the user); HELLO, and the answers to it while the client opens: WELCOME
 * (checked against the first one's plan and schema), STATUS (a feeder still
 * scanning its files: HELLO again when it says), REFUSE.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "sl_clock.h"
#include "sl_endpoint.h"
#include "sl_handshake.h"
#include "sl_log.h"
#include "sl_zsock.h"
#include "client_int.h"
#include "client_reorder.h"

/* What the monitor of a feeder's socket reports: the connection closed,
 * and its handshakes (judged by sl_handshake, SL_HANDSHAKE_FEEDER). */
#define MONITOR_EVENTS (ZMQ_EVENT_DISCONNECTED | SL_HANDSHAKE_EVENTS)

int client__open_socket(struct client *c, size_t j, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    f->closed_ns = 0;
    f->stopped = 0;
    const struct sl_zsock_opts zo = {
        /* under CURVE the bound is on the encrypted frame */
        .max_msg = (int64_t)SL_WIRE_MAX_MSG + (c->o.curve != NULL ? SL_CURVE_FRAME_OVERHEAD : 0),
        .unbounded_recv = 1, /* the credits given bound what arrives */
    };
    f->sock = sl_zsock_open(c->ctx, ZMQ_DEALER, &zo, f->addr, err);
    if (f->sock == NULL)
        return SL_EIO;
    /* The monitor tells at once when the connection closes (the feeder
     * exited or was killed), instead of after the heartbeat timeout. */
    char mon_addr[96];
    snprintf(mon_addr, sizeof mon_addr, "inproc://sl-client-%p-%u", (void *)c, c->monitors++);
    sl_handshake_init(&f->hs, SL_HANDSHAKE_FEEDER, c->o.curve != NULL);
    f->mon = sl_zsock_monitor_open(c->ctx, f->sock, mon_addr, MONITOR_EVENTS, f->addr, err);
    if (f->mon == NULL)
        return SL_EIO;
    /* CURVE: the key of the feeder at this address (a takeover's host) */
    if (c->o.curve != NULL && sl_curve_client(f->sock, c->o.curve, c->o.curve_server[f->host], err) != 0)
        return sl_error_prefix(err, "feeder %s: ", f->addr);
    if (sl_endpoint_connect(f->sock, f->addr, err) != 0)
        return SL_EINVAL;
    return 0;
}

void client__set_trailing(const struct client *c, struct sl_wire_hello *h)
{
    const struct client_transition *x = &c->o.transition;
    if (x->from_workers != 0) { /* checked at open: all four in range */
        h->flags |= SL_WIRE_HELLO_TRANSITION;
        h->from_workers = x->from_workers;
        h->from_replicas = x->from_replicas;
        h->from_epoch = x->from_epoch;
        h->from_step = x->from_step;
    }
    /* only after a join (a ROSTER, or a trainer given the joined feeders
     * too): a feeder that predates joins refuses the field */
    if (c->o.nfeeders != c->nfeeders0 || c->say_feeders) {
        h->flags |= SL_WIRE_HELLO_FEEDERS;
        h->feeders = (uint32_t)c->o.nfeeders;
    }
}

int client__send_hello(struct client *c, size_t j, uint32_t credits, uint64_t resume, struct sl_error *err)
{
    /* STATUS: a feeder still scanning its files says so, and this HELLO
     * comes again after the retry it asks for */
    struct sl_wire_hello h = {.worker = c->o.worker,
                              .workers = c->o.workers,
                              .replicas = c->o.replicas,
                              .credits = credits,
                              .incarnation = c->o.incarnation,
                              .share = (uint32_t)j,
                              .flags = (c->o.no_shm ? 0 : SL_WIRE_HELLO_SHM) | SL_WIRE_HELLO_STATUS |
                                       SL_WIRE_HELLO_STATS | SL_WIRE_HELLO_HALF | SL_WIRE_HELLO_STATS_MAP |
                                       SL_WIRE_HELLO_ROSTER,
                              .heartbeat_ms = (uint32_t)c->o.heartbeat_ms,
                              .resume_seq = resume,
                              .job = c->o.job,
                              .job_len = strlen(c->o.job)};
    if (c->o.reshape)
        h.flags |= SL_WIRE_HELLO_RESHAPE;
    if (c->o.resume_epoch != 0 && !c->epoch_known) { /* by epoch until a WELCOME gave its seq */
        h.flags |= SL_WIRE_HELLO_EPOCH;
        h.resume_epoch = c->o.resume_epoch;
        h.resume_seq = 0;
    }
    client__set_trailing(c, &h);
    if (sl_wire_encode_hello(&h, &c->buf) != 0)
        return sl_error_set(err, SL_EINVAL, "cannot encode HELLO (job name 1-%d bytes, worker < workers)",
                            SL_WIRE_MAX_JOB);
    if (client__send_buf(c->f[j].sock, &c->buf) != 0)
        return client__feeder_error(c, (int)j, err, SL_EIO, "send HELLO: %s", zmq_strerror(errno));
    return 0;
}

/* A WELCOME from feeder j: its place among the feeders, and (unless it is
 * the first) the same plan and schema as the first one's. */
int client__check_welcome(struct client *c, size_t j, const struct sl_wire_welcome *w, int first, struct sl_error *err)
{
    if (w->feeders != c->o.nfeeders || w->feeder != c->f[j].host)
        return client__feeder_error(
            c, (int)j, err, SL_EPROTO,
            "is feeder %u of %u, but was given as feeder %u of %zu (list the feeders in index order)", w->feeder,
            w->feeders, c->f[j].host, c->o.nfeeders);
    if (first && c->o.resume_epoch != 0) {
        /* resumed by epoch: its first piece, for this shape (the feeders
         * computed the same); every HELLO from now on says the seq */
        uint64_t per = 0, seq = 0;
        if (__builtin_mul_overflow(w->steps_per_epoch, (uint64_t)c->o.replicas, &per) ||
            __builtin_mul_overflow(per, c->o.resume_epoch, &seq) || seq > ((uint64_t)1 << 48) ||
            client_reorder_restart(c->reorder, seq) != 0)
            return client__feeder_error(c, (int)j, err, SL_EPROTO,
                                        "epoch %" PRIu64 " of %" PRIu64 " steps x %u replicas is past 2^48 pieces",
                                        c->o.resume_epoch, w->steps_per_epoch, c->o.replicas);
        c->o.resume_seq = seq;
        c->epoch_known = 1;
    }
    if (first) {
        c->welcome = *w;
        for (size_t i = 0; i < w->ntensors; i++) {
            memcpy(c->names[i], w->fields[i].name, w->fields[i].name_len);
            c->names[i][w->fields[i].name_len] = '\0';
            c->welcome.fields[i].name = c->names[i];
        }
        return 0;
    }
    if (w->steps_per_epoch != c->welcome.steps_per_epoch || w->epochs != c->welcome.epochs ||
        w->ntensors != c->welcome.ntensors)
        return client__feeder_error(c, (int)j, err, SL_EPROTO,
                                    "disagrees with feeder 0 on the plan (steps %" PRIu64 " vs %" PRIu64
                                    ", epochs %" PRIu64 " vs %" PRIu64 ", tensors %u vs %u)",
                                    w->steps_per_epoch, c->welcome.steps_per_epoch, w->epochs, c->welcome.epochs,
                                    w->ntensors, c->welcome.ntensors);
    for (size_t i = 0; i < w->ntensors; i++) {
        const struct sl_wire_field *a = &w->fields[i], *b = &c->welcome.fields[i];
        int same = a->name_len == strlen(b->name) && memcmp(a->name, b->name, a->name_len) == 0 &&
                   a->dtype == b->dtype && a->ragged == b->ragged && a->rank == b->rank;
        for (int d = 0; same && d < a->rank; d++)
            same = a->dims[d] == b->dims[d];
        if (!same)
            return client__feeder_error(c, (int)j, err, SL_EPROTO,
                                        "disagrees with feeder 0 on tensor %zu ('%.*s' vs '%s')", i, (int)a->name_len,
                                        a->name, b->name);
    }
    return 0;
}

/* A STATUS from feeder j: it is alive and starting. Logged the first
 * time, then when its figures change (at most every 5 s) or every 30 s;
 * HELLO goes again after the retry it asks for (at most a quarter of the
 * connect timeout, so one lost answer cannot use it all up). */
#define STATUS_LOG_CHANGED_NS 5000000000u
#define STATUS_LOG_SAME_NS 30000000000u

void client__note_status(struct client *c, size_t j, const struct sl_wire_status *st)
{
    struct feeder *f = &c->f[j];
    uint64_t now = sl_clock_ns();
    int changed =
        st->files_done != f->status.files_done || st->files != f->status.files || st->records != f->status.records;
    if (!f->scanning || (changed && now - f->status_log_ns >= STATUS_LOG_CHANGED_NS) ||
        now - f->status_log_ns >= STATUS_LOG_SAME_NS) {
        sl_log(SL_LOG_INFO,
               "feeder %s: scanning, %" PRIu64 " of %" PRIu64 " files (%.2f GB, %" PRIu64
               " records so far); waiting for it",
               f->addr, st->files_done, st->files, (double)st->bytes / 1e9, st->records);
        f->status_log_ns = now;
    }
    f->scanning = 1;
    f->status = *st;
    uint64_t retry = (uint64_t)st->retry_ms, most = (uint64_t)c->o.connect_timeout_ms / 4;
    if (retry > most)
        retry = most > 0 ? most : 1;
    f->rehello_ns = now + retry * 1000000u;
    f->answer_by_ns = now + (uint64_t)c->o.connect_timeout_ms * 1000000u;
}

/* Close feeder j's socket and its monitor. */
void client__close_socket(struct feeder *f)
{
    sl_zsock_monitor_close(f->sock, f->mon); /* linger 0 unless the caller set one */
    f->sock = NULL;
    f->mon = NULL;
}

/* Drain feeder j's monitor; note when its connection closed. */
void client__read_monitor(struct feeder *f)
{
    uint16_t event;
    uint32_t value;
    while (sl_zsock_monitor_event(f->mon, &event, &value)) {
        if (event == ZMQ_EVENT_DISCONNECTED && f->closed_ns == 0)
            f->closed_ns = sl_clock_ns();
        sl_handshake_note(&f->hs, event, value, 0);
    }
}

static const struct client_names trainer_names = {"--connect-timeout", "--curve-key", "--curve-server-key", 0};

/* The option names for messages: the caller's, else sluice-trainer's. */
static const struct client_names *names_of(const struct client *c)
{
    return c->o.names != NULL ? c->o.names : &trainer_names;
}

/* Share j's connection failed its handshake (read_monitor saw it): an
 * error saying why, as far as libzmq tells; 0 when it did not. A takeover
 * connection names the survivor's address, whose key it used. */
int client__handshake_failed(struct client *c, size_t j, struct sl_error *err)
{
    const struct client_names *nm = names_of(c);
    struct sl_error why = {0};
    if (sl_handshake_feeder_error(&c->f[j].hs, nm->curve_key, nm->curve_server_key, &why) == 0)
        return 0;
    return client__feeder_error(c, (int)j, err, why.code, "%s", why.msg);
}

/* Feeder j's answer to HELLO, while the handshake waits: a WELCOME, a
 * STATUS (it is scanning: HELLO again later), a heartbeat; anything else
 * is an error. Every message counts as a sign of life. */
static int handshake_receive(struct client *c, size_t j, size_t *welcomed, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    zmq_msg_t *m = &f->welcome_frame;
    zmq_msg_close(m); /* an earlier STATUS or HEARTBEAT */
    zmq_msg_init(m);
    if (zmq_msg_recv(m, f->sock, ZMQ_DONTWAIT) < 0)
        return errno == EAGAIN ? 0 : client__feeder_error(c, (int)j, err, SL_EIO, "receive: %s", zmq_strerror(errno));
    if (zmq_msg_more(m))
        return client__feeder_error(c, (int)j, err, SL_EPROTO, "expected WELCOME, got a message of several frames");
    struct sl_error derr = {0};
    if (sl_wire_decode(zmq_msg_data(m), zmq_msg_size(m), &c->msg, &derr) != 0)
        return client__feeder_error(c, (int)j, err, SL_EPROTO, "%s", derr.msg);
    f->answer_by_ns = sl_clock_ns() + (uint64_t)c->o.connect_timeout_ms * 1000000u;
    switch (c->msg.type) {
    case SL_WIRE_REFUSE:
        return client__feeder_error(c, (int)j, err, SL_EPROTO, "refused: %.*s", (int)c->msg.refuse.reason_len,
                                    c->msg.refuse.reason);
    case SL_WIRE_HEARTBEAT: return 0;
    case SL_WIRE_STATS: client__note_stats(c, j, &c->msg.stats); return 0;
    case SL_WIRE_STATUS: client__note_status(c, j, &c->msg.status); return 0;
    case SL_WIRE_WELCOME: break;
    default:
        return client__feeder_error(c, (int)j, err, SL_EPROTO, "expected WELCOME, got %s",
                                    sl_wire_type_name(c->msg.type));
    }
    const struct sl_wire_welcome *w = &c->msg.welcome;
    if (w->feeder == f->host && w->feeders < c->o.nfeeders && !c->say_feeders) {
        /* one of the first feeders, and this trainer was also given
         * feeders that joined later: its HELLO said no modulus, so the
         * feeder serves its own count. Asked again on a new connection
         * (what the old one may have sent goes with it), saying the
         * modulus; a feeder that predates joins refuses that HELLO. */
        sl_log(SL_LOG_INFO,
               "feeder %s counts %u feeders, this trainer was given %zu (feeders joined the job): asking it again "
               "with the count",
               f->addr, w->feeders, c->o.nfeeders);
        c->say_feeders = 1;
        client__close_socket(f);
        int rc = client__open_socket(c, j, err);
        if (rc == 0)
            rc = client__send_hello(c, j, c->o.credits, c->o.resume_seq, err);
        return rc;
    }
    int rc = client__check_welcome(c, j, w, *welcomed == 0, err);
    if (rc == 0 && f->scanning)
        sl_log(SL_LOG_INFO, "feeder %s: done scanning, serving", f->addr);
    if (rc == 0)
        rc = client__attach_shm(c, j, &c->msg.welcome, err);
    if (rc != 0)
        return rc;
    f->welcomed = 1;
    f->rehello_ns = 0;
    f->last_seen_ns = f->last_hb_ns = sl_clock_ns();
    (*welcomed)++;
    return 0;
}

/* HELLO to every feeder, then wait for each one's WELCOME. A feeder still
 * scanning its files answers STATUS and is asked again when it says; the
 * wait for a feeder ends connect_timeout_ms after its last word (or after
 * the first HELLO, if it never answered). Feeders that have welcomed us
 * are sent heartbeats meanwhile: another may scan for a long time. */
int client__handshake(struct client *c, struct sl_error *err)
{
    uint64_t wait_ns = (uint64_t)c->o.connect_timeout_ms * 1000000u;
    for (size_t j = 0; j < c->o.nfeeders; j++) {
        int rc = client__send_hello(c, j, c->o.credits, c->o.resume_seq, err);
        if (rc != 0)
            return rc;
        c->f[j].answer_by_ns = sl_clock_ns() + wait_ns;
    }
    size_t welcomed = 0;
    while (welcomed < c->o.nfeeders) {
        if (client__stopped(c, "waiting for the feeders' answers to HELLO", err) != 0)
            return SL_ECLOSED;
        uint64_t now = sl_clock_ns();
        zmq_pollitem_t items[2 * CLIENT_MAX_FEEDERS];
        size_t idx[2 * CLIENT_MAX_FEEDERS], n = 0;
        int timeout_ms = 100;
        for (size_t j = 0; j < c->o.nfeeders; j++) {
            struct feeder *f = &c->f[j];
            if (f->welcomed) {
                if (now - f->last_hb_ns >= (uint64_t)c->o.heartbeat_ms * 1000000u) {
                    struct sl_wire_heartbeat h = {.sent_ns = now};
                    if (sl_wire_encode_heartbeat(&h, &c->buf) == 0)
                        (void)client__send_buf(f->sock, &c->buf);
                    f->last_hb_ns = now;
                }
                continue;
            }
            if (f->rehello_ns != 0 && now >= f->rehello_ns) {
                f->rehello_ns = 0;
                int rc = client__send_hello(c, j, c->o.credits, c->o.resume_seq, err);
                if (rc != 0)
                    return rc;
            } else if (f->rehello_ns != 0 && (f->rehello_ns - now) / 1000000u < (uint64_t)timeout_ms) {
                timeout_ms = (int)((f->rehello_ns - now) / 1000000u) + 1;
            }
            items[n] = (zmq_pollitem_t){.socket = f->sock, .events = ZMQ_POLLIN};
            idx[n++] = j;
        }
        /* the monitors: a handshake that fails ends the wait at once */
        size_t nsock = n;
        for (size_t i = 0; i < nsock; i++) {
            items[n] = (zmq_pollitem_t){.socket = c->f[idx[i]].mon, .events = ZMQ_POLLIN};
            idx[n++] = idx[i];
        }
        int r = zmq_poll(items, (int)n, timeout_ms);
        if (r < 0 && errno != EINTR)
            return sl_error_set(err, SL_EIO, "zmq_poll: %s", zmq_strerror(errno));
        for (size_t i = nsock; r > 0 && i < n; i++) {
            if (!(items[i].revents & ZMQ_POLLIN))
                continue;
            client__read_monitor(&c->f[idx[i]]);
            int rc = client__handshake_failed(c, idx[i], err);
            if (rc != 0)
                return rc;
        }
        for (size_t i = 0; r > 0 && i < nsock; i++) {
            struct feeder *f = &c->f[idx[i]];
            for (int k = 0; k < 64 && !f->welcomed; k++) {
                int ev = 0;
                size_t len = sizeof ev;
                zmq_getsockopt(f->sock, ZMQ_EVENTS, &ev, &len);
                if (!(ev & ZMQ_POLLIN))
                    break;
                int rc = handshake_receive(c, idx[i], &welcomed, err);
                if (rc != 0)
                    return rc;
            }
        }
        /* what came is taken first: a pause of our own is not the feeder's silence */
        now = sl_clock_ns();
        for (size_t j = 0; j < c->o.nfeeders; j++) {
            const struct feeder *f = &c->f[j];
            if (f->welcomed || now < f->answer_by_ns)
                continue;
            if (f->scanning) {
                const struct client_names *nm = names_of(c);
                char given[96];
                if (nm->in_ms)
                    snprintf(given, sizeof given, "%s=%d", nm->connect_timeout, c->o.connect_timeout_ms);
                else
                    snprintf(given, sizeof given, "%s %.0f s", nm->connect_timeout,
                             (double)c->o.connect_timeout_ms / 1e3);
                return client__feeder_error(
                    c, (int)j, err, SL_ETIMEOUT,
                    "silent for %.1f s while scanning its files (it last said %" PRIu64 " of %" PRIu64 " done; %s)",
                    (double)c->o.connect_timeout_ms / 1e3, f->status.files_done, f->status.files, given);
            }
            return client__feeder_error(c, (int)j, err, SL_ETIMEOUT,
                                        "no answer to HELLO within %.1f s (%s): is a feeder running at that address?",
                                        (double)c->o.connect_timeout_ms / 1e3, names_of(c)->connect_timeout);
        }
    }
    return 0;
}
