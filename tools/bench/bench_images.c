/* sluice-bench images: the image map stage (issue #27 section 3) against
 * its limit, decoding alone, measured in the same run.
 *
 * The data is an ImageFolder tree (TREE/CLASS/NAME.jpg, .jpeg or .png, as
 * tools/make_photos.py writes it). In order:
 *   1. the limit: every image read into memory and decoded to RGB on one
 *      thread (img_bench_decode: TurboJPEG tjDecompress2 for JPEGs, libspng
 *      for PNGs), at DCT scale 1/1 and 1/2, images per second;
 *   2. the tree converted to shards with the sibling sluice-record
 *      (`convert images`, not timed), and two jobs written beside them with
 *      the training map: decode_image, random_resized_crop [--size, --size] (224),
 *      random_flip, normalize (float32, CHW). "fused" as a user writes it
 *      (the decode and the crop fused: the JPEG decoded at the smallest
 *      covering DCT scale, only the box's rows and columns), "whole" with a
 *      random_flip of p 0 between the decode and the crop, which keeps them
 *      apart (every image decoded whole at 1/1) and costs one draw;
 *   3. for each job and each --threads count, `sluice-bench run` (this
 *      program, a child process: one real sluice-feeder with --threads N
 *      and one sluice-trainer, --model none) over --epochs, its JSON read
 *      back: images/s, and images per second of the feeder's decode-thread
 *      CPU (read + decompress + decode + map + assemble: the per-core rate
 *      of the map path, whatever else shares the cores).
 * Ratios: the map path per core over decode-only per core (1/1), fused
 * over whole, and each thread count's images/s over N x one thread's.
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "img.h"
#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_log.h"

#define IMAGES_MAX_FILES 1000000
#define IMAGES_MAX_THREADS 8 /* entries of --threads */

struct images_opts {
    const char *data;
    int threads[IMAGES_MAX_THREADS], nthreads;
    long epochs, repeat, rounds, shards, size;
    int json, no_feeder;
    char dir[PATH_MAX];
};

/* The tree's images, bytes in memory. */
struct images_set {
    uint8_t **data;
    size_t *sizes;
    size_t n, cap;
    uint64_t bytes;
};

static int is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return name[0] != '.' && dot != NULL &&
           (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0 || strcasecmp(dot, ".png") == 0);
}

/* Read one file whole into the set; 0, or -1 said. */
static int set_add(struct images_set *s, const char *path)
{
    if (s->n == IMAGES_MAX_FILES) {
        sl_log(SL_LOG_ERROR, "images: more than %d images under --data", IMAGES_MAX_FILES);
        return -1;
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        uint8_t **d = sl_realloc(s->data, cap * sizeof *d);
        if (d != NULL)
            s->data = d;
        size_t *z = sl_realloc(s->sizes, cap * sizeof *z);
        if (z != NULL)
            s->sizes = z;
        if (d == NULL || z == NULL) {
            sl_log(SL_LOG_ERROR, "images: out of memory for the listing");
            return -1;
        }
        s->cap = cap;
    }
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (f == NULL || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        st.st_size > (off_t)1 << 30) {
        sl_log(SL_LOG_ERROR, "images: %s: %s", path,
               f == NULL ? strerror(errno) : "not a regular file of 1 byte to 1 GiB");
        if (f)
            fclose(f);
        return -1;
    }
    uint8_t *buf = sl_malloc((size_t)st.st_size);
    size_t got = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (buf == NULL || got != (size_t)st.st_size) {
        sl_log(SL_LOG_ERROR, "images: %s: %s", path, buf == NULL ? "out of memory" : "short read");
        sl_free(buf);
        return -1;
    }
    s->data[s->n] = buf;
    s->sizes[s->n++] = got;
    s->bytes += got;
    return 0;
}

