/* client_input: the input families, written for either endpoint (see
 * client_input.h).
 *
 * Threads: client_input_step runs on the client's thread and owns the
 * `last_*` marks, bound_mark and the closed clients' waits (fw_base:
 * client_input_client_closing runs there too); client_input_write (the server's thread)
 * reads the histograms and the copied waits through relaxed atomics, and
 * asks for the input's bound through bound_wanted.
 */
#include "client_input.h"

#include <stdio.h>
#include <string.h>

#include "sl_clock.h"

void client_input_init(struct client_input *in)
{
    for (size_t j = 0; j < CLIENT_MAX_FEEDERS; j++)
        atomic_init(&in->fw_ns[j], 0);
    memset(in->fw_base, 0, sizeof in->fw_base);
    in->nbase = 0;
    atomic_init(&in->nfeeders, 0);
    atomic_init(&in->bound_wanted, 1);
    atomic_init(&in->bound_feeder, -1);
    atomic_init(&in->bound_stage, -1);
    sl_hist_init(&in->step, sl_hist_step_bounds_ns, sl_hist_step_nbounds);
    sl_hist_init(&in->wait, sl_hist_step_bounds_ns, sl_hist_step_nbounds);
    in->last_ns = in->last_wait_ns = 0;
    in->stepped = 0;
}

/* The feeder whose wait grew most since the last evaluation, and its
 * busiest stage. */
static void find_bound(struct client_input *in, struct client *cl, const uint64_t *w_ns, size_t F)
{
    int worst = -1;
    uint64_t most = 0;
    for (size_t j = 0; j < F; j++) {
        uint64_t d = w_ns[j] > in->bound_mark[j] ? w_ns[j] - in->bound_mark[j] : 0;
        in->bound_mark[j] = w_ns[j];
        if (d > most) {
            most = d;
            worst = (int)j;
        }
    }
    uint64_t ns[SL_WIRE_STAGES];
    int stage = -1;
    if (worst >= 0 && client_feeder_stages(cl, (size_t)worst, ns, &stage) != 0)
        stage = -1;
    atomic_store_explicit(&in->bound_stage, stage, memory_order_relaxed);
    atomic_store_explicit(&in->bound_feeder, worst, memory_order_relaxed);
}

/* The wait by feeder into w_ns: the clients' closed before (fw_base) plus
 * cl's; the count, never fewer than those clients had (a feeder's series
 * stays). */
static size_t client_input_by_feeder(const struct client_input *in, struct client *cl, uint64_t *w_ns)
{
    double w[CLIENT_MAX_FEEDERS];
    size_t F = client_wait_by_feeder(cl, w, CLIENT_MAX_FEEDERS);
    if (F > CLIENT_MAX_FEEDERS)
        F = CLIENT_MAX_FEEDERS;
    for (size_t j = 0; j < F; j++)
        w_ns[j] = in->fw_base[j] + (uint64_t)(w[j] * 1e9 + 0.5);
    for (size_t j = F; j < in->nbase; j++)
        w_ns[j] = in->fw_base[j];
    return F > in->nbase ? F : in->nbase;
}

void client_input_client_closing(struct client_input *in, struct client *cl)
{
    if (cl == NULL)
        return;
    uint64_t w_ns[CLIENT_MAX_FEEDERS];
    size_t F = client_input_by_feeder(in, cl, w_ns);
    memcpy(in->fw_base, w_ns, F * sizeof *w_ns);
    in->nbase = F;
    /* shown until the next client's first step */
    for (size_t j = 0; j < F; j++)
        atomic_store_explicit(&in->fw_ns[j], w_ns[j], memory_order_relaxed);
    atomic_store_explicit(&in->nfeeders, F, memory_order_release);
}

/* The step's input wait is the wait counted since the previous one; the
 * time between steps is measured from the second on. */
