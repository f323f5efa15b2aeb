/* train_mirror: R copies in one allocation, plus one scratch row.
 *
 * An update first computes the single aggregated update value into the
 * scratch row (so a failed update leaves every copy untouched), then applies
 * that same row to every copy with the same float operation; identical
 * inputs and identical operations keep the copies bit-identical without
 * any per-copy reduction. The reduction order matches train_reduce's
 * axis=None: replica 0's value, then + replica 1, + replica 2, ...
 */
#include "train_mirror.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "sl_alloc.h"

struct train_mirror {
    char *name;
    size_t n;
    int replicas;
    enum train_aggregation aggregation;
    float *copies;  /* [replicas][n] */
    float *scratch; /* [n]: the aggregated update */
};

int train_mirror_create(struct train_mirror **out, const char *name, size_t n_values, int replicas,
                        enum train_aggregation aggregation, const float *init, struct sl_error *err)
{
    *out = NULL;
    if (name == NULL)
        name = "";
    if (replicas < 1)
        return sl_error_set(err, SL_EINVAL, "mirrored variable '%s': needs >= 1 replica (got %d)", name, replicas);
    if (aggregation < TRAIN_AGG_NONE || aggregation > TRAIN_AGG_ONLY_FIRST_REPLICA)
        return sl_error_set(err, SL_EINVAL, "mirrored variable '%s': unknown aggregation %d", name, (int)aggregation);
    if (n_values > SIZE_MAX / sizeof(float) / ((size_t)replicas + 1))
        return sl_error_set(err, SL_EINVAL, "mirrored variable '%s': %zu values x %d replicas is too large", name,
                            n_values, replicas);
    struct train_mirror *m = sl_calloc(1, sizeof *m);
    if (m == NULL)
        goto out_nomem;
    m->name = sl_strdup(name);
    /* +1 keeps the allocations non-empty for a zero-size variable. */
    m->copies = sl_malloc(((size_t)replicas * n_values + 1) * sizeof(float));
    m->scratch = sl_malloc((n_values + 1) * sizeof(float));
    if (m->name == NULL || m->copies == NULL || m->scratch == NULL)
        goto out_free_mirror;
    m->n = n_values;
    m->replicas = replicas;
    m->aggregation = aggregation;
    for (int r = 0; r < replicas; r++) {
        float *copy = m->copies + (size_t)r * n_values;
        if (init != NULL && n_values > 0)
            memcpy(copy, init, n_values * sizeof(float));
        else
            for (size_t j = 0; j < n_values; j++)
                copy[j] = 0.0f;
    }
    *out = m;
    return 0;

out_free_mirror:
    train_mirror_destroy(m);
out_nomem:
    return sl_error_set(err, SL_ENOMEM, "mirrored variable '%s': out of memory for %zu values x %d replicas", name,
                        n_values, replicas);
}

void train_mirror_destroy(struct train_mirror *m)
{
    if (m == NULL)
        return;
    sl_free(m->name);
    sl_free(m->copies);
    sl_free(m->scratch);
    sl_free(m);
}

/* The aggregated update into m->scratch. */
static int aggregate(struct train_mirror *m, const float *const *updates, struct sl_error *err)
{
    int needed = m->aggregation == TRAIN_AGG_ONLY_FIRST_REPLICA ? 1 : m->replicas;
    for (int r = 0; r < needed; r++)
        if (updates[r] == NULL && m->n > 0)
            return sl_error_set(err, SL_EINVAL, "mirrored variable '%s': replica %d's update is missing", m->name, r);
    if (m->n == 0)
        return 0;
    if (m->aggregation == TRAIN_AGG_ONLY_FIRST_REPLICA) {
        memcpy(m->scratch, updates[0], m->n * sizeof(float));
        return 0;
    }
    for (size_t j = 0; j < m->n; j++) {
        float total = updates[0][j];
        for (int r = 1; r < m->replicas; r++)
            total += updates[r][j];
        if (m->aggregation == TRAIN_AGG_MEAN)
            total /= (float)m->replicas;
        m->scratch[j] = total;
    }
    return 0;
}

int train_mirror_update(struct train_mirror *m, const float *const *updates, enum train_mirror_mode mode,
                        struct sl_error *err)
{
    if (m->aggregation == TRAIN_AGG_NONE)
        return sl_error_set(err, SL_EINVAL,
                            "mirrored variable '%s': You must specify an aggregation method to update a "
                            "MirroredVariable in Replica Context. You can do so by passing an explicit value for "
                            "argument `aggregation` to tf.Variable(..).",
                            m->name);
    if (mode != TRAIN_ASSIGN && mode != TRAIN_ASSIGN_ADD && mode != TRAIN_ASSIGN_SUB)
        return sl_error_set(err, SL_EINVAL, "mirrored variable '%s': unknown update mode %d", m->name, (int)mode);
    int rc = aggregate(m, updates, err);
    if (rc != 0)
        return rc;
    const float *u = m->scratch;
    for (int r = 0; r < m->replicas; r++) {
        float *copy = m->copies + (size_t)r * m->n;
        switch (mode) {
        case TRAIN_ASSIGN:
            for (size_t j = 0; j < m->n; j++)
                copy[j] = u[j];
            break;
        case TRAIN_ASSIGN_ADD:
            for (size_t j = 0; j < m->n; j++)
                copy[j] += u[j];
            break;
        case TRAIN_ASSIGN_SUB:
            for (size_t j = 0; j < m->n; j++)
                copy[j] -= u[j];
            break;
        }
    }
    return 0;
}

float *train_mirror_copy(struct train_mirror *m, int replica)
{
    if (replica < 0 || replica >= m->replicas)
        return NULL;
    return m->copies + (size_t)replica * m->n;
}

size_t train_mirror_size(const struct train_mirror *m)
{
    return m->n;
}

const char *train_mirror_name(const struct train_mirror *m)
{
    return m->name;
}

uint64_t train_hash64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = UINT64_C(0xcbf29ce484222325); /* FNV-1a 64 offset basis */
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3); /* FNV-1a 64 prime */
    }
    /* FNV's last bytes only reach the low bits; the finaliser of
     * MurmurHash3 (fmix64) spreads them over all 64. */
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    h ^= h >> 33;
    return h;
}

uint64_t train_mirror_hash(const struct train_mirror *m, int replica)
{
    if (replica < 0 || replica >= m->replicas)
        return 0;
    return train_hash64(m->copies + (size_t)replica * m->n, m->n * sizeof(float));
}

int train_mirror_check(const struct train_mirror *m, struct sl_error *err)
{
    uint64_t h0 = train_mirror_hash(m, 0);
    const float *c0 = m->copies;
    for (int r = 1; r < m->replicas; r++) {
        uint64_t h = train_mirror_hash(m, r);
        if (h == h0)
            continue;
        const float *c = m->copies + (size_t)r * m->n;
        size_t j = 0;
        while (j < m->n && memcmp(&c[j], &c0[j], sizeof(float)) == 0)
            j++;
        return sl_error_set(err, SL_ECORRUPT,
                            "mirrored variable '%s' diverged: replica %d's copy hashes 0x%016" PRIx64
                            ", replica 0's 0x%016" PRIx64 " (first difference at element %zu: %.9g vs %.9g)",
                            m->name, r, h, h0, j, j < m->n ? (double)c[j] : 0.0, j < m->n ? (double)c0[j] : 0.0);
    }
    return 0;
}
