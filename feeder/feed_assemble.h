/* feed_assemble: turn a piece (a list of element references from the plan)
 * into its tensors, laid out one after another in a caller-provided buffer
 * (a pool buffer the server later sends zero-copy, as one body frame).
 *
 * Tensors per declared feature, in declaration order:
 *   fixed-length int64 / float32 / uint8:  NAME, dims [rows, shape...]
 *   fixed-length bytes:   NAME (the values' bytes concatenated, dims
 *                         [rows, shape...]) and NAME.offsets (int64, nvalues+1)
 *   variable-length:      NAME (values, dims [nvalues]) and NAME.row_splits
 *                         (int64, rows+1); bytes add NAME.offsets as above
 * The schema (names, dtypes, per-element shapes) is fixed by the features,
 * so trainers learn it once in the handshake.
 *
 * Thread-safe: no; one assembler per executor thread (it owns a reader of
 * the shared source and a decode batch).
 */
#ifndef FEED_ASSEMBLE_H
#define FEED_ASSEMBLE_H

#include <stddef.h>
#include <stdint.h>

#include "feed_plan.h"
#include "feed_source.h"
#include "fmt_features.h"
#include "fmt_format.h"
#include "sl_error.h"
#include "sl_metrics.h"

#define FEED_MAX_TENSORS 64
#define FEED_MAX_RANK (FMT_MAX_RANK + 1)

/* The wire's dtype numbers (sl_wire.h); float16 and bfloat16 only leave a
 * job's map (normalize, cast). */
enum feed_dtype {
    FEED_DT_INT64 = 0,
    FEED_DT_FLOAT32 = 1,
    FEED_DT_BYTES = 2,
    FEED_DT_UINT8 = 3,
    FEED_DT_FLOAT16 = 4,
    FEED_DT_BFLOAT16 = 5
};

/* A tensor of the schema: per-element shape (without the batch dimension);
 * ragged tensors have rank 1 and a data-dependent length. */
struct feed_schema_tensor {
    char name[160];
    enum feed_dtype dtype;
    int ragged; /* length not fixed by the schema (values, offsets, row_splits) */
    int rank;
    int64_t shape[FEED_MAX_RANK];
};

struct feed_schema {
    size_t ntensors;
    struct feed_schema_tensor t[FEED_MAX_TENSORS];
};

/* Where a piece's tensor sits in the buffer. */
struct feed_tensor {
    enum feed_dtype dtype;
    int rank;
    int64_t dims[FEED_MAX_RANK];
    uint64_t off, bytes;
};

struct feed_layout {
    uint64_t rows;
    size_t ntensors;
    struct feed_tensor t[FEED_MAX_TENSORS];
    uint64_t total; /* bytes used in the buffer */
};

/* The schema the features give. SL_EINVAL when it would exceed
 * FEED_MAX_TENSORS. */
int feed_schema_build(const struct fmt_feature_spec *specs, size_t nspecs, struct feed_schema *out,
                      struct sl_error *err) SL_MUST_CHECK;

/* Bytes a piece of `rows` rows takes when every feature is fixed-size and
 * numeric; 0 when some feature's size depends on the data. */
uint64_t feed_piece_fixed_bytes(const struct fmt_feature_spec *specs, size_t nspecs, uint64_t rows);

struct feed_assembler;

/* `format` (the job's) picks the format's ops (fmt_format_get), which
 * decode its records into the features: a TFRecord's tf.train.Example, a
 * text line as the one scalar bytes feature, a tar sample's members by
 * extension. Features the format cannot fill are SL_EINVAL naming one. */
/* Each piece adds the thread CPU time it took, per stage, to `metrics`
 * (feed_metrics.h; NULL: not measured): reading records (framing, CRCs,
 * page faults), inflating compressed files, decoding records, and the rest
 * of assembling (copies, layout). Read and decode are estimated from every
 * 8th record's timing; decompress and the per-piece totals are measured. */
int feed_assembler_create(struct feed_assembler **out, struct feed_source *src, const struct fmt_feature_spec *specs,
                          size_t nspecs, enum fmt_format format, size_t max_rows, struct sl_metrics *metrics,
                          struct sl_error *err) SL_MUST_CHECK;
void feed_assembler_destroy(struct feed_assembler *a);

/* Take decoded rows from `cache` (feed_cache.h; shared by the assemblers
 * of a job; NULL: off again) and put the rows this assembler decodes in
 * it. The stream is the same with or without it. Only when every feature
 * is fixed-size (int64 / float32 / uint8) and the cache's rows are the
 * features' row bytes together, else SL_EINVAL and no cache. Each piece
 * adds its elements copied from the cache and decoded to FEED_M_CACHE_HITS
 * / FEED_M_CACHE_MISSES. */
struct feed_cache;
int feed_assembler_use_cache(struct feed_assembler *a, struct feed_cache *cache, struct sl_error *err) SL_MUST_CHECK;

/* Run the map stage (transform/map.h) over every element, between its
 * decode and the piece's layout: the piece then carries the features
 * leaving the map (`plan`'s outputs, as feed_map_out_specs gives them), in
 * their order. The plan is borrowed and shared by the assemblers; each gets
 * its own runner. Each element's random streams are keyed by (seed, the
 * piece's epoch, the element id, the op index); the element id is the
 * record's place in the job's files (the records of the files before its
 * file, plus its record number). Errors per element name the file, the
 * record, its offset and the element id ("<path>: record 3 at 120: element
 * 8: map[1] one_hot: label 12 is outside [0, 10)"). Not with the cache
 * (SL_EINVAL). Each piece adds the CPU time of the map to FEED_M_MAP_NS,
 * and each op's (estimated from every 8th element) to op_ns[op] (NULL:
 * not kept; added atomically: the assemblers share it). */
struct map_plan;
int feed_assembler_use_map(struct feed_assembler *a, const struct map_plan *plan, uint64_t seed, uint64_t *op_ns,
                           struct sl_error *err) SL_MUST_CHECK;

/* The next pieces' records read by range come from `fetch` (feed_fetch.h:
 * started for that piece; NULL: none, each is then fetched alone). */
struct feed_fetch;
void feed_assembler_use_fetch(struct feed_assembler *a, struct feed_fetch *fetch);

/* Read and decode every element of `piece` and lay its tensors out in
 * buf[0..cap). Errors name the file once: a damaged record as the source
 * reads it ("<path>: corrupted record at <offset>"), a record that does not
 * decode "<path>: <element> N at <offset>: <what>" (element: record, line,
 * sample); SL_EINVAL "<path>: <element> N at byte <offset>: a piece of R
 * <element>s needs B bytes, more than its C-byte buffer (--max-piece-bytes)"
 * naming the element where it overflowed, when cap is too small. */
int feed_assembler_fill(struct feed_assembler *a, const struct feed_piece *piece, uint8_t *buf, size_t cap,
                        struct feed_layout *out, struct sl_error *err) SL_MUST_CHECK;

#endif
