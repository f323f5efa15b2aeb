/* train_main_ckpt: sluice-trainer's checkpoints, a worker's (train_ckpt.h):
 * what they must agree on, the directory, the restore and the periodic
 * write (see train_main_int.h). */
#include "train_main_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_log.h"

/* ---- checkpoints (train_ckpt.h; docs/trainer.md, "Checkpoints") ---- */

/* The input tensor's values per element, from the feeders' schema (0
 * before the client is open or without such a tensor). */
uint32_t trainer_input_width(const struct trainer *t)
{
    const struct sl_wire_welcome *w = t->cl != NULL ? client_welcome(t->cl) : NULL;
    size_t len = strlen(t->o.input);
    for (size_t i = 0; w != NULL && i < w->ntensors; i++)
        if (w->fields[i].name_len == len && memcmp(w->fields[i].name, t->o.input, len) == 0 && w->fields[i].rank == 1)
            return w->fields[i].dims[0] > 0 && w->fields[i].dims[0] <= UINT32_MAX ? (uint32_t)w->fields[i].dims[0] : 0;
    return 0;
}

/* What this run's checkpoints say they were made for, and what a restored
 * one must match (inputs: 0, unknown before the feeders' schema). */
static void ckpt_meta_of(const struct trainer *t, struct train_ckpt_meta *m)
{
    const struct trainer_opts *o = &t->o;
    memset(m, 0, sizeof *m);
    snprintf(m->job, sizeof m->job, "%s", o->job);
    m->worker = o->worker;
    m->workers = o->workers;
    m->replicas = t->replicas;
    m->steps_per_epoch = t->cl != NULL ? client_welcome(t->cl)->steps_per_epoch : 0; /* where epochs end */
    if (t->transition.from_workers != 0) {
        m->from_workers = t->transition.from_workers;
        m->from_replicas = t->transition.from_replicas;
        m->from_epoch = t->transition.from_epoch;
        m->from_step = t->transition.from_step;
        m->from_steps_per_epoch = t->from_T;
    }
    m->step_base = t->step_base; /* with no transition 0, or an elastic job's offset (trainer_elastic_*) */
    m->model = (uint32_t)o->model;
    if (o->model == MODEL_NONE)
        return;
    m->mode = (uint32_t)o->mode;
    m->classes = o->classes;
    if (o->model == MODEL_MLP) {
        m->nhidden = (uint32_t)o->nhidden;
        for (int h = 0; h < o->nhidden; h++)
            m->hidden[h] = (uint32_t)o->hidden_sizes[h];
    }
    m->lr = (float)o->lr;
    m->momentum = (float)o->momentum;
    m->seed = o->seed;
}

/* A checkpoint restored with its own shape: the stream goes on as it was,
 * with the transition it recorded (if any) and its seq. */
static void adopt_transition(struct trainer *t)
{
    const struct train_ckpt_meta *m = &t->ck.meta;
    t->transition = (struct client_transition){m->from_workers, m->from_replicas, m->from_epoch, m->from_step};
    t->from_T = m->from_steps_per_epoch;
    t->step_base = m->step_base;
}

/* With --restore and several workers, over the ring before the feeders
 * are asked for anything: every worker's newest checkpoint step is
 * gathered (as 16-bit parts summed in float32: exact) and all continue
 * from the oldest of them, the newest step every worker has (a kill while
 * the workers wrote a step's files leaves some one step ahead; --keep is at
 * least 1, and the lockstep means the older step is the previous one they
 * all wrote). A worker that cannot load that step says why in its log, and
 * every worker fails naming the steps. 0 or an error. */
