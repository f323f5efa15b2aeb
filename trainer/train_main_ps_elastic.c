/* train_main_ps_elastic: parameter-server workers join and leave a running
 * job at an epoch boundary (--mode ps --elastic EP, --join NAME;
 * docs/trainer.md "Parameter servers").
 *
 * PS workers do not step together, so there is no common step to change
 * the input's shape at within an epoch: a change comes at an epoch's end
 * only, where every worker meets. Worker 0 binds a ROUTER on EP and keeps
 * the book of train_elastic.h (its "ring endpoints" are the workers'
 * names: worker-K for the workers the job started with, --join NAME for a
 * joiner); the others connect a DEALER. Worker 0 reads its ROUTER between
 * steps (JOIN judged at once: ACK or REFUSE; LEAVE recorded, SIGTERM
 * sends it). After the last push of each epoch but the job's last, every
 * member sends worker 0 a SYNC with a fresh session (the barrier: a worker
 * waits there for the slowest), and worker 0, once all are in, answers
 * each with a WORLD: k 0 when nothing changes (each goes on with its
 * client and loop), else its new rank (members in order, then joiners)
 * and its session in the new world. Before any WORLD leaves, worker 0
 * sends every parameter server the WORLD of train_ps.h (the new count,
 * who was who, the new sessions), so the servers count the new workers
 * for the final pull and ignore the old processes' BYE. Then each member
 * closes its training loop (the variables stay on the servers) and its
 * input client (BYE), opens the client as worker `rank` of the new count
 * at the next epoch with the feeders' epoch-boundary reshape
 * (docs/semantics.md 5.2) and a new loop, which pulls the variables at
 * its first step: that is how a joiner gets them. A member let go stops
 * after its epoch's last push. */
#include "train_main_int.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_log.h"
#include "train_elastic.h"
#include "train_ps.h"

#define CLIENT_RETRY_MS 100
#define MAX_WAITING 256 /* joiners' sessions kept (the book admits at most --elastic-max-workers) */
#define MAX_EARLY 1024  /* SYNCs of members that reached the epoch's end before worker 0 */

struct trainer_ps_elastic {
    struct trainer_elastic_ep ep; /* the coordinator endpoint (train_main_elastic_coord.c) */
    uint64_t changes;             /* worker 0: WORLDs sent to the servers */
    struct {
        char name[TRAIN_ELASTIC_MAX_ENDPOINT + 1];
        uint64_t session;
    } waiting[MAX_WAITING]; /* worker 0: each admitted joiner's session, by name */
    uint32_t nwaiting;
    struct {
        uint32_t rank;
        uint64_t session;
        unsigned char id[256];
        size_t idlen;
    } early[MAX_EARLY]; /* worker 0: SYNCs that came while it still trained the epoch */
    uint32_t nearly;
};

/* At the epoch's end, waiting for worker 0 or the members: a message
 * within about 100 ms, the feeders' connections kept alive meanwhile (a
 * worker that waits past --timeout-ms for the slowest would otherwise be
 * dropped by its feeders). As trainer_elastic_recv; a feeder lost: its error. */
static int recv_alive(struct trainer *t, unsigned char *id, size_t *idlen, struct train_elastic_msg *m,
                      struct sl_error *err)
{
    int rc = trainer_elastic_recv(&t->pel->ep, 0, id, idlen, m, err);
    if (rc != SL_ETIMEOUT || t->cl == NULL)
        return rc == SL_ETIMEOUT ? trainer_elastic_recv(&t->pel->ep, 100, id, idlen, m, err) : rc;
    if ((rc = client_keepalive(t->cl, 100, err)) != 0)
        return sl_error_prefix(err, "elastic: at the epoch's end: ");
    return trainer_elastic_recv(&t->pel->ep, 0, id, idlen, m, err);
}

static int open_socket(struct trainer *t, int coordinator, struct sl_error *err)
{
    struct trainer_ps_elastic *el = sl_calloc(1, sizeof *el);
    if (el == NULL)
        return sl_error_set(err, SL_ENOMEM, "elastic: out of memory");
    t->pel = el;
    el->changes = t->ps_world_changes; /* a restored job's servers count the changes before the restart */
    int rc = trainer_elastic_ep_open(t, &el->ep, coordinator, err);
    size_t cl = strlen(el->ep.config); /* a joiner with another server count is refused */
    snprintf(el->ep.config + cl, sizeof el->ep.config - cl, " ps=%zu", t->ps_eps.n);
    return rc;
}

