/* train_main_elastic: workers join and leave a running ring at a step
 * boundary (--elastic EP, --join EP; docs/trainer.md "Elastic workers").
 *
 * Worker 0 binds a ROUTER on EP and keeps the book (train_elastic.h);
 * every other member, and a process asking to join, connects a DEALER.
 * Worker 0 reads its ROUTER between steps (trainer_elastic_poll, no
 * thread): a JOIN is judged at once (admitted for the next change, ACK,
 * or refused with the reason, REFUSE), a LEAVE recorded. Every member's
 * training loop sums one more value, the control value, in each step's
 * row-count all-reduce (train_loop_control; no message of its own):
 * worker 0's is 1 when a change waits and may come, the others' 0, so
 * every member learns of the change from the same step. Within an epoch,
 * step s runs with step s+1 already staged (the look-ahead), and the sum
 * in step s's run decides whether the change comes after s+1 (s+1 runs
 * first, the change comes before s+2); an epoch's last step runs before
 * the next epoch's first is received, and the sum in its own run decides
 * whether the change comes at the epoch boundary after it. So a change
 * may come before step 0 or
 * steps 2 .. T-1 of an epoch, except that worker 0 defers, with a log line, a
 * change that keeps the world's size, a second one within an epoch (the
 * feeders take one change per epoch, docs/semantics.md 5.2) and one whose
 * old workers' windows may hold the rest of the job (admit_now) to the
 * next epoch's start. Then each member asks worker 0 for the new world
 * (SYNC, answered by WORLD: its new rank, the world's endpoints, the epoch
 * to start at, the global step, the parameter count), keeps the training
 * state, closes its training loop, its input client (BYE: the feeders may
 * then take the new shape) and the ring; a member let go stops there. The
 * new world opens its ring (a barrier: every member of the old shape has
 * closed its client by then, except one let go, whose BYE the client's
 * HELLO may have to wait for), worker 0's weights and optimizer state go
 * to everyone over it, and each member opens its input client with the new
 * shape and installs that state: before step t > 0 of epoch e with the
 * transition (old size, replicas, e, t) from its first piece (the
 * feeders' mid-epoch change), at an epoch's start with resume_epoch +
 * reshape (the epoch-boundary reshape; docs/semantics.md 5.2).
 *
 * A member other than 0 that dies breaks the ring: the survivors' step
 * fails (trainer_elastic_broken), each reports to worker 0 (BROKEN), and
 * worker 0 forms the world of the members that reported within a bounded
 * wait and sends it as a change at the step it failed in, from its own
 * state (docs/trainer.md "Elastic workers", "A member that dies"). */
#include "train_main_int.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_log.h"
#include "train_elastic.h"

#define CLIENT_RETRY_MS 100

struct trainer_elastic {
    struct trainer_elastic_ep ep; /* the coordinator endpoint (train_main_elastic_coord.c) */
    uint64_t deferred;            /* worker 0: 1 + the epoch a deferral was last logged for, and why (defer_why) */
    int defer_why;
    unsigned char (*bid)[256]; /* worker 0: a BROKEN reporter's routing id, by rank, in world bgen (bsize ranks) */
    size_t *bidlen;
    uint32_t bgen, bsize;
};

/* ---- setup ---- */

static int elastic_socket(struct trainer *t, int coordinator, struct sl_error *err)
{
    struct trainer_elastic *el = sl_calloc(1, sizeof *el);
    if (el == NULL)
        return sl_error_set(err, SL_ENOMEM, "elastic: out of memory");
    t->el = el;
    return trainer_elastic_ep_open(t, &el->ep, coordinator, err);
}

/* A member of the world the job started with, after trainer_start: worker
 * 0 binds the coordinator endpoint, the others connect to it. 0, or 1 with
 * the error logged. */
int trainer_elastic_open(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    int rc = trainer_elastic_check_window(t, &err);
    if (rc == 0)
        rc = elastic_socket(t, o->worker == 0, &err);
    if (rc == 0 && o->worker == 0)
        rc = trainer_elastic_ep_book(t, &t->el->ep, (const char *const *)t->ring_eps.items, o->workers, &err);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    if (o->worker == 0)
        sl_log(SL_LOG_INFO,
               "elastic: worker 0 coordinates on %s: workers join and leave at a step boundary (at most %u)",
               o->elastic, o->elastic_max_workers);
    return 0;
}

void trainer_elastic_close(struct trainer *t)
{
    struct trainer_elastic *el = t->el;
    if (el == NULL)
        return;
    trainer_elastic_ep_close(&el->ep);
    sl_free(el->bid);
    sl_free(el->bidlen);
    sl_free(el);
    t->el = NULL;
}

/* ---- between steps ---- */

/* Worker 0: a member's BROKEN (its ring broke: a member died), recorded
 * in the book with the sender's routing id for the survivors' WORLD; one
 * the book refuses is logged and ignored. It may come between worker 0's
 * steps, before worker 0's own all-reduce fails. */
