/* sl_wire: the feeder <-> trainer wire protocol (docs/protocol.md).
 *
 * Every message is a ZeroMQ multipart message: one header frame, then (PIECE
 * with tensors only) one body frame holding every tensor at the offset its
 * descriptor gives. The header frame is little-endian and is written and
 * read field by field, never by copying a struct:
 *
 *   magic "SLC1" | version u16 (= 4) | type u16 | type-specific fields
 *
 * Encoding fills a caller-owned sl_buf with one header frame. Decoding reads
 * a header frame into a caller-owned struct sl_wire_msg; strings in it are
 * BORROWED from the frame (pointer + length, not NUL-terminated) and stay
 * valid while the frame does. Every length and count is checked against the
 * limits below before it is used; anything malformed is SL_EPROTO with a
 * message saying what and where.
 *
 * Thread-safe: yes (no state; each call works on its own arguments).
 */
#ifndef SL_WIRE_H
#define SL_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "sl_buf.h"
#include "sl_error.h"

/* 4: HELLO carries the trainer process's incarnation (a restarted trainer
 * replaces its dead predecessor's connection at once) and the share it
 * asks for (the pieces with seq % F == share: its own feeder's, or a lost
 * feeder's, taken over by a survivor); later, without a change of layout,
 * the dtypes float16 and bfloat16 (a feeder whose schema has one refuses a
 * HELLO without SL_WIRE_HELLO_HALF, in words) and the map stage in STATS
 * (a trailing field, sent only to a HELLO with SL_WIRE_HELLO_STATS_MAP);
 * 3: a feeder on the trainer's host may hand pieces over in shared memory
 * (HELLO flag, WELCOME's shm_* fields, CREDIT flags, PIECE's shm_offset and
 * shm_bytes); later, without a change of layout, STATUS, sent only to a
 * trainer whose HELLO sets SL_WIRE_HELLO_STATUS (so a peer that predates
 * it never sees one); 2: a PIECE's tensors travel in one body frame, each at the
 * offset its descriptor gives (1: one frame per tensor, which ZeroMQ moves
 * far slower when two or more are large) */
#define SL_WIRE_VERSION 4

/* Limits; a decoder rejects anything above them, an encoder refuses to
 * write it. */
#define SL_WIRE_MAX_MSG (1u << 30)                    /* bytes of any frame: the ZMQ_MAXMSGSIZE to set */
#define SL_WIRE_MAX_HEADER (64u * 1024)               /* bytes of a header frame */
#define SL_WIRE_MAX_JOB 256                           /* HELLO job name bytes */
#define SL_WIRE_MAX_TENSORS 64                        /* tensors per schema and per piece */
#define SL_WIRE_MAX_NAME 160                          /* WELCOME tensor name bytes */
#define SL_WIRE_MAX_RANK 8                            /* WELCOME per-element rank */
#define SL_WIRE_MAX_PIECE_RANK (SL_WIRE_MAX_RANK + 1) /* PIECE rank: batch dim + element dims */
#define SL_WIRE_MAX_REASON 1024                       /* REFUSE reason bytes */
#define SL_WIRE_MAX_ERROR 4096                        /* ERROR message bytes */
#define SL_WIRE_MAX_WORKERS 65536                     /* HELLO workers */
#define SL_WIRE_MAX_REPLICAS 1024                     /* HELLO replicas (per worker) */
#define SL_WIRE_MAX_FEEDERS 4096                      /* WELCOME feeders */
#define SL_WIRE_MAX_CREDITS (1u << 20)                /* HELLO initial credits, one CREDIT grant */
#define SL_WIRE_MAX_ROWS (1u << 24)                   /* PIECE rows, WELCOME batch */
#define SL_WIRE_MAX_ELEMS ((uint64_t)1 << 30)         /* product of a shape's non-zero dims */
#define SL_WIRE_SHM_HEADER 4096u                      /* bytes before a shared piece memory's first buffer */
#define SL_WIRE_MAX_SHM ((uint64_t)1 << 40)           /* WELCOME shm_size */
#define SL_WIRE_MAX_FILES ((uint64_t)1 << 32)         /* STATUS files */
#define SL_WIRE_MAX_COUNT ((uint64_t)1 << 60)         /* STATUS records and bytes */
#define SL_WIRE_MAX_RETRY_MS 600000u                  /* STATUS retry_ms (a feeder's longest heartbeat) */
#define SL_WIRE_MAX_POSITION (1ull << 48)             /* HELLO from_epoch, from_step */
#define SL_WIRE_MAX_ROSTER 64                         /* ROSTER and JOIN feeders; ROSTER entries */
#define SL_WIRE_MAX_ENDPOINT 256                      /* ROSTER and JOIN endpoint bytes */
#define SL_WIRE_KEY_Z85 40                            /* a CURVE public key in Z85 (ROSTER, JOIN) */

