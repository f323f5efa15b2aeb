/* feed_join: feeders joining a running job (docs/feeder.md, "Joining a
 * running job"; docs/protocol.md, "Joining").
 *
 * The plan does not depend on the number of feeders: F only says which
 * feeder makes which piece (seq % F). A feeder started with --join asks
 * the job's feeders (JOIN, from a DEALER of its own to each) to count it
 * in as feeder J of F'; each one that does keeps it in its roster and
 * tells its trainers (ROSTER), which reshape their streams to modulus F'
 * at their own position. Nothing else changes on a feeder: a trainer's
 * HELLO says the modulus of its connection (feed_hello.c).
 *
 * The roster: the joined feeders known (index, endpoint, key), and the
 * modulus it tells: the largest modulus named (own --feeders, a JOIN's, an
 * answer's) whose every index from the first feeders' count up is known
 * (1 -> 2 -> 4: the roster says 4 only once feeders 2 and 3 both joined).
 *
 * A JOIN is a hostile peer's message like any other: every field checked,
 * at most SL_WIRE_MAX_ROSTER feeders in all (bounded memory), refusals
 * logged rate-limited and counted. A JOIN repeated (the joiner resends it
 * every heartbeat interval, its way of knowing the feeder is still there)
 * is answered again, counted once.
 *
 * One owner: the serving thread (its ROUTER and the joiner's DEALERs).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "feed_serve.h"
#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_curve.h"
#include "sl_endpoint.h"
#include "sl_log.h"
#include "sl_wire.h"
#include "sl_zsock.h"

/* ---- the job digest ---- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    return fnv(h, b, sizeof b);
}

static uint64_t fnv_str(uint64_t h, const char *s, size_t n)
{
    return fnv(fnv_u64(h, n), s, n);
}

uint64_t feed__job_digest(const struct server *s)
{
    const struct feed_job *job = s->o->job;
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    h = fnv_str(h, "sluice job digest 1", 19);
    h = fnv_str(h, job->name, strlen(job->name));
    struct feed_plan_config cfg;
    if (feed_job_fill_plan_config(job, feed_source_counts(s->o->src), 1, 1, &cfg) != 0)
        return fnv_u64(h, 0); /* no files: the plan is empty whatever the rest */
    h = fnv_u64(h, cfg.nfiles);
    for (size_t i = 0; i < cfg.nfiles; i++) {
        /* a file by its name without its folder (feeders may mount the
         * data at other places) and its records */
        const char *path = job->files.items[i], *slash = strrchr(path, '/');
        const char *name = slash != NULL ? slash + 1 : path;
        h = fnv_u64(fnv_str(h, name, strlen(name)), cfg.counts[i]);
    }
    const uint64_t fields[] = {(uint64_t)cfg.source_is_files,
                               (uint64_t)cfg.policy,
                               (uint64_t)cfg.hint,
                               cfg.global_batch,
                               (uint64_t)cfg.drop_remainder,
                               cfg.shuffle_buffer,
                               cfg.seed,
                               (uint64_t)cfg.reshuffle_each_epoch,
                               cfg.epochs,
                               cfg.parallel_reads,
                               (uint64_t)cfg.per_replica_input,
                               (uint64_t)cfg.pr_shard};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        h = fnv_u64(h, fields[i]);
    h = fnv_u64(h, s->schema.ntensors);
    for (size_t i = 0; i < s->schema.ntensors; i++) {
        const struct feed_schema_tensor *t = &s->schema.t[i];
        h = fnv_str(h, t->name, strlen(t->name));
        h = fnv_u64(fnv_u64(fnv_u64(h, (uint64_t)t->dtype), (uint64_t)t->ragged), (uint64_t)t->rank);
        for (int d = 0; d < t->rank; d++)
            h = fnv_u64(h, (uint64_t)t->shape[d]);
    }
    return h;
}

/* ---- the roster ---- */

