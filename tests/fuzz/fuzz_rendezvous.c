/* libFuzzer target for the cluster rendezvous's message
 * (trainer/coll/train_rendezvous.c, through train_rendezvous_check): any bytes
 * as the one frame rank 0 or another rank receives. A refused frame gets a
 * reason; an accepted one has a known type, lengths within the
 * TRAIN_RENDEZVOUS_MAX_* limits that add up to the frame's, and is written
 * again into exactly the bytes read; one byte less (a frame cut short) is
 * refused unless it is an empty STATUS's... which has nothing to cut. */
#include "fuzz_common.h"
#include "train_rendezvous.h"

#define HDR 24

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* ZMQ_MAXMSGSIZE bounds a frame near the limits' sum */
    if (size >
        HDR + TRAIN_RENDEZVOUS_MAX_JOB + TRAIN_RENDEZVOUS_MAX_CONFIG + TRAIN_RENDEZVOUS_MAX_BLOB + SL_ERROR_MSG_MAX)
        return 0;
    uint8_t *p = malloc(size ? size : 1), *back = malloc(size ? size : 1);
    CHECK(p != NULL && back != NULL);
    if (size)
        memcpy(p, data, size);
    size_t back_len = 0;
    const char *bad = train_rendezvous_check(p, size, back, &back_len);
    fuzz_note("train_rendezvous_check", bad != NULL, bad);
    if (bad != NULL) {
        CHECK(bad[0] != '\0');
        if (size < HDR)
            CHECK(strcmp(bad, "short message") == 0);
    } else {
        CHECK(size >= HDR && memcmp(p, "SLV1", 4) == 0 && p[4] == 1 && p[5] == 0);
        unsigned type = p[6] | (unsigned)p[7] << 8;
        uint32_t a = fuzz_load_le32(p + 16), b = fuzz_load_le32(p + 20);
        CHECK(type >= 1 && type <= 4);
        switch (type) {
        case 1: CHECK(a <= TRAIN_RENDEZVOUS_MAX_JOB && b <= TRAIN_RENDEZVOUS_MAX_CONFIG && HDR + a + b == size); break;
        case 2: CHECK(a == 0 && b == 0 && size == HDR); break;
        case 3: CHECK(a <= TRAIN_RENDEZVOUS_MAX_BLOB && b == 0 && HDR + a == size); break;
        default: CHECK(a < SL_ERROR_MSG_MAX && b == 0 && HDR + a == size); break;
        }
        CHECK(back_len == size && memcmp(back, p, size) == 0);
        /* every length is exact: a frame one byte short is refused */
        size_t ignored;
        CHECK(train_rendezvous_check(p, size - 1, back, &ignored) != NULL);
    }
    free(back);
    free(p);
    return 0;
}
