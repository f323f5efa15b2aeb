/* client_keepalive: a trainer's client that is busy elsewhere for a while
 * right after connecting, as sluice-trainer is while it creates its
 * training loop (GPU contexts, NCCL), for integration/test_train.py.
 *
 *   client_keepalive ENDPOINT JOB keepalive|sleep MS
 *
 * Connects (heartbeat 100 ms), then for MS milliseconds either keeps the
 * connection alive (client_keepalive) or sleeps, then takes every
 * step to the end and prints {"steps": S, "rows": N}. Exit 0, or 1 with
 * the client's error on stderr. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sl_error.h"
#include "client.h"

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[3], "keepalive") != 0 && strcmp(argv[3], "sleep") != 0)) {
        fprintf(stderr, "usage: client_keepalive ENDPOINT JOB keepalive|sleep MS\n");
        return 2;
    }
    const char *eps[1] = {argv[1]};
    int ms = atoi(argv[4]);
    struct client_opts o = {.feeders = eps,
                            .nfeeders = 1,
                            .job = argv[2],
                            .workers = 1,
                            .replicas = 1,
                            .heartbeat_ms = 100,
                            .timeout_ms = 2000};
    struct sl_error err = {0};
    struct client *c = NULL;
    if (client_open(&c, &o, &err) != 0) {
        fprintf(stderr, "client_keepalive: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    if (strcmp(argv[3], "keepalive") == 0)
        rc = client_keepalive(c, ms, &err);
    else
        nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L}, NULL);
    uint64_t steps = 0, rows = 0;
    const struct client_piece *p;
    while (rc == 0 && (rc = client_next_step(c, &p, &err)) == 0) {
        steps++;
        rows += p[0].rows;
    }
    client_close(c);
    if (rc != SL_END) {
        fprintf(stderr, "client_keepalive: %s\n", err.msg);
        return 1;
    }
    printf("{\"steps\": %llu, \"rows\": %llu}\n", (unsigned long long)steps, (unsigned long long)rows);
    return 0;
}
