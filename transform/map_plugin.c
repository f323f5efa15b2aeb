/* map_plugin: the "plugin" op, a user's op loaded with dlopen
 * (sluice/map_plugin.h). The library is opened and its state created when
 * the plan is made; each runner asks for its thread state. Nothing the
 * plugin says about sizes is trusted: its output goes into an arena of the
 * described size, and any other return is an error.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "map_op.h"
#include "sl_alloc.h"
#include "sluice/map_plugin.h"

static const char *const plugin_keys[] = {"path", "args", NULL};

struct plugin {
    void *dl;
    const struct sluice_map_plugin *t;
    void *state;
    char path[4096]; /* as opened */
};

static int parse_plugin(struct map_op *op, json_t *o, struct map_why *w)
{
    char g[80];
    json_t *path = json_object_get(o, "path"), *args = json_object_get(o, "args");
    if (path == NULL)
        return map__why_arg(w, op, "path", " is required (the plugin's shared library)");
    if (!json_is_string(path) || json_string_length(path) == 0 || json_string_length(path) >= 4000 ||
        strlen(json_string_value(path)) != json_string_length(path))
        return map__why_arg(w, op, "path", " must be a file's path (got %s)", map__got(path, g, sizeof g));
    if (args != NULL && !json_is_object(args))
        return map__why_arg(w, op, "args", " must be an object (got %s)", map__got(args, g, sizeof g));
    if (args == NULL && json_object_set_new(o, "args", json_object()) != 0)
        return SL_ENOMEM;
    char *text = json_dumps(json_object_get(o, "args"), JSON_COMPACT | JSON_SORT_KEYS);
    if (text == NULL)
        return SL_ENOMEM;
    op->a.plugin.args_json = sl_strdup(text);
    free(text); /* jansson's */
    op->a.plugin.path = sl_strdup(json_string_value(path));
    return op->a.plugin.args_json && op->a.plugin.path ? 0 : SL_ENOMEM;
}

static void plugin_free(const struct map_op *op, void *shared)
{
    struct plugin *pg = shared;
    if (pg == NULL)
        return;
    if (pg->state != NULL && pg->t->destroy != NULL)
        pg->t->destroy(pg->state);
    if (pg->dl != NULL)
        dlclose(pg->dl);
    sl_free(pg);
}

static int plugin_init(const struct map_op *op, const char *base_dir, void **shared, struct map_why *w)
{
    struct plugin *pg = sl_calloc(1, sizeof *pg);
    if (pg == NULL)
        return SL_ENOMEM;
    const char *p = op->a.plugin.path;
    if (p[0] == '/' || base_dir == NULL || base_dir[0] == '\0')
        snprintf(pg->path, sizeof pg->path, "%s%s", p[0] == '/' || strchr(p, '/') != NULL ? "" : "./", p);
    else
        snprintf(pg->path, sizeof pg->path, "%s/%s", base_dir, p);
    *shared = pg;
    if ((pg->dl = dlopen(pg->path, RTLD_NOW | RTLD_LOCAL)) == NULL)
        return map__why_arg(w, op, "path", ": cannot load plugin %s: %s", pg->path, dlerror());
    sluice_map_plugin_fn get;
    void *sym = dlsym(pg->dl, SLUICE_MAP_PLUGIN_SYMBOL);
    if (sym == NULL)
        return map__why_arg(w, op, "path", ": plugin %s has no symbol %s (sluice/map_plugin.h)", pg->path,
                            SLUICE_MAP_PLUGIN_SYMBOL);
    memcpy(&get, &sym, sizeof get); /* ISO C has no object -> function pointer cast */
    pg->t = get();
    if (pg->t == NULL || pg->t->abi_version != SLUICE_MAP_PLUGIN_ABI)
        return map__why_arg(w, op, "path", ": plugin %s is built for map plugin ABI %u, this feeder takes %d", pg->path,
                            pg->t ? pg->t->abi_version : 0u, SLUICE_MAP_PLUGIN_ABI);
    if (pg->t->create == NULL || pg->t->describe == NULL || pg->t->map == NULL)
        return map__why_arg(w, op, "path", ": plugin %s lacks create, describe or map", pg->path);
    char msg[512] = "";
    if ((pg->state = pg->t->create(op->a.plugin.args_json, msg, sizeof msg)) == NULL) {
        msg[sizeof msg - 1] = '\0';
        return map__why_arg(w, op, "args", ": plugin %s refused its args: %s", pg->path, msg[0] ? msg : "(no message)");
    }
    return 0;
}

