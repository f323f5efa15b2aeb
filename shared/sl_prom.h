/* sl_prom: the Prometheus text exposition format, version 0.0.4, written
 * into a buffer: a family's "# HELP" and "# TYPE" lines, then its samples,
 * `name{label="value",...} value`.
 *
 * A writer carries labels every sample gets (the process's: its job, its
 * index), formatted once with sl_prom_label. Label values and help text
 * are escaped as the format says (label values: backslash, double quote
 * and newline; help: backslash and newline); metric and label names are
 * the caller's constants and are not checked. Counters and gauges are
 * printed exactly: integers as integers, nanoseconds as seconds with nine
 * decimals, doubles with 17 significant digits (NaN, +Inf, -Inf as the
 * format spells them).
 *
 * The first error (the buffer's bound, or out of memory) sticks in rc and
 * makes every later call do nothing.
 *
 * Thread-safe: a writer belongs to one thread.
 */
#ifndef SL_PROM_H
#define SL_PROM_H

#include <stddef.h>
#include <stdint.h>

#include "sl_buf.h"
#include "sl_error.h"
#include "sl_hist.h"

struct sl_prom {
    struct sl_buf *b;   /* borrowed: the text goes here */
    const char *labels; /* borrowed: `k="v",k2="v2"` (sl_prom_label), every sample's; NULL or "": none */
    int rc;             /* 0, or the first error (SL_ENOMEM, SL_EINVAL past the buffer's bound) */
};

/* Append `name="value"` to b (a comma first when b is not empty), the
 * value escaped. 0 or the buffer's error. */
int sl_prom_label(struct sl_buf *b, const char *name, const char *value) SL_MUST_CHECK;

/* A family's header: type is "counter", "gauge", "histogram" or "untyped". */
void sl_prom_family(struct sl_prom *p, const char *name, const char *type, const char *help);

/* One sample of `name`; extra: more labels for this sample (`k="v"`,
 * already escaped: sl_prom_label), or NULL. */
void sl_prom_u64(struct sl_prom *p, const char *name, const char *extra, uint64_t v);
void sl_prom_seconds(struct sl_prom *p, const char *name, const char *extra, uint64_t ns);
void sl_prom_double(struct sl_prom *p, const char *name, const char *extra, double v);

/* A family of one sample without labels of its own: the header, then the
 * value (a counter or gauge of a count; of nanoseconds, printed as
 * seconds). */
void sl_prom_counter(struct sl_prom *p, const char *name, const char *help, uint64_t v);
void sl_prom_gauge(struct sl_prom *p, const char *name, const char *help, uint64_t v);
void sl_prom_counter_seconds(struct sl_prom *p, const char *name, const char *help, uint64_t ns);

/* sluice_process_info{program="...",version="..."} 1, with the writer's
 * labels (sluice_job and the process's index): the family every sluice
 * process that serves /metrics exports (feeder, trainer, the client
 * library), so that one query lists every job's processes (the Grafana
 * dashboard's job variable). program: "feeder", "trainer", "ps" or
 * "client". */
#define SL_PROM_PROCESS_INFO "sluice_process_info"
void sl_prom_process_info(struct sl_prom *p, const char *program);

/* A histogram family of durations: name_bucket{le="..."} for every bound
 * and "+Inf", name_sum (seconds) and name_count. */
void sl_prom_hist(struct sl_prom *p, const char *name, const char *help, const char *extra,
                  const struct sl_hist_snap *h);

#endif
