/* client: the receiving side of a job, for one trainer worker.
 *
 * Connects a DEALER to each of the job's F feeders, says HELLO (job name,
 * worker w of W, R replicas, credits), checks that every feeder answers
 * WELCOME with the same schema and plan, then yields the worker's pieces
 * step by step: one piece per local replica, in replica order, empty pieces
 * included, exactly the stream one feeder would send whatever F is (pieces
 * are put back in sequence order).
 *
 * Credits: each feeder may have `credits` pieces outstanding; a piece's
 * credit goes back to its feeder when the caller moves past its step.
 * Heartbeats both ways; a feeder whose connection closed before its END
 * (seen at once through a socket monitor), one silent past the timeout, an
 * ERROR from a feeder (a corrupt record, with path and offset) or a
 * malformed message ends the stream with that error. With reconnect_ms, a
 * lost feeder is
 * instead reconnected to and asked to resume at the first of its pieces
 * not received (a restarted feeder makes the same pieces: the plan is
 * deterministic); the stream the caller sees is unchanged, and the error
 * comes only if it is not back within reconnect_ms.
 *
 * CURVE (issue #16, docs/security.md): with `curve`, every socket the
 * client makes (the connection to each feeder, the rejoin and takeover
 * connections, the probes of a taken-over share's own feeder) is a CURVE
 * client holding the server key of the feeder whose address it connects
 * to (feeders[k] pairs with curve_server[k]; a takeover of share j by
 * feeder k uses k's). A handshake that fails (the feeder's ZAP handler
 * refused this trainer's key, a wrong server key, CURVE on one side only)
 * fails the client at once with an error naming the feeder and the likely
 * cause, instead of a connect timeout.
 *
 * Tensor data is borrowed straight from the received ZeroMQ frames, or
 * from a feeder's shared memory (no copy), until the next
 * client_next_step or client_release. ZeroMQ gives no alignment
 * guarantee for a frame's data: read int64 / float32 values with memcpy or
 * copy them out (the staging pipeline copies into aligned pinned memory).
 *
 * Thread-safe: no; one owner thread (the ZeroMQ sockets belong to it).
 *
 * fork(): a client belongs to the process that opened it. A child's copy
 * has the parent's sockets without ZeroMQ's I/O threads, and views of
 * shared memory the feeder goes on reusing for the parent, so the calls
 * that hand out data or talk to the feeders (next_step, keep, keepalive)
 * fail at once in another process with SL_EINVAL "client used after
 * fork(): create a new client in the child (this one belongs to process
 * PID)", before touching anything; release does nothing there, and close
 * only frees the child's copy of the client's memory (no BYE, no socket or
 * context closed: the parent's connections go on). A step handed out
 * before the fork is the parent's: the child must not read it.
 */
#ifndef CLIENT_H
#define CLIENT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "sl_curve.h"
#include "sl_error.h"
#include "sl_wire.h"
#include "client_keep.h"
#include "client_piece.h" /* struct client_piece, what next_step hands out */

struct sl_metrics;

/* The most feeders a trainer connects to (the takeover's refusals are a
 * 64-bit set). */
#define CLIENT_MAX_FEEDERS 64

/* The default wait for a feeder's answer (sluice-trainer --connect-timeout). */
#define CLIENT_CONNECT_TIMEOUT_MS 60000
/* Credits per feeder by default (with 4 steps' worth when more): deep
 * enough for the credits to go back in batches of 16 (docs/protocol.md);
 * a feeder lets out no more than its own window whatever the grant. */
#define CLIENT_DEFAULT_CREDITS 64

/* The bounds of the options, the same for sluice-trainer's flags (its
 * option table uses these), the C API and the Python package
 * (<sluice/client.h>'s SLUICE_MAX_*): client_open refuses a value
 * outside them, naming it. A time of 0 is its default; below the least,
 * a heartbeat or timeout would spin. */
#define CLIENT_MAX_REPLICAS 65536
#define CLIENT_MAX_CREDITS (1u << 20)
#define CLIENT_MIN_HEARTBEAT_MS 10
#define CLIENT_MAX_HEARTBEAT_MS 600000
#define CLIENT_MIN_TIMEOUT_MS 50
#define CLIENT_MAX_TIMEOUT_MS 3600000
#define CLIENT_MAX_WAIT_MS 86400000 /* connect_timeout, reconnect, takeover */

/* How the caller spells the options the client's messages name:
 * sluice-trainer's flags, or the C and Python API's fields (libsluice's
 * sluice_client_open passes "connect_timeout_ms", "curve_key",
 * "curve_server_keys"). Borrowed strings. */
