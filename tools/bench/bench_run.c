/* sluice-bench run: the input pipeline on the user's own job, end to end.
 *
 * For each feeder count F, --repeat times: start F sluice-feeder and W
 * sluice-trainer processes on loopback (one process group, see
 * bench_proc.c), supervise them, and read what they report: each trainer's
 * summary line (samples, bytes, pieces, stream time from its first piece,
 * input stall), each feeder's --stats file (thread CPU per stage) when the
 * feeder writes one, and every process's wait4 rusage (peak RSS, CPU).
 *
 * The limits are measured in the same run on the same machine: read(2) of
 * the job's files (which also warms the page cache before anything is
 * timed), the fastest inflate for compressed files, memcpy of piece-sized
 * blocks and raw ZeroMQ PUSH/PULL of piece-sized messages on the same
 * transport (bench_limits.c, bench_zmq.c). With --curve every feeder count
 * is measured twice, the plaintext and the CURVE run of each repeat back to
 * back, and its limits twice too: raw ZeroMQ with CURVE, and libsodium's
 * seal and open rates at the piece size (bench_curve.c). A feeder or
 * trainer that fails
 * ends the whole run: every process is stopped and reaped, the failing
 * one's log tail is printed, and the exit status is 1.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_run.h"
#include "feed_job.h"
#include "fmt_files.h"
#include "fmt_stream.h"
#include "progress.h"
#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_log.h"
#include "sto.h"

const char *const run_stage_names[NSTAGES] = {"read", "decompress", "decode", "map", "assemble", "send", "total"};

static const char *const run_model_names[] = {"none", "mlp"};

/* pass_fn: any other --KEY=VALUE is a job override for every feeder,
 * but not the feeder's own options that sluice-bench sets itself. */
static int add_override(void *opts, const char *arg, struct sl_error *err)
{
    struct run_opts *o = opts;
    static const char *const own[] = {"--curve-key=", "--curve-allow=", "--insecure=", "--listen=", "--stats="};
    for (size_t m = 0; m < sizeof own / sizeof own[0]; m++)
        if (strncmp(arg, own[m], strlen(own[m])) == 0)
            return sl_error_set(err, SL_EINVAL,
                                "'%s' is not a job key for the feeders (--curve and --no-shm take no value; with "
                                "--curve the keys are made for the run)",
                                arg);
    if (o->noverrides == (int)(sizeof o->overrides / sizeof o->overrides[0]))
        return sl_error_set(err, SL_EINVAL, "'%s': at most %d job overrides", arg, o->noverrides);
    o->overrides[o->noverrides++] = (char *)arg;
    return 0;
}

static int set_feeders(void *opts, const char *value, struct sl_error *err)
{
    struct run_opts *o = opts;
    return bench_opt_list("--feeders", value, 1, RUN_MAX_FEEDERS, o->feeders, RUN_MAX_CONFIGS, &o->nconfigs, err);
}

#define OFF(f) offsetof(struct run_opts, f)
static const struct sl_opt rows[] = {
    {"job", 0, SL_OPT_STRING, OFF(job), 0, 0, NULL, "FILE", "the job to serve (its files must exist)", NULL, NULL},
    {"feeders", 0, SL_OPT_FUNC, 0, 0, 0, "1", "LIST", "feeder counts to measure, e.g. 1,2,4 (1-16 each, at most 8)",
     NULL, set_feeders},
    {"workers", 0, SL_OPT_INT, OFF(workers), 1, RUN_MAX_WORKERS, "1", "W", "trainer workers (1-32)", NULL, NULL},
    {"replicas", 0, SL_OPT_INT, OFF(replicas), 1, 64, "1", "R", "replicas per worker (1-64)", NULL, NULL},
    {"threads", 0, SL_OPT_INT, OFF(threads), 1, 64, NULL, "N", "decode threads per feeder (default: the feeder's own)",
     NULL, NULL},
    BENCH_OPT_TRANSPORT_ROW(struct run_opts, transport_i),
    {"epochs", 0, SL_OPT_LONG, OFF(epochs), 1, 1000000, NULL, "E",
     "passes over the data per run (default: the job's epochs)", NULL, NULL},
    {"duration", 0, SL_OPT_DOUBLE, OFF(duration), 0.1, 86400, NULL, "S",
     "instead of epochs: stop each run after S seconds", NULL, NULL},
    {"model", 0, SL_OPT_CHOICE, OFF(model_i), 0, 0, "none", "M", "trainer model: none (consume only) or mlp",
     "none|mlp", NULL},
    {"no-shm", 0, SL_OPT_FLAG, OFF(no_shm), 0, 0, NULL, NULL,
     "pieces by copy through ZeroMQ, not in the feeders' shared memory (feeders and trainers get --no-shm)", NULL,
     NULL},
    {"curve", 0, SL_OPT_FLAG, OFF(curve), 0, 0, NULL, NULL,
     "measure each feeder count twice, in the clear and with CURVE (keys made for the run; the ring too), and raw "
     "ZeroMQ both ways",
     NULL, NULL},
    {"repeat", 0, SL_OPT_INT, OFF(repeat), 1, RUN_MAX_REPEAT, "3", "N", "runs per configuration: median, min, max",
     NULL, NULL},
    {"warmup", 0, SL_OPT_INT, OFF(warmup), 0, 10, "1", "N", "untimed runs before the first configuration", NULL, NULL},
    {"out", 0, SL_OPT_STRING, OFF(out), 0, 0, NULL, "DIR", "keep every process's log there (DIR/logs), and the charts",
     NULL, NULL},
    {"json", 0, SL_OPT_FLAG, OFF(json), 0, 0, NULL, NULL,
     "one JSON object (schema: docs/bench.md) instead of the table", NULL, NULL},
    {"plot", 0, SL_OPT_FLAG, OFF(plot), 0, 0, NULL, NULL, "PNG charts into --out (needs gnuplot)", NULL, NULL},
    BENCH_OPT_HELP_ROW,
};

