/* train_loop: see train_loop.h.
 *
 * The loop owns a strategy, one strategy variable "weights" (nparams
 * floats, SUM aggregation, initialised from replica 0's seeded model) and
 * per replica a model (forward/backward scratch and the optimizer's
 * velocity), a gradient buffer and an input buffer. In mirrored mode
 * replica r's model parameters are its working copy of the weights: the
 * only writer of both is the SGD apply, which steps the model and stores
 * the result into copy r, so the copy the hash check reads is what the
 * model computes with. In tower mode every tower installs the one copy into
 * its model at the start of a step (the towers read the variable, as
 * replicate_model_fn's towers read /CPU:0's), and the last tower's model
 * (its velocity) applies the update to the one copy.
 *
 * What a step stages is a two-tensor view of each piece (input, label):
 * only what the model reads travels to the device. Counts are exact in
 * float32 up to 2^24 rows per step.
 */
#include "train_loop.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "train_backend.h"
#include "train_loop_dev.h"
#include "train_metrics.h"

_Static_assert(TRAIN_LOOP_ID_BYTES == TRAIN_COLL_ID_BYTES, "group id size");

struct replica {
    struct train_model *model;
    float *buf; /* nparams + 2: gradient, loss sum, correct */
    float *x;   /* max_rows x inputs, uint8 inputs scaled */
    double eval_rows, eval_correct;
    int64_t *eval_pred;         /* max_rows: the last evaluated piece's predictions */
    uint32_t eval_n;            /* rows in eval_pred */
    struct train_loop *l;       /* back pointer, for the optimizer callback */
    struct train_loop_dev *dev; /* GPU replicas: the model on the device */
};

struct train_loop {
    size_t nparams;
    int inputs, input_idx, label_idx, input_u8;
    char names[2][SL_WIRE_MAX_NAME + 1]; /* the input and label tensors' */
    size_t max_rows;
    uint32_t nreplicas;
    int tower;
    struct train_strategy *s;
    struct sl_metrics *metrics; /* opts.metrics: trained steps, their time, the last loss */
    struct train_variable *weights;
    struct replica *reps;
    struct client_piece *views;   /* [R]: the staged two-tensor pieces */
    struct train_step_result res; /* written by replica 0 in a step */
    int control;                  /* opts.control: the row count's all_reduce carries control_in too */
    float control_in;             /* this worker's control value for the next run */
    /* GPU replicas: the weights live on the devices; the host copies (the
     * strategy variable) are refreshed when something reads them */
    const struct train_loop_dev_ops *gpu;
    struct train_loop_dev_opts dev_opts; /* for the replicas' open */
    struct train_model_config dev_model;
    char dev_id[TRAIN_LOOP_ID_BYTES]; /* the device collective's group */
    uint32_t worker, hash_every;
    int pull_now; /* set before a run: this run's hash check reads the copies */
    int pulled;   /* the host copies hold the device weights */
    int failed;   /* a call failed: GPU replicas leave their group by aborting */
    int ps_mode;
    void *zctx;                      /* ps mode: the ZeroMQ context of the servers' client */
    struct train_ps_model pm;        /* ps mode: the variables' placement */
    struct train_ps_client *psc;     /* ps mode: until train_loop_ps_finish */
    uint32_t ps_lost, ps_first_lost; /* ps mode: from the final pull (train_ps_client_lost) */
};

/* rc, remembering a failure for train_loop_destroy */
static int noted(struct train_loop *l, int rc)
{
    if (rc != 0)
        l->failed = 1;
    return rc;
}

static int find_tensor(const struct sl_wire_welcome *w, const char *name)
{
    for (size_t i = 0; i < w->ntensors; i++)
        if (w->fields[i].name_len == strlen(name) && memcmp(w->fields[i].name, name, w->fields[i].name_len) == 0)
            return (int)i;
    return -1;
}

/* The piece's input and label tensors as a two-tensor piece in *v. The
 * eval job has its own schema: tensors are found by name. */