int trainer_ps_elastic_open(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    int rc = trainer_elastic_check_window(t, &err);
    if (rc == 0)
        rc = open_socket(t, o->worker == 0, &err);
    if (rc == 0 && o->worker == 0) {
        char(*names)[32] = sl_calloc(o->workers, sizeof *names);
        const char **np = sl_calloc(o->workers, sizeof *np);
        if (names == NULL || np == NULL)
            rc = sl_error_set(&err, SL_ENOMEM, "elastic: out of memory");
        for (uint32_t k = 0; rc == 0 && k < o->workers; k++) {
            snprintf(names[k], sizeof names[k], "worker-%u", k);
            np[k] = names[k];
        }
        if (rc == 0)
            rc = trainer_elastic_ep_book(t, &t->pel->ep, np, o->workers, &err);
        sl_free(names);
        sl_free(np);
    }
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    if (o->worker == 0)
        sl_log(SL_LOG_INFO,
               "elastic: worker 0 coordinates on %s: parameter-server workers join and leave at an epoch boundary "
               "(at most %u)",
               o->elastic, o->elastic_max_workers);
    return 0;
}

void trainer_ps_elastic_close(struct trainer *t)
{
    struct trainer_ps_elastic *el = t->pel;
    if (el == NULL)
        return;
    trainer_elastic_ep_close(&el->ep);
    sl_free(el);
    t->pel = NULL;
}

/* Worker 0, a JOIN: its session (in c), and room to keep it. */
static int join_check(struct trainer *t, const struct train_elastic_msg *m, const char *name, struct sl_error *err)
{
    struct trainer_ps_elastic *el = t->pel;
    return m->c == 0 ? sl_error_set(err, SL_EPROTO, "elastic: the joining worker (%s) sent no session", name)
           : el->nwaiting >= MAX_WAITING
               ? sl_error_set(err, SL_EPROTO, "elastic: %u joining workers wait already", el->nwaiting)
               : 0;
}

/* Worker 0, a JOIN admitted: its session kept, by name. */
static void joined(struct trainer *t, const struct train_elastic_msg *m, const char *name)
{
    struct trainer_ps_elastic *el = t->pel;
    uint32_t k = 0; /* a joiner that went away and was forgotten may come again under its name */
    while (k < el->nwaiting && strcmp(el->waiting[k].name, name) != 0)
        k++;
    snprintf(el->waiting[k].name, sizeof el->waiting[k].name, "%s", name);
    el->waiting[k].session = m->c;
    el->nwaiting += k == el->nwaiting;
}

/* Worker 0, a member's SYNC at the epoch's end before worker 0's: kept for
 * coordinator_sync. 1 when taken. */
static int early_sync(struct trainer *t, const unsigned char *id, size_t idlen, const struct train_elastic_msg *m)
{
    struct trainer_ps_elastic *el = t->pel;
    if (!(m->type == TRAIN_ELASTIC_SYNC && m->gen == el->ep.coord.gen && m->a < el->ep.coord.size && m->c != 0 &&
          el->nearly < MAX_EARLY && idlen <= sizeof el->early[0].id))
        return 0;
    el->early[el->nearly].rank = m->a;
    el->early[el->nearly].session = m->c;
    memcpy(el->early[el->nearly].id, id, idlen);
    el->early[el->nearly++].idlen = idlen;
    return 1;
}

static const struct trainer_elastic_hooks ps_hooks = {.joiner = "",
                                                      .admitted = " at the epoch's end",
                                                      .change = "the epoch's end",
                                                      .asking = "parameter-server job as",
                                                      .join_check = join_check,
                                                      .joined = joined,
                                                      .other = early_sync};

void trainer_ps_elastic_poll(struct trainer *t, uint64_t epoch)
{
    if (t->pel != NULL)
        trainer_elastic_ep_poll(t, &t->pel->ep, &ps_hooks, epoch);
}

int trainer_ps_elastic_after(const struct trainer *t, const struct staged_step *s)
{
    uint64_t epochs = client_welcome(t->cl)->epochs;
    return t->pel != NULL && (s->flags & SL_WIRE_PIECE_LAST_STEP) && (epochs == 0 || s->epoch + 1 < epochs);
}

/* The joiner's session, by name (0: none kept). */
static uint64_t joiner_session(const struct trainer_ps_elastic *el, const char *name)
{
    for (uint32_t k = 0; k < el->nwaiting; k++)
        if (strcmp(el->waiting[k].name, name) == 0)
            return el->waiting[k].session;
    return 0;
}

