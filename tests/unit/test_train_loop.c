/* train_loop's control value (opts.control, train_loop_control, the
 * elastic mode's decision): summed across two workers joined by a real
 * ring over ipc:// (threads in this process) in the row count's
 * all-reduce, for one run only; carried by replica 0 alone; absent, and
 * the weights bit-identical, without opts.control; a plain ring job's
 * stop count; refused in parameter-server mode. The training itself is integration_train's. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "sl_test.h"
#include "train_loop.h"

#define ROWS 4
#define INPUTS 8
#define STEPS 3

static uint8_t images[ROWS * INPUTS];
static int64_t labels[ROWS];

static void schema(struct sl_wire_welcome *w)
{
    memset(w, 0, sizeof *w);
    w->feeders = 1;
    w->batch = ROWS;
    w->ntensors = 2;
    w->fields[0] = (struct sl_wire_field){.name = "image", .name_len = 5, .dtype = SL_WIRE_UINT8, .rank = 1};
    w->fields[0].dims[0] = INPUTS;
    w->fields[1] = (struct sl_wire_field){.name = "label", .name_len = 5, .dtype = SL_WIRE_INT64, .rank = 0};
}

/* worker w's replica r: ROWS rows, their values depending on both */
static void piece(struct client_piece *p, uint32_t w, uint32_t r)
{
    memset(p, 0, sizeof *p);
    p->worker = w;
    p->replica = r;
    p->rows = ROWS;
    p->ntensors = 2;
    p->t[0] = (struct client_tensor){
        .name = "image", .dtype = SL_WIRE_UINT8, .rank = 2, .data = images, .bytes = sizeof images};
    p->t[0].dims[0] = ROWS;
    p->t[0].dims[1] = INPUTS;
    p->t[1] = (struct client_tensor){
        .name = "label", .dtype = SL_WIRE_INT64, .rank = 1, .data = labels, .bytes = sizeof labels};
    p->t[1].dims[0] = ROWS;
}

static struct train_loop_opts loop_opts(uint32_t worker, uint32_t workers, uint32_t replicas, int control)
{
    struct train_loop_opts o = {.input = "image",
                                .label = "label",
                                .replicas = replicas,
                                .worker = worker,
                                .workers = workers,
                                .control = control};
    o.model.classes = 3;
    o.model.seed = 7;
    o.model.lr = 0.1f;
    o.model.momentum = 0.9f;
    return o;
}

struct worker_arg {
    uint32_t worker;
    int control;
    const char *eps[2];
    float sent[STEPS];    /* train_loop_control before each run (-1: not called) */
    float got[STEPS];     /* res.control */
    uint64_t rows[STEPS]; /* res.rows */
    uint64_t hash;
    int rc;
    char msg[SL_ERROR_MSG_MAX];
};

static void *worker_main(void *p)
{
    struct worker_arg *a = p;
    struct sl_error err = {0};
    struct train_ring *ring = NULL;
    struct train_ring_opts ro = {.rank = a->worker, .size = 2, .endpoints = a->eps, .timeout_ms = 5000};
    struct train_loop *l = NULL;
    struct sl_wire_welcome w;
    schema(&w);
    struct train_loop_opts o = loop_opts(a->worker, 2, 1, a->control);
    a->rc = train_ring_open(&ring, &ro, &err);
    o.ring = ring;
    if (a->rc == 0)
        a->rc = train_loop_create(&l, &o, &w, &err);
    struct client_piece pc;
    piece(&pc, a->worker, 0);
    for (int s = 0; a->rc == 0 && s < STEPS; s++) {
        if (a->sent[s] >= 0)
            train_loop_control(l, a->sent[s]);
        struct train_step_result res;
        a->rc = train_loop_step(l, &pc, 1, &res, &err);
        a->got[s] = res.control;
        a->rows[s] = res.rows;
    }
    if (a->rc == 0)
        a->hash = train_loop_weights_hash(l);
    snprintf(a->msg, sizeof a->msg, "%s", err.msg);
    train_loop_destroy(l);
    train_ring_close(ring);
    return NULL;
}

/* Two workers, each sending sent[w][s] before run s (-1: no call). */
static void run_two(struct worker_arg *a, int control, const float sent[2][STEPS], const char *tag)
{
    static char eps[2][256];
    pthread_t t[2];
    for (uint32_t k = 0; k < 2; k++)
        snprintf(eps[k], sizeof eps[k], "ipc://%s/%s-%u.sock", sl_test_dir(), tag, k);
    for (uint32_t k = 0; k < 2; k++) {
        memset(&a[k], 0, sizeof a[k]);
        a[k].worker = k;
        a[k].control = control;
        a[k].eps[0] = eps[0];
        a[k].eps[1] = eps[1];
        memcpy(a[k].sent, sent[k], sizeof a[k].sent);
        ck_assert_int_eq(pthread_create(&t[k], NULL, worker_main, &a[k]), 0);
    }
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    for (int k = 0; k < 2; k++)
        ck_assert_msg(a[k].rc == 0, "worker %d: %s", k, a[k].msg);
}

