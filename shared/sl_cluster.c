/* sl_cluster: TF_CONFIG parsing with jansson; every shape error names the
 * key it is about. */
#include "sl_cluster.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "sl_alloc.h"
#include "sl_endpoint.h"

static int list_len(json_t *cluster, const char *key, size_t *n, struct sl_error *err)
{
    json_t *v = json_object_get(cluster, key);
    *n = 0;
    if (v == NULL)
        return 0;
    if (!json_is_array(v))
        return sl_error_set(err, SL_EINVAL, "cluster spec: 'cluster.%s' must be a list of addresses", key);
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!json_is_string(json_array_get(v, i)))
            return sl_error_set(err, SL_EINVAL, "cluster spec: 'cluster.%s[%zu]' must be a string", key, i);
    *n = json_array_size(v);
    return 0;
}

/* Copy the n addresses of cluster.key into (*out)[at .. at+n), allocating
 * *out (for `at` + n, or the whole worker list) on first use. A bare
 * host:port is a tcp endpoint, as TF_CONFIG writes them. */
static int copy_addrs(json_t *cluster, const char *key, size_t n, size_t at, char (**out)[SL_CLUSTER_MAX_ADDR],
                      struct sl_error *err)
{
    if (n == 0)
        return 0;
    if (*out == NULL) {
        size_t total = at + n;
        if (strcmp(key, "chief") == 0) /* the worker list follows */
            total += json_array_size(json_object_get(cluster, "worker"));
        if ((*out = sl_calloc(total, sizeof **out)) == NULL)
            return sl_error_set(err, SL_ENOMEM, "out of memory");
    }
    json_t *list = json_object_get(cluster, key);
    for (size_t i = 0; i < n; i++) {
        const char *a = json_string_value(json_array_get(list, i));
        int bare = strstr(a, "://") == NULL;
        if (strlen(a) + (bare ? 6 : 0) >= SL_CLUSTER_MAX_ADDR)
            return sl_error_set(err, SL_EINVAL, "cluster spec: 'cluster.%s[%zu]' is longer than %d bytes", key, i,
                                SL_CLUSTER_MAX_ADDR - 1 - (bare ? 6 : 0));
        if (bare)
            snprintf((*out)[at + i], SL_CLUSTER_MAX_ADDR, "tcp://%s", a);
        else
            snprintf((*out)[at + i], SL_CLUSTER_MAX_ADDR, "%s", a);
        if (sl_endpoint_check((*out)[at + i], err) != 0)
            return sl_error_prefix(err, "cluster spec: 'cluster.%s[%zu]': ", key, i);
    }
    return 0;
}

/* 'curve.NAME': absent, or a path (1 .. SL_CLUSTER_MAX_PATH - 1 bytes, no
 * NUL) copied into *out. */
