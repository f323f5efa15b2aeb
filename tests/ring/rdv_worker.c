/* rdv_worker: one rank of a train_rendezvous, for tests/ring/test_rendezvous.sh.
 *
 *   rdv_worker RANK SIZE ROOT JOB CONFIG [TIMEOUT_MS [BLOB_BYTES]]
 *
 * Rank 0 broadcasts BLOB_BYTES (default 128, an NCCL unique id's size)
 * random bytes from /dev/urandom; every rank prints "rank R blob HEX" with
 * the bytes it ended with and exits 0, or prints "rank R: MESSAGE (code)"
 * to stderr and exits 1. Ranks are named "worker-R" in messages.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_rendezvous.h"

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: rdv_worker RANK SIZE ROOT JOB CONFIG [TIMEOUT_MS [BLOB_BYTES]]\n");
        return 2;
    }
    int rank = atoi(argv[1]), size = atoi(argv[2]);
    size_t nblob = argc > 7 ? (size_t)atoi(argv[7]) : 128;
    if (size < 1 || size > 64 || nblob > TRAIN_RENDEZVOUS_MAX_BLOB) {
        fprintf(stderr, "rdv_worker: SIZE 1..64, BLOB_BYTES <= %d\n", TRAIN_RENDEZVOUS_MAX_BLOB);
        return 2;
    }
    static unsigned char blob[TRAIN_RENDEZVOUS_MAX_BLOB], got[TRAIN_RENDEZVOUS_MAX_BLOB];
    if (rank == 0 && nblob > 0) {
        FILE *f = fopen("/dev/urandom", "rb");
        if (f == NULL || fread(blob, 1, nblob, f) != nblob) {
            fprintf(stderr, "rdv_worker: cannot read /dev/urandom\n");
            return 1;
        }
        fclose(f);
    }
    char names[64][32];
    const char *np[64];
    for (int i = 0; i < size; i++) {
        snprintf(names[i], sizeof names[i], "worker-%d", i);
        np[i] = names[i];
    }
    struct train_rendezvous_opts o = {.rank = rank,
                                      .size = size,
                                      .root = argv[3],
                                      .names = np,
                                      .job = argv[4],
                                      .config = argv[5],
                                      .timeout_ms = argc > 6 ? atoi(argv[6]) : 0,
                                      .blob = blob,
                                      .blob_len = rank == 0 ? nblob : 0};
    struct sl_error err = {0};
    size_t len = 0;
    int rc = train_rendezvous(&o, got, sizeof got, &len, &err);
    if (rc != 0) {
        fprintf(stderr, "rank %d: %s (%s)\n", rank, err.msg, sl_code_name(rc));
        return 1;
    }
    printf("rank %d blob ", rank);
    for (size_t i = 0; i < len; i++)
        printf("%02x", got[i]);
    printf("\n");
    return 0;
}
