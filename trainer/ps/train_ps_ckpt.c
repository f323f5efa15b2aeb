/* train_ps_ckpt: see train_ps_ckpt.h. */
#include "train_ps_ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_crc32c.h"
#include "sl_alloc.h"
#include "sl_bytes.h"
#include "sl_output.h"
#include "train_ckpt.h"
#include "train_ckpt_io.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint arrays are written as the host's float32 bytes: little-endian hosts only"
#endif

static const char ps_magic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'P', 'S'};

int train_ps_ckpt_write(const char *dir, const struct train_ps_state *s, uint64_t *bytes, struct sl_error *err)
{
    if (s->servers == 0 || s->index >= s->servers || s->workers == 0 || s->workers > TRAIN_PS_CKPT_MAX_WORKERS ||
        s->config_len > TRAIN_PS_MAX_CONFIG || (s->n > 0 && (s->values == NULL || s->momentum == NULL)) ||
        s->world_changes > UINT32_MAX || (s->world_changes == 0 && s->world_epoch != 0))
        return sl_error_set(err, SL_EINVAL,
                            "checkpoint: server %u of %u, %u workers, a %zu-byte description, world change %" PRIu64
                            " from epoch %" PRIu64 ": out of range",
                            s->index, s->servers, s->workers, s->config_len, s->world_changes, s->world_epoch);
    char name[96], path[TRAIN_CKPT_MAX_PATH];
    train_ckpt_name(name, sizeof name, s->version, s->index, s->servers);
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
        return sl_error_set(err, SL_EINVAL, "checkpoint: the path %s/%s is too long", dir, name);
    uint8_t h[TRAIN_PS_CKPT_HEADER] = {0}, zeros[8] = {0}, pos[CLIENT_INPUT_POSITION_BYTES];
    memcpy(h, ps_magic, 8);
    sl_store_le32(h + 8, TRAIN_PS_CKPT_VERSION);
    sl_store_le32(h + 12, s->index);
    sl_store_le32(h + 16, s->servers);
    sl_store_le32(h + 20, s->workers);
    sl_store_le64(h + 24, s->version);
    sl_store_le64(h + 32, s->global_step);
    sl_store_le64(h + 40, s->n);
    sl_store_le32(h + 48, (uint32_t)s->config_len);
    sl_store_le32(h + 52, (uint32_t)s->world_changes);
    sl_store_le64(h + 56, s->world_epoch);
    struct sl_output *out;
    int rc = sl_output_open(&out, path, SL_OUTPUT_FSYNC, err);
    if (rc != 0)
        return sl_error_prefix(err, "checkpoint: ");
    FILE *f = sl_output_stream(out);
    uint32_t crc = 0;
    int bad = train__ckpt_put(f, &crc, h, sizeof h) || train__ckpt_put(f, &crc, s->config, s->config_len) ||
              train__ckpt_put(f, &crc, zeros, train__ckpt_pad8(s->config_len) - s->config_len);
    for (uint32_t w = 0; !bad && w < s->workers; w++) {
        if (s->pos[w].replicas == 0)
            memset(pos, 0, sizeof pos);
        else
            client_input_position_encode(&s->pos[w], pos);
        bad = train__ckpt_put(f, &crc, pos, sizeof pos);
    }
    bad = bad || train__ckpt_put(f, &crc, s->values, s->n * sizeof(float)) ||
          train__ckpt_put(f, &crc, s->momentum, s->n * sizeof(float));
    if ((rc = train__ckpt_finish(out, f, crc, bad, dir, err)) != 0)
        return rc;
    if (bytes != NULL)
        *bytes = TRAIN_PS_CKPT_HEADER + train__ckpt_pad8(s->config_len) +
                 (uint64_t)CLIENT_INPUT_POSITION_BYTES * s->workers + 8 * (uint64_t)s->n + 4;
    return 0;
}

void train_ps_ckpt_free(struct train_ps_ckpt *ck)
{
    if (ck == NULL)
        return;
    sl_free(ck->buf);
    sl_free(ck->pos);
    memset(ck, 0, sizeof *ck);
}

