/* sl_json: the writing half of JSON (escaped strings, into an sl_buf).
 * Parsing uses jansson, which reports line and column for bad input. */
#ifndef SL_JSON_H
#define SL_JSON_H

#include <stddef.h>

#include "sl_buf.h"

/* Append s[0..n) as a quoted JSON string. Bytes that are not valid UTF-8 are
 * written as \u00XX of the byte value so the output is always valid JSON. */
int sl_json_string(struct sl_buf *b, const char *s, size_t n) SL_MUST_CHECK;

/* Append a float the way protobuf's JSON mapping does: shortest round-trip
 * decimal, "NaN", "Infinity", "-Infinity" as strings. */
int sl_json_float(struct sl_buf *b, float v) SL_MUST_CHECK;

#endif
