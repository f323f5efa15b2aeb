/* test_train_model_cuda: the CUDA models (train_model_cuda.h) against the
 * CPU model (train_model.h) on random data, and the NCCL unique id passed
 * through the rendezvous. A plain program for ctest (label gpu): exit 0
 * when every check passes, 1 on a failure, 77 (skipped) without a GPU.
 *
 * For softmax regression and two MLPs, over rows split into chunks
 * (max_rows smaller than the batch) with some zero inputs: the gradient of
 * one forward_backward, the summed loss and correct count, then the
 * parameters after two momentum-SGD steps, must match the CPU model within
 * a float tolerance (|gpu - cpu| <= 1e-5 + 1e-4 |cpu|); a bad label is
 * reported by take_stats.
 *
 * The NCCL id: rank 0 makes one (train_nccl_unique_id), the rendezvous
 * carries it to rank 1 (two threads over ipc://), and rank 1's copy starts
 * a one-rank communicator whose all-reduce is checked.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train_cuda_module.h"
#include "train_cuda_inc.h"
#include "train_device.h"
#include "train_model.h"
#include "train_model_cuda.h"
#include "train_nccl.h"
#include "train_rendezvous.h"

#define SKIP 77

static int failures;

static void must(int rc, const struct sl_error *err, const char *what)
{
    if (rc == 0)
        return;
    fprintf(stderr, "%s: %s (%s)\n", what, err->msg, sl_code_name(rc));
    exit(1);
}

static void cuda_must(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return;
    fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    exit(1);
}

/* Count elements outside the tolerance; print the first few. */
static void compare(const char *what, const float *gpu, const float *cpu, size_t n)
{
    size_t bad = 0;
    double worst = 0;
    for (size_t k = 0; k < n; k++) {
        double d = fabs((double)gpu[k] - (double)cpu[k]);
        double tol = 1e-5 + 1e-4 * fabs((double)cpu[k]);
        if (d > worst)
            worst = d;
        if (!(d <= tol)) {
            if (bad < 5)
                fprintf(stderr, "%s[%zu]: gpu %.9g cpu %.9g\n", what, k, (double)gpu[k], (double)cpu[k]);
            bad++;
        }
    }
    if (bad > 0) {
        fprintf(stderr, "%s: %zu of %zu elements outside the tolerance\n", what, bad, n);
        failures++;
    } else {
        printf("  %s: %zu elements within tolerance (largest difference %.3g)\n", what, n, worst);
    }
}