/* Worker 0 at the end of epoch e (`next` = e + 1), its own new session
 * `mine`: every member's SYNC (their new sessions), then, when a change
 * waits, the servers' WORLD, then each member's and joiner's WORLD.
 * *w: worker 0's own (a rank 0, b the size, k its session; k 0: no change). */
static int coordinator_sync(struct trainer *t, uint64_t next, uint64_t steps, uint64_t mine,
                            struct train_elastic_msg *w, struct sl_error *err)
{
    struct trainer_ps_elastic *el = t->pel;
    struct train_elastic_coord *c = &el->ep.coord;
    uint32_t old = c->size, left = old - 1, size = 0;
    uint32_t *rank = sl_calloc(old, sizeof *rank);
    uint64_t *ses = sl_calloc(old, sizeof *ses);
    unsigned char(*ids)[256] = sl_calloc(old, 256);
    size_t *idlens = sl_calloc(old, sizeof *idlens);
    struct train_ps_member *mem = NULL;
    char list[TRAIN_ELASTIC_MAX_WORLD + 1];
    int rc = rank == NULL || ses == NULL || ids == NULL || idlens == NULL
                 ? sl_error_set(err, SL_ENOMEM, "elastic: out of memory")
                 : 0;
    ses[0] = mine;
    for (uint32_t k = 0; rc == 0 && k < el->nearly; k++) {
        uint32_t r = el->early[k].rank;
        if (r > 0 && r < old && ses[r] == 0) {
            ses[r] = el->early[k].session;
            memcpy(ids[r], el->early[k].id, el->early[k].idlen);
            idlens[r] = el->early[k].idlen;
            left--;
        }
    }
    el->nearly = 0;
    uint64_t deadline = sl_clock_ns() + (uint64_t)t->o.rendezvous_timeout_s * 1000000000u;
    while (rc == 0 && left > 0) {
        if (trainer_stop_flag) {
            rc = sl_error_set(err, SL_ECLOSED, "elastic: stopped by a signal at epoch %" PRIu64 "'s end", next - 1);
            break;
        }
        if (sl_clock_ns() >= deadline) {
            uint32_t miss = 1;
            while (miss < old && ses[miss] != 0)
                miss++;
            rc = sl_error_set(err, SL_ETIMEOUT, "elastic: worker %u did not reach epoch %" PRIu64 "'s end within %u s",
                              miss, next - 1, t->o.rendezvous_timeout_s);
            break;
        }
        unsigned char id[256];
        size_t idlen = 0;
        struct train_elastic_msg m;
        int r = recv_alive(t, id, &idlen, &m, err);
        if (r == SL_ETIMEOUT)
            continue;
        if (r == SL_EPROTO) {
            sl_log(SL_LOG_WARN, "%s: ignored", err->msg);
            continue;
        }
        if (r != 0) {
            rc = r;
            break;
        }
        if (m.type == TRAIN_ELASTIC_SYNC && m.gen == c->gen && m.a < old && ses[m.a] == 0 && m.c != 0) {
            ses[m.a] = m.c;
            memcpy(ids[m.a], id, idlen);
            idlens[m.a] = idlen;
            left--;
        } else if (m.type == TRAIN_ELASTIC_SYNC) {
            sl_log(SL_LOG_WARN, "elastic: a SYNC of worker %u (world %u) at epoch %" PRIu64 "'s end: ignored", m.a,
                   m.gen, next - 1);
        } else if (m.type == TRAIN_ELASTIC_JOIN || m.type == TRAIN_ELASTIC_LEAVE) {
            trainer_elastic_ep_message(t, &el->ep, &ps_hooks, id, idlen,
                                       &m); /* counted in this change: every member is at the boundary */
        } else {
            sl_log(SL_LOG_WARN, "elastic: an unexpected message (type %u) at the epoch's end: ignored", m.type);
        }
    }
    if (rc == 0 && train_elastic_coord_pending(c)) {
        trainer_elastic_ack_joiners(&el->ep); /* only live joiners come in */
    }
    int change = rc == 0 && train_elastic_coord_pending(c);
    if (change)
        rc = train_elastic_coord_next(c, rank, &size, list, sizeof list, err);
    if (change && rc == 0 && (mem = sl_calloc(size, sizeof *mem)) == NULL)
        rc = sl_error_set(err, SL_ENOMEM, "elastic: out of memory");
    for (uint32_t k = 0; change && rc == 0 && k < old; k++)
        if (rank[k] != TRAIN_ELASTIC_RELEASED)
            mem[rank[k]] = (struct train_ps_member){k, ses[k]};
    for (uint32_t k = 0; change && rc == 0 && k < c->njoins; k++) {
        uint32_t r = size - c->njoins + k;
        mem[r] = (struct train_ps_member){TRAIN_PS_JOINER, joiner_session(el, c->joins[k].ep)};
        if (mem[r].session == 0)
            rc = sl_error_set(err, SL_EPROTO, "elastic: no session kept for the joining worker (%s)", c->joins[k].ep);
    }
    if (change && rc == 0) {
        rc = train_ps_world(el->ep.ctx, (const char *const *)t->ps_eps.items, (uint32_t)t->ps_eps.n, t->ps_session,
                            el->changes + 1, next, mem, size, (int)t->o.timeout_ms, t->have_curve ? &t->curve : NULL,
                            err);
        if (rc == 0)
            el->changes++;
    }
    /* every member's answer: the same world (k 0), or its place in the new one */
    struct train_elastic_msg a = {.type = TRAIN_ELASTIC_WORLD,
                                  .gen = change ? c->gen + 1 : c->gen,
                                  .b = change ? size : old,
                                  .c = next,
                                  .d = steps,
                                  .e = 1};
    for (uint32_t k = 1; rc == 0 && k < old; k++) {
        a.a = change ? rank[k] : k;
        a.k = change && rank[k] != TRAIN_ELASTIC_RELEASED ? ses[k] : 0;
        if ((rc = trainer_elastic_send(&el->ep, ids[k], idlens[k], &a, err)) != 0)
            sl_error_prefix(err, "the new world to worker %u: ", k);
    }
    for (uint32_t k = 0; change && rc == 0 && k < c->njoins; k++) {
        a.a = size - c->njoins + k;
        a.k = mem[a.a].session;
        if ((rc = trainer_elastic_send(&el->ep, c->joins[k].id, c->joins[k].idlen, &a, err)) != 0)
            sl_error_prefix(err, "the new world to the joining worker (%s): ", c->joins[k].ep);
    }
    if (change && rc == 0) {
        sl_log(SL_LOG_INFO, "elastic: at epoch %" PRIu64 "'s end (global step %" PRIu64 "): %u workers -> %u (%s)",
               next - 1, steps, old, size, list);
        rc = train_elastic_coord_commit(c, err);
        el->nwaiting = 0;
    }
    *w = (struct train_elastic_msg){.a = 0, .b = change ? size : old, .c = next, .k = change ? mine : 0};
    sl_free(rank);
    sl_free(ses);
    sl_free(ids);
    sl_free(idlens);
    sl_free(mem);
    return rc;
}

