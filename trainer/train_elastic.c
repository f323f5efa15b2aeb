/* train_elastic: the coordinator's messages and book (train_elastic.h). */
#include "train_elastic.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "sl_alloc.h"
#include "sl_bytes.h"

#define VERSION 2

/* The largest n1, n2, n3 a type allows (0: none). */
static void limits(uint32_t type, uint32_t max[3])
{
    max[0] = max[1] = max[2] = 0;
    switch (type) {
    case TRAIN_ELASTIC_JOIN:
        max[0] = TRAIN_ELASTIC_MAX_JOB;
        max[1] = TRAIN_ELASTIC_MAX_CONFIG;
        max[2] = TRAIN_ELASTIC_MAX_ENDPOINT;
        break;
    case TRAIN_ELASTIC_ACK:
    case TRAIN_ELASTIC_REFUSE: max[0] = SL_ERROR_MSG_MAX - 1; break;
    case TRAIN_ELASTIC_WORLD: max[0] = TRAIN_ELASTIC_MAX_WORLD; break;
    default: break;
    }
}

/* Why a decoded message's fields break its type's rules, or NULL. */
static const char *check_fields(const struct train_elastic_msg *m)
{
    switch (m->type) {
    case TRAIN_ELASTIC_JOIN:
        if (m->a == 0 || m->a > TRAIN_ELASTIC_MAX_REPLICAS)
            return "JOIN: replicas out of range";
        if (m->n[0] == 0 || m->n[2] == 0)
            return "JOIN: empty job or endpoint";
        if (memchr(m->s[2], ',', m->n[2]) != NULL || memchr(m->s[2], '\0', m->n[2]) != NULL)
            return "JOIN: a comma or NUL in the endpoint";
        return NULL;
    case TRAIN_ELASTIC_LEAVE:
    case TRAIN_ELASTIC_SYNC: return m->a == 0 || m->a >= TRAIN_ELASTIC_MAX_WORKERS ? "rank out of range" : NULL;
    case TRAIN_ELASTIC_BROKEN:
        if (m->a == 0 || m->a >= TRAIN_ELASTIC_MAX_WORKERS)
            return "rank out of range";
        return m->c > (UINT64_C(1) << 48) || m->d > (UINT64_C(1) << 48) || m->f > (UINT64_C(1) << 48)
                   ? "BROKEN: epoch or step out of range"
                   : NULL;
    case TRAIN_ELASTIC_REFUSE: return m->n[0] == 0 ? "REFUSE without a reason" : NULL;
    case TRAIN_ELASTIC_ACK: return NULL;
    case TRAIN_ELASTIC_WORLD:
        if (m->b == 0 || m->b > TRAIN_ELASTIC_MAX_WORKERS)
            return "WORLD: size out of range";
        if (m->a != TRAIN_ELASTIC_RELEASED && m->a >= m->b)
            return "WORLD: rank outside the world";
        if (m->a != TRAIN_ELASTIC_RELEASED && m->e == 0)
            return "WORLD: no parameters";
        if (m->c > (UINT64_C(1) << 48) || m->d > (UINT64_C(1) << 48) || m->e > (UINT64_C(1) << 40))
            return "WORLD: epoch, step or parameter count out of range";
        if (m->f > 0 && (m->h <= m->f || m->h > (UINT64_C(1) << 48) || m->g == 0 || m->g > TRAIN_ELASTIC_MAX_WORKERS))
            return "WORLD: a mid-epoch step outside the old world's epoch, or no old world";
        if (m->f > 0 && (m->i != 0 || m->j != 0 || m->k != 0))
            return "WORLD: a mid-epoch change and a kept one";
        if (m->j > 0 && (m->i >= m->c || m->h <= m->j || m->h > (UINT64_C(1) << 48) || m->g == 0 ||
                         m->g > TRAIN_ELASTIC_MAX_WORKERS || m->k > (UINT64_C(1) << 56)))
            return "WORLD: a kept change not before the epoch, or out of range";
        return NULL;
    default: return "unknown message type";
    }
}

