/* train_ckpt: a trainer worker's checkpoint files (sluice-trainer
 * --checkpoint DIR, --restore DIR; docs/trainer.md, "Checkpoints").
 *
 * A checkpoint is one file per worker, DIR/ckpt-SSSSSSSSSSSS.wWofN (S the
 * steps trained over all epochs, 12 digits or more; worker W of N), holding
 * what that worker needs to continue exactly: the model's weights and the
 * momentum-SGD velocity, the input position (client_input_position: the
 * first piece not trained) and what the file was made for (the job, the
 * worker's place, the replicas, the model's shape). Every worker of a job
 * is at the same step (the ring all-reduce keeps them in lockstep), so a
 * step's checkpoint is the set of the N workers' files.
 *
 * Format, version 3 (versions 1 and 2 are read too: version 1's header is
 * 128 bytes, without steps_per_epoch; version 2's 136, without the
 * transition), little-endian throughout:
 *   0    8  magic "SLUICECK"
 *   8    4  version (3)
 *   12   4  header bytes (176)
 *   16  40  the input position (client_input_position_encode, its own CRC)
 *   56   4  worker        60   4  workers       64   4  replicas
 *   68   4  model (0 none, 1 softmax, 2 mlp)    72   4  mode (0 mirrored, 1 tower)
 *   76   4  classes       80   4  inputs        84   4  nhidden
 *   88  16  hidden[4] (unused ones 0)
 *   104  4  lr (float32)  108  4  momentum (float32)  112  4  seed
 *   116  4  job name bytes J (1..256)
 *   120  8  nparams P (0 with no model)
 *   128  8  steps_per_epoch of the stream (the feeders' WELCOME; 0: not known):
 *           where its epochs end, for a restore with another shape
 *   the transition (version 3; all 0: the stream has none): the job's shape
 *   changed mid-epoch (docs/semantics.md 5.2) and the position's seq counts
 *   this worker's pieces from that change
 *   136  4  from_workers (1..65536)   140  4  from_replicas (1..1024)
 *   144  8  from_epoch (<= 2^48)      152  8  from_step (1..from_T-1)
 *   160  8  from_T: the old shape's steps per epoch (2..2^48), where the
 *           transition epoch ends
 *   168  8  step_base: the steps trained before the change (<= 2^48); the
 *           checkpoint's step (its name) is step_base + the position's step.
 *           With no transition: 0, or an elastic job's offset (a signed
 *           64-bit value, |offset| <= 2^48, the step not below 0): its
 *           global step minus this shape's count of steps, after its
 *           worker count changed at an epoch's start (docs/trainer.md,
 *           "Elastic workers")
 *   176  J  the job name, then zeros to a multiple of 8 bytes
 *   ...  4P weights (float32, the model's parameter order, train_model.h)
 *   ...  4P velocity (float32, same order)
 *   end  4  CRC-32C of every byte before it
 * A reader checks, before anything sizes an allocation or is believed: the
 * magic, the version, the header size, every count's range, that P is what
 * inputs, hidden and classes make, and that the file's size is exactly
 * what the header says; then the CRC over the whole file; then that the
 * file was made for this command line. A file failing any check is refused
 * whole, with its path and what is wrong.
 *
 * Writes go through sl_output: an exclusive temporary ".NAME.RANDOM.tmp"
 * in DIR, fsync, rename over the name, then fsync of DIR, so a crash leaves
 * the previous checkpoints and at most one temporary, which
 * train_ckpt_clean removes.
 *
 * Thread-safe: the functions share nothing; one caller per directory and
 * worker.
 */
#ifndef TRAIN_CKPT_H
#define TRAIN_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"
#include "train_model.h"
#include "client_position.h"

#define TRAIN_CKPT_VERSION 3
#define TRAIN_CKPT_HEADER_BYTES 176    /* version 3's */
#define TRAIN_CKPT_V2_HEADER_BYTES 136 /* version 2's: no transition */
#define TRAIN_CKPT_V1_HEADER_BYTES 128 /* version 1's: no steps_per_epoch */
#define TRAIN_CKPT_MAX_JOB 256
#define TRAIN_CKPT_MAX_PATH 4096
#define TRAIN_CKPT_MAX_BYTES (UINT64_C(1) << 40) /* a file larger than this is refused unread */

/* What a checkpoint was made for and where its stream stands. */
struct train_ckpt_meta {
    char job[TRAIN_CKPT_MAX_JOB + 1];
    uint32_t worker, workers, replicas;
    uint32_t model; /* 0 none, 1 softmax, 2 mlp (sluice-trainer --model's order) */
    uint32_t mode;  /* 0 mirrored, 1 tower */
    uint32_t classes, inputs, nhidden, hidden[TRAIN_MODEL_MAX_HIDDEN]; /* 0 with no model */
    float lr, momentum;
    uint32_t seed;
    struct client_input_position pos;
    uint64_t steps_per_epoch; /* of the stream it was taken from; 0: not known (version 1) */
    /* the stream's transition (all 0: none; versions 1 and 2 have none) */
    uint32_t from_workers, from_replicas;
    uint64_t from_epoch, from_step;
    uint64_t from_steps_per_epoch; /* T, the old shape's */
    uint64_t step_base;            /* steps trained before the change: the step is step_base + pos.step (with no
                           transition: 0, or an elastic job's signed offset, two's complement) */
    uint64_t nparams;              /* floats of weights, and of velocity */
};

