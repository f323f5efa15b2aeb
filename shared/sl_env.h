/* sl_env: a process's place in a cluster, read from its environment.
 *
 * Two sources, chosen by sluice-feeder's and sluice-trainer's
 * `--cluster-from SOURCE` (docs/deploy.md):
 *
 *   slurm[:feeders=F,feeder-port=P,ring-port=Q]
 *       Slurm's task variables (SLURM_PROCID, SLURM_NTASKS, the node list
 *       and the tasks per node). The first F tasks of the step are the
 *       feeders (default 1), the others the trainer workers in task order:
 *       task j < F is feeder j and listens on port P + j (default 5555),
 *       task F + w is worker w and has its ring endpoint on port Q + w
 *       (default 7000). Ports follow the role index, not the node, so
 *       tasks sharing a node never collide and no port depends on where
 *       Slurm put a task.
 *   tf_config
 *       TF_CONFIG, checked more strictly than the implicit reading of the
 *       variable: it must be set, be one JSON object without repeated keys,
 *       and name the task.
 *
 * Either way the result is a TF_CONFIG-compatible spec (JSON text, see
 * sl_cluster.h) that the binaries read exactly as they read `--cluster`,
 * with a `feeder` list, a `worker` list and this process's task.
 *
 * Every input is treated as hostile: node lists are expanded only after a
 * first pass has counted them (at most SL_ENV_MAX_HOSTS hosts, each at most
 * SL_ENV_MAX_HOST bytes), so `node[0-999999999]` is refused without
 * allocating. Errors (SL_EINVAL) name the variable, the offending text and
 * its byte offset:
 *
 *     SLURM_JOB_NODELIST: reversed range '7-3' at offset 5
 *     SLURM_JOB_NODELIST: more than 65536 hosts: the range '0-999999999' at offset 5
 *     SLURM_STEP_TASKS_PER_NODE gives 3 nodes, but SLURM_STEP_NODELIST lists 2
 *     TF_CONFIG:1:45: duplicate object key near '"worker"'
 *
 * Thread-safety: the functions keep no state; with envp NULL they read the
 * process environment (getenv), which must not change meanwhile.
 */
#ifndef SL_ENV_H
#define SL_ENV_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"
#include "sl_opt.h"

#define SL_ENV_MAX_HOSTS 65536          /* hosts in one node list, tasks in one step */
#define SL_ENV_MAX_HOST 240             /* bytes of one host name: "tcp://" HOST ":65535" fits an endpoint */
#define SL_ENV_MAX_GROUPS 4             /* bracket groups in one name: rack[1-2]-n[01-04] */
#define SL_ENV_MAX_DIGITS 18            /* digits of a number in brackets */
#define SL_ENV_MAX_FEEDERS 64           /* feeders a trainer connects to */
#define SL_ENV_MAX_TF_CONFIG (4u << 20) /* bytes of TF_CONFIG */

/* A list of host names: n strings in one owned block (NULL-terminated
 * `names`). All-zero is the empty list. */
struct sl_env_hosts {
    size_t n;
    char **names;
};

/* Expand a Slurm node list ("node[01-04,07],gpu1,rack[1-2]-n[1-2]") into
 * *h, in the list's order (duplicates kept; several bracket groups in one
 * name expand left to right, the first outermost). A number's width is its
 * lower bound's digits: node[08-10] gives node08, node09, node10. Host
 * names use letters, digits, '-', '.' and '_'. `what` names the source in
 * messages (the variable). On error *h is empty. */
int sl_env_nodelist(struct sl_env_hosts *h, const char *text, const char *what, struct sl_error *err) SL_MUST_CHECK;
void sl_env_hosts_free(struct sl_env_hosts *h);

/* Parse Slurm's tasks per node ("2(x3),1": 2, 2, 2, 1) into *counts
 * (owned, *n entries, each at least 1; at most SL_ENV_MAX_HOSTS nodes and
 * tasks in all). On error *counts is NULL. */
