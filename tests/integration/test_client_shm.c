/* The trainer's client against a fake feeder that hands a piece over in
 * shared memory at a chosen place: a piece whose [shm_offset, shm_offset +
 * shm_bytes) ends exactly at the end of the mapping is read in place; one
 * that ends a byte past it, starts at or past the end, or lies far beyond
 * is refused at once with the range and the mapping's size in the error,
 * instead of being read out of the mapping (SIGSEGV or another piece's
 * bytes) or leaving the trainer waiting. A body shorter than its tensors is
 * refused too.
 *
 * The fake feeder is a thread of this process speaking the wire protocol
 * over a real ROUTER socket on ipc://: it answers HELLO with a WELCOME that
 * offers a memfd of this process (/proc/<pid>/fd/<fd>, "SLSHM001" and a
 * token), waits for the CREDIT saying the memory is mapped, sends one PIECE
 * with SL_WIRE_PIECE_SHM, then END. Check unit tests (CK_FORK), a case per
 * placement. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_buf.h"
#include "sl_clock.h"
#include "sl_test.h"
#include "sl_wire.h"
#include "client.h"
#include "client_metrics.h"

#define SHM_SIZE 8192u
#define TOKEN UINT64_C(0x5eed5eed12345678)

struct fake_feeder {
    void *ctx, *router;
    char ep[256];
    int memfd;
    uint64_t shm_offset, shm_bytes; /* the PIECE's placement */
    uint64_t tensor_bytes;          /* its one tensor: uint8 [2, 4] = 8 bytes */
    /* what the thread saw, for the test to check after join */
    int got_hello_shm, got_credit_shm, sent_piece;
    uint64_t shm_size;     /* the memfd's size: SHM_SIZE unless a test says */
    int credit_wait_ms;    /* END waits this long for a credit after the piece (0: sent at once) */
    uint32_t credits_back; /* credits returned after the piece, before the END */
    char fail[256];
};

static int send_to(void *sock, const zmq_msg_t *id, const struct sl_buf *b)
{
    zmq_msg_t copy;
    zmq_msg_init(&copy);
    zmq_msg_copy(&copy, (zmq_msg_t *)id);
    if (zmq_msg_send(&copy, sock, ZMQ_SNDMORE) < 0) {
        zmq_msg_close(&copy);
        return -1;
    }
    return zmq_send(sock, b->data, b->len, 0) < 0 ? -1 : 0;
}

/* The next message from the trainer: its identity in *id, the header
 * decoded into *m. 0, or -1 after `ms` without one. */
static int recv_from(void *sock, zmq_msg_t *id, struct sl_wire_msg *m, zmq_msg_t *hdr, int ms)
{
    zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, ms) <= 0)
        return -1;
    if (zmq_msg_recv(id, sock, 0) < 0 || !zmq_msg_more(id) || zmq_msg_recv(hdr, sock, 0) < 0)
        return -1;
    struct sl_error err = {0};
    return sl_wire_decode(zmq_msg_data(hdr), zmq_msg_size(hdr), m, &err) == 0 ? 0 : -1;
}

