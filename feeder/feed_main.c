/* sluice-feeder: serve a job's pieces to trainers, or print its plan.
 *
 *   sluice-feeder --job FILE --listen ADDR [--feeder-index J --feeders F]
 *                 [--threads N] [--set KEY=VALUE ...]
 *   sluice-feeder plan --job FILE --workers W --replicas R [--set KEY=VALUE ...]
 *   sluice-feeder keygen NAME
 *
 * Options come from the table `opt_rows` (sl_opt.h). Job key overrides are
 * `--set KEY=VALUE`, or `--KEY=VALUE` when KEY is exactly a job key (the
 * names feed_job's table gives); anything else is an error that names the
 * nearest option or key, so a typo never becomes an override. They are
 * applied after the job file is loaded and before it is checked.
 *
 * Signals: SIGINT/SIGTERM stop cleanly (trainers are told), SIGUSR1 logs
 * the counters; counters are also logged on exit. With --curve-allow,
 * SIGHUP reads the allow-list again (without it, SIGHUP keeps its default
 * action).
 *
 * Security (issue #16, docs/security.md): --curve-key and --curve-allow
 * make the socket a CURVE server that lets in only the allowed trainers'
 * keys; an endpoint others can reach (not sl_endpoint_is_local) without
 * them is refused at start (exit 2) unless --insecure.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "feed_expose.h"
#include "feed_diskcache.h"
#include "feed_job.h"
#include "feed_job_map.h"
#include "feed_plan.h"
#include "feed_report.h"
#include "feed_server.h"
#include "feed_source.h"
#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_cluster.h"
#include "sl_curve.h"
#include "sl_endpoint.h"
#include "sl_env.h"
#include "sl_exit.h"
#include "sl_http_metrics.h"
#include "sl_log.h"
#include "sl_opt.h"
#include "sl_output.h"
#include "sto_opt.h"

#define EXIT_DATA 1
#define EXIT_USAGE 2
#define EXIT_IDLE 3 /* --idle-exit: no trainer for that long */

static volatile sig_atomic_t stop_flag, dump_flag, reload_flag;

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

static void on_reload(int sig)
{
    (void)sig;
    reload_flag = 1;
}

/* The command line, filled from `opt_rows` once in main, then read-only. */
struct args {
    const char *job, *listen, *cluster, *stats, *scan_cache;
    const char *metrics_listen;          /* --metrics-listen HOST:PORT */
    const char *curve_key, *curve_allow; /* --curve-key FILE, --curve-allow DIR */
    const char *ipc_group;               /* --ipc-group GROUP */
    const char *join, *advertise;        /* --join EP[,EP...], --advertise EP */
    char **join_eps;                     /* --join split (owned), njoin of them */
    size_t njoin;
    int insecure;
    const char *cluster_from; /* --cluster-from; env_spec: the spec it made (owned) */
    char *env_spec;
    char *spec_curve_key, *spec_curve_allow; /* the cluster spec's 'curve' paths (owned) */
    char cluster_bind[SL_CLUSTER_MAX_ADDR + 8];
    uint64_t feeder_index, feeders, threads, max_piece_bytes, piece_memory, heartbeat_ms, timeout_ms, workers, replicas,
        report_s, idle_exit_s, metrics_linger_s, end_wait_s;
    int quiet, json, plan, no_shm, no_takeover, done, log_level, log_format;
    int serve_runs;            /* --serve-runs: a new run of the job after each run's end */
    struct sto_config storage; /* --remote-*, --s3-* */
    const char *remote_reads;  /* --remote-reads: auto, ranges, whole */
    uint64_t remote_requests;
    const char *cache_dir; /* --cache-dir, --cache-bytes */
    uint64_t cache_bytes;
    /* job overrides, in the command line's order: keys owned, values
     * borrowed from argv; room for one per argument */
    char **keys;
    const char **values;
    size_t noverrides, cap;
    /* the job keys an override may name (owned) */
    char **key_names;
    size_t nkey_names;
};

static int add_override(struct args *a, const char *key, size_t klen, const char *value, struct sl_error *err)
{
    char *k = sl_malloc(klen + 1);
    if (k == NULL || a->noverrides == a->cap) {
        sl_free(k);
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    }
    memcpy(k, key, klen);
    k[klen] = '\0';
    a->keys[a->noverrides] = k;
    a->values[a->noverrides++] = value;
    return 0;
}

static int is_job_key(const struct args *a, const char *key, size_t len)
{
    for (size_t i = 0; i < a->nkey_names; i++)
        if (strlen(a->key_names[i]) == len && strncmp(a->key_names[i], key, len) == 0)
            return 1;
    return len > 9 && strncmp(key, "features.", 9) == 0;
}

/* --KEY=VALUE for a job key's exact name (sl_opt's extra names). */
static int set_job_key(void *opts, const char *key, const char *value, struct sl_error *err)
{
    return add_override(opts, key, strlen(key), value, err);
}

/* --set KEY=VALUE: the explicit form, for any job key. */
static int set_override(void *opts, const char *value, struct sl_error *err)
{
    struct args *a = opts;
    const char *eq = strchr(value, '=');
    if (eq == NULL || eq == value)
        return sl_error_set(err, SL_EINVAL, "--set: expected KEY=VALUE (a job key, docs/job.md), got '%s'", value);
    size_t len = (size_t)(eq - value);
    if (!is_job_key(a, value, len)) {
        const char *near = sl_opt_nearest(value, len, (const char *const *)a->key_names, a->nkey_names);
        return sl_error_set(err, SL_EINVAL, "--set: unknown job key '%.*s'%s%s%s", (int)(len < 64 ? len : 64), value,
                            near ? "; did you mean " : "", near ? near : "", near ? "?" : "");
    }
    return add_override(a, value, len, eq + 1, err);
}

/* The names a job override may use: feed_job's key table (objects'
 * fields dotted; "features.NAME[.FIELD]" is accepted by its prefix). */