int train_ps_ckpt_read(const char *path, uint32_t index, uint32_t servers, uint32_t workers, struct train_ps_ckpt *out,
                       struct sl_error *err)
{
    memset(out, 0, sizeof *out);
    int fd;
    uint64_t size;
    int rc = train__ckpt_open(path, &fd, &size, err);
    if (rc != 0)
        return rc;
    uint8_t h[TRAIN_PS_CKPT_HEADER], *buf = NULL;
    struct client_input_position *pos = NULL;
    if (size < TRAIN_PS_CKPT_HEADER + 4) {
        rc = sl_error_set(err, SL_ECORRUPT, "%s: truncated (%" PRIu64 " bytes)", path, size);
        goto fail;
    }
    if (read(fd, h, sizeof h) != (ssize_t)sizeof h) {
        rc = sl_error_sys(err, errno ? errno : EIO, "read(%s)", path);
        goto fail;
    }
    if (memcmp(h, ps_magic, 8) != 0) {
        rc = sl_error_set(err, SL_ECORRUPT, "%s: not a parameter server's checkpoint (bad magic, expected SLUICEPS)",
                          path);
        goto fail;
    }
    uint32_t ver = sl_load_le32(h + 8), d = sl_load_le32(h + 48);
    struct train_ps_state s = {.index = sl_load_le32(h + 12),
                               .servers = sl_load_le32(h + 16),
                               .workers = sl_load_le32(h + 20),
                               .version = sl_load_le64(h + 24),
                               .global_step = sl_load_le64(h + 32),
                               .world_changes = sl_load_le32(h + 52),
                               .world_epoch = sl_load_le64(h + 56)};
    uint64_t n = sl_load_le64(h + 40);
    /* version 1 kept zeros where version 2 keeps the world: the same reading */
    if ((ver != TRAIN_PS_CKPT_VERSION && ver != 1) || d > TRAIN_PS_MAX_CONFIG || s.workers == 0 ||
        s.workers > TRAIN_PS_CKPT_MAX_WORKERS || n > TRAIN_CKPT_MAX_BYTES / 8 ||
        (s.world_changes == 0 && s.world_epoch != 0) || s.world_epoch > CLIENT_INPUT_POSITION_MAX_SEQ) {
        rc = sl_error_set(err, SL_ECORRUPT,
                          "%s: damaged header (format version %" PRIu32 ", description bytes %" PRIu32 ", %" PRIu32
                          " workers, %" PRIu64 " elements, world change %" PRIu64 " from epoch %" PRIu64 ")",
                          path, ver, d, s.workers, n, s.world_changes, s.world_epoch);
        goto fail;
    }
    uint64_t at_pos = TRAIN_PS_CKPT_HEADER + train__ckpt_pad8(d),
             at_values = at_pos + (uint64_t)CLIENT_INPUT_POSITION_BYTES * s.workers, expect = at_values + 8 * n + 4;
    if (size != expect) {
        rc = sl_error_set(err, SL_ECORRUPT, "%s: %s (%" PRIu64 " bytes, the header says %" PRIu64 ")", path,
                          size < expect ? "truncated" : "longer than its header says", size, expect);
        goto fail;
    }
    if ((buf = sl_malloc((size_t)size)) == NULL || (pos = sl_calloc(s.workers, sizeof *pos)) == NULL) {
        rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory for %" PRIu64 " bytes", path, size);
        goto fail;
    }
    memcpy(buf, h, sizeof h);
    for (size_t got = sizeof h; got < size;) {
        ssize_t r = read(fd, buf + got, (size_t)size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            rc = r < 0 ? sl_error_sys(err, errno, "read(%s)", path)
                       : sl_error_set(err, SL_ECORRUPT, "%s: truncated while read", path);
            goto fail;
        }
        got += (size_t)r;
    }
    uint32_t stored = sl_load_le32(buf + size - 4), crc = sl_crc32c(buf, (size_t)size - 4);
    if (stored != crc) {
        rc = sl_error_set(err, SL_ECORRUPT,
                          "%s: damaged (CRC-32C mismatch: stored %08" PRIx32 ", computed %08" PRIx32 ")", path, stored,
                          crc);
        goto fail;
    }
    if (s.index != index || s.servers != servers || s.workers != workers) {
        rc = sl_error_set(err, SL_EINVAL,
                          "%s: made by parameter server %" PRIu32 " of %" PRIu32 " for %" PRIu32
                          " workers, not server %" PRIu32 " of %" PRIu32 " for %" PRIu32,
                          path, s.index, s.servers, s.workers, index, servers, workers);
        goto fail;
    }
    if (s.global_step > s.version) {
        rc = sl_error_set(err, SL_ECORRUPT, "%s: damaged: global step %" PRIu64 " above the version %" PRIu64, path,
                          s.global_step, s.version);
        goto fail;
    }
    static const uint8_t none[CLIENT_INPUT_POSITION_BYTES];
    for (uint32_t w = 0; w < s.workers; w++) {
        const uint8_t *p = buf + at_pos + (size_t)CLIENT_INPUT_POSITION_BYTES * w;
        if (memcmp(p, none, sizeof none) != 0 &&
            (rc = client_input_position_decode(&pos[w], p, CLIENT_INPUT_POSITION_BYTES, err)) != 0) {
            sl_error_prefix(err, "%s: damaged: worker %" PRIu32 "'s ", path, w);
            goto fail;
        }
        if (pos[w].replicas != 0 && pos[w].epoch < s.world_epoch) {
            rc = sl_error_set(err, SL_ECORRUPT,
                              "%s: damaged: worker %" PRIu32 "'s position is of epoch %" PRIu64
                              ", before its world's first epoch %" PRIu64,
                              path, w, pos[w].epoch, s.world_epoch);
            goto fail;
        }
    }
    const float *values = (const float *)(const void *)(buf + at_values);
    for (uint64_t k = 0; k < 2 * n; k++)
        if (!isfinite(values[k])) {
            rc = sl_error_set(err, SL_ECORRUPT, "%s: damaged: a non-finite %s at element %" PRIu64, path,
                              k < n ? "value" : "momentum", k % (n ? n : 1));
            goto fail;
        }
    close(fd);
    memcpy(out->config, buf + TRAIN_PS_CKPT_HEADER, d);
    out->config[d] = '\0';
    s.config = out->config;
    s.config_len = d;
    s.pos = pos;
    s.values = values;
    s.momentum = values + n;
    s.n = (size_t)n;
    out->state = s;
    out->pos = pos;
    out->buf = buf;
    snprintf(out->path, sizeof out->path, "%s", path);
    return 0;
fail:
    close(fd);
    sl_free(buf);
    sl_free(pos);
    return rc;
}
