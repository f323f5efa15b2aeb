/* feed_hello: a trainer's HELLO (docs/protocol.md, "How sluice's feeder and
 * trainer use it"): the checks (job, cluster shape, worker, resume point,
 * share and takeover), the connection entry it gets (its own share's, or a
 * takeover's), the plan fast-forwarded to its resume point, and the
 * WELCOME.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "feed_serve.h"
#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_log.h"
#include "sl_peer.h"
#include "sl_wire.h"

_Static_assert((int)FEED_DT_INT64 == SL_WIRE_INT64 && (int)FEED_DT_FLOAT32 == SL_WIRE_FLOAT32 &&
                   (int)FEED_DT_BYTES == SL_WIRE_BYTES && (int)FEED_DT_UINT8 == SL_WIRE_UINT8 &&
                   (int)FEED_DT_FLOAT16 == SL_WIRE_FLOAT16 && (int)FEED_DT_BFLOAT16 == SL_WIRE_BFLOAT16,
               "the schema's dtypes are the wire's");

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

/* Whether t's connection has closed (its trainer killed or gone): a
 * HEARTBEAT to it fails at once with EHOSTUNREACH, the ROUTER being
 * mandatory; a live one just gets the HEARTBEAT. */
static int connection_closed(struct server *s, const struct trainer *t, uint64_t now)
{
    struct sl_wire_heartbeat hb = {.sent_ns = now};
    return sl_wire_encode_heartbeat(&hb, &s->hbuf) == 0 && feed__send_frames(s, t, &s->hbuf, 0) != 0 &&
           errno == EHOSTUNREACH;
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
    } else if (connection_closed(s, t, now)) {
        why = "a new trainer process takes the place of one whose connection has closed";
    }
    if (why == NULL) {
        feed__refuse(s, id, id_len, "worker %u is already connected (another trainer process, heard from %.1f s ago)",
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
            sl_log(SL_LOG_INFO,
                   "worker %u: shared memory not offered: the trainer runs as uid %u, this feeder as %u; "
                   "pieces go by copy",
                   worker, (unsigned)uid, (unsigned)geteuid());
        else
            sl_log(SL_LOG_INFO, "worker %u: shared memory not offered (%s); pieces go by copy", worker,
                   fd < 0 ? "the connection's socket is unknown" : err.msg);
    }
    return 0;
}

/* Before a reshape (SL_WIRE_HELLO_RESHAPE): drop the connections of the
 * old shape whose trainer is gone though heard from a moment ago (killed),
 * so a restart right after a kill may reshape. */
static void drop_closed(struct server *s)
{
    uint64_t now = sl_clock_ns();
    for (size_t i = 0; i < s->ntrainers; i++) {
        struct trainer *t = &s->trainers[i];
        if (t->active && now - t->last_seen_ns < feed__grace_ns(t) && connection_closed(s, t, now))
            feed__drop(s, t, "had closed its connection when a trainer of another shape asked to reshape");
    }
}

/* A HELLO with SL_WIRE_HELLO_EPOCH: its resume_seq set to the first piece
 * of epoch resume_epoch of the shape now set up (the epoch past the last
 * is the job's end). 0 (also without the flag), or -1 when refused. */
static int resume_by_epoch(struct server *s, const uint8_t *id, size_t id_len, struct sl_wire_hello *h)
{
    if (!(h->flags & SL_WIRE_HELLO_EPOCH))
        return 0;
    const struct feed_job *job = s->o->job;
    uint64_t per = s->steps * s->replicas, seq = 0;
    if (h->resume_seq != 0) {
        feed__refuse(s, id, id_len,
                     "worker %u resumes by epoch (epoch %" PRIu64 ") and at piece %" PRIu64
                     ": a HELLO that resumes by epoch must say resume_seq 0",
                     h->worker, h->resume_epoch, h->resume_seq);
        return -1;
    }
    if (per == 0) {
        feed__refuse(s, id, id_len, "worker %u resumes by epoch, but this job's steps per epoch are not known",
                     h->worker);
        return -1;
    }
    if ((job->epochs != 0 && h->resume_epoch > job->epochs) || __builtin_mul_overflow(per, h->resume_epoch, &seq) ||
        seq > MAX_RESUME) {
        feed__refuse(s, id, id_len,
                     "worker %u asks to resume at epoch %" PRIu64 ", past the end of the job (%" PRIu64 " epochs)",
                     h->worker, h->resume_epoch, job->epochs);
        return -1;
    }
    h->resume_seq = seq;
    return 0;
}