size_t train_elastic_encode(unsigned char *buf, size_t cap, const struct train_elastic_msg *m)
{
    uint32_t max[3];
    limits(m->type, max);
    size_t n = TRAIN_ELASTIC_HDR;
    for (int i = 0; i < 3; i++) {
        if (m->n[i] > max[i] || (m->n[i] > 0 && m->s[i] == NULL))
            return 0;
        n += m->n[i];
    }
    if (n > cap || check_fields(m) != NULL)
        return 0;
    struct sl_writer w = sl_writer_make(buf, cap);
    sl_write_bytes(&w, "SLE1", 4);
    sl_write_u16(&w, VERSION);
    sl_write_u16(&w, (uint16_t)m->type);
    sl_write_u32(&w, m->gen);
    sl_write_u32(&w, m->a);
    sl_write_u32(&w, m->b);
    sl_write_u64(&w, m->c);
    sl_write_u64(&w, m->d);
    sl_write_u64(&w, m->e);
    for (int i = 0; i < 3; i++)
        sl_write_u32(&w, m->n[i]);
    sl_write_u64(&w, m->f);
    sl_write_u64(&w, m->h);
    sl_write_u32(&w, m->g);
    sl_write_u64(&w, m->i);
    sl_write_u64(&w, m->j);
    sl_write_u64(&w, m->k);
    for (int i = 0; i < 3; i++)
        if (m->n[i] > 0)
            sl_write_bytes(&w, m->s[i], m->n[i]);
    return n;
}

const char *train_elastic_decode(const unsigned char *p, size_t n, struct train_elastic_msg *m)
{
    memset(m, 0, sizeof *m);
    struct sl_reader r = sl_reader_make(p, n);
    const uint8_t *magic = sl_read_bytes(&r, 4);
    uint16_t version = 0, type = 0;
    (void)sl_read_u16(&r, &version);
    (void)sl_read_u16(&r, &type);
    (void)sl_read_u32(&r, &m->gen);
    (void)sl_read_u32(&r, &m->a);
    (void)sl_read_u32(&r, &m->b);
    (void)sl_read_u64(&r, &m->c);
    (void)sl_read_u64(&r, &m->d);
    (void)sl_read_u64(&r, &m->e);
    for (int i = 0; i < 3; i++)
        (void)sl_read_u32(&r, &m->n[i]);
    (void)sl_read_u64(&r, &m->f);
    (void)sl_read_u64(&r, &m->h);
    (void)sl_read_u32(&r, &m->g);
    (void)sl_read_u64(&r, &m->i);
    (void)sl_read_u64(&r, &m->j);
    (void)sl_read_u64(&r, &m->k);
    if (r.bad)
        return "short header";
    if (memcmp(magic, "SLE1", 4) != 0)
        return "bad magic";
    if (version != VERSION)
        return "unsupported version";
    m->type = type;
    uint32_t max[3];
    limits(m->type, max);
    if (m->type < TRAIN_ELASTIC_JOIN || m->type > TRAIN_ELASTIC_BROKEN)
        return "unknown message type";
    uint64_t total = 0;
    for (int i = 0; i < 3; i++) {
        if (m->n[i] > max[i])
            return "a string longer than its limit";
        total += m->n[i];
    }
    if (total != sl_reader_left(&r))
        return "string lengths differ from the frame";
    for (int i = 0; i < 3; i++)
        m->s[i] = m->n[i] > 0 ? (const char *)sl_read_bytes(&r, m->n[i]) : "";
    return check_fields(m);
}

int train_elastic_coord_init(struct train_elastic_coord *c, const char *const *eps, uint32_t size, struct sl_error *err)
{
    struct train_elastic_coord keep = *c; /* the caller's job, config, limits */
    memset(c, 0, sizeof *c);
    c->job = keep.job;
    c->config = keep.config;
    c->endpoint = keep.endpoint;
    c->replicas = keep.replicas;
    c->max_workers = keep.max_workers;
    c->epochs = keep.epochs;
    if (size == 0 || size > TRAIN_ELASTIC_MAX_WORKERS)
        return sl_error_set(err, SL_EINVAL, "elastic: a world of %u workers (1 to %d)", size,
                            TRAIN_ELASTIC_MAX_WORKERS);
    c->eps = sl_calloc(size, sizeof *c->eps);
    c->leaving = sl_calloc(size, 1);
    c->broken = sl_calloc(size, 1);
    c->broken_at = sl_calloc(size, sizeof *c->broken_at);
    if (c->eps == NULL || c->leaving == NULL || c->broken == NULL || c->broken_at == NULL) {
        train_elastic_coord_free(c);
        return sl_error_set(err, SL_ENOMEM, "elastic: out of memory");
    }
    for (uint32_t k = 0; k < size; k++) {
        size_t len = strlen(eps[k]);
        if (len == 0 || len > TRAIN_ELASTIC_MAX_ENDPOINT || strchr(eps[k], ',') != NULL) {
            train_elastic_coord_free(c);
            return sl_error_set(err, SL_EINVAL,
                                "elastic: worker %u's ring endpoint '%s' is empty, longer than %d "
                                "bytes or holds a comma",
                                k, eps[k], TRAIN_ELASTIC_MAX_ENDPOINT);
        }
        memcpy(c->eps[k], eps[k], len + 1);
    }
    c->size = size;
    return 0;
}

