/* train_ckpt: see train_ckpt.h for the format and the contract.
 *
 * A write streams the header, the job name, the two arrays and the CRC
 * through sl_output (temporary, fsync, rename), then fsyncs the directory
 * so the rename itself survives a power loss. A read takes the 128-byte
 * header first and checks every count and the exact file size it implies
 * before it allocates (the allocation is then the file's size, which is
 * also capped); the CRC over the whole file is checked before any field
 * beyond the header's sizes is believed. The arrays start at a multiple
 * of 8 bytes, so the loaded buffer's floats are aligned and used in place
 * (x86-64 and every little-endian host: the bytes are the floats).
 *
 * Names: ckpt-<steps, at least 12 digits>.w<worker>of<workers>, parsed
 * strictly (digits only, no sign, no leading "+"), so nothing else in the
 * directory is ever taken for a checkpoint nor removed.
 */
#include "train_ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_crc32c.h"
#include "sl_alloc.h"
#include "sl_bytes.h"
#include "sl_log.h"
#include "sl_output.h"
#include "train_ckpt_io.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint arrays are written as the host's float32 bytes: little-endian hosts only"
#endif

static const char ckpt_magic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'C', 'K'};

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Remove path only when it is a regular file (what sl_output writes):
 * anything else carrying a checkpoint's or a temporary's name was not made
 * here and is left in place with a warning, never a failed unlink. 0 when
 * removed (or gone), 1 when left, SL_EIO naming the call. */
static int remove_regular(const char *path, struct sl_error *err)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : sl_error_sys(err, errno, "lstat(%s)", path);
    if (!S_ISREG(st.st_mode)) {
        sl_log(SL_LOG_WARN, "checkpoint: %s is %s, not a file this trainer wrote: left in place (remove it by hand)",
               path, train__ckpt_file_kind(st.st_mode));
        return 1;
    }
    if (unlink(path) != 0 && errno != ENOENT)
        return sl_error_sys(err, errno, "unlink(%s)", path);
    return 0;
}

void train_ckpt_name(char *out, size_t cap, uint64_t steps, uint32_t worker, uint32_t workers)
{
    snprintf(out, cap, "ckpt-%012" PRIu64 ".w%" PRIu32 "of%" PRIu32, steps, worker, workers);
}

/* An unsigned decimal of 1..20 digits at *p, no sign; advances *p. */
static int parse_digits(const char **p, uint64_t *v)
{
    const char *s = *p;
    uint64_t x = 0;
    int n = 0;
    while (*s >= '0' && *s <= '9') {
        unsigned d = (unsigned)(*s - '0');
        if (x > (UINT64_MAX - d) / 10)
            return -1;
        x = x * 10 + d;
        s++;
        n++;
    }
    if (n == 0 || n > 20)
        return -1;
    *p = s;
    *v = x;
    return 0;
}

/* "ckpt-S.wWofN" exactly: 0 with the three numbers, -1 for anything else. */
static int parse_name(const char *name, uint64_t *steps, uint64_t *worker, uint64_t *workers)
{
    const char *p = name;
    if (strncmp(p, "ckpt-", 5) != 0)
        return -1;
    p += 5;
    const char *digits = p;
    if (parse_digits(&p, steps) != 0 || p - digits < 12 || strncmp(p, ".w", 2) != 0)
        return -1;
    p += 2;
    if (parse_digits(&p, worker) != 0 || strncmp(p, "of", 2) != 0)
        return -1;
    p += 2;
    if (parse_digits(&p, workers) != 0 || *p != '\0' || *worker > UINT32_MAX || *workers > UINT32_MAX)
        return -1;
    /* only the name train_ckpt_name makes: one file per step, never two
     * spellings of it (leading zeros) */
    char canon[96];
    train_ckpt_name(canon, sizeof canon, *steps, (uint32_t)*worker, (uint32_t)*workers);
    return strcmp(canon, name) == 0 ? 0 : -1;
}

/* The model's parameter count from its shape, as train_model lays it out;
 * 0 on overflow or a bad shape. */
