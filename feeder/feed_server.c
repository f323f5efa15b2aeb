/* feed_server: the serving loop (see feed_server.h for the threads and the
 * flow of credits).
 *
 * Trainer state lives in a table indexed by worker: a worker has at most
 * one trainer connection at a time. The cluster shape (W, R) and the rules
 * for HELLOs are in docs/protocol.md ("How sluice's feeder and trainer use
 * it").
 *
 * Tasks: max(prefetch, 2 x threads) of them (feed_exec.h) bound how many
 * pieces are assembled at once. The server takes a free one when a
 * trainer has a credit and its plan has a piece for this feeder, and
 * submits it; when it comes back done the server sends the piece and
 * recycles the task. A task whose trainer went away in the meantime is
 * dropped (its buffer goes back to its pool). Pieces a trainer reads in
 * shared memory are held for it by feed_hold.
 *
 * The loop's parts: the socket (feed_listener.c), sending and the tasks
 * (feed_send.c), incoming messages (feed_message.c) and HELLOs
 * (feed_hello.c), the cluster shape (feed_shape.c); what they share is in
 * feed_serve.h.
 *
 * Lock order: none held across calls (the executors' queues and the pools
 * lock internally, each alone).
 */
#include "feed_server.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>
#ifdef SLUICE_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "feed_cache.h"
#include "feed_serve.h"
#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_log.h"
#include "sl_pool.h"
#include "sl_proc.h"
#include "sl_wire.h"

/* ---- housekeeping ---- */

static void heartbeats_and_ends(struct server *s)
{
    uint64_t now = sl_clock_ns();
    sl_log_limit_flush(&s->lim_refuse, 0);
    sl_log_limit_flush(&s->lim_bad, 0);
    uint64_t hb = (uint64_t)s->o->heartbeat_ms * 1000000u, to = (uint64_t)s->o->timeout_ms * 1000000u;
    for (size_t i = 0; i < s->ntrainers; i++) {
        struct trainer *t = &s->trainers[i];
        if (!t->active)
            continue;
        if (now - t->last_seen_ns > to) {
            sl_log(SL_LOG_WARN, "worker %u silent for %.1f s (heartbeat timeout %.1f s)", t->worker,
                   (double)(now - t->last_seen_ns) / 1e9, (double)s->o->timeout_ms / 1e3);
            sl_metrics_add(s->m, FEED_M_DROPPED, 1);
            feed__drop(s, t, "timed out");
            continue;
        }
        if (now - t->last_hb_ns >= hb) {
            struct sl_wire_heartbeat h = {.sent_ns = now};
            feed__send_simple(s, t, sl_wire_encode_heartbeat(&h, &s->hbuf), "HEARTBEAT");
            t->last_hb_ns = now;
            if (!t->active) /* the send dropped it: nothing more goes to it */
                continue;
        }
        if (t->wants_stats && now - t->last_stats_ns >= hb) {
            /* the feeder's CPU by stage so far, for the trainer to say which
             * stage bounds it when it waits for this feeder (issue #19) */
            struct sl_wire_stats st = {.credit_wait_ns = sl_metrics_get(s->m, FEED_M_BLOCKED_NS)};
            st.stage_ns[SL_WIRE_STAGE_READ] = sl_metrics_get(s->m, FEED_M_READ_NS);
            st.stage_ns[SL_WIRE_STAGE_DECOMPRESS] = sl_metrics_get(s->m, FEED_M_DECOMPRESS_NS);
            st.stage_ns[SL_WIRE_STAGE_DECODE] = sl_metrics_get(s->m, FEED_M_DECODE_NS);
            /* the map stage: its own field to a trainer that reads it, else
             * in decode (the nearest stage such a trainer knows) */
            st.with_map = (uint8_t)(t->stats_map != 0);
            st.stage_ns[t->stats_map ? SL_WIRE_STAGE_MAP : SL_WIRE_STAGE_DECODE] += sl_metrics_get(s->m, FEED_M_MAP_NS);
            st.stage_ns[SL_WIRE_STAGE_ASSEMBLE] = sl_metrics_get(s->m, FEED_M_ASSEMBLE_NS);
            st.stage_ns[SL_WIRE_STAGE_SEND] =
                sl_metrics_get(s->m, FEED_M_SERVE_NS) + sl_metrics_get(s->m, FEED_M_ZMQ_IO_NS);
            for (int k = 0; k < SL_WIRE_STAGES; k++) /* a counter past the wire's limit is clamped, not refused */
                st.stage_ns[k] = st.stage_ns[k] < SL_WIRE_MAX_COUNT ? st.stage_ns[k] : SL_WIRE_MAX_COUNT;
            if (st.credit_wait_ns > SL_WIRE_MAX_COUNT)
                st.credit_wait_ns = SL_WIRE_MAX_COUNT;
            feed__send_simple(s, t, sl_wire_encode_stats(&st, &s->hbuf), "STATS");
            t->last_stats_ns = now;
            if (!t->active)
                continue;
        }
        if (t->plan_done && t->inflight == 0 && !t->end_sent) {
            struct sl_wire_end e = {.worker = t->worker, .pieces = t->last_seq, .epochs = s->o->job->epochs};
            feed__send_simple(s, t, sl_wire_encode_end(&e, &s->hbuf), "END");
            t->end_sent = 1;
            if (t->share == s->o->feeder_index) /* a worker's own share: counted for the feeder's end */
                s->ended++;
            sl_log(SL_LOG_INFO, "worker %u: end of data after %" PRIu64 " pieces from this feeder%s", t->worker,
                   t->sent, t->share == s->o->feeder_index ? "" : " (a taken-over share)");
        }
    }
}

