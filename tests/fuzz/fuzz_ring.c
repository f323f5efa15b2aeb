/* libFuzzer target for the ring all-reduce's message header
 * (trainer/coll/train_ring.c, through train_ring_hdr_check): the first
 * TRAIN_RING_HDR_BYTES input bytes as the header frame a rank receives.
 * Refused headers name one of the known reasons, and the right one for the
 * first field that is wrong; an accepted header has a known type and is
 * written again, field by field, into exactly the bytes read (every byte
 * of the header is a field: nothing is lost or made up). */
#include "fuzz_common.h"
#include "train_ring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < TRAIN_RING_HDR_BYTES)
        return 0;
    uint8_t *p = malloc(TRAIN_RING_HDR_BYTES), back[TRAIN_RING_HDR_BYTES];
    CHECK(p != NULL);
    memcpy(p, data, TRAIN_RING_HDR_BYTES);
    memset(back, 0xa5, sizeof back);
    const char *bad = train_ring_hdr_check(p, back);
    fuzz_note("train_ring_hdr_check", bad != NULL, bad);
    unsigned version = p[4] | (unsigned)p[5] << 8, type = p[6] | (unsigned)p[7] << 8;
    const char *expect = memcmp(p, "SLR1", 4) != 0 ? "bad magic"
                         : version != 1            ? "unsupported version"
                         : type < 1 || type > 4    ? "unknown message type"
                                                   : NULL;
    if (expect == NULL) {
        CHECK(bad == NULL);
        CHECK(memcmp(back, p, TRAIN_RING_HDR_BYTES) == 0);
    } else {
        CHECK(bad != NULL && strcmp(bad, expect) == 0);
    }
    free(p);
    return 0;
}