static uint64_t params_of(const struct train_ckpt_meta *m)
{
    uint64_t dims[TRAIN_MODEL_MAX_HIDDEN + 2], total = 0;
    if (m->nhidden > TRAIN_MODEL_MAX_HIDDEN || m->inputs == 0 || m->classes == 0)
        return 0;
    dims[0] = m->inputs;
    for (uint32_t h = 0; h < m->nhidden; h++)
        dims[h + 1] = m->hidden[h];
    dims[m->nhidden + 1] = m->classes;
    for (uint32_t l = 0; l <= m->nhidden; l++) {
        if (dims[l] > TRAIN_MODEL_MAX_WIDTH || dims[l + 1] > TRAIN_MODEL_MAX_WIDTH || dims[l + 1] == 0)
            return 0;
        total += dims[l] * dims[l + 1] + dims[l + 1]; /* each below 2^49: no overflow in 5 layers */
    }
    return total;
}

/* 0, or SL_EINVAL naming the first field out of range. */
static int check_meta(const struct train_ckpt_meta *m, int code, struct sl_error *err)
{
    size_t jl = strnlen(m->job, sizeof m->job);
    if (jl == 0 || jl > TRAIN_CKPT_MAX_JOB)
        return sl_error_set(err, code, "job name of %zu bytes (expected 1..%d)", jl, TRAIN_CKPT_MAX_JOB);
    if (m->workers == 0 || m->worker >= m->workers)
        return sl_error_set(err, code, "worker %" PRIu32 " of %" PRIu32 " out of range", m->worker, m->workers);
    if (m->replicas == 0 || m->replicas != m->pos.replicas)
        return sl_error_set(err, code, "replicas %" PRIu32 " (the input position's %" PRIu32 ")", m->replicas,
                            m->pos.replicas);
    if (m->steps_per_epoch > CLIENT_INPUT_POSITION_MAX_SEQ)
        return sl_error_set(err, code, "%" PRIu64 " steps per epoch (at most 2^48)", m->steps_per_epoch);
    int none = m->from_workers == 0 && m->from_replicas == 0 && m->from_epoch == 0 && m->from_step == 0 &&
               m->from_steps_per_epoch == 0;
    if (none && m->step_base != 0) { /* an elastic job's offset: signed, and the step it names not below 0 */
        int64_t off = (int64_t)m->step_base;
        if (off < -(int64_t)CLIENT_INPUT_POSITION_MAX_SEQ || off > (int64_t)CLIENT_INPUT_POSITION_MAX_SEQ ||
            (off < 0 && (uint64_t)-off > m->pos.step))
            return sl_error_set(err, code,
                                "a step offset of %" PRId64 " with no transition (at most 2^48 either way, and the "
                                "step %" PRIu64 " it is added to not below 0)",
                                off, m->pos.step);
    } else if (!none) { /* a transition: the old shape, where it changed, and the steps before */
        if (m->from_workers == 0 || m->from_workers > 65536 || m->from_replicas == 0 ||
            m->from_replicas > CLIENT_INPUT_POSITION_MAX_REPLICAS)
            return sl_error_set(err, code,
                                "transition from %" PRIu32 " workers x %" PRIu32 " replicas (1..65536 x 1..%d)",
                                m->from_workers, m->from_replicas, CLIENT_INPUT_POSITION_MAX_REPLICAS);
        if (m->from_steps_per_epoch < 2 || m->from_steps_per_epoch > CLIENT_INPUT_POSITION_MAX_SEQ)
            return sl_error_set(err, code, "transition epoch of %" PRIu64 " steps (2 to 2^48)",
                                m->from_steps_per_epoch);
        if (m->from_step == 0 || m->from_step >= m->from_steps_per_epoch)
            return sl_error_set(err, code,
                                "transition at step %" PRIu64 " of an epoch of %" PRIu64 " steps (1 to %" PRIu64 ")",
                                m->from_step, m->from_steps_per_epoch, m->from_steps_per_epoch - 1);
        if (m->from_epoch > CLIENT_INPUT_POSITION_MAX_SEQ || m->step_base > CLIENT_INPUT_POSITION_MAX_SEQ)
            return sl_error_set(err, code,
                                "transition at epoch %" PRIu64 " after %" PRIu64 " steps (each at most 2^48)",
                                m->from_epoch, m->step_base);
        if (m->steps_per_epoch == 0)
            return sl_error_set(err, code, "a transition without the stream's steps per epoch");
    }
    if (m->model > 2 || m->mode > 1)
        return sl_error_set(err, code, "model %" PRIu32 " or mode %" PRIu32 " unknown", m->model, m->mode);
    if (m->model == 0 && m->nparams != 0)
        return sl_error_set(err, code, "%" PRIu64 " parameters with no model", m->nparams);
    if (m->model == 1 && m->nhidden != 0)
        return sl_error_set(err, code, "softmax with %" PRIu32 " hidden layers", m->nhidden);
    if (m->nhidden > TRAIN_MODEL_MAX_HIDDEN)
        return sl_error_set(err, code, "nhidden %" PRIu32 " (at most %d)", m->nhidden, TRAIN_MODEL_MAX_HIDDEN);
    for (uint32_t h = m->nhidden; h < TRAIN_MODEL_MAX_HIDDEN; h++)
        if (m->hidden[h] != 0)
            return sl_error_set(err, code, "hidden[%" PRIu32 "] = %" PRIu32 " beyond nhidden %" PRIu32, h, m->hidden[h],
                                m->nhidden);
    if (m->model != 0) {
        uint64_t p = params_of(m);
        if (p == 0 || p != m->nparams)
            return sl_error_set(err, code,
                                "%" PRIu64 " parameters, but inputs %" PRIu32 ", %" PRIu32 " hidden layers and %" PRIu32
                                " classes make %" PRIu64,
                                m->nparams, m->inputs, m->nhidden, m->classes, p);
    }
    return 0;
}

