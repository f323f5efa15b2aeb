/* train_ps (issue #18, the first part of the parameter servers): the
 * placement of variables on servers, round robin and balanced, with
 * colocation groups, exactly as train_ps.h states it; the model's variable
 * list; and train_sgd_apply, the arithmetic a server will apply, equal bit
 * for bit to the model's own step. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sl_clock.h"
#include "sl_test.h"
#include "train_model.h"
#include "train_ps.h"
#include "sl_crc32c.h"
#include "train_ps_ckpt.h"

static void expect_place(const size_t *sizes, const int *group, size_t n, uint32_t nps, enum train_ps_placement how,
                         const uint32_t *want)
{
    uint32_t got[16];
    struct sl_error err = {0};
    ck_assert_msg(train_ps_place(sizes, group, n, nps, how, got, &err) == 0, "%s", err.msg);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "variable %zu: server %u, want %u", i, got[i], want[i]);
}

START_TEST(test_round_robin)
{
    const size_t sizes[5] = {100, 10, 50, 60, 5};
    expect_place(sizes, NULL, 5, 2, TRAIN_PS_ROUND_ROBIN, (const uint32_t[]){0, 1, 0, 1, 0});
    expect_place(sizes, NULL, 5, 3, TRAIN_PS_ROUND_ROBIN, (const uint32_t[]){0, 1, 2, 0, 1});
    expect_place(sizes, NULL, 5, 1, TRAIN_PS_ROUND_ROBIN, (const uint32_t[]){0, 0, 0, 0, 0});
    expect_place(sizes, NULL, 5, 8, TRAIN_PS_ROUND_ROBIN, (const uint32_t[]){0, 1, 2, 3, 4});
    /* 1 and 3 colocated: the units are 0, {1, 3}, 2, 4 */
    const int group[5] = {-1, 7, -1, 7, -1};
    expect_place(sizes, group, 5, 2, TRAIN_PS_ROUND_ROBIN, (const uint32_t[]){0, 1, 0, 1, 1});
    /* every variable in one group: one server */
    const int all[5] = {0, 0, 0, 0, 0};
    expect_place(sizes, all, 5, 3, TRAIN_PS_ROUND_ROBIN, (const uint32_t[]){0, 0, 0, 0, 0});
}
END_TEST

START_TEST(test_balanced)
{
    const size_t sizes[5] = {100, 10, 50, 60, 5};
    /* 100 -> 0; 60 -> 1; 50 -> 1 (60 < 100); 10 -> 0 (100 < 110); 5 -> 0 (110 = 110: the lower) */
    expect_place(sizes, NULL, 5, 2, TRAIN_PS_BALANCED, (const uint32_t[]){0, 0, 1, 1, 0});
    /* {1, 3} is one unit of 70: 100 -> 0, 70 -> 1, 50 -> 1 (70 < 100), 5 -> 0 */
    const int group[5] = {-1, 7, -1, 7, -1};
    expect_place(sizes, group, 5, 2, TRAIN_PS_BALANCED, (const uint32_t[]){0, 1, 1, 1, 0});
    /* equal sizes: creation order, lowest server on ties: round robin */
    const size_t same[4] = {8, 8, 8, 8};
    expect_place(same, NULL, 4, 3, TRAIN_PS_BALANCED, (const uint32_t[]){0, 1, 2, 0});
}
END_TEST

START_TEST(test_refused)
{
    const size_t sizes[2] = {1, 2};
    uint32_t owner[2] = {77, 77};
    struct sl_error err = {0};
    ck_assert_int_eq(train_ps_place(sizes, NULL, 2, 0, TRAIN_PS_ROUND_ROBIN, owner, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "0 parameter servers (1 to 256)");
    ck_assert_int_eq(train_ps_place(sizes, NULL, 2, 257, TRAIN_PS_ROUND_ROBIN, owner, &err), SL_EINVAL);
    ck_assert_int_eq(train_ps_place(sizes, NULL, TRAIN_PS_MAX_VARS + 1, 2, TRAIN_PS_ROUND_ROBIN, owner, &err),
                     SL_EINVAL);
    ck_assert_str_eq(err.msg, "4097 variables (at most 4096)");
    ck_assert_int_eq(train_ps_place(sizes, (const int[]){-1, -2}, 2, 2, TRAIN_PS_BALANCED, owner, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "variable 1: colocation group -2 (-1: none, or >= 0)");
    ck_assert_int_eq(train_ps_place(sizes, NULL, 2, 2, (enum train_ps_placement)9, owner, &err), SL_EINVAL);
    ck_assert_uint_eq(owner[0], 77);
    ck_assert_uint_eq(owner[1], 77);
    ck_assert_int_eq(train_ps_place(sizes, NULL, 0, 2, TRAIN_PS_BALANCED, owner, &err), 0);
}
END_TEST

/* The MLP 784-128-10: W1, b1, W2, b2 cover the parameters in order;
 * round robin on 2 servers alternates, balanced puts W1 alone. */
START_TEST(test_model_variables)
{
    struct train_model_config cfg = {.inputs = 784, .classes = 10, .nhidden = 1, .hidden = {128}, .seed = 1};
    struct train_model *m;
    struct sl_error err = {0};
    ck_assert_int_eq(train_model_create(&m, &cfg, &err), 0);
    struct train_model_var v[TRAIN_MODEL_MAX_VARS];
    size_t n = train_model_variables(m, v, TRAIN_MODEL_MAX_VARS);
    ck_assert_uint_eq(n, 4);
    ck_assert_uint_eq(train_model_variables(m, v, 1), 4); /* the count, whatever max */
    const char kinds[4] = {'W', 'b', 'W', 'b'};
    const size_t counts[4] = {784 * 128, 128, 128 * 10, 10};
    size_t at = 0, sizes[4];
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(v[i].kind, kinds[i]);
        ck_assert_int_eq(v[i].layer, (int)i / 2 + 1);
        ck_assert_uint_eq(v[i].offset, at);
        ck_assert_uint_eq(v[i].count, counts[i]);
        at += v[i].count;
        sizes[i] = v[i].count;
    }
    ck_assert_uint_eq(at, train_model_nparams(m));
    expect_place(sizes, NULL, 4, 2, TRAIN_PS_ROUND_ROBIN, (const uint32_t[]){0, 1, 0, 1});
    expect_place(sizes, NULL, 4, 2, TRAIN_PS_BALANCED, (const uint32_t[]){0, 1, 1, 1});
    train_model_destroy(m);
}
END_TEST

/* train_sgd_apply on a model's parameters and velocity, variable by
 * variable (as the servers will), equals the model's own step bit for bit,
 * over a few steps with momentum. */
START_TEST(test_sgd_apply_is_the_models_step)
{
    struct train_model_config cfg = {
        .inputs = 20, .classes = 3, .nhidden = 1, .hidden = {7}, .seed = 9, .lr = 0.05f, .momentum = 0.9f};
    struct train_model *a, *b;
    struct sl_error err = {0};
    ck_assert_int_eq(train_model_create(&a, &cfg, &err), 0);
    ck_assert_int_eq(train_model_create(&b, &cfg, &err), 0);
    size_t np = train_model_nparams(a);
    float *g = malloc(np * sizeof *g);
    ck_assert_ptr_nonnull(g);
    struct train_model_var v[TRAIN_MODEL_MAX_VARS];
    size_t nv = train_model_variables(b, v, TRAIN_MODEL_MAX_VARS);
    uint32_t state = 12345;
    for (int step = 0; step < 5; step++) {
        for (size_t k = 0; k < np; k++) {
            state = state * 1664525u + 1013904223u;
            g[k] = (float)((int)(state >> 8) % 2001 - 1000) / 3000.0f;
        }
        ck_assert_int_eq(train_model_sgd_step(a, g, &err), 0);
        for (size_t i = nv; i-- > 0;) /* any order: the variables are disjoint */
            train_sgd_apply(train_model_params(b) + v[i].offset, train_model_velocity(b) + v[i].offset, g + v[i].offset,
                            v[i].count, cfg.lr, cfg.momentum);
    }
    ck_assert(memcmp(train_model_params(a), train_model_params(b), np * sizeof(float)) == 0);
    ck_assert(memcmp(train_model_velocity(a), train_model_velocity(b), np * sizeof(float)) == 0);
    free(g);
    train_model_destroy(a);
    train_model_destroy(b);
}
END_TEST

struct server_run {
    struct train_ps_server_opts o;
    struct train_ps_server_stats st;
    struct sl_error err;
    int rc;
    pthread_t tid;
    char ep[128];
};

static void *server_main(void *arg)
{
    struct server_run *r = arg;
    r->rc = train_ps_serve(&r->o, &r->st, &r->err);
    return NULL;
}

/* Two servers (balanced placement of an MLP's variables) and one worker:
 * the pulled values are the seeded model's; three pushes of gradients
 * leave exactly what the model's own steps give (bit for bit), with
 * staleness 0 and three global steps; BYE ends both servers. */
START_TEST(test_servers_apply_the_models_steps)
{
    struct train_model_config cfg = {
        .inputs = 30, .classes = 4, .nhidden = 1, .hidden = {9}, .seed = 3, .lr = 0.1f, .momentum = 0.5f};
    struct train_model *m;
    struct sl_error err = {0};
    ck_assert_int_eq(train_model_create(&m, &cfg, &err), 0);
    size_t np = train_model_nparams(m);
    struct train_model_var v[TRAIN_MODEL_MAX_VARS];
    size_t nv = train_model_variables(m, v, TRAIN_MODEL_MAX_VARS), sizes[TRAIN_MODEL_MAX_VARS];
    for (size_t i = 0; i < nv; i++)
        sizes[i] = v[i].count;
    uint32_t owner[TRAIN_MODEL_MAX_VARS];
    ck_assert_int_eq(train_ps_place(sizes, NULL, nv, 2, TRAIN_PS_BALANCED, owner, &err), 0);
    struct train_ps_layout l = {.vars = v, .nvars = nv, .owner = owner, .nps = 2};
    ck_assert_uint_eq(train_ps_elements(&l, 0) + train_ps_elements(&l, 1), np);
    float *init = malloc(np * sizeof *init), *got = malloc(np * sizeof *got), *g = malloc(np * sizeof *g);
    ck_assert(init != NULL && got != NULL && g != NULL);
    memcpy(init, train_model_params(m), np * sizeof *init);
    void *ctx = zmq_ctx_new();
    struct server_run sr[2];
    const char *eps[2];
    for (int s = 0; s < 2; s++) {
        memset(&sr[s], 0, sizeof sr[s]);
        snprintf(sr[s].ep, sizeof sr[s].ep, "ipc://%s", sl_test_path(s ? "ps1" : "ps0"));
        eps[s] = sr[s].ep;
        sr[s].o = (struct train_ps_server_opts){.ctx = ctx,
                                                .listen = sr[s].ep,
                                                .index = (uint32_t)s,
                                                .layout = l,
                                                .init = init,
                                                .lr = cfg.lr,
                                                .momentum = cfg.momentum,
                                                .workers = 1,
                                                .worker_timeout_ms = 20000};
        ck_assert_int_eq(pthread_create(&sr[s].tid, NULL, server_main, &sr[s]), 0);
    }
    struct train_ps_client *c;
    ck_assert_int_eq(train_ps_client_open(&c, ctx, eps, &l, 0, 5000, NULL, &err), 0);
    uint64_t step = 99, stale = 99;
    ck_assert_msg(train_ps_pull(c, got, &step, &err) == 0, "%s", err.msg);
    ck_assert(memcmp(got, init, np * sizeof *got) == 0);
    ck_assert_uint_eq(step, 0);
    uint32_t state = 77;
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < np; i++) {
            state = state * 1664525u + 1013904223u;
            g[i] = (float)((int)(state >> 8) % 2001 - 1000) / 1000.0f;
        }
        ck_assert_int_eq(train_model_sgd_step(m, g, &err), 0);
        ck_assert_msg(train_ps_push(c, g, 1, &stale, &err) == 0, "%s", err.msg);
        ck_assert_uint_eq(stale, 0);
        ck_assert_msg(train_ps_pull(c, got, &step, &err) == 0, "%s", err.msg);
        ck_assert_uint_eq(step, (uint64_t)k + 1);
        ck_assert(memcmp(got, train_model_params(m), np * sizeof *got) == 0);
    }
    ck_assert_msg(train_ps_pull_final(c, got, &step, NULL, &err) == 0, "%s", err.msg);
    train_ps_client_close(c);
    for (int s = 0; s < 2; s++) {
        pthread_join(sr[s].tid, NULL);
        ck_assert_msg(sr[s].rc == 0, "server %d: %s", s, sr[s].err.msg);
        ck_assert_uint_eq(sr[s].st.pushes, 3);
        ck_assert_uint_eq(sr[s].st.pulls, 5);
        ck_assert_uint_eq(sr[s].st.version, 3);
        ck_assert_uint_eq(sr[s].st.bad_messages, 0);
    }
    ck_assert_uint_eq(sr[0].st.global_step, 3);
    ck_assert_uint_eq(sr[1].st.global_step, 0);
    zmq_ctx_term(ctx);
    free(init);
    free(got);
    free(g);
    train_model_destroy(m);
}
END_TEST

