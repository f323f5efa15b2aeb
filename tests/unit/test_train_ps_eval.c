/* The evaluator on the parameter servers (issue #24 item 18): a reader the
 * servers never count as a worker. Its final pull says "not yet" while a
 * worker trains and never marks anyone done; it cannot push (its client
 * refuses, and the server refuses a push with the read-only bit); a
 * server waits for its BYE after the workers', or counts it lost after the
 * timeout when one was expected and never came, without failing; and
 * train_ps_eval_final reads exactly the workers' final weights. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "sl_clock.h"
#include "sl_test.h"
#include "train_model.h"
#include "train_ps.h"
#include "train_ps_eval.h"

struct server_run {
    struct train_ps_server_opts o;
    struct train_ps_server_stats st;
    struct sl_error err;
    int rc;
    int done; /* atomic: the server returned */
    pthread_t tid;
    char ep[128];
};

static void *server_main(void *arg)
{
    struct server_run *r = arg;
    r->rc = train_ps_serve(&r->o, &r->st, &r->err);
    __atomic_store_n(&r->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static const struct train_ps_model *the_model; /* set before a server starts; read-only after */

static int setup_from(void *arg, const char *config, size_t len, const struct train_ps_layout **layout,
                      const float **init, struct sl_error *err)
{
    (void)arg;
    if (len != strlen(the_model->config) || memcmp(config, the_model->config, len) != 0)
        return sl_error_set(err, SL_EINVAL, "not my model");
    *layout = &the_model->layout;
    *init = train_model_params(the_model->model);
    return 0;
}

static const struct train_model_config small = {
    .inputs = 5, .classes = 3, .nhidden = 1, .hidden = {4}, .seed = 2, .lr = 0.1f, .momentum = 0.5f};

static void start_server(struct server_run *sr, void *ctx, const char *name, uint32_t index, uint32_t workers,
                         int evaluator, int timeout_ms)
{
    memset(sr, 0, sizeof *sr);
    snprintf(sr->ep, sizeof sr->ep, "ipc://%s", sl_test_path(name));
    sr->o = (struct train_ps_server_opts){.ctx = ctx,
                                          .listen = sr->ep,
                                          .index = index,
                                          .setup = setup_from,
                                          .lr = small.lr,
                                          .momentum = small.momentum,
                                          .workers = workers,
                                          .worker_timeout_ms = timeout_ms,
                                          .evaluator = evaluator};
    ck_assert_int_eq(pthread_create(&sr->tid, NULL, server_main, sr), 0);
}

/* A raw message with flags; the ERROR's text into why. */
static void refused(void *d, int type, uint32_t worker, uint32_t flags, const char *want)
{
    uint8_t h[TRAIN_PS_HEADER] = {0};
    memcpy(h, "SLPS", 4);
    h[4] = TRAIN_PS_WIRE_VERSION;
    h[5] = (uint8_t)type;
    memcpy(h + 8, &worker, 4);
    memcpy(h + 12, &flags, 4);
    ck_assert_int_ge(zmq_send(d, h, sizeof h, 0), 0);
    ck_assert_int_eq(zmq_recv(d, h, sizeof h, 0), TRAIN_PS_HEADER);
    ck_assert_int_eq(h[5], TRAIN_PS_ERROR);
    char why[256];
    int n = zmq_recv(d, why, sizeof why - 1, 0);
    ck_assert_int_gt(n, 0);
    why[n] = '\0';
    ck_assert_str_eq(why, want);
}

/* An evaluator no server was told of: it sets the server up from its
 * description like any first pull, waits while the worker trains, is
 * refused a push, and the server, having heard it, serves on after the
 * worker's BYE until the evaluator's. */
START_TEST(test_evaluator_is_no_worker)
{
    struct train_ps_model pm;
    struct sl_error err = {0};
    ck_assert_int_eq(train_ps_model_init(&pm, &small, 1, TRAIN_PS_ROUND_ROBIN, &err), 0);
    the_model = &pm;
    size_t np = train_model_nparams(pm.model);
    void *ctx = zmq_ctx_new();
    struct server_run sr;
    start_server(&sr, ctx, "pse1", 0, 1, 0, 20000);
    const char *eps[1] = {sr.ep};
    struct train_ps_client *ev, *w;
    ck_assert_int_eq(train_ps_client_open_evaluator(&ev, ctx, eps, &pm.layout, 5000, pm.config, NULL, &err), 0);
    float *pe = calloc(np, sizeof *pe), *pw = calloc(np, sizeof *pw), *g = calloc(np, sizeof *g);
    ck_assert(pe != NULL && pw != NULL && g != NULL);
    uint32_t waiting = 99;
    uint64_t step = 99;
    ck_assert_msg(train_ps_pull_final_try(ev, pe, &step, &waiting, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(waiting, 1); /* the worker, never heard: not done; the evaluator is not counted */
    ck_assert_uint_eq(step, 99);
    /* a second final pull still waits: it marked nobody done */
    ck_assert_msg(train_ps_pull_final_try(ev, pe, &step, &waiting, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(waiting, 1);
    for (size_t i = 0; i < np; i++)
        g[i] = (float)(i % 7) - 3.0f;
    ck_assert_int_eq(train_ps_push(ev, g, 1, NULL, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "the evaluator does not push");
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    ck_assert_int_eq(zmq_connect(d, sr.ep), 0);
    refused(d, TRAIN_PS_PUSH, 0, TRAIN_PS_READ_ONLY | 1u, "the evaluator only pulls");
    refused(d, TRAIN_PS_PULL, 1, TRAIN_PS_READ_ONLY, "evaluator out of range (a job has one evaluator, index 0)");
    refused(d, TRAIN_PS_PULL, UINT32_MAX, TRAIN_PS_READ_ONLY | TRAIN_PS_FINAL,
            "evaluator out of range (a job has one evaluator, index 0)");
    /* the worker trains one step and finishes; its final pull waits for nobody */
    ck_assert_int_eq(train_ps_client_open(&w, ctx, eps, &pm.layout, 0, 5000, pm.config, &err), 0);
    ck_assert_msg(train_ps_pull(w, pw, NULL, &err) == 0, "%s", err.msg);
    ck_assert_msg(train_ps_push(w, g, 1, NULL, &err) == 0, "%s", err.msg);
    double t0 = sl_clock_s();
    ck_assert_msg(train_ps_pull_final(w, pw, &step, NULL, &err) == 0, "%s", err.msg);
    ck_assert_msg(sl_clock_s() - t0 < 1.0, "the worker's final pull waited %.2f s", sl_clock_s() - t0);
    ck_assert_uint_eq(step, 1);
    train_ps_client_close(w);
    /* the server serves on for the evaluator it heard */
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    ck_assert_int_eq(__atomic_load_n(&sr.done, __ATOMIC_SEQ_CST), 0);
    step = 0;
    ck_assert_msg(train_ps_pull_final_try(ev, pe, &step, &waiting, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(waiting, 0);
    ck_assert_uint_eq(step, 1);
    ck_assert(memcmp(pe, pw, np * sizeof *pe) == 0);
    ck_assert(memcmp(pe, train_model_params(pm.model), np * sizeof *pe) != 0); /* trained */
    train_ps_client_close(ev);                                                 /* BYE: the server ends */
    pthread_join(sr.tid, NULL);
    ck_assert_msg(sr.rc == 0, "%s", sr.err.msg);
    ck_assert_int_eq(sr.st.evaluator, TRAIN_PS_EVAL_BYE);
    ck_assert_int_eq(sr.st.evaluator_served, 1);
    ck_assert_uint_eq(sr.st.lost, 0);
    ck_assert_uint_eq(sr.st.pushes, 1);
    ck_assert_uint_eq(sr.st.global_step, 1);
    ck_assert_uint_eq(sr.st.bad_messages, 3);
    ck_assert_uint_eq(sr.st.pulls, 5); /* the evaluator's 3, the worker's 2 */
    int linger = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(d);
    free(pe);
    free(pw);
    free(g);
    train_ps_model_free(&pm);
    zmq_ctx_term(ctx);
}
END_TEST

/* A server told of an evaluator that never comes: the workers are not held
 * up; after them the server waits the timeout, counts it lost, and ends
 * without an error (its own task fails, not the server). */
START_TEST(test_expected_evaluator_lost)
{
    struct train_ps_model pm;
    struct sl_error err = {0};
    ck_assert_int_eq(train_ps_model_init(&pm, &small, 1, TRAIN_PS_ROUND_ROBIN, &err), 0);
    the_model = &pm;
    size_t np = train_model_nparams(pm.model);
    void *ctx = zmq_ctx_new();
    struct server_run sr;
    start_server(&sr, ctx, "pse2", 0, 1, 1, 1000);
    const char *eps[1] = {sr.ep};
    struct train_ps_client *w;
    float *p = calloc(np, sizeof *p);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(train_ps_client_open(&w, ctx, eps, &pm.layout, 0, 5000, pm.config, &err), 0);
    double t0 = sl_clock_s();
    uint64_t step = 9;
    ck_assert_msg(train_ps_pull_final(w, p, &step, NULL, &err) == 0, "%s", err.msg);
    ck_assert_msg(sl_clock_s() - t0 < 0.9, "the worker's final pull waited %.2f s", sl_clock_s() - t0);
    ck_assert_uint_eq(step, 0);
    train_ps_client_close(w);
    pthread_join(sr.tid, NULL);
    double dt = sl_clock_s() - t0;
    ck_assert_msg(dt > 0.5 && dt < 5.0, "the server ended after %.2f s", dt);
    ck_assert_msg(sr.rc == 0, "%s", sr.err.msg);
    ck_assert_int_eq(sr.st.evaluator, TRAIN_PS_EVAL_LOST);
    ck_assert_int_eq(sr.st.evaluator_served, 0);
    ck_assert_uint_eq(sr.st.lost, 0);
    free(p);
    train_ps_model_free(&pm);
    zmq_ctx_term(ctx);
}
END_TEST

struct eval_run {
    struct train_ps_eval_opts o;
    float *params;
    size_t np;
    struct train_ps_eval_result res;
    struct sl_error err;
    int rc;
    int done; /* atomic */
    pthread_t tid;
};

static void *eval_main(void *arg)
{
    struct eval_run *e = arg;
    e->rc = train_ps_eval_final(&e->o, e->params, e->np, &e->res, &e->err);
    __atomic_store_n(&e->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* train_ps_eval_final on two servers (balanced placement): it waits while
 * two workers train and while one of them is done, then reads exactly
 * their final weights and the global step; a wrong buffer size and
 * another model are refused, naming why. */
START_TEST(test_eval_final_reads_the_final_weights)
{
    struct train_ps_model pm;
    struct sl_error err = {0};
    ck_assert_int_eq(train_ps_model_init(&pm, &small, 2, TRAIN_PS_BALANCED, &err), 0);
    the_model = &pm;
    size_t np = train_model_nparams(pm.model);
    void *ctx = zmq_ctx_new();
    struct server_run sr[2];
    for (uint32_t s = 0; s < 2; s++) {
        char name[16];
        snprintf(name, sizeof name, "pse3-%u", s);
        start_server(&sr[s], ctx, name, s, 2, 1, 20000);
    }
    const char *eps[2] = {sr[0].ep, sr[1].ep};
    struct train_ps_eval_opts base = {.ctx = ctx,
                                      .ps = eps,
                                      .nps = 2,
                                      .placement = TRAIN_PS_BALANCED,
                                      .model = small,
                                      .timeout_ms = 5000,
                                      .poll_ms = 20};
    float *p = calloc(np + 1, sizeof *p), *g = calloc(np, sizeof *g), *p1 = calloc(np, sizeof *p1);
    ck_assert(p != NULL && g != NULL && p1 != NULL);
    struct train_ps_eval_result res;
    ck_assert_int_eq(train_ps_eval_final(&base, p, np + 1, &res, &err), SL_EINVAL);
    ck_assert_msg(strstr(err.msg, "the evaluator's model has ") != NULL && strstr(err.msg, ", the buffer ") != NULL,
                  "%s", err.msg);
    struct train_ps_client *w[2];
    for (uint32_t k = 0; k < 2; k++)
        ck_assert_int_eq(train_ps_client_open(&w[k], ctx, eps, &pm.layout, k, 5000, pm.config, &err), 0);
    for (int step = 0; step < 6; step++) {
        uint32_t k = (uint32_t)step % 2;
        for (size_t i = 0; i < np; i++)
            g[i] = (float)((i + (size_t)step) % 5) * 0.25f - 0.5f;
        ck_assert_msg(train_ps_pull(w[k], p, NULL, &err) == 0, "%s", err.msg);
        ck_assert_msg(train_ps_push(w[k], g, 1, NULL, &err) == 0, "%s", err.msg);
        if (step == 1) { /* set up: an evaluator with another model is refused */
            struct train_ps_eval_opts other = base;
            other.model.hidden[0] = 6;
            struct train_ps_model om;
            ck_assert_int_eq(train_ps_model_init(&om, &other.model, 2, TRAIN_PS_BALANCED, &err), 0);
            size_t onp = train_model_nparams(om.model);
            train_ps_model_free(&om);
            float *o = calloc(onp, sizeof *o);
            ck_assert_ptr_nonnull(o);
            ck_assert_int_eq(train_ps_eval_final(&other, o, onp, &res, &err), SL_EPROTO);
            /* (either server's refusal may come first) */
            ck_assert_msg(strstr(err.msg, "parameter server ") != NULL && strstr(err.msg, ") refused: ") != NULL &&
                              strstr(err.msg, "hidden=6") != NULL,
                          "%s", err.msg);
            free(o);
        }
    }
    struct eval_run ev = {.o = base, .np = np};
    ev.params = calloc(np, sizeof *ev.params);
    ck_assert_ptr_nonnull(ev.params);
    ck_assert_int_eq(pthread_create(&ev.tid, NULL, eval_main, &ev), 0);
    /* worker 1 done (one round of its final pull): the evaluator waits on */
    uint32_t waiting = 0;
    ck_assert_msg(train_ps_pull_final_try(w[1], p1, NULL, &waiting, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(waiting, 1);
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    ck_assert_int_eq(__atomic_load_n(&ev.done, __ATOMIC_SEQ_CST), 0);
    uint64_t gs = 0;
    ck_assert_msg(train_ps_pull_final(w[0], p, &gs, NULL, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(gs, 6);
    ck_assert_msg(train_ps_pull_final(w[1], p1, NULL, NULL, &err) == 0, "%s", err.msg);
    ck_assert(memcmp(p, p1, np * sizeof *p) == 0);
    train_ps_client_close(w[0]);
    train_ps_client_close(w[1]);
    pthread_join(ev.tid, NULL);
    ck_assert_msg(ev.rc == 0, "%s", ev.err.msg);
    ck_assert(memcmp(ev.params, p, np * sizeof *p) == 0);
    ck_assert_uint_eq(ev.res.global_step, 6);
    ck_assert_uint_ge(ev.res.rounds, 1);
    for (int s = 0; s < 2; s++) {
        pthread_join(sr[s].tid, NULL);
        ck_assert_msg(sr[s].rc == 0, "%s", sr[s].err.msg);
        ck_assert_int_eq(sr[s].st.evaluator, TRAIN_PS_EVAL_BYE);
        ck_assert_int_eq(sr[s].st.evaluator_served, 1);
        ck_assert_uint_eq(sr[s].st.pushes, 6);
        ck_assert_uint_eq(sr[s].st.lost, 0);
        ck_assert_uint_eq(sr[s].st.bad_messages, 1); /* the other model's pull, refused by both */
    }
    free(ev.params);
    free(p);
    free(p1);
    free(g);
    train_ps_model_free(&pm);
    zmq_ctx_term(ctx);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_ps_eval");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_evaluator_is_no_worker);
    tcase_add_test(tc, test_expected_evaluator_lost);
    tcase_add_test(tc, test_eval_final_reads_the_final_weights);
    suite_add_tcase(s, tc);
    return s;
}