int trainer_ckpt_agree(struct trainer *t, struct sl_error *err)
{
    const struct trainer_opts *o = &t->o;
    size_t W = o->workers;
    float *v = sl_calloc(4 * W, sizeof *v);
    if (v == NULL)
        return sl_error_set(err, SL_ENOMEM, "--restore: out of memory for %zu workers", W);
    for (int k = 0; k < 4; k++)
        v[4 * o->worker + (size_t)k] = (float)((t->start_step >> (16 * k)) & 0xffff);
    int rc = train_ring_all_reduce(t->ring, v, 4 * W, TRAIN_RING_SUM, err);
    uint64_t lo = UINT64_MAX, hi = 0;
    uint32_t lo_w = 0, hi_w = 0;
    for (size_t w = 0; rc == 0 && w < W; w++) {
        uint64_t st = 0;
        for (int k = 0; k < 4; k++)
            st |= (uint64_t)v[4 * w + (size_t)k] << (16 * k);
        if (st < lo) {
            lo = st;
            lo_w = (uint32_t)w;
        }
        if (st > hi) {
            hi = st;
            hi_w = (uint32_t)w;
        }
    }
    float bad = 0;
    if (rc == 0 && lo != t->start_step) {
        struct train_ckpt_meta want;
        struct train_ckpt older;
        struct sl_error lerr = {0};
        char name[96], path[TRAIN_CKPT_MAX_PATH];
        ckpt_meta_of(t, &want);
        train_ckpt_name(name, sizeof name, lo, o->worker, o->workers);
        snprintf(path, sizeof path, "%s/%s", o->restore, name);
        sl_log(SL_LOG_INFO,
               "--restore: worker %u's newest checkpoint is step %" PRIu64 ", this worker's step %" PRIu64
               ": every worker continues from step %" PRIu64,
               lo_w, lo, t->start_step, lo);
        if (train_ckpt_read(path, &want, &older, &lerr) != 0 || train_ckpt_steps(&older.meta) != lo) {
            sl_log(SL_LOG_ERROR, "--restore: %s", lerr.msg[0] ? lerr.msg : "the file's step is not its name's");
            train_ckpt_free(&older);
            bad = 1;
        } else {
            train_ckpt_free(&t->ck);
            t->ck = older;
            t->start_step = lo;
            if (!t->changing)
                adopt_transition(t);
            sl_log(SL_LOG_INFO, "restoring step %" PRIu64 " (epoch %" PRIu64 ", input position %" PRIu64 ") from %s",
                   lo, t->ck.meta.pos.epoch, t->ck.meta.pos.seq, path);
        }
    }
    if (rc == 0)
        rc = train_ring_all_reduce(t->ring, &bad, 1, TRAIN_RING_SUM, err);
    sl_free(v);
    if (rc == 0 && bad != 0)
        rc = sl_error_set(err, SL_EINVAL,
                          "--restore: the workers' newest checkpoints are step %" PRIu64 " (worker %u) "
                          "and step %" PRIu64 " (worker %u), and %.0f worker(s) cannot load step %" PRIu64
                          " (their logs "
                          "say why): give every worker --restore-step S with a step each of them has",
                          lo, lo_w, hi, hi_w, (double)bad, lo);
    return rc;
}

/* --checkpoint DIR made if absent (one level) and a directory. */
int trainer_ckpt_dir_ready(const char *dir, struct sl_error *err)
{
    struct stat st;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return sl_error_sys(err, errno, "--checkpoint: mkdir(%s)", dir);
    if (stat(dir, &st) != 0)
        return sl_error_sys(err, errno, "--checkpoint: stat(%s)", dir);
    if (!S_ISDIR(st.st_mode))
        return sl_error_set(err, SL_EINVAL, "--checkpoint %s: not a directory", dir);
    return 0;
}

/* --restore from checkpoints of another shape (other W or R): the newest
 * (or --restore-step's) of worker w mod W_old of W_old, read and checked
 * for everything but the shape. Only --reshape says the plan may change.
 * A position at an epoch's end (the checkpoint's steps per epoch and
 * transition say where epochs end; sluice-trainer writes one after every
 * epoch's last step) continues by epoch: the feeders serve this run's
 * shape's plan from the next epoch. A position at step t >= 1 of epoch e
 * continues with the transition (W_old, R_old, e, t) from its first piece
 * (resume_seq 0): the rest of epoch e's steps cut into this shape's pieces,
 * then this shape's plan (docs/semantics.md 5.2). Refused: a mid-epoch
 * change within the epoch of the checkpoint's own change, --mode tower
 * with a model (its weights are per replica), a version 1 checkpoint (its
 * epochs' ends unknown). */
