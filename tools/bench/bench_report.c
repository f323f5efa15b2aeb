/* bench_report: what sluice-bench run prints: a table for people, one JSON
 * object for programs (schema in docs/bench.md) and PNG charts drawn by
 * gnuplot. All three read the same derived figures (struct derived), so
 * they cannot disagree.
 *
 * "limited by" is a rule of thumb, stated in docs/bench.md and coded in
 * bench_verdict.c: the limit this configuration came closest to (ratio >=
 * 0.8; raw ZeroMQ counting only the pieces sent by copy, not those read in
 * shared memory), else the CPU when the processes kept >= 85% of every core
 * busy, else the trainer when it seldom waited for input, else the feeder's
 * busiest stage.
 *
 * With --curve the results come in pairs, plaintext then CURVE for each
 * feeder count; a CURVE result is also compared with its plaintext one
 * (wire MB/s and raw ZeroMQ, each CURVE / plaintext).
 *
 * The charts' y axes get their ticks from here (nice steps, labels with SI
 * suffixes: 500k, 2.5M), as gnuplot's own formats give 2.5e+06 or 500.0k.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_run.h"
#include "bench_verdict.h"
#include "sl_log.h"
#include "sl_output.h"

struct derived {
    struct bench_stat samples, disk, inflated, wire, pieces, stall, fcpu, tcpu, util, raw;
    /* CPU seconds per GB on the wire: the feeders' and trainers' whole
     * processes (their start included) over the bytes they streamed, and
     * raw ZeroMQ's two ends on the same transport; the first over the
     * stream's length and the cores (the share of the cores the stream
     * kept busy, what "limited by" weighs); raw_cpu_gb.median < 0: unknown */
    struct bench_stat cpu_gb, raw_cpu_gb, util_stream;
    int stream_cpu; /* the stream took >= RUN_STREAM_SHARE of the run (median): cpu_gb and util_stream apply */
    struct bench_stat stage[NSTAGES];
    int have_stages, have_disk, have_inflated;
    double piece_bytes, memcpy_bps;
    double r_disk, r_inflate, r_wire_zmq, r_wire_memcpy; /* < 0: no such limit */
    double shm_share, r_copy_zmq; /* pieces read in shared memory; the copied share's ratio to raw ZeroMQ */
    int bottleneck;               /* a stage, or -1 */
    double rss_feeder[RUN_MAX_FEEDERS], rss_trainer[RUN_MAX_WORKERS];
    char limited_by[256];
    double wait_feeder_s[RUN_MAX_FEEDERS]; /* median over the runs */
    int wait_feeder;                       /* the feeder with the most, -1: no wait attributed */
    double wait_share;
    double r_curve_wire, r_curve_raw; /* CURVE / plaintext; < 0: not a CURVE result */
    /* how busy each kind of feeder thread was over the stream (medians, a
     * fraction of one core): a decode thread (read + decompress + decode +
     * assemble over the threads), the serving thread, the ZeroMQ I/O
     * thread; have_busy 0: unknown */
    int have_busy, decode_threads;
    double busy_decode, busy_serve, busy_io;
};

#define STAT_OF(field, expr)                               \
    do {                                                   \
        double v_[RUN_MAX_REPEAT];                         \
        for (int r_ = 0; r_ < c->nsamples; r_++) {         \
            const struct run_sample *s = &c->s[r_];        \
            (void)s;                                       \
            v_[r_] = (expr);                               \
        }                                                  \
        x->field = bench_stat_of(v_, (size_t)c->nsamples); \
    } while (0)

/* Of every piece the trainers received in a configuration's runs, the
 * share read in a feeder's shared memory (docs/feeder.md). */
static double shm_share(const struct run_config *c)
{
    double all = 0, shared = 0;
    for (int r = 0; r < c->nsamples; r++) {
        all += c->s[r].pieces;
        shared += c->s[r].shm_pieces;
    }
    return all > 0 ? shared / all : 0;
}

static void derive(const struct run_opts *o, const struct run_data *d, const struct run_config *c, struct derived *x);

/* A CURVE result's wire MB/s and raw ZeroMQ against its plaintext pair's. */
static void derive_curve(const struct run_opts *o, const struct run_data *d, const struct run_config *cfg, int k,
                         struct derived *x)
{
    derive(o, d, &cfg[k], x);
    x->r_curve_wire = x->r_curve_raw = -1;
    if (!cfg[k].curve || cfg[k].plain_index < 0)
        return;
    struct derived p;
    derive(o, d, &cfg[cfg[k].plain_index], &p);
    x->r_curve_wire = p.wire.median > 0 ? x->wire.median / p.wire.median : -1;
    x->r_curve_raw = p.raw.median > 0 ? x->raw.median / p.raw.median : -1;
}