static void encode_header(const struct train_ckpt_meta *m, size_t jl, uint8_t h[TRAIN_CKPT_HEADER_BYTES])
{
    memset(h, 0, TRAIN_CKPT_HEADER_BYTES);
    memcpy(h, ckpt_magic, 8);
    sl_store_le32(h + 8, TRAIN_CKPT_VERSION);
    sl_store_le32(h + 12, TRAIN_CKPT_HEADER_BYTES);
    client_input_position_encode(&m->pos, h + 16);
    sl_store_le32(h + 56, m->worker);
    sl_store_le32(h + 60, m->workers);
    sl_store_le32(h + 64, m->replicas);
    sl_store_le32(h + 68, m->model);
    sl_store_le32(h + 72, m->mode);
    sl_store_le32(h + 76, m->classes);
    sl_store_le32(h + 80, m->inputs);
    sl_store_le32(h + 84, m->nhidden);
    for (int k = 0; k < TRAIN_MODEL_MAX_HIDDEN; k++)
        sl_store_le32(h + 88 + 4 * k, m->hidden[k]);
    sl_store_le32(h + 104, f32_bits(m->lr));
    sl_store_le32(h + 108, f32_bits(m->momentum));
    sl_store_le32(h + 112, m->seed);
    sl_store_le32(h + 116, (uint32_t)jl);
    sl_store_le64(h + 120, m->nparams);
    sl_store_le64(h + 128, m->steps_per_epoch);
    sl_store_le32(h + 136, m->from_workers);
    sl_store_le32(h + 140, m->from_replicas);
    sl_store_le64(h + 144, m->from_epoch);
    sl_store_le64(h + 152, m->from_step);
    sl_store_le64(h + 160, m->from_steps_per_epoch);
    sl_store_le64(h + 168, m->step_base);
}

uint64_t train_ckpt_steps(const struct train_ckpt_meta *m)
{
    return m->step_base + m->pos.step; /* each at most 2^48 */
}

