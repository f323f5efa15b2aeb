/* client_reorder: puts pieces back in sequence order. Pieces of one worker's
 * stream arrive from F feeders (piece seq from feeder seq % F) and, within
 * a feeder, from several executor threads, so they come out of order; the
 * trainer must see exactly the order one feeder would have sent.
 *
 * A ring of `window` slots indexed by seq - next: the window is the most
 * pieces the trainer has granted credits for, so an arriving piece always
 * fits; one that does not (or a seq already delivered or already present)
 * is a protocol error, never silently dropped.
 *
 * Thread-safe: no; owned by the client thread.
 */
#ifndef CLIENT_REORDER_H
#define CLIENT_REORDER_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

struct client_reorder;

int client_reorder_create(struct client_reorder **out, size_t window, struct sl_error *err) SL_MUST_CHECK;
void client_reorder_destroy(struct client_reorder *r);

/* Hold `item` (non-NULL) for sequence number `seq`. SL_EPROTO when seq was
 * delivered already, is held already, or lies beyond next + window. */
int client_reorder_put(struct client_reorder *r, uint64_t seq, void *item, struct sl_error *err) SL_MUST_CHECK;
/* The item for the next sequence number if it has arrived (and advance),
 * else NULL. */
void *client_reorder_pop(struct client_reorder *r);
/* Remove and return the item held for `seq` (NULL when none is: seq not
 * arrived, already delivered or beyond the window). */
void *client_reorder_take(struct client_reorder *r, uint64_t seq);
uint64_t client_reorder_next(const struct client_reorder *r);
/* Start the sequence at `next` (a resumed stream). Only while nothing is
 * held: 0, else -1 and nothing changes. */
int client_reorder_restart(struct client_reorder *r, uint64_t next) SL_MUST_CHECK;
size_t client_reorder_held(const struct client_reorder *r);
/* A window of `window` slots (>= 1; feeders joined: more credits out).
 * Only while nothing is held: 0; -1 (something is held, or window 0) or
 * SL_ENOMEM, and nothing changes. */
int client_reorder_resize(struct client_reorder *r, size_t window) SL_MUST_CHECK;

#endif