static const struct sl_opt_cmd cmd = {
    .prog = "sluice-bench run",
    .usage = "Usage: sluice-bench run --job FILE [OPTION]... [--KEY=VALUE]...\n"
             "\n"
             "Run the job's input pipeline end to end on this machine: F feeders and W trainer\n"
             "workers as real processes on loopback, for each feeder count, and compare each\n"
             "figure with its limit measured in the same run (read(), inflate, memcpy, raw\n"
             "ZeroMQ of the same message size).\n"
             "\n",
    .footer = "\n"
              "Any other --KEY=VALUE is passed to every feeder as a job override (e.g.\n"
              "--shuffle=null).\n"
              "\n"
              "Exit status: 0 done, 1 a run failed (a process died, a limit could not be\n"
              "measured) or the job's files are missing, 2 usage, 128 + the signal when\n"
              "interrupted (130 SIGINT, 143 SIGTERM, 129 SIGHUP).\n",
    .rows = rows,
    .nrows = sizeof rows / sizeof rows[0],
    .pass_fn = add_override,
};

/* The options, then the checks between them. 0, 1 after --help, or 2 (a
 * usage error, said on stderr). */
static int parse_args(int argc, char **argv, struct run_opts *o)
{
    int rc = bench_opt_parse("run", &cmd, argc, argv, o);
    if (rc != 0)
        return rc;
    o->transport = bench_transport_names[o->transport_i];
    o->model = run_model_names[o->model_i];
    if (o->job == NULL)
        return bench_usage_error("run", "%s", "--job is required");
    if (o->epochs > 0 && o->duration > 0)
        return bench_usage_error("run", "%s", "--epochs and --duration exclude each other");
    if (o->plot && o->out == NULL)
        return bench_usage_error("run", "%s", "--plot needs --out DIR for the charts");
    if (o->plot && o->curve)
        return bench_usage_error("run", "%s",
                                 "--plot draws one line per feeder count and has no place for --curve's second "
                                 "measurement: use --json (or the table) with --curve");
    return 0;
}

/* The job's name and files (after --name= / --files= overrides). Returns
 * 0, 1 with the reason printed when the job file or its files are not
 * there, 2 when the job is unusable (a usage error). */
/* One name of the job's files into g, as the feeder takes it
 * (feed_job_pattern): a local pattern globbed, a remote name as written,
 * an s3:// pattern listed (sto_list, with the environment's endpoint and
 * credentials); a remote pattern the feeder refuses is said here and left
 * out (the feeder's run then fails with the same words). */
static void glob_name(const char *name, int flags, glob_t *g)
{
    const char *local;
    struct sl_error err = {0};
    int kind = feed_job_pattern(name, "files", &local, &err);
    if (kind == FEED_PATTERN_AS_IS) {
        glob(name, flags | GLOB_NOCHECK | GLOB_NOESCAPE, NULL, g); /* no match: the name itself */
    } else if (kind == FEED_PATTERN_GLOB) {
        glob(local, flags, NULL, g);
    } else if (kind == FEED_PATTERN_LIST) { /* an s3:// pattern: its listing, each name as written */
        char **names = NULL;
        size_t n = 0;
        if (sto_list(name, &names, &n, &err) != 0) {
            fprintf(stderr, "sluice-bench run: --job: %s\n", err.msg);
            return;
        }
        for (size_t i = 0; i < n; i++, flags |= GLOB_APPEND)
            glob(names[i], flags | GLOB_NOCHECK | GLOB_NOESCAPE, NULL, g);
        sto_list_free(names, n);
    } else {
        fprintf(stderr, "sluice-bench run: --job: %s\n", err.msg);
    }
}

