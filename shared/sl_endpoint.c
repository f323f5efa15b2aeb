/* sl_endpoint: endpoint checks, binds and connects (see sl_endpoint.h).
 *
 * Every parser of an endpoint (--listen, --connect, --ring, --peers,
 * --ps, a cluster spec's lists, the Slurm layout, --metrics-listen's
 * HOST:PORT) comes through sl_endpoint_check or sl_endpoint_hostport, so a
 * port is read in one place: decimal digits only, at most five, 1..65535.
 * The bind side is what ZeroMQ leaves to its caller: it binds addresses,
 * not names ("localhost" fails with "No such device"), opens IPv6 only on
 * a socket with ZMQ_IPV6, and unlinks whatever file sits at an ipc:// path
 * before binding there, a live server's socket included.
 */
#define _GNU_SOURCE
#include "sl_endpoint.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_zsock.h"

#define SHOWN 80 /* bytes of a refused value quoted in a message */

static int port_of(const char *p, size_t n, unsigned flags, unsigned *port, struct sl_error *err)
{
    if (n == 0)
        return sl_error_set(err, SL_EINVAL, "no port (expected HOST:PORT, PORT 1-65535)");
    if (n == 1 && p[0] == '*') {
        if (!(flags & SL_ENDPOINT_PORT_STAR))
            return sl_error_set(err, SL_EINVAL, "port '*' is for binds only (expected 1-65535)");
        *port = 0;
        return 0;
    }
    unsigned long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return sl_error_set(err, SL_EINVAL, "port '%.*s' is not a decimal number (expected 1-65535)",
                                (int)(n < 16 ? n : 16), p);
        if (i < 6)
            v = v * 10 + (unsigned long)(p[i] - '0');
    }
    if (n > 5 || v > 65535 || (v == 0 && !(flags & SL_ENDPOINT_PORT_ZERO)))
        return sl_error_set(err, SL_EINVAL, "port %.*s%s is out of range (%s-65535)", (int)(n < 16 ? n : 16), p,
                            n > 16 ? "..." : "", flags & SL_ENDPOINT_PORT_ZERO ? "0" : "1");
    *port = (unsigned)v;
    return 0;
}

int sl_endpoint_hostport(const char *hp, size_t len, unsigned flags, char *host, size_t hcap, unsigned *port,
                         struct sl_error *err)
{
    const char *colon = NULL;
    for (size_t i = len; i > 0; i--)
        if (hp[i - 1] == ':') {
            colon = hp + i - 1;
            break;
        }
    if (colon == NULL)
        return sl_error_set(err, SL_EINVAL, "no port (expected HOST:PORT, PORT 1-65535)");
    size_t hlen = (size_t)(colon - hp);
    if (hlen > 0 && hp[0] == '[') {
        if (hp[hlen - 1] != ']' || hlen < 3)
            return sl_error_set(err, SL_EINVAL, "an IPv6 address in brackets needs ']:PORT' after it");
    } else if (memchr(hp, ':', hlen) != NULL) {
        return sl_error_set(err, SL_EINVAL, "an IPv6 address needs brackets ([::1]:PORT), and a host one colon");
    }
    size_t most = hcap - 1 < SL_ENDPOINT_MAX_HOST ? hcap - 1 : SL_ENDPOINT_MAX_HOST;
    if (hlen > most)
        return sl_error_set(err, SL_EINVAL, "the host is longer than %zu bytes", most);
    int rc = port_of(colon + 1, len - hlen - 1, flags, port, err);
    if (rc != 0)
        return rc;
    memcpy(host, hp, hlen);
    host[hlen] = '\0';
    if (hlen > 0 && host[0] == '[') {
        char a[64];
        struct in6_addr a6;
        if (hlen - 2 >= sizeof a)
            return sl_error_set(err, SL_EINVAL, "'%.*s' is not an IPv6 address", (int)(hlen < SHOWN ? hlen : SHOWN),
                                host);
        memcpy(a, host + 1, hlen - 2);
        a[hlen - 2] = '\0';
        if (inet_pton(AF_INET6, a, &a6) != 1)
            return sl_error_set(err, SL_EINVAL, "'%s' is not an IPv6 address", host);
    }
    return 0;
}

/* A tcp HOST: '*', [IPv6] (checked by sl_endpoint_hostport), or a name or
 * IPv4 address of letters, digits, '.', '-' and '_'. */
static int host_ok(const char *h, struct sl_error *err)
{
    if (h[0] == '\0')
        return sl_error_set(err, SL_EINVAL, "no host (tcp://HOST:PORT; '*' binds every interface)");
    if (h[0] == '[' || strcmp(h, "*") == 0)
        return 0;
    for (const char *p = h; *p != '\0'; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' ||
              *p == '-' || *p == '_'))
            return sl_error_set(err, SL_EINVAL, "the host holds '%c' (expected an address, a name or '*')",
                                *p >= 0x20 && *p < 0x7f ? *p : '?');
    return 0;
}