static int pick(const struct train_loop *l, const struct client_piece *p, struct client_piece *v, struct sl_error *err)
{
    v->epoch = p->epoch;
    v->step = p->step;
    v->seq = p->seq;
    v->worker = p->worker;
    v->replica = p->replica;
    v->rows = p->rows;
    v->flags = p->flags;
    v->ntensors = 2;
    if (p->rows > l->max_rows)
        return sl_error_set(err, SL_EPROTO, "piece of %u rows exceeds the announced batch %zu", p->rows, l->max_rows);
    for (int k = 0; k < 2; k++) {
        int idx = k == 0 ? l->input_idx : l->label_idx;
        const char *name = l->names[k];
        if ((size_t)idx >= p->ntensors || strcmp(p->t[idx].name, name) != 0) {
            idx = -1;
            for (size_t i = 0; i < p->ntensors; i++)
                if (strcmp(p->t[i].name, name) == 0)
                    idx = (int)i;
        }
        if (idx < 0)
            return sl_error_set(err, SL_EPROTO, "the piece has no tensor '%s'", name);
        v->t[k] = p->t[idx];
    }
    if (v->t[0].dtype != (l->input_u8 ? SL_WIRE_UINT8 : SL_WIRE_FLOAT32) || v->t[1].dtype != SL_WIRE_INT64)
        return sl_error_set(err, SL_EPROTO, "tensors '%s' and '%s' do not have the training job's dtypes", l->names[0],
                            l->names[1]);
    return 0;
}

/* The staged inputs as floats: converted into r->x (uint8), or the staged
 * buffer itself (float32; staged buffers are aligned). */
static const float *inputs_of(struct train_loop *l, struct replica *r, const struct train_staged *p)
{
    size_t nvals = (size_t)p->rows * (size_t)l->inputs;
    if (!l->input_u8)
        return p->t[0].data;
    train_model_inputs_from_u8(p->t[0].data, nvals, r->x);
    return r->x;
}

/* Tower mode: the one copy of the weights into this tower's model; ps
 * mode: the pulled values into this replica's. */
static void install(struct train_loop *l, struct train_replica *rep, struct replica *r)
{
    if (l->tower || l->ps_mode)
        memcpy(train_model_params(r->model), train_replica_var(rep, l->weights), l->nparams * sizeof(float));
}

/* The optimizer on one copy, from this replica's reduced gradient. */
static int sgd_apply(float *copy, size_t n, void *arg, struct sl_error *err)
{
    struct replica *r = arg;
    int rc = train_model_sgd_step(r->model, r->buf, err);
    if (rc == 0)
        memcpy(copy, train_model_params(r->model), n * sizeof *copy);
    return rc;
}

/* Step 1: head[0] = N, the rows summed across replicas and workers; with
 * opts.control head[1] the control values summed in the same all_reduce
 * (replica 0 brings this worker's), else the rows alone (what a run
 * without control always did: no float more). */
static int reduce_rows(struct train_loop *l, struct train_replica *rep, const struct train_staged *p, float head[2],
                       struct sl_error *err)
{
    head[0] = (float)p->rows;
    head[1] = train_replica_id(rep) == 0 ? l->control_in : 0.0f;
    return train_replica_all_reduce(rep, TRAIN_SUM, head, l->control ? 2 : 1, err);
}

static int train_step(struct train_replica *rep, const struct train_staged *p, void *ctx, struct sl_error *err)
{
    struct train_loop *l = ctx;
    int id = train_replica_id(rep);
    struct replica *r = &l->reps[id];
    float head[2];
    int rc = reduce_rows(l, rep, p, head, err);
    if (rc != 0)
        return rc;
    float total = head[0];
    install(l, rep, r);
    train_model_zero_grads(r->model);
    float loss_sum = 0;
    size_t ok = 0;
    if (p->rows > 0) {
        /* mirrored: (sum of the rows' losses) / N; tower: the tower's mean
         * loss times its scale, i.e. / (rows / scale), N for equal towers */
        double denom = l->tower ? (double)p->rows / (double)train_replica_loss_scale(rep) : (double)total;
        rc = train_model_forward_backward(r->model, inputs_of(l, r, p), p->t[1].data, p->rows, denom, &loss_sum, &ok,
                                          err);
        if (rc != 0)
            return rc;
    }
    memcpy(r->buf, train_model_grads(r->model), l->nparams * sizeof *r->buf);
    r->buf[l->nparams] = loss_sum;
    r->buf[l->nparams + 1] = (float)ok;
    if ((rc = train_replica_all_reduce(rep, TRAIN_SUM, r->buf, l->nparams + 2, err)) != 0)
        return rc;
    if (total > 0 && (rc = train_replica_var_apply_gradient(rep, l->weights, r->buf, sgd_apply, r, err)) != 0)
        return rc;
    if (total == 0 && (rc = train_replica_var_skip_step(rep, l->weights, err)) != 0)
        return rc;
    if (id == 0) {
        l->res.rows = (uint64_t)total;
        l->res.control = l->control ? head[1] : 0;
        l->res.loss = total > 0 ? r->buf[l->nparams] / total : 0;
        l->res.accuracy = total > 0 ? r->buf[l->nparams + 1] / total : 0;
    }
    return 0;
}

