/* client_int.h: what the parts of the client share (client.c,
 * and below it client_roster.c, client_rejoin.c, client_handshake.c,
 * client_shm.c, client_stats.c, client_common.c: each
 * calls only the ones after it).
 * Internal to client/: the structs behind struct client and the
 * client__* functions one part calls in another. The public API is
 * client.h.
 */
#ifndef CLIENT_INT_H
#define CLIENT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <zmq.h>

#include "sl_buf.h"
#include "sl_error.h"
#include "sl_handshake.h"
#include "sl_log.h"
#include "sl_metrics.h"
#include "sl_wire.h"
#include "client.h"
#include "client_piece.h"

struct client_reorder;

/* A feeder's shared piece memory, mapped read-only; counted by the feeder
 * (while it is the current connection's), by the slots pointing into it
 * and by the lent steps' pieces (client_keep.c). The count is atomic: a
 * lent step outliving its client lets go of it in the caller's thread. */
struct shm_map {
    const uint8_t *base;
    size_t size;
    unsigned refs; /* __atomic */
    int fd;        /* the memfd, kept open to map it again (client__remap) */
};

struct kept_block;

/* One piece of a lent step, in its feeder's queue of lent pieces (oldest
 * first): the credits of the pieces consumed from that connection since
 * (its own included) wait behind it, since a feeder takes its buffers back
 * in order, one per credit (client_keep.c). */
struct lent_piece {
    struct lent_piece *next;
    struct kept_block *b; /* the step it belongs to */
    struct shm_map *map;  /* a reference; NULL: the body is not in shared memory */
    const uint8_t *body;
    size_t bytes;
    int feeder;
    uint32_t conn;    /* the feeder's connection it came on */
    uint32_t credits; /* its own and those consumed after it, before the next lent piece */
};

struct slot {
    zmq_msg_t hdr;
    zmq_msg_t frames[2]; /* the body frame (a bad message may have one more) */
    size_t nframes;
    int feeder;
    uint32_t conn; /* the feeder's connection it came on */
    int busy;      /* holds a received message */
    struct sl_wire_piece piece;
    const uint8_t *body; /* the tensors: in frames[0], in `map`, or in `copy` */
    struct shm_map *map; /* a reference, when the body lies in shared memory */
    uint8_t *copy;       /* owned: the body copied out of shared memory */
    int lent;            /* its credit went with a lent step (not back at release) */
};

/* The stream of share j (the pieces with seq % F == j): served by feeder
 * j, or after its loss by a surviving feeder that took the share over
 * (`host`). */
struct feeder {
    const char *addr;     /* the address of `host` */
    uint32_t host;        /* the feeder process serving the share now */
    uint64_t takeover_ns; /* rejoining: when to ask a surviving feeder instead (0: not due) */
    uint64_t refused_by;  /* feeders that refused to take the share over (bit k) */
    int stopped;          /* it sent ERROR "stopped": a loss, like a close */
    int awaiting_first;   /* rejoined or taken over: its first piece since is logged */
    /* taken over: a probe of the share's own feeder (a HELLO for the share
     * with no credits), which takes the share back once it answers WELCOME */
    void *probe;
    uint64_t probe_ns; /* probe: when it was sent; else when the next goes (0: not due) */
    void *sock;
    void *mon;              /* PAIR reading sock's monitor: connection closed, handshake failed */
    uint64_t closed_ns;     /* when the monitor said so (0: not) */
    struct sl_handshake hs; /* sock's handshakes, from its monitor: the verdict (sl_handshake.h) */
    uint64_t last_seen_ns;
    uint64_t last_hb_ns;
    int welcomed;
    int ended;
    uint64_t end_pieces;
    uint32_t owed; /* credits to give back */
    /* this connection's pieces received and not yet credited back, and
     * the most of them seen at once: about what the feeder lets out (its
     * window, or the grant), which caps the credit batch */
    uint32_t unreturned, peak;
    zmq_msg_t welcome_frame; /* keeps the schema's strings alive */
    struct shm_map *map;     /* its shared memory, when this connection mapped it */
    /* its pieces in lent steps, oldest first, and the credits waiting
     * behind them (client_keep.c) */
    struct lent_piece *lent_head, *lent_tail;
    uint32_t held;
    uint64_t starved_ns; /* since when a wait found its window full and credits held (0: not) */
    /* rejoining after a loss (reconnect_ms > 0) */
    int rejoining;
    uint64_t lost_ns, deadline_ns;
    uint64_t retry_ns;                    /* when sock is NULL: open a new connection then */
    uint64_t resume;                      /* the seq asked for */
    uint32_t conn;                        /* connections made after the first */
    int stalled;                          /* lost again before a piece came: the wait goes on */
    char lost[128];                       /* why it was taken for gone */
    char refused[SL_WIRE_MAX_REASON + 1]; /* its last REFUSE meanwhile */
    /* a feeder still starting (STATUS): HELLO again at rehello_ns (0: not
     * due); its answer is awaited until answer_by_ns, connect_timeout_ms
     * after its last word */
    uint64_t rehello_ns, answer_by_ns;
    int scanning;                 /* it has said STATUS */
    struct sl_wire_status status; /* its last */
    uint64_t status_log_ns;       /* when it was last logged */
    /* its STATS (SL_WIRE_HELLO_STATS): the last two, [0] the newer */
    struct sl_wire_stats stats[2];
    unsigned nstats; /* received, up to 2 */
    /* a reshape (client_roster.c): the share's new connection under a
     * new modulus awaits its WELCOME; joined_ns: a feeder that joined,
     * when the ROSTER naming it came (0 once its first piece came) */
    int reshaping;
    uint64_t joined_ns;
};

