/* train_client: handshake, receive, reorder, credit.
 *
 * Received pieces live in slots (a header frame, its body frame and the
 * decoded descriptor), made once: the reorder window is F * credits, the
 * most pieces the feeders may have outstanding. A slot is handed to the
 * caller as part of a step and recycled, with its credit returned to its
 * feeder, at the next call.
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
 * Shared memory (protocol version 3): a feeder on this host offers its
 * piece memory in the WELCOME (a memfd, opened as /proc/<pid>/fd/<fd>);
 * once it is mapped read-only and its token checked, a CREDIT with the SHM
 * flag says so, and pieces may then come as a header naming where the body
 * lies. Such a slot points into the mapping until it is released, and its
 * credit is what lets the feeder reuse the buffer. A mapping is counted by
 * the slots using it, so a restarted feeder's old memory stays readable
 * for the pieces still held. When a feeder is rejoined, the pieces of it
 * already taken into the step being gathered are first copied out: the
 * feeder gives the old connection's buffers back at the new HELLO.
 */
#include "train_client.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_buf.h"
#include "sl_clock.h"
#include "sl_endpoint.h"
#include "sl_log.h"
#include "sl_zsock.h"
#include "train_metrics.h"
#include "train_monitor.h"
#include "train_reorder.h"

/* A feeder's shared piece memory, mapped read-only; counted by the feeder
 * (while it is the current connection's) and by the slots pointing into it. */
struct shm_map {
    const uint8_t *base;
    size_t size;
    unsigned refs;
};

struct slot {
    zmq_msg_t hdr;
    zmq_msg_t frames[2]; /* the body frame (a bad message may have one more) */
    size_t nframes;
    int feeder;
    uint32_t conn; /* the feeder's connection it came on */
    int busy;      /* holds a received message */
    struct sl_wire_piece piece;
    const uint8_t *body;  /* the tensors: in frames[0], in `map`, or in `copy` */
    struct shm_map *map;  /* a reference, when the body lies in shared memory */
    uint8_t *copy;        /* owned: the body copied out of shared memory */
};

/* The stream of share j (the pieces with seq % F == j): served by feeder
 * j, or after its loss by a surviving feeder that took the share over
 * (`host`). */
struct feeder {
    const char *addr;    /* the address of `host` */
    uint32_t host;       /* the feeder process serving the share now */
    uint64_t takeover_ns; /* rejoining: when to ask a surviving feeder instead (0: not due) */
    uint64_t refused_by; /* feeders that refused to take the share over (bit k) */
    int stopped;         /* it sent ERROR "stopped": a loss, like a close */
    int awaiting_first;  /* rejoined or taken over: its first piece since is logged */
    /* taken over: a probe of the share's own feeder (a HELLO for the share
     * with no credits), which takes the share back once it answers WELCOME */
    void *probe;
    uint64_t probe_ns;   /* probe: when it was sent; else when the next goes (0: not due) */
    void *sock;
    void *mon;           /* PAIR reading sock's monitor: connection closed, handshake failed */
    uint64_t closed_ns;  /* when the monitor said so (0: not) */
    /* the handshake failed (ZMQ_EVENT_HANDSHAKE_FAILED_AUTH or _PROTOCOL,
     * or _NO_DETAIL HS_CLOSED_MAX times running): its event and value */
    int hs_event;
    uint32_t hs_value;
    unsigned hs_closed;  /* _NO_DETAIL events since the last handshake that succeeded */
    uint64_t last_seen_ns;
    uint64_t last_hb_ns;
    int welcomed;
    int ended;
    uint64_t end_pieces;
    uint32_t owed; /* credits to give back */
    /* this connection's pieces received and not yet credited back, and
     * the most of them seen at once: about what the feeder lets out (its
     * window, or the grant), which caps the credit batch */
    uint32_t unreturned, peak;
    zmq_msg_t welcome_frame; /* keeps the schema's strings alive */
    struct shm_map *map;     /* its shared memory, when this connection mapped it */
    /* rejoining after a loss (reconnect_ms > 0) */
    int rejoining;
    uint64_t lost_ns, deadline_ns;
    uint64_t retry_ns;   /* when sock is NULL: open a new connection then */
    uint64_t resume;     /* the seq asked for */
    uint32_t conn;       /* connections made after the first */
    int stalled;         /* lost again before a piece came: the wait goes on */
    char lost[128];      /* why it was taken for gone */
    char refused[SL_WIRE_MAX_REASON + 1]; /* its last REFUSE meanwhile */
    /* a feeder still starting (STATUS): HELLO again at rehello_ns (0: not
     * due); its answer is awaited until answer_by_ns, connect_timeout_ms
     * after its last word */
    uint64_t rehello_ns, answer_by_ns;
    int scanning;                 /* it has said STATUS */
    struct sl_wire_status status; /* its last */
    uint64_t status_log_ns;       /* when it was last logged */
    /* its STATS (SL_WIRE_HELLO_STATS): the last two, [0] the newer */
    struct sl_wire_stats stats[2];
    unsigned nstats;              /* received, up to 2 */
};

struct train_client {
    struct train_client_opts o;
    pid_t pid;                  /* the process that opened it (fork: see train_client.h) */
    void *ctx;
    struct feeder *f;
    struct sl_wire_welcome welcome;
    char names[SL_WIRE_MAX_TENSORS][SL_WIRE_MAX_NAME + 1];
    struct slot *slots;
    struct slot **free_slots;
    size_t nslots, nfree;
    struct train_reorder *reorder;
    struct slot **step_slots;   /* [R] slots of the step handed out, or being gathered */
    size_t ngot;                /* slots gathered so far for the next step */
    struct train_piece *pieces; /* [R] */
    int have_step;
    struct sl_buf buf;
    struct sl_wire_msg msg;
    int said_bye;               /* BYE sent (at the end of the stream, or at close) */
    struct sl_metrics *m;       /* o.metrics, or own_m */
    struct sl_metrics *own_m;
    uint64_t total;             /* pieces in the stream, once every feeder said END */
    unsigned monitors;          /* monitors made: each gets its own inproc name */
    uint64_t listened_ns;       /* when the last pump stopped listening (0: none yet) */
    /* the input wait by the feeder whose piece ended it (the piece next in
     * order when the step waited): ns, atomic (read by any thread) */
    uint64_t wait_by_feeder[TRAIN_CLIENT_MAX_FEEDERS];
};

static int feeder_error(struct train_client *c, int j, struct sl_error *err, int code, const char *fmt, ...)
    SL_PRINTF(5, 6);

/* A STATS from feeder j: kept beside the one before it. */
static void note_stats(struct train_client *c, size_t j, const struct sl_wire_stats *st)
{
    c->f[j].stats[1] = c->f[j].stats[0];
    c->f[j].stats[0] = *st;
    if (c->f[j].nstats < 2)
        c->f[j].nstats++;
}