/* A HELLO must carry the feeder's transition, exactly: its resume_seq is
 * in the transition's numbering, its pieces the transition's. 0, or -1
 * when refused (naming both). */
static int transition_agrees(struct server *s, const uint8_t *id, size_t id_len, const struct sl_wire_hello *h)
{
    struct feed_transition x = feed__hello_transition(h);
    const struct feed_transition *f = &s->tr;
    if (x.from_workers == f->from_workers && x.from_replicas == f->from_replicas && x.from_epoch == f->from_epoch &&
        x.from_step == f->from_step)
        return 0;
    if (feed_transition_set(f) && feed_transition_set(&x))
        feed__refuse(s, id, id_len,
                     "the job's shape changed at step %" PRIu64 " of epoch %" PRIu64 " from %u x %u; this trainer says "
                     "it changed at step %" PRIu64 " of epoch %" PRIu64 " from %u x %u",
                     f->from_step, f->from_epoch, f->from_workers, f->from_replicas, x.from_step, x.from_epoch,
                     x.from_workers, x.from_replicas);
    else if (feed_transition_set(f))
        feed__refuse(s, id, id_len,
                     "the job's shape changed at step %" PRIu64 " of epoch %" PRIu64 " from %u x %u; this trainer does "
                     "not know of the change (its HELLO carries no transition)",
                     f->from_step, f->from_epoch, f->from_workers, f->from_replicas);
    else
        feed__refuse(s, id, id_len,
                     "this trainer says the job's shape changed at step %" PRIu64 " of epoch %" PRIu64 " from %u x %u; "
                     "this feeder's shape, %u x %u, was set without that change (%s)",
                     x.from_step, x.from_epoch, x.from_workers, x.from_replicas, s->workers, s->replicas,
                     s->fixed ? "by its --workers and --replicas, or its job's: a change mid-epoch needs a feeder "
                                "whose shape the trainers set"
                              : "by a trainer that carried no transition");
    return -1;
}

/* The modulus of a HELLO's share: its trailing `feeders`
 * (SL_WIRE_HELLO_FEEDERS, 1..SL_WIRE_MAX_ROSTER, checked by the decoder),
 * else this feeder's own --feeders. */
static uint32_t hello_modulus(const struct server *s, const struct sl_wire_hello *h)
{
    return (h->flags & SL_WIRE_HELLO_FEEDERS) ? h->feeders : s->o->feeders;
}

/* The checks a HELLO passes before it costs anything: the job, the
 * cluster shape (set up here for the first HELLO), the worker, the resume
 * point, the share and the identity. 0, or -1 when it was refused. */