static int ckpt_load_other_shape(struct trainer *t, uint32_t w_old, uint32_t W_old, struct sl_error *err)
{
    const struct trainer_opts *o = &t->o;
    uint64_t steps[1];
    size_t n, total;
    char name[96], path[TRAIN_CKPT_MAX_PATH];
    int rc = train_ckpt_list(o->restore, w_old, W_old, steps, 1, &n, &total, NULL, NULL, 0, err);
    if (rc != 0)
        return sl_error_prefix(err, "--restore: ");
    if (n == 0 && !t->restore_step_given)
        return sl_error_set(err, SL_EINVAL, "--restore %s: no checkpoint of worker %u of %u", o->restore, w_old, W_old);
    uint64_t step = t->restore_step_given ? o->restore_step : steps[0];
    train_ckpt_name(name, sizeof name, step, w_old, W_old);
    if ((size_t)snprintf(path, sizeof path, "%s/%s", o->restore, name) >= sizeof path)
        return sl_error_set(err, SL_EINVAL, "--restore: the path %s/%s is too long", o->restore, name);
    /* its shape first, then read again checked against this command line
     * with that shape */
    struct train_ckpt_meta want;
    if ((rc = train_ckpt_read(path, NULL, &t->ck, err)) != 0)
        return sl_error_prefix(err, "--restore: ");
    uint32_t R_old = t->ck.meta.replicas;
    train_ckpt_free(&t->ck);
    ckpt_meta_of(t, &want);
    want.worker = w_old;
    want.workers = W_old;
    want.replicas = R_old;
    if ((rc = train_ckpt_read(path, &want, &t->ck, err)) != 0)
        return sl_error_prefix(err, "--restore: ");
    const struct train_ckpt_meta *m = &t->ck.meta;
    if (train_ckpt_steps(m) != step) {
        rc = sl_error_set(err, SL_ECORRUPT, "--restore: %s holds step %" PRIu64 " (the name says %" PRIu64 ")", path,
                          train_ckpt_steps(m), step);
        train_ckpt_free(&t->ck);
        return rc;
    }
    if (W_old == o->workers && R_old == t->replicas) { /* the same shape after all: by seq */
        t->start_step = step;
        adopt_transition(t);
        return 0;
    }
    uint64_t S = m->steps_per_epoch, epoch = 0, within = 0;
    struct sl_error werr = {0};
    int known = train_ckpt_where(m, &epoch, &within, &werr) == 0;
    int at_end = known && within == 0;
    /* the epoch of the checkpoint's own change: its old plan is gone */
    int second = known && !at_end && m->from_workers != 0 && epoch == m->from_epoch;
    int tower = o->model != MODEL_NONE && o->mode == MODE_TOWER;
    if (!known || second || !o->reshape || tower) {
        char where[200], how[480];
        uint64_t T = m->from_workers != 0 && epoch == m->from_epoch ? m->from_steps_per_epoch : S;
        if (!known)
            snprintf(where, sizeof where, "step %" PRIu64 " (a version 1 checkpoint: its steps per epoch unknown)",
                     step);
        else if (at_end) /* the last step of the epoch before */
            snprintf(where, sizeof where, "step %" PRIu64 " of %" PRIu64 " of epoch %" PRIu64,
                     m->from_workers != 0 && epoch - 1 == m->from_epoch ? m->from_steps_per_epoch : S,
                     m->from_workers != 0 && epoch - 1 == m->from_epoch ? m->from_steps_per_epoch : S, epoch - 1);
        else
            snprintf(where, sizeof where, "step %" PRIu64 " of %" PRIu64 " of epoch %" PRIu64, within, T, epoch);
        if (!known)
            snprintf(how, sizeof how,
                     "with another shape sluice continues only where it knows the epochs' ends: restore a checkpoint "
                     "written by a newer sluice-trainer");
        else if (second)
            snprintf(how, sizeof how,
                     "a second change within epoch %" PRIu64 " (the job's shape changed at its step %" PRIu64
                     " from %" PRIu32 " x %" PRIu32 "): change again at epoch %" PRIu64
                     "'s start (restore the checkpoint written at epoch %" PRIu64 "'s end)",
                     epoch, m->from_step, m->from_workers, m->from_replicas, epoch + 1, epoch);
        else if (tower)
            snprintf(how, sizeof how, "--mode tower's weights are per replica: keep the shape");
        else
            snprintf(how, sizeof how, "give --reshape to continue %s with the plan for this shape",
                     at_end ? "from the next epoch" : "from this step (the rest of the epoch cut for this shape)");
        rc = sl_error_set(err, SL_EINVAL,
                          "--restore: %s was taken with %u workers x %u replicas at %s; this run has "
                          "%u x %u: %s",
                          path, W_old, R_old, where, o->workers, t->replicas, how);
        train_ckpt_free(&t->ck);
        return rc;
    }
    t->start_step = step;
    if (at_end) {
        t->resume_epoch = epoch;
        sl_log(SL_LOG_WARN,
               "restoring step %" PRIu64 " of %u workers x %u replicas from %s: continuing at epoch %" PRIu64
               " with %u x %u (--reshape: the feeders serve this shape's plan from there)",
               step, W_old, R_old, path, epoch, o->workers, t->replicas);
        return 0;
    }
    /* mid-epoch: the old plan for epoch `epoch` is the checkpoint's shape's
     * plain plan (a transition of its own lies in an earlier epoch) */
    t->transition = (struct client_transition){W_old, R_old, epoch, within};
    t->from_T = S;
    t->step_base = step;
    t->changing = 1;
    sl_log(SL_LOG_WARN,
           "restoring step %" PRIu64 " of %u workers x %u replicas from %s: continuing at step %" PRIu64 " of %" PRIu64
           " of epoch %" PRIu64 " with %u x %u (--reshape: the feeders cut the rest of epoch %" PRIu64
           " for this shape, then serve its plan)",
           step, W_old, R_old, path, within, S, epoch, o->workers, t->replicas, epoch);
    return 0;
}