/* GPU replicas: the optimizer on the device; the new weights land in this
 * replica's host copy when this run's hash check will read it. */
static int dev_apply(float *copy, size_t n, void *arg, struct sl_error *err)
{
    (void)n;
    struct replica *r = arg;
    return r->l->gpu->apply(r->dev, r->l->pull_now ? copy : NULL, err);
}

/* GPU replicas: the same step with the model and the optimizer on the
 * device, and the gradient summed in device memory by the strategy's device
 * collective (NCCL over every GPU of every worker); the row count and the
 * loss and correct sums travel through the strategy's host collectives as
 * on CPU (float32, replica order, then the ring). */
static int dev_step(struct train_replica *rep, const struct train_staged *p, void *ctx, struct sl_error *err)
{
    struct train_loop *l = ctx;
    int id = train_replica_id(rep);
    struct replica *r = &l->reps[id];
    float head[2];
    int rc = reduce_rows(l, rep, p, head, err);
    if (rc != 0)
        return rc;
    float total = head[0];
    double loss_sum = 0, ok = 0;
    float *grad = NULL;
    /* ps mode: the values the strategy pulled become this replica's device
     * weights (every replica, before anything that could leave the others
     * waiting in the sum) */
    if (l->ps_mode && (rc = l->gpu->load(r->dev, train_replica_var(rep, l->weights), err)) != 0)
        return rc;
    /* every replica joins the gradient sum, empty or not, and even after its
     * own grads failed (then with the first error kept); with no rows
     * anywhere the denominator is moot (nothing is applied) */
    rc = l->gpu->grads(r->dev, p, total > 0 ? (double)total : 1.0, &grad, &loss_sum, &ok, err);
    struct sl_error later = {0};
    int rc_sum = grad != NULL ? train_replica_all_reduce_device(rep, grad, l->nparams, rc == 0 ? err : &later) : 0;
    if (rc == 0)
        rc = rc_sum;
    if (rc != 0)
        return rc;
    float stats[2] = {(float)loss_sum, (float)ok};
    if ((rc = train_replica_all_reduce(rep, TRAIN_SUM, stats, 2, err)) != 0)
        return rc;
    /* ps mode: replica 0 pushes the summed gradient from its pinned
     * staging; mirrored: momentum SGD on every device */
    const float *host_grad = NULL;
    if (total > 0 && l->ps_mode && id == 0 && (rc = l->gpu->gradient_to_host(r->dev, &host_grad, err)) != 0)
        return rc;
    if (total > 0 && (rc = train_replica_var_apply_gradient(rep, l->weights, host_grad, dev_apply, r, err)) != 0)
        return rc;
    if (total == 0 && (rc = train_replica_var_skip_step(rep, l->weights, err)) != 0)
        return rc;
    if (id == 0) {
        l->res.rows = (uint64_t)total;
        l->res.control = l->control ? head[1] : 0;
        l->res.loss = total > 0 ? stats[0] / total : 0;
        l->res.accuracy = total > 0 ? stats[1] / total : 0;
    }
    return 0;
}

static int dev_eval_step(struct train_replica *rep, const struct train_staged *p, void *ctx, struct sl_error *err)
{
    struct train_loop *l = ctx;
    struct replica *r = &l->reps[train_replica_id(rep)];
    r->eval_n = 0;
    /* ps mode: the weights are the host copies' (the final pull's) */
    int rc = l->ps_mode ? l->gpu->load(r->dev, train_replica_var(rep, l->weights), err) : 0;
    if (rc == 0)
        rc = l->gpu->eval(r->dev, p, r->eval_pred, &r->eval_rows, &r->eval_correct, err);
    if (rc == 0)
        r->eval_n = p->rows;
    return rc;
}

/* On each replica's thread: its model on its GPU (the strategy joined the
 * device group at create, before anything here could fail). */