static const struct feed_curve *curve_of(const struct server *s)
{
    return s->o->listener != NULL ? s->o->listener->curve : s->o->curve;
}

static int known(const struct feed_roster *r, uint32_t i)
{
    return i < SL_WIRE_MAX_ROSTER && (r->known >> i & 1u);
}

static void note_modulus(struct feed_roster *r, uint32_t f)
{
    if (f >= 1 && f <= SL_WIRE_MAX_ROSTER)
        r->moduli |= UINT64_C(1) << (f - 1);
}

static void add_entry(struct feed_roster *r, uint32_t i, const char *ep, size_t ep_len, const char *key, size_t key_len)
{
    struct feed_roster_entry *e = &r->e[i];
    memcpy(e->endpoint, ep, ep_len);
    e->endpoint[ep_len] = '\0';
    memcpy(e->key, key, key_len);
    e->key[key_len] = '\0';
    r->known |= UINT64_C(1) << i;
}

/* The largest modulus named whose indexes [base, it) are all known. */
static uint32_t complete_modulus(const struct feed_roster *r)
{
    uint32_t best = r->base;
    for (uint32_t f = r->base + 1; f <= SL_WIRE_MAX_ROSTER && known(r, f - 1); f++)
        if (r->moduli >> (f - 1) & 1u)
            best = f;
    return best;
}

void feed__roster_init(struct server *s)
{
    struct feed_roster *r = &s->roster;
    memset(r, 0, sizeof *r);
    note_modulus(r, s->o->feeders);
    if (s->o->njoin == 0) {
        r->base = r->feeders = s->o->feeders;
    } else if (s->o->feeder_index < SL_WIRE_MAX_ROSTER) {
        const char *ep = s->o->advertise != NULL ? s->o->advertise : s->o->listen;
        const struct feed_curve *c = curve_of(s);
        const char *key = c != NULL ? c->keys->public_z85 : "";
        size_t n = strlen(ep);
        add_entry(r, s->o->feeder_index, ep, n < SL_WIRE_MAX_ENDPOINT ? n : SL_WIRE_MAX_ENDPOINT, key, strlen(key));
    }
    sl_metrics_set(s->m, FEED_M_ROSTER_FEEDERS, r->feeders);
}

/* The roster as a ROSTER in s->hbuf: its modulus and the known entries
 * below it. The encoder's status. */
static int encode_roster(struct server *s)
{
    const struct feed_roster *r = &s->roster;
    struct sl_wire_roster *m = &s->msg.roster;
    m->feeders = r->feeders;
    m->count = 0;
    for (uint32_t i = r->base; i < r->feeders && i < SL_WIRE_MAX_ROSTER; i++) {
        if (!known(r, i))
            continue;
        struct sl_wire_roster_entry *e = &m->e[m->count++];
        e->index = i;
        e->endpoint = r->e[i].endpoint;
        e->endpoint_len = strlen(r->e[i].endpoint);
        e->key = r->e[i].key;
        e->key_len = strlen(r->e[i].key);
    }
    s->msg.type = SL_WIRE_ROSTER;
    return sl_wire_encode_roster(m, &s->hbuf);
}

/* The roster's modulus recomputed; when it grew, logged and told to every
 * connection that reads ROSTER. */
static void roster_update(struct server *s)
{
    struct feed_roster *r = &s->roster;
    uint32_t before = r->feeders, now = complete_modulus(r);
    if (now <= before)
        return;
    r->feeders = now;
    sl_metrics_set(s->m, FEED_M_ROSTER_FEEDERS, now);
    char names[512] = "";
    size_t len = 0;
    for (uint32_t i = before > r->base ? before : r->base; i < now && len < sizeof names; i++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%sfeeder %u at %s", len ? ", " : "", i,
                                r->e[i].endpoint);
    if (before == 0) /* a joiner's first answer */
        sl_log(SL_LOG_INFO, "roster: %u feeders (%s)", now, names);
    else
        sl_log(SL_LOG_INFO, "roster: %u -> %u feeders (%s); trainers that read ROSTER are told", before, now, names);
    for (size_t i = 0; i < s->ntrainers; i++) {
        struct trainer *t = &s->trainers[i];
        if (t->active && t->wants_roster)
            feed__send_simple(s, t, encode_roster(s), "ROSTER");
    }
}

