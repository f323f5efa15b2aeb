/* libFuzzer target for the feeder's STATUS and STATS replies as a trainer
 * reads them (sl_wire_decode; shared/sl_wire.c's dec_status, dec_stats).
 * The first input byte picks the message (even: STATUS, odd: STATS), the
 * rest is its body: the target puts the header in front, so every input
 * reaches the body's checks (fuzz_wire fuzzes the headers). The decoder
 * must return 0 or SL_EPROTO with a message; what it accepts is within the
 * documented limits and encodes back, by the message's own encoder and by
 * sl_wire_encode, to exactly the frame; one byte less is refused. */
#include "fuzz_common.h"
#include "sl_buf.h"
#include "sl_wire.h"

static const int errors[] = {SL_EPROTO, 0};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > 4096)
        return 0;
    unsigned type = data[0] & 1 ? SL_WIRE_STATS : SL_WIRE_STATUS;
    size_t n = 8 + size - 1;
    uint8_t *frame = malloc(n);
    CHECK(frame != NULL);
    memcpy(frame, "SLC1", 4);
    frame[4] = (uint8_t)(SL_WIRE_VERSION & 0xff);
    frame[5] = (uint8_t)(SL_WIRE_VERSION >> 8);
    frame[6] = (uint8_t)type;
    frame[7] = 0;
    memcpy(frame + 8, data + 1, size - 1);
    static struct sl_wire_msg m; /* ~6 KiB: off the fuzzer's stack */
    struct sl_error err = {0};
    int rc = sl_wire_decode(frame, n, &m, &err);
    fuzz_note("sl_wire_decode", rc, err.msg);
    if (rc != 0) {
        fuzz_check_error(rc, &err, errors);
        free(frame);
        return 0;
    }
    CHECK(m.type == type);
    struct sl_buf b;
    sl_buf_init(&b, 0);
    if (type == SL_WIRE_STATUS) {
        const struct sl_wire_status *s = &m.status;
        CHECK(n == 48);
        CHECK(s->state == SL_WIRE_STATUS_SCANNING);
        CHECK(s->retry_ms >= 1 && s->retry_ms <= SL_WIRE_MAX_RETRY_MS);
        CHECK(s->files >= 1 && s->files <= SL_WIRE_MAX_FILES && s->files_done <= s->files);
        CHECK(s->records <= SL_WIRE_MAX_COUNT && s->bytes <= SL_WIRE_MAX_COUNT);
        CHECK(sl_wire_encode_status(s, &b) == 0);
    } else {
        const struct sl_wire_stats *s = &m.stats;
        CHECK(n == (s->with_map ? 64u : 56u)); /* 5 stages and credit_wait_ns, then map_ns or not */
        CHECK(s->with_map || s->stage_ns[SL_WIRE_STAGE_MAP] == 0);
        for (int i = 0; i < SL_WIRE_STAGES; i++)
            CHECK(s->stage_ns[i] <= SL_WIRE_MAX_COUNT);
        CHECK(s->credit_wait_ns <= SL_WIRE_MAX_COUNT);
        CHECK(sl_wire_encode_stats(s, &b) == 0);
    }
    CHECK(b.len == n && memcmp(b.data, frame, n) == 0);
    sl_buf_reset(&b);
    CHECK(sl_wire_encode(&m, &b, &err) == 0);
    CHECK(b.len == n && memcmp(b.data, frame, n) == 0);
    sl_buf_free(&b);
    static struct sl_wire_msg cut;
    CHECK(sl_wire_decode(frame, n - 1, &cut, &err) == SL_EPROTO);
    free(frame);
    return 0;
}
