/* sl_cluster: a TF_CONFIG-compatible cluster spec, for feeders and trainers.
 *
 *   {"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", ...],
 *                "feeder": ["tcp://host5:5555", "tcp://host6:5555"]},
 *    "task": {"type": "worker", "index": 1}}
 *
 * As in TensorFlow's MultiWorkerMirroredStrategy, the chief (when present)
 * is worker 0 and worker i is worker i + 1; without a chief, worker i is
 * worker i. "feeder" is sluice's own job type: the feeders of the input
 * job, in feeder index order (a trainer connects to all of them; feeder j
 * binds its own entry). "ps" lists the parameter servers
 * (ParameterServerStrategy; a bare host:port becomes tcp://host:port) and a
 * task of type "ps" is parameter server `index`. A task of type
 * "evaluator" (train_and_evaluate's evaluator) has index 0 and need not be
 * listed, as in TensorFlow, where it is not part of the training cluster;
 * an "evaluator" list holds at most one task (its address is not used).
 * Other job types are accepted and ignored here.
 *
 * A spec may also name the CURVE key files of the process reading it
 * (issue #16; docs/security.md): paths, never keys:
 *
 *   "curve": {"key": "/etc/sluice/trainer.key",
 *             "server_keys": "/etc/sluice/feeders"}
 *
 * "key" stands for --curve-key (a feeder's or a trainer's own), and
 * "server_keys" for a trainer's --curve-server-key, "allow" for a
 * feeder's --curve-allow, when the command line does not give them. Any other key
 * in "curve" is refused (a misspelt security setting must not pass
 * silently), and so is any key repeated anywhere in the spec.
 *
 * Errors name the key: "cluster spec: 'task.index' 3 is out of range for
 * the 2 'worker' tasks".
 */
#ifndef SL_CLUSTER_H
#define SL_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

#define SL_CLUSTER_MAX_ADDR 256
#define SL_CLUSTER_MAX_PATH 4096 /* bytes of a key file's path, NUL included */

struct sl_cluster {
    size_t nfeeders;
    char (*feeders)[SL_CLUSTER_MAX_ADDR];      /* owned */
    uint32_t workers;                          /* chief + workers */
    char (*worker_addrs)[SL_CLUSTER_MAX_ADDR]; /* [workers], owned: the chief
                                             first, then 'worker'; a bare
                                             host:port becomes tcp://host:port */
    size_t nps;
    char (*ps_addrs)[SL_CLUSTER_MAX_ADDR]; /* [nps], owned: 'ps', bare host:port as tcp:// */
    size_t nevaluators;                    /* 'evaluator' tasks listed: 0 or 1 */
    char task_type[32];                    /* "" when the spec has no task */
    uint32_t task_index;
    char *curve_key;         /* owned; NULL when absent: 'curve.key' */
    char *curve_server_keys; /* owned; NULL when absent: 'curve.server_keys' */
    char *curve_allow;       /* owned; NULL when absent: 'curve.allow' */
};

/* Parse `text` (JSON, or the path of a JSON file when it does not start
 * with '{'). A key repeated in one object is refused. */
int sl_cluster_parse(struct sl_cluster *c, const char *text, struct sl_error *err) SL_MUST_CHECK;
void sl_cluster_free(struct sl_cluster *c);

/* The task as a trainer worker: *w of *W. SL_EINVAL when the task is not a
 * chief or worker. */
int sl_cluster_worker(const struct sl_cluster *c, uint32_t *w, uint32_t *W, struct sl_error *err) SL_MUST_CHECK;

/* The task as a feeder: its index, the feeder count, and the endpoint to
 * bind (a tcp endpoint binds every interface on its port; other transports bind the
 * address as given). SL_EINVAL when the task is not a feeder. */
/* What a process binds to listen on its own endpoint `ep`: a tcp endpoint
 * binds every interface on its port ("tcp://host1:2222" -> "tcp://" "*:2222");
 * other transports bind the address as given. */
void sl_cluster_bind_addr(const char *ep, char *bind, size_t n);

int sl_cluster_feeder(const struct sl_cluster *c, uint32_t *j, uint32_t *F, char *bind, size_t n,
                      struct sl_error *err) SL_MUST_CHECK;

/* A list of endpoints, for feeders' and trainers' command lines: n
 * strings, each shorter than SL_CLUSTER_MAX_ADDR, in one owned block.
 * `items` (NULL-terminated) goes where an API takes `const char *const *`.
 * All-zero is the empty list. */
struct sl_cluster_list {
    size_t n;
    char **items; /* owned, with the strings; NULL when n == 0 */
};

#define SL_CLUSTER_BARE_TCP 1u /* a bare host:port becomes tcp://host:port, as in TF_CONFIG */

/* Split a comma-separated list (empty items are skipped) into *l: at most
 * `max` items, each checked against SL_CLUSTER_MAX_ADDR. SL_EINVAL names
 * `what` (the option): "--connect: at most 64 endpoints, got 65",
 * "--peers: 'h...' is longer than 249 bytes", "--ring: no endpoint";
 * SL_ENOMEM. On error *l is empty. */
int sl_cluster_list_split(struct sl_cluster_list *l, const char *text, size_t max, unsigned flags, const char *what,
                          struct sl_error *err) SL_MUST_CHECK;

/* The spec's feeders, or its chief and workers (in worker order, bare
 * host:port already tcp://), as a list. 0 (an empty list when the spec
 * has none) or SL_ENOMEM. */
int sl_cluster_feeder_list(const struct sl_cluster *c, struct sl_cluster_list *l, struct sl_error *err) SL_MUST_CHECK;
int sl_cluster_worker_list(const struct sl_cluster *c, struct sl_cluster_list *l, struct sl_error *err) SL_MUST_CHECK;
int sl_cluster_ps_list(const struct sl_cluster *c, struct sl_cluster_list *l, struct sl_error *err) SL_MUST_CHECK;

/* Join n endpoints with commas into buf (cap bytes, NUL included): 0, or
 * SL_EINVAL ("endpoint list longer than N bytes") with buf holding "". */
int sl_cluster_list_join(const char *const *items, size_t n, char *buf, size_t cap, struct sl_error *err) SL_MUST_CHECK;

void sl_cluster_list_free(struct sl_cluster_list *l);

#endif