/* Up to this many sets of an elastic job's directory are looked at (the
 * newest first): --keep's for each world it had. */
#define ELASTIC_SETS 4096

/* The newest complete set in dir (every worker of its world has a file of
 * its step; with `at`, the one of step *at): 0 and *found 0 when there is
 * none, and then *newest (may be NULL) the newest incomplete one. */
static int newest_complete_set(const char *dir, const uint64_t *at, struct train_ckpt_set *set, int *found,
                               struct train_ckpt_set *newest, struct sl_error *err)
{
    struct train_ckpt_set *sets = sl_calloc(ELASTIC_SETS, sizeof *sets);
    size_t n = 0, total = 0;
    *found = 0;
    if (newest != NULL)
        memset(newest, 0, sizeof *newest);
    if (sets == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory listing %s", dir);
    int rc = train_ckpt_sets(dir, sets, ELASTIC_SETS, &n, &total, err);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (at != NULL && sets[i].steps != *at)
            continue;
        if (sets[i].have == sets[i].workers) {
            *set = sets[i];
            *found = 1;
            break;
        }
        if (newest != NULL && newest->workers == 0)
            *newest = sets[i];
    }
    sl_free(sets);
    return rc;
}

/* Worker 0 of a restored elastic job writing into its --restore DIR: the
 * files of the steps after the one restored (sets left incomplete by a
 * kill, or a timeline left behind by --restore-step) go, logged, of every
 * worker count, so that none mixes with this run's files of the same
 * names (a plain worker's prune removes only its own). Only regular files;
 * a failure is logged and left. */