/* TREE/CLASS/FILE images (hidden names skipped); 0, or -1 said. */
static int set_load(struct images_set *s, const char *root)
{
    DIR *top = opendir(root);
    if (top == NULL) {
        sl_log(SL_LOG_ERROR, "images: --data %s: %s", root, strerror(errno));
        return -1;
    }
    int rc = 0;
    struct dirent *c;
    while (rc == 0 && (c = readdir(top)) != NULL) {
        if (c->d_name[0] == '.')
            continue;
        char cls[PATH_MAX];
        if (snprintf(cls, sizeof cls, "%s/%s", root, c->d_name) >= (int)sizeof cls)
            continue;
        DIR *d = opendir(cls);
        if (d == NULL)
            continue; /* a file in the top folder: no class */
        struct dirent *e;
        while (rc == 0 && (e = readdir(d)) != NULL) {
            char path[PATH_MAX];
            if (is_image_name(e->d_name) && snprintf(path, sizeof path, "%s/%s", cls, e->d_name) < (int)sizeof path)
                rc = set_add(s, path);
        }
        closedir(d);
    }
    closedir(top);
    if (rc == 0 && s->n == 0) {
        sl_log(SL_LOG_ERROR, "images: --data %s: no TREE/CLASS/*.jpg, *.jpeg or *.png", root);
        rc = -1;
    }
    return rc;
}

static void set_free(struct images_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        sl_free(s->data[i]);
    sl_free(s->data);
    sl_free(s->sizes);
}

/* The sibling sluice-record and this program. */
static void self_bins(char *record, char *self, size_t n)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[len > 0 ? len : 0] = '\0';
    snprintf(self, n, "%s", exe);
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = '\0';
    snprintf(record, n, "%.3000s/sluice-record", exe);
}

/* Run argv to its end, stdout to out_path, stderr to err_path; 0 when it
 * exited 0, -2 when interrupted, else -1 with its log's tail said. */
static int run_child(char *const argv[], const char *out_path, const char *err_path, const char *what)
{
    struct bench_group g;
    memset(&g, 0, sizeof g);
    if (bench_spawn(&g, argv, out_path, err_path, what, 0) < 0) {
        sl_log(SL_LOG_ERROR, "images: cannot start %s", argv[0]);
        return -1;
    }
    while (!g.c[0].done && !bench_stop) {
        bench_group_poll(&g);
        if (!g.c[0].done)
            usleep(20000);
    }
    if (bench_stop) {
        bench_group_end(&g, 2);
        return -2;
    }
    int status = g.c[0].status;
    bench_group_end(&g, 0.1);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    char st[128], tail[2048];
    sl_log(SL_LOG_ERROR, "images: %s %s; its log ends:\n%s", what, bench_status_text(status, st, sizeof st),
           bench_file_tail(err_path, tail, 1500));
    return -1;
}

/* The training map; with `whole`, a random_flip of p 0 keeps the decode
 * and the crop apart (no fused, DCT-scaled region decode). */
static int write_job(const char *path, const char *name, const char *shards_dir, long shards, long epochs, long size,
                     int whole)
{
    json_t *files = json_array();
    for (long i = 0; i < shards; i++) {
        char f[PATH_MAX + 64];
        snprintf(f, sizeof f, "%.4000s/train-%05ld-of-%05ld.tfrecord", shards_dir, i, shards);
        json_array_append_new(files, json_string(f));
    }
    json_t *map = json_pack("[{s:s, s:s, s:i}]", "op", "decode_image", "feature", "image", "channels", 3);
    if (whole)
        json_array_append_new(map, json_pack("{s:s, s:s, s:f}", "op", "random_flip", "feature", "image", "p", 0.0));
    json_array_append_new(map, json_pack("{s:s, s:s, s:[i,i]}", "op", "random_resized_crop", "feature", "image", "size",
                                         (int)size, (int)size));
    json_array_append_new(map, json_pack("{s:s, s:s}", "op", "random_flip", "feature", "image"));
    json_array_append_new(map, json_pack("{s:s, s:s, s:[f,f,f], s:[f,f,f], s:s}", "op", "normalize", "feature", "image",
                                         "mean", 0.485, 0.456, 0.406, "std", 0.229, 0.224, 0.225, "layout", "CHW"));
    json_t *job = json_pack("{s:s, s:o, s:s, s:i, s:i, s:{s:i, s:i}, s:{s:{s:s, s:[]}, s:{s:s, s:[]}}, s:o}", "name",
                            name, "files", files, "format", "tfrecord", "global_batch_size", 64, "epochs", (int)epochs,
                            "shuffle", "buffer", 1024, "seed", 27, "features", "image", "dtype", "bytes", "shape",
                            "label", "dtype", "int64", "shape", "map", map);
    int rc = job ? json_dump_file(job, path, JSON_INDENT(1)) : -1;
    json_decref(job);
    if (rc != 0)
        sl_log(SL_LOG_ERROR, "images: cannot write %s", path);
    return rc;
}

