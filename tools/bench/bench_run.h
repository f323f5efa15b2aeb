/* bench_run.h: what sluice-bench run measures, shared by the runner
 * (bench_run.c) and the reports (bench_report.c: table, JSON, charts).
 *
 * Thread-safe: no.
 */
#ifndef BENCH_RUN_H
#define BENCH_RUN_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "bench.h"

#define RUN_MAX_CONFIGS 8
/* Results: one per feeder count, two with --curve (plaintext, then CURVE). */
#define RUN_MAX_RESULTS (2 * RUN_MAX_CONFIGS)
#define RUN_MAX_FEEDERS 16
#define RUN_MAX_WORKERS 32
#define RUN_MAX_REPEAT 32

/* Feeder stages, in the order of the feeder's --stats "cpu_s" object. */
enum { STAGE_READ, STAGE_DECOMPRESS, STAGE_DECODE, STAGE_MAP, STAGE_ASSEMBLE, STAGE_SEND, STAGE_TOTAL, NSTAGES };
extern const char *const run_stage_names[NSTAGES];

struct run_opts {
    const char *job;
    int feeders[RUN_MAX_CONFIGS], nconfigs;
    int workers, replicas, threads, repeat, warmup;
    long epochs;     /* 0: the job's own */
    double duration; /* > 0: stop the trainers after this many seconds */
    const char *transport, *model, *out;
    int transport_i, model_i; /* as parsed: bench_transport_names, run_model_names */
    int json, plot;
    int no_shm; /* --no-shm to feeders and trainers: pieces by copy */
    int curve;  /* --curve: each configuration in the clear and with CURVE */
    struct bench_curve keys;
    int have_keys; /* keys made: --curve, or CURVE available for the CURVE limit */
    char *overrides[32];
    int noverrides;
    char feeder_bin[PATH_MAX], trainer_bin[PATH_MAX];
    int feeder_has_stats; /* the feeder knows --stats */
    char dir[PATH_MAX];   /* where runs keep their logs and sockets */
    int own_dir;          /* dir is temporary: removed at the end */
    char job_name[256];
};

/* The job's files and what the least-work passes over them gave. */
struct run_data {
    char **paths;
    size_t npaths;
    uint64_t disk_bytes, records, inflated_bytes; /* records 0: not counted */
    const char *inflate_impl;                     /* NULL: files not compressed */
    double read_bps, inflate_bps;                 /* bytes per second (inflate: inflated bytes) */
    int ncpu;
    /* the 1-minute load average (/proc/loadavg) before the first run and
     * after the last: how busy other processes kept the cores; < 0 unknown */
    double load_start, load_end;
};

/* One run of one configuration. */
struct run_sample {
    double samples_ps, wire_bps, pieces_ps, stall_pct, piece_bytes;
    uint64_t samples;
    double pieces, shm_pieces; /* received by the trainers; of those, read in a feeder's shared memory */
    double stage_cpu[NSTAGES]; /* feeders' thread CPU per stage, summed */
    double serve_cpu, io_cpu;  /* of send: the serving threads' and ZeroMQ I/O threads' CPU, summed; < 0 unknown */
    double stream_s;           /* the longest trainer stream (first piece to end) */
    int have_stages;
    double feeder_cpu_s, trainer_cpu_s, wall_s;       /* rusage user + sys; the run's wall time */
    double rss_mb[RUN_MAX_FEEDERS + RUN_MAX_WORKERS]; /* feeders first, then trainers */
    double wait_feeder_s[RUN_MAX_FEEDERS];            /* the trainers' input wait by the feeder it waited for, summed */
};

/* The share of a run (its processes' wall time) the stream must take for
 * sluice-bench run to charge the processes' CPU to the stream (CPU per GB,
 * the cores' share over the stream): below it their start (scan, handshake)
 * would weigh too much. */
#define RUN_STREAM_SHARE 0.7

struct run_config {
    int feeders;
    int curve;       /* measured with CURVE */
    int plain_index; /* with curve: the plaintext result of the same feeder count */
    int nsamples;
    struct run_sample s[RUN_MAX_REPEAT];
    double raw_zmq_bps[RUN_MAX_REPEAT];
    /* both ends' CPU seconds per byte of raw ZeroMQ on the run's own
     * transport (with CURVE when the run has it); < 0 unknown */
    double raw_cpu_per_byte[RUN_MAX_REPEAT];
    double memcpy_bps;
    double sodium_box_bps, sodium_open_bps; /* with curve: libsodium on one core at the piece size; < 0 unknown */
    /* the limits of this machine at the piece size, each measured once per
     * configuration whatever the run's own transport (issue #25 item 5):
     * raw ZeroMQ over ipc, over tcp, and with CURVE on the run's
     * transport; bytes per second, < 0 not measured (no CURVE built in) */
    double lim_ipc_bps, lim_tcp_bps, lim_curve_bps;
};

/* Reports (bench_report.c). */
void run_report_table(FILE *f, const struct run_opts *o, const struct run_data *d, struct run_config *c, int n);
void run_report_json(FILE *f, const struct run_opts *o, const struct run_data *d, struct run_config *c, int n);
/* Charts into o->out with gnuplot: 0, or -1 with the reason printed
 * (gnuplot missing: a message, nothing written). */
int run_report_plot(const struct run_opts *o, const struct run_data *d, struct run_config *c, int n);

#endif
