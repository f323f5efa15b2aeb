/* client_roster.c: feeders that join the running job (issue #30).
 *
 * The plan does not depend on the number of feeders F: F only says who
 * makes which piece (share j: seq % F == j). A feeder that knows of
 * feeders that joined says so in a ROSTER (feeders F' > F, the joined
 * ones' endpoints and keys). The client then reshapes its stream at S, the
 * first piece not yet received in order: every piece below S came under
 * modulus F, every piece from S on comes under F'. What waits in the
 * reorder window (pieces >= S) is let go, to come again; the step being
 * gathered and the lent steps are copied out of shared memory first (the
 * feeders reuse those buffers once they have the new HELLO); every share
 * j < F gets a new connection of the same incarnation to whoever hosts it
 * (a takeover's survivor included), HELLO(share j, resume = its first
 * piece >= S, feeders = F'), which replaces the old one at the feeder at
 * once; the new feeders get HELLO(share j, resume, F'). The connections of
 * modulus F are all closed, so from then on every piece comes under F':
 * the share check (client.c) uses the modulus in force. The stream the
 * caller sees is unchanged; no other trainer needs to agree on S.
 *
 * A ROSTER that is incomplete or bad (an index of [F, F') missing, an
 * endpoint that is not one, no key under CURVE, F' over
 * CLIENT_MAX_FEEDERS) is logged, rate limited, and ignored: the stream
 * goes on under F. One that names no more feeders than the client has, or
 * comes after the end of the stream, is ignored silently.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_endpoint.h"
#include "sl_log.h"
#include "client_int.h"
#include "client_metrics.h"
#include "client_reorder.h"

static int all_ended(const struct client *c)
{
    for (size_t j = 0; j < c->o.nfeeders; j++)
        if (!c->f[j].ended)
            return 0;
    return 1;
}

/* Entry e of a ROSTER, for share k: 0, or why it cannot be used (in why). */
static int check_entry(const struct client *c, const struct sl_wire_roster_entry *e, char *why, size_t cap)
{
    char ep[SL_WIRE_MAX_ENDPOINT + 1];
    struct sl_error derr = {0};
    if (e->endpoint_len == 0 || e->endpoint_len > SL_WIRE_MAX_ENDPOINT || memchr(e->endpoint, '\0', e->endpoint_len)) {
        snprintf(why, cap, "feeder %" PRIu32 ": an endpoint of %zu bytes", e->index, e->endpoint_len);
        return -1;
    }
    memcpy(ep, e->endpoint, e->endpoint_len);
    ep[e->endpoint_len] = '\0';
    if (sl_endpoint_check(ep, &derr) != 0) {
        snprintf(why, cap, "feeder %" PRIu32 ": %.300s", e->index, derr.msg);
        return -1;
    }
    if (c->o.curve == NULL) /* a key without CURVE is not used */
        return 0;
    char key[SL_WIRE_KEY_Z85 + 1];
    uint8_t raw[32];
    if (e->key_len != SL_WIRE_KEY_Z85) {
        snprintf(why, cap, "feeder %" PRIu32 " at %s: no CURVE key (this trainer uses CURVE)", e->index, ep);
        return -1;
    }
    memcpy(key, e->key, SL_WIRE_KEY_Z85);
    key[SL_WIRE_KEY_Z85] = '\0';
    if (zmq_z85_decode(raw, key) == NULL) {
        snprintf(why, cap, "feeder %" PRIu32 " at %s: its CURVE key is not Z85", e->index, ep);
        return -1;
    }
    return 0;
}

void client__bad_roster(struct client *c, size_t j, const char *why)
{
    sl_log_limit_flush(&c->roster_log, 0);
    if (sl_log_allowed(&c->roster_log))
        sl_log(SL_LOG_WARN, "feeder %s: a ROSTER ignored (%s); serving on with %zu feeders", c->f[j].addr, why,
               c->o.nfeeders);
}

