/* sluice-bench feed: feeder throughput against raw ZeroMQ, in one run.
 *
 * For each feeder count F in --feeders, starts F sluice-feeder processes and
 * W sluice-trainer processes (--model none) on loopback (ipc or tcp), and
 * reads each trainer's summary line: pieces/s, records/s and GB/s from the
 * first piece to the last (the feeders' start-up scan is not counted). The
 * baseline, measured in the same run on the same transport: a PUSH process
 * sending messages of the same size (zero-copy) to a PULL process, the least
 * work ZeroMQ can do to move those bytes. The feeder's peak memory
 * (anonymous plus shared RSS, sampled: its piece pool is shared memory
 * when trainers map it) is reported against its stated bound.
 *
 * On one host feeders hand pieces to trainers in shared memory by default;
 * --no-shm measures the copy path (what trainers on other hosts get).
 *
 * --curve measures every configuration twice in each repeat, in the clear
 * and with CURVE (keys made in the scratch folder, bench_curve.c), the two
 * runs back to back so that both see the same machine, and the raw
 * baseline twice too: plain PUSH/PULL and the same pair with CURVE. The
 * ratio that matters is CURVE against plaintext; libsodium's seal and open
 * rates at the piece size on one core say what the cipher alone allows.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "sl_cluster.h"
#include "sl_log.h"

struct opts {
    const char *job;
    int feeders[8], nfeeders;
    int workers, replicas, threads, repeat, json, no_shm, curve;
    struct bench_curve keys; /* with --curve */
    struct bench_curve_pair raw_keys;
    const char *transport;
    int transport_i; /* --transport: bench_transport_names */
    char feeder_bin[PATH_MAX], trainer_bin[PATH_MAX];
    char dir[64]; /* sockets */
    char *overrides[32];
    int noverrides;
};

struct run {
    double bytes_per_s, pieces_per_s, records_per_s;
    double piece_bytes;
    uint64_t pieces;
    double rss_anon_mb, rss_max_mb, bound_mb;
    uint64_t shm_pieces; /* read by the trainers in shared memory */
};

/* RssAnon + RssShmem (kB) in /proc/PID/status: the feeder's own memory,
 * its piece pool included whether private or shared (not the files it
 * maps). */
static long rss_own_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long v = -1, anon = -1, shmem = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %ld kB", &v) == 1)
            anon = v;
        else if (sscanf(line, "RssShmem: %ld kB", &v) == 1)
            shmem = v;
    fclose(f);
    return anon < 0 ? -1 : anon + shmem;
}

static double json_num(const char *text, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(text, pat);
    return p ? strtod(p + strlen(pat), NULL) : 0;
}

/* In the child: exec feeder j of F, listening on bind, its stderr to errfd.
 * Does not return (exit 127 when exec fails). */
static void exec_feeder(const struct opts *o, int j, int F, int curve, char *bind, int errfd)
{
    char idx[16], nf[16], th[16], key[PATH_MAX + 64];
    snprintf(idx, sizeof idx, "%d", j);
    snprintf(nf, sizeof nf, "%d", F);
    snprintf(th, sizeof th, "%d", o->threads);
    char *argv[64] = {(char *)o->feeder_bin, "--job", (char *)o->job, "--listen", bind, "--feeder-index", idx,
                      "--feeders",           nf,      "--threads",    th};
    int k = o->threads > 0 ? 11 : 9;
    if (o->no_shm)
        argv[k++] = "--no-shm";
    if (curve) {
        bench_curve_feeder_key(&o->keys, j, key, sizeof key);
        argv[k++] = "--curve-key";
        argv[k++] = key;
        argv[k++] = (char *)"--curve-allow";
        argv[k++] = (char *)o->keys.allow;
    }
    for (int i = 0; i < o->noverrides; i++)
        argv[k++] = o->overrides[i];
    argv[k] = NULL;
    dup2(errfd, 2);
    execv(argv[0], argv);
    _exit(127);
}

/* In the child: exec trainer w, connecting to list, its stdout to the pipe.
 * Does not return (exit 127 when exec fails). */
