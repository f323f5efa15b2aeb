/* A map plugin that misbehaves on request, for the map stage's tests
 * (test_map.c, test_map_feeder.py): args {"mode": M} with M
 *   "copy"      copy the feature (uint8 / int64 / float32, fixed shape)
 *   "oversize"  return more bytes than the capacity it was given
 *   "short"     return fewer bytes than its described output
 *   "error"     fail every element with a message
 *   "refuse"    refuse its args at create
 *   "seed"      write the element's seed as one uint64 (uint8 [8])
 * Built three times: as is; with -DBAD_ABI (another ABI version); with
 * -DNO_SYMBOL (the entry point under another name). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/map_plugin.h"

enum { COPY, OVERSIZE, SHORT, ERROR, SEED };

static void *create(const char *args, char *err, size_t cap)
{
    int *mode = malloc(sizeof *mode);
    if (mode == NULL)
        return NULL;
    *mode = strstr(args, "\"oversize\"") ? OVERSIZE
            : strstr(args, "\"short\"")  ? SHORT
            : strstr(args, "\"error\"")  ? ERROR
            : strstr(args, "\"seed\"")   ? SEED
                                         : COPY;
    if (strstr(args, "\"refuse\"")) {
        snprintf(err, cap, "mode refuse: no");
        free(mode);
        return NULL;
    }
    return mode;
}

static int describe(void *state, const struct sluice_map_spec *in, struct sluice_map_spec *out, char *err, size_t cap)
{
    *out = *in;
    if (*(int *)state == SEED) {
        out->dtype = SLUICE_MAP_UINT8;
        out->rank = 1;
        out->shape[0] = 8;
    }
    return 0;
}

static int64_t map(void *state, void *thread, const struct sluice_map_tensor *in, uint64_t element, uint64_t seed,
                   void *out, size_t cap, char *err, size_t err_cap)
{
    switch (*(int *)state) {
    case OVERSIZE: return (int64_t)cap + 4096;
    case SHORT: return cap > 0 ? (int64_t)cap - 1 : 0;
    case ERROR: snprintf(err, err_cap, "mode error at element %llu", (unsigned long long)element); return -1;
    case SEED: memcpy(out, &seed, 8); return 8;
    default: memcpy(out, in->data, in->bytes < cap ? in->bytes : cap); return (int64_t)in->bytes;
    }
}

static void *thread_init(void *state, int *failed, char *err, size_t cap)
{
    return malloc(16); /* something for thread_free to free: leaks show */
}

static void thread_free(void *state, void *thread)
{
    free(thread);
}

static const struct sluice_map_plugin table = {
#ifdef BAD_ABI
    .abi_version = SLUICE_MAP_PLUGIN_ABI + 98,
#else
    .abi_version = SLUICE_MAP_PLUGIN_ABI,
#endif
    .name = "test",
    .create = create,
    .describe = describe,
    .thread_init = thread_init,
    .thread_free = thread_free,
    .map = map,
    .destroy = free,
};

#ifdef NO_SYMBOL
const struct sluice_map_plugin *not_the_entry_point(void);
const struct sluice_map_plugin *not_the_entry_point(void)
#else
const struct sluice_map_plugin *sluice_map_plugin(void)
#endif
{
    return &table;
}
