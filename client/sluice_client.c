/* sluice_client: the public C API of libsluice (include/sluice/client.h)
 * over the internal client (client.h).
 *
 * A thin layer: options are checked and translated (CURVE key files read
 * here), each step's client_pieces are mirrored into public sluice_piece /
 * sluice_tensor views held by the client (storage made once at open, so a
 * step allocates nothing), and a struct sl_error becomes a struct
 * sluice_error. The views point into the client_pieces (names, shapes,
 * data), so they share their lifetime: until the next step or release.
 * Only the sluice_* functions are exported from the shared library (see
 * client/sluice.map).
 */
#include "sluice/client.h"

#include <stdio.h>
#include <string.h>

#include "sl_alloc.h"
#include "sl_cluster.h"
#include "sl_curve.h"
#include "sl_env.h"
#include "sl_error.h"
#include "sl_log.h"
#include "sl_wire.h"
#include "client.h"
#include "client_expose.h"

#ifndef SLUICE_VERSION_STRING
#define SLUICE_VERSION_STRING "unknown"
#endif

/* The public codes are the internal ones, number for number. */
_Static_assert(SLUICE_EIO == SL_EIO && SLUICE_ENOMEM == SL_ENOMEM && SLUICE_EINVAL == SL_EINVAL &&
                   SLUICE_ECORRUPT == SL_ECORRUPT && SLUICE_EPROTO == SL_EPROTO && SLUICE_ETIMEOUT == SL_ETIMEOUT &&
                   SLUICE_ECLOSED == SL_ECLOSED && SLUICE_END == SL_END,
               "sluice codes follow sl_error.h");
_Static_assert((int)SLUICE_INT64 == (int)SL_WIRE_INT64 && (int)SLUICE_FLOAT32 == (int)SL_WIRE_FLOAT32 &&
                   (int)SLUICE_BYTES == (int)SL_WIRE_BYTES && (int)SLUICE_UINT8 == (int)SL_WIRE_UINT8 &&
                   (int)SLUICE_FLOAT16 == (int)SL_WIRE_FLOAT16 && (int)SLUICE_BFLOAT16 == (int)SL_WIRE_BFLOAT16 &&
                   (int)SLUICE_BFLOAT16 == SL_WIRE_DTYPE_MAX,
               "sluice dtypes follow sl_wire.h");
_Static_assert(SLUICE_ERROR_MAX == SL_ERROR_MSG_MAX, "one message size");

struct sluice_client {
    struct client *tc;
    uint32_t replicas;
    struct sluice_piece *pieces;   /* [replicas] */
    struct sluice_tensor *tensors; /* [replicas * SL_WIRE_MAX_TENSORS] */
    /* what the client borrows for its life, copied from the options */
    char *job;
    char **feeders; /* [nfeeders] */
    size_t nfeeders;
    struct sl_curve_keys *keys; /* NULL: no CURVE */
    char (*servers)[SL_CURVE_KEY_Z85 + 1];
    const char **server_ptrs; /* [nfeeders] into servers */
    /* /metrics (metrics_listen): the table the client and next_step count
     * in, and its server; NULL without */
    struct sl_metrics *metrics;
    struct client_expose *expose;
    char metrics_address[80]; /* HOST:PORT as bound ("" without) */
    uint64_t last_epoch;      /* the epoch of the last step counted (UINT64_MAX: none yet) */
};

static void mirror(const struct client_piece *tp, uint32_t n, struct sluice_piece *pieces,
                   struct sluice_tensor *tensors);

static int out_error(struct sluice_error *out, const struct sl_error *e)
{
    if (out != NULL) {
        out->code = e->code;
        snprintf(out->message, sizeof out->message, "%s", e->msg);
    }
    return e->code;
}

const char *sluice_version(void)
{
    return SLUICE_VERSION_STRING;
}

const char *sluice_code_name(int code)
{
    return sl_code_name(code);
}

_Static_assert(SLUICE_LOG_DEBUG == SL_LOG_DEBUG && SLUICE_LOG_INFO == SL_LOG_INFO &&
                   SLUICE_LOG_WARNING == SL_LOG_WARN && SLUICE_LOG_ERROR == SL_LOG_ERROR,
               "sluice log levels follow sl_log.h");

