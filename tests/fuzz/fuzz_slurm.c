/* libFuzzer target for a Slurm task's place (shared/sl_env.c): the input's
 * first line is a layout ("feeders=2,feeder-port=6000", sl_env_layout_parse),
 * every other line a NAME=VALUE of the environment (SLURM_PROCID,
 * SLURM_NTASKS, SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE,
 * SLURM_DISTRIBUTION, SLURMD_NODENAME...) read by sl_env_slurm_read. Each
 * answers 0 or SL_EINVAL with a message. A step read has this task among
 * its tasks and every task on a listed node; with a layout, the spec that
 * sl_env_slurm_spec makes (or refuses with SL_EINVAL) parses as a cluster
 * spec (sl_cluster_parse) whose task, feeders and workers are the step's:
 * task j < F is feeder j at tcp://ITS-NODE:feeder_port+j, task F+w is
 * worker w at tcp://ITS-NODE:ring_port+w. */
#include "fuzz_common.h"
#include "sl_alloc.h"
#include "sl_cluster.h"
#include "sl_env.h"

static const int einval[] = {SL_EINVAL, 0};

static void check_spec(const struct sl_env_slurm *s, const struct sl_env_layout *l)
{
    char *spec = NULL;
    struct sl_error err = {0};
    int rc = sl_env_slurm_spec(&spec, s, l, &err);
    fuzz_note("sl_env_slurm_spec", rc, err.msg);
    if (rc != 0) {
        fuzz_check_error(rc, &err, einval);
        CHECK(spec == NULL);
        return;
    }
    CHECK(l->feeders < s->ntasks);
    struct sl_cluster c;
    CHECK(spec[0] == '{' && sl_cluster_parse(&c, spec, &err) == 0);
    CHECK(c.nfeeders == l->feeders && c.workers == s->ntasks - l->feeders);
    char ep[SL_CLUSTER_MAX_ADDR];
    for (uint32_t t = 0; t < s->ntasks; t++) {
        int feeder = t < l->feeders;
        uint32_t k = feeder ? t : t - l->feeders;
        snprintf(ep, sizeof ep, "tcp://%s:%u", s->hosts.names[s->node[t]],
                 (feeder ? l->feeder_port : l->ring_port) + k);
        CHECK(strcmp(feeder ? c.feeders[k] : c.worker_addrs[k], ep) == 0);
    }
    int feeder = s->procid < l->feeders;
    CHECK(strcmp(c.task_type, feeder ? "feeder" : "worker") == 0);
    CHECK(c.task_index == (feeder ? s->procid : s->procid - l->feeders));
    sl_cluster_free(&c);
    sl_free(spec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    char *text = malloc(size + 1);
    const char *envp[65];
    CHECK(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    size_t n = 0;
    char *layout = text, *line = strchr(text, '\n');
    if (line != NULL)
        *line++ = '\0';
    while (line != NULL && n < 64) {
        envp[n++] = line;
        if ((line = strchr(line, '\n')) != NULL)
            *line++ = '\0';
    }
    envp[n] = NULL;

    struct sl_env_layout l;
    struct sl_error err = {0};
    int lrc = sl_env_layout_parse(&l, layout, &err);
    fuzz_note("sl_env_layout_parse", lrc, err.msg);
    if (lrc != 0)
        fuzz_check_error(lrc, &err, einval);
    else
        CHECK(l.feeders >= 1 && l.feeders <= SL_ENV_MAX_FEEDERS && l.feeder_port >= 1 && l.feeder_port <= 65535 &&
              l.ring_port >= 1 && l.ring_port <= 65535);

    struct sl_env_slurm s;
    int rc = sl_env_slurm_read(&s, envp, &err);
    fuzz_note("sl_env_slurm_read", rc, err.msg);
    if (rc != 0) {
        fuzz_check_error(rc, &err, einval);
        CHECK(s.node == NULL && s.hosts.names == NULL);
    } else {
        CHECK(s.ntasks >= 1 && s.ntasks <= SL_ENV_MAX_HOSTS && s.procid < s.ntasks);
        CHECK(s.hosts.n >= 1);
        for (uint32_t t = 0; t < s.ntasks; t++)
            CHECK(s.node[t] < s.hosts.n);
        if (lrc == 0)
            check_spec(&s, &l);
        sl_env_slurm_free(&s);
    }
    free(text);
    return 0;
}