/* A checkpoint read into memory: weights and velocity point into buf. */
struct train_ckpt {
    struct train_ckpt_meta meta;
    char path[TRAIN_CKPT_MAX_PATH];
    const float *weights, *velocity; /* meta.nparams each; NULL with no model */
    void *buf;                       /* owned */
};

/* The steps trained at m's position over the job's life (its file's name):
 * step_base + pos.step. */
uint64_t train_ckpt_steps(const struct train_ckpt_meta *m);

/* Where m's position lies in the job's epochs: *epoch, and *step within it
 * (0 at an epoch's start), counted in the transition's numbering when m
 * has one (the transition epoch has from_T steps, the later ones
 * steps_per_epoch). SL_EINVAL when steps_per_epoch is 0 (not known). */
int train_ckpt_where(const struct train_ckpt_meta *m, uint64_t *epoch, uint64_t *step,
                     struct sl_error *err) SL_MUST_CHECK;

/* The file name of step `steps` (steps trained) for worker w of n into
 * out ("ckpt-000000000040.w0of2"). */
void train_ckpt_name(char *out, size_t cap, uint64_t steps, uint32_t worker, uint32_t workers);

/* Write m's checkpoint (the name from train_ckpt_steps(m), m->worker, m->workers)
 * into dir, with weights and velocity (m->nparams floats each; NULL when
 * 0), as described at the top. *bytes (may be NULL) gets the file's size.
 * SL_EINVAL (a meta out of range), SL_EIO naming the call and path. */
int train_ckpt_write(const char *dir, const struct train_ckpt_meta *m, const float *weights, const float *velocity,
                     uint64_t *bytes, struct sl_error *err) SL_MUST_CHECK;

/* Read and check path. With want (may be NULL) the file must have been
 * made for want's job, worker, workers, replicas, model, mode, classes,
 * nhidden and hidden (inputs too when want->inputs > 0). On error *out is
 * empty and err reads "PATH: what is wrong (expected X, got Y)":
 * SL_ECORRUPT (damaged: truncated, magic, version, sizes, CRC), SL_EINVAL
 * (made for another command line), SL_EIO, SL_ENOMEM. A symlink at path
 * ("PATH: a symbolic link: refused ...") and anything not a regular file
 * ("PATH: not a regular file (a FIFO): ...") are SL_ECORRUPT; the open
 * never blocks (a FIFO is opened O_NONBLOCK, then refused). */
int train_ckpt_read(const char *path, const struct train_ckpt_meta *want, struct train_ckpt *out,
                    struct sl_error *err) SL_MUST_CHECK;
/* Free what read allocated; an all-zero ckpt is accepted. */
void train_ckpt_free(struct train_ckpt *ck);

/* The steps of worker w of n's checkpoints in dir, newest first, into
 * steps[0..*n) (at most cap; *total counts them all). *other (may be NULL)
 * counts checkpoint files for another worker count (their name into
 * other_name, when not NULL, the first found). SL_EIO: opendir(DIR): ... */
int train_ckpt_list(const char *dir, uint32_t worker, uint32_t workers, uint64_t *steps, size_t cap, size_t *n,
                    size_t *total, size_t *other, char *other_name, size_t other_cap,
                    struct sl_error *err) SL_MUST_CHECK;

/* One step's checkpoint set in a directory: the files of that step for one
 * worker count (an elastic job's directory holds the sets of each world it
 * had). Complete when have == workers. */
struct train_ckpt_set {
    uint64_t steps;
    uint32_t workers;
    uint32_t have;    /* the workers 0..workers-1 with a file of this step */
    uint32_t missing; /* the lowest worker without one (UINT32_MAX: none) */
};

/* The checkpoint sets in dir, newest first (by step, then by worker count,
 * more first), into sets[0..*n) (at most cap; *total counts them all).
 * Temporaries and other names are not counted. SL_EIO: opendir(DIR): ...,
 * SL_ENOMEM. */
int train_ckpt_sets(const char *dir, struct train_ckpt_set *sets, size_t cap, size_t *n, size_t *total,
                    struct sl_error *err) SL_MUST_CHECK;

/* Remove worker w of n's leftovers in dir: temporaries of a write a crash
 * cut short (".ckpt-S.wWofN.RANDOM.tmp", RANDOM letters and digits). *removed (may be NULL) counts
 * them. Only this worker's: another worker may be writing its own. Only
 * regular files are removed: a directory, FIFO or symlink with such a name
 * is left in place with a warning (sluice never made it). */
int train_ckpt_clean(const char *dir, uint32_t worker, uint32_t workers, size_t *removed,
                     struct sl_error *err) SL_MUST_CHECK;

/* After writing step `current`: remove worker w of n's checkpoints newer
 * than current (a timeline abandoned by restoring an older step; each is
 * logged as a warning), then all but the `keep` newest (keep >= 1).
 * As in clean, only regular files are removed (anything else is left and
 * logged). SL_EIO on a failed unlink. */
int train_ckpt_prune(const char *dir, uint32_t worker, uint32_t workers, uint64_t current, uint32_t keep,
                     struct sl_error *err) SL_MUST_CHECK;

#endif