/* One configuration's figures. */
struct images_row {
    int whole, threads;
    double images_per_s; /* median over the repeats */
    double thread_cpu_s; /* the feeder's decode-thread stages, median */
    double map_cpu_s;    /* its map stage, median */
    double per_core;     /* images per decode-thread CPU second (of the median run's) */
};

static double num(json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

/* Wait for `what` in the log at path while the child g->c[k] runs; 0,
 * -1 (it ended, or 60 s passed), -2 (interrupted). */
static int wait_log(struct bench_group *g, int k, const char *path, const char *what)
{
    char tail[8192];
    for (int i = 0; i < 3000; i++) {
        if (bench_stop)
            return -2;
        if (strstr(bench_file_tail(path, tail, sizeof tail), what) != NULL)
            return 0;
        bench_group_poll(g);
        if (g->c[k].done)
            return -1;
        usleep(20000);
    }
    return -1;
}

/* One feeder (--threads n, --stats) and one trainer (--model none) over
 * the job; the trainer's elements over the time from its start to its
 * end into *ips, the feeder's decode-thread and map CPU seconds into
 * *thread_s and *map_s. 0, -1 said, or -2 interrupted. */
static int serve_once(const struct images_opts *o, const char *job, const char *name, int n, double *ips,
                      double *thread_s, double *map_s)
{
    char feeder[PATH_MAX], trainer[PATH_MAX], ep[PATH_MAX + 32], flog[PATH_MAX + 32], tout[PATH_MAX + 32],
        tlog[PATH_MAX + 32], stats[PATH_MAX + 32], thr[16];
    bench_find_bins(feeder, trainer, sizeof feeder);
    snprintf(ep, sizeof ep, "ipc://%s/feeder.sock", o->dir);
    snprintf(flog, sizeof flog, "%s/feeder.log", o->dir);
    snprintf(tout, sizeof tout, "%s/trainer.out", o->dir);
    snprintf(tlog, sizeof tlog, "%s/trainer.log", o->dir);
    snprintf(stats, sizeof stats, "%s/stats.json", o->dir);
    snprintf(thr, sizeof thr, "%d", n);
    unlink(stats);
    struct bench_group g;
    memset(&g, 0, sizeof g);
    char *fargv[] = {feeder, "--job", (char *)job, "--listen", ep, "--threads", thr, "--stats", stats, NULL};
    char *targv[] = {trainer, "--connect", ep, "--job", (char *)name, "--model", "none", "--quiet", NULL};
    if (bench_spawn(&g, fargv, NULL, flog, "feeder", 0) < 0) {
        sl_log(SL_LOG_ERROR, "images: cannot start %s", feeder);
        return -1;
    }
    int rc = wait_log(&g, 0, flog, "serving job");
    double t0 = sl_clock_s(), t1 = 0;
    if (rc == 0 && bench_spawn(&g, targv, tout, tlog, "trainer", 0) < 0)
        rc = -1;
    while (rc == 0 && !(g.c[0].done && g.c[1].done)) {
        if (bench_stop) {
            rc = -2;
            break;
        }
        bench_group_poll(&g);
        if (g.c[1].done && t1 == 0)
            t1 = sl_clock_s();
        if (g.c[1].done && !g.c[0].done && sl_clock_s() - t1 > 10)
            rc = -1; /* the feeder did not leave after its trainer */
        else if (!(g.c[0].done && g.c[1].done))
            usleep(2000);
    }
    bench_group_end(&g, 2);
    char st[128], tail[2048];
    for (int k = 0; rc == -1 || (rc == 0 && k < g.n); k++) {
        const struct bench_child *c = &g.c[k];
        if (rc == -1 || !WIFEXITED(c->status) || WEXITSTATUS(c->status) != 0) {
            sl_log(SL_LOG_ERROR, "images: %s %s; its log ends:\n%s", c->role,
                   c->done ? bench_status_text(c->status, st, sizeof st) : "did not end",
                   bench_file_tail(k == 0 ? flog : tlog, tail, 1500));
            rc = -1;
            break;
        }
    }
    json_t *sum = NULL, *fst = NULL;
    if (rc == 0) {
        FILE *f = fopen(tout, "r");
        char line[4096];
        while (f != NULL && fgets(line, sizeof line, f) != NULL)
            if (strncmp(line, "{\"summary\"", 10) == 0) {
                json_decref(sum);
                sum = json_loads(line, 0, NULL);
            }
        if (f)
            fclose(f);
        fst = json_load_file(stats, 0, NULL);
        json_t *cpu = json_object_get(fst, "cpu_s");
        double el = num(json_object_get(sum, "summary"), "elements");
        if (el <= 0 || !json_is_object(cpu)) {
            sl_log(SL_LOG_ERROR, "images: no trainer summary (%s) or feeder stats (%s)", tout, stats);
            rc = -1;
        } else {
            *ips = el / (t1 - t0);
            *map_s = num(cpu, "map");
            *thread_s = num(cpu, "read") + num(cpu, "decompress") + num(cpu, "decode") + *map_s + num(cpu, "assemble");
        }
    }
    json_decref(sum);
    json_decref(fst);
    return rc;
}

/* --repeat runs of one job with --threads n: the medians into *r. */
static int measure(const struct images_opts *o, const char *job, const char *name, int whole, int n, size_t images,
                   struct images_row *r)
{
    double ips[64], th[64], mp[64];
    if (!o->json)
        sl_log(SL_LOG_INFO, "images: the %s map, feeder --threads %d", whole ? "whole-decode" : "fused", n);
    for (long k = 0; k < o->repeat; k++) {
        int rc = serve_once(o, job, name, n, &ips[k], &th[k], &mp[k]);
        if (rc != 0)
            return rc;
    }
    r->whole = whole;
    r->threads = n;
    r->images_per_s = bench_median(ips, (size_t)o->repeat);
    r->thread_cpu_s = bench_median(th, (size_t)o->repeat);
    r->map_cpu_s = bench_median(mp, (size_t)o->repeat);
    r->per_core = r->thread_cpu_s > 0 ? (double)images * (double)o->epochs / r->thread_cpu_s : 0;
    return 0;
}

static int set_threads(void *opts, const char *value, struct sl_error *err)
{
    struct images_opts *o = opts;
    return bench_opt_list("--threads", value, 1, 256, o->threads, IMAGES_MAX_THREADS, &o->nthreads, err);
}

#define OFF(f) offsetof(struct images_opts, f)
static const struct sl_opt rows[] = {
    {"data", 0, SL_OPT_STRING, OFF(data), 0, 0, NULL, "TREE",
     "the images: TREE/CLASS/*.jpg|*.jpeg|*.png (tools/make_photos.py OUT); required", NULL, NULL},
    {"threads", 0, SL_OPT_FUNC, 0, 0, 0, "1,2", "LIST", "feeder --threads counts to measure (at most 8, each 1-256)",
     NULL, set_threads},
    {"epochs", 0, SL_OPT_LONG, OFF(epochs), 1, 1000, "1", "E", "epochs per feeder run", NULL, NULL},
    {"repeat", 0, SL_OPT_LONG, OFF(repeat), 1, 64, "1", "N", "feeder runs per figure (median)", NULL, NULL},
    {"rounds", 0, SL_OPT_LONG, OFF(rounds), 1, 1000, "1", "R", "passes over the images per decode-only figure", NULL,
     NULL},
    {"shards", 0, SL_OPT_LONG, OFF(shards), 1, 4096, "4", "S", "shards the tree is converted to", NULL, NULL},
    {"size", 0, SL_OPT_LONG, OFF(size), 8, 1024, "224", "PX",
     "random_resized_crop's output side (a smaller one lets more crops decode at DCT scale 1/2 or less)", NULL, NULL},
    {"no-feeder", 0, SL_OPT_FLAG, OFF(no_feeder), 0, 0, NULL, NULL, "measure the decode-only limit only", NULL, NULL},
    {"json", 0, SL_OPT_FLAG, OFF(json), 0, 0, NULL, NULL, "one JSON object on stdout instead of the table", NULL, NULL},
    BENCH_OPT_HELP_ROW,
};

static const struct sl_opt_cmd cmd = {
    .prog = "sluice-bench images",
    .usage = "Usage: sluice-bench images --data TREE [OPTION]...\n"
             "\n"
             "The image map stage against decoding alone, in one run: the images decoded\n"
             "to RGB on one thread in memory (libjpeg-turbo, libspng) at DCT scale 1/1 and\n"
             "1/2; then the tree converted to shards and served by a real sluice-feeder\n"
             "with the training map (decode_image, random_resized_crop --size, random_flip,\n"
             "normalize float32 CHW; fused and with the decode kept whole) to a trainer,\n"
             "for each --threads count: images/s, images per feeder decode-thread CPU\n"
             "second, and their ratios to decode-only and to N x one thread.\n"
             "\n",
    .rows = rows,
    .nrows = sizeof rows / sizeof rows[0],
};

static double load1(void)
{
    double l[1];
    return getloadavg(l, 1) == 1 ? l[0] : -1;
}

/* The limit at one DCT scale: images per wall second (img_bench_decode's
 * clock) and per CPU second of this thread (the same call, timed with the
 * thread's CPU clock: it also covers one img_probe of every image and the
 * output's allocation before the timed passes, about 1% of a pass). */
struct decode_rate {
    double wall, cpu;
};

static int decode_only(const struct images_set *s, long rounds, int denom, struct decode_rate *r)
{
    struct sl_error err = {0};
    uint64_t c0 = sl_clock_thread_cpu_ns();
    if (img_bench_decode((const uint8_t *const *)s->data, s->sizes, s->n, (int)rounds, denom, &r->wall, &err) != 0) {
        sl_log(SL_LOG_ERROR, "images: decode-only: %s", err.msg);
        return -1;
    }
    double cpu_s = (double)(sl_clock_thread_cpu_ns() - c0) * 1e-9;
    r->cpu = cpu_s > 0 ? (double)s->n * (double)rounds / cpu_s : 0;
    return 0;
}

static void print_report(const struct images_opts *o, const struct images_set *s, const struct decode_rate *lim,
                         const struct images_row *rows_, int nrows, double load0, double load_end)
{
    double d1 = lim[0].cpu, d2 = lim[1].cpu;
    double one[2] = {0, 0}; /* images/s at --threads 1 (or the first count), fused and whole */
    for (int i = 0; i < nrows; i++)
        if (one[rows_[i].whole] == 0 || rows_[i].threads == 1)
            one[rows_[i].whole] = rows_[i].images_per_s / (rows_[i].threads == 1 ? 1 : rows_[i].threads);
    if (o->json) {
        printf("{\"bench\":\"images\",\"data\":\"%s\",\"images\":%zu,\"bytes\":%llu,\"rounds\":%ld,"
               "\"epochs\":%ld,\"repeat\":%ld,\"size\":%ld,\"cpus\":%ld,\"load_avg\":{\"before\":%.2f,\"after\":%.2f},"
               "\"decode_per_s\":{\"scale_1\":%.1f,\"scale_2\":%.1f},"
               "\"decode_per_cpu_s\":{\"scale_1\":%.1f,\"scale_2\":%.1f},\"runs\":[",
               o->data, s->n, (unsigned long long)s->bytes, o->rounds, o->epochs, o->repeat, o->size,
               sysconf(_SC_NPROCESSORS_ONLN), load0, load_end, lim[0].wall, lim[1].wall, d1, d2);
        for (int i = 0; i < nrows; i++) {
            const struct images_row *r = &rows_[i];
            printf("%s{\"map\":\"%s\",\"threads\":%d,\"images_per_s\":%.1f,\"thread_cpu_s\":%.6f,\"map_cpu_s\":%.6f,"
                   "\"per_core_images_per_s\":%.1f,\"per_core_to_decode\":%.4f,\"scaling\":%.4f}",
                   i ? "," : "", r->whole ? "whole" : "fused", r->threads, r->images_per_s, r->thread_cpu_s,
                   r->map_cpu_s, r->per_core, d1 > 0 ? r->per_core / d1 : 0,
                   one[r->whole] > 0 ? r->images_per_s / (r->threads * one[r->whole]) : 0);
        }
        printf("]}\n");
        return;
    }
    printf("sluice-bench images: %zu images, %.1f MB, %ld CPUs, output %ld px, load average %.2f before and %.2f "
           "after%s\n",
           s->n, (double)s->bytes / 1e6, sysconf(_SC_NPROCESSORS_ONLN), o->size, load0, load_end,
           load0 > (double)sysconf(_SC_NPROCESSORS_ONLN) / 2 ? " (other processes shared the cores: noisy)" : "");
    printf("limit: decode only (RGB, one thread, in memory, %ld pass(es)): 1/1 %.1f images/s, 1/2 %.1f images/s "
           "(%.2fx) per CPU second\n       (per wall second: 1/1 %.1f, 1/2 %.1f)\n",
           o->rounds, d1, d2, d1 > 0 ? d2 / d1 : 0, lim[0].wall, lim[1].wall);
    if (nrows == 0)
        return;
    printf("\n %-6s %-8s %-12s %-14s %-12s %-16s %-10s\n", "map", "threads", "images/s", "thread CPU s", "per core",
           "per core/decode", "scaling");
    for (int i = 0; i < nrows; i++) {
        const struct images_row *r = &rows_[i];
        printf(" %-6s %-8d %-12.1f %-14.2f %-12.1f %-16.2f %-10.2f\n", r->whole ? "whole" : "fused", r->threads,
               r->images_per_s, r->thread_cpu_s, r->per_core, d1 > 0 ? r->per_core / d1 : 0,
               one[r->whole] > 0 ? r->images_per_s / (r->threads * one[r->whole]) : 0);
    }
    printf("\nper core: images per second of the feeder's decode-thread CPU (read + decompress + decode + map +\n"
           "assemble); per core/decode: that over decode-only at 1/1 per CPU second; scaling: images/s over N x one "
           "thread's\n"
           "(whole: the decode kept apart from the crop, every image decoded whole at 1/1)\n");
}

int bench_images_main(int argc, char **argv)
{
    struct images_opts o = {0};
    int prc = bench_opt_parse("images", &cmd, argc, argv, &o);
    if (prc != 0)
        return prc == 1 ? 0 : 2;
    if (o.data == NULL)
        return bench_usage_error("images", "--data is required (%s)", "an ImageFolder tree");

    struct images_set s = {0};
    double load0 = load1();
    if (set_load(&s, o.data) != 0) {
        set_free(&s);
        return 1;
    }
    if (!o.json)
        sl_log(SL_LOG_INFO, "images: %zu images, %.1f MB in memory; decoding alone", s.n, (double)s.bytes / 1e6);
    struct decode_rate lim[2];
    for (int k = 0; k < 2; k++)
        if (decode_only(&s, o.rounds, k ? 2 : 1, &lim[k]) != 0) {
            set_free(&s);
            return 1;
        }
    struct images_row res[2 * IMAGES_MAX_THREADS];
    int nres = 0, status = 0;
    if (!o.no_feeder) {
        char record[PATH_MAX], self[PATH_MAX], shards[PATH_MAX + 16], jobs[2][PATH_MAX + 32], nsh[24];
        const char *names[2] = {"images-fused", "images-whole"};
        if (bench_tmpdir("images", o.dir, sizeof o.dir) != 0) {
            set_free(&s);
            return 1;
        }
        bench_signals_install();
        self_bins(record, self, sizeof record);
        snprintf(shards, sizeof shards, "%s/shards", o.dir);
        snprintf(nsh, sizeof nsh, "%ld", o.shards);
        char out[PATH_MAX + 32], log[PATH_MAX + 32];
        snprintf(out, sizeof out, "%s/convert.out", o.dir);
        snprintf(log, sizeof log, "%s/convert.log", o.dir);
        char *conv[] = {record, "convert", "images", "--output-dir", shards, "--shards", nsh, (char *)o.data, NULL};
        if (!o.json)
            sl_log(SL_LOG_INFO, "images: converting to %ld shards (not timed)", o.shards);
        int rc = run_child(conv, out, log, "sluice-record convert images");
        for (int w = 0; rc == 0 && w < 2; w++) {
            snprintf(jobs[w], sizeof jobs[w], "%s/%s.json", o.dir, w ? "whole" : "fused");
            rc = write_job(jobs[w], names[w], shards, o.shards, o.epochs, o.size, w);
        }
        for (int w = 0; rc == 0 && w < 2; w++)
            for (int t = 0; rc == 0 && t < o.nthreads; t++)
                if ((rc = measure(&o, jobs[w], names[w], w, o.threads[t], s.n, &res[nres])) == 0)
                    nres++;
        bench_rmtree(o.dir);
        status = rc == -2 ? 128 + (int)bench_stop : rc != 0;
    }
    if (status == 0)
        print_report(&o, &s, lim, res, nres, load0, load1());
    set_free(&s);
    return status;
}