struct client_names {
    const char *connect_timeout;  /* "--connect-timeout" */
    const char *curve_key;        /* "--curve-key" */
    const char *curve_server_key; /* "--curve-server-key" */
    int in_ms;                    /* the timeout is given in milliseconds ("connect_timeout_ms=3000"),
                                     not seconds ("--connect-timeout 3 s") */
};

/* A mid-epoch change of the cluster shape (docs/semantics.md 5.2): from
 * from_workers x from_replicas to the client's shape, at step from_step
 * (>= 1) of epoch from_epoch. All four 0: none. */
struct client_transition {
    uint32_t from_workers;  /* 1..SL_WIRE_MAX_WORKERS */
    uint32_t from_replicas; /* 1..SL_WIRE_MAX_REPLICAS */
    uint64_t from_epoch;    /* at most 2^48 */
    uint64_t from_step;     /* 1..2^48 */
};

/* 0, or SL_EINVAL naming the first field out of range ("transition:
 * from_step 0 is out of range (1 to 2^48)"); all four 0 is no transition
 * and fine. */
int client_check_transition(const struct client_transition *x, struct sl_error *err) SL_MUST_CHECK;

struct client_opts {
    const char *const *feeders; /* endpoints, feeder j at index j (checked against WELCOME) */
    size_t nfeeders;
    const char *job;
    uint32_t worker, workers, replicas;
    uint32_t credits;                    /* per feeder; 0: max(64, 4 * replicas) */
    int heartbeat_ms;                    /* 0: 1000 */
    int timeout_ms;                      /* silence that fails a feeder; 0: 10000 */
    int connect_timeout_ms;              /* wait for a feeder's first answer to HELLO, and while it
                                   answers STATUS (scanning its files) for its next one:
                                   fail after this long without a word from it; 0:
                                   CLIENT_CONNECT_TIMEOUT_MS */
    int reconnect_ms;                    /* > 0: a feeder lost mid-stream (silent past the
                                   timeout) is asked to resume where it left off,
                                   waiting this long for it to come back; 0: fail */
    int no_shm;                          /* never map a feeder's shared piece memory: pieces
                                   always come by copy */
    int takeover_ms;                     /* > 0: a lost feeder not back within this long has its
                                   share (its pieces, seq % F == j) served by a surviving
                                   feeder, from the first piece not handed out; the stream
                                   the caller sees is unchanged. 0: off */
    uint64_t resume_seq;                 /* the first piece wanted: 0, or where an earlier run
                                   stopped (client_position), a multiple of replicas
                                   (a step's first piece), at most 2^48 */
    uint64_t resume_epoch;               /* > 0: start at the first piece of this epoch (the feeders
                                   compute its seq for this shape: SL_WIRE_HELLO_EPOCH), with
                                   resume_seq 0; at most 2^48. Where a run of another shape
                                   stopped at an epoch's end (with reshape) */
    int reshape;                         /* ask the feeders to replace the job's cluster shape with
                                   this one (SL_WIRE_HELLO_RESHAPE): granted at an epoch's
                                   first piece once no trainer of the old shape is heard from */
    struct client_transition transition; /* all 0: none. Else the job's shape changed mid-epoch
                                   (docs/semantics.md 5.2): every HELLO says so
                                   (SL_WIRE_HELLO_TRANSITION) and resume_seq counts this
                                   worker's pieces from that change. Not with resume_epoch */
    uint64_t incarnation;                /* this trainer process's id in every HELLO (a restarted
                                   process replaces its dead predecessor's connections at
                                   once); 0: a random one */
    volatile sig_atomic_t *stop;         /* when set (by a signal handler), every wait ends
                                    within a heartbeat tick with SL_ECLOSED "stopped
                                    by a signal"; NULL: never */
    const struct sl_curve_keys *curve;   /* this trainer's CURVE key pair (borrowed); NULL: no CURVE */
    const char *const *curve_server;     /* with curve: [nfeeders] feeder k's public key in Z85
                                          (borrowed), the key of feeders[k] */
    const struct client_names *names;    /* in messages (borrowed); NULL: sluice-trainer's flags */
    struct sl_metrics *metrics;          /* a table that begins with the client's slots
                                    (client_metrics.h; borrowed) the client adds its
                                    pieces, rows, bytes, shared-memory pieces, input wait
                                    and rejoins to; NULL: a table of its own */
};

struct client;

/* The options against the bounds above (client_open checks them
 * too; a caller that allocates by them first asks here). 0 or SL_EINVAL
 * naming the option as o->names spells it. */
int client_check_bounds(const struct client_opts *o, struct sl_error *err) SL_MUST_CHECK;

