/* test_train_stage_cuda: train_stage on the cuda backend, GPU 0. A plain
 * program for ctest (label gpu): exit 0 when every check passes, 1 on a
 * failure, 77 (skipped) when there is no GPU or no driver. Staged bytes are
 * read back with cudaMemcpy. Pieces are large enough (several MiB) that the
 * copies are really in flight when put returns, and the source frames are
 * overwritten right after each put, as the client reuses its buffers. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_clock.h"
#include "train_cuda_inc.h"
#include "train_stage.h"

#define SKIP 77

enum { NT = 3, ROWS = 4096, STEPS = 24 };
static const size_t row_bytes[NT] = {8, 784 * 4, 4};
static const char *const names[NT] = {"label", "image", "weight"};

static int failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                              \
        }                                                                            \
    } while (0)

static void must(int rc, const struct sl_error *err, const char *what)
{
    if (rc == 0)
        return;
    fprintf(stderr, "%s: %s (%s)\n", what, err->msg, sl_code_name(rc));
    exit(1);
}

static unsigned char pattern(uint64_t seq, size_t i, size_t j)
{
    return (unsigned char)(seq * 131u + i * 37u + j * 7u + 1u);
}

static uint32_t rows_of(uint64_t k)
{
    return k % 7 == 5 ? 0 : (uint32_t)(ROWS - (k * 97) % ROWS);
}

/* Fill piece `seq` into the reusable frames. */
static void make_piece(struct client_piece *p, unsigned char *frames[NT], uint64_t seq)
{
    uint32_t rows = rows_of(seq);
    memset(p, 0, sizeof *p);
    p->seq = seq;
    p->step = seq;
    p->rows = rows;
    p->ntensors = NT;
    for (size_t i = 0; i < NT; i++) {
        struct client_tensor *t = &p->t[i];
        t->name = names[i];
        t->dtype = i == 0 ? SL_WIRE_INT64 : SL_WIRE_FLOAT32;
        t->rank = 1;
        t->dims[0] = rows;
        t->bytes = rows * row_bytes[i];
        for (size_t j = 0; j < t->bytes; j++)
            frames[i][j] = pattern(seq, i, j);
        t->data = t->bytes > 0 ? frames[i] : NULL;
    }
}

static void check_staged(const struct train_staged *s, uint64_t seq, unsigned char *back)
{
    uint32_t rows = rows_of(seq);
    CHECK(s->seq == seq);
    CHECK(s->rows == rows);
    CHECK(s->ntensors == NT);
    for (size_t i = 0; i < NT; i++) {
        const struct train_staged_tensor *t = &s->t[i];
        CHECK(t->dims[0] == rows);
        CHECK(t->bytes == rows * row_bytes[i]);
        CHECK(t->data != NULL);
        if (t->bytes == 0)
            continue;
        cudaError_t e = cudaMemcpy(back, t->data, t->bytes, cudaMemcpyDeviceToHost);
        if (e != cudaSuccess) {
            fprintf(stderr, "cudaMemcpy(device to host, %" PRIu64 " bytes): %s\n", t->bytes, cudaGetErrorString(e));
            exit(1);
        }
        size_t bad = 0;
        for (size_t j = 0; j < t->bytes; j++)
            bad += back[j] != pattern(seq, i, j);
        if (bad > 0)
            fprintf(stderr, "piece %" PRIu64 " tensor %zu: %zu bytes differ\n", seq, i, bad);
        CHECK(bad == 0);
    }
}

int main(void)
{
    if (train_device_count("cuda") == 0) {
        printf("SKIP: no CUDA device (or no driver)\n");
        return SKIP;
    }
    const struct train_device_ops *ops = train_device_find("cuda");
    struct sl_error err = {0};
    struct train_device *d;
    must(ops->open(&d, 0, &err), &err, "open");
    size_t caps[NT];
    unsigned char *frames[NT];
    for (size_t i = 0; i < NT; i++) {
        caps[i] = ROWS * row_bytes[i];
        frames[i] = malloc(caps[i]);
        if (frames[i] == NULL) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
    }
    unsigned char *back = malloc(caps[1]);
    if (back == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    struct train_stage *st;
    must(train_stage_create(&st, ops, d, caps, NT, &err), &err, "train_stage_create");

    /* put(0) put(1) get(0) put(2) get(1) ...: the frames are rewritten by
     * the next make_piece right after each put returns. */
    struct client_piece p;
    struct train_staged s;
    uint64_t want_bytes = 0;
    uint64_t t0 = sl_clock_ns();
    make_piece(&p, frames, 0);
    must(train_stage_put(st, &p, &err), &err, "put 0");
    want_bytes += rows_of(0) * (row_bytes[0] + row_bytes[1] + row_bytes[2]);
    for (uint64_t k = 0; k < STEPS; k++) {
        if (k + 1 < STEPS) {
            make_piece(&p, frames, k + 1);
            must(train_stage_put(st, &p, &err), &err, "put");
            want_bytes += rows_of(k + 1) * (row_bytes[0] + row_bytes[1] + row_bytes[2]);
            CHECK(train_stage_outstanding(st) == 2);
            CHECK(train_stage_put(st, &p, &err) == SL_EINVAL); /* a third is refused */
        }
        must(train_stage_get(st, &s, &err), &err, "get");
        check_staged(&s, k, back);
    }
    double elapsed = (double)(sl_clock_ns() - t0) / 1e9;
    CHECK(train_stage_get(st, &s, &err) == SL_EINVAL);

    struct train_stage_stats stats;
    train_stage_stats(st, &stats);
    CHECK(stats.puts == STEPS);
    CHECK(stats.gets == STEPS);
    CHECK(stats.bytes_h2d == want_bytes);
    CHECK(stats.sync_s >= 0.0 && stats.pack_s >= 0.0);
    printf("staged %" PRIu64 " bytes in %d pieces: %.2f s total, %.4f s pack, %.4f s in sync (%.2f GB/s overall)\n",
           stats.bytes_h2d, STEPS, elapsed, stats.pack_s, stats.sync_s,
           elapsed > 0 ? (double)stats.bytes_h2d / elapsed / 1e9 : 0.0);

    /* oversize is refused on cuda too, and leaves the stager usable */
    make_piece(&p, frames, 1);
    p.t[2].bytes = caps[2] + 1;
    CHECK(train_stage_put(st, &p, &err) == SL_EINVAL);
    CHECK(strcmp(err.msg, "train_stage_put: tensor 2 'weight': 16385 bytes exceed the slot capacity of 16384 bytes") ==
          0);
    make_piece(&p, frames, 1);
    must(train_stage_put(st, &p, &err), &err, "put after refusal");
    must(train_stage_get(st, &s, &err), &err, "get after refusal");
    check_staged(&s, 1, back);

    train_stage_destroy(st);
    ops->close(d);
    for (size_t i = 0; i < NT; i++)
        free(frames[i]);
    free(back);
    if (failures > 0) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all passed\n");
    return 0;
}