enum sl_wire_type {
    SL_WIRE_HELLO = 1,     /* trainer -> feeder */
    SL_WIRE_WELCOME = 2,   /* feeder -> trainer */
    SL_WIRE_REFUSE = 3,    /* feeder -> trainer */
    SL_WIRE_CREDIT = 4,    /* trainer -> feeder */
    SL_WIRE_PIECE = 5,     /* feeder -> trainer, + one body frame when it has tensors */
    SL_WIRE_END = 6,       /* feeder -> trainer */
    SL_WIRE_ERROR = 7,     /* feeder -> trainer */
    SL_WIRE_HEARTBEAT = 8, /* both ways */
    SL_WIRE_BYE = 9,       /* trainer -> feeder */
    SL_WIRE_STATUS = 10,   /* feeder -> trainer: not ready yet (to a HELLO with SL_WIRE_HELLO_STATUS) */
    SL_WIRE_STATS = 11,    /* feeder -> trainer: its CPU by stage, every heartbeat interval (to a HELLO with
                            * SL_WIRE_HELLO_STATS) */
    SL_WIRE_ROSTER = 12,   /* feeder -> trainer (to a HELLO with SL_WIRE_HELLO_ROSTER), and feeder -> joining
                            * feeder (the answer to JOIN): the job's feeders, joined ones included */
    SL_WIRE_JOIN = 13,     /* joining feeder -> feeder: "serve my share too" (answered ROSTER or REFUSE) */
};

enum sl_wire_dtype {
    SL_WIRE_INT64 = 0,
    SL_WIRE_FLOAT32 = 1,
    SL_WIRE_BYTES = 2, /* frame: the values' bytes concatenated; boundaries in a companion tensor */
    SL_WIRE_UINT8 = 3,
    SL_WIRE_FLOAT16 = 4,  /* IEEE 754 binary16; only to a trainer whose HELLO sets SL_WIRE_HELLO_HALF */
    SL_WIRE_BFLOAT16 = 5, /* the top 16 bits of a float32 (rounded); likewise */
};
#define SL_WIRE_DTYPE_MAX SL_WIRE_BFLOAT16 /* a dtype above it is refused */

/* PIECE flags (unknown bits are ignored by receivers). */
#define SL_WIRE_PIECE_LAST_STEP 0x1u /* the piece belongs to the last step of its epoch */
#define SL_WIRE_PIECE_SHM \
    0x2u /* no body frame: the body is shm_bytes at shm_offset of the feeder's
                                      * shared piece memory (WELCOME), until its credit goes back */

/* HELLO flags */
#define SL_WIRE_HELLO_SHM 0x1u /* the trainer can map a feeder's shared piece memory */
#define SL_WIRE_HELLO_STATUS \
    0x2u /* the trainer understands STATUS: a feeder still starting may answer
                                   * with one, and then expects this HELLO again after retry_ms */

#define SL_WIRE_HELLO_STATS \
    0x4u /* the trainer understands STATS: the feeder sends its CPU by stage every
                                   * heartbeat interval while serving it */
#define SL_WIRE_HELLO_HALF \
    0x8u /* the trainer knows the dtypes float16 and bfloat16: a feeder whose
          * schema has one refuses a HELLO without it (an older trainer) */
#define SL_WIRE_HELLO_STATS_MAP \
    0x10u /* the trainer reads STATS with the map stage (map_ns, a trailing
           * field); without it a feeder sends the 56-byte STATS, its map CPU
           * counted in decode_ns */
#define SL_WIRE_HELLO_ROSTER \
    0x20u /* the trainer reads ROSTER: a feeder that knows of feeders that
           * joined the job tells it so (no change of layout: a feeder that
           * predates joins ignores the bit) */
