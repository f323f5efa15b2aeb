/* sl_peer: the local user at the other end of a socket (see sl_peer.h). */
#define _GNU_SOURCE
#include "sl_peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <sys/stat.h>
#include <zmq.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sl_endpoint.h"

/* "AABBCCDD:PPPP" as /proc/net/tcp prints an IPv4 end: the address's four
 * bytes as the host reads them as one integer, the port in host order. */
static void end_v4(char *out, size_t n, const struct sockaddr_in *a)
{
    uint32_t raw;
    memcpy(&raw, &a->sin_addr, sizeof raw);
    snprintf(out, n, "%08X:%04X", raw, ntohs(a->sin_port));
}

/* The same for IPv6 (/proc/net/tcp6): four such integers. */
static void end_v6(char *out, size_t n, const struct sockaddr_in6 *a)
{
    uint32_t w[4];
    memcpy(w, &a->sin6_addr, sizeof w);
    snprintf(out, n, "%08X%08X%08X%08X:%04X", w[0], w[1], w[2], w[3], ntohs(a->sin6_port));
}

static int same_host(const struct sockaddr_storage *peer, const struct sockaddr_storage *self)
{
    if (peer->ss_family == AF_INET) {
        const struct sockaddr_in *p = (const struct sockaddr_in *)peer, *s = (const struct sockaddr_in *)self;
        return (ntohl(p->sin_addr.s_addr) >> 24) == 127 || p->sin_addr.s_addr == s->sin_addr.s_addr;
    }
    const struct sockaddr_in6 *p = (const struct sockaddr_in6 *)peer, *s = (const struct sockaddr_in6 *)self;
    if (IN6_IS_ADDR_LOOPBACK(&p->sin6_addr) || memcmp(&p->sin6_addr, &s->sin6_addr, sizeof p->sin6_addr) == 0)
        return 1;
    if (IN6_IS_ADDR_V4MAPPED(&p->sin6_addr))
        return p->sin6_addr.s6_addr[12] == 127;
    return 0;
}

int sl_peer_uid(int fd, uid_t *uid, struct sl_error *err)
{
    struct sockaddr_storage peer, self;
    socklen_t pl = sizeof peer, sl = sizeof self;
    if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0)
        return sl_error_set(err, SL_EINVAL, "getpeername: %s", strerror(errno));
    if (getsockname(fd, (struct sockaddr *)&self, &sl) != 0)
        return sl_error_set(err, SL_EINVAL, "getsockname: %s", strerror(errno));
    if (peer.ss_family == AF_UNIX) {
        struct ucred cr;
        socklen_t cl = sizeof cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0)
            return sl_error_set(err, SL_EINVAL, "SO_PEERCRED: %s", strerror(errno));
        *uid = cr.uid;
        return 0;
    }
    if (peer.ss_family != AF_INET && peer.ss_family != AF_INET6)
        return sl_error_set(err, SL_EINVAL, "not a unix or TCP socket (family %d)", (int)peer.ss_family);
    if (!same_host(&peer, &self))
        return sl_error_set(err, SL_EINVAL, "the peer is on another host");
    /* the peer's own socket: its local end is our peer, its remote end us */
    char want_local[64], want_remote[64];
    const char *table = peer.ss_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6";
    if (peer.ss_family == AF_INET) {
        end_v4(want_local, sizeof want_local, (const struct sockaddr_in *)&peer);
        end_v4(want_remote, sizeof want_remote, (const struct sockaddr_in *)&self);
    } else {
        end_v6(want_local, sizeof want_local, (const struct sockaddr_in6 *)&peer);
        end_v6(want_remote, sizeof want_remote, (const struct sockaddr_in6 *)&self);
    }
    FILE *f = fopen(table, "re");
    if (f == NULL)
        return sl_error_sys(err, errno, "open(%s)", table);
    char line[512];
    int found = 0;
    unsigned long u = 0;
    if (fgets(line, sizeof line, f) == NULL) /* the header */
        line[0] = '\0';
    while (!found && fgets(line, sizeof line, f) != NULL) {
        char local[64], remote[64];
        unsigned st;
        /* sl local rem st tx:rx tr:when retrnsmt uid ... */
        if (sscanf(line, " %*s %63s %63s %x %*s %*s %*s %lu", local, remote, &st, &u) != 4)
            continue;
        found = strcmp(local, want_local) == 0 && strcmp(remote, want_remote) == 0;
    }
    fclose(f);
    if (!found)
        return sl_error_set(err, SL_EINVAL, "the peer's socket %s is not in %s (closed?)", want_local, table);
    *uid = (uid_t)u;
    return 0;
}

int sl_bind_private(void *sock, const char *endpoint, const char *group, struct sl_error *err)
{
    int path_ipc = strncmp(endpoint, "ipc://", 6) == 0 && endpoint[6] != '@' && endpoint[6] != '\0';
    char bind[512];
    gid_t gid = (gid_t)-1;
    if (path_ipc && group != NULL) {
        struct group *g = getgrnam(group);
        if (g == NULL)
            return sl_error_set(err, SL_EINVAL, "bind(%s): no group '%s'", endpoint, group);
        gid = g->gr_gid;
    }
    /* checked; localhost as 127.0.0.1, [IPv6] with ZMQ_IPV6; a live
     * server's ipc path refused, a stale one removed */
    int rc = sl_endpoint_bind_prepare(sock, endpoint, bind, sizeof bind, err);
    if (rc != 0)
        return rc;
    /* the socket file is made by zmq_bind on this thread: under umask 077
     * it is 0600 from the start (the umask is the process's: this runs at
     * start-up, before other threads make files) */
    mode_t old = path_ipc ? umask(077) : 0;
    rc = zmq_bind(sock, bind);
    int e = errno;
    if (path_ipc)
        umask(old);
    if (rc != 0)
        return sl_error_set(err, SL_EIO, "bind(%s): %s", endpoint, zmq_strerror(e));
    /* 0700 as made (only the owner may connect: that takes write
     * permission); then 0600, or the group's 0660 once it is the group's */
    const char *path = endpoint + 6;
    if (path_ipc && group != NULL && (chown(path, (uid_t)-1, gid) != 0 || chmod(path, 0660) != 0))
        return sl_error_sys(err, errno, "bind(%s): giving the socket to group '%s'", endpoint, group);
    if (path_ipc && group == NULL && chmod(path, 0600) != 0)
        return sl_error_sys(err, errno, "bind(%s): chmod 0600", endpoint);
    return 0;
}
