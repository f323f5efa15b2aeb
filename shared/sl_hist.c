/* sl_hist: fixed-bucket duration histograms in relaxed atomics (see
 * sl_hist.h). */
#include "sl_hist.h"

#include <string.h>

const uint64_t sl_hist_step_bounds_ns[] = {
    100000,   250000,    500000,    1000000,   2500000,    5000000,    10000000,   25000000,
    50000000, 100000000, 250000000, 500000000, 1000000000, 2500000000, 5000000000, 10000000000,
};
const size_t sl_hist_step_nbounds = sizeof sl_hist_step_bounds_ns / sizeof sl_hist_step_bounds_ns[0];

void sl_hist_init(struct sl_hist *h, const uint64_t *bounds_ns, size_t n)
{
    size_t k = 0;
    while (k < n && k < SL_HIST_MAX_BOUNDS && (k == 0 || bounds_ns[k] > bounds_ns[k - 1]))
        k++;
    h->bounds_ns = bounds_ns;
    h->n = k;
    for (size_t i = 0; i <= SL_HIST_MAX_BOUNDS; i++)
        atomic_init(&h->bucket[i], 0);
    atomic_init(&h->sum_ns, 0);
}

void sl_hist_observe(struct sl_hist *h, uint64_t ns)
{
    size_t lo = 0, hi = h->n; /* the first bound >= ns; n when none */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (h->bounds_ns[mid] >= ns)
            hi = mid;
        else
            lo = mid + 1;
    }
    atomic_fetch_add_explicit(&h->bucket[lo], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

void sl_hist_snapshot(const struct sl_hist *h, struct sl_hist_snap *out)
{
    memset(out, 0, sizeof *out);
    out->bounds_ns = h->bounds_ns;
    out->n = h->n;
    out->sum_ns = atomic_load_explicit(&h->sum_ns, memory_order_relaxed);
    uint64_t c = 0;
    for (size_t i = 0; i <= h->n; i++) {
        c += atomic_load_explicit(&h->bucket[i], memory_order_relaxed);
        out->cum[i] = c;
    }
}