static void *feeder_main(void *arg)
{
    struct fake_feeder *ff = arg;
    struct sl_wire_msg *m = calloc(1, sizeof *m);
    struct sl_buf b;
    sl_buf_init(&b, SL_WIRE_MAX_HEADER);
    zmq_msg_t id, hdr;
    zmq_msg_init(&id);
    zmq_msg_init(&hdr);
    uint64_t t0 = sl_clock_ns();

    if (recv_from(ff->router, &id, m, &hdr, 5000) != 0 || m->type != SL_WIRE_HELLO) {
        snprintf(ff->fail, sizeof ff->fail, "no HELLO");
        goto out;
    }
    ff->got_hello_shm = (m->hello.flags & SL_WIRE_HELLO_SHM) != 0;
    struct sl_wire_welcome w = {.feeder = 0,
                                .feeders = 1,
                                .steps_per_epoch = 1,
                                .epochs = 1,
                                .batch = 2,
                                .heartbeat_ms = 1000,
                                .ntensors = 1,
                                .shm_pid = (uint32_t)getpid(),
                                .shm_fd = (uint32_t)ff->memfd,
                                .shm_size = ff->shm_size,
                                .shm_token = TOKEN};
    w.fields[0] = (struct sl_wire_field){.name = "x", .name_len = 1, .dtype = SL_WIRE_UINT8, .rank = 1, .dims = {4}};
    if (sl_wire_encode_welcome(&w, &b) != 0 || send_to(ff->router, &id, &b) != 0) {
        snprintf(ff->fail, sizeof ff->fail, "cannot send WELCOME");
        goto out;
    }
    /* the CREDIT answering the offer (heartbeats may come first) */
    for (;;) {
        zmq_msg_close(&hdr);
        zmq_msg_init(&hdr);
        if (recv_from(ff->router, &id, m, &hdr, 5000) != 0) {
            snprintf(ff->fail, sizeof ff->fail, "no CREDIT after the WELCOME");
            goto out;
        }
        if (m->type == SL_WIRE_CREDIT)
            break;
    }
    ff->got_credit_shm = (m->credit.flags & SL_WIRE_CREDIT_SHM) != 0;
    struct sl_wire_piece *p = &m->piece;
    memset(m, 0, sizeof *m);
    *p = (struct sl_wire_piece){.rows = 2,
                                .flags = SL_WIRE_PIECE_SHM | SL_WIRE_PIECE_LAST_STEP,
                                .ntensors = 1,
                                .shm_offset = ff->shm_offset,
                                .shm_bytes = ff->shm_bytes};
    p->tensors[0] =
        (struct sl_wire_tensor){.dtype = SL_WIRE_UINT8, .rank = 2, .dims = {2, 4}, .bytes = ff->tensor_bytes};
    struct sl_wire_end end = {.worker = 0, .pieces = 1, .epochs = 1};
    if (sl_wire_encode_piece(p, &b) != 0 || send_to(ff->router, &id, &b) != 0) {
        snprintf(ff->fail, sizeof ff->fail, "cannot send PIECE");
        goto out;
    }
    ff->sent_piece = 1;
    /* the piece's credit, if it comes in time (a feeder that ended takes
     * none: END goes after it) */
    for (uint64_t w0 = sl_clock_ns(); ff->credit_wait_ms > 0 && ff->credits_back == 0 &&
                                      sl_clock_ns() - w0 < (uint64_t)ff->credit_wait_ms * 1000000u;) {
        zmq_msg_close(&hdr);
        zmq_msg_init(&hdr);
        if (recv_from(ff->router, &id, m, &hdr, 10) == 0 && m->type == SL_WIRE_CREDIT)
            ff->credits_back += m->credit.credits;
    }
    if (sl_wire_encode_end(&end, &b) != 0 || send_to(ff->router, &id, &b) != 0) {
        snprintf(ff->fail, sizeof ff->fail, "cannot send END");
        goto out;
    }
    /* until the trainer says BYE (or goes quiet) */
    while (sl_clock_ns() - t0 < 10000000000u) {
        zmq_msg_close(&hdr);
        zmq_msg_init(&hdr);
        if (recv_from(ff->router, &id, m, &hdr, 2000) != 0 || m->type == SL_WIRE_BYE)
            break;
    }
out:
    zmq_msg_close(&hdr);
    zmq_msg_close(&id);
    sl_buf_free(&b);
    free(m);
    return NULL;
}

/* A feeder whose piece lies at [offset, offset + bytes) of an 8 KiB (or shm_size)
 * memfd whose every byte i holds (uint8_t)(i * 7); the client connected to
 * it with the thread started. */
struct run {
    struct fake_feeder ff;
    pthread_t tid;
    struct client *c;
};