static int member_sync(struct trainer *t, uint64_t mine, struct train_elastic_msg *w, struct sl_error *err)
{
    struct trainer_ps_elastic *el = t->pel;
    struct train_elastic_msg m = {.type = TRAIN_ELASTIC_SYNC, .gen = el->ep.gen, .a = t->o.worker, .c = mine};
    int rc = trainer_elastic_send(&el->ep, NULL, 0, &m, err);
    uint64_t deadline = sl_clock_ns() + (uint64_t)t->o.rendezvous_timeout_s * 1000000000u;
    while (rc == 0) {
        if (trainer_stop_flag)
            return sl_error_set(err, SL_ECLOSED, "elastic: stopped by a signal at the epoch's end");
        if (sl_clock_ns() >= deadline)
            return sl_error_set(err, SL_ETIMEOUT,
                                "elastic: worker 0 (%s) did not answer at the epoch's end within %u s", t->o.elastic,
                                t->o.rendezvous_timeout_s);
        rc = recv_alive(t, NULL, NULL, w, err);
        if (rc == SL_ETIMEOUT) {
            rc = 0;
            continue;
        }
        if (rc == 0 && w->type == TRAIN_ELASTIC_WORLD)
            return 0;
        if (rc == 0)
            return sl_error_set(err, SL_EPROTO, "elastic: worker 0 answered the SYNC with a message of type %u",
                                w->type);
    }
    return rc;
}

/* The input client as worker o->worker of o->workers from epoch `epoch`'s
 * start with the feeders' epoch-boundary reshape; a HELLO refused while
 * the old shape's workers are still heard from is tried again for
 * --connect-timeout. */
