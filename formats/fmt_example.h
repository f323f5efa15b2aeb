/* fmt_example: the tf.train.Example wire format (proto3), decoded without
 * allocation the way TensorFlow's fast parser reads it, and encoded for the
 * writer, converters and tests.
 *
 *   Example  { Features features = 1; }
 *   Features { map<string, Feature> feature = 1; }   entry: key = 1, value = 2
 *   Feature  { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
 *                           Int64List int64_list = 3; } }
 *   *List    { repeated value = 1; }  (float/int64 packed or unpacked)
 *
 * All views are borrowed from the serialized input.
 */
#ifndef FMT_EXAMPLE_H
#define FMT_EXAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "sl_buf.h"
#include "sl_error.h"

enum fmt_kind { FMT_KIND_NONE = 0, FMT_KIND_BYTES = 1, FMT_KIND_FLOAT = 2, FMT_KIND_INT64 = 3 };

/* "bytes"/"string", "float", "int64"; TensorFlow's error texts call them
 * "string", "float", "int64" (fmt_kind_tf_name). */
const char *fmt_kind_name(enum fmt_kind k);
const char *fmt_kind_tf_name(enum fmt_kind k);

/* One map entry of an Example, in wire order. kind NONE = a Feature with no
 * kind set (TensorFlow treats it as missing). `list` is the body of the
 * BytesList / FloatList / Int64List message. */
struct fmt_feature_view {
    const char *key;
    size_t key_len;
    enum fmt_kind kind;
    const uint8_t *list;
    size_t list_len;
};

/* Called for every entry; return 0 to go on, anything else stops the walk
 * and is returned by fmt_example_walk. */
typedef int (*fmt_feature_fn)(void *ctx, const struct fmt_feature_view *f);

/* Walk the entries of a serialized Example (several concatenated Features
 * messages merge, as in TensorFlow). Unknown fields of wire types 0, 1, 2, 5
 * are skipped; wire types 3, 4 and malformed framing are SL_ECORRUPT
 * "<what> at byte N" (N relative to data). */
int fmt_example_walk(const uint8_t *data, size_t len, fmt_feature_fn fn, void *ctx, struct sl_error *err) SL_MUST_CHECK;

/* Count and decode list values. Packed lists: only the first packed chunk is
 * read (TensorFlow's fast parser). Unpacked: every tag must be the value tag.
 * The decode calls write exactly `count` values (count from the count call). */
int fmt_int64_list_count(const uint8_t *list, size_t len, size_t *count, struct sl_error *err) SL_MUST_CHECK;
int fmt_int64_list_decode(const uint8_t *list, size_t len, int64_t *out, size_t count,
                          struct sl_error *err) SL_MUST_CHECK;
int fmt_float_list_count(const uint8_t *list, size_t len, size_t *count, struct sl_error *err) SL_MUST_CHECK;
int fmt_float_list_decode(const uint8_t *list, size_t len, float *out, size_t count,
                          struct sl_error *err) SL_MUST_CHECK;

/* Iterate the values of a BytesList. */
struct fmt_bytes_iter {
    const uint8_t *p, *end;
    const uint8_t *start; /* the list's first byte, for "at byte N" in errors */
};
void fmt_bytes_iter_init(struct fmt_bytes_iter *it, const uint8_t *list, size_t len);
/* 0 and a value, SL_END, or SL_ECORRUPT. */
int fmt_bytes_iter_next(struct fmt_bytes_iter *it, const uint8_t **v, size_t *n, struct sl_error *err) SL_MUST_CHECK;
int fmt_bytes_list_count(const uint8_t *list, size_t len, size_t *count, struct sl_error *err) SL_MUST_CHECK;

/* Encoder: builds a serialized Example into an sl_buf (appending).
 * Usage: begin, add_* for each feature (in the order given), end (or abort,
 * which leaves out as it was before begin). Lists are written packed, as
 * protobuf serializers do. The encoder owns nothing: it writes straight
 * into out, so a loop that reuses out allocates nothing once out has grown. */
struct fmt_example_enc {
    struct sl_buf *out;
    size_t start; /* where this Example begins in out */
};
int fmt_example_enc_begin(struct fmt_example_enc *e, struct sl_buf *out) SL_MUST_CHECK;
int fmt_example_enc_int64(struct fmt_example_enc *e, const char *key, const int64_t *v, size_t n) SL_MUST_CHECK;
int fmt_example_enc_float(struct fmt_example_enc *e, const char *key, const float *v, size_t n) SL_MUST_CHECK;
/* n byte strings: vals[i] of lens[i] bytes. */
int fmt_example_enc_bytes(struct fmt_example_enc *e, const char *key, const uint8_t *const *vals, const size_t *lens,
                          size_t n) SL_MUST_CHECK;
/* Finish: the Example now ends out. Cannot fail; returns 0. */
int fmt_example_enc_end(struct fmt_example_enc *e) SL_MUST_CHECK;
/* Undo begin and the adds (after an error): out is as it was. */
void fmt_example_enc_abort(struct fmt_example_enc *e);

/* Write the Example as protobuf's canonical JSON mapping (MessageToJson,
 * compact): {"features":{"feature":{"k":{"int64List":{"value":["1"]}}}}}.
 * int64 as strings, bytes base64, floats as numbers ("NaN", "Infinity" as
 * strings). Keys in wire order; a duplicate key keeps the last value. */
int fmt_example_to_json(const uint8_t *data, size_t len, struct sl_buf *out, struct sl_error *err) SL_MUST_CHECK;

/* ---- Internal to sl_formats (fmt_features.c); tools use the API above. ----
 * The map entries of an Example one at a time with the Feature left
 * unparsed, so that a reader can skip the Features of keys it does not want
 * without validating them (TensorFlow's fast parser does the same). */
struct fmt__entry {
    const uint8_t *key;
    size_t key_len;
    const uint8_t *feature; /* serialized Feature; feature_len 0: no kind */
    size_t feature_len;
};
struct fmt__example_iter {
    const uint8_t *data, *p, *end;
    const uint8_t *fend; /* end of the Features message being read; NULL between them */
    int saw_features;    /* a Features message (maybe empty) was present */
};
void fmt__example_iter_init(struct fmt__example_iter *it, const uint8_t *data, size_t len);
/* 0 and an entry, SL_END, or SL_ECORRUPT "<what> at byte N". */
int fmt__example_iter_next(struct fmt__example_iter *it, struct fmt__entry *e, struct sl_error *err) SL_MUST_CHECK;
/* Kind and list body of a serialized Feature; `base` is the Feature's offset
 * in the Example, for error texts. */
int fmt__feature_parse(const uint8_t *feature, size_t len, size_t base, enum fmt_kind *kind, const uint8_t **list,
                       size_t *list_len, struct sl_error *err) SL_MUST_CHECK;
/* One pass over a list: stores the first min(count, cap) values in out (out
 * may be NULL when cap is 0) and sets *count to the number in the list.
 * Error offsets are `base` + the offset in the list. */
int fmt__int64_list_scan(const uint8_t *list, size_t len, size_t base, int64_t *out, size_t cap, size_t *count,
                         struct sl_error *err) SL_MUST_CHECK;
int fmt__float_list_scan(const uint8_t *list, size_t len, size_t base, float *out, size_t cap, size_t *count,
                         struct sl_error *err) SL_MUST_CHECK;

#endif