static int curve_path(json_t *curve, const char *name, char **out, struct sl_error *err)
{
    json_t *v = json_object_get(curve, name);
    if (v == NULL)
        return 0;
    if (!json_is_string(v) || json_string_length(v) == 0)
        return sl_error_set(err, SL_EINVAL, "cluster spec: 'curve.%s' must be a key file's path (a non-empty string)",
                            name);
    if (json_string_length(v) >= SL_CLUSTER_MAX_PATH)
        return sl_error_set(err, SL_EINVAL, "cluster spec: 'curve.%s' is longer than %d bytes", name,
                            SL_CLUSTER_MAX_PATH - 1);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return sl_error_set(err, SL_EINVAL, "cluster spec: 'curve.%s' holds a NUL byte", name);
    if ((*out = sl_strdup(json_string_value(v))) == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    return 0;
}

/* "curve": {"key": PATH, "server_keys": PATH, "allow": PATH}, each optional. */
static int read_curve(json_t *root, struct sl_cluster *c, struct sl_error *err)
{
    json_t *curve = json_object_get(root, "curve");
    if (curve == NULL)
        return 0;
    if (!json_is_object(curve))
        return sl_error_set(err, SL_EINVAL,
                            "cluster spec: 'curve' must be an object with 'key', 'server_keys' "
                            "and 'allow' (key files' paths)");
    const char *key;
    json_t *v;
    json_object_foreach(curve, key, v)
    {
        if (strcmp(key, "key") != 0 && strcmp(key, "server_keys") != 0 && strcmp(key, "allow") != 0)
            return sl_error_set(err, SL_EINVAL,
                                "cluster spec: unknown key 'curve.%.64s%s' (expected 'key', "
                                "'server_keys' or 'allow')",
                                key, strlen(key) > 64 ? "..." : "");
    }
    int rc = curve_path(curve, "key", &c->curve_key, err);
    if (rc == 0)
        rc = curve_path(curve, "server_keys", &c->curve_server_keys, err);
    if (rc == 0)
        rc = curve_path(curve, "allow", &c->curve_allow, err);
    return rc;
}

int sl_cluster_parse(struct sl_cluster *c, const char *text, struct sl_error *err)
{
    memset(c, 0, sizeof *c);
    json_error_t je;
    json_t *root = text[0] == '{' ? json_loads(text, JSON_REJECT_DUPLICATES, &je)
                                  : json_load_file(text, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL)
        return sl_error_set(err, SL_EINVAL, "cluster spec %s:%d:%d: %s", text[0] == '{' ? "(inline)" : text, je.line,
                            je.column, je.text);
    int rc = 0;
    json_t *cluster = json_object_get(root, "cluster");
    if (!json_is_object(cluster)) {
        rc = sl_error_set(err, SL_EINVAL, "cluster spec: 'cluster' must be an object");
        goto out;
    }
    size_t nchief, nworker;
    if ((rc = list_len(cluster, "chief", &nchief, err)) != 0 ||
        (rc = list_len(cluster, "worker", &nworker, err)) != 0 ||
        (rc = list_len(cluster, "feeder", &c->nfeeders, err)) != 0 ||
        (rc = list_len(cluster, "ps", &c->nps, err)) != 0 ||
        (rc = list_len(cluster, "evaluator", &c->nevaluators, err)) != 0)
        goto out;
    if (c->nevaluators > 1) {
        rc = sl_error_set(err, SL_EINVAL, "cluster spec: 'cluster.evaluator' holds %zu tasks, at most 1",
                          c->nevaluators);
        goto out;
    }
    if (nchief > 1) {
        rc = sl_error_set(err, SL_EINVAL, "cluster spec: 'cluster.chief' holds %zu tasks, at most 1", nchief);
        goto out;
    }
    c->workers = (uint32_t)(nchief + nworker);
    if ((rc = copy_addrs(cluster, "feeder", c->nfeeders, 0, &c->feeders, err)) != 0 ||
        (rc = copy_addrs(cluster, "ps", c->nps, 0, &c->ps_addrs, err)) != 0)
        goto out;
    if (c->workers > 0 && ((rc = copy_addrs(cluster, "chief", nchief, 0, &c->worker_addrs, err)) != 0 ||
                           (rc = copy_addrs(cluster, "worker", nworker, nchief, &c->worker_addrs, err)) != 0))
        goto out;
    json_t *task = json_object_get(root, "task");
    if (task != NULL) {
        json_t *type = json_object_get(task, "type"), *index = json_object_get(task, "index");
        if (!json_is_string(type) || !json_is_integer(index) || json_integer_value(index) < 0) {
            rc = sl_error_set(err, SL_EINVAL, "cluster spec: 'task' needs a string 'type' and an integer 'index' >= 0");
            goto out;
        }
        snprintf(c->task_type, sizeof c->task_type, "%s", json_string_value(type));
        json_t *list = json_object_get(cluster, c->task_type);
        size_t n = json_is_array(list) ? json_array_size(list) : 0;
        if (strcmp(c->task_type, "evaluator") == 0) /* not in the training cluster: it may be unlisted */
            n = 1;
        if ((size_t)json_integer_value(index) >= n) {
            rc = sl_error_set(err, SL_EINVAL, "cluster spec: 'task.index' %lld is out of range for the %zu '%s' tasks",
                              (long long)json_integer_value(index), n, c->task_type);
            goto out;
        }
        c->task_index = (uint32_t)json_integer_value(index);
        if (strcmp(c->task_type, "worker") == 0)
            c->task_index += (uint32_t)nchief;
    }
    rc = read_curve(root, c, err);
out:
    json_decref(root);
    if (rc != 0)
        sl_cluster_free(c);
    return rc;
}

void sl_cluster_free(struct sl_cluster *c)
{
    sl_free(c->feeders);
    c->feeders = NULL;
    sl_free(c->ps_addrs);
    c->ps_addrs = NULL;
    c->nps = 0;
    sl_free(c->worker_addrs);
    c->worker_addrs = NULL;
    c->nfeeders = 0;
    sl_free(c->curve_key);
    c->curve_key = NULL;
    sl_free(c->curve_server_keys);
    c->curve_server_keys = NULL;
    sl_free(c->curve_allow);
    c->curve_allow = NULL;
}

int sl_cluster_worker(const struct sl_cluster *c, uint32_t *w, uint32_t *W, struct sl_error *err)
{
    if (strcmp(c->task_type, "worker") != 0 && strcmp(c->task_type, "chief") != 0)
        return sl_error_set(err, SL_EINVAL, "cluster spec: this task is '%s', not a chief or worker",
                            c->task_type[0] ? c->task_type : "(none)");
    *w = c->task_index;
    *W = c->workers;
    return 0;
}

int sl_cluster_feeder(const struct sl_cluster *c, uint32_t *j, uint32_t *F, char *bind, size_t n, struct sl_error *err)
{
    if (strcmp(c->task_type, "feeder") != 0)
        return sl_error_set(err, SL_EINVAL, "cluster spec: this task is '%s', not a feeder",
                            c->task_type[0] ? c->task_type : "(none)");
    *j = c->task_index;
    *F = (uint32_t)c->nfeeders;
    sl_cluster_bind_addr(c->feeders[*j], bind, n);
    return 0;
}

void sl_cluster_bind_addr(const char *a, char *bind, size_t n)
{
    const char *colon = strrchr(a, ':');
    if (strncmp(a, "tcp://", 6) == 0 && colon != NULL && colon > a + 6)
        snprintf(bind, n, "tcp://*%s", colon);
    else
        snprintf(bind, n, "%s", a);
}

/* ---- endpoint lists ---- */

/* One block: n + 1 pointers, then the strings. */
static int list_alloc(struct sl_cluster_list *l, size_t n, size_t bytes, struct sl_error *err)
{
    memset(l, 0, sizeof *l);
    if (n == 0)
        return 0;
    l->items = sl_malloc((n + 1) * sizeof *l->items + bytes);
    if (l->items == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    l->items[0] = (char *)(l->items + n + 1);
    return 0;
}

static int has_scheme(const char *s, size_t len)
{
    for (size_t i = 0; i + 3 <= len; i++)
        if (memcmp(s + i, "://", 3) == 0)
            return 1;
    return 0;
}

/* Append s (len bytes, with a "tcp://" prefix when bare) after the last item. */
static void list_push(struct sl_cluster_list *l, const char *s, size_t len, int tcp)
{
    char *at = l->n == 0 ? l->items[0] : l->items[l->n - 1] + strlen(l->items[l->n - 1]) + 1;
    l->items[l->n++] = at;
    if (tcp)
        memcpy(at, "tcp://", 6);
    memcpy(at + (tcp ? 6 : 0), s, len);
    at[len + (tcp ? 6 : 0)] = '\0';
    l->items[l->n] = NULL;
}

int sl_cluster_list_split(struct sl_cluster_list *l, const char *text, size_t max, unsigned flags, const char *what,
                          struct sl_error *err)
{
    size_t n = 0, bytes = 0;
    memset(l, 0, sizeof *l);
    for (const char *p = text; *p != '\0';) {
        size_t len = strcspn(p, ",");
        if (len > 0) {
            int tcp = (flags & SL_CLUSTER_BARE_TCP) && !has_scheme(p, len);
            size_t need = len + (tcp ? 6 : 0);
            if (need >= SL_CLUSTER_MAX_ADDR)
                return sl_error_set(err, SL_EINVAL, "%s: '%.40s...' is longer than %d bytes", what, p,
                                    SL_CLUSTER_MAX_ADDR - 1 - (tcp ? 6 : 0)); /* 40 bytes: len >= 249 */
            if (++n > max)
                return sl_error_set(err, SL_EINVAL, "%s: at most %zu endpoints", what, max);
            bytes += need + 1;
        }
        p += len + (p[len] == ',');
    }
    if (n == 0)
        return sl_error_set(err, SL_EINVAL, "%s: no endpoint", what);
    int rc = list_alloc(l, n, bytes, err);
    if (rc != 0)
        return rc;
    for (const char *p = text; *p != '\0';) {
        size_t len = strcspn(p, ",");
        if (len > 0)
            list_push(l, p, len, (flags & SL_CLUSTER_BARE_TCP) && !has_scheme(p, len));
        p += len + (p[len] == ',');
    }
    for (size_t i = 0; i < l->n; i++)
        if (sl_endpoint_check(l->items[i], err) != 0) {
            sl_cluster_list_free(l);
            return sl_error_prefix(err, "%s: ", what);
        }
    return 0;
}

static int list_copy(struct sl_cluster_list *l, char (*addrs)[SL_CLUSTER_MAX_ADDR], size_t n, struct sl_error *err)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += strlen(addrs[i]) + 1;
    int rc = list_alloc(l, n, bytes, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        list_push(l, addrs[i], strlen(addrs[i]), 0);
    return rc;
}

int sl_cluster_feeder_list(const struct sl_cluster *c, struct sl_cluster_list *l, struct sl_error *err)
{
    return list_copy(l, c->feeders, c->nfeeders, err);
}

int sl_cluster_worker_list(const struct sl_cluster *c, struct sl_cluster_list *l, struct sl_error *err)
{
    return list_copy(l, c->worker_addrs, c->workers, err);
}

int sl_cluster_ps_list(const struct sl_cluster *c, struct sl_cluster_list *l, struct sl_error *err)
{
    return list_copy(l, c->ps_addrs, c->nps, err);
}

int sl_cluster_list_join(const char *const *items, size_t n, char *buf, size_t cap, struct sl_error *err)
{
    size_t used = 0;
    if (cap == 0)
        return sl_error_set(err, SL_EINVAL, "endpoint list longer than 0 bytes");
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(items[i]);
        if (used + (i > 0) + len + 1 > cap) {
            buf[0] = '\0';
            return sl_error_set(err, SL_EINVAL, "endpoint list longer than %zu bytes", cap - 1);
        }
        if (i > 0)
            buf[used++] = ',';
        memcpy(buf + used, items[i], len);
        used += len;
    }
    buf[used] = '\0';
    return 0;
}

void sl_cluster_list_free(struct sl_cluster_list *l)
{
    sl_free(l->items);
    memset(l, 0, sizeof *l);
}