#define SL_WIRE_HELLO_FEEDERS \
    0x40u /* the HELLO ends with `feeders` (a trailing u32): the modulus of
           * `share` on this connection, which exceeds the first feeders'
           * --feeders once feeders joined. Without it the modulus is the
           * feeder's own --feeders. A trainer sets it only after a ROSTER
           * (every feeder of a job that has had a join reads it; one that
           * predates joins would refuse the trailing bytes). */
#define SL_WIRE_HELLO_EPOCH \
    0x80u /* resume at the first piece of epoch `resume_epoch` (resume_seq
           * must be 0): the feeder computes the seq, resume_epoch x steps x
           * replicas for this HELLO's shape (no change of layout: a feeder
           * that predates it resumes at resume_seq 0, which the client
           * refuses as a piece below its start) */
#define SL_WIRE_HELLO_RESHAPE \
    0x100u /* this trainer replaces the job's cluster shape: a feeder whose
            * shape is not fixed (--workers) grants it at an epoch's first
            * piece once no trainer of the old shape is heard from
            * (docs/protocol.md, "Shape and refusals") */
#define SL_WIRE_HELLO_TRANSITION \
    0x200u /* the HELLO ends with the transition (after `feeders` when that
            * is there): the job's shape changed mid-epoch, at step
            * from_step of epoch from_epoch, from from_workers x
            * from_replicas to this HELLO's shape (docs/semantics.md 5.2);
            * resume_seq counts pieces of the worker's stream from that
            * change (0: its first piece), not from the job's start */

/* STATS: the feeder's stages (the first five in the wire's order; map
 * came later, as a trailing field after credit_wait_ns) */
enum {
    SL_WIRE_STAGE_READ,
    SL_WIRE_STAGE_DECOMPRESS,
    SL_WIRE_STAGE_DECODE,
    SL_WIRE_STAGE_ASSEMBLE,
    SL_WIRE_STAGE_SEND,
    SL_WIRE_STAGE_MAP,
    SL_WIRE_STAGES
};

/* STATUS states */
#define SL_WIRE_STATUS_SCANNING 1u /* the feeder is scanning its files (files_done of files) */

/* CREDIT flags */
#define SL_WIRE_CREDIT_SHM \
    0x1u /* the trainer has mapped the WELCOME's shared memory: pieces may
                                 * come that way from now on */

struct sl_wire_hello {
    uint32_t worker;       /* < workers */
    uint32_t workers;      /* 1..SL_WIRE_MAX_WORKERS */
    uint32_t replicas;     /* 1..SL_WIRE_MAX_REPLICAS */
    uint32_t credits;      /* initial credits, <= SL_WIRE_MAX_CREDITS */
    uint32_t flags;        /* SL_WIRE_HELLO_*; unknown bits are ignored */
    uint32_t heartbeat_ms; /* the trainer sends a HEARTBEAT at least this often; 0: never */
    uint64_t resume_epoch; /* start position: (0, 0) from the beginning */
    uint64_t resume_seq;   /* first sequence number wanted */
    uint64_t incarnation;  /* random, one per trainer process: its connections are all its own */
    uint32_t share;        /* the pieces wanted: seq % feeders == share (< SL_WIRE_MAX_FEEDERS); the
                            * feeder's own index, or a lost feeder's (a takeover) */
    const char *job;       /* borrowed; job_len bytes, 1..SL_WIRE_MAX_JOB */
    size_t job_len;
    /* with SL_WIRE_HELLO_FEEDERS (a trailing field): the modulus of share,
     * 1..SL_WIRE_MAX_ROSTER and > share; without the flag 0 (the decoder
     * sets it so, the encoder refuses anything else) */
    uint32_t feeders;
    /* with SL_WIRE_HELLO_TRANSITION (trailing, after feeders): the shape
     * before the change (1..SL_WIRE_MAX_WORKERS, 1..SL_WIRE_MAX_REPLICAS),
     * and where it changed: the first step of epoch from_epoch that the old
     * shape did not take (from_step >= 1: a change at step 0 is an epoch
     * boundary, SL_WIRE_HELLO_EPOCH); both at most SL_WIRE_MAX_POSITION.
     * Without the flag all four are 0 (the decoder sets them so, the
     * encoder refuses anything else). */
    uint32_t from_workers, from_replicas;
    uint64_t from_epoch, from_step;
};