void client_input_step(struct client_input *in, uint64_t waited_ns, struct client *cl)
{
    uint64_t now = sl_clock_ns();
    if (in->stepped)
        sl_hist_observe(&in->step, now - in->last_ns);
    sl_hist_observe(&in->wait, waited_ns - in->last_wait_ns);
    in->last_ns = now;
    in->last_wait_ns = waited_ns;
    in->stepped = 1;
    if (cl == NULL)
        return;
    uint64_t w_ns[CLIENT_MAX_FEEDERS];
    size_t F = client_input_by_feeder(in, cl, w_ns);
    for (size_t j = 0; j < F; j++)
        atomic_store_explicit(&in->fw_ns[j], w_ns[j], memory_order_relaxed);
    atomic_store_explicit(&in->nfeeders, F, memory_order_release);
    if (atomic_exchange_explicit(&in->bound_wanted, 0, memory_order_relaxed))
        find_bound(in, cl, w_ns, F);
}

void client_input_write(struct client_input *in, struct sl_prom *p, const struct client_input_counts *c,
                        const char *step_help)
{
    sl_prom_counter(p, "sluice_trainer_steps_total", "Steps received (one piece per replica each).", c->steps);
    sl_prom_counter(p, "sluice_trainer_epochs_total", "Epochs begun.", c->epochs);
    sl_prom_counter(p, "sluice_trainer_pieces_total", "Pieces received.", c->pieces);
    sl_prom_counter(p, "sluice_trainer_shm_pieces_total", "Pieces read in a feeder's shared memory (no copy).",
                    c->shm_pieces);
    sl_prom_counter(p, "sluice_trainer_samples_total", "Samples (rows) received.", c->rows);
    sl_prom_counter(p, "sluice_trainer_received_bytes_total", "Tensor bytes received.", c->bytes);
    sl_prom_counter_seconds(p, "sluice_trainer_input_wait_seconds_total",
                            "Time waiting for pieces (the input stall), all feeders.", c->wait_ns);
    size_t F = atomic_load_explicit(&in->nfeeders, memory_order_acquire);
    if (F > 0) {
        const char *name = "sluice_trainer_input_wait_by_feeder_seconds_total";
        sl_prom_family(p, name, "counter",
                       "Time waiting for pieces, by the feeder whose piece ended each wait (the piece next in order; "
                       "after a takeover, the survivor's index). As of the last step received.");
        for (size_t j = 0; j < F; j++) {
            char label[32];
            snprintf(label, sizeof label, "feeder=\"%zu\"", j);
            sl_prom_seconds(p, name, label, atomic_load_explicit(&in->fw_ns[j], memory_order_relaxed));
        }
    }
    atomic_store_explicit(&in->bound_wanted, 1, memory_order_relaxed);
    int bf = atomic_load_explicit(&in->bound_feeder, memory_order_relaxed);
    if (bf >= 0) {
        char label[64];
        int st = atomic_load_explicit(&in->bound_stage, memory_order_relaxed);
        snprintf(label, sizeof label, "feeder=\"%d\",stage=\"%s\"", bf, st >= 0 ? client_stage_name(st) : "");
        sl_prom_family(p, "sluice_trainer_input_bound_info", "gauge",
                       "Between the two scrapes before this one: the feeder the input waited for most, and its busiest "
                       "stage lately (from its STATS; \"\" before two); always 1, absent when nothing was waited for.");
        sl_prom_u64(p, "sluice_trainer_input_bound_info", label, 1);
    }
    struct sl_hist_snap h;
    sl_hist_snapshot(&in->step, &h);
    sl_prom_hist(p, "sluice_trainer_step_seconds", step_help, NULL, &h);
    sl_hist_snapshot(&in->wait, &h);
    sl_prom_hist(p, "sluice_trainer_step_input_wait_seconds", "Each step's time waiting for its pieces.", NULL, &h);
    sl_prom_counter(p, "sluice_trainer_feeder_rejoins_total", "Feeders lost and asked to resume.", c->rejoins);
    sl_prom_counter(p, "sluice_trainer_feeder_takeovers_total", "Lost feeders' shares taken over by surviving feeders.",
                    c->takeovers);
    sl_prom_counter(p, "sluice_trainer_feeder_joins_total", "Feeders that joined the running job (from a ROSTER).",
                    c->joins);
}
