/* feed_expose: the feeder's metrics in the Prometheus text format (see
 * feed_expose.h and docs/operations.md).
 *
 * Names follow Prometheus' conventions: the sluice_feeder_ prefix, base
 * units (_seconds, _bytes), _total on counters. Every sample carries
 * sluice_job and feeder; the job label is not "job" because Prometheus
 * sets "job" on every target itself (and would rename ours exported_job).
 */
#include "feed_expose.h"

#include <inttypes.h>
#include <stdio.h>

#include "feed_metrics.h"
#include "sl_alloc.h"
#include "sl_buf.h"
#include "sl_http_metrics.h"
#include "sl_prom.h"

struct feed_expose {
    struct sl_http_metrics *http;
    const struct sl_metrics *m;
    struct sl_buf labels; /* sluice_job="..",feeder=".." */
};

int feed_expose_write(const struct sl_metrics_snap *s, const char *labels, struct sl_buf *b)
{
    if (s->n < FEED_M_COUNT)
        return SL_EINVAL;
    const uint64_t *v = s->v;
    struct sl_prom p = {.b = b, .labels = labels};
    sl_prom_process_info(&p, "feeder");
    sl_prom_counter(&p, "sluice_feeder_pieces_total", "Pieces (per-replica batches) sent to trainers.",
                    v[FEED_M_PIECES]);
    sl_prom_family(&p, "sluice_feeder_transport_pieces_total", "counter",
                   "Pieces sent, by how: in shared memory (shm) or by copy over ZeroMQ (copy).");
    sl_prom_u64(&p, "sluice_feeder_transport_pieces_total", "transport=\"shm\"", v[FEED_M_SHM_PIECES]);
    sl_prom_u64(&p, "sluice_feeder_transport_pieces_total", "transport=\"copy\"", v[FEED_M_COPY_PIECES]);
    sl_prom_counter(&p, "sluice_feeder_records_total", "Records (rows) in the pieces sent.", v[FEED_M_RECORDS]);
    sl_prom_counter(&p, "sluice_feeder_sent_bytes_total", "Tensor bytes of the pieces sent.", v[FEED_M_BYTES]);
    sl_prom_counter(&p, "sluice_feeder_read_bytes_total", "Bytes of the records read from the files for pieces.",
                    v[FEED_M_READ_BYTES]);
    sl_prom_family(&p, "sluice_feeder_cpu_seconds_total", "counter",
                   "CPU seconds by stage: executors reading, decompressing, decoding, mapping (the job's map) and "
                   "assembling; sending is the "
                   "serving thread's CPU (updated each heartbeat tick) plus ZeroMQ's I/O threads' (added at exit).");
    static const struct {
        const char *label;
        unsigned id;
    } stages[] = {{"stage=\"read\"", FEED_M_READ_NS},
                  {"stage=\"decompress\"", FEED_M_DECOMPRESS_NS},
                  {"stage=\"decode\"", FEED_M_DECODE_NS},
                  {"stage=\"map\"", FEED_M_MAP_NS},
                  {"stage=\"assemble\"", FEED_M_ASSEMBLE_NS}};
    for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++)
        sl_prom_seconds(&p, "sluice_feeder_cpu_seconds_total", stages[i].label, v[stages[i].id]);
    sl_prom_seconds(&p, "sluice_feeder_cpu_seconds_total", "stage=\"send\"", v[FEED_M_SERVE_NS] + v[FEED_M_ZMQ_IO_NS]);
    sl_prom_family(&p, "sluice_feeder_credit_wait_seconds_total", "counter",
                   "Time the feeder had pieces to make but no credit from any trainer (trainers are the bound).");
    sl_prom_seconds(&p, "sluice_feeder_credit_wait_seconds_total", NULL, v[FEED_M_BLOCKED_NS]);
    sl_prom_gauge(&p, "sluice_feeder_trainers_connected", "Trainer connections being served.", v[FEED_M_CONNECTED]);
    sl_prom_gauge(&p, "sluice_feeder_trainers_waiting_credit",
                  "Trainer connections with pieces left to send but no credit, at the last heartbeat tick.",
                  v[FEED_M_STARVED]);
    sl_prom_counter(&p, "sluice_feeder_trainers_accepted_total", "Trainer HELLOs accepted.", v[FEED_M_TRAINERS]);
    sl_prom_family(&p, "sluice_feeder_errors_total", "counter",
                   "Errors by kind: data (a damaged file met while assembling), refused (a HELLO refused), "
                   "bad_message (malformed or unexpected messages), dropped (a trainer connection dropped: silent "
                   "past the timeout, a send refused, a malformed message).");
    sl_prom_u64(&p, "sluice_feeder_errors_total", "kind=\"data\"", v[FEED_M_ERRORS]);
    sl_prom_u64(&p, "sluice_feeder_errors_total", "kind=\"refused\"", v[FEED_M_REFUSED]);
    sl_prom_u64(&p, "sluice_feeder_errors_total", "kind=\"bad_message\"", v[FEED_M_BAD_MESSAGES]);
    sl_prom_u64(&p, "sluice_feeder_errors_total", "kind=\"dropped\"", v[FEED_M_DROPPED]);
    sl_prom_gauge(&p, "sluice_feeder_roster_feeders",
                  "Feeders the roster counts: the modulus of the shares told to trainers (own --feeders until "
                  "feeders join; a joiner's is 0 until it is counted in).",
                  v[FEED_M_ROSTER_FEEDERS]);
    sl_prom_counter(&p, "sluice_feeder_joins_total", "JOINs accepted: feeders counted in (each index once).",
                    v[FEED_M_JOINS]);
    sl_prom_counter(&p, "sluice_feeder_joins_refused_total", "JOINs refused (malformed ones included).",
                    v[FEED_M_JOINS_REFUSED]);
    sl_prom_gauge(&p, "sluice_feeder_piece_memory_bytes", "Piece buffer memory allocated.", v[FEED_M_POOL_BYTES]);
    sl_prom_gauge(&p, "sluice_feeder_workers", "Workers of the cluster shape served (0 before the first trainer).",
                  v[FEED_M_WORKERS]);
    sl_prom_counter(&p, "sluice_feeder_reshapes_total",
                    "Cluster shapes replaced at an epoch's start (a trainer of another shape asked to reshape).",
                    v[FEED_M_RESHAPES]);
    sl_prom_gauge(&p, "sluice_feeder_scan_files", "Files the start-up scan reads.", v[FEED_M_SCAN_FILES]);
    sl_prom_gauge(&p, "sluice_feeder_scan_files_done", "Files the start-up scan has read.", v[FEED_M_SCAN_DONE]);
    sl_prom_gauge(&p, "sluice_feeder_scan_records", "Records the start-up scan has found.", v[FEED_M_SCAN_RECORDS]);
    sl_prom_gauge(&p, "sluice_feeder_scan_bytes", "Bytes the start-up scan has read.", v[FEED_M_SCAN_BYTES]);
    sl_prom_family(&p, "sluice_feeder_cache_elements_total", "counter",
                   "Elements of pieces, with the decoded-element cache on (cache_bytes): copied from it (hit) or "
                   "decoded (miss).");
    sl_prom_u64(&p, "sluice_feeder_cache_elements_total", "result=\"hit\"", v[FEED_M_CACHE_HITS]);
    sl_prom_u64(&p, "sluice_feeder_cache_elements_total", "result=\"miss\"", v[FEED_M_CACHE_MISSES]);
    return p.rc;
}