void client__note_roster(struct client *c, size_t j, const struct sl_wire_roster *r)
{
    sl_log_limit_flush(&c->roster_log, 0);
    size_t F = c->o.nfeeders;
    if (r->feeders <= F || r->feeders <= c->pending || all_ended(c))
        return; /* nothing new, or too late */
    char why[SL_ERROR_MSG_MAX] = "";
    uint32_t want = (uint32_t)F; /* the next index the roster must name */
    if (r->feeders > CLIENT_MAX_FEEDERS)
        snprintf(why, sizeof why, "more than %d feeders", CLIENT_MAX_FEEDERS);
    for (size_t i = 0; !why[0] && i < r->count && i < SL_WIRE_MAX_ROSTER; i++) {
        const struct sl_wire_roster_entry *e = &r->e[i];
        if (e->index < F)
            continue; /* one the client knows already */
        if (e->index != want)
            snprintf(why, sizeof why, "feeder %" PRIu32 " is missing", want);
        else if (check_entry(c, e, why, sizeof why) == 0)
            want++;
    }
    if (!why[0] && want != r->feeders)
        snprintf(why, sizeof why, "feeder %" PRIu32 " is missing", want);
    if (why[0]) {
        if (sl_log_allowed(&c->roster_log))
            sl_log(SL_LOG_WARN, "feeder %s: a ROSTER of %" PRIu32 " feeders ignored (%s); serving on with %zu",
                   c->f[j].addr, r->feeders, why, F);
        return;
    }
    /* good: the joined feeders' addresses and keys, for the reshape */
    for (size_t i = 0; i < r->count; i++) {
        const struct sl_wire_roster_entry *e = &r->e[i];
        if (e->index < F)
            continue;
        memcpy(c->joined_addr[e->index], e->endpoint, e->endpoint_len);
        c->joined_addr[e->index][e->endpoint_len] = '\0';
        if (c->o.curve != NULL) {
            memcpy(c->joined_key[e->index], e->key, SL_WIRE_KEY_Z85);
            c->joined_key[e->index][SL_WIRE_KEY_Z85] = '\0';
        }
    }
    c->pending = r->feeders;
    c->roster_ns = sl_clock_ns();
}

/* Room for the new feeders' credits: more slots, a larger free list, a
 * larger reorder window (nothing is held in it by now). */
static int grow_slots(struct client *c, size_t add, struct slot *more, struct slot **free_slots, struct sl_error *err)
{
    if (client_reorder_resize(c->reorder, c->nslots + add) != 0) {
        sl_free(more);
        return sl_error_set(err, SL_ENOMEM, "out of memory for a reorder window of %zu", c->nslots + add);
    }
    c->free_slots = free_slots;
    for (size_t i = 0; i < add; i++)
        c->free_slots[c->nfree++] = &more[i];
    c->grown[c->ngrowths] = more;
    c->ngrown[c->ngrowths++] = add;
    c->nslots += add;
    return 0;
}

/* Share j to its new connection under the modulus in force, from its
 * first piece >= S: a share being rejoined keeps its wait (its deadline
 * and takeover), another awaits the WELCOME as a rejoin does. */
static int reconnect(struct client *c, size_t j, uint64_t S, uint64_t now, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    f->resume = client__first_of_share(c, S, j);
    client__close_probe(f, 0);
    if (f->rejoining && f->sock == NULL)
        return 0; /* its next try says the new HELLO */
    client__close_socket(f);
    if (!f->rejoining) {
        /* its answer is waited for as for a rejoin: after takeover_ms a
         * survivor is asked; at the deadline it is lost for good */
        uint64_t wait_ms = (uint64_t)c->o.connect_timeout_ms;
        if ((uint64_t)c->o.reconnect_ms > wait_ms)
            wait_ms = (uint64_t)c->o.reconnect_ms;
        f->rejoining = 1;
        f->reshaping = 1;
        f->welcomed = 0;
        f->ended = 0;
        f->stalled = 0;
        f->awaiting_first = 0;
        f->lost_ns = now;
        f->deadline_ns = now + wait_ms * 1000000u;
        f->takeover_ns = c->o.takeover_ms > 0 ? now + (uint64_t)c->o.takeover_ms * 1000000u : 0;
        f->refused[0] = '\0';
        f->refused_by = 0;
        snprintf(f->lost, sizeof f->lost, "no answer to the HELLO of %zu feeders", c->o.nfeeders);
    }
    return client__rejoin_connect(c, j, err);
}