static int spec_plugin(const struct map_op *op, void *shared, const struct map_spec *in, struct map_spec *out,
                       struct map_why *w)
{
    struct plugin *pg = shared;
    if (in->dtype == MAP_DT_FLOAT16 || in->dtype == MAP_DT_BFLOAT16) /* not in the plugin ABI's dtypes */
        return map__why_arg(w, op, "feature",
                            ": plugin %s cannot take '%s', which is %s (the plugin ABI has int64, float32, bytes and "
                            "uint8): cast it to float32 first",
                            pg->path, in->name, map_dtype_name(in->dtype));
    struct sluice_map_spec pi = {.dtype = (int32_t)in->dtype, .varlen = in->varlen, .rank = in->rank}, po = {0};
    memcpy(pi.shape, in->shape, sizeof pi.shape);
    char msg[512] = "";
    if (pg->t->describe(pg->state, &pi, &po, msg, sizeof msg) != 0) {
        msg[sizeof msg - 1] = '\0';
        return map__why_arg(w, op, "feature", ": plugin %s refused feature '%s': %s", pg->path, in->name,
                            msg[0] ? msg : "(no message)");
    }
    int ok = po.rank >= 0 && po.rank <= MAP_MAX_RANK && !po.varlen &&
             (po.dtype == MAP_DT_INT64 || po.dtype == MAP_DT_FLOAT32 || po.dtype == MAP_DT_UINT8);
    uint64_t bytes = 1;
    for (int i = 0; ok && i < po.rank; i++) {
        ok = po.shape[i] >= 0 && po.shape[i] <= ((int64_t)1 << 31) &&
             !__builtin_mul_overflow(bytes, (uint64_t)po.shape[i], &bytes);
    }
    if (!ok || bytes > ((uint64_t)1 << 31))
        return map__why_arg(w, op, "feature",
                            ": plugin %s described an output the map cannot carry (a fixed int64, float32 or uint8 "
                            "shape of rank <= %d and under 2 GiB)",
                            pg->path, MAP_MAX_RANK);
    memset(out->shape, 0, sizeof out->shape);
    out->dtype = (enum map_dtype)po.dtype;
    out->varlen = 0;
    out->rank = po.rank;
    memcpy(out->shape, po.shape, sizeof po.shape);
    return 0;
}

static int thread_init(const struct map_op *op, void *shared, void **thread, struct sl_error *err)
{
    struct plugin *pg = shared;
    int failed = 0;
    char msg[512] = "";
    *thread = pg->t->thread_init ? pg->t->thread_init(pg->state, &failed, msg, sizeof msg) : NULL;
    msg[sizeof msg - 1] = '\0';
    if (failed)
        return sl_error_set(err, SL_EINVAL, "plugin %s: thread state: %s", pg->path, msg);
    return 0;
}

static void thread_free(const struct map_op *op, void *shared, void *thread)
{
    struct plugin *pg = shared;
    if (pg->t->thread_free != NULL)
        pg->t->thread_free(pg->state, thread);
}

static int run_plugin(struct map_call *c, const struct map_tensor *in, struct map_tensor *out, struct sl_error *err)
{
    struct plugin *pg = c->shared;
    size_t want = (size_t)map_spec_count(c->out_spec) * map_dtype_size(c->out_spec->dtype);
    uint8_t *dst = map__arena_reserve(c->arena, want + 1);
    if (dst == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    struct sluice_map_tensor t = {.dtype = (int32_t)in->dtype, .rank = in->rank, .data = in->data, .bytes = in->bytes};
    memcpy(t.shape, in->shape, sizeof t.shape);
    char msg[512] = "";
    int64_t n = pg->t->map(pg->state, c->thread, &t, c->element, c->seed, dst, want, msg, sizeof msg);
    msg[sizeof msg - 1] = '\0';
    if (n < 0)
        return sl_error_set(err, SL_EINVAL, "plugin %s: %s", pg->path, msg[0] ? msg : "(no message)");
    if ((uint64_t)n != want)
        return sl_error_set(err, SL_EINVAL, "plugin %s returned %lld bytes, its output is %zu bytes (%s)", pg->path,
                            (long long)n, want, (uint64_t)n > want ? "more than the capacity it was given" : "short");
    *out = (struct map_tensor){.dtype = c->out_spec->dtype, .rank = c->out_spec->rank, .data = dst, .bytes = want};
    memcpy(out->shape, c->out_spec->shape, sizeof out->shape);
    return 0;
}

const struct map_op_def map__op_plugin = {"plugin",   plugin_keys, 1,           parse_plugin, spec_plugin,
                                          run_plugin, thread_init, thread_free, plugin_init,  plugin_free};
