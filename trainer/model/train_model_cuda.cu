/* train_model_cuda: the built-in models' step as CUDA kernels.
 *
 * One kernel per stage of the CPU model's step, each output element owned
 * by one thread that sums in the CPU order, so the result is deterministic
 * and close to the CPU's (no atomics, no cuBLAS: these models are small,
 * and a hand-written loop keeps the summation order ours). Rows go through
 * in chunks of max_rows, as on the CPU, so the scratch is the CPU model's
 * size:
 *   forward:  z[r][o] = b[o] + sum_i a[r][i] W[i][o], ReLU below the top
 *   softmax:  one thread per row: argmax, loss (double), delta
 *             (p - onehot) / global_rows in place of the logits
 *   backward: gW[i][o] += sum_r a[r][i] d[r][o] (rows in order),
 *             gb[o] += sum_r d[r][o], and the lower delta
 *             da[r][i] = a[r][i] > 0 ? sum_o W[i][o] d[r][o] : 0, written in
 *             place of the activations once the weight gradient is queued
 *   sgd:      v = momentum v - lr g; p = p + v
 * Built with --fmad=false so products and sums round as the CPU's do.
 *
 * Loss, correct count and the first bad label live in a small device
 * struct read by take_stats; per-row losses are summed in row order by a
 * one-thread kernel, keeping the total deterministic.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "train_model_cuda.h"

extern "C" {
#include "sl_alloc.h"
}

#define THREADS 256

struct stats {
    double loss; /* summed loss since the last take */
    unsigned long long correct;
    unsigned long long bad_row; /* first row with a bad label, ~0: none */
};

struct train_model_cuda {
    struct train_model_config cfg;
    int ordinal;
    int nlayers;
    size_t dims[TRAIN_MODEL_MAX_HIDDEN + 2];
    size_t woff[TRAIN_MODEL_MAX_HIDDEN + 1], boff[TRAIN_MODEL_MAX_HIDDEN + 1];
    size_t nparams;
    cudaStream_t stream;
    float *params, *grads, *velocity;        /* device, nparams each, one block */
    float *acts[TRAIN_MODEL_MAX_HIDDEN + 1]; /* device, max_rows x dims[l+1] */
    double *row_loss;                        /* device, max_rows */
    unsigned char *row_correct;              /* device, max_rows */
    struct stats *stats;                     /* device */
    unsigned long long rows_seen;            /* rows since the last take */
};

static int cuda_fail(struct sl_error *err, cudaError_t e, const char *what, int ordinal)
{
    (void)cudaGetLastError();
    return sl_error_set(err, SL_EDEVICE, "%s on GPU %d: %s", what, ordinal, cudaGetErrorString(e));
}

/* the launch just queued */
static int launched(struct train_model_cuda *m, const char *what, struct sl_error *err)
{
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? 0 : cuda_fail(err, e, what, m->ordinal);
}

static unsigned blocks(size_t n)
{
    return (unsigned)((n + THREADS - 1) / THREADS);
}

__global__ void k_layer_forward(const float *in, size_t n, size_t din, size_t dout, const float *w, const float *b,
                                int relu, float *out)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * dout)
        return;
    size_t r = t / dout, o = t % dout;
    float z = b[o];
    const float *a = in + r * din;
    for (size_t i = 0; i < din; i++) {
        float v = a[i];
        if (v == 0.0f) /* as the CPU: zero inputs add nothing */
            continue;
        z = __fadd_rn(z, __fmul_rn(v, w[i * dout + o]));
    }
    out[t] = relu ? (z > 0.0f ? z : 0.0f) : z;
}

__global__ void k_softmax_xent(float *z, const int64_t *labels, size_t n, size_t classes, double global_rows,
                               unsigned long long row0, double *row_loss, unsigned char *row_correct, struct stats *st)
{
    size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n)
        return;
    float *zr = z + r * classes;
    int64_t lab = labels[r];
    if (lab < 0 || lab >= (int64_t)classes) {
        atomicMin(&st->bad_row, row0 + r); /* a flag, not a sum: order does not matter */
        row_loss[r] = 0.0;
        row_correct[r] = 0;
        for (size_t k = 0; k < classes; k++)
            zr[k] = 0.0f;
        return;
    }
    size_t label = (size_t)lab, best = 0;
    for (size_t k = 1; k < classes; k++)
        if (zr[k] > zr[best])
            best = k;
    float zmax = zr[best];
    double sum = 0.0, loss = -((double)zr[label] - (double)zmax);
    for (size_t k = 0; k < classes; k++) {
        zr[k] = expf(zr[k] - zmax);
        sum += (double)zr[k];
    }
    loss += log(sum);
    for (size_t k = 0; k < classes; k++) {
        double p = (double)zr[k] / sum;
        zr[k] = (float)((p - (k == label ? 1.0 : 0.0)) / global_rows);
    }
    row_loss[r] = loss;
    row_correct[r] = best == label;
}

