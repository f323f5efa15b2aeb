/* client_position: see client_position.h. */
#include "client_position.h"

#include <inttypes.h>
#include <string.h>

#include "sl_crc32c.h"
#include "sl_bytes.h"

static const char position_magic[8] = {'S', 'L', 'P', 'O', 'S', '0', '0', '1'};

int client_input_position_at(struct client_input_position *out, uint64_t seq, uint32_t replicas, uint64_t epoch,
                             struct sl_error *err)
{
    if (replicas == 0 || replicas > CLIENT_INPUT_POSITION_MAX_REPLICAS)
        return sl_error_set(err, SL_EINVAL, "input position: replicas %u out of range (1..%d)", replicas,
                            CLIENT_INPUT_POSITION_MAX_REPLICAS);
    if (seq % replicas != 0 || seq > CLIENT_INPUT_POSITION_MAX_SEQ)
        return sl_error_set(err, SL_EINVAL,
                            "input position: seq %" PRIu64 " is not a step's first piece (a multiple of %u, at most "
                            "2^48)",
                            seq, replicas);
    *out = (struct client_input_position){.epoch = epoch, .step = seq / replicas, .seq = seq, .replicas = replicas};
    return 0;
}

void client_input_position_encode(const struct client_input_position *p, uint8_t out[CLIENT_INPUT_POSITION_BYTES])
{
    memcpy(out, position_magic, 8);
    sl_store_le64(out + 8, p->epoch);
    sl_store_le64(out + 16, p->step);
    sl_store_le64(out + 24, p->seq);
    sl_store_le32(out + 32, p->replicas);
    sl_store_le32(out + 36, sl_crc32c(out, 36));
}

int client_input_position_decode(struct client_input_position *out, const void *buf, size_t len, struct sl_error *err)
{
    const uint8_t *b = buf;
    if (len != CLIENT_INPUT_POSITION_BYTES)
        return sl_error_set(err, SL_ECORRUPT, "input position: %zu bytes (expected %d)", len,
                            CLIENT_INPUT_POSITION_BYTES);
    if (memcmp(b, position_magic, 8) != 0)
        return sl_error_set(err, SL_ECORRUPT, "input position: bad magic (expected SLPOS001)");
    uint32_t stored = sl_load_le32(b + 36), crc = sl_crc32c(b, 36);
    if (stored != crc)
        return sl_error_set(err, SL_ECORRUPT, "input position: CRC-32C mismatch (stored %08x, computed %08x)", stored,
                            crc);
    struct client_input_position p = {.epoch = sl_load_le64(b + 8),
                                      .step = sl_load_le64(b + 16),
                                      .seq = sl_load_le64(b + 24),
                                      .replicas = sl_load_le32(b + 32)};
    if (p.replicas == 0 || p.replicas > CLIENT_INPUT_POSITION_MAX_REPLICAS)
        return sl_error_set(err, SL_ECORRUPT, "input position: replicas %u out of range (1..%d)", p.replicas,
                            CLIENT_INPUT_POSITION_MAX_REPLICAS);
    if (p.seq > CLIENT_INPUT_POSITION_MAX_SEQ || p.seq / p.replicas != p.step || p.seq % p.replicas != 0)
        return sl_error_set(err, SL_ECORRUPT,
                            "input position: seq %" PRIu64 " is not step %" PRIu64 " x %u replicas (or above 2^48)",
                            p.seq, p.step, p.replicas);
    *out = p;
    return 0;
}