static int dev_open(struct train_replica *rep, const struct train_staged *p, void *ctx, struct sl_error *err)
{
    (void)p;
    struct train_loop *l = ctx;
    struct train_loop_dev_opts o = l->dev_opts;
    o.dev = train_replica_device(rep);
    return l->gpu->open(&l->reps[train_replica_id(rep)].dev, &o, err);
}

static int dev_close(struct train_replica *rep, const struct train_staged *p, void *ctx, struct sl_error *err)
{
    (void)p;
    (void)err;
    struct train_loop *l = ctx;
    struct replica *r = &l->reps[train_replica_id(rep)];
    l->gpu->close(r->dev);
    r->dev = NULL;
    return 0;
}

static int dev_pull(struct train_replica *rep, const struct train_staged *p, void *ctx, struct sl_error *err)
{
    (void)p;
    struct train_loop *l = ctx;
    return l->gpu->pull(l->reps[train_replica_id(rep)].dev, train_replica_var(rep, l->weights), err);
}

/* GPU replicas: the device weights into the host copies, once per change. */
static int pull(struct train_loop *l, struct sl_error *err)
{
    if (l->gpu == NULL || l->pulled || l->ps_mode) /* ps mode: the host copies hold the servers' values */
        return 0;
    int rc = train_strategy_call_for_each_replica(l->s, dev_pull, l, err);
    l->pulled = rc == 0;
    return rc;
}

static int eval_step(struct train_replica *rep, const struct train_staged *p, void *ctx, struct sl_error *err)
{
    struct train_loop *l = ctx;
    struct replica *r = &l->reps[train_replica_id(rep)];
    install(l, rep, r);
    r->eval_n = 0;
    if (p->rows == 0)
        return 0;
    const float *x = inputs_of(l, r, p);
    const int64_t *labels = p->t[1].data;
    int rc = train_model_predict(r->model, x, p->rows, r->eval_pred, err);
    if (rc != 0)
        return rc;
    for (uint32_t i = 0; i < p->rows; i++)
        r->eval_correct += r->eval_pred[i] == labels[i];
    r->eval_n = p->rows;
    r->eval_rows += p->rows;
    return 0;
}

/* The options and the job's tensors checked, the backend loaded: 0 with
 * the tensors' indexes, the backend and whether the replicas are GPUs. */
static int check_create(const struct train_loop_opts *o, const struct sl_wire_welcome *w, int *in_out, int *lb_out,
                        const struct train_backend **b, int *gpu_out, struct sl_error *err)
{
    int in = find_tensor(w, o->input), lb = find_tensor(w, o->label);
    if (in < 0 || lb < 0)
        return sl_error_set(err, SL_EINVAL, "the job's pieces have no tensor '%s'", in < 0 ? o->input : o->label);
    const struct sl_wire_field *fi = &w->fields[in], *fl = &w->fields[lb];
    if ((fi->dtype != SL_WIRE_UINT8 && fi->dtype != SL_WIRE_FLOAT32) || fi->rank != 1 || fi->dims[0] < 1)
        return sl_error_set(err, SL_EINVAL, "input '%s' must be uint8 or float32 of shape [n] per element", o->input);
    if (fl->dtype != SL_WIRE_INT64 || fl->rank != 0)
        return sl_error_set(err, SL_EINVAL, "label '%s' must be an int64 scalar per element", o->label);
    if (strlen(o->input) > SL_WIRE_MAX_NAME || strlen(o->label) > SL_WIRE_MAX_NAME)
        return sl_error_set(err, SL_EINVAL, "tensor names longer than %d bytes", SL_WIRE_MAX_NAME);
    /* GPU replicas: a device kind with a model of its own (and collectives
     * for its gradient); "cuda" is the only one */
    int gpu = o->device != NULL && strcmp(o->device, "cuda") == 0;
    if (o->device != NULL && !gpu && strcmp(o->device, "cpu") != 0)
        return sl_error_set(err, SL_EINVAL, "unknown device kind '%s' (cpu or cuda)", o->device);
    struct sl_error why = {0};
    if (train_backend_load(o->device != NULL ? o->device : "cpu", b, &why) != 0)
        return sl_error_set(err, SL_EINVAL, "GPU replicas need the CUDA backend: %s", why.msg);
    if (gpu && o->mode == TRAIN_STRATEGY_TOWER)
        return sl_error_set(err, SL_EINVAL, "tower mode runs on CPU replicas only");
    if (o->mode == TRAIN_STRATEGY_PS && (o->ps == NULL || o->nps == 0 || o->ring != NULL))
        return sl_error_set(err, SL_EINVAL, "parameter-server mode needs the servers' endpoints and no ring");
    if (o->control && o->mode == TRAIN_STRATEGY_PS)
        return sl_error_set(err, SL_EINVAL,
                            "a control value rides on the row count's all_reduce across workers: not in "
                            "parameter-server mode (its row count stays within the worker)");
    if (gpu && o->workers > 1 && o->dev_id == NULL && o->mode != TRAIN_STRATEGY_PS)
        return sl_error_set(err, SL_EINVAL, "GPU replicas on %u workers need worker 0's group id", o->workers);
    *in_out = in;
    *lb_out = lb;
    *gpu_out = gpu;
    return 0;
}

