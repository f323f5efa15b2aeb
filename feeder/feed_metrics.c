/* feed_metrics: the feeder's metric table and its typed view (see
 * feed_metrics.h). */
#include "feed_metrics.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const struct sl_metric_def feed_metric_defs[FEED_M_COUNT] = {
    [FEED_M_PIECES] = {"pieces", SL_METRIC_COUNTER, "pieces sent"},
    [FEED_M_RECORDS] = {"records", SL_METRIC_COUNTER, "rows sent"},
    [FEED_M_BYTES] = {"bytes", SL_METRIC_COUNTER, "tensor bytes sent"},
    [FEED_M_ERRORS] = {"errors", SL_METRIC_COUNTER, "data errors met"},
    [FEED_M_TRAINERS] = {"trainers", SL_METRIC_COUNTER, "HELLOs accepted"},
    [FEED_M_REFUSED] = {"refused", SL_METRIC_COUNTER, "HELLOs refused"},
    [FEED_M_BAD_MESSAGES] = {"bad_messages", SL_METRIC_COUNTER,
                             "malformed or unexpected messages, and messages from peers that are no trainer"},
    [FEED_M_SHM_PIECES] = {"shm_pieces", SL_METRIC_COUNTER, "pieces handed over in shared memory"},
    [FEED_M_BLOCKED_NS] = {"blocked_s", SL_METRIC_NS, "time with work left but no credit from any trainer"},
    [FEED_M_POOL_BYTES] = {"pool_bytes", SL_METRIC_GAUGE, "piece memory allocated"},
    [FEED_M_READ_NS] = {"cpu_read_s", SL_METRIC_NS, "executor CPU reading records"},
    [FEED_M_DECOMPRESS_NS] = {"cpu_decompress_s", SL_METRIC_NS, "executor CPU inflating compressed files"},
    [FEED_M_DECODE_NS] = {"cpu_decode_s", SL_METRIC_NS, "executor CPU decoding records"},
    [FEED_M_ASSEMBLE_NS] = {"cpu_assemble_s", SL_METRIC_NS, "executor CPU assembling pieces"},
    [FEED_M_SERVE_NS] = {"cpu_serve_s", SL_METRIC_NS, "serving thread CPU"},
    [FEED_M_ZMQ_IO_NS] = {"cpu_zmq_io_s", SL_METRIC_NS, "ZeroMQ I/O threads' CPU"},
    [FEED_M_COPY_PIECES] = {"copy_pieces", SL_METRIC_COUNTER, "pieces sent by copy"},
    [FEED_M_READ_BYTES] = {"read_bytes", SL_METRIC_COUNTER, "bytes of the records read for pieces"},
    [FEED_M_DROPPED] = {"dropped", SL_METRIC_COUNTER, "trainer connections dropped"},
    [FEED_M_CONNECTED] = {"connected", SL_METRIC_GAUGE, "trainer connections being served"},
    [FEED_M_STARVED] = {"starved", SL_METRIC_GAUGE, "connections with pieces left but no credit"},
    [FEED_M_WORKERS] = {"workers", SL_METRIC_GAUGE, "the cluster shape's workers"},
    [FEED_M_SCAN_FILES] = {"scan_files", SL_METRIC_GAUGE, "files the start-up scan reads"},
    [FEED_M_SCAN_DONE] = {"scan_files_done", SL_METRIC_GAUGE, "files scanned so far"},
    [FEED_M_SCAN_RECORDS] = {"scan_records", SL_METRIC_GAUGE, "records found by the scan so far"},
    [FEED_M_SCAN_BYTES] = {"scan_bytes", SL_METRIC_GAUGE, "bytes read by the scan so far"},
    [FEED_M_CACHE_HITS] = {"cache_hits", SL_METRIC_COUNTER, "elements copied from the decoded-element cache"},
    [FEED_M_CACHE_MISSES] = {"cache_misses", SL_METRIC_COUNTER, "elements decoded while the cache is on"},
    [FEED_M_MAP_NS] = {"cpu_map_s", SL_METRIC_NS, "executor CPU in the map stage"},
    [FEED_M_JOINS] = {"joins", SL_METRIC_COUNTER, "JOINs accepted (feeders counted in)"},
    [FEED_M_JOINS_REFUSED] = {"joins_refused", SL_METRIC_COUNTER, "JOINs refused"},
    [FEED_M_ROSTER_FEEDERS] = {"roster_feeders", SL_METRIC_GAUGE, "the feeders the roster counts"},
    [FEED_M_RESHAPES] = {"reshapes", SL_METRIC_COUNTER, "cluster shapes replaced at an epoch's start or mid-epoch"},
};

void feed_counters_from(const struct sl_metrics_snap *s, struct feed_counters *c)
{
    memset(c, 0, sizeof *c);
    c->pieces = s->v[FEED_M_PIECES];
    c->records = s->v[FEED_M_RECORDS];
    c->bytes = s->v[FEED_M_BYTES];
    c->errors = s->v[FEED_M_ERRORS];
    c->trainers = s->v[FEED_M_TRAINERS];
    c->refused = s->v[FEED_M_REFUSED];
    c->bad_messages = s->v[FEED_M_BAD_MESSAGES];
    c->shm_pieces = s->v[FEED_M_SHM_PIECES];
    c->blocked_s = sl_metrics_seconds(s, FEED_M_BLOCKED_NS);
    c->pool_bytes = s->v[FEED_M_POOL_BYTES];
    c->stages.read = sl_metrics_seconds(s, FEED_M_READ_NS);
    c->stages.decompress = sl_metrics_seconds(s, FEED_M_DECOMPRESS_NS);
    c->stages.decode = sl_metrics_seconds(s, FEED_M_DECODE_NS);
    c->stages.map = sl_metrics_seconds(s, FEED_M_MAP_NS);
    c->stages.assemble = sl_metrics_seconds(s, FEED_M_ASSEMBLE_NS);
    c->serve_cpu_s = sl_metrics_seconds(s, FEED_M_SERVE_NS);
    c->zmq_io_cpu_s = sl_metrics_seconds(s, FEED_M_ZMQ_IO_NS);
    c->joins = s->v[FEED_M_JOINS];
    c->joins_refused = s->v[FEED_M_JOINS_REFUSED];
    c->reshapes = s->v[FEED_M_RESHAPES];
    c->roster_feeders = (uint32_t)s->v[FEED_M_ROSTER_FEEDERS];
}

void feed_counters_format(const struct feed_counters *c, char *buf, size_t n)
{
    snprintf(buf, n,
             "pieces=%" PRIu64 " records=%" PRIu64 " bytes=%" PRIu64 " errors=%" PRIu64 " trainers=%" PRIu64
             " refused=%" PRIu64 " bad_messages=%" PRIu64 " shm_pieces=%" PRIu64
             " blocked_on_credits=%.3fs elapsed=%.3fs piece_memory=%" PRIu64,
             c->pieces, c->records, c->bytes, c->errors, c->trainers, c->refused, c->bad_messages, c->shm_pieces,
             c->blocked_s, c->elapsed_s, c->pool_bytes);
}