struct client {
    struct client_opts o;
    int epoch_known; /* resume_epoch's first piece is o.resume_seq (a WELCOME gave the steps) */
    pid_t pid;       /* the process that opened it (fork: see client.h) */
    void *ctx;
    struct feeder *f;
    struct sl_wire_welcome welcome;
    char names[SL_WIRE_MAX_TENSORS][SL_WIRE_MAX_NAME + 1];
    struct slot *slots;
    struct slot **free_slots;
    size_t nslots, nfree;
    struct client_reorder *reorder;
    struct slot **step_slots;    /* [R] slots of the step handed out, or being gathered */
    size_t ngot;                 /* slots gathered so far for the next step */
    struct client_piece *pieces; /* [R] */
    int have_step;
    struct sl_buf buf;
    struct sl_wire_msg msg;
    int said_bye;         /* BYE sent (at the end of the stream, or at close) */
    struct sl_metrics *m; /* o.metrics, or own_m */
    struct sl_metrics *own_m;
    uint64_t total;       /* pieces in the stream, once every feeder said END */
    unsigned monitors;    /* monitors made: each gets its own inproc name */
    uint64_t listened_ns; /* when the last pump stopped listening (0: none yet) */
    unsigned lend_rounds; /* times lent steps were copied out for being kept */
    int lend_off;         /* lent steps were kept again and again: steps are copied from then on */
    uint64_t detached;    /* lent pieces copied out of shared memory since open */
    /* the input wait by the feeder whose piece ended it (the piece next in
     * order when the step waited): ns, atomic (read by any thread) */
    uint64_t wait_by_feeder[CLIENT_MAX_FEEDERS];
    /* feeders that joined the running job (client_roster.c): the shares
     * number o.nfeeders, nfeeders0 of them given at open. f holds
     * CLIENT_MAX_FEEDERS entries from the start, o.feeders and
     * o.curve_server point into addr and key (the caller's strings for the
     * first ones, joined_addr and joined_key for the others). */
    size_t nfeeders0;
    /* a feeder of the first ones counted fewer feeders than this trainer
     * was given (the trainer lists feeders that joined): every HELLO says
     * its modulus (SL_WIRE_HELLO_FEEDERS) from then on */
    int say_feeders;
    int takeover_ms0; /* takeover_ms as asked (off while there is one feeder) */
    const char *addr[CLIENT_MAX_FEEDERS], *key[CLIENT_MAX_FEEDERS];
    char joined_addr[CLIENT_MAX_FEEDERS][SL_WIRE_MAX_ENDPOINT + 1];
    char joined_key[CLIENT_MAX_FEEDERS][SL_WIRE_KEY_Z85 + 1];
    uint32_t pending;                       /* a ROSTER's feeders not yet reshaped to (0: none) */
    uint64_t roster_ns;                     /* when that ROSTER came */
    size_t nslots0;                         /* c->slots: open's; nslots counts them all */
    struct slot *grown[CLIENT_MAX_FEEDERS]; /* the slots added by each reshape */
    size_t ngrown[CLIENT_MAX_FEEDERS], ngrowths;
    struct sl_log_limit roster_log; /* bad ROSTERs */
};

/* A closed connection counts as a lost feeder once this long has passed
 * without its END: messages sent before the close may still be on their
 * way through ZeroMQ when the monitor's event comes. */
#define CLOSED_GRACE_NS 200000000u

/* client_common.c */
/* An error naming feeder j's address. */
int client__feeder_error(struct client *c, int j, struct sl_error *err, int code, const char *fmt, ...) SL_PRINTF(5, 6);
int client__send_buf(void *sock, const struct sl_buf *b);
/* SL_ECLOSED when the caller's stop flag is set ("stopped by a signal
 * while <what>"), else 0. */
int client__stopped(const struct client *c, const char *what, struct sl_error *err);

/* After fork() the child's copy shares the parent's sockets (without
 * ZeroMQ's threads) and its view of the feeders' shared memory: no call
 * may hand out data from it or send on it. */
int client__forked(const struct client *c);
/* SL_EINVAL: "client used after fork(): ..." */
int client__refuse_forked(const struct client *c, struct sl_error *err);