static int serve(void *ctx, struct sl_buf *out)
{
    const struct feed_expose *e = ctx;
    struct sl_metrics_snap s;
    sl_metrics_snapshot(e->m, &s);
    return feed_expose_write(&s, (const char *)e->labels.data, out);
}

int feed_expose_start(struct feed_expose **out, const struct feed_expose_opts *o, struct sl_error *err)
{
    *out = NULL;
    struct feed_expose *e = sl_calloc(1, sizeof *e);
    if (e == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    e->m = o->m;
    sl_buf_init(&e->labels, 4096);
    char index[16];
    snprintf(index, sizeof index, "%" PRIu32, o->feeder_index);
    int rc = sl_prom_label(&e->labels, "sluice_job", o->job);
    if (rc == 0)
        rc = sl_prom_label(&e->labels, "feeder", index);
    if (rc != 0) {
        rc = sl_error_set(err, SL_ENOMEM, "the job's name does not fit a label");
        goto out_free;
    }
    struct sl_http_metrics_opts ho = {.listen = o->listen, .fn = serve, .ctx = e};
    rc = sl_http_metrics_start(&e->http, &ho, err);
    if (rc != 0)
        goto out_free;
    *out = e;
    return 0;
out_free:
    sl_buf_free(&e->labels);
    sl_free(e);
    return rc;
}

unsigned feed_expose_port(const struct feed_expose *e)
{
    return e != NULL ? sl_http_metrics_port(e->http) : 0;
}

uint64_t feed_expose_scrapes(const struct feed_expose *e)
{
    return e != NULL ? sl_http_metrics_scrapes(e->http) : 0;
}

uint64_t feed_expose_begun(const struct feed_expose *e)
{
    return e != NULL ? sl_http_metrics_begun(e->http) : 0;
}

void feed_expose_stop(struct feed_expose *e)
{
    if (e == NULL)
        return;
    sl_http_metrics_stop(e->http);
    sl_buf_free(&e->labels);
    sl_free(e);
}