/* One tensor of the schema: per-element shape (the batch dimension is not
 * included). ragged: its length is not fixed by the schema. */
struct sl_wire_field {
    const char *name; /* borrowed; name_len bytes, 1..SL_WIRE_MAX_NAME */
    size_t name_len;
    uint8_t dtype;                  /* enum sl_wire_dtype */
    uint8_t ragged;                 /* 0 or 1 */
    uint8_t rank;                   /* 0..SL_WIRE_MAX_RANK */
    int64_t dims[SL_WIRE_MAX_RANK]; /* each >= 0 */
};

struct sl_wire_welcome {
    uint32_t feeder;          /* < feeders */
    uint32_t feeders;         /* 1..SL_WIRE_MAX_FEEDERS */
    uint64_t steps_per_epoch; /* 0: not known in advance */
    uint64_t epochs;          /* 0: forever */
    uint32_t batch;           /* rows of a full piece, 1..SL_WIRE_MAX_ROWS */
    uint32_t heartbeat_ms;    /* the feeder sends a HEARTBEAT at least this often; 0: never */
    uint16_t ntensors;        /* 0..SL_WIRE_MAX_TENSORS */
    struct sl_wire_field fields[SL_WIRE_MAX_TENSORS];
    /* the feeder's shared piece memory, offered to a HELLO with
     * SL_WIRE_HELLO_SHM: a memfd the trainer opens as
     * /proc/<shm_pid>/fd/<shm_fd>, shm_size bytes (SL_WIRE_SHM_HEADER..
     * SL_WIRE_MAX_SHM), starting with "SLSHM001" and shm_token (u64 LE).
     * shm_size 0: none offered (then all four are 0). */
    uint32_t shm_pid;
    uint32_t shm_fd;
    uint64_t shm_size;
    uint64_t shm_token;
};

struct sl_wire_refuse {
    const char *reason; /* borrowed; 0..SL_WIRE_MAX_REASON bytes */
    size_t reason_len;
};

struct sl_wire_credit {
    uint32_t credits; /* 0..SL_WIRE_MAX_CREDITS */
    uint32_t flags;   /* SL_WIRE_CREDIT_*; unknown bits are ignored */
};

/* A tensor frame's descriptor. Numeric dtypes: bytes == product(dims) x
 * element size. SL_WIRE_BYTES: product(dims) strings whose bytes total
 * `bytes`. */
struct sl_wire_tensor {
    uint8_t dtype;                        /* enum sl_wire_dtype */
    uint8_t rank;                         /* 1..SL_WIRE_MAX_PIECE_RANK */
    int64_t dims[SL_WIRE_MAX_PIECE_RANK]; /* each >= 0; dims[0] = rows unless the schema says ragged */
    uint64_t bytes;                       /* length of the tensor's data, <= SL_WIRE_MAX_MSG */
    uint64_t offset;                      /* where its data starts in the piece's body frame, <= SL_WIRE_MAX_MSG */
};

struct sl_wire_piece {
    uint64_t epoch;
    uint64_t step;
    uint32_t worker;   /* < SL_WIRE_MAX_WORKERS */
    uint32_t replica;  /* < SL_WIRE_MAX_REPLICAS */
    uint64_t seq;      /* position in the worker's piece stream, over all epochs */
    uint32_t rows;     /* batch dimension, <= SL_WIRE_MAX_ROWS; 0: an empty piece */
    uint32_t flags;    /* SL_WIRE_PIECE_* */
    uint16_t ntensors; /* 0..SL_WIRE_MAX_TENSORS */
    struct sl_wire_tensor tensors[SL_WIRE_MAX_TENSORS];
    /* with SL_WIRE_PIECE_SHM: where the body lies in the shared memory
     * (shm_offset >= SL_WIRE_SHM_HEADER, shm_bytes <= SL_WIRE_MAX_MSG);
     * without it both are 0 and the body frame follows the header */
    uint64_t shm_offset;
    uint64_t shm_bytes;
};

struct sl_wire_end {
    uint32_t worker; /* < SL_WIRE_MAX_WORKERS */
    uint64_t pieces; /* last seq + 1: pieces sent to this worker in all */
    uint64_t epochs; /* epochs completed */
};

struct sl_wire_error {
    int32_t code;    /* an SL_E* value (SL_ECLOSED..SL_EIO) */
    const char *msg; /* borrowed; 0..SL_WIRE_MAX_ERROR bytes */
    size_t msg_len;
};

