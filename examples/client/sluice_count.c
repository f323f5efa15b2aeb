/* sluice_count: a small program against the installed libsluice
 * (<sluice/client.h>): connect to a job's feeders as worker w of W with R
 * replicas, receive every step, and print one line per piece:
 *
 *     piece SEQ EPOCH STEP REPLICA ROWS SHM [IDS...]
 *
 * IDS: the values of the piece's int64 tensor named "id", when it has one;
 * then "position P" and "end". tests/integration/test_client_lib.py builds
 * it with pkg-config and with CMake's find_package(sluice) and counts.
 *
 * Usage: sluice_count JOB WORKER WORKERS REPLICAS ENDPOINT...
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/client.h>

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s JOB WORKER WORKERS REPLICAS ENDPOINT...\n", argv[0]);
        return 2;
    }
    struct sluice_options o = {0};
    o.job = argv[1];
    o.worker = (uint32_t)strtoul(argv[2], NULL, 10);
    o.workers = (uint32_t)strtoul(argv[3], NULL, 10);
    o.replicas = (uint32_t)strtoul(argv[4], NULL, 10);
    o.feeders = (const char *const *)&argv[5];
    o.nfeeders = (size_t)(argc - 5);
    struct sluice_error err;
    struct sluice_client *c;
    if (sluice_client_open(&c, &o, &err) != SLUICE_OK) {
        fprintf(stderr, "sluice_count: %s: %s\n", sluice_code_name(err.code), err.message);
        return 1;
    }
    printf("version %s\n", sluice_version());
    for (;;) {
        const struct sluice_piece *p;
        int rc = sluice_client_next_step(c, &p, &err);
        if (rc == SLUICE_END)
            break;
        if (rc != SLUICE_OK) {
            fprintf(stderr, "sluice_count: %s: %s\n", sluice_code_name(err.code), err.message);
            sluice_client_close(c);
            return 1;
        }
        for (uint32_t r = 0; r < sluice_client_replicas(c); r++) {
            printf("piece %" PRIu64 " %" PRIu64 " %" PRIu64 " %u %u %u", p[r].seq, p[r].epoch, p[r].step, p[r].replica,
                   p[r].rows, p[r].shm);
            for (size_t i = 0; i < p[r].ntensors; i++) {
                const struct sluice_tensor *t = &p[r].tensors[i];
                if (strcmp(t->name, "id") != 0 || t->dtype != SLUICE_INT64)
                    continue;
                for (uint64_t k = 0; k < t->bytes / 8; k++) {
                    int64_t v;
                    memcpy(&v, (const char *)t->data + 8 * k, 8); /* no alignment promised */
                    printf(" %" PRId64, v);
                }
            }
            printf("\n");
        }
        sluice_client_release(c); /* done with this step: memory and credits back now */
    }
    printf("position %" PRIu64 "\nend\n", sluice_client_position(c));
    sluice_client_close(c);
    return 0;
}