/* Every worker got its END and has gone: said BYE (a trainer does once its
 * caller has had the end of the stream, or at its close), or was dropped
 * without one more than --end-wait-s ago. Exiting as soon as the ENDs were
 * queued lost them now and then: the trainers' heartbeats unread in the
 * socket made the kernel close it with a reset, which can discard an END
 * still on its way (seen on a shaped link). A connection dropped after its
 * END without a BYE (closed, or silent past --timeout-ms: a trainer killed
 * after its last pieces came but before its caller took them all) is
 * waited for: its trainer may come back from a checkpoint and resume (its
 * HELLO takes the END back, feed_hello.c). */
static int all_done(const struct server *s)
{
    if (s->workers == 0 || s->ended != s->workers)
        return 0;
    uint64_t now = sl_clock_ns(), wait = (uint64_t)s->o->end_wait_ms * 1000000u;
    for (size_t i = 0; i < s->ntrainers; i++) {
        const struct trainer *t = &s->trainers[i];
        if (t->active || (t->end_sent && !t->said_bye && now - t->dropped_ns < wait))
            return 0;
    }
    return 1;
}

/* At the end: one line naming the workers whose connection was dropped
 * after their END without a BYE and that did not come back within
 * --end-wait-s (their trainers did not finish their stream). */
static void log_no_bye(const struct server *s)
{
    char list[512];
    size_t len = 0, n = 0;
    int full = 0; /* an entry takes at most 42 bytes: none is begun with fewer than 48 left */
    list[0] = '\0';
    for (size_t i = 0; i < s->ntrainers; i++) {
        const struct trainer *t = &s->trainers[i];
        if (!t->end_sent || t->said_bye)
            continue;
        const char *sep = n++ != 0 ? ", " : "";
        if (full)
            continue;
        if (len + 48 >= sizeof list) {
            snprintf(list + len, sizeof list - len, "%s...", sep);
            full = 1;
        } else if (t->share == s->o->feeder_index) {
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%u", sep, t->worker);
        } else {
            len +=
                (size_t)snprintf(list + len, sizeof list - len, "%s%u (feeder %u's share)", sep, t->worker, t->share);
        }
    }
    if (n != 0)
        sl_log(SL_LOG_WARN,
               "%s %s had %s END but never said BYE (%s connection closed or went silent) and did not come back "
               "within --end-wait-s %.0f: done without %s",
               n == 1 ? "worker" : "workers", list, n == 1 ? "its" : "their", n == 1 ? "its" : "each one's",
               s->o->end_wait_ms / 1e3, n == 1 ? "it" : "them");
}

/* The live gauges (connections served, those held back for want of
 * credit) and the serving thread's CPU so far: on every tick,
 * for the /metrics endpoint. */