int train_ckpt_where(const struct train_ckpt_meta *m, uint64_t *epoch, uint64_t *step, struct sl_error *err)
{
    uint64_t S = m->steps_per_epoch, k = m->pos.step;
    if (S == 0)
        return sl_error_set(err, SL_EINVAL, "its steps per epoch are not known (a version 1 checkpoint)");
    if (m->from_workers == 0) {
        *epoch = k / S;
        *step = k % S;
        return 0;
    }
    /* the transition epoch's remaining steps, then whole epochs of S */
    uint64_t left = m->from_steps_per_epoch - m->from_step;
    if (k < left) {
        *epoch = m->from_epoch;
        *step = m->from_step + k;
        return 0;
    }
    *epoch = m->from_epoch + 1 + (k - left) / S;
    *step = (k - left) % S;
    return 0;
}

int train_ckpt_write(const char *dir, const struct train_ckpt_meta *m, const float *weights, const float *velocity,
                     uint64_t *bytes, struct sl_error *err)
{
    int rc = check_meta(m, SL_EINVAL, err);
    if (rc != 0)
        return sl_error_prefix(err, "checkpoint: ");
    if (m->nparams > 0 && (weights == NULL || velocity == NULL))
        return sl_error_set(err, SL_EINVAL, "checkpoint: no weights or velocity for %" PRIu64 " parameters",
                            m->nparams);
    char name[96], path[TRAIN_CKPT_MAX_PATH];
    train_ckpt_name(name, sizeof name, train_ckpt_steps(m), m->worker, m->workers);
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return sl_error_set(err, SL_EINVAL, "checkpoint: the path %s/%s is too long", dir, name);
    size_t jl = strlen(m->job);
    uint8_t h[TRAIN_CKPT_HEADER_BYTES], zeros[8] = {0};
    encode_header(m, jl, h);
    struct sl_output *out;
    if ((rc = sl_output_open(&out, path, SL_OUTPUT_FSYNC, err)) != 0)
        return sl_error_prefix(err, "checkpoint: ");
    FILE *f = sl_output_stream(out);
    uint32_t crc = 0;
    size_t n = (size_t)m->nparams;
    int bad = train__ckpt_put(f, &crc, h, sizeof h) || train__ckpt_put(f, &crc, m->job, jl) ||
              train__ckpt_put(f, &crc, zeros, train__ckpt_pad8(jl) - jl) ||
              train__ckpt_put(f, &crc, weights, n * sizeof(float)) ||
              train__ckpt_put(f, &crc, velocity, n * sizeof(float));
    if ((rc = train__ckpt_finish(out, f, crc, bad, dir, err)) != 0)
        return rc;
    if (bytes != NULL)
        *bytes = TRAIN_CKPT_HEADER_BYTES + train__ckpt_pad8(jl) + 8 * (uint64_t)n + 4;
    return 0;
}

void train_ckpt_free(struct train_ckpt *ck)
{
    if (ck == NULL)
        return;
    sl_free(ck->buf);
    memset(ck, 0, sizeof *ck);
}

/* The fields that must match the command line: SL_EINVAL naming the first
 * that does not. */