static int hello_check(struct server *s, const uint8_t *id, size_t id_len, struct sl_wire_hello *h)
{
    const struct feed_job *job = s->o->job;
    if (h->job_len != strlen(job->name) || memcmp(h->job, job->name, h->job_len) != 0) {
        feed__refuse(s, id, id_len, "job '%.*s' is not served here (this feeder serves '%s')", (int)h->job_len, h->job,
                     job->name);
        return -1;
    }
    /* a trainer that predates float16 and bfloat16 would refuse the
     * WELCOME (an unknown dtype): told why in words instead */
    for (size_t i = 0; !(h->flags & SL_WIRE_HELLO_HALF) && i < s->schema.ntensors; i++) {
        const struct feed_schema_tensor *st = &s->schema.t[i];
        if (st->dtype == FEED_DT_FLOAT16 || st->dtype == FEED_DT_BFLOAT16) {
            feed__refuse(s, id, id_len,
                         "job '%s' sends tensor '%s' as %s, which this trainer predates (its HELLO lacks the "
                         "float16/bfloat16 flag): upgrade the trainer or its sluice library, or make the job's map "
                         "produce float32",
                         job->name, st->name, st->dtype == FEED_DT_FLOAT16 ? "float16" : "bfloat16");
            return -1;
        }
    }
    /* a transition's resume_seq is in its own numbering: no epoch with it */
    if ((h->flags & SL_WIRE_HELLO_TRANSITION) && (h->flags & SL_WIRE_HELLO_EPOCH)) {
        feed__refuse(s, id, id_len,
                     "worker %u resumes by epoch (epoch %" PRIu64 ") and continues a change of the shape mid-epoch: a "
                     "HELLO with a transition resumes at a piece of the transition's numbering, not by epoch",
                     h->worker, h->resume_epoch);
        return -1;
    }
    int other = s->workers != 0 && (h->workers != s->workers || h->replicas != s->replicas), reshape = 0;
    char why[sizeof((struct sl_error *)0)->msg];
    if (other && (h->flags & SL_WIRE_HELLO_RESHAPE))
        drop_closed(s); /* trainers killed a moment ago are gone */
    if (other && feed__shape_take_over(s) != 0 && (reshape = feed__shape_reshape(s, h, why, sizeof why)) <= 0) {
        if (reshape < 0) { /* refused, naming the rule */
            feed__refuse(s, id, id_len, "%s", why);
            return -1;
        }
        feed__refuse(s, id, id_len,
                     "cluster shape disagrees: this trainer says %u workers x %u replicas, the job runs with "
                     "%u x %u (%s)",
                     h->workers, h->replicas, s->workers, s->replicas,
                     s->fixed             ? "the feeder's --workers and --replicas, or its job's"
                     : s->consumed        ? "set by the first trainer, which has taken pieces; at an epoch's start or "
                                            "from a checkpoint a trainer may ask to reshape (sluice-trainer --reshape)"
                     : s->release_pending ? "set by trainers that left without taking a piece: it is being released, "
                                            "try again in a moment"
                                          : "set by a trainer still connected, which has taken no piece yet; give the "
                                            "feeder --workers and --replicas to settle the shape");
        return -1;
    }
    if (s->workers == 0) {
        /* the first HELLO sets the shape, and its transition with it */
        struct sl_error err = {0};
        struct feed_transition x = feed__hello_transition(h);
        uint64_t T = 0;
        if (feed_transition_set(&x) && feed__transition_check(s, h->workers, h->replicas, &x, &T, &err) != 0) {
            feed__refuse(s, id, id_len, "%s", err.msg);
            return -1;
        }
        if (feed__shape_setup(s, h->workers, h->replicas, &err) != 0) {
            feed__refuse(s, id, id_len, "%s", err.msg);
            return -1;
        }
        s->tr = x;
        s->tr_steps = T;
        if (feed_transition_set(&x))
            sl_log(SL_LOG_INFO,
                   "the shape changed from %u x %u at step %" PRIu64 " of epoch %" PRIu64
                   " (worker %u's HELLO): steps %" PRIu64 "..%" PRIu64 " of that epoch cut among %u x %u",
                   x.from_workers, x.from_replicas, x.from_step, x.from_epoch, h->worker, x.from_step, T - 1,
                   h->workers, h->replicas);
    }
    if (transition_agrees(s, id, id_len, h) != 0)
        return -1;
    if (resume_by_epoch(s, id, id_len, h) != 0) /* SL_WIRE_HELLO_EPOCH: the seq of that epoch's start */
        return -1;
    if (h->worker >= s->workers) {
        feed__refuse(s, id, id_len, "worker %u is out of range (%u workers)", h->worker, s->workers);
        return -1;
    }
    /* a resume point the trainer cannot have reached is refused before it
     * costs anything (past the job's end, or past any trainer's reach) */
    uint64_t total = feed_transition_total(&s->tr, s->tr_steps, s->steps, s->replicas, job->epochs);
    if (h->resume_seq > total && feed_transition_set(&s->tr)) {
        feed__refuse(s, id, id_len,
                     "worker %u asks to resume at piece %" PRIu64 ", past the end of the job (%" PRIu64
                     " pieces per worker after the change at step %" PRIu64 " of epoch %" PRIu64 ": %" PRIu64
                     " steps x %u replicas, then %" PRIu64 " epochs of %" PRIu64 " steps x %u replicas)",
                     h->worker, h->resume_seq, total, s->tr.from_step, s->tr.from_epoch, s->tr_steps - s->tr.from_step,
                     s->replicas, job->epochs > s->tr.from_epoch ? job->epochs - s->tr.from_epoch - 1 : 0, s->steps,
                     s->replicas);
        return -1;
    }
    if (h->resume_seq > total) {
        feed__refuse(s, id, id_len,
                     "worker %u asks to resume at piece %" PRIu64 ", past the end of the job (%" PRIu64
                     " pieces per worker: %" PRIu64 " epochs of %" PRIu64 " steps x %u replicas)",
                     h->worker, h->resume_seq, total, job->epochs, s->steps, s->replicas);
        return -1;
    }
    if (h->resume_seq > MAX_RESUME) {
        feed__refuse(s, id, id_len,
                     "worker %u asks to resume at piece %" PRIu64
                     ", which no trainer can have reached (at most %" PRIu64 ")",
                     h->worker, h->resume_seq, MAX_RESUME);
        return -1;
    }
    /* the modulus of the share: the HELLO's after feeders joined (never
     * fewer feeders than this one knows of at its start), else this
     * feeder's own */
    uint32_t feeders = hello_modulus(s, h);
    if (feeders < s->o->feeders) {
        feed__refuse(s, id, id_len,
                     "this trainer counts %u feeders, this feeder is one of %u: shrinking the feeders is not supported",
                     feeders, s->o->feeders);
        return -1;
    }
    if (h->share >= feeders) {
        feed__refuse(s, id, id_len, "worker %u asks for feeder %u's share, but the job has %u feeders", h->worker,
                     h->share, feeders);
        return -1;
    }
    /* feeders joined: the takeovers' bound follows the largest modulus
     * (W x (F' - 1), F' at most SL_WIRE_MAX_ROSTER) */
    uint64_t most = (uint64_t)s->workers * (feeders - 1);
    if (most > MAX_TAKEOVERS)
        most = MAX_TAKEOVERS;
    if (most > s->max_takeovers)
        s->max_takeovers = (size_t)most;
    if (id_len > MAX_IDENTITY) {
        feed__refuse(s, id, id_len, "identity too long");
        return -1;
    }
    if (h->share != s->o->feeder_index && s->o->no_takeover) {
        feed__refuse(s, id, id_len, "this feeder serves its own share only (--no-takeover), not feeder %u's", h->share);
        return -1;
    }
    return 0;
}