static void prune_newer_sets(const char *dir, uint64_t steps)
{
    struct train_ckpt_set *sets = sl_calloc(ELASTIC_SETS, sizeof *sets);
    size_t n = 0, total = 0;
    struct sl_error err = {0};
    if (sets == NULL || train_ckpt_sets(dir, sets, ELASTIC_SETS, &n, &total, &err) != 0) {
        sl_log(SL_LOG_WARN, "--restore %s: the steps after %" PRIu64 " are left: %s", dir, steps,
               sets == NULL ? "out of memory" : err.msg);
        sl_free(sets);
        return;
    }
    for (size_t i = 0; i < n && sets[i].steps > steps; i++)
        for (uint32_t k = 0; k < sets[i].workers; k++) {
            char name[96], path[TRAIN_CKPT_MAX_PATH];
            struct stat st;
            train_ckpt_name(name, sizeof name, sets[i].steps, k, sets[i].workers);
            if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path || lstat(path, &st) != 0 ||
                !S_ISREG(st.st_mode))
                continue;
            if (unlink(path) != 0)
                sl_log(SL_LOG_WARN, "--restore: unlink(%s): %s: left", path, strerror(errno));
            else
                sl_log(SL_LOG_WARN, "--restore: removed %s: its step is after the one restored (%" PRIu64 ")", path,
                       steps);
        }
    sl_free(sets);
}

/* --elastic with --restore DIR: the ranks were renumbered at every change,
 * so DIR holds a set of files for each world's steps (train_ckpt_set).
 * Every member picks the newest step whose set is complete (or
 * --restore-step's), the same from the same directory: a set of this
 * run's worker count is restored as a plain ring's (its transition or
 * offset adopted), one of another count with --reshape (worker w takes
 * w mod W_old's file). A newer incomplete set (a kill while its files were
 * written) is passed over with a warning naming its missing worker. When
 * DIR is also --checkpoint's, worker 0 removes every set of a step after
 * the one restored: this run's files of those steps must not mix with
 * them. 0 or an error. */
static int ckpt_load_elastic(struct trainer *t, int *done, struct sl_error *err)
{
    *done = 1;
    struct trainer_opts *o = &t->o;
    struct train_ckpt_set set, newest;
    int found = 0;
    char name[96];
    int rc =
        newest_complete_set(o->restore, t->restore_step_given ? &o->restore_step : NULL, &set, &found, &newest, err);
    if (rc != 0)
        return sl_error_prefix(err, "--restore: ");
    if (!found && newest.workers == 0)
        return t->restore_step_given ? sl_error_set(err, SL_EINVAL, "--restore %s: no checkpoint of step %" PRIu64,
                                                    o->restore, o->restore_step)
                                     : sl_error_set(err, SL_EINVAL, "--restore %s: no checkpoint", o->restore);
    if (newest.workers != 0) {
        train_ckpt_name(name, sizeof name, newest.steps, newest.missing, newest.workers);
        if (!found)
            return sl_error_set(err, SL_EINVAL,
                                "--restore %s: no complete checkpoint of the elastic job: step %" PRIu64
                                " of %u workers lacks worker %u's file (%s)%s",
                                o->restore, newest.steps, newest.workers, newest.missing, name,
                                t->restore_step_given ? "" : ", and no older step has every worker's");
        sl_log(SL_LOG_WARN,
               "--restore %s: step %" PRIu64 " of %u workers lacks worker %u's file (%s): continuing from step %" PRIu64
               " of %u workers, the newest every worker wrote",
               o->restore, newest.steps, newest.workers, newest.missing, name, set.steps, set.workers);
    }
    if (o->worker == 0 && o->checkpoint != NULL && strcmp(o->checkpoint, o->restore) == 0)
        prune_newer_sets(o->restore, set.steps);
    o->restore_step = set.steps;
    t->restore_step_given = 1;
    sl_log(SL_LOG_INFO, "--restore %s: step %" PRIu64 " of %u workers, the newest every worker of its world wrote",
           o->restore, set.steps, set.workers);
    if (set.workers != o->workers)
        return ckpt_load_other_shape(t, o->worker % set.workers, set.workers, err);
    *done = 0; /* the same worker count: ckpt_load goes on with --restore-step's */
    return 0;
}

