/* scale: an example map-stage plugin (sluice/map_plugin.h, docs/map.md).
 *
 * It multiplies a feature's values by "scale" and adds "offset" (both
 * numbers in the op's args, defaults 1 and 0), writing float32 of the same
 * shape: int64, float32 and uint8 features of a fixed shape.
 *
 *     {"op": "plugin", "path": "libsluice_scale.so", "feature": "dense",
 *      "args": {"scale": 2, "offset": 0.5}}
 *
 * Build it against an installed sluice (the header only):
 *     cc -shared -fPIC -O2 -I<prefix>/include -o libsluice_scale.so scale.c
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sluice/map_plugin.h>

struct scale {
    double scale, offset;
};

/* The number after "key": in the args' JSON text (the feeder passes compact
 * JSON: {"offset":0.5,"scale":2}); 0 when found. */
static int number(const char *json, const char *key, double *out, char *err, size_t cap)
{
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", key);
    const char *p = strstr(json, quoted);
    if (p == NULL)
        return 1;
    p += strlen(quoted);
    while (*p == ' ' || *p == ':')
        p++;
    char *end;
    *out = strtod(p, &end);
    if (end == p || *out != *out) {
        snprintf(err, cap, "args.%s must be a number", key);
        return -1;
    }
    return 0;
}

static void *create(const char *args_json, char *err, size_t cap)
{
    struct scale *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(err, cap, "out of memory");
        return NULL;
    }
    s->scale = 1;
    if (number(args_json, "scale", &s->scale, err, cap) < 0 || number(args_json, "offset", &s->offset, err, cap) < 0) {
        free(s);
        return NULL;
    }
    return s;
}

static int describe(void *state, const struct sluice_map_spec *in, struct sluice_map_spec *out, char *err, size_t cap)
{
    if (in->varlen || in->dtype == SLUICE_MAP_BYTES) {
        snprintf(err, cap, "scale takes a fixed-shape int64, float32 or uint8 feature");
        return -1;
    }
    for (int i = 0; i < in->rank; i++)
        if (in->shape[i] < 0) {
            snprintf(err, cap, "scale takes a fixed shape");
            return -1;
        }
    *out = *in;
    out->dtype = SLUICE_MAP_FLOAT32;
    return 0;
}

static int64_t map(void *state, void *thread, const struct sluice_map_tensor *in, uint64_t element, uint64_t seed,
                   void *out, size_t cap, char *err, size_t err_cap)
{
    const struct scale *s = state;
    size_t n = 1;
    for (int i = 0; i < in->rank; i++)
        n *= (size_t)in->shape[i];
    if (n * sizeof(float) > cap) {
        snprintf(err, err_cap, "%zu values do not fit %zu bytes", n, cap);
        return -1;
    }
    const unsigned char *src = in->data;
    for (size_t i = 0; i < n; i++) {
        double x;
        if (in->dtype == SLUICE_MAP_INT64) {
            int64_t v;
            memcpy(&v, src + 8 * i, 8);
            x = (double)v;
        } else if (in->dtype == SLUICE_MAP_FLOAT32) {
            float v;
            memcpy(&v, src + 4 * i, 4);
            x = v;
        } else {
            x = src[i];
        }
        float y = (float)(x * s->scale + s->offset);
        memcpy((unsigned char *)out + 4 * i, &y, 4);
    }
    return (int64_t)(n * sizeof(float));
}

static const struct sluice_map_plugin table = {
    .abi_version = SLUICE_MAP_PLUGIN_ABI,
    .name = "scale",
    .create = create,
    .describe = describe,
    .map = map,
    .destroy = free,
};

const struct sluice_map_plugin *sluice_map_plugin(void)
{
    return &table;
}