static void note_broken(struct trainer *t, const unsigned char *id, size_t idlen, const struct train_elastic_msg *m,
                        int ack)
{
    struct trainer_elastic *el = t->el;
    struct train_elastic_coord *c = &el->ep.coord;
    struct sl_error err = {0};
    if (el->bid == NULL || el->bgen != c->gen || el->bsize != c->size) {
        sl_free(el->bid);
        sl_free(el->bidlen);
        el->bid = sl_calloc(c->size, sizeof *el->bid);
        el->bidlen = sl_calloc(c->size, sizeof *el->bidlen);
        el->bgen = c->gen;
        el->bsize = c->size;
        if (el->bid == NULL || el->bidlen == NULL) {
            sl_free(el->bid);
            sl_free(el->bidlen);
            el->bid = NULL;
            el->bidlen = NULL;
            sl_log(SL_LOG_ERROR, "elastic: out of memory for worker %u's report of a broken ring: ignored", m->a);
            return;
        }
    }
    if (train_elastic_coord_broken(c, m, &err) != 0) { /* the sender learns why (a late survivor: left out) */
        sl_log(SL_LOG_WARN, "%s: refused", err.msg);
        struct train_elastic_msg r = {
            .type = TRAIN_ELASTIC_REFUSE, .gen = c->gen, .s = {err.msg}, .n = {(uint32_t)strlen(err.msg)}};
        struct sl_error ignore = {0};
        (void)trainer_elastic_send(&el->ep, id, idlen, &r, &ignore);
        return;
    }
    memcpy(el->bid[m->a], id, idlen);
    el->bidlen[m->a] = idlen;
    if (!ack) {
        sl_log(SL_LOG_INFO, "elastic: worker %u asks for the new world of a change: it goes on with the survivors",
               m->a);
        return;
    }
    struct train_elastic_msg a = {.type = TRAIN_ELASTIC_ACK, .gen = c->gen, .c = m->c};
    (void)trainer_elastic_send(&el->ep, id, idlen, &a, &err); /* worker 0 is alive: the world follows */
    sl_log(SL_LOG_INFO,
           "elastic: worker %u reports the ring broken in step %" PRIu64 " of epoch %" PRIu64 " (it trained %" PRIu64
           " steps)",
           m->a, m->f, m->c, m->d);
}

static int ring_other(struct trainer *t, const unsigned char *id, size_t idlen, const struct train_elastic_msg *m)
{
    if (m->type != TRAIN_ELASTIC_BROKEN)
        return 0;
    note_broken(t, id, idlen, m, 1);
    return 1;
}

static const struct trainer_elastic_hooks ring_hooks = {.joiner = "ring endpoint ",
                                                        .admitted = "",
                                                        .change = "the next change",
                                                        .asking = "job with ring endpoint",
                                                        .other = ring_other};

/* Between steps: the requests waiting on worker 0's endpoint, the leave
 * flag. `epoch`: the newest step's. Never blocks. */
void trainer_elastic_poll(struct trainer *t, uint64_t epoch)
{
    if (t->el != NULL)
        trainer_elastic_ep_poll(t, &t->el->ep, &ring_hooks, epoch);
}

/* Whether step s ends an epoch after which a change may come (not the
 * job's last): the step then runs before the next epoch's first is
 * received, and its own run carries the decision (trainer_elastic_want).
 * Within an epoch the run of the step before carries it (the look-ahead). */
int trainer_elastic_changes_after(const struct trainer *t, const struct staged_step *s)
{
    uint64_t epochs = client_welcome(t->cl)->epochs;
    return t->el != NULL && (s->flags & SL_WIRE_PIECE_LAST_STEP) && (epochs == 0 || s->epoch + 1 < epochs);
}

/* Worker 0, a change waiting: whether it may come before step `step` of
 * epoch `epoch` (the next to receive). Not: one that keeps the world's
 * size (the feeders change the shape mid-epoch only to another one: the
 * new members take the old places at the epoch boundary), a second change
 * within an epoch (the feeders refuse it, docs/semantics.md 5.2), one
 * whose old workers' windows (--credits x feeders) may hold all their
 * pieces left in the job (the feeders may have sent their END; the
 * members' goodbyes would then end the job). Those wait for the next
 * epoch's start (or the job's end), logged once per epoch and reason. */
static int admit_now(struct trainer *t, uint64_t epoch, uint64_t step)
{
    struct trainer_elastic *el = t->el;
    const struct train_elastic_coord *c = &el->ep.coord;
    const struct sl_wire_welcome *w = client_welcome(t->cl);
    uint64_t window = (uint64_t)trainer_elastic_window_credits(t) * t->feeders.n, left = 0;
    int changed = t->transition.from_workers != 0 && t->transition.from_epoch == epoch;
    int why = train_elastic_defer(c, epoch, step, w->steps_per_epoch, w->epochs, changed, window, &left);
    if (why == 0)
        return 1;
    if (el->deferred != epoch + 1 || el->defer_why != why) {
        el->deferred = epoch + 1;
        el->defer_why = why;
        char when[64];
        if (w->epochs != 0 && epoch + 1 >= w->epochs)
            snprintf(when, sizeof when, "the job's end");
        else
            snprintf(when, sizeof when, "epoch %" PRIu64 "'s start", epoch + 1);
        if (why == TRAIN_ELASTIC_SAME_SIZE)
            sl_log(SL_LOG_INFO,
                   "elastic: the change keeps the world's size (%u workers): it waits for %s (a mid-epoch change is "
                   "one of shape)",
                   c->size, when);
        else if (why == TRAIN_ELASTIC_SECOND)
            sl_log(SL_LOG_INFO,
                   "elastic: the job's shape changed at step %" PRIu64 " of epoch %" PRIu64
                   " already (one change per epoch, docs/semantics.md 5.2): the next change waits for %s",
                   t->transition.from_step, epoch, when);
        else
            sl_log(SL_LOG_INFO,
                   "elastic: the job's last %" PRIu64 " steps (%" PRIu64
                   " pieces a worker) fit a worker's window of %" PRIu64
                   " (--credits x feeders): the feeders may have sent their end, so the change waits for %s",
                   left, left * t->replicas, window, when);
    }
    return 0;
}

