/* sluice-bench seek: how long a feeder takes to reach a resuming trainer's
 * step in the plan (feeder/feed_plan.h), and whether that depends on the
 * data's size.
 *
 * A trainer resuming at step N says HELLO with resume_seq = N x R (worker
 * w's piece stream has R pieces a step); the feeder makes worker w's plan
 * and calls feed_plan_seek, then feed_plan_next for the `within` pieces it
 * names (none: the seek goes all the way). That is timed here, plan
 * creation included, for worker 0 of a job of F files of about K records
 * each (+-5%, so the interleave sees files end at different times), and
 * again with K x 10 and K x 100 records (--scales), the same step N each
 * time. Two baselines, measured in the same run:
 *   - epoch + next: feed_plan_seek to the first piece of the epoch holding
 *     step N, then feed_plan_next over the pieces of that epoch before it
 *     (how the feeder reached the step before the plan's fast-forward);
 *   - from the start: feed_plan_next making all N x R pieces from seq 0
 *     (what producing the same pieces costs).
 * The piece at step N is compared between the seek and the baseline: a
 * difference fails the run (exit 1). Nothing reads data: the plan names
 * records, so the figures are the plan's arithmetic alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "feed_plan.h"
#include "sl_alloc.h"
#include "sl_clock.h"

struct seek_job {
    struct feed_plan_config cfg;
    uint64_t *counts;
    uint64_t records; /* all files */
    uint64_t seq;     /* the first piece of step N */
};

/* The piece at seq, kept to compare the ways of reaching it. */
struct kept {
    uint64_t seq;
    size_t n;
    struct feed_elem *elems;
};

static int keep(struct kept *k, const struct feed_piece *pc, size_t cap)
{
    k->seq = pc->seq;
    k->n = pc->n < cap ? pc->n : cap;
    if (k->n > 0)
        memcpy(k->elems, pc->elems, k->n * sizeof *k->elems);
    return pc->n <= cap ? 0 : -1;
}

