/* sluice-trainer: a trainer worker. With --model none it only consumes the
 * job's pieces (the input benchmark and the verification harness): every
 * piece can be written to a trace, one JSON line each, with the values of an
 * int64 feature (default `id`), and a summary line ends the run.
 *
 * With --model softmax|mlp it trains (train_loop.h) on CPU replicas, or on
 * GPU replicas (--devices gpu:..., builds with CUDA), receiving step s+1
 * while step s runs.
 *
 * main is a sequence: configure (train_main_opts.c: the option table
 * `opt_rows`, the cluster spec, the endpoint lists; every usage error exits
 * 2 before anything starts), a parameter-server or evaluator task instead
 * of a worker (train_main_ps.c), the trace and the checkpoints
 * (train_main_output.c, train_main_ckpt.c), meet (the rendezvous), start
 * (feeders, model, ring), run (the training loop), finish and evaluate
 * (train_main_run.c), report (the summary, train_main_output.c); one
 * cleanup ladder undoes what was set up.
 */
#include "train_main_int.h"

#include <inttypes.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_log.h"
#include "train_expose.h"

/* The stop signal's number (SIGINT, SIGTERM), 0 until one comes: every
 * wait checks it (the client's, the rendezvous', the ring's) and ends
 * within 250 ms; the trainer then exits 128 + the signal's number. */
volatile sig_atomic_t trainer_stop_flag;
volatile sig_atomic_t trainer_leave_flag;
volatile sig_atomic_t trainer_stop_wanted;
static int term_leaves; /* --elastic: the first SIGTERM asks to leave (trainer_leave_flag) */
/* trainer_stop_agree_begin .. _end: the first signal is a wish the
 * workers agree on (trainer_stop_wanted), stop_grace_s its grace */
static volatile sig_atomic_t stop_agreeing;
static unsigned stop_grace_s;

static void on_stop(int sig)
{
    if (sig == SIGTERM && term_leaves && !trainer_leave_flag)
        trainer_leave_flag = 1;
    else if (stop_agreeing && !trainer_stop_wanted) {
        trainer_stop_wanted = sig;
        alarm(stop_grace_s); /* async-signal-safe; its SIGALRM is on_grace */
    } else {
        /* no agreement to wait for, or a second signal: stop now (as the first one) */
        trainer_stop_flag = trainer_stop_wanted ? trainer_stop_wanted : sig;
    }
}

/* The grace is over: the workers did not all reach the step that would
 * have stopped them together (a peer is gone or hung), so stop now. */
static void on_grace(int sig)
{
    (void)sig;
    if (trainer_stop_wanted && !trainer_stop_flag)
        trainer_stop_flag = trainer_stop_wanted;
}

void trainer_stop_agree_begin(unsigned grace_s)
{
    stop_grace_s = grace_s > 0 ? grace_s : 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_grace;
    sigaction(SIGALRM, &sa, NULL);
    stop_agreeing = 1;
}

/* The steps are over: a wish not yet acted on becomes the stop itself
 * (as a signal after the last step always did), and the grace's alarm is
 * off. */
void trainer_stop_agree_end(void)
{
    stop_agreeing = 0;
    alarm(0);
    if (trainer_stop_wanted && !trainer_stop_flag)
        trainer_stop_flag = trainer_stop_wanted;
}

/* The process around the run: the heap's thresholds, the log, and
 * SIGINT/SIGTERM setting trainer_stop_flag (or, while the workers agree
 * on their stop, trainer_stop_wanted first). */