/* ps mode: the variables' placement (the same on every process) and the
 * servers' client, before the strategy that uses it */
static int open_ps(struct train_loop *l, const struct train_loop_opts *o, const struct train_model_config *mc,
                   struct sl_error *err)
{
    int rc;
    if ((rc = train_ps_model_init(&l->pm, mc, o->nps, o->ps_placement, err)) == 0 && (l->zctx = zmq_ctx_new()) == NULL)
        rc = sl_error_set(err, SL_EIO, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    if (rc == 0)
        rc = train_ps_client_open_keys(&l->psc, l->zctx, o->ps, &l->pm.layout, o->worker,
                                       o->ps_timeout_ms > 0 ? o->ps_timeout_ms : 10000, l->pm.config, o->ps_curve, err);
    if (rc == 0)
        train_ps_client_set_session(l->psc, o->ps_session);
    return rc;
}

/* The replicas' models and buffers. GPU replicas: one host model, replica
 * 0's, for the initial weights and train_loop_model; the replicas' models
 * are on their devices */
static int create_replicas(struct train_loop *l, const struct train_model_config *mc, int gpu, struct sl_error *err)
{
    int rc = 0;
    for (uint32_t r = 0; rc == 0 && r < l->nreplicas; r++) {
        struct replica *p = &l->reps[r];
        p->l = l;
        if (gpu && r > 0) {
            if ((p->eval_pred = sl_malloc(l->max_rows * sizeof *p->eval_pred)) == NULL)
                rc = sl_error_set(err, SL_ENOMEM, "out of memory for replica %u", r);
            continue;
        }
        if ((rc = train_model_create(&p->model, mc, err)) != 0)
            break;
        l->nparams = train_model_nparams(p->model);
        p->buf = sl_malloc((l->nparams + 2) * sizeof *p->buf);
        p->x = sl_malloc(l->max_rows * (size_t)l->inputs * sizeof *p->x);
        p->eval_pred = sl_malloc(l->max_rows * sizeof *p->eval_pred);
        if (p->buf == NULL || p->x == NULL || p->eval_pred == NULL)
            rc = sl_error_set(err, SL_ENOMEM, "out of memory for replica %u", r);
    }
    return rc;
}

int train_loop_create(struct train_loop **out, const struct train_loop_opts *o, const struct sl_wire_welcome *w,
                      struct sl_error *err)
{
    *out = NULL;
    int in = -1, lb = -1, gpu = 0;
    const struct train_backend *b = NULL;
    int rc = check_create(o, w, &in, &lb, &b, &gpu, err);
    if (rc != 0)
        return rc;
    const struct sl_wire_field *fi = &w->fields[in];
    uint32_t R = o->replicas ? o->replicas : 1;
    struct train_loop *l = sl_calloc(1, sizeof *l);
    if (l == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    l->gpu = gpu ? b->model : NULL;
    l->worker = o->worker;
    l->metrics = o->metrics;
    l->hash_every = o->hash_every;
    l->control = o->control != 0;
    l->inputs = (int)fi->dims[0];
    l->input_idx = in;
    l->label_idx = lb;
    snprintf(l->names[0], sizeof l->names[0], "%s", o->input);
    snprintf(l->names[1], sizeof l->names[1], "%s", o->label);
    l->input_u8 = fi->dtype == SL_WIRE_UINT8;
    l->max_rows = w->batch ? w->batch : 256;
    l->nreplicas = R;
    l->tower = o->mode == TRAIN_STRATEGY_TOWER;
    struct train_model_config mc = o->model;
    mc.inputs = l->inputs;
    mc.max_rows = l->max_rows;
    size_t cap[2] = {l->max_rows * (size_t)l->inputs * sl_wire_dtype_size(fi->dtype), l->max_rows * sizeof(int64_t)};
    l->ps_mode = o->mode == TRAIN_STRATEGY_PS;
    if (l->ps_mode)
        rc = open_ps(l, o, &mc, err);
    if (rc == 0 && gpu) {
        /* one group over every GPU of every worker; one worker makes its own
         * id (after a failed ps set-up, nothing: that error stands) */
        if (o->dev_id != NULL)
            memcpy(l->dev_id, o->dev_id, sizeof l->dev_id);
        else
            rc = train_backend_group_id(b, l->dev_id, err);
    }
    struct train_strategy_opts so = {.replicas = R,
                                     .mode = o->mode,
                                     .ring = o->ring,
                                     .worker = o->worker,
                                     .workers = o->workers,
                                     .hash_every = o->hash_every,
                                     .loss_reduction = TRAIN_LOSS_SUM_BY_NONZERO_WEIGHTS,
                                     .device = gpu ? "cuda" : "cpu",
                                     .ordinals = gpu ? o->ordinals : NULL,
                                     .device_group = gpu ? l->dev_id : NULL,
                                     .ntensors = 2,
                                     .tensor_capacity = cap,
                                     .scratch_floats = 1,
                                     .metrics = o->metrics,
                                     .ps = l->psc};
    if (rc == 0)
        rc = train_strategy_create(&l->s, &so, err);
    if (rc == 0 &&
        ((l->reps = sl_calloc(R, sizeof *l->reps)) == NULL || (l->views = sl_calloc(R, sizeof *l->views)) == NULL))
        rc = sl_error_set(err, SL_ENOMEM, "out of memory");
    if (rc == 0)
        rc = create_replicas(l, &mc, gpu, err);
    if (rc == 0)
        rc = train_strategy_variable(l->s, "weights", l->nparams, TRAIN_AGG_SUM, train_model_params(l->reps[0].model),
                                     &l->weights, err);
    if (rc == 0 && gpu) {
        l->dev_model = mc;
        l->dev_opts = (struct train_loop_dev_opts){.model = &l->dev_model, .input_u8 = l->input_u8};
        rc = train_strategy_call_for_each_replica(l->s, dev_open, l, err);
        l->pulled = 1; /* the copies hold the initial weights, as the devices do */
    }
    if (rc != 0) {
        l->failed = 1; /* replicas that did open leave by aborting */
        train_loop_destroy(l);
        return rc;
    }
    *out = l;
    return 0;
}

void train_loop_destroy(struct train_loop *l)
{
    if (l == NULL)
        return;
    if (l->gpu != NULL && l->s != NULL) {
        /* each replica frees its model on its own thread; after a failure
         * the threads take no more jobs: from here */
        struct sl_error err = {0};
        if (train_strategy_call_for_each_replica(l->s, dev_close, l, &err) != 0)
            for (uint32_t r = 0; r < l->nreplicas; r++) {
                l->gpu->close(l->reps[r].dev);
                l->reps[r].dev = NULL;
            }
    }
    /* a failure the strategy did not see (a bad piece): GPU replicas then
     * leave their group by aborting, as peers may wait in a collective */
    if (l->failed && l->s != NULL && !train_strategy_aborted(l->s))
        train_strategy_abort(l->s, SL_ECLOSED, "the training loop failed");
    train_strategy_destroy(l->s);
    train_ps_client_close(l->psc);
    train_ps_model_free(&l->pm);
    if (l->zctx != NULL)
        zmq_ctx_term(l->zctx);
    for (uint32_t r = 0; l->reps != NULL && r < l->nreplicas; r++) {
        train_model_destroy(l->reps[r].model);
        sl_free(l->reps[r].buf);
        sl_free(l->reps[r].x);
        sl_free(l->reps[r].eval_pred);
    }
    sl_free(l->reps);
    sl_free(l->views);
    sl_free(l);
}

/* Stage a step's pieces (their two tensors) on every replica. */
static int put(struct train_loop *l, const struct client_piece *pieces, uint32_t replicas, struct sl_error *err)
{
    if (replicas != l->nreplicas)
        return sl_error_set(err, SL_EINVAL, "step of %u pieces for a loop of %u replicas", replicas, l->nreplicas);
    for (uint32_t r = 0; r < replicas; r++) {
        int rc = pick(l, &pieces[r], &l->views[r], err);
        if (rc != 0)
            return rc;
    }
    return train_strategy_put(l->s, l->views, err);
}

int train_loop_put(struct train_loop *l, const struct client_piece *pieces, uint32_t replicas, struct sl_error *err)
{
    return noted(l, put(l, pieces, replicas, err));
}

void train_loop_control(struct train_loop *l, float v)
{
    l->control_in = v;
}

int train_loop_run(struct train_loop *l, struct train_step_result *res, struct sl_error *err)
{
    memset(res, 0, sizeof *res);
    /* GPU replicas: this run's hash check (every hash_every-th) reads the
     * host copies, so the step leaves the new weights there */
    l->pull_now = l->hash_every && (train_strategy_steps(l->s) + 1) % l->hash_every == 0;
    uint64_t t0 = sl_clock_ns();
    int rc = train_strategy_run(l->s, l->gpu != NULL ? dev_step : train_step, l, err);
    l->control_in = 0; /* for that run only */
    if (rc == 0) {
        sl_metrics_add(l->metrics, TRAIN_M_RUN_NS, sl_clock_ns() - t0);
        sl_metrics_add(l->metrics, TRAIN_M_TRAINED, 1);
        if (l->res.rows > 0) {
            sl_metrics_set_real(l->metrics, TRAIN_M_LOSS, l->res.loss);
            sl_metrics_set_real(l->metrics, TRAIN_M_ACCURACY, l->res.accuracy);
        }
    }
    if (rc == 0 && l->res.rows > 0) /* otherwise nothing moved */
        l->pulled = l->gpu == NULL || l->pull_now;
    else if (rc != 0)
        l->pulled = l->gpu == NULL;
    if (rc == 0) {
        *res = l->res;
        train_strategy_ps_last(l->s, &res->ps);
    }
    return noted(l, rc);
}

int train_loop_ps_position(struct train_loop *l, const struct client_input_position *next, struct sl_error *err)
{
    if (!l->ps_mode || l->psc == NULL)
        return sl_error_set(err, SL_EINVAL, "ps_position: not in parameter-server mode, or finished");
    train_ps_client_set_position(l->psc, next);
    return 0;
}

int train_loop_ps_finish(struct train_loop *l, volatile sig_atomic_t *stop, uint64_t *global_step, struct sl_error *err)
{
    if (!l->ps_mode || l->psc == NULL)
        return sl_error_set(err, SL_EINVAL, "ps_finish: not in parameter-server mode, or finished");
    int rc = train_strategy_ps_finish(l->s, stop, global_step, err);
    if (rc == 0)
        l->ps_lost = train_ps_client_lost(l->psc, &l->ps_first_lost);
    train_ps_client_close(l->psc); /* BYE: the servers need this worker no more */
    l->psc = NULL;
    return noted(l, rc);
}

int train_loop_step(struct train_loop *l, const struct client_piece *pieces, uint32_t replicas,
                    struct train_step_result *res, struct sl_error *err)
{
    memset(res, 0, sizeof *res);
    int rc = noted(l, put(l, pieces, replicas, err));
    return rc != 0 ? rc : train_loop_run(l, res, err);
}

int train_loop_check_mirrored(struct train_loop *l, struct sl_error *err)
{
    int rc = pull(l, err);
    return noted(l, rc != 0 ? rc : train_strategy_check(l->s, err));
}

const int64_t *train_loop_eval_predictions(const struct train_loop *l, uint32_t r, uint32_t *rows)
{
    *rows = 0;
    if (r >= l->nreplicas || l->reps[r].eval_pred == NULL)
        return NULL;
    *rows = l->reps[r].eval_n;
    return l->reps[r].eval_pred;
}

int train_loop_eval_run(struct train_loop *l, double *rows, double *correct, struct sl_error *err)
{
    for (uint32_t r = 0; r < l->nreplicas; r++) {
        l->reps[r].eval_rows = l->reps[r].eval_correct = 0;
        l->reps[r].eval_n = 0;
    }
    int rc = train_strategy_run(l->s, l->gpu != NULL ? dev_eval_step : eval_step, l, err);
    for (uint32_t r = 0; rc == 0 && r < l->nreplicas; r++) {
        *rows += l->reps[r].eval_rows;
        *correct += l->reps[r].eval_correct;
    }
    return noted(l, rc);
}

int train_loop_eval_step(struct train_loop *l, const struct client_piece *pieces, uint32_t replicas, double *rows,
                         double *correct, struct sl_error *err)
{
    int rc = noted(l, put(l, pieces, replicas, err));
    return rc != 0 ? rc : train_loop_eval_run(l, rows, correct, err);
}

int train_loop_group_id(char out[TRAIN_LOOP_ID_BYTES], struct sl_error *err)
{
    const struct train_backend *b;
    struct sl_error why = {0};
    if (train_backend_load("cuda", &b, &why) != 0)
        return sl_error_set(err, SL_EINVAL, "GPU replicas need the CUDA backend: %s", why.msg);
    return train_backend_group_id(b, out, err);
}

int train_loop_pull(struct train_loop *l, struct sl_error *err)
{
    return pull(l, err);
}

uint32_t train_loop_ps_lost(const struct train_loop *l, uint32_t *first)
{
    if (first != NULL)
        *first = l->ps_first_lost;
    return l->ps_lost;
}

long long train_loop_first_non_finite(const struct train_loop *l)
{
    if (l->gpu != NULL && !l->pulled && !l->ps_mode)
        return -1;
    const float *w = train_variable_copy(l->weights, 0);
    /* an exponent of all ones is a NaN or an infinity; the OR of a block
     * vectorizes, and the block is searched only when it has one */
    for (size_t k = 0; k < l->nparams; k += 1024) {
        size_t m = l->nparams - k < 1024 ? l->nparams - k : 1024;
        uint32_t any = 0;
        for (size_t i = 0; i < m; i++) {
            uint32_t b;
            memcpy(&b, &w[k + i], sizeof b);
            any |= (uint32_t)((b & 0x7f800000u) == 0x7f800000u);
        }
        for (size_t i = 0; any && i < m; i++) {
            uint32_t b;
            memcpy(&b, &w[k + i], sizeof b);
            if ((b & 0x7f800000u) == 0x7f800000u)
                return (long long)(k + i);
        }
    }
    return -1;
}

int train_loop_sum(struct train_loop *l, float *v, size_t n, struct sl_error *err)
{
    return train_strategy_sum_across_workers(l->s, v, n, err);
}

uint64_t train_loop_weights_hash(struct train_loop *l)
{
    struct sl_error err = {0};
    (void)pull(l, &err); /* a failure leaves the last copies; the next step reports it */
    return train_variable_hash(l->weights);
}

struct train_model *train_loop_model(struct train_loop *l)
{
    struct train_model *m = l->reps[0].model;
    struct sl_error err = {0};
    (void)pull(l, &err);
    memcpy(train_model_params(m), train_variable_copy(l->weights, 0), l->nparams * sizeof(float));
    return m;
}

/* Tower mode: the last tower applies the update with its model, so its
 * velocity is the optimizer's; mirrored: every replica's is the same. */
int train_loop_state(struct train_loop *l, const float **weights, const float **velocity, size_t *nparams,
                     struct sl_error *err)
{
    if (l->gpu != NULL)
        return sl_error_set(err, SL_EINVAL,
                            "checkpoints need CPU replicas (the GPU replicas' optimizer state "
                            "stays on the devices)");
    const struct replica *r = &l->reps[l->tower ? l->nreplicas - 1 : 0];
    *weights = train_variable_copy(l->weights, 0);
    *velocity = train_model_velocity(r->model);
    *nparams = l->nparams;
    return 0;
}

int train_loop_set_state(struct train_loop *l, const float *weights, const float *velocity, size_t nparams,
                         struct sl_error *err)
{
    if (l->gpu != NULL)
        return sl_error_set(err, SL_EINVAL,
                            "checkpoints need CPU replicas (the GPU replicas' optimizer state "
                            "stays on the devices)");
    if (nparams != l->nparams)
        return sl_error_set(err, SL_EINVAL, "the saved state has %zu parameters, this model %zu", nparams, l->nparams);
    size_t bytes = nparams * sizeof(float);
    for (uint32_t r = 0; r < l->nreplicas; r++) {
        /* tower mode has one copy: every r names it */
        memcpy(train_variable_copy(l->weights, (int)r), weights, bytes);
        memcpy(train_model_params(l->reps[r].model), weights, bytes);
        memcpy(train_model_velocity(l->reps[r].model), velocity, bytes);
    }
    return 0;
}