/* one thread: the rows' losses and hits in row order */
__global__ void k_sum_stats(const double *row_loss, const unsigned char *row_correct, size_t n, struct stats *st)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    double loss = 0.0;
    unsigned long long correct = 0;
    for (size_t r = 0; r < n; r++) {
        loss += row_loss[r];
        correct += row_correct[r];
    }
    st->loss += loss;
    st->correct += correct;
}

__global__ void k_grad_w(const float *in, const float *dz, size_t n, size_t din, size_t dout, float *gw)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= din * dout)
        return;
    size_t i = t / dout, o = t % dout;
    float g = gw[t];
    for (size_t r = 0; r < n; r++) {
        float a = in[r * din + i];
        if (a == 0.0f)
            continue;
        g = __fadd_rn(g, __fmul_rn(a, dz[r * dout + o]));
    }
    gw[t] = g;
}

__global__ void k_grad_b(const float *dz, size_t n, size_t dout, float *gb)
{
    size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= dout)
        return;
    float g = gb[o];
    for (size_t r = 0; r < n; r++)
        g = __fadd_rn(g, dz[r * dout + o]);
    gb[o] = g;
}

/* in place: a (n x din) becomes the lower layer's delta */
__global__ void k_delta(float *a, const float *dz, size_t n, size_t din, size_t dout, const float *w)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * din)
        return;
    size_t r = t / din, i = t % din;
    if (!(a[t] > 0.0f)) {
        a[t] = 0.0f;
        return;
    }
    const float *d = dz + r * dout, *wi = w + i * dout;
    float s = 0.0f;
    for (size_t o = 0; o < dout; o++)
        s = __fadd_rn(s, __fmul_rn(wi[o], d[o]));
    a[t] = s;
}

__global__ void k_sgd(float *p, float *v, const float *g, size_t n, float lr, float mom)
{
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n)
        return;
    float vk = __fsub_rn(__fmul_rn(mom, v[k]), __fmul_rn(lr, g[k]));
    v[k] = vk;
    p[k] = __fadd_rn(p[k], vk);
}

__global__ void k_argmax(const float *z, size_t n, size_t classes, int64_t *pred)
{
    size_t r = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= n)
        return;
    const float *zr = z + r * classes;
    size_t best = 0;
    for (size_t k = 1; k < classes; k++)
        if (zr[k] > zr[best])
            best = k;
    pred[r] = (int64_t)best;
}

__global__ void k_from_u8(const uint8_t *in, size_t n, float *out)
{
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n)
        out[t] = __fdiv_rn((float)in[t], 255.0f);
}

static int set_device(struct train_model_cuda *m, struct sl_error *err)
{
    cudaError_t e = cudaSetDevice(m->ordinal);
    return e == cudaSuccess ? 0 : cuda_fail(err, e, "cudaSetDevice", m->ordinal);
}