static void derive(const struct run_opts *o, const struct run_data *d, const struct run_config *c, struct derived *x)
{
    memset(x, 0, sizeof *x);
    double disk_per_sample = d->records ? (double)d->disk_bytes / (double)d->records : 0;
    double inflated_per_sample = d->records ? (double)d->inflated_bytes / (double)d->records : 0;
    x->have_disk = d->records > 0;
    x->have_inflated = d->records > 0 && d->inflate_impl != NULL;
    STAT_OF(samples, s->samples_ps);
    STAT_OF(disk, s->samples_ps * disk_per_sample / 1e6);
    STAT_OF(inflated, s->samples_ps * inflated_per_sample / 1e6);
    STAT_OF(wire, s->wire_bps / 1e6);
    STAT_OF(pieces, s->pieces_ps);
    STAT_OF(stall, s->stall_pct);
    STAT_OF(fcpu, s->feeder_cpu_s);
    STAT_OF(tcpu, s->trainer_cpu_s);
    STAT_OF(util, (s->feeder_cpu_s + s->trainer_cpu_s) / s->wall_s / d->ncpu);
    STAT_OF(raw, c->raw_zmq_bps[r_] / 1e6);
    STAT_OF(cpu_gb, s->wire_bps * s->stream_s > 0
                        ? (s->feeder_cpu_s + s->trainer_cpu_s) / (s->wire_bps * s->stream_s / 1e9)
                        : -1);
    STAT_OF(raw_cpu_gb, c->raw_cpu_per_byte[r_] > 0 ? c->raw_cpu_per_byte[r_] * 1e9 : -1);
    STAT_OF(util_stream, s->stream_s > 0 ? (s->feeder_cpu_s + s->trainer_cpu_s) / s->stream_s / d->ncpu : 0);
    /* the processes' CPU is charged to the stream only when their start
     * and end took a small part of the run */
    double share_[RUN_MAX_REPEAT];
    for (int r = 0; r < c->nsamples; r++)
        share_[r] = c->s[r].wall_s > 0 ? c->s[r].stream_s / c->s[r].wall_s : 0;
    x->stream_cpu = c->nsamples > 0 && bench_median(share_, (size_t)c->nsamples) >= RUN_STREAM_SHARE;
    x->have_stages = c->nsamples > 0;
    for (int r = 0; r < c->nsamples; r++)
        x->have_stages &= c->s[r].have_stages;
    x->bottleneck = -1;
    for (int k = 0; x->have_stages && k < NSTAGES; k++) {
        STAT_OF(stage[k], s->stage_cpu[k]);
        if (k != STAGE_TOTAL && (x->bottleneck < 0 || x->stage[k].median > x->stage[x->bottleneck].median))
            x->bottleneck = k;
    }
    x->decode_threads = o->threads > 0 ? o->threads : d->ncpu; /* the feeder's default: one per CPU */
    x->have_busy = x->have_stages && c->nsamples > 0;
    for (int r = 0; r < c->nsamples; r++)
        x->have_busy &= c->s[r].serve_cpu >= 0 && c->s[r].stream_s > 0;
    if (x->have_busy) {
        double per = (double)c->feeders, v[RUN_MAX_REPEAT];
        for (int r = 0; r < c->nsamples; r++) {
            const struct run_sample *s = &c->s[r];
            double dec = s->stage_cpu[STAGE_READ] + s->stage_cpu[STAGE_DECOMPRESS] + s->stage_cpu[STAGE_DECODE] +
                         s->stage_cpu[STAGE_MAP] + s->stage_cpu[STAGE_ASSEMBLE];
            v[r] = dec / (s->stream_s * per * x->decode_threads);
        }
        x->busy_decode = bench_stat_of(v, (size_t)c->nsamples).median;
        for (int r = 0; r < c->nsamples; r++)
            v[r] = c->s[r].serve_cpu / (c->s[r].stream_s * per);
        x->busy_serve = bench_stat_of(v, (size_t)c->nsamples).median;
        for (int r = 0; r < c->nsamples; r++)
            v[r] = c->s[r].io_cpu / (c->s[r].stream_s * per);
        x->busy_io = bench_stat_of(v, (size_t)c->nsamples).median;
    }
    double sizes[RUN_MAX_REPEAT];
    for (int r = 0; r < c->nsamples; r++) {
        sizes[r] = c->s[r].piece_bytes;
        for (int j = 0; j < c->feeders; j++)
            if (c->s[r].rss_mb[j] > x->rss_feeder[j])
                x->rss_feeder[j] = c->s[r].rss_mb[j];
        for (int w = 0; w < o->workers; w++)
            if (c->s[r].rss_mb[RUN_MAX_FEEDERS + w] > x->rss_trainer[w])
                x->rss_trainer[w] = c->s[r].rss_mb[RUN_MAX_FEEDERS + w];
    }
    x->piece_bytes = bench_median(sizes, (size_t)c->nsamples);
    x->memcpy_bps = c->memcpy_bps;
    x->r_disk = x->have_disk && d->read_bps > 0 ? x->disk.median * 1e6 / d->read_bps : -1;
    x->r_inflate = x->have_inflated && d->inflate_bps > 0 ? x->inflated.median * 1e6 / d->inflate_bps : -1;
    x->r_wire_zmq = x->raw.median > 0 ? x->wire.median / x->raw.median : -1;
    x->r_wire_memcpy = c->memcpy_bps > 0 ? x->wire.median * 1e6 / c->memcpy_bps : -1;

    x->shm_share = shm_share(c);
    double wall = 0;
    x->wait_feeder = -1;
    for (int j = 0; j < c->feeders && j < RUN_MAX_FEEDERS; j++) {
        double v_[RUN_MAX_REPEAT];
        for (int r = 0; r < c->nsamples; r++)
            v_[r] = c->s[r].wait_feeder_s[j];
        x->wait_feeder_s[j] = bench_median(v_, (size_t)c->nsamples);
        wall += x->wait_feeder_s[j];
        if (x->wait_feeder_s[j] > 0 && (x->wait_feeder < 0 || x->wait_feeder_s[j] > x->wait_feeder_s[x->wait_feeder]))
            x->wait_feeder = j;
    }
    x->wait_share = c->feeders > 1 && x->wait_feeder >= 0 && wall > 0 ? x->wait_feeder_s[x->wait_feeder] / wall : 0;
    struct bench_verdict_in v = {
        .r_disk = x->r_disk,
        .r_inflate = x->r_inflate,
        .r_wire_zmq = x->r_wire_zmq,
        .r_wire_memcpy = x->r_wire_memcpy,
        .shm_share = x->shm_share,
        .cpu_util = x->stream_cpu ? x->util_stream.median : x->util.median,
        .ncpu = d->ncpu,
        .trains_model = strcmp(o->model, "none") != 0,
        .stall_pct = x->stall.median,
        .busy_stage = x->bottleneck >= 0 ? run_stage_names[x->bottleneck] : NULL,
        .wait_feeder = x->wait_feeder,
        .wait_share = x->wait_share,
        .have_busy = x->have_busy,
        .busy_max = fmax(x->busy_decode, fmax(x->busy_serve, x->busy_io)),
    };
    x->r_copy_zmq = bench_verdict_copy_zmq(&v);
    bench_verdict(&v, x->limited_by, sizeof x->limited_by);
}

