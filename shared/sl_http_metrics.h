/* sl_http_metrics: a process's /metrics endpoint, for Prometheus to
 * scrape, served by libmicrohttpd on its own thread.
 *
 * The server answers GET (and HEAD) /metrics with what the process's
 * callback writes (the Prometheus text format, sl_prom.h), 404 for any
 * other path, 405 (with "Allow: GET, HEAD") for any other method. The
 * callback runs on the server's thread, one request at a time: it must
 * read snapshots (sl_metrics, sl_hist: relaxed atomics) and never take a
 * lock that a hot path holds.
 *
 * Anything a peer sends is bounded: at most `max_connections` at once (a
 * connection over that is closed at once), at most `max_per_address` of
 * them from one address (one host's slow connections cannot take every
 * slot), `timeout_s` of silence per connection and `timeout_s` in all for
 * a request (from accept, or from the previous answer on a kept-alive
 * connection: a client trickling its headers is cut off then), 16 KiB of
 * request line and headers per connection (a longer URL or header block is
 * answered 414 or 431 by the library), and the body the callback may
 * write (`max_body`; over it, 500).
 *
 * Thread-safe: start and stop from one thread; port and scrapes from any.
 */
#ifndef SL_HTTP_METRICS_H
#define SL_HTTP_METRICS_H

#include <stdint.h>
#include <sys/socket.h>

#include "sl_buf.h"
#include "sl_error.h"

/* Write the exposition into out (appending). 0, or an error (the request
 * is answered 500). */
typedef int (*sl_http_metrics_fn)(void *ctx, struct sl_buf *out);

struct sl_http_metrics_opts {
    const char *listen; /* HOST:PORT (sl_http_metrics_parse) */
    sl_http_metrics_fn fn;
    void *ctx;                /* fn's, borrowed: it outlives the server */
    unsigned max_connections; /* 0: 32 */
    unsigned max_per_address; /* 0: a quarter of max_connections (8 of 32) */
    unsigned timeout_s;       /* 0: 10: silence, and a request's total time */
    size_t max_body;          /* 0: 4 MiB */
};

struct sl_http_metrics;

/* HOST:PORT into an address to bind: HOST an IPv4 address, an IPv6 one in
 * brackets ([::1]), "localhost" (127.0.0.1), or "*" (every interface,
 * IPv4); PORT 0..65535 in decimal (0: the kernel picks one). An empty
 * HOST (":9464") is refused: it reads like "this host" but would bind
 * every interface. 0, or SL_EINVAL with err saying what was expected
 * (err may be NULL). No name lookup. */
int sl_http_metrics_parse(const char *listen, struct sockaddr_storage *addr, socklen_t *len,
                          struct sl_error *err) SL_MUST_CHECK;

/* 1 when `listen` parses to a loopback address (127.0.0.0/8, [::1],
 * localhost): only this host can scrape it. 0 for anything else, "*" and
 * 0.0.0.0 above all: the caller warns, as the metrics name files and the
 * job's shape. */
int sl_http_metrics_is_local(const char *listen);

/* Bind and listen (errors name the address and the call: "bind: Address
 * already in use"), then serve on a thread of the library's. 0, SL_EINVAL
 * (the address), SL_EIO (the socket, the library) or SL_ENOMEM. */
int sl_http_metrics_start(struct sl_http_metrics **out, const struct sl_http_metrics_opts *o,
                          struct sl_error *err) SL_MUST_CHECK;

/* The port it listens on (the kernel's choice for port 0). */
unsigned sl_http_metrics_port(const struct sl_http_metrics *h);

/* /metrics requests answered so far (200, or 500 when the callback
 * failed), and begun so far (the callback called). Requests are answered one at a time, in order: once
 * scrapes >= b + 1, where b was begun at some moment, a scrape that began
 * after that moment has been answered. */
uint64_t sl_http_metrics_scrapes(const struct sl_http_metrics *h);
uint64_t sl_http_metrics_begun(const struct sl_http_metrics *h);

/* Connections shut down at their deadline so far (timeout_s in all). */
uint64_t sl_http_metrics_cut(const struct sl_http_metrics *h);

/* 1 when it listens on a loopback address only (sl_http_metrics_is_local). */
int sl_http_metrics_local(const struct sl_http_metrics *h);

/* The warning a process logs when it serves /metrics where other hosts can
 * reach it (a printf format taking the HOST:PORT). */
#define SL_HTTP_METRICS_REACHABLE                                                                                  \
    "metrics: /metrics on %s can be reached from other hosts, and it shows file names, the job's name and shape: " \
    "give --metrics-listen 127.0.0.1:PORT to keep it on this host, or firewall the port"

/* Stop serving (waits for the server's thread: a request being answered
 * finishes first), close and free. NULL is ignored. */
void sl_http_metrics_stop(struct sl_http_metrics *h);

#endif