static int feeder_error(struct train_client *c, int j, struct sl_error *err, int code, const char *fmt, ...)
{
    char what[SL_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return sl_error_set(err, code, "feeder %s: %s", c->f[j].addr, what);
}

static int send_buf(void *sock, const struct sl_buf *b)
{
    return zmq_send(sock, b->data, b->len, ZMQ_DONTWAIT) < 0 ? -1 : 0;
}

static void map_unref(struct shm_map *m)
{
    if (m != NULL && --m->refs == 0) {
        munmap((void *)m->base, m->size);
        sl_free(m);
    }
}

static struct shm_map *map_shm(struct feeder *f, const struct sl_wire_welcome *w);

/* Map feeder j's shared piece memory from its WELCOME and answer the offer
 * with a CREDIT (the feeder sends no piece before it): the SHM flag when
 * mapped. Anything amiss (another host: no such process or file, or a
 * different one under that pid; another user) leaves the connection on
 * copies: worth a line in the log, not an error. */
static int attach_shm(struct train_client *c, size_t j, const struct sl_wire_welcome *w, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    if (w->shm_size == 0) /* nothing offered (or not asked for) */
        return 0;
    struct shm_map *m = c->o.no_shm ? NULL : map_shm(f, w);
    struct sl_wire_credit cr = {.credits = 0, .flags = m != NULL ? SL_WIRE_CREDIT_SHM : 0};
    if (sl_wire_encode_credit(&cr, &c->buf) != 0 || send_buf(f->sock, &c->buf) != 0) {
        map_unref(m);
        return feeder_error(c, (int)j, err, SL_EIO, "send CREDIT: %s", zmq_strerror(errno));
    }
    f->map = m;
    return 0;
}

static struct shm_map *map_shm(struct feeder *f, const struct sl_wire_welcome *w)
{
    if (w->shm_size > SIZE_MAX)
        return NULL;
    char path[64];
    snprintf(path, sizeof path, "/proc/%" PRIu32 "/fd/%" PRIu32, w->shm_pid, w->shm_fd);
    const char *why = NULL;
    struct stat st;
    void *p = MAP_FAILED;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        why = strerror(errno);
    else if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != w->shm_size)
        why = "not the size the feeder gave";
    else if ((p = mmap(NULL, (size_t)w->shm_size, PROT_READ, MAP_SHARED, fd, 0)) == MAP_FAILED)
        why = strerror(errno);
    if (fd >= 0)
        close(fd);
    if (why == NULL) {
        const uint8_t *b = p;
        uint64_t token = 0;
        for (int i = 0; i < 8; i++)
            token |= (uint64_t)b[8 + i] << (8 * i);
        if (memcmp(b, "SLSHM001", 8) != 0 || token != w->shm_token)
            why = "another process's memory (another host?)";
    }
    struct shm_map *m = why == NULL ? sl_calloc(1, sizeof *m) : NULL;
    if (why == NULL && m == NULL)
        why = "out of memory";
    if (why != NULL) {
        if (p != MAP_FAILED)
            munmap(p, (size_t)w->shm_size);
        sl_log(SL_LOG_INFO, "feeder %s: its shared memory (%s) cannot be mapped: %s; pieces come by copy", f->addr,
               path, why);
        return NULL;
    }
    m->base = p;
    m->size = (size_t)w->shm_size;
    m->refs = 1;
    sl_log(SL_LOG_INFO, "feeder %s: pieces through shared memory (%.1f MB mapped)", f->addr,
           (double)w->shm_size / 1e6);
    return m;
}

/* Feeder j's connection is over: its mapping lives on in the slots that
 * still use it. */
static void detach_shm(struct feeder *f)
{
    map_unref(f->map);
    f->map = NULL;
}

/* Credits go back in batches (one message per several pieces instead of
 * one per piece: each is a round of wake-ups in both processes), or all at
 * once when `all`. A batch is a quarter of the grant, but at most half of
 * what the feeder has been seen to let out: a feeder whose window is
 * smaller than the grant waits for those credits, and half its window
 * keeps it working while the other half comes back. */
static void give_credits(struct train_client *c, int all)
{
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
        if (sl_wire_encode_credit(&cr, &c->buf) == 0 && send_buf(f->sock, &c->buf) == 0) {
            f->unreturned = f->unreturned > f->owed ? f->unreturned - f->owed : 0;
            f->owed = 0;
        }
    }
}

static void heartbeats(struct train_client *c)
{
    uint64_t now = sl_clock_ns();
    for (size_t j = 0; j < c->o.nfeeders; j++) {
        struct feeder *f = &c->f[j];
        if (f->rejoining || now - f->last_hb_ns < (uint64_t)c->o.heartbeat_ms * 1000000u)
            continue;
        struct sl_wire_heartbeat h = {.sent_ns = now};
        if (sl_wire_encode_heartbeat(&h, &c->buf) == 0)
            (void)send_buf(f->sock, &c->buf);
        f->last_hb_ns = now;
    }
}

static void release_slot(struct train_client *c, struct slot *s)
{
    zmq_msg_close(&s->hdr);
    for (size_t i = 0; i < s->nframes; i++)
        zmq_msg_close(&s->frames[i]);
    s->nframes = 0;
    s->busy = 0;
    map_unref(s->map);
    s->map = NULL;
    sl_free(s->copy);
    s->copy = NULL;
    s->body = NULL;
    if (s->conn == c->f[s->feeder].conn) /* an old connection's credit is gone with it */
        c->f[s->feeder].owed++;
    c->free_slots[c->nfree++] = s;
}

/* After fork() the child's copy shares the parent's sockets (without
 * ZeroMQ's threads) and its view of the feeders' shared memory: no call
 * may hand out data from it or send on it. getpid() is one system call. */
static int forked(const struct train_client *c)
{
    return getpid() != c->pid;
}

static int refuse_forked(const struct train_client *c, struct sl_error *err)
{
    return sl_error_set(err, SL_EINVAL,
                        "client used after fork(): create a new client in the child (this one belongs to process "
                        "%ld)",
                        (long)c->pid);
}

/* Receive one message from feeder j (it is readable). */
static int receive(struct train_client *c, int j, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    if (c->nfree == 0)
        return feeder_error(c, j, err, SL_EPROTO, "sent more pieces than it had credits for");
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
        return errno == EAGAIN ? 0 : feeder_error(c, j, err, SL_EIO, "receive: %s", zmq_strerror(errno));
    }
    f->last_seen_ns = sl_clock_ns();
    int more = zmq_msg_more(&s->hdr);
    while (more) {
        if (s->nframes == sizeof s->frames / sizeof s->frames[0]) {
            rc = feeder_error(c, j, err, SL_EPROTO, "more than %zu frames after a header (a PIECE has one body frame)",
                              s->nframes);
            break;
        }
        zmq_msg_t *m = &s->frames[s->nframes];
        zmq_msg_init(m);
        if (zmq_msg_recv(m, f->sock, 0) < 0) {
            zmq_msg_close(m);
            rc = feeder_error(c, j, err, SL_EIO, "receive: %s", zmq_strerror(errno));
            break;
        }
        s->nframes++;
        more = zmq_msg_more(m);
    }
    struct sl_error derr = {0};
    if (rc == 0 && sl_wire_decode(zmq_msg_data(&s->hdr), zmq_msg_size(&s->hdr), &c->msg, &derr) != 0)
        rc = feeder_error(c, j, err, SL_EPROTO, "%s", derr.msg);
    if (rc != 0) {
        release_slot(c, s);
        f->owed--;
        return rc;
    }
    switch (c->msg.type) {
    case SL_WIRE_PIECE: {
        f->stalled = 0;
        if (f->awaiting_first) {
            f->awaiting_first = 0;
            sl_log(SL_LOG_INFO, "feeder %s: piece %" PRIu64 ", the share's first since its loss, came %.3f s after it",
                   f->addr, c->msg.piece.seq, (double)(sl_clock_ns() - f->lost_ns) / 1e9);
        }
        s->piece = c->msg.piece;
        const struct sl_wire_piece *p = &s->piece;
        int shared = (p->flags & SL_WIRE_PIECE_SHM) != 0;
        if (sl_wire_check_piece(p, &c->welcome, &derr) != 0)
            rc = feeder_error(c, j, err, SL_EPROTO, "piece %" PRIu64 ": %s", p->seq, derr.msg);
        else if (shared && f->map == NULL)
            rc = feeder_error(c, j, err, SL_EPROTO, "piece %" PRIu64 " is in shared memory, but none is mapped",
                              p->seq);
        else if (shared && (s->nframes != 0 || p->shm_offset + p->shm_bytes > f->map->size))
            rc = feeder_error(c, j, err, SL_EPROTO,
                              "piece %" PRIu64 ": shared memory [%" PRIu64 ", %" PRIu64 ") past its %zu bytes, or "
                              "with %zu frames",
                              p->seq, p->shm_offset, p->shm_offset + p->shm_bytes, f->map->size, s->nframes);
        else if (!shared && s->nframes != (p->ntensors > 0 ? 1u : 0u))
            rc = feeder_error(c, j, err, SL_EPROTO, "piece %" PRIu64 ": %u tensors in %zu frames (one body frame)",
                              p->seq, p->ntensors, s->nframes);
        else if (p->worker != c->o.worker)
            rc = feeder_error(c, j, err, SL_EPROTO, "piece %" PRIu64 " is for worker %u, this is worker %u", p->seq,
                              p->worker, c->o.worker);
        else if (p->seq % c->o.nfeeders != (uint64_t)j)
            rc = feeder_error(c, j, err, SL_EPROTO, "piece %" PRIu64 " does not belong to feeder %d of %zu", p->seq,
                              j, c->o.nfeeders);
        if (rc == 0 && shared && sl_wire_check_body(p, (size_t)p->shm_bytes, &derr) != 0)
            rc = feeder_error(c, j, err, SL_EPROTO, "piece %" PRIu64 ": %s", p->seq, derr.msg);
        if (rc == 0 && !shared && s->nframes == 1 && sl_wire_check_body(p, zmq_msg_size(&s->frames[0]), &derr) != 0)
            rc = feeder_error(c, j, err, SL_EPROTO, "piece %" PRIu64 ": %s", p->seq, derr.msg);
        if (rc == 0 && shared) {
            s->map = f->map;
            s->map->refs++;
            s->body = f->map->base + p->shm_offset;
            sl_metrics_add(c->m, TRAIN_M_SHM_PIECES, 1);
        } else if (rc == 0 && s->nframes == 1) {
            s->body = zmq_msg_data(&s->frames[0]);
        }
        if (rc == 0 && (rc = train_reorder_put(c->reorder, p->seq, s, &derr)) != 0)
            rc = feeder_error(c, j, err, rc, "%s", derr.msg);
        if (rc != 0) {
            release_slot(c, s);
            f->owed--;
        } else if (++f->unreturned > f->peak) {
            f->peak = f->unreturned;
        }
        return rc;
    }
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
        rc = feeder_error(c, j, err, c->msg.error.code < 0 ? c->msg.error.code : SL_EPROTO, "%.*s",
                          (int)c->msg.error.msg_len, c->msg.error.msg);
        break;
    case SL_WIRE_HEARTBEAT:
        break;
    case SL_WIRE_STATS:
        note_stats(c, j, &c->msg.stats);
        break;
    case SL_WIRE_REFUSE:
        rc = feeder_error(c, j, err, SL_EPROTO, "refused: %.*s", (int)c->msg.refuse.reason_len, c->msg.refuse.reason);
        break;
    default:
        rc = feeder_error(c, j, err, SL_EPROTO, "unexpected %s message", sl_wire_type_name(c->msg.type));
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

/* A closed connection counts as a lost feeder once this long has passed
 * without its END: messages sent before the close may still be on their
 * way through ZeroMQ when the monitor's event comes. */
#define CLOSED_GRACE_NS 200000000u

/* What the monitor of a feeder's socket reports. */
#define MONITOR_EVENTS                                                                                                \
    (ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |          \
     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED)

/* A connection closed during the handshake this many times running (and
 * none completed) is a handshake that fails: a CURVE server closes the
 * connection when it cannot read the client's HELLO (the client holds the
 * wrong server key) and ZeroMQ reconnects, so it repeats every 100 ms;
 * once can be a feeder that died while the trainer connected. */
#define HS_CLOSED_MAX 3

static int open_socket(struct train_client *c, size_t j, struct sl_error *err)
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
    f->mon = zmq_socket(c->ctx, ZMQ_PAIR);
    f->hs_event = 0;
    f->hs_value = 0;
    f->hs_closed = 0;
    if (f->mon == NULL || zmq_socket_monitor(f->sock, mon_addr, MONITOR_EVENTS) != 0 ||
        zmq_connect(f->mon, mon_addr) != 0)
        return sl_error_set(err, SL_EIO, "socket monitor for %s: %s", f->addr, zmq_strerror(errno));
    /* CURVE: the key of the feeder at this address (a takeover's host) */
    if (c->o.curve != NULL && sl_curve_client(f->sock, c->o.curve, c->o.curve_server[f->host], err) != 0)
        return sl_error_prefix(err, "feeder %s: ", f->addr);
    if (sl_endpoint_connect(f->sock, f->addr, err) != 0)
        return SL_EINVAL;
    return 0;
}

