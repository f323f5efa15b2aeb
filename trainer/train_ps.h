/* train_ps: ParameterServerStrategy's parameter servers (issue #18), being
 * built. What exists so far is the placement of the model's variables on
 * the servers; the servers, the workers' pulls and pushes and the --mode
 * ps of sluice-trainer are not built yet.
 *
 * The design this module is a part of:
 * - Variables (train_model_variables: W_1, b_1, ... in creation order) are
 *   placed on the ps tasks by train_ps_place, the same on every process of
 *   the job (a pure function of the variable list and the ps count).
 * - A ps task holds its variables and their momentum; it applies each
 *   pushed gradient on arrival with train_sgd_apply, the model's own
 *   arithmetic, so one worker with synchronous pulls trains bit for bit as
 *   mirrored training does.
 * - A worker reduces its replicas' gradients in-process as today, pushes
 *   each ps its part and pulls the new values (every ps at once, so a slow
 *   one does not hold the others up), and goes on without waiting for the
 *   other workers.
 *
 * Thread-safety: the functions keep no state.
 */
#ifndef TRAIN_PS_H
#define TRAIN_PS_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

#define TRAIN_PS_MAX_SERVERS 256
#define TRAIN_PS_MAX_VARS 4096

enum train_ps_placement {
    TRAIN_PS_ROUND_ROBIN = 0, /* TensorFlow's default: creation order, server after server */
    TRAIN_PS_BALANCED = 1,    /* the largest first, each to the least loaded server */
};

/* owner[i] (0..nps-1) for each of the n variables of sizes[i] elements.
 * group (NULL: none): group[i] >= 0 puts variable i with the other
 * variables of that group (colocate_vars_with), on the server of the
 * group's first variable; -1 is a variable of its own. A placement unit is
 * a variable of its own or a whole group.
 * - Round robin: units in the order of their first variable, server 0, 1,
 *   ..., nps - 1, 0, ...
 * - Balanced: units by decreasing total size (ties: the order of their
 *   first variable), each to the server holding the fewest elements so far
 *   (ties: the lowest index).
 * Deterministic. SL_EINVAL: nps 0 or above TRAIN_PS_MAX_SERVERS, n above
 * TRAIN_PS_MAX_VARS, a group below -1, an unknown placement; owner is then
 * untouched. More servers than units leaves servers without variables. */
int train_ps_place(const size_t *sizes, const int *group, size_t n, uint32_t nps, enum train_ps_placement how,
                   uint32_t *owner, struct sl_error *err) SL_MUST_CHECK;

#endif