void feed__roster_welcome(struct server *s, struct trainer *t)
{
    if (t->active && t->wants_roster && s->roster.feeders > t->feeders)
        feed__send_simple(s, t, encode_roster(s), "ROSTER");
}

/* ---- a JOIN from a feeder joining ---- */

static void vrefuse_join(struct server *s, const uint8_t *id, size_t id_len, const char *fmt, va_list ap)
{
    char reason[SL_WIRE_MAX_REASON];
    vsnprintf(reason, sizeof reason, fmt, ap);
    if (sl_log_allowed(&s->lim_refuse))
        sl_log(SL_LOG_WARN, "refused a joining feeder: %s", reason);
    sl_metrics_add(s->m, FEED_M_JOINS_REFUSED, 1);
    struct sl_wire_refuse r = {.reason = reason, .reason_len = strlen(reason)};
    if (sl_wire_encode_refuse(&r, &s->hbuf) != 0)
        return;
    if (zmq_send(s->router, id, id_len, ZMQ_SNDMORE) >= 0)
        zmq_send(s->router, s->hbuf.data, s->hbuf.len, 0);
}

void feed__refuse_join(struct server *s, const uint8_t *id, size_t id_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vrefuse_join(s, id, id_len, fmt, ap);
    va_end(ap);
}

int feed_endpoint_is_wildcard(const char *ep)
{
    if (strncmp(ep, "tcp://", 6) != 0)
        return 0;
    const char *hp = ep + 6, *colon = strrchr(hp, ':');
    if (colon == NULL)
        return 0;
    size_t hlen = (size_t)(colon - hp);
    const char *port = colon + 1;
    return (hlen == 1 && hp[0] == '*') || (hlen == 7 && strncmp(hp, "0.0.0.0", 7) == 0) ||
           (hlen == 4 && strncmp(hp, "[::]", 4) == 0) || strcmp(port, "*") == 0 || strcmp(port, "0") == 0;
}

/* The checks of a JOIN (j: a copy, its strings borrowed from the message):
 * 0, or -1 when it was refused. */
