/* The /metrics endpoint's parts: sl_prom writes the text format exactly
 * (escaping, numbers, histograms), sl_hist puts an observation equal to a
 * bound into that bound's bucket, and sl_http_metrics answers over a real
 * socket: 200 with the callback's text, 404, 405 with Allow, HEAD, a 500
 * for a failed or oversized body, a huge URL refused while serving goes
 * on, many connections at once (all answered, or closed over the limit
 * and the server still serving once they go), a port in use and a bad
 * address named. Run under ASan and TSan too (the server has its thread). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "sl_hist.h"
#include "sl_http_metrics.h"
#include "sl_prom.h"
#include "sl_test.h"

/* ---- the text format ---- */

static const char *text(struct sl_buf *b)
{
    ck_assert_int_eq(sl_buf_putc(b, '\0'), 0);
    b->len--;
    return (const char *)b->data;
}

START_TEST(test_prom_exact)
{
    struct sl_buf labels, b;
    sl_buf_init(&labels, 0);
    sl_buf_init(&b, 0);
    /* a value with every character the format escapes */
    ck_assert_int_eq(sl_prom_label(&labels, "sluice_job", "a\"b\\c\nd"), 0);
    ck_assert_int_eq(sl_prom_label(&labels, "feeder", "3"), 0);
    ck_assert_str_eq((const char *)labels.data, "sluice_job=\"a\\\"b\\\\c\\nd\",feeder=\"3\"");
    struct sl_prom p = {.b = &b, .labels = (const char *)labels.data};
    sl_prom_family(&p, "x_total", "counter", "help with \\ and\nnewline \"quoted\"");
    sl_prom_u64(&p, "x_total", NULL, UINT64_MAX);
    sl_prom_u64(&p, "x_total", "kind=\"data\"", 0);
    sl_prom_family(&p, "t_seconds_total", "counter", "t");
    sl_prom_seconds(&p, "t_seconds_total", NULL, 1500000001);
    sl_prom_seconds(&p, "t_seconds_total", NULL, 7);
    sl_prom_family(&p, "g", "gauge", "g");
    sl_prom_double(&p, "g", NULL, 0.1);
    sl_prom_double(&p, "g", NULL, 0.0 / 0.0);
    sl_prom_double(&p, "g", NULL, 1.0 / 0.0);
    sl_prom_double(&p, "g", NULL, -1.0 / 0.0);
    ck_assert_int_eq(p.rc, 0);
    ck_assert_str_eq(text(&b), "# HELP x_total help with \\\\ and\\nnewline \"quoted\"\n"
                               "# TYPE x_total counter\n"
                               "x_total{sluice_job=\"a\\\"b\\\\c\\nd\",feeder=\"3\"} 18446744073709551615\n"
                               "x_total{sluice_job=\"a\\\"b\\\\c\\nd\",feeder=\"3\",kind=\"data\"} 0\n"
                               "# HELP t_seconds_total t\n"
                               "# TYPE t_seconds_total counter\n"
                               "t_seconds_total{sluice_job=\"a\\\"b\\\\c\\nd\",feeder=\"3\"} 1.500000001\n"
                               "t_seconds_total{sluice_job=\"a\\\"b\\\\c\\nd\",feeder=\"3\"} 0.000000007\n"
                               "# HELP g g\n"
                               "# TYPE g gauge\n"
                               "g{sluice_job=\"a\\\"b\\\\c\\nd\",feeder=\"3\"} 0.10000000000000001\n"
                               "g{sluice_job=\"a\\\"b\\\\c\\nd\",feeder=\"3\"} NaN\n"
                               "g{sluice_job=\"a\\\"b\\\\c\\nd\",feeder=\"3\"} +Inf\n"
                               "g{sluice_job=\"a\\\"b\\\\c\\nd\",feeder=\"3\"} -Inf\n");
    /* no common labels: bare names */
    sl_buf_reset(&b);
    p = (struct sl_prom){.b = &b};
    sl_prom_u64(&p, "up", NULL, 1);
    sl_prom_u64(&p, "up", "a=\"b\"", 2);
    ck_assert_str_eq(text(&b), "up 1\nup{a=\"b\"} 2\n");
    sl_buf_free(&labels);
    sl_buf_free(&b);
}
END_TEST