/* Which way the pieces went: "shm" (every one read in a feeder's shared
 * memory), "copy" (every one through ZeroMQ), or "mixed". */
static const char *path_of(double shm_share)
{
    return shm_share >= 1 ? "shm" : shm_share <= 0 ? "copy" : "mixed";
}

static double over(double wire_mb, double bps)
{
    return bps > 0 ? wire_mb * 1e6 / bps : -1;
}

/* The path the run used and the machine's raw ZeroMQ limits at its piece
 * size, every one measured in this invocation (issue #25 item 5). */
static void limits_lines(FILE *f, const struct run_opts *o, const struct run_config *c, const struct derived *x)
{
    if (x->shm_share >= 1)
        fprintf(f, "    path: shared memory (every piece read in the feeder's pool; only a header crosses %s)%s\n",
                o->transport, c->curve ? ", CURVE on the headers" : "");
    else if (x->shm_share <= 0)
        fprintf(f, "    path: copy (every piece through ZeroMQ over %s%s)\n", o->transport,
                c->curve ? ", sealed with CURVE" : "");
    else
        fprintf(f, "    path: mixed (%.0f%% of pieces in shared memory, the rest by copy over %s%s)\n",
                100 * x->shm_share, o->transport, c->curve ? ", CURVE" : "");
    fprintf(f, "    limits here at %.0f B: raw ZeroMQ ipc %.0f MB/s, tcp %.0f MB/s, ", x->piece_bytes,
            c->lim_ipc_bps / 1e6, c->lim_tcp_bps / 1e6);
    if (c->lim_curve_bps > 0)
        fprintf(f, "CURVE (%s) %.0f MB/s\n", o->transport, c->lim_curve_bps / 1e6);
    else
        fprintf(f, "CURVE n/a (this libzmq has none)\n");
    fprintf(f, "    wire vs raw ZeroMQ ipc %.2fx, tcp %.2fx", over(x->wire.median, c->lim_ipc_bps),
            over(x->wire.median, c->lim_tcp_bps));
    if (c->lim_curve_bps > 0)
        fprintf(f, ", CURVE %.2fx", over(x->wire.median, c->lim_curve_bps));
    fprintf(f, "\n");
}

/* ---- table ---- */

static void cell(FILE *f, const struct bench_stat *s, int show, const char *fmt)
{
    char a[32], b[32], c[32], out[128];
    if (!show) {
        fprintf(f, " %-24s", "-");
        return;
    }
    snprintf(a, sizeof a, fmt, s->median);
    snprintf(b, sizeof b, fmt, s->min);
    snprintf(c, sizeof c, fmt, s->max);
    snprintf(out, sizeof out, "%s [%s-%s]", a, b, c);
    fprintf(f, " %-24s", out);
}

static void ratio(FILE *f, const char *what, double ours, double limit, double r, const char *unit)
{
    if (r < 0)
        fprintf(f, "    %-34s n/a\n", what);
    else
        fprintf(f, "    %-34s %10.1f %-5s of %10.1f  = %.2fx\n", what, ours, unit, limit, r);
}