static int join_check(struct server *s, const uint8_t *id, size_t id_len, const struct sl_wire_join *j)
{
    const struct feed_roster *r = &s->roster;
    const char *name = s->o->job->name;
    if (r->base == 0) {
        feed__refuse_join(s, id, id_len,
                          "this feeder is joining the job itself and no feeder has counted it in yet: ask one of "
                          "the job's first feeders");
        return -1;
    }
    if (j->job_len != strlen(name) || memcmp(j->job, name, j->job_len) != 0) {
        feed__refuse_join(s, id, id_len, "feeder %u joins job '%.*s', this feeder serves '%s'", j->feeder,
                          (int)j->job_len, j->job, name);
        return -1;
    }
    if (j->digest != s->digest) {
        feed__refuse_join(s, id, id_len,
                          "feeder %u joins with another plan: digest %016" PRIx64 ", this job's %016" PRIx64
                          " (files, record counts, plan settings or schema differ)",
                          j->feeder, j->digest, s->digest);
        return -1;
    }
    if (j->feeders > SL_WIRE_MAX_ROSTER || j->feeder >= j->feeders) { /* the decoder's rules, kept here too */
        feed__refuse_join(s, id, id_len, "feeder %u of %u: at most %d feeders serve a job", j->feeder, j->feeders,
                          SL_WIRE_MAX_ROSTER);
        return -1;
    }
    if (j->feeder < r->base) {
        feed__refuse_join(s, id, id_len, "feeder index %u is one of the job's first %u feeders, it cannot join",
                          j->feeder, r->base);
        return -1;
    }
    if (j->feeders < r->feeders) {
        feed__refuse_join(s, id, id_len,
                          "feeder %u counts %u feeders, the job has %u already: shrinking the feeders is not "
                          "supported",
                          j->feeder, j->feeders, r->feeders);
        return -1;
    }
    char ep[SL_WIRE_MAX_ENDPOINT + 1];
    memcpy(ep, j->endpoint, j->endpoint_len);
    ep[j->endpoint_len] = '\0';
    struct sl_error err = {0};
    if (sl_endpoint_check(ep, &err) != 0) {
        feed__refuse_join(s, id, id_len, "feeder %u: endpoint %s", j->feeder, err.msg);
        return -1;
    }
    if (feed_endpoint_is_wildcard(ep) || strncmp(ep, "inproc://", 9) == 0) {
        feed__refuse_join(s, id, id_len,
                          "feeder %u advertises '%s', which trainers cannot connect to (give it --advertise)",
                          j->feeder, ep);
        return -1;
    }
    int curve = curve_of(s) != NULL;
    if (curve && j->key_len == 0) {
        feed__refuse_join(s, id, id_len, "feeder %u gave no CURVE key, and this job's feeders use CURVE", j->feeder);
        return -1;
    }
    if (!curve && j->key_len != 0) {
        feed__refuse_join(s, id, id_len, "feeder %u gave a CURVE key, and this job's feeders serve without CURVE",
                          j->feeder);
        return -1;
    }
    if (known(r, j->feeder) &&
        (strcmp(r->e[j->feeder].endpoint, ep) != 0 || strlen(r->e[j->feeder].key) != j->key_len ||
         memcmp(r->e[j->feeder].key, j->key, j->key_len) != 0)) {
        feed__refuse_join(s, id, id_len, "feeder index %u has joined already at %s (this JOIN says %s)", j->feeder,
                          r->e[j->feeder].endpoint, ep);
        return -1;
    }
    return 0;
}

void feed__on_join(struct server *s, const uint8_t *id, size_t id_len, const struct sl_wire_join *join)
{
    /* s->msg is reused for the answer: keep the JOIN (its strings are in
     * the message frame, alive until the caller closes it) */
    const struct sl_wire_join j = *join;
    if (join_check(s, id, id_len, &j) != 0)
        return;
    struct feed_roster *r = &s->roster;
    uint64_t now = sl_clock_ns();
    if (!known(r, j.feeder)) {
        add_entry(r, j.feeder, j.endpoint, j.endpoint_len, j.key, j.key_len);
        sl_metrics_add(s->m, FEED_M_JOINS, 1);
        sl_log(SL_LOG_INFO, "feeder %u of %u joined the job, serving at %s", j.feeder, j.feeders,
               r->e[j.feeder].endpoint);
    } else if (now - r->e[j.feeder].answered_ns < (uint64_t)s->o->heartbeat_ms * 500000u) {
        /* the joiner asks once a heartbeat: a flood of the same JOIN (the
         * answers queued to a peer that may never read them) is not
         * answered */
        return;
    }
    r->e[j.feeder].answered_ns = now;
    note_modulus(r, j.feeders);
    roster_update(s);
    /* the answer: the roster with the joiner counted in */
    if (encode_roster(s) == 0 && zmq_send(s->router, id, id_len, ZMQ_SNDMORE) >= 0)
        zmq_send(s->router, s->hbuf.data, s->hbuf.len, 0);
}

/* ---- the options ---- */

