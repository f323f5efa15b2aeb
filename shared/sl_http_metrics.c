/* sl_http_metrics: /metrics over libmicrohttpd (see sl_http_metrics.h).
 *
 * The listening socket is made here, not by the library: a bind that fails
 * is then reported with its reason (the port in use, an address this host
 * does not have), and the port the kernel chose for port 0 is known. The
 * library runs one internal thread polling with epoll; every request is
 * answered on it, so the callback never runs twice at once. Responses are
 * built into a buffer bounded by max_body and copied into the library's
 * response (a few KiB: the copy costs nothing next to the request).
 *
 * A slow client holds a connection slot (issue #24 item 6: 40 connections
 * each sending a header line every 4 s kept every scrape out). The
 * library's timeout counts silence only, so a request also has a total
 * deadline: timeout_s from accept, or from the previous answer on a
 * kept-alive connection. A watchdog thread of ours keeps each open
 * connection's socket and deadline in a table the library's connection
 * callbacks fill and empty (on its thread), and shuts a late socket down;
 * the library then sees the connection end and closes it. The table's lock
 * makes the shutdown safe: the library calls the closing callback before
 * it closes the socket, and that callback waits for the lock, so a socket
 * shut down is always still the connection's. And no address may hold
 * more than max_per_address connections (the library's per-IP limit), so
 * one host's slow connections leave the other slots to the scrapers.
 */
#include "sl_http_metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_endpoint.h"
#include "sl_thread.h"

#define MEMORY_LIMIT (16 * 1024) /* request line and headers, per connection */
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* One open connection, for the watchdog. */
struct conn_slot {
    struct MHD_Connection *c; /* NULL: free */
    int fd;
    uint64_t deadline_ns; /* UINT64_MAX: shut down already */
};

struct sl_http_metrics {
    struct MHD_Daemon *d;
    int fd;
    unsigned port;
    int local;
    sl_http_metrics_fn fn;
    void *ctx;
    size_t max_body;
    _Atomic uint64_t scrapes, begun, cut;
    uint64_t deadline_ns; /* a request's total time */
    pthread_mutex_t mu;   /* guards slots, stopping */
    pthread_cond_t wake;
    pthread_t watchdog;
    int stopping;
    unsigned nslots;
    struct conn_slot *slots; /* [nslots]: max_connections */
};

static int bad_addr(struct sl_error *err, const char *listen, const char *why)
{
    return sl_error_set(err, SL_EINVAL,
                        "expected HOST:PORT (HOST an IPv4 address, [IPv6], localhost or *; PORT 0-65535, 0 for any "
                        "free port), e.g. 127.0.0.1:9464, got '%.80s'%s%s%s",
                        listen, why[0] ? " (" : "", why, why[0] ? ")" : "");
}

int sl_http_metrics_parse(const char *listen, struct sockaddr_storage *addr, socklen_t *len, struct sl_error *err)
{
    memset(addr, 0, sizeof *addr);
    *len = 0;
    if (listen == NULL)
        return bad_addr(err, "", "");
    char host[64];
    unsigned port;
    struct sl_error why = {0};
    if (sl_endpoint_hostport(listen, strlen(listen), SL_ENDPOINT_PORT_ZERO, host, sizeof host, &port, &why) != 0)
        return bad_addr(err, listen, why.msg);
    size_t hlen = strlen(host);
    /* ":PORT" looks like "this host" and binds every interface: refused */
    if (hlen == 0)
        return sl_error_set(err, SL_EINVAL,
                            "'%.80s' names no host: give 127.0.0.1:%u (this host only) or, to be scraped from other "
                            "hosts, *:%u or an address of this host",
                            listen, port, port);
    if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)addr;
        host[hlen - 1] = '\0';
        if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1)
            return bad_addr(err, listen, "");
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *len = sizeof *a6;
        return 0;
    }
    struct sockaddr_in *a4 = (struct sockaddr_in *)addr;
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
    *len = sizeof *a4;
    if (strcmp(host, "*") == 0)
        a4->sin_addr.s_addr = htonl(INADDR_ANY);
    else if (strcmp(host, "localhost") == 0)
        a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
        return bad_addr(err, listen, "");
    return 0;
}

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *text, size_t len,
                              const char *allow)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
    if (r == NULL)
        return MHD_NO;
    enum MHD_Result ok = MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                                                 status == MHD_HTTP_OK ? CONTENT_TYPE : "text/plain; charset=utf-8");
    if (ok == MHD_YES && allow != NULL)
        ok = MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (ok == MHD_YES)
        ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
    struct sl_http_metrics *h = cls;
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)req_cls;
    /* answered on the first call, before any body: a body is never read
     * (the library discards it and closes the connection) */
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        static const char msg[] = "405 method not allowed: GET /metrics\n";
        return answer(c, MHD_HTTP_METHOD_NOT_ALLOWED, msg, sizeof msg - 1, "GET, HEAD");
    }
    if (strcmp(url, "/metrics") != 0) {
        static const char msg[] = "404 not found: the metrics are at /metrics\n";
        return answer(c, MHD_HTTP_NOT_FOUND, msg, sizeof msg - 1, NULL);
    }
    struct sl_buf b;
    sl_buf_init(&b, h->max_body);
    atomic_fetch_add_explicit(&h->begun, 1, memory_order_relaxed);
    int rc = h->fn(h->ctx, &b);
    enum MHD_Result ok;
    if (rc != 0) {
        static const char msg[] = "500 the metrics could not be written\n";
        ok = answer(c, MHD_HTTP_INTERNAL_SERVER_ERROR, msg, sizeof msg - 1, NULL);
    } else {
        ok = answer(c, MHD_HTTP_OK, b.len > 0 ? (const char *)b.data : "", b.len, NULL);
    }
    atomic_fetch_add_explicit(&h->scrapes, 1, memory_order_relaxed);
    sl_buf_free(&b);
    return ok;
}