/* the one-sample families the feeder, the trainer and the ps expose */
START_TEST(test_prom_single_families)
{
    struct sl_buf b;
    sl_buf_init(&b, 0);
    struct sl_prom p = {.b = &b, .labels = "job=\"j\""};
    sl_prom_counter(&p, "c_total", "a count", 0);
    sl_prom_gauge(&p, "g", "a level", UINT64_MAX);
    sl_prom_counter_seconds(&p, "s_seconds_total", "a time", 2000000003);
    ck_assert_int_eq(p.rc, 0);
    ck_assert_str_eq(text(&b), "# HELP c_total a count\n# TYPE c_total counter\nc_total{job=\"j\"} 0\n"
                               "# HELP g a level\n# TYPE g gauge\ng{job=\"j\"} 18446744073709551615\n"
                               "# HELP s_seconds_total a time\n# TYPE s_seconds_total counter\n"
                               "s_seconds_total{job=\"j\"} 2.000000003\n");
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_prom_bound_sticks)
{
    struct sl_buf b;
    sl_buf_init(&b, 40); /* room for one line */
    struct sl_prom p = {.b = &b};
    sl_prom_u64(&p, "a", NULL, 1);
    ck_assert_int_eq(p.rc, 0);
    sl_prom_family(&p, "b_long_name_past_the_bound", "counter", "more than fits");
    ck_assert_int_eq(p.rc, SL_EINVAL);
    size_t len = b.len;
    sl_prom_u64(&p, "c", NULL, 1); /* nothing more */
    ck_assert_uint_eq(b.len, len);
    ck_assert_int_eq(p.rc, SL_EINVAL);
    sl_buf_free(&b);
}
END_TEST

START_TEST(test_hist_buckets_exact)
{
    static const uint64_t bounds[] = {1000, 250000, 1000000000};
    struct sl_hist h;
    sl_hist_init(&h, bounds, 3);
    sl_hist_observe(&h, 0);          /* le 0.000001 */
    sl_hist_observe(&h, 1000);       /* equal to a bound: that bucket */
    sl_hist_observe(&h, 1001);       /* the next */
    sl_hist_observe(&h, 1000000000); /* le 1 */
    sl_hist_observe(&h, 1000000001); /* +Inf */
    struct sl_hist_snap s;
    sl_hist_snapshot(&h, &s);
    ck_assert_uint_eq(s.n, 3);
    ck_assert_uint_eq(s.cum[0], 2);
    ck_assert_uint_eq(s.cum[1], 3);
    ck_assert_uint_eq(s.cum[2], 4);
    ck_assert_uint_eq(s.cum[3], 5);
    ck_assert_uint_eq(s.sum_ns, 2000002002u);
    struct sl_buf b;
    sl_buf_init(&b, 0);
    struct sl_prom p = {.b = &b, .labels = "w=\"0\""};
    sl_prom_hist(&p, "s_seconds", "h", NULL, &s);
    ck_assert_int_eq(p.rc, 0);
    ck_assert_str_eq(text(&b), "# HELP s_seconds h\n# TYPE s_seconds histogram\n"
                               "s_seconds_bucket{w=\"0\",le=\"0.000001\"} 2\n"
                               "s_seconds_bucket{w=\"0\",le=\"0.00025\"} 3\n"
                               "s_seconds_bucket{w=\"0\",le=\"1\"} 4\n"
                               "s_seconds_bucket{w=\"0\",le=\"+Inf\"} 5\n"
                               "s_seconds_sum{w=\"0\"} 2.000002002\n"
                               "s_seconds_count{w=\"0\"} 5\n");
    sl_buf_free(&b);
    /* bounds not ascending are cut to the ascending prefix */
    static const uint64_t bad[] = {5, 9, 7, 10};
    sl_hist_init(&h, bad, 4);
    ck_assert_uint_eq(h.n, 2);
}
END_TEST

/* ---- the server ---- */

struct body {
    int fail;
    size_t repeat; /* lines of text */
};

static int write_body(void *ctx, struct sl_buf *out)
{
    const struct body *bd = ctx;
    if (bd->fail)
        return SL_EIO;
    for (size_t i = 0; i < bd->repeat; i++)
        if (sl_buf_printf(out, "# TYPE m%zu counter\nm%zu 42\n", i, i) != 0)
            return SL_EINVAL;
    return 0;
}

/* Connect to 127.0.0.1:port, send req (len bytes), read the whole answer
 * (the server closes: Connection: close) into a malloc'd string. */