static int check_want(const char *path, const struct train_ckpt_meta *g, const struct train_ckpt_meta *w,
                      struct sl_error *err)
{
    static const char *const models[] = {"none", "softmax", "mlp"}, *const modes[] = {"mirrored", "tower"};
    if (strcmp(g->job, w->job) != 0)
        return sl_error_set(err, SL_EINVAL, "%s: made for job '%s', not '%s'", path, g->job, w->job);
    if (g->worker != w->worker || g->workers != w->workers)
        return sl_error_set(err, SL_EINVAL,
                            "%s: made for worker %" PRIu32 " of %" PRIu32 ", not worker %" PRIu32 " of %" PRIu32, path,
                            g->worker, g->workers, w->worker, w->workers);
    if (g->replicas != w->replicas)
        return sl_error_set(err, SL_EINVAL, "%s: made with %" PRIu32 " replicas, the command line has %" PRIu32, path,
                            g->replicas, w->replicas);
    if (g->model != w->model && w->model <= 2)
        return sl_error_set(err, SL_EINVAL, "%s: made with --model %s, the command line has --model %s", path,
                            models[g->model], models[w->model]);
    if (g->model == 0)
        return 0;
    if (g->mode != w->mode && w->mode <= 1)
        return sl_error_set(err, SL_EINVAL, "%s: made with --mode %s, the command line has --mode %s", path,
                            modes[g->mode], modes[w->mode]);
    if (g->classes != w->classes)
        return sl_error_set(err, SL_EINVAL,
                            "%s: made with --classes %" PRIu32 ", the command line has --classes %" PRIu32, path,
                            g->classes, w->classes);
    int same = g->nhidden == w->nhidden;
    for (uint32_t h = 0; same && h < g->nhidden; h++)
        same = g->hidden[h] == w->hidden[h];
    if (!same) {
        char a[64] = "", b[64] = "";
        for (uint32_t h = 0; h < g->nhidden && h < TRAIN_MODEL_MAX_HIDDEN; h++)
            snprintf(a + strlen(a), sizeof a - strlen(a), "%s%" PRIu32, h ? "," : "", g->hidden[h]);
        for (uint32_t h = 0; h < w->nhidden && h < TRAIN_MODEL_MAX_HIDDEN; h++)
            snprintf(b + strlen(b), sizeof b - strlen(b), "%s%" PRIu32, h ? "," : "", w->hidden[h]);
        return sl_error_set(err, SL_EINVAL, "%s: made with hidden sizes '%s', the command line has '%s'", path,
                            g->nhidden ? a : "none", w->nhidden ? b : "none");
    }
    if (w->inputs > 0 && g->inputs != w->inputs)
        return sl_error_set(err, SL_EINVAL, "%s: made for inputs of %" PRIu32 " values, the job's have %" PRIu32, path,
                            g->inputs, w->inputs);
    return 0;
}

/* Read exactly n bytes at offset 0.. of fd into p: 0, or SL_EIO / a short
 * read (the file shrank since fstat) as SL_ECORRUPT. */
static int read_all(int fd, void *p, size_t n, const char *path, struct sl_error *err)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)p + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return sl_error_sys(err, errno, "read(%s)", path);
        if (r == 0)
            return sl_error_set(err, SL_ECORRUPT, "%s: truncated while read (%zu of %zu bytes)", path, got, n);
        got += (size_t)r;
    }
    return 0;
}