/* The first seq at or after `from` in share j (seq % F == j). */
static uint64_t first_of_share(const struct train_client *c, uint64_t from, size_t j)
{
    uint64_t nf = c->o.nfeeders;
    return from + (j + nf - from % nf) % nf;
}

static int send_hello(struct train_client *c, size_t j, uint32_t credits, uint64_t resume, struct sl_error *err)
{
    /* STATUS: a feeder still scanning its files says so, and this HELLO
     * comes again after the retry it asks for */
    struct sl_wire_hello h = {.worker = c->o.worker, .workers = c->o.workers, .replicas = c->o.replicas,
                              .credits = credits, .incarnation = c->o.incarnation, .share = (uint32_t)j,
                              .flags = (c->o.no_shm ? 0 : SL_WIRE_HELLO_SHM) | SL_WIRE_HELLO_STATUS |
                                       SL_WIRE_HELLO_STATS,
                              .heartbeat_ms = (uint32_t)c->o.heartbeat_ms,
                              .resume_seq = resume, .job = c->o.job, .job_len = strlen(c->o.job)};
    if (sl_wire_encode_hello(&h, &c->buf) != 0)
        return sl_error_set(err, SL_EINVAL, "cannot encode HELLO (job name 1-%d bytes, worker < workers)",
                            SL_WIRE_MAX_JOB);
    if (send_buf(c->f[j].sock, &c->buf) != 0)
        return feeder_error(c, (int)j, err, SL_EIO, "send HELLO: %s", zmq_strerror(errno));
    return 0;
}

/* A WELCOME from feeder j: its place among the feeders, and (unless it is
 * the first) the same plan and schema as the first one's. */
static int check_welcome(struct train_client *c, size_t j, const struct sl_wire_welcome *w, int first,
                         struct sl_error *err)
{
    if (w->feeders != c->o.nfeeders || w->feeder != c->f[j].host)
        return feeder_error(c, (int)j, err, SL_EPROTO,
                            "is feeder %u of %u, but was given as feeder %u of %zu (list the feeders in index order)",
                            w->feeder, w->feeders, c->f[j].host, c->o.nfeeders);
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
        return feeder_error(c, (int)j, err, SL_EPROTO,
                            "disagrees with feeder 0 on the plan (steps %" PRIu64 " vs %" PRIu64 ", epochs %" PRIu64
                            " vs %" PRIu64 ", tensors %u vs %u)",
                            w->steps_per_epoch, c->welcome.steps_per_epoch, w->epochs, c->welcome.epochs, w->ntensors,
                            c->welcome.ntensors);
    for (size_t i = 0; i < w->ntensors; i++) {
        const struct sl_wire_field *a = &w->fields[i], *b = &c->welcome.fields[i];
        int same = a->name_len == strlen(b->name) && memcmp(a->name, b->name, a->name_len) == 0 &&
                   a->dtype == b->dtype && a->ragged == b->ragged && a->rank == b->rank;
        for (int d = 0; same && d < a->rank; d++)
            same = a->dims[d] == b->dims[d];
        if (!same)
            return feeder_error(c, (int)j, err, SL_EPROTO, "disagrees with feeder 0 on tensor %zu ('%.*s' vs '%s')",
                                i, (int)a->name_len, a->name, b->name);
    }
    return 0;
}

/* A STATUS from feeder j: it is alive and starting. Logged the first
 * time, then when its figures change (at most every 5 s) or every 30 s;
 * HELLO goes again after the retry it asks for (at most a quarter of the
 * connect timeout, so one lost answer cannot use it all up). */
#define STATUS_LOG_CHANGED_NS 5000000000u
#define STATUS_LOG_SAME_NS 30000000000u

static void note_status(struct train_client *c, size_t j, const struct sl_wire_status *st)
{
    struct feeder *f = &c->f[j];
    uint64_t now = sl_clock_ns();
    int changed = st->files_done != f->status.files_done || st->files != f->status.files ||
                  st->records != f->status.records;
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

/* Rejoining feeder j: a new connection, HELLO with the resume point and
 * the full grant. */
static int rejoin_connect(struct train_client *c, size_t j, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    f->owed = 0;
    f->retry_ns = 0;
    f->rehello_ns = 0;
    int rc = open_socket(c, j, err);
    if (rc == 0)
        rc = send_hello(c, j, c->o.credits, f->resume, err);
    return rc;
}

/* Close feeder j's socket and its monitor. */
static void close_socket(struct feeder *f)
{
    train_monitor_close(f->sock, f->mon); /* linger 0 unless the caller set one */
    f->sock = NULL;
    f->mon = NULL;
}

/* Drain feeder j's monitor; note when its connection closed. */
static void read_monitor(struct feeder *f)
{
    for (;;) {
        zmq_msg_t ev;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, f->mon, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        uint16_t event = 0;
        uint32_t value = 0;
        if (zmq_msg_size(&ev) >= 6) {
            memcpy(&event, zmq_msg_data(&ev), sizeof event);
            memcpy(&value, (const uint8_t *)zmq_msg_data(&ev) + 2, sizeof value);
        }
        int more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        if (more) { /* the endpoint */
            zmq_msg_init(&ev);
            (void)zmq_msg_recv(&ev, f->mon, 0);
            zmq_msg_close(&ev);
        }
        if (event == ZMQ_EVENT_DISCONNECTED && f->closed_ns == 0)
            f->closed_ns = sl_clock_ns();
        if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
            f->hs_closed = 0;
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL && ++f->hs_closed < HS_CLOSED_MAX)
            continue;
        if ((event & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                      ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)) && f->hs_event == 0) {
            f->hs_event = event;
            f->hs_value = value;
        }
    }
}