static void update_gauges(struct server *s, uint64_t *cpu_mark)
{
    uint64_t connected = 0, starved = 0;
    for (size_t i = 0; i < s->ntrainers; i++) {
        const struct trainer *t = &s->trainers[i];
        if (!t->active)
            continue;
        connected++;
        uint64_t returned = t->granted - t->initial;
        uint64_t outstanding = t->scheduled > returned ? t->scheduled - returned : 0;
        if (!t->plan_done && (t->credits == 0 || outstanding >= s->window))
            starved++;
    }
    sl_metrics_set(s->m, FEED_M_CONNECTED, connected);
    sl_metrics_set(s->m, FEED_M_STARVED, starved);
    uint64_t cpu = sl_clock_thread_cpu_ns();
    sl_metrics_add(s->m, FEED_M_SERVE_NS, cpu - *cpu_mark);
    *cpu_mark = cpu;
}

/* The figures now, typed, with the run's elapsed time. */
static void snapshot(const struct server *s, double t0, struct feed_counters *c)
{
    struct sl_metrics_snap snap;
    sl_metrics_snapshot(s->m, &snap);
    feed_counters_from(&snap, c);
    c->elapsed_s = sl_clock_s() - t0;
    c->digest = s->digest;
    /* the joined feeders: those known, at or past the first feeders */
    c->roster_joined = s->roster.base < 64 ? s->roster.known & ~((UINT64_C(1) << s->roster.base) - 1) : 0;
}

/* ---- setup and teardown ---- */

/* The decoded-element cache when the job asks for one (cache_bytes) and
 * every feature is fixed-size; else none, said once in the log when asked. */
static int open_cache(struct server *s, struct sl_error *err)
{
    const struct feed_server_opts *o = s->o;
    if (o->job->cache_bytes == 0)
        return 0;
    if (o->map != NULL) {
        sl_log(SL_LOG_WARN, "cache_bytes: the job has a map: the decoded-element cache is off for it (docs/map.md: "
                            "random ops draw anew each epoch, so mapped elements are never cached)");
        return 0;
    }
    size_t row = 0;
    for (size_t i = 0; i < o->nspecs; i++) {
        const struct fmt_feature_spec *f = &o->specs[i];
        if (f->varlen || f->dtype == FMT_DTYPE_BYTES) {
            sl_log(SL_LOG_WARN,
                   "cache_bytes: feature '%s' is %s: the decoded-element cache holds fixed-size int64, float32 and "
                   "uint8 features only, so it is off for this job (every element is decoded)",
                   f->name, f->varlen ? "variable-length" : "bytes");
            return 0;
        }
        row += fmt_feature_spec_count(f) * fmt_dtype_size(f->dtype);
    }
    if (row == 0) {
        sl_log(SL_LOG_WARN, "cache_bytes: the features take no bytes: the decoded-element cache is off");
        return 0;
    }
    int rc = feed_cache_create(&s->cache, feed_source_counts(o->src), feed_source_nfiles(o->src), row,
                               o->job->cache_bytes, err);
    if (rc != 0)
        return rc;
    struct feed_cache_stats cs;
    feed_cache_stats(s->cache, &cs);
    sl_log(SL_LOG_INFO,
           "decoded-element cache: %" PRIu64 " of %" PRIu64 " elements have a row (%zu bytes each, %" PRIu64
           " bytes at most, cache_bytes %" PRIu64 ")",
           cs.slots, cs.elements, row, cs.bytes, o->job->cache_bytes);
    return 0;
}

/* The cache's figures at the end, then the cache. */
static void close_cache(struct server *s)
{
    if (s->cache == NULL)
        return;
    struct feed_cache_stats cs;
    feed_cache_stats(s->cache, &cs);
    sl_log(SL_LOG_INFO,
           "decoded-element cache: %" PRIu64 " hits, %" PRIu64 " misses; %" PRIu64 " of %" PRIu64 " elements cached",
           sl_metrics_get(s->m, FEED_M_CACHE_HITS), sl_metrics_get(s->m, FEED_M_CACHE_MISSES), cs.ready, cs.elements);
    feed_cache_destroy(s->cache);
    s->cache = NULL;
}