/* The connection entry of a HELLO that passed its checks (takeover: a lost
 * feeder's share), its plan made and fast-forwarded to the resume point
 * (*end: the plan is at its end there). NULL when it was refused. */
static struct trainer *hello_entry(struct server *s, const uint8_t *id, size_t id_len, const struct sl_wire_hello *h,
                                   int takeover, int *end)
{
    struct trainer *t = takeover ? takeover_entry(s, h->worker, h->share, 0) : &s->trainers[h->worker];
    if (t != NULL && t->active && !may_replace(s, t, id, id_len, h))
        return NULL;
    if (t == NULL && (t = takeover_entry(s, h->worker, h->share, 1)) == NULL) {
        feed__refuse(s, id, id_len, "this feeder serves %zu takeovers of lost feeders' shares already (at most %zu)",
                     s->ntrainers - s->workers, s->max_takeovers);
        return NULL;
    }
    struct sl_error err = {0};
    feed_stream_destroy(t->stream);
    t->stream = NULL;
    /* the plan, or after a change of the shape mid-epoch the transition's
     * stream (the old shape's plans for the rest of that epoch) */
    if (feed_stream_create(&t->stream, &s->cfg, &s->tr, h->worker, &err) != 0) {
        feed__refuse(s, id, id_len, "%s", err.msg);
        return NULL;
    }
    /* resume: the plan fast-forwards without reading data (whole epochs
     * by arithmetic, then the shuffle's draws replayed: about 1 ms at a
     * buffer of 10^4, 0.1-0.25 s at 10^6, on the serving thread; in a
     * transition, each old plan's so) */
    int rc = feed_stream_seek(t->stream, h->resume_seq, &err);
    if (rc != 0 && rc != SL_END) {
        feed__refuse(s, id, id_len, "%s", err.msg);
        return NULL;
    }
    *end = rc == SL_END;
    return t;
}

