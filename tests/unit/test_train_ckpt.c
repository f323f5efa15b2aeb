/* train_ckpt and the strategy's input position: a checkpoint round-trips
 * bit for bit; every flipped bit and every truncation of a real file is
 * refused (SL_ECORRUPT naming the path) and leaves the output empty;
 * hostile headers with a good CRC (huge parameter counts, a job name
 * longer than the limit, sizes that disagree) are refused before anything
 * is allocated from them; a file made for another command line is
 * SL_EINVAL naming the field; names are parsed strictly; --keep's pruning,
 * the removal of a timeline's newer files and of a crashed write's
 * temporaries (only this worker's); the position's encoding. */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_bytes.h"
#include "sl_crc32c.h"
#include "sl_test.h"
#include "train_ckpt.h"

static struct train_ckpt_meta meta(uint64_t steps)
{
    struct train_ckpt_meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.job, sizeof m.job, "job-a");
    m.worker = 1;
    m.workers = 2;
    m.replicas = 3;
    m.model = 2;
    m.classes = 4;
    m.inputs = 5;
    m.nhidden = 2;
    m.hidden[0] = 6;
    m.hidden[1] = 7;
    m.lr = 0.05f;
    m.momentum = 0.9f;
    m.seed = 11;
    m.steps_per_epoch = 30;
    m.nparams = 5 * 6 + 6 + 6 * 7 + 7 + 7 * 4 + 4;
    struct sl_error err = {0};
    ck_assert_int_eq(client_input_position_at(&m.pos, steps * 3, 3, 1, &err), 0);
    return m;
}

static float *values(size_t n, float base)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = base + (float)i * 0.25f;
    return v;
}

static const char *fresh_dir(const char *name)
{
    const char *d = sl_test_path(name);
    mkdir(d, 0777);
    return d;
}