static int load_job(struct run_opts *o, struct run_data *d)
{
    json_error_t je;
    /* a job file that is not there is a data error (exit 1), as in
     * sluice-feeder; one that does not parse is a usage error (sl_exit.h) */
    if (access(o->job, R_OK) != 0) {
        fprintf(stderr, "sluice-bench run: --job: open(%s): %s\n", o->job, strerror(errno));
        return 1;
    }
    json_t *root = json_load_file(o->job, 0, &je);
    if (root == NULL || !json_is_object(root)) {
        fprintf(stderr, "sluice-bench run: --job: %s:%d: %s\n", o->job, je.line, root ? "not an object" : je.text);
        json_decref(root);
        return 2;
    }
    const char *name = json_string_value(json_object_get(root, "name"));
    const char *files_override = NULL;
    for (int i = 0; i < o->noverrides; i++) {
        if (strncmp(o->overrides[i], "--name=", 7) == 0)
            name = o->overrides[i] + 7;
        if (strncmp(o->overrides[i], "--files=", 8) == 0)
            files_override = o->overrides[i] + 8;
    }
    if (name == NULL || strlen(name) >= sizeof o->job_name) {
        fprintf(stderr, "sluice-bench run: --job: %s has no usable 'name'\n", o->job);
        json_decref(root);
        return 2;
    }
    snprintf(o->job_name, sizeof o->job_name, "%s", name);
    glob_t g;
    memset(&g, 0, sizeof g);
    int flags = 0;
    if (files_override != NULL) {
        char *copy = sl_strdup(files_override), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save), flags = GLOB_APPEND)
            glob_name(t, flags, &g);
        sl_free(copy);
    } else {
        json_t *files = json_object_get(root, "files"), *f;
        size_t i;
        if (json_is_string(files))
            glob_name(json_string_value(files), 0, &g);
        json_array_foreach(files, i, f)
        {
            if (json_is_string(f)) {
                glob_name(json_string_value(f), flags, &g);
                flags = GLOB_APPEND;
            }
        }
    }
    json_decref(root);
    if (g.gl_pathc == 0) {
        fprintf(stderr, "sluice-bench run: --job: %s: no file matches its 'files'\n", o->job);
        globfree(&g);
        return 1; /* files missing: a data error, as in sluice-feeder */
    }
    d->npaths = g.gl_pathc;
    d->paths = sl_calloc(d->npaths, sizeof *d->paths);
    for (size_t i = 0; i < d->npaths; i++) {
        uint64_t size;
        struct sl_error ignored = {0};
        d->paths[i] = sl_strdup(g.gl_pathv[i]);
        if (fmt_file_size(d->paths[i], &size, &ignored) == 0)
            d->disk_bytes += size;
    }
    globfree(&g);
    return 0;
}

/* Records in the files (TFRecord or text; 0 when they cannot be counted:
 * tar shards, or a damaged file, which the runs themselves will report). */
static uint64_t count_records(const struct run_data *d)
{
    struct fmt_files_opts fo;
    memset(&fo, 0, sizeof fo);
    fo.reader.skip_crc = 1;
    const char *p = d->paths[0];
    size_t n = strlen(p);
    if (strstr(p, ".tar") != NULL || (n > 4 && strcmp(p + n - 4, ".tgz") == 0))
        return 0;
    if (strstr(p, ".txt") != NULL)
        fo.reader.format = FMT_FORMAT_TEXT;
    struct fmt_files *f;
    struct sl_error err = {0};
    if (fmt_files_open(&f, (const char *const *)d->paths, d->npaths, &fo, &err) != 0)
        return 0;
    struct fmt_record rec;
    size_t file;
    uint64_t records = 0;
    int rc;
    while ((rc = fmt_files_next(f, &rec, &file, &err)) == 0)
        records++;
    fmt_files_close(f);
    return rc == SL_END ? records : 0;
}