void run_report_table(FILE *f, const struct run_opts *o, const struct run_data *d, struct run_config *cfg, int n)
{
    fprintf(f, "sluice-bench run: job %s (%s), %d worker(s) x %d replica(s), model %s, %s%s%s, ", o->job, o->job_name,
            o->workers, o->replicas, o->model, o->transport, o->no_shm ? ", pieces by copy (--no-shm)" : "",
            o->curve ? ", plaintext and CURVE" : "");
    if (o->duration > 0)
        fprintf(f, "%.1f s per run", o->duration);
    else if (o->epochs > 0)
        fprintf(f, "%ld epoch(s) per run", o->epochs);
    else
        fprintf(f, "the job's epochs per run");
    fprintf(f, ", median [min-max] of %d, %d CPUs", o->repeat, d->ncpu);
    if (d->load_start >= 0 && d->load_end >= 0)
        fprintf(f, ", load average %.1f before and %.1f after%s", d->load_start, d->load_end,
                d->load_start > 0.5 * d->ncpu ? " (other processes shared the cores: noisy)" : "");
    fputc('\n', f);
    fprintf(f, "data: %zu file(s), %.1f MB on disk, %llu records%s\n", d->npaths, (double)d->disk_bytes / 1e6,
            (unsigned long long)d->records, d->inflate_impl ? ", compressed" : "");
    fprintf(f, "limits: read() %.0f MB/s", d->read_bps / 1e6);
    if (d->inflate_impl)
        fprintf(f, ", inflate (%s) %.0f MB/s of output", d->inflate_impl, d->inflate_bps / 1e6);
    fprintf(f, "\n\n %-8s %-24s %-24s %-24s %-24s %-24s\n", "feeders", "samples/s", "disk MB/s", "wire MB/s",
            "pieces/s", "input stall %");
    struct derived x;
    for (int k = 0; k < n; k++) {
        derive(o, d, &cfg[k], &x);
        char label[32];
        snprintf(label, sizeof label, "%d%s", cfg[k].feeders, cfg[k].curve ? " CURVE" : "");
        fprintf(f, " %-8s", label);
        cell(f, &x.samples, 1, "%.0f");
        cell(f, &x.disk, x.have_disk, "%.1f");
        cell(f, &x.wire, 1, "%.1f");
        cell(f, &x.pieces, 1, "%.0f");
        cell(f, &x.stall, 1, "%.1f");
        fputc('\n', f);
    }
    for (int k = 0; k < n; k++) {
        derive_curve(o, d, cfg, k, &x);
        fprintf(f, "\n %d feeder(s)%s: limited by %s\n", cfg[k].feeders, cfg[k].curve ? " with CURVE" : "",
                x.limited_by);
        limits_lines(f, o, &cfg[k], &x);
        if (x.r_curve_wire >= 0) {
            fprintf(f, "    CURVE / plaintext: wire %.2fx, raw ZeroMQ %.2fx", x.r_curve_wire, x.r_curve_raw);
            if (cfg[k].sodium_box_bps > 0 && cfg[k].sodium_open_bps > 0)
                fprintf(f, "; libsodium on one core: seal %.0f MB/s, open %.0f MB/s\n", cfg[k].sodium_box_bps / 1e6,
                        cfg[k].sodium_open_bps / 1e6);
            else
                fprintf(f, "; libsodium's rate: not built in\n");
        }
        ratio(f, "disk bytes vs read()", x.disk.median, d->read_bps / 1e6, x.r_disk, "MB/s");
        ratio(f, "inflated bytes vs inflate", x.inflated.median, d->inflate_bps / 1e6, x.r_inflate, "MB/s");
        char what[64];
        snprintf(what, sizeof what, "wire vs raw ZeroMQ (%.0f B msgs)", x.piece_bytes);
        ratio(f, what, x.wire.median, x.raw.median, x.r_wire_zmq, "MB/s");
        if (x.shm_share > 0 && x.r_copy_zmq >= 0)
            fprintf(f,
                    "    %-34s %10.1f MB/s  of %10.1f  = %.2fx (the %.0f%% of pieces in shared memory bypass "
                    "ZeroMQ)\n",
                    "wire by copy vs raw ZeroMQ", x.wire.median * (1 - x.shm_share), x.raw.median, x.r_copy_zmq,
                    100 * x.shm_share);
        ratio(f, "wire vs memcpy", x.wire.median, x.memcpy_bps / 1e6, x.r_wire_memcpy, "MB/s");
        if (x.have_stages) {
            fprintf(f, "    feeder CPU s per stage (all feeders):");
            for (int s = 0; s < NSTAGES; s++)
                fprintf(f, " %s %.2f", run_stage_names[s], x.stage[s].median);
            fprintf(f, "\n");
        } else {
            fprintf(f, "    feeder CPU s per stage: unavailable (feeder without --stats)\n");
        }
        if (x.have_busy)
            fprintf(
                f,
                "    feeder threads busy over the stream (of one core, per feeder): each of %d decode threads %.0f%%, "
                "serving thread %.0f%%, ZeroMQ I/O thread %.0f%%\n",
                x.decode_threads, 100 * x.busy_decode, 100 * x.busy_serve, 100 * x.busy_io);
        fprintf(f, "    CPU s: feeders %.2f, trainers %.2f (%.0f%% of all cores over the run", x.fcpu.median,
                x.tcpu.median, 100 * x.util.median);
        if (x.stream_cpu)
            fprintf(f, ", %.0f%% over the stream)\n", 100 * x.util_stream.median);
        else
            fprintf(f, "; the stream too short against the processes' start to charge their CPU to it)\n");
        if (x.stream_cpu && x.cpu_gb.median > 0 && x.raw_cpu_gb.median > 0)
            fprintf(f,
                    "    CPU s per GB on the wire: this stream %.2f, raw ZeroMQ %s %.2f (both ends); on %d cores "
                    "that CPU alone allows %.0f and %.0f MB/s\n",
                    x.cpu_gb.median, o->transport, x.raw_cpu_gb.median, d->ncpu, d->ncpu / x.cpu_gb.median * 1e3,
                    d->ncpu / x.raw_cpu_gb.median * 1e3);
        fprintf(f, "    pieces in the feeders' shared memory: %.0f%% (the rest by copy)\n", 100 * x.shm_share);
        fprintf(f, "    peak RSS MB: feeders");
        for (int j = 0; j < cfg[k].feeders; j++)
            fprintf(f, " %.1f", x.rss_feeder[j]);
        fprintf(f, "; trainers");
        for (int w = 0; w < o->workers; w++)
            fprintf(f, " %.1f", x.rss_trainer[w]);
        fprintf(f, "\n");
    }
}