/* ---- at the boundary ---- */

/* Worker 0, its old ring closed: wait for every other member's SYNC (each
 * sends it once its own old ring is closed), then send everyone its WORLD,
 * members and joiners: so no member's new ring connects to an endpoint
 * still bound by an old ring. The book then takes the new world. A LEAVE
 * that comes meanwhile is kept for the next boundary. */
static int coordinator_sync(struct trainer *t, const struct train_elastic_msg *place, uint64_t steps, uint64_t nparams,
                            uint32_t *size, char *list, size_t cap, struct sl_error *err)
{
    struct trainer_elastic *el = t->el;
    struct train_elastic_coord *c = &el->ep.coord;
    uint32_t old = c->size, *rank = sl_calloc(old, sizeof *rank), late = 0;
    unsigned char *synced = sl_calloc(old, 1), *late_leave = sl_calloc(old, 1), (*ids)[256] = sl_calloc(old, 256);
    size_t *idlens = sl_calloc(old, sizeof *idlens);
    int rc = rank == NULL || synced == NULL || late_leave == NULL || ids == NULL || idlens == NULL
                 ? sl_error_set(err, SL_ENOMEM, "elastic: out of memory")
                 : 0;
    if (rc == 0)
        rc = train_elastic_coord_next(c, rank, size, list, cap, err);
    uint64_t deadline = sl_clock_ns() + (uint64_t)t->o.rendezvous_timeout_s * 1000000000u;
    uint32_t left = old - 1;
    while (rc == 0 && left > 0) {
        if (trainer_stop_flag) {
            rc = sl_error_set(err, SL_ECLOSED, "elastic: stopped by a signal at the change");
            break;
        }
        if (sl_clock_ns() >= deadline) {
            uint32_t miss = 1;
            while (miss < old && synced[miss])
                miss++;
            rc = sl_error_set(err, SL_ETIMEOUT, "elastic: worker %u did not ask for the new world within %u s", miss,
                              t->o.rendezvous_timeout_s);
            break;
        }
        unsigned char id[256];
        size_t idlen = 0;
        struct train_elastic_msg m;
        int r = trainer_elastic_recv(&el->ep, 250, id, &idlen, &m, err);
        if (r == SL_ETIMEOUT)
            continue;
        if (r != 0) {
            sl_log(SL_LOG_WARN, "%s: ignored", err->msg);
            continue;
        }
        if (m.type == TRAIN_ELASTIC_SYNC && m.gen == c->gen && m.a < old && !synced[m.a]) {
            synced[m.a] = 1;
            memcpy(ids[m.a], id, idlen);
            idlens[m.a] = idlen;
            left--;
        } else if (m.type == TRAIN_ELASTIC_LEAVE && m.gen == c->gen && m.a > 0 && m.a < old && !c->leaving[m.a]) {
            late_leave[m.a] = 1;
            late++;
            sl_log(SL_LOG_INFO, "elastic: worker %u asks to leave: let go at the next change", m.a);
        } else if (m.type == TRAIN_ELASTIC_JOIN) {
            struct sl_error why = {0};
            sl_error_set(&why, SL_EPROTO,
                         "elastic: worker 0 is changing the world before step %" PRIu64 " of epoch %" PRIu64
                         " right now: ask again in a moment",
                         place->f, place->c);
            struct train_elastic_msg r2 = {
                .type = TRAIN_ELASTIC_REFUSE, .s = {why.msg}, .n = {(uint32_t)strlen(why.msg)}};
            (void)trainer_elastic_send(&el->ep, id, idlen, &r2, err);
        } else {
            sl_log(SL_LOG_WARN, "elastic: an unexpected message (type %u) at the change: ignored", m.type);
        }
    }
    struct train_elastic_msg w = *place;
    w.type = TRAIN_ELASTIC_WORLD;
    w.gen = c->gen + 1;
    w.b = *size;
    w.d = steps;
    w.e = nparams;
    w.s[0] = list;
    w.n[0] = (uint32_t)strlen(list);
    for (uint32_t k = 1; rc == 0 && k < old; k++) {
        w.a = rank[k];
        if ((rc = trainer_elastic_send(&el->ep, ids[k], idlens[k], &w, err)) != 0)
            sl_error_prefix(err, "the new world to worker %u: ", k);
    }
    for (uint32_t k = 0; rc == 0 && k < c->njoins; k++) {
        w.a = *size - c->njoins + k; /* after the members that stay */
        if ((rc = trainer_elastic_send(&el->ep, c->joins[k].id, c->joins[k].idlen, &w, err)) != 0)
            sl_error_prefix(err, "the new world to the joining worker (%s): ", c->joins[k].ep);
    }
    if (rc == 0)
        rc = train_elastic_coord_commit(c, err);
    for (uint32_t k = 0; rc == 0 && late > 0 && k < old; k++)
        if (late_leave[k] && rank[k] != TRAIN_ELASTIC_RELEASED)
            c->leaving[rank[k]] = 1;
    sl_free(rank);
    sl_free(synced);
    sl_free(late_leave);
    sl_free(ids);
    sl_free(idlens);
    return rc;
}

/* A member other than 0: SYNC, and worker 0's WORLD into *w (its strings
 * in el->ep.buf). */