/* The 1-minute load average, or -1. */
static double load_average(void)
{
    double v = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        if (fscanf(f, "%lf", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static int measure_files(struct run_data *d)
{
    d->ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    d->load_start = load_average();
    d->read_bps = bench_rate_files(bench_pass_read, d->paths, d->npaths, 0.5);
    if (d->read_bps < 0) {
        sl_log(SL_LOG_ERROR, "cannot read the job's files (read limit)");
        return -1;
    }
    d->records = count_records(d);
    bench_pass_fn inflate = bench_inflate_for(d->paths[0], &d->inflate_impl);
    if (inflate != NULL) {
        for (size_t i = 0; i < d->npaths; i++) {
            uint64_t b = 0;
            if (inflate(d->paths[i], &b) != 0) {
                sl_log(SL_LOG_ERROR, "%s: cannot inflate it (%s) for the inflate limit", d->paths[i], d->inflate_impl);
                return -1;
            }
            d->inflated_bytes += b;
        }
        d->inflate_bps = bench_rate_files(inflate, d->paths, d->npaths, 0.5);
    }
    return 0;
}

/* Does this feeder take --stats? (Older ones would read it as a job key.) */
static int feeder_has_stats(const struct run_opts *o)
{
    char out[PATH_MAX + 32], buf[16384];
    snprintf(out, sizeof out, "%s/feeder-help.txt", o->dir);
    struct bench_group g;
    memset(&g, 0, sizeof g);
    char *argv[] = {(char *)o->feeder_bin, "--help", NULL};
    if (bench_spawn(&g, argv, out, "/dev/null", "feeder", 0) < 0)
        return 0;
    bench_group_wait(&g, 10);
    bench_group_end(&g, 0.1);
    bench_file_tail(out, buf, sizeof buf);
    unlink(out);
    return strstr(buf, "--stats") != NULL;
}

/* ---- one run ---- */

struct run_files {
    char dir[PATH_MAX];
    char flog[RUN_MAX_FEEDERS][PATH_MAX + 32], fstats[RUN_MAX_FEEDERS][PATH_MAX + 32];
    char tout[RUN_MAX_WORKERS][PATH_MAX + 32], tlog[RUN_MAX_WORKERS][PATH_MAX + 32];
};

static double num(json_t *obj, const char *key)
{
    return json_number_value(json_object_get(obj, key));
}

static int read_summary(const char *path, json_t **out)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    *out = NULL;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, "{\"summary\"", 10) == 0) {
            json_decref(*out);
            *out = json_loads(line, 0, NULL);
        }
    if (f != NULL)
        fclose(f);
    return *out != NULL && json_is_object(json_object_get(*out, "summary")) ? 0 : -1;
}

static void read_stats(const char *path, struct run_sample *s, int *have)
{
    json_t *root = json_load_file(path, 0, NULL);
    json_t *cpu = json_object_get(root, "cpu_s");
    int ok = json_is_object(cpu);
    for (int k = 0; ok && k < NSTAGES; k++) {
        json_t *v = json_object_get(cpu, run_stage_names[k]);
        ok = json_is_number(v);
        if (ok)
            s->stage_cpu[k] += json_number_value(v);
    }
    /* send's two halves (a feeder without them: unknown) */
    json_t *serve = json_object_get(cpu, "serve"), *io = json_object_get(cpu, "zmq_io");
    if (ok && json_is_number(serve) && json_is_number(io) && s->serve_cpu >= 0) {
        s->serve_cpu += json_number_value(serve);
        s->io_cpu += json_number_value(io);
    } else {
        s->serve_cpu = s->io_cpu = -1;
    }
    if (!ok)
        *have = 0;
    json_decref(root);
}

/* The run's processes: feeders 0..F-1, then trainers. */
static int spawn_all(const struct run_opts *o, int F, int curve, struct run_files *rf, struct bench_group *g)
{
    char binds[RUN_MAX_FEEDERS][512], conn[512], list[RUN_MAX_FEEDERS * 512] = "";
    char ring[RUN_MAX_WORKERS * 512] = "";
    for (int j = 0; j < F; j++) {
        if (bench_endpoint(o->transport, rf->dir, j, binds[j], conn, sizeof conn) != 0)
            return -1;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? "," : "", conn);
    }
    for (int w = 0; o->workers > 1 && w < o->workers; w++) {
        char b[512];
        if (bench_endpoint(o->transport, rf->dir, 100 + w, b, conn, sizeof conn) != 0)
            return -1;
        snprintf(ring + strlen(ring), sizeof ring - strlen(ring), "%s%s", w ? "," : "", b);
    }
    char epochs[64] = "";
    if (o->duration > 0)
        snprintf(epochs, sizeof epochs, "--epochs=forever");
    else if (o->epochs > 0)
        snprintf(epochs, sizeof epochs, "--epochs=%ld", o->epochs);
    for (int j = 0; j < F; j++) {
        char idx[16], nf[16], th[16], key[PATH_MAX + 64];
        snprintf(idx, sizeof idx, "%d", j);
        snprintf(nf, sizeof nf, "%d", F);
        snprintf(th, sizeof th, "%d", o->threads);
        char *argv[64] = {(char *)o->feeder_bin, "--job", (char *)o->job, "--listen", binds[j], "--feeder-index", idx,
                          "--feeders",           nf,      "--threads",    th};
        int k = o->threads > 0 ? 11 : 9;
        if (o->no_shm)
            argv[k++] = "--no-shm";
        if (curve) {
            bench_curve_feeder_key(&o->keys, j, key, sizeof key);
            argv[k++] = "--curve-key";
            argv[k++] = key;
            argv[k++] = "--curve-allow";
            argv[k++] = (char *)o->keys.allow;
        }
        if (o->feeder_has_stats) {
            argv[k++] = "--stats";
            argv[k++] = rf->fstats[j];
        }
        for (int i = 0; i < o->noverrides; i++)
            argv[k++] = o->overrides[i];
        if (epochs[0])
            argv[k++] = epochs;
        argv[k] = NULL;
        if (bench_spawn(g, argv, NULL, rf->flog[j], "feeder", j) < 0)
            return -1;
        sl_log(SL_LOG_INFO, "started feeder %d of %d (pid %d), log %s", j, F, (int)g->c[g->n - 1].pid, rf->flog[j]);
    }
    for (int w = 0; w < o->workers; w++) {
        char ws[16], nw[16], nr[16];
        snprintf(ws, sizeof ws, "%d", w);
        snprintf(nw, sizeof nw, "%d", o->workers);
        snprintf(nr, sizeof nr, "%d", o->replicas);
        char *argv[32] = {(char *)o->trainer_bin,
                          "--connect",
                          list,
                          "--job",
                          (char *)o->job_name,
                          "--worker",
                          ws,
                          "--workers",
                          nw,
                          "--replicas",
                          nr,
                          "--model",
                          (char *)o->model,
                          "--quiet"};
        int k = 14;
        if (o->workers > 1 && strcmp(o->model, "none") != 0) {
            argv[k++] = "--ring";
            argv[k++] = ring;
        }
        if (o->no_shm)
            argv[k++] = "--no-shm";
        if (curve) { /* one key pair for every worker: the ring's CURVE too */
            argv[k++] = "--curve-key";
            argv[k++] = (char *)o->keys.client_key;
            argv[k++] = "--curve-server-key";
            argv[k++] = (char *)o->keys.dir;
        }
        argv[k] = NULL;
        if (bench_spawn(g, argv, rf->tout[w], rf->tlog[w], "trainer", w) < 0)
            return -1;
        sl_log(SL_LOG_INFO, "started trainer %d of %d (pid %d), log %s", w, o->workers, (int)g->c[g->n - 1].pid,
               rf->tlog[w]);
    }
    return 0;
}

