/* sl_endpoint: the one checker of the ZeroMQ endpoints a user, a cluster
 * spec or a peer names (issue #24 item 11), and the binds and connects
 * that go with them (items 8 and 12).
 *
 * Accepted:
 *   tcp://HOST:PORT  HOST an IPv4 address, an IPv6 address in brackets
 *                    ([::1]), a host or interface name (letters, digits,
 *                    '.', '-', '_'), or '*' (every interface, binds);
 *                    PORT 1..65535 in decimal (at most 5 digits), or '*'
 *                    (a bind: any free port)
 *   ipc://PATH       a socket file (PATH fits a unix socket address)
 *   ipc://@NAME      an abstract socket (no file)
 *   inproc://NAME    within the process
 * Anything else is refused, a port outside 1..65535 above all (ZeroMQ
 * would bind tcp://127.0.0.1:99999 as port 34463).
 *
 * Thread-safe: the checks, yes (no state); the binds and connects as the
 * ZeroMQ socket they are given (one thread).
 */
#ifndef SL_ENDPOINT_H
#define SL_ENDPOINT_H

#include <stddef.h>

#include "sl_error.h"

#define SL_ENDPOINT_MAX_HOST 253 /* bytes of a HOST, brackets included */

#define SL_ENDPOINT_PORT_ZERO 1u /* sl_endpoint_hostport: port 0 allowed (the kernel picks one) */
#define SL_ENDPOINT_PORT_STAR 2u /* sl_endpoint_hostport: port '*' allowed (*port set to 0) */

/* Split HOST:PORT (len bytes at hp, not NUL-terminated necessarily) at its
 * last colon: host gets HOST as written (brackets kept, NUL-terminated,
 * hcap bytes at most), *port the port. HOST may be empty here (the caller
 * decides); a colon in it needs brackets. 0, or SL_EINVAL with err saying
 * what is wrong: "port 99999 is out of range (1-65535)", "no port",
 * "an IPv6 address needs brackets ([::1]:PORT)". */
int sl_endpoint_hostport(const char *hp, size_t len, unsigned flags, char *host, size_t hcap, unsigned *port,
                         struct sl_error *err) SL_MUST_CHECK;

/* Check an endpoint (see above). 0, or SL_EINVAL with err reading
 * "'tcp://127.0.0.1:99999': port 99999 is out of range (1-65535)";
 * callers prefix the option or key. */
int sl_endpoint_check(const char *ep, struct sl_error *err) SL_MUST_CHECK;

/* 1 when ep is tcp:// with a bracketed (IPv6) host: its socket needs
 * ZMQ_IPV6 to bind or reach it. */
int sl_endpoint_is_ipv6(const char *ep);

/* Get socket `sock` ready to bind `ep` and write into out (cap bytes) the
 * endpoint to hand to zmq_bind:
 *   - ep is checked (sl_endpoint_check);
 *   - tcp://localhost:P binds tcp://127.0.0.1:P (ZeroMQ binds interfaces
 *     and addresses, not names);
 *   - a bracketed IPv6 host sets ZMQ_IPV6 on the socket;
 *   - ipc://PATH: a file there is probed before ZeroMQ (which unlinks
 *     whatever is at PATH) may replace it: a socket a live process accepts
 *     on is refused ("a live process serves it"), a stale one (connect
 *     refused) is removed, and anything not a socket is refused. Two
 *     processes probing the same stale path at the same instant can still
 *     race; a live server is never replaced.
 * 0, or SL_EINVAL / SL_EIO with err reading "bind(ENDPOINT): ...". */
int sl_endpoint_bind_prepare(void *sock, const char *ep, char *out, size_t cap, struct sl_error *err) SL_MUST_CHECK;

/* zmq_connect(sock, ep), with ZMQ_IPV6 set first for a bracketed IPv6
 * host (without it ZeroMQ never resolves [::1] and retries silently). 0, or
 * SL_EIO with err reading "connect(ENDPOINT): ...". */
int sl_endpoint_connect(void *sock, const char *ep, struct sl_error *err) SL_MUST_CHECK;

#endif
