/* train_elastic: the coordinator of an elastic job (sluice-trainer
 * --elastic, docs/trainer.md "Elastic workers"): workers join and leave a
 * running ring at a step boundary without a restart.
 *
 * Worker 0 holds the coordinator endpoint (a ROUTER); every other member
 * and every process asking to join connects a DEALER to it. This file is
 * the part without sockets: the messages (encoded, and decoded with every
 * length checked against the frame and the limits below before anything
 * is read) and worker 0's book of the world (who is in it, who asked to
 * join and who to leave, and the next world at a boundary), so that both
 * can be tested without processes. The trainer's glue moves the
 * messages: train_main_elastic_coord.c (the coordinator endpoint, a
 * joiner's wait), used by train_main_elastic.c (ring workers) and
 * train_main_ps_elastic.c (parameter-server workers).
 *
 * Message: one frame, integers little-endian:
 *   0  magic   "SLE1"
 *   4  version u16 (2)
 *   6  type    u16 (enum train_elastic_type)
 *   8  gen     u32 the world's generation (0: the one the job started with)
 *   12 a       u32 JOIN: replicas; LEAVE, SYNC, BROKEN: the sender's rank;
 *                  WORLD: the receiver's rank (TRAIN_ELASTIC_RELEASED: let go)
 *   16 b       u32 WORLD: the new world's size; else 0
 *   20 c       u64 ACK: the epoch worker 0 was in (a BROKEN's: that
 *                  report's); WORLD: the epoch the
 *                  new world starts in; BROKEN: the epoch of the step
 *                  whose all-reduce failed
 *   28 d       u64 WORLD: the global step (steps trained so far);
 *                  BROKEN: the sender's (the steps it trained)
 *   36 e       u64 WORLD: the model's parameter count (the state broadcast
 *                  over the new ring is 2 e floats: weights, then velocity)
 *   44 n1, n2, n3 u32: the three strings' bytes
 *   56 f       u64 WORLD: the step of epoch c the new world starts at (0:
 *                  the epoch's start); BROKEN: the step that failed
 *   64 h       u64 WORLD: with f > 0 the old world's steps per epoch; with
 *                  j > 0 those of the kept change's old world
 *   72 g       u32 WORLD: with f > 0 the old world's size (the input goes
 *                  on with the change (g, replicas, c, f), from seq 0);
 *                  with j > 0 the kept change's
 *   76 i       u64 WORLD, f == 0: the epoch of the input's change to keep
 *   84 j       u64 WORLD, f == 0: its step (0: none; the input then goes
 *                  on by epoch resume at c, with the new shape)
 *   92 k       u64 WORLD, j > 0: the seq epoch c starts at in its
 *                  numbering (a world of the same size keeps the stream's
 *                  change, the feeders know it: docs/semantics.md 5.2)
 *  100 the strings:
 *        JOIN: the job, the model config, the joiner's ring endpoint;
 *        ACK, REFUSE: a text (REFUSE's is the reason, never empty);
 *        WORLD: the new world's ring endpoints, comma-separated, rank order.
 *
 * Thread-safety: none; a coordinator belongs to worker 0's main thread.
 */
#ifndef TRAIN_ELASTIC_H
#define TRAIN_ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

#define TRAIN_ELASTIC_HDR 100
#define TRAIN_ELASTIC_MAX_JOB 256
#define TRAIN_ELASTIC_MAX_CONFIG 1024
#define TRAIN_ELASTIC_MAX_ENDPOINT 256                                        /* a ring endpoint's bytes */
#define TRAIN_ELASTIC_MAX_WORKERS 4096                                        /* the ring's bound */
#define TRAIN_ELASTIC_MAX_WORLD (64u * 1024)                                  /* WORLD's endpoint list */
#define TRAIN_ELASTIC_MAX_FRAME (TRAIN_ELASTIC_HDR + TRAIN_ELASTIC_MAX_WORLD) /* the largest message */
#define TRAIN_ELASTIC_MAX_REPLICAS 1024
#define TRAIN_ELASTIC_RELEASED UINT32_MAX