/* Which child failed, in words, with its log's tail. */
static void report_failure(const struct bench_child *c, const struct run_files *rf)
{
    char st[128], tail[2048];
    bench_file_tail(strcmp(c->role, "feeder") == 0 ? rf->flog[c->index] : rf->tlog[c->index], tail, 1500);
    sl_log(SL_LOG_ERROR, "%s %d (pid %d) %s during the run; the run is stopped. Its log ends:\n%s", c->role, c->index,
           (int)c->pid, bench_status_text(c->status, st, sizeof st), tail[0] ? tail : "(empty)");
}

/* Supervise until every process has ended: 0, -1 (a process failed) or
 * -2 (interrupted). Children are all reaped on return. */
static int supervise(const struct run_opts *o, int F, struct bench_group *g, const struct run_files *rf,
                     struct progress *bar)
{
    double t0 = sl_clock_s(), trainers_done_at = 0;
    int stop_trainers = 0, stop_feeders = 0;
    for (;;) {
        if (bench_stop) {
            progress_clear(bar);
            sl_log(SL_LOG_ERROR, "interrupted by signal %d: stopping every process", (int)bench_stop);
            bench_group_end(g, 2);
            return -2;
        }
        bench_group_poll(g);
        int trainers_left = 0, feeders_left = 0;
        for (int i = 0; i < g->n; i++) {
            const struct bench_child *c = &g->c[i];
            int feeder = i < F;
            if (!c->done) {
                trainers_left += !feeder;
                feeders_left += feeder;
                continue;
            }
            int clean = WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0;
            int asked = feeder ? stop_feeders : stop_trainers;
            /* a trainer stopped by our SIGTERM exits 143; a feeder may exit 0
             * early once its trainers have left */
            if (!clean && !asked && !(feeder && trainers_done_at > 0 && WIFEXITED(c->status))) {
                progress_clear(bar);
                report_failure(c, rf);
                bench_group_end(g, 2);
                return -1;
            }
        }
        double now = sl_clock_s();
        if (trainers_left == 0 && trainers_done_at == 0)
            trainers_done_at = now;
        if (feeders_left == 0 && trainers_left == 0)
            return 0;
        if (o->duration > 0 && !stop_trainers && now - t0 >= o->duration) {
            stop_trainers = 1;
            for (int i = F; i < g->n; i++)
                if (!g->c[i].done)
                    kill(g->c[i].pid, SIGTERM);
        }
        /* feeders leave by themselves once every trainer said goodbye; if
         * they do not within 10 s (or at once in --duration runs), ask */
        if (trainers_done_at > 0 && !stop_feeders && (o->duration > 0 || now - trainers_done_at > 10)) {
            stop_feeders = 1;
            for (int i = 0; i < F; i++)
                if (!g->c[i].done)
                    kill(g->c[i].pid, SIGTERM);
        }
        if (stop_feeders && now - trainers_done_at > 20) {
            sl_log(SL_LOG_WARN, "feeders did not stop on SIGTERM within 10 s: killed");
            bench_group_end(g, 0);
            return 0;
        }
        progress_draw(bar);
        usleep(20000);
    }
}