void train_elastic_coord_free(struct train_elastic_coord *c)
{
    sl_free(c->eps);
    sl_free(c->leaving);
    sl_free(c->joins);
    sl_free(c->broken);
    sl_free(c->broken_at);
    c->eps = NULL;
    c->leaving = NULL;
    c->broken = NULL;
    c->broken_at = NULL;
    c->joins = NULL;
    c->size = c->njoins = 0;
}

static uint32_t staying(const struct train_elastic_coord *c)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < c->size; k++)
        n += !c->leaving[k];
    return n;
}

int train_elastic_coord_join(struct train_elastic_coord *c, const struct train_elastic_msg *m, const void *id,
                             size_t idlen, uint64_t epoch, struct sl_error *err)
{
    const char *config = c->config ? c->config : "";
    char ep[TRAIN_ELASTIC_MAX_ENDPOINT + 1];
    snprintf(ep, sizeof ep, "%.*s", (int)m->n[2], m->s[2]);
    if (m->n[0] != strlen(c->job) || memcmp(m->s[0], c->job, m->n[0]) != 0)
        return sl_error_set(err, SL_EPROTO,
                            "elastic: the joining worker (%s) is in job '%.*s', but worker 0 is in "
                            "job '%s'",
                            ep, (int)m->n[0], m->s[0], c->job);
    if (m->a != c->replicas)
        return sl_error_set(err, SL_EPROTO,
                            "elastic: the joining worker (%s) has %u replicas, but the job's workers "
                            "have %u: every worker of an elastic job has the same --replicas",
                            ep, m->a, c->replicas);
    if (m->n[1] != strlen(config) || memcmp(m->s[1], config, m->n[1]) != 0)
        return sl_error_set(err, SL_EPROTO, "elastic: the joining worker (%s) has config '%.*s', but worker 0 has '%s'",
                            ep, (int)m->n[1], m->s[1], config);
    if (c->epochs != 0 && epoch + 1 >= c->epochs)
        return sl_error_set(err, SL_EPROTO,
                            "elastic: the job is in its last epoch (epoch %" PRIu64 " of %" PRIu64
                            "): no epoch boundary is left to admit the joining worker (%s) at",
                            epoch, c->epochs, ep);
    for (uint32_t k = 0; k < c->size; k++)
        if (strcmp(c->eps[k], ep) == 0)
            return sl_error_set(err, SL_EPROTO,
                                "elastic: the joining worker's ring endpoint %s is already worker "
                                "%u's",
                                ep, k);
    for (uint32_t k = 0; k < c->njoins; k++)
        if (strcmp(c->joins[k].ep, ep) == 0)
            return sl_error_set(err, SL_EPROTO,
                                "elastic: a worker with ring endpoint %s already asked to join: it "
                                "is admitted at the next change (a repeated JOIN)",
                                ep);
    uint32_t after = staying(c) + c->njoins + 1;
    if (after > c->max_workers)
        return sl_error_set(err, SL_EPROTO,
                            "elastic: the joining worker (%s) would make %u workers, more than "
                            "--elastic-max-workers %u",
                            ep, after, c->max_workers);
    if (idlen > sizeof c->joins[0].id)
        return sl_error_set(err, SL_EPROTO, "elastic: the joining worker's routing id is %zu bytes", idlen);
    struct train_elastic_joiner *j = sl_realloc(c->joins, (size_t)(c->njoins + 1) * sizeof *j);
    if (j == NULL)
        return sl_error_set(err, SL_ENOMEM, "elastic: out of memory");
    c->joins = j;
    j = &c->joins[c->njoins++];
    memset(j, 0, sizeof *j);
    memcpy(j->ep, ep, strlen(ep) + 1);
    memcpy(j->id, id, idlen);
    j->idlen = idlen;
    return 0;
}

int train_elastic_coord_leave(struct train_elastic_coord *c, const struct train_elastic_msg *m, struct sl_error *err)
{
    if (m->gen != c->gen)
        return sl_error_set(err, SL_EPROTO, "elastic: a LEAVE from rank %u of world %u, but the world is %u now", m->a,
                            m->gen, c->gen);
    if (m->a == 0)
        return sl_error_set(err, SL_EPROTO,
                            "elastic: worker 0 cannot leave the job: it holds the coordinator "
                            "endpoint (%s)",
                            c->endpoint ? c->endpoint : "--elastic");
    if (m->a >= c->size)
        return sl_error_set(err, SL_EPROTO, "elastic: a LEAVE from rank %u, but the world has %u workers", m->a,
                            c->size);
    c->leaving[m->a] = 1;
    return 0;
}