enum train_elastic_type {
    TRAIN_ELASTIC_JOIN = 1,   /* a new process asks to join (to worker 0) */
    TRAIN_ELASTIC_LEAVE = 2,  /* a member asks to be let go (to worker 0) */
    TRAIN_ELASTIC_ACK = 3,    /* a join is admitted at the next change (to the joiner; repeated while it waits),
                                 or a BROKEN heard (to its sender: worker 0 is alive) */
    TRAIN_ELASTIC_REFUSE = 4, /* a join refused, with the reason (to the joiner), or a BROKEN, with why the
                                 survivors cannot go on (to each of them) */
    TRAIN_ELASTIC_SYNC = 5,   /* a member at the boundary asks for the new world (to worker 0) */
    TRAIN_ELASTIC_WORLD = 6,  /* the new world (to each member, joiner and leaver) */
    TRAIN_ELASTIC_BROKEN = 7, /* a member's ring broke: it asks for a world of the survivors (to worker 0) */
};

/* A message; the strings point into the decoded frame (not terminated). */
struct train_elastic_msg {
    uint32_t type, gen, a, b;
    uint64_t c, d, e, f, h, i, j, k;
    uint32_t g;
    const char *s[3];
    uint32_t n[3];
};

/* Encode m into buf (cap bytes): its length, or 0 when it does not fit or
 * breaks the limits decode enforces. */
size_t train_elastic_encode(unsigned char *buf, size_t cap, const struct train_elastic_msg *m);

/* Decode the n bytes at p into *m: NULL, or the short reason the frame is
 * refused ("short header", "bad magic", "unsupported version", "unknown
 * message type", "string lengths differ from the frame", "JOIN: ...",
 * "WORLD: ..."). Every length is checked against the frame and the limits
 * before a string is looked at. */
const char *train_elastic_decode(const unsigned char *p, size_t n, struct train_elastic_msg *m);

/* Worker 0's book. Endpoints are copied. */
struct train_elastic_joiner {
    char ep[TRAIN_ELASTIC_MAX_ENDPOINT + 1];
    unsigned char id[256]; /* its DEALER's routing id on the coordinator's ROUTER */
    size_t idlen;
};

struct train_elastic_coord {
    const char *job, *config;                    /* borrowed: what a joiner must match */
    const char *endpoint;                        /* borrowed: the coordinator's, for messages */
    uint32_t replicas, max_workers;              /* every worker's --replicas; the most workers allowed */
    uint64_t epochs;                             /* the job's epochs (0: unbounded) */
    uint32_t gen, size;                          /* the current world */
    char (*eps)[TRAIN_ELASTIC_MAX_ENDPOINT + 1]; /* [size]: the members' ring endpoints, rank order */
    unsigned char *leaving;                      /* [size]: asked to leave */
    unsigned char *broken;                       /* [size]: reported its ring broken (BROKEN) */
    uint64_t *broken_at;                         /* [size]: a reporter's global step (steps it trained) */
    struct train_elastic_joiner *joins;          /* admitted, waiting for the boundary, in order of arrival */
    uint32_t njoins;
};

/* A book for a world of `size` members (eps[size], rank order). 0, or
 * SL_EINVAL (a bad size or endpoint), SL_ENOMEM. */
int train_elastic_coord_init(struct train_elastic_coord *c, const char *const *eps, uint32_t size,
                             struct sl_error *err) SL_MUST_CHECK;
void train_elastic_coord_free(struct train_elastic_coord *c);

/* A JOIN (decoded) from routing id `id` while the job is at epoch `epoch`
 * (the newest step's): 0 when admitted (queued for the next boundary), or
 * SL_EPROTO with the reason in err, which the joiner is sent: another job
 * or model config, another replica count, the job in its last epoch, more
 * than max_workers, an endpoint already a member's or a waiting joiner's
 * (a repeated JOIN). */
int train_elastic_coord_join(struct train_elastic_coord *c, const struct train_elastic_msg *m, const void *id,
                             size_t idlen, uint64_t epoch, struct sl_error *err) SL_MUST_CHECK;

/* A LEAVE: 0 (recorded; a repeated one is the same request), or SL_EPROTO
 * for rank 0 (the coordinator cannot leave), a rank outside the world or
 * an old generation. */
int train_elastic_coord_leave(struct train_elastic_coord *c, const struct train_elastic_msg *m,
                              struct sl_error *err) SL_MUST_CHECK;

/* Forget waiting joiner k (0 .. njoins-1: one that went away); the
 * others keep their order. */
void train_elastic_coord_drop_join(struct train_elastic_coord *c, uint32_t k);

/* Whether a change waits for the boundary: joins or leaves. */
int train_elastic_coord_pending(const struct train_elastic_coord *c);
/* The size of the next world (the members that stay and the joiners). */
uint32_t train_elastic_coord_next_size(const struct train_elastic_coord *c);