static int collect(const struct run_opts *o, int F, const struct bench_group *g, const struct run_files *rf,
                   struct run_sample *s, double wall)
{
    memset(s, 0, sizeof *s);
    s->wall_s = wall;
    s->have_stages = o->feeder_has_stats;
    double stream = 0, bytes = 0, pieces = 0, stall = 0;
    for (int i = 0; i < g->n; i++) {
        const struct bench_child *c = &g->c[i];
        double cpu = (double)c->ru.ru_utime.tv_sec + c->ru.ru_utime.tv_usec / 1e6 + (double)c->ru.ru_stime.tv_sec +
                     c->ru.ru_stime.tv_usec / 1e6;
        s->rss_mb[i < F ? i : RUN_MAX_FEEDERS + (i - F)] = (double)c->ru.ru_maxrss / 1024.0;
        if (i < F) {
            s->feeder_cpu_s += cpu;
            if (s->have_stages)
                read_stats(rf->fstats[i], s, &s->have_stages);
            continue;
        }
        s->trainer_cpu_s += cpu;
        json_t *root;
        if (read_summary(rf->tout[i - F], &root) != 0) {
            sl_log(SL_LOG_ERROR, "trainer %d wrote no summary line (%s)", i - F, rf->tout[i - F]);
            json_decref(root);
            return -1;
        }
        json_t *sm = json_object_get(root, "summary");
        /* stream_seconds is printed to the millisecond, which a short
         * stream (a whole tiny job inside one window) rounds to 0: the
         * elements over their rate give its length to the precision of the
         * rate's digits (as sluice-bench feed takes it) */
        double n = num(sm, "elements"), rate = num(sm, "stream_elements_per_s");
        double secs = n > 0 && rate > 0 ? n / rate : num(sm, "stream_seconds");
        if (secs > stream)
            stream = secs;
        s->samples += (uint64_t)num(sm, "elements");
        bytes += num(sm, "bytes");
        pieces += num(sm, "pieces");
        s->shm_pieces += num(sm, "shm_pieces");
        json_t *wf = json_object_get(sm, "input_wait_by_feeder_s"); /* the trainer's attribution */
        for (size_t j = 0; json_is_array(wf) && j < json_array_size(wf) && j < (size_t)F && j < RUN_MAX_FEEDERS; j++)
            if (json_is_number(json_array_get(wf, j)))
                s->wait_feeder_s[j] += json_number_value(json_array_get(wf, j));
        stall += num(sm, "input_stall_pct") / o->workers;
        json_decref(root);
    }
    if (stream <= 0 || s->samples == 0) {
        sl_log(SL_LOG_ERROR, "the trainers received no data (see the logs in %s)", rf->dir);
        return -1;
    }
    s->stream_s = stream;
    s->samples_ps = (double)s->samples / stream;
    s->wire_bps = bytes / stream;
    s->pieces_ps = pieces / stream;
    s->pieces = pieces;
    s->piece_bytes = pieces > 0 ? bytes / pieces : 0;
    s->stall_pct = stall;
    return 0;
}

static int one_run(const struct run_opts *o, const char *logdir, int F, int curve, const char *tag,
                   struct run_sample *s, struct progress *bar)
{
    struct run_files *rf = sl_calloc(1, sizeof *rf);
    if (rf == NULL)
        return -1;
    snprintf(rf->dir, sizeof rf->dir, "%s", o->dir);
    for (int j = 0; j < F; j++) {
        snprintf(rf->flog[j], sizeof rf->flog[j], "%s/%s-feeder-%d.log", logdir, tag, j);
        snprintf(rf->fstats[j], sizeof rf->fstats[j], "%s/%s-feeder-%d.stats.json", logdir, tag, j);
        unlink(rf->fstats[j]);
    }
    for (int w = 0; w < o->workers; w++) {
        snprintf(rf->tout[w], sizeof rf->tout[w], "%s/%s-trainer-%d.out", logdir, tag, w);
        snprintf(rf->tlog[w], sizeof rf->tlog[w], "%s/%s-trainer-%d.log", logdir, tag, w);
    }
    struct bench_group g;
    memset(&g, 0, sizeof g);
    double t0 = sl_clock_s();
    int rc = spawn_all(o, F, curve, rf, &g);
    if (rc != 0) {
        sl_log(SL_LOG_ERROR, "cannot start the processes (fork or endpoints)");
        bench_group_end(&g, 2);
    } else {
        rc = supervise(o, F, &g, rf, bar);
    }
    if (rc == 0)
        rc = collect(o, F, &g, rf, s, sl_clock_s() - t0);
    sl_free(rf);
    return rc;
}

