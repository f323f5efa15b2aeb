/* train_loop: see train_loop.h.
 *
 * One thread per replica: replica 0 is the caller's thread, replicas
 * 1..R-1 are threads made at create. Each replica owns a copy of the model
 * (a mirrored variable: same seed, same updates, so the copies stay
 * bit-identical; the weights hash of every copy is compared each epoch).
 *
 * A step:
 *   1. replica 0 learns the global batch's row count N (one float round the
 *      ring; N is the sum of the local pieces' rows for one worker);
 *   2. every replica computes the gradient of (sum of its rows' losses) / N
 *      into its own buffer, with its loss sum and correct count appended;
 *   3. the replicas' buffers are summed in replica order by the in-process
 *      all-reduce (bitwise identical on every replica);
 *   4. replica 0 sums that across the workers with the ring;
 *   5. every replica applies the same momentum-SGD step to its copy.
 * Counts are exact in float32 up to 2^24 rows per step.
 *
 * Lock order: the loop's mutex only; the local group locks internally and
 * is never entered with the loop's mutex held.
 */
#include "train_loop.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "sl_alloc.h"
#include "train_collective_local.h"
#include "train_mirror.h"

struct replica {
    struct train_loop *l;
    int index;
    struct train_model *model;
    float *buf;      /* nparams + 2: gradient, loss sum, correct */
    float *x;        /* max_rows x inputs */
    int64_t *labels; /* max_rows: received frames carry no alignment guarantee */
    pthread_t thread;
    int started;
    int rc;
    struct sl_error err;
};

struct train_loop {
    size_t nparams;
    int inputs, input_idx, label_idx, input_u8;
    size_t max_rows;
    struct train_ring *ring; /* borrowed; NULL for one worker */
    uint32_t nreplicas;
    struct replica *reps;
    struct train_local_group *group;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t gen;       /* step number handed to the threads */
    int reduced;        /* step `gen`: the global gradient is in reps[0].buf */
    uint32_t finished;  /* threads done with step `gen` */
    int stop;
    const struct train_piece *pieces;
    float total;        /* N of step `gen` */
};

static int find_tensor(const struct sl_wire_welcome *w, const char *name)
{
    for (size_t i = 0; i < w->ntensors; i++)
        if (w->fields[i].name_len == strlen(name) && memcmp(w->fields[i].name, name, w->fields[i].name_len) == 0)
            return (int)i;
    return -1;
}

/* Step part 2 for one replica: its gradient into its buffer. */
static int compute(struct replica *r, const struct train_piece *p, float total, struct sl_error *err)
{
    struct train_loop *l = r->l;
    train_model_zero_grads(r->model);
    float loss_sum = 0;
    size_t ok = 0;
    if (p->rows > 0) {
        if (p->rows > l->max_rows)
            return sl_error_set(err, SL_EPROTO, "piece of %u rows exceeds the announced batch %zu", p->rows,
                                l->max_rows);
        const struct train_tensor *ti = &p->t[l->input_idx], *tl = &p->t[l->label_idx];
        size_t nvals = (size_t)p->rows * (size_t)l->inputs;
        if (l->input_u8)
            train_model_inputs_from_u8(ti->data, nvals, r->x);
        else
            memcpy(r->x, ti->data, nvals * sizeof(float));
        memcpy(r->labels, tl->data, (size_t)p->rows * sizeof *r->labels);
        int rc = train_model_forward_backward(r->model, r->x, r->labels, p->rows, (double)total, &loss_sum, &ok, err);
        if (rc != 0)
            return sl_error_prefix(err, "replica %d step %llu: ", r->index, (unsigned long long)p->step);
    }
    memcpy(r->buf, train_model_grads(r->model), l->nparams * sizeof *r->buf);
    r->buf[l->nparams] = loss_sum;
    r->buf[l->nparams + 1] = (float)ok;
    return 0;
}

/* Parts 2-3 for one replica (part 4 is replica 0's, in train_loop_step). */
static int replica_reduce(struct replica *r, const struct train_piece *pieces, float total, struct sl_error *err)
{
    struct train_loop *l = r->l;
    int rc = compute(r, &pieces[r->index], total, err);
    if (rc != 0) {
        train_local_group_abort(l->group, rc, err->msg);
        return rc;
    }
    if (l->nreplicas > 1)
        rc = train_local_all_reduce(l->group, r->index, r->buf, l->nparams + 2, TRAIN_SUM, err);
    return rc;
}