/* ... whose END waits up to credit_wait_ms for the piece's credit. */
static void start_waiting(struct run *r, uint64_t offset, uint64_t bytes, uint64_t tensor_bytes, int credit_wait_ms,
                          uint64_t shm_size)
{
    static int serial;
    memset(r, 0, sizeof *r);
    struct fake_feeder *ff = &r->ff;
    ff->credit_wait_ms = credit_wait_ms;
    ff->shm_size = shm_size;
    ff->shm_offset = offset;
    ff->shm_bytes = bytes;
    ff->tensor_bytes = tensor_bytes;
    ff->memfd = memfd_create("sl-test-shm", MFD_CLOEXEC);
    ck_assert_int_ge(ff->memfd, 0);
    ck_assert_int_eq(ftruncate(ff->memfd, (off_t)shm_size), 0);
    uint8_t *mem = mmap(NULL, shm_size, PROT_READ | PROT_WRITE, MAP_SHARED, ff->memfd, 0);
    ck_assert_ptr_ne(mem, MAP_FAILED);
    for (size_t i = 0; i < shm_size; i++)
        mem[i] = (uint8_t)(i * 7);
    memcpy(mem, "SLSHM001", 8);
    for (int i = 0; i < 8; i++)
        mem[8 + i] = (uint8_t)(TOKEN >> (8 * i));
    munmap(mem, shm_size);

    snprintf(ff->ep, sizeof ff->ep, "ipc://%s", sl_test_path(""));
    size_t n = strlen(ff->ep);
    snprintf(ff->ep + n, sizeof ff->ep - n, "feeder-%d", ++serial);
    int zero = 0;
    ff->ctx = zmq_ctx_new();
    ff->router = zmq_socket(ff->ctx, ZMQ_ROUTER);
    zmq_setsockopt(ff->router, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert_int_eq(zmq_bind(ff->router, ff->ep), 0);
    ck_assert_int_eq(pthread_create(&r->tid, NULL, feeder_main, ff), 0);

    const char *eps[1] = {ff->ep};
    struct client_opts o = {.feeders = eps,
                            .nfeeders = 1,
                            .job = "shm-bounds",
                            .workers = 1,
                            .replicas = 1,
                            .heartbeat_ms = 100,
                            .timeout_ms = 5000,
                            .connect_timeout_ms = 5000};
    struct sl_error err = {0};
    ck_assert_msg(client_open(&r->c, &o, &err) == 0, "open: %s", err.msg);
}

static void start(struct run *r, uint64_t offset, uint64_t bytes, uint64_t tensor_bytes)
{
    start_waiting(r, offset, bytes, tensor_bytes, 0, SHM_SIZE);
}

static void finish(struct run *r)
{
    client_close(r->c);
    pthread_join(r->tid, NULL);
    ck_assert_msg(r->ff.fail[0] == '\0', "fake feeder: %s", r->ff.fail);
    ck_assert_int_eq(r->ff.got_hello_shm, 1);
    ck_assert_int_eq(r->ff.got_credit_shm, 1); /* the trainer mapped the memory */
    ck_assert_int_eq(r->ff.sent_piece, 1);
    zmq_close(r->ff.router);
    zmq_ctx_term(r->ff.ctx);
    close(r->ff.memfd);
}

/* The last 8 bytes of the mapping: read in place, exactly those bytes. */
START_TEST(test_piece_at_the_end_is_read)
{
    struct run r;
    start(&r, SHM_SIZE - 8, 8, 8);
    const struct client_piece *p;
    struct sl_error err = {0};
    ck_assert_msg(client_next_step(r.c, &p, &err) == 0, "next_step: %s", err.msg);
    ck_assert_uint_eq(p[0].rows, 2);
    ck_assert_uint_eq(p[0].ntensors, 1);
    ck_assert_uint_eq(p[0].t[0].bytes, 8);
    uint8_t want[8];
    for (size_t i = 0; i < 8; i++)
        want[i] = (uint8_t)((SHM_SIZE - 8 + i) * 7);
    ck_assert_mem_eq(p[0].t[0].data, want, 8);
    struct client_counters st;
    client_metrics_read(client_metrics(r.c), &st);
    ck_assert_uint_eq(st.shm_pieces, 1);
    ck_assert_uint_eq(st.pieces, 1);
    ck_assert_uint_eq(st.rows, 2);
    ck_assert_uint_eq(st.bytes, 8);
    ck_assert_int_eq(client_next_step(r.c, &p, &err), SL_END);
    finish(&r);
}
END_TEST

/* A kept step (client_keep) owns a copy of the piece out of the
 * shared memory: exact bytes, its own name, the SHM flag cleared, valid
 * after the client's close. Each allocation of keep failing in turn gives
 * SL_ENOMEM and leaves the step held and intact; keeping twice, or with
 * no step, is SL_EINVAL. */
START_TEST(test_kept_step_outlives_the_client)
{
    struct run r;
    start(&r, 4096 + 64, 8, 8);
    const struct client_piece *p;
    struct sl_error err = {0};
    ck_assert_int_eq(client_keep(r.c, &(struct client_kept *){NULL}, &err), SL_EINVAL);
    ck_assert_msg(client_next_step(r.c, &p, &err) == 0, "next_step: %s", err.msg);
    uint8_t want[8];
    for (size_t i = 0; i < 8; i++)
        want[i] = (uint8_t)((4096 + 64 + i) * 7);
    struct client_kept *k = NULL;
    for (long n = 1; n <= 5; n++) {
        sl_alloc_fail_after(n);
        int rc = client_keep(r.c, &k, &err);
        sl_alloc_fail_reset();
        if (rc == 0)
            break;
        ck_assert_int_eq(rc, SL_ENOMEM);
        ck_assert_ptr_null(k);
        ck_assert_mem_eq(p[0].t[0].data, want, 8); /* still held, in place */
    }
    if (k == NULL)
        ck_assert_msg(client_keep(r.c, &k, &err) == 0, "keep: %s", err.msg);
    ck_assert_int_eq(client_keep(r.c, &(struct client_kept *){NULL}, &err), SL_EINVAL);
    ck_assert_uint_eq(k->n, 1);
    ck_assert_uint_eq(k->pieces[0].rows, p[0].rows);
    ck_assert_ptr_ne(k->pieces[0].t[0].data, p[0].t[0].data);
    ck_assert_uint_eq(k->pieces[0].flags & SL_WIRE_PIECE_SHM, 0);
    ck_assert_ptr_ne(k->pieces[0].t[0].name, p[0].t[0].name);
    ck_assert_str_eq(k->pieces[0].t[0].name, p[0].t[0].name);
    ck_assert_int_eq(client_next_step(r.c, &p, &err), SL_END);
    finish(&r);
    ck_assert_uint_eq(k->pieces[0].t[0].bytes, 8);
    ck_assert_mem_eq(k->pieces[0].t[0].data, want, 8);
    client_kept_free(k);
    client_kept_free(NULL);
}
END_TEST

/* The bytes the fake feeder's memory holds at [off, off + n): what
 * start() wrote there. */
static void want_at(uint8_t *want, size_t off, size_t n)
{
    for (size_t i = 0; i < n; i++)
        want[i] = (uint8_t)((off + i) * 7);
}

/* The feeder reuses its buffer: new bytes (0xee) at [off, off + n). */
static void overwrite(struct run *r, size_t off, size_t n)
{
    uint8_t *mem = mmap(NULL, r->ff.shm_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->ff.memfd, 0);
    ck_assert_ptr_ne(mem, MAP_FAILED);
    memset(mem + off, 0xee, n);
    munmap(mem, r->ff.shm_size);
}

/* A lent step (client_lend) is the piece where it lies: the same address,
 * no copy, the SHM flag kept, its credit held while it is in use. At the
 * end of the stream (BYE: the feeder takes every buffer back) it is copied
 * out in place: the same address still reads the piece's bytes after the
 * feeder wrote new ones there and after the client's close, and no credit
 * went back for it. */
START_TEST(test_lent_step_held_to_the_end_is_copied_in_place)
{
    struct run r;
    start_waiting(&r, 4096 + 64, 8, 8, 100, SHM_SIZE);
    const struct client_piece *p;
    struct sl_error err = {0};
    ck_assert_int_eq(client_lend(r.c, &(struct client_kept *){NULL}, &err), SL_EINVAL);
    ck_assert_msg(client_next_step(r.c, &p, &err) == 0, "next_step: %s", err.msg);
    uint8_t want[8];
    want_at(want, 4096 + 64, 8);
    const void *in_place = p[0].t[0].data;
    struct client_kept *k = NULL;
    ck_assert_msg(client_lend(r.c, &k, &err) == 0, "lend: %s", err.msg);
    ck_assert_int_eq(client_lend(r.c, &(struct client_kept *){NULL}, &err), SL_EINVAL);
    ck_assert_ptr_eq(k->pieces[0].t[0].data, in_place);
    ck_assert_uint_eq(k->pieces[0].flags & SL_WIRE_PIECE_SHM, SL_WIRE_PIECE_SHM);
    ck_assert_str_eq(k->pieces[0].t[0].name, "x");
    ck_assert_mem_eq(k->pieces[0].t[0].data, want, 8);
    ck_assert_int_eq(client_next_step(r.c, &p, &err), SL_END);
    overwrite(&r, 4096 + 64, 8);
    finish(&r);
    ck_assert_uint_eq(r.ff.credits_back, 0); /* held until the BYE */
    ck_assert_ptr_eq(k->pieces[0].t[0].data, in_place);
    ck_assert_mem_eq(k->pieces[0].t[0].data, want, 8);
    client_kept_free(k);
}
END_TEST

/* A lent step freed gives its credit back at the client's next call. */
START_TEST(test_lent_step_freed_gives_its_credit_back)
{
    struct run r;
    start_waiting(&r, 4096 + 64, 8, 8, 100, SHM_SIZE);
    const struct client_piece *p;
    struct sl_error err = {0};
    ck_assert_msg(client_next_step(r.c, &p, &err) == 0, "next_step: %s", err.msg);
    struct client_kept *k = NULL;
    ck_assert_msg(client_lend(r.c, &k, &err) == 0, "lend: %s", err.msg);
    uint8_t want[8];
    want_at(want, 4096 + 64, 8);
    ck_assert_mem_eq(k->pieces[0].t[0].data, want, 8);
    client_kept_free(k);
    ck_assert_int_eq(client_keepalive(r.c, 20, &err), 0); /* the next call */
    ck_assert_int_eq(client_next_step(r.c, &p, &err), SL_END);
    finish(&r);
    ck_assert_uint_eq(r.ff.credits_back, 1);
}
END_TEST

/* The same freed from another thread while the client waits: the credit
 * still goes back (the flag is atomic), and a lent step freed after the
 * client's close frees what it held (ASan: no leak, no use after free). */
static void *free_later(void *arg)
{
    usleep(10000);
    client_kept_free(arg);
    return NULL;
}

START_TEST(test_lent_step_freed_by_another_thread)
{
    struct run r;
    start_waiting(&r, 4096 + 64, 8, 8, 100, SHM_SIZE);
    const struct client_piece *p;
    struct sl_error err = {0};
    ck_assert_msg(client_next_step(r.c, &p, &err) == 0, "next_step: %s", err.msg);
    struct client_kept *k = NULL;
    ck_assert_msg(client_lend(r.c, &k, &err) == 0, "lend: %s", err.msg);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, free_later, k), 0);
    /* waits 100 ms for pieces (none come): the free lands meanwhile */
    ck_assert_int_eq(client_keepalive(r.c, 100, &err), 0);
    pthread_join(t, NULL);
    ck_assert_int_eq(client_next_step(r.c, &p, &err), SL_END);
    finish(&r);
    ck_assert_uint_eq(r.ff.credits_back, 1);
}
END_TEST