static int member_sync(struct trainer *t, struct train_elastic_msg *w, struct sl_error *err)
{
    struct trainer_elastic *el = t->el;
    struct train_elastic_msg m = {.type = TRAIN_ELASTIC_SYNC, .gen = el->ep.gen, .a = t->o.worker};
    int rc = trainer_elastic_send(&el->ep, NULL, 0, &m, err);
    uint64_t deadline = sl_clock_ns() + (uint64_t)t->o.rendezvous_timeout_s * 1000000000u;
    while (rc == 0) {
        if (trainer_stop_flag)
            return sl_error_set(err, SL_ECLOSED, "elastic: stopped by a signal at the change");
        if (sl_clock_ns() >= deadline)
            return sl_error_set(err, SL_ETIMEOUT, "elastic: worker 0 (%s) did not send the new world within %u s",
                                t->o.elastic, t->o.rendezvous_timeout_s);
        rc = trainer_elastic_recv(&el->ep, 250, NULL, NULL, w, err);
        if (rc == SL_ETIMEOUT) {
            rc = 0;
            continue;
        }
        if (rc == 0 && w->type == TRAIN_ELASTIC_WORLD)
            return 0;
        if (rc == 0)
            return sl_error_set(err, SL_EPROTO,
                                "elastic: worker 0 answered the change's SYNC with a message of "
                                "type %u",
                                w->type);
    }
    return rc;
}

/* Worker 0: where the new world of `size` members (the old one `old`)
 * takes the input, before step `step` of `epoch`, T the old world's
 * steps per epoch: the WORLD's c, f, g, h, i, j, k (train_elastic.h). A
 * world of the same size at an epoch's start keeps the stream's mid-epoch
 * change, if it has one (the feeders take no reshape to the shape they
 * have, and want that change in every HELLO of it): its epoch c starts at
 * (from_T - from_step) R + (c - from_epoch - 1) T R in its numbering. */
static struct train_elastic_msg world_place(const struct trainer *t, uint64_t epoch, uint64_t step, uint64_t T,
                                            uint32_t old, uint32_t size)
{
    struct train_elastic_msg w = {.c = epoch, .f = step};
    const struct client_transition *x = &t->transition;
    if (step > 0) {
        w.g = old;
        w.h = T;
    } else if (size == old && x->from_workers != 0) {
        w.g = x->from_workers;
        w.h = t->from_T;
        w.i = x->from_epoch;
        w.j = x->from_step;
        w.k = ((t->from_T - x->from_step) + (epoch - x->from_epoch - 1) * T) * t->replicas;
    }
    return w;
}

/* Open the input client with this world's shape at the WORLD's place w
 * (world_place), w->d steps trained before: at an epoch's start the
 * feeders' epoch-boundary reshape, or the stream's change kept and its
 * seq; within the epoch the mid-epoch change (transition: the old world's
 * size, the job's replicas, epoch, step; its numbering from the change,
 * resume_seq 0). t keeps the change as a restored one would be (the
 * checkpoints' numbering); at an epoch's start with another shape,
 * step_base is the offset of the global step from the new shape's count
 * (the checkpoints are named by the global step: train_ckpt.h). A refusal
 * that says to wait (a trainer of the old shape still heard from: one let
 * go whose BYE is on its way; the old shape's last pieces in flight) is
 * tried again within --connect-timeout. */
static int open_client_reshaped(struct trainer *t, const struct train_elastic_msg *w, struct sl_error *err)
{
    const struct trainer_opts *o = &t->o;
    trainer_client_opts(t, &t->feeders, o->job, o->worker, o->workers, t->curve_server_z85);
    t->copts.reshape = 1;
    if (w->f > 0) {
        t->transition = (struct client_transition){w->g, t->replicas, w->c, w->f};
        t->from_T = w->h;
        t->step_base = w->d;
    } else if (w->j > 0) { /* the same shape, its change kept: a resume by seq */
        t->transition = (struct client_transition){w->g, t->replicas, w->i, w->j};
        t->from_T = w->h;
        t->step_base = w->d - w->k / t->replicas;
        t->copts.resume_seq = w->k;
        t->copts.reshape = 0;
    } else { /* the epoch boundary: an earlier change is forgotten */
        t->copts.resume_epoch = w->c;
        t->transition = (struct client_transition){0};
        t->from_T = t->step_base = 0;
    }
    t->copts.transition = t->transition;
    uint64_t deadline = sl_clock_ns() + (uint64_t)o->connect_timeout_s * 1000000000u;
    for (;;) {
        int rc = client_open(&t->cl, &t->copts, err);
        if (rc == 0 && t->copts.resume_epoch != 0) /* the global step goes on: its offset from this shape's count */
            t->step_base = w->d - client_position(t->cl) / t->replicas;
        if (rc == 0)
            return 0;
        t->cl = NULL;
        int again = rc == SL_EPROTO &&
                    (strstr(err->msg, "still connected") != NULL || strstr(err->msg, "try again in a moment") != NULL);
        if (!again || trainer_stop_flag || sl_clock_ns() >= deadline)
            return rc;
        nanosleep(&(struct timespec){.tv_nsec = CLIENT_RETRY_MS * 1000000L}, NULL);
    }
}

/* Take place `rank` of the new world (`size` members, endpoints `list` of
 * n bytes): its ring, the state from worker 0 (state[2 nparams]: weights
 * then velocity, worker 0's sent, everyone's replaced), the input client
 * at the WORLD's place (w: epoch, step, the old world) with the new shape,
 * the training loop with that state. */