static const struct train_client_names trainer_names = {"--connect-timeout", "--curve-key", "--curve-server-key", 0};

/* The option names for messages: the caller's, else sluice-trainer's. */
static const struct train_client_names *names_of(const struct train_client *c)
{
    return c->o.names != NULL ? c->o.names : &trainer_names;
}

/* Share j's connection failed its handshake (read_monitor saw it): an
 * error saying why, as far as libzmq tells; 0 when it did not. A takeover
 * connection names the survivor's address, whose key it used. */
static int handshake_failed(struct train_client *c, size_t j, struct sl_error *err)
{
    const struct feeder *f = &c->f[j];
    const struct train_client_names *nm = names_of(c);
    int curve = c->o.curve != NULL;
    switch (f->hs_event) {
    case 0:
        return 0;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        return feeder_error(c, (int)j, err, SL_EPROTO,
                            "the CURVE handshake failed: the feeder refused this trainer's key (ZAP status %u): this "
                            "trainer's public key is not on the feeder's allow-list (add its NAME.pub to the "
                            "feeder's --curve-allow directory and send the feeder SIGHUP)",
                            f->hs_value);
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
        if (f->hs_value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH) {
            if (curve)
                return feeder_error(c, (int)j, err, SL_EPROTO,
                                    "the handshake failed: this trainer uses CURVE (%s) and the feeder does not "
                                    "(started without --curve-key?): give both sides keys, or neither",
                                    nm->curve_key);
            return feeder_error(c, (int)j, err, SL_EPROTO,
                                "the handshake failed: the feeder requires CURVE and this trainer has no keys: "
                                "give %s and %s (docs/security.md)", nm->curve_key, nm->curve_server_key);
        }
        if (curve)
            return feeder_error(c, (int)j, err, SL_EPROTO,
                                "the CURVE handshake failed (protocol error 0x%08x): the feeder refused this "
                                "trainer's key, or %s is not this feeder's key", f->hs_value, nm->curve_server_key);
        return feeder_error(c, (int)j, err, SL_EPROTO, "the ZeroMQ handshake failed (protocol error 0x%08x)",
                            f->hs_value);
    default:
        if (curve)
            return feeder_error(c, (int)j, err, SL_EPROTO,
                                "the CURVE handshake failed (the feeder refused this trainer's key, or "
                                "%s is not this feeder's key, or the feeder does not use CURVE: "
                                "the connection closed during the handshake %u times)",
                                nm->curve_server_key, f->hs_closed);
        return feeder_error(c, (int)j, err, SL_EPROTO,
                            "the connection closed during the ZeroMQ handshake %u times: is a sluice feeder "
                            "listening at that address, and does it use CURVE (then give %s and %s)?",
                            f->hs_closed, nm->curve_key, nm->curve_server_key);
    }
}

static void close_probe(struct feeder *f, uint64_t next_ns)
{
    if (f->probe != NULL)
        zmq_close(f->probe); /* linger 0: nothing of it is owed */
    f->probe = NULL;
    f->probe_ns = next_ns;
}

/* Share j's connection is over: lost (back = 0), or handed back to its own
 * feeder, which answered a probe (back = 1). Its pieces not handed out are
 * let go, to come again on a new connection from the first one missing:
 * the share's own feeder's, and after takeover_ms (at once when the one
 * lost had itself taken the share over) a survivor's. */
static int start_rejoin(struct train_client *c, size_t j, int back, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    uint64_t nf = c->o.nfeeders, next = train_reorder_next(c->reorder);
    /* its first piece the caller has not had: every seq before next was */
    uint64_t resume = first_of_share(c, next, j);
    /* a new connection: nothing of the old one gives credit back now */
    f->conn++;
    f->unreturned = f->peak = 0;
    /* what of it waits in the reorder window comes again */
    for (uint64_t seq = resume; seq < next + c->nslots; seq += nf) {
        struct slot *s = train_reorder_take(c->reorder, seq);
        if (s != NULL)
            release_slot(c, s);
    }
    /* what of it is already in the step being gathered stays, out of its
     * shared memory: the feeder reuses those buffers once it has the new
     * HELLO */
    for (size_t r = 0; r < c->ngot; r++) {
        struct slot *s = c->step_slots[r];
        if (s->feeder != (int)j || s->map == NULL)
            continue;
        uint8_t *copy = sl_malloc(s->piece.shm_bytes ? (size_t)s->piece.shm_bytes : 1);
        if (copy == NULL)
            return feeder_error(c, (int)j, err, SL_ENOMEM, "out of memory copying piece %" PRIu64, s->piece.seq);
        memcpy(copy, s->body, (size_t)s->piece.shm_bytes);
        s->copy = copy;
        s->body = copy;
        map_unref(s->map);
        s->map = NULL;
    }
    detach_shm(f);
    close_probe(f, 0);
    if (back && f->sock != NULL && sl_wire_encode_bye(&c->buf) == 0) {
        /* the survivor lets the share go at once */
        sl_zsock_linger(f->sock, 100);
        (void)send_buf(f->sock, &c->buf);
    }
    close_socket(f);
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
        sl_metrics_add(c->m, TRAIN_M_REJOINS, 1);
    uint32_t was = f->host;
    /* the share's own feeder first (it may be back at its address); a
     * survivor takes the share after takeover_ms, or at once when the one
     * lost was itself a survivor that had taken it */
    f->host = (uint32_t)j;
    f->addr = c->o.feeders[j];
    f->takeover_ns = c->o.takeover_ms <= 0             ? 0
                     : was != j && !back ? f->lost_ns
                                         : f->lost_ns + (uint64_t)c->o.takeover_ms * 1000000u;
    if (back)
        sl_log(SL_LOG_INFO, "feeder %s is back: it takes its share back from feeder %s at piece %" PRIu64, f->addr,
               c->o.feeders[was], resume);
    else if (was != j)
        sl_log(SL_LOG_WARN, "feeder %s, which had taken over feeder %zu's share: %s; another feeder takes it, from "
               "piece %" PRIu64, c->o.feeders[was], j, f->lost, resume);
    else if (c->o.takeover_ms > 0)
        sl_log(SL_LOG_WARN, "feeder %s: %s; waiting %.1f s for it to come back, then a surviving feeder takes its "
               "share, from piece %" PRIu64, f->addr, f->lost, (double)c->o.takeover_ms / 1e3, resume);
    else
        sl_log(SL_LOG_WARN, "feeder %s: %s; waiting up to %.0f s for it to come back, to resume at piece %" PRIu64,
               f->addr, f->lost, (double)c->o.reconnect_ms / 1e3, resume);
    return rejoin_connect(c, j, err);
}


/* Shares served by a survivor: every max(1 s, takeover_ms) their own
 * feeder is asked, on a probe connection, with a HELLO for the share and no
 * credits (so it sends nothing); a WELCOME from it (the right feeder, index
 * and count) means it is back and serving: the share goes back to it, from
 * the first piece not handed out, as in a rejoin (its new connection, of
 * the same incarnation, replaces the probe's at once). A STATUS (still
 * scanning), a REFUSE or silence for the heartbeat timeout: asked again
 * later. The survivor serves on meanwhile. */