/* A server that is not there: the pull fails within the timeout, naming it. */
START_TEST(test_silent_server_named)
{
    struct train_model_var v[1] = {{.kind = 'W', .layer = 1, .offset = 0, .count = 4}};
    uint32_t owner[1] = {0};
    struct train_ps_layout l = {.vars = v, .nvars = 1, .owner = owner, .nps = 1};
    void *ctx = zmq_ctx_new();
    const char *eps[1] = {"ipc:///nonexistent-dir/ps0"};
    struct train_ps_client *c;
    struct sl_error err = {0};
    ck_assert_int_eq(train_ps_client_open(&c, ctx, eps, &l, 0, 300, NULL, &err), 0);
    float p[4];
    ck_assert_int_eq(train_ps_pull(c, p, NULL, &err), SL_ETIMEOUT);
    ck_assert_str_eq(err.msg, "parameter server 0 (ipc:///nonexistent-dir/ps0) did not answer within 0.3 s");
    train_ps_client_close(c);
    zmq_ctx_term(ctx);
}
END_TEST

/* The session raw messages carry (offset 40). */
static uint64_t raw_session;

/* A raw message from a DEALER: header (wire version 2), then the frames
 * given (len (size_t)-1: none). */
static void send_raw(void *d, int type, uint32_t worker, uint32_t flags, uint64_t version, uint64_t incarnation,
                     const void *body, size_t len, const void *extra, size_t extra_len)
{
    uint8_t h[TRAIN_PS_HEADER] = {0};
    memcpy(h, "SLPS", 4);
    h[4] = TRAIN_PS_WIRE_VERSION;
    h[5] = (uint8_t)type;
    for (int k = 0; k < 4; k++) {
        h[8 + k] = (uint8_t)(worker >> (8 * k));
        h[12 + k] = (uint8_t)(flags >> (8 * k));
    }
    for (int k = 0; k < 8; k++) {
        h[16 + k] = (uint8_t)(version >> (8 * k));
        h[32 + k] = (uint8_t)(incarnation >> (8 * k));
        h[40 + k] = (uint8_t)(raw_session >> (8 * k));
    }
    int more_body = len != (size_t)-1, more_extra = extra_len != (size_t)-1;
    ck_assert_int_ge(zmq_send(d, h, sizeof h, more_body ? ZMQ_SNDMORE : 0), 0);
    if (more_body)
        ck_assert_int_ge(zmq_send(d, body, len, more_extra ? ZMQ_SNDMORE : 0), 0);
    if (more_extra)
        ck_assert_int_ge(zmq_send(d, extra, extra_len, 0), 0);
}

/* An ERROR reply: its text into why (NUL-terminated), its incarnation. */
static uint64_t recv_error(void *d, char *why, size_t cap)
{
    uint8_t h[TRAIN_PS_HEADER];
    ck_assert_int_eq(zmq_recv(d, h, sizeof h, 0), TRAIN_PS_HEADER);
    ck_assert_int_eq(h[5], TRAIN_PS_ERROR);
    int n = zmq_recv(d, why, cap - 1, 0);
    ck_assert_int_gt(n, 0);
    why[n < (int)cap - 1 ? n : (int)cap - 1] = '\0';
    uint64_t inc = 0;
    for (int k = 7; k >= 0; k--)
        inc = inc << 8 | h[32 + k];
    return inc;
}

/* Hostile messages: each gets an ERROR naming what was wrong, is counted,
 * and the server serves on (a good PULL afterwards is answered; BYE ends it). */
START_TEST(test_server_refuses_hostile_messages)
{
    struct train_model_var v[1] = {{.kind = 'W', .layer = 1, .offset = 0, .count = 4}};
    uint32_t owner[1] = {0};
    const float init[4] = {1, 2, 3, 4};
    struct train_ps_layout l = {.vars = v, .nvars = 1, .owner = owner, .nps = 1};
    void *ctx = zmq_ctx_new();
    struct server_run sr;
    memset(&sr, 0, sizeof sr);
    snprintf(sr.ep, sizeof sr.ep, "ipc://%s", sl_test_path("psh"));
    sr.o = (struct train_ps_server_opts){.ctx = ctx,
                                         .listen = sr.ep,
                                         .index = 0,
                                         .layout = l,
                                         .init = init,
                                         .lr = 0.1f,
                                         .workers = 2,
                                         .worker_timeout_ms = 20000};
    ck_assert_int_eq(pthread_create(&sr.tid, NULL, server_main, &sr), 0);
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    ck_assert_int_eq(zmq_connect(d, sr.ep), 0);
    uint8_t h[TRAIN_PS_HEADER];
    char reply[256];
    struct {
        int type, worker, with_body;
        size_t body;
        const char *why;
    } cases[] = {
        {0, 0, 0, 0, "not a parameter-server message"},                             /* type 0 */
        {9, 0, 0, 0, "not a parameter-server message"},                             /* unknown type */
        {1, 2, 0, 0, "worker out of range"},                                        /* worker 2 of 2 */
        {1, -1, 0, 0, "worker out of range"},                                       /* worker 2^32 - 1 */
        {3, 0, 1, 12, "a push of 12 bytes (this server holds 4 floats: 16 bytes)"}, /* PUSH of 3 floats for 4 */
        {3, 0, 0, 0, "a push of 0 bytes (this server holds 4 floats: 16 bytes)"},   /* PUSH without a body */
        {2, 0, 0, 0, "a message of the wrong type or size"},                        /* VALUES sent to a server */
    };
    size_t ncases = sizeof cases / sizeof cases[0];
    for (size_t i = 0; i < ncases; i++) {
        memset(h, 0, sizeof h);
        memcpy(h, "SLPS", 4);
        h[4] = TRAIN_PS_WIRE_VERSION;
        h[5] = (uint8_t)cases[i].type;
        uint32_t w = (uint32_t)cases[i].worker;
        memcpy(h + 8, &w, 4);
        ck_assert_int_ge(zmq_send(d, h, sizeof h, cases[i].with_body ? ZMQ_SNDMORE : 0), 0);
        if (cases[i].with_body) {
            char body[64] = {0};
            ck_assert_int_ge(zmq_send(d, body, cases[i].body, 0), 0);
        }
        ck_assert_int_eq(zmq_recv(d, h, sizeof h, 0), TRAIN_PS_HEADER);
        ck_assert_int_eq(h[5], TRAIN_PS_ERROR);
        int n = zmq_recv(d, reply, sizeof reply - 1, 0);
        ck_assert_int_gt(n, 0);
        reply[n] = '\0';
        ck_assert_str_eq(reply, cases[i].why);
    }
    /* a short header frame */
    ck_assert_int_ge(zmq_send(d, "SLPS", 4, 0), 0);
    ck_assert_int_eq(zmq_recv(d, h, sizeof h, 0), TRAIN_PS_HEADER);
    ck_assert_int_eq(h[5], TRAIN_PS_ERROR);
    ck_assert_int_gt(zmq_recv(d, reply, sizeof reply, 0), 0);
    /* a version-1 header (the wire before the incarnation) */
    memset(h, 0, sizeof h);
    memcpy(h, "SLPS", 4);
    h[4] = 1;
    h[5] = TRAIN_PS_PULL;
    ck_assert_int_ge(zmq_send(d, h, 32, 0), 0);
    uint64_t inc = recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "not a parameter-server message");
    ck_assert_uint_ne(inc, 0);
    /* pushes of the right size that must change nothing (issue #24 item 1) */
    float nan4[4] = {0.5f, 0.25f, __builtin_nanf(""), 1}, inf4[4] = {__builtin_inff(), 0, 0, 0},
          ninf4[4] = {0, 0, 0, -__builtin_inff()}, fine[4] = {1, 1, 1, 1};
    char want[256];
    uint8_t pos1[CLIENT_INPUT_POSITION_BYTES];
    client_input_position_encode(&(struct client_input_position){.seq = 1, .step = 1, .replicas = 1}, pos1);
    send_raw(d, TRAIN_PS_PUSH, 0, 1, 0, inc, nan4, sizeof nan4, pos1, sizeof pos1);
    ck_assert_uint_eq(recv_error(d, reply, sizeof reply), inc);
    ck_assert_str_eq(reply, "a gradient with a non-finite value (nan at element 2 of 4): nothing applied");
    send_raw(d, TRAIN_PS_PUSH, 0, 1, 0, inc, inf4, sizeof inf4, pos1, sizeof pos1);
    recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "a gradient with a non-finite value (inf at element 0 of 4): nothing applied");
    send_raw(d, TRAIN_PS_PUSH, 0, 1, 0, inc, ninf4, sizeof ninf4, pos1, sizeof pos1);
    recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "a gradient with a non-finite value (-inf at element 3 of 4): nothing applied");
    send_raw(d, TRAIN_PS_PUSH, 0, 1, UINT64_C(1) << 63, inc, fine, sizeof fine, NULL, (size_t)-1);
    recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "a push computed from version 9223372036854775808, newer than this server's 0");
    send_raw(d, TRAIN_PS_PUSH, 0, 1, 0, inc, fine, sizeof fine, "x", 1); /* a third frame, not a position */
    recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "a push's input position: 1 bytes (expected 40)");
    send_raw(d, TRAIN_PS_PUSH, 0, 1, 0, inc, fine, sizeof fine, NULL, (size_t)-1); /* no position */
    recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "a push without its input position (a PUSH takes 3 frames: header, gradient, position)");
    { /* a stray fourth frame */
        uint8_t hh[TRAIN_PS_HEADER] = {0};
        memcpy(hh, "SLPS", 4);
        hh[4] = TRAIN_PS_WIRE_VERSION;
        hh[5] = TRAIN_PS_PUSH;
        ck_assert_int_ge(zmq_send(d, hh, sizeof hh, ZMQ_SNDMORE), 0);
        ck_assert_int_ge(zmq_send(d, fine, sizeof fine, ZMQ_SNDMORE), 0);
        ck_assert_int_ge(zmq_send(d, pos1, sizeof pos1, ZMQ_SNDMORE), 0);
        ck_assert_int_ge(zmq_send(d, "x", 1, 0), 0);
        recv_error(d, reply, sizeof reply);
        ck_assert_str_eq(reply, "a message of 4 frames (a PUSH takes 3)");
    }
    send_raw(d, TRAIN_PS_PUSH, 0, 1, 0, inc ^ 1, fine, sizeof fine, NULL, (size_t)-1);
    recv_error(d, reply, sizeof reply);
    snprintf(want, sizeof want,
             "a push computed on incarnation %016" PRIx64 " of parameter server 0, which now runs "
             "as %016" PRIx64 " (restarted: the values it was computed from are gone)",
             inc ^ 1, inc);
    ck_assert_str_eq(reply, want);
    send_raw(d, TRAIN_PS_PUSH, 0, 1, 0, 0, fine, sizeof fine, NULL, (size_t)-1); /* no incarnation at all */
    recv_error(d, reply, sizeof reply);
    ck_assert_ptr_nonnull(strstr(reply, "a push computed on incarnation 0000000000000000 of parameter server 0"));
    send_raw(d, TRAIN_PS_PULL, 0, 0, 0, inc ^ 2, NULL, (size_t)-1, NULL, (size_t)-1);
    recv_error(d, reply, sizeof reply);
    snprintf(want, sizeof want,
             "worker 0 pulled before from incarnation %016" PRIx64 " of parameter server 0, which "
             "now runs as %016" PRIx64 ": the server restarted and what it held is gone",
             inc ^ 2, inc);
    ck_assert_str_eq(reply, want);
    send_raw(d, TRAIN_PS_BYE, 0, 0, 0, inc, "x", 1, NULL, (size_t)-1); /* BYE takes no body */
    recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "a message of 2 frames (a message of its type takes 1)");
    send_raw(d, TRAIN_PS_PULL, 0, 0, 0, inc, "a", 1, "b", 1);
    recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "a message of 3 frames (a PULL takes 1 or 2)");
    /* still serving */
    struct train_ps_client *c;
    struct sl_error err = {0};
    const char *eps[1] = {sr.ep};
    ck_assert_int_eq(train_ps_client_open(&c, ctx, eps, &l, 1, 5000, NULL, &err), 0);
    float p[4];
    uint64_t step = 99;
    ck_assert_msg(train_ps_pull(c, p, &step, &err) == 0, "%s", err.msg);
    ck_assert(memcmp(p, init, sizeof p) == 0); /* nothing applied */
    ck_assert_uint_eq(step, 0);                /* no global step */
    train_ps_client_close(c);                  /* worker 1's BYE before any final pull: it failed */
    send_raw(d, TRAIN_PS_BYE, 0, 0, 0, inc, NULL, (size_t)-1, NULL, (size_t)-1);
    pthread_join(sr.tid, NULL);
    ck_assert_int_eq(sr.rc, SL_EPROTO);
    ck_assert_str_eq(sr.err.msg, "parameter server 0: worker 1 left before its final pull (it failed or was stopped; "
                                 "2 in all): the job did not finish");
    ck_assert_uint_eq(sr.st.left_early, 2);
    ck_assert_uint_eq(sr.st.incarnation, inc);
    ck_assert_uint_eq(sr.st.bad_messages, ncases + 1 + 13);
    ck_assert_uint_eq(sr.st.pushes, 0);
    ck_assert_uint_eq(sr.st.version, 0);
    ck_assert_uint_eq(sr.st.global_step, 0);
    ck_assert_uint_eq(sr.st.pulls, 1);
    int linger = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(d);
    zmq_ctx_term(ctx);
}
END_TEST