static int load_job_key_names(struct args *a, struct sl_error *err)
{
    size_t n = 0;
    while (feed_job_key_name(n) != NULL)
        n++;
    a->key_names = sl_calloc(n ? n : 1, sizeof *a->key_names);
    if (a->key_names == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if ((a->key_names[a->nkey_names] = sl_strdup(feed_job_key_name(i))) == NULL)
            return sl_error_set(err, SL_ENOMEM, "out of memory");
        a->nkey_names++;
    }
    return 0;
}

static void free_args(struct args *a)
{
    for (size_t i = 0; i < a->noverrides; i++)
        sl_free(a->keys[i]);
    sl_free(a->keys);
    sl_free((void *)a->values);
    for (size_t i = 0; i < a->nkey_names; i++)
        sl_free(a->key_names[i]);
    sl_free(a->key_names);
    for (size_t i = 0; i < a->njoin; i++)
        sl_free(a->join_eps[i]);
    sl_free(a->join_eps);
    sl_free(a->env_spec);
    sl_free(a->spec_curve_key);
    sl_free(a->spec_curve_allow);
}

#define OFF(field) offsetof(struct args, field)

/* docs/feeder.md describes every row; --help is generated from them. */
static const struct sl_opt opt_rows[] = {
    {"job", 'j', SL_OPT_STRING, OFF(job), 0, 0, NULL, "FILE", "the job file (JSON)", NULL, NULL},
    {"listen", 'l', SL_OPT_STRING, OFF(listen), 0, 0, NULL, "ADDR",
     "ZeroMQ endpoint to bind, e.g. tcp://*:5555 or ipc:///tmp/fmnist.sock", NULL, NULL},
    {"feeder-index", 0, SL_OPT_U64, OFF(feeder_index), 0, 4095, "0", "J", "this feeder's index among F", NULL, NULL},
    {"feeders", 0, SL_OPT_U64, OFF(feeders), 1, 4096, "1", "F",
     "feeders serving the job together: feeder J makes the pieces whose sequence number is J mod F (default 1)", NULL,
     NULL},
    {"threads", 't', SL_OPT_U64, OFF(threads), 1, 256, NULL, "N",
     "decode threads, and files scanned at once at start (default: the CPUs this process may use, at most 8)", NULL,
     NULL},
    {"max-piece-bytes", 0, SL_OPT_U64, OFF(max_piece_bytes), 4096, 1 << 30, NULL, "N",
     "buffer per piece (default: from the features)", NULL, NULL},
    /* at most 2^39: every buffer's offset then fits the wire's shm_offset (2^40) */
    {"piece-memory", 0, SL_OPT_BYTES, OFF(piece_memory), 4096, (double)((uint64_t)1 << 39), NULL, "BYTES",
     "bound on all piece buffers together (default 1G; K, M, G, T suffixes): a cluster shape that needs more "
     "(prefetch x replicas x workers + tasks buffers) is refused",
     NULL, NULL},
    {"workers", 0, SL_OPT_U64, OFF(workers), 1, 65536, NULL, "W",
     "with --replicas, serve only this cluster shape (default: the first trainer's; one whose trainers all leave "
     "without taking a piece is forgotten); plan: the workers to plan for",
     NULL, NULL},
    {"replicas", 0, SL_OPT_U64, OFF(replicas), 1, 1024, NULL, "R", "the shape's replicas per worker (as --workers)",
     NULL, NULL},
    {"heartbeat-ms", 0, SL_OPT_U64, OFF(heartbeat_ms), 10, 600000, NULL, "N", "heartbeat interval (default 1000)", NULL,
     NULL},
    {"report-s", 0, SL_OPT_U64, OFF(report_s), 0, 86400, "30", "S",
     "log a progress line (pieces, records, MB/s, trainers, time waiting for credits) every S seconds (0: never)", NULL,
     NULL},
    {"timeout-ms", 0, SL_OPT_U64, OFF(timeout_ms), 50, 3600000, NULL, "N",
     "drop a trainer silent this long (default 10000)", NULL, NULL},
    {"idle-exit", 0, SL_OPT_U64, OFF(idle_exit_s), 0, 604800, "0", "S",
     "stop with exit status 3 once no trainer has been connected for S seconds after the scan (a job-scoped "
     "feeder whose trainers all failed; 0: serve for ever, as a service does)",
     NULL, NULL},
    {"end-wait-s", 0, SL_OPT_U64, OFF(end_wait_s), 0, 86400, "60", "S",
     "after a worker's END, wait up to S seconds for a trainer whose connection closed without a BYE (killed "
     "before it took its last pieces) to come back and resume, before ending without it (0: do not wait)",
     NULL, NULL},
    {"serve-runs", 0, SL_OPT_FLAG, OFF(serve_runs), 0, 0, NULL, NULL,
     "once every worker has had its END, serve a new run of the job from its first piece to the next trainers "
     "(interactive work: a notebook reading the job again), without scanning again; ends on a signal, an error "
     "or --idle-exit",
     NULL, NULL},
    {"cluster", 0, SL_OPT_STRING, OFF(cluster), 0, 0, NULL, "SPEC",
     "a TF_CONFIG-style cluster spec (JSON or a file) whose task is a feeder: gives --listen, --feeder-index and "
     "--feeders (TF_CONFIG in the environment works too)",
     NULL, NULL},
    {"cluster-from", 0, SL_OPT_STRING, OFF(cluster_from), 0, 0, NULL, "SOURCE",
     "slurm[:feeders=F,feeder-port=P,ring-port=Q] or tf_config: --listen, --feeder-index and --feeders from the "
     "environment, Slurm's task variables (the first F tasks are the feeders, default 1; feeder j listens on port "
     "P+j, default 5555) or TF_CONFIG (checked strictly); refused with those options (docs/deploy.md)",
     NULL, NULL},
    {"stats", 0, SL_OPT_STRING, OFF(stats), 0, 0, NULL, "FILE",
     "on exit, write the counters as one JSON object: pieces, records, bytes (on the wire), disk_bytes, CPU "
     "seconds per stage (docs/feeder.md)",
     NULL, NULL},
    SL_OPT_ROW_METRICS_LISTEN(struct args),
    {"metrics-linger", 0, SL_OPT_U64, OFF(metrics_linger_s), 0, 3600, "0", "S",
     "with --metrics-listen: once served, keep /metrics up until one scrape has read the final figures, at most S "
     "seconds (a job-scoped feeder's last counts then reach Prometheus; 0: exit at once)",
     NULL, NULL},
    {"scan-cache", 0, SL_OPT_STRING, OFF(scan_cache), 0, 0, NULL, "DIR",
     "keep each file's scan in DIR (made if absent) so a restart reads only files changed since (docs/feeder.md)", NULL,
     NULL},
    {"no-takeover", 0, SL_OPT_FLAG, OFF(no_takeover), 0, 0, NULL, NULL,
     "serve this feeder's own share only: refuse trainers asking it to take over a lost feeder's share (they ask "
     "another survivor)",
     NULL, NULL},
    {"join", 0, SL_OPT_STRING, OFF(join), 0, 0, NULL, "EP[,EP...]",
     "join a running job as feeder --feeder-index of --feeders (past the job's first feeders): once scanned, ask "
     "the job's feeders at these endpoints (one is enough, all is better) to count this one in; their trainers "
     "then take a share of the pieces not yet sent from it (docs/feeder.md, \"Joining a running job\")",
     NULL, NULL},
    {"advertise", 0, SL_OPT_STRING, OFF(advertise), 0, 0, NULL, "EP",
     "with --join: the endpoint trainers connect to for this feeder (default: --listen; required when --listen is "
     "a wildcard such as tcp://*:5555)",
     NULL, NULL},
    SL_OPT_ROW_CURVE_KEY(struct args),
    {"curve-allow", 0, SL_OPT_STRING, OFF(curve_allow), 0, 0, NULL, "DIR",
     "the trainers allowed: every NAME.pub in DIR (one public key a file; read again on SIGHUP); needs "
     "--curve-key",
     NULL, NULL},
    {"ipc-group", 0, SL_OPT_STRING, OFF(ipc_group), 0, 0, NULL, "GROUP",
     "an ipc:// --listen socket file is 0600 (only this user's trainers connect); with this, 0660 and owned by "
     "GROUP, whose members may connect too",
     NULL, NULL},
    SL_OPT_ROW_INSECURE(struct args),
    SL_OPT_ROW_NO_SHM(struct args),
    {"json", 0, SL_OPT_FLAG, OFF(json), 0, 0, NULL, NULL, "plan: print the plan as one JSON object", NULL, NULL},
    {"set", 0, SL_OPT_FUNC, 0, 0, 0, NULL, "KEY=VALUE",
     "override a job key (docs/job.md), e.g. --set global_batch_size=128, --set shuffle.seed=9, --set "
     "files=a*.tfrecord,b*.tfrecord; --KEY=VALUE does the same when KEY is a job key's exact name",
     NULL, set_override},
    STO_OPT_ROWS(struct args, storage),
    {"remote-reads", 0, SL_OPT_STRING, OFF(remote_reads), 0, 0, "auto", "MODE",
     "remote TFRecord files with an index (use_index): 'ranges' fetches only the records this feeder reads, by byte "
     "range, ahead of their pieces; 'whole' reads each file whole at its first use (files over "
     "inflate_cache_bytes: by range); 'auto': ranges when this feeder reads at most half of each file (shard "
     "\"data\" or hint records/batches over 2+ workers, or 2+ feeders), else for files of large records (64 KiB "
     "or more on average)",
     NULL, NULL},
    {"remote-requests", 0, SL_OPT_U64, OFF(remote_requests), 1, 64, "8", "N",
     "remote files read by range: requests in flight at once", NULL, NULL},
    {"cache-dir", 0, SL_OPT_STRING, OFF(cache_dir), 0, 0, NULL, "DIR",
     "keep remote files read whole in DIR (made if absent) for later epochs and runs, within --cache-bytes; once "
     "full, later files are not kept (every epoch reads them in the same order: those kept are needed first)",
     NULL, NULL},
    {"cache-bytes", 0, SL_OPT_BYTES, OFF(cache_bytes), 1 << 20, (double)((uint64_t)1 << 50), "10G", "BYTES",
     "with --cache-dir: the most the kept files may take (K, M, G, T suffixes); past it at start, the oldest go", NULL,
     NULL},
    SL_OPT_COMMON_ROWS(struct args),
};

