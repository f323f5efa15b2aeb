/* train_model: dense softmax regression / ReLU MLP, forward + backward +
 * momentum SGD on the CPU (see train_model.h for the contract and rules).
 *
 * Design: rows are processed in chunks of at most max_rows. For a chunk of
 * n rows, the scratch holds every layer's output for those rows (n x d[l],
 * l = 1..L). A layer's forward pass loops input i outermost, then row r,
 * then output o, so one weight row W[i][*] is reused across the chunk while
 * it is hot and the innermost loop is contiguous in both W and z. The
 * backward pass walks the layers down, reusing each activation buffer in
 * place for its delta (a ReLU's mask only needs the activation element it
 * overwrites, and the activation is no longer needed once the layer above
 * has accumulated its weight gradient). Every sum has a fixed order: z
 * starts from the bias and adds inputs in index order; gradients receive
 * per-row terms in row order, straight into the gradient array; the input
 * delta sums outputs in index order. Nothing allocates after create.
 */
#include "train_model.h"

#include <math.h>
#include <string.h>

#include "sl_alloc.h"

struct train_model {
    struct train_model_config cfg;
    int nlayers;                             /* L = nhidden + 1 */
    size_t dims[TRAIN_MODEL_MAX_HIDDEN + 2]; /* d[0..L] */
    size_t woff[TRAIN_MODEL_MAX_HIDDEN + 1]; /* offset of W_{l+1} in params */
    size_t boff[TRAIN_MODEL_MAX_HIDDEN + 1]; /* offset of b_{l+1} in params */
    size_t nparams;
    float *params;
    float *grads;
    float *velocity;
    float *acts[TRAIN_MODEL_MAX_HIDDEN + 1]; /* acts[l-1]: layer l output, max_rows x d[l] */
    float *scratch;
};