static char *path_of(const char *dir, uint64_t steps, uint32_t w, uint32_t n)
{
    static char p[4096];
    char name[96];
    train_ckpt_name(name, sizeof name, steps, w, n);
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

/* A written file: its bytes and size. */
static uint8_t *write_one(const char *dir, uint64_t steps, size_t *len)
{
    struct train_ckpt_meta m = meta(steps);
    float *w = values(m.nparams, 1.0f), *v = values(m.nparams, -3.0f);
    struct sl_error err = {0};
    uint64_t bytes = 0;
    ck_assert_msg(train_ckpt_write(dir, &m, w, v, &bytes, &err) == 0, "%s", err.msg);
    free(w);
    free(v);
    uint8_t *b = sl_test_read(path_of(dir, steps, 1, 2), len);
    ck_assert_uint_eq(*len, bytes);
    return b;
}

START_TEST(test_round_trip)
{
    const char *d = fresh_dir("rt");
    struct train_ckpt_meta m = meta(40);
    float *w = values(m.nparams, 1.0f), *v = values(m.nparams, -3.0f);
    struct sl_error err = {0};
    uint64_t bytes = 0;
    ck_assert_int_eq(train_ckpt_write(d, &m, w, v, &bytes, &err), 0);
    /* header 176, "job-a" padded to 8, two arrays, the CRC */
    ck_assert_uint_eq(bytes, 176 + 8 + 8 * m.nparams + 4);
    struct train_ckpt ck;
    struct train_ckpt_meta want = meta(0);
    want.inputs = 5;
    ck_assert_msg(train_ckpt_read(path_of(d, 40, 1, 2), &want, &ck, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(ck.meta.job, "job-a");
    ck_assert_uint_eq(ck.meta.pos.step, 40);
    ck_assert_uint_eq(ck.meta.pos.seq, 120);
    ck_assert_uint_eq(ck.meta.pos.epoch, 1);
    ck_assert_uint_eq(ck.meta.steps_per_epoch, 30);
    ck_assert_uint_eq(ck.meta.nparams, m.nparams);
    ck_assert(ck.meta.lr == 0.05f && ck.meta.momentum == 0.9f && ck.meta.seed == 11);
    ck_assert(memcmp(ck.weights, w, m.nparams * 4) == 0);
    ck_assert(memcmp(ck.velocity, v, m.nparams * 4) == 0);
    ck_assert_uint_eq((uintptr_t)ck.weights % 4, 0);
    train_ckpt_free(&ck);
    train_ckpt_free(&ck); /* zeroed: a second free is harmless */
    /* no temporary left beside it */
    DIR *dir = opendir(d);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(dir)) != NULL)
        files += e->d_name[0] != '.' || strstr(e->d_name, ".tmp") != NULL;
    closedir(dir);
    ck_assert_int_eq(files, 1);
    /* --model none: no arrays */
    struct train_ckpt_meta n = meta(41);
    n.model = 0;
    n.nhidden = 0;
    n.hidden[0] = n.hidden[1] = 0;
    n.nparams = 0;
    ck_assert_msg(train_ckpt_write(d, &n, NULL, NULL, &bytes, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(bytes, 176 + 8 + 4);
    ck_assert_int_eq(train_ckpt_read(path_of(d, 41, 1, 2), NULL, &ck, &err), 0);
    ck_assert_ptr_null(ck.weights);
    train_ckpt_free(&ck);
    free(w);
    free(v);
}
END_TEST

START_TEST(test_every_flip_and_truncation)
{
    const char *d = fresh_dir("flip");
    size_t len;
    uint8_t *good = write_one(d, 9, &len);
    const char *p = sl_test_path("flip/damaged");
    struct sl_error err = {0};
    struct train_ckpt ck;
    for (size_t off = 0; off < len; off++)
        for (int bit = 0; bit < 8; bit += 7) {
            good[off] ^= (uint8_t)(1u << bit);
            sl_test_write("flip/damaged", good, len);
            int rc = train_ckpt_read(p, NULL, &ck, &err);
            ck_assert_msg(rc == SL_ECORRUPT, "byte %zu bit %d: rc %d %s", off, bit, rc, err.msg);
            ck_assert_msg(strstr(err.msg, p) != NULL, "%s", err.msg);
            ck_assert_ptr_null(ck.buf);
            good[off] ^= (uint8_t)(1u << bit);
        }
    for (size_t cut = 0; cut < len; cut += cut < 200 ? 1 : 97) {
        sl_test_write("flip/damaged", good, cut);
        int rc = train_ckpt_read(p, NULL, &ck, &err);
        ck_assert_msg(rc == SL_ECORRUPT && strstr(err.msg, "truncated") != NULL, "cut %zu: %s", cut, err.msg);
    }
    free(good);
}
END_TEST

/* A file whose header says what `edit` wrote, with a good CRC. */
static int read_edited(const char *name, void (*edit)(uint8_t *h), size_t extra, struct sl_error *err)
{
    const char *d = fresh_dir("hostile");
    size_t len;
    uint8_t *b = write_one(d, 5, &len);
    b = realloc(b, len + extra);
    memset(b + len, 0, extra);
    len += extra;
    edit(b);
    sl_store_le32(b + len - 4, sl_crc32c(b, len - 4));
    sl_test_write(name, b, len);
    free(b);
    struct train_ckpt ck;
    int rc = train_ckpt_read(sl_test_path(name), NULL, &ck, err);
    ck_assert_ptr_null(ck.buf);
    return rc;
}

static void huge_nparams(uint8_t *h)
{
    sl_store_le64(h + 120, UINT64_MAX / 2);
}
static void nparams_plus_one(uint8_t *h)
{
    sl_store_le64(h + 120, sl_load_le64(h + 120) + 1);
}
static void long_job(uint8_t *h)
{
    sl_store_le32(h + 116, 257);
}
static void zero_job(uint8_t *h)
{
    sl_store_le32(h + 116, 0);
}
static void header_size(uint8_t *h)
{
    sl_store_le32(h + 12, 64);
}
static void wide_hidden(uint8_t *h)
{
    sl_store_le32(h + 88, 1u << 30);
}
static void five_hidden(uint8_t *h)
{
    sl_store_le32(h + 84, 5);
}
static void worker_past(uint8_t *h)
{
    sl_store_le32(h + 56, 2);
}
static void model_9(uint8_t *h)
{
    sl_store_le32(h + 68, 9);
}
static void pad_byte(uint8_t *h)
{
    h[176 + 6] = 'x';
}
static void nul_job(uint8_t *h)
{
    h[176 + 2] = 0;
}
static void replicas_differ(uint8_t *h)
{
    sl_store_le32(h + 64, 4);
}
static void huge_steps_per_epoch(uint8_t *h)
{
    sl_store_le64(h + 128, UINT64_MAX);
}
static void version_4(uint8_t *h)
{
    sl_store_le32(h + 8, 4);
}
static void version_0(uint8_t *h)
{
    sl_store_le32(h + 8, 0);
}
static void v1_header_size(uint8_t *h) /* version 3 saying version 1's header size */
{
    sl_store_le32(h + 12, 128);
}
static void v2_header_size(uint8_t *h) /* version 3 saying version 2's header size */
{
    sl_store_le32(h + 12, 136);
}
/* a transition (2 x 1 until step 3 of epoch 1 of 4 steps, 7 steps before)
 * with one field damaged by `bad` */
static void transition(uint8_t *h)
{
    sl_store_le32(h + 136, 2);
    sl_store_le32(h + 140, 1);
    sl_store_le64(h + 144, 1);
    sl_store_le64(h + 152, 3);
    sl_store_le64(h + 160, 4);
    sl_store_le64(h + 168, 7);
}
static void from_workers_0(uint8_t *h)
{
    transition(h);
    sl_store_le32(h + 136, 0);
}
static void from_workers_huge(uint8_t *h)
{
    transition(h);
    sl_store_le32(h + 136, 65537);
}
static void from_replicas_0(uint8_t *h)
{
    transition(h);
    sl_store_le32(h + 140, 0);
}
static void from_replicas_huge(uint8_t *h)
{
    transition(h);
    sl_store_le32(h + 140, 1025);
}
static void from_epoch_huge(uint8_t *h)
{
    transition(h);
    sl_store_le64(h + 144, ((uint64_t)1 << 48) + 1);
}
static void from_step_0(uint8_t *h)
{
    transition(h);
    sl_store_le64(h + 152, 0);
}
static void from_step_at_end(uint8_t *h)
{
    transition(h);
    sl_store_le64(h + 152, 4);
}
static void from_t_1(uint8_t *h)
{
    transition(h);
    sl_store_le64(h + 160, 1);
}
static void from_t_huge(uint8_t *h)
{
    transition(h);
    sl_store_le64(h + 160, UINT64_MAX);
}
static void step_base_huge(uint8_t *h)
{
    transition(h);
    sl_store_le64(h + 168, ((uint64_t)1 << 48) + 1);
}
static void offset_below_0(uint8_t *h) /* no transition: an elastic job's offset taking the step (5) below 0 */
{
    sl_store_le64(h + 168, (uint64_t)-7);
}
static void offset_huge(uint8_t *h)
{
    sl_store_le64(h + 168, ((uint64_t)1 << 48) + 1);
}
static void offset_huge_negative(uint8_t *h)
{
    sl_store_le64(h + 168, (uint64_t)INT64_MIN);
}
static void transition_no_steps(uint8_t *h) /* a transition in a stream of unknown epochs */
{
    transition(h);
    sl_store_le64(h + 128, 0);
}

START_TEST(test_hostile_headers)
{
    struct sl_error err = {0};
    struct {
        void (*edit)(uint8_t *);
        size_t extra;
        const char *text;
    } cases[] = {
        {huge_nparams, 0, "damaged header"},
        {nparams_plus_one, 0, "truncated"},
        {nparams_plus_one, 8, "make"},
        {long_job, 0, "damaged header"},
        {zero_job, 0, "damaged header"},
        {header_size, 0, "damaged header"},
        {wide_hidden, 0, "make"},
        {five_hidden, 0, "nhidden 5"},
        {worker_past, 0, "worker 2 of 2"},
        {model_9, 0, "model 9"},
        {pad_byte, 0, "padding"},
        {nul_job, 0, "a NUL in the job name"},
        {replicas_differ, 0, "replicas 4"},
        {huge_steps_per_epoch, 0, "18446744073709551615 steps per epoch (at most 2^48)"},
        {version_4, 0, "checkpoint version 4 (this trainer reads versions 1 to 3)"},
        {version_0, 0, "checkpoint version 0 (this trainer reads versions 1 to 3)"},
        {v1_header_size, 0, "damaged header (header bytes 128"},
        {v2_header_size, 0, "damaged header (header bytes 136"},
        {from_workers_0, 0, "damaged: transition from 0 workers x 1 replicas (1..65536 x 1..1024)"},
        {from_workers_huge, 0, "damaged: transition from 65537 workers x 1 replicas (1..65536 x 1..1024)"},
        {from_replicas_0, 0, "damaged: transition from 2 workers x 0 replicas (1..65536 x 1..1024)"},
        {from_replicas_huge, 0, "damaged: transition from 2 workers x 1025 replicas (1..65536 x 1..1024)"},
        {from_epoch_huge, 0, "damaged: transition at epoch 281474976710657 after 7 steps (each at most 2^48)"},
        {step_base_huge, 0, "damaged: transition at epoch 1 after 281474976710657 steps (each at most 2^48)"},
        {from_step_0, 0, "damaged: transition at step 0 of an epoch of 4 steps (1 to 3)"},
        {from_step_at_end, 0, "damaged: transition at step 4 of an epoch of 4 steps (1 to 3)"},
        {from_t_1, 0, "damaged: transition epoch of 1 steps (2 to 2^48)"},
        {from_t_huge, 0, "damaged: transition epoch of 18446744073709551615 steps (2 to 2^48)"},
        {offset_below_0, 0,
         "damaged: a step offset of -7 with no transition (at most 2^48 either way, and the step 5 it is added to "
         "not below 0)"},
        {offset_huge, 0, "damaged: a step offset of 281474976710657 with no transition"},
        {offset_huge_negative, 0, "damaged: a step offset of -9223372036854775808 with no transition"},
        {transition_no_steps, 0, "damaged: a transition without the stream's steps per epoch"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = read_edited("hostile/edited", cases[i].edit, cases[i].extra, &err);
        ck_assert_msg(rc == SL_ECORRUPT && strstr(err.msg, cases[i].text) != NULL, "case %zu: rc %d %s", i, rc,
                      err.msg);
        ck_assert_msg(strstr(err.msg, "hostile/edited") != NULL, "%s", err.msg);
    }
    /* not a regular file, absent */
    struct train_ckpt ck;
    ck_assert_int_eq(train_ckpt_read(sl_test_dir(), NULL, &ck, &err), SL_ECORRUPT);
    ck_assert_int_eq(train_ckpt_read(sl_test_path("nothing-here"), NULL, &ck, &err), SL_EIO);
    ck_assert(strstr(err.msg, "No such file") != NULL);
}
END_TEST

/* A version 1 file (a 128-byte header, no steps_per_epoch) is read, its
 * steps per epoch unknown (0). */
START_TEST(test_version_1)
{
    const char *d = fresh_dir("v1");
    size_t len;
    uint8_t *b = write_one(d, 6, &len);
    memmove(b + 128, b + 176, len - 176);
    len -= 48;
    sl_store_le32(b + 8, 1);
    sl_store_le32(b + 12, 128);
    sl_store_le32(b + len - 4, sl_crc32c(b, len - 4));
    sl_test_write("v1/old", b, len);
    free(b);
    struct train_ckpt ck;
    struct sl_error err = {0};
    ck_assert_msg(train_ckpt_read(sl_test_path("v1/old"), NULL, &ck, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(ck.meta.job, "job-a");
    ck_assert_uint_eq(ck.meta.steps_per_epoch, 0);
    ck_assert_uint_eq(ck.meta.pos.step, 6);
    ck_assert(ck.weights != NULL && ck.weights[1] == 1.25f);
    train_ckpt_free(&ck);
}
END_TEST

/* A version 2 file (a 136-byte header, no transition) is read, with none. */
START_TEST(test_version_2)
{
    const char *d = fresh_dir("v2");
    size_t len;
    uint8_t *b = write_one(d, 6, &len);
    memmove(b + 136, b + 176, len - 176);
    len -= 40;
    sl_store_le32(b + 8, 2);
    sl_store_le32(b + 12, 136);
    sl_store_le32(b + len - 4, sl_crc32c(b, len - 4));
    sl_test_write("v2/old", b, len);
    free(b);
    struct train_ckpt ck;
    struct sl_error err = {0};
    ck_assert_msg(train_ckpt_read(sl_test_path("v2/old"), NULL, &ck, &err) == 0, "%s", err.msg);
    ck_assert_str_eq(ck.meta.job, "job-a");
    ck_assert_uint_eq(ck.meta.steps_per_epoch, 30);
    ck_assert_uint_eq(ck.meta.from_workers, 0);
    ck_assert_uint_eq(ck.meta.from_steps_per_epoch, 0);
    ck_assert_uint_eq(ck.meta.step_base, 0);
    ck_assert_uint_eq(train_ckpt_steps(&ck.meta), 6);
    ck_assert(ck.weights != NULL && ck.weights[1] == 1.25f);
    train_ckpt_free(&ck);
}
END_TEST

/* Version 3 with a transition: the exact bytes of the header's new fields,
 * the name from step_base + the position's step, the fields read back, and
 * where the position lies in the job's epochs (transition numbering). */
START_TEST(test_transition)
{
    const char *d = fresh_dir("tr");
    /* 2 x 1 ran epoch 1 to step 3 of T = 4 (7 steps in all: 4 + 3); the new
     * shape (this meta's 2 x 3, 30 steps an epoch) has taken 5 steps since */
    struct train_ckpt_meta m = meta(5);
    m.from_workers = 2;
    m.from_replicas = 1;
    m.from_epoch = 1;
    m.from_step = 3;
    m.from_steps_per_epoch = 4;
    m.step_base = 7;
    float *w = values(m.nparams, 1.0f), *v = values(m.nparams, -3.0f);
    struct sl_error err = {0};
    uint64_t bytes = 0;
    ck_assert_msg(train_ckpt_write(d, &m, w, v, &bytes, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(train_ckpt_steps(&m), 12);
    size_t len;
    uint8_t *b = sl_test_read(path_of(d, 12, 1, 2), &len); /* named by step 7 + 5 */
    ck_assert_uint_eq(len, bytes);
    ck_assert_uint_eq(sl_load_le32(b + 8), 3);
    ck_assert_uint_eq(sl_load_le32(b + 12), 176);
    static const uint8_t want[40] = {2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0,
                                     0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0};
    ck_assert(memcmp(b + 136, want, sizeof want) == 0);
    ck_assert(memcmp(b + 176, "job-a\0\0\0", 8) == 0);
    free(b);
    struct train_ckpt ck;
    ck_assert_msg(train_ckpt_read(path_of(d, 12, 1, 2), NULL, &ck, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(ck.meta.from_workers, 2);
    ck_assert_uint_eq(ck.meta.from_replicas, 1);
    ck_assert_uint_eq(ck.meta.from_epoch, 1);
    ck_assert_uint_eq(ck.meta.from_step, 3);
    ck_assert_uint_eq(ck.meta.from_steps_per_epoch, 4);
    ck_assert_uint_eq(ck.meta.step_base, 7);
    ck_assert_uint_eq(ck.meta.pos.seq, 15);
    ck_assert(memcmp(ck.weights, w, m.nparams * 4) == 0);
    train_ckpt_free(&ck);
    /* where: the transition epoch's step 3 is seq 0, its last (3) the only
     * one; then epochs of 30 */
    uint64_t e = 99, s = 99;
    struct {
        uint64_t step, epoch, within;
    } at[] = {{0, 1, 3}, {1, 2, 0}, {2, 2, 1}, {30, 2, 29}, {31, 3, 0}, {65, 4, 4}};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        ck_assert_int_eq(client_input_position_at(&m.pos, at[i].step * 3, 3, 0, &err), 0);
        ck_assert_int_eq(train_ckpt_where(&m, &e, &s, &err), 0);
        ck_assert_msg(e == at[i].epoch && s == at[i].within, "step %" PRIu64 ": epoch %" PRIu64 " step %" PRIu64,
                      at[i].step, e, s);
    }
    /* without a transition: epochs of 30 from the start */
    struct train_ckpt_meta plain = meta(61);
    ck_assert_int_eq(train_ckpt_where(&plain, &e, &s, &err), 0);
    ck_assert(e == 2 && s == 1);
    plain.steps_per_epoch = 0;
    ck_assert_int_eq(train_ckpt_where(&plain, &e, &s, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "its steps per epoch are not known (a version 1 checkpoint)");
    /* a writer's meta out of range is SL_EINVAL, nothing written */
    m.from_step = 4;
    ck_assert_int_eq(train_ckpt_write(d, &m, w, v, &bytes, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "checkpoint: transition at step 4 of an epoch of 4 steps (1 to 3)");
    free(w);
    free(v);
}
END_TEST

START_TEST(test_mismatch)
{
    const char *d = fresh_dir("mm");
    size_t len;
    free(write_one(d, 3, &len));
    const char *p = path_of(d, 3, 1, 2);
    struct sl_error err = {0};
    struct train_ckpt ck;
    struct {
        const char *text;
        int field;
        uint32_t value;
    } cases[] = {
        {"made for job 'job-a', not 'job-b'", 0, 0},
        {"made for worker 1 of 2, not worker 0 of 2", 1, 0},
        {"made with 3 replicas, the command line has 2", 2, 2},
        {"made with --model mlp, the command line has --model softmax", 3, 1},
        {"made with --mode mirrored, the command line has --mode tower", 4, 1},
        {"made with --classes 4, the command line has --classes 5", 5, 5},
        {"made with hidden sizes '6,7', the command line has '6,8'", 6, 8},
        {"made for inputs of 5 values, the job's have 9", 7, 9},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct train_ckpt_meta w = meta(0);
        switch (cases[i].field) {
        case 0: snprintf(w.job, sizeof w.job, "job-b"); break;
        case 1: w.worker = 0; break;
        case 2: w.replicas = cases[i].value; break;
        case 3: w.model = cases[i].value; break;
        case 4: w.mode = cases[i].value; break;
        case 5: w.classes = cases[i].value; break;
        case 6: w.hidden[1] = cases[i].value; break;
        default: w.inputs = cases[i].value; break;
        }
        int rc = train_ckpt_read(p, &w, &ck, &err);
        ck_assert_msg(rc == SL_EINVAL && strstr(err.msg, cases[i].text) != NULL && strstr(err.msg, p) != NULL,
                      "case %zu: %d %s", i, rc, err.msg);
        ck_assert_ptr_null(ck.buf);
    }
}
END_TEST

static void touch(const char *dir, const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
}

static int exists(const char *dir, const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

START_TEST(test_list_prune_clean)
{
    const char *d = fresh_dir("dir");
    struct sl_error err = {0};
    uint64_t st[8];
    size_t n, total, other;
    char other_name[64] = "";
    for (uint64_t s = 10; s <= 60; s += 10)
        touch(d, path_of(d, s, 0, 2) + strlen(d) + 1);
    /* not checkpoints: other spellings, other workers, temporaries */
    const char *noise[] = {"ckpt-10.w0of2",
                           "ckpt-0000000000070.w0of2",
                           "ckpt-000000000080.w0of2x",
                           "ckpt-+00000000090.w0of2",
                           "ckpt-000000000100.w00of2",
                           "xckpt-000000000110.w0of2",
                           "ckpt-000000000120.w1of2",
                           "ckpt-000000000130.w0of3",
                           ".ckpt-000000000140.w0of2.abcDEF123456.tmp",
                           ".ckpt-000000000150.w1of2.abcDEF123456.tmp",
                           ".ckpt-000000000160.w0of2..tmp",
                           ".ckpt-000000000170.w0of2.ab-cd.tmp",
                           ".other.tmp"};
    for (size_t i = 0; i < sizeof noise / sizeof noise[0]; i++)
        touch(d, noise[i]);
    ck_assert_int_eq(train_ckpt_list(d, 0, 2, st, 2, &n, &total, &other, other_name, sizeof other_name, &err), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(total, 6);
    ck_assert_uint_eq(st[0], 60);
    ck_assert_uint_eq(st[1], 50);
    ck_assert_uint_eq(other, 2); /* w1of2 and w0of3 */
    ck_assert(strncmp(other_name, "ckpt-0000000001", 15) == 0);
    ck_assert_int_eq(train_ckpt_list(d, 0, 2, st, 8, &n, &total, NULL, NULL, 0, &err), 0);
    ck_assert_uint_eq(n, 6);
    ck_assert_uint_eq(st[5], 10);
    size_t removed = 0;
    ck_assert_int_eq(train_ckpt_clean(d, 0, 2, &removed, &err), 0);
    ck_assert_uint_eq(removed, 1);
    ck_assert(!exists(d, ".ckpt-000000000140.w0of2.abcDEF123456.tmp"));
    ck_assert(exists(d, ".ckpt-000000000150.w1of2.abcDEF123456.tmp")); /* another worker's */
    ck_assert(exists(d, ".ckpt-000000000160.w0of2..tmp") && exists(d, ".ckpt-000000000170.w0of2.ab-cd.tmp"));
    /* a write at step 40 after restoring an older step: 50 and 60 go, then the 2 newest stay */
    ck_assert_int_eq(train_ckpt_prune(d, 0, 2, 40, 2, &err), 0);
    ck_assert_int_eq(train_ckpt_list(d, 0, 2, st, 8, &n, &total, NULL, NULL, 0, &err), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(st[0], 40);
    ck_assert_uint_eq(st[1], 30);
    for (size_t i = 0; i < 8; i++) /* no noise removed */
        ck_assert_msg(exists(d, noise[i]), "%s", noise[i]);
    ck_assert_int_eq(train_ckpt_prune(d, 0, 2, 40, 0, &err), SL_EINVAL);
    ck_assert_int_eq(train_ckpt_list(sl_test_path("no-dir"), 0, 2, st, 8, &n, &total, NULL, NULL, 0, &err), SL_EIO);
    ck_assert(strstr(err.msg, "opendir(") != NULL);
}
END_TEST

/* What is not a regular file at a checkpoint's name (issue #24 item 10):
 * a FIFO is refused at once (before the fix open() waited forever for a
 * writer), a symlink is refused as a symlink, and a directory named like a
 * temporary or a checkpoint is left in place by clean and prune (before
 * the fix: "unlink(...): Is a directory", failing --checkpoint). */
/* An elastic job's offset with no transition (its worker count changed at
 * an epoch's start): the name is the global step, the step_base + the
 * position's step, either sign; the position itself untouched. */
START_TEST(test_elastic_offset)
{
    const char *d = fresh_dir("off");
    struct sl_error err = {0};
    struct train_ckpt ck;
    float *w = NULL, *v = NULL;
    struct train_ckpt_meta m = meta(6);
    w = values(m.nparams, 0.5f);
    v = values(m.nparams, 2.0f);
    m.step_base = (uint64_t)-4; /* 2 steps trained: this shape counts 6 before them */
    ck_assert_msg(train_ckpt_write(d, &m, w, v, NULL, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(train_ckpt_steps(&m), 2);
    ck_assert_msg(train_ckpt_read(path_of(d, 2, 1, 2), NULL, &ck, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(ck.meta.step_base, (uint64_t)-4);
    ck_assert_uint_eq(ck.meta.pos.step, 6);
    ck_assert_uint_eq(ck.meta.from_workers, 0);
    uint64_t e = 99, s = 99;
    ck_assert_int_eq(train_ckpt_where(&ck.meta, &e, &s, &err), 0); /* by the position: 6 of 30 in epoch 0 */
    ck_assert_uint_eq(e, 0);
    ck_assert_uint_eq(s, 6);
    train_ckpt_free(&ck);
    m.step_base = 9; /* 15 steps trained */
    ck_assert_msg(train_ckpt_write(d, &m, w, v, NULL, &err) == 0, "%s", err.msg);
    ck_assert_msg(train_ckpt_read(path_of(d, 15, 1, 2), NULL, &ck, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(train_ckpt_steps(&ck.meta), 15);
    train_ckpt_free(&ck);
    m.step_base = (uint64_t)-7; /* below step 0: refused before anything is written */
    ck_assert_int_eq(train_ckpt_write(d, &m, w, v, NULL, &err), SL_EINVAL);
    ck_assert_msg(strstr(err.msg, "a step offset of -7 with no transition") != NULL, "%s", err.msg);
    free(w);
    free(v);
}
END_TEST

/* An elastic job's directory: a set per step and worker count, newest
 * first, the workers it has and the first it lacks. */
START_TEST(test_sets)
{
    const char *d = fresh_dir("sets");
    struct sl_error err = {0};
    struct train_ckpt_set sets[8];
    size_t n = 99, total = 99;
    ck_assert_int_eq(train_ckpt_sets(d, sets, 8, &n, &total, &err), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_uint_eq(total, 0);
    /* world 2 at 10 and 20 (complete), world 3 at 30 (complete) and 40
     * (worker 1's missing), world 2 again at 50 (worker 0's only) */
    for (uint32_t k = 0; k < 2; k++) {
        touch(d, path_of(d, 10, k, 2) + strlen(d) + 1);
        touch(d, path_of(d, 20, k, 2) + strlen(d) + 1);
    }
    for (uint32_t k = 0; k < 3; k++)
        touch(d, path_of(d, 30, k, 3) + strlen(d) + 1);
    touch(d, path_of(d, 40, 0, 3) + strlen(d) + 1);
    touch(d, path_of(d, 40, 2, 3) + strlen(d) + 1);
    touch(d, path_of(d, 50, 0, 2) + strlen(d) + 1);
    const char *noise[] = {"ckpt-000000000060.w3of3", "ckpt-60.w0of1", ".ckpt-000000000060.w0of1.abc.tmp",
                           "ckpt-000000000060.w0of1x", "other"};
    for (size_t i = 0; i < sizeof noise / sizeof noise[0]; i++)
        touch(d, noise[i]);
    ck_assert_int_eq(train_ckpt_sets(d, sets, 8, &n, &total, &err), 0);
    ck_assert_uint_eq(n, 5);
    ck_assert_uint_eq(total, 5);
    struct train_ckpt_set want[] = {
        {50, 2, 1, 1}, {40, 3, 2, 1}, {30, 3, 3, UINT32_MAX}, {20, 2, 2, UINT32_MAX}, {10, 2, 2, UINT32_MAX}};
    for (size_t i = 0; i < 5; i++)
        ck_assert_msg(sets[i].steps == want[i].steps && sets[i].workers == want[i].workers &&
                          sets[i].have == want[i].have && sets[i].missing == want[i].missing,
                      "set %zu: step %" PRIu64 " of %u: %u have, %u missing", i, sets[i].steps, sets[i].workers,
                      sets[i].have, sets[i].missing);
    /* the cap: the newest two, all counted */
    ck_assert_int_eq(train_ckpt_sets(d, sets, 2, &n, &total, &err), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(total, 5);
    ck_assert_uint_eq(sets[1].steps, 40);
    /* worker 0 missing: the first missing is 0 */
    touch(d, path_of(d, 70, 1, 2) + strlen(d) + 1);
    ck_assert_int_eq(train_ckpt_sets(d, sets, 8, &n, &total, &err), 0);
    ck_assert_msg(sets[0].steps == 70 && sets[0].have == 1 && sets[0].missing == 0, "%u", sets[0].missing);
    ck_assert_int_eq(train_ckpt_sets("/nonexistent/sluice-sets", sets, 8, &n, &total, &err), SL_EIO);
    ck_assert_msg(strstr(err.msg, "opendir(/nonexistent/sluice-sets)") != NULL, "%s", err.msg);
}
END_TEST

START_TEST(test_not_a_file)
{
    const char *d = fresh_dir("odd");
    struct sl_error err = {0};
    struct train_ckpt ck;
    char want[4400];
    size_t len;
    uint8_t *good = write_one(d, 5, &len);
    free(good);
    char real[4096];
    snprintf(real, sizeof real, "%s", path_of(d, 5, 1, 2));

    /* a FIFO as the newest: refused, never blocking (the case's timeout catches a hang) */
    const char *fifo = path_of(d, 6, 1, 2);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(train_ckpt_read(fifo, NULL, &ck, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: not a regular file (a FIFO): refused, a checkpoint is one", fifo);
    ck_assert_str_eq(err.msg, want);
    ck_assert_ptr_null(ck.buf);
    ck_assert_int_eq(unlink(fifo), 0);

    /* a symlink to a good checkpoint: refused, saying so */
    const char *link = path_of(d, 7, 1, 2);
    ck_assert_int_eq(symlink(real, link), 0);
    ck_assert_int_eq(train_ckpt_read(link, NULL, &ck, &err), SL_ECORRUPT);
    snprintf(want, sizeof want,
             "%s: a symbolic link: refused (checkpoints are never read through symlinks; put the "
             "file itself in the directory)",
             link);
    ck_assert_str_eq(err.msg, want);
    ck_assert_int_eq(train_ckpt_read(real, NULL, &ck, &err), 0); /* the file itself reads */
    train_ckpt_free(&ck);

    /* a directory at a checkpoint's name */
    const char *dir = path_of(d, 8, 1, 2);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    ck_assert_int_eq(train_ckpt_read(dir, NULL, &ck, &err), SL_ECORRUPT);
    snprintf(want, sizeof want, "%s: not a regular file (a directory): refused, a checkpoint is one", dir);
    ck_assert_str_eq(err.msg, want);

    /* clean: a directory (and a FIFO, a symlink) named like this worker's
     * temporary are left, the real temporary is removed, no error */
    const char *tdir = ".ckpt-000000000009.w1of2.abcDEF123456.tmp";
    const char *tfifo = ".ckpt-000000000009.w1of2.abcDEF123457.tmp";
    const char *tlink = ".ckpt-000000000009.w1of2.abcDEF123458.tmp";
    const char *treal = ".ckpt-000000000009.w1of2.abcDEF123459.tmp";
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", d, tdir);
    ck_assert_int_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/%s", d, tfifo);
    ck_assert_int_eq(mkfifo(p, 0600), 0);
    snprintf(p, sizeof p, "%s/%s", d, tlink);
    ck_assert_int_eq(symlink(real, p), 0);
    touch(d, treal);
    size_t removed = 9;
    ck_assert_msg(train_ckpt_clean(d, 1, 2, &removed, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(removed, 1);
    ck_assert(exists(d, tdir) && exists(d, tfifo) && exists(d, tlink) && !exists(d, treal));
    ck_assert(exists(d, path_of(d, 5, 1, 2) + strlen(d) + 1)); /* the link's target is untouched */

    /* prune: a directory newer than the step written, and one older than
     * --keep, are left; the regular files are pruned as ever */
    const char *older = path_of(d, 1, 1, 2);
    ck_assert_int_eq(mkdir(older, 0700), 0);
    free(write_one(d, 2, &len));
    free(write_one(d, 3, &len));
    free(write_one(d, 4, &len));
    ck_assert_msg(train_ckpt_prune(d, 1, 2, 4, 2, &err) == 0, "%s", err.msg);
    struct stat st;
    ck_assert_int_eq(lstat(path_of(d, 8, 1, 2), &st), 0); /* the directory newer than 4 */
    ck_assert(S_ISDIR(st.st_mode));
    ck_assert_int_eq(lstat(path_of(d, 7, 1, 2), &st), 0); /* the symlink newer than 4 */
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(lstat(path_of(d, 1, 1, 2), &st), 0); /* the directory older than --keep's */
    ck_assert(S_ISDIR(st.st_mode));
    ck_assert_int_eq(access(path_of(d, 5, 1, 2), F_OK), -1); /* a newer regular file: removed */
    ck_assert_int_eq(access(path_of(d, 2, 1, 2), F_OK), -1); /* past --keep 2: removed */
    ck_assert_int_eq(access(path_of(d, 3, 1, 2), F_OK), 0);
    ck_assert_int_eq(access(path_of(d, 4, 1, 2), F_OK), 0);
}
END_TEST

START_TEST(test_write_errors)
{
    struct sl_error err = {0};
    struct train_ckpt_meta m = meta(2);
    float w[1] = {0};
    m.nparams = 7; /* not what the shape makes */
    ck_assert_int_eq(train_ckpt_write(sl_test_dir(), &m, w, w, NULL, &err), SL_EINVAL);
    m = meta(2);
    ck_assert_int_eq(train_ckpt_write(sl_test_dir(), &m, NULL, NULL, NULL, &err), SL_EINVAL);
    m.job[0] = '\0';
    ck_assert_int_eq(train_ckpt_write(sl_test_dir(), &m, w, w, NULL, &err), SL_EINVAL);
    m = meta(2);
    float *a = values(m.nparams, 0);
    ck_assert_int_eq(train_ckpt_write(sl_test_path("no-such-dir"), &m, a, a, NULL, &err), SL_EIO);
    ck_assert(strstr(err.msg, "no-such-dir") != NULL);
    free(a);
}
END_TEST

START_TEST(test_position)
{
    struct sl_error err = {0};
    struct client_input_position p, q;
    ck_assert_int_eq(client_input_position_at(&p, 12, 4, 2, &err), 0);
    ck_assert_uint_eq(p.step, 3);
    uint8_t b[CLIENT_INPUT_POSITION_BYTES];
    client_input_position_encode(&p, b);
    ck_assert_int_eq(client_input_position_decode(&q, b, sizeof b, &err), 0);
    ck_assert(p.epoch == 2 && q.epoch == 2 && q.step == 3 && q.seq == 12 && q.replicas == 4);
    const struct client_input_position good = q;
    ck_assert_int_eq(client_input_position_at(&p, 13, 4, 0, &err), SL_EINVAL);
    ck_assert_int_eq(client_input_position_at(&p, 0, 0, 0, &err), SL_EINVAL);
    ck_assert_int_eq(client_input_position_at(&p, 0, 1025, 0, &err), SL_EINVAL);
    ck_assert_int_eq(client_input_position_at(&p, (UINT64_C(1) << 48) + 1, 1, 0, &err), SL_EINVAL);
    ck_assert_int_eq(client_input_position_at(&p, UINT64_C(1) << 48, 1, 0, &err), 0);
    ck_assert_int_eq(client_input_position_decode(&q, b, sizeof b - 1, &err), SL_ECORRUPT);
    ck_assert_int_eq(client_input_position_decode(&q, b, 0, &err), SL_ECORRUPT);
    for (size_t i = 0; i < sizeof b * 8; i++) {
        b[i / 8] ^= (uint8_t)(1u << (i % 8));
        ck_assert_msg(client_input_position_decode(&q, b, sizeof b, &err) == SL_ECORRUPT, "bit %zu", i);
        b[i / 8] ^= (uint8_t)(1u << (i % 8));
    }
    /* a good CRC over bad values */
    struct {
        uint64_t step, seq;
        uint32_t replicas;
        const char *text;
    } bad[] = {{3, 13, 4, "is not step"},
               {4, 12, 4, "is not step"},
               {0, 0, 0, "replicas 0"},
               {1, 2000, 2000, "replicas 2000"},
               {(UINT64_C(1) << 48) + 1, (UINT64_C(1) << 48) + 1, 1, "above 2^48"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sl_store_le64(b + 16, bad[i].step);
        sl_store_le64(b + 24, bad[i].seq);
        sl_store_le32(b + 32, bad[i].replicas);
        sl_store_le32(b + 36, sl_crc32c(b, 36));
        ck_assert_msg(client_input_position_decode(&q, b, sizeof b, &err) == SL_ECORRUPT &&
                          strstr(err.msg, bad[i].text) != NULL,
                      "case %zu: %s", i, err.msg);
        ck_assert(q.epoch == good.epoch && q.step == good.step && q.seq == good.seq &&
                  q.replicas == good.replicas); /* unchanged on error */
    }
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_ckpt");
    TCase *tc = tcase_create("ckpt");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_every_flip_and_truncation);
    tcase_add_test(tc, test_hostile_headers);
    tcase_add_test(tc, test_version_1);
    tcase_add_test(tc, test_version_2);
    tcase_add_test(tc, test_transition);
    tcase_add_test(tc, test_mismatch);
    tcase_add_test(tc, test_elastic_offset);
    tcase_add_test(tc, test_sets);
    tcase_add_test(tc, test_list_prune_clean);
    tcase_add_test(tc, test_write_errors);
    tcase_add_test(tc, test_position);
    suite_add_tcase(s, tc);
    TCase *odd = tcase_create("not a file"); /* a FIFO that hangs fails here, quickly */
    tcase_set_timeout(odd, 10);
    tcase_add_test(odd, test_not_a_file);
    suite_add_tcase(s, odd);
    return s;
}