static void *replica_main(void *arg)
{
    struct replica *r = arg;
    struct train_loop *l = r->l;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&l->mu);
        while (l->gen == seen && !l->stop)
            pthread_cond_wait(&l->cv, &l->mu);
        if (l->stop) {
            pthread_mutex_unlock(&l->mu);
            break;
        }
        seen = l->gen;
        const struct train_piece *pieces = l->pieces;
        float total = l->total;
        pthread_mutex_unlock(&l->mu);

        r->rc = replica_reduce(r, pieces, total, &r->err);
        /* wait for replica 0's ring sum, then take the same step */
        pthread_mutex_lock(&l->mu);
        while (!l->reduced && !l->stop)
            pthread_cond_wait(&l->cv, &l->mu);
        int go = l->reduced > 0 && r->rc == 0;
        pthread_mutex_unlock(&l->mu);
        if (go && total > 0)
            r->rc = train_model_sgd_step(r->model, l->reps[0].buf, &r->err);
        pthread_mutex_lock(&l->mu);
        l->finished++;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
    }
    return NULL;
}

int train_loop_create(struct train_loop **out, const struct train_loop_opts *o, const struct sl_wire_welcome *w,
                      struct sl_error *err)
{
    *out = NULL;
    int in = find_tensor(w, o->input), lb = find_tensor(w, o->label);
    if (in < 0 || lb < 0)
        return sl_error_set(err, SL_EINVAL, "the job's pieces have no tensor '%s'", in < 0 ? o->input : o->label);
    const struct sl_wire_field *fi = &w->fields[in], *fl = &w->fields[lb];
    if ((fi->dtype != SL_WIRE_UINT8 && fi->dtype != SL_WIRE_FLOAT32) || fi->rank != 1 || fi->dims[0] < 1)
        return sl_error_set(err, SL_EINVAL, "input '%s' must be uint8 or float32 of shape [n] per element", o->input);
    if (fl->dtype != SL_WIRE_INT64 || fl->rank != 0)
        return sl_error_set(err, SL_EINVAL, "label '%s' must be an int64 scalar per element", o->label);
    uint32_t R = o->replicas ? o->replicas : 1;
    struct train_loop *l = sl_calloc(1, sizeof *l);
    if (l == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->inputs = (int)fi->dims[0];
    l->input_idx = in;
    l->label_idx = lb;
    l->input_u8 = fi->dtype == SL_WIRE_UINT8;
    l->max_rows = w->batch ? w->batch : 256;
    l->ring = o->ring;
    l->nreplicas = R;
    struct train_model_config mc = o->model;
    mc.inputs = l->inputs;
    mc.max_rows = l->max_rows;
    int rc = 0;
    if ((l->reps = sl_calloc(R, sizeof *l->reps)) == NULL)
        rc = sl_error_set(err, SL_ENOMEM, "out of memory");
    if (rc == 0 && R > 1)
        rc = train_local_group_create(&l->group, (int)R, err);
    for (uint32_t r = 0; rc == 0 && r < R; r++) {
        struct replica *p = &l->reps[r];
        p->l = l;
        p->index = (int)r;
        if ((rc = train_model_create(&p->model, &mc, err)) != 0)
            break;
        l->nparams = train_model_nparams(p->model);
        p->buf = sl_malloc((l->nparams + 2) * sizeof *p->buf);
        p->x = sl_malloc(l->max_rows * (size_t)l->inputs * sizeof *p->x);
        p->labels = sl_malloc(l->max_rows * sizeof *p->labels);
        if (p->buf == NULL || p->x == NULL || p->labels == NULL)
            rc = sl_error_set(err, SL_ENOMEM, "out of memory for replica %u", r);
    }
    for (uint32_t r = 1; rc == 0 && r < R; r++) {
        if (pthread_create(&l->reps[r].thread, NULL, replica_main, &l->reps[r]) != 0)
            rc = sl_error_set(err, SL_EIO, "cannot start the thread of replica %u", r);
        else
            l->reps[r].started = 1;
    }
    if (rc != 0) {
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
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (l->group != NULL)
        train_local_group_abort(l->group, SL_ECLOSED, "training loop closed");
    for (uint32_t r = 0; l->reps != NULL && r < l->nreplicas; r++) {
        struct replica *p = &l->reps[r];
        if (p->started)
            pthread_join(p->thread, NULL);
        train_model_destroy(p->model);
        sl_free(p->buf);
        sl_free(p->x);
        sl_free(p->labels);
    }
    train_local_group_destroy(l->group);
    sl_free(l->reps);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    sl_free(l);
}

int train_loop_step(struct train_loop *l, const struct train_piece *pieces, uint32_t replicas,
                    struct train_step_result *res, struct sl_error *err)
{
    memset(res, 0, sizeof *res);
    if (replicas != l->nreplicas)
        return sl_error_set(err, SL_EINVAL, "step of %u pieces for a loop of %u replicas", replicas, l->nreplicas);
    /* 1. the global row count */
    float total = 0;
    for (uint32_t r = 0; r < replicas; r++)
        total += (float)pieces[r].rows;
    if (l->ring != NULL) {
        int rc = train_ring_all_reduce(l->ring, &total, 1, TRAIN_RING_SUM, err);
        if (rc != 0)
            return rc;
    }
    /* 2-3 on every replica */
    pthread_mutex_lock(&l->mu);
    l->pieces = pieces;
    l->total = total;
    l->reduced = 0;
    l->finished = 0;
    l->gen++;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    struct replica *r0 = &l->reps[0];
    int rc = replica_reduce(r0, pieces, total, err);
    /* 4. across workers */
    if (rc == 0 && l->ring != NULL)
        rc = train_ring_all_reduce(l->ring, r0->buf, l->nparams + 2, TRAIN_RING_SUM, err);
    /* 5. the same step everywhere (the others read r0->buf after `reduced`) */
    pthread_mutex_lock(&l->mu);
    l->reduced = rc == 0 ? 1 : -1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (rc == 0 && total > 0)
        rc = train_model_sgd_step(r0->model, r0->buf, err);
    pthread_mutex_lock(&l->mu);
    while (l->finished < l->nreplicas - 1)
        pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
    for (uint32_t r = 1; rc == 0 && r < l->nreplicas; r++)
        if (l->reps[r].rc != 0) {
            *err = l->reps[r].err;
            rc = l->reps[r].rc;
        }
    if (rc != 0)
        return rc;
    res->rows = (uint64_t)total;
    if (total > 0) {
        res->loss = r0->buf[l->nparams] / total;
        res->accuracy = r0->buf[l->nparams + 1] / total;
    }
    return 0;
}

int train_loop_check_mirrored(struct train_loop *l, struct sl_error *err)
{
    uint64_t h0 = train_hash64(train_model_params(l->reps[0].model), l->nparams * sizeof(float));
    for (uint32_t r = 1; r < l->nreplicas; r++)
        if (train_hash64(train_model_params(l->reps[r].model), l->nparams * sizeof(float)) != h0)
            return sl_error_set(err, SL_ECORRUPT, "mirrored weights diverged: replica %u differs from replica 0", r);
    return 0;
}

int train_loop_eval_step(struct train_loop *l, const struct train_piece *pieces, uint32_t replicas, double *rows,
                         double *correct, struct sl_error *err)
{
    struct replica *r0 = &l->reps[0];
    for (uint32_t r = 0; r < replicas; r++) {
        const struct train_piece *p = &pieces[r];
        if (p->rows == 0)
            continue;
        if (p->rows > l->max_rows)
            return sl_error_set(err, SL_EPROTO, "piece of %u rows exceeds the announced batch %zu", p->rows,
                                l->max_rows);
        const struct train_tensor *ti = &p->t[l->input_idx], *tl = &p->t[l->label_idx];
        size_t nvals = (size_t)p->rows * (size_t)l->inputs;
        if (l->input_u8)
            train_model_inputs_from_u8(ti->data, nvals, r0->x);
        else
            memcpy(r0->x, ti->data, nvals * sizeof(float));
        memcpy(r0->labels, tl->data, (size_t)p->rows * sizeof *r0->labels);
        int64_t pred[256]; /* predictions, a chunk at a time */
        for (uint32_t done = 0; done < p->rows;) {
            uint32_t k = p->rows - done < 256 ? p->rows - done : 256;
            int rc = train_model_predict(r0->model, r0->x + (size_t)done * (size_t)l->inputs, k, pred, err);
            if (rc != 0)
                return rc;
            for (uint32_t i = 0; i < k; i++)
                *correct += pred[i] == r0->labels[done + i];
            done += k;
        }
        *rows += p->rows;
    }
    return 0;
}

int train_loop_sum(struct train_loop *l, float *v, size_t n, struct sl_error *err)
{
    return l->ring != NULL ? train_ring_all_reduce(l->ring, v, n, TRAIN_RING_SUM, err) : 0;
}

uint64_t train_loop_weights_hash(struct train_loop *l)
{
    return train_hash64(train_model_params(l->reps[0].model), l->nparams * sizeof(float));
}

struct train_model *train_loop_model(struct train_loop *l)
{
    return l->reps[0].model;
}
