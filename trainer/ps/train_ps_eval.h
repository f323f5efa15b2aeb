/* train_ps_eval: the evaluator task of ParameterServerStrategy's
 * train_and_evaluate (TF_CONFIG task type "evaluator", or
 * `sluice-trainer --evaluator`): it reads the model's final variables from
 * the parameter servers once every worker is done, as a reader the servers
 * never count among the workers (TRAIN_PS_READ_ONLY, train_ps.h), so the
 * caller can evaluate them on the whole test set.
 *
 * Thread-safety: the function keeps no state.
 */
#ifndef TRAIN_PS_EVAL_H
#define TRAIN_PS_EVAL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"
#include "train_model.h"
#include "train_ps.h"

/* Called between the rounds of asking (about every `ms`): the caller's
 * other connections kept alive (its feeders'). 0, or an error that ends
 * the wait. */
typedef int (*train_ps_eval_idle_fn)(void *arg, int ms, struct sl_error *err);

struct train_ps_eval_opts {
    void *ctx;             /* the ZeroMQ context */
    const char *const *ps; /* the servers' endpoints, server 0 first */
    uint32_t nps;
    enum train_ps_placement placement;
    struct train_model_config model; /* the workers' model, inputs set: its description must be theirs */
    int timeout_ms;                  /* each server's answer within this (0: 10 s) */
    int poll_ms;                     /* between two rounds of asking (0: 100 ms) */
    train_ps_eval_idle_fn idle;      /* NULL: sleep poll_ms */
    void *idle_arg;
    volatile sig_atomic_t *stop;       /* nonzero: SL_ECLOSED */
    const struct sl_curve_keys *curve; /* NULL: plaintext; else the job's trainer key pair, as the workers' */
};

struct train_ps_eval_result {
    uint64_t global_step;  /* the servers' count of worker steps at the end */
    uint64_t rounds;       /* final pulls asked before every worker was done */
    double wait_s;         /* from the first round to the final values */
    uint32_t lost_workers; /* workers lost or failed by the servers' count (train_ps_client_lost) */
    uint32_t first_lost;   /* the lowest of them */
};

/* Wait until every worker is done, then read the final values into params
 * (nparams floats: the whole model, in train_model_params order) and say
 * BYE, so the servers can end. SL_EINVAL when nparams is not the model's;
 * a server's refusal (another model) or silence (SL_ETIMEOUT) names it. */
int train_ps_eval_final(const struct train_ps_eval_opts *o, float *params, size_t nparams,
                        struct train_ps_eval_result *res, struct sl_error *err) SL_MUST_CHECK;

#endif
