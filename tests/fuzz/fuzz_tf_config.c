/* libFuzzer target for TF_CONFIG and cluster specs: the input (up to its
 * first NUL) as the variable TF_CONFIG (shared/sl_env.c,
 * sl_env_tf_config_spec) and as a --cluster spec (shared/sl_cluster.c,
 * sl_cluster_parse; only text starting with '{': other text is a file's
 * path). Both answer 0 or SL_EINVAL with a message. The spec made from
 * TF_CONFIG is compact JSON that, given again as TF_CONFIG, comes back
 * unchanged, and parses as a cluster spec exactly as the input does (same
 * answer, same fields). A cluster spec accepted has its task inside its
 * list, NUL-terminated addresses, and its lists joined with commas split
 * back into the same endpoints. */
#include "fuzz_common.h"
#include "sl_alloc.h"
#include "sl_cluster.h"
#include "sl_env.h"

static const int einval[] = {SL_EINVAL, 0};

static void check_list(const struct sl_cluster_list *l)
{
    size_t cap = l->n * SL_CLUSTER_MAX_ADDR + 1;
    char *joined = malloc(cap);
    struct sl_error err = {0};
    CHECK(joined != NULL);
    CHECK(sl_cluster_list_join((const char *const *)l->items, l->n, joined, cap, &err) == 0);
    struct sl_cluster_list back = {0};
    int rc = sl_cluster_list_split(&back, joined, l->n ? l->n : 1, 0, "--list", &err);
    /* an empty endpoint is skipped by split: only lists without one compare */
    int empty = 0;
    for (size_t i = 0; i < l->n; i++)
        empty |= l->items[i][0] == '\0' || strchr(l->items[i], ',') != NULL;
    if (!empty && l->n > 0) {
        CHECK(rc == 0 && back.n == l->n);
        for (size_t i = 0; i < l->n; i++)
            CHECK(strcmp(back.items[i], l->items[i]) == 0);
    }
    sl_cluster_list_free(&back);
    free(joined);
}

static int parse_cluster(struct sl_cluster *c, const char *text, struct sl_error *err)
{
    int rc = sl_cluster_parse(c, text, err);
    fuzz_note("sl_cluster_parse", rc, err->msg);
    if (rc != 0) {
        fuzz_check_error(rc, err, einval);
        return rc;
    }
    for (size_t i = 0; i < c->nfeeders; i++)
        CHECK(memchr(c->feeders[i], '\0', SL_CLUSTER_MAX_ADDR) != NULL);
    for (uint32_t i = 0; i < c->workers; i++)
        CHECK(memchr(c->worker_addrs[i], '\0', SL_CLUSTER_MAX_ADDR) != NULL);
    for (size_t i = 0; i < c->nps; i++)
        CHECK(memchr(c->ps_addrs[i], '\0', SL_CLUSTER_MAX_ADDR) != NULL);
    CHECK(c->nevaluators <= 1);
    uint32_t w, W, j, F;
    char bind[SL_CLUSTER_MAX_ADDR];
    if (sl_cluster_worker(c, &w, &W, err) == 0)
        CHECK(W == c->workers && w < W);
    if (sl_cluster_feeder(c, &j, &F, bind, sizeof bind, err) == 0)
        CHECK(F == c->nfeeders && j < F);
    if (strcmp(c->task_type, "ps") == 0)
        CHECK(c->task_index < c->nps);
    struct sl_cluster_list l = {0};
    CHECK(sl_cluster_feeder_list(c, &l, err) == 0 && l.n == c->nfeeders);
    check_list(&l);
    sl_cluster_list_free(&l);
    CHECK(sl_cluster_worker_list(c, &l, err) == 0 && l.n == c->workers);
    check_list(&l);
    sl_cluster_list_free(&l);
    CHECK(sl_cluster_ps_list(c, &l, err) == 0 && l.n == c->nps);
    check_list(&l);
    sl_cluster_list_free(&l);
    return 0;
}

static int same_str(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static void check_same(const struct sl_cluster *a, const struct sl_cluster *b)
{
    CHECK(a->nfeeders == b->nfeeders && a->workers == b->workers && a->nps == b->nps);
    CHECK(a->nevaluators == b->nevaluators && a->task_index == b->task_index);
    CHECK(strcmp(a->task_type, b->task_type) == 0);
    for (size_t i = 0; i < a->nfeeders; i++)
        CHECK(strcmp(a->feeders[i], b->feeders[i]) == 0);
    for (uint32_t i = 0; i < a->workers; i++)
        CHECK(strcmp(a->worker_addrs[i], b->worker_addrs[i]) == 0);
    for (size_t i = 0; i < a->nps; i++)
        CHECK(strcmp(a->ps_addrs[i], b->ps_addrs[i]) == 0);
    CHECK(same_str(a->curve_key, b->curve_key) && same_str(a->curve_server_keys, b->curve_server_keys) &&
          same_str(a->curve_allow, b->curve_allow));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    char *var = malloc(size + 11);
    CHECK(var != NULL);
    memcpy(var, "TF_CONFIG=", 10);
    memcpy(var + 10, data, size);
    var[size + 10] = '\0';
    const char *text = var + 10;
    const char *envp[] = {var, NULL};
    char *spec = NULL;
    struct sl_error err = {0};
    int rc = sl_env_tf_config_spec(&spec, envp, &err);
    fuzz_note("sl_env_tf_config_spec", rc, err.msg);
    struct sl_cluster c, d;
    int crc = text[0] == '{' ? parse_cluster(&c, text, &err) : 1;
    if (rc != 0) {
        fuzz_check_error(rc, &err, einval);
        CHECK(spec == NULL);
    } else {
        CHECK(spec[0] == '{' && strchr(spec, '\n') == NULL);
        /* given again: the same spec */
        size_t len = strlen(spec);
        char *var2 = malloc(len + 11), *spec2 = NULL;
        CHECK(var2 != NULL);
        memcpy(var2, "TF_CONFIG=", 10);
        memcpy(var2 + 10, spec, len + 1);
        const char *envp2[] = {var2, NULL};
        CHECK(sl_env_tf_config_spec(&spec2, envp2, &err) == 0 && strcmp(spec2, spec) == 0);
        sl_free(spec2);
        free(var2);
        /* the input and its spec are the same cluster spec */
        if (crc != 1) {
            int drc = parse_cluster(&d, spec, &err);
            CHECK(drc == crc);
            if (drc == 0) {
                check_same(&c, &d);
                sl_cluster_free(&d);
            }
        }
        sl_free(spec);
    }
    if (crc == 0)
        sl_cluster_free(&c);
    free(var);
    return 0;
}