static int start(struct server *s, struct sl_zap **zap, struct sl_error *err)
{
    const struct feed_server_opts *o = s->o;
    const struct feed_job *job = o->job;
    int rc = o->map != NULL ? feed_schema_build(o->out_specs, o->nout_specs, &s->schema, err)
                            : feed_schema_build(o->specs, o->nspecs, &s->schema, err);
    if (rc != 0)
        return rc;
    s->max_rows = (size_t)job->global_batch_size;
    /* piece buffers are sized when the cluster shape is known (setup_cluster) */
    size_t prefetch = job->prefetch ? (size_t)job->prefetch : 4;
    s->prefetch = prefetch;
    s->nthreads = o->threads ? o->threads : 1;
    /* tasks: pieces being assembled at once (they are recycled when sent) */
    s->ntasks = prefetch > 2 * (size_t)s->nthreads ? prefetch : 2 * (size_t)s->nthreads;
    sl_buf_init(&s->hbuf, SL_WIRE_MAX_HEADER);

    if (o->listener != NULL) {
        /* bound before the scan: the same socket, HELLOs waiting in it included */
        s->ctx = o->listener->ctx;
        s->router = o->listener->router;
        *zap = o->listener->zap;
    } else if ((rc = feed__bind_router(o->listen, o->curve, o->ipc_group, &s->ctx, &s->router, zap, err)) != 0) {
        return rc;
    }
    if ((rc = open_cache(s, err)) != 0)
        return rc;
    /* joins: the plan's digest (the same on every feeder of the job), the
     * roster, and with --join a DEALER to each feeder asked */
    s->digest = feed__job_digest(s);
    feed__roster_init(s);
    if ((rc = feed__join_open(s, err)) != 0)
        return rc;
    struct feed_exec_opts eo = {.zmq_ctx = s->ctx,
                                .metrics = s->m,
                                .src = o->src,
                                .specs = o->specs,
                                .nspecs = o->nspecs,
                                .map = o->map,
                                .map_seed = job->shuffle_seed,
                                .map_op_ns = o->map_op_ns,
                                .format = job->format,
                                .max_rows = s->max_rows,
                                .cache = s->cache,
                                .threads = s->nthreads,
                                .ntasks = s->ntasks};
    return feed_exec_create(&s->exec, &eo, err);
}

static void stop(struct server *s)
{
    /* executors may wait for a buffer: closing the pool wakes them */
    if (s->pool != NULL)
        sl_pool_close(s->pool);
    feed_exec_destroy(s->exec);
    s->exec = NULL;
    close_cache(s);
    if (s->ctx != NULL) /* before the I/O threads end */
        sl_metrics_add(s->m, FEED_M_ZMQ_IO_NS, (uint64_t)(sl_proc_threads_cpu_s("ZMQbg/IO/") * 1e9));
    feed__join_close(s);
    if (s->router != NULL)
        zmq_close(s->router); /* lingers up to 2 s to deliver what is queued */
    if (s->ctx != NULL)
        zmq_ctx_term(s->ctx); /* waits for ZeroMQ to release every frame */
    for (size_t i = 0; s->trainers != NULL && i < s->ntrainers; i++) {
        feed_stream_destroy(s->trainers[i].stream);
        /* nothing writes the pool any more: trainers still mapping it keep
         * their view of it */
        feed_hold_release_all(&s->trainers[i].hold, s->pool);
        feed_hold_free(&s->trainers[i].hold);
    }
    if (s->pool != NULL && sl_pool_wait_idle(s->pool, 5000) == 0)
        sl_pool_destroy(s->pool);
    else if (s->pool != NULL)
        sl_log(SL_LOG_WARN, "piece buffers still referenced at exit; not freed");
    for (size_t i = 0; i < sizeof s->retired / sizeof s->retired[0]; i++)
        if (s->retired[i] != NULL && sl_pool_wait_idle(s->retired[i], 5000) == 0)
            sl_pool_destroy(s->retired[i]);
        else if (s->retired[i] != NULL)
            sl_log(SL_LOG_WARN, "piece buffers of a released shape still referenced at exit; not freed");
    sl_free(s->trainers);
    sl_buf_free(&s->hbuf);
}