struct sl_wire_heartbeat {
    uint64_t sent_ns; /* the sender's monotonic clock (sl_clock_ns) */
};

/* A feeder's figures so far, for a trainer to say which stage of the
 * feeder it waits for bounds it: the CPU ns of each stage (SL_WIRE_STAGE_*:
 * read, decompress, decode, assemble, send, map) since the feeder started,
 * and its time with pieces to make but no credit. Each at most
 * SL_WIRE_MAX_COUNT. Two forms: with_map 1, 64 bytes ending in map_ns (to
 * a trainer whose HELLO set SL_WIRE_HELLO_STATS_MAP); with_map 0, the 56
 * bytes of trainers before the map stage (stage_ns[SL_WIRE_STAGE_MAP] is
 * then 0: the decoder sets it so, the encoder refuses anything else). */
struct sl_wire_stats {
    uint64_t stage_ns[SL_WIRE_STAGES];
    uint64_t credit_wait_ns;
    uint8_t with_map; /* 0 or 1 */
};

/* The answer to a HELLO (with SL_WIRE_HELLO_STATUS) that a feeder cannot
 * serve yet: where it stands; the trainer says HELLO again after retry_ms
 * on the same connection. Progress so far, for the trainer's log. */
struct sl_wire_status {
    uint32_t state;      /* SL_WIRE_STATUS_SCANNING (the only one) */
    uint32_t retry_ms;   /* 1..SL_WIRE_MAX_RETRY_MS */
    uint64_t files_done; /* <= files */
    uint64_t files;      /* the job's files, 1..SL_WIRE_MAX_FILES */
    uint64_t records;    /* found so far, <= SL_WIRE_MAX_COUNT */
    uint64_t bytes;      /* scanned so far (decompressed), <= SL_WIRE_MAX_COUNT */
};

/* One feeder of a job's roster: its index, the endpoint trainers connect
 * to, and its CURVE public key when the job uses CURVE. */
struct sl_wire_roster_entry {
    uint32_t index;       /* < the roster's feeders; entries in increasing index order, no repeats */
    const char *endpoint; /* borrowed; 1..SL_WIRE_MAX_ENDPOINT bytes, no NUL */
    size_t endpoint_len;
    const char *key; /* borrowed; 0 (plaintext) or SL_WIRE_KEY_Z85 bytes of Z85 */
    size_t key_len;
};

/* The job's feeders as the sender knows them: `feeders` in all (the modulus
 * of the shares from now on), and the endpoints of every feeder that joined
 * the running job that the sender knows of (its own among them when it
 * joined; a trainer knows the first feeders' from its command line).
 * feeders 1..SL_WIRE_MAX_ROSTER; count <= feeders. */
struct sl_wire_roster {
    uint32_t feeders;
    uint16_t count;
    struct sl_wire_roster_entry e[SL_WIRE_MAX_ROSTER];
};

/* A feeder started to join a running job asks a feeder of the job to
 * count it in: index `feeder` of `feeders`, serving at `endpoint`, for the
 * job `job` whose plan inputs hash to `digest` (files, record counts,
 * plan settings, schema: the same for every feeder of the job). */
struct sl_wire_join {
    uint32_t feeder;  /* < feeders */
    uint32_t feeders; /* 2..SL_WIRE_MAX_ROSTER */
    uint64_t digest;
    const char *job; /* borrowed; 1..SL_WIRE_MAX_JOB bytes */
    size_t job_len;
    const char *endpoint; /* borrowed; 1..SL_WIRE_MAX_ENDPOINT bytes, no NUL */
    size_t endpoint_len;
    const char *key; /* borrowed; 0 or SL_WIRE_KEY_Z85 bytes of Z85 */
    size_t key_len;
};

/* A decoded header; `type` says which member is valid (none for BYE).
 * About 6 KiB: keep one per connection rather than on a small stack. */
struct sl_wire_msg {
    uint16_t type; /* enum sl_wire_type */
    union {
        struct sl_wire_hello hello;
        struct sl_wire_welcome welcome;
        struct sl_wire_refuse refuse;
        struct sl_wire_credit credit;
        struct sl_wire_piece piece;
        struct sl_wire_end end;
        struct sl_wire_error error;
        struct sl_wire_heartbeat heartbeat;
        struct sl_wire_status status;
        struct sl_wire_stats stats;
        struct sl_wire_roster roster;
        struct sl_wire_join join;
    };
};