static void exec_trainer(const struct opts *o, int w, int curve, char *list, int pipefd[2])
{
    char ws[16], nw[16], nr[16];
    snprintf(ws, sizeof ws, "%d", w);
    snprintf(nw, sizeof nw, "%d", o->workers);
    snprintf(nr, sizeof nr, "%d", o->replicas);
    char *argv[20] = {(char *)o->trainer_bin, "--connect", list,     "--job", "", "--worker", ws, "--workers", nw,
                      "--replicas",           nr,          "--quiet"};
    int k = 12;
    if (o->no_shm)
        argv[k++] = "--no-shm";
    if (curve) {
        argv[k++] = "--curve-key";
        argv[k++] = (char *)o->keys.client_key;
        argv[k++] = "--curve-server-key";
        argv[k++] = (char *)o->keys.dir;
    }
    argv[k] = NULL;
    /* the job name: read from the job file by the feeder; the trainer
     * must say it: take it from the environment set below */
    argv[4] = getenv("SLUICE_BENCH_JOB_NAME");
    dup2(pipefd[1], 1);
    close(pipefd[0]);
    execv(argv[0], argv);
    _exit(127);
}

/* Wait for the trainers tp[0..workers) while sampling the F feeders' own
 * memory (the peak in kB into *anon_max); each trainer's stdout into out[w].
 * Returns 0, or -1 when a trainer failed. */
static int wait_trainers(const struct opts *o, int F, const pid_t *fp, pid_t *tp, int pipes[][2], char out[][2048],
                         long *anon_max)
{
    int running = o->workers;
    int status_all = 0;
    size_t outn[64] = {0};
    while (running > 0) {
        for (int j = 0; j < F; j++) {
            long v = rss_own_kb(fp[j]);
            if (v > *anon_max)
                *anon_max = v;
        }
        for (int w = 0; w < o->workers; w++) {
            if (tp[w] <= 0)
                continue;
            int st;
            pid_t got = waitpid(tp[w], &st, WNOHANG);
            if (got == tp[w]) {
                ssize_t n;
                while ((n = read(pipes[w][0], out[w] + outn[w], sizeof out[w] - 1 - outn[w])) > 0)
                    outn[w] += (size_t)n;
                out[w][outn[w]] = '\0';
                close(pipes[w][0]);
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                    status_all = -1;
                tp[w] = 0;
                running--;
            }
        }
        usleep(20000);
    }
    return status_all;
}

/* Sum the trainers' JSON lines out[0..workers) into r. */
static void sum_trainers(const struct opts *o, char out[][2048], struct run *r)
{
    double secs = 0;
    for (int w = 0; w < o->workers; w++) {
        /* stream_seconds is printed to the millisecond, which a tiny run
         * rounds to 0: the elements and their rate give it in full */
        double n = json_num(out[w], "elements"), rate = json_num(out[w], "stream_elements_per_s");
        double s = n > 0 && rate > 0 ? n / rate : json_num(out[w], "stream_seconds");
        if (s > secs)
            secs = s;
        r->pieces += (uint64_t)json_num(out[w], "pieces");
        r->shm_pieces += (uint64_t)json_num(out[w], "shm_pieces");
        r->records_per_s += json_num(out[w], "stream_elements_per_s");
        r->bytes_per_s += json_num(out[w], "stream_bytes_per_s");
        r->piece_bytes += json_num(out[w], "bytes");
    }
    r->piece_bytes = r->pieces ? r->piece_bytes / (double)r->pieces : 0;
    r->pieces_per_s = secs > 0 ? (double)r->pieces / secs : 0;
}

