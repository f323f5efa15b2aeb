/* client_position: where a worker's input stream stands (the seq the
 * client resumes at, client_opts.resume_seq), encoded for a checkpoint
 * (the trainer's train_ckpt.h, train_ps_ckpt.h) and for the parameter
 * servers' PUSH and RESUME messages (train_ps.h). The strategy API
 * (train_strategy.h) includes it for the caller's own loop. A library of
 * its own (sl_client_position: it takes a CRC-32C), not part of libsluice. */
#ifndef CLIENT_POSITION_H
#define CLIENT_POSITION_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

/* --- the input position, for a checkpoint of the caller's own loop ---
 *
 * Where a worker's input stream stands, to save beside the caller's own
 * model and optimizer state and to continue exactly there later: seq is
 * the first piece not trained yet (client_position() when every
 * step handed out has been trained; with a look-ahead of one step, the
 * trained step's first piece's seq + replicas), a step's first piece, so
 * a multiple of replicas; step = seq / replicas, the steps trained over
 * all epochs; epoch, the epoch of the last step trained (for the logs:
 * the stream knows it from seq). To continue, open the client with
 * client_opts.resume_seq = seq (and the same job, worker, workers
 * and replicas). */
struct client_input_position {
    uint64_t epoch;
    uint64_t step;
    uint64_t seq;
    uint32_t replicas;
};

/* Bytes of an encoded position: "SLPOS001", epoch, step, seq (u64 LE),
 * replicas (u32 LE), then the CRC-32C of the 36 bytes before it (u32 LE). */
#define CLIENT_INPUT_POSITION_BYTES 40
/* The largest seq the client accepts as resume_seq (2^48). */
#define CLIENT_INPUT_POSITION_MAX_SEQ (UINT64_C(1) << 48)
/* The most replicas a position may name: the trainer's device bound
 * (TRAIN_DEVICE_MAX_REPLICAS, which the trainer asserts equal to this). */
#define CLIENT_INPUT_POSITION_MAX_REPLICAS 1024

/* *out for a stream at seq with R = replicas, the last step trained in
 * `epoch`. SL_EINVAL when replicas is 0 or above CLIENT_INPUT_POSITION_MAX_REPLICAS,
 * seq is not a multiple of replicas or above the maximum. */
int client_input_position_at(struct client_input_position *out, uint64_t seq, uint32_t replicas, uint64_t epoch,
                             struct sl_error *err) SL_MUST_CHECK;
/* Encode *p into out (always CLIENT_INPUT_POSITION_BYTES bytes). */
void client_input_position_encode(const struct client_input_position *p, uint8_t out[CLIENT_INPUT_POSITION_BYTES]);
/* Decode len bytes at buf into *out (unchanged on error). SL_ECORRUPT,
 * with what is wrong: a length other than CLIENT_INPUT_POSITION_BYTES,
 * the magic, the CRC, replicas 0 or too many, seq not step x replicas or
 * above the maximum. */
int client_input_position_decode(struct client_input_position *out, const void *buf, size_t len,
                                 struct sl_error *err) SL_MUST_CHECK;

#endif