static int enter_world(struct trainer *t, uint32_t rank, uint32_t size, const char *list, size_t n,
                       const struct train_elastic_msg *w, float *state, size_t nparams, struct sl_error *err)
{
    struct trainer_opts *o = &t->o;
    char text[TRAIN_ELASTIC_MAX_WORLD + 1];
    snprintf(text, sizeof text, "%.*s", (int)n, list);
    sl_cluster_list_free(&t->ring_eps);
    int rc = sl_cluster_list_split(&t->ring_eps, text, TRAIN_ELASTIC_MAX_WORKERS, 0, "the new world's endpoints", err);
    if (rc == 0 && t->ring_eps.n != size)
        rc = sl_error_set(err, SL_EPROTO, "elastic: the new world lists %zu endpoints for %u workers", t->ring_eps.n,
                          size);
    if (rc != 0)
        return rc;
    o->worker = rank;
    o->workers = size;
    train_expose_world(t->expose, size, rank, 1); /* a joiner's admission counts as a change too */
    if (t->ring_bind[0] != '\0')
        sl_cluster_bind_addr(t->ring_eps.items[rank], t->ring_bind, sizeof t->ring_bind);
    if (size > 1 && (rc = trainer_ring_open(t, err)) != 0)
        return rc;
    if (size > 1) { /* worker 0's state to all: a sum with zeros from the others */
        if (rank != 0)
            memset(state, 0, 2 * nparams * sizeof *state);
        if ((rc = train_ring_all_reduce(t->ring, state, 2 * nparams, TRAIN_RING_SUM, err)) != 0) {
            sl_error_prefix(err, "elastic: worker 0's state over the new ring: ");
            return rc;
        }
    }
    if ((rc = open_client_reshaped(t, w, err)) != 0 || (rc = trainer_elastic_check_window(t, err)) != 0)
        return rc;
    if (o->trace != NULL && (rc = trainer_check_trace_feature(client_welcome(t->cl), o->feature, err)) != 0)
        return rc; /* a joiner's first WELCOME */
    if ((rc = trainer_loop_start(t, err)) != 0)
        return rc;
    if ((rc = train_loop_set_state(t->loop, state, state + nparams, nparams, err)) != 0)
        sl_error_prefix(err, "elastic: worker 0's state (%zu parameters): ", nparams);
    return rc;
}

/* This member's share of the decision whether worker 0's waiting change
 * comes right after step s (before the step that follows it): 1 when
 * this is worker 0 and the change may come then, else 0. The caller puts
 * it in the control value of the run that decides (train_loop_control:
 * it rides in that run's row count's all_reduce, no message of its own),
 * so every member learns the sum from the same run: within an epoch the
 * run of step s-1 (s staged: the look-ahead is kept), for an epoch's last
 * step its own run (nothing staged after it). */
float trainer_elastic_want(struct trainer *t, const struct staged_step *s)
{
    struct trainer_elastic *el = t->el;
    int at_end = (s->flags & SL_WIRE_PIECE_LAST_STEP) != 0;
    uint64_t epoch = at_end ? s->epoch + 1 : s->epoch, step = at_end ? 0 : s->step + 1;
    trainer_elastic_poll(t, s->epoch);
    int pending = el->ep.coordinator && train_elastic_coord_pending(&el->ep.coord) && admit_now(t, epoch, step);
    if (pending) { /* only live joiners are counted in (a deferred change's are checked once a second) */
        trainer_elastic_ack_joiners(&el->ep);
        pending = train_elastic_coord_pending(&el->ep.coord) && admit_now(t, epoch, step);
    }
    return pending ? 1.0f : 0.0f;
}

/* After step s ran, nothing staged after it, `steps` the global step: the
 * change the members decided on (the control sum of the deciding run was
 * not 0: trainer_elastic_want). *released: this member was let go (its
 * loop, client and ring closed). 0, or 1 with the error logged. */
int trainer_elastic_boundary(struct trainer *t, const struct staged_step *s, uint64_t steps, int *released)
{
    struct trainer_elastic *el = t->el;
    struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    char list[TRAIN_ELASTIC_MAX_WORLD + 1];
    float *state = NULL;
    *released = 0;
    /* the next step to receive: the change comes before it */
    int at_end = (s->flags & SL_WIRE_PIECE_LAST_STEP) != 0;
    uint64_t epoch = at_end ? s->epoch + 1 : s->epoch, step = at_end ? 0 : s->step + 1;
    uint64_t T = client_welcome(t->cl)->steps_per_epoch;
    int rc = 0;
    const float *wp, *vp;
    size_t np = 0;
    if ((rc = train_loop_state(t->loop, &wp, &vp, &np, &err)) != 0)
        goto out;
    if ((state = sl_malloc(2 * np * sizeof *state)) == NULL) {
        rc = sl_error_set(&err, SL_ENOMEM, "elastic: out of memory");
        goto out;
    }
    memcpy(state, wp, np * sizeof *state);
    memcpy(state + np, vp, np * sizeof *state);
    /* the old world's parts go first (the feeders hear this member's BYE,
     * its old ring's endpoint is free) */
    train_loop_destroy(t->loop);
    t->loop = NULL;
    train_expose_input_closing(t->expose, t->cl);
    client_close(t->cl);
    t->cl = NULL;
    train_ring_close(t->ring);
    t->ring = NULL;
    uint32_t rank = 0, size = 0, old = o->workers;
    struct train_elastic_msg w = {0};
    if (el->ep.coordinator) {
        w = world_place(t, epoch, step, T, old, train_elastic_coord_next_size(&el->ep.coord));
        rc = coordinator_sync(t, &w, steps, np, &size, list, sizeof list, &err);
        w.d = steps;
        w.s[0] = list;
        w.n[0] = (uint32_t)strlen(list);
    } else {
        rc = member_sync(t, &w, &err);
        if (rc == 0 && w.a != TRAIN_ELASTIC_RELEASED && w.e != np)
            rc =
                sl_error_set(&err, SL_EPROTO, "elastic: worker 0 has %" PRIu64 " parameters, this worker %zu", w.e, np);
        rank = w.a;
        size = w.b;
    }
    if (rc != 0)
        goto out;
    if (rank == TRAIN_ELASTIC_RELEASED) {
        sl_log(SL_LOG_INFO,
               "elastic: worker %u let go before step %" PRIu64 " of epoch %" PRIu64 " (global step %" PRIu64
               "), as asked",
               o->worker, step, epoch, steps);
        *released = 1;
        train_expose_world(t->expose, 0, 0, 1);
        goto out;
    }
    sl_log(SL_LOG_INFO,
           "elastic: before step %" PRIu64 " of epoch %" PRIu64 " (global step %" PRIu64
           "): %u workers -> %u; worker %u is now worker %u of %u (ring %.*s)",
           w.f, w.c, w.d, old, size, o->worker, rank, size, (int)w.n[0], w.s[0]);
    /* the endpoint list is in el->ep.buf (a member's) or list: copied first */
    char copy[TRAIN_ELASTIC_MAX_WORLD + 1];
    size_t n = w.n[0];
    memcpy(copy, w.s[0], n);
    el->ep.gen++;
    rc = enter_world(t, rank, size, copy, n, &w, state, np, &err);
out:
    sl_free(state);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    return 0;
}