/* One run of F feeders, with CURVE when `curve` is set. */
static int one_run(const struct opts *o, int F, int curve, struct run *r)
{
    memset(r, 0, sizeof *r);
    char binds[8][128], conns[8][128], list[1200];
    const char *items[8] = {0};
    for (int j = 0; j < F; j++) {
        if (bench_endpoint(o->transport, o->dir, j, binds[j], conns[j], sizeof binds[j]) != 0)
            return -1;
        items[j] = conns[j];
    }
    struct sl_error lerr = {0};
    if (sl_cluster_list_join(items, (size_t)F, list, sizeof list, &lerr) != 0) {
        fprintf(stderr, "sluice-bench feed: %s\n", lerr.msg);
        return -1;
    }
    char errlog[] = "/tmp/sluice-bench-feeder-XXXXXX";
    int errfd = mkstemp(errlog);
    pid_t fp[8];
    for (int j = 0; j < F; j++) {
        fp[j] = fork();
        if (fp[j] == 0)
            exec_feeder(o, j, F, curve, binds[j], errfd);
    }
    int pipes[64][2];
    pid_t tp[64];
    for (int w = 0; w < o->workers; w++) {
        if (pipe(pipes[w]) != 0)
            return -1;
        tp[w] = fork();
        if (tp[w] == 0)
            exec_trainer(o, w, curve, list, pipes[w]);
        close(pipes[w][1]);
    }
    /* sample the feeders' anonymous memory until the trainers finish */
    long anon_max = 0;
    char out[64][2048];
    int status_all = wait_trainers(o, F, fp, tp, pipes, out, &anon_max);
    double maxrss = 0;
    for (int j = 0; j < F; j++) {
        int st;
        struct rusage ru;
        if (wait4(fp[j], &st, 0, &ru) == fp[j] && ru.ru_maxrss / 1024.0 > maxrss)
            maxrss = (double)ru.ru_maxrss / 1024.0;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            status_all = -1;
    }
    /* the feeder's stated bound on piece memory, from its counters line */
    char logbuf[65536];
    ssize_t ln = pread(errfd, logbuf, sizeof logbuf - 1, 0);
    logbuf[ln > 0 ? ln : 0] = '\0';
    const char *pm = strstr(logbuf, "piece_memory=");
    r->bound_mb = pm ? strtod(pm + 13, NULL) / 1048576.0 : 0;
    close(errfd);
    unlink(errlog);
    if (status_all != 0) {
        sl_log(SL_LOG_ERROR, "a feeder or trainer failed; feeder log:\n%s", logbuf);
        return -1;
    }
    sum_trainers(o, out, r);
    r->rss_anon_mb = (double)anon_max / 1024.0;
    r->rss_max_mb = maxrss;
    return 0;
}

static char *read_job_name(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strstr(buf, "\"name\"");
    if (p == NULL || (p = strchr(p + 6, '"')) == NULL)
        return NULL;
    char *e = strchr(p + 1, '"');
    if (e == NULL)
        return NULL;
    *e = '\0';
    return p + 1;
}

/* Every run of one way (plaintext or CURVE) of one configuration. */
struct side {
    double bps[64], pps[64], rps[64], raw[64];
    double anon, maxrss, bound, piece;
    uint64_t npieces, nshm;
};

static void side_add(struct side *sd, int rep, const struct run *r)
{
    sd->npieces += r->pieces;
    sd->nshm += r->shm_pieces;
    sd->bps[rep] = r->bytes_per_s;
    sd->pps[rep] = r->pieces_per_s;
    sd->rps[rep] = r->records_per_s;
    sd->piece = r->piece_bytes;
    if (r->rss_anon_mb > sd->anon)
        sd->anon = r->rss_anon_mb;
    if (r->rss_max_mb > sd->maxrss)
        sd->maxrss = r->rss_max_mb;
    sd->bound = r->bound_mb;
}

/* A keyword option given as --KEY=VALUE would reach the feeders as a job
 * override: the ones that are sluice-bench's own, or that --curve sets,
 * are refused. 0, or 2 said on stderr. */
/* pass_fn: any other --KEY=VALUE is a job override for every feeder,
 * but not the feeder's own options that sluice-bench sets itself. */
static int add_override(void *opts, const char *arg, struct sl_error *err)
{
    struct opts *o = opts;
    static const char *const own[] = {
        "--curve-key=", "--curve-allow=", "--curve-server-key=", "--insecure=", "--listen="};
    for (size_t k = 0; k < sizeof own / sizeof own[0]; k++)
        if (strncmp(arg, own[k], strlen(own[k])) == 0)
            return sl_error_set(err, SL_EINVAL,
                                "'%s': %.*s is not a job key for the feeders (--curve and --no-shm take no value; "
                                "with --curve the keys are made for the run)",
                                arg, (int)strlen(own[k]) - 1, own[k]);
    if (o->noverrides == (int)(sizeof o->overrides / sizeof o->overrides[0]))
        return sl_error_set(err, SL_EINVAL, "'%s': at most %d job overrides", arg, o->noverrides);
    o->overrides[o->noverrides++] = (char *)arg;
    return 0;
}

