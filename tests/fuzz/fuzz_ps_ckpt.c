/* libFuzzer target for a parameter server's checkpoint files
 * (trainer/ps/train_ps_ckpt.c, train_ps_ckpt_read): the first input byte is
 * a mode, the rest the file. Unless mode bit 0 is set, the target makes
 * the CRC-32Cs right (each worker's input position, as far as the header's
 * sizes place them inside the file, and the file's last 4 bytes), so that
 * the checks behind them are fuzzed too. The server, server count and
 * worker count asked for are the header's own unless bit 1 is set (then 0
 * of 1 for 1 worker). The reader answers 0, SL_ECORRUPT or SL_EINVAL (made
 * for another server) with a message. A checkpoint it accepts is in range
 * (global step within the version, positions valid and not before the
 * world's epoch, a world epoch only with a change, values finite), and
 * train_ps_ckpt_write writes it back into the bytes read, but for the
 * format version (a format-1 file is written as the current one) and the
 * description's padding, which the reader does not look at (written as
 * zeros). */
#include <math.h>
#include <sys/stat.h>

#include "fuzz_common.h"
#include "train_ckpt.h"
#include "train_ps_ckpt.h"

static char in_path[256], out_dir[256];

static size_t pad8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

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
    uint32_t index = 0, servers = 1, workers = 1;
    if (n >= TRAIN_PS_CKPT_HEADER && !(data[0] & 2)) {
        index = fuzz_load_le32(f + 12);
        servers = fuzz_load_le32(f + 16);
        workers = fuzz_load_le32(f + 20);
    }
    if (!(data[0] & 1) && n >= TRAIN_PS_CKPT_HEADER + 4) {
        size_t at = TRAIN_PS_CKPT_HEADER + pad8(fuzz_load_le32(f + 48) % 4096);
        for (uint32_t w = 0; w < fuzz_load_le32(f + 20) && at + CLIENT_INPUT_POSITION_BYTES <= n - 4; w++) {
            static const uint8_t none[CLIENT_INPUT_POSITION_BYTES];
            if (memcmp(f + at, none, sizeof none) != 0)
                fuzz_store_le32(f + at + 36, fuzz_crc32c(f + at, 36));
            at += CLIENT_INPUT_POSITION_BYTES;
        }
        fuzz_store_le32(f + n - 4, fuzz_crc32c(f, n - 4));
    }
    fuzz_write_file(in_path, f, n);
    struct train_ps_ckpt ck;
    struct sl_error err = {0};
    int rc = train_ps_ckpt_read(in_path, index, servers, workers, &ck, &err);
    fuzz_note("train_ps_ckpt_read", rc, err.msg);
    if (rc != 0) {
        static const int errors[] = {SL_ECORRUPT, SL_EINVAL, 0};
        fuzz_check_error(rc, &err, errors);
        CHECK(ck.buf == NULL && ck.pos == NULL);
        free(f);
        return 0;
    }
    const struct train_ps_state *s = &ck.state;
    CHECK(s->index == index && s->servers == servers && s->workers == workers);
    CHECK(workers >= 1 && workers <= TRAIN_PS_CKPT_MAX_WORKERS && s->global_step <= s->version);
    CHECK(s->config_len <= TRAIN_PS_MAX_CONFIG && s->config == ck.config && ck.config[s->config_len] == '\0');
    for (uint32_t w = 0; w < workers; w++) {
        const struct client_input_position *p = &s->pos[w];
        CHECK(p->replicas == 0 || p->seq == p->step * p->replicas);
        CHECK(p->replicas == 0 || p->epoch >= s->world_epoch);
    }
    CHECK(s->world_changes <= UINT32_MAX && (s->world_changes > 0 || s->world_epoch == 0));
    for (size_t k = 0; k < s->n; k++)
        CHECK(isfinite(s->values[k]) && isfinite(s->momentum[k]));
    size_t at_pos = TRAIN_PS_CKPT_HEADER + pad8(s->config_len);
    CHECK(n == at_pos + (size_t)CLIENT_INPUT_POSITION_BYTES * workers + 8 * s->n + 4);

    if (s->index < s->servers) {
        /* written again: the same bytes, reserved ones and padding as zeros */
        uint64_t bytes = 0;
        CHECK(train_ps_ckpt_write(out_dir, s, &bytes, &err) == 0);
        CHECK(bytes == n);
        char name[96], path[512];
        train_ckpt_name(name, sizeof name, s->version, s->index, s->servers);
        snprintf(path, sizeof path, "%s/%s", out_dir, name);
        size_t wn;
        uint8_t *w = fuzz_read_file(path, &wn);
        CHECK(wn == n);
        fuzz_store_le32(f + 8, TRAIN_PS_CKPT_VERSION);
        memset(f + TRAIN_PS_CKPT_HEADER + s->config_len, 0, pad8(s->config_len) - s->config_len);
        CHECK(memcmp(w, f, n - 4) == 0);
        CHECK(unlink(path) == 0);
        free(w);
    }
    train_ps_ckpt_free(&ck);
    free(f);
    return 0;
}
