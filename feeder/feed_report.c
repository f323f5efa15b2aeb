/* feed_report: what sluice-feeder reports of a job: the `plan`
 * subcommand's figures per worker, and the --stats file at exit (see
 * feed_report.h). Moved out of feed_main.c, which keeps the options, the
 * start and the serving.
 */
#include "feed_report.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "feed_diskcache.h"
#include "feed_fetch.h"
#include "feed_job_map.h"
#include "feed_plan.h"
#include "sl_alloc.h"
#include "sl_exit.h"
#include "sl_json.h"
#include "sl_log.h"
#include "sl_output.h"

int feed_report_plan(const struct feed_job *job, const struct feed_source *src, uint32_t workers, uint32_t replicas,
                     int json)
{
    struct feed_plan_config cfg;
    struct sl_error err = {0};
    if (feed_job_fill_plan_config(job, feed_source_counts(src), workers, replicas, &cfg) != 0) {
        sl_log(SL_LOG_ERROR, "cannot plan this job");
        return SL_EXIT_USAGE;
    }
    uint32_t *files = sl_calloc(job->files.n ? job->files.n : 1, sizeof *files);
    if (files == NULL)
        return SL_EXIT_DATA;
    uint64_t total = 0;
    for (size_t i = 0; i < job->files.n; i++)
        total += feed_source_count(src, i);
    if (!json)
        printf("job '%s': %zu files, %" PRIu64 " records; %" PRIu32 " workers x %" PRIu32
               " replicas, global batch %" PRIu64 ", policy %s%s%s%s\n",
               job->name, job->files.n, total, workers, replicas, job->global_batch_size, feed_policy_name(job->policy),
               cfg.policy != job->policy ? " (" : "", cfg.policy != job->policy ? feed_policy_name(cfg.policy) : "",
               cfg.policy != job->policy ? " for arrays)" : "");
    else
        printf("{\"job\":\"%s\",\"workers\":[", job->name);
    int status = 0;
    for (uint32_t w = 0; w < workers; w++) {
        struct feed_plan_summary sum;
        if (feed_plan_summarize(&cfg, w, &sum, &err) != 0) {
            sl_log(SL_LOG_ERROR, "%s: %s", job->source, err.msg);
            status = SL_EXIT_USAGE;
            break;
        }
        size_t nf = feed_plan_worker_files(&cfg, w, files, job->files.n);
        if (nf > job->files.n)
            nf = job->files.n;
        if (json) {
            printf("%s{\"worker\":%u,\"steps\":%" PRIu64 ",\"elements\":%" PRIu64 ",\"pieces\":%" PRIu64 ",\"files\":[",
                   w ? "," : "", w, sum.steps, sum.elements, sum.pieces);
            for (size_t i = 0; i < nf; i++) {
                /* a file name may hold any byte but NUL and '/': escaped */
                struct sl_buf jb = {0};
                const char *name = job->files.items[files[i]];
                if (sl_json_string(&jb, name, strlen(name)) != 0) {
                    sl_buf_free(&jb);
                    status = SL_EXIT_DATA;
                    break;
                }
                printf("%s%.*s", i ? "," : "", (int)jb.len, (const char *)jb.data);
                sl_buf_free(&jb);
            }
            printf("],\"replica_elements\":[");
            for (uint64_t r = 0; r < replicas && r < 64; r++)
                printf("%s%" PRIu64, r ? "," : "", sum.replica_elements[r]);
            printf("]}");
            continue;
        }
        printf("worker %u: %" PRIu64 " steps/epoch, %" PRIu64 " elements/epoch in %" PRIu64 " pieces, %zu files\n", w,
               sum.steps, sum.elements, sum.pieces, nf);
        for (uint64_t r = 0; r < replicas && r < 64; r++)
            printf("  replica %" PRIu64 ": %" PRIu64 " elements/epoch\n", r, sum.replica_elements[r]);
        for (size_t i = 0; i < nf; i++)
            printf("  file %s (%" PRIu64 " records)\n", job->files.items[files[i]], feed_source_count(src, files[i]));
    }
    if (json && status == 0)
        printf("]}\n");
    sl_free(files);
    return status;
}