static int set_feeders(void *opts, const char *value, struct sl_error *err)
{
    struct opts *o = opts;
    return bench_opt_list("--feeders", value, 1, 8, o->feeders, 8, &o->nfeeders, err);
}

#define OFF(f) offsetof(struct opts, f)
static const struct sl_opt rows[] = {
    {"job", 0, SL_OPT_STRING, OFF(job), 0, 0, NULL, "FILE", "the job to serve (its files must exist)", NULL, NULL},
    {"feeders", 0, SL_OPT_FUNC, 0, 0, 0, "1", "LIST", "feeder counts to measure, e.g. 1,2 (1-8 each, at most 8)", NULL,
     set_feeders},
    {"workers", 0, SL_OPT_INT, OFF(workers), 1, 64, "1", "W", "trainer workers", NULL, NULL},
    {"replicas", 0, SL_OPT_INT, OFF(replicas), 1, 256, "1", "R", "replicas per worker", NULL, NULL},
    {"threads", 0, SL_OPT_INT, OFF(threads), 1, 256, NULL, "N", "decode threads per feeder (default: the feeder's own)",
     NULL, NULL},
    BENCH_OPT_TRANSPORT_ROW(struct opts, transport_i),
    {"no-shm", 0, SL_OPT_FLAG, OFF(no_shm), 0, 0, NULL, NULL,
     "pieces by copy through ZeroMQ, not in shared memory (feeders and trainers get --no-shm)", NULL, NULL},
    {"curve", 0, SL_OPT_FLAG, OFF(curve), 0, 0, NULL, NULL,
     "measure each configuration twice, in the clear and with CURVE (keys made for the run), and the raw baseline "
     "both ways; report CURVE against plaintext and libsodium's rate",
     NULL, NULL},
    {"repeat", 0, SL_OPT_INT, OFF(repeat), 1, 64, "3", "N", "runs per configuration, median reported", NULL, NULL},
    {"json", 0, SL_OPT_FLAG, OFF(json), 0, 0, NULL, NULL, "one JSON object per configuration", NULL, NULL},
    BENCH_OPT_HELP_ROW,
};

static const struct sl_opt_cmd cmd = {
    .prog = "sluice-bench feed",
    .usage = "Usage: sluice-bench feed --job FILE [OPTION]... [--KEY=VALUE]...\n"
             "\n"
             "Feeder -> trainer throughput (--model none) against raw ZeroMQ PUSH/PULL of\n"
             "same-sized messages on the same transport, measured in one run.\n"
             "\n",
    .footer = "\n"
              "Any other --KEY=VALUE is passed to every feeder as a job override (e.g.\n"
              "--epochs=5).\n",
    .rows = rows,
    .nrows = sizeof rows / sizeof rows[0],
    .pass_fn = add_override,
};

static void print_json(const struct opts *o, int F, struct side *pl, struct side *cv, double box, double open_box)
{
    double b = bench_median(pl->bps, (size_t)o->repeat), p = bench_median(pl->pps, (size_t)o->repeat);
    double rr = bench_median(pl->rps, (size_t)o->repeat), zr = bench_median(pl->raw, (size_t)o->repeat);
    printf("{\"bench\":\"feed\",\"feeders\":%d,\"workers\":%d,\"replicas\":%d,\"transport\":\"%s\","
           "\"shm_share\":%.3f,"
           "\"pieces_per_s\":%.6g,\"records_per_s\":%.6g,\"gb_per_s\":%.6g,\"raw_zmq_gb_per_s\":%.6g,"
           "\"ratio\":%.6g,\"piece_bytes\":%.0f,\"feeder_rss_anon_mb\":%.1f,\"feeder_rss_max_mb\":%.1f,"
           "\"piece_memory_bound_mb\":%.1f,\"curve\":",
           F, o->workers, o->replicas, o->transport, pl->npieces ? (double)pl->nshm / (double)pl->npieces : 0.0, p, rr,
           b / 1e9, zr / 1e9, zr > 0 ? b / zr : 0, pl->piece, pl->anon, pl->maxrss, pl->bound);
    if (cv == NULL) {
        printf("null}\n");
        return;
    }
    double cb = bench_median(cv->bps, (size_t)o->repeat), cp = bench_median(cv->pps, (size_t)o->repeat);
    double cr = bench_median(cv->rps, (size_t)o->repeat), cz = bench_median(cv->raw, (size_t)o->repeat);
    printf("{\"shm_share\":%.3f,\"pieces_per_s\":%.6g,\"records_per_s\":%.6g,\"gb_per_s\":%.6g,"
           "\"raw_zmq_gb_per_s\":%.6g,\"ratio\":%.6g,\"ratio_to_plaintext\":%.6g,\"raw_ratio_to_plaintext\":%.6g,"
           "\"feeder_rss_anon_mb\":%.1f,\"feeder_rss_max_mb\":%.1f,",
           cv->npieces ? (double)cv->nshm / (double)cv->npieces : 0.0, cp, cr, cb / 1e9, cz / 1e9, cz > 0 ? cb / cz : 0,
           b > 0 ? cb / b : 0, zr > 0 ? cz / zr : 0, cv->anon, cv->maxrss);
    if (box > 0 && open_box > 0)
        printf("\"sodium_box_gb_per_s\":%.6g,\"sodium_open_gb_per_s\":%.6g}}\n", box / 1e9, open_box / 1e9);
    else
        printf("\"sodium_box_gb_per_s\":null,\"sodium_open_gb_per_s\":null}}\n");
}