/* Connect and handshake with every feeder. A REFUSE is an error carrying
 * the feeder's reason. A feeder still scanning its files answers STATUS:
 * it is logged ("feeder ADDR: scanning, k of n files ...") and waited for
 * as long as it keeps answering (connect_timeout_ms between answers). */
int client_open(struct client **out, const struct client_opts *o, struct sl_error *err) SL_MUST_CHECK;
void client_close(struct client *c); /* says BYE (in a forked child: frees its copy only) */

/* The schema every feeder agreed on (strings borrowed for the client's life). */
const struct sl_wire_welcome *client_welcome(const struct client *c);

/* The next step: *pieces points at R pieces (replica 0..R-1), borrowed
 * until the next call. 0, SL_END at the end of data, or an error. */
int client_next_step(struct client *c, const struct client_piece **pieces, struct sl_error *err) SL_MUST_CHECK;

/* Release the step handed out by the last next_step now (its slots and
 * shared-memory buffers recycled, its credits returned), not at the next
 * call. No step held: nothing. */
void client_release(struct client *c);

/* Take the step handed out by the last next_step out of the client: *out
 * owns its pieces and memory (a received body frame moved over, no copy;
 * a body in a feeder's shared memory copied out, since that memory goes
 * back to the feeder), and the step is released (credits
 * returned). No step held: SL_EINVAL. 0 or SL_ENOMEM (the step then stays
 * held). Free *out with client_kept_free. */
int client_keep(struct client *c, struct client_kept **out, struct sl_error *err) SL_MUST_CHECK;

/* As client_keep, but a body in a feeder's shared memory is lent, not
 * copied: the kept step points into that memory (read-only), and its
 * credit, with those of the pieces after it from the same connection,
 * waits until client_kept_free (any thread; the client sees it at its
 * next call). A caller that keeps lent steps past half the grant (or a
 * feeder's whole window) has them copied out in place, their addresses
 * unchanged, and its later steps copied (client_keep.c). The pieces lent
 * say SL_WIRE_PIECE_SHM. Not for a forked child: there the memory may
 * change once the parent's credits go back. */
int client_lend(struct client *c, struct client_kept **out, struct sl_error *err) SL_MUST_CHECK;

/* Keep the connections alive for about ms milliseconds while the caller's
 * work is elsewhere (a device or NCCL initialization, which can take many
 * seconds): heartbeats go out and what the feeders send comes in (pieces
 * wait in the reorder buffer, within the credits given), as while waiting
 * for a step, so no feeder drops this trainer for silence. Hands out no
 * step. 0, or an error (a feeder lost meanwhile). */
int client_keepalive(struct client *c, int ms, struct sl_error *err) SL_MUST_CHECK;

/* The feeders now: those given at open and those that joined since
 * (client_roster.c). */
size_t client_feeders(const struct client *c);

/* The input wait so far, by feeder: secs[j] (for j < n) the seconds
 * next_step waited for a piece that feeder j's connection then delivered
 * (with a takeover, the survivor's index: it delivered it), the piece next
 * in order, so the feeder whose piece ended each wait. They add up to the
 * client's input wait, less the wait at the stream's end. Returns the
 * feeder count. Any thread (atomic reads), for live metrics. */
size_t client_wait_by_feeder(const struct client *c, double *secs, size_t n);

/* Feeder j's CPU by stage (SL_WIRE_STAGE_*: read, decompress, decode,
 * assemble, send, map; a feeder before the map stage says 0 for map),
 * from the STATS it sends every heartbeat interval: the
 * totals so far in ns (zeros before its first), and in *busiest the stage
 * that grew most between its last two STATS (its recent bound), -1 before
 * two or when none grew. 0, or SL_EINVAL for j out of range. The client's
 * thread. */
int client_feeder_stages(const struct client *c, size_t j, uint64_t stage_ns[SL_WIRE_STAGES],
                         int *busiest) SL_MUST_CHECK;
/* "read", "decompress", "decode", "assemble", "send", "map"; "unknown"
 * otherwise. */
const char *client_stage_name(int stage);

/* Where the stream stands: the seq of the first piece not handed out yet
 * (a step's first: a multiple of replicas; step = seq / replicas counted
 * over all epochs). Pass it as resume_seq to continue exactly there. */
uint64_t client_position(const struct client *c);

/* The incarnation every HELLO carries. */
uint64_t client_incarnation(const struct client *c);

/* The metrics the client writes (the caller's or its own; borrowed for the
 * client's life). */
struct sl_metrics *client_metrics(const struct client *c);

#endif
