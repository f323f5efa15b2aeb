/* sluice/map_plugin.h: the ABI of a map-stage plugin, a user's own op in
 * a feeder's map (docs/map.md, "Plugins").
 *
 * A plugin is a shared library that exports one function,
 *
 *     const struct sluice_map_plugin *sluice_map_plugin(void);
 *
 * returning a table whose abi_version is SLUICE_MAP_PLUGIN_ABI. A job
 * names it in its map:
 *
 *     {"op": "plugin", "path": "libscale.so", "feature": "x", "args": {"scale": 2}}
 *
 * (a relative path is relative to the job file's directory). The feeder
 * dlopens it when the job is loaded, calls create with the args (JSON
 * text), describe with the feature's spec, then on each executor thread
 * thread_init, map per element, thread_free; destroy at the end.
 *
 * Contract:
 * - The output of map has the shape describe gave, which must be fixed
 *   (every dimension >= 0): the feeder copies exactly that many bytes. map
 *   returns the bytes it wrote (<= cap), or -1 with a message in err. A
 *   return other than the described size (larger than cap included) is an
 *   error the feeder reports with the plugin's path, the element id and
 *   the record's file and offset; it never reads past what it gave.
 * - map may be called from several threads at once, each with its own
 *   thread state; create, describe and destroy from one thread.
 * - Randomness: draw only from `seed` (the element's stream for this op:
 *   the same for the same element, epoch and op on any feeder and thread),
 *   so that the stream is the same whatever the number of feeders.
 * - A crash in a plugin is the plugin's: it runs in the feeder's process.
 *
 * Plain C, no sluice header needed; every struct may grow at its end in a
 * later ABI version, which then changes SLUICE_MAP_PLUGIN_ABI.
 */
#ifndef SLUICE_MAP_PLUGIN_H
#define SLUICE_MAP_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SLUICE_MAP_PLUGIN_ABI 1
#define SLUICE_MAP_PLUGIN_SYMBOL "sluice_map_plugin"
#define SLUICE_MAP_MAX_RANK 8

/* The wire's dtypes. */
enum sluice_map_dtype { SLUICE_MAP_INT64 = 0, SLUICE_MAP_FLOAT32 = 1, SLUICE_MAP_BYTES = 2, SLUICE_MAP_UINT8 = 3 };

/* A feature's per-element spec. A dimension of -1 depends on the data; a
 * variable-length list has varlen 1 and rank 1. */
struct sluice_map_spec {
    int32_t dtype; /* enum sluice_map_dtype */
    int32_t varlen;
    int32_t rank;
    int64_t shape[SLUICE_MAP_MAX_RANK];
};

/* One element's value of the feature: `bytes` bytes at `data` (borrowed,
 * valid during the call, not aligned). shape holds this element's sizes
 * (a varlen list: its count in shape[0]; a bytes scalar: rank 0). */
struct sluice_map_tensor {
    int32_t dtype;
    int32_t rank;
    int64_t shape[SLUICE_MAP_MAX_RANK];
    const void *data;
    size_t bytes;
};

struct sluice_map_plugin {
    uint32_t abi_version; /* SLUICE_MAP_PLUGIN_ABI */
    const char *name;     /* for messages */
    /* The op's state from its "args" (JSON text, "{}" when none); NULL with
     * a message in err (cap bytes) to refuse the job. */
    void *(*create)(const char *args_json, char *err, size_t cap);
    /* The output spec from the input spec; 0, or -1 with a message. */
    int (*describe)(void *state, const struct sluice_map_spec *in, struct sluice_map_spec *out, char *err, size_t cap);
    /* Per-thread state (may be NULL: none needed; then thread_free is not
     * called); err set and NULL returned with *failed = 1 to refuse. */
    void *(*thread_init)(void *state, int *failed, char *err, size_t cap);
    void (*thread_free)(void *state, void *thread);
    /* Map one element into out[0..cap): the bytes written, or -1 with a
     * message. element: the element id; seed: this op's stream for it. */
    int64_t (*map)(void *state, void *thread, const struct sluice_map_tensor *in, uint64_t element, uint64_t seed,
                   void *out, size_t cap, char *err, size_t err_cap);
    void (*destroy)(void *state);
};

/* What a plugin exports (defined by the plugin). */
const struct sluice_map_plugin *sluice_map_plugin(void);
typedef const struct sluice_map_plugin *(*sluice_map_plugin_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