/* ---- the deadline ---- */

static struct conn_slot *slot_of(struct sl_http_metrics *h, struct MHD_Connection *c)
{
    for (unsigned i = 0; i < h->nslots; i++)
        if (h->slots[i].c == c)
            return &h->slots[i];
    return NULL;
}

/* The library's thread: a connection begins (its deadline set) or ends
 * (its slot freed before the library closes its socket). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct sl_http_metrics *h = cls;
    (void)socket_context;
    pthread_mutex_lock(&h->mu);
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct conn_slot *s = slot_of(h, NULL); /* free: the library admits at most nslots */
        if (s != NULL && ci != NULL)
            *s = (struct conn_slot){.c = c, .fd = ci->connect_fd, .deadline_ns = sl_clock_ns() + h->deadline_ns};
        pthread_cond_signal(&h->wake);
    } else {
        struct conn_slot *s = slot_of(h, c);
        if (s != NULL)
            *s = (struct conn_slot){.fd = -1};
    }
    pthread_mutex_unlock(&h->mu);
}

/* The library's thread: a request answered; the next one on a kept-alive
 * connection has its own deadline. */
static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls, enum MHD_RequestTerminationCode toe)
{
    struct sl_http_metrics *h = cls;
    (void)req_cls;
    (void)toe;
    pthread_mutex_lock(&h->mu);
    struct conn_slot *s = slot_of(h, c);
    if (s != NULL && s->deadline_ns != UINT64_MAX)
        s->deadline_ns = sl_clock_ns() + h->deadline_ns;
    pthread_mutex_unlock(&h->mu);
}

/* Our thread: shut down every connection past its deadline, then sleep
 * until the next deadline (at most a second; a new connection wakes it). */
static void *watchdog(void *arg)
{
    struct sl_http_metrics *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->stopping) {
        uint64_t now = sl_clock_ns(), next = now + 1000000000u;
        for (unsigned i = 0; i < h->nslots; i++) {
            struct conn_slot *s = &h->slots[i];
            if (s->c == NULL || s->deadline_ns == UINT64_MAX)
                continue;
            if (s->deadline_ns <= now) {
                (void)shutdown(s->fd, SHUT_RDWR); /* still the connection's: its close waits for mu */
                s->deadline_ns = UINT64_MAX;
                atomic_fetch_add_explicit(&h->cut, 1, memory_order_relaxed);
            } else if (s->deadline_ns < next) {
                next = s->deadline_ns;
            }
        }
        struct timespec until = {.tv_sec = (time_t)(next / 1000000000u), .tv_nsec = (long)(next % 1000000000u)};
        (void)pthread_cond_timedwait(&h->wake, &h->mu, &until);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static void watchdog_stop(struct sl_http_metrics *h)
{
    pthread_mutex_lock(&h->mu);
    h->stopping = 1;
    pthread_cond_signal(&h->wake);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->watchdog, NULL);
}