static int make_dir(const char *path)
{
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        sl_log(SL_LOG_ERROR, "mkdir(%s): %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static double median_of(const double *v, int n)
{
    double tmp[RUN_MAX_REPEAT];
    memcpy(tmp, v, (size_t)n * sizeof *v);
    return bench_median(tmp, (size_t)n);
}

/* Raw ZeroMQ (with CURVE for a CURVE configuration, and then libsodium's
 * rates) and memcpy for this configuration's piece size; then the
 * machine's limits at that size that the run's own transport did not
 * give: raw ZeroMQ over ipc and over tcp, and with CURVE (taken from the
 * plaintext pair `plain` of a CURVE configuration where it has them). */
static int measure_config_limits(const struct run_opts *o, struct run_config *c, const struct run_config *plain)
{
    double sizes[RUN_MAX_REPEAT];
    for (int r = 0; r < c->nsamples; r++)
        sizes[r] = c->s[r].piece_bytes;
    size_t piece = (size_t)bench_median(sizes, (size_t)c->nsamples);
    long count = piece > 0 ? (long)(5e8 / (double)piece) : 1000;
    if (count < 1000)
        count = 1000;
    /* the other limits: a quarter GB each, or 500 messages */
    long small = piece > 0 ? (long)(2.5e8 / (double)piece) : 500;
    if (small < 500)
        small = 500;
    struct bench_curve_pair keys;
    memset(&keys, 0, sizeof keys);
    if (o->have_keys && bench_curve_pair_load(&o->keys, &keys) != 0)
        return -1;
    for (int r = 0; r < c->nsamples; r++) {
        double cpu = -1;
        c->raw_zmq_bps[r] = bench_raw_zmq_cpu(o->transport, o->dir, piece, count, c->curve ? &keys : NULL, &cpu);
        c->raw_cpu_per_byte[r] = cpu > 0 && piece > 0 ? cpu / ((double)piece * (double)count) : -1;
        if (c->raw_zmq_bps[r] < 0) {
            sl_log(SL_LOG_ERROR, "raw ZeroMQ limit on %s%s failed", o->transport, c->curve ? " with CURVE" : "");
            memset(&keys, 0, sizeof keys);
            return -1;
        }
    }
    double own = median_of(c->raw_zmq_bps, c->nsamples);
    int is_ipc = strcmp(o->transport, "ipc") == 0;
    c->lim_ipc_bps = c->lim_tcp_bps = c->lim_curve_bps = -1;
    if (plain != NULL) {
        c->lim_ipc_bps = plain->lim_ipc_bps;
        c->lim_tcp_bps = plain->lim_tcp_bps;
    } else {
        double other = bench_raw_zmq(is_ipc ? "tcp" : "ipc", o->dir, piece, small);
        c->lim_ipc_bps = is_ipc ? own : other;
        c->lim_tcp_bps = is_ipc ? other : own;
    }
    if (c->curve)
        c->lim_curve_bps = own;
    else if (o->have_keys)
        c->lim_curve_bps = bench_raw_zmq_curve(o->transport, o->dir, piece, small, &keys);
    memset(&keys, 0, sizeof keys);
    if (c->lim_ipc_bps < 0 || c->lim_tcp_bps < 0 || (o->have_keys && c->lim_curve_bps < 0)) {
        sl_log(SL_LOG_ERROR, "raw ZeroMQ limits (ipc, tcp, CURVE) at %zu bytes failed", piece);
        return -1;
    }
    c->memcpy_bps = bench_rate_memcpy(piece ? piece : 1, 0.3);
    c->sodium_box_bps = c->sodium_open_bps = -1;
    if (c->curve) {
        c->sodium_box_bps = bench_rate_sodium(piece ? piece : 1, 0, 0.3);
        c->sodium_open_bps = bench_rate_sodium(piece ? piece : 1, 1, 0.3);
    }
    return 0;
}

static int run_all(struct run_opts *o, struct run_data *d, struct run_config *cfg)
{
    char logdir[PATH_MAX + 16];
    if (o->out != NULL) {
        snprintf(logdir, sizeof logdir, "%s/logs", o->out);
        if (make_dir(o->out) != 0 || make_dir(logdir) != 0)
            return 1;
    } else {
        snprintf(logdir, sizeof logdir, "%s", o->dir);
    }
    if (access(o->feeder_bin, X_OK) != 0 || access(o->trainer_bin, X_OK) != 0) {
        sl_log(SL_LOG_ERROR, "cannot find %s and %s (build the feeder and trainer)", o->feeder_bin, o->trainer_bin);
        return 1;
    }
    o->feeder_has_stats = feeder_has_stats(o);
    if (!o->feeder_has_stats)
        sl_log(SL_LOG_WARN, "this sluice-feeder has no --stats: the per-stage CPU breakdown is unavailable");
    if (measure_files(d) != 0)
        return 1;
    int ways = o->curve ? 2 : 1; /* plaintext, then CURVE */
    int total = o->warmup + o->nconfigs * o->repeat * ways, done = 0;
    struct progress bar;
    char label[64];
    progress_init(&bar, label, (uint64_t)total, 0);
    bar.unit = "runs";
    for (int w = 0; w < o->warmup; w++) {
        struct run_sample s;
        snprintf(label, sizeof label, "sluice-bench run: warm-up");
        char tag[32];
        snprintf(tag, sizeof tag, "warmup-%d", w);
        int rc = one_run(o, logdir, o->feeders[0], 0, tag, &s, &bar);
        if (rc != 0)
            return 1;
        bar.records = (uint64_t)++done;
    }
    for (int k = 0; k < o->nconfigs; k++) {
        /* with --curve, cfg[2k] is plaintext and cfg[2k + 1] CURVE; their
         * runs alternate so that both see the same machine */
        for (int w = 0; w < ways; w++) {
            struct run_config *c = &cfg[k * ways + w];
            c->feeders = o->feeders[k];
            c->curve = w;
            c->plain_index = w ? k * ways : -1;
        }
        for (int r = 0; r < o->repeat; r++)
            for (int w = 0; w < ways; w++) {
                struct run_config *c = &cfg[k * ways + w];
                char tag[32];
                snprintf(label, sizeof label, "sluice-bench run: %d feeder(s)%s, run %d of %d", c->feeders,
                         w ? " CURVE" : "", r + 1, o->repeat);
                snprintf(tag, sizeof tag, "f%d%s-r%d", c->feeders, w ? "-curve" : "", r);
                if (one_run(o, logdir, c->feeders, w, tag, &c->s[r], &bar) != 0) {
                    progress_clear(&bar);
                    return 1;
                }
                c->nsamples++;
                bar.records = (uint64_t)++done;
            }
        for (int w = 0; w < ways; w++) {
            struct run_config *c = &cfg[k * ways + w];
            snprintf(label, sizeof label, "sluice-bench run: %d feeder(s), raw ZeroMQ%s", c->feeders,
                     w ? " with CURVE" : "");
            progress_draw(&bar);
            if (measure_config_limits(o, c, w ? &cfg[k * ways] : NULL) != 0)
                return 1;
        }
    }
    progress_clear(&bar);
    d->load_end = load_average();
    return 0;
}

int bench_run_main(int argc, char **argv)
{
    struct run_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    bench_find_bins(o.feeder_bin, o.trainer_bin, sizeof o.feeder_bin);
    struct run_data d;
    memset(&d, 0, sizeof d);
    if ((rc = load_job(&o, &d)) != 0)
        return rc;
    if (o.curve && !bench_curve_available()) {
        fprintf(stderr, "sluice-bench run: --curve: this libzmq has no CURVE (zmq_has(\"curve\") is false: it was "
                        "built without libsodium)\n");
        return 2;
    }
    if (bench_tmpdir("run", o.dir, sizeof o.dir) != 0)
        return 1;
    int maxf = 0;
    for (int k = 0; k < o.nconfigs; k++)
        maxf = o.feeders[k] > maxf ? o.feeders[k] : maxf;
    if (o.curve && bench_curve_setup("run", o.dir, maxf, &o.keys) != 0) {
        bench_rmtree(o.dir);
        return 1;
    }
    /* without --curve too: raw ZeroMQ with CURVE is one of the limits
     * printed (none where this libzmq has no CURVE) */
    o.have_keys = o.curve || (bench_curve_available() && bench_curve_setup("run", o.dir, maxf, &o.keys) == 0);
    bench_signals_install();
    struct run_config *cfg = sl_calloc(RUN_MAX_RESULTS, sizeof *cfg);
    int status = cfg ? run_all(&o, &d, cfg) : 1, nresults = o.nconfigs * (o.curve ? 2 : 1);
    if (status == 0) {
        if (o.json)
            run_report_json(stdout, &o, &d, cfg, nresults);
        else
            run_report_table(stdout, &o, &d, cfg, nresults);
        fflush(stdout);
        if (o.plot && run_report_plot(&o, &d, cfg, nresults) != 0 && !bench_stop)
            sl_log(SL_LOG_WARN, "no charts written");
    }
    if (bench_stop)
        status = 128 + (int)bench_stop; /* 130 SIGINT, 143 SIGTERM, 129 SIGHUP (sl_exit.h) */
    bench_rmtree(o.dir);
    for (size_t i = 0; i < d.npaths; i++)
        sl_free(d.paths[i]);
    sl_free(d.paths);
    sl_free(cfg);
    return status;
}