/* ---- JSON ---- */

static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void jstat(FILE *f, const char *key, const struct bench_stat *s, int show)
{
    fprintf(f, "\"%s\":", key);
    if (show)
        fprintf(f, "{\"median\":%.6g,\"min\":%.6g,\"max\":%.6g}", s->median, s->min, s->max);
    else
        fputs("null", f);
}

static void jnum(FILE *f, const char *key, double v, int show)
{
    if (show)
        fprintf(f, "\"%s\":%.6g", key, v);
    else
        fprintf(f, "\"%s\":null", key);
}

/* One configuration's "limits" and "ratios" objects and its "limited_by". */
static void json_config_limits(FILE *f, const struct run_config *c, const struct derived *x)
{
    fprintf(f, ",\"limits\":{");
    jstat(f, "raw_zmq_mb_per_s", &x->raw, 1);
    fputc(',', f);
    jnum(f, "memcpy_mb_per_s", x->memcpy_bps / 1e6, 1);
    fputc(',', f);
    jnum(f, "sodium_box_mb_per_s", c->sodium_box_bps / 1e6, c->curve && c->sodium_box_bps > 0);
    fputc(',', f);
    jnum(f, "sodium_open_mb_per_s", c->sodium_open_bps / 1e6, c->curve && c->sodium_open_bps > 0);
    fputc(',', f);
    jnum(f, "raw_zmq_ipc_mb_per_s", c->lim_ipc_bps / 1e6, c->lim_ipc_bps > 0);
    fputc(',', f);
    jnum(f, "raw_zmq_tcp_mb_per_s", c->lim_tcp_bps / 1e6, c->lim_tcp_bps > 0);
    fputc(',', f);
    jnum(f, "raw_zmq_curve_mb_per_s", c->lim_curve_bps / 1e6, c->lim_curve_bps > 0);
    fprintf(f, "},\"ratios\":{");
    jnum(f, "disk_to_read", x->r_disk, x->r_disk >= 0);
    fputc(',', f);
    jnum(f, "inflated_to_inflate", x->r_inflate, x->r_inflate >= 0);
    fputc(',', f);
    jnum(f, "wire_to_raw_zmq", x->r_wire_zmq, x->r_wire_zmq >= 0);
    fputc(',', f);
    jnum(f, "copied_to_raw_zmq", x->r_copy_zmq, x->r_copy_zmq >= 0);
    fputc(',', f);
    jnum(f, "wire_to_memcpy", x->r_wire_memcpy, x->r_wire_memcpy >= 0);
    fputc(',', f);
    jnum(f, "wire_to_plaintext", x->r_curve_wire, x->r_curve_wire >= 0);
    fputc(',', f);
    jnum(f, "raw_zmq_to_plaintext", x->r_curve_raw, x->r_curve_raw >= 0);
    fputc(',', f);
    jnum(f, "wire_to_raw_zmq_ipc", over(x->wire.median, c->lim_ipc_bps), c->lim_ipc_bps > 0);
    fputc(',', f);
    jnum(f, "wire_to_raw_zmq_tcp", over(x->wire.median, c->lim_tcp_bps), c->lim_tcp_bps > 0);
    fputc(',', f);
    jnum(f, "wire_to_raw_zmq_curve", over(x->wire.median, c->lim_curve_bps), c->lim_curve_bps > 0);
    fprintf(f, "},\"limited_by\":");
    jstr(f, x->limited_by);
}

