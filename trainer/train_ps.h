/* train_ps: ParameterServerStrategy's parameter servers (issue #18), being
 * built. What exists so far: the placement of the model's variables on
 * the servers, a server (train_ps_serve) and the workers' client (pull and
 * push, every server at once). sluice-trainer's --mode ps and its ps task
 * are not built yet.
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

#include <signal.h>

#include "sl_error.h"
#include "train_model.h"

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

/* ---- the wire ----
 * Each message is a 32-byte header frame, and for VALUES, PUSH and ERROR a
 * body frame. Little-endian:
 *   0  4  magic "SLPS"
 *   4  1  version (1)
 *   5  1  type: PULL 1, VALUES 2, PUSH 3, ACK 4, BYE 5, ERROR 6
 *   6  2  0
 *   8  4  worker
 *  12  4  flags (PUSH: bit 0, count a global step)
 *  16  8  version: VALUES and ACK the server's, PUSH the one its gradient
 *         was computed from (the version pulled)
 *  24  8  global step (VALUES, ACK)
 * VALUES' and PUSH's body: the server's variables' float32 elements, its
 * variables in creation order; ERROR's: the message. */
#define TRAIN_PS_HEADER 32
enum train_ps_type { TRAIN_PS_PULL = 1, TRAIN_PS_VALUES, TRAIN_PS_PUSH, TRAIN_PS_ACK, TRAIN_PS_BYE, TRAIN_PS_ERROR };

/* What a server and its clients agree on: the model's variables and their
 * placement (the same on every process). */
struct train_ps_layout {
    const struct train_model_var *vars; /* from train_model_variables */
    size_t nvars;
    const uint32_t *owner;              /* [nvars], from train_ps_place */
    uint32_t nps;
};

/* Elements server `ps` holds. */
size_t train_ps_elements(const struct train_ps_layout *l, uint32_t ps);

struct train_ps_server_opts {
    void *ctx;              /* the ZeroMQ context */
    const char *listen;     /* endpoint to bind */
    uint32_t index;         /* this server, 0..nps-1 */
    struct train_ps_layout layout;
    const float *init;      /* the whole parameter array's initial values (the seeded model's) */
    float lr, momentum;     /* the model's optimizer */
    uint32_t workers;       /* it returns once each has said BYE */
    int timeout_ms;         /* silent this long with workers left: SL_ETIMEOUT (0: never) */
    volatile sig_atomic_t *stop; /* nonzero: return SL_ECLOSED within 100 ms */
};

struct train_ps_server_stats {
    uint64_t pulls, pushes, bad_messages, version, global_step;
    uint64_t staleness_max, staleness_sum; /* over the pushes: version at apply - version pulled */
};

/* Serve: bind, answer PULLs with the values, apply each PUSH on arrival
 * (train_sgd_apply) and ACK it, until every worker said BYE. A malformed
 * message gets an ERROR and is counted; the server goes on. */
int train_ps_serve(const struct train_ps_server_opts *o, struct train_ps_server_stats *st,
                   struct sl_error *err) SL_MUST_CHECK;

/* A worker's connections to every server. */
struct train_ps_client;
int train_ps_client_open(struct train_ps_client **out, void *ctx, const char *const *eps,
                         const struct train_ps_layout *l, uint32_t worker, int timeout_ms,
                         struct sl_error *err) SL_MUST_CHECK;
/* Every server's values into params (nparams floats; each server's
 * variables at their offsets), asked of all at once; *global_step from
 * server 0. A server silent past the timeout: SL_ETIMEOUT naming it. */
int train_ps_pull(struct train_ps_client *c, float *params, uint64_t *global_step, struct sl_error *err) SL_MUST_CHECK;
/* Each server its part of grads (nparams floats), sent to all at once,
 * then every ACK; count_step: server 0 counts a global step. *staleness:
 * the largest over the servers (NULL: not wanted). */
int train_ps_push(struct train_ps_client *c, const float *grads, int count_step, uint64_t *staleness,
                  struct sl_error *err) SL_MUST_CHECK;
/* Say BYE to every server and close (NULL: nothing). */
void train_ps_client_close(struct train_ps_client *c);

#endif
