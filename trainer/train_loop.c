/* train_loop: see train_loop.h. A step makes two ring calls: one float
 * (the global row count, needed to scale the gradients), then the gradient
 * array with two trailing floats (loss sum, correct count). Counts are
 * exact in float32 up to 2^24 rows per step. */
#include "train_loop.h"

#include <string.h>

#include "sl_alloc.h"
#include "train_mirror.h"

struct train_loop {
    struct train_model *model;
    size_t nparams;
    float *buf;      /* nparams + 2: the reduced gradient, loss sum, correct */
    float *x;        /* max_rows x inputs scratch */
    int64_t *labels; /* max_rows: received frames carry no alignment guarantee */
    int inputs, input_idx, label_idx, input_u8;
    size_t max_rows;
    struct train_ring *ring; /* borrowed; NULL for one worker */
};

static int find_tensor(const struct sl_wire_welcome *w, const char *name)
{
    for (size_t i = 0; i < w->ntensors; i++)
        if (w->fields[i].name_len == strlen(name) && memcmp(w->fields[i].name, name, w->fields[i].name_len) == 0)
            return (int)i;
    return -1;
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
    struct train_loop *l = sl_calloc(1, sizeof *l);
    if (l == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    l->inputs = (int)fi->dims[0];
    l->input_idx = in;
    l->label_idx = lb;
    l->input_u8 = fi->dtype == SL_WIRE_UINT8;
    l->max_rows = w->batch ? w->batch : 256;
    struct train_model_config mc = o->model;
    mc.inputs = l->inputs;
    mc.max_rows = l->max_rows;
    int rc = train_model_create(&l->model, &mc, err);
    if (rc == 0) {
        l->nparams = train_model_nparams(l->model);
        l->buf = sl_malloc((l->nparams + 2) * sizeof *l->buf);
        l->x = sl_malloc(l->max_rows * (size_t)l->inputs * sizeof *l->x);
        l->labels = sl_malloc(l->max_rows * sizeof *l->labels);
        if (l->buf == NULL || l->x == NULL || l->labels == NULL)
            rc = sl_error_set(err, SL_ENOMEM, "out of memory for the gradients");
    }
    if (rc != 0) {
        train_loop_destroy(l);
        return rc;
    }
    l->ring = o->ring;
    *out = l;
    return 0;
}

void train_loop_destroy(struct train_loop *l)
{
    if (l == NULL)
        return;
    train_model_destroy(l->model);
    sl_free(l->buf);
    sl_free(l->x);
    sl_free(l->labels);
    sl_free(l);
}

int train_loop_step(struct train_loop *l, const struct train_piece *pieces, uint32_t replicas,
                    struct train_step_result *res, struct sl_error *err)
{
    memset(res, 0, sizeof *res);
    /* the global batch's real row count first (one float round the ring),
     * so every replica's gradient is scaled by it exactly once */
    float total = 0;
    for (uint32_t r = 0; r < replicas; r++)
        total += (float)pieces[r].rows;
    if (l->ring != NULL) {
        int rc = train_ring_all_reduce(l->ring, &total, 1, TRAIN_RING_SUM, err);
        if (rc != 0)
            return rc;
    }
    train_model_zero_grads(l->model);
    double loss = 0, correct = 0;
    for (uint32_t r = 0; r < replicas; r++) {
        const struct train_piece *p = &pieces[r];
        if (p->rows == 0)
            continue; /* an empty piece adds nothing */
        if (p->rows > l->max_rows)
            return sl_error_set(err, SL_EPROTO, "piece of %u rows exceeds the announced batch %zu", p->rows,
                                l->max_rows);
        const struct train_tensor *ti = &p->t[l->input_idx], *tl = &p->t[l->label_idx];
        size_t nvals = (size_t)p->rows * (size_t)l->inputs;
        if (l->input_u8)
            train_model_inputs_from_u8(ti->data, nvals, l->x);
        else
            memcpy(l->x, ti->data, nvals * sizeof(float));
        memcpy(l->labels, tl->data, (size_t)p->rows * sizeof *l->labels);
        float loss_sum = 0;
        size_t ok = 0;
        int rc = train_model_forward_backward(l->model, l->x, l->labels, p->rows, (double)total, &loss_sum, &ok, err);
        if (rc != 0)
            return sl_error_prefix(err, "replica %u step %llu: ", r, (unsigned long long)p->step);
        loss += loss_sum;
        correct += (double)ok;
    }
    float *g = train_model_grads(l->model);
    memcpy(l->buf, g, l->nparams * sizeof *g);
    l->buf[l->nparams] = (float)loss;
    l->buf[l->nparams + 1] = (float)correct;
    if (l->ring != NULL) {
        int rc = train_ring_all_reduce(l->ring, l->buf, l->nparams + 2, TRAIN_RING_SUM, err);
        if (rc != 0)
            return rc;
    }
    res->rows = (uint64_t)total;
    if (total <= 0)
        return 0; /* a step of empty pieces only: nothing to learn */
    res->loss = l->buf[l->nparams] / total;
    res->accuracy = l->buf[l->nparams + 1] / total;
    return train_model_sgd_step(l->model, l->buf, err);
}

int train_loop_eval_step(struct train_loop *l, const struct train_piece *pieces, uint32_t replicas, double *rows,
                         double *correct, struct sl_error *err)
{
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
            train_model_inputs_from_u8(ti->data, nvals, l->x);
        else
            memcpy(l->x, ti->data, nvals * sizeof(float));
        memcpy(l->labels, tl->data, (size_t)p->rows * sizeof *l->labels);
        int64_t pred[256]; /* predictions, a chunk at a time */
        for (uint32_t done = 0; done < p->rows;) {
            uint32_t k = p->rows - done < 256 ? p->rows - done : 256;
            int rc = train_model_predict(l->model, l->x + (size_t)done * (size_t)l->inputs, k, pred, err);
            if (rc != 0)
                return rc;
            for (uint32_t i = 0; i < k; i++)
                *correct += pred[i] == l->labels[done + i];
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
    return train_hash64(train_model_params(l->model), l->nparams * sizeof(float));
}

struct train_model *train_loop_model(struct train_loop *l)
{
    return l->model;
}
