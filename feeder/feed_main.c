/* sluice-feeder: serve a job's pieces to trainers, or print its plan.
 *
 *   sluice-feeder --job FILE --listen ADDR [--feeder-index J --feeders F]
 *                 [--threads N] [--KEY=VALUE ...]
 *   sluice-feeder plan --job FILE --workers W --replicas R [--KEY=VALUE ...]
 *
 * Any option that is not one of the feeder's own is a job key override
 * (`--global_batch_size=128`, `--shuffle.seed=9`), applied after the job
 * file is loaded and before it is checked.
 *
 * Signals: SIGINT/SIGTERM stop cleanly (trainers are told), SIGUSR1 logs
 * the counters; counters are also logged on exit.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "feed_job.h"
#include "feed_plan.h"
#include "feed_server.h"
#include "feed_source.h"
#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_cluster.h"
#include "sl_log.h"
#include "sl_output.h"

#define EXIT_DATA 1
#define EXIT_USAGE 2

static volatile sig_atomic_t stop_flag, dump_flag;

static void on_stop(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static void on_dump(int sig)
{
    (void)sig;
    dump_flag = 1;
}

static const char usage[] =
    "Usage: sluice-feeder --job FILE --listen ADDR [OPTION]... [--KEY=VALUE]...\n"
    "       sluice-feeder plan --job FILE --workers W --replicas R [--json] [--KEY=VALUE]...\n"
    "\n"
    "Serve the per-replica batches of a job (docs/job.md) to trainers over ZeroMQ,\n"
    "or print how the job's data is divided among W workers of R replicas.\n"
    "\n"
    "  -j, --job=FILE          the job file (JSON)\n"
    "  -l, --listen=ADDR       ZeroMQ endpoint to bind, e.g. tcp://*:5555 or\n"
    "                          ipc:///tmp/fmnist.sock\n"
    "      --feeder-index=J    this feeder's index among F (default 0)\n"
    "      --feeders=F         feeders serving the job together (default 1): feeder J\n"
    "                          makes the pieces whose sequence number is J mod F\n"
    "  -t, --threads=N         decode threads, and files scanned at once at start\n"
    "                          (default: the CPUs this process may use, at most 8)\n"
    "      --max-piece-bytes=N buffer per piece (default: from the features)\n"
    "      --piece-memory=BYTES bound on all piece buffers together (default 1G; K, M,\n"
    "                          G, T suffixes): a cluster shape that needs more\n"
    "                          (prefetch x replicas x workers + tasks buffers) is refused\n"
    "      --workers=W --replicas=R  serve only this cluster shape (default: the first\n"
    "                          trainer's; one whose trainers all leave without taking a\n"
    "                          piece is forgotten)\n"
    "      --heartbeat-ms=N    heartbeat interval (default 1000)\n"
    "      --report-s=S        log a progress line (pieces, records, MB/s, trainers,\n"
    "                          time waiting for credits) every S seconds (default 30;\n"
    "                          0: never)\n"
    "      --timeout-ms=N      drop a trainer silent this long (default 10000)\n"
    "      --cluster=SPEC      a TF_CONFIG-style cluster spec (JSON or a file) whose\n"
    "                          task is a feeder: gives --listen, --feeder-index and\n"
    "                          --feeders (TF_CONFIG in the environment works too)\n"
    "      --stats=FILE        on exit, write the counters as one JSON object: pieces,\n"
    "                          records, bytes (on the wire), disk_bytes, CPU seconds\n"
    "                          per stage (docs/feeder.md)\n"
    "      --no-shm            never hand pieces over in shared memory (by default a\n"
    "                          trainer on this host that can map it gets them so,\n"
    "                          without copies; docs/protocol.md)\n"
    "  -q, --quiet             log warnings and errors only\n"
    "  -h, --help              this help\n"
    "      --KEY=VALUE         override a job key (e.g. --global_batch_size=128,\n"
    "                          --shuffle.seed=9, --files=a*.tfrecord,b*.tfrecord)\n"
    "\n"
    "plan: --workers=W --replicas=R [--json]: files, elements, pieces and steps per\n"
    "worker and replica per epoch; reads only what counting needs.\n"
    "\n"
    "Signals: SIGINT/SIGTERM stop (trainers are told); SIGUSR1 logs the counters.\n"
    "Exit status: 0 served, 1 data or runtime error, 2 usage.\n";

struct args {
    const char *job, *listen, *cluster, *stats;
    char cluster_bind[SL_CLUSTER_MAX_ADDR + 8];
    uint64_t feeder_index, feeders, threads, max_piece_bytes, piece_memory, heartbeat_ms, timeout_ms, workers, replicas,
        report_s;
    int listen_given, index_given, feeders_given;
    int quiet, json, plan, no_shm;
    /* job overrides: pairs (key, value) pointing into argv */
    const char **keys, **values;
    size_t noverrides;
};