/* One configuration's object in "configs" (the k-th of cfg). */
static void json_config(FILE *f, const struct run_opts *o, const struct run_data *d, const struct run_config *cfg,
                        int k)
{
    struct derived x;
    derive_curve(o, d, cfg, k, &x);
    fprintf(f, "%s{\"feeders\":%d,\"curve\":%s,\"runs\":%d,", k ? "," : "", cfg[k].feeders,
            cfg[k].curve ? "true" : "false", cfg[k].nsamples);
    jstat(f, "samples_per_s", &x.samples, 1);
    fputc(',', f);
    jstat(f, "disk_mb_per_s", &x.disk, x.have_disk);
    fputc(',', f);
    jstat(f, "inflated_mb_per_s", &x.inflated, x.have_inflated);
    fputc(',', f);
    jstat(f, "wire_mb_per_s", &x.wire, 1);
    fputc(',', f);
    jstat(f, "pieces_per_s", &x.pieces, 1);
    fputc(',', f);
    jstat(f, "input_stall_pct", &x.stall, 1);
    fprintf(f, ",\"piece_bytes\":%.0f,\"shm_share\":%.4f,\"path\":\"%s\",\"feeder_cpu_s\":", x.piece_bytes, x.shm_share,
            path_of(x.shm_share));
    if (x.have_stages) {
        fputc('{', f);
        for (int s = 0; s < NSTAGES; s++) {
            fputs(s ? "," : "", f);
            jstat(f, run_stage_names[s], &x.stage[s], 1);
        }
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    fprintf(f, ",\"input_wait_by_feeder_s\":[");
    for (int j = 0; j < cfg[k].feeders && j < RUN_MAX_FEEDERS; j++)
        fprintf(f, "%s%.6f", j ? "," : "", x.wait_feeder_s[j]);
    fprintf(f, "]");
    fprintf(f, ",\"bottleneck_stage\":");
    if (x.bottleneck >= 0)
        jstr(f, run_stage_names[x.bottleneck]);
    else
        fputs("null", f);
    fprintf(f, ",\"process_cpu_s\":{");
    jstat(f, "feeders", &x.fcpu, 1);
    fputc(',', f);
    jstat(f, "trainers", &x.tcpu, 1);
    fprintf(f, "},");
    jstat(f, "cpu_utilization", &x.util, 1);
    fputc(',', f);
    jstat(f, "cpu_utilization_stream", &x.util_stream, x.stream_cpu);
    fputc(',', f);
    jstat(f, "cpu_s_per_gb", &x.cpu_gb, x.stream_cpu && x.cpu_gb.median > 0);
    fputc(',', f);
    jstat(f, "raw_zmq_cpu_s_per_gb", &x.raw_cpu_gb, x.raw_cpu_gb.median > 0);
    fprintf(f, ",\"rss_mb\":{\"feeders\":[");
    for (int j = 0; j < cfg[k].feeders; j++)
        fprintf(f, "%s%.1f", j ? "," : "", x.rss_feeder[j]);
    fprintf(f, "],\"trainers\":[");
    for (int w = 0; w < o->workers; w++)
        fprintf(f, "%s%.1f", w ? "," : "", x.rss_trainer[w]);
    fprintf(f, "]},\"feeder_busy\":");
    if (x.have_busy)
        fprintf(f, "{\"decode_threads\":%d,\"decode_thread\":%.4f,\"serve\":%.4f,\"zmq_io\":%.4f}", x.decode_threads,
                x.busy_decode, x.busy_serve, x.busy_io);
    else
        fputs("null", f);
    json_config_limits(f, &cfg[k], &x);
    fputc('}', f);
}

void run_report_json(FILE *f, const struct run_opts *o, const struct run_data *d, struct run_config *cfg, int n)
{
    fprintf(f, "{\"bench\":\"run\",\"version\":\"%s\",\"job\":", SLUICE_VERSION);
    jstr(f, o->job);
    fprintf(f, ",\"job_name\":");
    jstr(f, o->job_name);
    fprintf(f, ",\"transport\":\"%s\",\"no_shm\":%s,\"curve\":%s,\"workers\":%d,\"replicas\":%d,", o->transport,
            o->no_shm ? "true" : "false", o->curve ? "true" : "false", o->workers, o->replicas);
    jnum(f, "threads", (double)o->threads, o->threads > 0);
    fprintf(f, ",\"model\":\"%s\",", o->model);
    jnum(f, "epochs", (double)o->epochs, o->epochs > 0);
    fputc(',', f);
    jnum(f, "duration_s", o->duration, o->duration > 0);
    fprintf(f, ",\"repeat\":%d,\"warmup\":%d,\"cpus\":%d,\"stage_breakdown\":%s,", o->repeat, o->warmup, d->ncpu,
            o->feeder_has_stats ? "true" : "false");
    if (d->load_start >= 0 && d->load_end >= 0)
        fprintf(f, "\"load_avg\":{\"before\":%.2f,\"after\":%.2f},", d->load_start, d->load_end);
    else
        fprintf(f, "\"load_avg\":null,");
    fprintf(f, "\"data\":{\"files\":%zu,\"disk_bytes\":%llu,", d->npaths, (unsigned long long)d->disk_bytes);
    jnum(f, "records", (double)d->records, d->records > 0);
    fprintf(f, ",\"compressed\":%s,", d->inflate_impl ? "true" : "false");
    jnum(f, "inflated_bytes", (double)d->inflated_bytes, d->inflate_impl != NULL);
    fprintf(f, "},\"limits\":{");
    jnum(f, "read_mb_per_s", d->read_bps / 1e6, 1);
    fputc(',', f);
    jnum(f, "inflate_mb_per_s", d->inflate_bps / 1e6, d->inflate_impl != NULL);
    fprintf(f, ",\"inflate_impl\":");
    if (d->inflate_impl)
        jstr(f, d->inflate_impl);
    else
        fputs("null", f);
    fprintf(f, "},\"configs\":[");
    for (int k = 0; k < n; k++)
        json_config(f, o, d, cfg, k);
    fprintf(f, "]}\n");
}

/* ---- charts ---- */

/* A tick label: SI suffix from 1,000 up (500k, 2.5M), plain decimals
 * below; printed to nine decimals and the trailing zeros cut, so a step of
 * 2.5 x 10^k never rounds (2500 is 2.5k, not 2k). */
static void tick_label(double v, char *buf, size_t n)
{
    static const struct {
        double unit;
        const char *suffix;
    } si[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}, {1, ""}};
    size_t k = 0;
    while (k + 1 < sizeof si / sizeof si[0] && fabs(v) < si[k].unit)
        k++;
    snprintf(buf, n, "%.9f", v / si[k].unit);
    size_t len = strlen(buf);
    while (len > 0 && buf[len - 1] == '0')
        buf[--len] = '\0';
    if (len > 0 && buf[len - 1] == '.')
        buf[--len] = '\0';
    snprintf(buf + len, n - len, "%s", si[k].suffix);
}