/* The connection t becomes the HELLO's (fd: its socket, for the shared
 * memory offer). */
static void hello_adopt(struct server *s, struct trainer *t, const uint8_t *id, size_t id_len,
                        const struct sl_wire_hello *h, int takeover, int end, int fd)
{
    /* the worker's previous connection is over, and a trainer rejoining has
     * copied out what it still held: its buffers go back */
    feed_hold_release_all(&t->hold, s->pool);
    t->shm = takeover ? FEED_SHM_NONE : feed_shm_offer(s->shm.size != 0, h->flags);
    if (t->shm == FEED_SHM_PENDING && !peer_is_us(s, fd, h->worker))
        t->shm = FEED_SHM_NONE;
    t->worker = h->worker;
    t->share = h->share;
    t->feeders = hello_modulus(s, h);
    t->wants_roster = (h->flags & SL_WIRE_HELLO_ROSTER) != 0;
    t->incarnation = h->incarnation;
    memcpy(t->id, id, id_len);
    t->id_len = id_len;
    t->active = 1;
    t->generation = ++s->generation;
    t->plan_done = end;
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
    t->said_bye = 0;
    t->last_seen_ns = t->last_hb_ns = sl_clock_ns();
    t->heartbeat_ms = h->heartbeat_ms;
    t->wants_stats = (h->flags & SL_WIRE_HELLO_STATS) != 0;
    t->stats_map = (h->flags & SL_WIRE_HELLO_STATS_MAP) != 0;
    t->last_stats_ns = 0; /* the first tick sends one */
}

/* The WELCOME to the connection t just made: the job described, the shared
 * memory offered when it is; a job that cannot be described on the wire is
 * refused. */
static void hello_welcome(struct server *s, struct trainer *t, const uint8_t *id, size_t id_len,
                          const struct sl_wire_hello *h, int takeover)
{
    const struct feed_job *job = s->o->job;
    struct sl_wire_welcome *wm = &s->msg.welcome;
    memset(wm, 0, sizeof *wm);
    wm->feeder = s->o->feeder_index;
    wm->feeders = t->feeders; /* the connection's modulus */
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
        feed__refuse(s, id, id_len, "this feeder cannot describe the job on the wire: %s", werr.msg);
        return;
    }
    sl_metrics_add(s->m, FEED_M_TRAINERS, 1);
    feed__send_simple(s, t, 0, "WELCOME");
    if (takeover)
        sl_log(SL_LOG_WARN,
               "worker %u: taking over feeder %u's share (pieces %u mod %u) from piece %" PRIu64 " (%u credits)",
               h->worker, h->share, h->share, t->feeders, h->resume_seq, h->credits);
    else if (t->feeders != s->o->feeders)
        sl_log(SL_LOG_INFO,
               "worker %u connected (%u credits, resume at piece %" PRIu64 ", pieces %u mod %u: feeders joined)",
               h->worker, h->credits, h->resume_seq, h->share, t->feeders);
    else
        sl_log(SL_LOG_INFO, "worker %u connected (%u credits, resume at piece %" PRIu64 ")", h->worker, h->credits,
               h->resume_seq);
    /* feeders joined that its HELLO does not count: told at once */
    feed__roster_welcome(s, t);
}

void feed__on_hello(struct server *s, const uint8_t *id, size_t id_len, const struct sl_wire_hello *hello, int fd)
{
    /* s->msg is reused for the answer: keep the HELLO */
    struct sl_wire_hello copy = *hello; /* hello_check sets resume_seq of a HELLO that resumes by epoch */
    const struct sl_wire_hello *h = &copy;
    if (hello_check(s, id, id_len, &copy) != 0)
        return;
    /* its own share, or a lost feeder's taken over (by copy: the shared
     * pool is sized for the own shares' windows) */
    int takeover = h->share != s->o->feeder_index, end = 0;
    struct trainer *t = hello_entry(s, id, id_len, h, takeover, &end);
    if (t == NULL)
        return;
    hello_adopt(s, t, id, id_len, h, takeover, end, fd);
    hello_welcome(s, t, id, id_len, h, takeover);
}
