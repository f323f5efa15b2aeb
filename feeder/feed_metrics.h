/* feed_metrics: the feeder's figures, one table (shared/sl_metrics.h).
 * The serving thread, the executors and ZeroMQ's accounting write them as
 * they go; every figure the feeder prints (the counters line, progress
 * lines, --stats, sluice-bench's reading of --stats) comes from a
 * snapshot of them (feed_counters_from).
 */
#ifndef FEED_METRICS_H
#define FEED_METRICS_H

#include <stdint.h>

#include "sl_metrics.h"

enum feed_metric {
    FEED_M_PIECES,         /* pieces sent */
    FEED_M_RECORDS,        /* rows sent */
    FEED_M_BYTES,          /* tensor bytes sent */
    FEED_M_ERRORS,         /* data errors met */
    FEED_M_TRAINERS,       /* HELLOs accepted */
    FEED_M_REFUSED,        /* HELLOs refused */
    FEED_M_BAD_MESSAGES,   /* malformed messages, unexpected ones, and any from a peer that is no trainer */
    FEED_M_SHM_PIECES,     /* pieces handed over in shared memory */
    FEED_M_BLOCKED_NS,     /* time with work left but no credit from any trainer */
    FEED_M_POOL_BYTES,     /* gauge: the piece memory allocated */
    FEED_M_READ_NS,        /* executor CPU: reading records (framing, CRCs, page faults) */
    FEED_M_DECOMPRESS_NS,  /* executor CPU: inflating compressed files */
    FEED_M_DECODE_NS,      /* executor CPU: decoding records into features */
    FEED_M_ASSEMBLE_NS,    /* executor CPU: the rest of assembling pieces */
    FEED_M_SERVE_NS,       /* serving thread CPU: scheduling, framing, handing frames to ZeroMQ */
    FEED_M_ZMQ_IO_NS,      /* ZeroMQ I/O threads' CPU (read at the end) */
    FEED_M_COPY_PIECES,    /* pieces sent by copy (the rest of FEED_M_PIECES went in shared memory) */
    FEED_M_READ_BYTES,     /* bytes of the records read for pieces (framed records, or their fields) */
    FEED_M_DROPPED,        /* trainer connections dropped (silent past the timeout, a send refused) */
    FEED_M_CONNECTED,      /* gauge: trainer connections being served now */
    FEED_M_STARVED,        /* gauge: connections with pieces left to send but no credit, at the last look */
    FEED_M_WORKERS,        /* gauge: the cluster shape's workers (0: no shape yet) */
    FEED_M_SCAN_FILES,     /* gauge: files the start-up scan reads */
    FEED_M_SCAN_DONE,      /* gauge: of those, scanned so far */
    FEED_M_SCAN_RECORDS,   /* gauge: records the scan has found so far */
    FEED_M_SCAN_BYTES,     /* gauge: bytes the scan has read so far */
    FEED_M_CACHE_HITS,     /* elements copied from the decoded-element cache (cache_bytes) */
    FEED_M_CACHE_MISSES,   /* elements decoded while the cache is on */
    FEED_M_MAP_NS,         /* executor CPU: the map stage (the job's map ops) */
    FEED_M_JOINS,          /* JOINs accepted: feeders counted in (an index once) */
    FEED_M_JOINS_REFUSED,  /* JOINs refused (malformed ones included) */
    FEED_M_ROSTER_FEEDERS, /* gauge: the feeders the roster counts (the modulus told to trainers) */
    FEED_M_RESHAPES,       /* cluster shapes replaced at an epoch's start or mid-epoch (SL_WIRE_HELLO_RESHAPE) */
    FEED_M_COUNT
};

/* The table, in enum order. */
extern const struct sl_metric_def feed_metric_defs[FEED_M_COUNT];

/* The figures of a snapshot, typed (a view; nothing else is counted). */
struct feed_counters {
    uint64_t pieces, records, bytes, errors, trainers, refused, bad_messages, shm_pieces;
    double blocked_s;
    double elapsed_s; /* the caller's */
    uint64_t pool_bytes;
    struct feed_stage_times {
        double read, decompress, decode, map, assemble; /* executor CPU seconds per stage */
    } stages;
    double serve_cpu_s, zmq_io_cpu_s;
    int started; /* 1 once the feeder was serving (bound, threads up): an error before that is a
                  * start-up failure (set by feed_server_run, not a metric) */
    int idle;    /* 1 when it stopped after idle_exit_ms without a trainer (likewise) */
    uint64_t joins, joins_refused, reshapes;
    /* set by feed_server_run, not metrics: the job digest, and the roster */
    uint64_t digest;
    uint32_t roster_feeders;
    uint64_t roster_joined; /* bit i: feeder i joined (known to this feeder) */
};

void feed_counters_from(const struct sl_metrics_snap *s, struct feed_counters *c);

/* "pieces=.. records=.. bytes=.. errors=.. ..." for logs. */
void feed_counters_format(const struct feed_counters *c, char *buf, size_t n);

#endif