/* The run's fatal error into err; its code. */
static int fatal_error(struct server *s, struct sl_error *err)
{
    if (s->fatal_err.code != 0 && s->fatal_err.msg[0] != '\0')
        *err = s->fatal_err;
    else
        sl_error_set(err, SL_ECORRUPT, "data error");
    return err->code;
}

/* ---- the loop ---- */

/* The last progress report: its time, the next one's, and the figures it
 * gave (what went out since is the next one's). */
struct report_mark {
    double at, next; /* the last report's time and the next one's */
    uint64_t bytes;
    double blocked;
};

/* The counters line when SIGUSR1 asked for it, and the progress line every
 * report_ms. */
static void reports(struct server *s, double t0, struct feed_counters *c, struct report_mark *rep)
{
    const struct feed_server_opts *o = s->o;
    if (o->dump != NULL && *o->dump) {
        *o->dump = 0;
        char line[512];
        snapshot(s, t0, c);
        feed_counters_format(c, line, sizeof line);
        sl_log(SL_LOG_INFO, "counters: %s", line);
    }
    if (o->report_ms > 0 && sl_clock_s() >= rep->next) {
        /* progress: what went out since the last report */
        double now = sl_clock_s(), span = now - rep->at;
        snapshot(s, t0, c);
        uint32_t active = 0;
        for (size_t i = 0; i < s->ntrainers; i++)
            active += s->trainers[i].active != 0;
        sl_log(SL_LOG_INFO,
               "served %" PRIu64 " pieces, %" PRIu64 " records (%.1f MB/s over the last %.0f s), %u of %u "
               "trainers connected, waiting for credits %.0f%% of that time",
               c->pieces, c->records, span > 0 ? (double)(c->bytes - rep->bytes) / span / 1e6 : 0.0, span, active,
               s->workers, span > 0 ? 100.0 * (c->blocked_s - rep->blocked) / span : 0.0);
        *rep = (struct report_mark){
            .at = now, .next = now + o->report_ms / 1000.0, .bytes = c->bytes, .blocked = c->blocked_s};
    }
}

/* Wait up to a quarter of a heartbeat for the socket and the executors,
 * then read up to 64 messages. The time waited counts as blocked on credits
 * when a trainer was waiting for them (`waiting`) and tasks were free. 0,
 * or the error of zmq_poll. */
static int poll_messages(struct server *s, int waiting, struct sl_error *err)
{
    zmq_pollitem_t items[2];
    items[0] = (zmq_pollitem_t){.socket = s->router, .events = ZMQ_POLLIN};
    items[1] = (zmq_pollitem_t){.socket = feed_exec_socket(s->exec), .events = ZMQ_POLLIN};
    int timeout = s->o->heartbeat_ms / 4 > 0 ? s->o->heartbeat_ms / 4 : 1;
    uint64_t before = sl_clock_ns();
    int n = zmq_poll(items, 2, timeout);
    if (n < 0 && errno != EINTR)
        return sl_error_set(err, SL_EIO, "zmq_poll: %s", zmq_strerror(errno));
    if (waiting && feed_exec_free(s->exec) > 0)
        sl_metrics_add(s->m, FEED_M_BLOCKED_NS, sl_clock_ns() - before);
    if (n > 0 && (items[0].revents & ZMQ_POLLIN))
        for (int k = 0; k < 64; k++) {
            int ev = 0;
            size_t len = sizeof ev;
            zmq_getsockopt(s->router, ZMQ_EVENTS, &ev, &len);
            if (!(ev & ZMQ_POLLIN))
                break;
            feed__on_message(s);
        }
    return 0;
}

/* Heartbeats, STATS, ENDs and the gauges on every tick (a quarter of a
 * heartbeat); between ticks, ENDs as soon as they are due. */
static void tick(struct server *s, uint64_t now, uint64_t *last_tick, uint64_t *cpu_mark)
{
    if (now - *last_tick >= (uint64_t)s->o->heartbeat_ms * 250000u) {
        heartbeats_and_ends(s);
        update_gauges(s, cpu_mark);
        *last_tick = now;
    } else {
        /* ENDs promptly, heartbeats on the tick */
        for (size_t i = 0; i < s->ntrainers; i++) {
            struct trainer *t = &s->trainers[i];
            if (t->active && t->plan_done && t->inflight == 0 && !t->end_sent) {
                heartbeats_and_ends(s);
                break;
            }
        }
    }
}