static uint64_t splitmix64_next(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* a + b into *sum unless it overflows size_t. */
static int add_ok(size_t a, size_t b, size_t *sum)
{
    if (a > SIZE_MAX - b)
        return 0;
    *sum = a + b;
    return 1;
}

static int mul_ok(size_t a, size_t b, size_t *prod)
{
    if (b != 0 && a > SIZE_MAX / b)
        return 0;
    *prod = a * b;
    return 1;
}

static int check_config(const struct train_model_config *cfg, struct sl_error *err)
{
    if (cfg->inputs < 1 || cfg->inputs > TRAIN_MODEL_MAX_WIDTH)
        return sl_error_set(err, SL_EINVAL, "train_model: inputs out of range (expected 1..%d, got %d)",
                            TRAIN_MODEL_MAX_WIDTH, cfg->inputs);
    if (cfg->classes < 2 || cfg->classes > TRAIN_MODEL_MAX_WIDTH)
        return sl_error_set(err, SL_EINVAL, "train_model: classes out of range (expected 2..%d, got %d)",
                            TRAIN_MODEL_MAX_WIDTH, cfg->classes);
    if (cfg->nhidden < 0 || cfg->nhidden > TRAIN_MODEL_MAX_HIDDEN)
        return sl_error_set(err, SL_EINVAL, "train_model: nhidden out of range (expected 0..%d, got %d)",
                            TRAIN_MODEL_MAX_HIDDEN, cfg->nhidden);
    for (int h = 0; h < cfg->nhidden; h++) {
        if (cfg->hidden[h] < 1 || cfg->hidden[h] > TRAIN_MODEL_MAX_WIDTH)
            return sl_error_set(err, SL_EINVAL, "train_model: hidden[%d] out of range (expected 1..%d, got %d)", h,
                                TRAIN_MODEL_MAX_WIDTH, cfg->hidden[h]);
    }
    if (!isfinite(cfg->lr) || cfg->lr < 0.0f)
        return sl_error_set(err, SL_EINVAL, "train_model: lr must be a finite value > 0 (got %g)", (double)cfg->lr);
    if (!(cfg->momentum >= 0.0f && cfg->momentum < 1.0f))
        return sl_error_set(err, SL_EINVAL, "train_model: momentum out of range (expected 0 <= m < 1, got %g)",
                            (double)cfg->momentum);
    if (cfg->max_rows > TRAIN_MODEL_MAX_ROWS)
        return sl_error_set(err, SL_EINVAL, "train_model: max_rows out of range (expected 0..%d, got %zu)",
                            TRAIN_MODEL_MAX_ROWS, cfg->max_rows);
    return 0;
}

/* Lay out the parameter array and size the scratch; 0 or SL_EINVAL when a
 * size overflows. */
static int plan_layout(struct train_model *m, size_t *scratch_floats, struct sl_error *err)
{
    const struct train_model_config *cfg = &m->cfg;
    size_t total = 0, per_row = 0;

    m->nlayers = cfg->nhidden + 1;
    m->dims[0] = (size_t)cfg->inputs;
    for (int h = 0; h < cfg->nhidden; h++)
        m->dims[h + 1] = (size_t)cfg->hidden[h];
    m->dims[m->nlayers] = (size_t)cfg->classes;

    for (int l = 0; l < m->nlayers; l++) {
        size_t w;
        if (!mul_ok(m->dims[l], m->dims[l + 1], &w))
            goto out_too_big;
        m->woff[l] = total;
        if (!add_ok(total, w, &total))
            goto out_too_big;
        m->boff[l] = total;
        if (!add_ok(total, m->dims[l + 1], &total))
            goto out_too_big;
        if (!add_ok(per_row, m->dims[l + 1], &per_row))
            goto out_too_big;
    }
    if (total > SIZE_MAX / sizeof(float) / 3)
        goto out_too_big;
    if (!mul_ok(per_row, cfg->max_rows, scratch_floats) || *scratch_floats > SIZE_MAX / sizeof(float))
        goto out_too_big;
    m->nparams = total;
    return 0;

out_too_big:
    return sl_error_set(err, SL_EINVAL, "train_model: model too large for this machine");
}

static void init_params(struct train_model *m)
{
    uint64_t state = m->cfg.seed;

    memset(m->params, 0, m->nparams * sizeof(float));
    for (int l = 0; l < m->nlayers; l++) {
        double fan_in = (double)m->dims[l], fan_out = (double)m->dims[l + 1];
        double limit = (l + 1 < m->nlayers) ? sqrt(6.0 / fan_in) : sqrt(6.0 / (fan_in + fan_out));
        float *w = m->params + m->woff[l];
        size_t n = m->dims[l] * m->dims[l + 1];
        for (size_t k = 0; k < n; k++) {
            double u = (double)(splitmix64_next(&state) >> 40) * (1.0 / 16777216.0);
            w[k] = (float)(limit * (2.0 * u - 1.0));
        }
    }
}

int train_model_create(struct train_model **out, const struct train_model_config *cfg, struct sl_error *err)
{
    struct train_model *m;
    size_t scratch_floats = 0;
    int rc;

    if (out == NULL || cfg == NULL)
        return sl_error_set(err, SL_EINVAL, "train_model_create: NULL argument");
    *out = NULL;
    rc = check_config(cfg, err);
    if (rc != 0)
        return rc;
    m = sl_calloc(1, sizeof *m);
    if (m == NULL)
        return sl_error_set(err, SL_ENOMEM, "train_model_create: out of memory");
    m->cfg = *cfg;
    if (m->cfg.lr == 0.0f)
        m->cfg.lr = TRAIN_MODEL_DEFAULT_LR;
    if (m->cfg.max_rows == 0)
        m->cfg.max_rows = TRAIN_MODEL_DEFAULT_MAX_ROWS;
    rc = plan_layout(m, &scratch_floats, err);
    if (rc != 0)
        goto out_free_model;

    /* params, grads and velocity in one block; scratch in another. */
    m->params = sl_calloc(3 * m->nparams, sizeof(float));
    if (m->params == NULL)
        goto out_nomem;
    m->grads = m->params + m->nparams;
    m->velocity = m->grads + m->nparams;
    m->scratch = sl_malloc(scratch_floats * sizeof(float));
    if (m->scratch == NULL)
        goto out_free_params;
    {
        float *p = m->scratch;
        for (int l = 0; l < m->nlayers; l++) {
            m->acts[l] = p;
            p += m->cfg.max_rows * m->dims[l + 1];
        }
    }
    init_params(m);
    *out = m;
    return 0;

out_free_params:
    sl_free(m->params);
out_nomem:
    rc = sl_error_set(err, SL_ENOMEM, "train_model_create: out of memory (%zu parameters)", m->nparams);
out_free_model:
    sl_free(m);
    return rc;
}

void train_model_destroy(struct train_model *m)
{
    if (m == NULL)
        return;
    sl_free(m->scratch);
    sl_free(m->params);
    sl_free(m);
}

size_t train_model_nparams(const struct train_model *m)
{
    return m->nparams;
}

float *train_model_params(struct train_model *m)
{
    return m->params;
}

float *train_model_grads(struct train_model *m)
{
    return m->grads;
}

float *train_model_velocity(struct train_model *m)
{
    return m->velocity;
}

void train_model_zero_grads(struct train_model *m)
{
    memset(m->grads, 0, m->nparams * sizeof(float));
}

/* Forward layer l (0-based) over n rows: out = in W + b, ReLU unless last. */
static void layer_forward(const struct train_model *m, int l, const float *in, size_t n, float *out)
{
    size_t din = m->dims[l], dout = m->dims[l + 1];
    const float *w = m->params + m->woff[l];
    const float *b = m->params + m->boff[l];

    for (size_t r = 0; r < n; r++)
        memcpy(out + r * dout, b, dout * sizeof(float));
    for (size_t i = 0; i < din; i++) {
        const float *wi = w + i * dout;
        for (size_t r = 0; r < n; r++) {
            float a = in[r * din + i];
            float *z = out + r * dout;
            /* Zero inputs (ReLU outputs, blank pixels) add nothing. */
            if (a == 0.0f)
                continue;
            for (size_t o = 0; o < dout; o++)
                z[o] += a * wi[o];
        }
    }
    if (l + 1 < m->nlayers) {
        size_t total = n * dout;
        for (size_t k = 0; k < total; k++)
            out[k] = out[k] > 0.0f ? out[k] : 0.0f;
    }
}

/* Forward every layer of n rows of x; returns the logits (n x classes). */
static float *forward(struct train_model *m, const float *x, size_t n)
{
    const float *in = x;
    for (int l = 0; l < m->nlayers; l++) {
        layer_forward(m, l, in, n, m->acts[l]);
        in = m->acts[l];
    }
    return m->acts[m->nlayers - 1];
}

static size_t argmax(const float *z, size_t n)
{
    size_t best = 0;
    for (size_t k = 1; k < n; k++) {
        if (z[k] > z[best])
            best = k;
    }
    return best;
}

/* Backward layer l (0-based): dz (n x dout) is this layer's delta, in its
 * (n x din) input activations. Accumulates dW, db; when delta_out is not
 * NULL (layers above the first) writes the lower layer's delta there, which
 * may be `in` itself: each element is read (for the ReLU mask) just before
 * it is overwritten, after the weight gradient no longer needs it. */
static void layer_backward(struct train_model *m, int l, const float *in, const float *dz, size_t n, float *delta_out)
{
    size_t din = m->dims[l], dout = m->dims[l + 1];
    const float *w = m->params + m->woff[l];
    float *gw = m->grads + m->woff[l];
    float *gb = m->grads + m->boff[l];

    for (size_t i = 0; i < din; i++) {
        float *gwi = gw + i * dout;
        for (size_t r = 0; r < n; r++) {
            float a = in[r * din + i];
            const float *d = dz + r * dout;
            if (a == 0.0f)
                continue;
            for (size_t o = 0; o < dout; o++)
                gwi[o] += a * d[o];
        }
    }
    for (size_t r = 0; r < n; r++) {
        const float *d = dz + r * dout;
        for (size_t o = 0; o < dout; o++)
            gb[o] += d[o];
    }
    if (delta_out == NULL)
        return;
    for (size_t r = 0; r < n; r++) {
        const float *d = dz + r * dout;
        const float *a = in + r * din;
        float *da = delta_out + r * din;
        for (size_t i = 0; i < din; i++) {
            const float *wi = w + i * dout;
            float s = 0.0f;
            /* ReLU passes the delta only where its output was positive. */
            if (!(a[i] > 0.0f)) {
                da[i] = 0.0f;
                continue;
            }
            for (size_t o = 0; o < dout; o++)
                s += wi[o] * d[o];
            da[i] = s;
        }
    }
}

/* Softmax cross-entropy over n rows of logits, in place: z becomes the
 * delta (p - onehot) / global_rows. Adds to *loss and *correct. */
static void softmax_xent(float *z, const int64_t *labels, size_t n, size_t classes, double global_rows, double *loss,
                         size_t *correct)
{
    for (size_t r = 0; r < n; r++) {
        float *zr = z + r * classes;
        size_t label = (size_t)labels[r];
        size_t best = argmax(zr, classes);
        float zmax = zr[best];
        double sum = 0.0;

        if (best == label)
            (*correct)++;
        /* loss = log(sum_k exp(z_k - max)) - (z_label - max); subtracting
         * the max keeps every exponent <= 0, so nothing overflows. */
        *loss -= (double)zr[label] - (double)zmax;
        for (size_t k = 0; k < classes; k++) {
            zr[k] = expf(zr[k] - zmax);
            sum += (double)zr[k];
        }
        *loss += log(sum);
        for (size_t k = 0; k < classes; k++) {
            double p = (double)zr[k] / sum;
            zr[k] = (float)((p - (k == label ? 1.0 : 0.0)) / global_rows);
        }
    }
}

int train_model_forward_backward(struct train_model *m, const float *x, const int64_t *labels, size_t rows,
                                 double global_rows, float *loss_sum_out, size_t *correct_out, struct sl_error *err)
{
    size_t din = m->dims[0], classes = m->dims[m->nlayers];
    double loss = 0.0;
    size_t correct = 0;

    if (loss_sum_out != NULL)
        *loss_sum_out = 0.0f;
    if (correct_out != NULL)
        *correct_out = 0;
    if (!isfinite(global_rows) || global_rows < (double)rows || (rows > 0 && !(global_rows > 0.0)))
        return sl_error_set(err, SL_EINVAL,
                            "train_model: global_rows out of range (expected a finite value >= rows = %zu, got %g)",
                            rows, global_rows);
    if (rows == 0)
        return 0;
    if (x == NULL || labels == NULL)
        return sl_error_set(err, SL_EINVAL, "train_model: NULL x or labels with %zu rows", rows);
    /* Check every label first so an error leaves the gradients untouched. */
    for (size_t r = 0; r < rows; r++) {
        if (labels[r] < 0 || labels[r] >= (int64_t)classes)
            return sl_error_set(err, SL_EINVAL, "row %zu: label out of range (expected 0 <= label < %zu, got %lld)", r,
                                classes, (long long)labels[r]);
    }

    for (size_t start = 0; start < rows; start += m->cfg.max_rows) {
        size_t n = rows - start < m->cfg.max_rows ? rows - start : m->cfg.max_rows;
        const float *xc = x + start * din;
        float *dz = forward(m, xc, n);

        softmax_xent(dz, labels + start, n, classes, global_rows, &loss, &correct);
        for (int l = m->nlayers - 1; l > 0; l--) {
            /* The layer below's activations become its delta in place. */
            layer_backward(m, l, m->acts[l - 1], dz, n, m->acts[l - 1]);
            dz = m->acts[l - 1];
        }
        layer_backward(m, 0, xc, dz, n, NULL);
    }
    if (loss_sum_out != NULL)
        *loss_sum_out = (float)loss;
    if (correct_out != NULL)
        *correct_out = correct;
    return 0;
}

void train_sgd_apply(float *p, float *v, const float *g, size_t n, float lr, float momentum)
{
    for (size_t k = 0; k < n; k++) {
        v[k] = momentum * v[k] - lr * g[k];
        p[k] = p[k] + v[k];
    }
}

int train_model_sgd_step(struct train_model *m, const float *grads, struct sl_error *err)
{
    if (grads == NULL)
        return sl_error_set(err, SL_EINVAL, "train_model_sgd_step: NULL gradient");
    train_sgd_apply(m->params, m->velocity, grads, m->nparams, m->cfg.lr, m->cfg.momentum);
    return 0;
}

size_t train_model_variables(const struct train_model *m, struct train_model_var *out, size_t max)
{
    size_t n = 0;
    for (int l = 0; l < m->nlayers; l++) {
        if (n < max)
            out[n] = (struct train_model_var){
                .kind = 'W', .layer = l + 1, .offset = m->woff[l], .count = m->dims[l] * m->dims[l + 1]};
        n++;
        if (n < max)
            out[n] =
                (struct train_model_var){.kind = 'b', .layer = l + 1, .offset = m->boff[l], .count = m->dims[l + 1]};
        n++;
    }
    return n;
}

int train_model_predict(struct train_model *m, const float *x, size_t rows, int64_t *pred_out, struct sl_error *err)
{
    size_t din = m->dims[0], classes = m->dims[m->nlayers];

    if (rows == 0)
        return 0;
    if (x == NULL || pred_out == NULL)
        return sl_error_set(err, SL_EINVAL, "train_model_predict: NULL x or pred_out with %zu rows", rows);
    for (size_t start = 0; start < rows; start += m->cfg.max_rows) {
        size_t n = rows - start < m->cfg.max_rows ? rows - start : m->cfg.max_rows;
        const float *z = forward(m, x + start * din, n);
        for (size_t r = 0; r < n; r++)
            pred_out[start + r] = (int64_t)argmax(z + r * classes, classes);
    }
    return 0;
}

void train_model_inputs_from_u8(const uint8_t *in, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = (float)in[i] / 255.0f;
}
