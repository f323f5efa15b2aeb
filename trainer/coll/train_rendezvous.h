/* train_rendezvous: the trainers of one job meet before training, over
 * ZeroMQ, and agree on who they are.
 *
 * Rank 0 (the chief, as in TensorFlow's MultiWorkerMirroredStrategy; the
 * root of NCCL's bootstrap) listens on the root endpoint; every other rank
 * connects to it and sends a HELLO (its rank, the world size, the job name
 * and a configuration string that must be the same everywhere: the model
 * shape, the optimizer, the replicas). When all size-1 HELLOs have come and
 * agree, rank 0 answers each with a WELCOME carrying an opaque blob (the
 * NCCL unique id when GPUs are used: ncclGetUniqueId on rank 0, its 128
 * bytes passed verbatim to every rank's ncclCommInitRank). When a HELLO
 * disagrees, or a rank has not shown up within the timeout, rank 0 sends a
 * REFUSE with the reason to every rank that did come, so every rank fails
 * with the same message, naming the peer.
 *
 * With CURVE (opts.curve, the job's one trainer key pair on every rank)
 * rank 0's ROUTER is a CURVE server that lets in only clients holding that
 * key pair, and every other rank a CURVE client of it: the blob (an NCCL
 * id) and everything else travels encrypted, and a rank with another key
 * fails its handshake.
 *
 * Thread-safety: a call owns its own ZeroMQ context and sockets; calls from
 * different threads are independent (tests run ranks as threads).
 */
#ifndef TRAIN_RENDEZVOUS_H
#define TRAIN_RENDEZVOUS_H

#include <signal.h>
#include <stddef.h>

#include "sl_curve.h"
#include "sl_error.h"

#define TRAIN_RENDEZVOUS_MAX_SIZE 4096
#define TRAIN_RENDEZVOUS_MAX_JOB 256     /* bytes of the job name */
#define TRAIN_RENDEZVOUS_MAX_CONFIG 1024 /* bytes of the config string */
#define TRAIN_RENDEZVOUS_MAX_BLOB 4096   /* bytes of the broadcast blob */
#define TRAIN_RENDEZVOUS_DEFAULT_TIMEOUT_MS 60000

/* Caller-owned options; every pointer is borrowed for the call only. */
struct train_rendezvous_opts {
    int rank;                          /* 0 .. size-1 */
    int size;                          /* >= 1; 1 returns at once with rank 0's blob */
    const char *root;                  /* rank 0's endpoint ("tcp://host0:2222",
                                   "ipc:///tmp/x"): others connect to it */
    const char *bind;                  /* rank 0 binds this instead of root when
                                   set (a tcp wildcard, every interface on
                                   root's port); NULL: root */
    const char *const *names;          /* [size] or NULL: how messages name each rank
                                   (its worker address) */
    const char *job;                   /* the job's name; must match */
    const char *config;                /* must match verbatim ("" when NULL) */
    volatile sig_atomic_t *stop;       /* when set (by a signal handler), the wait
                                   ends within 250 ms with SL_ECLOSED "stopped
                                   by a signal"; NULL: never */
    int timeout_ms;                    /* how long to wait for everyone (default
                                   60000); a rank other than 0 that has heard
                                   from rank 0 waits for its verdict a little
                                   longer (rank 0 may have started later) */
    const void *blob;                  /* rank 0: bytes to broadcast (may be NULL) */
    size_t blob_len;                   /* rank 0: <= TRAIN_RENDEZVOUS_MAX_BLOB */
    const struct sl_curve_keys *curve; /* NULL: plaintext. Else the job's
                                   trainer key pair, the same on every rank:
                                   rank 0 a CURVE server with it accepting
                                   only its public key (a ZAP handler on the
                                   call's context), the others CURVE clients
                                   with it and that public key as the
                                   server's */
};

/* Meet every other rank. On 0 every rank agreed and blob_out[0..*blob_len)
 * holds rank 0's blob (on rank 0 too, copied); blob_out may be NULL when
 * blob_cap is 0 and no blob is expected. Blocks up to about timeout_ms
 * (plus 10 s at most on ranks other than 0 while rank 0 is still waiting
 * for others). Errors:
 *   SL_EINVAL  bad options, or rank 0's blob larger than blob_cap;
 *   SL_ETIMEOUT "rendezvous: rank 2 (host2:2222) did not show up within
 *              60.0 s" (on rank 0, and on every rank that came, reported by
 *              rank 0), or "rendezvous: rank 0 (tcp://host0:2222) did not
 *              answer within 60.0 s";
 *   SL_EPROTO  a disagreement: "rendezvous: rank 1 (host1:2222) has config
 *              'model=mlp ...' but rank 0 has 'model=softmax ...'", or the
 *              job name, the world size, a duplicate or out-of-range rank,
 *              a malformed message; on a rank other than 0, as soon as its
 *              connection to rank 0 fails the handshake: "rendezvous: the
 *              CURVE handshake with rank 0 (tcp://host0:2222) failed: the
 *              workers do not share one trainer key (--curve-key)" (or one
 *              side without CURVE); rank 0 cannot tell who failed a
 *              handshake on its endpoint, so it waits, and its timeout
 *              message then counts the failed handshakes;
 *   SL_EIO     bind or connect failed. */
int train_rendezvous(const struct train_rendezvous_opts *o, void *blob_out, size_t blob_cap, size_t *blob_len,
                     struct sl_error *err) SL_MUST_CHECK;

/* A message as rank 0 and the other ranks read it, for tests
 * (tests/fuzz/fuzz_rendezvous.c): decode the n bytes at p; NULL with what
 * was decoded encoded again into back (room for n bytes) and its length in
 * *back_len, or the short reason the message is refused. */
const char *train_rendezvous_check(const unsigned char *p, size_t n, unsigned char *back, size_t *back_len);

#endif