static int parse_u64(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '\0' || *s == '-' || *end != '\0' || errno != 0 || v < min || v > max) {
        fprintf(stderr, "sluice-feeder: --%s: expected an integer in [%" PRIu64 ", %" PRIu64 "], got '%s'\n", opt,
                min, max, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* A byte count: digits, then optionally K, M, G or T (powers of 1024). */
static int parse_bytes(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 0;
    if (end != s && *end != '\0' && end[1] == '\0') {
        const char *units = "KMGT", *u = strchr(units, *end);
        if (u != NULL) {
            shift = 10 * (unsigned)(u - units + 1);
            end++;
        }
    }
    if (*s < '0' || *s > '9' || *end != '\0' || errno != 0 || v > (max >> shift) || ((uint64_t)v << shift) < min) {
        fprintf(stderr,
                "sluice-feeder: --%s: expected a byte count in [%" PRIu64 ", %" PRIu64
                "] (digits, then K, M, G or T), got '%s'\n",
                opt, min, max, s);
        return -1;
    }
    *out = (uint64_t)v << shift;
    return 0;
}

/* Split argv into the feeder's options and --key=value job overrides. */
static int parse_args(int argc, char **argv, struct args *a)
{
    static const struct {
        const char *name;
        int has_arg;
    } known[] = {{"job", 1},      {"listen", 1},     {"feeder-index", 1},   {"feeders", 1}, {"threads", 1},
                 {"max-piece-bytes", 1}, {"heartbeat-ms", 1}, {"timeout-ms", 1}, {"report-s", 1}, {"workers", 1}, {"replicas", 1},
                 {"quiet", 0},    {"json", 0},       {"help", 0},      {"cluster", 1}, {"stats", 1},
                 {"no-shm", 0},   {"piece-memory", 1}};
    a->keys = sl_calloc((size_t)argc, sizeof *a->keys);
    a->values = sl_calloc((size_t)argc, sizeof *a->values);
    if (a->keys == NULL || a->values == NULL)
        return EXIT_DATA;
    int i = 1;
    if (argc > 1 && strcmp(argv[1], "plan") == 0) {
        a->plan = 1;
        i = 2;
    }
    for (; i < argc; i++) {
        const char *arg = argv[i];
        const char *name, *val = NULL;
        char shortname[2] = {0};
        if (arg[0] == '-' && arg[1] != '-' && arg[1] != '\0' && arg[2] == '\0') {
            static const char shorts[] = "jltqh";
            static const char *longs[] = {"job", "listen", "threads", "quiet", "help"};
            const char *p = strchr(shorts, arg[1]);
            if (p == NULL) {
                fprintf(stderr, "sluice-feeder: unknown option '%s'\nTry 'sluice-feeder --help'\n", arg);
                return EXIT_USAGE;
            }
            shortname[0] = arg[1];
            name = longs[p - shorts];
        } else if (strncmp(arg, "--", 2) == 0) {
            name = arg + 2;
        } else {
            fprintf(stderr, "sluice-feeder: unexpected argument '%s'\nTry 'sluice-feeder --help'\n", arg);
            return EXIT_USAGE;
        }
        const char *eq = shortname[0] ? NULL : strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        int found = -1;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (strlen(known[k].name) == nlen && strncmp(known[k].name, name, nlen) == 0)
                found = (int)k;
        if (found < 0) {
            /* a job override: --key=value or --key value */
            if (eq == NULL && i + 1 >= argc) {
                fprintf(stderr, "sluice-feeder: --%s: missing value (job overrides are --KEY=VALUE)\n", name);
                return EXIT_USAGE;
            }
            char *key = sl_malloc(nlen + 1);
            if (key == NULL)
                return EXIT_DATA;
            memcpy(key, name, nlen);
            key[nlen] = '\0';
            a->keys[a->noverrides] = key;
            a->values[a->noverrides++] = eq ? eq + 1 : argv[++i];
            continue;
        }
        if (known[found].has_arg) {
            if (eq)
                val = eq + 1;
            else if (i + 1 < argc)
                val = argv[++i];
            else {
                fprintf(stderr, "sluice-feeder: --%s needs a value\nTry 'sluice-feeder --help'\n", known[found].name);
                return EXIT_USAGE;
            }
        } else if (eq) {
            fprintf(stderr, "sluice-feeder: --%s takes no value\n", known[found].name);
            return EXIT_USAGE;
        }
        const char *n = known[found].name;
        int rc = 0;
        if (strcmp(n, "help") == 0) {
            fputs(usage, stdout);
            exit(0);
        } else if (strcmp(n, "job") == 0) {
            a->job = val;
        } else if (strcmp(n, "listen") == 0) {
            a->listen = val;
            a->listen_given = 1;
        } else if (strcmp(n, "cluster") == 0) {
            a->cluster = val;
        } else if (strcmp(n, "stats") == 0) {
            a->stats = val;
        } else if (strcmp(n, "feeder-index") == 0) {
            rc = parse_u64(n, val, 0, 4095, &a->feeder_index);
            a->index_given = 1;
        } else if (strcmp(n, "feeders") == 0) {
            rc = parse_u64(n, val, 1, 4096, &a->feeders);
            a->feeders_given = 1;
        } else if (strcmp(n, "piece-memory") == 0) {
            /* at most 2^39: every buffer's offset then fits the wire's shm_offset (2^40) */
            rc = parse_bytes(n, val, 4096, (uint64_t)1 << 39, &a->piece_memory);
        } else if (strcmp(n, "threads") == 0) {
            rc = parse_u64(n, val, 1, 256, &a->threads);
        } else if (strcmp(n, "max-piece-bytes") == 0) {
            rc = parse_u64(n, val, 4096, (uint64_t)1 << 30, &a->max_piece_bytes);
        } else if (strcmp(n, "report-s") == 0) {
            rc = parse_u64(n, val, 0, 86400, &a->report_s);
        } else if (strcmp(n, "heartbeat-ms") == 0) {
            rc = parse_u64(n, val, 10, 600000, &a->heartbeat_ms);
        } else if (strcmp(n, "timeout-ms") == 0) {
            rc = parse_u64(n, val, 50, 3600000, &a->timeout_ms);
        } else if (strcmp(n, "workers") == 0) {
            rc = parse_u64(n, val, 1, 65536, &a->workers);
        } else if (strcmp(n, "replicas") == 0) {
            rc = parse_u64(n, val, 1, 1024, &a->replicas);
        } else if (strcmp(n, "quiet") == 0) {
            a->quiet = 1;
        } else if (strcmp(n, "no-shm") == 0) {
            a->no_shm = 1;
        } else if (strcmp(n, "json") == 0) {
            a->json = 1;
        }
        if (rc != 0)
            return EXIT_USAGE;
    }
    if (a->job == NULL) {
        fprintf(stderr, "sluice-feeder: --job is required\nTry 'sluice-feeder --help'\n");
        return EXIT_USAGE;
    }
    if (a->plan && (a->workers == 0 || a->replicas == 0)) {
        fprintf(stderr, "sluice-feeder: plan needs --workers and --replicas\n");
        return EXIT_USAGE;
    }
    /* a TF_CONFIG-style spec whose task is a feeder gives the endpoint,
     * the index and the feeder count */
    if (!a->plan && (a->workers != 0) != (a->replicas != 0)) {
        fprintf(stderr, "sluice-feeder: --workers and --replicas go together (the cluster shape to serve)\n");
        return EXIT_USAGE;
    }
    if (a->cluster != NULL && (a->listen_given || a->index_given || a->feeders_given)) {
        fprintf(stderr, "sluice-feeder: --cluster gives the feeder's endpoint, index and count: give it or "
                        "--listen/--feeder-index/--feeders, not both\n");
        return EXIT_USAGE;
    }
    const char *spec = a->cluster ? a->cluster : getenv("TF_CONFIG");
    if (!a->plan && a->listen == NULL && spec != NULL) {
        struct sl_cluster c;
        struct sl_error err = {0};
        uint32_t j, F;
        if (sl_cluster_parse(&c, spec, &err) != 0 ||
            sl_cluster_feeder(&c, &j, &F, a->cluster_bind, sizeof a->cluster_bind, &err) != 0) {
            fprintf(stderr, "sluice-feeder: %s\n", err.msg);
            return EXIT_USAGE;
        }
        sl_cluster_free(&c);
        a->listen = a->cluster_bind;
        a->feeder_index = j;
        a->feeders = F;
    }
    if (!a->plan && a->listen == NULL) {
        fprintf(stderr, "sluice-feeder: --listen is required\nTry 'sluice-feeder --help'\n");
        return EXIT_USAGE;
    }
    if (a->feeders == 0)
        a->feeders = 1;
    if (a->feeder_index >= a->feeders) {
        fprintf(stderr, "sluice-feeder: --feeder-index %" PRIu64 " must be below --feeders %" PRIu64 "\n",
                a->feeder_index, a->feeders);
        return EXIT_USAGE;
    }
    return 0;
}

static int prepare_job(const struct args *a, struct feed_job **out)
{
    struct sl_error err = {0};
    struct feed_job *job;
    if (feed_job_load(&job, a->job, &err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        return err.code == SL_EIO ? EXIT_DATA : EXIT_USAGE;
    }
    for (size_t i = 0; i < a->noverrides; i++)
        if (feed_job_set(job, a->keys[i], a->values[i], &err) != 0) {
            sl_log(SL_LOG_ERROR, "%s", err.msg);
            feed_job_free(job);
            return EXIT_USAGE;
        }
    if (feed_job_validate(job, &err) != 0 || feed_job_expand(job, &err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        feed_job_free(job);
        return EXIT_USAGE;
    }
    *out = job;
    return 0;
}

static void on_skip(void *ctx, const char *path, const struct sl_error *err)
{
    (void)ctx;
    (void)path;
    sl_log(SL_LOG_WARN, "skipping file (on_error=skip-file): %s", err->msg);
}

static void on_tail(void *ctx, const char *path, uint64_t bytes)
{
    (void)ctx;
    sl_log(SL_LOG_WARN, "%s: dropped a partial record header of %" PRIu64 " bytes at the end (as TensorFlow does)",
           path, bytes);
}

static void on_progress(void *ctx, size_t files_done, size_t nfiles, uint64_t bytes, uint64_t records)
{
    (void)ctx;
    sl_log(SL_LOG_INFO, "scanning: %zu of %zu files, %.2f GB, %" PRIu64 " records so far", files_done, nfiles,
           (double)bytes / 1e9, records);
}

static int open_source(const struct feed_job *job, int count_only, unsigned threads, struct feed_source **src,
                       struct sl_error *err)
{
    struct feed_source_opts so = {.format = job->format, .compression = job->compression,
                                  .max_record_bytes = (size_t)job->max_record_bytes, .on_error = job->on_error,
                                  .cache_bytes = (size_t)job->inflate_cache_bytes,
                                  .on_skip = on_skip, .on_tail = on_tail, .on_progress = on_progress,
                                  .trust_scan = !job->verify_on_read, .count_only = count_only,
                                  .use_index = job->use_index, .scan_threads = threads, .stop = &stop_flag};
    if (feed_source_open(src, (const char *const *)job->files.items, job->files.n, &so, err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err->msg);
        return EXIT_DATA;
    }
    return 0;
}

static int run_plan(const struct args *a, const struct feed_job *job, struct feed_source *src)
{
    struct feed_plan_config cfg;
    struct sl_error err = {0};
    if (feed_job_fill_plan_config(job, feed_source_counts(src), (uint32_t)a->workers, (uint32_t)a->replicas,
                                  &cfg) != 0) {
        sl_log(SL_LOG_ERROR, "cannot plan this job");
        return EXIT_USAGE;
    }
    uint32_t *files = sl_calloc(job->files.n ? job->files.n : 1, sizeof *files);
    if (files == NULL)
        return EXIT_DATA;
    uint64_t total = 0;
    for (size_t i = 0; i < job->files.n; i++)
        total += feed_source_count(src, i);
    if (!a->json)
        printf("job '%s': %zu files, %" PRIu64 " records; %" PRIu64 " workers x %" PRIu64
               " replicas, global batch %" PRIu64 ", policy %s\n",
               job->name, job->files.n, total, a->workers, a->replicas, job->global_batch_size,
               feed_policy_name(job->policy));
    else
        printf("{\"job\":\"%s\",\"workers\":[", job->name);
    int status = 0;
    for (uint32_t w = 0; w < a->workers; w++) {
        struct feed_plan_summary sum;
        if (feed_plan_summarize(&cfg, w, &sum, &err) != 0) {
            sl_log(SL_LOG_ERROR, "%s: %s", job->source, err.msg);
            status = EXIT_USAGE;
            break;
        }
        size_t nf = feed_plan_worker_files(&cfg, w, files, job->files.n);
        if (nf > job->files.n)
            nf = job->files.n;
        if (a->json) {
            printf("%s{\"worker\":%u,\"steps\":%" PRIu64 ",\"elements\":%" PRIu64 ",\"pieces\":%" PRIu64
                   ",\"files\":[",
                   w ? "," : "", w, sum.steps, sum.elements, sum.pieces);
            for (size_t i = 0; i < nf; i++)
                printf("%s\"%s\"", i ? "," : "", job->files.items[files[i]]);
            printf("],\"replica_elements\":[");
            for (uint64_t r = 0; r < a->replicas && r < 64; r++)
                printf("%s%" PRIu64, r ? "," : "", sum.replica_elements[r]);
            printf("]}");
            continue;
        }
        printf("worker %u: %" PRIu64 " steps/epoch, %" PRIu64 " elements/epoch in %" PRIu64 " pieces, %zu files\n", w,
               sum.steps, sum.elements, sum.pieces, nf);
        for (uint64_t r = 0; r < a->replicas && r < 64; r++)
            printf("  replica %" PRIu64 ": %" PRIu64 " elements/epoch\n", r, sum.replica_elements[r]);
        for (size_t i = 0; i < nf; i++)
            printf("  file %s (%" PRIu64 " records)\n", job->files.items[files[i]], feed_source_count(src, files[i]));
    }
    if (a->json && status == 0)
        printf("]}\n");
    sl_free(files);
    return status;
}

static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* --stats: the counters as one JSON object (schema in docs/feeder.md),
 * through sl_output: a regular file is replaced whole (an exclusive
 * temporary renamed), a device or FIFO written, never replaced. */
static int write_stats(const char *path, const struct feed_counters *c, const struct feed_source *src, double scan_s,
                       double scan_cpu_s)
{
    struct sl_output *out;
    struct sl_error err = {0};
    if (sl_output_open(&out, path, 0, &err) != 0) {
        sl_log(SL_LOG_ERROR, "--stats: %s", err.msg);
        return -1;
    }
    FILE *f = sl_output_stream(out);
    /* bytes on disk for the records served: the files' sizes per record */
    uint64_t nrec = 0;
    for (size_t i = 0; i < feed_source_nfiles(src); i++)
        nrec += feed_source_count(src, i);
    double disk = nrec ? (double)feed_source_disk_bytes(src) / (double)nrec * (double)c->records : 0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const struct feed_stage_times *t = &c->stages;
    double send = c->serve_cpu_s + c->zmq_io_cpu_s;
    fprintf(f,
            "{\"pieces\":%" PRIu64 ",\"records\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"disk_bytes\":%.0f,"
            "\"errors\":%" PRIu64 ",\"trainers\":%" PRIu64 ",\"refused\":%" PRIu64 ",\"shm_pieces\":%" PRIu64
            ",\"blocked_s\":%.6f,"
            "\"elapsed_s\":%.6f,\"pool_bytes\":%" PRIu64 ",\"scan_s\":%.6f,\"scan_cpu_s\":%.6f,"
            "\"max_rss_kb\":%ld,\"cpu_s\":{\"read\":%.6f,\"decompress\":%.6f,\"decode\":%.6f,"
            "\"assemble\":%.6f,\"send\":%.6f,\"serve\":%.6f,\"zmq_io\":%.6f,\"total\":%.6f}}\n",
            c->pieces, c->records, c->bytes, disk, c->errors, c->trainers, c->refused, c->shm_pieces, c->blocked_s,
            c->elapsed_s,
            c->pool_bytes, scan_s, scan_cpu_s, ru.ru_maxrss, t->read, t->decompress, t->decode, t->assemble, send,
            c->serve_cpu_s, c->zmq_io_cpu_s, t->read + t->decompress + t->decode + t->assemble + send);
    if (sl_output_commit(out, &err) != 0) {
        sl_log(SL_LOG_ERROR, "--stats: %s", err.msg);
        return -1;
    }
    return 0;
}

/* One decode thread per CPU this process may run on, at most 8 (past
 * prefetch / 2 threads, each adds two piece buffers to the feeder's
 * memory). Trainers on this host take pieces in shared memory, which costs
 * the feeder next to nothing to send, so decoding may have every core: on
 * 2 CPUs, 2 threads gave 0.81x of raw ZeroMQ against 0.59x with 1. Pieces
 * sent by copy would rather leave ZeroMQ's I/O thread a core (0.77x with
 * 1 thread, 0.69x with 2): --threads for a feeder serving other hosts on
 * a small machine (docs/performance.md). */
static uint64_t default_threads(void)
{
    cpu_set_t set;
    long n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        return 1;
    return n > 8 ? 8 : (uint64_t)n;
}

int main(int argc, char **argv)
{
    struct args a;
    memset(&a, 0, sizeof a);
    a.threads = 0; /* default_threads() unless given */
    a.report_s = 30;
    int status = parse_args(argc, argv, &a);
    if (a.threads == 0)
        a.threads = default_threads();
    sl_log_setup("sluice-feeder", 2, a.quiet ? SL_LOG_WARN : SL_LOG_INFO);
    struct feed_job *job = NULL;
    struct feed_source *src = NULL;
    if (status == 0)
        status = prepare_job(&a, &job);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_dump;
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    struct sl_error src_err = {0};
    double scan_s = 0, scan_cpu_s = 0;
    if (status == 0) {
        double t0 = sl_clock_s(), c0 = process_cpu_s();
        status = open_source(job, a.plan, a.threads ? (unsigned)a.threads : 1, &src, &src_err);
        scan_s = sl_clock_s() - t0;
        scan_cpu_s = process_cpu_s() - c0;
        /* a file that cannot be read or is damaged (on_error=fail): tell
         * the trainers why, rather than leave them waiting for an answer */
        if (status != 0 && !a.plan && src_err.msg[0] != '\0' && !stop_flag)
            (void)feed_server_refuse_all(a.listen, src_err.msg, a.timeout_ms ? (int)a.timeout_ms : 10000, &stop_flag);
    }
    if (status == 0 && a.plan) {
        status = run_plan(&a, job, src);
    } else if (status == 0) {
        /* text lines: one bytes feature per line, named by the job or "line" */
        static struct fmt_feature_spec line_spec = {.name = "line", .dtype = FMT_DTYPE_BYTES};
        int implicit_line = job->format == FMT_FORMAT_TEXT && job->nfeatures == 0;
        struct feed_server_opts o = {.job = job, .src = src, .listen = a.listen,
                                     .specs = implicit_line ? &line_spec : job->features,
                                     .nspecs = implicit_line ? 1 : job->nfeatures,
                                     .feeder_index = (uint32_t)a.feeder_index, .feeders = (uint32_t)a.feeders,
                                     .threads = (unsigned)a.threads, .max_piece_bytes = a.max_piece_bytes,
                                     .piece_memory = a.piece_memory, .workers = (uint32_t)a.workers,
                                     .replicas = (uint32_t)a.replicas,
                                     .heartbeat_ms = (int)a.heartbeat_ms, .timeout_ms = (int)a.timeout_ms,
                                     .report_ms = (int)(a.report_s * 1000), .no_shm = a.no_shm,
                                     .stop = &stop_flag, .dump = &dump_flag};
        struct feed_counters c;
        struct sl_error err = {0};
        int rc = feed_server_run(&o, &c, &err);
        char line[512];
        feed_counters_format(&c, line, sizeof line);
        sl_log(SL_LOG_INFO, "counters: %s", line);
        if (a.stats != NULL && write_stats(a.stats, &c, src, scan_s, scan_cpu_s) != 0)
            status = EXIT_DATA;
        if (rc != 0) {
            sl_log(SL_LOG_ERROR, "%s", err.msg);
            status = EXIT_DATA;
            /* it never served (a feature too large for the pool, a
             * decoder it cannot set up): trainers are told why */
            if (!c.started && !stop_flag)
                (void)feed_server_refuse_all(a.listen, err.msg, a.timeout_ms ? (int)a.timeout_ms : 10000, &stop_flag);
        }
    }
    feed_source_close(src);
    feed_job_free(job);
    for (size_t i = 0; i < a.noverrides; i++)
        sl_free((void *)a.keys[i]);
    sl_free(a.keys);
    sl_free(a.values);
    return status;
}