/* --idle-exit: 1 (logged) once no trainer has been connected for
 * idle_exit_ms; *idle_since follows the last moment one was. */
static int idle_over(const struct server *s, uint64_t now, uint64_t *idle_since)
{
    const struct feed_server_opts *o = s->o;
    if (o->idle_exit_ms <= 0)
        return 0;
    /* idle: no trainer connected for idle_exit_ms */
    int busy = 0;
    for (size_t i = 0; i < s->ntrainers && !busy; i++)
        busy = s->trainers[i].active;
    if (busy) {
        *idle_since = now;
    } else if (now - *idle_since >= (uint64_t)o->idle_exit_ms * 1000000u) {
        char served[64] = "no trainer came";
        if (s->workers > 0)
            snprintf(served, sizeof served, "%u of %u workers served to their end", s->ended, s->workers);
        sl_log(SL_LOG_WARN,
               "idle: no trainer connected for %.0f s (--idle-exit %.0f): stopping with exit "
               "status 3 (%s)",
               (double)(now - *idle_since) / 1e9, o->idle_exit_ms / 1e3, served);
        return 1;
    }
    return 0;
}

/* Serve until a signal, a fatal error, every worker served, or idle past
 * --idle-exit (*idle set). 0, or the error that ended it. */
static int serve(struct server *s, double t0, uint64_t *cpu_mark, struct feed_counters *c, int *idle,
                 struct sl_error *err)
{
    const struct feed_server_opts *o = s->o;
    const struct feed_curve *curve = o->listener != NULL ? o->listener->curve : o->curve;
    uint64_t last_tick = sl_clock_ns(), idle_since = last_tick;
    struct report_mark rep = {.at = sl_clock_s(), .next = sl_clock_s() + o->report_ms / 1000.0};
    int rc = 0;
    while (rc == 0) {
        if (o->stop != NULL && *o->stop) {
            sl_log(SL_LOG_INFO, "stopping on signal");
            feed__send_error_all(s, SL_ECLOSED, "feeder stopped by a signal");
            break;
        }
        feed__curve_reload(curve);
        reports(s, t0, c, &rep);
        if (s->release_pending)
            (void)feed__shape_release(s);
        if (s->retired[0] != NULL || s->retired[1] != NULL || s->retired[2] != NULL || s->retired[3] != NULL)
            feed__shape_reap(s);
        int waiting = feed__schedule(s);
        if (s->fatal) {
            rc = fatal_error(s, err); /* the ERRORs go out while the router lingers */
            break;
        }
        if ((rc = poll_messages(s, waiting, err)) != 0)
            break;
        feed__drain_done(s);
        if (s->fatal) {
            /* an error found by the executors or while sending ends the
             * run before any END goes out (a feeder that met an error
             * never exits 0) */
            rc = fatal_error(s, err);
            break;
        }
        uint64_t now = sl_clock_ns();
        tick(s, now, &last_tick, cpu_mark);
        if (all_done(s)) {
            log_no_bye(s);
            sl_log(SL_LOG_INFO, "every worker has its data: done");
            break;
        }
        if (feed__join_tick(s) != 0) /* a joiner whose job's other feeders are gone */
            break;
        if (s->fatal) {
            rc = fatal_error(s, err);
            break;
        }
        if (idle_over(s, now, &idle_since)) {
            *idle = 1;
            break;
        }
    }
    return rc;
}

/* After the loop: the serving thread's last figures, the log limits
 * flushed, the socket left to the listener after a start-up failure (for
 * feed_server_refuse_all) or taken from it, the ZAP handler stopped, and
 * everything of s but s itself released. */