/* Why a waiting change may not come before step `step` of epoch `epoch`
 * (the next to receive; the stream has T steps per epoch, `epochs` in
 * all, 0: unbounded): TRAIN_ELASTIC_NOW (0) when it may. Mid-epoch (step
 * > 0) it may not when the next world keeps the size (SAME_SIZE: the
 * feeders change the shape mid-epoch only to another), when the stream
 * already changed mid-epoch in this epoch (SECOND: `changed` 1; the
 * feeders take one change per epoch), or when the job's steps left from
 * `step` (*left, saturated at UINT64_MAX; UINT64_MAX when unbounded)
 * times `replicas` fit a worker's `window` of pieces (WINDOW: the feeders
 * may have sent the old workers their END). At an epoch's start it may. */
enum train_elastic_defer {
    TRAIN_ELASTIC_NOW = 0,
    TRAIN_ELASTIC_SAME_SIZE = 1,
    TRAIN_ELASTIC_SECOND = 2,
    TRAIN_ELASTIC_WINDOW = 3,
};
int train_elastic_defer(const struct train_elastic_coord *c, uint64_t epoch, uint64_t step, uint64_t T, uint64_t epochs,
                        int changed, uint64_t window, uint64_t *left);

/* The next world: the members that stay in rank order, then the joiners in
 * order of arrival. new_rank[old rank] (size entries): the member's new
 * rank or TRAIN_ELASTIC_RELEASED; *new_size; the endpoints comma-joined
 * into list (cap bytes). 0, or SL_EINVAL (list too small). Does not change
 * the book: train_elastic_coord_commit does. */
int train_elastic_coord_next(const struct train_elastic_coord *c, uint32_t *new_rank, uint32_t *new_size, char *list,
                             size_t cap, struct sl_error *err) SL_MUST_CHECK;
/* The next world becomes the current one (gen + 1); joins and leaves are
 * forgotten. 0, or SL_ENOMEM (the book unchanged). */
int train_elastic_coord_commit(struct train_elastic_coord *c, struct sl_error *err) SL_MUST_CHECK;

/* A member dies (docs/trainer.md "Elastic workers", "A member that
 * dies"): the survivors' all-reduce fails, each closes its ring and
 * sends worker 0 a BROKEN; worker 0 forms the world of itself and the
 * members that reported. A BROKEN (decoded): 0 (recorded; a repeated one
 * with the same step is the same report), or SL_EPROTO for an old
 * generation, rank 0 (the coordinator's own), a rank outside the world,
 * or a second report of another step; the book unchanged then. */
int train_elastic_coord_broken(struct train_elastic_coord *c, const struct train_elastic_msg *m,
                               struct sl_error *err) SL_MUST_CHECK;
/* The survivors: worker 0 and the members that reported. */
uint32_t train_elastic_coord_survivors(const struct train_elastic_coord *c);
/* Why the survivors may not go on from step `step` of epoch `epoch`
 * (the step worker 0's all-reduce failed in: the first it did not
 * train), as train_elastic_defer with the survivors' world as the next
 * one: NOW (0) when they may; mid-epoch SAME_SIZE (every member reported:
 * none died), SECOND (the stream changed mid-epoch in this epoch
 * already), WINDOW (the job's steps left fit a worker's window). A broken
 * ring cannot wait for a better moment: any of these ends the job. */
int train_elastic_survive_defer(const struct train_elastic_coord *c, uint64_t epoch, uint64_t step, uint64_t T,
                                uint64_t epochs, int changed, uint64_t window, uint64_t *left);
/* The survivors' world (worker 0 and the reporters in rank order; the
 * joiners wait for the next change): as train_elastic_coord_next, a
 * member that did not report RELEASED in new_rank. */
int train_elastic_coord_survive_next(const struct train_elastic_coord *c, uint32_t *new_rank, uint32_t *new_size,
                                     char *list, size_t cap, struct sl_error *err) SL_MUST_CHECK;
/* The survivors' world becomes the current one (gen + 1): the joiners
 * stay queued, a survivor's leave request stays, the reports are
 * forgotten. 0, or SL_ENOMEM (the book unchanged). */
int train_elastic_coord_survive_commit(struct train_elastic_coord *c, struct sl_error *err) SL_MUST_CHECK;

#endif