static char *http(unsigned port, const char *req, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);
        if (n <= 0)
            break; /* the server may answer and close before reading it all */
        off += (size_t)n;
    }
    size_t cap = 1 << 16, got = 0;
    char *out = malloc(cap + 1);
    ck_assert_ptr_nonnull(out);
    for (;;) {
        if (got == cap) {
            cap *= 2;
            out = realloc(out, cap + 1);
            ck_assert_ptr_nonnull(out);
        }
        ssize_t n = recv(fd, out + got, cap - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    out[got] = '\0';
    close(fd);
    return out;
}

static char *get(unsigned port, const char *method, const char *path)
{
    char req[512];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", method, path);
    return http(port, req, (size_t)n);
}

static const char *body_of(const char *resp)
{
    const char *b = strstr(resp, "\r\n\r\n");
    ck_assert_ptr_nonnull(b);
    return b + 4;
}

static struct sl_http_metrics *start(struct body *bd, unsigned max_conn, unsigned timeout_s, size_t max_body)
{
    struct sl_http_metrics *h;
    struct sl_error err = {0};
    struct sl_http_metrics_opts o = {.listen = "127.0.0.1:0",
                                     .fn = write_body,
                                     .ctx = bd,
                                     .max_connections = max_conn,
                                     .timeout_s = timeout_s,
                                     .max_body = max_body};
    int rc = sl_http_metrics_start(&h, &o, &err);
    ck_assert_msg(rc == 0, "start: %s", err.msg);
    ck_assert_uint_gt(sl_http_metrics_port(h), 0);
    return h;
}

START_TEST(test_answers)
{
    struct body bd = {.repeat = 2};
    struct sl_http_metrics *h = start(&bd, 0, 0, 0);
    unsigned port = sl_http_metrics_port(h);
    char *r = get(port, "GET", "/metrics");
    ck_assert_msg(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", r);
    ck_assert_ptr_nonnull(strstr(r, "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
    ck_assert_str_eq(body_of(r), "# TYPE m0 counter\nm0 42\n# TYPE m1 counter\nm1 42\n");
    free(r);
    /* a query string is no other path */
    r = get(port, "GET", "/metrics?name[]=x");
    ck_assert_msg(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", r);
    free(r);
    r = get(port, "HEAD", "/metrics");
    ck_assert_msg(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", r);
    ck_assert_str_eq(body_of(r), "");
    free(r);
    static const char *const paths[] = {"/", "/metrics/", "/metricsx", "/Metrics", "/../metrics", "*"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        r = get(port, "GET", paths[i]);
        ck_assert_msg(strncmp(r, "HTTP/1.1 404 Not Found\r\n", 24) == 0 || strncmp(r, "HTTP/1.1 400", 12) == 0,
                      "%s: %s", paths[i], r);
        free(r);
    }
    static const char *const methods[] = {"POST", "PUT", "DELETE", "OPTIONS", "PATCH", "BREW"};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        r = get(port, methods[i], "/metrics");
        ck_assert_msg(strncmp(r, "HTTP/1.1 405 Method Not Allowed\r\n", 33) == 0, "%s: %s", methods[i], r);
        ck_assert_ptr_nonnull(strstr(r, "\r\nAllow: GET, HEAD\r\n"));
        free(r);
    }
    /* a POST with a body: refused, the body never read into memory */
    static const char post[] = "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\nxxxx";
    r = http(port, post, sizeof post - 1);
    ck_assert_msg(strncmp(r, "HTTP/1.1 405", 12) == 0, "%s", r);
    free(r);
    /* garbage is no request */
    static const char junk[] = "\x01\x02\x03 garbage\r\n\r\n";
    r = http(port, junk, sizeof junk - 1);
    ck_assert_msg(r[0] == '\0' || strncmp(r, "HTTP/1.1 400", 12) == 0, "%s", r);
    free(r);
    ck_assert_uint_eq(sl_http_metrics_scrapes(h), 3); /* the GETs and the HEAD of /metrics */
    ck_assert_uint_eq(sl_http_metrics_begun(h), 3);
    sl_http_metrics_stop(h);
    sl_http_metrics_stop(NULL);
}
END_TEST

START_TEST(test_failed_or_oversized_body_is_500)
{
    struct body bd = {.fail = 1};
    struct sl_http_metrics *h = start(&bd, 0, 0, 1000);
    char *r = get(sl_http_metrics_port(h), "GET", "/metrics");
    ck_assert_msg(strncmp(r, "HTTP/1.1 500", 12) == 0, "%s", r);
    free(r);
    bd.fail = 0;
    bd.repeat = 100; /* past 1000 bytes */
    r = get(sl_http_metrics_port(h), "GET", "/metrics");
    ck_assert_msg(strncmp(r, "HTTP/1.1 500", 12) == 0, "%s", r);
    free(r);
    bd.repeat = 1;
    r = get(sl_http_metrics_port(h), "GET", "/metrics");
    ck_assert_msg(strncmp(r, "HTTP/1.1 200", 12) == 0, "%s", r);
    free(r);
    ck_assert_uint_eq(sl_http_metrics_scrapes(h), 3); /* answered, 500s too */
    ck_assert_uint_eq(sl_http_metrics_begun(h), 3);
    sl_http_metrics_stop(h);
}
END_TEST

START_TEST(test_huge_request_refused)
{
    struct body bd = {.repeat = 1};
    struct sl_http_metrics *h = start(&bd, 0, 0, 0);
    unsigned port = sl_http_metrics_port(h);
    size_t n = 1 << 16; /* a 64 KiB URL, four times the bound */
    char *req = malloc(n + 64);
    ck_assert_ptr_nonnull(req);
    memcpy(req, "GET /", 5);
    memset(req + 5, 'a', n);
    size_t len = 5 + n;
    len += (size_t)sprintf(req + len, " HTTP/1.1\r\nHost: x\r\n\r\n");
    char *r = http(port, req, len);
    ck_assert_msg(strncmp(r, "HTTP/1.1 414 URI Too Long\r\n", 27) == 0, "%.200s", r);
    free(r);
    /* a header block past the bound */
    len = (size_t)sprintf(req, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + len, 'b', n - 100);
    len += n - 100;
    len += (size_t)sprintf(req + len, "\r\n\r\n");
    r = http(port, req, len);
    ck_assert_msg(strncmp(r, "HTTP/1.1 431", 12) == 0, "%.200s", r);
    free(r);
    free(req);
    r = get(port, "GET", "/metrics"); /* still serving */
    ck_assert_msg(strncmp(r, "HTTP/1.1 200", 12) == 0, "%s", r);
    ck_assert_str_eq(body_of(r), "# TYPE m0 counter\nm0 42\n");
    free(r);
    sl_http_metrics_stop(h);
}
END_TEST

struct scraper {
    unsigned port;
    int ok;
};

static void *scrape(void *arg)
{
    struct scraper *s = arg;
    for (int i = 0; i < 5; i++) {
        char *r = get(s->port, "GET", "/metrics");
        s->ok += strncmp(r, "HTTP/1.1 200", 12) == 0 && strcmp(body_of(r), "# TYPE m0 counter\nm0 42\n") == 0;
        free(r);
    }
    return NULL;
}

START_TEST(test_many_connections)
{
    struct body bd = {.repeat = 1};
    struct sl_http_metrics *h = start(&bd, 8, 1, 0); /* 8 at once, 1 s of silence */
    unsigned port = sl_http_metrics_port(h);
    /* 16 scrapers at once: each connection is short, every one answered
     * or, over the limit, closed; most are answered */
    enum { NT = 16 };
    pthread_t th[NT];
    struct scraper sc[NT];
    for (int i = 0; i < NT; i++) {
        sc[i] = (struct scraper){.port = port};
        ck_assert_int_eq(pthread_create(&th[i], NULL, scrape, &sc[i]), 0);
    }
    int ok = 0;
    for (int i = 0; i < NT; i++) {
        pthread_join(th[i], NULL);
        ok += sc[i].ok;
    }
    ck_assert_int_gt(ok, 0);
    ck_assert_uint_eq(sl_http_metrics_scrapes(h), (uint64_t)ok);
    /* 64 silent connections hold every slot: the ones over the limit are
     * closed at once; the others are closed after 1 s of silence, and the
     * server answers again */
    enum { NS = 64 };
    int fds[NS];
    for (int i = 0; i < NS; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ck_assert_int_eq(connect(fds[i], (struct sockaddr *)&a, sizeof a), 0);
    }
    int closed = 0;
    for (int i = 0; i < NS; i++) {
        struct timeval tv = {.tv_sec = 5};
        setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        char c;
        closed += recv(fds[i], &c, 1, 0) <= 0; /* closed by the server: over the limit, or silent too long */
    }
    ck_assert_int_eq(closed, NS);
    /* the server's side of a closed connection is freed on its thread a
     * moment after the client sees it end: a few tries */
    char *r = NULL;
    for (int i = 0; i < 20 && (r == NULL || strncmp(r, "HTTP/1.1 200", 12) != 0); i++) {
        free(r);
        if (i > 0)
            usleep(100000);
        r = get(port, "GET", "/metrics");
    }
    ck_assert_msg(strncmp(r, "HTTP/1.1 200", 12) == 0, "%s", r);
    free(r);
    for (int i = 0; i < NS; i++)
        close(fds[i]);
    sl_http_metrics_stop(h);
}
END_TEST

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A connection to 127.0.0.1:port from the loopback address src. */
static int connect_from(const char *src, unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in s = {.sin_family = AF_INET};
    ck_assert_int_eq(inet_pton(AF_INET, src, &s.sin_addr), 1);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&s, sizeof s), 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Slowloris (issue #24 item 6): 40 connections from one address, each
 * trickling a header line well inside the silence timeout, once held every
 * slot for as long as they lasted. Now one address holds at most 8 (a
 * quarter of 32), those 8 are cut at the request's deadline (2 s here)
 * although they never fall silent, the other 32 are closed at once, and
 * every scrape from another address meanwhile is answered. */
START_TEST(test_slowloris)
{
    struct body bd = {.repeat = 1};
    struct sl_http_metrics *h = start(&bd, 0, 2, 0); /* the defaults but a 2 s deadline */
    unsigned port = sl_http_metrics_port(h);
    enum { NA = 40, TICKS = 10 };
    static const char head[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
    int fds[NA];
    double t0 = now_s(), closed_at[NA];
    for (int i = 0; i < NA; i++) {
        fds[i] = connect_from("127.0.0.2", port);
        closed_at[i] = -1;
        (void)send(fds[i], head, sizeof head - 1, MSG_NOSIGNAL);
    }
    int answered = 0;
    for (int tick = 0; tick < TICKS; tick++) {
        double tick_end = t0 + 0.5 * (tick + 1);
        for (int i = 0; i < NA; i++) {
            if (fds[i] < 0)
                continue;
            char c;
            ssize_t n = recv(fds[i], &c, 1, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) ||
                send(fds[i], "X-Slow: 1\r\n", 11, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
                closed_at[i] = now_s() - t0;
                close(fds[i]);
                fds[i] = -1;
            }
        }
        double t = now_s();
        char *r = get(port, "GET", "/metrics"); /* from 127.0.0.1 */
        ck_assert_msg(strncmp(r, "HTTP/1.1 200", 12) == 0, "scrape %d (%.1f s in): '%.80s'", tick, t - t0, r);
        ck_assert_msg(now_s() - t < 1.5, "scrape %d took %.1f s", tick, now_s() - t);
        free(r);
        answered++;
        double left = tick_end - now_s();
        if (left > 0)
            usleep((useconds_t)(left * 1e6));
    }
    int at_once = 0, at_deadline = 0;
    for (int i = 0; i < NA; i++) {
        if (closed_at[i] >= 0 && closed_at[i] < 1.0)
            at_once++;
        else if (closed_at[i] >= 1.5 && closed_at[i] < 4.0)
            at_deadline++;
        if (fds[i] >= 0)
            close(fds[i]);
    }
    ck_assert_int_eq(answered, TICKS);
    ck_assert_int_eq(at_once, NA - 8);
    ck_assert_int_eq(at_deadline, 8);
    ck_assert_uint_eq(sl_http_metrics_cut(h), 8);
    sl_http_metrics_stop(h);
}
END_TEST

START_TEST(test_port_in_use_and_bad_addresses)
{
    struct body bd = {.repeat = 1};
    struct sl_http_metrics *h = start(&bd, 0, 0, 0), *h2 = (struct sl_http_metrics *)1;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", sl_http_metrics_port(h));
    struct sl_error err = {0};
    struct sl_http_metrics_opts o = {.listen = addr, .fn = write_body, .ctx = &bd};
    ck_assert_int_eq(sl_http_metrics_start(&h2, &o, &err), SL_EIO);
    ck_assert_ptr_null(h2);
    char want[128];
    snprintf(want, sizeof want, "%s: bind: Address already in use", addr);
    ck_assert_str_eq(err.msg, want);
    sl_http_metrics_stop(h);

    static const char *const bad[] = {"",
                                      "9464",
                                      ":",
                                      "127.0.0.1",
                                      "127.0.0.1:",
                                      "127.0.0.1:65536",
                                      "127.0.0.1:-1",
                                      "127.0.0.1:+80",
                                      "127.0.0.1:80x",
                                      "127.0.0.1:999999",
                                      "256.0.0.1:80",
                                      "example.com:80",
                                      "::1:80",
                                      "[::1:80",
                                      "[zz]:80",
                                      "tcp://127.0.0.1:80",
                                      " 127.0.0.1:80",
                                      "127.0.0.1:80 "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct sockaddr_storage ss;
        socklen_t len;
        memset(&err, 0, sizeof err);
        ck_assert_msg(sl_http_metrics_parse(bad[i], &ss, &len, &err) == SL_EINVAL, "'%s' accepted", bad[i]);
        ck_assert_msg(strstr(err.msg, "expected HOST:PORT") != NULL, "%s", err.msg);
        o.listen = bad[i];
        ck_assert_int_eq(sl_http_metrics_start(&h2, &o, &err), SL_EINVAL);
    }
    static const struct {
        const char *addr;
        int family;
        unsigned port;
    } good[] = {{"127.0.0.1:9464", AF_INET, 9464},
                {"localhost:0", AF_INET, 0},
                {"*:80", AF_INET, 80},
                {"[::1]:9", AF_INET6, 9},
                {"0.0.0.0:00080", AF_INET, 80}};
    /* ":PORT" reads like "this host" and bound every interface: refused (issue #24 item 7) */
    struct sockaddr_storage ss0;
    socklen_t len0;
    ck_assert_int_eq(sl_http_metrics_parse(":9464", &ss0, &len0, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "':9464' names no host: give 127.0.0.1:9464 (this host only) or, to be scraped from "
                              "other hosts, *:9464 or an address of this host");
    ck_assert_int_eq(sl_http_metrics_parse("127.0.0.1:99999", &ss0, &len0, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "expected HOST:PORT (HOST an IPv4 address, [IPv6], localhost or *; PORT 0-65535, 0 "
                              "for any free port), e.g. 127.0.0.1:9464, got '127.0.0.1:99999' (port 99999 is out of "
                              "range (0-65535))");
    /* what is reachable from other hosts (the process warns) */
    static const struct {
        const char *addr;
        int local;
    } reach[] = {{"127.0.0.1:9464", 1}, {"127.3.2.1:1", 1},     {"localhost:0", 1}, {"[::1]:9", 1}, {"*:9464", 0},
                 {"0.0.0.0:9464", 0},   {"198.18.0.1:9464", 0}, {"[::]:9", 0},      {":9464", 0},   {"garbage", 0}};
    for (size_t i = 0; i < sizeof reach / sizeof reach[0]; i++)
        ck_assert_msg(sl_http_metrics_is_local(reach[i].addr) == reach[i].local, "%s", reach[i].addr);
    char longer[128];
    memset(longer, 'h', 100);
    strcpy(longer + 100, ":80");
    ck_assert_int_eq(sl_http_metrics_parse(longer, &ss0, &len0, &err), SL_EINVAL);
    ck_assert(strstr(err.msg, "(the host is longer than 63 bytes)") != NULL);
    h = start(&bd, 0, 0, 0);
    ck_assert_int_eq(sl_http_metrics_local(h), 1);
    sl_http_metrics_stop(h);
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        struct sockaddr_storage ss;
        socklen_t len;
        ck_assert_msg(sl_http_metrics_parse(good[i].addr, &ss, &len, &err) == 0, "%s: %s", good[i].addr, err.msg);
        ck_assert_int_eq(ss.ss_family, good[i].family);
        unsigned port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                      : ((struct sockaddr_in6 *)&ss)->sin6_port);
        ck_assert_uint_eq(port, good[i].port);
    }
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_http_metrics");
    TCase *tc = tcase_create("format");
    tcase_add_test(tc, test_prom_exact);
    tcase_add_test(tc, test_prom_single_families);
    tcase_add_test(tc, test_prom_bound_sticks);
    tcase_add_test(tc, test_hist_buckets_exact);
    suite_add_tcase(s, tc);
    tc = tcase_create("server");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_answers);
    tcase_add_test(tc, test_failed_or_oversized_body_is_500);
    tcase_add_test(tc, test_huge_request_refused);
    tcase_add_test(tc, test_many_connections);
    tcase_add_test(tc, test_slowloris);
    tcase_add_test(tc, test_port_in_use_and_bad_addresses);
    suite_add_tcase(s, tc);
    return s;
}