/* Find and read the checkpoint to restore: this worker's newest in
 * --restore DIR, or --restore-step's. A damaged or mismatched file is
 * refused naming it; the message names the previous one, to be chosen
 * with --restore-step (never taken silently). */
static int ckpt_load(struct trainer *t, struct sl_error *err)
{
    const struct trainer_opts *o = &t->o;
    uint64_t steps[2];
    size_t n, total, other;
    char other_name[256] = "", name[96], path[TRAIN_CKPT_MAX_PATH];
    if (o->elastic != NULL) {
        int done = 0, erc = ckpt_load_elastic(t, &done, err);
        if (done || erc != 0)
            return erc;
    }
    int rc = train_ckpt_list(o->restore, o->worker, o->workers, steps, 2, &n, &total, &other, other_name,
                             sizeof other_name, err);
    if (rc != 0)
        return sl_error_prefix(err, "--restore: ");
    /* another shape's: named by its worker count, or (--reshape) its replicas */
    uint32_t w_old = 0, W_old = 0;
    if (n == 0 && other != 0 && sscanf(other_name, "ckpt-%*[0-9].w%" SCNu32 "of%" SCNu32, &w_old, &W_old) == 2 &&
        W_old > 0)
        return ckpt_load_other_shape(t, o->worker % W_old, W_old, err);
    if (o->reshape && (n > 0 || t->restore_step_given))
        return ckpt_load_other_shape(t, o->worker, o->workers, err);
    train_ckpt_name(name, sizeof name, 0, o->worker, o->workers);
    if (n == 0 && !t->restore_step_given)
        return sl_error_set(err, SL_EINVAL, "--restore %s: no checkpoint of worker %u of %u (%s and later)%s%s%s",
                            o->restore, o->worker, o->workers, name,
                            other ? "; it holds checkpoints of another worker "
                                    "count, such as "
                                  : "",
                            other_name, other ? " (--workers must be the same)" : "");
    uint64_t step = t->restore_step_given ? o->restore_step : steps[0];
    train_ckpt_name(name, sizeof name, step, o->worker, o->workers);
    if ((size_t)snprintf(path, sizeof path, "%s/%s", o->restore, name) >= sizeof path)
        return sl_error_set(err, SL_EINVAL, "--restore: the path %s/%s is too long", o->restore, name);
    struct train_ckpt_meta want;
    ckpt_meta_of(t, &want);
    double t0 = sl_clock_s();
    if ((rc = train_ckpt_read(path, &want, &t->ck, err)) != 0) {
        sl_error_prefix(err, "--restore: ");
        /* the next older one, for the message */
        uint64_t prev = UINT64_MAX;
        for (size_t i = 0; i < n; i++)
            if (steps[i] < step) {
                prev = steps[i];
                break;
            }
        if (!t->restore_step_given && prev != UINT64_MAX) {
            size_t len = strlen(err->msg);
            snprintf(err->msg + len, sizeof err->msg - len,
                     "; the previous checkpoint of this worker is step %" PRIu64 ": give --restore-step %" PRIu64
                     " to continue from it",
                     prev, prev);
        }
        return rc;
    }
    if (train_ckpt_steps(&t->ck.meta) != step) {
        rc = sl_error_set(err, SL_ECORRUPT, "--restore: %s holds step %" PRIu64 " (the name says %" PRIu64 ")", path,
                          train_ckpt_steps(&t->ck.meta), step);
        train_ckpt_free(&t->ck);
        return rc;
    }
    t->start_step = step;
    adopt_transition(t);
    sl_log(SL_LOG_INFO,
           "restoring step %" PRIu64 " (epoch %" PRIu64 ", input position %" PRIu64 ") from %s: %" PRIu64
           " parameters, read and checked in %.1f ms",
           step, t->ck.meta.pos.epoch, t->ck.meta.pos.seq, path, t->ck.meta.nparams, 1e3 * (sl_clock_s() - t0));
    if (o->model != MODEL_NONE && (t->ck.meta.lr != want.lr || t->ck.meta.momentum != want.momentum))
        sl_log(SL_LOG_WARN,
               "--restore: %s was made with --lr %g --momentum %g; training continues with --lr %g "
               "--momentum %g",
               path, (double)t->ck.meta.lr, (double)t->ck.meta.momentum, (double)want.lr, (double)want.momentum);
    return 0;
}

