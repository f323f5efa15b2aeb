/* plan_dump: print every worker's plan as JSON lines, for comparison with
 * the Python model tests/plan/ref_plan.py (same config keys, same output;
 * see that file). Usage: plan_dump CONFIG (JSON text or a path). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feed_plan.h"
#include "sl_alloc.h"

static int get_int(json_t *root, const char *key, long long def, long long *out)
{
    json_t *v = json_object_get(root, key);
    if (v == NULL) {
        *out = def;
        return 0;
    }
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return 0;
    }
    if (!json_is_integer(v)) {
        fprintf(stderr, "plan_dump: '%s' must be an integer\n", key);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

static const char *get_str(json_t *root, const char *key, const char *def)
{
    json_t *v = json_object_get(root, key);
    return json_is_string(v) ? json_string_value(v) : def;
}

/* A seed may be a JSON integer or a decimal string (for values >= 2^63). */
static int get_seed(json_t *root, uint64_t *out)
{
    json_t *v = json_object_get(root, "seed");
    if (v == NULL) {
        *out = 0;
        return 0;
    }
    if (json_is_integer(v)) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        char *end;
        *out = strtoull(json_string_value(v), &end, 10);
        return *end == '\0' ? 0 : -1;
    }
    return -1;
}

static void print_error(const char *msg)
{
    json_t *o = json_pack("{s:s}", "error", msg);
    char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    printf("%s\n", s);
    free(s);
    json_decref(o);
}

static int dump(const struct feed_plan_config *cfg, uint64_t forever_epochs)
{
    struct sl_error err = {0};
    for (uint32_t w = 0; w < cfg->workers; w++) {
        struct feed_plan_summary sum;
        if (feed_plan_summarize(cfg, w, &sum, &err) != 0) {
            print_error(err.msg);
            return 0;
        }
        if (w == 0) {
            /* every worker validates alike; check create agrees before printing */
            struct feed_plan *probe;
            if (feed_plan_create(&probe, cfg, 0, &err) != 0) {
                print_error(err.msg);
                return 0;
            }
            feed_plan_destroy(probe);
        }
        printf("{\"worker\":%u,\"steps\":%llu,\"files\":%llu,\"elements\":%llu,\"pieces\":%llu,"
               "\"replica_elements\":[",
               w, (unsigned long long)sum.steps, (unsigned long long)sum.files, (unsigned long long)sum.elements,
               (unsigned long long)sum.pieces);
        for (uint32_t r = 0; r < cfg->replicas && r < 64; r++)
            printf("%s%llu", r ? "," : "", (unsigned long long)sum.replica_elements[r]);
        printf("]}\n");

        struct feed_plan *p;
        if (feed_plan_create(&p, cfg, w, &err) != 0) {
            fprintf(stderr, "plan_dump: worker %u: %s\n", w, err.msg);
            return 1;
        }
        struct feed_piece pc;
        int rc;
        while ((rc = feed_plan_next(p, &pc, &err)) == 0) {
            if (cfg->epochs == 0 && pc.epoch >= forever_epochs)
                break;
            printf("{\"worker\":%u,\"replica\":%u,\"epoch\":%llu,\"step\":%llu,\"seq\":%llu,\"elems\":[", pc.worker,
                   pc.replica, (unsigned long long)pc.epoch, (unsigned long long)pc.step,
                   (unsigned long long)pc.seq);
            for (size_t i = 0; i < pc.n; i++)
                printf("%s[%u,%llu]", i ? "," : "", pc.elems[i].file, (unsigned long long)pc.elems[i].record);
            printf("]}\n");
        }
        feed_plan_destroy(p);
        if (rc < 0) {
            fprintf(stderr, "plan_dump: worker %u: %s\n", w, err.msg);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: plan_dump CONFIG-JSON-or-PATH\n");
        return 2;
    }
    json_error_t jerr;
    const char *arg = argv[1];
    while (*arg == ' ' || *arg == '\t' || *arg == '\n')
        arg++;
    json_t *root = *arg == '{' ? json_loads(arg, 0, &jerr) : json_load_file(arg, 0, &jerr);
    if (root == NULL || !json_is_object(root)) {
        fprintf(stderr, "plan_dump: bad config: %s (line %d)\n", root ? "not an object" : jerr.text, jerr.line);
        return 2;
    }

    struct feed_plan_config cfg;
    memset(&cfg, 0, sizeof cfg);
    json_t *counts = json_object_get(root, "counts");
    size_t n = json_is_array(counts) ? json_array_size(counts) : 0;
    uint64_t *cv = sl_calloc(n ? n : 1, sizeof *cv);
    for (size_t i = 0; i < n; i++)
        cv[i] = (uint64_t)json_integer_value(json_array_get(counts, i));
    cfg.nfiles = n;
    cfg.counts = cv;

    long long v[12];
    int bad = get_int(root, "source_is_files", 1, &v[0]) || get_int(root, "G", 0, &v[1]) ||
              get_int(root, "drop_remainder", 0, &v[2]) || get_int(root, "shuffle_buffer", 0, &v[3]) ||
              get_int(root, "reshuffle", 1, &v[4]) || get_int(root, "epochs", 1, &v[5]) ||
              get_int(root, "parallel_reads", 1, &v[6]) || get_int(root, "per_replica", 0, &v[7]) ||
              get_int(root, "W", 0, &v[8]) || get_int(root, "R", 0, &v[9]) ||
              get_int(root, "forever_epochs", 2, &v[10]) || get_seed(root, &cfg.seed) ||
              feed_policy_parse(get_str(root, "policy", "auto"), &cfg.policy) ||
              feed_hint_parse(get_str(root, "hint", "files"), &cfg.hint) ||
              feed_pr_shard_parse(get_str(root, "pr_shard", "none"), &cfg.pr_shard);
    if (bad) {
        fprintf(stderr, "plan_dump: bad config value\n");
        sl_free(cv);
        json_decref(root);
        return 2;
    }
    cfg.source_is_files = (int)v[0];
    cfg.global_batch = (uint64_t)v[1];
    cfg.drop_remainder = (int)v[2];
    cfg.shuffle_buffer = (uint64_t)v[3];
    cfg.reshuffle_each_epoch = (int)v[4];
    cfg.epochs = (uint64_t)v[5];
    cfg.parallel_reads = (uint32_t)v[6];
    cfg.per_replica_input = (int)v[7];
    cfg.workers = (uint32_t)v[8];
    cfg.replicas = (uint32_t)v[9];

    int rc = dump(&cfg, (uint64_t)v[10]);
    sl_free(cv);
    json_decref(root);
    return rc;
}