static const char usage[] =
    "Usage: sluice-feeder --job FILE --listen ADDR [OPTION]... [--set KEY=VALUE]...\n"
    "  or:  sluice-feeder plan --job FILE --workers W --replicas R [--json] [--set KEY=VALUE]...\n"
    "  or:  sluice-feeder keygen NAME\n"
    "\n"
    "Serve the per-replica batches of a job (docs/job.md) to trainers over ZeroMQ,\n"
    "or print how the job's data is divided among W workers of R replicas.\n"
    "\n";

static const char footer[] = "\n"
                             "A job key's exact name also works as an option: --global_batch_size=128 is\n"
                             "--set global_batch_size=128; a name that is neither an option nor a job key\n"
                             "is an error that names the nearest one.\n"
                             "\n"
                             "plan: --workers=W --replicas=R [--json]: files, elements, pieces and steps per\n"
                             "worker and replica per epoch; reads only what counting needs.\n"
                             "\n"
                             "keygen NAME: write a new CURVE key pair, NAME.key (secret, mode 0600; never\n"
                             "overwritten) and NAME.pub (public, mode 0644), for --curve-key and --curve-allow\n"
                             "here and sluice-trainer's --curve-key and --curve-server-key (docs/security.md).\n"
                             "\n"
                             "Signals: SIGINT/SIGTERM stop (trainers are told); SIGUSR1 logs the counters;\n"
                             "SIGHUP reads --curve-allow again.\n"
                             "\n" SL_EXIT_STATUS_HELP;