static int reset_stats(struct train_model_cuda *m, struct sl_error *err)
{
    struct stats zero;
    zero.loss = 0.0;
    zero.correct = 0;
    zero.bad_row = ~0ULL;
    cudaError_t e = cudaMemcpyAsync(m->stats, &zero, sizeof zero, cudaMemcpyHostToDevice, m->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(m->stream); /* `zero` lives on our stack */
    m->rows_seen = 0;
    return e == cudaSuccess ? 0 : cuda_fail(err, e, "cudaMemcpyAsync(stats)", m->ordinal);
}

extern "C" int train_model_cuda_create(struct train_model_cuda **out, const struct train_model_config *cfg, int ordinal,
                                       struct sl_error *err)
{
    struct train_model *cpu = NULL;
    struct train_model_cuda *m;
    cudaError_t e;
    int rc;

    *out = NULL;
    if ((rc = train_model_create(&cpu, cfg, err)) != 0)
        return rc;
    if ((m = (struct train_model_cuda *)sl_calloc(1, sizeof *m)) == NULL) {
        train_model_destroy(cpu);
        return sl_error_set(err, SL_ENOMEM, "train_model_cuda: out of memory");
    }
    m->cfg = *cfg;
    if (m->cfg.lr == 0.0f)
        m->cfg.lr = TRAIN_MODEL_DEFAULT_LR;
    if (m->cfg.max_rows == 0)
        m->cfg.max_rows = TRAIN_MODEL_DEFAULT_MAX_ROWS;
    m->ordinal = ordinal;
    /* the layout of train_model.h: W_l [d_l][d_l+1] then b_l, layer by layer */
    m->nlayers = cfg->nhidden + 1;
    m->dims[0] = (size_t)cfg->inputs;
    for (int h = 0; h < cfg->nhidden; h++)
        m->dims[h + 1] = (size_t)cfg->hidden[h];
    m->dims[m->nlayers] = (size_t)cfg->classes;
    size_t total = 0;
    for (int l = 0; l < m->nlayers; l++) {
        m->woff[l] = total;
        total += m->dims[l] * m->dims[l + 1];
        m->boff[l] = total;
        total += m->dims[l + 1];
    }
    m->nparams = total;
    if (total != train_model_nparams(cpu)) { /* the CPU model checked the sizes */
        train_model_destroy(cpu);
        sl_free(m);
        return sl_error_set(err, SL_EINVAL, "train_model_cuda: layout differs from the CPU model's");
    }
    /* every launch is one thread per element, in one grid of at most
     * 2^31 - 1 blocks: refuse a model whose largest launch would not fit
     * (far beyond realistic sizes, but blocks() would truncate it) */
    size_t widest = total;
    for (int l = 0; l <= m->nlayers; l++)
        if (m->dims[l] > 0 && m->cfg.max_rows > widest / m->dims[l])
            widest = m->cfg.max_rows * m->dims[l];
    if (widest / THREADS >= (size_t)INT32_MAX) {
        train_model_destroy(cpu);
        sl_free(m);
        return sl_error_set(err, SL_EINVAL, "train_model_cuda: %zu elements in one launch exceed a CUDA grid", widest);
    }
    if ((rc = set_device(m, err)) != 0)
        goto out_free;
    if ((e = cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        rc = cuda_fail(err, e, "cudaStreamCreate", ordinal);
        goto out_free;
    }
    if ((e = cudaMalloc((void **)&m->params, 3 * total * sizeof(float))) != cudaSuccess) {
        rc = cuda_fail(err, e, "cudaMalloc(parameters)", ordinal);
        goto out_destroy;
    }
    m->grads = m->params + total;
    m->velocity = m->grads + total;
    for (int l = 0; l < m->nlayers; l++)
        if ((e = cudaMalloc((void **)&m->acts[l], m->cfg.max_rows * m->dims[l + 1] * sizeof(float))) != cudaSuccess) {
            rc = cuda_fail(err, e, "cudaMalloc(activations)", ordinal);
            goto out_destroy;
        }
    if ((e = cudaMalloc((void **)&m->row_loss, m->cfg.max_rows * sizeof(double))) != cudaSuccess ||
        (e = cudaMalloc((void **)&m->row_correct, m->cfg.max_rows)) != cudaSuccess ||
        (e = cudaMalloc((void **)&m->stats, sizeof(struct stats))) != cudaSuccess) {
        rc = cuda_fail(err, e, "cudaMalloc(statistics)", ordinal);
        goto out_destroy;
    }
    /* On our own stream, not the legacy default one: a non-blocking stream
     * does not wait for it, and a pageable cudaMemcpy may return before its
     * DMA lands. reset_stats syncs the stream before `cpu` is freed. */
    if ((e = cudaMemcpyAsync(m->params, train_model_params(cpu), total * sizeof(float), cudaMemcpyHostToDevice,
                             m->stream)) != cudaSuccess ||
        (e = cudaMemsetAsync(m->grads, 0, 2 * total * sizeof(float), m->stream)) != cudaSuccess) {
        rc = cuda_fail(err, e, "cudaMemcpyAsync(initial parameters)", ordinal);
        goto out_destroy;
    }
    if ((rc = reset_stats(m, err)) != 0)
        goto out_destroy;
    train_model_destroy(cpu);
    *out = m;
    return 0;

out_destroy:
    train_model_destroy(cpu);
    train_model_cuda_destroy(m);
    return rc;
out_free:
    train_model_destroy(cpu);
    sl_free(m);
    return rc;
}

extern "C" void train_model_cuda_destroy(struct train_model_cuda *m)
{
    if (m == NULL)
        return;
    (void)cudaSetDevice(m->ordinal);
    if (m->stream != NULL)
        (void)cudaStreamSynchronize(m->stream);
    for (int l = 0; l < m->nlayers; l++)
        (void)cudaFree(m->acts[l]);
    (void)cudaFree(m->row_loss);
    (void)cudaFree(m->row_correct);
    (void)cudaFree(m->stats);
    (void)cudaFree(m->params);
    if (m->stream != NULL)
        (void)cudaStreamDestroy(m->stream);
    (void)cudaGetLastError();
    sl_free(m);
}

extern "C" size_t train_model_cuda_nparams(const struct train_model_cuda *m)
{
    return m->nparams;
}

extern "C" void *train_model_cuda_stream(struct train_model_cuda *m)
{
    return (void *)m->stream;
}

extern "C" float *train_model_cuda_params(struct train_model_cuda *m)
{
    return m->params;
}

extern "C" float *train_model_cuda_grads(struct train_model_cuda *m)
{
    return m->grads;
}

extern "C" int train_model_cuda_get_params(struct train_model_cuda *m, float *host, struct sl_error *err)
{
    int rc = set_device(m, err);
    if (rc != 0)
        return rc;
    cudaError_t e = cudaMemcpyAsync(host, m->params, m->nparams * sizeof(float), cudaMemcpyDeviceToHost, m->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(m->stream);
    return e == cudaSuccess ? 0 : cuda_fail(err, e, "cudaMemcpy(parameters to host)", m->ordinal);
}

extern "C" int train_model_cuda_set_params(struct train_model_cuda *m, const float *host, struct sl_error *err)
{
    int rc = set_device(m, err);
    if (rc != 0)
        return rc;
    cudaError_t e = cudaMemcpyAsync(m->params, host, m->nparams * sizeof(float), cudaMemcpyHostToDevice, m->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(m->stream);
    return e == cudaSuccess ? 0 : cuda_fail(err, e, "cudaMemcpy(parameters to the GPU)", m->ordinal);
}

extern "C" int train_model_cuda_inputs_from_u8(struct train_model_cuda *m, const uint8_t *in_dev, size_t n,
                                               float *out_dev, struct sl_error *err)
{
    if (n == 0)
        return 0;
    if (in_dev == NULL || out_dev == NULL)
        return sl_error_set(err, SL_EINVAL, "train_model_inputs_from_u8: NULL buffer with %zu values", n);
    int rc = set_device(m, err);
    if (rc != 0)
        return rc;
    k_from_u8<<<blocks(n), THREADS, 0, m->stream>>>(in_dev, n, out_dev);
    return launched(m, "uint8 input kernel", err);
}

extern "C" int train_model_cuda_zero_grads(struct train_model_cuda *m, struct sl_error *err)
{
    int rc = set_device(m, err);
    if (rc != 0)
        return rc;
    cudaError_t e = cudaMemsetAsync(m->grads, 0, m->nparams * sizeof(float), m->stream);
    return e == cudaSuccess ? 0 : cuda_fail(err, e, "cudaMemsetAsync(gradients)", m->ordinal);
}

/* Queue the forward pass of n rows; returns the logits (device). */
static float *forward(struct train_model_cuda *m, const float *x, size_t n)
{
    const float *in = x;
    for (int l = 0; l < m->nlayers; l++) {
        size_t din = m->dims[l], dout = m->dims[l + 1];
        k_layer_forward<<<blocks(n * dout), THREADS, 0, m->stream>>>(
            in, n, din, dout, m->params + m->woff[l], m->params + m->boff[l], l + 1 < m->nlayers, m->acts[l]);
        in = m->acts[l];
    }
    return m->acts[m->nlayers - 1];
}

extern "C" int train_model_cuda_forward_backward(struct train_model_cuda *m, const float *x_dev,
                                                 const int64_t *labels_dev, size_t rows, double global_rows,
                                                 struct sl_error *err)
{
    size_t din0 = m->dims[0], classes = m->dims[m->nlayers];
    if (!isfinite(global_rows) || global_rows < (double)rows || (rows > 0 && !(global_rows > 0.0)))
        return sl_error_set(err, SL_EINVAL,
                            "train_model: global_rows out of range (expected a finite value >= rows = %zu, got %g)",
                            rows, global_rows);
    if (rows == 0)
        return 0;
    if (x_dev == NULL || labels_dev == NULL)
        return sl_error_set(err, SL_EINVAL, "train_model: NULL x or labels with %zu rows", rows);
    int rc = set_device(m, err);
    if (rc != 0)
        return rc;
    for (size_t start = 0; start < rows; start += m->cfg.max_rows) {
        size_t n = rows - start < m->cfg.max_rows ? rows - start : m->cfg.max_rows;
        const float *xc = x_dev + start * din0;
        float *dz = forward(m, xc, n);
        k_softmax_xent<<<blocks(n), THREADS, 0, m->stream>>>(dz, labels_dev + start, n, classes, global_rows,
                                                             m->rows_seen + start, m->row_loss, m->row_correct,
                                                             m->stats);
        k_sum_stats<<<1, 1, 0, m->stream>>>(m->row_loss, m->row_correct, n, m->stats);
        for (int l = m->nlayers - 1; l >= 0; l--) {
            size_t din = m->dims[l], dout = m->dims[l + 1];
            const float *in = l > 0 ? m->acts[l - 1] : xc;
            k_grad_w<<<blocks(din * dout), THREADS, 0, m->stream>>>(in, dz, n, din, dout, m->grads + m->woff[l]);
            k_grad_b<<<blocks(dout), THREADS, 0, m->stream>>>(dz, n, dout, m->grads + m->boff[l]);
            if (l > 0) {
                /* stream order: the weight gradient has read `in` already */
                k_delta<<<blocks(n * din), THREADS, 0, m->stream>>>(m->acts[l - 1], dz, n, din, dout,
                                                                    m->params + m->woff[l]);
                dz = m->acts[l - 1];
            }
        }
        if ((rc = launched(m, "forward_backward kernels", err)) != 0)
            return rc;
    }
    m->rows_seen += rows;
    return 0;
}

extern "C" int train_model_cuda_sgd_step(struct train_model_cuda *m, const float *grads_dev, struct sl_error *err)
{
    if (grads_dev == NULL)
        return sl_error_set(err, SL_EINVAL, "train_model_sgd_step: NULL gradient");
    int rc = set_device(m, err);
    if (rc != 0)
        return rc;
    k_sgd<<<blocks(m->nparams), THREADS, 0, m->stream>>>(m->params, m->velocity, grads_dev, m->nparams, m->cfg.lr,
                                                         m->cfg.momentum);
    return launched(m, "sgd kernel", err);
}

extern "C" int train_model_cuda_predict(struct train_model_cuda *m, const float *x_dev, size_t rows, int64_t *pred_dev,
                                        struct sl_error *err)
{
    if (rows == 0)
        return 0;
    if (x_dev == NULL || pred_dev == NULL)
        return sl_error_set(err, SL_EINVAL, "train_model_predict: NULL x or pred_out with %zu rows", rows);
    int rc = set_device(m, err);
    if (rc != 0)
        return rc;
    for (size_t start = 0; start < rows; start += m->cfg.max_rows) {
        size_t n = rows - start < m->cfg.max_rows ? rows - start : m->cfg.max_rows;
        const float *z = forward(m, x_dev + start * m->dims[0], n);
        k_argmax<<<blocks(n), THREADS, 0, m->stream>>>(z, n, m->dims[m->nlayers], pred_dev + start);
        if ((rc = launched(m, "predict kernels", err)) != 0)
            return rc;
    }
    return 0;
}

extern "C" int train_model_cuda_take_stats(struct train_model_cuda *m, double *loss_sum, size_t *correct,
                                           struct sl_error *err)
{
    struct stats st;
    int rc = set_device(m, err);
    if (rc != 0)
        return rc;
    cudaError_t e = cudaMemcpyAsync(&st, m->stats, sizeof st, cudaMemcpyDeviceToHost, m->stream);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(m->stream);
    if (e != cudaSuccess)
        return cuda_fail(err, e, "cudaMemcpy(statistics)", m->ordinal);
    if ((rc = reset_stats(m, err)) != 0)
        return rc;
    if (loss_sum != NULL)
        *loss_sum = st.loss;
    if (correct != NULL)
        *correct = (size_t)st.correct;
    if (st.bad_row != ~0ULL)
        return sl_error_set(err, SL_EINVAL, "row %llu: label out of range (expected 0 <= label < %zu)", st.bad_row,
                            m->dims[m->nlayers]);
    return 0;
}

extern "C" int train_model_cuda_sync(struct train_model_cuda *m, struct sl_error *err)
{
    int rc = set_device(m, err);
    if (rc != 0)
        return rc;
    cudaError_t e = cudaStreamSynchronize(m->stream);
    return e == cudaSuccess ? 0 : cuda_fail(err, e, "cudaStreamSynchronize", m->ordinal);
}