/* "set AXISrange [0:top]" and "set AXIStics (labels)" for data up to max:
 * about five steps of 1, 2, 2.5 or 5 x 10^k, the top more than a quarter
 * step above the highest point so that no point sits on the frame. */
static void axis_ticks(FILE *f, const char *axis, double max)
{
    double step = 1;
    if (max > 0) {
        double raw = max / 5, mag = pow(10, floor(log10(raw))), norm = raw / mag;
        step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 2.5 ? 2.5 : norm <= 5 ? 5 : 10) * mag;
    }
    int steps = (int)floor(max / step + 0.25) + 1;
    fprintf(f, "set %srange [0:%.15g]\nset %stics (", axis, steps * step, axis);
    for (int i = 0; i <= steps; i++) {
        char label[32];
        tick_label(i * step, label, sizeof label);
        fprintf(f, "%s'%s' %.15g", i ? ", " : "", label, i * step);
    }
    fprintf(f, ")\n");
}

/* gnuplot's full path from PATH into buf; 0, or -1 when there is none. */
static int find_gnuplot(char *buf, size_t n)
{
    const char *path = getenv("PATH");
    while (path != NULL && *path) {
        const char *colon = strchr(path, ':');
        size_t len = colon ? (size_t)(colon - path) : strlen(path);
        snprintf(buf, n, "%.*s/gnuplot", (int)len, path);
        if (len > 0 && access(buf, X_OK) == 0)
            return 0;
        path = colon ? colon + 1 : NULL;
    }
    return -1;
}

/* The chart data, one line per configuration, into f; 1 when every
 * configuration has its feeder stages, else 0. */
static int plot_data(FILE *f, const struct run_opts *o, const struct run_data *d, const struct run_config *cfg, int n)
{
    fprintf(f, "# feeders samples_med min max wire_mb_med raw_zmq_mb_med stall_med min max read inflate "
               "decode map assemble send\n");
    struct derived x;
    int stages = 1;
    for (int k = 0; k < n; k++) {
        derive(o, d, &cfg[k], &x);
        stages &= x.have_stages;
        fprintf(f, "%d %g %g %g %g %g %g %g %g", cfg[k].feeders, x.samples.median, x.samples.min, x.samples.max,
                x.wire.median, x.raw.median, x.stall.median, x.stall.min, x.stall.max);
        for (int s = 0; s < STAGE_TOTAL; s++)
            fprintf(f, " %g", x.have_stages ? x.stage[s].median : 0.0);
        fputc('\n', f);
    }
    return stages;
}