void train_elastic_coord_drop_join(struct train_elastic_coord *c, uint32_t k)
{
    if (k >= c->njoins)
        return;
    memmove(&c->joins[k], &c->joins[k + 1], (size_t)(c->njoins - k - 1) * sizeof c->joins[0]);
    c->njoins--;
}

int train_elastic_coord_pending(const struct train_elastic_coord *c)
{
    return c->njoins > 0 || staying(c) != c->size;
}

uint32_t train_elastic_coord_next_size(const struct train_elastic_coord *c)
{
    return staying(c) + c->njoins;
}

/* train_elastic_defer for a next world of `next` members */
static int defer_to(const struct train_elastic_coord *c, uint32_t next, uint64_t epoch, uint64_t step, uint64_t T,
                    uint64_t epochs, int changed, uint64_t window, uint64_t *left)
{
    uint64_t rest = UINT64_MAX, whole = 0, pieces = 0;
    if (epochs != 0) {
        if (epoch >= epochs || step > T)
            rest = 0; /* past the job's end: nothing left */
        else if (__builtin_mul_overflow(epochs - epoch - 1, T, &whole) ||
                 __builtin_add_overflow(whole, T - step, &rest))
            rest = UINT64_MAX; /* saturated: epochs and T may be 2^48 each */
    }
    *left = rest;
    if (step == 0)
        return TRAIN_ELASTIC_NOW;
    if (next == c->size)
        return TRAIN_ELASTIC_SAME_SIZE;
    if (changed)
        return TRAIN_ELASTIC_SECOND;
    if (epochs != 0 && !__builtin_mul_overflow(rest, (uint64_t)c->replicas, &pieces) && pieces <= window)
        return TRAIN_ELASTIC_WINDOW;
    return TRAIN_ELASTIC_NOW;
}

int train_elastic_defer(const struct train_elastic_coord *c, uint64_t epoch, uint64_t step, uint64_t T, uint64_t epochs,
                        int changed, uint64_t window, uint64_t *left)
{
    return defer_to(c, train_elastic_coord_next_size(c), epoch, step, T, epochs, changed, window, left);
}

int train_elastic_coord_next(const struct train_elastic_coord *c, uint32_t *new_rank, uint32_t *new_size, char *list,
                             size_t cap, struct sl_error *err)
{
    uint32_t n = 0;
    size_t len = 0;
    for (uint32_t k = 0; k < c->size + c->njoins; k++) {
        const char *ep = k < c->size ? c->eps[k] : c->joins[k - c->size].ep;
        if (k < c->size && c->leaving[k]) {
            new_rank[k] = TRAIN_ELASTIC_RELEASED;
            continue;
        }
        if (k < c->size)
            new_rank[k] = n;
        size_t el = strlen(ep);
        if (len + el + 2 > cap)
            return sl_error_set(err, SL_EINVAL, "elastic: the new world's endpoints take more than %zu bytes", cap);
        if (n > 0)
            list[len++] = ',';
        memcpy(list + len, ep, el);
        len += el;
        n++;
    }
    list[len] = '\0';
    *new_size = n;
    return 0;
}

/* The book takes the world of the members marked in keep[size] (rank
 * order), then, with joins, the joiners; their leave requests go with
 * them, the reports of a broken ring are forgotten; gen + 1. 0, or
 * SL_ENOMEM (the book unchanged). */