int train_ckpt_read(const char *path, const struct train_ckpt_meta *want, struct train_ckpt *out, struct sl_error *err)
{
    memset(out, 0, sizeof *out);
    int fd;
    uint64_t size, min = TRAIN_CKPT_V1_HEADER_BYTES + 8 + 4; /* the smallest: version 1's */
    int rc = train__ckpt_open(path, &fd, &size, err);
    if (rc != 0)
        return rc;
    uint8_t h[TRAIN_CKPT_V1_HEADER_BYTES]; /* what both versions begin with */
    uint8_t *buf = NULL;
    struct train_ckpt_meta m;
    memset(&m, 0, sizeof m);
    if (size < min) {
        rc = sl_error_set(err, SL_ECORRUPT, "%s: truncated (%" PRIu64 " bytes; a checkpoint has at least %" PRIu64 ")",
                          path, size, min);
        goto out_close;
    }
    if ((rc = read_all(fd, h, sizeof h, path, err)) != 0)
        goto out_close;
    if (memcmp(h, ckpt_magic, 8) != 0) {
        rc = sl_error_set(err, SL_ECORRUPT, "%s: not a sluice checkpoint (bad magic, expected SLUICECK)", path);
        goto out_close;
    }
    uint32_t version = sl_load_le32(h + 8), hbytes = sl_load_le32(h + 12), jl = sl_load_le32(h + 116);
    if (version == 0 || version > TRAIN_CKPT_VERSION) {
        rc = sl_error_set(err, SL_ECORRUPT, "%s: checkpoint version %" PRIu32 " (this trainer reads versions 1 to %d)",
                          path, version, TRAIN_CKPT_VERSION);
        goto out_close;
    }
    size_t hb = version == 1   ? TRAIN_CKPT_V1_HEADER_BYTES
                : version == 2 ? TRAIN_CKPT_V2_HEADER_BYTES
                               : TRAIN_CKPT_HEADER_BYTES;
    m.nparams = sl_load_le64(h + 120);
    if (hbytes != hb || jl == 0 || jl > TRAIN_CKPT_MAX_JOB || m.nparams > TRAIN_CKPT_MAX_BYTES / 8) {
        rc = sl_error_set(err, SL_ECORRUPT,
                          "%s: damaged header (header bytes %" PRIu32 ", job name bytes %" PRIu32 ", %" PRIu64
                          " parameters)",
                          path, hbytes, jl, m.nparams);
        goto out_close;
    }
    uint64_t expect = hb + train__ckpt_pad8(jl) + 8 * m.nparams + 4;
    if (size != expect) {
        rc = sl_error_set(err, SL_ECORRUPT, "%s: %s (%" PRIu64 " bytes, the header says %" PRIu64 ")", path,
                          size < expect ? "truncated" : "longer than its header says", size, expect);
        goto out_close;
    }
    if (expect > TRAIN_CKPT_MAX_BYTES || expect > SIZE_MAX) {
        rc = sl_error_set(err, SL_ECORRUPT, "%s: %" PRIu64 " bytes, more than a checkpoint may hold", path, expect);
        goto out_close;
    }
    /* the size is the file's and agrees with the header: now it may size the buffer */
    if ((buf = sl_malloc((size_t)size)) == NULL) {
        rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory for %" PRIu64 " bytes", path, size);
        goto out_close;
    }
    memcpy(buf, h, sizeof h);
    if ((rc = read_all(fd, buf + sizeof h, (size_t)size - sizeof h, path, err)) != 0)
        goto out_free;
    uint32_t stored = sl_load_le32(buf + size - 4), crc = sl_crc32c(buf, (size_t)size - 4);
    if (stored != crc) {
        rc = sl_error_set(err, SL_ECORRUPT,
                          "%s: damaged (CRC-32C mismatch: stored %08" PRIx32 ", computed %08" PRIx32 ")", path, stored,
                          crc);
        goto out_free;
    }
    if ((rc = client_input_position_decode(&m.pos, buf + 16, CLIENT_INPUT_POSITION_BYTES, err)) != 0) {
        sl_error_prefix(err, "%s: ", path);
        goto out_free;
    }
    m.worker = sl_load_le32(buf + 56);
    m.workers = sl_load_le32(buf + 60);
    m.replicas = sl_load_le32(buf + 64);
    m.model = sl_load_le32(buf + 68);
    m.mode = sl_load_le32(buf + 72);
    m.classes = sl_load_le32(buf + 76);
    m.inputs = sl_load_le32(buf + 80);
    m.nhidden = sl_load_le32(buf + 84);
    for (int k = 0; k < TRAIN_MODEL_MAX_HIDDEN; k++)
        m.hidden[k] = sl_load_le32(buf + 88 + 4 * k);
    m.lr = bits_f32(sl_load_le32(buf + 104));
    m.momentum = bits_f32(sl_load_le32(buf + 108));
    m.seed = sl_load_le32(buf + 112);
    m.steps_per_epoch = version == 1 ? 0 : sl_load_le64(buf + 128);
    if (version >= 3) {
        m.from_workers = sl_load_le32(buf + 136);
        m.from_replicas = sl_load_le32(buf + 140);
        m.from_epoch = sl_load_le64(buf + 144);
        m.from_step = sl_load_le64(buf + 152);
        m.from_steps_per_epoch = sl_load_le64(buf + 160);
        m.step_base = sl_load_le64(buf + 168);
    }
    memcpy(m.job, buf + hb, jl);
    m.job[jl] = '\0';
    int zero_pad = strlen(m.job) == jl;
    for (size_t k = jl; zero_pad && k < train__ckpt_pad8(jl); k++)
        zero_pad = buf[hb + k] == 0;
    if (!zero_pad) {
        rc = sl_error_set(err, SL_ECORRUPT, "%s: damaged (a NUL in the job name or its padding is not zero)", path);
        goto out_free;
    }
    if ((rc = check_meta(&m, SL_ECORRUPT, err)) != 0) {
        sl_error_prefix(err, "%s: damaged: ", path);
        goto out_free;
    }
    if (want != NULL && (rc = check_want(path, &m, want, err)) != 0)
        goto out_free;
    close(fd);
    out->meta = m;
    snprintf(out->path, sizeof out->path, "%s", path);
    out->buf = buf;
    if (m.nparams > 0) {
        size_t off = hb + train__ckpt_pad8(jl);
        out->weights = (const float *)(const void *)(buf + off);
        out->velocity = out->weights + m.nparams;
    }
    return 0;

out_free:
    sl_free(buf);
out_close:
    close(fd);
    return rc;
}

