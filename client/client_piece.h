/* client_piece: one replica's share of a step as the trainer receives it,
 * a piece of named tensors, independent of where it came from (the feeder
 * client, a test) and of where it goes (the stager, the strategy, the
 * loop). The compute side includes this header, never the client's.
 *
 * Both structs are caller-owned views: the tensor data and names are
 * borrowed from whoever filled them (the client: the received frames,
 * until its next step) and are read-only here.
 */
#ifndef CLIENT_PIECE_H
#define CLIENT_PIECE_H

#include <stddef.h>
#include <stdint.h>

#include "sl_wire.h"

struct client_tensor {
    const char *name; /* NUL-terminated copy of the schema's name */
    uint8_t dtype;    /* enum sl_wire_dtype */
    int rank;
    int64_t dims[SL_WIRE_MAX_PIECE_RANK];
    const void *data; /* borrowed; NULL when bytes == 0 */
    uint64_t bytes;
};

struct client_piece {
    uint64_t epoch, step, seq;
    uint32_t worker, replica;
    uint32_t rows;  /* 0: an empty piece */
    uint32_t flags; /* SL_WIRE_PIECE_* */
    size_t ntensors;
    struct client_tensor t[SL_WIRE_MAX_TENSORS];
};

#endif