static int probes(struct train_client *c, uint64_t now, struct sl_error *err)
{
    uint64_t every = (uint64_t)(c->o.takeover_ms > 1000 ? c->o.takeover_ms : 1000) * 1000000u;
    for (size_t j = 0; j < c->o.nfeeders; j++) {
        struct feeder *f = &c->f[j];
        if (f->host == j || f->rejoining || !f->welcomed || f->ended || c->o.takeover_ms <= 0) {
            close_probe(f, 0);
            continue;
        }
        if (f->probe == NULL) {
            if (f->probe_ns == 0) {
                f->probe_ns = now + every;
            } else if (now >= f->probe_ns) {
                const struct sl_zsock_opts zo = {
                    .max_msg = SL_WIRE_MAX_HEADER + (c->o.curve != NULL ? SL_CURVE_FRAME_OVERHEAD : 0)};
                f->probe = sl_zsock_open(c->ctx, ZMQ_DEALER, &zo, c->o.feeders[j], err);
                if (f->probe == NULL)
                    return SL_EIO;
                /* the share's own feeder: its key (a failed handshake is
                 * silence here; the probe is asked again later) */
                if (c->o.curve != NULL &&
                    sl_curve_client(f->probe, c->o.curve, c->o.curve_server[j], err) != 0)
                    return sl_error_prefix(err, "feeder %s: ", c->o.feeders[j]);
                struct sl_wire_hello h = {.worker = c->o.worker, .workers = c->o.workers, .replicas = c->o.replicas,
                                          .credits = 0, .flags = SL_WIRE_HELLO_STATUS,
                                          .heartbeat_ms = (uint32_t)c->o.heartbeat_ms,
                                          .resume_seq = first_of_share(c, train_reorder_next(c->reorder), j),
                                          .incarnation = c->o.incarnation, .share = (uint32_t)j, .job = c->o.job,
                                          .job_len = strlen(c->o.job)};
                if (sl_endpoint_connect(f->probe, c->o.feeders[j], NULL) != 0 || sl_wire_encode_hello(&h, &c->buf) != 0 ||
                    send_buf(f->probe, &c->buf) != 0)
                    close_probe(f, now + every);
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
                close_probe(f, now + every);
            continue;
        }
        struct sl_error derr = {0};
        int back = !zmq_msg_more(&m) &&
                   sl_wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), &c->msg, &derr) == 0 &&
                   c->msg.type == SL_WIRE_WELCOME && c->msg.welcome.feeder == j &&
                   c->msg.welcome.feeders == c->o.nfeeders;
        zmq_msg_close(&m);
        close_probe(f, back ? 0 : now + every);
        if (back) {
            int rc = start_rejoin(c, j, 1, err);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

/* Feeder k is alive: a connection to it is up (welcomed, not lost). */
static int host_alive(const struct train_client *c, uint32_t k)
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
static int try_takeover(struct train_client *c, size_t j, struct sl_error *err)
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
    close_socket(f);
    f->host = best;
    f->addr = c->o.feeders[best];
    f->takeover_ns = 0;
    /* a survivor answers at once: its answer is waited for at least a
     * heartbeat timeout */
    uint64_t by = now + (uint64_t)c->o.timeout_ms * 1000000u;
    if (by > f->deadline_ns)
        f->deadline_ns = by;
    sl_log(SL_LOG_WARN, "feeder %s: not back within %.1f s; asking feeder %s to take over its share from piece %" PRIu64,
           c->o.feeders[j], (double)(now - f->lost_ns) / 1e9, f->addr, f->resume);
    return rejoin_connect(c, j, err);
}

/* Share j has had no feeder for too long: the error names every feeder
 * and why it could not serve the share. */
static int lost_for_good(struct train_client *c, size_t j, struct sl_error *err)
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
                                : host_alive(c, k)          ? "did not answer"
                                                            : "lost too";
            n += (size_t)snprintf(why + n, sizeof why - n, " %s %s;", c->o.feeders[k], state);
        }
        if (n < sizeof why && why[n - 1] == ';')
            why[n - 1] = '\0';
    }
    return sl_error_set(err, SL_ETIMEOUT, "%s", why);
}

/* The answer to a rejoining HELLO. */
static int rejoin_receive(struct train_client *c, size_t j, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, f->sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return errno == EAGAIN ? 0 : feeder_error(c, (int)j, err, SL_EIO, "receive: %s", zmq_strerror(errno));
    }
    int rc = 0;
    struct sl_error derr = {0};
    if (zmq_msg_more(&m))
        rc = feeder_error(c, (int)j, err, SL_EPROTO, "expected WELCOME, got a message of several frames");
    else if (sl_wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), &c->msg, &derr) != 0)
        rc = feeder_error(c, (int)j, err, SL_EPROTO, "%s", derr.msg);
    else if (c->msg.type == SL_WIRE_WELCOME) {
        if ((rc = check_welcome(c, j, &c->msg.welcome, 0, err)) == 0 &&
            (rc = attach_shm(c, j, &c->msg.welcome, err)) == 0) {
            f->rejoining = 0;
            f->welcomed = 1;
            f->takeover_ns = 0;
            f->last_seen_ns = f->last_hb_ns = sl_clock_ns();
            if (f->host != j) {
                sl_metrics_add(c->m, TRAIN_M_TAKEOVERS, 1);
                sl_log(SL_LOG_WARN, "feeder %s took over feeder %s's share %.1f s after its loss: resuming at piece %"
                       PRIu64, f->addr, c->o.feeders[j], (double)(f->last_seen_ns - f->lost_ns) / 1e9, f->resume);
            } else {
                sl_log(SL_LOG_INFO, "feeder %s is back after %.1f s: resuming at piece %" PRIu64, f->addr,
                       (double)(f->last_seen_ns - f->lost_ns) / 1e9, f->resume);
            }
        }
    } else if (c->msg.type == SL_WIRE_STATUS) {
        /* back, and scanning its files (a restarted feeder): wait for it
         * as long as it keeps answering, as at start */
        note_status(c, j, &c->msg.status);
        if (f->answer_by_ns > f->deadline_ns)
            f->deadline_ns = f->answer_by_ns;
    } else if (c->msg.type == SL_WIRE_REFUSE) {
        /* e.g. the old process still holds this worker: ask again shortly;
         * a survivor that will not take the share over is not asked again,
         * another one is (at once), else the share's own feeder */
        snprintf(f->refused, sizeof f->refused, "%.*s", (int)c->msg.refuse.reason_len, c->msg.refuse.reason);
        close_socket(f);
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
        rc = feeder_error(c, (int)j, err, SL_EPROTO, "expected WELCOME, got %s", sl_wire_type_name(c->msg.type));
    }
    zmq_msg_close(&m);
    return rc;
}

/* Poll every feeder once (up to timeout_ms) and take what arrived. It is
 * called when no step is ready: whatever credit is owed goes back first,
 * since a feeder whose window is full waits for exactly that (holding a
 * partial batch back while blocking would stall both sides until the poll
 * timed out). */
static int stopped(const struct train_client *c, const char *what, struct sl_error *err)
{
    if (c->o.stop == NULL || !*c->o.stop)
        return 0;
    return sl_error_set(err, SL_ECLOSED, "stopped by a signal while %s", what);
}

/* A pause of our own longer than a quarter of the timeout: not counted as
 * any feeder's silence. */
static void forgive_pause(struct train_client *c, uint64_t pause_ns)
{
    if (pause_ns <= (uint64_t)c->o.timeout_ms * 250000u)
        return;
    uint64_t now = sl_clock_ns();
    for (size_t j = 0; j < c->o.nfeeders; j++) {
        uint64_t *seen = &c->f[j].last_seen_ns;
        *seen = *seen + pause_ns < now ? *seen + pause_ns : now; /* never in the future */
    }
}