static int check(const char *ep, char *host, size_t hcap, unsigned *port, struct sl_error *err)
{
    if (ep == NULL || ep[0] == '\0')
        return sl_error_set(err, SL_EINVAL, "no endpoint (expected tcp://HOST:PORT, ipc://PATH or inproc://NAME)");
    size_t n = strlen(ep);
    int rc = 0;
    if (strncmp(ep, "tcp://", 6) == 0) {
        rc = sl_endpoint_hostport(ep + 6, n - 6, SL_ENDPOINT_PORT_STAR, host, hcap, port, err);
        if (rc == 0)
            rc = host_ok(host, err);
    } else if (strncmp(ep, "ipc://", 6) == 0) {
        struct sockaddr_un un;
        if (n == 6 || (n == 7 && ep[6] == '@'))
            rc = sl_error_set(err, SL_EINVAL, "no path (ipc://PATH, or ipc://@NAME for an abstract socket)");
        else if (n - 6 >= sizeof un.sun_path)
            rc = sl_error_set(err, SL_EINVAL, "the path is longer than %zu bytes (a unix socket's limit)",
                              sizeof un.sun_path - 1);
    } else if (strncmp(ep, "inproc://", 9) == 0) {
        if (n == 9)
            rc = sl_error_set(err, SL_EINVAL, "no name (inproc://NAME)");
    } else {
        rc = sl_error_set(err, SL_EINVAL, "unknown transport (expected tcp://HOST:PORT, ipc://PATH or inproc://NAME)");
    }
    if (rc != 0)
        sl_error_prefix(err, "'%.*s%s': ", SHOWN, ep, n > SHOWN ? "..." : "");
    return rc;
}

int sl_endpoint_check(const char *ep, struct sl_error *err)
{
    char host[SL_ENDPOINT_MAX_HOST + 1];
    unsigned port;
    return check(ep, host, sizeof host, &port, err);
}

int sl_endpoint_is_ipv6(const char *ep)
{
    return ep != NULL && strncmp(ep, "tcp://[", 7) == 0;
}

/* ZeroMQ unlinks PATH before it binds there: probe it first. Nothing
 * there: 0. A socket nobody accepts on (ECONNREFUSED): stale, removed.
 * Accepted (or a full backlog: EAGAIN): live, refused. */
static int ipc_claim(const char *ep, const char *path, struct sl_error *err)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : sl_error_sys(err, errno, "bind(%s): stat", ep);
    if (!S_ISSOCK(st.st_mode))
        return sl_error_set(err, SL_EINVAL, "bind(%s): %s exists and is not a socket: refusing to replace it", ep,
                            path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return sl_error_sys(err, errno, "bind(%s): socket", ep);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    memcpy(un.sun_path, path, strlen(path) + 1); /* fits: checked */
    int live = connect(fd, (struct sockaddr *)&un, sizeof un) == 0;
    int e = errno;
    close(fd);
    if (live || e == EAGAIN || e == EINPROGRESS)
        return sl_error_set(err, SL_EINVAL,
                            "bind(%s): a live process serves %s (another feeder, trainer or "
                            "server?): stop it or choose another path",
                            ep, path);
    if (e != ECONNREFUSED)
        return sl_error_sys(err, e, "bind(%s): cannot tell whether %s is in use, refusing to replace it: connect", ep,
                            path);
    if (unlink(path) != 0 && errno != ENOENT)
        return sl_error_sys(err, errno, "bind(%s): removing the stale socket %s", ep, path);
    return 0;
}

/* ZMQ_IPV6 on sock, through the link helper (an error reads "bind(EP): ..."). */
static int ipv6(void *sock, const char *verb, const char *ep, struct sl_error *err)
{
    char what[SL_ERROR_MSG_MAX / 2];
    snprintf(what, sizeof what, "%s(%s)", verb, ep);
    return sl_zsock_set_int(sock, ZMQ_IPV6, 1, what, err);
}

int sl_endpoint_bind_prepare(void *sock, const char *ep, char *out, size_t cap, struct sl_error *err)
{
    char host[SL_ENDPOINT_MAX_HOST + 1];
    unsigned port;
    int rc = check(ep, host, sizeof host, &port, err);
    if (rc != 0)
        return sl_error_prefix(err, "bind: ");
    int n;
    if (strncmp(ep, "tcp://", 6) == 0 && strcasecmp(host, "localhost") == 0)
        n = port == 0 ? snprintf(out, cap, "tcp://127.0.0.1:*") : snprintf(out, cap, "tcp://127.0.0.1:%u", port);
    else
        n = snprintf(out, cap, "%s", ep);
    if (n < 0 || (size_t)n >= cap)
        return sl_error_set(err, SL_EINVAL, "bind(%s): longer than %zu bytes", ep, cap - 1);
    if (sl_endpoint_is_ipv6(ep) && ipv6(sock, "bind", ep, err) != 0)
        return SL_EIO;
    if (strncmp(ep, "ipc://", 6) == 0 && ep[6] != '@')
        return ipc_claim(ep, ep + 6, err);
    return 0;
}

int sl_endpoint_connect(void *sock, const char *ep, struct sl_error *err)
{
    if (sl_endpoint_is_ipv6(ep) && ipv6(sock, "connect", ep, err) != 0)
        return SL_EIO;
    if (zmq_connect(sock, ep) != 0)
        return sl_error_set(err, SL_EIO, "connect(%s): %s", ep, zmq_strerror(zmq_errno()));
    return 0;
}