static void print_row(const struct opts *o, const char *label, struct side *sd)
{
    double b = bench_median(sd->bps, (size_t)o->repeat), p = bench_median(sd->pps, (size_t)o->repeat);
    double rr = bench_median(sd->rps, (size_t)o->repeat), zr = bench_median(sd->raw, (size_t)o->repeat);
    printf("  %-8s %-10.0f %-12.0f %-10.3f %-12.3f %-14.0f %-7.2f %-5s %.1f / %.1f (+ fixed; max RSS %.1f)\n", label, p,
           rr, b / 1e9, zr / 1e9, sd->piece, zr > 0 ? b / zr : 0,
           sd->nshm == 0             ? "no"
           : sd->nshm == sd->npieces ? "all"
                                     : "some",
           sd->anon, sd->bound, sd->maxrss);
}

static int measure(struct opts *o, int k, int first)
{
    int F = o->feeders[k];
    struct side *pl = calloc(2, sizeof *pl), *cv = pl + 1;
    if (pl == NULL)
        return -1;
    for (int rep = 0; rep < o->repeat; rep++) {
        struct run r;
        if (one_run(o, F, 0, &r) != 0)
            goto out_fail;
        if (rep == 0 && first && (double)r.pieces * r.piece_bytes < 1e9)
            fprintf(stderr,
                    "sluice-bench feed: note: a run moves only %.1f MB; start-up weighs on runs this short "
                    "(the baseline moves at least 2 GB): raise --epochs=E for a figure that compares\n",
                    (double)r.pieces * r.piece_bytes / 1e6);
        side_add(pl, rep, &r);
        /* the baseline moves messages of the same size: as many as the
         * run's pieces, and at least 2 GB, so it lasts long enough to time */
        long count = (long)r.pieces;
        if (pl->piece > 0 && (double)count * pl->piece < 2e9)
            count = (long)(2e9 / pl->piece);
        if (count < 2)
            count = 2;
        pl->raw[rep] = bench_raw_zmq(o->transport, o->dir, (size_t)pl->piece, count);
        if (!o->curve)
            continue;
        if (one_run(o, F, 1, &r) != 0)
            goto out_fail;
        side_add(cv, rep, &r);
        if (r.pieces != pl->npieces / (uint64_t)(rep + 1) || (uint64_t)r.piece_bytes != (uint64_t)pl->piece)
            fprintf(stderr,
                    "sluice-bench feed: note: the CURVE run got %" PRIu64 " pieces of %.0f bytes, the "
                    "plaintext run %" PRIu64 " of %.0f\n",
                    r.pieces, r.piece_bytes, pl->npieces / (uint64_t)(rep + 1), pl->piece);
        /* with CURVE as many messages as the run's pieces and at least
         * 0.25 GB: 2 GB would take half a minute at small sizes */
        long ccount = (long)r.pieces;
        if (pl->piece > 0 && (double)ccount * pl->piece < 2.5e8)
            ccount = (long)(2.5e8 / pl->piece);
        if (ccount < 2)
            ccount = 2;
        cv->raw[rep] = bench_raw_zmq_curve(o->transport, o->dir, (size_t)pl->piece, ccount, &o->raw_keys);
        if (cv->raw[rep] < 0) {
            fprintf(stderr, "sluice-bench feed: raw ZeroMQ with CURVE on %s failed\n", o->transport);
            goto out_fail;
        }
    }
    double box = -1, open_box = -1;
    if (o->curve) {
        box = bench_rate_sodium((size_t)pl->piece, 0, 0.3);
        open_box = bench_rate_sodium((size_t)pl->piece, 1, 0.3);
    }
    if (o->json) {
        print_json(o, F, pl, o->curve ? cv : NULL, box, open_box);
    } else {
        char label[32];
        snprintf(label, sizeof label, "%d", F);
        print_row(o, label, pl);
        if (o->curve) {
            snprintf(label, sizeof label, "%d CURVE", F);
            print_row(o, label, cv);
            double b = bench_median(pl->bps, (size_t)o->repeat), cb = bench_median(cv->bps, (size_t)o->repeat);
            double zr = bench_median(pl->raw, (size_t)o->repeat), cz = bench_median(cv->raw, (size_t)o->repeat);
            printf("           CURVE / plaintext: feeders %.2fx, raw ZeroMQ %.2fx", b > 0 ? cb / b : 0,
                   zr > 0 ? cz / zr : 0);
            if (box > 0 && open_box > 0)
                printf("; libsodium on one core at %.0f B: seal %.3f GB/s, open %.3f GB/s\n", pl->piece, box / 1e9,
                       open_box / 1e9);
            else
                printf("; libsodium's rate: not built in\n");
        }
    }
    fflush(stdout);
    free(pl);
    return 0;
out_fail:
    free(pl);
    return -1;
}