static void finish(struct server *s, int started, struct sl_zap *zap, uint64_t cpu_mark)
{
    const struct feed_server_opts *o = s->o;
    sl_metrics_add(s->m, FEED_M_SERVE_NS, sl_clock_thread_cpu_ns() - cpu_mark);
    sl_metrics_set(s->m, FEED_M_CONNECTED, 0);
    sl_metrics_set(s->m, FEED_M_STARVED, 0);
    sl_log_limit_flush(&s->lim_refuse, 1);
    sl_log_limit_flush(&s->lim_bad, 1);
    if (o->listener != NULL && !started) {
        /* a start-up failure: the socket stays bound, for refuse_all (no
         * frame of the pool ever went out on it) */
        s->router = NULL;
        s->ctx = NULL;
        zap = NULL; /* the listener's still */
    } else if (o->listener != NULL) {
        o->listener->router = NULL; /* stop() closes them */
        o->listener->ctx = NULL;
        o->listener->zap = NULL; /* stopped here */
    }
    /* before the context ends (its REP socket would hold zmq_ctx_term);
     * a trainer connecting while the router lingers finds no handler and
     * is refused (ZMQ_ZAP_ENFORCE_DOMAIN) */
    feed__curve_summary(zap);
    sl_zap_stop(zap);
    stop(s); /* adds the executors' and ZeroMQ's last figures */
}

/* systemd's service manager, told through $NOTIFY_SOCKET when set
 * (Type=notify, deploy/systemd/sluice-feeder.service): READY=1 once the
 * feeder serves, STOPPING=1 when it stops serving. Nothing without
 * libsystemd at build time, or outside a unit. */
static void notify_manager(const char *state)
{
#ifdef SLUICE_HAVE_SYSTEMD
    int rc = sd_notify(0, state);
    if (rc < 0)
        sl_log(SL_LOG_WARN, "sd_notify(%s): %s", state, strerror(-rc));
#else
    (void)state;
#endif
}

int feed_server_run(const struct feed_server_opts *opts, struct feed_counters *c, struct sl_error *err)
{
    struct feed_server_opts o = *opts;
    if (o.heartbeat_ms <= 0)
        o.heartbeat_ms = 1000;
    if (o.timeout_ms <= 0)
        o.timeout_ms = 10000;
    if (o.feeders == 0)
        o.feeders = 1;
    if (o.piece_memory == 0)
        o.piece_memory = FEED_DEFAULT_PIECE_MEMORY;
    memset(c, 0, sizeof *c);
    struct server *s = sl_calloc(1, sizeof *s);
    if (s == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    struct sl_metrics *own = NULL;
    if (o.metrics == NULL && sl_metrics_create(&own, feed_metric_defs, FEED_M_COUNT) != 0) {
        sl_free(s);
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    }
    s->o = &o;
    s->m = o.metrics != NULL ? o.metrics : own;
    s->lim_refuse = (struct sl_log_limit){.kind = "refusals", .burst = 10};
    s->lim_bad = (struct sl_log_limit){.kind = "malformed or unexpected messages", .burst = 10};
    double t0 = sl_clock_s();
    uint64_t cpu0 = sl_clock_thread_cpu_ns();
    struct sl_zap *zap = NULL;
    int rc = start(s, &zap, err);
    if (rc == 0 && o.workers != 0) {
        /* the shape from the feeder's side: no HELLO can change it */
        s->fixed = 1;
        if ((rc = feed__shape_setup(s, o.workers, o.replicas ? o.replicas : 1, err)) != 0)
            sl_error_prefix(err, "--workers %u --replicas %u: ", o.workers, o.replicas ? o.replicas : 1);
    }
    int started = rc == 0, idle = 0;
    if (rc == 0) {
        snapshot(s, t0, c);
        sl_log(SL_LOG_INFO,
               "serving job '%s' on %s as feeder %u of %u (%u threads, %" PRIu64
               " bytes of piece buffers; job digest %016" PRIx64 ")%s",
               o.job->name, o.listen, o.feeder_index, o.feeders, s->nthreads, c->pool_bytes, s->digest,
               o.njoin > 0 ? "; joining the running job" : "");
        notify_manager("READY=1");
        rc = serve(s, t0, &cpu0, c, &idle, err);
        notify_manager("STOPPING=1");
    }
    finish(s, started, zap, cpu0);
    snapshot(s, t0, c);
    c->started = started;
    c->idle = idle;
    sl_free(s);
    sl_metrics_destroy(own);
    return rc;
}
