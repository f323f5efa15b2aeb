/* sl_http_metrics: /metrics over libmicrohttpd (see sl_http_metrics.h).
 *
 * The listening socket is made here, not by the library: a bind that fails
 * is then reported with its reason (the port in use, an address this host
 * does not have), and the port the kernel chose for port 0 is known. The
 * library runs one internal thread polling with epoll; every request is
 * answered on it, so the callback never runs twice at once. Responses are
 * built into a buffer bounded by max_body and copied into the library's
 * response (a few KiB: the copy costs nothing next to the request).
 */
#include "sl_http_metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_alloc.h"

#define MEMORY_LIMIT (16 * 1024) /* request line and headers, per connection */
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct sl_http_metrics {
    struct MHD_Daemon *d;
    int fd;
    unsigned port;
    sl_http_metrics_fn fn;
    void *ctx;
    size_t max_body;
    _Atomic uint64_t scrapes, begun;
};

static int bad_addr(struct sl_error *err, const char *listen)
{
    return sl_error_set(err, SL_EINVAL,
                        "expected HOST:PORT (HOST an IPv4 address, [IPv6], localhost or *; PORT 0-65535, 0 for any "
                        "free port), e.g. 127.0.0.1:9464, got '%.80s'", listen);
}

int sl_http_metrics_parse(const char *listen, struct sockaddr_storage *addr, socklen_t *len, struct sl_error *err)
{
    memset(addr, 0, sizeof *addr);
    *len = 0;
    if (listen == NULL)
        return bad_addr(err, "");
    const char *colon = strrchr(listen, ':');
    if (colon == NULL || colon[1] == '\0' || strlen(colon + 1) > 5)
        return bad_addr(err, listen);
    unsigned long port = 0;
    for (const char *p = colon + 1; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return bad_addr(err, listen);
        port = port * 10 + (unsigned long)(*p - '0');
    }
    if (port > 65535)
        return bad_addr(err, listen);
    char host[64];
    size_t hlen = (size_t)(colon - listen);
    if (hlen >= sizeof host)
        return bad_addr(err, listen);
    memcpy(host, listen, hlen);
    host[hlen] = '\0';
    if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)addr;
        host[hlen - 1] = '\0';
        if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) != 1)
            return bad_addr(err, listen);
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *len = sizeof *a6;
        return 0;
    }
    struct sockaddr_in *a4 = (struct sockaddr_in *)addr;
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
    *len = sizeof *a4;
    if (hlen == 0 || strcmp(host, "*") == 0)
        a4->sin_addr.s_addr = htonl(INADDR_ANY);
    else if (strcmp(host, "localhost") == 0)
        a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
        return bad_addr(err, listen);
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
    atomic_init(&h->scrapes, 0);
    atomic_init(&h->begun, 0);
    h->fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (h->fd < 0) {
        rc = sl_error_sys(err, errno, "%s: socket", o->listen);
        goto out_free;
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
    h->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)h->fd,
                            MHD_OPTION_CONNECTION_LIMIT, o->max_connections ? o->max_connections : 32u,
                            MHD_OPTION_CONNECTION_TIMEOUT, o->timeout_s ? o->timeout_s : 10u,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)MEMORY_LIMIT,
                            MHD_OPTION_END);
    if (h->d == NULL) { /* it took no socket (only a daemon that started owns one) */
        rc = sl_error_set(err, SL_EIO, "%s: libmicrohttpd could not start serving", o->listen);
        goto out_close;
    }
    *out = h;
    return 0;
out_close:
    close(h->fd);
out_free:
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

void sl_http_metrics_stop(struct sl_http_metrics *h)
{
    if (h == NULL)
        return;
    /* joins its thread and closes the listening socket, ours or not
     * (closing it again here could close another thread's new file) */
    MHD_stop_daemon(h->d);
    sl_free(h);
}