static int usage_error(const char *fmt, ...) SL_PRINTF(1, 2);

static int usage_error(const char *fmt, ...)
{
    va_list ap;
    fputs("sluice-feeder: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return EXIT_USAGE;
}

/* The feeder's options and --KEY=VALUE / --set job overrides, then what
 * the cluster spec gives. 0 (a->done after --help or --version), else the
 * exit status with the reason printed. */
static int parse_args(int argc, char **argv, struct args *a)
{
    struct sl_error err = {0};
    uint64_t given = 0;
    a->cap = (size_t)argc;
    a->keys = sl_calloc(a->cap, sizeof *a->keys);
    a->values = sl_calloc(a->cap, sizeof *a->values);
    if (a->keys == NULL || a->values == NULL || load_job_key_names(a, &err) != 0) {
        fprintf(stderr, "sluice-feeder: %s\n", err.msg[0] ? err.msg : "out of memory");
        return EXIT_DATA;
    }
    struct sl_opt_cmd cmd = {.prog = "sluice-feeder",
                             .usage = usage,
                             .footer = footer,
                             .rows = opt_rows,
                             .nrows = sizeof opt_rows / sizeof opt_rows[0],
                             .extra_names = (const char *const *)a->key_names,
                             .nextra = a->nkey_names,
                             .extra_prefix = "features.",
                             .extra_what = "job key",
                             .extra_fn = set_job_key};
    if (argc > 1 && strcmp(argv[1], "plan") == 0) {
        a->plan = 1;
        argc--;
        argv++;
    }
    int rc = sl_opt_parse(&cmd, argc, argv, a, &given, &err);
    if (rc == 1) {
        a->done = 1;
        return 0;
    }
    if (rc != 0)
        return rc == SL_ENOMEM ? EXIT_DATA : usage_error("%s\nTry 'sluice-feeder --help'", err.msg);
    if (a->job == NULL)
        return usage_error("--job is required\nTry 'sluice-feeder --help'");
    if (sto_configure(&a->storage, &err) != 0)
        return usage_error("%s", err.msg);
    if (sl_opt_given(&cmd, given, "cache-bytes") && a->cache_dir == NULL)
        return usage_error("--cache-bytes needs --cache-dir");
    if (a->remote_reads != NULL && strcmp(a->remote_reads, "auto") != 0 && strcmp(a->remote_reads, "ranges") != 0 &&
        strcmp(a->remote_reads, "whole") != 0)
        return usage_error("--remote-reads '%s': expected auto, ranges or whole", a->remote_reads);
    if ((a->workers != 0) != (a->replicas != 0))
        return usage_error("--workers and --replicas go together (the cluster shape to serve)");
    if (a->cluster != NULL && (sl_opt_given(&cmd, given, "listen") || sl_opt_given(&cmd, given, "feeder-index") ||
                               sl_opt_given(&cmd, given, "feeders")))
        return usage_error("--cluster gives the feeder's endpoint, index and count: give it or "
                           "--listen/--feeder-index/--feeders, not both");
    /* --cluster-from: the spec made from the environment stands for
     * --cluster (docs/deploy.md) */
    static const char *const from_env[] = {"cluster", "listen", "feeder-index", "feeders"};
    if (a->cluster_from != NULL && sl_env_refuse_given(&cmd, given, a->cluster_from, from_env, 4, &err) != 0)
        return usage_error("%s", err.msg);
    if (a->cluster_from != NULL && sl_env_cluster_spec(&a->env_spec, a->cluster_from, NULL, &err) != 0)
        return usage_error("--cluster-from %s: %s", a->cluster_from, err.msg);
    if (a->env_spec != NULL)
        a->cluster = a->env_spec;
    /* a TF_CONFIG-style spec whose task is a feeder gives the endpoint,
     * the index and the feeder count */
    const char *spec = a->cluster ? a->cluster : getenv("TF_CONFIG");
    if (!a->plan && a->listen == NULL && spec != NULL) {
        struct sl_cluster c;
        uint32_t j, F;
        if (sl_cluster_parse(&c, spec, &err) != 0)
            return usage_error("%s", err.msg);
        rc = sl_cluster_feeder(&c, &j, &F, a->cluster_bind, sizeof a->cluster_bind, &err);
        /* the spec's key files stand for --curve-key and --curve-allow
         * when the command line does not give them */
        if (rc == 0 && a->curve_key == NULL && c.curve_key != NULL) {
            a->spec_curve_key = c.curve_key;
            c.curve_key = NULL;
            a->curve_key = a->spec_curve_key;
        }
        if (rc == 0 && a->curve_allow == NULL && c.curve_allow != NULL) {
            a->spec_curve_allow = c.curve_allow;
            c.curve_allow = NULL;
            a->curve_allow = a->spec_curve_allow;
        }
        sl_cluster_free(&c);
        if (rc != 0)
            return usage_error("%s", err.msg);
        a->listen = a->cluster_bind;
        a->feeder_index = j;
        a->feeders = F;
    }
    if (!a->plan && a->listen == NULL)
        return usage_error("--listen is required\nTry 'sluice-feeder --help'");
    if (a->listen != NULL && sl_endpoint_check(a->listen, &err) != 0)
        return usage_error("--listen: %s", err.msg);
    if (a->metrics_listen != NULL) {
        struct sockaddr_storage ss;
        socklen_t sslen;
        if (sl_http_metrics_parse(a->metrics_listen, &ss, &sslen, &err) != 0)
            return usage_error("--metrics-listen: %s", err.msg);
    }
    if (a->feeder_index >= a->feeders)
        return usage_error("--feeder-index %" PRIu64 " must be below --feeders %" PRIu64, a->feeder_index, a->feeders);
    if ((rc = feed_join_options(a->join, a->advertise, a->listen, a->feeder_index, a->feeders, a->serve_runs,
                                &a->join_eps, &a->njoin, &err)) != 0)
        return rc == SL_ENOMEM ? EXIT_DATA : usage_error("%s", err.msg);
    if (a->curve_allow != NULL && a->curve_key == NULL)
        return usage_error("--curve-allow needs --curve-key (this feeder's own secret key; 'sluice-feeder keygen "
                           "NAME' makes one)");
    if (a->curve_key != NULL && a->curve_allow == NULL)
        return usage_error("--curve-key needs --curve-allow (a directory of the public keys, NAME.pub, of the "
                           "trainers allowed in)");
    /* safe by default: the data is not served in the clear to whoever can
     * reach the address */
    if (!a->plan && a->curve_key == NULL && !a->insecure && !sl_endpoint_is_local(a->listen))
        return usage_error("--listen %s can be reached from other hosts, and without keys anyone who reaches it "
                           "could read the data: give --curve-key FILE and --curve-allow DIR ('sluice-feeder "
                           "keygen NAME' makes keys; docs/security.md), listen on a local address (ipc:// or "
                           "tcp://127.0.0.1), or add --insecure to serve in the clear anyway",
                           a->listen);
    return 0;
}

/* sluice-feeder keygen NAME: 0, 1 (not written), 2 (usage). */
static int run_keygen(int argc, char **argv)
{
    if (argc == 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
        printf("Usage: sluice-feeder keygen NAME\n\n"
               "Write a new CURVE key pair: NAME.key, the secret key (mode 0600; an existing\n"
               "one is never overwritten), and NAME.pub, the public key (mode 0644), each one\n"
               "line of 40 Z85 characters, whatever the umask. Give NAME.key to --curve-key of\n"
               "the program it is for, and NAME.pub to its peers (docs/security.md); an\n"
               "allow-list refuses a .pub, or a folder, the group or others may write.\n");
        return 0;
    }
    if (argc != 3 || argv[2][0] == '\0' || argv[2][0] == '-')
        return usage_error("keygen takes one argument, the name of the key pair (NAME.key and NAME.pub are "
                           "written)\nTry 'sluice-feeder keygen --help'");
    struct sl_error err = {0};
    if (sl_curve_keygen(argv[2], &err) != 0) {
        fprintf(stderr, "sluice-feeder: keygen: %s\n", err.msg);
        return EXIT_DATA;
    }
    printf("wrote %s.key (secret: keep it on this host, mode 0600) and %s.pub (public: give it to the peers)\n",
           argv[2], argv[2]);
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
        /* files that are not there (a pattern matching none, a read error)
         * are a data error, as a job file that is not there (sl_exit.h) */
        return err.code == SL_EIO ? EXIT_DATA : EXIT_USAGE;
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

/* The scan calls back every SCAN_POLL_MS from the thread that owns the
 * listener's socket: trainers that say HELLO meanwhile are answered (a
 * STATUS with these figures), and a progress line is logged every 2 s. */
#define SCAN_POLL_MS 100
#define SCAN_LOG_NS 2000000000u

struct scan_watch {
    struct feed_listener *listener; /* NULL: plan */
    struct sl_metrics *m;           /* the scan's progress goes here too (NULL: plan) */
    struct feed_scan_status st;
    uint64_t next_log_ns;
};

static void on_progress(void *ctx, size_t files_done, size_t nfiles, uint64_t bytes, uint64_t records)
{
    struct scan_watch *w = ctx;
    w->st = (struct feed_scan_status){.files_done = files_done, .files = nfiles, .records = records, .bytes = bytes};
    sl_metrics_set(w->m, FEED_M_SCAN_FILES, nfiles);
    sl_metrics_set(w->m, FEED_M_SCAN_DONE, files_done);
    sl_metrics_set(w->m, FEED_M_SCAN_RECORDS, records);
    sl_metrics_set(w->m, FEED_M_SCAN_BYTES, bytes);
    feed_listener_answer(w->listener, &w->st);
    uint64_t now = sl_clock_ns();
    if (now >= w->next_log_ns) {
        sl_log(SL_LOG_INFO, "scanning: %zu of %zu files, %.2f GB, %" PRIu64 " records so far", files_done, nfiles,
               (double)bytes / 1e9, records);
        w->next_log_ns = now + SCAN_LOG_NS;
    }
}

static void on_cache(void *ctx, const char *path, const struct sl_error *why)
{
    (void)ctx;
    (void)path; /* the message names it */
    sl_log(SL_LOG_WARN, "%s", why->msg);
}

/* --remote-reads: by range or whole. auto: by range when this feeder reads
 * at most half of each file it reads (the records shared out among 2+
 * workers: DATA, or HINT by records or batches; or the pieces among 2+
 * feeders), else by range the files of large records (64 KiB or more on
 * average) and whole the others: a request a record costs too much for
 * small ones, while large ones are fetched ahead of their pieces, in
 * parallel (bench_remote, docs/performance.md). */
static int remote_ranges(const struct args *a, const struct feed_job *job)
{
    if (a->remote_reads != NULL && strcmp(a->remote_reads, "auto") != 0)
        return strcmp(a->remote_reads, "ranges") == 0 ? FEED_RANGES_ALL : FEED_RANGES_NONE;
    int by_records = job->policy == FEED_SHARD_DATA || (job->policy == FEED_SHARD_HINT && job->hint != FEED_HINT_FILES);
    uint64_t ways = (by_records && a->workers > 1 ? a->workers : 1) * (a->feeders ? a->feeders : 1);
    return ways >= 2 ? FEED_RANGES_ALL : FEED_RANGES_BIG;
}

static int open_source(const struct args *a, const struct feed_job *job, const char *scan_cache, int count_only,
                       unsigned threads, struct scan_watch *watch, struct feed_source **src, struct sl_error *err)
{
    struct feed_source_opts so = {.format = job->format,
                                  .compression = job->compression,
                                  .max_record_bytes = (size_t)job->max_record_bytes,
                                  .on_error = job->on_error,
                                  .cache_bytes = (size_t)job->inflate_cache_bytes,
                                  .on_skip = on_skip,
                                  .on_tail = on_tail,
                                  .on_progress = on_progress,
                                  .progress_ms = watch->listener != NULL ? SCAN_POLL_MS : 0,
                                  .ctx = watch,
                                  .trust_scan = !job->verify_on_read,
                                  .count_only = count_only,
                                  .use_index = job->use_index,
                                  .scan_threads = threads,
                                  .stop = &stop_flag,
                                  .scan_cache = scan_cache,
                                  .on_cache = on_cache,
                                  .remote_ranges = remote_ranges(a, job),
                                  .remote_requests = (unsigned)a->remote_requests,
                                  .disk_cache_dir = a->cache_dir,
                                  .disk_cache_bytes = a->cache_bytes};
    const struct feed_job_list *paths = &job->files;
    if (job->format == FMT_FORMAT_ARRAYS) { /* groups: one array per feature */
        paths = &job->members;
        so.group_size = job->nfeatures;
        so.specs = job->features;
        so.nspecs = job->nfeatures;
    }
    if (feed_source_open(src, (const char *const *)paths->items, paths->n, &so, err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err->msg);
        return EXIT_DATA;
    }
    struct feed_source_cache_stats cs;
    feed_source_cache_stats(*src, &cs);
    if (scan_cache != NULL)
        sl_log(SL_LOG_INFO,
               "scan cache %s: %zu of %zu files from the cache, %zu scanned (%zu damaged entries), "
               "%zu entries written, %zu not written, %zu files too recent to cache",
               scan_cache, cs.hits, job->files.n, cs.scanned, cs.damaged, cs.written, cs.unwritten, cs.recent);
    if (a->cache_dir != NULL) {
        struct feed_diskcache_stats ds;
        feed_source_disk_cache_stats(*src, &ds);
        sl_log(SL_LOG_INFO, "cache %s: %" PRIu64 " remote file(s), %" PRIu64 " of %" PRIu64 " bytes%s", a->cache_dir,
               ds.entries, ds.bytes, a->cache_bytes,
               ds.removed ? " (files past the bound or left partial removed)" : "");
    }
    if (feed_source_ranged(*src) > 0)
        sl_log(SL_LOG_INFO, "%zu remote file(s) read by range: only the records this feeder serves are fetched",
               feed_source_ranged(*src));
    size_t kept = feed_source_captured(*src);
    if (kept > 0)
        sl_log(SL_LOG_INFO, "%zu remote file(s) read once: kept in the cache as the scan read them", kept);
    return 0;
}

static double process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* --curve-key and --curve-allow: 0, or the exit status with the reason
 * logged (2 for a key or directory that is wrong, 1 for one unreadable). */
static int load_curve(const struct args *a, struct sl_curve_keys *keys, struct sl_curve_allow **allow)
{
    struct sl_error err = {0};
    if (sl_curve_load_secret(a->curve_key, keys, &err) != 0) {
        sl_log(SL_LOG_ERROR, "--curve-key: %s", err.msg);
        return err.code == SL_EIO ? EXIT_DATA : EXIT_USAGE;
    }
    if (sl_curve_allow_load(allow, a->curve_allow, NULL, 0, &err) != 0) {
        sl_log(SL_LOG_ERROR, "--curve-allow: %s", err.msg);
        return err.code == SL_EIO ? EXIT_DATA : EXIT_USAGE;
    }
    size_t n = sl_curve_allow_count(*allow);
    sl_log(SL_LOG_INFO, "CURVE: this feeder's public key is %s; %zu trainer keys allowed (%s)", keys->public_z85, n,
           a->curve_allow);
    if (n == 0)
        sl_log(SL_LOG_WARN,
               "CURVE: --curve-allow %s holds no NAME.pub: every trainer is refused until keys are "
               "added there and the feeder gets SIGHUP",
               a->curve_allow);
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

/* --metrics-linger: the final figures stay up until a scrape has read
 * them (one that began after this call), S seconds pass, or a signal. */
static void linger(const struct feed_expose *e, uint64_t s)
{
    if (e == NULL || s == 0 || stop_flag)
        return;
    sl_log(SL_LOG_INFO, "metrics: serving the final figures until a scrape reads them (at most %" PRIu64 " s)", s);
    /* scrapes are answered in order: the next one begun from now reads
     * the final figures (one in progress may have read them before) */
    uint64_t begun = feed_expose_begun(e), deadline = sl_clock_ns() + s * 1000000000u;
    while (feed_expose_scrapes(e) < begun + 1 && sl_clock_ns() < deadline && !stop_flag) {
        struct timespec ts = {.tv_nsec = 20000000};
        nanosleep(&ts, NULL);
    }
}

/* SIGINT/SIGTERM stop, SIGUSR1 logs the counters, SIGPIPE is ignored. */
static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_dump;
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* With --curve-allow, SIGHUP reads the allow-list again. */
static void install_reload(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_reload;
    sigaction(SIGHUP, &sa, NULL);
}

/* The figures, from the scan on: --metrics-listen serves them live.
 * 0, or the exit status with the reason logged. */
static int start_metrics(const struct args *a, const struct feed_job *job, struct sl_metrics **metrics,
                         struct feed_expose **expose)
{
    if (sl_metrics_create(metrics, feed_metric_defs, FEED_M_COUNT) != 0) {
        sl_log(SL_LOG_ERROR, "out of memory");
        return EXIT_DATA;
    }
    if (a->metrics_listen == NULL)
        return 0;
    struct sl_error merr = {0};
    struct feed_expose_opts eo = {
        .listen = a->metrics_listen, .m = *metrics, .job = job->name, .feeder_index = (uint32_t)a->feeder_index};
    if (feed_expose_start(expose, &eo, &merr) != 0) {
        sl_log(SL_LOG_ERROR, "--metrics-listen: %s", merr.msg);
        return merr.code == SL_EINVAL ? EXIT_USAGE : EXIT_DATA;
    }
    sl_log(SL_LOG_INFO, "metrics: serving /metrics on %s (port %u)", a->metrics_listen, feed_expose_port(*expose));
    if (!sl_http_metrics_is_local(a->metrics_listen))
        sl_log(SL_LOG_WARN, SL_HTTP_METRICS_REACHABLE, a->metrics_listen);
    return 0;
}

/* Bound before the scan: a trainer started first is told the feeder is
 * scanning (and waits) instead of hearing nothing; a bind that fails
 * (the address in use) fails the feeder now, not after the scan. */
static int open_listener(const struct args *a, const struct feed_job *job, struct feed_curve *curve,
                         struct feed_listener **listener, struct scan_watch *watch, struct sl_error *err)
{
    if (feed_listener_open(listener, a->listen, job->name, a->heartbeat_ms ? (int)a->heartbeat_ms : 1000, curve,
                           a->ipc_group, err) != 0) {
        sl_log(SL_LOG_ERROR, "%s", err->msg);
        return EXIT_DATA;
    }
    sl_log(SL_LOG_INFO, "listening on %s: scanning %zu files before serving (trainers are told to wait)", a->listen,
           job->files.n);
    watch->listener = *listener;
    watch->st = (struct feed_scan_status){.files = job->files.n};
    return 0;
}

/* Scan the job's files (timed, wall and CPU); a scan that fails is told
 * to the waiting trainers. 0, or the exit status. */
static int scan_source(const struct args *a, struct feed_job *job, struct scan_watch *watch,
                       struct feed_listener *listener, struct sl_metrics *metrics, struct feed_source **src,
                       double *scan_s, double *scan_cpu_s, struct sl_error *src_err)
{
    double t0 = sl_clock_s(), c0 = process_cpu_s();
    int status =
        open_source(a, job, a->scan_cache, a->plan, a->threads ? (unsigned)a->threads : 1, watch, src, src_err);
    *scan_s = sl_clock_s() - t0;
    if (status == 0 && metrics != NULL) { /* the scan's end, whatever the last progress call said */
        uint64_t records = 0;
        for (size_t i = 0; i < feed_source_nfiles(*src); i++)
            records += feed_source_count(*src, i);
        sl_metrics_set(metrics, FEED_M_SCAN_FILES, feed_source_nfiles(*src));
        sl_metrics_set(metrics, FEED_M_SCAN_DONE, feed_source_nfiles(*src));
        sl_metrics_set(metrics, FEED_M_SCAN_RECORDS, records);
    }
    *scan_cpu_s = process_cpu_s() - c0;
    /* a file that cannot be read or is damaged (on_error=fail): tell
     * the trainers why, rather than leave them waiting for an answer */
    if (status != 0 && !a->plan && src_err->msg[0] != '\0' && !stop_flag)
        (void)feed_server_refuse_all(listener, src_err->msg, a->timeout_ms ? (int)a->timeout_ms : 10000, &stop_flag);
    return status;
}

/* Serve the job until stopped, then log the counters and write --stats.
 * 0, EXIT_DATA, or EXIT_IDLE. */
static int serve(const struct args *a, struct feed_job *job, struct feed_source *src, struct feed_listener *listener,
                 struct sl_metrics *metrics, double scan_s, double scan_cpu_s)
{
    int status = 0;
    /* text lines: one bytes feature per line, named by the job or "line" */
    static struct fmt_feature_spec line_spec = {.name = "line", .dtype = FMT_DTYPE_BYTES};
    int implicit_line = job->format == FMT_FORMAT_TEXT && job->nfeatures == 0;
    struct feed_server_opts o = {.job = job,
                                 .src = src,
                                 .listen = a->listen,
                                 .listener = listener,
                                 .specs = implicit_line ? &line_spec : job->features,
                                 .nspecs = implicit_line ? 1 : job->nfeatures,
                                 .feeder_index = (uint32_t)a->feeder_index,
                                 .feeders = (uint32_t)a->feeders,
                                 .threads = (unsigned)a->threads,
                                 .max_piece_bytes = a->max_piece_bytes,
                                 .piece_memory = a->piece_memory,
                                 .workers = (uint32_t)a->workers,
                                 .replicas = (uint32_t)a->replicas,
                                 .heartbeat_ms = (int)a->heartbeat_ms,
                                 .timeout_ms = (int)a->timeout_ms,
                                 .report_ms = (int)(a->report_s * 1000),
                                 .no_shm = a->no_shm,
                                 .no_takeover = a->no_takeover,
                                 .ipc_group = a->ipc_group,
                                 .idle_exit_ms = (int)(a->idle_exit_s * 1000),
                                 .end_wait_ms = (int)(a->end_wait_s * 1000),
                                 .join = (const char *const *)a->join_eps,
                                 .njoin = a->njoin,
                                 .advertise = a->advertise,
                                 .stop = &stop_flag,
                                 .dump = &dump_flag,
                                 .metrics = metrics};
    struct feed_counters c;
    struct sl_error err = {0};
    /* the map stage: its plan (plugins loaded again, for serving) and the
     * features leaving it, which the pieces carry */
    struct map_plan *map = NULL;
    struct fmt_feature_spec *out_specs = NULL;
    int rc = feed_job_map_plan(job, 0, &map, &err);
    if (rc == 0 && map != NULL && (rc = feed_map_out_specs(map, o.specs, o.nspecs, &out_specs, &o.nout_specs)) != 0)
        sl_error_set(&err, rc, "out of memory");
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        map_plan_destroy(map);
        if (!stop_flag)
            (void)feed_server_refuse_all(listener, err.msg, a->timeout_ms ? (int)a->timeout_ms : 10000, &stop_flag);
        return EXIT_USAGE;
    }
    o.map = map;
    o.out_specs = out_specs;
    uint64_t *map_op_ns = map != NULL ? sl_calloc(map_plan_nops(map) + 1, sizeof *map_op_ns) : NULL;
    o.map_op_ns = map_op_ns;
    rc = feed_server_run(&o, &c, &err);
    char line[512];
    feed_counters_format(&c, line, sizeof line);
    sl_log(SL_LOG_INFO, "counters: %s", line);
    if (a->stats != NULL && feed_report_stats(a->stats, &c, src, scan_s, scan_cpu_s, map, map_op_ns) != 0)
        status = EXIT_DATA;
    sl_free(map_op_ns);
    sl_free(out_specs);
    map_plan_destroy(map);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "%s", err.msg);
        status = EXIT_DATA;
        /* it never served (a feature too large for the pool, a
         * decoder it cannot set up): trainers are told why */
        if (!c.started && !stop_flag)
            (void)feed_server_refuse_all(listener, err.msg, a->timeout_ms ? (int)a->timeout_ms : 10000, &stop_flag);
    } else if (c.idle && status == 0) {
        status = EXIT_IDLE;
    }
    return status;
}