int feed_join_options(const char *join, const char *advertise, const char *listen, uint64_t feeder_index,
                      uint64_t feeders, int serve_runs, char ***eps, size_t *n, struct sl_error *err)
{
    *eps = NULL;
    *n = 0;
    if (join == NULL) {
        if (advertise != NULL)
            return sl_error_set(err, SL_EINVAL, "--advertise needs --join (it names a feeder joining a running job)");
        return 0;
    }
    if (feeder_index == 0)
        return sl_error_set(err, SL_EINVAL,
                            "--join: --feeder-index 0 is one of the job's first feeders; a feeder joining takes an "
                            "index at or past their count (--feeder-index J --feeders F, J >= the first feeders' "
                            "count)");
    if (feeders > SL_WIRE_MAX_ROSTER)
        return sl_error_set(err, SL_EINVAL,
                            "--join: --feeders %" PRIu64 ": at most %d feeders serve a job that feeders join", feeders,
                            SL_WIRE_MAX_ROSTER);
    if (serve_runs)
        return sl_error_set(err, SL_EINVAL, "--join and --serve-runs do not go together");
    const char *ad = advertise != NULL ? advertise : listen;
    if (advertise != NULL && sl_endpoint_check(advertise, err) != 0)
        return sl_error_prefix(err, "--advertise: ");
    if (ad != NULL &&
        (feed_endpoint_is_wildcard(ad) || strncmp(ad, "inproc://", 9) == 0 || strlen(ad) > SL_WIRE_MAX_ENDPOINT))
        return sl_error_set(err, SL_EINVAL,
                            advertise != NULL ? "--advertise %s: trainers cannot connect to it (give this host's "
                                                "address and port)"
                                              : "--join: --listen %s is a wildcard trainers cannot connect to: "
                                                "give --advertise (this host's address and the port)",
                            ad);
    size_t count = 1;
    for (const char *p = join; *p; p++)
        count += *p == ',';
    if (count > SL_WIRE_MAX_ROSTER)
        return sl_error_set(err, SL_EINVAL, "--join: %zu endpoints, at most %d", count, SL_WIRE_MAX_ROSTER);
    if ((*eps = sl_calloc(count, sizeof **eps)) == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    for (const char *p = join;; p++) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        char *ep = sl_malloc(len + 1);
        if (ep == NULL)
            return sl_error_set(err, SL_ENOMEM, "out of memory");
        memcpy(ep, p, len);
        ep[len] = '\0';
        (*eps)[(*n)++] = ep;
        if (len == 0)
            return sl_error_set(err, SL_EINVAL, "--join '%s': an empty endpoint", join);
        if (sl_endpoint_check(ep, err) != 0)
            return sl_error_prefix(err, "--join: ");
        if (feed_endpoint_is_wildcard(ep))
            return sl_error_set(err, SL_EINVAL, "--join %s: a wildcard, which cannot be connected to", ep);
        if (comma == NULL)
            break;
        p = comma;
    }
    return 0;
}

/* ---- the joiner's side: asking the job's feeders ---- */