int bench_feed_main(int argc, char **argv)
{
    struct opts o = {0};
    bench_find_bins(o.feeder_bin, o.trainer_bin, sizeof o.feeder_bin);
    int prc = bench_opt_parse("feed", &cmd, argc, argv, &o);
    if (prc != 0)
        return prc == 1 ? 0 : 2;
    if (o.job == NULL)
        return bench_usage_error("feed", "%s", "--job is required");
    o.transport = bench_transport_names[o.transport_i];
    int maxf = 0;
    for (int k = 0; k < o.nfeeders; k++)
        if (o.feeders[k] > maxf)
            maxf = o.feeders[k];
    if (o.curve && !bench_curve_available()) {
        fprintf(stderr, "sluice-bench feed: --curve: this libzmq has no CURVE (zmq_has(\"curve\") is false: it was "
                        "built without libsodium)\n");
        return 2;
    }
    char *name = read_job_name(o.job);
    if (name == NULL) {
        fprintf(stderr, "sluice-bench feed: cannot read the job name from %s\n", o.job);
        return 2;
    }
    setenv("SLUICE_BENCH_JOB_NAME", name, 1);
    if (bench_tmpdir("feed", o.dir, sizeof o.dir) != 0)
        return 1;
    if (o.curve &&
        (bench_curve_setup("feed", o.dir, maxf, &o.keys) != 0 || bench_curve_pair_load(&o.keys, &o.raw_keys) != 0)) {
        bench_rmtree(o.dir);
        return 1;
    }
    if (!o.json)
        printf("sluice-bench feed: job %s, %d worker(s) x %d replica(s), %s, pieces %s%s, median of %d\n\n", o.job,
               o.workers, o.replicas, o.transport, o.no_shm ? "by copy (--no-shm)" : "in shared memory when mapped",
               o.curve ? ", plaintext and CURVE" : "", o.repeat);
    if (!o.json)
        printf("  %-8s %-10s %-12s %-10s %-12s %-14s %-7s %-5s %s\n", "feeders", "pieces/s", "records/s", "GB/s",
               "raw zmq GB/s", "piece bytes", "ratio", "shm", "feeder RSS anon+shmem / bound (MB)");
    int status = 0;
    for (int k = 0; k < o.nfeeders && status == 0; k++)
        status = measure(&o, k, k == 0) == 0 ? 0 : 1;
    bench_rmtree(o.dir);
    memset(&o.raw_keys, 0, sizeof o.raw_keys);
    return status;
}
