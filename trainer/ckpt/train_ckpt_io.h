/* train_ckpt_io: what the checkpoint files share (a worker's, train_ckpt.c;
 * a parameter server's, ps/train_ps_ckpt.c); not for callers. Both are
 * written through sl_output with a running CRC-32C, their arrays at
 * multiples of 8 bytes, the directory fsynced after the rename. */
#ifndef TRAIN_CKPT_IO_H
#define TRAIN_CKPT_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "sl_error.h"

/* n rounded up to a multiple of 8. */
static inline size_t train__ckpt_pad8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* fwrite n bytes at p to f and extend *crc (CRC-32C) over them; 0 or -1
 * (errno as fwrite left it). n 0: nothing, 0. */
int train__ckpt_put(FILE *f, uint32_t *crc, const void *p, size_t n);

/* fsync the directory dir, so a rename into it survives a power loss: 0,
 * or SL_EIO naming the call (open or fsync) and dir. */
int train__ckpt_fsync_dir(const char *dir, struct sl_error *err) SL_MUST_CHECK;

/* The end of a checkpoint written through `out` (f its file): the CRC
 * tail, then the commit (the rename into place) and the directory's fsync;
 * `bad`: an earlier write failed, so the file is abandoned. 0, or an error
 * prefixed "checkpoint: " naming the call. */
struct sl_output;
int train__ckpt_finish(struct sl_output *out, FILE *f, uint32_t crc, int bad, const char *dir,
                       struct sl_error *err) SL_MUST_CHECK;

/* Open path for reading a checkpoint: *fd, and its size in *size, or an
 * error naming path: a symbolic link or anything but a regular file is
 * refused (SL_ECORRUPT; a FIFO does not block the open), a failed open or
 * fstat is SL_EIO (or what errno maps to). On an error nothing is left
 * open. */
int train__ckpt_open(const char *path, int *fd, uint64_t *size, struct sl_error *err) SL_MUST_CHECK;

/* "a directory", "a FIFO", "a symbolic link", "a socket", "a device", "a
 * regular file", else "not a file": for messages about what a path is. */
const char *train__ckpt_file_kind(mode_t mode);

#endif