int feed__join_open(struct server *s, struct sl_error *err)
{
    const struct feed_server_opts *o = s->o;
    if (o->njoin == 0)
        return 0;
    if (o->njoin > SL_WIRE_MAX_ROSTER)
        return sl_error_set(err, SL_EINVAL, "--join: %zu feeders listed, at most %d", o->njoin, SL_WIRE_MAX_ROSTER);
    if (o->feeder_index == 0 || o->feeders > SL_WIRE_MAX_ROSTER)
        return sl_error_set(err, SL_EINVAL, "--join: feeder %u of %u cannot join (1..63 of at most %d)",
                            o->feeder_index, o->feeders, SL_WIRE_MAX_ROSTER);
    s->joiners = sl_calloc(o->njoin, sizeof *s->joiners);
    if (s->joiners == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    s->njoiners = o->njoin;
    const struct feed_curve *c = curve_of(s);
    for (size_t i = 0; i < o->njoin; i++) {
        struct feed_joiner *jn = &s->joiners[i];
        jn->endpoint = o->join[i];
        char what[SL_WIRE_MAX_ENDPOINT + 32];
        snprintf(what, sizeof what, "--join %s", jn->endpoint);
        struct sl_zsock_opts zo = {.linger_ms = 0,
                                   .max_msg = SL_WIRE_MAX_HEADER + (c != NULL ? SL_CURVE_FRAME_OVERHEAD : 0),
                                   .handshake_ms = FEED_HANDSHAKE_MS};
        jn->sock = sl_zsock_open(s->ctx, ZMQ_DEALER, &zo, what, err);
        if (jn->sock == NULL)
            return SL_EIO;
        /* under CURVE the job's feeders share one key pair (as a cluster
         * spec gives them), and each one's --curve-allow holds it */
        int rc = c != NULL ? sl_curve_client(jn->sock, c->keys, c->keys->public_z85, err) : 0;
        if (rc == 0)
            rc = sl_endpoint_connect(jn->sock, jn->endpoint, err);
        if (rc != 0) {
            sl_error_prefix(err, "--join %s: ", jn->endpoint);
            return rc;
        }
    }
    return 0;
}

void feed__join_close(struct server *s)
{
    for (size_t i = 0; i < s->njoiners; i++)
        if (s->joiners[i].sock != NULL)
            zmq_close(s->joiners[i].sock);
    sl_free(s->joiners);
    s->joiners = NULL;
    s->njoiners = 0;
}

/* The JOIN to jn. */
static void send_join(struct server *s, struct feed_joiner *jn, uint64_t now)
{
    const struct feed_roster_entry *own = &s->roster.e[s->o->feeder_index];
    struct sl_wire_join m = {.feeder = s->o->feeder_index,
                             .feeders = s->o->feeders,
                             .digest = s->digest,
                             .job = s->o->job->name,
                             .job_len = strlen(s->o->job->name),
                             .endpoint = own->endpoint,
                             .endpoint_len = strlen(own->endpoint),
                             .key = own->key,
                             .key_len = strlen(own->key)};
    /* while the feeder is not reached they queue, up to the socket's
     * bound; the burst that arrives then is answered once (feed__on_join) */
    if (sl_wire_encode_join(&m, &s->hbuf) == 0)
        (void)zmq_send(jn->sock, s->hbuf.data, s->hbuf.len, ZMQ_DONTWAIT);
    jn->last_send_ns = now;
}

/* A ROSTER from a feeder that counted this one in: merged. */
static void merge_roster(struct server *s, struct feed_joiner *jn, const struct sl_wire_roster *m)
{
    struct feed_roster *r = &s->roster;
    uint32_t base = m->feeders; /* the first feeders' count: the answer's lowest entry, or its modulus */
    for (unsigned i = 0; i < m->count; i++) {
        const struct sl_wire_roster_entry *e = &m->e[i];
        if (e->index < base)
            base = e->index;
        if (!known(r, e->index))
            add_entry(r, e->index, e->endpoint, e->endpoint_len, e->key, e->key_len);
    }
    note_modulus(r, m->feeders);
    if (r->base == 0 || base < r->base)
        r->base = base;
    if (!jn->accepted) {
        jn->accepted = 1;
        sl_log(SL_LOG_INFO, "joined: the feeder at %s counted this one in as feeder %u of %u (it says %u feeders)",
               jn->endpoint, s->o->feeder_index, s->o->feeders, m->feeders);
    }
    s->join_accepted = 1;
    roster_update(s);
}

/* Read what jn's feeder answered. */
static void join_read(struct server *s, struct feed_joiner *jn, uint64_t now)
{
    for (int k = 0; k < 16; k++) {
        zmq_msg_t body;
        zmq_msg_init(&body);
        if (zmq_msg_recv(&body, jn->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&body);
            return;
        }
        struct sl_error err = {0};
        if (zmq_msg_more(&body) || sl_wire_decode(zmq_msg_data(&body), zmq_msg_size(&body), &s->msg, &err) != 0) {
            sl_metrics_add(s->m, FEED_M_BAD_MESSAGES, 1);
            if (sl_log_allowed(&s->lim_bad))
                sl_log(SL_LOG_WARN, "--join %s: bad answer: %s", jn->endpoint,
                       err.msg[0] ? err.msg : "more than one frame");
        } else if (s->msg.type == SL_WIRE_ROSTER) {
            jn->heard_ns = now;
            jn->refusal[0] = '\0';
            jn->gone = 0;
            merge_roster(s, jn, &s->msg.roster);
        } else if (s->msg.type == SL_WIRE_REFUSE) {
            jn->heard_ns = now;
            int again = strlen(jn->refusal) == s->msg.refuse.reason_len &&
                        memcmp(jn->refusal, s->msg.refuse.reason, s->msg.refuse.reason_len) == 0;
            size_t n =
                s->msg.refuse.reason_len < sizeof jn->refusal - 1 ? s->msg.refuse.reason_len : sizeof jn->refusal - 1;
            memcpy(jn->refusal, s->msg.refuse.reason, n);
            jn->refusal[n] = '\0';
            if (!again)
                sl_log(SL_LOG_WARN, "--join %s: refused: %s (asking again every heartbeat)", jn->endpoint, jn->refusal);
        } else {
            sl_metrics_add(s->m, FEED_M_BAD_MESSAGES, 1);
            if (sl_log_allowed(&s->lim_bad))
                sl_log(SL_LOG_WARN, "--join %s: unexpected %s", jn->endpoint, sl_wire_type_name(s->msg.type));
        }
        /* drain any further frames of a multi-frame message */
        while (zmq_msg_more(&body)) {
            zmq_msg_close(&body);
            zmq_msg_init(&body);
            if (zmq_msg_recv(&body, jn->sock, 0) < 0)
                break;
        }
        zmq_msg_close(&body);
    }
}

/* No feeder counted this one in within --timeout-ms: what each said. */
static void join_failed(struct server *s)
{
    struct sl_error e;
    char msg[sizeof e.msg];
    size_t len = (size_t)snprintf(msg, sizeof msg, "--join: no feeder of the job counted this one in within %.1f s:",
                                  (double)s->o->timeout_ms / 1e3);
    for (size_t i = 0; i < s->njoiners && len < sizeof msg; i++) {
        const struct feed_joiner *jn = &s->joiners[i];
        len += (size_t)snprintf(msg + len, sizeof msg - len, "%s %s %s%s", i ? ";" : "", jn->endpoint,
                                jn->refusal[0] ? "refused: " : "never answered", jn->refusal);
    }
    sl_error_set(&e, SL_EINVAL, "%s", msg);
    feed__fail_all(s, &e);
}

int feed__join_tick(struct server *s)
{
    if (s->njoiners == 0)
        return 0;
    uint64_t now = sl_clock_ns(), hb = (uint64_t)s->o->heartbeat_ms * 1000000u,
             to = (uint64_t)s->o->timeout_ms * 1000000u;
    if (s->join_start_ns == 0)
        s->join_start_ns = now;
    int alive = 0;
    for (size_t i = 0; i < s->njoiners; i++) {
        struct feed_joiner *jn = &s->joiners[i];
        join_read(s, jn, now);
        if (now - jn->last_send_ns >= hb)
            send_join(s, jn, now);
        if (jn->accepted && !jn->gone && now - jn->heard_ns > to) {
            jn->gone = 1;
            sl_log(SL_LOG_INFO, "--join %s: silent for %.1f s: that feeder is gone", jn->endpoint,
                   (double)(now - jn->heard_ns) / 1e9);
        }
        alive += jn->accepted && !jn->gone;
    }
    if (!s->join_accepted) {
        if (now - s->join_start_ns > to)
            join_failed(s);
        return 0;
    }
    if (alive > 0)
        return 0;
    for (size_t i = 0; i < s->ntrainers; i++)
        if (s->trainers[i].active)
            return 0;
    sl_log(SL_LOG_INFO, "every feeder this one joined is gone and no trainer is connected: done");
    return 1;
}
