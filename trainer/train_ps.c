/* train_ps: see train_ps.h. */
#include "train_ps.h"

#include <string.h>

#include "sl_alloc.h"

/* unit u: its first variable, its total size, and the server it gets */
struct unit {
    size_t first;
    uint64_t size;
    uint32_t server;
};

int train_ps_place(const size_t *sizes, const int *group, size_t n, uint32_t nps, enum train_ps_placement how,
                   uint32_t *owner, struct sl_error *err)
{
    if (nps == 0 || nps > TRAIN_PS_MAX_SERVERS)
        return sl_error_set(err, SL_EINVAL, "%u parameter servers (1 to %d)", nps, TRAIN_PS_MAX_SERVERS);
    if (n > TRAIN_PS_MAX_VARS)
        return sl_error_set(err, SL_EINVAL, "%zu variables (at most %d)", n, TRAIN_PS_MAX_VARS);
    if (how != TRAIN_PS_ROUND_ROBIN && how != TRAIN_PS_BALANCED)
        return sl_error_set(err, SL_EINVAL, "unknown placement %d", (int)how);
    for (size_t i = 0; group != NULL && i < n; i++)
        if (group[i] < -1)
            return sl_error_set(err, SL_EINVAL, "variable %zu: colocation group %d (-1: none, or >= 0)", i, group[i]);
    if (n == 0)
        return 0;
    struct unit *units = sl_calloc(n, sizeof *units);
    size_t *unit_of = sl_calloc(n, sizeof *unit_of);
    if (units == NULL || unit_of == NULL) {
        sl_free(units);
        sl_free(unit_of);
        return sl_error_set(err, SL_ENOMEM, "out of memory placing %zu variables", n);
    }
    /* units in the order of their first variable (n^2 at most 16M steps) */
    size_t nu = 0;
    for (size_t i = 0; i < n; i++) {
        size_t u = nu;
        if (group != NULL && group[i] >= 0)
            for (size_t k = 0; k < i; k++)
                if (group[k] == group[i]) {
                    u = unit_of[k];
                    break;
                }
        if (u == nu)
            units[nu++] = (struct unit){.first = i};
        units[u].size += sizes[i];
        unit_of[i] = u;
    }
    if (how == TRAIN_PS_ROUND_ROBIN) {
        for (size_t u = 0; u < nu; u++)
            units[u].server = (uint32_t)(u % nps);
    } else {
        uint64_t load[TRAIN_PS_MAX_SERVERS] = {0};
        char *done = sl_calloc(nu, 1);
        if (done == NULL) {
            sl_free(units);
            sl_free(unit_of);
            return sl_error_set(err, SL_ENOMEM, "out of memory placing %zu variables", n);
        }
        for (size_t step = 0; step < nu; step++) {
            size_t best = nu;
            for (size_t u = 0; u < nu; u++) /* the largest left; the first on ties */
                if (!done[u] && (best == nu || units[u].size > units[best].size))
                    best = u;
            uint32_t s = 0;
            for (uint32_t k = 1; k < nps; k++)
                if (load[k] < load[s])
                    s = k;
            units[best].server = s;
            load[s] += units[best].size;
            done[best] = 1;
        }
        sl_free(done);
    }
    for (size_t i = 0; i < n; i++)
        owner[i] = units[unit_of[i]].server;
    sl_free(units);
    sl_free(unit_of);
    return 0;
}