static int take_world(struct train_elastic_coord *c, const unsigned char *keep, int joins, struct sl_error *err)
{
    uint32_t n = joins ? c->njoins : 0;
    for (uint32_t k = 0; k < c->size; k++)
        n += keep[k] != 0;
    size_t room = n ? n : 1;
    char(*eps)[TRAIN_ELASTIC_MAX_ENDPOINT + 1] = sl_calloc(room, sizeof *eps);
    unsigned char *leaving = sl_calloc(room, 1), *broken = sl_calloc(room, 1);
    uint64_t *broken_at = sl_calloc(room, sizeof *broken_at);
    if (eps == NULL || leaving == NULL || broken == NULL || broken_at == NULL) {
        sl_free(eps);
        sl_free(leaving);
        sl_free(broken);
        sl_free(broken_at);
        return sl_error_set(err, SL_ENOMEM, "elastic: out of memory");
    }
    uint32_t at = 0;
    for (uint32_t k = 0; k < c->size; k++)
        if (keep[k]) {
            leaving[at] = joins ? 0 : c->leaving[k]; /* a change lets the leavers go; a broken ring keeps asking */
            memcpy(eps[at++], c->eps[k], sizeof eps[0]);
        }
    for (uint32_t k = 0; joins && k < c->njoins; k++)
        memcpy(eps[at++], c->joins[k].ep, sizeof eps[0]);
    sl_free(c->eps);
    sl_free(c->leaving);
    sl_free(c->broken);
    sl_free(c->broken_at);
    c->eps = eps;
    c->leaving = leaving;
    c->broken = broken;
    c->broken_at = broken_at;
    if (joins) {
        sl_free(c->joins);
        c->joins = NULL;
        c->njoins = 0;
    }
    c->size = n;
    c->gen++;
    return 0;
}

int train_elastic_coord_commit(struct train_elastic_coord *c, struct sl_error *err)
{
    unsigned char *keep = sl_calloc(c->size, 1);
    if (keep == NULL)
        return sl_error_set(err, SL_ENOMEM, "elastic: out of memory");
    for (uint32_t k = 0; k < c->size; k++)
        keep[k] = !c->leaving[k];
    int rc = take_world(c, keep, 1, err);
    sl_free(keep);
    return rc;
}

/* ---- a broken ring ---- */

int train_elastic_coord_broken(struct train_elastic_coord *c, const struct train_elastic_msg *m, struct sl_error *err)
{
    if (m->gen != c->gen)
        return sl_error_set(err, SL_EPROTO, "elastic: a BROKEN from rank %u of world %u, but the world is %u now", m->a,
                            m->gen, c->gen);
    if (m->a == 0)
        return sl_error_set(err, SL_EPROTO, "elastic: a BROKEN from rank 0, which is the coordinator's own");
    if (m->a >= c->size)
        return sl_error_set(err, SL_EPROTO, "elastic: a BROKEN from rank %u, but the world has %u workers", m->a,
                            c->size);
    if (c->broken[m->a] && c->broken_at[m->a] != m->d)
        return sl_error_set(err, SL_EPROTO,
                            "elastic: worker %u reported the broken ring twice, after global step %" PRIu64
                            " and then %" PRIu64,
                            m->a, c->broken_at[m->a], m->d);
    c->broken[m->a] = 1;
    c->broken_at[m->a] = m->d;
    return 0;
}

uint32_t train_elastic_coord_survivors(const struct train_elastic_coord *c)
{
    uint32_t n = c->size > 0;
    for (uint32_t k = 1; k < c->size; k++)
        n += c->broken[k] != 0;
    return n;
}

int train_elastic_survive_defer(const struct train_elastic_coord *c, uint64_t epoch, uint64_t step, uint64_t T,
                                uint64_t epochs, int changed, uint64_t window, uint64_t *left)
{
    return defer_to(c, train_elastic_coord_survivors(c), epoch, step, T, epochs, changed, window, left);
}

int train_elastic_coord_survive_next(const struct train_elastic_coord *c, uint32_t *new_rank, uint32_t *new_size,
                                     char *list, size_t cap, struct sl_error *err)
{
    uint32_t n = 0;
    size_t len = 0;
    for (uint32_t k = 0; k < c->size; k++) {
        if (k > 0 && !c->broken[k]) {
            new_rank[k] = TRAIN_ELASTIC_RELEASED;
            continue;
        }
        new_rank[k] = n;
        size_t el = strlen(c->eps[k]);
        if (len + el + 2 > cap)
            return sl_error_set(err, SL_EINVAL, "elastic: the new world's endpoints take more than %zu bytes", cap);
        if (n > 0)
            list[len++] = ',';
        memcpy(list + len, c->eps[k], el);
        len += el;
        n++;
    }
    list[len] = '\0';
    *new_size = n;
    return 0;
}

int train_elastic_coord_survive_commit(struct train_elastic_coord *c, struct sl_error *err)
{
    unsigned char *keep = sl_calloc(c->size ? c->size : 1, 1);
    if (keep == NULL)
        return sl_error_set(err, SL_ENOMEM, "elastic: out of memory");
    for (uint32_t k = 0; k < c->size; k++)
        keep[k] = k == 0 || c->broken[k];
    int rc = take_world(c, keep, 0, err);
    sl_free(keep);
    return rc;
}