/* A lent step kept while the client waits with the feeder's whole window
 * (here its one piece) held: after 0.2 s it is copied out in place and its
 * credit goes back, the bytes unchanged when the feeder reuses the
 * buffer. */
START_TEST(test_lent_step_kept_through_a_wait_is_copied_out)
{
    struct run r;
    start_waiting(&r, 8192 - 4, 8, 8, 1000, 3 * 4096); /* across a page boundary */
    const struct client_piece *p;
    struct sl_error err = {0};
    ck_assert_msg(client_next_step(r.c, &p, &err) == 0, "next_step: %s", err.msg);
    struct client_kept *k = NULL;
    ck_assert_msg(client_lend(r.c, &k, &err) == 0, "lend: %s", err.msg);
    const void *in_place = k->pieces[0].t[0].data;
    ck_assert_int_eq(client_keepalive(r.c, 400, &err), 0);
    overwrite(&r, 8192 - 4, 8);
    uint8_t want[8];
    want_at(want, 8192 - 4, 8);
    ck_assert_ptr_eq(k->pieces[0].t[0].data, in_place);
    ck_assert_mem_eq(k->pieces[0].t[0].data, want, 8);
    ck_assert_int_eq(client_next_step(r.c, &p, &err), SL_END);
    finish(&r);
    ck_assert_uint_eq(r.ff.credits_back, 1);
    ck_assert_mem_eq(k->pieces[0].t[0].data, want, 8);
    client_kept_free(k);
}
END_TEST