static void setup_process(const struct trainer_opts *o, int is_ps)
{
    /* ZeroMQ allocates every received piece of a copied stream (one malloc
     * per message, ~200 KB for the Fashion-MNIST job) and the client frees
     * them out of order. glibc's defaults map large blocks afresh and give
     * the heap's top back to the kernel, so each piece's pages were faulted
     * in again: 13% of the receiving I/O thread's time, and 25% more
     * throughput by copy without it (docs/performance.md, "The copy path
     * across hosts"). Blocks below 64 MiB now come from the heap, and the
     * heap keeps up to 1 GiB it no longer uses: at most what the client's
     * window needed at peak. */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    sl_log_setup("sluice-trainer", 2,
                 o->quiet && o->log_level < SL_LOG_WARN ? SL_LOG_WARN : (enum sl_log_level)o->log_level);
    sl_log_set_format((enum sl_log_format)o->log_format);
    term_leaves = o->elastic != NULL && !is_ps; /* a ps task is no worker: SIGTERM stops it */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int main(int argc, char **argv)
{
    static struct trainer t; /* a device spec and three lists: kept off the stack, all zero */
    int status = trainer_configure(&t, argc, argv);
    if (status != 0 || t.done)
        goto out_free_lists;
    trainer_split_stdout(&t);
    setup_process(&t.o, t.is_ps);
    if (train_metrics_create(&t.m) != 0) {
        sl_log(SL_LOG_ERROR, "out of memory");
        status = 1;
        goto out_free_lists;
    }
    if (t.is_ps) { /* its own /metrics (serve_ps) */
        status = trainer_serve_ps(&t);
        goto out_free_lists;
    }
    if (t.is_evaluator) {
        status = trainer_run_evaluator(&t);
        goto out_free_lists;
    }
    /* the worker label is fixed for the process's life: an elastic joiner
     * has no index before its admission (and a change may renumber a
     * member), so it is labelled by its --join */
    char index[16];
    snprintf(index, sizeof index, "%" PRIu32, t.o.worker);
    if ((status = train_expose_start(&t.expose, t.o.metrics_listen, t.m, &t.loop, &t.cl, t.o.job,
                                     t.o.join != NULL ? t.o.join : index)) != 0)
        goto out_free_lists;
    if (t.o.elastic != NULL) /* a joiner serves from its start: no world until admitted */
        train_expose_world(t.expose, t.o.join != NULL ? 0 : t.o.workers, t.o.join != NULL ? 0 : t.o.worker, 0);
    if (trainer_open_trace(&t) != 0) {
        status = 1;
        goto out_free_lists;
    }
    if (trainer_prepare_checkpoints(&t) != 0 || trainer_meet(&t) != 0) {
        status = 1;
        goto out_abort_trace;
    }
    t.t0 = sl_clock_s();
    status = trainer_start(&t);
    if (status == 0)
        status = trainer_run(&t);
    if (status == 0 && t.o.mode == MODE_PS && t.loop != NULL)
        status = trainer_ps_finish(&t);
    t.t_train_end = sl_clock_s();
    status = trainer_finish_training(&t, status);
    if (status == 0 && trainer_stop_flag && t.loop != NULL && t.o.eval_connect != NULL) {
        sl_log(SL_LOG_INFO, "stopped by a signal before the evaluation");
        status = 1;
    }
    if (status == 0 && t.loop != NULL && t.o.eval_connect != NULL && !trainer_stop_flag)
        status = trainer_evaluate(&t, NULL);
    status = trainer_report(&t, status);
    trainer_elastic_close(&t);
    trainer_ps_elastic_close(&t);
    train_loop_destroy(t.loop);
    train_ring_close(t.ring);
    client_close(t.cl);
out_abort_trace:
    sl_output_abort(t.trace_out); /* what trainer_report() did not commit */
    train_ckpt_free(&t.ck);
out_free_lists:
    train_expose_stop(t.expose); /* every thread adding to t.m has ended */
    sl_metrics_destroy(t.m);
    sl_cluster_list_free(&t.eval_feeders);
    sl_cluster_list_free(&t.ps_eps);
    sl_cluster_list_free(&t.ring_eps);
    sl_free(t.spec_curve_key);
    sl_free(t.spec_curve_server);
    sl_cluster_list_free(&t.feeders);
    /* a run a signal cut short: 130 (SIGINT) or 143 (SIGTERM); one that had
     * finished when the signal came keeps its 0 */
    return trainer_stop_flag && status != 0 ? 128 + (int)trainer_stop_flag : status;
}