void sluice_log_setup(const char *prog, int fd, int min_level)
{
    if (min_level < SLUICE_LOG_DEBUG)
        min_level = SLUICE_LOG_DEBUG;
    /* fd -1: nothing shown (above every level) */
    static char name[64]; /* sl_log keeps the pointer */
    snprintf(name, sizeof name, "%s", prog != NULL ? prog : "sluice");
    sl_log_setup(name, fd >= 0 ? fd : 2,
                 fd >= 0 ? (enum sl_log_level)(min_level > SLUICE_LOG_ERROR ? SLUICE_LOG_ERROR : min_level)
                         : (enum sl_log_level)(SL_LOG_ERROR + 1));
}

const char *sluice_dtype_name(int dtype)
{
    return dtype >= 0 && dtype <= SLUICE_BFLOAT16 ? sl_wire_dtype_name((unsigned)dtype) : "?";
}

/* Read the CURVE key files named by the options into keys and servers. */
static int load_keys(const struct sluice_options *o, struct sl_curve_keys *keys, char (*servers)[SL_CURVE_KEY_Z85 + 1],
                     struct sl_error *e)
{
    if (o->curve_server_keys == NULL)
        return sl_error_set(e, SL_EINVAL, "curve_key given without curve_server_keys (one per feeder)");
    int rc = sl_curve_load_secret(o->curve_key, keys, e);
    if (rc != 0)
        return rc;
    for (size_t j = 0; j < o->nfeeders; j++) {
        if (o->curve_server_keys[j] == NULL)
            return sl_error_set(e, SL_EINVAL, "curve_server_keys[%zu]: missing (feeder %s)", j, o->feeders[j]);
        rc = sl_curve_load_public(o->curve_server_keys[j], servers[j], e);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Serve /metrics on `listen` before the feeders are waited for (a probe
 * sees the process alive meanwhile): a table of the client's slots and the
 * steps, which the client counts in (to->metrics). */
static int start_metrics(struct sluice_client *c, const char *listen, struct client_opts *to, struct sl_error *e)
{
    int rc = sl_metrics_create(&c->metrics, client_expose_defs, CLIENT_X_COUNT);
    if (rc != 0)
        return sl_error_set(e, rc, "metrics_listen: out of memory");
    rc = client_expose_start(&c->expose, listen, c->metrics, c->job, to->worker, e);
    if (rc != 0)
        return sl_error_prefix(e, "metrics_listen: ");
    /* the address as bound: the host as given ("*": this host's loopback
     * for a URL), the port the kernel's for 0 */
    const char *colon = strrchr(listen, ':');
    int hlen = (int)(colon - listen);
    if (hlen == 1 && listen[0] == '*')
        snprintf(c->metrics_address, sizeof c->metrics_address, "127.0.0.1:%u", client_expose_port(c->expose));
    else
        snprintf(c->metrics_address, sizeof c->metrics_address, "%.*s:%u", hlen, listen, client_expose_port(c->expose));
    c->last_epoch = UINT64_MAX;
    to->metrics = c->metrics;
    return 0;
}

static char *copy_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = sl_malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

_Static_assert(SLUICE_MAX_REPLICAS == CLIENT_MAX_REPLICAS && SLUICE_MAX_CREDITS == CLIENT_MAX_CREDITS &&
                   SLUICE_MAX_HEARTBEAT_MS == CLIENT_MAX_HEARTBEAT_MS &&
                   SLUICE_MIN_HEARTBEAT_MS == CLIENT_MIN_HEARTBEAT_MS &&
                   SLUICE_MIN_TIMEOUT_MS == CLIENT_MIN_TIMEOUT_MS && SLUICE_MAX_TIMEOUT_MS == CLIENT_MAX_TIMEOUT_MS &&
                   SLUICE_MAX_WAIT_MS == CLIENT_MAX_WAIT_MS,
               "the public bounds are the client's");

/* The messages name the options as this API (and the Python package, whose
 * keywords are these fields) spells them, not sluice-trainer's flags. */
static const struct client_names api_names = {"connect_timeout_ms", "curve_key", "curve_server_keys", 1};

int sluice_client_open(struct sluice_client **out, const struct sluice_options *o, struct sluice_error *err)
{
    struct sl_error e = {0};
    *out = NULL;
    if (o == NULL || o->feeders == NULL || o->nfeeders == 0 || o->job == NULL) {
        sl_error_set(&e, SL_EINVAL, "options: feeders, nfeeders and job are required");
        return out_error(err, &e);
    }
    if (o->nfeeders > CLIENT_MAX_FEEDERS) {
        sl_error_set(&e, SL_EINVAL, "options: %zu feeders, at most %d", o->nfeeders, CLIENT_MAX_FEEDERS);
        return out_error(err, &e);
    }
    for (size_t j = 0; j < o->nfeeders; j++)
        if (o->feeders[j] == NULL) {
            sl_error_set(&e, SL_EINVAL, "options: feeders[%zu] is NULL", j);
            return out_error(err, &e);
        }
    struct client_opts to = {
        .nfeeders = o->nfeeders,
        .worker = o->worker,
        .workers = o->workers != 0 ? o->workers : 1,
        .replicas = o->replicas != 0 ? o->replicas : 1,
        .credits = o->credits,
        .heartbeat_ms = o->heartbeat_ms,
        .timeout_ms = o->timeout_ms,
        .connect_timeout_ms = o->connect_timeout_ms,
        .reconnect_ms = o->reconnect_ms,
        .no_shm = o->no_shm,
        .takeover_ms = o->takeover_ms,
        .resume_seq = o->resume_seq,
        .resume_epoch = o->resume_epoch,
        .reshape = o->reshape,
        .transition = {o->transition.from_workers, o->transition.from_replicas, o->transition.from_epoch,
                       o->transition.from_step},
        .stop = o->stop,
        .names = &api_names,
    };
    if (to.worker >= to.workers) {
        sl_error_set(&e, SL_EINVAL, "options: worker %u of %u", to.worker, to.workers);
        return out_error(err, &e);
    }
    if (client_check_bounds(&to, &e) != 0) /* before anything is sized by them */
        return out_error(err, &e);
    int rc;
    struct sluice_client *c = sl_calloc(1, sizeof *c);
    if (c == NULL)
        goto out_nomem;
    c->replicas = to.replicas;
    c->nfeeders = o->nfeeders;
    c->pieces = sl_calloc(to.replicas, sizeof *c->pieces);
    c->tensors = sl_calloc((size_t)to.replicas * SL_WIRE_MAX_TENSORS, sizeof *c->tensors);
    c->feeders = sl_calloc(o->nfeeders, sizeof *c->feeders);
    c->job = copy_string(o->job);
    if (c->pieces == NULL || c->tensors == NULL || c->feeders == NULL || c->job == NULL)
        goto out_nomem;
    for (size_t j = 0; j < o->nfeeders; j++)
        if ((c->feeders[j] = copy_string(o->feeders[j])) == NULL)
            goto out_nomem;
    to.feeders = (const char *const *)c->feeders;
    to.job = c->job;
    if (o->curve_key != NULL) {
        c->keys = sl_calloc(1, sizeof *c->keys);
        c->servers = sl_calloc(o->nfeeders, sizeof *c->servers);
        c->server_ptrs = sl_calloc(o->nfeeders, sizeof *c->server_ptrs);
        if (c->keys == NULL || c->servers == NULL || c->server_ptrs == NULL)
            goto out_nomem;
        rc = load_keys(o, c->keys, c->servers, &e);
        if (rc != 0)
            goto out_close;
        for (size_t j = 0; j < o->nfeeders; j++)
            c->server_ptrs[j] = c->servers[j];
        to.curve = c->keys;
        to.curve_server = c->server_ptrs;
    }
    if (o->metrics_listen != NULL) {
        rc = start_metrics(c, o->metrics_listen, &to, &e);
        if (rc != 0)
            goto out_close;
    }
    rc = client_open(&c->tc, &to, &e);
    if (rc != 0)
        goto out_close;
    *out = c;
    return 0;

out_nomem:
    sl_error_set(&e, SL_ENOMEM, "out of memory opening the client");
out_close:
    sluice_client_close(c);
    return out_error(err, &e);
}

void sluice_client_close(struct sluice_client *c)
{
    if (c == NULL)
        return;
    client_close(c->tc);
    client_expose_stop(c->expose); /* after the client: nothing counts past this */
    sl_metrics_destroy(c->metrics);
    if (c->keys != NULL)
        memset(c->keys, 0, sizeof *c->keys);
    sl_free(c->keys);
    sl_free(c->servers);
    sl_free(c->server_ptrs);
    if (c->feeders != NULL)
        for (size_t j = 0; j < c->nfeeders; j++)
            sl_free(c->feeders[j]);
    sl_free(c->feeders);
    sl_free(c->job);
    sl_free(c->tensors);
    sl_free(c->pieces);
    sl_free(c);
}

int sluice_client_next_step(struct sluice_client *c, const struct sluice_piece **pieces, struct sluice_error *err)
{
    struct sl_error e = {0};
    const struct client_piece *tp;
    int rc = client_next_step(c->tc, &tp, &e);
    if (rc != 0) {
        if (rc == SL_END) {
            if (err != NULL) {
                err->code = SL_END;
                err->message[0] = '\0';
            }
            return rc;
        }
        return out_error(err, &e);
    }
    mirror(tp, c->replicas, c->pieces, c->tensors);
    *pieces = c->pieces;
    if (c->expose != NULL) {
        sl_metrics_add(c->metrics, CLIENT_X_STEPS, 1);
        if (tp[0].epoch != c->last_epoch) {
            c->last_epoch = tp[0].epoch;
            sl_metrics_add(c->metrics, CLIENT_X_EPOCHS, 1);
        }
        client_expose_step(c->expose, c->tc);
    }
    return 0;
}

struct sluice_step {
    struct client_kept *k;
    struct sluice_piece *pieces;   /* [n] */
    struct sluice_tensor *tensors; /* [n * SL_WIRE_MAX_TENSORS] */
};

static int take_step(struct sluice_client *c, struct sluice_step **out, const struct sluice_piece **pieces, int lend,
                     struct sluice_error *err)
{
    struct sl_error e = {0};
    *out = NULL;
    struct sluice_step *st = sl_calloc(1, sizeof *st);
    if (st != NULL) {
        st->pieces = sl_calloc(c->replicas, sizeof *st->pieces);
        st->tensors = sl_calloc((size_t)c->replicas * SL_WIRE_MAX_TENSORS, sizeof *st->tensors);
    }
    if (st == NULL || st->pieces == NULL || st->tensors == NULL) {
        sluice_step_free(st);
        sl_error_set(&e, SL_ENOMEM, "out of memory keeping a step");
        return out_error(err, &e);
    }
    int rc = lend ? client_lend(c->tc, &st->k, &e) : client_keep(c->tc, &st->k, &e);
    if (rc != 0) {
        sluice_step_free(st);
        return out_error(err, &e);
    }
    mirror(st->k->pieces, st->k->n, st->pieces, st->tensors);
    *out = st;
    *pieces = st->pieces;
    return 0;
}

int sluice_client_keep_step(struct sluice_client *c, struct sluice_step **out, const struct sluice_piece **pieces,
                            struct sluice_error *err)
{
    return take_step(c, out, pieces, 0, err);
}

int sluice_client_lend_step(struct sluice_client *c, struct sluice_step **out, const struct sluice_piece **pieces,
                            struct sluice_error *err)
{
    return take_step(c, out, pieces, 1, err);
}

void sluice_step_free(struct sluice_step *s)
{
    if (s == NULL)
        return;
    client_kept_free(s->k);
    sl_free(s->tensors);
    sl_free(s->pieces);
    sl_free(s);
}

/* The public views of n client_pieces: pieces[n], tensors[n * max]. */
static void mirror(const struct client_piece *tp, uint32_t n, struct sluice_piece *pieces,
                   struct sluice_tensor *tensors)
{
    for (uint32_t r = 0; r < n; r++) {
        const struct client_piece *p = &tp[r];
        struct sluice_piece *q = &pieces[r];
        struct sluice_tensor *t = &tensors[(size_t)r * SL_WIRE_MAX_TENSORS];
        for (size_t i = 0; i < p->ntensors; i++) {
            t[i] = (struct sluice_tensor){
                .name = p->t[i].name,
                .dtype = p->t[i].dtype,
                .rank = p->t[i].rank,
                .shape = p->t[i].dims,
                .data = p->t[i].data,
                .bytes = p->t[i].bytes,
            };
        }
        *q = (struct sluice_piece){
            .epoch = p->epoch,
            .step = p->step,
            .seq = p->seq,
            .worker = p->worker,
            .replica = p->replica,
            .rows = p->rows,
            .last_step = (p->flags & SL_WIRE_PIECE_LAST_STEP) != 0,
            .shm = (p->flags & SL_WIRE_PIECE_SHM) != 0,
            .ntensors = p->ntensors,
            .tensors = t,
        };
    }
}

void sluice_client_release(struct sluice_client *c)
{
    if (c != NULL)
        client_release(c->tc);
}

uint64_t sluice_client_position(const struct sluice_client *c)
{
    return client_position(c->tc);
}

uint32_t sluice_client_feeders(const struct sluice_client *c)
{
    return (uint32_t)client_feeders(c->tc);
}

const char *sluice_client_metrics_address(const struct sluice_client *c)
{
    return c != NULL && c->expose != NULL ? c->metrics_address : NULL;
}

uint32_t sluice_client_replicas(const struct sluice_client *c)
{
    return c->replicas;
}

uint64_t sluice_client_steps_per_epoch(const struct sluice_client *c)
{
    return client_welcome(c->tc)->steps_per_epoch;
}

uint64_t sluice_client_epochs(const struct sluice_client *c)
{
    return client_welcome(c->tc)->epochs;
}

int sluice_client_keepalive(struct sluice_client *c, int ms, struct sluice_error *err)
{
    struct sl_error e = {0};
    int rc = client_keepalive(c->tc, ms, &e);
    return rc != 0 ? out_error(err, &e) : 0;
}

struct sluice_cluster {
    struct sl_cluster_list feeders;
    uint32_t worker, workers;
};

int sluice_cluster_from_tf_config(struct sluice_cluster **out, const char *tf_config, struct sluice_error *err)
{
    struct sl_error e = {0};
    *out = NULL;
    char *env = NULL, *spec = NULL;
    const char *envp[2] = {NULL, NULL};
    if (tf_config != NULL) {
        size_t n = strlen(tf_config);
        if (n > SL_ENV_MAX_TF_CONFIG) {
            sl_error_set(&e, SL_EINVAL, "TF_CONFIG: %zu bytes, at most %u", n, SL_ENV_MAX_TF_CONFIG);
            return out_error(err, &e);
        }
        if ((env = sl_malloc(n + sizeof "TF_CONFIG=")) == NULL) {
            sl_error_set(&e, SL_ENOMEM, "out of memory reading TF_CONFIG");
            return out_error(err, &e);
        }
        memcpy(env, "TF_CONFIG=", sizeof "TF_CONFIG=" - 1);
        memcpy(env + sizeof "TF_CONFIG=" - 1, tf_config, n + 1);
        envp[0] = env;
    }
    struct sl_cluster cl = {0};
    struct sluice_cluster *c = NULL;
    int rc = sl_env_tf_config_spec(&spec, tf_config != NULL ? envp : NULL, &e);
    if (rc == 0)
        rc = sl_cluster_parse(&cl, spec, &e);
    if (rc == 0 && (c = sl_calloc(1, sizeof *c)) == NULL)
        rc = sl_error_set(&e, SL_ENOMEM, "out of memory reading TF_CONFIG");
    if (rc == 0)
        rc = sl_cluster_worker(&cl, &c->worker, &c->workers, &e);
    if (rc == 0)
        rc = sl_cluster_feeder_list(&cl, &c->feeders, &e);
    if (rc == 0 && c->feeders.n == 0)
        rc = sl_error_set(&e, SL_EINVAL, "TF_CONFIG: cluster has no 'feeder' list (the feeders' endpoints)");
    if (rc == 0 && c->feeders.n > CLIENT_MAX_FEEDERS)
        rc = sl_error_set(&e, SL_EINVAL, "TF_CONFIG: %zu feeders, at most %d", c->feeders.n, CLIENT_MAX_FEEDERS);
    sl_cluster_free(&cl);
    sl_free(spec);
    sl_free(env);
    if (rc != 0) {
        sluice_cluster_free(c);
        return out_error(err, &e);
    }
    *out = c;
    return 0;
}

void sluice_cluster_apply(const struct sluice_cluster *cl, struct sluice_options *o)
{
    o->feeders = (const char *const *)cl->feeders.items;
    o->nfeeders = cl->feeders.n;
    o->worker = cl->worker;
    o->workers = cl->workers;
}

void sluice_cluster_free(struct sluice_cluster *cl)
{
    if (cl == NULL)
        return;
    sl_cluster_list_free(&cl->feeders);
    sl_free(cl);
}
