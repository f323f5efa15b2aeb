/* train_ps_eval: the evaluator's read of the final variables.
 *
 * The evaluator builds the workers' model description from the same flags
 * (train_ps_model_init), so a server refuses it exactly as it would refuse
 * a worker with other flags, and asks every server for the final values
 * with read-only final pulls: each answers "not yet" (ACK, the workers not
 * done) until every worker has made its own final pull, then the values;
 * nobody pushes after that, so every server's answer is the end of
 * training. Between rounds the caller's idle function keeps its feeders'
 * connections alive. */
#include "train_ps_eval.h"

#include <string.h>
#include <time.h>

#include "sl_clock.h"

int train_ps_eval_final(const struct train_ps_eval_opts *o, float *params, size_t nparams,
                        struct train_ps_eval_result *res, struct sl_error *err)
{
    memset(res, 0, sizeof *res);
    struct train_ps_model pm;
    int rc = train_ps_model_init(&pm, &o->model, o->nps, o->placement, err);
    if (rc != 0)
        return rc;
    struct train_ps_client *c = NULL;
    if (train_model_nparams(pm.model) != nparams)
        rc = sl_error_set(err, SL_EINVAL, "the evaluator's model has %zu parameters, the buffer %zu",
                          train_model_nparams(pm.model), nparams);
    if (rc == 0)
        rc = train_ps_client_open_evaluator(&c, o->ctx, o->ps, &pm.layout, o->timeout_ms, pm.config, o->curve, err);
    int poll_ms = o->poll_ms > 0 ? o->poll_ms : 100;
    double t0 = sl_clock_s();
    while (rc == 0) {
        uint32_t waiting = 0;
        if ((rc = train_ps_pull_final_try(c, params, &res->global_step, &waiting, err)) != 0 || waiting == 0)
            break;
        res->rounds++;
        if (o->stop != NULL && *o->stop) {
            rc = sl_error_set(err, SL_ECLOSED, "stopped while waiting for %u workers to finish", waiting);
            break;
        }
        if (o->idle != NULL)
            rc = o->idle(o->idle_arg, poll_ms, err);
        else
            nanosleep(&(struct timespec){.tv_sec = poll_ms / 1000, .tv_nsec = (long)(poll_ms % 1000) * 1000000L}, NULL);
    }
    res->wait_s = sl_clock_s() - t0;
    if (rc == 0)
        res->lost_workers = train_ps_client_lost(c, &res->first_lost);
    train_ps_client_close(c); /* BYE (read-only): the servers may end */
    train_ps_model_free(&pm);
    return rc;
}
