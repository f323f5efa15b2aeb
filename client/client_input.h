/* client_input: the input families of a worker's /metrics, one writer for
 * both endpoints that serve them: sluice-trainer's (trainer/train_expose.c)
 * and the client library's (client_expose.c, metrics_listen). Same names,
 * labels and meaning wherever they come from, so the dashboard cannot tell
 * a Python worker from sluice-trainer: sluice_trainer_steps_total,
 * epochs, pieces, shm_pieces, samples, received_bytes, the input wait (in
 * all, by feeder, per step), the input's bound (feeder and stage), the
 * time between steps, feeder rejoins, takeovers and joins
 * (docs/operations.md).
 *
 * The live part the counters cannot give (the wait by feeder, the bound,
 * the histograms) is updated by client_input_step on the thread that
 * counts steps (the client's), and read by client_input_write on the
 * server's through relaxed atomics: a step behind at most.
 *
 * Thread-safe: step on the client's thread, write on the server's.
 */
#ifndef CLIENT_INPUT_H
#define CLIENT_INPUT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "sl_hist.h"
#include "sl_prom.h"
#include "client.h"

struct client_input {
    _Atomic uint64_t fw_ns[CLIENT_MAX_FEEDERS]; /* the wait by feeder, as of the last step */
    _Atomic size_t nfeeders;
    /* the feeder waited for most between two scrapes and its busiest
     * stage (its STATS); -1: none. A scrape sets bound_wanted, the next
     * step evaluates. */
    _Atomic int bound_wanted, bound_feeder, bound_stage;
    uint64_t bound_mark[CLIENT_MAX_FEEDERS]; /* step's: the wait by feeder at the last evaluation */
    uint64_t fw_base[CLIENT_MAX_FEEDERS];    /* step's: the wait by feeder of the clients closed before this one */
    size_t nbase;                            /* step's: the most feeders those clients had */
    struct sl_hist step, wait;               /* time between steps; each step's input wait */
    uint64_t last_ns, last_wait_ns;          /* step's: the previous step's */
    int stepped;
};

/* Ready (nothing observed, no bound). */
void client_input_init(struct client_input *in);

/* A step was received: waited_ns is the client's input wait in all now
 * (CLIENT_M_WAIT_NS); cl the client (NULL: not open yet, no wait by
 * feeder). The client's thread. */
void client_input_step(struct client_input *in, uint64_t waited_ns, struct client *cl);

/* The client cl is about to close and another may take its place (an
 * elastic trainer's world changed): its wait by feeder so far is kept and
 * the next client's added to it, so the by-feeder counters go on growing
 * (a client's own start from 0). NULL cl: nothing. The thread that calls
 * client_input_step. */
void client_input_client_closing(struct client_input *in, struct client *cl);

/* The counts the families show (a snapshot's). */
struct client_input_counts {
    uint64_t steps, epochs, pieces, shm_pieces, rows, bytes, wait_ns, rejoins, takeovers, joins;
};

/* Write the families into p (errors stick in p->rc); step_help: the help
 * of sluice_trainer_step_seconds (what a step's time holds there). */
void client_input_write(struct client_input *in, struct sl_prom *p, const struct client_input_counts *c,
                        const char *step_help);

#endif