static int addr_is_loopback(const struct sockaddr_storage *a)
{
    if (a->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
    return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

int sl_http_metrics_is_local(const char *listen)
{
    struct sockaddr_storage addr;
    socklen_t len;
    return sl_http_metrics_parse(listen, &addr, &len, NULL) == 0 && addr_is_loopback(&addr);
}

int sl_http_metrics_start(struct sl_http_metrics **out, const struct sl_http_metrics_opts *o, struct sl_error *err)
{
    *out = NULL;
    struct sockaddr_storage addr;
    socklen_t alen;
    int rc = sl_http_metrics_parse(o->listen, &addr, &alen, err);
    if (rc != 0)
        return rc;
    if (o->fn == NULL)
        return sl_error_set(err, SL_EINVAL, "no metrics to serve");
    struct sl_http_metrics *h = sl_calloc(1, sizeof *h);
    if (h == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    h->fn = o->fn;
    h->ctx = o->ctx;
    h->max_body = o->max_body ? o->max_body : (size_t)4 << 20;
    h->local = addr_is_loopback(&addr);
    atomic_init(&h->scrapes, 0);
    atomic_init(&h->begun, 0);
    atomic_init(&h->cut, 0);
    unsigned timeout_s = o->timeout_s ? o->timeout_s : 10u;
    h->deadline_ns = (uint64_t)timeout_s * 1000000000u;
    h->nslots = o->max_connections ? o->max_connections : 32u;
    unsigned per_address = o->max_per_address ? o->max_per_address : (h->nslots + 3) / 4;
    h->slots = sl_calloc(h->nslots, sizeof *h->slots);
    if (h->slots == NULL) {
        rc = sl_error_set(err, SL_ENOMEM, "out of memory");
        goto out_free;
    }
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0 || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
        pthread_cond_init(&h->wake, &ca) != 0) {
        rc = sl_error_set(err, SL_EIO, "%s: pthread_cond_init failed", o->listen);
        goto out_free;
    }
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&h->mu, NULL);
    if (sl_thread_start(&h->watchdog, watchdog, h) != 0) {
        rc = sl_error_set(err, SL_EIO, "%s: cannot start the watchdog thread", o->listen);
        goto out_destroy;
    }
    h->fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (h->fd < 0) {
        rc = sl_error_sys(err, errno, "%s: socket", o->listen);
        goto out_stop;
    }
    int one = 1;
    (void)setsockopt(h->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one); /* a restart finds TIME_WAITs */
    if (addr.ss_family == AF_INET6)
        (void)setsockopt(h->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(h->fd, (struct sockaddr *)&addr, alen) != 0) {
        rc = sl_error_sys(err, errno, "%s: bind", o->listen);
        goto out_close;
    }
    if (listen(h->fd, 64) != 0) {
        rc = sl_error_sys(err, errno, "%s: listen", o->listen);
        goto out_close;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    if (getsockname(h->fd, (struct sockaddr *)&bound, &blen) != 0) {
        rc = sl_error_sys(err, errno, "%s: getsockname", o->listen);
        goto out_close;
    }
    h->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                : ((struct sockaddr_in *)&bound)->sin_port);
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | (addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)h->fd,
                            MHD_OPTION_CONNECTION_LIMIT, h->nslots, MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_address,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                            (size_t)MEMORY_LIMIT, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_END);
    if (h->d == NULL) { /* it took no socket (only a daemon that started owns one) */
        rc = sl_error_set(err, SL_EIO, "%s: libmicrohttpd could not start serving", o->listen);
        goto out_close;
    }
    *out = h;
    return 0;
out_close:
    close(h->fd);
out_stop:
    watchdog_stop(h);
out_destroy:
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->wake);
out_free:
    sl_free(h->slots);
    sl_free(h);
    return rc;
}

unsigned sl_http_metrics_port(const struct sl_http_metrics *h)
{
    return h != NULL ? h->port : 0;
}

uint64_t sl_http_metrics_scrapes(const struct sl_http_metrics *h)
{
    return h != NULL ? atomic_load_explicit(&h->scrapes, memory_order_relaxed) : 0;
}

uint64_t sl_http_metrics_begun(const struct sl_http_metrics *h)
{
    return h != NULL ? atomic_load_explicit(&h->begun, memory_order_relaxed) : 0;
}

uint64_t sl_http_metrics_cut(const struct sl_http_metrics *h)
{
    return h != NULL ? atomic_load_explicit(&h->cut, memory_order_relaxed) : 0;
}

int sl_http_metrics_local(const struct sl_http_metrics *h)
{
    return h != NULL && h->local;
}

void sl_http_metrics_stop(struct sl_http_metrics *h)
{
    if (h == NULL)
        return;
    /* joins its thread and closes the listening socket, ours or not
     * (closing it again here could close another thread's new file) */
    watchdog_stop(h);
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->wake);
    sl_free(h->slots);
    sl_free(h);
}
