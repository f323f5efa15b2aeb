/* train_ps_ckpt: a parameter server's checkpoint files (a ps task's
 * --checkpoint DIR and --restore DIR; docs/trainer.md, "Parameter servers").
 *
 * ps task P of N writes DIR/ckpt-VVVVVVVVVVVV.wPofN (V its version: the
 * pushes it applied), the name train_ckpt_name makes, so train_ckpt_list,
 * train_ckpt_clean and train_ckpt_prune manage them as they manage a
 * worker's (a ps directory holds the ps tasks' files only; the magic tells
 * the two kinds apart). It holds what the server needs to continue
 * exactly (train_ps_state): its variables' values and momentum, its
 * version and global step, the model description that set it up, and each
 * worker's recorded input position.
 *
 * Format, version 2, little-endian throughout:
 *   0   8  magic "SLUICEPS"
 *   8   4  format version (2; version 1, whose bytes 52-63 are zeros, is
 *          read as a server of a job whose workers never changed)
 *  12   4  server index P     16   4  servers N     20   4  workers W
 *  24   8  version (pushes applied)                 32   8  global step
 *  40   8  elements n         48   4  description bytes D (0..512)
 *  52   4  world changes C (an elastic job's WORLDs applied: W is the
 *          count of the world they made)
 *  56   8  world epoch E (the epoch that world starts at; 0 when C is 0)
 *  64   D  the description, then zeros to a multiple of 8 bytes
 *  ...  40 x W  each worker's position (client_input_position_encode; 40
 *          zero bytes: no push of it applied in this world: it starts at
 *          epoch E's first piece; a position is of epoch E or later)
 *  ...  4n values, 4n momentum (float32, the server's variables in order)
 *  end  4  CRC-32C of every byte before it
 * A reader checks the size against the header before it allocates, then
 * the CRC, then every field (the index, servers and workers it was asked
 * for, the global step not above the version, the world epoch 0 without a
 * change, each position and its epoch, every value finite). A symlink or anything not a regular file is refused by name,
 * and the open never blocks (a FIFO).
 *
 * Writes go through sl_output (a temporary, fsync, rename, fsync of DIR).
 * Thread-safe: nothing shared.
 */
#ifndef TRAIN_PS_CKPT_H
#define TRAIN_PS_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"
#include "train_ps.h"

#define TRAIN_PS_CKPT_VERSION 2
#define TRAIN_PS_CKPT_HEADER 64
#define TRAIN_PS_CKPT_MAX_WORKERS 65536

/* s into dir (the name from s->version, s->index, s->servers); *bytes
 * (may be NULL) its size. SL_EINVAL, SL_EIO naming the call and path. */
int train_ps_ckpt_write(const char *dir, const struct train_ps_state *s, uint64_t *bytes,
                        struct sl_error *err) SL_MUST_CHECK;

/* A checkpoint read: state's arrays point into buf. */
struct train_ps_ckpt {
    struct train_ps_state state;
    char path[4096];
    char config[TRAIN_PS_MAX_CONFIG + 1];
    struct client_input_position *pos; /* owned, [workers] */
    void *buf;                         /* owned */
};

/* Read and check path, made by server `index` of `servers` for `workers`
 * workers. On error *out is empty and err reads "PATH: what is wrong":
 * SL_ECORRUPT (damaged, a symlink, not a regular file), SL_EINVAL (made
 * for another server or worker count), SL_EIO, SL_ENOMEM. */
int train_ps_ckpt_read(const char *path, uint32_t index, uint32_t servers, uint32_t workers, struct train_ps_ckpt *out,
                       struct sl_error *err) SL_MUST_CHECK;
/* Free what read allocated; an all-zero one is accepted. */
void train_ps_ckpt_free(struct train_ps_ckpt *ck);

#endif