/* ---- a member that dies ---- */

/* Worker 0, its old ring broken and closed, having trained `steps` steps,
 * the failed step `s` (the new world starts there): the survivors'
 * reports (BROKEN) until every other member reported or the bounded wait
 * ends (twice the ring's --timeout-ms and a second from now: a survivor
 * sees the ring fail within about one timeout of worker 0, plus the step
 * it was in), then, when the job can go on, everyone that reported gets
 * its WORLD (w, place and all, as for a change) and the book takes the
 * survivors' world; when it cannot, each gets a REFUSE naming why and
 * worker 0 fails with the same. A JOIN meanwhile is refused (asked again
 * later), a LEAVE kept. */
static int coordinator_broken(struct trainer *t, const struct staged_step *s, uint64_t steps, uint64_t nparams,
                              uint64_t T, uint64_t epochs, struct train_elastic_msg *w, uint32_t *size, char *list,
                              size_t cap, struct sl_error *err)
{
    struct trainer_elastic *el = t->el;
    struct train_elastic_coord *c = &el->ep.coord;
    uint32_t old = c->size;
    uint64_t wait_ms = 2 * (uint64_t)t->o.timeout_ms + 1000, deadline = sl_clock_ns() + wait_ms * 1000000u;
    while (train_elastic_coord_survivors(c) < old && sl_clock_ns() < deadline && !trainer_stop_flag) {
        unsigned char id[256];
        size_t idlen = 0;
        struct train_elastic_msg m;
        int r = trainer_elastic_recv(&el->ep, 100, id, &idlen, &m, err);
        if (r == SL_ETIMEOUT)
            continue;
        if (r != 0) {
            sl_log(SL_LOG_WARN, "%s: ignored", err->msg);
            continue;
        }
        if (m.type == TRAIN_ELASTIC_BROKEN) {
            note_broken(t, id, idlen, &m, 1);
        } else if (m.type == TRAIN_ELASTIC_SYNC && m.gen == c->gen) {
            /* a member whose sum of the step worker 0 failed in completed
             * (a ring's last chunks reach ranks at different moments),
             * and which that step's decision took to a change: it is a
             * survivor, and its SYNC takes the survivors' WORLD (no ACK) */
            struct train_elastic_msg b = {.type = TRAIN_ELASTIC_BROKEN, .gen = m.gen, .a = m.a, .c = s->epoch};
            note_broken(t, id, idlen, &b, 0);
        } else if (m.type == TRAIN_ELASTIC_LEAVE) {
            if (train_elastic_coord_leave(c, &m, err) != 0)
                sl_log(SL_LOG_WARN, "%s: ignored", err->msg);
        } else if (m.type == TRAIN_ELASTIC_JOIN) {
            const char *why = "elastic: worker 0 is forming a world of the survivors of a broken ring right now: "
                              "ask again in a moment";
            struct train_elastic_msg r2 = {.type = TRAIN_ELASTIC_REFUSE, .s = {why}, .n = {(uint32_t)strlen(why)}};
            (void)trainer_elastic_send(&el->ep, id, idlen, &r2, err);
        } else {
            sl_log(SL_LOG_WARN, "elastic: an unexpected message (type %u) while the ring is broken: ignored", m.type);
        }
    }
    if (trainer_stop_flag)
        return sl_error_set(err, SL_ECLOSED, "elastic: stopped by a signal while the ring was broken");
    uint64_t left = 0, window = (uint64_t)trainer_elastic_window_credits(t) * t->feeders.n;
    int changed = t->transition.from_workers != 0 && t->transition.from_epoch == s->epoch, rc = 0;
    int why = train_elastic_survive_defer(c, s->epoch, s->step, T, epochs, changed, window, &left);
    if (why == TRAIN_ELASTIC_SAME_SIZE)
        rc = sl_error_set(err, SL_EPROTO,
                          "elastic: the ring broke in step %" PRIu64 " of epoch %" PRIu64
                          ", but every member reported it (none died): the feeders change the shape mid-epoch only "
                          "to another one, so the job cannot go on",
                          s->step, s->epoch);
    else if (why == TRAIN_ELASTIC_SECOND)
        rc = sl_error_set(err, SL_EPROTO,
                          "elastic: a member died in step %" PRIu64 " of epoch %" PRIu64
                          ", but the job's shape changed at step %" PRIu64
                          " of that epoch already, and the feeders take one change per epoch (docs/semantics.md "
                          "5.2): the job cannot go on; restart it from its checkpoints",
                          s->step, s->epoch, t->transition.from_step);
    else if (why == TRAIN_ELASTIC_WINDOW)
        rc = sl_error_set(err, SL_EPROTO,
                          "elastic: a member died in step %" PRIu64 " of epoch %" PRIu64 ", in the job's last %" PRIu64
                          " steps (%" PRIu64 " pieces a worker), which fit a worker's window of %" PRIu64
                          " (--credits x feeders): the feeders may have sent their end, so the job cannot go on",
                          s->step, s->epoch, left, left * t->replicas, window);
    uint32_t *rank = sl_calloc(old, sizeof *rank);
    if (rc == 0 && rank == NULL)
        rc = sl_error_set(err, SL_ENOMEM, "elastic: out of memory");
    if (rc == 0)
        rc = train_elastic_coord_survive_next(c, rank, size, list, cap, err);
    if (rc != 0) { /* the survivors learn why from worker 0 */
        for (uint32_t k = 1; k < old && el->bid != NULL && el->bgen == c->gen; k++) {
            struct sl_error ignore = {0};
            struct train_elastic_msg r2 = {
                .type = TRAIN_ELASTIC_REFUSE, .gen = c->gen, .s = {err->msg}, .n = {(uint32_t)strlen(err->msg)}};
            if (c->broken[k])
                (void)trainer_elastic_send(&el->ep, el->bid[k], el->bidlen[k], &r2, &ignore);
        }
        sl_free(rank);
        return rc;
    }
    *w = world_place(t, s->epoch, s->step, T, old, *size);
    w->type = TRAIN_ELASTIC_WORLD;
    w->gen = c->gen + 1;
    w->b = *size;
    w->d = steps;
    w->e = nparams;
    w->s[0] = list;
    w->n[0] = (uint32_t)strlen(list);
    for (uint32_t k = 1; k < old; k++) {
        if (rank[k] == TRAIN_ELASTIC_RELEASED) {
            sl_log(SL_LOG_WARN, "elastic: worker %u did not report the broken ring within %.1f s: counted dead", k,
                   (double)wait_ms / 1000);
            continue;
        }
        w->a = rank[k];
        struct sl_error e2 = {0};
        if (trainer_elastic_send(&el->ep, el->bid[k], el->bidlen[k], w, &e2) != 0) /* its ring will fail again */
            sl_log(SL_LOG_WARN, "elastic: the survivors' world to worker %u: %s", k, e2.msg);
    }
    w->a = 0;
    sl_free(rank);
    return train_elastic_coord_survive_commit(c, err);
}

