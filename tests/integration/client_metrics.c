/* client_metrics: a libsluice client serving /metrics while it reads, for
 * integration/test_client_metrics.py (issue #29 item 4).
 *
 *   client_metrics ENDPOINT JOB
 *
 * Opens a client (public API, worker 0 of 1) with metrics_listen
 * 127.0.0.1:0 and takes the stream to its end while a second thread
 * scrapes /metrics over a socket as fast as it can (the server's thread
 * reading what the client's writes: for TSan). Prints one JSON line:
 *   {"address":"127.0.0.1:PORT","steps":N,"rows":N,"scrapes":N}
 * then the last scrape, taken after the end, as it came (the HTTP answer).
 * Exit 0, or 1 with the error on stderr. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sluice/client.h"

static char answer[65536];

/* GET /metrics from 127.0.0.1:port into answer; 0 or -1. */
static int scrape(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
    size_t n = 0;
    ssize_t r = -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && write(fd, req, sizeof req - 1) == (ssize_t)sizeof req - 1)
        while (n < sizeof answer - 1 && (r = read(fd, answer + n, sizeof answer - 1 - n)) > 0)
            n += (size_t)r;
    answer[n] = '\0';
    close(fd);
    return r == 0 && strstr(answer, " 200 ") != NULL ? 0 : -1;
}

struct scraper {
    unsigned port;
    atomic_int stop;
    int scrapes, failed;
};

static void *scrape_loop(void *arg)
{
    struct scraper *s = arg;
    while (!atomic_load(&s->stop)) {
        if (scrape(s->port) != 0)
            s->failed++;
        s->scrapes++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: client_metrics ENDPOINT JOB\n");
        return 2;
    }
    const char *feeders[] = {argv[1]};
    struct sluice_options o = {.feeders = feeders, .nfeeders = 1, .job = argv[2], .metrics_listen = "127.0.0.1:0"};
    struct sluice_error err;
    struct sluice_client *c;
    if (sluice_client_open(&c, &o, &err) != SLUICE_OK) {
        fprintf(stderr, "open: %s\n", err.message);
        return 1;
    }
    const char *addr = sluice_client_metrics_address(c);
    const char *colon = addr != NULL ? strrchr(addr, ':') : NULL;
    if (colon == NULL) {
        fprintf(stderr, "no metrics address\n");
        sluice_client_close(c);
        return 1;
    }
    struct scraper s = {.port = (unsigned)atoi(colon + 1)};
    atomic_init(&s.stop, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, scrape_loop, &s) != 0) {
        sluice_client_close(c);
        return 1;
    }
    const struct sluice_piece *p;
    uint64_t steps = 0, rows = 0;
    int rc;
    while ((rc = sluice_client_next_step(c, &p, &err)) == SLUICE_OK) {
        steps++;
        rows += p[0].rows;
        usleep(1000); /* a little work: scrapes land between steps */
    }
    atomic_store(&s.stop, 1);
    pthread_join(t, NULL);
    int ok = rc == SLUICE_END && s.failed == 0 && scrape(s.port) == 0;
    if (ok)
        printf("{\"address\":\"%s\",\"steps\":%llu,\"rows\":%llu,\"scrapes\":%d}\n%s", addr, (unsigned long long)steps,
               (unsigned long long)rows, s.scrapes, answer);
    else
        fprintf(stderr, "stream rc %d (%s), %d of %d scrapes failed\n", rc, rc == SLUICE_END ? "" : err.message,
                s.failed, s.scrapes);
    sluice_client_close(c);
    return ok ? 0 : 1;
}