int train_ckpt_list(const char *dir, uint32_t worker, uint32_t workers, uint64_t *steps, size_t cap, size_t *n,
                    size_t *total, size_t *other, char *other_name, size_t other_cap, struct sl_error *err)
{
    *n = 0;
    *total = 0;
    if (other != NULL)
        *other = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return sl_error_sys(err, errno, "opendir(%s)", dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        uint64_t s, w, nw;
        if (parse_name(e->d_name, &s, &w, &nw) != 0)
            continue;
        if (w != worker || nw != workers) {
            if (other != NULL && (*other)++ == 0 && other_name != NULL)
                snprintf(other_name, other_cap, "%s", e->d_name);
            continue;
        }
        (*total)++;
        /* keep the cap newest: insertion into a descending array */
        size_t i;
        if (*n < cap)
            i = (*n)++;
        else if (cap > 0 && s > steps[cap - 1])
            i = cap - 1;
        else
            continue;
        while (i > 0 && steps[i - 1] < s) {
            steps[i] = steps[i - 1];
            i--;
        }
        steps[i] = s;
    }
    closedir(d);
    return 0;
}

int train_ckpt_clean(const char *dir, uint32_t worker, uint32_t workers, size_t *removed, struct sl_error *err)
{
    if (removed != NULL)
        *removed = 0;
    char mark[48];
    snprintf(mark, sizeof mark, ".w%" PRIu32 "of%" PRIu32 ".", worker, workers);
    DIR *d = opendir(dir);
    if (d == NULL)
        return sl_error_sys(err, errno, "opendir(%s)", dir);
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        /* sl_output's temporary: "." NAME "." RANDOM ".tmp", RANDOM letters
         * and digits (12 today) */
        const char *nm = e->d_name, *at;
        size_t len = strlen(nm), ml = strlen(mark);
        if (strncmp(nm, ".ckpt-", 6) != 0 || len < 6 + ml + 4 || strcmp(nm + len - 4, ".tmp") != 0 ||
            (at = strstr(nm, mark)) == NULL || at + ml >= nm + len - 4)
            continue;
        int alnum = 1;
        for (const char *c = at + ml; c < nm + len - 4; c++)
            alnum = alnum && ((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z'));
        if (!alnum)
            continue;
        char name[TRAIN_CKPT_MAX_PATH];
        uint64_t s, w, nw;
        snprintf(name, sizeof name, "%.*s", (int)(at + ml - 1 - (nm + 1)), nm + 1);
        if (parse_name(name, &s, &w, &nw) != 0)
            continue;
        char path[TRAIN_CKPT_MAX_PATH];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, nm) >= sizeof path)
            continue;
        int r = remove_regular(path, err);
        if (r < 0)
            rc = r;
        else if (r == 0 && removed != NULL)
            (*removed)++;
    }
    closedir(d);
    return rc;
}