/* A member other than 0, its old ring broken and closed: BROKEN (the
 * failed step s, the steps it trained), and worker 0's answers into *w:
 * an ACK at once (worker 0 reads its endpoint between its steps, and its
 * own all-reduce fails within --timeout-ms), then the survivors' WORLD,
 * or a REFUSE saying why the job cannot go on. No ACK within twice
 * --timeout-ms, --step-ms and a second: worker 0 is gone (the
 * coordinator: the job cannot go on); no WORLD within three times
 * --timeout-ms, --step-ms and 3 s after it (worker 0's own wait for the
 * reports is bounded by twice --timeout-ms and a second): the same. */
static int member_broken(struct trainer *t, const struct staged_step *s, uint64_t steps, struct train_elastic_msg *w,
                         struct sl_error *err)
{
    struct trainer_elastic *el = t->el;
    struct train_elastic_msg m = {
        .type = TRAIN_ELASTIC_BROKEN, .gen = el->ep.gen, .a = t->o.worker, .c = s->epoch, .d = steps, .f = s->step};
    int rc = trainer_elastic_send(&el->ep, NULL, 0, &m, err), acked = 0;
    uint64_t step_ms = (uint64_t)(t->o.step_ms > 0 ? t->o.step_ms : 0);
    uint64_t ack_ms = 2 * (uint64_t)t->o.timeout_ms + step_ms + 1000;
    uint64_t world_ms = 3 * (uint64_t)t->o.timeout_ms + step_ms + 3000;
    uint64_t deadline = sl_clock_ns() + ack_ms * 1000000u;
    while (rc == 0) {
        if (trainer_stop_flag)
            return sl_error_set(err, SL_ECLOSED, "elastic: stopped by a signal while the ring was broken");
        if (sl_clock_ns() >= deadline)
            return sl_error_set(err, SL_ETIMEOUT,
                                "elastic: the ring broke in step %" PRIu64 " of epoch %" PRIu64
                                " and worker 0 (%s) %s within %.1f s: worker 0, the coordinator, is gone, so the "
                                "job cannot go on",
                                s->step, s->epoch, t->o.elastic,
                                acked ? "did not send the survivors' world" : "did not answer the report",
                                (double)(acked ? world_ms : ack_ms) / 1000);
        rc = trainer_elastic_recv(&el->ep, 100, NULL, NULL, w, err);
        if (rc == SL_ETIMEOUT) {
            rc = 0;
            continue;
        }
        if (rc != 0)
            return rc;
        if (w->type == TRAIN_ELASTIC_ACK) {
            if (!acked)
                deadline = sl_clock_ns() + world_ms * 1000000u;
            acked = 1;
            continue;
        }
        if (w->type == TRAIN_ELASTIC_WORLD && w->a != TRAIN_ELASTIC_RELEASED)
            return 0;
        if (w->type == TRAIN_ELASTIC_REFUSE)
            return sl_error_set(err, SL_EPROTO, "%.*s (reported by worker 0, %s)", (int)w->n[0], w->s[0], t->o.elastic);
        return sl_error_set(err, SL_EPROTO,
                            "elastic: worker 0 answered the broken ring's report with a message of type %u", w->type);
    }
    return rc;
}