static void check_model(const char *name, struct train_model_config cfg, size_t rows, double global_rows)
{
    struct sl_error err = {0};
    struct train_model *cpu;
    struct train_model_cuda *gpu;
    unsigned seed = 7;
    size_t din = (size_t)cfg.inputs;

    printf("%s: %zu rows (max_rows %zu), global rows %g\n", name, rows, cfg.max_rows, global_rows);
    must(train_model_create(&cpu, &cfg, &err), &err, "train_model_create");
    must(train_model_cuda_create(&gpu, &cfg, 0, &err), &err, "train_model_cuda_create");
    size_t np = train_model_nparams(cpu);
    if (train_model_cuda_nparams(gpu) != np) {
        fprintf(stderr, "%s: nparams %zu on the GPU, %zu on the CPU\n", name, train_model_cuda_nparams(gpu), np);
        exit(1);
    }
    float *x = malloc(rows * din * sizeof *x), *back = malloc(np * sizeof *back);
    int64_t *labels = malloc(rows * sizeof *labels);
    if (x == NULL || back == NULL || labels == NULL)
        exit(1);
    for (size_t k = 0; k < rows * din; k++)
        x[k] = rand_r(&seed) % 5 == 0 ? 0.0f : (float)rand_r(&seed) / (float)RAND_MAX * 2.0f - 1.0f;
    for (size_t r = 0; r < rows; r++)
        labels[r] = rand_r(&seed) % cfg.classes;
    float *x_dev;
    int64_t *labels_dev;
    cuda_must(cudaMalloc((void **)&x_dev, rows * din * sizeof *x), "cudaMalloc");
    cuda_must(cudaMalloc((void **)&labels_dev, rows * sizeof *labels), "cudaMalloc");
    cuda_must(cudaMemcpy(x_dev, x, rows * din * sizeof *x, cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_must(cudaMemcpy(labels_dev, labels, rows * sizeof *labels, cudaMemcpyHostToDevice), "cudaMemcpy");
    /* a pageable cudaMemcpy may return before its DMA lands, and the model's
     * stream does not wait for the legacy default stream */
    cuda_must(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

    /* same initial parameters */
    must(train_model_cuda_get_params(gpu, back, &err), &err, "get_params");
    if (memcmp(back, train_model_params(cpu), np * sizeof *back) != 0) {
        fprintf(stderr, "%s: initial parameters differ\n", name);
        failures++;
    }
    for (int step = 0; step < 2; step++) {
        float cpu_loss;
        size_t cpu_correct, gpu_correct;
        double gpu_loss;
        train_model_zero_grads(cpu);
        must(train_model_forward_backward(cpu, x, labels, rows, global_rows, &cpu_loss, &cpu_correct, &err), &err,
             "cpu forward_backward");
        must(train_model_cuda_zero_grads(gpu, &err), &err, "zero_grads");
        must(train_model_cuda_forward_backward(gpu, x_dev, labels_dev, rows, global_rows, &err), &err,
             "cuda forward_backward");
        must(train_model_cuda_take_stats(gpu, &gpu_loss, &gpu_correct, &err), &err, "take_stats");
        cuda_must(cudaMemcpy(back, train_model_cuda_grads(gpu), np * sizeof *back, cudaMemcpyDeviceToHost),
                  "cudaMemcpy(gradients)");
        compare("gradient", back, train_model_grads(cpu), np);
        /* step 0 starts from identical parameters; by step 1 they differ in
         * the last bits (expf), which may flip a near-tie of two logits */
        size_t tie = step > 0 ? 1 : 0;
        if (fabs(gpu_loss - (double)cpu_loss) > 1e-4 * fabs((double)cpu_loss) + 1e-5 ||
            gpu_correct + tie < cpu_correct || gpu_correct > cpu_correct + tie) {
            fprintf(stderr, "%s step %d: loss %.7g / %zu correct on the GPU, %.7g / %zu on the CPU\n", name, step,
                    gpu_loss, gpu_correct, (double)cpu_loss, cpu_correct);
            failures++;
        }
        must(train_model_sgd_step(cpu, train_model_grads(cpu), &err), &err, "cpu sgd");
        must(train_model_cuda_sgd_step(gpu, train_model_cuda_grads(gpu), &err), &err, "cuda sgd");
        must(train_model_cuda_get_params(gpu, back, &err), &err, "get_params");
        compare("parameters after SGD", back, train_model_params(cpu), np);
    }
    /* predictions agree except where two logits are within rounding */
    int64_t *pred = malloc(rows * sizeof *pred), *gpred = malloc(rows * sizeof *gpred);
    int64_t *pred_dev;
    if (pred == NULL || gpred == NULL)
        exit(1);
    cuda_must(cudaMalloc((void **)&pred_dev, rows * sizeof *pred), "cudaMalloc");
    must(train_model_predict(cpu, x, rows, pred, &err), &err, "cpu predict");
    must(train_model_cuda_predict(gpu, x_dev, rows, pred_dev, &err), &err, "cuda predict");
    must(train_model_cuda_sync(gpu, &err), &err, "sync");
    cuda_must(cudaMemcpy(gpred, pred_dev, rows * sizeof *pred, cudaMemcpyDeviceToHost), "cudaMemcpy");
    size_t differ = 0;
    for (size_t r = 0; r < rows; r++)
        differ += pred[r] != gpred[r];
    if (differ > rows / 50) {
        fprintf(stderr, "%s: %zu of %zu predictions differ\n", name, differ, rows);
        failures++;
    }
    /* a bad label: reported, by row */
    labels[rows / 2] = cfg.classes;
    cuda_must(cudaMemcpy(labels_dev, labels, rows * sizeof *labels, cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_must(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    must(train_model_cuda_forward_backward(gpu, x_dev, labels_dev, rows, global_rows, &err), &err, "forward_backward");
    char want[128];
    snprintf(want, sizeof want, "row %zu: label out of range (expected 0 <= label < %d)", rows / 2, cfg.classes);
    if (train_model_cuda_take_stats(gpu, NULL, NULL, &err) != SL_EINVAL || strcmp(err.msg, want) != 0) {
        fprintf(stderr, "%s: bad label: got '%s', expected '%s'\n", name, err.msg, want);
        failures++;
    }
    cudaFree(pred_dev);
    cudaFree(x_dev);
    cudaFree(labels_dev);
    free(pred);
    free(gpred);
    free(x);
    free(back);
    free(labels);
    train_model_cuda_destroy(gpu);
    train_model_destroy(cpu);
}

struct rank_arg {
    struct train_rendezvous_opts o;
    char id[TRAIN_NCCL_ID_BYTES];
    size_t len;
    int rc;
    struct sl_error err;
};

static void *rendezvous_rank(void *p)
{
    struct rank_arg *a = p;
    a->rc = train_rendezvous(&a->o, a->id, sizeof a->id, &a->len, &a->err);
    return NULL;
}

static void check_nccl_id_over_rendezvous(void)
{
    struct sl_error err = {0};
    char id[TRAIN_NCCL_ID_BYTES], root[128];
    must(train_nccl_unique_id(id, &err), &err, "train_nccl_unique_id");
    snprintf(root, sizeof root, "ipc:///tmp/sl-gpu-rdv-%ld", (long)getpid());
    struct rank_arg a[2];
    pthread_t th[2];
    memset(a, 0, sizeof a);
    for (int r = 0; r < 2; r++) {
        a[r].o = (struct train_rendezvous_opts){.rank = r,
                                                .size = 2,
                                                .root = root,
                                                .job = "gpu-test",
                                                .config = "nccl",
                                                .timeout_ms = 10000,
                                                .blob = id,
                                                .blob_len = r == 0 ? sizeof id : 0};
        if (pthread_create(&th[r], NULL, rendezvous_rank, &a[r]) != 0)
            exit(1);
    }
    for (int r = 0; r < 2; r++) {
        pthread_join(th[r], NULL);
        must(a[r].rc, &a[r].err, "rendezvous");
        if (a[r].len != sizeof id || memcmp(a[r].id, id, sizeof id) != 0) {
            fprintf(stderr, "rank %d received a different NCCL id\n", r);
            failures++;
        }
    }
    /* rank 1's copy starts a communicator (one rank: one GPU suffices) */
    const struct train_device_ops *ops = train_device_find("cuda");
    struct train_device *d;
    struct train_comm *comm;
    must(ops->open(&d, 0, &err), &err, "open");
    must(train_nccl_comm_init(&comm, 1, 0, a[1].id, d, &err), &err, "train_nccl_comm_init with the received id");
    float host[4] = {1, 2, 3, 4}, back[4];
    void *dev;
    must(ops->alloc_device(d, sizeof host, &dev, &err), &err, "alloc_device");
    cuda_must(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice), "cudaMemcpy");
    cuda_must(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); /* NCCL's stream does not wait for it */
    must(ops->all_reduce_sum_f32(comm, dev, 4, &err), &err, "all_reduce_sum_f32");
    cuda_must(cudaMemcpy(back, dev, sizeof back, cudaMemcpyDeviceToHost), "cudaMemcpy");
    if (memcmp(back, host, sizeof host) != 0) {
        fprintf(stderr, "one-rank all-reduce changed the data\n");
        failures++;
    }
    ops->free_device(d, dev);
    train_nccl_comm_destroy(comm);
    ops->close(d);
    printf("NCCL id through the rendezvous: ok\n");
}

int main(void)
{
    train_backend_use_cuda(&train__cuda_module); /* this program's copy, not the module */
    if (train_device_count("cuda") == 0) {
        printf("SKIP: no CUDA device (or no driver)\n");
        return SKIP;
    }
    struct train_model_config soft = {
        .inputs = 20, .classes = 5, .seed = 3, .lr = 0.1f, .momentum = 0.9f, .max_rows = 16};
    check_model("softmax regression", soft, 37, 50);
    struct train_model_config mlp = {.inputs = 30,
                                     .classes = 7,
                                     .nhidden = 2,
                                     .hidden = {16, 8},
                                     .seed = 11,
                                     .lr = 0.05f,
                                     .momentum = 0.9f,
                                     .max_rows = 32};
    check_model("mlp 30-16-8-7", mlp, 100, 100);
    struct train_model_config wide = {
        .inputs = 784, .classes = 10, .nhidden = 2, .hidden = {256, 128}, .seed = 1, .lr = 0.05f, .momentum = 0.9f};
    check_model("mlp 784-256-128-10", wide, 300, 512);
    check_nccl_id_over_rendezvous();
    if (failures > 0) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all passed\n");
    return 0;
}