/* Before the rendezvous: --checkpoint's directory ready and cleaned of this
 * worker's temporaries (a write a kill cut short), --restore's checkpoint
 * read and checked. A fresh run (no --restore) into a directory that
 * already holds this worker's checkpoints is refused: its files would mix
 * with theirs. 0, or 1 with the error logged. */
int trainer_prepare_checkpoints(struct trainer *t)
{
    const struct trainer_opts *o = &t->o;
    struct sl_error err = {0};
    size_t removed = 0;
    const char *dirs[2] = {o->checkpoint, o->restore};
    if (o->checkpoint != NULL && trainer_ckpt_dir_ready(o->checkpoint, &err) != 0)
        goto fail;
    for (int i = 0; i < 2 && o->join == NULL; i++) { /* a joiner's place is not known yet: others may be writing */
        if (dirs[i] == NULL || (i == 1 && dirs[0] != NULL && strcmp(dirs[0], dirs[1]) == 0))
            continue;
        if (train_ckpt_clean(dirs[i], o->worker, o->workers, &removed, &err) != 0) {
            if (i == 0)
                goto fail;
            continue; /* --restore's directory: read-only is fine; the listing reports a missing one */
        }
        if (removed > 0)
            sl_log(SL_LOG_WARN,
                   "checkpoint: removed %zu temporary file(s) of worker %u of %u in %s (a write cut "
                   "short)",
                   removed, o->worker, o->workers, dirs[i]);
    }
    if (t->restoring && ckpt_load(t, &err) != 0)
        goto fail;
    if (o->checkpoint != NULL && !t->restoring && o->join == NULL) { /* a joiner writes into its job's */
        uint64_t newest;
        size_t n, total, other = 0;
        char other_name[256] = "";
        if (train_ckpt_list(o->checkpoint, o->worker, o->workers, &newest, 1, &n, &total, &other, other_name,
                            sizeof other_name, &err) != 0)
            goto fail;
        if (n == 0 && other > 0 && o->elastic != NULL) { /* its worlds' sets would mix with theirs */
            sl_error_set(&err, SL_EINVAL,
                         "--checkpoint %s already holds %zu checkpoint(s) of other worker counts (such as %s): an "
                         "elastic job writes every world's there; give --restore %s to continue from them, or "
                         "another directory",
                         o->checkpoint, other, other_name, o->checkpoint);
            goto fail;
        }
        if (n > 0) {
            sl_error_set(&err, SL_EINVAL,
                         "--checkpoint %s already holds %zu checkpoint(s) of worker %u of %u (the "
                         "newest: step %" PRIu64 "): give --restore %s to continue from it, or another directory",
                         o->checkpoint, total, o->worker, o->workers, newest, o->checkpoint);
            goto fail;
        }
    }
    return 0;
fail:
    sl_log(SL_LOG_ERROR, "%s", err.msg);
    return 1;
}