/* Step s's all-reduce failed, not by a signal, *steps steps trained
 * before it: a member died (or its ring did). The survivors go on as a
 * smaller world from step s (docs/trainer.md "Elastic workers", "A
 * member that dies"): each closes its loop, client (BYE) and ring, and
 * reports to worker 0; worker 0's state (of its *steps steps: the global
 * batch of each step it trained holds every member's gradient, the dead
 * one's too) goes to every survivor over the new ring, and the input goes
 * on from step s with the old shape's transition (at an epoch's first
 * step: by epoch). *steps becomes the global step the new world starts
 * from. 0, or 1 with the error logged (the job cannot go on: worker 0
 * gone, a second change within the epoch, the window, or the new world's
 * failure). */
int trainer_elastic_broken(struct trainer *t, const struct staged_step *s, uint64_t *steps)
{
    struct trainer_elastic *el = t->el;
    struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    char list[TRAIN_ELASTIC_MAX_WORLD + 1];
    float *state = NULL;
    uint64_t T = client_welcome(t->cl)->steps_per_epoch, epochs = client_welcome(t->cl)->epochs;
    uint32_t old = o->workers, rank = 0, size = 0;
    const float *wp, *vp;
    size_t np = 0;
    int rc = train_loop_state(t->loop, &wp, &vp, &np, &err);
    if (rc == 0 && (state = sl_malloc(2 * np * sizeof *state)) == NULL)
        rc = sl_error_set(&err, SL_ENOMEM, "elastic: out of memory");
    if (rc != 0)
        goto out;
    memcpy(state, wp, np * sizeof *state);
    memcpy(state + np, vp, np * sizeof *state);
    sl_log(SL_LOG_WARN,
           "elastic: the ring broke in step %" PRIu64 " of epoch %" PRIu64 " (worker %u trained %" PRIu64 " steps): %s",
           s->step, s->epoch, o->worker, *steps,
           el->ep.coordinator ? "waiting for the survivors' reports" : "reporting to worker 0");
    train_loop_destroy(t->loop);
    t->loop = NULL;
    train_expose_input_closing(t->expose, t->cl);
    client_close(t->cl); /* its BYE: the feeders may take the survivors' shape */
    t->cl = NULL;
    train_ring_close(t->ring);
    t->ring = NULL;
    struct train_elastic_msg w = {0};
    if (el->ep.coordinator) {
        rc = coordinator_broken(t, s, *steps, np, T, epochs, &w, &size, list, sizeof list, &err);
    } else {
        rc = member_broken(t, s, *steps, &w, &err);
        if (rc == 0 && w.e != np)
            rc =
                sl_error_set(&err, SL_EPROTO, "elastic: worker 0 has %" PRIu64 " parameters, this worker %zu", w.e, np);
        rank = w.a;
        size = w.b;
    }
    if (rc != 0)
        goto out;
    sl_log(SL_LOG_INFO,
           "elastic: before step %" PRIu64 " of epoch %" PRIu64 " (global step %" PRIu64
           "): %u workers -> %u; worker %u is now worker %u of %u (ring %.*s; the survivors of a broken ring)",
           w.f, w.c, w.d, old, size, o->worker, rank, size, (int)w.n[0], w.s[0]);
    char copy[TRAIN_ELASTIC_MAX_WORLD + 1];
    size_t n = w.n[0];
    memcpy(copy, w.s[0], n);
    el->ep.gen = w.gen;
    *steps = w.d;
    rc = enter_world(t, rank, size, copy, n, &w, state, np, &err);
out:
    sl_free(state);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    return 0;
}

/* A process started with --join: ask worker 0, wait for the change it
 * is admitted at, and take its place in the new world (in place of
 * trainer_start). 0, or 1 with the error logged. */
int trainer_elastic_join(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    int rc = elastic_socket(t, 0, &err);
    struct train_elastic_msg m;
    if (rc == 0)
        rc = trainer_elastic_ep_join(t, &t->el->ep, &ring_hooks, 0, &m, &err);
    float *state = NULL;
    if (rc == 0 && (state = sl_calloc(2 * (size_t)m.e, sizeof *state)) == NULL)
        rc = sl_error_set(&err, SL_ENOMEM, "elastic: out of memory for %" PRIu64 " parameters", m.e);
    if (rc == 0) {
        t->el->ep.gen = m.gen;
        t->start_step = m.d;
        char copy[TRAIN_ELASTIC_MAX_WORLD + 1];
        memcpy(copy, m.s[0], m.n[0]);
        sl_log(SL_LOG_INFO,
               "elastic: joined as worker %u of %u before step %" PRIu64 " of epoch %" PRIu64 " (global step %" PRIu64
               ")",
               m.a, m.b, m.f, m.c, m.d);
        rc = enter_world(t, m.a, m.b, copy, m.n[0], &m, state, (size_t)m.e, &err);
    }
    sl_free(state);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    if (o->metrics != NULL) {
        if (sl_output_open(&t->metrics_out, o->metrics, SL_OUTPUT_STREAM, &err) != 0) {
            sl_log(SL_LOG_ERROR, "--metrics: %s", err.msg);
            return 1;
        }
        t->mf = sl_output_stream(t->metrics_out);
    }
    return 0;
}