/* --stats: the counters as one JSON object (schema in docs/feeder.md),
 * through sl_output: a regular file is replaced whole (an exclusive
 * temporary renamed), a device or FIFO written, never replaced. */
int feed_report_stats(const char *path, const struct feed_counters *c, const struct feed_source *src, double scan_s,
                      double scan_cpu_s, const struct map_plan *map, const uint64_t *map_op_ns)
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
            "\"errors\":%" PRIu64 ",\"trainers\":%" PRIu64 ",\"refused\":%" PRIu64 ",\"bad_messages\":%" PRIu64
            ",\"shm_pieces\":%" PRIu64 ",\"blocked_s\":%.6f,"
            "\"elapsed_s\":%.6f,\"pool_bytes\":%" PRIu64 ",\"scan_s\":%.6f,\"scan_cpu_s\":%.6f,"
            "\"max_rss_kb\":%ld,\"cpu_s\":{\"read\":%.6f,\"decompress\":%.6f,\"decode\":%.6f,"
            "\"map\":%.6f,\"assemble\":%.6f,\"send\":%.6f,\"serve\":%.6f,\"zmq_io\":%.6f,\"total\":%.6f}",
            c->pieces, c->records, c->bytes, disk, c->errors, c->trainers, c->refused, c->bad_messages, c->shm_pieces,
            c->blocked_s, c->elapsed_s, c->pool_bytes, scan_s, scan_cpu_s, ru.ru_maxrss, t->read, t->decompress,
            t->decode, t->map, t->assemble, send, c->serve_cpu_s, c->zmq_io_cpu_s,
            t->read + t->decompress + t->decode + t->map + t->assemble + send);
    /* with a map: each op's share of cpu_s.map (estimated from every 8th element) */
    size_t nops = map != NULL && map_op_ns != NULL ? map_plan_nops(map) : 0;
    for (size_t i = 0; i < nops; i++) {
        char label[64];
        fprintf(f, "%s{\"op\":\"%s\",\"cpu_s\":%.6f}", i ? "," : ",\"map_ops\":[",
                map_plan_op_label(map, i, label, sizeof label),
                (double)__atomic_load_n(&map_op_ns[i], __ATOMIC_RELAXED) / 1e9);
    }
    if (nops > 0)
        fprintf(f, "]");
    /* files read by range: what was fetched, against the records' bytes */
    struct feed_fetch_stats fs;
    feed_source_fetch_stats(src, &fs);
    struct feed_diskcache_stats ds;
    feed_source_disk_cache_stats(src, &ds);
    /* joins: the plan's digest and the roster (docs/feeder.md) */
    fprintf(f,
            ",\"digest\":\"%016" PRIx64 "\",\"joins\":%" PRIu64 ",\"joins_refused\":%" PRIu64 ",\"reshapes\":%" PRIu64
            ",\"roster\":{\"feeders\":%u,\"joined\":[",
            c->digest, c->joins, c->joins_refused, c->reshapes, c->roster_feeders);
    for (unsigned i = 0, k = 0; i < 64; i++)
        if (c->roster_joined >> i & 1u)
            fprintf(f, "%s%u", k++ ? "," : "", i);
    fprintf(f, "]}");
    fprintf(f,
            ",\"remote\":{\"requests\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"record_bytes\":%" PRIu64
            ",\"records_alone\":%" PRIu64 "},\"disk_cache\":{\"hits\":%" PRIu64 ",\"kept\":%" PRIu64
            ",\"full\":%" PRIu64 ",\"entries\":%" PRIu64 ",\"bytes\":%" PRIu64 "}}\n",
            fs.requests, fs.bytes, fs.record_bytes, fs.alone, ds.hits, ds.kept, ds.full, ds.entries, ds.bytes);
    if (sl_output_commit(out, &err) != 0) {
        sl_log(SL_LOG_ERROR, "--stats: %s", err.msg);
        return -1;
    }
    return 0;
}