static int open_client_at(struct trainer *t, uint64_t epoch, struct sl_error *err)
{
    const struct trainer_opts *o = &t->o;
    trainer_client_opts(t, &t->feeders, o->job, o->worker, o->workers, t->curve_server_z85);
    t->copts.reshape = 1;
    t->copts.resume_epoch = epoch;
    uint64_t deadline = sl_clock_ns() + (uint64_t)o->connect_timeout_s * 1000000000u;
    for (;;) {
        int rc = client_open(&t->cl, &t->copts, err);
        if (rc == 0)
            return trainer_elastic_check_window(t, err);
        t->cl = NULL;
        int again = rc == SL_EPROTO &&
                    (strstr(err->msg, "still connected") != NULL || strstr(err->msg, "try again in a moment") != NULL);
        if (!again || trainer_stop_flag || sl_clock_ns() >= deadline)
            return rc;
        nanosleep(&(struct timespec){.tv_nsec = CLIENT_RETRY_MS * 1000000L}, NULL);
    }
}

/* Take place `rank` of `size` from epoch `epoch`, with `session` on the
 * servers: the input client and a new training loop (its first step pulls
 * the variables). */
static int enter_world(struct trainer *t, uint32_t rank, uint32_t size, uint64_t epoch, uint64_t session,
                       struct sl_error *err)
{
    struct trainer_opts *o = &t->o;
    o->worker = rank;
    o->workers = size;
    train_expose_world(t->expose, size, rank, 1); /* a joiner's admission counts as a change too */
    t->ps_session = session;
    int rc = open_client_at(t, epoch, err);
    if (rc == 0 && o->trace != NULL)
        rc = trainer_check_trace_feature(client_welcome(t->cl), o->feature, err);
    if (rc == 0)
        rc = trainer_loop_start(t, err);
    return rc;
}

int trainer_ps_elastic_boundary(struct trainer *t, const struct staged_step *s, uint64_t steps, int *released)
{
    struct trainer_ps_elastic *el = t->pel;
    struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    *released = 0;
    uint64_t next = s->epoch + 1, mine = train_ps_draw_id();
    uint32_t old = o->workers;
    struct train_elastic_msg w = {0};
    trainer_ps_elastic_poll(t, s->epoch);
    int rc = el->ep.coordinator ? coordinator_sync(t, next, steps, mine, &w, &err) : member_sync(t, mine, &w, &err);
    if (rc != 0 || (w.k == 0 && w.a != TRAIN_ELASTIC_RELEASED))
        goto out; /* no change: the same client and loop go on */
    /* the servers took the new world before any WORLD reached a member:
     * the old loop's BYE (its old session) is ignored there */
    train_loop_destroy(t->loop);
    t->loop = NULL;
    train_expose_input_closing(t->expose, t->cl);
    client_close(t->cl);
    t->cl = NULL;
    if (w.a == TRAIN_ELASTIC_RELEASED) {
        train_expose_world(t->expose, 0, 0, 1);
        sl_log(SL_LOG_INFO,
               "elastic: worker %u let go at epoch %" PRIu64 "'s end (after its last push; %" PRIu64
               " steps), as asked",
               o->worker, s->epoch, steps);
        *released = 1;
        goto out;
    }
    sl_log(SL_LOG_INFO, "elastic: from epoch %" PRIu64 ": %u workers -> %u; worker %u is now worker %u of %u", next,
           old, w.b, o->worker, w.a, w.b);
    el->ep.gen++;
    rc = enter_world(t, w.a, w.b, next, w.k, &err);
out:
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    return 0;
}

int trainer_ps_elastic_join(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    uint64_t session = train_ps_draw_id();
    int rc = open_socket(t, 0, &err);
    struct train_elastic_msg m;
    if (rc == 0)
        rc = trainer_elastic_ep_join(t, &t->pel->ep, &ps_hooks, session, &m, &err);
    if (rc == 0) {
        t->pel->ep.gen = m.gen;
        sl_log(SL_LOG_INFO, "elastic: joined as worker %u of %u from epoch %" PRIu64 " (global step %" PRIu64 ")", m.a,
               m.b, m.c, m.d);
        rc = enter_world(t, m.a, m.b, m.c, m.k, &err);
        if (rc == 0 && t->resume_epoch == 0)
            t->start_step = client_position(t->cl) / t->replicas;
    }
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