/* Field by field: struct feed_elem has padding, which no copy need keep. */
static int same(const struct kept *a, const struct kept *b)
{
    if (a->seq != b->seq || a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (a->elems[i].file != b->elems[i].file || a->elems[i].record != b->elems[i].record)
            return 0;
    return 1;
}

/* Seconds to make worker 0's plan, seek to `seq` and pass over what the
 * seek leaves; the piece at seq into *out. -1 on an error (said). */
static double time_seek(const struct seek_job *j, uint64_t seq, struct kept *out, size_t cap, uint64_t *within)
{
    struct feed_plan *p;
    struct feed_piece pc;
    struct sl_error err = {0};
    double t0 = sl_clock_s();
    if (feed_plan_create(&p, &j->cfg, 0, &err) != 0) {
        fprintf(stderr, "sluice-bench seek: %s\n", err.msg);
        return -1;
    }
    int rc = feed_plan_seek(p, seq, within);
    for (uint64_t i = 0; rc == 0 && i < *within; i++)
        rc = feed_plan_next(p, &pc, &err);
    double el = sl_clock_s() - t0;
    if (rc == 0)
        rc = feed_plan_next(p, &pc, &err);
    if (rc == 0 && keep(out, &pc, cap) != 0)
        rc = -1;
    feed_plan_destroy(p);
    if (rc != 0) {
        fprintf(stderr, "sluice-bench seek: the plan ended before seq %llu\n", (unsigned long long)seq);
        return -1;
    }
    return el;
}

/* Seconds to make worker 0's plan and `seq` pieces with feed_plan_next;
 * the piece at seq into *out. */
static double time_next(const struct seek_job *j, uint64_t seq, struct kept *out, size_t cap)
{
    struct feed_plan *p;
    struct feed_piece pc;
    struct sl_error err = {0};
    double t0 = sl_clock_s();
    if (feed_plan_create(&p, &j->cfg, 0, &err) != 0) {
        fprintf(stderr, "sluice-bench seek: %s\n", err.msg);
        return -1;
    }
    int rc = 0;
    uint64_t sum = 0; /* touch every element, as a reader would name it */
    for (uint64_t i = 0; rc == 0 && i < seq; i++) {
        rc = feed_plan_next(p, &pc, &err);
        for (size_t e = 0; rc == 0 && e < pc.n; e++)
            sum += pc.elems[e].record;
    }
    double el = sl_clock_s() - t0;
    if (rc == 0)
        rc = feed_plan_next(p, &pc, &err);
    if (rc == 0 && keep(out, &pc, cap) != 0)
        rc = -1;
    feed_plan_destroy(p);
    if (rc != 0) {
        fprintf(stderr, "sluice-bench seek: the plan ended before seq %llu\n", (unsigned long long)seq);
        return -1;
    }
    return sum == UINT64_MAX ? el + 1e-12 : el; /* keeps sum alive */
}

/* Before the fast-forward: seconds to make worker 0's plan, put it at the
 * first piece of the epoch (seq `first`, where feed_plan_seek only resets
 * the epoch's state) and make the epoch's first `in_epoch` pieces with
 * feed_plan_next; the next piece into *out. */
static double time_epoch_next(const struct seek_job *j, uint64_t first, uint64_t in_epoch, struct kept *out, size_t cap)
{
    struct feed_plan *p;
    struct feed_piece pc;
    struct sl_error err = {0};
    uint64_t within = 0;
    double t0 = sl_clock_s();
    if (feed_plan_create(&p, &j->cfg, 0, &err) != 0) {
        fprintf(stderr, "sluice-bench seek: %s\n", err.msg);
        return -1;
    }
    int rc = feed_plan_seek(p, first, &within);
    for (uint64_t i = 0; rc == 0 && i < within + in_epoch; i++)
        rc = feed_plan_next(p, &pc, &err);
    double el = sl_clock_s() - t0;
    if (rc == 0)
        rc = feed_plan_next(p, &pc, &err);
    if (rc == 0 && keep(out, &pc, cap) != 0)
        rc = -1;
    feed_plan_destroy(p);
    if (rc != 0) {
        fprintf(stderr, "sluice-bench seek: the plan ended before seq %llu\n", (unsigned long long)(first + in_epoch));
        return -1;
    }
    return el;
}

static int job_make(struct seek_job *j, const struct feed_plan_config *base, long files, long records, long scale,
                    long steps)
{
    memset(j, 0, sizeof *j);
    j->cfg = *base;
    j->counts = sl_malloc((size_t)files * sizeof *j->counts);
    if (j->counts == NULL) {
        fprintf(stderr, "sluice-bench seek: out of memory for %ld files\n", files);
        return -1;
    }
    uint64_t k = (uint64_t)records * (uint64_t)scale;
    for (long f = 0; f < files; f++) {
        /* +-5%, fixed per file */
        int64_t d = (int64_t)(((uint64_t)f * 7919u) % 11u) - 5;
        j->counts[f] = (uint64_t)((int64_t)k + d * (int64_t)(k / 100));
        j->records += j->counts[f];
    }
    j->cfg.nfiles = (size_t)files;
    j->cfg.counts = j->counts;
    j->seq = (uint64_t)steps * base->replicas;
    return 0;
}

/* The command line. */
struct seek_params {
    long files, records, batch, shuffle, cycle, workers, replicas, steps, repeat;
    int scales[8], nscales, json, per_replica, drop, no_baseline;
    const char *policy, *hint;
};

/* One scale's figures, as printed. */
struct seek_row {
    int scale;
    const struct seek_job *j;
    const struct feed_plan_summary *sum;
    uint64_t epoch, in_epoch, within;
    struct bench_stat st; /* of the seeks */
    double old, start;    /* epoch + next, from the start (-1: not run) */
};

/* The table's header: the settings, then the column names. */
static void print_header(const struct seek_params *p, const struct feed_plan_config *base)
{
    printf("sluice-bench seek: %ld files x ~%ld records x scale, global batch %ld, shuffle %ld, "
           "parallel reads %ld,\n  W %ld x R %ld, %s%s%s%s; worker 0 to step %ld (seq %llu); seek: median "
           "[min-max] of %ld\n\n"
           " %-6s %-12s %-11s %-7s %-10s %-28s %-10s %-11s %-11s %-11s %-8s\n",
           p->files, p->records, p->batch, p->shuffle, p->cycle, p->workers, p->replicas,
           p->per_replica ? "per-replica input" : "policy ", p->per_replica ? "" : feed_policy_name(base->policy),
           !p->per_replica && base->policy == FEED_SHARD_HINT ? "=" : "",
           !p->per_replica && base->policy == FEED_SHARD_HINT ? feed_hint_name(base->hint) : "", p->steps,
           (unsigned long long)p->steps * (unsigned long long)p->replicas, p->repeat, "scale", "records", "steps/ep",
           "epoch", "in epoch", "seek ms", "steps/s", "pieces/s", "epoch+next", "from start", "ratio");
}

/* One scale's row: a JSON object with --json, else a line of the table. */
static void print_row(const struct seek_params *p, const struct feed_plan_config *base, const struct seek_row *r)
{
    const struct seek_job *j = r->j;
    const struct bench_stat *st = &r->st;
    double sps = (double)p->steps / st->median, pps = (double)j->seq / st->median;
    double ratio = (p->no_baseline ? r->old : r->start) / st->median;
    if (p->json) {
        printf("{\"bench\":\"seek\",\"scale\":%d,\"files\":%ld,\"records\":%llu,\"global_batch\":%ld,"
               "\"shuffle_buffer\":%ld,\"parallel_reads\":%ld,\"workers\":%ld,\"replicas\":%ld,"
               "\"policy\":\"%s\",\"per_replica\":%d,\"steps\":%ld,\"seq\":%llu,\"steps_per_epoch\":%llu,"
               "\"epoch\":%llu,\"pieces_in_epoch\":%llu,\"within\":%llu,"
               "\"seek_s\":{\"median\":%.6g,\"min\":%.6g,\"max\":%.6g},\"steps_per_s\":%.6g,"
               "\"pieces_per_s\":%.6g,\"epoch_next_s\":%.6g,\"from_start_s\":%.6g,\"ratio\":%.6g,"
               "\"ratio_against\":\"%s\"}\n",
               r->scale, p->files, (unsigned long long)j->records, p->batch, p->shuffle, p->cycle, p->workers,
               p->replicas, feed_policy_name(base->policy), p->per_replica, p->steps, (unsigned long long)j->seq,
               (unsigned long long)r->sum->steps, (unsigned long long)r->epoch, (unsigned long long)r->in_epoch,
               (unsigned long long)r->within, st->median, st->min, st->max, sps, pps, r->old,
               p->no_baseline ? -1.0 : r->start, ratio, p->no_baseline ? "epoch_next" : "from_start");
        return;
    }
    char sc[16], rec[24], ms[48], old_s[24], start_s[24];
    snprintf(sc, sizeof sc, "x%d", r->scale);
    snprintf(rec, sizeof rec, "%.3g", (double)j->records);
    snprintf(ms, sizeof ms, "%.3f [%.3f-%.3f]", st->median * 1e3, st->min * 1e3, st->max * 1e3);
    snprintf(old_s, sizeof old_s, "%.3f s", r->old);
    snprintf(start_s, sizeof start_s, p->no_baseline ? "-" : "%.3f s", r->start);
    printf(" %-6s %-12s %-11llu %-7llu %-10llu %-28s %-10.3g %-11.3g %-11s %-11s %-8.3g\n", sc, rec,
           (unsigned long long)r->sum->steps, (unsigned long long)r->epoch, (unsigned long long)r->in_epoch, ms, sps,
           pps, old_s, start_s, ratio);
}

/* One scale: times the seek, checks it against epoch + next and (unless
 * --no-baseline) iteration from the start, prints its row (the header first
 * when *header is 0, then sets it). a and b hold up to cap elements each.
 * Returns 0, or 1 on failure (the message on stderr). */
static int run_scale(const struct seek_params *p, const struct feed_plan_config *base, int scale, struct kept *a,
                     struct kept *b, size_t cap, int *header)
{
    struct seek_job j;
    if (job_make(&j, base, p->files, p->records, scale, p->steps) != 0)
        return 1;
    struct feed_plan_summary sum;
    struct sl_error err = {0};
    if (feed_plan_summarize(&j.cfg, 0, &sum, &err) != 0) {
        fprintf(stderr, "sluice-bench seek: %s\n", err.msg);
        sl_free(j.counts);
        return 1;
    }
    if (sum.steps == 0) {
        fprintf(stderr, "sluice-bench seek: worker 0 has no step at scale %d\n", scale);
        sl_free(j.counts);
        return 1;
    }
    uint64_t per = sum.steps * (uint64_t)p->replicas;
    struct seek_row row = {.scale = scale, .j = &j, .sum = &sum, .epoch = j.seq / per, .in_epoch = j.seq % per};
    double t[32];
    int status = 0;
    for (long r = 0; r < p->repeat && status == 0; r++) {
        t[r] = time_seek(&j, j.seq, a, cap, &row.within);
        status = t[r] < 0;
    }
    row.old = status ? -1 : time_epoch_next(&j, row.epoch * per, row.in_epoch, b, cap);
    if (row.old >= 0 && !same(a, b)) {
        fprintf(stderr,
                "sluice-bench seek: scale %d: the piece at seq %llu differs between the seek and epoch + next\n", scale,
                (unsigned long long)j.seq);
        row.old = -1;
    }
    status = row.old < 0;
    row.start = -1;
    if (status == 0 && !p->no_baseline) {
        row.start = time_next(&j, j.seq, b, cap);
        if (row.start >= 0 && !same(a, b)) {
            fprintf(stderr,
                    "sluice-bench seek: scale %d: the piece at seq %llu differs between the seek "
                    "and iteration from the start\n",
                    scale, (unsigned long long)j.seq);
            row.start = -1;
        }
        status = row.start < 0;
    }
    if (status == 0) {
        row.st = bench_stat_of(t, (size_t)p->repeat);
        if (!*header) {
            print_header(p, base);
            *header = 1;
        }
        print_row(p, base, &row);
    }
    sl_free(j.counts);
    return status;
}

static int set_scales(void *opts, const char *value, struct sl_error *err)
{
    struct seek_params *p = opts;
    return bench_opt_list("--scales", value, 1, 100000, p->scales, 8, &p->nscales, err);
}

#define OFF(f) offsetof(struct seek_params, f)
static const struct sl_opt rows[] = {
    {"files", 0, SL_OPT_LONG, OFF(files), 1, 10000000, "1000", "F", "files", NULL, NULL},
    {"records", 0, SL_OPT_LONG, OFF(records), 1, 1000000000, "10000", "K", "records per file at scale 1, +-5%", NULL,
     NULL},
    {"scales", 0, SL_OPT_FUNC, 0, 0, 0, "1,10,100", "LIST", "multiples of K to measure (at most 8)", NULL, set_scales},
    {"batch", 0, SL_OPT_LONG, OFF(batch), 1, 1 << 24, "1024", "G", "global batch", NULL, NULL},
    {"shuffle", 0, SL_OPT_LONG, OFF(shuffle), 0, 1 << 28, "10000", "S", "shuffle buffer, 0 for none", NULL, NULL},
    {"parallel-reads", 0, SL_OPT_LONG, OFF(cycle), 1, 4096, "4", "C", "interleave cycle", NULL, NULL},
    {"workers", 0, SL_OPT_LONG, OFF(workers), 1, 65536, "4", "W", "workers", NULL, NULL},
    {"replicas", 0, SL_OPT_LONG, OFF(replicas), 1, 1024, "8", "R", "replicas per worker", NULL, NULL},
    {"policy", 0, SL_OPT_STRING, OFF(policy), 0, 0, "auto", "P", "auto, off, file, data, hint (default auto: file)",
     NULL, NULL},
    {"hint", 0, SL_OPT_STRING, OFF(hint), 0, 0, "files", "H", "with --policy hint: files, records, batches", NULL,
     NULL},
    {"per-replica", 0, SL_OPT_FLAG, OFF(per_replica), 0, 0, NULL, NULL,
     "per-replica input mode (batches of G / (W x R), no split)", NULL, NULL},
    {"drop-remainder", 0, SL_OPT_FLAG, OFF(drop), 0, 0, NULL, NULL, "drop each epoch's short last batch", NULL, NULL},
    {"steps", 0, SL_OPT_LONG, OFF(steps), 1, (double)(1L << 40), "1000000", "N", "the step to reach", NULL, NULL},
    {"repeat", 0, SL_OPT_LONG, OFF(repeat), 1, 32, "5", "N",
     "seeks per figure: median, min, max (default 5); the baselines are measured once per scale", NULL, NULL},
    {"no-baseline", 0, SL_OPT_FLAG, OFF(no_baseline), 0, 0, NULL, NULL,
     "skip the from-the-start baseline (the ratio is then against epoch + next)", NULL, NULL},
    {"json", 0, SL_OPT_FLAG, OFF(json), 0, 0, NULL, NULL, "one JSON object per scale instead of the table", NULL, NULL},
    BENCH_OPT_HELP_ROW,
};

static const struct sl_opt_cmd cmd = {
    .prog = "sluice-bench seek",
    .usage = "Usage: sluice-bench seek [OPTION]...\n"
             "\n"
             "Time for a feeder to reach step N of worker 0's plan (feed_plan_seek, then\n"
             "feed_plan_next over what it leaves) for a job and for the same job with 10x\n"
             "and 100x the records, against feed_plan_next making the same pieces from the\n"
             "start and against the way before the fast-forward (whole epochs by\n"
             "arithmetic, then feed_plan_next over the rest of the last one).\n"
             "\n",
    .rows = rows,
    .nrows = sizeof rows / sizeof rows[0],
};

int bench_seek_main(int argc, char **argv)
{
    struct seek_params p = {0};
    int prc = bench_opt_parse("seek", &cmd, argc, argv, &p);
    if (prc != 0)
        return prc == 1 ? 0 : 2;

    struct feed_plan_config base;
    memset(&base, 0, sizeof base);
    if (feed_policy_parse(p.policy, &base.policy) != 0)
        return bench_usage_error("seek", "--policy: expected auto, off, file, data or hint, got '%s'", p.policy);
    if (feed_hint_parse(p.hint, &base.hint) != 0)
        return bench_usage_error("seek", "--hint: expected files, records or batches, got '%s'", p.hint);
    base.source_is_files = 1;
    base.global_batch = (uint64_t)p.batch;
    base.drop_remainder = p.drop;
    base.shuffle_buffer = (uint64_t)p.shuffle;
    base.seed = 20240611;
    base.reshuffle_each_epoch = 1;
    base.epochs = 0; /* forever: any step exists */
    base.parallel_reads = (uint32_t)p.cycle;
    base.per_replica_input = p.per_replica;
    base.workers = (uint32_t)p.workers;
    base.replicas = (uint32_t)p.replicas;

    size_t cap = (size_t)p.batch; /* no piece is larger than the batch */
    struct kept a = {0}, b = {0};
    a.elems = sl_malloc(cap * sizeof *a.elems);
    b.elems = sl_malloc(cap * sizeof *b.elems);
    if (a.elems == NULL || b.elems == NULL) {
        fprintf(stderr, "sluice-bench seek: out of memory\n");
        sl_free(a.elems);
        sl_free(b.elems);
        return 1;
    }
    int header = p.json; /* the table's header goes out before the first row */
    int status = 0;
    for (int s = 0; s < p.nscales && status == 0; s++)
        status = run_scale(&p, &base, p.scales[s], &a, &b, cap, &header);
    if (!p.json && status == 0)
        printf("\nin epoch: pieces of that epoch before the step, which epoch + next passes over; ratio: %s / seek\n",
               p.no_baseline ? "epoch+next" : "from start");
    sl_free(a.elems);
    sl_free(b.elems);
    return status;
}
