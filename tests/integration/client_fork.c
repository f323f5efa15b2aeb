/* client_fork: a libsluice client used after fork(), for
 * integration/test_client_fork.py (issue #24 item A.4).
 *
 *   client_fork ENDPOINT JOB REPLICAS shm|no_shm
 *
 * Opens a client (public API, worker 0 of 1), takes 3 steps, and forks
 * while it holds the third. The child calls every function that hands out
 * data or talks to the feeder (next_step, keep_step, keepalive), then
 * release and close, and prints one line:
 *   {"child":{"next_step":RC,"message":"...","pieces_untouched":1,
 *             "keep":RC,"keep_message":"...","keepalive":RC,"close_ms":MS}}
 * (an alarm ends a child that hangs). The parent prints {"pid":PID} first,
 * {"child_exit":CODE} once the child is reaped (-SIG when a signal ended
 * it), then takes the stream to its end: every piece, those before the
 * fork included, as {"seq":..,"epoch":..,"step":..,"replica":..,"shm":0|1,
 * "ids":[..]} (the "id" int64 tensor), and {"end":1}. Exit 0, or 1 with
 * the client's error on stderr. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice/client.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void print_step(const struct sluice_piece *p, uint32_t n)
{
    for (uint32_t r = 0; r < n; r++) {
        printf("{\"seq\":%llu,\"epoch\":%llu,\"step\":%llu,\"replica\":%u,\"shm\":%d,\"ids\":[",
               (unsigned long long)p[r].seq, (unsigned long long)p[r].epoch, (unsigned long long)p[r].step,
               p[r].replica, p[r].shm ? 1 : 0);
        for (size_t i = 0; i < p[r].ntensors; i++) {
            const struct sluice_tensor *t = &p[r].tensors[i];
            if (strcmp(t->name, "id") != 0 || t->dtype != SLUICE_INT64)
                continue;
            for (uint64_t k = 0; k < t->bytes / 8; k++) {
                int64_t v;
                memcpy(&v, (const char *)t->data + 8 * k, 8);
                printf("%s%lld", k ? "," : "", (long long)v);
            }
        }
        printf("]}\n");
    }
}

/* A JSON string of s (the messages are plain text; quotes and backslashes
 * escaped, control bytes dropped). */
static void print_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        if ((unsigned char)*s >= 0x20)
            putchar(*s);
    }
    putchar('"');
}

static void child(struct sluice_client *c)
{
    alarm(5); /* a child that hangs (in a socket the parent owns) ends here */
    struct sluice_error e = {0}, ek = {0}, ea = {0};
    const struct sluice_piece *pieces = NULL, *kept_pieces = NULL;
    int next = sluice_client_next_step(c, &pieces, &e);
    struct sluice_step *kept = NULL;
    int keep = sluice_client_keep_step(c, &kept, &kept_pieces, &ek);
    int keepalive = sluice_client_keepalive(c, 100, &ea);
    sluice_client_release(c);
    double t0 = now_ms();
    sluice_client_close(c);
    double close_ms = now_ms() - t0;
    printf("{\"child\":{\"next_step\":%d,\"message\":", next);
    print_json_string(e.message);
    printf(",\"pieces_untouched\":%d,\"keep\":%d,\"keep_message\":", pieces == NULL && kept == NULL, keep);
    print_json_string(ek.message);
    printf(",\"keepalive\":%d,\"keepalive_message\":", keepalive);
    print_json_string(ea.message);
    printf(",\"close_ms\":%.1f}}\n", close_ms);
    fflush(stdout);
    sluice_step_free(kept);
    _exit(0); /* the parent's atexit work is not the child's */
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[4], "shm") != 0 && strcmp(argv[4], "no_shm") != 0)) {
        fprintf(stderr, "usage: client_fork ENDPOINT JOB REPLICAS shm|no_shm\n");
        return 2;
    }
    const char *eps[1] = {argv[1]};
    struct sluice_options o = {.feeders = eps,
                               .nfeeders = 1,
                               .job = argv[2],
                               .replicas = (uint32_t)atoi(argv[3]),
                               .heartbeat_ms = 200,
                               .timeout_ms = 3000,
                               .no_shm = strcmp(argv[4], "no_shm") == 0};
    struct sluice_error err = {0};
    struct sluice_client *c = NULL;
    if (sluice_client_open(&c, &o, &err) != 0) {
        fprintf(stderr, "client_fork: %s\n", err.message);
        return 1;
    }
    uint32_t R = sluice_client_replicas(c);
    printf("{\"pid\":%ld}\n", (long)getpid());
    const struct sluice_piece *p = NULL;
    int rc = 0;
    for (int s = 0; s < 3 && rc == 0; s++) {
        rc = sluice_client_next_step(c, &p, &err);
        if (rc == 0)
            print_step(p, R);
    }
    if (rc != 0) {
        fprintf(stderr, "client_fork: before the fork: %s\n", err.message);
        sluice_client_close(c);
        return 1;
    }
    fflush(stdout); /* nothing buffered twice */
    pid_t pid = fork();
    if (pid < 0) {
        perror("client_fork: fork");
        sluice_client_close(c);
        return 1;
    }
    if (pid == 0)
        child(c);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) {
        perror("client_fork: waitpid");
        sluice_client_close(c);
        return 1;
    }
    printf("{\"child_exit\":%d}\n", WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
    while ((rc = sluice_client_next_step(c, &p, &err)) == 0)
        print_step(p, R);
    sluice_client_close(c);
    if (rc != SLUICE_END) {
        fprintf(stderr, "client_fork: after the fork: %s\n", err.message);
        return 1;
    }
    printf("{\"end\":1}\n");
    return 0;
}
