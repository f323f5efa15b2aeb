/* client_keep.h: a step taken out of the client past the next one, kept
 * (client_keep) or lent (client_lend), both in client.h; what owns it and
 * how it goes (client_keep.c).
 */
#ifndef CLIENT_KEEP_H
#define CLIENT_KEEP_H

#include <stdint.h>

#include "client_piece.h"

/* A step kept beyond the next: its pieces, their names and shapes, and
 * their memory, owned (client_keep) or lent (client_lend). Independent of
 * the client: it may be freed after the client's close, from any
 * thread. */
struct client_kept {
    uint32_t n;                  /* pieces (the replicas) */
    struct client_piece *pieces; /* [n]; tensor data and names point into this object */
};

/* Free a kept or lent step (NULL: nothing). */
void client_kept_free(struct client_kept *k);

#endif
