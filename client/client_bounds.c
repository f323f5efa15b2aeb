/* client_bounds.c: the options' bounds, checked by client_open
 * and, before it sizes anything by them, by sluice_client_open.
 */
#include "client.h"

#include <inttypes.h>

/* One bound: a value of `api` (the C and Python field) or `flag`
 * (sluice-trainer's) within [least, most]; 0 is the default where zero_ok. */
static int bound(const struct client_opts *o, const char *api, const char *flag, long long v, long long least,
                 long long most, int zero_ok, struct sl_error *err)
{
    if ((zero_ok && v == 0) || (v >= least && v <= most))
        return 0;
    const char *name = o->names != NULL && o->names->in_ms ? api : flag;
    return sl_error_set(err, SL_EINVAL, "%s: %lld is out of range (%s%lld to %lld)", name, v, zero_ok ? "0 or " : "",
                        least, most);
}

int client_check_transition(const struct client_transition *x, struct sl_error *err)
{
    if (x->from_workers == 0 && x->from_replicas == 0 && x->from_epoch == 0 && x->from_step == 0)
        return 0; /* none */
    if (x->from_workers == 0 || x->from_workers > SL_WIRE_MAX_WORKERS)
        return sl_error_set(err, SL_EINVAL, "transition: from_workers %" PRIu32 " is out of range (1 to %d)",
                            x->from_workers, SL_WIRE_MAX_WORKERS);
    if (x->from_replicas == 0 || x->from_replicas > SL_WIRE_MAX_REPLICAS)
        return sl_error_set(err, SL_EINVAL, "transition: from_replicas %" PRIu32 " is out of range (1 to %d)",
                            x->from_replicas, SL_WIRE_MAX_REPLICAS);
    if (x->from_epoch > SL_WIRE_MAX_POSITION)
        return sl_error_set(err, SL_EINVAL, "transition: from_epoch %" PRIu64 " is out of range (at most 2^48)",
                            x->from_epoch);
    if (x->from_step == 0 || x->from_step > SL_WIRE_MAX_POSITION)
        return sl_error_set(err, SL_EINVAL,
                            "transition: from_step %" PRIu64 " is out of range (1 to 2^48; a change at step 0 is "
                            "an epoch's start: resume_epoch with reshape)",
                            x->from_step);
    return 0;
}

int client_check_bounds(const struct client_opts *o, struct sl_error *err)
{
    int rc = bound(o, "replicas", "--replicas", o->replicas, 1, CLIENT_MAX_REPLICAS, 0, err);
    if (rc == 0)
        rc = bound(o, "credits", "--credits", o->credits, 1, CLIENT_MAX_CREDITS, 1, err);
    if (rc == 0)
        rc = bound(o, "heartbeat_ms", "--heartbeat-ms", o->heartbeat_ms, CLIENT_MIN_HEARTBEAT_MS,
                   CLIENT_MAX_HEARTBEAT_MS, 1, err);
    if (rc == 0)
        rc =
            bound(o, "timeout_ms", "--timeout-ms", o->timeout_ms, CLIENT_MIN_TIMEOUT_MS, CLIENT_MAX_TIMEOUT_MS, 1, err);
    if (rc == 0)
        rc = bound(o, "connect_timeout_ms", "--connect-timeout", o->connect_timeout_ms, 1, CLIENT_MAX_WAIT_MS, 1, err);
    if (rc == 0)
        rc = bound(o, "reconnect_ms", "--reconnect-s", o->reconnect_ms, 1, CLIENT_MAX_WAIT_MS, 1, err);
    if (rc == 0)
        rc = bound(o, "takeover_ms", "--takeover-s", o->takeover_ms, 1, CLIENT_MAX_WAIT_MS, 1, err);
    if (rc == 0)
        rc = client_check_transition(&o->transition, err);
    return rc;
}