static void fill_data(void)
{
    for (size_t i = 0; i < sizeof images; i++)
        images[i] = (uint8_t)(i * 37 % 251);
    for (int i = 0; i < ROWS; i++)
        labels[i] = i % 3;
}

START_TEST(test_control_summed_across_workers)
{
    fill_data();
    /* run 0: 1 + 2; run 1: nothing set (the value of run 0 is not kept);
     * run 2: worker 0's 1 alone, the elastic decision's shape */
    static const float sent[2][STEPS] = {{1, -1, 1}, {2, -1, 0}};
    struct worker_arg a[2];
    run_two(a, 1, sent, "ctl");
    for (int k = 0; k < 2; k++) {
        ck_assert_float_eq(a[k].got[0], 3.0f);
        ck_assert_float_eq(a[k].got[1], 0.0f);
        ck_assert_float_eq(a[k].got[2], 1.0f);
        for (int s = 0; s < STEPS; s++)
            ck_assert_uint_eq(a[k].rows[s], 2 * ROWS); /* the row count beside it is unchanged */
    }
    ck_assert_uint_eq(a[0].hash, a[1].hash);
    /* without opts.control: no control sum (train_loop_control ignored),
     * and the same weights bit for bit */
    struct worker_arg b[2];
    run_two(b, 0, sent, "plain");
    for (int k = 0; k < 2; k++) {
        for (int s = 0; s < STEPS; s++) {
            ck_assert_float_eq(b[k].got[s], 0.0f);
            ck_assert_uint_eq(b[k].rows[s], 2 * ROWS);
        }
        ck_assert_uint_eq(b[k].hash, a[k].hash);
    }
}
END_TEST

/* A plain ring job's stop (train_main_run.c): each worker sends 1 from
 * the run after its signal on, 0 before; every worker gets the same count,
 * exact, for the same run, and the weights are those of a run without the
 * control, bit for bit */
START_TEST(test_control_stop_counts)
{
    fill_data();
    static const float sent[2][STEPS] = {{0, 1, 1}, {0, 0, 1}};
    struct worker_arg a[2], b[2];
    run_two(a, 1, sent, "stop");
    run_two(b, 0, sent, "nostop");
    for (int k = 0; k < 2; k++) {
        ck_assert_float_eq(a[k].got[0], 0.0f);
        ck_assert_float_eq(a[k].got[1], 1.0f);
        ck_assert_float_eq(a[k].got[2], 2.0f);
        ck_assert_uint_eq(a[k].hash, b[k].hash);
    }
}
END_TEST

START_TEST(test_control_replica_zero_carries_it)
{
    fill_data();
    /* one worker, 2 replicas: the value counts once, not once a replica */
    struct sl_wire_welcome w;
    schema(&w);
    struct train_loop_opts o = loop_opts(0, 1, 2, 1);
    struct train_loop *l = NULL;
    struct sl_error err = {0};
    ck_assert_msg(train_loop_create(&l, &o, &w, &err) == 0, "%s", err.msg);
    struct client_piece pcs[2];
    piece(&pcs[0], 0, 0);
    piece(&pcs[1], 0, 1);
    struct train_step_result res;
    train_loop_control(l, 5.0f);
    ck_assert_msg(train_loop_step(l, pcs, 2, &res, &err) == 0, "%s", err.msg);
    ck_assert_float_eq(res.control, 5.0f);
    ck_assert_uint_eq(res.rows, 2 * ROWS);
    /* a hostile value is summed as it is, and still for one run only */
    train_loop_control(l, -1e30f);
    ck_assert_msg(train_loop_step(l, pcs, 2, &res, &err) == 0, "%s", err.msg);
    ck_assert_float_eq(res.control, -1e30f);
    ck_assert_msg(train_loop_step(l, pcs, 2, &res, &err) == 0, "%s", err.msg);
    ck_assert_float_eq(res.control, 0.0f);
    train_loop_destroy(l);
}
END_TEST

START_TEST(test_control_refused_in_ps_mode)
{
    struct sl_wire_welcome w;
    schema(&w);
    static const char *const servers[1] = {"ipc:///nonexistent/ps0"};
    struct train_loop_opts o = loop_opts(0, 2, 1, 1);
    o.mode = TRAIN_STRATEGY_PS;
    o.ps = servers;
    o.nps = 1;
    struct train_loop *l = NULL;
    struct sl_error err = {0};
    ck_assert_int_eq(train_loop_create(&l, &o, &w, &err), SL_EINVAL);
    ck_assert_ptr_null(l);
    ck_assert_str_eq(err.msg, "a control value rides on the row count's all_reduce across workers: not in "
                              "parameter-server mode (its row count stays within the worker)");
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_loop");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 25);
    tcase_add_test(tc, test_control_summed_across_workers);
    tcase_add_test(tc, test_control_stop_counts);
    tcase_add_test(tc, test_control_replica_zero_carries_it);
    tcase_add_test(tc, test_control_refused_in_ps_mode);
    suite_add_tcase(s, tc);
    return s;
}