static int pump(struct train_client *c, int timeout_ms, struct sl_error *err)
{
    if (stopped(c, "waiting for the feeders", err) != 0)
        return SL_ECLOSED;
    give_credits(c, 1);
    /* every share: its socket and its monitor */
    zmq_pollitem_t items[2 * TRAIN_CLIENT_MAX_FEEDERS];
    size_t idx[2 * TRAIN_CLIENT_MAX_FEEDERS], n = 0;
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
                int rc = rejoin_connect(c, j, err);
                if (rc != 0)
                    return rc;
            } else if ((f->retry_ns - now) / 1000000u < (uint64_t)timeout_ms) {
                timeout_ms = (int)((f->retry_ns - now) / 1000000u) + 1;
            }
        } else if (f->rejoining && f->rehello_ns != 0) {
            /* a restarted feeder still scanning: ask again when it said */
            if (now >= f->rehello_ns) {
                f->rehello_ns = 0;
                int rc = send_hello(c, j, c->o.credits, f->resume, err);
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
                read_monitor(&c->f[j]);
            int rc = handshake_failed(c, j, err);
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
            int rc = c->f[j].rejoining ? rejoin_receive(c, j, err) : receive(c, (int)j, err);
            if (rc != 0)
                return rc;
        }
    }
    now = sl_clock_ns();
    for (size_t j = 0; j < c->o.nfeeders; j++) {
        struct feeder *f = &c->f[j];
        if (f->rejoining) {
            /* the survivor asked to take the share over was lost itself
             * before it answered: ask another at once */
            if (c->o.takeover_ms > 0 && f->host != j && f->takeover_ns == 0 && !host_alive(c, f->host)) {
                sl_log(SL_LOG_WARN, "feeder %s, asked to take over feeder %s's share, was lost too; asking another",
                       f->addr, c->o.feeders[j]);
                close_socket(f); /* meanwhile, the share's own address again */
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
            return feeder_error(c, (int)j, err, SL_ETIMEOUT, "%s", f->lost);
        int rc = start_rejoin(c, j, 0, err);
        if (rc != 0)
            return rc;
    }
    int rc = probes(c, now, err);
    if (rc != 0)
        return rc;
    heartbeats(c);
    c->listened_ns = sl_clock_ns();
    return 0;
}

/* Feeder j's answer to HELLO, while the handshake waits: a WELCOME, a
 * STATUS (it is scanning: HELLO again later), a heartbeat; anything else
 * is an error. Every message counts as a sign of life. */
static int handshake_receive(struct train_client *c, size_t j, size_t *welcomed, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    zmq_msg_t *m = &f->welcome_frame;
    zmq_msg_close(m); /* an earlier STATUS or HEARTBEAT */
    zmq_msg_init(m);
    if (zmq_msg_recv(m, f->sock, ZMQ_DONTWAIT) < 0)
        return errno == EAGAIN ? 0 : feeder_error(c, (int)j, err, SL_EIO, "receive: %s", zmq_strerror(errno));
    if (zmq_msg_more(m))
        return feeder_error(c, (int)j, err, SL_EPROTO, "expected WELCOME, got a message of several frames");
    struct sl_error derr = {0};
    if (sl_wire_decode(zmq_msg_data(m), zmq_msg_size(m), &c->msg, &derr) != 0)
        return feeder_error(c, (int)j, err, SL_EPROTO, "%s", derr.msg);
    f->answer_by_ns = sl_clock_ns() + (uint64_t)c->o.connect_timeout_ms * 1000000u;
    switch (c->msg.type) {
    case SL_WIRE_REFUSE:
        return feeder_error(c, (int)j, err, SL_EPROTO, "refused: %.*s", (int)c->msg.refuse.reason_len,
                            c->msg.refuse.reason);
    case SL_WIRE_HEARTBEAT:
        return 0;
    case SL_WIRE_STATS:
        note_stats(c, j, &c->msg.stats);
        return 0;
    case SL_WIRE_STATUS:
        note_status(c, j, &c->msg.status);
        return 0;
    case SL_WIRE_WELCOME:
        break;
    default:
        return feeder_error(c, (int)j, err, SL_EPROTO, "expected WELCOME, got %s", sl_wire_type_name(c->msg.type));
    }
    int rc = check_welcome(c, j, &c->msg.welcome, *welcomed == 0, err);
    if (rc == 0 && f->scanning)
        sl_log(SL_LOG_INFO, "feeder %s: done scanning, serving", f->addr);
    if (rc == 0)
        rc = attach_shm(c, j, &c->msg.welcome, err);
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
static int handshake(struct train_client *c, struct sl_error *err)
{
    uint64_t wait_ns = (uint64_t)c->o.connect_timeout_ms * 1000000u;
    for (size_t j = 0; j < c->o.nfeeders; j++) {
        int rc = send_hello(c, j, c->o.credits, c->o.resume_seq, err);
        if (rc != 0)
            return rc;
        c->f[j].answer_by_ns = sl_clock_ns() + wait_ns;
    }
    size_t welcomed = 0;
    while (welcomed < c->o.nfeeders) {
        if (stopped(c, "waiting for the feeders' answers to HELLO", err) != 0)
            return SL_ECLOSED;
        uint64_t now = sl_clock_ns();
        zmq_pollitem_t items[2 * TRAIN_CLIENT_MAX_FEEDERS];
        size_t idx[2 * TRAIN_CLIENT_MAX_FEEDERS], n = 0;
        int timeout_ms = 100;
        for (size_t j = 0; j < c->o.nfeeders; j++) {
            struct feeder *f = &c->f[j];
            if (f->welcomed) {
                if (now - f->last_hb_ns >= (uint64_t)c->o.heartbeat_ms * 1000000u) {
                    struct sl_wire_heartbeat h = {.sent_ns = now};
                    if (sl_wire_encode_heartbeat(&h, &c->buf) == 0)
                        (void)send_buf(f->sock, &c->buf);
                    f->last_hb_ns = now;
                }
                continue;
            }
            if (f->rehello_ns != 0 && now >= f->rehello_ns) {
                f->rehello_ns = 0;
                int rc = send_hello(c, j, c->o.credits, c->o.resume_seq, err);
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
            read_monitor(&c->f[idx[i]]);
            int rc = handshake_failed(c, idx[i], err);
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
                const struct train_client_names *nm = names_of(c);
                char given[96];
                if (nm->in_ms)
                    snprintf(given, sizeof given, "%s=%d", nm->connect_timeout, c->o.connect_timeout_ms);
                else
                    snprintf(given, sizeof given, "%s %.0f s", nm->connect_timeout,
                             (double)c->o.connect_timeout_ms / 1e3);
                return feeder_error(c, (int)j, err, SL_ETIMEOUT,
                                    "silent for %.1f s while scanning its files (it last said %" PRIu64 " of %" PRIu64
                                    " done; %s)",
                                    (double)c->o.connect_timeout_ms / 1e3, f->status.files_done, f->status.files,
                                    given);
            }
            return feeder_error(c, (int)j, err, SL_ETIMEOUT,
                                "no answer to HELLO within %.1f s (%s): is a feeder running at that address?",
                                (double)c->o.connect_timeout_ms / 1e3, names_of(c)->connect_timeout);
        }
    }
    return 0;
}

/* One bound: a value of `api` (the C and Python field) or `flag`
 * (sluice-trainer's) within [least, most]; 0 is the default where zero_ok. */
static int bound(const struct train_client_opts *o, const char *api, const char *flag, long long v, long long least,
                 long long most, int zero_ok, struct sl_error *err)
{
    if ((zero_ok && v == 0) || (v >= least && v <= most))
        return 0;
    const char *name = o->names != NULL && o->names->in_ms ? api : flag;
    return sl_error_set(err, SL_EINVAL, "%s: %lld is out of range (%s%lld to %lld)", name, v, zero_ok ? "0 or " : "",
                        least, most);
}

int train_client_check_bounds(const struct train_client_opts *o, struct sl_error *err)
{
    int rc = bound(o, "replicas", "--replicas", o->replicas, 1, TRAIN_CLIENT_MAX_REPLICAS, 0, err);
    if (rc == 0)
        rc = bound(o, "credits", "--credits", o->credits, 1, TRAIN_CLIENT_MAX_CREDITS, 1, err);
    if (rc == 0)
        rc = bound(o, "heartbeat_ms", "--heartbeat-ms", o->heartbeat_ms, TRAIN_CLIENT_MIN_HEARTBEAT_MS,
                   TRAIN_CLIENT_MAX_HEARTBEAT_MS, 1, err);
    if (rc == 0)
        rc = bound(o, "timeout_ms", "--timeout-ms", o->timeout_ms, TRAIN_CLIENT_MIN_TIMEOUT_MS,
                   TRAIN_CLIENT_MAX_TIMEOUT_MS, 1, err);
    if (rc == 0)
        rc = bound(o, "connect_timeout_ms", "--connect-timeout", o->connect_timeout_ms, 1, TRAIN_CLIENT_MAX_WAIT_MS, 1,
                   err);
    if (rc == 0)
        rc = bound(o, "reconnect_ms", "--reconnect-s", o->reconnect_ms, 1, TRAIN_CLIENT_MAX_WAIT_MS, 1, err);
    if (rc == 0)
        rc = bound(o, "takeover_ms", "--takeover-s", o->takeover_ms, 1, TRAIN_CLIENT_MAX_WAIT_MS, 1, err);
    return rc;
}

int train_client_open(struct train_client **out, const struct train_client_opts *opts, struct sl_error *err)
{
    *out = NULL;
    if (opts->nfeeders == 0 || opts->nfeeders > TRAIN_CLIENT_MAX_FEEDERS)
        return sl_error_set(err, SL_EINVAL, "between 1 and %d feeders, not %zu", TRAIN_CLIENT_MAX_FEEDERS,
                            opts->nfeeders);
    if (opts->replicas == 0 || opts->workers == 0 || opts->worker >= opts->workers)
        return sl_error_set(err, SL_EINVAL, "worker %u of %u with %u replicas is not a valid place", opts->worker,
                            opts->workers, opts->replicas);
    int rc = train_client_check_bounds(opts, err);
    if (rc != 0)
        return rc;
    if (opts->resume_seq % opts->replicas != 0 || opts->resume_seq > ((uint64_t)1 << 48))
        return sl_error_set(err, SL_EINVAL,
                            "resume at piece %" PRIu64 ": not the first piece of a step (a multiple of %u replicas), "
                            "or past 2^48",
                            opts->resume_seq, opts->replicas);
    for (size_t j = 0; j < opts->nfeeders; j++)
        if (sl_endpoint_check(opts->feeders[j], err) != 0)
            return sl_error_prefix(err, "feeder %zu: ", j);
    for (size_t j = 0; opts->curve != NULL && j < opts->nfeeders; j++)
        if (opts->curve_server == NULL || opts->curve_server[j] == NULL ||
            strlen(opts->curve_server[j]) != SL_CURVE_KEY_Z85)
            return sl_error_set(err, SL_EINVAL, "feeder %s: no CURVE server key (%d Z85 characters) for it",
                                opts->feeders[j], SL_CURVE_KEY_Z85);
    struct train_client *c = sl_calloc(1, sizeof *c);
    if (c == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    c->o = *opts;
    c->pid = getpid();
    if (c->o.credits == 0) /* TRAIN_CLIENT_DEFAULT_CREDITS, or 4 steps */
        c->o.credits = 4 * c->o.replicas < TRAIN_CLIENT_DEFAULT_CREDITS ? TRAIN_CLIENT_DEFAULT_CREDITS
                                                                        : 4 * c->o.replicas;
    if (c->o.heartbeat_ms <= 0)
        c->o.heartbeat_ms = 1000;
    if (c->o.timeout_ms <= 0)
        c->o.timeout_ms = 10000;
    if (c->o.connect_timeout_ms <= 0)
        c->o.connect_timeout_ms = TRAIN_CLIENT_CONNECT_TIMEOUT_MS;
    if (c->o.nfeeders == 1 || c->o.takeover_ms < 0) /* nobody to take a share over */
        c->o.takeover_ms = 0;
    /* a step needs R pieces at once: credits below R would deadlock */
    if (c->o.credits * c->o.nfeeders < c->o.replicas)
        c->o.credits = (uint32_t)((c->o.replicas + c->o.nfeeders - 1) / c->o.nfeeders);
    sl_buf_init(&c->buf, SL_WIRE_MAX_HEADER);
    c->nslots = (size_t)c->o.credits * c->o.nfeeders + c->o.replicas;
    c->f = sl_calloc(c->o.nfeeders, sizeof *c->f);
    c->slots = sl_calloc(c->nslots, sizeof *c->slots);
    c->free_slots = sl_calloc(c->nslots, sizeof *c->free_slots);
    c->step_slots = sl_calloc(c->o.replicas, sizeof *c->step_slots);
    c->pieces = sl_calloc(c->o.replicas, sizeof *c->pieces);
    if (c->f == NULL || c->slots == NULL || c->free_slots == NULL || c->step_slots == NULL || c->pieces == NULL)
        rc = sl_error_set(err, SL_ENOMEM, "out of memory");
    if (rc == 0)
        rc = train_reorder_create(&c->reorder, c->nslots, err);
    if (rc == 0 && train_reorder_restart(c->reorder, c->o.resume_seq) != 0)
        rc = sl_error_set(err, SL_EINVAL, "reorder window not empty"); /* cannot happen: just made */
    /* the process's incarnation: random, never 0 */
    while (rc == 0 && c->o.incarnation == 0)
        if (getrandom(&c->o.incarnation, sizeof c->o.incarnation, 0) != (ssize_t)sizeof c->o.incarnation)
            rc = sl_error_sys(err, errno, "getrandom");
    c->m = c->o.metrics;
    if (rc == 0 && c->m == NULL && train_metrics_create(&c->own_m) != 0)
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
        rc = open_socket(c, j, err);
    }
    if (rc == 0)
        rc = handshake(c, err);
    if (rc != 0) {
        train_client_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* BYE to every feeder that welcomed us (once): it takes its buffers back
 * and, its stream over, may exit. */
static void say_bye(struct train_client *c)
{
    if (c->said_bye || sl_wire_encode_bye(&c->buf) != 0)
        return;
    for (size_t j = 0; c->f != NULL && j < c->o.nfeeders; j++)
        if (c->f[j].sock != NULL && c->f[j].welcomed && !c->f[j].rejoining)
            (void)send_buf(c->f[j].sock, &c->buf);
    c->said_bye = 1;
}

/* In a forked child: free the child's copy of the client's own memory and
 * nothing else. Closing a socket or terminating the context would wait for
 * I/O threads that did not follow the fork (a hang), and a BYE or a credit
 * would speak on the parent's connections; the messages and mappings are
 * left to the child's exit or exec. */
static void drop_forked(struct train_client *c)
{
    train_reorder_destroy(c->reorder);
    sl_free(c->f);
    sl_free(c->slots);
    sl_free(c->free_slots);
    sl_free(c->step_slots);
    sl_free(c->pieces);
    sl_buf_free(&c->buf);
    sl_metrics_destroy(c->own_m);
    sl_free(c);
}

void train_client_close(struct train_client *c)
{
    if (c == NULL)
        return;
    if (forked(c)) {
        drop_forked(c);
        return;
    }
    for (size_t r = 0; c->have_step && r < c->o.replicas; r++)
        release_slot(c, c->step_slots[r]);
    struct slot *s;
    while (c->reorder != NULL && (s = train_reorder_pop(c->reorder)) != NULL)
        release_slot(c, s);
    /* pieces held beyond a gap */
    for (size_t i = 0; c->slots != NULL && i < c->nslots; i++)
        if (c->slots[i].busy)
            release_slot(c, &c->slots[i]);
    /* done with every piece: then BYE (a feeder takes its buffers back) */
    for (size_t j = 0; c->f != NULL && j < c->o.nfeeders; j++)
        detach_shm(&c->f[j]);
    say_bye(c);
    for (size_t j = 0; c->f != NULL && j < c->o.nfeeders; j++) {
        if (c->f[j].sock != NULL)
            sl_zsock_linger(c->f[j].sock, 200); /* let BYE out */
        close_socket(&c->f[j]);
        close_probe(&c->f[j], 0);
        zmq_msg_close(&c->f[j].welcome_frame);
    }
    if (c->ctx != NULL)
        zmq_ctx_term(c->ctx);
    train_reorder_destroy(c->reorder);
    sl_free(c->f);
    sl_free(c->slots);
    sl_free(c->free_slots);
    sl_free(c->step_slots);
    sl_free(c->pieces);
    sl_buf_free(&c->buf);
    sl_metrics_destroy(c->own_m);
    sl_free(c);
}

const struct sl_wire_welcome *train_client_welcome(const struct train_client *c)
{
    return &c->welcome;
}

static int all_ended(struct train_client *c)
{
    for (size_t j = 0; j < c->o.nfeeders; j++)
        if (!c->f[j].ended)
            return 0;
    return 1;
}

static void fill_piece(struct train_client *c, const struct slot *s, struct train_piece *p)
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
        struct train_tensor *t = &p->t[i];
        t->name = c->names[i];
        t->dtype = w->tensors[i].dtype;
        t->rank = w->tensors[i].rank;
        memcpy(t->dims, w->tensors[i].dims, sizeof t->dims);
        t->bytes = w->tensors[i].bytes;
        t->data = t->bytes ? s->body + w->tensors[i].offset : NULL;
    }
}

int train_client_keepalive(struct train_client *c, int ms, struct sl_error *err)
{
    if (forked(c))
        return refuse_forked(c, err);
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

void train_client_release(struct train_client *c)
{
    if (c->have_step && !forked(c)) {
        for (size_t r = 0; r < c->o.replicas; r++)
            release_slot(c, c->step_slots[r]);
        c->have_step = 0;
        give_credits(c, 0);
    }
}

/* The kept step: one block holding the struct, the pieces, the body
 * frames moved over (msgs), the shared-memory bodies copied (copies) and
 * the tensors' names. */
struct kept_block {
    struct train_kept k;
    zmq_msg_t *msgs; /* [n]; empty where the body was copied or absent */
    void **copies;   /* [n]; NULL where none */
    char *names;
};

int train_client_keep(struct train_client *c, struct train_kept **out, struct sl_error *err)
{
    *out = NULL;
    if (forked(c))
        return refuse_forked(c, err);
    if (!c->have_step)
        return sl_error_set(err, SL_EINVAL, "no step to keep (keep follows a next_step, before its release)");
    uint32_t n = c->o.replicas;
    size_t names = 0;
    for (uint32_t r = 0; r < n; r++)
        for (size_t i = 0; i < c->pieces[r].ntensors; i++)
            names += strlen(c->pieces[r].t[i].name) + 1;
    struct kept_block *b = sl_calloc(1, sizeof *b);
    if (b == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory keeping a step");
    b->k.n = n;
    b->k.pieces = sl_calloc(n, sizeof *b->k.pieces);
    b->msgs = sl_calloc(n, sizeof *b->msgs);
    b->copies = sl_calloc(n, sizeof *b->copies);
    b->names = sl_malloc(names ? names : 1);
    int ok = b->k.pieces != NULL && b->msgs != NULL && b->copies != NULL && b->names != NULL;
    for (uint32_t r = 0; b->msgs != NULL && r < n; r++)
        zmq_msg_init(&b->msgs[r]);
    /* first every allocation (the shared-memory copies), so that a failure
     * leaves the step as it was */
    for (uint32_t r = 0; ok && r < n; r++) {
        struct slot *s = c->step_slots[r];
        if (s->body != NULL && (s->map != NULL || s->copy != NULL))
            ok = (b->copies[r] = sl_malloc(s->piece.shm_bytes ? (size_t)s->piece.shm_bytes : 1)) != NULL;
    }
    if (!ok) {
        train_kept_free(&b->k);
        return sl_error_set(err, SL_ENOMEM, "out of memory keeping a step");
    }
    char *name = b->names;
    for (uint32_t r = 0; r < n; r++) {
        struct slot *s = c->step_slots[r];
        const uint8_t *from = s->body, *to = NULL;
        if (b->copies[r] != NULL) {
            memcpy(b->copies[r], from, (size_t)s->piece.shm_bytes);
            to = b->copies[r];
        } else if (from != NULL && s->nframes == 1) {
            /* a small message's data lies inside its zmq_msg_t: where it
             * lands after the move is asked, not assumed */
            zmq_msg_move(&b->msgs[r], &s->frames[0]);
            to = zmq_msg_data(&b->msgs[r]);
        }
        struct train_piece *p = &b->k.pieces[r];
        *p = c->pieces[r];
        for (size_t i = 0; i < p->ntensors; i++) {
            struct train_tensor *t = &p->t[i];
            size_t len = strlen(t->name) + 1;
            memcpy(name, t->name, len);
            t->name = name;
            name += len;
            if (t->data != NULL)
                t->data = to + ((const uint8_t *)t->data - from);
        }
        p->flags &= ~(uint32_t)SL_WIRE_PIECE_SHM;
    }
    train_client_release(c);
    *out = &b->k;
    return 0;
}

void train_kept_free(struct train_kept *k)
{
    if (k == NULL)
        return;
    struct kept_block *b = (struct kept_block *)k;
    for (uint32_t r = 0; r < k->n; r++) {
        if (b->msgs != NULL)
            zmq_msg_close(&b->msgs[r]);
        if (b->copies != NULL)
            sl_free(b->copies[r]);
    }
    sl_free(b->msgs);
    sl_free(b->copies);
    sl_free(b->names);
    sl_free(k->pieces);
    sl_free(b);
}

int train_client_next_step(struct train_client *c, const struct train_piece **pieces, struct sl_error *err)
{
    if (forked(c))
        return refuse_forked(c, err);
    /* here too, not only while waiting: a trainer whose pieces are always
     * ready would otherwise be heard only through its credits */
    heartbeats(c);
    train_client_release(c);
    uint64_t t0 = sl_clock_ns(), waited_since = 0; /* waited_since: the first pump since the last piece */
    /* c->ngot: the slots gathered so far, for a rejoin meanwhile to see */
    c->ngot = 0;
    while (c->ngot < c->o.replicas) {
        struct slot *s = train_reorder_pop(c->reorder);
        if (s != NULL && waited_since != 0) {
            /* the wait since the last piece was for this one: its feeder's */
            if (s->feeder >= 0 && (size_t)s->feeder < TRAIN_CLIENT_MAX_FEEDERS)
                __atomic_fetch_add(&c->wait_by_feeder[s->feeder], sl_clock_ns() - waited_since, __ATOMIC_RELAXED);
            waited_since = 0;
        }
        if (s != NULL) {
            if (s->piece.replica != c->ngot) {
                release_slot(c, s);
                size_t had = c->ngot;
                for (size_t r = 0; r < had; r++)
                    release_slot(c, c->step_slots[r]);
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
            if (train_reorder_next(c->reorder) >= total) {
                size_t had = c->ngot;
                for (size_t r = 0; r < had; r++)
                    release_slot(c, c->step_slots[r]);
                c->ngot = 0;
                if (had != 0)
                    return sl_error_set(err, SL_EPROTO, "the stream ended inside a step (%zu of %u pieces)", had,
                                        c->o.replicas);
                /* no piece is borrowed any more: the feeders may go */
                say_bye(c);
                sl_metrics_add(c->m, TRAIN_M_WAIT_NS, sl_clock_ns() - t0);
                return SL_END;
            }
        }
        if (waited_since == 0)
            waited_since = sl_clock_ns();
        int rc = pump(c, c->o.heartbeat_ms / 4 > 0 ? c->o.heartbeat_ms / 4 : 1, err);
        if (rc != 0) {
            for (size_t r = 0; r < c->ngot; r++)
                release_slot(c, c->step_slots[r]);
            c->ngot = 0;
            return rc;
        }
    }
    c->ngot = 0; /* handed out: have_step now */
    sl_metrics_add(c->m, TRAIN_M_WAIT_NS, sl_clock_ns() - t0);
    uint64_t rows = 0, bytes = 0;
    for (size_t r = 0; r < c->o.replicas; r++) {
        fill_piece(c, c->step_slots[r], &c->pieces[r]);
        rows += c->pieces[r].rows;
        for (size_t i = 0; i < c->pieces[r].ntensors; i++)
            bytes += c->pieces[r].t[i].bytes;
    }
    sl_metrics_add(c->m, TRAIN_M_PIECES, c->o.replicas);
    sl_metrics_add(c->m, TRAIN_M_ROWS, rows);
    sl_metrics_add(c->m, TRAIN_M_BYTES, bytes);
    c->have_step = 1;
    *pieces = c->pieces;
    return 0;
}

struct sl_metrics *train_client_metrics(const struct train_client *c)
{
    return c->m;
}

const char *train_client_stage_name(int stage)
{
    static const char *const names[SL_WIRE_STAGES] = {"read", "decompress", "decode", "assemble", "send"};
    return stage >= 0 && stage < SL_WIRE_STAGES ? names[stage] : "unknown";
}

int train_client_feeder_stages(const struct train_client *c, size_t j, uint64_t stage_ns[SL_WIRE_STAGES],
                               int *busiest)
{
    *busiest = -1;
    if (j >= c->o.nfeeders)
        return SL_EINVAL;
    const struct feeder *f = &c->f[j];
    for (int k = 0; k < SL_WIRE_STAGES; k++)
        stage_ns[k] = f->nstats > 0 ? f->stats[0].stage_ns[k] : 0;
    if (f->nstats < 2)
        return 0;
    uint64_t most = 0;
    for (int k = 0; k < SL_WIRE_STAGES; k++) {
        uint64_t d = f->stats[0].stage_ns[k] > f->stats[1].stage_ns[k] ? f->stats[0].stage_ns[k] -
                                                                             f->stats[1].stage_ns[k] : 0;
        if (d > most) {
            most = d;
            *busiest = k;
        }
    }
    return 0;
}

size_t train_client_wait_by_feeder(const struct train_client *c, double *secs, size_t n)
{
    size_t F = c->o.nfeeders < TRAIN_CLIENT_MAX_FEEDERS ? c->o.nfeeders : TRAIN_CLIENT_MAX_FEEDERS;
    for (size_t j = 0; j < F && j < n; j++)
        secs[j] = (double)__atomic_load_n(&c->wait_by_feeder[j], __ATOMIC_RELAXED) / 1e9;
    return F;
}

uint64_t train_client_position(const struct train_client *c)
{
    /* every seq below the reorder's next was handed out; the step being
     * gathered (none between calls) is not */
    return train_reorder_next(c->reorder) - c->ngot;
}

uint64_t train_client_incarnation(const struct train_client *c)
{
    return c->o.incarnation;
}