int sl_env_tasks_per_node(uint32_t **counts, size_t *n, const char *text, const char *what,
                          struct sl_error *err) SL_MUST_CHECK;

/* The Slurm step this process is a task of. */
struct sl_env_slurm {
    uint32_t procid, ntasks;   /* SLURM_PROCID, SLURM_STEP_NUM_TASKS or SLURM_NTASKS */
    struct sl_env_hosts hosts; /* SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST, else SLURM_NODELIST */
    uint32_t *node;            /* [ntasks]: each task's index in hosts (owned) */
    int cyclic;                /* 1: tasks were placed round-robin (SLURM_DISTRIBUTION cyclic) */
};

/* Read the step from `envp` ("NAME=VALUE" strings, NULL-terminated; NULL:
 * the process environment). Tasks are placed on the nodes by the tasks per
 * node (SLURM_STEP_TASKS_PER_NODE, else SLURM_TASKS_PER_NODE; without
 * either, one task per node) in block order, or round-robin when
 * SLURM_DISTRIBUTION starts with "cyclic"; any other distribution is
 * refused unless every node runs one task. When SLURMD_NODENAME is set it
 * must be the node this task was placed on. On error *s is empty. */
int sl_env_slurm_read(struct sl_env_slurm *s, const char *const *envp, struct sl_error *err) SL_MUST_CHECK;
void sl_env_slurm_free(struct sl_env_slurm *s);

/* How the step's tasks divide into feeders and trainer workers. */
struct sl_env_layout {
    uint32_t feeders;     /* the first `feeders` tasks; 1 to SL_ENV_MAX_FEEDERS */
    uint32_t feeder_port; /* feeder j: feeder_port + j */
    uint32_t ring_port;   /* worker w: ring_port + w */
};

/* "feeders=2,feeder-port=6000,ring-port=7100" (any subset, each key at
 * most once; "" gives the defaults 1, 5555, 7000). */
int sl_env_layout_parse(struct sl_env_layout *l, const char *text, struct sl_error *err) SL_MUST_CHECK;

/* The spec of the step's cluster as this task sees it: feeder j at
 * tcp://HOST:feeder_port+j, worker w at tcp://HOST:ring_port+w, task
 * "feeder" or "worker" with its index. *spec is owned (sl_free). Refused:
 * no task left for a worker, ports past 65535, feeder and ring ports that
 * overlap. */
int sl_env_slurm_spec(char **spec, const struct sl_env_slurm *s, const struct sl_env_layout *l,
                      struct sl_error *err) SL_MUST_CHECK;

/* TF_CONFIG from `envp` (NULL: the process environment), checked: set, at
 * most SL_ENV_MAX_TF_CONFIG bytes, one JSON object without a repeated key,
 * 'cluster' an object whose lists hold at most SL_ENV_MAX_HOSTS entries,
 * 'task' an object with a 'type' string (at most 31 bytes) and an integer
 * 'index' in [0, 65535]. *spec: the same object as compact JSON (owned). */
int sl_env_tf_config_spec(char **spec, const char *const *envp, struct sl_error *err) SL_MUST_CHECK;

/* `--cluster-from SOURCE`: "slurm", "slurm:LAYOUT" or "tf_config" to a spec
 * (*spec owned, sl_free). */
int sl_env_cluster_spec(char **spec, const char *source, const char *const *envp, struct sl_error *err) SL_MUST_CHECK;

/* --cluster-from and the options it derives do not mix: 0 when none of
 * `names` (long names, without dashes) is in `given` (sl_opt_parse's mask),
 * else SL_EINVAL naming both: "--cluster-from slurm gives --listen,
 * --feeder-index and --feeders: give it or --listen, not both" ("give
 * --cluster-from or --cluster, not both" for "cluster"). */
int sl_env_refuse_given(const struct sl_opt_cmd *cmd, uint64_t given, const char *source, const char *const *names,
                        size_t n, struct sl_error *err) SL_MUST_CHECK;

#endif
