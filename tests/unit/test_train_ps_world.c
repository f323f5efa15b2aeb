/* train_ps's WORLD (issue #30, the parameter-server workers that join and
 * leave at an epoch boundary): an elastic server takes worker 0's new
 * world whole or not at all. Hostile WORLDs (another sender, no session,
 * malformed bodies, out-of-range and repeated ranks, zero and repeated
 * sessions, a replayed number, the previous world's process, a server not
 * started elastic, after the end began) are refused with their exact
 * ERRORs and change nothing; a good one renumbers the workers (members in
 * order, a joiner after), lets a worker go without failing the job,
 * refuses the old world's sessions and ignores their BYE, and restarts
 * each worker's positions at the new world's epoch. */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "sl_test.h"
#include "train_ps.h"

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

/* What the server said, appended; read only after its thread ended. */
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

static void put64(uint8_t *b, uint64_t v)
{
    for (int k = 0; k < 8; k++)
        b[k] = (uint8_t)(v >> (8 * k));
}

static void put32(uint8_t *b, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        b[k] = (uint8_t)(v >> (8 * k));
}

/* A raw message: header (type, worker, flags, version, step, incarnation,
 * session), then the frames given (len (size_t)-1: none). */
static void send_msg(void *d, int type, uint32_t worker, uint32_t flags, uint64_t version, uint64_t step, uint64_t inc,
                     uint64_t session, const void *body, size_t len, const void *extra, size_t extra_len)
{
    uint8_t h[TRAIN_PS_HEADER] = {0};
    memcpy(h, "SLPS", 4);
    h[4] = TRAIN_PS_WIRE_VERSION;
    h[5] = (uint8_t)type;
    put32(h + 8, worker);
    put32(h + 12, flags);
    put64(h + 16, version);
    put64(h + 24, step);
    put64(h + 32, inc);
    put64(h + 40, session);
    int more_body = len != (size_t)-1, more_extra = extra_len != (size_t)-1;
    ck_assert_int_ge(zmq_send(d, h, sizeof h, more_body ? ZMQ_SNDMORE : 0), 0);
    if (more_body)
        ck_assert_int_ge(zmq_send(d, body, len, more_extra ? ZMQ_SNDMORE : 0), 0);
    if (more_extra)
        ck_assert_int_ge(zmq_send(d, extra, extra_len, 0), 0);
}

/* One reply: its header into h, its body into body (cap bytes); the
 * body's length, or -1 when there is none. */
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
    return n < (int)cap ? n : (int)cap;
}

static uint64_t le64_at(const uint8_t *b)
{
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--)
        v = v << 8 | b[k];
    return v;
}