int client__reshape(struct client *c, struct sl_error *err)
{
    size_t F = c->o.nfeeders, F2 = c->pending;
    if (c->have_step)
        return 0; /* the caller's step may lie in shared memory: at the next call */
    c->pending = 0;
    if (F2 <= F || all_ended(c))
        return 0;
    uint64_t S = client_reorder_next(c->reorder), now = sl_clock_ns();
    /* what is needed first, so that nothing changes without it */
    size_t add = (size_t)c->o.credits * (F2 - F);
    struct slot *more = sl_calloc(add, sizeof *more);
    struct slot **fs = more != NULL ? sl_realloc(c->free_slots, (c->nslots + add) * sizeof *fs) : NULL;
    if (fs == NULL) {
        sl_free(more);
        return sl_error_set(err, SL_ENOMEM, "out of memory for %zu feeders", F2);
    }
    c->free_slots = fs;
    /* every connection is new: nothing of the old ones gives credit back */
    for (size_t j = 0; j < F; j++) {
        c->f[j].conn++;
        c->f[j].owed = c->f[j].unreturned = c->f[j].peak = 0;
    }
    /* what waits in the reorder window comes again, under F2 */
    for (uint64_t seq = S; client_reorder_held(c->reorder) > 0 && seq < S + c->nslots; seq++) {
        struct slot *s = client_reorder_take(c->reorder, seq);
        if (s != NULL)
            client__release_slot(c, s);
    }
    /* the step being gathered and the lent steps, out of shared memory */
    int rc = client__unshare_gathered(c, -1, err);
    if (rc != 0) {
        sl_free(more);
        return rc;
    }
    for (size_t j = 0; j < F; j++)
        client__detach_shm(&c->f[j]);
    client__detach_lent(c, -1, 0);
    if ((rc = grow_slots(c, add, more, fs, err)) != 0)
        return rc;
    /* the new feeders' places, then the new modulus */
    char names[SL_ERROR_MSG_MAX];
    size_t at = 0;
    names[0] = '\0';
    for (size_t j = F; j < F2; j++) {
        struct feeder *f = &c->f[j];
        c->addr[j] = c->joined_addr[j];
        c->key[j] = c->o.curve != NULL ? c->joined_key[j] : NULL;
        zmq_msg_init(&f->welcome_frame);
        f->addr = c->addr[j];
        f->host = (uint32_t)j;
        f->joined_ns = c->roster_ns;
        if (at < sizeof names)
            at += (size_t)snprintf(names + at, sizeof names - at, "%sfeeder %zu at %s", j > F ? ", " : "", j, f->addr);
    }
    __atomic_store_n(&c->o.nfeeders, F2, __ATOMIC_RELAXED); /* read by client_wait_by_feeder in any thread */
    if (c->takeover_ms0 > 0)                                /* someone to take a share over now */
        c->o.takeover_ms = c->takeover_ms0;
    sl_log(SL_LOG_INFO, "feeders: %zu -> %zu (%s joined); serving from piece %" PRIu64, F, F2, names, S);
    sl_metrics_add(c->m, CLIENT_M_FEEDER_JOINS, F2 - F);
    for (size_t j = 0; j < F2 && rc == 0; j++)
        rc = reconnect(c, j, S, now, err);
    return rc;
}