int train_ckpt_prune(const char *dir, uint32_t worker, uint32_t workers, uint64_t current, uint32_t keep,
                     struct sl_error *err)
{
    if (keep == 0)
        return sl_error_set(err, SL_EINVAL, "checkpoint: keep must be at least 1");
    DIR *d = opendir(dir);
    if (d == NULL)
        return sl_error_sys(err, errno, "opendir(%s)", dir);
    /* the steps at or below current, to find the keep-th newest */
    size_t n = 0, cap = 0;
    uint64_t *older = NULL;
    struct dirent *e;
    int rc = 0;
    char path[TRAIN_CKPT_MAX_PATH];
    while (rc == 0 && (e = readdir(d)) != NULL) {
        uint64_t s, w, nw;
        if (parse_name(e->d_name, &s, &w, &nw) != 0 || w != worker || nw != workers)
            continue;
        if (s > current) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            int r = remove_regular(path, err);
            if (r < 0)
                rc = r;
            else if (r == 0)
                sl_log(SL_LOG_WARN,
                       "checkpoint: removed %s, newer than step %" PRIu64 " just written (left by a run "
                       "restored from an older step)",
                       path, current);
            continue;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            uint64_t *t = sl_realloc(older, nc * sizeof *t);
            if (t == NULL) {
                rc = sl_error_set(err, SL_ENOMEM, "checkpoint: out of memory listing %s", dir);
                break;
            }
            older = t;
            cap = nc;
        }
        older[n++] = s;
    }
    closedir(d);
    if (rc == 0 && n > keep) {
        /* the keep-th newest is the cut: remove everything below it */
        for (size_t i = 1; i < n; i++) /* insertion sort, descending: a handful of files */
            for (size_t j = i; j > 0 && older[j - 1] < older[j]; j--) {
                uint64_t t = older[j];
                older[j] = older[j - 1];
                older[j - 1] = t;
            }
        for (size_t i = keep; rc == 0 && i < n; i++) {
            char name[96];
            train_ckpt_name(name, sizeof name, older[i], worker, workers);
            snprintf(path, sizeof path, "%s/%s", dir, name);
            int r = remove_regular(path, err);
            if (r < 0)
                rc = r;
        }
    }
    sl_free(older);
    return rc;
}

struct name_entry {
    uint64_t steps;
    uint32_t worker, workers;
};

/* Newest first: step descending, then worker count descending, then
 * worker ascending. */
static int name_entry_cmp(const void *a, const void *b)
{
    const struct name_entry *x = a, *y = b;
    if (x->steps != y->steps)
        return x->steps < y->steps ? 1 : -1;
    if (x->workers != y->workers)
        return x->workers < y->workers ? 1 : -1;
    return x->worker < y->worker ? -1 : x->worker > y->worker;
}

int train_ckpt_sets(const char *dir, struct train_ckpt_set *sets, size_t cap, size_t *n, size_t *total,
                    struct sl_error *err)
{
    *n = 0;
    *total = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return sl_error_sys(err, errno, "opendir(%s)", dir);
    struct name_entry *all = NULL;
    size_t na = 0, ca = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        uint64_t s, w, nw;
        if (parse_name(e->d_name, &s, &w, &nw) != 0 || w >= nw)
            continue;
        if (na == ca) {
            size_t nc = ca ? ca * 2 : 64;
            struct name_entry *t = sl_realloc(all, nc * sizeof *t);
            if (t == NULL) {
                rc = sl_error_set(err, SL_ENOMEM, "out of memory listing %s", dir);
                break;
            }
            all = t;
            ca = nc;
        }
        all[na++] = (struct name_entry){s, (uint32_t)w, (uint32_t)nw};
    }
    closedir(d);
    if (rc == 0 && na > 0)
        qsort(all, na, sizeof *all, name_entry_cmp);
    /* one set per (step, worker count): the distinct workers it has (the
     * names are canonical, so a worker appears once) and the first missing */
    for (size_t i = 0; rc == 0 && i < na;) {
        struct train_ckpt_set s = {.steps = all[i].steps, .workers = all[i].workers, .missing = UINT32_MAX};
        uint32_t next = 0;
        for (; i < na && all[i].steps == s.steps && all[i].workers == s.workers; i++) {
            if (all[i].worker != next && s.missing == UINT32_MAX)
                s.missing = next;
            next = all[i].worker + 1;
            s.have++;
        }
        if (s.missing == UINT32_MAX && next < s.workers)
            s.missing = next;
        if (*n < cap)
            sets[(*n)++] = s;
        (*total)++;
    }
    sl_free(all);
    return rc;
}
