/* train_ps_int: what the parameter server (train_ps_server.c) and its
 * client (train_ps_client.c) share: the message header and its framing
 * over ZeroMQ (train_ps.h, "the wire"), and the copies between the whole
 * parameter array and one server's packed elements; not for callers. */
#ifndef TRAIN_PS_INT_H
#define TRAIN_PS_INT_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "train_ps.h"

/* A message's TRAIN_PS_HEADER bytes, decoded. */
struct train__ps_hdr {
    uint8_t type;
    uint32_t worker, flags;
    uint64_t version, step, incarnation, session;
};

/* Encode h into b[0..TRAIN_PS_HEADER). */
void train__ps_put_hdr(uint8_t *b, const struct train__ps_hdr *h);
/* Decode n bytes at b into *h: 0, or -1 when they are not a header of this
 * wire version with a known type. */
int train__ps_get_hdr(const uint8_t *b, size_t n, struct train__ps_hdr *h);

/* Send [routing id?] header [body] (body NULL: none); 0 or -1 (errno as
 * ZeroMQ left it). */
int train__ps_send(void *sock, zmq_msg_t *id, const struct train__ps_hdr *h, const void *body, size_t len);

/* Receive one multipart message: its first `cap` frames into f (*nf of
 * them, each to be closed by the caller), the rest closed. Returns how
 * many frames the message had. */
size_t train__ps_recv_frames(void *sock, zmq_msg_t *f, size_t cap, size_t *nf);

/* Copy between the whole array and server ps's packed elements (the
 * variables it owns, in layout order). */
void train__ps_pack(const struct train_ps_layout *l, uint32_t ps, const float *whole, float *packed);
void train__ps_unpack(const struct train_ps_layout *l, uint32_t ps, const float *packed, float *whole);

#endif
