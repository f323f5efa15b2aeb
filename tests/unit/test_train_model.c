/* train_model: analytic gradients against central finite differences of an
 * independent double-precision reference, split invariance of the
 * gradient (any split of a global batch sums to the same gradient), the
 * seeded initialization rule re-derived here, the momentum-SGD rule,
 * training to high accuracy on separable blobs, and the error paths. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sl_alloc.h"
#include "sl_test.h"
#include "train_model.h"

/* The test's own random numbers (splitmix64, independent of the model's). */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static double rng_uniform(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

static double rng_normal(uint64_t *s)
{
    double u1 = rng_uniform(s), u2 = rng_uniform(s);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static struct train_model *make_model(int inputs, int classes, int nhidden, const int *hidden, uint64_t seed)
{
    struct train_model_config cfg = {.inputs = inputs, .classes = classes, .nhidden = nhidden, .seed = seed};
    struct train_model *m = NULL;
    struct sl_error err = {0};
    for (int h = 0; h < nhidden; h++)
        cfg.hidden[h] = hidden[h];
    ck_assert_msg(train_model_create(&m, &cfg, &err) == 0, "%s", err.msg);
    return m;
}

/* ---- double-precision reference: same layout, written out plainly ---- */

struct ref_shape {
    int nlayers;
    int dims[6];
};

static struct ref_shape ref_shape_of(int inputs, int classes, int nhidden, const int *hidden)
{
    struct ref_shape s = {.nlayers = nhidden + 1};
    s.dims[0] = inputs;
    for (int h = 0; h < nhidden; h++)
        s.dims[h + 1] = hidden[h];
    s.dims[nhidden + 1] = classes;
    return s;
}

/* Sum over rows of the cross-entropy loss, divided by global_rows. */
static double ref_loss(const struct ref_shape *s, const double *p, const float *x, const int64_t *labels, size_t rows,
                       double global_rows)
{
    double total = 0.0;
    for (size_t r = 0; r < rows; r++) {
        double a[64], z[64];
        size_t off = 0;
        int din = s->dims[0];
        for (int i = 0; i < din; i++)
            a[i] = x[r * (size_t)din + (size_t)i];
        for (int l = 0; l < s->nlayers; l++) {
            int in = s->dims[l], out = s->dims[l + 1];
            const double *w = p + off, *b = p + off + (size_t)in * (size_t)out;
            for (int o = 0; o < out; o++) {
                z[o] = b[o];
                for (int i = 0; i < in; i++)
                    z[o] += a[i] * w[i * out + o];
            }
            off += (size_t)in * (size_t)out + (size_t)out;
            for (int o = 0; o < out; o++)
                a[o] = (l + 1 < s->nlayers) ? (z[o] > 0 ? z[o] : 0) : z[o];
        }
        int classes = s->dims[s->nlayers];
        double mx = a[0], sum = 0.0;
        for (int k = 1; k < classes; k++)
            mx = a[k] > mx ? a[k] : mx;
        for (int k = 0; k < classes; k++)
            sum += exp(a[k] - mx);
        total += log(sum) + mx - a[labels[r]];
    }
    return total / global_rows;
}

static void random_batch(uint64_t seed, float *x, size_t nx, int64_t *labels, size_t rows, int classes)
{
    uint64_t s = seed;
    for (size_t i = 0; i < nx; i++)
        x[i] = (float)(2.0 * rng_uniform(&s) - 1.0);
    for (size_t r = 0; r < rows; r++)
        labels[r] = (int64_t)(rng_next(&s) % (uint64_t)classes);
}

static void gradcheck(int inputs, int classes, int nhidden, const int *hidden, size_t rows, uint64_t seed)
{
    struct train_model *m = make_model(inputs, classes, nhidden, hidden, seed);
    struct ref_shape shape = ref_shape_of(inputs, classes, nhidden, hidden);
    size_t np = train_model_nparams(m);
    float x[64 * 8];
    int64_t labels[8];
    double *p = malloc(np * sizeof *p);
    struct sl_error err = {0};
    const double global_rows = (double)rows + 3.0; /* scaling by a count other than rows */
    float loss = -1.0f;
    size_t correct = 99;

    ck_assert_uint_le(rows * (size_t)inputs, sizeof x / sizeof x[0]);
    random_batch(seed ^ 0x5eed, x, rows * (size_t)inputs, labels, rows, classes);
    /* Non-zero biases so their gradients are exercised away from init. */
    {
        uint64_t s = seed + 1;
        float *mp = train_model_params(m);
        for (size_t k = 0; k < np; k++)
            mp[k] += (float)(0.2 * (rng_uniform(&s) - 0.5));
    }
    for (size_t k = 0; k < np; k++)
        p[k] = train_model_params(m)[k];

    train_model_zero_grads(m);
    ck_assert_msg(train_model_forward_backward(m, x, labels, rows, global_rows, &loss, &correct, &err) == 0, "%s",
                  err.msg);
    double want_loss = ref_loss(&shape, p, x, labels, rows, 1.0);
    ck_assert_msg(fabs((double)loss - want_loss) <= 1e-5 * fabs(want_loss), "loss %.9g vs %.9g", (double)loss,
                  want_loss);
    ck_assert_uint_le(correct, rows);

    const float *g = train_model_grads(m);
    const double h = 1e-5;
    for (size_t k = 0; k < np; k++) {
        double keep = p[k];
        p[k] = keep + h;
        double up = ref_loss(&shape, p, x, labels, rows, global_rows);
        p[k] = keep - h;
        double down = ref_loss(&shape, p, x, labels, rows, global_rows);
        p[k] = keep;
        double num = (up - down) / (2.0 * h), ana = g[k];
        double scale = fmax(fabs(num), fabs(ana));
        /* Relative 1e-3, with an absolute floor of 1e-7 for gradients that
         * are zero up to float32 rounding. */
        ck_assert_msg(fabs(num - ana) <= 1e-3 * scale + 1e-7, "param %zu: analytic %.9g numeric %.9g", k, ana, num);
    }
    free(p);
    train_model_destroy(m);
}

START_TEST(test_gradcheck_softmax)
{
    gradcheck(5, 3, 0, NULL, 4, 11);
    gradcheck(7, 4, 0, NULL, 6, 12);
}
END_TEST

START_TEST(test_gradcheck_mlp_two_hidden)
{
    const int hidden[2] = {6, 5};
    gradcheck(4, 3, 2, hidden, 5, 21);
    const int hidden2[2] = {9, 7};
    gradcheck(6, 4, 2, hidden2, 8, 22);
}
END_TEST

/* ---- split invariance ---- */

static float *grads_of(struct train_model *m, const float *x, const int64_t *labels, size_t first, size_t rows,
                       int inputs, double global_rows)
{
    size_t np = train_model_nparams(m);
    float *g = malloc(np * sizeof *g);
    struct sl_error err = {0};
    train_model_zero_grads(m);
    /* An empty piece passes NULL buffers, as a replica with no rows would. */
    const float *xp = rows ? x + first * (size_t)inputs : NULL;
    const int64_t *lp = rows ? labels + first : NULL;
    ck_assert_msg(train_model_forward_backward(m, xp, lp, rows, global_rows, NULL, NULL, &err) == 0, "%s", err.msg);
    memcpy(g, train_model_grads(m), np * sizeof *g);
    return g;
}

/* Sum the gradients of pieces (replica 0 first, float32, as an all-reduce). */
static float *split_sum(struct train_model *m, const float *x, const int64_t *labels, const size_t *pieces,
                        size_t npieces, int inputs)
{
    size_t np = train_model_nparams(m), first = 0;
    float *sum = calloc(np, sizeof *sum);
    for (size_t p = 0; p < npieces; p++) {
        float *g = grads_of(m, x, labels, first, pieces[p], inputs, 8.0);
        for (size_t k = 0; k < np; k++)
            sum[k] = p == 0 ? g[k] : sum[k] + g[k];
        free(g);
        first += pieces[p];
    }
    return sum;
}

START_TEST(test_split_invariance)
{
    const int hidden[2] = {10, 6};
    struct train_model *m = make_model(7, 4, 2, hidden, 5);
    size_t np = train_model_nparams(m);
    float x[8 * 7];
    int64_t labels[8];
    random_batch(99, x, sizeof x / sizeof x[0], labels, 8, 4);

    float *whole = grads_of(m, x, labels, 0, 8, 7, 8.0);
    float gmax = 0.0f;
    for (size_t k = 0; k < np; k++)
        gmax = fmaxf(gmax, fabsf(whole[k]));
    ck_assert(gmax > 0.0f);

    const size_t split_a[2] = {5, 3}, split_b[4] = {4, 2, 2, 0};
    float *a1 = split_sum(m, x, labels, split_a, 2, 7);
    float *a2 = split_sum(m, x, labels, split_a, 2, 7);
    float *b1 = split_sum(m, x, labels, split_b, 4, 7);
    float *b2 = split_sum(m, x, labels, split_b, 4, 7);
    for (size_t k = 0; k < np; k++) {
        /* Reassociation only: within 1e-6 of the largest gradient. */
        ck_assert_msg(fabsf(a1[k] - whole[k]) <= 1e-6f * gmax, "5+3 param %zu: %.9g vs %.9g", k, (double)a1[k],
                      (double)whole[k]);
        ck_assert_msg(fabsf(b1[k] - whole[k]) <= 1e-6f * gmax, "4+2+2+0 param %zu: %.9g vs %.9g", k, (double)b1[k],
                      (double)whole[k]);
    }
    ck_assert_mem_eq(a1, a2, np * sizeof(float));
    ck_assert_mem_eq(b1, b2, np * sizeof(float));

    /* Pieces accumulated into one gradient array add per-row terms in row
     * order, exactly as the whole batch does: bitwise equal. */
    struct sl_error err = {0};
    train_model_zero_grads(m);
    ck_assert_int_eq(train_model_forward_backward(m, x, labels, 5, 8.0, NULL, NULL, &err), 0);
    ck_assert_int_eq(train_model_forward_backward(m, NULL, NULL, 0, 8.0, NULL, NULL, &err), 0);
    ck_assert_int_eq(train_model_forward_backward(m, x + 5 * 7, labels + 5, 3, 8.0, NULL, NULL, &err), 0);
    ck_assert_mem_eq(train_model_grads(m), whole, np * sizeof(float));

    free(a1);
    free(a2);
    free(b1);
    free(b2);
    free(whole);
    train_model_destroy(m);
}
END_TEST

/* The chunk size (max_rows) changes the working set, never the result. */
START_TEST(test_max_rows_does_not_change_results)
{
    const int hidden[1] = {12};
    struct train_model_config cfg = {.inputs = 6, .classes = 3, .nhidden = 1, .hidden = {12}, .seed = 8};
    struct train_model *small = NULL, *big = make_model(6, 3, 1, hidden, 8);
    struct sl_error err = {0};
    float x[20 * 6], ls = 0, lb = 0;
    int64_t labels[20], ps[20], pb[20];
    size_t cs = 0, cb = 0;

    cfg.max_rows = 3;
    ck_assert_int_eq(train_model_create(&small, &cfg, &err), 0);
    random_batch(3, x, sizeof x / sizeof x[0], labels, 20, 3);
    train_model_zero_grads(small);
    train_model_zero_grads(big);
    ck_assert_int_eq(train_model_forward_backward(small, x, labels, 20, 20.0, &ls, &cs, &err), 0);
    ck_assert_int_eq(train_model_forward_backward(big, x, labels, 20, 20.0, &lb, &cb, &err), 0);
    ck_assert_mem_eq(train_model_grads(small), train_model_grads(big), train_model_nparams(big) * sizeof(float));
    ck_assert_mem_eq(&ls, &lb, sizeof ls);
    ck_assert_uint_eq(cs, cb);
    ck_assert_int_eq(train_model_predict(small, x, 20, ps, &err), 0);
    ck_assert_int_eq(train_model_predict(big, x, 20, pb, &err), 0);
    ck_assert_mem_eq(ps, pb, sizeof ps);
    size_t agree = 0;
    for (size_t r = 0; r < 20; r++)
        agree += ps[r] == labels[r];
    ck_assert_uint_eq(agree, cs);
    train_model_destroy(small);
    train_model_destroy(big);
}
END_TEST

/* ---- initialization ---- */

START_TEST(test_seeded_init_rule)
{
    const int hidden[2] = {16, 8};
    struct train_model *a = make_model(10, 4, 2, hidden, 42);
    struct train_model *b = make_model(10, 4, 2, hidden, 42);
    struct train_model *c = make_model(10, 4, 2, hidden, 43);
    size_t np = train_model_nparams(a);

    ck_assert_uint_eq(np, 10 * 16 + 16 + 16 * 8 + 8 + 8 * 4 + 4);
    ck_assert_mem_eq(train_model_params(a), train_model_params(b), np * sizeof(float));
    ck_assert(memcmp(train_model_params(a), train_model_params(c), np * sizeof(float)) != 0);

    /* Re-derive the documented rule: one splitmix64 stream over the
     * weights in parameter order, u = top 24 bits / 2^24, w = limit(2u-1);
     * He limits for hidden layers, Glorot for the output; biases 0. */
    const int dims[4] = {10, 16, 8, 4};
    const float *p = train_model_params(a);
    uint64_t s = 42;
    size_t off = 0;
    for (int l = 0; l < 3; l++) {
        double limit = l < 2 ? sqrt(6.0 / dims[l]) : sqrt(6.0 / (dims[l] + dims[l + 1]));
        for (int k = 0; k < dims[l] * dims[l + 1]; k++) {
            double u = (double)(rng_next(&s) >> 40) / 16777216.0;
            float want = (float)(limit * (2.0 * u - 1.0));
            ck_assert_msg(memcmp(&p[off], &want, sizeof want) == 0, "layer %d weight %d", l, k);
            ck_assert(fabsf(p[off]) <= (float)limit);
            off++;
        }
        for (int o = 0; o < dims[l + 1]; o++)
            ck_assert(p[off++] == 0.0f);
    }
    ck_assert_uint_eq(off, np);
    train_model_destroy(a);
    train_model_destroy(b);
    train_model_destroy(c);
}
END_TEST

/* ---- optimizer ---- */

START_TEST(test_sgd_momentum_rule)
{
    struct train_model_config cfg = {.inputs = 1, .classes = 2, .seed = 1, .lr = 0.1f, .momentum = 0.9f};
    struct train_model *m = NULL;
    struct sl_error err = {0};
    ck_assert_int_eq(train_model_create(&m, &cfg, &err), 0);
    size_t np = train_model_nparams(m);
    ck_assert_uint_eq(np, 4);
    float *p = train_model_params(m);
    const float g[4] = {0.5f, -1.0f, 0.0f, 2.0f};
    float want[4], v[4] = {0};
    for (size_t k = 0; k < np; k++) {
        p[k] = 1.0f;
        want[k] = 1.0f;
    }
    /* Keras: v = momentum * v - lr * g; p = p + v. */
    for (int step = 0; step < 3; step++) {
        ck_assert_int_eq(train_model_sgd_step(m, g, &err), 0);
        for (size_t k = 0; k < np; k++) {
            v[k] = 0.9f * v[k] - 0.1f * g[k];
            want[k] = want[k] + v[k];
        }
        ck_assert_mem_eq(p, want, sizeof want);
    }
    ck_assert_float_eq_tol(p[0], 1.0f - 0.05f - 0.095f - 0.1355f, 1e-6f);
    ck_assert_int_eq(train_model_sgd_step(m, NULL, &err), SL_EINVAL);
    train_model_destroy(m);

    /* lr 0 means the Keras default 0.01; momentum 0 is plain SGD. */
    struct train_model_config dflt = {.inputs = 1, .classes = 2};
    ck_assert_int_eq(train_model_create(&m, &dflt, &err), 0);
    p = train_model_params(m);
    p[0] = 1.0f;
    ck_assert_int_eq(train_model_sgd_step(m, g, &err), 0);
    ck_assert(p[0] == 1.0f + (0.0f * 0.0f - 0.01f * 0.5f));
    train_model_destroy(m);
}
END_TEST

/* ---- training on separable blobs ---- */

#define BLOB_DIM 8
#define BLOB_N 512

/* Four Gaussian blobs (sd 0.5) at (+-2, +-2, 0, ...) in 8 dims. */
static void make_blobs(uint64_t seed, float *x, int64_t *labels, size_t n)
{
    uint64_t s = seed;
    for (size_t r = 0; r < n; r++) {
        int64_t c = (int64_t)(rng_next(&s) % 4);
        labels[r] = c;
        for (int d = 0; d < BLOB_DIM; d++) {
            double centre = 0.0;
            if (d == 0)
                centre = (c & 1) ? 2.0 : -2.0;
            if (d == 1)
                centre = (c & 2) ? 2.0 : -2.0;
            x[r * BLOB_DIM + (size_t)d] = (float)(centre + 0.5 * rng_normal(&s));
        }
    }
}

static double accuracy(struct train_model *m, const float *x, const int64_t *labels, size_t n)
{
    int64_t *pred = malloc(n * sizeof *pred);
    struct sl_error err = {0};
    size_t ok = 0;
    ck_assert_int_eq(train_model_predict(m, x, n, pred, &err), 0);
    for (size_t r = 0; r < n; r++)
        ok += pred[r] == labels[r];
    free(pred);
    return (double)ok / (double)n;
}

static void train_blobs(int nhidden, const int *hidden)
{
    struct train_model_config cfg = {
        .inputs = BLOB_DIM, .classes = 4, .nhidden = nhidden, .seed = 2024, .lr = 0.05f, .momentum = 0.9f};
    struct train_model *m = NULL;
    struct sl_error err = {0};
    static float x[BLOB_N * BLOB_DIM], xt[BLOB_N * BLOB_DIM];
    static int64_t labels[BLOB_N], lt[BLOB_N];
    const size_t batch = 32;
    double first_loss = 0.0, last_loss = 0.0;

    for (int h = 0; h < nhidden; h++)
        cfg.hidden[h] = hidden[h];
    ck_assert_int_eq(train_model_create(&m, &cfg, &err), 0);
    make_blobs(1, x, labels, BLOB_N);
    make_blobs(2, xt, lt, BLOB_N);
    for (int step = 0; step < 300; step++) {
        size_t first = (size_t)step * batch % BLOB_N;
        float loss = 0.0f;
        train_model_zero_grads(m);
        ck_assert_msg(train_model_forward_backward(m, x + first * BLOB_DIM, labels + first, batch, (double)batch, &loss,
                                                   NULL, &err) == 0,
                      "%s", err.msg);
        ck_assert_int_eq(train_model_sgd_step(m, train_model_grads(m), &err), 0);
        if (step < 16)
            first_loss += loss;
        if (step >= 284)
            last_loss += loss;
    }
    ck_assert_msg(last_loss < 0.25 * first_loss, "loss %g -> %g", first_loss, last_loss);
    double acc_train = accuracy(m, x, labels, BLOB_N), acc_test = accuracy(m, xt, lt, BLOB_N);
    ck_assert_msg(acc_train >= 0.95 && acc_test >= 0.95, "accuracy train %g test %g", acc_train, acc_test);
    train_model_destroy(m);
}

START_TEST(test_train_softmax_blobs)
{
    train_blobs(0, NULL);
}
END_TEST

START_TEST(test_train_mlp_blobs)
{
    const int hidden[2] = {32, 16};
    train_blobs(2, hidden);
}
END_TEST

/* ---- errors and edges ---- */

START_TEST(test_label_out_of_range)
{
    struct train_model *m = make_model(2, 3, 0, NULL, 1);
    struct sl_error err = {0};
    const float x[8] = {0};
    int64_t labels[4] = {0, 2, 3, 1};
    size_t np = train_model_nparams(m);
    float *zero = calloc(np, sizeof *zero);

    train_model_zero_grads(m);
    ck_assert_int_eq(train_model_forward_backward(m, x, labels, 4, 4.0, NULL, NULL, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "row 2: label out of range (expected 0 <= label < 3, got 3)");
    ck_assert_mem_eq(train_model_grads(m), zero, np * sizeof(float));
    labels[2] = 0;
    labels[0] = -1;
    ck_assert_int_eq(train_model_forward_backward(m, x, labels, 4, 4.0, NULL, NULL, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "row 0: label out of range (expected 0 <= label < 3, got -1)");
    ck_assert_mem_eq(train_model_grads(m), zero, np * sizeof(float));
    free(zero);
    train_model_destroy(m);
}
END_TEST

START_TEST(test_empty_piece_and_bad_calls)
{
    struct train_model *m = make_model(3, 2, 0, NULL, 1);
    struct sl_error err = {0};
    float loss = 5.0f, x[3] = {1, 2, 3};
    size_t correct = 5;
    int64_t label = 1, pred = -1;

    ck_assert_int_eq(train_model_forward_backward(m, NULL, NULL, 0, 8.0, &loss, &correct, &err), 0);
    ck_assert(loss == 0.0f);
    ck_assert_uint_eq(correct, 0);
    ck_assert_int_eq(train_model_forward_backward(m, NULL, NULL, 0, 0.0, &loss, &correct, &err), 0);
    ck_assert_int_eq(train_model_predict(m, NULL, 0, NULL, &err), 0);

    ck_assert_int_eq(train_model_forward_backward(m, x, &label, 1, 0.5, NULL, NULL, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "train_model: global_rows out of range (expected a finite value >= rows = 1, got 0.5)");
    ck_assert_int_eq(train_model_forward_backward(m, x, &label, 1, NAN, NULL, NULL, &err), SL_EINVAL);
    ck_assert_int_eq(train_model_forward_backward(m, NULL, &label, 1, 1.0, NULL, NULL, &err), SL_EINVAL);
    ck_assert_int_eq(train_model_predict(m, x, 1, NULL, &err), SL_EINVAL);
    ck_assert_int_eq(train_model_predict(m, x, 1, &pred, &err), 0);
    ck_assert(pred == 0 || pred == 1);
    train_model_destroy(m);
    train_model_destroy(NULL);
}
END_TEST

START_TEST(test_bad_config)
{
    static const struct {
        struct train_model_config cfg;
        const char *msg;
    } cases[] = {
        {{.inputs = 0, .classes = 2}, "train_model: inputs out of range (expected 1..16777216, got 0)"},
        {{.inputs = 1, .classes = 1}, "train_model: classes out of range (expected 2..16777216, got 1)"},
        {{.inputs = 1, .classes = 2, .nhidden = 5}, "train_model: nhidden out of range (expected 0..4, got 5)"},
        {{.inputs = 1, .classes = 2, .nhidden = 2, .hidden = {3, 0}},
         "train_model: hidden[1] out of range (expected 1..16777216, got 0)"},
        {{.inputs = 1, .classes = 2, .lr = -1.0f}, "train_model: lr must be a finite value > 0 (got -1)"},
        {{.inputs = 1, .classes = 2, .momentum = 1.0f},
         "train_model: momentum out of range (expected 0 <= m < 1, got 1)"},
        {{.inputs = 1, .classes = 2, .max_rows = (1 << 20) + 1},
         "train_model: max_rows out of range (expected 0..1048576, got 1048577)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        static int sentinel;
        struct train_model *m = (struct train_model *)(void *)&sentinel;
        struct sl_error err = {0};
        ck_assert_int_eq(train_model_create(&m, &cases[i].cfg, &err), SL_EINVAL);
        ck_assert_ptr_null(m);
        ck_assert_str_eq(err.msg, cases[i].msg);
    }
}
END_TEST

START_TEST(test_alloc_failure)
{
    struct train_model_config cfg = {.inputs = 3, .classes = 2, .nhidden = 1, .hidden = {4}};
    for (long n = 1; n <= 3; n++) {
        struct train_model *m = NULL;
        struct sl_error err = {0};
        sl_alloc_fail_after(n);
        int rc = train_model_create(&m, &cfg, &err);
        sl_alloc_fail_reset();
        ck_assert_int_eq(rc, SL_ENOMEM);
        ck_assert_ptr_null(m);
    }
}
END_TEST

START_TEST(test_inputs_from_u8)
{
    const uint8_t in[4] = {0, 1, 128, 255};
    float out[4];
    train_model_inputs_from_u8(in, 4, out);
    ck_assert(out[0] == 0.0f);
    ck_assert(out[1] == 1.0f / 255.0f);
    ck_assert(out[2] == 128.0f / 255.0f);
    ck_assert(out[3] == 1.0f);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_model");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_gradcheck_softmax);
    tcase_add_test(tc, test_gradcheck_mlp_two_hidden);
    tcase_add_test(tc, test_split_invariance);
    tcase_add_test(tc, test_max_rows_does_not_change_results);
    tcase_add_test(tc, test_seeded_init_rule);
    tcase_add_test(tc, test_sgd_momentum_rule);
    tcase_add_test(tc, test_train_softmax_blobs);
    tcase_add_test(tc, test_train_mlp_blobs);
    tcase_add_test(tc, test_label_out_of_range);
    tcase_add_test(tc, test_empty_piece_and_bad_calls);
    tcase_add_test(tc, test_bad_config);
    tcase_add_test(tc, test_alloc_failure);
    tcase_add_test(tc, test_inputs_from_u8);
    suite_add_tcase(s, tc);
    return s;
}
