/* libFuzzer target for a trainer worker's checkpoint files
 * (trainer/ckpt/train_ckpt.c, train_ckpt_read): the first input byte is a
 * mode, the rest the file. Unless mode bit 0 is set, the target makes the
 * input position's CRC-32C (bytes 16..56) and the file's (its last 4
 * bytes) right, so that the checks behind them are fuzzed too; with it
 * set the file is read as given. The reader answers 0 or SL_ECORRUPT with
 * a message (the file is a regular one, and no command line is given to
 * disagree with). A checkpoint it accepts is within the documented
 * ranges, is accepted again when its own fields are what the command line
 * asks for, and train_ckpt_write writes it back into exactly the bytes
 * read (every header byte is a field or checked as zero). */
#include <inttypes.h>
#include <sys/stat.h>

#include "fuzz_common.h"
#include "train_ckpt.h"

static char in_path[256], out_dir[256];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > (1u << 20))
        return 0;
    if (in_path[0] == '\0') {
        snprintf(in_path, sizeof in_path, "%s/in", fuzz_dir());
        snprintf(out_dir, sizeof out_dir, "%s/out", fuzz_dir());
        CHECK(mkdir(out_dir, 0700) == 0);
    }
    size_t n = size - 1;
    uint8_t *f = malloc(n ? n : 1);
    CHECK(f != NULL);
    if (n)
        memcpy(f, data + 1, n);
    if (!(data[0] & 1)) {
        if (n >= 56)
            fuzz_store_le32(f + 52, fuzz_crc32c(f + 16, 36));
        if (n >= 4)
            fuzz_store_le32(f + n - 4, fuzz_crc32c(f, n - 4));
    }
    fuzz_write_file(in_path, f, n);
    struct train_ckpt ck;
    struct sl_error err = {0};
    int rc = train_ckpt_read(in_path, NULL, &ck, &err);
    fuzz_note("train_ckpt_read", rc, err.msg);
    if (rc != 0) {
        static const int errors[] = {SL_ECORRUPT, 0};
        fuzz_check_error(rc, &err, errors);
        CHECK(ck.buf == NULL);
        free(f);
        return 0;
    }
    const struct train_ckpt_meta *m = &ck.meta;
    size_t jl = strlen(m->job);
    CHECK(jl >= 1 && jl <= TRAIN_CKPT_MAX_JOB && m->worker < m->workers && m->replicas == m->pos.replicas);
    CHECK(m->model <= 2 && m->mode <= 1 && m->nhidden <= TRAIN_MODEL_MAX_HIDDEN);
    CHECK((m->nparams == 0) == (ck.weights == NULL) && (m->nparams == 0) == (ck.velocity == NULL));
    /* version 1's header has no steps_per_epoch, version 2's no transition */
    size_t hb = f[8] == 1   ? TRAIN_CKPT_V1_HEADER_BYTES
                : f[8] == 2 ? TRAIN_CKPT_V2_HEADER_BYTES
                            : TRAIN_CKPT_HEADER_BYTES;
    CHECK(n == hb + ((jl + 7) & ~(size_t)7) + 8 * m->nparams + 4);
    CHECK(hb != TRAIN_CKPT_V1_HEADER_BYTES || m->steps_per_epoch == 0);
    CHECK(hb == TRAIN_CKPT_HEADER_BYTES || (m->from_workers == 0 && m->step_base == 0));
    /* a transition is whole and within its ranges, or absent */
    /* with no transition, step_base is an elastic job's signed offset: the
     * step it names (offset + position's step) within 0..2^48 */
    int64_t off = (int64_t)m->step_base;
    CHECK(m->from_workers == 0
              ? m->from_replicas == 0 && m->from_epoch == 0 && m->from_step == 0 && m->from_steps_per_epoch == 0 &&
                    off >= -(int64_t)CLIENT_INPUT_POSITION_MAX_SEQ && off <= (int64_t)CLIENT_INPUT_POSITION_MAX_SEQ &&
                    (off >= 0 || (uint64_t)-off <= m->pos.step)
              : m->from_step >= 1 && m->from_step < m->from_steps_per_epoch && m->from_replicas >= 1 &&
                    m->steps_per_epoch != 0);
    CHECK(strcmp(ck.path, in_path) == 0);

    /* what it was made for, asked for: accepted */
    struct train_ckpt again;
    CHECK(train_ckpt_read(in_path, m, &again, &err) == 0);
    train_ckpt_free(&again);
    /* another job: refused as made for another command line */
    struct train_ckpt_meta other = *m;
    other.job[0] = m->job[0] == 'a' ? 'b' : 'a';
    rc = train_ckpt_read(in_path, &other, &again, &err);
    CHECK(rc == SL_EINVAL && strstr(err.msg, "made for job") != NULL);

    /* written again: the same bytes (a version 1 or 2 file as version 3:
     * the same after the header) */
    uint64_t bytes = 0;
    CHECK(train_ckpt_write(out_dir, m, ck.weights, ck.velocity, &bytes, &err) == 0);
    CHECK(bytes == n + (TRAIN_CKPT_HEADER_BYTES - hb));
    char name[96], path[512];
    train_ckpt_name(name, sizeof name, m->step_base + m->pos.step, m->worker, m->workers);
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    size_t wn;
    uint8_t *w = fuzz_read_file(path, &wn);
    CHECK(wn == bytes && memcmp(w + TRAIN_CKPT_HEADER_BYTES, f + hb, n - hb - 4) == 0);
    CHECK(hb != TRAIN_CKPT_HEADER_BYTES || memcmp(w, f, n) == 0);
    CHECK(unlink(path) == 0);
    free(w);
    train_ckpt_free(&ck);
    free(f);
    return 0;
}