/* The input width a description names, and every malformed one refused. */
START_TEST(test_config_inputs)
{
    static const struct {
        const char *text;
        uint32_t want;
    } cases[] = {
        {"inputs=784 classes=10", 784},
        {"inputs=1", 1},
        {"inputs=16777216 x", 16777216},
        {"inputs=16777217 x", 0},
        {"inputs=0 x", 0},
        {"inputs=99999999999 x", 0},
        {"inputs=12x", 0},
        {"inputs= 12", 0},
        {"inputs=", 0},
        {"", 0},
        {"classes=3 inputs=12", 0},
        {"inputs=-3", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(train_ps_config_inputs(cases[i].text, strlen(cases[i].text)) == cases[i].want, "'%s'",
                      cases[i].text);
    /* a length that stops inside the number */
    ck_assert_uint_eq(train_ps_config_inputs("inputs=784", 9), 78);
}
END_TEST

struct setup_arg {
    struct train_ps_model *pm;
    int calls; /* atomic: the server's thread counts, the test reads (ZeroMQ's ordering is not TSan's) */
};

static int setup_from(void *arg, const char *config, size_t len, const struct train_ps_layout **layout,
                      const float **init, struct sl_error *err)
{
    struct setup_arg *a = arg;
    __atomic_fetch_add(&a->calls, 1, __ATOMIC_SEQ_CST);
    if (len != strlen(a->pm->config) || memcmp(config, a->pm->config, len) != 0)
        return sl_error_set(err, SL_EINVAL, "not my model");
    *layout = &a->pm->layout;
    *init = train_model_params(a->pm->model);
    return 0;
}

/* A server that learns its variables from the first worker's description;
 * a second description refused; a final pull waits for every worker, and
 * a worker silent past the timeout is lost: the other's final pull then
 * gets the values, and the server ends with SL_ETIMEOUT naming it. */
START_TEST(test_setup_final_and_lost)
{
    struct train_model_config cfg = {
        .inputs = 5, .classes = 3, .nhidden = 1, .hidden = {4}, .seed = 2, .lr = 0.1f, .momentum = 0.5f};
    struct train_ps_model pm, other;
    struct sl_error err = {0};
    ck_assert_int_eq(train_ps_model_init(&pm, &cfg, 1, TRAIN_PS_ROUND_ROBIN, &err), 0);
    ck_assert_str_eq(pm.config, "inputs=5 classes=3 hidden=4 seed=2 lr=0.100000001 momentum=0.5 servers=1 "
                                "placement=round-robin");
    cfg.hidden[0] = 6;
    ck_assert_int_eq(train_ps_model_init(&other, &cfg, 1, TRAIN_PS_ROUND_ROBIN, &err), 0);
    size_t np = train_model_nparams(pm.model);
    void *ctx = zmq_ctx_new();
    struct setup_arg sa = {.pm = &pm};
    struct server_run sr;
    memset(&sr, 0, sizeof sr);
    snprintf(sr.ep, sizeof sr.ep, "ipc://%s", sl_test_path("pss"));
    sr.o = (struct train_ps_server_opts){.ctx = ctx,
                                         .listen = sr.ep,
                                         .index = 0,
                                         .setup = setup_from,
                                         .setup_arg = &sa,
                                         .lr = 0.1f,
                                         .momentum = 0.5f,
                                         .workers = 2,
                                         .worker_timeout_ms = 1500};
    ck_assert_int_eq(pthread_create(&sr.tid, NULL, server_main, &sr), 0);
    const char *eps[1] = {sr.ep};
    /* before any setup: a push, and a pull whose description is too long */
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    ck_assert_int_eq(zmq_connect(d, sr.ep), 0);
    uint8_t h[TRAIN_PS_HEADER];
    char big[TRAIN_PS_MAX_CONFIG + 1], reply[256];
    memset(big, 'x', sizeof big);
    static const struct {
        int type;
        size_t body;
        const char *why;
    } early[] = {{TRAIN_PS_PUSH, 16, "a push before any pull"},
                 {TRAIN_PS_PULL, TRAIN_PS_MAX_CONFIG + 1, "a model description over 512 bytes"}};
    for (size_t i = 0; i < 2; i++) {
        memset(h, 0, sizeof h);
        memcpy(h, "SLPS", 4);
        h[4] = TRAIN_PS_WIRE_VERSION;
        h[5] = (uint8_t)early[i].type;
        ck_assert_int_ge(zmq_send(d, h, sizeof h, ZMQ_SNDMORE), 0);
        ck_assert_int_ge(zmq_send(d, big, early[i].body, 0), 0);
        ck_assert_int_eq(zmq_recv(d, h, sizeof h, 0), TRAIN_PS_HEADER);
        ck_assert_int_eq(h[5], TRAIN_PS_ERROR);
        int n = zmq_recv(d, reply, sizeof reply - 1, 0);
        ck_assert_int_gt(n, 0);
        reply[n] = '\0';
        ck_assert_str_eq(reply, early[i].why);
    }
    int linger = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(d);
    ck_assert_int_eq(__atomic_load_n(&sa.calls, __ATOMIC_SEQ_CST), 0);
    struct train_ps_client *c0, *c1, *bare;
    ck_assert_int_eq(train_ps_client_open(&bare, ctx, eps, &pm.layout, 0, 5000, NULL, &err), 0);
    float *p = calloc(np, sizeof *p);
    ck_assert_ptr_nonnull(p);
    /* no description before the setup: refused, nothing set up */
    ck_assert_int_eq(train_ps_pull(bare, p, NULL, &err), SL_EPROTO);
    ck_assert_msg(strstr(err.msg, ") refused: a first pull without the model's description") != NULL, "%s", err.msg);
    train_ps_client_close(bare);
    ck_assert_int_eq(train_ps_client_open(&c0, ctx, eps, &pm.layout, 0, 5000, pm.config, &err), 0);
    ck_assert_msg(train_ps_pull(c0, p, NULL, &err) == 0, "%s", err.msg);
    ck_assert(memcmp(p, train_model_params(pm.model), np * sizeof *p) == 0);
    ck_assert_int_eq(__atomic_load_n(&sa.calls, __ATOMIC_SEQ_CST), 1);
    ck_assert_int_eq(train_ps_client_open(&c1, ctx, eps, &other.layout, 1, 5000, other.config, &err), 0);
    ck_assert_int_eq(train_ps_pull(c1, p, NULL, &err), SL_EPROTO);
    ck_assert_msg(strstr(err.msg, "refused: worker 1's model 'inputs=5 classes=3 hidden=6 ") != NULL, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "is not the one this server holds ('inputs=5 classes=3 hidden=4 ") != NULL, "%s",
                  err.msg);
    ck_assert_int_eq(__atomic_load_n(&sa.calls, __ATOMIC_SEQ_CST), 1);
    /* worker 1 falls silent: worker 0's final pull waits until it is lost */
    double t0 = sl_clock_s();
    uint64_t step = 99;
    ck_assert_msg(train_ps_pull_final(c0, p, &step, NULL, &err) == 0, "%s", err.msg);
    double waited = sl_clock_s() - t0;
    ck_assert_msg(waited > 1.0 && waited < 10.0, "waited %.2f s", waited);
    ck_assert_uint_eq(step, 0);
    ck_assert(memcmp(p, train_model_params(pm.model), np * sizeof *p) == 0);
    train_ps_client_close(c0);
    train_ps_client_close(c1);
    pthread_join(sr.tid, NULL);
    ck_assert_int_eq(sr.rc, SL_ETIMEOUT);
    ck_assert_str_eq(sr.err.msg, "parameter server 0: worker 1 was silent for 1.5 s and is lost (1 lost in all); "
                                 "its pushes stopped there");
    ck_assert_uint_eq(sr.st.lost, 1);
    ck_assert_uint_eq(sr.st.bad_messages, 4);
    ck_assert_uint_eq(sr.st.elements, np);
    free(p);
    train_ps_model_free(&pm);
    train_ps_model_free(&other);
    zmq_ctx_term(ctx);
}
END_TEST

/* Descriptions the setup refuses (malformed with control bytes, another
 * model) before the first valid one: each is refused, counted and told,
 * and the server does not stop: the valid one still sets it up (issue #24
 * item 5). */
struct told {
    int n;
    char last[512];
};

static void told_refused(void *arg, uint32_t worker, const char *why)
{
    struct told *t = arg;
    t->n++;
    snprintf(t->last, sizeof t->last, "%u: %s", worker, why);
}

START_TEST(test_setup_survives_bad_descriptions)
{
    struct train_model_config cfg = {
        .inputs = 5, .classes = 3, .nhidden = 1, .hidden = {4}, .seed = 2, .lr = 0.1f, .momentum = 0.5f};
    struct train_ps_model pm, other;
    struct sl_error err = {0};
    ck_assert_int_eq(train_ps_model_init(&pm, &cfg, 1, TRAIN_PS_ROUND_ROBIN, &err), 0);
    cfg.inputs = 6;
    ck_assert_int_eq(train_ps_model_init(&other, &cfg, 1, TRAIN_PS_ROUND_ROBIN, &err), 0);
    size_t np = train_model_nparams(pm.model);
    void *ctx = zmq_ctx_new();
    struct setup_arg sa = {.pm = &pm};
    struct told told = {0};
    struct server_run sr;
    memset(&sr, 0, sizeof sr);
    snprintf(sr.ep, sizeof sr.ep, "ipc://%s", sl_test_path("psb"));
    sr.o = (struct train_ps_server_opts){.ctx = ctx,
                                         .listen = sr.ep,
                                         .index = 0,
                                         .setup = setup_from,
                                         .setup_arg = &sa,
                                         .lr = 0.1f,
                                         .momentum = 0.5f,
                                         .workers = 1,
                                         .worker_timeout_ms = 20000,
                                         .refused = told_refused,
                                         .refused_arg = &told};
    ck_assert_int_eq(pthread_create(&sr.tid, NULL, server_main, &sr), 0);
    const char *eps[1] = {sr.ep};
    struct train_ps_client *rogue, *foreign, *c0;
    float *p = calloc(np, sizeof *p);
    ck_assert_ptr_nonnull(p);
    /* a description with an escape sequence and a newline: refused, the
     * text escaped on both sides */
    ck_assert_int_eq(train_ps_client_open(&rogue, ctx, eps, &pm.layout, 0, 5000, "inputs=5 \x1b[2J\nboom\\", &err), 0);
    ck_assert_int_eq(train_ps_pull(rogue, p, NULL, &err), SL_EPROTO);
    ck_assert_msg(strstr(err.msg, ") refused: not my model") != NULL, "%s", err.msg);
    ck_assert_int_eq(train_ps_client_open(&foreign, ctx, eps, &other.layout, 0, 5000, other.config, &err), 0);
    ck_assert_int_eq(train_ps_pull(foreign, p, NULL, &err), SL_EPROTO);
    ck_assert_int_eq(__atomic_load_n(&sa.calls, __ATOMIC_SEQ_CST), 2);
    ck_assert_int_eq(train_ps_client_open(&c0, ctx, eps, &pm.layout, 0, 5000, pm.config, &err), 0);
    ck_assert_msg(train_ps_pull(c0, p, NULL, &err) == 0, "%s", err.msg);
    ck_assert(memcmp(p, train_model_params(pm.model), np * sizeof *p) == 0);
    ck_assert_msg(train_ps_pull_final(c0, p, NULL, NULL, &err) == 0, "%s", err.msg);
    train_ps_client_close(c0);
    pthread_join(sr.tid, NULL);
    ck_assert_msg(sr.rc == 0, "%s", sr.err.msg);
    ck_assert_uint_eq(sr.st.bad_messages, 2);
    ck_assert_uint_eq(sr.st.pulls, 2);
    ck_assert_int_eq(told.n, 2);
    ck_assert_str_eq(told.last, "0: not my model");
    train_ps_client_close(rogue);
    train_ps_client_close(foreign);
    ck_assert_int_eq(__atomic_load_n(&sa.calls, __ATOMIC_SEQ_CST), 3);
    free(p);
    train_ps_model_free(&pm);
    train_ps_model_free(&other);
    zmq_ctx_term(ctx);
}
END_TEST

/* Wait (at most 10 s) until nothing accepts on the unix socket at path. */
static void ipc_closed(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    ck_assert_uint_lt(strlen(path), sizeof sa.sun_path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    for (int i = 0; i < 1000; i++) {
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        ck_assert_int_ge(fd, 0);
        int live = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
        close(fd);
        if (!live)
            return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_abort_msg("%s still accepts 10 s after its server returned", path);
}

/* A server restarted under a worker (issue #24 item 2): the next pull
 * fails naming both incarnations, and so does every call after it; the
 * new server refuses the old worker's push and its early BYE ends it
 * with "the job did not finish". */
START_TEST(test_restarted_server_detected)
{
    struct train_model_var v[1] = {{.kind = 'W', .layer = 1, .offset = 0, .count = 4}};
    uint32_t owner[1] = {0};
    const float init[4] = {1, 2, 3, 4}, g[4] = {1, 1, 1, 1};
    struct train_ps_layout l = {.vars = v, .nvars = 1, .owner = owner, .nps = 1};
    void *ctx = zmq_ctx_new();
    struct server_run a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    snprintf(a.ep, sizeof a.ep, "ipc://%s", sl_test_path("psr"));
    memcpy(b.ep, a.ep, sizeof b.ep);
    a.o = (struct train_ps_server_opts){.ctx = ctx,
                                        .listen = a.ep,
                                        .index = 0,
                                        .layout = l,
                                        .init = init,
                                        .lr = 0.5f,
                                        .workers = 1,
                                        .worker_timeout_ms = 500};
    b.o = a.o;
    b.o.worker_timeout_ms = 20000;
    ck_assert_int_eq(pthread_create(&a.tid, NULL, server_main, &a), 0);
    struct train_ps_client *c;
    struct sl_error err = {0};
    const char *eps[1] = {a.ep};
    ck_assert_int_eq(train_ps_client_open(&c, ctx, eps, &l, 0, 3000, NULL, &err), 0);
    float p[4];
    uint64_t step;
    ck_assert_msg(train_ps_pull(c, p, NULL, &err) == 0, "%s", err.msg);
    ck_assert_msg(train_ps_push(c, g, 1, NULL, &err) == 0, "%s", err.msg);
    ck_assert_msg(train_ps_pull(c, p, &step, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(step, 1);
    /* A ends (its "crash"): the worker, silent past A's 0.5 s, is lost */
    pthread_join(a.tid, NULL);
    ck_assert_int_eq(a.rc, SL_ETIMEOUT);
    /* A's socket closes in ZeroMQ's I/O thread, after train_ps_serve
     * returned (a killed process's closes at once): until it has, B would
     * rightly refuse a path a live socket serves */
    ipc_closed(a.ep + strlen("ipc://"));
    ck_assert_int_eq(pthread_create(&b.tid, NULL, server_main, &b), 0);
    struct timespec ts = {0, 300 * 1000 * 1000}; /* the DEALER reconnects (every 100 ms) */
    nanosleep(&ts, NULL);
    /* the push computed on A's values reaches B: refused, and the worker
     * names the restart */
    char want[512];
    struct sl_error first = {0};
    ck_assert_int_eq(train_ps_push(c, g, 1, NULL, &first), SL_EPROTO);
    ck_assert_int_eq(train_ps_pull(c, p, NULL, &err), SL_EPROTO); /* at once: broken for good */
    ck_assert_str_eq(err.msg, first.msg);
    train_ps_client_close(c);
    pthread_join(b.tid, NULL);
    snprintf(want, sizeof want,
             "parameter server 0 (%s) restarted: its incarnation is %016" PRIx64 ", this worker "
             "pulled from %016" PRIx64 " (at version 1): the values and updates it held are gone, and training on "
             "would start over in silence",
             a.ep, b.st.incarnation, a.st.incarnation);
    ck_assert_str_eq(first.msg, want);
    ck_assert_uint_ne(a.st.incarnation, b.st.incarnation);
    ck_assert_int_eq(b.rc, SL_EPROTO);
    ck_assert_str_eq(b.err.msg, "parameter server 0: worker 0 left before its final pull (it failed or was stopped; "
                                "1 in all): the job did not finish");
    ck_assert_uint_eq(b.st.pushes, 0);
    ck_assert_uint_eq(b.st.bad_messages, 1);
    zmq_ctx_term(ctx);
}
END_TEST

/* A worker restarted after its pushes were applied is refused (it would
 * train its shard again from the start), and the survivors' final values
 * say how many workers did not finish and which first (issue #24 item 3,
 * the part without ps checkpoints). */
START_TEST(test_restarted_worker_and_lost_count)
{
    struct train_model_var v[1] = {{.kind = 'W', .layer = 1, .offset = 0, .count = 4}};
    uint32_t owner[1] = {0};
    const float init[4] = {1, 2, 3, 4}, g[4] = {1, 1, 1, 1};
    struct train_ps_layout l = {.vars = v, .nvars = 1, .owner = owner, .nps = 1};
    void *ctx = zmq_ctx_new();
    struct server_run sr;
    memset(&sr, 0, sizeof sr);
    snprintf(sr.ep, sizeof sr.ep, "ipc://%s", sl_test_path("psw"));
    sr.o = (struct train_ps_server_opts){.ctx = ctx,
                                         .listen = sr.ep,
                                         .index = 0,
                                         .layout = l,
                                         .init = init,
                                         .lr = 0.5f,
                                         .workers = 3,
                                         .worker_timeout_ms = 800};
    ck_assert_int_eq(pthread_create(&sr.tid, NULL, server_main, &sr), 0);
    const char *eps[1] = {sr.ep};
    struct train_ps_client *c0, *c1, *again;
    struct sl_error err = {0};
    float p[4];
    ck_assert_int_eq(train_ps_client_open(&c0, ctx, eps, &l, 0, 5000, NULL, &err), 0);
    ck_assert_int_eq(train_ps_client_open(&c1, ctx, eps, &l, 1, 5000, NULL, &err), 0);
    ck_assert_msg(train_ps_pull(c1, p, NULL, &err) == 0, "%s", err.msg);
    ck_assert_msg(train_ps_push(c1, g, 1, NULL, &err) == 0, "%s", err.msg);
    /* worker 1 "restarts": a new process (client) for the same worker */
    ck_assert_int_eq(train_ps_client_open(&again, ctx, eps, &l, 1, 5000, NULL, &err), 0);
    ck_assert_int_eq(train_ps_pull(again, p, NULL, &err), SL_EPROTO);
    ck_assert_msg(strstr(err.msg, "refused: worker 1 is another process (session ") != NULL, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, ") than the one this server serves (session ") != NULL, "%s", err.msg);
    ck_assert_msg(strstr(err.msg, "): a process starting asks where to resume (RESUME) before it pulls; one that did "
                                  "not would train its shard again from the start") != NULL,
                  "%s", err.msg);
    train_ps_client_close(again); /* its BYE is refused too: worker 1's slot stays its first process's */
    /* worker 0 finishes; worker 1 (the first process) says BYE without its
     * final pull: failed; worker 2 never comes: lost */
    ck_assert_msg(train_ps_pull(c0, p, NULL, &err) == 0, "%s", err.msg);
    train_ps_client_close(c1);
    ck_assert_msg(train_ps_pull_final(c0, p, NULL, NULL, &err) == 0, "%s", err.msg);
    uint32_t first = 99;
    ck_assert_uint_eq(train_ps_client_lost(c0, &first), 2);
    ck_assert_uint_eq(first, 1);
    train_ps_client_close(c0);
    pthread_join(sr.tid, NULL);
    ck_assert_int_eq(sr.rc, SL_ETIMEOUT);
    ck_assert_str_eq(sr.err.msg, "parameter server 0: worker 2 was silent for 0.8 s and is lost (1 lost in all); "
                                 "its pushes stopped there");
    ck_assert_uint_eq(sr.st.left_early, 1);
    ck_assert_uint_eq(sr.st.bad_messages, 2);
    ck_assert_uint_eq(sr.st.pushes, 1);
    zmq_ctx_term(ctx);
}
END_TEST

/* Receive one reply: its header into h, its body (if any) into body (cap
 * bytes); the body's length, or -1 when there is none. */
static int recv_reply(void *d, uint8_t h[TRAIN_PS_HEADER], void *body, size_t cap)
{
    ck_assert_int_eq(zmq_recv(d, h, TRAIN_PS_HEADER, 0), TRAIN_PS_HEADER);
    int more = 0;
    size_t ml = sizeof more;
    ck_assert_int_eq(zmq_getsockopt(d, ZMQ_RCVMORE, &more, &ml), 0);
    if (!more)
        return -1;
    int n = zmq_recv(d, body, cap, 0);
    ck_assert_int_ge(n, 0);
    return n;
}

static uint64_t le64_at(const uint8_t *b)
{
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--)
        v = v << 8 | b[k];
    return v;
}

/* A raw PUSH of g (4 floats) at position p (as is, however hostile). */
static void push_at(void *d, uint32_t worker, uint64_t version, uint64_t inc, const float *g,
                    struct client_input_position p)
{
    uint8_t b[CLIENT_INPUT_POSITION_BYTES];
    client_input_position_encode(&p, b);
    send_raw(d, TRAIN_PS_PUSH, worker, 1, version, inc, g, 4 * sizeof *g, b, sizeof b);
}

/* What servers said (a restart adopted, a push not applied again),
 * appended; read by the test only after the server's thread ended. */
struct said {
    int n;
    char text[2048];
};

static void told_said(void *arg, uint32_t worker, const char *what)
{
    struct said *t = arg;
    size_t at = strlen(t->text);
    t->n++;
    snprintf(t->text + at, sizeof t->text - at, "%u: %s\n", worker, what);
}

/* Every PUSH carries the worker's input position; a server applies only
 * the step one past the position it recorded (issue #24 item 3): a push
 * without one, a malformed one, one from the future (a step skipped),
 * huge seq and epoch, the same step twice, another replica count: each
 * refused and nothing applied. RESUME: without a session refused; for a
 * worker that never pushed, no position (a fresh start); for one that
 * pushed, from another session: adopted (said), the recorded position
 * returned, the old session refused from then on, and the recorded step
 * pushed again is ACKed as skipped (not applied, not counted) until a push
 * past it is applied. */
START_TEST(test_push_positions_and_resume)
{
    struct train_model_var v[1] = {{.kind = 'W', .layer = 1, .offset = 0, .count = 4}};
    uint32_t owner[1] = {0};
    const float init[4] = {1, 2, 3, 4}, g[4] = {1, 1, 1, 1};
    struct train_ps_layout l = {.vars = v, .nvars = 1, .owner = owner, .nps = 1};
    void *ctx = zmq_ctx_new();
    struct server_run sr;
    struct said said = {0};
    memset(&sr, 0, sizeof sr);
    snprintf(sr.ep, sizeof sr.ep, "ipc://%s", sl_test_path("psp"));
    sr.o = (struct train_ps_server_opts){.ctx = ctx,
                                         .listen = sr.ep,
                                         .index = 0,
                                         .layout = l,
                                         .init = init,
                                         .lr = 0.5f,
                                         .workers = 2,
                                         .worker_timeout_ms = 20000,
                                         .said = told_said,
                                         .said_arg = &said};
    ck_assert_int_eq(pthread_create(&sr.tid, NULL, server_main, &sr), 0);
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    ck_assert_int_eq(zmq_connect(d, sr.ep), 0);
    uint8_t h[TRAIN_PS_HEADER], body[64];
    char reply[512];
    raw_session = 0x1111;
    send_raw(d, TRAIN_PS_PULL, 0, 0, 0, 0, NULL, (size_t)-1, NULL, (size_t)-1);
    ck_assert_int_eq(recv_reply(d, h, body, sizeof body), 16);
    ck_assert_int_eq(h[5], TRAIN_PS_VALUES);
    uint64_t inc = le64_at(h + 32);
    /* the position frame itself */
    uint8_t bad[CLIENT_INPUT_POSITION_BYTES];
    client_input_position_encode(&(struct client_input_position){.seq = 1, .step = 1, .replicas = 1}, bad);
    send_raw(d, TRAIN_PS_PUSH, 0, 1, 0, inc, g, sizeof g, bad, sizeof bad - 1);
    recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "a push's input position: 39 bytes (expected 40)");
    bad[20] ^= 1;
    send_raw(d, TRAIN_PS_PUSH, 0, 1, 0, inc, g, sizeof g, bad, sizeof bad);
    recv_error(d, reply, sizeof reply);
    static const char crc[] = "a push's input position: CRC-32C mismatch (stored ";
    ck_assert_msg(strncmp(reply, crc, sizeof crc - 1) == 0, "%s", reply);
    const struct {
        struct client_input_position p;
        const char *why;
    } cases[] = {
        {{.epoch = 0, .step = UINT64_C(1) << 60, .seq = UINT64_C(1) << 60, .replicas = 1},
         "a push's input position: seq 1152921504606846976 is not step 1152921504606846976 x 1 replicas (or above "
         "2^48)"},
        {{.epoch = 0, .step = 5, .seq = 5, .replicas = 1}, /* from the future: steps 1-4 skipped */
         "worker 0 pushed the step ending at input position 5 (epoch 0 step 5); this server expected 1 (epoch 0 or "
         "1), one step after the last it applied: a step skipped or repeated"},
        {{.epoch = UINT64_C(1) << 62, .step = 1, .seq = 1, .replicas = 1},
         "worker 0 pushed the step ending at input position 1 (epoch 4611686018427387904 step 1); this server "
         "expected 1 (epoch 0 or 1), one step after the last it applied: a step skipped or repeated"},
        {{.epoch = 0, .step = 0, .seq = 0, .replicas = 1},
         "worker 0 pushed the step ending at input position 0 (epoch 0 step 0); this server expected 1 (epoch 0 or "
         "1), one step after the last it applied: a step skipped or repeated"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        push_at(d, 0, 0, inc, g, cases[i].p);
        recv_error(d, reply, sizeof reply);
        ck_assert_str_eq(reply, cases[i].why);
    }
    /* the first step: applied */
    push_at(d, 0, 0, inc, g, (struct client_input_position){.epoch = 0, .step = 1, .seq = 1, .replicas = 1});
    ck_assert_int_eq(recv_reply(d, h, body, sizeof body), -1);
    ck_assert_int_eq(h[5], TRAIN_PS_ACK);
    ck_assert_uint_eq(le64_at(h + 16), 1);
    /* the same step again (no restart in between), another replica count */
    push_at(d, 0, 1, inc, g, (struct client_input_position){.epoch = 0, .step = 1, .seq = 1, .replicas = 1});
    recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "worker 0 pushed the step ending at input position 1 (epoch 0 step 1); this server "
                            "expected 2 (epoch 0 or 1), one step after the last it applied: a step skipped or "
                            "repeated");
    push_at(d, 0, 1, inc, g, (struct client_input_position){.epoch = 0, .step = 2, .seq = 4, .replicas = 2});
    recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "worker 0's position counts 2 replicas a step, its earlier pushes 1");
    /* RESUME without a session; for worker 1, which never pushed: no position */
    raw_session = 0;
    send_raw(d, TRAIN_PS_RESUME, 1, 0, 0, 0, NULL, (size_t)-1, NULL, (size_t)-1);
    recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "a RESUME without a session");
    raw_session = 0x7777;
    send_raw(d, TRAIN_PS_RESUME, 1, 0, 0, 0, NULL, (size_t)-1, NULL, (size_t)-1);
    ck_assert_int_eq(recv_reply(d, h, body, sizeof body), -1);
    ck_assert_int_eq(h[5], TRAIN_PS_ACK);
    /* worker 0 "restarts": session 0x5555 adopted, position 1 returned */
    raw_session = 0x5555;
    send_raw(d, TRAIN_PS_RESUME, 0, 0, 0, 0, NULL, (size_t)-1, NULL, (size_t)-1);
    ck_assert_int_eq(recv_reply(d, h, body, sizeof body), CLIENT_INPUT_POSITION_BYTES);
    ck_assert_int_eq(h[5], TRAIN_PS_ACK);
    struct client_input_position got;
    struct sl_error err = {0};
    ck_assert_int_eq(client_input_position_decode(&got, body, CLIENT_INPUT_POSITION_BYTES, &err), 0);
    ck_assert_uint_eq(got.seq, 1);
    ck_assert_uint_eq(got.epoch, 0);
    ck_assert_uint_eq(got.replicas, 1);
    /* the old session is refused now */
    raw_session = 0x1111;
    push_at(d, 0, 1, inc, g, (struct client_input_position){.epoch = 0, .step = 2, .seq = 2, .replicas = 1});
    recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "worker 0 is another process (session 0000000000001111) than the one this server serves "
                            "(session 0000000000005555): a process starting asks where to resume (RESUME) before it "
                            "pulls; one that did not would train its shard again from the start");
    /* the new one pushes the recorded step again (its old process's last
     * push reached this server): ACKed as skipped, once */
    raw_session = 0x5555;
    push_at(d, 0, 1, inc, g, (struct client_input_position){.epoch = 0, .step = 1, .seq = 1, .replicas = 1});
    ck_assert_int_eq(recv_reply(d, h, body, sizeof body), -1);
    ck_assert_int_eq(h[5], TRAIN_PS_ACK);
    ck_assert_uint_eq(le64_at(h + 12) & 0xffffffffu, TRAIN_PS_ACK_SKIPPED);
    ck_assert_uint_eq(le64_at(h + 16), 1); /* version unchanged */
    ck_assert_uint_eq(le64_at(h + 24), 1); /* global step unchanged */
    push_at(d, 0, 1, inc, g, (struct client_input_position){.epoch = 1, .step = 2, .seq = 2, .replicas = 1});
    ck_assert_int_eq(recv_reply(d, h, body, sizeof body), -1);
    ck_assert_int_eq(h[5], TRAIN_PS_ACK);
    ck_assert_uint_eq(le64_at(h + 16), 2);
    ck_assert_uint_eq(le64_at(h + 24), 2);
    /* caught up: the same step again is a repeat now */
    push_at(d, 0, 2, inc, g, (struct client_input_position){.epoch = 1, .step = 2, .seq = 2, .replicas = 1});
    recv_error(d, reply, sizeof reply);
    ck_assert_msg(strstr(reply, "this server expected 3 (epoch 1 or 2)") != NULL, "%s", reply);
    /* worker 0's final pull, then a RESUME for it is refused */
    send_raw(d, TRAIN_PS_PULL, 0, TRAIN_PS_FINAL, 0, inc, NULL, (size_t)-1, NULL, (size_t)-1);
    ck_assert_int_eq(recv_reply(d, h, body, sizeof body), -1);
    ck_assert_int_eq(h[5], TRAIN_PS_ACK); /* not yet: worker 1 */
    raw_session = 0x6666;
    send_raw(d, TRAIN_PS_RESUME, 0, 0, 0, 0, NULL, (size_t)-1, NULL, (size_t)-1);
    recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "worker 0 made its final pull already: there is nothing left of its shard to resume");
    raw_session = 0x5555;
    send_raw(d, TRAIN_PS_BYE, 0, 0, 0, inc, NULL, (size_t)-1, NULL, (size_t)-1);
    raw_session = 0x7777;
    send_raw(d, TRAIN_PS_PULL, 1, TRAIN_PS_FINAL, 0, inc, NULL, (size_t)-1, NULL, (size_t)-1);
    ck_assert_int_eq(recv_reply(d, h, body, sizeof body), 16);
    ck_assert_int_eq(h[5], TRAIN_PS_VALUES);
    ck_assert_uint_eq(le64_at(h + 12) & 0xffffffffu, TRAIN_PS_FINAL); /* nobody lost or failed */
    send_raw(d, TRAIN_PS_BYE, 1, 0, 0, inc, NULL, (size_t)-1, NULL, (size_t)-1);
    raw_session = 0;
    pthread_join(sr.tid, NULL);
    ck_assert_msg(sr.rc == 0, "%s", sr.err.msg);
    ck_assert_uint_eq(sr.st.pushes, 2);
    ck_assert_uint_eq(sr.st.global_step, 2);
    ck_assert_uint_eq(sr.st.restarts, 1);
    ck_assert_uint_eq(sr.st.skipped, 1);
    ck_assert_uint_eq(sr.st.bad_messages, 12);
    ck_assert_int_eq(said.n, 2);
    ck_assert_str_eq(
        said.text, "0: worker 0 restarted: resuming at epoch 0 step 1 (input position 1; session "
                   "0000000000005555 replaces 0000000000001111)\n"
                   "0: worker 0: its push of epoch 0 step 1 (input position 1) was applied here before "
                   "its restart: acknowledged, not applied again (and so up to step 1, the position recorded here)\n");
    int linger = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(d);
    zmq_ctx_term(ctx);
}
END_TEST

