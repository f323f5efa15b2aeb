/* sl_metrics: counters, times and gauges in relaxed 64-bit atomics (see
 * sl_metrics.h). */
#include "sl_metrics.h"

#include <stdatomic.h>
#include <string.h>

#include "sl_alloc.h"

struct sl_metrics {
    const struct sl_metric_def *defs;
    size_t n;
    _Atomic uint64_t v[SL_METRICS_MAX];
    /* the watcher (sl_metrics_watch): fn is published last, with release,
     * so an add that sees it sees id and ctx too */
    _Atomic(sl_metrics_watch_fn) watch_fn;
    _Atomic unsigned watch_id;
    _Atomic(void *) watch_ctx;
};

int sl_metrics_create(struct sl_metrics **out, const struct sl_metric_def *defs, size_t n)
{
    *out = NULL;
    if (n > SL_METRICS_MAX || (n > 0 && defs == NULL))
        return SL_EINVAL;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (defs[i].name == NULL || strcmp(defs[i].name, defs[j].name) == 0)
                return SL_EINVAL;
    struct sl_metrics *m = sl_calloc(1, sizeof *m);
    if (m == NULL)
        return SL_ENOMEM;
    m->defs = defs;
    m->n = n;
    for (size_t i = 0; i < SL_METRICS_MAX; i++)
        atomic_init(&m->v[i], 0);
    atomic_init(&m->watch_fn, NULL);
    atomic_init(&m->watch_id, 0);
    atomic_init(&m->watch_ctx, NULL);
    *out = m;
    return 0;
}

void sl_metrics_destroy(struct sl_metrics *m)
{
    sl_free(m);
}

void sl_metrics_add(struct sl_metrics *m, unsigned id, uint64_t v)
{
    if (m == NULL || id >= m->n)
        return;
    uint64_t now = atomic_fetch_add_explicit(&m->v[id], v, memory_order_relaxed) + v;
    sl_metrics_watch_fn fn = atomic_load_explicit(&m->watch_fn, memory_order_acquire);
    if (fn != NULL && atomic_load_explicit(&m->watch_id, memory_order_relaxed) == id)
        fn(atomic_load_explicit(&m->watch_ctx, memory_order_relaxed), now);
}

uint64_t sl_metrics_get(const struct sl_metrics *m, unsigned id)
{
    if (m == NULL || id >= m->n)
        return 0;
    return atomic_load_explicit(&m->v[id], memory_order_relaxed);
}

void sl_metrics_watch(struct sl_metrics *m, unsigned id, sl_metrics_watch_fn fn, void *ctx)
{
    if (m == NULL)
        return;
    atomic_store_explicit(&m->watch_fn, NULL, memory_order_release);
    atomic_store_explicit(&m->watch_id, id, memory_order_relaxed);
    atomic_store_explicit(&m->watch_ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&m->watch_fn, fn, memory_order_release);
}

void sl_metrics_set(struct sl_metrics *m, unsigned id, uint64_t v)
{
    if (m != NULL && id < m->n)
        atomic_store_explicit(&m->v[id], v, memory_order_relaxed);
}

void sl_metrics_set_real(struct sl_metrics *m, unsigned id, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    sl_metrics_set(m, id, bits);
}

void sl_metrics_snapshot(const struct sl_metrics *m, struct sl_metrics_snap *out)
{
    memset(out, 0, sizeof *out);
    if (m == NULL)
        return;
    out->defs = m->defs;
    out->n = m->n;
    for (size_t i = 0; i < m->n; i++)
        out->v[i] = atomic_load_explicit(&m->v[i], memory_order_relaxed);
}

double sl_metrics_seconds(const struct sl_metrics_snap *s, unsigned id)
{
    if (id >= s->n)
        return 0;
    if (s->defs[id].kind == SL_METRIC_REAL) {
        double d;
        memcpy(&d, &s->v[id], sizeof d);
        return d;
    }
    return s->defs[id].kind == SL_METRIC_NS ? (double)s->v[id] / 1e9 : (double)s->v[id];
}
