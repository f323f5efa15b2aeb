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
 */
#include <errno.h>
#include <getopt.h>
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

static const char usage[] =
    "Usage: sluice-bench feed --job FILE [OPTION]... [--KEY=VALUE]...\n"
    "\n"
    "Feeder -> trainer throughput (--model none) against raw ZeroMQ PUSH/PULL of\n"
    "same-sized messages on the same transport, measured in one run.\n"
    "\n"
    "  --job FILE          the job to serve (its files must exist)\n"
    "  --feeders LIST      feeder counts to measure, e.g. 1,2 (default 1)\n"
    "  --workers W         trainer workers (default 1)\n"
    "  --replicas R        replicas per worker (default 1)\n"
    "  --threads N         decode threads per feeder (default: the feeder's own)\n"
    "  --transport T       ipc (default) or tcp\n"
    "  --no-shm            pieces by copy through ZeroMQ, not in shared memory\n"
    "                      (feeders and trainers get --no-shm)\n"
    "  --repeat N          runs per configuration, median reported (default 3)\n"
    "  --json              one JSON object per configuration\n"
    "  --KEY=VALUE         passed to every feeder as a job override (e.g. --epochs=5)\n";

struct opts {
    const char *job;
    int feeders[8], nfeeders;
    int workers, replicas, threads, repeat, json, no_shm;
    const char *transport;
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

static int one_run(const struct opts *o, int F, struct run *r)
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
        if (fp[j] == 0) {
            char idx[16], nf[16], th[16];
            snprintf(idx, sizeof idx, "%d", j);
            snprintf(nf, sizeof nf, "%d", F);
            snprintf(th, sizeof th, "%d", o->threads);
            char *argv[64] = {(char *)o->feeder_bin, "--job", (char *)o->job, "--listen", binds[j], "--feeder-index", idx,
                              "--feeders", nf, "--threads", th};
            int k = o->threads > 0 ? 11 : 9;
            if (o->no_shm)
                argv[k++] = "--no-shm";
            for (int i = 0; i < o->noverrides; i++)
                argv[k++] = o->overrides[i];
            argv[k] = NULL;
            dup2(errfd, 2);
            execv(argv[0], argv);
            _exit(127);
        }
    }
    int pipes[64][2];
    pid_t tp[64];
    for (int w = 0; w < o->workers; w++) {
        if (pipe(pipes[w]) != 0)
            return -1;
        tp[w] = fork();
        if (tp[w] == 0) {
            char ws[16], nw[16], nr[16];
            snprintf(ws, sizeof ws, "%d", w);
            snprintf(nw, sizeof nw, "%d", o->workers);
            snprintf(nr, sizeof nr, "%d", o->replicas);
            char *argv[] = {(char *)o->trainer_bin, "--connect", list, "--job", "", "--worker", ws, "--workers", nw,
                            "--replicas", nr, "--quiet", o->no_shm ? "--no-shm" : NULL, NULL};
            /* the job name: read from the job file by the feeder; the trainer
             * must say it: take it from the environment set below */
            argv[4] = getenv("SLUICE_BENCH_JOB_NAME");
            dup2(pipes[w][1], 1);
            close(pipes[w][0]);
            execv(argv[0], argv);
            _exit(127);
        }
        close(pipes[w][1]);
    }
    /* sample the feeders' anonymous memory until the trainers finish */
    long anon_max = 0;
    int running = o->workers;
    int status_all = 0;
    char out[64][2048];
    size_t outn[64] = {0};
    while (running > 0) {
        for (int j = 0; j < F; j++) {
            long v = rss_own_kb(fp[j]);
            if (v > anon_max)
                anon_max = v;
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

int bench_feed_main(int argc, char **argv)
{
    struct opts o = {.workers = 1, .replicas = 1, .threads = 0, .repeat = 3, .transport = "ipc", .nfeeders = 1};
    o.feeders[0] = 1;
    bench_find_bins(o.feeder_bin, o.trainer_bin, sizeof o.feeder_bin);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--no-shm") == 0) {
            o.no_shm = 1;
        } else if (strcmp(a, "--json") == 0) {
            o.json = 1;
        } else if (v != NULL && strcmp(a, "--job") == 0) {
            o.job = argv[++i];
        } else if (v != NULL && strcmp(a, "--workers") == 0) {
            o.workers = atoi(argv[++i]);
        } else if (v != NULL && strcmp(a, "--replicas") == 0) {
            o.replicas = atoi(argv[++i]);
        } else if (v != NULL && strcmp(a, "--threads") == 0) {
            o.threads = atoi(argv[++i]);
            if (o.threads < 1)
                o.threads = -1; /* given, but not a count: refused below */
        } else if (v != NULL && strcmp(a, "--repeat") == 0) {
            o.repeat = atoi(argv[++i]);
        } else if (v != NULL && strcmp(a, "--transport") == 0) {
            o.transport = argv[++i];
        } else if (v != NULL && strcmp(a, "--feeders") == 0) {
            o.nfeeders = 0;
            char *copy = strdup(argv[++i]), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t && o.nfeeders < 8; t = strtok_r(NULL, ",", &save))
                o.feeders[o.nfeeders++] = atoi(t);
            free(copy);
        } else if (strncmp(a, "--", 2) == 0 && strchr(a, '=') != NULL && o.noverrides < 32) {
            o.overrides[o.noverrides++] = argv[i];
        } else {
            fprintf(stderr, "sluice-bench feed: bad argument '%s'\nTry 'sluice-bench feed --help'\n", a);
            return 2;
        }
    }
    int bad = o.job == NULL || o.workers < 1 || o.workers > 64 || o.replicas < 1 || o.threads < 0 || o.repeat < 1 ||
              o.repeat > 64 || (strcmp(o.transport, "ipc") != 0 && strcmp(o.transport, "tcp") != 0);
    for (int k = 0; k < o.nfeeders; k++)
        bad |= o.feeders[k] < 1 || o.feeders[k] > 8;
    if (bad) {
        fprintf(stderr, "sluice-bench feed: --job is required; workers 1-64, feeders 1-8, threads >= 1, transport ipc|tcp\n");
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
    if (!o.json)
        printf("sluice-bench feed: job %s, %d worker(s) x %d replica(s), %s, pieces %s, median of %d\n\n", o.job,
               o.workers, o.replicas, o.transport, o.no_shm ? "by copy (--no-shm)" : "in shared memory when mapped",
               o.repeat);
    if (!o.json)
        printf("  %-8s %-10s %-12s %-10s %-12s %-14s %-7s %-5s %s\n", "feeders", "pieces/s", "records/s", "GB/s",
               "raw zmq GB/s", "piece bytes", "ratio", "shm", "feeder RSS anon+shmem / bound (MB)");
    for (int k = 0; k < o.nfeeders; k++) {
        int F = o.feeders[k];
        double bps[64], pps[64], rps[64], raw[64], anon = 0, bound = 0, piece = 0, maxrss = 0;
        uint64_t npieces = 0, nshm = 0;
        for (int rep = 0; rep < o.repeat; rep++) {
            struct run r;
            if (one_run(&o, F, &r) != 0) {
                bench_rmtree(o.dir);
                return 1;
            }
            if (rep == 0 && k == 0 && (double)r.pieces * r.piece_bytes < 1e9)
                fprintf(stderr,
                        "sluice-bench feed: note: a run moves only %.1f MB; start-up weighs on runs this short "
                        "(the baseline moves at least 2 GB): raise --epochs=E for a figure that compares\n",
                        (double)r.pieces * r.piece_bytes / 1e6);
            npieces += r.pieces;
            nshm += r.shm_pieces;
            bps[rep] = r.bytes_per_s;
            pps[rep] = r.pieces_per_s;
            rps[rep] = r.records_per_s;
            piece = r.piece_bytes;
            if (r.rss_anon_mb > anon)
                anon = r.rss_anon_mb;
            if (r.rss_max_mb > maxrss)
                maxrss = r.rss_max_mb;
            bound = r.bound_mb;
            /* the baseline moves messages of the same size: as many as the
             * run's pieces, and at least 2 GB, so it lasts long enough to time */
            long count = (long)r.pieces;
            if (piece > 0 && (double)count * piece < 2e9)
                count = (long)(2e9 / piece);
            raw[rep] = bench_raw_zmq(o.transport, o.dir, (size_t)piece, count);
        }
        double b = bench_median(bps, (size_t)o.repeat), p = bench_median(pps, (size_t)o.repeat);
        double rr = bench_median(rps, (size_t)o.repeat), zr = bench_median(raw, (size_t)o.repeat);
        if (o.json)
            printf("{\"bench\":\"feed\",\"feeders\":%d,\"workers\":%d,\"replicas\":%d,\"transport\":\"%s\","
                   "\"shm_share\":%.3f,"
                   "\"pieces_per_s\":%.6g,\"records_per_s\":%.6g,\"gb_per_s\":%.6g,\"raw_zmq_gb_per_s\":%.6g,"
                   "\"ratio\":%.6g,\"piece_bytes\":%.0f,\"feeder_rss_anon_mb\":%.1f,\"feeder_rss_max_mb\":%.1f,"
                   "\"piece_memory_bound_mb\":%.1f}\n",
                   F, o.workers, o.replicas, o.transport, npieces ? (double)nshm / (double)npieces : 0.0, p, rr,
                   b / 1e9, zr / 1e9, zr > 0 ? b / zr : 0, piece, anon, maxrss, bound);
        else
            printf("  %-8d %-10.0f %-12.0f %-10.3f %-12.3f %-14.0f %-7.2f %-5s %.1f / %.1f (+ fixed; max RSS %.1f)\n",
                   F, p, rr, b / 1e9, zr / 1e9, piece, zr > 0 ? b / zr : 0,
                   nshm == 0 ? "no" : nshm == npieces ? "all" : "some", anon, bound, maxrss);
    }
    bench_rmtree(o.dir);
    return 0;
}