/* --elastic: how many of this worker's newest files (worker w of n) to
 * keep after writing step `steps` so that --keep never removes a file of
 * the newest complete set: the other members may not have written step
 * `steps` yet, and a world of the same size before a change (its ranks
 * renumbered) left files of these names. Its steps are the job's global
 * step, which only grows across the worlds, so that set's file and the
 * newer ones are this worker's newest. A set of another worker count is
 * never pruned here (the members of that world prune it, when the job has
 * that size again). */
static int elastic_keep(const char *dir, uint32_t w, uint32_t n, uint64_t steps, uint32_t *keep, struct sl_error *err)
{
    struct train_ckpt_set set;
    int found = 0;
    int rc = newest_complete_set(dir, NULL, &set, &found, NULL, err);
    if (rc != 0)
        return sl_error_prefix(err, "checkpoint: ");
    if (!found || set.workers != n || set.steps >= steps)
        return 0;
    uint64_t mine[64];
    size_t got = 0, total = 0;
    if ((rc = train_ckpt_list(dir, w, n, mine, sizeof mine / sizeof mine[0], &got, &total, NULL, NULL, 0, err)) != 0)
        return sl_error_prefix(err, "checkpoint: ");
    uint32_t need = 0;
    for (size_t i = 0; i < got && mine[i] >= set.steps; i++)
        if (mine[i] <= steps)
            need++;
    if (need > *keep)
        *keep = need;
    return 0;
}

/* After the step whose first piece is first_seq has trained: a checkpoint
 * when one is due (every --checkpoint-every steps, and after each epoch's
 * last step; `force`: now, unless this step's is written already: a stop
 * signal), the weights after the step and the position of the next.
 * --trace and --metrics are flushed first, so their lines up to the
 * checkpoint outlive a kill. 0, or 1 with the error logged. */
int trainer_maybe_checkpoint(struct trainer *t, uint64_t epoch, uint64_t first_seq, uint32_t flags, int force)
{
    const struct trainer_opts *o = &t->o;
    if (o->checkpoint == NULL)
        return 0;
    uint64_t next = first_seq + t->replicas, steps = t->step_base + next / t->replicas;
    if (force ? t->ckpts > 0 && t->ckpt_last == steps
              : !(flags & SL_WIRE_PIECE_LAST_STEP) && (o->checkpoint_every == 0 || steps % o->checkpoint_every != 0))
        return 0;
    struct sl_error err = {0};
    struct train_ckpt_meta m;
    const float *w = NULL, *v = NULL;
    size_t np = 0;
    ckpt_meta_of(t, &m);
    int rc = client_input_position_at(&m.pos, next, t->replicas, epoch, &err);
    if (rc == 0 && t->loop != NULL && (rc = train_loop_state(t->loop, &w, &v, &np, &err)) == 0) {
        m.nparams = np;
        m.inputs = trainer_input_width(t);
    }
    if (t->tf != NULL)
        fflush(t->tf);
    if (t->mf != NULL)
        fflush(t->mf);
    double t0 = sl_clock_s();
    uint64_t bytes = 0;
    if (rc == 0)
        rc = train_ckpt_write(o->checkpoint, &m, w, v, &bytes, &err);
    uint32_t keep = o->keep;
    if (rc == 0 && o->elastic != NULL)
        rc = elastic_keep(o->checkpoint, o->worker, o->workers, steps, &keep, &err);
    if (rc == 0 && (rc = train_ckpt_prune(o->checkpoint, o->worker, o->workers, steps, keep, &err)) != 0)
        sl_error_prefix(&err, "checkpoint: ");
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return 1;
    }
    double dt = sl_clock_s() - t0;
    t->ckpt_s_total += dt;
    t->ckpts++;
    t->ckpt_last = steps;
    char name[96];
    train_ckpt_name(name, sizeof name, steps, o->worker, o->workers);
    sl_log(SL_LOG_INFO,
           "checkpoint: step %" PRIu64 " (epoch %" PRIu64 ") written to %s/%s, %" PRIu64 " bytes in %.1f ms", steps,
           epoch, o->checkpoint, name, bytes, 1e3 * dt);
    return 0;
}