static uint32_t le32_at(const uint8_t *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* An ERROR is the reply, with exactly this text. */
static void expect_error(void *d, const char *want)
{
    uint8_t h[TRAIN_PS_HEADER];
    char why[1024];
    int n = recv_reply(d, h, why, sizeof why - 1);
    ck_assert_int_eq(h[5], TRAIN_PS_ERROR);
    ck_assert_int_ge(n, 0);
    why[n] = '\0';
    ck_assert_str_eq(why, want);
}

static void expect_ack(void *d, uint32_t flags)
{
    uint8_t h[TRAIN_PS_HEADER], b[64];
    ck_assert_int_eq(recv_reply(d, h, b, sizeof b), -1);
    ck_assert_int_eq(h[5], TRAIN_PS_ACK);
    ck_assert_uint_eq(le32_at(h + 12), flags);
}

static const float g1[4] = {1, 1, 1, 1};

/* A PUSH of g1 at position (epoch, step, seq), 1 replica; the ACK's
 * version, or 0 when refused (the ERROR's text into why). */
static void push(void *d, uint32_t w, uint64_t inc, uint64_t session, uint64_t epoch, uint64_t step, uint64_t seq)
{
    uint8_t b[CLIENT_INPUT_POSITION_BYTES];
    struct client_input_position p = {.epoch = epoch, .step = step, .seq = seq, .replicas = 1};
    client_input_position_encode(&p, b);
    send_msg(d, TRAIN_PS_PUSH, w, 1, 0, 0, inc, session, g1, sizeof g1, b, sizeof b);
}

/* n entries (from, session) of a WORLD body into b. */
static size_t world_body(uint8_t *b, const struct train_ps_member *m, uint32_t n)
{
    memset(b, 0, (size_t)n * TRAIN_PS_WORLD_ENTRY);
    for (uint32_t i = 0; i < n; i++) {
        put32(b + (size_t)i * TRAIN_PS_WORLD_ENTRY, m[i].from);
        put64(b + (size_t)i * TRAIN_PS_WORLD_ENTRY + 8, m[i].session);
    }
    return (size_t)n * TRAIN_PS_WORLD_ENTRY;
}

static void start(struct server_run *sr, void *ctx, const char *name, const struct train_ps_layout *l,
                  const float *init, int elastic, struct said *said)
{
    memset(sr, 0, sizeof *sr);
    snprintf(sr->ep, sizeof sr->ep, "ipc://%s", sl_test_path(name));
    sr->o = (struct train_ps_server_opts){.ctx = ctx,
                                          .listen = sr->ep,
                                          .index = 0,
                                          .layout = *l,
                                          .init = init,
                                          .lr = 0.5f,
                                          .workers = 2,
                                          .worker_timeout_ms = 20000,
                                          .said = told_said,
                                          .said_arg = said,
                                          .elastic = elastic};
    ck_assert_int_eq(pthread_create(&sr->tid, NULL, server_main, sr), 0);
}

/* A server not started elastic refuses every WORLD. */
START_TEST(test_world_needs_an_elastic_server)
{
    struct train_model_var v[1] = {{.kind = 'W', .layer = 1, .offset = 0, .count = 4}};
    uint32_t owner[1] = {0};
    const float init[4] = {1, 2, 3, 4};
    struct train_ps_layout l = {.vars = v, .nvars = 1, .owner = owner, .nps = 1};
    void *ctx = zmq_ctx_new();
    struct server_run sr;
    struct said said = {0};
    start(&sr, ctx, "psw0", &l, init, 0, &said);
    const char *eps[1] = {sr.ep};
    struct train_ps_member m[2] = {{0, 0xa2}, {1, 0xb2}};
    struct sl_error err = {0};
    ck_assert_int_eq(train_ps_world(ctx, eps, 1, 0xa1, 1, 1, m, 2, 5000, NULL, &err), SL_EPROTO);
    char want[512];
    snprintf(want, sizeof want,
             "parameter server 0 (%s) refused the workers' change: a WORLD, but this parameter server was not "
             "started for elastic workers (--ps-elastic)",
             sr.ep);
    ck_assert_str_eq(err.msg, want);
    /* hostile counts on the caller's side */
    ck_assert_int_eq(train_ps_world(ctx, eps, 1, 0xa1, 1, 1, m, 0, 5000, NULL, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "WORLD: 0 workers (1 to 65536)");
    ck_assert_int_eq(train_ps_world(ctx, eps, 1, 0xa1, 1, 1, m, 65537, 5000, NULL, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "WORLD: 65537 workers (1 to 65536)");
    ck_assert_int_eq(train_ps_world(ctx, eps, 0, 0xa1, 1, 1, m, 2, 5000, NULL, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "0 parameter servers (1 to 256)");
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    ck_assert_int_eq(zmq_connect(d, sr.ep), 0);
    send_msg(d, TRAIN_PS_BYE, 0, 0, 0, 0, 0, 0xa1, NULL, (size_t)-1, NULL, (size_t)-1);
    send_msg(d, TRAIN_PS_BYE, 1, 0, 0, 0, 0, 0xb1, NULL, (size_t)-1, NULL, (size_t)-1);
    pthread_join(sr.tid, NULL);
    ck_assert_int_eq(sr.rc, SL_EPROTO); /* BYE before the final pull: failed, as ever */
    ck_assert_uint_eq(sr.st.bad_messages, 1);
    ck_assert_uint_eq(sr.st.world_changes, 0);
    ck_assert_uint_eq(sr.st.workers, 2);
    zmq_close(d);
    zmq_ctx_term(ctx);
}
END_TEST

START_TEST(test_world_changes_the_workers)
{
    struct train_model_var v[1] = {{.kind = 'W', .layer = 1, .offset = 0, .count = 4}};
    uint32_t owner[1] = {0};
    const float init[4] = {1, 2, 3, 4};
    struct train_ps_layout l = {.vars = v, .nvars = 1, .owner = owner, .nps = 1};
    void *ctx = zmq_ctx_new();
    struct server_run sr;
    struct said said = {0};
    start(&sr, ctx, "psw1", &l, init, 1, &said);
    const char *eps[1] = {sr.ep};
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    ck_assert_int_eq(zmq_connect(d, sr.ep), 0);
    uint8_t h[TRAIN_PS_HEADER], b[64];
    char want[512];
    struct sl_error err = {0};
    /* the first world: workers 0 (session a1) and 1 (b1) pull and push epoch 0's step 1 */
    send_msg(d, TRAIN_PS_PULL, 0, 0, 0, 0, 0, 0xa1, NULL, (size_t)-1, NULL, (size_t)-1);
    ck_assert_int_eq(recv_reply(d, h, b, sizeof b), 16);
    uint64_t inc = le64_at(h + 32);
    push(d, 0, inc, 0xa1, 0, 1, 1);
    expect_ack(d, 0);
    push(d, 1, inc, 0xb1, 0, 1, 1);
    expect_ack(d, 1);
    /* hostile WORLDs: each refused whole */
    static uint8_t big[(TRAIN_PS_MAX_WORKERS + 1) * TRAIN_PS_WORLD_ENTRY];
    uint8_t body[4 * TRAIN_PS_WORLD_ENTRY];
    struct train_ps_member ok[3] = {{0, 0xa2}, {1, 0xb2}, {TRAIN_PS_JOINER, 0xc2}};
    size_t n = world_body(body, ok, 3);
    send_msg(d, TRAIN_PS_WORLD, 1, 0, 1, 1, inc, 0xb1, body, n, NULL, (size_t)-1);
    expect_error(d, "a WORLD from worker 1: only worker 0, the coordinator, announces the workers");
    send_msg(d, TRAIN_PS_WORLD, 0, 0, 1, 1, inc, 0, body, n, NULL, (size_t)-1);
    snprintf(want, sizeof want,
             "worker 0 is another process (session 0000000000000000) than the one this server serves (session "
             "00000000000000a1): a process starting asks where to resume (RESUME) before it pulls; one that did "
             "not would train its shard again from the start");
    expect_error(d, want);
    send_msg(d, TRAIN_PS_WORLD, 0, 0, 1, 1, inc, 0xa1, NULL, (size_t)-1, NULL, (size_t)-1);
    expect_error(d, "a WORLD of 0 bytes (16 a worker, 1 to 65536 workers)");
    send_msg(d, TRAIN_PS_WORLD, 0, 0, 1, 1, inc, 0xa1, body, 15, NULL, (size_t)-1);
    expect_error(d, "a WORLD of 15 bytes (16 a worker, 1 to 65536 workers)");
    send_msg(d, TRAIN_PS_WORLD, 0, 0, 1, 1, inc, 0xa1, big, sizeof big, NULL, (size_t)-1);
    expect_error(d, "a WORLD of 1048592 bytes (16 a worker, 1 to 65536 workers)");
    send_msg(d, TRAIN_PS_WORLD, 0, 0, 1, 1, inc, 0xa1, body, n, body, n);
    expect_error(d, "a message of 3 frames (a message of its type takes 1)");
    send_msg(d, TRAIN_PS_WORLD, 0, 0, 1, 2, inc, 0xa1, body, n, NULL, (size_t)-1);
    expect_error(d, "a WORLD numbered 2; this server applied 0 (the next is 1)");
    send_msg(d, TRAIN_PS_WORLD, 0, 0, 1, UINT64_MAX, inc, 0xa1, body, n, NULL, (size_t)-1);
    expect_error(d, "a WORLD numbered 18446744073709551615; this server applied 0 (the next is 1)");
    const struct {
        struct train_ps_member m[3];
        uint32_t n;
        const char *why;
    } bad[] = {
        {{{2, 0xa2}}, 1, "a WORLD whose worker 0 was worker 2, of 2"},
        {{{0, 0xa2}, {UINT32_MAX - 1, 0xb2}}, 2, "a WORLD whose worker 1 was worker 4294967294, of 2"},
        {{{0, 0xa2}, {0, 0xb2}}, 2, "a WORLD that names worker 0 twice"},
        {{{0, 0xa2}, {TRAIN_PS_JOINER, 0}}, 2, "a WORLD whose worker 1 has no session"},
        {{{0, 0xa2}, {1, 0xb2}, {TRAIN_PS_JOINER, 0xa2}}, 3, "a WORLD whose workers 0 and 2 have the same session"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t bn = world_body(body, bad[i].m, bad[i].n);
        send_msg(d, TRAIN_PS_WORLD, 0, 0, 1, 1, inc, 0xa1, body, bn, NULL, (size_t)-1);
        expect_error(d, bad[i].why);
    }
    n = world_body(body, ok, 3);
    body[TRAIN_PS_WORLD_ENTRY + 4] = 1;
    send_msg(d, TRAIN_PS_WORLD, 0, 0, 1, 1, inc, 0xa1, body, n, NULL, (size_t)-1);
    expect_error(d, "a WORLD whose worker 1 has nonzero reserved bytes");
    /* nothing changed: the old world trains on */
    push(d, 1, inc, 0xb1, 0, 2, 2);
    expect_ack(d, 2); /* its staleness: every push says version 0 */
    /* 2 -> 3 from epoch 1: workers 0 and 1 kept (new sessions), a joiner as worker 2 */
    ck_assert_msg(train_ps_world(ctx, eps, 1, 0xa1, 1, 1, ok, 3, 5000, NULL, &err) == 0, "%s", err.msg);
    /* the old sessions: refused; their BYE ignored (not a failure, not counted) */
    send_msg(d, TRAIN_PS_BYE, 1, 0, 0, 0, inc, 0xb1, NULL, (size_t)-1, NULL, (size_t)-1);
    send_msg(d, TRAIN_PS_PULL, 0, 0, 0, 0, inc, 0xa1, NULL, (size_t)-1, NULL, (size_t)-1);
    expect_error(d, "worker 0 is another process (session 00000000000000a1) than the one this server serves "
                    "(session 00000000000000a2): a process starting asks where to resume (RESUME) before it "
                    "pulls; one that did not would train its shard again from the start");
    /* the joiner's first push must be in epoch 1; then anywhere there, then one step at a time */
    push(d, 2, inc, 0xc2, 0, 1, 1);
    expect_error(d, "worker 2's first push since the job's shape changed ends at input position 1 of epoch 0; "
                    "the new world starts at epoch 1");
    push(d, 2, inc, 0xc2, 1, 0, 0);
    expect_error(d, "worker 2's first push since the job's shape changed ends at input position 0 of epoch 1; "
                    "the new world starts at epoch 1");
    push(d, 2, inc, 0xc2, 1, 4, 4);
    expect_ack(d, 3);
    push(d, 2, inc, 0xc2, 1, 6, 6);
    expect_error(d, "worker 2 pushed the step ending at input position 6 (epoch 1 step 6); this server expected 5 "
                    "(epoch 1 or 2), one step after the last it applied: a step skipped or repeated");
    push(d, 0, inc, 0xa2, 1, 3, 3);
    expect_ack(d, 4);
    push(d, 1, inc, 0xb2, 1, 3, 3);
    expect_ack(d, 5);
    /* a replay of change 1: refused; change 2 lets worker 1 go, the joiner becomes worker 1 */
    ck_assert_int_eq(train_ps_world(ctx, eps, 1, 0xa2, 1, 2, ok, 3, 5000, NULL, &err), SL_EPROTO);
    snprintf(want, sizeof want,
             "parameter server 0 (%s) refused the workers' change: a WORLD numbered 1; this server applied 1 "
             "(the next is 2)",
             sr.ep);
    ck_assert_str_eq(err.msg, want);
    struct train_ps_member two[2] = {{0, 0xa3}, {2, 0xc3}};
    ck_assert_msg(train_ps_world(ctx, eps, 1, 0xa2, 2, 2, two, 2, 5000, NULL, &err) == 0, "%s", err.msg);
    /* the one let go says BYE (worker 1 of the old world, out of range or not): ignored */
    send_msg(d, TRAIN_PS_BYE, 1, 0, 0, 0, inc, 0xb2, NULL, (size_t)-1, NULL, (size_t)-1);
    send_msg(d, TRAIN_PS_BYE, 2, 0, 0, 0, inc, 0xc2, NULL, (size_t)-1, NULL, (size_t)-1);
    push(d, 1, inc, 0xc3, 2, 9, 9);
    expect_ack(d, 6);
    /* the end: a WORLD after a final pull is refused */
    send_msg(d, TRAIN_PS_PULL, 0, TRAIN_PS_FINAL, 0, 0, inc, 0xa3, NULL, (size_t)-1, NULL, (size_t)-1);
    expect_ack(d, 1); /* waiting for one worker */
    ck_assert_int_eq(train_ps_world(ctx, eps, 1, 0xa3, 3, 3, two, 2, 5000, NULL, &err), SL_EPROTO);
    snprintf(want, sizeof want,
             "parameter server 0 (%s) refused the workers' change: a WORLD after worker 0 made its final pull: "
             "the job's end has begun, its workers stay",
             sr.ep);
    ck_assert_str_eq(err.msg, want);
    send_msg(d, TRAIN_PS_PULL, 1, TRAIN_PS_FINAL, 0, 0, inc, 0xc3, NULL, (size_t)-1, NULL, (size_t)-1);
    ck_assert_int_eq(recv_reply(d, h, b, sizeof b), 16);
    ck_assert_int_eq(h[5], TRAIN_PS_VALUES);
    ck_assert_uint_eq(le32_at(h + 12), TRAIN_PS_FINAL); /* nobody lost or failed */
    send_msg(d, TRAIN_PS_BYE, 0, 0, 0, 0, inc, 0xa3, NULL, (size_t)-1, NULL, (size_t)-1);
    send_msg(d, TRAIN_PS_BYE, 1, 0, 0, 0, inc, 0xc3, NULL, (size_t)-1, NULL, (size_t)-1);
    pthread_join(sr.tid, NULL);
    ck_assert_msg(sr.rc == 0, "%s", sr.err.msg);
    ck_assert_uint_eq(sr.st.world_changes, 2);
    ck_assert_uint_eq(sr.st.workers, 2);
    ck_assert_uint_eq(sr.st.left_early, 0);
    ck_assert_uint_eq(sr.st.lost, 0);
    ck_assert_uint_eq(sr.st.pushes, 7);
    ck_assert_uint_eq(sr.st.bad_messages, 20);
    ck_assert_str_eq(said.text, "0: parameter server 0: the workers change (change 1): 2 -> 3 from epoch 1 (2 kept, "
                                "1 joined, 0 let go)\n"
                                "0: parameter server 0: the workers change (change 2): 3 -> 2 from epoch 2 (2 kept, "
                                "0 joined, 1 let go)\n");
    zmq_close(d);
    zmq_ctx_term(ctx);
}
END_TEST

/* What the checkpoint callback saw last, and how often. The server's
 * thread writes it and the test reads it between requests: ordered by the
 * server's replies, but through ZeroMQ, which ThreadSanitizer cannot see,
 * so under a lock (seen_get) until the server's thread is joined. */
struct seen_world {
    pthread_mutex_t mu;
    int calls;
    uint32_t workers, with_pos;
    uint64_t version, changes, epoch, seq0;
};

static struct seen_world seen_get(struct seen_world *c)
{
    pthread_mutex_lock(&c->mu);
    struct seen_world v = *c;
    pthread_mutex_unlock(&c->mu);
    return v;
}

static int record_world(void *arg, const struct train_ps_state *s, struct sl_error *err)
{
    (void)err;
    struct seen_world *c = arg;
    pthread_mutex_lock(&c->mu);
    c->calls++;
    c->workers = s->workers;
    c->version = s->version;
    c->changes = s->world_changes;
    c->epoch = s->world_epoch;
    c->with_pos = 0;
    for (uint32_t w = 0; w < s->workers; w++)
        c->with_pos += s->pos[w].replicas != 0;
    c->seq0 = s->pos[0].seq;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

/* An elastic job's checkpoints hold its world: a WORLD is checkpointed at
 * once (3 workers, change 1 from epoch 1, no positions yet: nobody pushed
 * in that world), a RESUME's ACK carries the world (a worker without a
 * position starts at epoch 1; the count, 2 before and 3 after), and the stop's checkpoint has worker 0's
 * first push of epoch 1. Restored from such a state, a server serves that
 * world: a first push outside epoch 1 is refused, worker 0's next change
 * is number 2 (a replayed 1 refused), and a server not started elastic
 * refuses the state. */
START_TEST(test_world_checkpoint_and_restore)
{
    struct train_model_var v[1] = {{.kind = 'W', .layer = 1, .offset = 0, .count = 4}};
    uint32_t owner[1] = {0};
    const float init[4] = {1, 2, 3, 4}, mom[4] = {0};
    struct train_ps_layout l = {.vars = v, .nvars = 1, .owner = owner, .nps = 1};
    void *ctx = zmq_ctx_new();
    struct server_run sr;
    struct said said = {0};
    struct seen_world seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
    volatile sig_atomic_t stop = 0;
    memset(&sr, 0, sizeof sr);
    snprintf(sr.ep, sizeof sr.ep, "ipc://%s", sl_test_path("psw2"));
    sr.o = (struct train_ps_server_opts){.ctx = ctx,
                                         .listen = sr.ep,
                                         .index = 0,
                                         .layout = l,
                                         .init = init,
                                         .lr = 0.5f,
                                         .workers = 2,
                                         .worker_timeout_ms = 20000,
                                         .stop = &stop,
                                         .said = told_said,
                                         .said_arg = &said,
                                         .checkpoint = record_world,
                                         .checkpoint_arg = &seen,
                                         .elastic = 1};
    ck_assert_int_eq(pthread_create(&sr.tid, NULL, server_main, &sr), 0);
    const char *eps[1] = {sr.ep};
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    ck_assert_int_eq(zmq_connect(d, sr.ep), 0);
    uint8_t h[TRAIN_PS_HEADER], b[64];
    struct sl_error err = {0};
    struct train_ps_resume_result r;
    /* before any change: the world is 0 from epoch 0 */
    ck_assert_msg(train_ps_resume(ctx, eps, 1, 1, 0xb1, 1, 5000, NULL, &r, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(r.recorded, 0);
    ck_assert_uint_eq(r.world_changes, 0);
    ck_assert_uint_eq(r.world_epoch, 0);
    ck_assert_uint_eq(r.world_workers, 2);
    send_msg(d, TRAIN_PS_PULL, 0, 0, 0, 0, 0, 0xa1, NULL, (size_t)-1, NULL, (size_t)-1);
    ck_assert_int_eq(recv_reply(d, h, b, sizeof b), 16);
    uint64_t inc = le64_at(h + 32);
    push(d, 0, inc, 0xa1, 0, 1, 1);
    expect_ack(d, 0); /* an ACK's flags: the push's staleness (each says version 0) */
    push(d, 1, inc, 0xb1, 0, 1, 1);
    expect_ack(d, 1);
    ck_assert_int_eq(seen_get(&seen).calls, 0);
    struct train_ps_member ok[3] = {{0, 0xa2}, {1, 0xb2}, {TRAIN_PS_JOINER, 0xc2}};
    ck_assert_msg(train_ps_world(ctx, eps, 1, 0xa1, 1, 1, ok, 3, 5000, NULL, &err) == 0, "%s", err.msg);
    ck_assert_msg(train_ps_resume(ctx, eps, 1, 2, 0xc2, 1, 5000, NULL, &r, &err) == 0, "%s", err.msg);
    struct seen_world now = seen_get(&seen);
    ck_assert_int_eq(now.calls, 1); /* the WORLD's, before the RESUME was answered */
    ck_assert_uint_eq(now.workers, 3);
    ck_assert_uint_eq(now.changes, 1);
    ck_assert_uint_eq(now.epoch, 1);
    ck_assert_uint_eq(now.with_pos, 0);
    ck_assert_uint_eq(now.version, 2);
    ck_assert_uint_eq(r.recorded, 0);
    ck_assert_uint_eq(r.world_changes, 1);
    ck_assert_uint_eq(r.world_epoch, 1);
    ck_assert_uint_eq(r.world_workers, 3);
    push(d, 0, inc, 0xa2, 1, 3, 3);
    expect_ack(d, 2);
    ck_assert_msg(train_ps_resume(ctx, eps, 1, 0, 0xa2, 1, 5000, NULL, &r, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(r.recorded, 1);
    ck_assert_uint_eq(r.pos.epoch, 1);
    ck_assert_uint_eq(r.pos.seq, 3);
    ck_assert_uint_eq(r.world_changes, 1);
    ck_assert_uint_eq(r.world_epoch, 1);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED); /* the server's thread reads it */
    pthread_join(sr.tid, NULL);
    ck_assert_int_eq(sr.rc, SL_ECLOSED);
    ck_assert_int_eq(seen.calls, 2); /* the stop's */
    ck_assert_uint_eq(seen.with_pos, 1);
    ck_assert_uint_eq(seen.seq0, 3);
    ck_assert_uint_eq(seen.version, 3);

    /* restored: 3 workers, change 1 from epoch 1, worker 0 at epoch 1 seq 3 */
    struct client_input_position pos[3] = {{.epoch = 1, .step = 3, .seq = 3, .replicas = 1}, {0}, {0}};
    const float vals[4] = {7, 7, 7, 7};
    struct train_ps_state rs = {.index = 0,
                                .servers = 1,
                                .workers = 3,
                                .version = 3,
                                .global_step = 3,
                                .pos = pos,
                                .values = vals,
                                .momentum = mom,
                                .n = 4,
                                .world_changes = 1,
                                .world_epoch = 1};
    __atomic_store_n(&stop, 0, __ATOMIC_RELAXED);
    memset(&said, 0, sizeof said);
    memset(&sr.st, 0, sizeof sr.st);
    sr.o.workers = 3;
    sr.o.restore = &rs;
    sr.o.checkpoint = NULL;
    snprintf(sr.ep, sizeof sr.ep, "ipc://%s", sl_test_path("psw3")); /* eps[0] points at it */
    ck_assert_int_eq(pthread_create(&sr.tid, NULL, server_main, &sr), 0);
    if (train_ps_resume(ctx, eps, 1, 1, 0xd1, 1, 5000, NULL, &r, &err) != 0) {
        __atomic_store_n(&stop, 1, __ATOMIC_RELAXED); /* the server's thread reads it */
        pthread_join(sr.tid, NULL);
        ck_abort_msg("%s (the server: %d %s)", err.msg, sr.rc, sr.err.msg);
    }
    ck_assert_uint_eq(r.recorded, 0);
    ck_assert_uint_eq(r.world_changes, 1);
    ck_assert_uint_eq(r.world_epoch, 1);
    ck_assert_msg(train_ps_resume(ctx, eps, 1, 0, 0xd0, 1, 5000, NULL, &r, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(r.recorded, 1);
    ck_assert_uint_eq(r.pos.seq, 3);
    void *d2 = zmq_socket(ctx, ZMQ_DEALER);
    ck_assert_int_eq(zmq_connect(d2, sr.ep), 0);
    send_msg(d2, TRAIN_PS_PULL, 1, 0, 0, 0, 0, 0xd1, NULL, (size_t)-1, NULL, (size_t)-1);
    ck_assert_int_eq(recv_reply(d2, h, b, sizeof b), 16);
    ck_assert(memcmp(b, vals, sizeof vals) == 0);
    inc = le64_at(h + 32);
    push(d2, 1, inc, 0xd1, 0, 1, 1);
    expect_error(d2, "worker 1's first push since the job's shape changed ends at input position 1 of epoch 0; "
                     "the new world starts at epoch 1");
    push(d2, 1, inc, 0xd1, 1, 4, 4);
    expect_ack(d2, 3);
    push(d2, 0, inc, 0xd0, 1, 3, 3); /* applied before the restart: acknowledged, not applied again */
    expect_ack(d2, TRAIN_PS_ACK_SKIPPED);
    char want[512];
    ck_assert_int_eq(train_ps_world(ctx, eps, 1, 0xd0, 1, 2, ok, 3, 5000, NULL, &err), SL_EPROTO);
    snprintf(want, sizeof want,
             "parameter server 0 (%s) refused the workers' change: a WORLD numbered 1; this server applied 1 "
             "(the next is 2)",
             sr.ep);
    ck_assert_str_eq(err.msg, want);
    struct train_ps_member two[2] = {{0, 0xe0}, {1, 0xe1}};
    ck_assert_msg(train_ps_world(ctx, eps, 1, 0xd0, 2, 2, two, 2, 5000, NULL, &err) == 0, "%s", err.msg);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED); /* the server's thread reads it */
    pthread_join(sr.tid, NULL);
    ck_assert_int_eq(sr.rc, SL_ECLOSED);
    ck_assert_uint_eq(sr.st.world_changes, 2);
    ck_assert_uint_eq(sr.st.workers, 2);
    ck_assert_uint_eq(sr.st.pushes, 1);
    ck_assert_msg(strstr(said.text, "0: parameter server 0: the workers change (change 2): 3 -> 2 from epoch 2 (2 "
                                    "kept, 0 joined, 1 let go)\n") != NULL,
                  "%s", said.text);
    /* the state of an elastic job, on a server not started elastic */
    sr.o.elastic = 0;
    ck_assert_int_eq(train_ps_serve(&sr.o, &sr.st, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "parameter server 0: the state restored is of an elastic job (world change 1 from "
                              "epoch 1): restore it with --elastic");
    zmq_close(d);
    zmq_close(d2);
    zmq_ctx_term(ctx);
}
END_TEST

/* Two elastic servers restored from checkpoints of different worlds (a
 * kill while a WORLD was being applied): a worker's RESUME stops, naming
 * both counts, rather than train in either. */
START_TEST(test_resume_refuses_servers_of_two_worlds)
{
    struct train_model_var v[2] = {{.kind = 'W', .layer = 1, .offset = 0, .count = 2},
                                   {.kind = 'b', .layer = 1, .offset = 2, .count = 2}};
    uint32_t owner[2] = {0, 1};
    const float init[4] = {1, 2, 3, 4}, vals[2] = {5, 6}, mom[2] = {0};
    struct train_ps_layout l = {.vars = v, .nvars = 2, .owner = owner, .nps = 2};
    struct client_input_position pos[3] = {{0}};
    struct train_ps_state rs[2] = {
        {.index = 0,
         .servers = 2,
         .workers = 3,
         .version = 4,
         .pos = pos,
         .values = vals,
         .momentum = mom,
         .n = 2,
         .world_changes = 1,
         .world_epoch = 1},
        {.index = 1, .servers = 2, .workers = 2, .version = 4, .pos = pos, .values = vals, .momentum = mom, .n = 2}};
    void *ctx = zmq_ctx_new();
    struct server_run sr[2];
    volatile sig_atomic_t stop = 0;
    const char *eps[2];
    for (int k = 0; k < 2; k++) {
        memset(&sr[k], 0, sizeof sr[k]);
        snprintf(sr[k].ep, sizeof sr[k].ep, "ipc://%s", sl_test_path(k ? "psw5" : "psw4"));
        eps[k] = sr[k].ep;
        sr[k].o = (struct train_ps_server_opts){.ctx = ctx,
                                                .listen = sr[k].ep,
                                                .index = (uint32_t)k,
                                                .layout = l,
                                                .init = init,
                                                .lr = 0.5f,
                                                .workers = rs[k].workers,
                                                .worker_timeout_ms = 20000,
                                                .stop = &stop,
                                                .restore = &rs[k],
                                                .elastic = 1};
        ck_assert_int_eq(pthread_create(&sr[k].tid, NULL, server_main, &sr[k]), 0);
    }
    struct sl_error err = {0};
    struct train_ps_resume_result r;
    ck_assert_int_eq(train_ps_resume(ctx, eps, 2, 1, 0xf1, 1, 5000, NULL, &r, &err), SL_EPROTO);
    char want[512];
    snprintf(want, sizeof want,
             "parameter server 1 (%s) serves 2 workers, parameter server 0 (%s) 3: their checkpoints are of "
             "different worlds",
             eps[1], eps[0]);
    ck_assert_str_eq(err.msg, want);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED); /* the server's thread reads it */
    for (int k = 0; k < 2; k++) {
        pthread_join(sr[k].tid, NULL);
        ck_assert_int_eq(sr[k].rc, SL_ECLOSED);
    }
    zmq_ctx_term(ctx);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_ps_world");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_world_needs_an_elastic_server);
    tcase_add_test(tc, test_world_changes_the_workers);
    tcase_add_test(tc, test_world_checkpoint_and_restore);
    tcase_add_test(tc, test_resume_refuses_servers_of_two_worlds);
    suite_add_tcase(s, tc);
    return s;
}