START_TEST(test_lent_step_freed_after_close)
{
    struct run r;
    start(&r, SHM_SIZE - 8, 8, 8);
    const struct client_piece *p;
    struct sl_error err = {0};
    ck_assert_msg(client_next_step(r.c, &p, &err) == 0, "next_step: %s", err.msg);
    struct client_kept *k = NULL;
    ck_assert_msg(client_lend(r.c, &k, &err) == 0, "lend: %s", err.msg);
    finish(&r); /* closed without reaching the end: copied out at close */
    uint8_t want[8];
    want_at(want, SHM_SIZE - 8, 8);
    ck_assert_mem_eq(k->pieces[0].t[0].data, want, 8);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, free_later, k), 0);
    pthread_join(t, NULL);
}
END_TEST

/* Placements past the mapping: each refused at once, naming the range. */
START_TEST(test_piece_past_the_end_is_refused)
{
    static const struct {
        uint64_t offset, bytes, tensor_bytes;
        const char *what; /* after "feeder EP: piece 0: " */
    } cases[] = {
        /* one byte past the end */
        {SHM_SIZE - 7, 8, 8, "shared memory [8185, 8193) past its 8192 bytes, or with 0 frames"},
        /* starting at the end */
        {SHM_SIZE, 8, 8, "shared memory [8192, 8200) past its 8192 bytes, or with 0 frames"},
        /* far beyond: the largest offset and size the wire allows */
        {(uint64_t)1 << 40, 8, 8, "shared memory [1099511627776, 1099511627784) past its 8192 bytes, or with 0 frames"},
        {4096, (uint64_t)1 << 30, 8, "shared memory [4096, 1073745920) past its 8192 bytes, or with 0 frames"},
        /* inside the mapping, but shorter than its tensor */
        {4096, 7, 8, "tensor 0: bytes [0, 8) past the body's 7"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct run r;
        start(&r, cases[i].offset, cases[i].bytes, cases[i].tensor_bytes);
        const struct client_piece *p;
        struct sl_error err = {0};
        uint64_t t0 = sl_clock_ns();
        int rc = client_next_step(r.c, &p, &err);
        uint64_t ms = (sl_clock_ns() - t0) / 1000000u;
        char want[512];
        snprintf(want, sizeof want, "feeder %s: piece 0: %s", r.ff.ep, cases[i].what);
        ck_assert_msg(rc == SL_EPROTO, "case %zu: rc %d (%s)", i, rc, err.msg);
        ck_assert_str_eq(err.msg, want);
        /* refused as it came, not after the 5 s timeout */
        ck_assert_msg(ms < 2000, "case %zu: refused after %llu ms", i, (unsigned long long)ms);
        finish(&r);
    }
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("client_shm");
    TCase *tc = tcase_create("bounds");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_piece_at_the_end_is_read);
    tcase_add_test(tc, test_piece_past_the_end_is_refused);
    tcase_add_test(tc, test_kept_step_outlives_the_client);
    tcase_add_test(tc, test_lent_step_held_to_the_end_is_copied_in_place);
    tcase_add_test(tc, test_lent_step_freed_gives_its_credit_back);
    tcase_add_test(tc, test_lent_step_freed_by_another_thread);
    tcase_add_test(tc, test_lent_step_freed_after_close);
    tcase_add_test(tc, test_lent_step_kept_through_a_wait_is_copied_out);
    suite_add_tcase(s, tc);
    return s;
}
