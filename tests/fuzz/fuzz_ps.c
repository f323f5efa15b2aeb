/* libFuzzer target for the parameter servers' messages
 * (trainer/ps/train_ps.c): the input is a message as its two frames arrive,
 * the first TRAIN_PS_HEADER bytes the header, the rest the second frame.
 *  - header (train_ps_hdr_check): accepted only with the magic, the
 *    version and a known type; written again it gives back the bytes read
 *    but bytes 6 and 7, which a reader ignores (put_hdr writes zeros);
 *  - second frame as a worker's input position (a PUSH's, a RESUME
 *    reply's: client_input_position_decode), as sent and with its CRC-32C
 *    made right, so that the checks behind the CRC are fuzzed: accepted,
 *    it is re-encoded into the same bytes; refused, SL_ECORRUPT says why;
 *  - second frame as a PULL's model description (train_ps_config_inputs):
 *    0 or the width its leading "inputs=N" names (N: 1 to 9 digits, then
 *    the end or a space);
 *  - second frame as an ERROR's text (train_ps_printable): NUL-terminated
 *    within the buffer, printable ASCII only, and it reads back as a prefix
 *    of the text (\xNN undone). */
#include "fuzz_common.h"
#include "train_model.h"
#include "train_ps.h"
#include "train_strategy.h"

static void check_position(const uint8_t *body, size_t len)
{
    struct client_input_position pos;
    struct sl_error err = {0};
    int rc = client_input_position_decode(&pos, body, len, &err);
    fuzz_note("client_input_position_decode", rc, err.msg);
    if (rc != 0) {
        static const int errors[] = {SL_ECORRUPT, 0};
        fuzz_check_error(rc, &err, errors);
        return;
    }
    CHECK(len == CLIENT_INPUT_POSITION_BYTES);
    CHECK(pos.replicas >= 1 && pos.seq <= CLIENT_INPUT_POSITION_MAX_SEQ && pos.seq == pos.step * pos.replicas);
    uint8_t again[CLIENT_INPUT_POSITION_BYTES];
    client_input_position_encode(&pos, again);
    CHECK(memcmp(again, body, len) == 0);
}

static void check_config(const uint8_t *body, size_t len)
{
    uint32_t v = train_ps_config_inputs((const char *)body, len);
    if (v == 0)
        return;
    /* "inputs=" then at most 9 digits (leading zeros allowed) naming v, then the end or a space */
    CHECK(v <= TRAIN_MODEL_MAX_WIDTH && len > 7 && memcmp(body, "inputs=", 7) == 0);
    uint64_t x = 0;
    size_t i = 7;
    for (; i < len && i < 16 && body[i] >= '0' && body[i] <= '9'; i++)
        x = x * 10 + (uint64_t)(body[i] - '0');
    CHECK(i > 7 && x == v && (i == len || body[i] == ' '));
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static void check_printable(const uint8_t *body, size_t len, size_t cap)
{
    char *out = malloc(cap);
    CHECK(out != NULL);
    CHECK(train_ps_printable(out, cap, body, len) == out);
    size_t n = strnlen(out, cap);
    CHECK(n < cap);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(out[i] >= 0x20 && out[i] < 0x7f);
        uint8_t c = (uint8_t)out[i];
        if (out[i] == '\\') {
            CHECK(i + 3 < n && out[i + 1] == 'x' && hexval(out[i + 2]) >= 0 && hexval(out[i + 3]) >= 0);
            c = (uint8_t)(hexval(out[i + 2]) << 4 | hexval(out[i + 3]));
            i += 3;
        }
        CHECK(at < len && body[at] == c);
        at++;
    }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t hl = size < TRAIN_PS_HEADER ? size : TRAIN_PS_HEADER, len = size - hl;
    uint8_t *h = malloc(hl ? hl : 1), *body = malloc(len ? len : 1), back[TRAIN_PS_HEADER];
    CHECK(h != NULL && body != NULL);
    if (hl)
        memcpy(h, data, hl);
    if (len)
        memcpy(body, data + hl, len);
    int hrc = train_ps_hdr_check(h, hl, back);
    fuzz_note("train_ps_hdr_check", hrc, NULL);
    if (hrc == 0) {
        CHECK(hl == TRAIN_PS_HEADER && memcmp(h, "SLPS", 4) == 0 && h[4] == TRAIN_PS_WIRE_VERSION);
        CHECK(h[5] >= TRAIN_PS_PULL && h[5] <= TRAIN_PS_WORLD);
        CHECK(back[6] == 0 && back[7] == 0);
        back[6] = h[6];
        back[7] = h[7];
        CHECK(memcmp(back, h, TRAIN_PS_HEADER) == 0);
    } else {
        CHECK(hl != TRAIN_PS_HEADER || memcmp(h, "SLPS", 4) != 0 || h[4] != TRAIN_PS_WIRE_VERSION ||
              h[5] < TRAIN_PS_PULL || h[5] > TRAIN_PS_WORLD);
    }
    check_position(body, len);
    if (len == CLIENT_INPUT_POSITION_BYTES) {
        fuzz_store_le32(body + 36, fuzz_crc32c(body, 36));
        check_position(body, len);
        if (len)
            memcpy(body, data + hl, len);
    }
    check_config(body, len);
    check_printable(body, len, 1 + (hl ? h[0] : 0) % 128);
    check_printable(body, len, 2 * len + 1);
    free(body);
    free(h);
    return 0;
}