/* serve(), and with --serve-runs again after each run that ended with
 * every worker served (not a signal, an error or --idle-exit): the socket
 * is bound anew, so the next trainers' HELLOs start a new run from the
 * first piece over the same scan. 0, EXIT_DATA, or EXIT_IDLE. */
static int serve_runs(const struct args *a, struct feed_job *job, struct feed_source *src,
                      struct feed_listener **listener, const struct feed_curve *curve, struct sl_metrics *metrics,
                      double scan_s, double scan_cpu_s)
{
    for (uint64_t run = 1;; run++) {
        int status = serve(a, job, src, *listener, metrics, scan_s, scan_cpu_s);
        if (status != 0 || !a->serve_runs || stop_flag)
            return status;
        feed_listener_close(*listener); /* its router went with the run */
        struct sl_error err = {0};
        if (feed_listener_open(listener, a->listen, job->name, a->heartbeat_ms ? (int)a->heartbeat_ms : 1000, curve,
                               a->ipc_group, &err) != 0) {
            sl_log(SL_LOG_ERROR, "--serve-runs: %s", err.msg);
            return EXIT_DATA;
        }
        sl_log(SL_LOG_INFO, "--serve-runs: run %" PRIu64 " served; the next trainers get run %" PRIu64, run, run + 1);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "keygen") == 0)
        return run_keygen(argc, argv);
    struct args a;
    memset(&a, 0, sizeof a);
    a.threads = 0; /* default_threads() unless given */
    int status = parse_args(argc, argv, &a);
    if (status != 0 || a.done) {
        free_args(&a);
        return status;
    }
    if (a.threads == 0)
        a.threads = default_threads();
    sl_log_setup("sluice-feeder", 2,
                 a.quiet && a.log_level < SL_LOG_WARN ? SL_LOG_WARN : (enum sl_log_level)a.log_level);
    sl_log_set_format((enum sl_log_format)a.log_format);
    struct feed_job *job = NULL;
    struct feed_source *src = NULL;
    if (status == 0)
        status = prepare_job(&a, &job);
    if (status == 0 && a.workers == 0) { /* the shape: the flags', else the job's, else the first trainer's */
        a.workers = job->workers;
        a.replicas = job->replicas;
    }
    if (status == 0 && a.plan && a.workers == 0)
        status = usage_error("plan needs --workers and --replicas (or the job's 'workers' and 'replicas')");
    if (status == 0 && !a.plan && a.workers == 0)
        sl_log(SL_LOG_INFO, "cluster shape: the first trainer's (--workers/--replicas or the job's 'workers' and "
                            "'replicas' fix it: a feeder others can reach should)");
    install_signals();
    /* CURVE: the feeder's keys and the trainers allowed */
    struct sl_curve_keys curve_keys;
    struct sl_curve_allow *curve_allow = NULL;
    struct feed_curve curve = {.keys = &curve_keys, .reload = &reload_flag};
    if (status == 0 && !a.plan && a.curve_key != NULL)
        status = load_curve(&a, &curve_keys, &curve_allow);
    curve.allow = curve_allow;
    if (curve_allow != NULL)
        install_reload();
    if (status == 0 && !a.plan && a.curve_key == NULL && !sl_endpoint_is_local(a.listen))
        sl_log(SL_LOG_WARN,
               "serving in the clear on %s (--insecure): anyone who reaches it can read the data and "
               "join (docs/security.md)",
               a.listen);
    struct sl_metrics *metrics = NULL;
    struct feed_expose *expose = NULL;
    if (status == 0 && !a.plan)
        status = start_metrics(&a, job, &metrics, &expose);
    struct sl_error src_err = {0};
    double scan_s = 0, scan_cpu_s = 0;
    struct feed_listener *listener = NULL;
    struct scan_watch watch = {.next_log_ns = sl_clock_ns() + SCAN_LOG_NS, .m = metrics};
    if (status == 0 && !a.plan)
        status = open_listener(&a, job, curve_allow != NULL ? &curve : NULL, &listener, &watch, &src_err);
    if (status == 0)
        status = scan_source(&a, job, &watch, listener, metrics, &src, &scan_s, &scan_cpu_s, &src_err);
    if (status == 0 && a.plan)
        status = feed_report_plan(job, src, (uint32_t)a.workers, (uint32_t)a.replicas, a.json);
    else if (status == 0)
        status = serve_runs(&a, job, src, &listener, curve_allow != NULL ? &curve : NULL, metrics, scan_s, scan_cpu_s);
    feed_listener_close(listener);
    linger(expose, a.metrics_linger_s);
    feed_expose_stop(expose); /* before the figures it reads go */
    sl_metrics_destroy(metrics);
    sl_curve_allow_free(curve_allow);
    memset(&curve_keys, 0, sizeof curve_keys);
    feed_source_close(src);
    feed_job_free(job);
    free_args(&a);
    return status;
}