/* client_stats.c */
/* A STATS from feeder j: kept beside the one before it. */
void client__note_stats(struct client *c, size_t j, const struct sl_wire_stats *st);

/* client_keep.c: steps kept past the next, copied or lent */
/* The step handed out, taken into *out: copied (or moved) where lend is
 * 0, its shared-memory bodies lent where 1; the caller then releases the
 * step. 0, SL_EINVAL (no step), SL_ENOMEM (nothing changed). */
int client__take_step(struct client *c, struct client_kept **out, int lend, struct sl_error *err);
/* Lent pieces whose steps were freed or copied out: their credits go back
 * (to `owed`) in order, and the steps the client is done with are let go. */
void client__settle(struct client *c);
/* Copy the lent steps holding pieces of feeder j (every feeder: j < 0)
 * out of shared memory, in place (their addresses stay), and settle. With
 * `remap`, a feeder whose current mapping lost pages to the copies maps
 * its memory again for the pieces still to come. */
void client__detach_lent(struct client *c, int j, int remap);
/* Before a wait: a feeder whose credits are held by lent steps the caller
 * keeps (half the grant, or its whole window for a while) has its lent
 * steps copied out, and lending stops. */
void client__unblock_lent(struct client *c);
/* At close: every lent step copied out and left to its caller alone. */
void client__drop_lent(struct client *c);

/* client_shm.c: a feeder's shared piece memory, and the slots
 * holding pieces (their bodies may lie in it) */
void client__map_ref(struct shm_map *m);
void client__map_unref(struct shm_map *m);
/* Map feeder f's memory again as f->map (the old mapping lives on in what
 * still uses it). 0, or -1: f->map stays as it was. */
int client__remap(struct feeder *f);
int client__attach_shm(struct client *c, size_t j, const struct sl_wire_welcome *w, struct sl_error *err);
void client__detach_shm(struct feeder *f);
/* A slot back to the free list: its messages closed, its mapping let go;
 * a credit owed to its feeder (behind its lent pieces, if any), unless it
 * came on an older connection or its credit went with a lent step. */
void client__release_slot(struct client *c, struct slot *s);
/* The same without a credit: a piece refused as it arrived. */
void client__drop_slot(struct client *c, struct slot *s);

/* client_handshake.c: the socket, its monitor, HELLO and its answers */
int client__open_socket(struct client *c, size_t j, struct sl_error *err);
void client__close_socket(struct feeder *f);
/* A HELLO's trailing fields, on every HELLO the client makes (the first,
 * re-HELLOs, a reshape's, a takeover's, a probe's): the modulus after a
 * join (SL_WIRE_HELLO_FEEDERS and the client's feeders; before, neither:
 * the feeder's own --feeders), and the transition when the client has one
 * (SL_WIRE_HELLO_TRANSITION: every resume_seq it sends counts from it). */
void client__set_trailing(const struct client *c, struct sl_wire_hello *h);
int client__send_hello(struct client *c, size_t j, uint32_t credits, uint64_t resume, struct sl_error *err);
int client__check_welcome(struct client *c, size_t j, const struct sl_wire_welcome *w, int first, struct sl_error *err);
void client__note_status(struct client *c, size_t j, const struct sl_wire_status *st);
void client__read_monitor(struct feeder *f);
int client__handshake_failed(struct client *c, size_t j, struct sl_error *err);
int client__handshake(struct client *c, struct sl_error *err);

/* client_roster.c: feeders that joined the running job */
/* A ROSTER from feeder j: checked, and when it names more feeders than
 * the client's, noted for client__reshape (a bad one is logged, rate
 * limited, and ignored: the stream goes on). */
void client__note_roster(struct client *c, size_t j, const struct sl_wire_roster *r);
/* A noted ROSTER, if any and if the caller holds no step: every share
 * moves to the new modulus at the first piece not received in order.
 * 0, or an error that ends the stream (no memory, a socket). */
int client__reshape(struct client *c, struct sl_error *err);
/* A bad ROSTER from feeder j (why: what is wrong), logged rate limited. */
void client__bad_roster(struct client *c, size_t j, const char *why);

/* client_rejoin.c: lost feeders, rejoin, takeover, probes */
/* The first seq at or after `from` in share j (seq % F == j, F the
 * modulus in force). */
uint64_t client__first_of_share(const struct client *c, uint64_t from, size_t j);
/* The pieces of the step being gathered from share j (every share: j < 0)
 * copied out of shared memory: that feeder reuses their buffers once it
 * has a new HELLO. 0 or SL_ENOMEM. */
int client__unshare_gathered(struct client *c, int j, struct sl_error *err);
int client__rejoin_connect(struct client *c, size_t j, struct sl_error *err);
void client__close_probe(struct feeder *f, uint64_t next_ns);
int client__rejoin_receive(struct client *c, size_t j, struct sl_error *err);
int client__find_lost(struct client *c, uint64_t now, struct sl_error *err);
int client__probes(struct client *c, uint64_t now, struct sl_error *err);

#endif