/* The gnuplot script drawing the charts from the data file dat into f. */
static void plot_script(FILE *f, const struct run_opts *o, const struct run_data *d, const struct run_config *cfg,
                        int n, const char *dat, int stages)
{
    struct derived x;
    double top_samples = 0, top_mb = 0, top_stall = 0, top_cpu = 0, shm = 0;
    for (int k = 0; k < n; k++) {
        derive(o, d, &cfg[k], &x);
        top_samples = fmax(top_samples, x.samples.max);
        top_mb = fmax(top_mb, fmax(x.wire.median, x.raw.median));
        top_stall = fmax(top_stall, x.stall.max);
        double sum = 0;
        for (int s = 0; x.have_stages && s < STAGE_TOTAL; s++)
            sum += x.stage[s].median;
        top_cpu = fmax(top_cpu, sum);
        shm = fmax(shm, x.shm_share);
    }
    /* the key goes below the plot, where it covers nothing; the pieces'
     * path is in the title, as it decides what raw ZeroMQ means here */
    char path[64];
    if (shm <= 0)
        snprintf(path, sizeof path, "pieces by copy");
    else if (shm >= 1)
        snprintf(path, sizeof path, "pieces in shared memory");
    else
        snprintf(path, sizeof path, "%.0f%% of pieces in shared memory", 100 * shm);
    fprintf(f,
            "set terminal pngcairo size 960,640 noenhanced\nset grid\nset key outside below left Left reverse "
            "maxcols 1 height 1.5\nset xlabel 'feeders'\nset xtics 1\nset offsets 0.3, 0.3, 0, 0\n"
            "set title 'sluice-bench run: %s (%s, %s)'\n",
            o->job_name, o->transport, path);
    fprintf(f,
            "set output '%s/throughput.png'\nset ylabel 'samples/s (left axis)'\n"
            "set y2label 'MB/s (right axis)'\n",
            o->out);
    axis_ticks(f, "y", top_samples);
    axis_ticks(f, "y2", top_mb);
    fprintf(f,
            "plot '%s' using 1:2:3:4 with yerrorlines lw 2 title 'samples/s, median and min-max (left axis)', "
            "'' using 1:5 axes x1y2 with linespoints title 'wire MB/s (right axis)', ",
            dat);
    if (shm > 0)
        fprintf(f, "'' using 1:6 axes x1y2 with linespoints dt 2 lc 'gray50' title 'raw ZeroMQ MB/s (right axis): "
                   "reference for the copy path, not a limit here'\n");
    else
        fprintf(f, "'' using 1:6 axes x1y2 with linespoints dt 2 title 'raw ZeroMQ MB/s (right axis): the limit "
                   "of pieces by copy'\n");
    fprintf(f, "unset y2label\nunset y2tics\nset output '%s/stall.png'\nset ylabel 'input stall %% (left axis)'\n",
            o->out);
    axis_ticks(f, "y", top_stall);
    fprintf(f,
            "plot '%s' using 1:7:8:9 with yerrorlines lw 2 title 'input stall %%, median and min-max (left "
            "axis)'\n",
            dat);
    if (stages) {
        fprintf(f,
                "set output '%s/stages.png'\nset ylabel 'feeder CPU s, all feeders (left axis)'\n"
                "set style data histograms\nset style histogram rowstacked\nset style fill solid 0.8 border -1\n"
                "set boxwidth 0.6\nset xlabel 'feeders'\nunset offsets\nunset key\nset key outside right top "
                "vertical Left reverse title 'stage (left axis)'\n",
                o->out);
        axis_ticks(f, "y", top_cpu);
        fprintf(f,
                "plot '%s' using 10:xtic(1) title 'read', '' using 11 title 'decompress', "
                "'' using 12 title 'decode', '' using 13 title 'map', '' using 14 title 'assemble', "
                "'' using 15 title 'send'\n",
                dat);
    }
}

int run_report_plot(const struct run_opts *o, const struct run_data *d, struct run_config *cfg, int n)
{
    char gnuplot[4096], dat[PATH_MAX + 32], gp[PATH_MAX + 32];
    if (find_gnuplot(gnuplot, sizeof gnuplot) != 0) {
        fprintf(stderr, "sluice-bench run: --plot: gnuplot is not installed (Debian: apt-get install "
                        "gnuplot-nox); no charts written\n");
        return -1;
    }
    snprintf(dat, sizeof dat, "%s/run.dat", o->out);
    snprintf(gp, sizeof gp, "%s/run.gp", o->out);
    struct sl_output *out;
    struct sl_error err = {0};
    if (sl_output_open(&out, dat, 0, &err) != 0) {
        sl_log(SL_LOG_ERROR, "--plot: %s", err.msg);
        return -1;
    }
    int stages = plot_data(sl_output_stream(out), o, d, cfg, n);
    if (sl_output_commit(out, &err) != 0 || sl_output_open(&out, gp, 0, &err) != 0) {
        sl_log(SL_LOG_ERROR, "--plot: %s", err.msg);
        return -1;
    }
    plot_script(sl_output_stream(out), o, d, cfg, n, dat, stages);
    if (sl_output_commit(out, &err) != 0) {
        sl_log(SL_LOG_ERROR, "--plot: %s", err.msg);
        return -1;
    }
    if (!stages)
        fprintf(stderr, "sluice-bench run: --plot: no stage chart (feeder without --stats)\n");
    struct bench_group g;
    memset(&g, 0, sizeof g);
    char *argv[] = {gnuplot, gp, NULL};
    char errlog[PATH_MAX + 32], tail[1024];
    snprintf(errlog, sizeof errlog, "%s/gnuplot.log", o->out);
    if (bench_spawn(&g, argv, NULL, errlog, "gnuplot", 0) < 0 || bench_group_wait(&g, 60) != 0) {
        bench_group_end(&g, 1);
        sl_log(SL_LOG_ERROR, "gnuplot did not finish");
        return -1;
    }
    if (!WIFEXITED(g.c[0].status) || WEXITSTATUS(g.c[0].status) != 0) {
        sl_log(SL_LOG_ERROR, "gnuplot failed: %s", bench_file_tail(errlog, tail, sizeof tail));
        return -1;
    }
    fprintf(stderr, "sluice-bench run: charts in %s: throughput.png, stall.png%s\n", o->out,
            stages ? ", stages.png" : "");
    return 0;
}