/* A step with no rows (TRAIN_PS_PUSH_EMPTY): a worker whose shard ended
 * early gets empty pieces to its epoch's end; its position is recorded,
 * nothing applied or counted, and its next push is one step after it
 * (before, that push came two steps past the recorded one and was refused
 * as a step skipped). An empty push carrying a body, or counting a global
 * step, is refused; so is one out of order. */
START_TEST(test_push_of_a_step_with_no_rows)
{
    struct train_model_var v[1] = {{.kind = 'W', .layer = 1, .offset = 0, .count = 4}};
    uint32_t owner[1] = {0};
    const float init[4] = {1, 2, 3, 4}, g[4] = {1, 1, 1, 1};
    struct train_ps_layout l = {.vars = v, .nvars = 1, .owner = owner, .nps = 1};
    void *ctx = zmq_ctx_new();
    struct server_run sr;
    memset(&sr, 0, sizeof sr);
    snprintf(sr.ep, sizeof sr.ep, "ipc://%s", sl_test_path("pse"));
    sr.o = (struct train_ps_server_opts){.ctx = ctx,
                                         .listen = sr.ep,
                                         .index = 0,
                                         .layout = l,
                                         .init = init,
                                         .lr = 0.5f,
                                         .workers = 1,
                                         .worker_timeout_ms = 20000};
    ck_assert_int_eq(pthread_create(&sr.tid, NULL, server_main, &sr), 0);
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    ck_assert_int_eq(zmq_connect(d, sr.ep), 0);
    uint8_t h[TRAIN_PS_HEADER], body[64], pos[CLIENT_INPUT_POSITION_BYTES];
    char reply[512];
    raw_session = 0x2222;
    send_raw(d, TRAIN_PS_PULL, 0, 0, 0, 0, NULL, (size_t)-1, NULL, (size_t)-1);
    ck_assert_int_eq(recv_reply(d, h, body, sizeof body), 16);
    uint64_t inc = le64_at(h + 32);
    /* step 1 applied */
    push_at(d, 0, 0, inc, g, (struct client_input_position){.epoch = 0, .step = 1, .seq = 1, .replicas = 1});
    ck_assert_int_eq(recv_reply(d, h, body, sizeof body), -1);
    ck_assert_uint_eq(le64_at(h + 16), 1);
    /* steps 2 and 3 had no rows: positions only */
    for (uint64_t k = 2; k <= 3; k++) {
        client_input_position_encode(&(struct client_input_position){.step = k, .seq = k, .replicas = 1}, pos);
        send_raw(d, TRAIN_PS_PUSH, 0, TRAIN_PS_PUSH_EMPTY, 1, inc, NULL, 0, pos, sizeof pos);
        ck_assert_int_eq(recv_reply(d, h, body, sizeof body), -1);
        ck_assert_int_eq(h[5], TRAIN_PS_ACK);
        ck_assert_uint_eq(le64_at(h + 16), 1); /* version unchanged */
        ck_assert_uint_eq(le64_at(h + 24), 1); /* global step unchanged */
    }
    /* hostile: a body with it, a global step with it, out of order */
    client_input_position_encode(&(struct client_input_position){.step = 4, .seq = 4, .replicas = 1}, pos);
    send_raw(d, TRAIN_PS_PUSH, 0, TRAIN_PS_PUSH_EMPTY, 1, inc, g, sizeof g, pos, sizeof pos);
    recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "a push of a step with no rows carrying 16 bytes (it carries none)");
    send_raw(d, TRAIN_PS_PUSH, 0, TRAIN_PS_PUSH_EMPTY | 1u, 1, inc, NULL, 0, pos, sizeof pos);
    recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "a push of a step with no rows that counts a global step");
    client_input_position_encode(&(struct client_input_position){.step = 9, .seq = 9, .replicas = 1}, pos);
    send_raw(d, TRAIN_PS_PUSH, 0, TRAIN_PS_PUSH_EMPTY, 1, inc, NULL, 0, pos, sizeof pos);
    recv_error(d, reply, sizeof reply);
    ck_assert_str_eq(reply, "worker 0 pushed the step ending at input position 9 (epoch 0 step 9); this server "
                            "expected 4 (epoch 0 or 1), one step after the last it applied: a step skipped or "
                            "repeated");
    /* the next epoch's first step: one step after the last recorded, applied */
    push_at(d, 0, 1, inc, g, (struct client_input_position){.epoch = 1, .step = 4, .seq = 4, .replicas = 1});
    ck_assert_int_eq(recv_reply(d, h, body, sizeof body), -1);
    ck_assert_int_eq(h[5], TRAIN_PS_ACK);
    ck_assert_uint_eq(le64_at(h + 16), 2);
    ck_assert_uint_eq(le64_at(h + 24), 2);
    send_raw(d, TRAIN_PS_PULL, 0, TRAIN_PS_FINAL, 0, inc, NULL, (size_t)-1, NULL, (size_t)-1);
    ck_assert_int_eq(recv_reply(d, h, body, sizeof body), 16);
    float vals[4];
    memcpy(vals, body, sizeof vals);
    /* two steps of g at lr 0.5, momentum 0: 1 - 0.5 - 0.5 = 0; the empty ones moved nothing */
    ck_assert_float_eq(vals[0], 0.0f);
    ck_assert_float_eq(vals[3], 3.0f);
    send_raw(d, TRAIN_PS_BYE, 0, 0, 0, inc, NULL, (size_t)-1, NULL, (size_t)-1);
    raw_session = 0;
    pthread_join(sr.tid, NULL);
    ck_assert_msg(sr.rc == 0, "%s", sr.err.msg);
    ck_assert_uint_eq(sr.st.pushes, 2);
    ck_assert_uint_eq(sr.st.empty_pushes, 2);
    ck_assert_uint_eq(sr.st.global_step, 2);
    ck_assert_uint_eq(sr.st.bad_messages, 3);
    int linger = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(d);
    zmq_ctx_term(ctx);
}
END_TEST