/* Encoders: replace out's contents with one header frame. The message is
 * checked against the same rules the decoder applies, so whatever encodes
 * decodes. 0, SL_EINVAL (the message breaks a rule; out is left empty) or
 * SL_ENOMEM / SL_EINVAL from the buffer (over out->max). */
int sl_wire_encode_hello(const struct sl_wire_hello *m, struct sl_buf *out) SL_MUST_CHECK;
int sl_wire_encode_welcome(const struct sl_wire_welcome *m, struct sl_buf *out) SL_MUST_CHECK;
int sl_wire_encode_refuse(const struct sl_wire_refuse *m, struct sl_buf *out) SL_MUST_CHECK;
int sl_wire_encode_credit(const struct sl_wire_credit *m, struct sl_buf *out) SL_MUST_CHECK;
int sl_wire_encode_piece(const struct sl_wire_piece *m, struct sl_buf *out) SL_MUST_CHECK;
int sl_wire_encode_end(const struct sl_wire_end *m, struct sl_buf *out) SL_MUST_CHECK;
int sl_wire_encode_error(const struct sl_wire_error *m, struct sl_buf *out) SL_MUST_CHECK;
int sl_wire_encode_heartbeat(const struct sl_wire_heartbeat *m, struct sl_buf *out) SL_MUST_CHECK;
int sl_wire_encode_stats(const struct sl_wire_stats *m, struct sl_buf *out) SL_MUST_CHECK;
int sl_wire_encode_bye(struct sl_buf *out) SL_MUST_CHECK;
int sl_wire_encode_status(const struct sl_wire_status *m, struct sl_buf *out) SL_MUST_CHECK;
int sl_wire_encode_roster(const struct sl_wire_roster *m, struct sl_buf *out) SL_MUST_CHECK;
int sl_wire_encode_join(const struct sl_wire_join *m, struct sl_buf *out) SL_MUST_CHECK;

/* Encode any message (by m->type), with the reason in err when the message
 * breaks a rule: SL_EINVAL "cannot encode: PIECE header: ntensors 70
 * exceeds 64". */
int sl_wire_encode(const struct sl_wire_msg *m, struct sl_buf *out, struct sl_error *err) SL_MUST_CHECK;

/* Decode one header frame p[0..n). 0, or SL_EPROTO with err saying what:
 * "bad magic ...", "unsupported version 2 (this build speaks 1)",
 * "HELLO header: truncated at byte 18 of 20 (replicas)", "PIECE header:
 * ntensors 70 exceeds 64", "CREDIT header: 3 trailing bytes after byte
 * 12". Strings in *m borrow from p. */
int sl_wire_decode(const uint8_t *p, size_t n, struct sl_wire_msg *m, struct sl_error *err) SL_MUST_CHECK;

/* A piece's body frame of `body_bytes` against its (decoded) descriptors:
 * every tensor's [offset, offset + bytes) inside it. 0, or SL_EPROTO
 * "tensor 1: bytes [96, 196) past the body's 160". */
int sl_wire_check_body(const struct sl_wire_piece *p, size_t body_bytes, struct sl_error *err) SL_MUST_CHECK;

/* A (decoded) piece against the schema of WELCOME: same tensor count, dtype
 * per tensor, rank = schema rank + 1, dims[1..] = the schema's dims, and
 * dims[0] = rows unless the schema marks the tensor ragged. 0 or SL_EPROTO
 * "tensor 2 'label': dtype float32, schema says int64". */
int sl_wire_check_piece(const struct sl_wire_piece *p, const struct sl_wire_welcome *schema,
                        struct sl_error *err) SL_MUST_CHECK;

/* "HELLO", "PIECE", ...; "type N" is not given: unknown types read "?". */
const char *sl_wire_type_name(unsigned type);
/* "int64", "float32", "bytes", "uint8", "float16", "bfloat16"; "?"
 * otherwise. */
const char *sl_wire_dtype_name(unsigned dtype);
/* 8, 4, 0 (bytes: variable), 1, 2, 2; 0 for an unknown dtype. */
size_t sl_wire_dtype_size(unsigned dtype);

#endif
