/* sl_curve: CURVE keys and the ZAP allow-list for every sluice socket
 * (issue #16; docs/security.md).
 *
 * Keys are ZeroMQ's CURVE keys (Curve25519) in Z85 text, 40 characters:
 * NAME.key holds the secret key (one line; mode 0600: refused when group-
 * or other-readable), NAME.pub the public key (one line). `keygen` writes
 * both atomically (sl_output), the secret one created 0600 from the start.
 *
 * A socket that binds (a feeder's ROUTER, a trainer's ring PULL, the
 * rendezvous' ROUTER) is a CURVE server: its secret key, ZMQ_CURVE_SERVER,
 * and ZAP enforced (ZMQ_ZAP_DOMAIN "sluice", ZMQ_ZAP_ENFORCE_DOMAIN): every
 * connecting client's public key is checked by the process's ZAP handler
 * (one per ZeroMQ context, a thread answering on inproc://zeromq.zap.01)
 * against an allow-list; a refused key is logged (rate-limited) with its
 * Z85 form and the peer's address and never gets a byte. A socket that
 * connects is a CURVE client: its own key pair and the server's public key;
 * a wrong server key fails the handshake (the caller reports it, e.g. from
 * a socket monitor's ZMQ_EVENT_HANDSHAKE_FAILED_* event).
 *
 * inproc:// is outside all this: libzmq runs no security mechanism on
 * inproc connections (they never leave the process), so an inproc peer of
 * a CURVE server is neither asked for a key nor shown to the ZAP handler.
 *
 * Thread-safety: keys and allow-lists are values; an allow-list is read by
 * its ZAP thread and replaced (sl_curve_allow_reload, e.g. on SIGHUP) under
 * its own lock.
 */
#ifndef SL_CURVE_H
#define SL_CURVE_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

#define SL_CURVE_KEY_Z85 40      /* characters of a key in Z85 */
#define SL_CURVE_MAX_ALLOW 65536 /* public keys an allow-list holds at most */
/* Bytes CURVE adds to a frame on the wire (a MESSAGE command: its name,
 * an 8-byte nonce, the flags byte and a 16-byte MAC, 33 in libzmq 4.3),
 * rounded up: ZMQ_MAXMSGSIZE bounds the encrypted frame, so a socket that
 * must take frames of N bytes under CURVE sets N + this. */
#define SL_CURVE_FRAME_OVERHEAD 64

/* A key pair (secret may be all '\0' for a public key alone). Z85 text,
 * NUL-terminated. */
struct sl_curve_keys {
    char public_z85[SL_CURVE_KEY_Z85 + 1];
    char secret_z85[SL_CURVE_KEY_Z85 + 1];
};

/* Write NAME.key (0600) and NAME.pub (0644), whatever the umask: a new key
 * pair. SL_EIO naming the file; an existing NAME.key is never overwritten
 * (SL_EINVAL). */
int sl_curve_keygen(const char *name, struct sl_error *err) SL_MUST_CHECK;

/* Read a secret key file (and derive its public key). SL_EINVAL naming the
 * file when it is group- or other-readable, not one line of 40 Z85
 * characters, or not a regular file; SL_EIO when unreadable. A symlink is
 * followed: the checks apply to the file it leads to (one descriptor is
 * opened, then checked, then read). A trailing "\n" (or "\r\n") is
 * allowed; nothing else. */
int sl_curve_load_secret(const char *path, struct sl_curve_keys *out, struct sl_error *err) SL_MUST_CHECK;

/* Read a public key file (40 Z85 characters, one line). */
int sl_curve_load_public(const char *path, char out_z85[SL_CURVE_KEY_Z85 + 1], struct sl_error *err) SL_MUST_CHECK;

/* An allow-list of client public keys. */
struct sl_curve_allow;

/* Every NAME.pub file in dir (names starting with '.' and files not ending
 * in ".pub" are ignored; at most SL_CURVE_MAX_ALLOW files, more is an
 * error; a bad file is an error naming it; so is a NAME.pub, or dir
 * itself, that the group or others may write, unless on a read-only
 * mount: SL_EINVAL), plus `extra` keys (Z85, may be
 * NULL/0). dir may be NULL (the extras alone). Duplicate keys count once.
 * An empty list refuses everyone. Thread-safe: has/count/reload may be
 * called from any thread; free only once nobody uses it. */
int sl_curve_allow_load(struct sl_curve_allow **out, const char *dir, const char *const *extra, size_t nextra,
                        struct sl_error *err) SL_MUST_CHECK;
/* Read dir again and replace the list (on SIGHUP); on an error the old
 * list stays and err says why. */
int sl_curve_allow_reload(struct sl_curve_allow *a, struct sl_error *err) SL_MUST_CHECK;
int sl_curve_allow_has(struct sl_curve_allow *a, const uint8_t key[32]);
size_t sl_curve_allow_count(struct sl_curve_allow *a);
void sl_curve_allow_free(struct sl_curve_allow *a);

/* The ZAP handler of one ZeroMQ context: a thread that checks every CURVE
 * client of a server socket in ctx against `allow` (borrowed, must outlive
 * the handler; NULL refuses everyone; NULL-mechanism peers are refused
 * too). Start it before binding. `what` names the listener in log lines
 * ("feeder", "ring"). An accepted client's ZAP user id is its public key in
 * Z85 (the "User-Id" property of its messages). A second handler in the
 * same context fails (SL_EINVAL). */
struct sl_zap;
int sl_zap_start(struct sl_zap **out, void *ctx, struct sl_curve_allow *allow, const char *what,
                 struct sl_error *err) SL_MUST_CHECK;
/* Refusals and acceptances so far. */
uint64_t sl_zap_refused(const struct sl_zap *z);
uint64_t sl_zap_accepted(const struct sl_zap *z);
/* Stop the thread (before zmq_ctx_term of its context). NULL is ignored. */
void sl_zap_stop(struct sl_zap *z);

/* Make `sock` a CURVE server with keys k (before bind). */
int sl_curve_server(void *sock, const struct sl_curve_keys *k, struct sl_error *err) SL_MUST_CHECK;
/* Make `sock` a CURVE client of the server whose public key is server_z85
 * (before connect). */
int sl_curve_client(void *sock, const struct sl_curve_keys *k, const char *server_z85,
                    struct sl_error *err) SL_MUST_CHECK;

/* 1 when a ZeroMQ endpoint can be reached only from this host: ipc://,
 * inproc://, tcp:// on 127.0.0.0/8, ::1 or "localhost"; 0 for anything
 * else (a wildcard such as tcp://0.0.0.0, a host's address, an interface name). */
int sl_endpoint_is_local(const char *endpoint);

#endif