/* A raw PULL to learn a server's incarnation. */
static uint64_t incarnation_of(void *d)
{
    uint8_t h[TRAIN_PS_HEADER], body[64];
    send_raw(d, TRAIN_PS_PULL, 1, 0, 0, 0, NULL, (size_t)-1, NULL, (size_t)-1);
    recv_reply(d, h, body, sizeof body);
    ck_assert_int_eq(h[5], TRAIN_PS_VALUES);
    return le64_at(h + 32);
}

/* A worker killed with its push in flight, which reached server 0 but not
 * server 1 (issue #24 item 3): train_ps_resume gives the lower position
 * (server 1's) and says one server is ahead; the new process pushes that
 * step again: server 0 acknowledges it without applying it, server 1
 * applies it, so every step is applied exactly once on each server and
 * server 0's global step counts it once. Positions more than a step apart
 * and another replica count are refused. */
START_TEST(test_resume_after_a_push_in_flight)
{
    struct train_model_var v[2] = {{.kind = 'W', .layer = 1, .offset = 0, .count = 4},
                                   {.kind = 'b', .layer = 1, .offset = 4, .count = 4}};
    uint32_t owner[2] = {0, 1};
    const float init[8] = {1, 2, 3, 4, 5, 6, 7, 8}, g[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    struct train_ps_layout l = {.vars = v, .nvars = 2, .owner = owner, .nps = 2};
    void *ctx = zmq_ctx_new();
    struct server_run sr[2];
    struct said said[2] = {{0}, {0}};
    const char *eps[2];
    for (int s = 0; s < 2; s++) {
        memset(&sr[s], 0, sizeof sr[s]);
        snprintf(sr[s].ep, sizeof sr[s].ep, "ipc://%s", sl_test_path(s ? "psf1" : "psf0"));
        eps[s] = sr[s].ep;
        sr[s].o = (struct train_ps_server_opts){.ctx = ctx,
                                                .listen = sr[s].ep,
                                                .index = (uint32_t)s,
                                                .layout = l,
                                                .init = init,
                                                .lr = 0.5f,
                                                .workers = 2,
                                                .worker_timeout_ms = 20000,
                                                .said = told_said,
                                                .said_arg = &said[s]};
        ck_assert_int_eq(pthread_create(&sr[s].tid, NULL, server_main, &sr[s]), 0);
    }
    struct sl_error err = {0};
    struct train_ps_resume_result r;
    /* a fresh start: nothing recorded */
    ck_assert_msg(train_ps_resume(ctx, eps, 2, 0, 0xa1, 1, 5000, NULL, &r, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(r.recorded, 0);
    ck_assert_uint_eq(r.pos.seq, 0);
    ck_assert_uint_eq(r.pos.replicas, 1);
    struct train_ps_client *c, *c2, *c1;
    float p[8];
    ck_assert_int_eq(train_ps_client_open(&c, ctx, eps, &l, 0, 5000, NULL, &err), 0);
    train_ps_client_set_session(c, 0xa1);
    ck_assert_msg(train_ps_pull(c, p, NULL, &err) == 0, "%s", err.msg);
    ck_assert_msg(train_ps_push(c, g, 1, NULL, &err) == 0, "%s", err.msg); /* position 1 (auto) */
    /* step 2's push reaches server 0 only, then the process dies */
    void *d0 = zmq_socket(ctx, ZMQ_DEALER), *d1 = zmq_socket(ctx, ZMQ_DEALER);
    ck_assert_int_eq(zmq_connect(d0, eps[0]), 0);
    ck_assert_int_eq(zmq_connect(d1, eps[1]), 0);
    uint8_t h[TRAIN_PS_HEADER], body[64];
    raw_session = 0xa1;
    uint64_t inc0 = incarnation_of(d0), inc1 = incarnation_of(d1);
    push_at(d0, 0, 1, inc0, g, (struct client_input_position){.step = 2, .seq = 2, .replicas = 1});
    ck_assert_int_eq(recv_reply(d0, h, body, sizeof body), -1);
    ck_assert_int_eq(h[5], TRAIN_PS_ACK);
    /* worker 1: two steps on server 0 only (as after restored checkpoints of
     * two moments) */
    raw_session = 0xb1;
    for (uint64_t k = 1; k <= 2; k++) {
        push_at(d0, 1, 2, inc0, g, (struct client_input_position){.step = k, .seq = k, .replicas = 1});
        ck_assert_int_eq(recv_reply(d0, h, body, sizeof body), -1);
        ck_assert_int_eq(h[5], TRAIN_PS_ACK);
    }
    (void)inc1;
    raw_session = 0;
    ck_assert_msg(train_ps_resume(ctx, eps, 2, 1, 0xb2, 1, 5000, NULL, &r, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(r.pos.seq, 0); /* server 1's: none */
    ck_assert_uint_eq(r.recorded, 1);
    ck_assert_uint_eq(r.ahead, 1);
    /* worker 0 restarted with 2 replicas: refused (after adopting) */
    ck_assert_int_eq(train_ps_resume(ctx, eps, 2, 0, 0xa2, 2, 5000, NULL, &r, &err), SL_EPROTO);
    ck_assert_msg(strstr(err.msg, "recorded worker 0's position with 1 replicas a step; this process runs 2 (start it "
                                  "with the same replicas)") != NULL,
                  "%s", err.msg);
    /* and with 1: the lower position, server 0 ahead */
    ck_assert_msg(train_ps_resume(ctx, eps, 2, 0, 0xa3, 1, 5000, NULL, &r, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(r.recorded, 2);
    ck_assert_uint_eq(r.ahead, 1);
    ck_assert_uint_eq(r.pos.seq, 1);
    ck_assert_uint_eq(r.pos.step, 1);
    ck_assert_int_eq(train_ps_push(c, g, 1, NULL, &err), SL_EPROTO); /* the old process: refused */
    ck_assert_int_eq(train_ps_client_open(&c2, ctx, eps, &l, 0, 5000, NULL, &err), 0);
    train_ps_client_set_session(c2, 0xa3);
    ck_assert_msg(train_ps_pull(c2, p, NULL, &err) == 0, "%s", err.msg);
    for (uint64_t k = 2; k <= 3; k++) {
        train_ps_client_set_position(c2, &(struct client_input_position){.step = k, .seq = k, .replicas = 1});
        ck_assert_msg(train_ps_push(c2, g, 1, NULL, &err) == 0, "%s", err.msg);
    }
    /* worker 1 (adopted as 0xb2 by the refused RESUME) leaves: failed */
    ck_assert_int_eq(train_ps_client_open(&c1, ctx, eps, &l, 1, 5000, NULL, &err), 0);
    train_ps_client_set_session(c1, 0xb2);
    train_ps_client_close(c1);
    uint64_t step = 0;
    ck_assert_msg(train_ps_pull_final(c2, p, &step, NULL, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(step, 5); /* worker 0's 3 steps, once each, and worker 1's 2 */
    /* each server applied worker 0's steps 1, 2, 3 once: 3 x 0.5 off server 1's
     * values, 5 x 0.5 off server 0's (worker 1's two included) */
    for (int i = 0; i < 4; i++) {
        ck_assert_float_eq(p[i], init[i] - 2.5f);
        ck_assert_float_eq(p[4 + i], init[4 + i] - 1.5f);
    }
    uint32_t first = 9;
    ck_assert_uint_eq(train_ps_client_lost(c2, &first), 1);
    ck_assert_uint_eq(first, 1);
    train_ps_client_close(c2);
    train_ps_client_close(c);
    for (int s = 0; s < 2; s++) {
        pthread_join(sr[s].tid, NULL);
        ck_assert_int_eq(sr[s].rc, SL_EPROTO);                /* worker 1 left before its final pull */
        ck_assert_uint_eq(sr[s].st.restarts, s == 0 ? 3 : 2); /* worker 1's on server 0 */
    }
    ck_assert_uint_eq(sr[0].st.pushes, 5);
    ck_assert_uint_eq(sr[0].st.skipped, 1);
    ck_assert_uint_eq(sr[0].st.global_step, 5);
    ck_assert_uint_eq(sr[1].st.pushes, 3);
    ck_assert_uint_eq(sr[1].st.skipped, 0);
    ck_assert_msg(strstr(said[0].text, "0: worker 0 restarted: resuming at epoch 0 step 2 (input position 2; session "
                                       "00000000000000a3 replaces 00000000000000a2)\n") != NULL,
                  "%s", said[0].text);
    ck_assert_msg(strstr(said[1].text, "0: worker 0 restarted: resuming at epoch 0 step 1 (input position 1; session "
                                       "00000000000000a3 replaces 00000000000000a2)\n") != NULL,
                  "%s", said[1].text);
    ck_assert_msg(strstr(said[0].text, "its push of epoch 0 step 2 (input position 2) was applied here before its "
                                       "restart") != NULL,
                  "%s", said[0].text);
    int linger = 0;
    zmq_setsockopt(d0, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(d1, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(d0);
    zmq_close(d1);
    zmq_ctx_term(ctx);
}
END_TEST

/* A ps checkpoint written and read back field for field; hostile files
 * refused with their exact reasons: another server's, a flipped byte, a
 * truncated file, a FIFO (without blocking), a symlink, a non-finite
 * value, a global step above the version, a position with seq 2^60. */
START_TEST(test_ps_checkpoint_files)
{
    char dir[512], path[1024], other[1024], want[1400];
    snprintf(dir, sizeof dir, "%s", sl_test_path("psck"));
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    const char cfg[] = "inputs=4 classes=2 hidden=- seed=1";
    struct client_input_position pos[3] = {
        {.epoch = 1, .step = 2, .seq = 4, .replicas = 2}, {0}, {.epoch = 0, .step = 1, .seq = 1, .replicas = 1}};
    float vals[4] = {1.5f, -2, 3, 4}, mom[4] = {0.25f, 0, 0, -1};
    struct train_ps_state s = {.index = 1,
                               .servers = 2,
                               .workers = 3,
                               .version = 7,
                               .global_step = 0,
                               .config = cfg,
                               .config_len = strlen(cfg),
                               .pos = pos,
                               .values = vals,
                               .momentum = mom,
                               .n = 4};
    struct sl_error err = {0};
    uint64_t bytes = 0;
    ck_assert_msg(train_ps_ckpt_write(dir, &s, &bytes, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/ckpt-000000000007.w1of2", dir);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq((uint64_t)st.st_size, bytes);
    ck_assert_uint_eq(bytes, 64 + 40 + 3 * 40 + 32 + 4);
    struct train_ps_ckpt ck;
    ck_assert_msg(train_ps_ckpt_read(path, 1, 2, 3, &ck, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(ck.state.version, 7);
    ck_assert_uint_eq(ck.state.n, 4);
    ck_assert_str_eq(ck.state.config, cfg);
    ck_assert(memcmp(ck.state.values, vals, sizeof vals) == 0);
    ck_assert(memcmp(ck.state.momentum, mom, sizeof mom) == 0);
    for (int w = 0; w < 3; w++) { /* field by field: the struct has padding */
        ck_assert_uint_eq(ck.state.pos[w].epoch, pos[w].epoch);
        ck_assert_uint_eq(ck.state.pos[w].step, pos[w].step);
        ck_assert_uint_eq(ck.state.pos[w].seq, pos[w].seq);
        ck_assert_uint_eq(ck.state.pos[w].replicas, pos[w].replicas);
    }
    train_ps_ckpt_free(&ck);
    ck_assert_int_eq(train_ps_ckpt_read(path, 0, 2, 3, &ck, &err), SL_EINVAL);
    snprintf(want, sizeof want, "%s: made by parameter server 1 of 2 for 3 workers, not server 0 of 2 for 3", path);
    ck_assert_str_eq(err.msg, want);
    /* a flipped byte, then a truncated file */
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, 70, SEEK_SET);
    fputc('X', f);
    fclose(f);
    ck_assert_int_eq(train_ps_ckpt_read(path, 1, 2, 3, &ck, &err), SL_ECORRUPT);
    ck_assert_msg(strstr(err.msg, ": damaged (CRC-32C mismatch: stored ") != NULL, "%s", err.msg);
    ck_assert_int_eq(truncate(path, 100), 0);
    ck_assert_int_eq(train_ps_ckpt_read(path, 1, 2, 3, &ck, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: truncated (100 bytes, the header says %" PRIu64 ")", path, bytes);
    ck_assert_str_eq(err.msg, want);
    /* a FIFO and a symlink in its place */
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    ck_assert_int_eq(train_ps_ckpt_read(path, 1, 2, 3, &ck, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: not a regular file (a FIFO): refused, a checkpoint is one", path);
    ck_assert_str_eq(err.msg, want);
    ck_assert_int_eq(unlink(path), 0);
    snprintf(other, sizeof other, "%s/elsewhere", dir);
    ck_assert_int_eq(symlink(other, path), 0);
    ck_assert_int_eq(train_ps_ckpt_read(path, 1, 2, 3, &ck, &err), SL_ECORRUPT);
    ck_assert_msg(strstr(err.msg, ": a symbolic link: refused") != NULL, "%s", err.msg);
    ck_assert_int_eq(unlink(path), 0);
    /* well-formed files holding values no server could have */
    vals[2] = __builtin_nanf("");
    ck_assert_msg(train_ps_ckpt_write(dir, &s, NULL, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(train_ps_ckpt_read(path, 1, 2, 3, &ck, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: damaged: a non-finite value at element 2", path);
    ck_assert_str_eq(err.msg, want);
    vals[2] = 3;
    s.global_step = 9;
    ck_assert_msg(train_ps_ckpt_write(dir, &s, NULL, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(train_ps_ckpt_read(path, 1, 2, 3, &ck, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: damaged: global step 9 above the version 7", path);
    ck_assert_str_eq(err.msg, want);
    s.global_step = 0;
    pos[0] = (struct client_input_position){.step = UINT64_C(1) << 60, .seq = UINT64_C(1) << 60, .replicas = 1};
    ck_assert_msg(train_ps_ckpt_write(dir, &s, NULL, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(train_ps_ckpt_read(path, 1, 2, 3, &ck, &err), SL_ECORRUPT);
    ck_assert_msg(strstr(err.msg, ": damaged: worker 0's input position: seq 1152921504606846976 is not step") != NULL,
                  "%s", err.msg);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* header bytes [at, at + n) of the file at path set to b, and its CRC-32C
 * made right again: a well-formed file with the fields a writer would refuse. */
static void patch_header(const char *path, size_t at, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    ck_assert_int_gt(size, 4);
    uint8_t *all = malloc((size_t)size);
    ck_assert_ptr_nonnull(all);
    rewind(f);
    ck_assert_uint_eq(fread(all, 1, (size_t)size, f), (size_t)size);
    memcpy(all + at, b, n);
    uint32_t crc = sl_crc32c(all, (size_t)size - 4);
    for (int k = 0; k < 4; k++)
        all[size - 4 + k] = (uint8_t)(crc >> (8 * k));
    rewind(f);
    ck_assert_uint_eq(fwrite(all, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    free(all);
}

/* Format version 2 keeps an elastic job's world: the changes and the
 * epoch the world starts at, read back as written, positions none for
 * the workers without a push in it. Refused: a world epoch without a
 * change and more than 2^32 - 1 changes (on write), a position before the
 * world's epoch, a header with an epoch but no change, an unknown format
 * version (on read). A version-1 file (zeros there) reads as no change. */
START_TEST(test_ps_checkpoint_world)
{
    char dir[512], path[1024], want[1400];
    snprintf(dir, sizeof dir, "%s", sl_test_path("pswk"));
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    struct client_input_position pos[3] = {
        {.epoch = 3, .step = 9, .seq = 9, .replicas = 1}, {0}, {.epoch = 4, .step = 12, .seq = 12, .replicas = 1}};
    float vals[2] = {1, 2}, mom[2] = {0, 0};
    struct train_ps_state s = {.index = 0,
                               .servers = 1,
                               .workers = 3,
                               .version = 30,
                               .global_step = 30,
                               .pos = pos,
                               .values = vals,
                               .momentum = mom,
                               .n = 2,
                               .world_changes = 2,
                               .world_epoch = 3};
    struct sl_error err = {0};
    ck_assert_msg(train_ps_ckpt_write(dir, &s, NULL, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/ckpt-000000000030.w0of1", dir);
    struct train_ps_ckpt ck;
    ck_assert_msg(train_ps_ckpt_read(path, 0, 1, 3, &ck, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(ck.state.world_changes, 2);
    ck_assert_uint_eq(ck.state.world_epoch, 3);
    ck_assert_uint_eq(ck.state.pos[0].seq, 9);
    ck_assert_uint_eq(ck.state.pos[1].replicas, 0);
    ck_assert_uint_eq(ck.state.pos[2].epoch, 4);
    train_ps_ckpt_free(&ck);
    /* the world's count is the file's: another one is named */
    ck_assert_int_eq(train_ps_ckpt_read(path, 0, 1, 2, &ck, &err), SL_EINVAL);
    snprintf(want, sizeof want, "%s: made by parameter server 0 of 1 for 3 workers, not server 0 of 1 for 2", path);
    ck_assert_str_eq(err.msg, want);
    /* a version-1 file: bytes 52-63 zeros, read as a job that never changed */
    uint8_t v1[4] = {1, 0, 0, 0}, zeros[12] = {0};
    pos[0].epoch = 0;
    pos[2].epoch = 1;
    ck_assert_msg(train_ps_ckpt_write(dir, &s, NULL, &err) == 0, "%s", err.msg);
    patch_header(path, 8, v1, 4);
    patch_header(path, 52, zeros, 12);
    ck_assert_msg(train_ps_ckpt_read(path, 0, 1, 3, &ck, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(ck.state.world_changes, 0);
    ck_assert_uint_eq(ck.state.world_epoch, 0);
    train_ps_ckpt_free(&ck);
    /* an epoch without a change; an unknown format version */
    uint8_t epoch7[8] = {7}, v3[4] = {3};
    patch_header(path, 56, epoch7, 8);
    ck_assert_int_eq(train_ps_ckpt_read(path, 0, 1, 3, &ck, &err), SL_ECORRUPT);
    snprintf(want, sizeof want,
             "%s: damaged header (format version 1, description bytes 0, 3 workers, 2 elements, world change 0 from "
             "epoch 7)",
             path);
    ck_assert_str_eq(err.msg, want);
    patch_header(path, 56, zeros, 8);
    patch_header(path, 8, v3, 4);
    ck_assert_int_eq(train_ps_ckpt_read(path, 0, 1, 3, &ck, &err), SL_ECORRUPT);
    snprintf(want, sizeof want,
             "%s: damaged header (format version 3, description bytes 0, 3 workers, 2 elements, world change 0 from "
             "epoch 0)",
             path);
    ck_assert_str_eq(err.msg, want);
    /* a position before the world's first epoch (worker 0's epoch 0 < 3) */
    pos[2].epoch = 4;
    ck_assert_msg(train_ps_ckpt_write(dir, &s, NULL, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(train_ps_ckpt_read(path, 0, 1, 3, &ck, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: damaged: worker 0's position is of epoch 0, before its world's first epoch 3",
             path);
    ck_assert_str_eq(err.msg, want);
    /* what a writer refuses */
    s.world_changes = 0;
    ck_assert_int_eq(train_ps_ckpt_write(dir, &s, NULL, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "checkpoint: server 0 of 1, 3 workers, a 0-byte description, world change 0 from epoch "
                              "3: out of range");
    s.world_changes = UINT64_C(1) << 32;
    ck_assert_int_eq(train_ps_ckpt_write(dir, &s, NULL, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "checkpoint: server 0 of 1, 3 workers, a 0-byte description, world change 4294967296 "
                              "from epoch 3: out of range");
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* What a server's checkpoint callback saw last (read after the join). */
struct seen_ckpt {
    int calls;
    uint64_t version, global_step, seq0;
    float v0;
};

static int record_ckpt(void *arg, const struct train_ps_state *s, struct sl_error *err)
{
    (void)err;
    struct seen_ckpt *c = arg;
    c->calls++;
    c->version = s->version;
    c->global_step = s->global_step;
    c->seq0 = s->pos[0].seq;
    c->v0 = s->values[0];
    return 0;
}

/* A server restored from a state: its values, version and global step go
 * on from there; worker 0's RESUME gets its restored position (adopted,
 * said "restored from a checkpoint"), worker 1 (no position) starts
 * fresh; the checkpoint callback runs every 2 pushes applied with the
 * positions; a state for another worker count is refused. */
START_TEST(test_server_restores_and_checkpoints)
{
    struct train_model_var v[1] = {{.kind = 'W', .layer = 1, .offset = 0, .count = 4}};
    uint32_t owner[1] = {0};
    const float init[4] = {1, 2, 3, 4}, g[4] = {1, 1, 1, 1}, vals[4] = {5, 5, 5, 5}, mom[4] = {0};
    struct train_ps_layout l = {.vars = v, .nvars = 1, .owner = owner, .nps = 1};
    struct client_input_position pos[2] = {{.epoch = 0, .step = 3, .seq = 3, .replicas = 1}, {0}};
    struct train_ps_state rs = {.index = 0,
                                .servers = 1,
                                .workers = 2,
                                .version = 10,
                                .global_step = 10,
                                .pos = pos,
                                .values = vals,
                                .momentum = mom,
                                .n = 4};
    void *ctx = zmq_ctx_new();
    struct server_run sr;
    struct seen_ckpt seen = {0};
    struct said said = {0};
    memset(&sr, 0, sizeof sr);
    snprintf(sr.ep, sizeof sr.ep, "ipc://%s", sl_test_path("psrs"));
    sr.o = (struct train_ps_server_opts){.ctx = ctx,
                                         .listen = sr.ep,
                                         .index = 0,
                                         .layout = l,
                                         .init = init,
                                         .lr = 0.5f,
                                         .workers = 2,
                                         .worker_timeout_ms = 20000,
                                         .restore = &rs,
                                         .checkpoint = record_ckpt,
                                         .checkpoint_arg = &seen,
                                         .checkpoint_every = 2,
                                         .said = told_said,
                                         .said_arg = &said};
    ck_assert_int_eq(pthread_create(&sr.tid, NULL, server_main, &sr), 0);
    const char *eps[1] = {sr.ep};
    struct sl_error err = {0};
    struct train_ps_resume_result r;
    ck_assert_msg(train_ps_resume(ctx, eps, 1, 0, 0xc0, 1, 5000, NULL, &r, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(r.recorded, 1);
    ck_assert_uint_eq(r.pos.seq, 3);
    ck_assert_msg(train_ps_resume(ctx, eps, 1, 1, 0xc1, 1, 5000, NULL, &r, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(r.recorded, 0);
    struct train_ps_client *c0, *c1;
    ck_assert_int_eq(train_ps_client_open(&c0, ctx, eps, &l, 0, 5000, NULL, &err), 0);
    ck_assert_int_eq(train_ps_client_open(&c1, ctx, eps, &l, 1, 5000, NULL, &err), 0);
    train_ps_client_set_session(c0, 0xc0);
    train_ps_client_set_session(c1, 0xc1);
    float p[4];
    uint64_t step = 0;
    ck_assert_msg(train_ps_pull(c0, p, &step, &err) == 0, "%s", err.msg);
    ck_assert(memcmp(p, vals, sizeof p) == 0);
    ck_assert_uint_eq(step, 10);
    for (uint64_t k = 4; k <= 5; k++) {
        train_ps_client_set_position(c0, &(struct client_input_position){.step = k, .seq = k, .replicas = 1});
        ck_assert_msg(train_ps_push(c0, g, 1, NULL, &err) == 0, "%s", err.msg);
    }
    ck_assert_msg(train_ps_pull(c1, p, NULL, &err) == 0, "%s", err.msg);
    ck_assert_msg(train_ps_push(c1, g, 1, NULL, &err) == 0, "%s", err.msg); /* position 1 (auto) */
    uint32_t waiting = 0;
    ck_assert_msg(train_ps_pull_final_try(c0, p, NULL, &waiting, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(waiting, 1);
    ck_assert_msg(train_ps_pull_final(c1, p, &step, NULL, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(step, 13);
    ck_assert_msg(train_ps_pull_final(c0, p, &step, NULL, &err) == 0, "%s", err.msg);
    train_ps_client_close(c0);
    train_ps_client_close(c1);
    pthread_join(sr.tid, NULL);
    ck_assert_msg(sr.rc == 0, "%s", sr.err.msg);
    ck_assert_uint_eq(sr.st.version, 13);
    ck_assert_uint_eq(sr.st.global_step, 13);
    ck_assert_uint_eq(sr.st.restarts, 1);
    ck_assert_int_eq(seen.calls, 1); /* version 12 */
    ck_assert_uint_eq(sr.st.checkpoints, 1);
    ck_assert_uint_eq(seen.version, 12);
    ck_assert_uint_eq(seen.global_step, 12);
    ck_assert_uint_eq(seen.seq0, 5);
    ck_assert_float_eq(seen.v0, 5 - 0.5f * 2);
    ck_assert_msg(strstr(said.text, "0: worker 0 restarted: resuming at epoch 0 step 3 (input position 3; session "
                                    "00000000000000c0 restored from a checkpoint)\n") != NULL,
                  "%s", said.text);
    /* a state for 3 workers */
    rs.workers = 3;
    memset(&sr.st, 0, sizeof sr.st);
    ck_assert_int_eq(train_ps_serve(&sr.o, &sr.st, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "parameter server 0 of 2 workers: the state restored is server 0's of 3 workers");
    zmq_ctx_term(ctx);
}
END_TEST

/* CURVE on the ps link (issue #24 item 5): a client holding the job's key
 * pulls; one with another key pair is never answered (ZAP refuses it). */
START_TEST(test_curve_link)
{
    struct train_model_var v[1] = {{.kind = 'W', .layer = 1, .offset = 0, .count = 4}};
    uint32_t owner[1] = {0};
    const float init[4] = {1, 2, 3, 4};
    struct train_ps_layout l = {.vars = v, .nvars = 1, .owner = owner, .nps = 1};
    struct sl_curve_keys job, stranger;
    ck_assert_int_eq(zmq_curve_keypair(job.public_z85, job.secret_z85), 0);
    ck_assert_int_eq(zmq_curve_keypair(stranger.public_z85, stranger.secret_z85), 0);
    void *ctx = zmq_ctx_new();
    struct server_run sr;
    memset(&sr, 0, sizeof sr);
    snprintf(sr.ep, sizeof sr.ep, "ipc://%s", sl_test_path("psc"));
    sr.o = (struct train_ps_server_opts){.ctx = ctx,
                                         .listen = sr.ep,
                                         .index = 0,
                                         .layout = l,
                                         .init = init,
                                         .lr = 0.1f,
                                         .workers = 1,
                                         .worker_timeout_ms = 20000,
                                         .curve = &job};
    ck_assert_int_eq(pthread_create(&sr.tid, NULL, server_main, &sr), 0);
    const char *eps[1] = {sr.ep};
    struct train_ps_client *c0, *c1, *plain;
    struct sl_error err = {0};
    float p[4];
    char want[256];
    ck_assert_int_eq(train_ps_client_open_keys(&c1, ctx, eps, &l, 0, 700, NULL, &stranger, &err), 0);
    ck_assert_int_eq(train_ps_pull(c1, p, NULL, &err), SL_ETIMEOUT);
    snprintf(want, sizeof want,
             "parameter server 0 (%s) did not answer within 0.7 s (with CURVE: does it hold the "
             "workers' --curve-key?)",
             sr.ep);
    ck_assert_str_eq(err.msg, want);
    train_ps_client_close(c1);
    ck_assert_int_eq(train_ps_client_open(&plain, ctx, eps, &l, 0, 700, NULL, &err), 0);
    ck_assert_int_eq(train_ps_pull(plain, p, NULL, &err), SL_ETIMEOUT);
    train_ps_client_close(plain);
    ck_assert_int_eq(train_ps_client_open_keys(&c0, ctx, eps, &l, 0, 5000, NULL, &job, &err), 0);
    ck_assert_msg(train_ps_pull(c0, p, NULL, &err) == 0, "%s", err.msg);
    ck_assert(memcmp(p, init, sizeof p) == 0);
    ck_assert_msg(train_ps_pull_final(c0, p, NULL, NULL, &err) == 0, "%s", err.msg);
    train_ps_client_close(c0);
    pthread_join(sr.tid, NULL);
    ck_assert_msg(sr.rc == 0, "%s", sr.err.msg);
    ck_assert_uint_eq(sr.st.pulls, 2);        /* the key holder's alone */
    ck_assert_uint_eq(sr.st.bad_messages, 0); /* the others never got a byte through */
    zmq_ctx_term(ctx);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_ps");
    TCase *tc = tcase_create("core");
    /* real servers, timeouts and restarts: seconds each, more under a
     * sanitizer on a loaded machine (Check's default is 4 s) */
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_round_robin);
    tcase_add_test(tc, test_balanced);
    tcase_add_test(tc, test_refused);
    tcase_add_test(tc, test_model_variables);
    tcase_add_test(tc, test_sgd_apply_is_the_models_step);
    tcase_add_test(tc, test_servers_apply_the_models_steps);
    tcase_add_test(tc, test_silent_server_named);
    tcase_add_test(tc, test_server_refuses_hostile_messages);
    tcase_add_test(tc, test_config_inputs);
    tcase_add_test(tc, test_setup_final_and_lost);
    tcase_add_test(tc, test_setup_survives_bad_descriptions);
    tcase_add_test(tc, test_restarted_server_detected);
    tcase_add_test(tc, test_curve_link);
    tcase_add_test(tc, test_restarted_worker_and_lost_count);
    tcase_add_test(tc, test_push_positions_and_resume);
    tcase_add_test(tc, test_push_of_a_step_with_no_rows);
    tcase_add_test(tc, test_resume_after_a_push_in_flight);
    tcase_add_test(tc, test_ps_checkpoint_files);
    tcase_add_test(tc, test_ps_checkpoint_world);
    tcase_add_test(tc, test_server_restores_and_checkpoints);
    suite_add_tcase(s, tc);
    return s;
}
