/* sl_peer: which local user is at the other end of a connected socket
 * (issue #16 part 2: a feeder offers its shared piece memory only to a
 * trainer of its own user).
 *
 * A unix socket's peer is asked of the kernel (SO_PEERCRED). A TCP socket
 * whose peer is on this host (127.0.0.0/8, ::1, or one of this host's own
 * addresses: the peer's address equals the socket's local one) is looked up
 * in /proc/net/tcp and /proc/net/tcp6: the entry whose local end is our
 * peer's address and port and whose remote end is ours names the owner's
 * uid. A peer on another host has no local user, and neither has a
 * socket the table does not list (closed meanwhile): both are errors.
 *
 * Thread-safe: yes (no state).
 */
#ifndef SL_PEER_H
#define SL_PEER_H

#include <sys/types.h>

#include "sl_error.h"

/* The uid of the process at the other end of the connected socket fd.
 * 0 and *uid set; SL_EINVAL when fd is not a connected unix or TCP socket
 * or its peer is not on this host, or the peer's entry is not found
 * (err says which); SL_EIO when /proc/net cannot be read. */
int sl_peer_uid(int fd, uid_t *uid, struct sl_error *err) SL_MUST_CHECK;

/* zmq_bind(sock, endpoint), and for a path ipc:// endpoint a socket file
 * only its owner can connect to: created under umask 077 (owner-only from
 * the first moment: no window), then made 0600; or, with `group` (a group
 * name; NULL: none), given to that group and made 0660. An abstract ipc://@name has no file
 * and no mode: any local user can reach it (as tcp on loopback), so it is
 * bound as given. The endpoint is checked and prepared first
 * (sl_endpoint_bind_prepare: tcp://localhost binds 127.0.0.1, [IPv6] sets
 * ZMQ_IPV6, an ipc path a live process serves is refused and a stale one
 * replaced). 0, or SL_EIO / SL_EINVAL (an unknown group, a bad endpoint, a
 * live server's path) naming the endpoint. */
int sl_bind_private(void *sock, const char *endpoint, const char *group, struct sl_error *err) SL_MUST_CHECK;

#endif
