/* train_ring: a ring all-reduce of float32 buffers across P processes over
 * ZeroMQ, for the CPU backend (TensorFlow's RING collective, over gRPC
 * there). The result is bitwise identical on every rank and across runs of
 * the same cluster: each chunk is summed in one fixed order set by the ring.
 *
 * Thread-safety: none. A ring belongs to one thread (its ZeroMQ sockets do),
 * and every rank must make the same sequence of calls with the same n and op.
 */
#ifndef TRAIN_RING_H
#define TRAIN_RING_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "sl_curve.h"
#include "sl_error.h"
#include "train_coll.h"

#define TRAIN_RING_MAX_SIZE 4096

/* Caller-owned options; zero means the default for every number. */
struct train_ring_opts {
    int rank;                          /* 0 .. size-1 */
    int size;                          /* P >= 1 */
    const char *const *endpoints;      /* [size], borrowed during open only: rank i
                                    binds endpoints[i] ("tcp://127.0.0.1:7001",
                                    "ipc:///tmp/x-1") */
    int timeout_ms;                    /* silence from the predecessor that fails a
                                    call (default 10000) */
    volatile sig_atomic_t *stop;       /* when set (by a signal handler), open and
                                    every call end within 250 ms with
                                    SL_ECLOSED "stopped by a signal" (the
                                    ring is then broken); NULL: never */
    int connect_timeout_ms;            /* how long open waits for every rank to join
                                    (default 10000) */
    uint64_t max_message_bytes;        /* largest chunk, in bytes, a call may send or
                                    accept: bounds ZMQ_MAXMSGSIZE (default 1 GiB) */
    const char *bind;                  /* what this rank binds instead of
                                    endpoints[rank] when set (a tcp wildcard on
                                    its port, for cluster specs that list host
                                    names); NULL: endpoints[rank] */
    const struct sl_curve_keys *curve; /* NULL: plaintext. Else the job's
                                    trainer key pair, the same on every rank
                                    (borrowed during open only): the PULL is
                                    a CURVE server with it whose ZAP handler
                                    accepts that one public key, the PUSH a
                                    CURVE client with it and that public key
                                    as the server's. Only holders of the
                                    secret key join, and every message is
                                    encrypted. */
};

enum train_ring_op { TRAIN_RING_SUM, TRAIN_RING_MEAN };

struct train_ring;

/* Join the ring: bind our endpoint, connect to our successor's and wait
 * until every rank has joined (a rendezvous passed around the ring).
 * On success *out owns a ring to give to train_ring_close. Errors:
 * SL_EINVAL (bad options, or a key pair sl_curve refuses), SL_EIO (bind
 * or connect failed), SL_ETIMEOUT ("ring: rank 2 (tcp://...) did not join
 * within 10.0 s", with the count of failed CURVE handshakes on our
 * endpoint when there were any), SL_EPROTO (as soon as our connection to
 * the successor fails its handshake: "ring: the CURVE handshake with rank
 * 2 (tcp://...) failed: the workers do not share one trainer key
 * (--curve-key)", or one side without CURVE). */
int train_ring_open(struct train_ring **out, const struct train_ring_opts *o, struct sl_error *err) SL_MUST_CHECK;

/* Replace buf[0..n) on every rank by the element-wise sum over ranks (MEAN:
 * that sum divided by P). Blocks until done. Errors: SL_ETIMEOUT (no data
 * from the predecessor for timeout_ms, or a rank downstream reported it),
 * SL_ECLOSED (the predecessor went away), SL_EPROTO (a message out of
 * sequence or malformed), SL_EINVAL (n too large for max_message_bytes).
 * After an error the ring is broken: every later call fails at once, the
 * contents of buf are unspecified, and the caller should close it. */
int train_ring_all_reduce(struct train_ring *r, float *buf, size_t n, enum train_ring_op op,
                          struct sl_error *err) SL_MUST_CHECK;

/* This process's member of the "ring" collective (train_coll.h) over r:
 * all_reduce is train_ring_all_reduce(SUM); broadcast is a sum with zeros
 * from every rank but the root (the ring has no broadcast message: a -0.0
 * arrives as +0.0); abort makes every later call fail at once (a call in
 * flight ends by the ring's own failure detection). Host memory, rank and
 * size the ring's. r is borrowed and must outlive the member; like the ring,
 * it belongs to r's thread (abort: any thread). *out is owned by the caller
 * (train_coll_destroy). SL_ENOMEM. */
int train_ring_coll_open(struct train_coll **out, struct train_ring *r, struct sl_error *err) SL_MUST_CHECK;

/* Leave the ring. Waits up to timeout_ms for our last messages to leave
 * (half a second once the ring is broken). Accepts NULL. */
void train_ring_close(struct train_ring *r);

/* A message header as a rank reads it, for tests (tests/fuzz/fuzz_ring.c):
 * decode the TRAIN_RING_HDR_BYTES bytes at p; NULL with what was decoded
 * encoded again into back (TRAIN_RING_HDR_BYTES bytes), or the short reason
 * the header is refused. */
#define TRAIN_RING_HDR_BYTES 40
const char *train_ring_hdr_check(const unsigned char *p, unsigned char *back);

#endif
