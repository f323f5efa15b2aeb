/* feed_job: the job file and its flags, driven by one table.
 *
 * Each key is a row {name, type, offset, min, max, default}. A value from
 * the file is a jansson value; a flag's text is first turned into one
 * (feed_job_set: a number or a word for INT/BOOL, a list for "files", JSON
 * for objects), so both go through the same per-type setter and fail with
 * the same words; only the prefix differs ("job.json: 'KEY' ..." or
 * "--KEY: ..."). Defaults are written in the table as a flag's text and
 * applied the same way. A dotted row ("shuffle.seed") belongs to the
 * object row before its dot. Features have their own parser (a map of
 * name -> {dtype, shape, varlen, default, from}); a flag that changes one
 * feature edits the JSON form of the current features and parses it all
 * again, so a changed feature passes exactly the checks of the file.
 *
 * Which keys were given (by the file or a flag, not by a default) is kept
 * beside the public struct, for the required keys and shard_hint.
 */
#include "feed_job.h"

#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "feed_job_features.h"
#include "feed_job_map.h"
#include "feed_job_parse.h"
#include "fmt_job.h"
#include "sl_alloc.h"

struct job_impl {
    struct feed_job job; /* first: a struct feed_job * from load is a struct job_impl * */
    uint64_t given;      /* bit i: keys[i] was set by the file or a flag */
};

enum key_type { KEY_INT, KEY_BOOL, KEY_STRING, KEY_ENUM, KEY_LIST, KEY_OBJECT, KEY_FEATURES, KEY_MAP };

#define KEY_REQUIRED 1u   /* top level: feed_job_validate wants it; in an object: the object does */
#define KEY_OPTIONAL 2u   /* absent unless given (its default only fills the field) */
#define KEY_NAME_CHARS 4u /* STRING: A-Z a-z 0-9 . _ - only */

struct key_enum {
    const char *noun;     /* "unknown <noun> 'x'" */
    const char *expected; /* the accepted names, for the message */
    int (*parse)(const char *s, void *field);
    const char *(*name)(const void *field);
};

struct key {
    const char *name;
    enum key_type type;
    size_t offset;
    json_int_t min, max; /* INT: the values; STRING: the length in bytes */
    const char *def;     /* default, as a flag's value; NULL: none */
    unsigned flags;
    const struct key_enum *e; /* ENUM */
    const char *word;         /* INT: a word that stands for 0 */
};

static int parse_format(const char *s, void *f)
{
    return fmt_format_parse(s, f);
}
static const char *name_format(const void *f)
{
    return fmt_format_name(*(const enum fmt_format *)f);
}
static int parse_comp(const char *s, void *f)
{
    return fmt_compression_parse(s, f);
}
static const char *name_comp(const void *f)
{
    return fmt_compression_name(*(const enum fmt_compression *)f);
}
static int parse_policy(const char *s, void *f)
{
    return feed_policy_parse(s, f);
}
static const char *name_policy(const void *f)
{
    return feed_policy_name(*(const enum feed_policy *)f);
}
static int parse_hint(const char *s, void *f)
{
    return feed_hint_parse(s, f);
}
static const char *name_hint(const void *f)
{
    return feed_hint_name(*(const enum feed_hint *)f);
}
static int parse_pr_shard(const char *s, void *f)
{
    return feed_pr_shard_parse(s, f);
}
static int parse_on_error(const char *s, void *f)
{
    return fmt_on_error_parse(s, f);
}
static const char *name_on_error(const void *f)
{
    return fmt_on_error_name(*(const enum fmt_on_error *)f);
}

static const char *name_pr_shard(const void *f)
{
    switch (*(const enum feed_pr_shard *)f) {
    case FEED_PR_SHARD_NONE: return "none";
    case FEED_PR_SHARD_FILES: return "files";
    case FEED_PR_SHARD_RECORDS: return "records";
    }
    return "?";
}

static const struct key_enum e_format = {"format", FMT_FORMAT_NAMES, parse_format, name_format};
static const struct key_enum e_comp = {"compression", FMT_COMPRESSION_NAMES, parse_comp, name_comp};
static const struct key_enum e_policy = {"shard policy", "auto, off, file, data or hint", parse_policy, name_policy};
static const struct key_enum e_hint = {"shard hint", "files, records or batches", parse_hint, name_hint};
static const struct key_enum e_pr_shard = {"per-replica shard", "none, files or records", parse_pr_shard,
                                           name_pr_shard};
static const struct key_enum e_on_error = {"policy", FMT_ON_ERROR_NAMES, parse_on_error, name_on_error};

#define OFF(field) offsetof(struct feed_job, field)
#define I64MAX ((json_int_t)INT64_MAX)
#define I32MAX ((json_int_t)INT32_MAX)

/* docs/job.md describes every row; keep the two in step. */
static const struct key keys[] = {
    {"name", KEY_STRING, OFF(name), 1, 64, NULL, KEY_REQUIRED | KEY_NAME_CHARS, NULL, NULL},
    {"files", KEY_LIST, OFF(patterns), 0, 0, NULL, KEY_REQUIRED, NULL, NULL}, /* not with arrays */
    {"format", KEY_ENUM, OFF(format), 0, 0, "tfrecord", 0, &e_format, NULL},
    {"compression", KEY_ENUM, OFF(compression), 0, 0, "auto", 0, &e_comp, NULL},
    {"features", KEY_FEATURES, OFF(features), 0, 0, NULL, 0, NULL, NULL},
    {"map", KEY_MAP, OFF(map), 0, 0, NULL, KEY_OPTIONAL, NULL, NULL},
    {"shard_policy", KEY_ENUM, OFF(policy), 0, 0, "auto", 0, &e_policy, NULL},
    {"shard_hint", KEY_ENUM, OFF(hint), 0, 0, "files", KEY_OPTIONAL, &e_hint, NULL},
    {"global_batch_size", KEY_INT, OFF(global_batch_size), 1, I32MAX, NULL, KEY_REQUIRED, NULL, NULL},
    {"drop_remainder", KEY_BOOL, OFF(drop_remainder), 0, 0, "false", 0, NULL, NULL},
    {"shuffle", KEY_OBJECT, 0, 0, 0, NULL, 0, NULL, NULL},
    {"shuffle.buffer", KEY_INT, OFF(shuffle_buffer), 0, I32MAX, "0", KEY_REQUIRED, NULL, NULL},
    {"shuffle.seed", KEY_INT, OFF(shuffle_seed), 0, I64MAX, "0", 0, NULL, NULL},
    {"shuffle.reshuffle_each_epoch", KEY_BOOL, OFF(reshuffle_each_epoch), 0, 0, "true", 0, NULL, NULL},
    {"epochs", KEY_INT, OFF(epochs), 0, I64MAX, "1", 0, NULL, "forever"},
    {"parallel_reads", KEY_INT, OFF(parallel_reads), 1, 1024, "1", 0, NULL, NULL},
    {"per_replica_input", KEY_BOOL, OFF(per_replica_input), 0, 0, "false", 0, NULL, NULL},
    {"per_replica_shard", KEY_ENUM, OFF(pr_shard), 0, 0, "none", 0, &e_pr_shard, NULL},
    {"prefetch", KEY_INT, OFF(prefetch), 1, 1024, "4", 0, NULL, NULL},
    {"on_error", KEY_ENUM, OFF(on_error), 0, 0, "fail", 0, &e_on_error, NULL},
    {"max_record_bytes", KEY_INT, OFF(max_record_bytes), 1, (json_int_t)1 << 32, "67108864", 0, NULL, NULL},
    {"inflate_cache_bytes", KEY_INT, OFF(inflate_cache_bytes), (json_int_t)1 << 20, (json_int_t)1 << 40, "1073741824",
     0, NULL, NULL},
    {"cache_bytes", KEY_INT, OFF(cache_bytes), (json_int_t)1 << 20, (json_int_t)1 << 40, "off", 0, NULL, "off"},
    {"verify_on_read", KEY_BOOL, OFF(verify_on_read), 0, 0, "true", 0, NULL, NULL},
    {"use_index", KEY_BOOL, OFF(use_index), 0, 0, "false", 0, NULL, NULL},
    {"workers", KEY_INT, OFF(workers), 1, 65536, NULL, KEY_OPTIONAL, NULL, NULL},
    {"replicas", KEY_INT, OFF(replicas), 1, 1024, NULL, KEY_OPTIONAL, NULL, NULL},
};
#define NKEYS (sizeof keys / sizeof keys[0])

static uint64_t key_bit(const struct key *k)
{
    return (uint64_t)1 << (k - keys);
}

/* ---- errors ---- */

static int report_file(struct sl_error *err, int rc, const char *source, const struct why *w)
{
    if (rc == SL_ENOMEM)
        return sl_error_set(err, rc, "%s: out of memory", source);
    if (w->unknown)
        return sl_error_set(err, rc, "%s: unknown key '%s'", source, w->key);
    return sl_error_set(err, rc, "%s: '%s'%s", source, w->key, w->text);
}

static int report_flag(struct sl_error *err, int rc, const char *flag, const struct why *w)
{
    if (rc == SL_ENOMEM)
        return sl_error_set(err, rc, "--%s: out of memory", flag);
    if (strcmp(w->key, flag) != 0) {
        if (w->unknown)
            return sl_error_set(err, rc, "--%s: unknown key '%s'", flag, w->key);
        return sl_error_set(err, rc, "--%s: '%s'%s", flag, w->key, w->text);
    }
    if (w->unknown)
        return sl_error_set(err, rc, "--%s: unknown key", flag);
    const char *t = w->text;
    t += strspn(t, ": ");
    return sl_error_set(err, rc, "--%s: %s", flag, t);
}

/* ---- keys ---- */

static const struct key *key_find(const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

/* A key of the object `prefix` ("" for the top level, "shuffle." for
 * shuffle), found by its name inside that object. */
static const struct key *key_find_in(const char *prefix, const char *name)
{
    char full[256];
    if (strchr(name, '.') != NULL || snprintf(full, sizeof full, "%s%s", prefix, name) >= (int)sizeof full)
        return NULL;
    return key_find(full);
}

static int is_child(const struct key *k, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncmp(k->name, prefix, n) == 0 && strchr(k->name + n, '.') == NULL;
}

static int name_chars_ok(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '.' ||
              *s == '_' || *s == '-'))
            return 0;
    return 1;
}

static int key_set(struct job_impl *j, const struct key *k, json_t *v, struct why *w);
static int key_reset(struct job_impl *j, const struct key *k, struct why *w);

/* Set the keys of object `prefix` from the JSON object v. */
static int set_object(struct job_impl *j, const char *prefix, json_t *v, struct why *w)
{
    const char *name;
    json_t *e;
    json_object_foreach(v, name, e)
    {
        const struct key *k = key_find_in(prefix, name);
        if (k == NULL) {
            char full[256];
            snprintf(full, sizeof full, "%s%s", prefix, name);
            return feed__why_unknown(w, full);
        }
        int rc = key_set(j, k, e, w);
        if (rc != 0)
            return rc;
    }
    if (prefix[0] == '\0')
        return 0; /* the top level's required keys wait for the flags (feed_job_validate) */
    for (size_t i = 0; i < NKEYS; i++) {
        const struct key *k = &keys[i];
        if (!(k->flags & KEY_REQUIRED) || !is_child(k, prefix))
            continue;
        json_t *given = json_object_get(v, k->name + strlen(prefix));
        if (given == NULL || json_is_null(given))
            return feed__why_set(w, k->name, " is required");
    }
    return 0;
}

/* Store v (not null) in k's field; on error the field is unchanged. */
static int key_store(struct job_impl *j, const struct key *k, json_t *v, struct why *w)
{
    void *field = (char *)&j->job + k->offset;
    char g[80];
    switch (k->type) {
    case KEY_INT: {
        const char *or_word = k->word ? " or \"" : "", *word = k->word ? k->word : "", *q = k->word ? "\"" : "";
        if (k->word != NULL && json_is_string(v) && strcmp(json_string_value(v), k->word) == 0) {
            *(uint64_t *)field = 0;
            return 0;
        }
        if (json_is_integer(v) && json_integer_value(v) >= k->min && json_integer_value(v) <= k->max) {
            *(uint64_t *)field = (uint64_t)json_integer_value(v);
            return 0;
        }
        if (json_is_integer(v) && json_integer_value(v) > k->max)
            return feed__why_set(w, k->name, " must be an integer <= %lld (got %s)", (long long)k->max,
                                 feed__got(v, g, sizeof g));
        return feed__why_set(w, k->name, " must be an integer >= %lld%s%s%s (got %s)", (long long)k->min, or_word, word,
                             q, feed__got(v, g, sizeof g));
    }
    case KEY_BOOL:
        if (!json_is_boolean(v))
            return feed__why_set(w, k->name, " must be true or false (got %s)", feed__got(v, g, sizeof g));
        *(int *)field = json_is_true(v);
        return 0;
    case KEY_STRING: {
        const char *s = json_string_value(v);
        size_t len = json_string_length(v);
        if (s == NULL || (json_int_t)len < k->min || (json_int_t)len > k->max ||
            ((k->flags & KEY_NAME_CHARS) && !name_chars_ok(s)))
            return feed__why_set(w, k->name, " must be a string of %lld to %lld characters%s (got %s)",
                                 (long long)k->min, (long long)k->max,
                                 (k->flags & KEY_NAME_CHARS) ? " from A-Z a-z 0-9 . _ -" : "",
                                 feed__got(v, g, sizeof g));
        char *copy = sl_strdup(s);
        if (copy == NULL)
            return SL_ENOMEM;
        sl_free(*(char **)field);
        *(char **)field = copy;
        return 0;
    }
    case KEY_ENUM:
        if (!json_is_string(v))
            return feed__why_set(w, k->name, " must be a string (got %s)", feed__got(v, g, sizeof g));
        if (k->e->parse(json_string_value(v), field) != 0)
            return feed__why_set(w, k->name, ": unknown %s '%s' (expected %s)", k->e->noun, json_string_value(v),
                                 k->e->expected);
        return 0;
    case KEY_LIST: {
        struct feed_job_list l = {0};
        size_t cap = 0, i;
        json_t *e;
        int rc = 0;
        if (json_is_string(v) && json_string_length(v) > 0 && strlen(json_string_value(v)) == json_string_length(v))
            rc = feed__list_push(&l, &cap, json_string_value(v));
        else if (!json_is_array(v) || json_array_size(v) == 0)
            rc = SL_EINVAL;
        else
            json_array_foreach(v, i, e)
            {
                if (rc == 0 && (!json_is_string(e) || json_string_length(e) == 0))
                    rc = SL_EINVAL;
                if (rc == 0)
                    rc = feed__list_push(&l, &cap, json_string_value(e));
            }
        if (rc != 0) {
            feed__list_free(&l);
            if (rc == SL_EINVAL)
                return feed__why_set(w, k->name, " must be a pattern or a non-empty list of patterns (got %s)",
                                     feed__got(v, g, sizeof g));
            return rc;
        }
        feed__list_free(field);
        *(struct feed_job_list *)field = l;
        return 0;
    }
    case KEY_OBJECT: {
        if (!json_is_object(v))
            return feed__why_set(w, k->name, " must be an object or null (got %s)", feed__got(v, g, sizeof g));
        /* An object's keys are numbers and booleans: a copy of the struct
         * is enough to undo a half-applied object. */
        struct job_impl saved = *j;
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s.", k->name);
        int rc = key_reset(j, k, w);
        if (rc == 0)
            rc = set_object(j, prefix, v, w);
        if (rc != 0)
            *j = saved;
        return rc;
    }
    case KEY_FEATURES: {
        struct fmt_feature_spec *specs;
        struct feed_job_list *arrays;
        size_t n;
        int rc = feed__features_parse(v, &specs, &arrays, &n, w);
        if (rc != 0)
            return rc;
        feed__features_free(j->job.features, j->job.arrays, j->job.nfeatures);
        j->job.features = specs;
        j->job.arrays = arrays;
        j->job.nfeatures = n;
        return 0;
    }
    case KEY_MAP: {
        struct map_pipeline *p;
        int rc = feed__map_parse(v, &p, w);
        if (rc != 0)
            return rc;
        map_pipeline_free(j->job.map);
        j->job.map = p;
        return 0;
    }
    }
    return SL_EINVAL;
}

/* A flag's text as the JSON value key k takes; NULL and *bad set when it
 * is not valid JSON where JSON is wanted (or not valid UTF-8). */
static json_t *flag_value(const struct key *k, const char *text, char *bad, size_t cap)
{
    json_error_t je;
    json_t *v = NULL;
    bad[0] = '\0';
    switch (k->type) {
    case KEY_INT:
    case KEY_BOOL:
        if ((v = json_loads(text, JSON_DECODE_ANY, NULL)) != NULL)
            return v;
        break;
    case KEY_ENUM:
        if (strcmp(text, "null") == 0)
            return json_null();
        break;
    case KEY_LIST: {
        if ((v = json_array()) == NULL)
            return NULL;
        /* "a,b" is two patterns; "a," and "" hold an empty one (an error) */
        for (const char *p = text;; p++) {
            size_t n = strcspn(p, ",");
            json_t *s = json_stringn(p, n);
            if (s == NULL || json_array_append_new(v, s) != 0) {
                snprintf(bad, cap, "not valid UTF-8");
                json_decref(v);
                return NULL;
            }
            p += n;
            if (*p == '\0')
                return v;
        }
    }
    case KEY_OBJECT:
    case KEY_FEATURES:
    case KEY_MAP:
        if ((v = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je)) == NULL)
            snprintf(bad, cap, "not valid JSON: %s at column %d", je.text, je.column);
        return v;
    case KEY_STRING: break;
    }
    if ((v = json_string(text)) == NULL)
        snprintf(bad, cap, "not valid UTF-8");
    return v;
}

static int key_store_text(struct job_impl *j, const struct key *k, const char *text, struct why *w)
{
    char bad[200];
    json_t *v = flag_value(k, text, bad, sizeof bad);
    if (v == NULL)
        return bad[0] ? feed__why_set(w, k->name, ": %s", bad) : SL_ENOMEM;
    int rc = key_store(j, k, v, w);
    json_decref(v);
    return rc;
}

/* Back to the state of a job file without the key. */
static int key_reset(struct job_impl *j, const struct key *k, struct why *w)
{
    void *field = (char *)&j->job + k->offset;
    int rc = 0;
    j->given &= ~key_bit(k);
    if (k->def != NULL)
        return key_store_text(j, k, k->def, w);
    switch (k->type) {
    case KEY_INT: *(uint64_t *)field = 0; break;
    case KEY_BOOL: *(int *)field = 0; break;
    case KEY_STRING:
        sl_free(*(char **)field);
        *(char **)field = NULL;
        break;
    case KEY_LIST: feed__list_free(field); break;
    case KEY_FEATURES:
        feed__features_free(j->job.features, j->job.arrays, j->job.nfeatures);
        j->job.features = NULL;
        j->job.arrays = NULL;
        j->job.nfeatures = 0;
        break;
    case KEY_MAP:
        map_pipeline_free(j->job.map);
        j->job.map = NULL;
        break;
    case KEY_OBJECT: {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s.", k->name);
        for (size_t i = 0; rc == 0 && i < NKEYS; i++)
            if (is_child(&keys[i], prefix))
                rc = key_reset(j, &keys[i], w);
        break;
    }
    case KEY_ENUM: break; /* every enum row has a default */
    }
    return rc;
}

/* Set key k from a file or flag value; null means "as if absent". */
static int key_set(struct job_impl *j, const struct key *k, json_t *v, struct why *w)
{
    if (json_is_null(v))
        return key_reset(j, k, w);
    int rc = key_store(j, k, v, w);
    if (rc == 0)
        j->given |= key_bit(k);
    return rc;
}

static json_t *key_to_json(const struct job_impl *j, const struct key *k, int *digits)
{
    const void *field = (const char *)&j->job + k->offset;
    switch (k->type) {
    case KEY_INT: {
        uint64_t x = *(const uint64_t *)field;
        return x == 0 && k->word ? json_string(k->word) : json_integer((json_int_t)x);
    }
    case KEY_BOOL: return json_boolean(*(const int *)field);
    case KEY_STRING: return *(char *const *)field ? json_string(*(char *const *)field) : json_null();
    case KEY_ENUM: return json_string(k->e->name(field));
    case KEY_LIST: {
        const struct feed_job_list *l = field;
        json_t *a = json_array();
        for (size_t i = 0; a != NULL && i < l->n; i++)
            if (json_array_append_new(a, json_string(l->items[i])) != 0) {
                json_decref(a);
                a = NULL;
            }
        return a;
    }
    case KEY_OBJECT: {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s.", k->name);
        json_t *o = json_object();
        for (size_t i = 0; o != NULL && i < NKEYS; i++)
            if (is_child(&keys[i], prefix) &&
                json_object_set_new(o, keys[i].name + strlen(prefix), key_to_json(j, &keys[i], digits)) != 0) {
                json_decref(o);
                o = NULL;
            }
        return o;
    }
    case KEY_FEATURES: return feed__features_to_json(j->job.features, j->job.arrays, j->job.nfeatures, digits);
    case KEY_MAP:
        if (*digits < 17)
            *digits = 17; /* the ops' numbers (ratio 4/3, std 0.229) load back the same */
        return map_pipeline_to_json(j->job.map);
    }
    return NULL;
}

/* ---- the API ---- */

static int job_create(struct job_impl **out, const char *source, struct sl_error *err)
{
    struct why w;
    int rc = SL_ENOMEM;
    struct job_impl *j = sl_calloc(1, sizeof *j);
    *out = NULL;
    if (j == NULL)
        return report_file(err, rc, source, &w);
    if ((j->job.source = sl_strdup(source)) == NULL)
        goto out_free_job;
    for (size_t i = 0; i < NKEYS; i++)
        if (keys[i].def != NULL && (rc = key_reset(j, &keys[i], &w)) != 0)
            goto out_free_job;
    *out = j;
    return 0;
out_free_job:
    feed_job_free(&j->job);
    return report_file(err, rc, source, &w);
}

int feed_job_load(struct feed_job **out, const char *path, struct sl_error *err)
{
    struct job_impl *j;
    struct why w;
    json_error_t je;
    *out = NULL;
    int rc = job_create(&j, path ? path : "command line", err);
    if (rc != 0 || path == NULL) {
        *out = j ? &j->job : NULL;
        return rc;
    }
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (f == NULL) {
        rc = sl_error_sys(err, errno, "open(%s)", path);
        goto out_free_job;
    }
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        rc = sl_error_sys(err, EISDIR, "read(%s)", path);
        goto out_free_job;
    }
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (root == NULL) {
        rc = sl_error_set(err, SL_EINVAL, "%s:%d:%d: %s", path, je.line, je.column, je.text);
        goto out_free_job;
    }
    if (!json_is_object(root)) {
        char g[80];
        rc = sl_error_set(err, SL_EINVAL, "%s: a job is one JSON object (got %s)", path, feed__got(root, g, sizeof g));
    } else if ((rc = set_object(j, "", root, &w)) != 0) {
        report_file(err, rc, path, &w);
    }
    json_decref(root);
    if (rc != 0)
        goto out_free_job;
    *out = &j->job;
    return 0;
out_free_job:
    feed_job_free(&j->job);
    return rc;
}

/* "features.NAME" (a whole feature; null removes it) or
 * "features.NAME.FIELD" (one field of an existing feature). */
static int set_feature_flag(struct job_impl *j, const char *flag, const char *text, struct why *w)
{
    const char *rest = flag + strlen("features."), *dot = strrchr(rest, '.');
    int digits = 0, rc;
    json_t *all = feed__features_to_json(j->job.features, j->job.arrays, j->job.nfeatures, &digits), *v;
    json_error_t je;
    char name[256];
    if (all == NULL)
        return SL_ENOMEM;
    snprintf(name, sizeof name, "%s", rest);
    if (json_object_get(all, rest) == NULL && dot != NULL && feed__feature_field(dot + 1) &&
        (size_t)(dot - rest) < sizeof name) {
        name[dot - rest] = '\0';
        if (json_object_get(all, name) == NULL) {
            rc = feed__why_set(w, flag, ": no feature '%s'", name);
            goto out_free_all;
        }
        json_t *feature = json_object_get(all, name);
        if ((v = json_loads(text, JSON_DECODE_ANY, NULL)) == NULL && (v = json_string(text)) == NULL) {
            rc = feed__why_set(w, flag, ": not valid UTF-8");
            goto out_free_all;
        }
        if (strcmp(dot + 1, "varlen") == 0 && json_is_true(v)) {
            json_object_del(feature, "shape");
            json_object_del(feature, "default");
        }
        rc = json_is_null(v) ? (json_object_del(feature, dot + 1), 0) : json_object_set(feature, dot + 1, v);
    } else {
        if ((v = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je)) == NULL) {
            rc = feed__why_set(w, flag, ": not valid JSON: %s at column %d", je.text, je.column);
            goto out_free_all;
        }
        rc = json_is_null(v) ? (json_object_del(all, rest), 0) : json_object_set(all, rest, v);
    }
    json_decref(v);
    if (rc != 0) {
        rc = SL_ENOMEM;
        goto out_free_all;
    }
    rc = key_set(j, key_find("features"), all, w);
out_free_all:
    json_decref(all);
    return rc;
}

const char *feed_job_key_name(size_t i)
{
    return i < NKEYS ? keys[i].name : NULL;
}

int feed_job_set(struct feed_job *job, const char *key, const char *value, struct sl_error *err)
{
    struct job_impl *j = (struct job_impl *)job;
    const struct key *k = key_find(key);
    struct why w;
    int rc;
    if (strncmp(key, "features.", 9) == 0) {
        rc = set_feature_flag(j, key, value, &w);
    } else if (k == NULL) {
        rc = feed__why_unknown(&w, key);
    } else {
        char bad[200];
        json_t *v = flag_value(k, value, bad, sizeof bad);
        if (v == NULL)
            rc = bad[0] ? feed__why_set(&w, k->name, ": %s", bad) : SL_ENOMEM;
        else
            rc = key_set(j, k, v, &w);
        json_decref(v);
    }
    return rc == 0 ? 0 : report_flag(err, rc, key, &w);
}

/* Does feature i name arrays? (fmt_job_input) */
static int names_arrays(const void *ctx, size_t i)
{
    const struct feed_job *job = ctx;
    return job->arrays != NULL && job->arrays[i].n > 0;
}

/* The job's own rules, and its format's (fmt_format_check_job: what names
 * the input, then which features it fills). */
int feed_job_validate(const struct feed_job *job, struct sl_error *err)
{
    const struct job_impl *j = (const struct job_impl *)job;
    const char *src = job->source;
    const struct key *files = key_find("files");
    int reads_files = fmt_format_reads_files(job->format);
    for (size_t i = 0; i < NKEYS; i++)
        if ((keys[i].flags & KEY_REQUIRED) && strchr(keys[i].name, '.') == NULL && !(j->given & key_bit(&keys[i])) &&
            !(!reads_files && &keys[i] == files))
            return sl_error_set(err, SL_EINVAL, "%s: '%s' is required", src, keys[i].name);
    struct fmt_job_input in = {.files_given = (j->given & key_bit(files)) != 0,
                               .features = job->features,
                               .nfeatures = job->nfeatures,
                               .names_arrays = names_arrays,
                               .ctx = job};
    if (fmt_format_check_job(job->format, FMT_JOB_INPUT, &in, err) != 0)
        return sl_error_prefix(err, "%s: ", src);
    int has_hint = (j->given & key_bit(key_find("shard_hint"))) != 0;
    if (job->policy == FEED_SHARD_HINT && !has_hint)
        return sl_error_set(err, SL_EINVAL, "%s: 'shard_hint' is required with shard_policy \"hint\"", src);
    if (job->policy != FEED_SHARD_HINT && has_hint)
        return sl_error_set(err, SL_EINVAL, "%s: 'shard_hint' applies only with shard_policy \"hint\" (got \"%s\")",
                            src, feed_policy_name(job->policy));
    if (job->per_replica_input && job->policy != FEED_SHARD_AUTO && job->policy != FEED_SHARD_OFF)
        return sl_error_set(err, SL_EINVAL,
                            "%s: 'shard_policy' \"%s\" does not apply with per_replica_input (the input is not "
                            "auto-sharded; use per_replica_shard)",
                            src, feed_policy_name(job->policy));
    if (!job->per_replica_input && job->pr_shard != FEED_PR_SHARD_NONE)
        return sl_error_set(err, SL_EINVAL, "%s: 'per_replica_shard' applies only with per_replica_input true", src);
    if ((job->workers != 0) != (job->replicas != 0))
        return sl_error_set(err, SL_EINVAL, "%s: 'workers' and 'replicas' go together (the cluster shape to serve)",
                            src);
    if (fmt_format_check_job(job->format, FMT_JOB_FEATURES, &in, err) != 0)
        return sl_error_prefix(err, "%s: ", src);
    /* the map against the features: each op's input and output, plugins
     * loaded (and let go: main makes the plan it serves with) */
    struct map_plan *plan;
    int rc = feed_job_map_plan(job, 0, &plan, err);
    map_plan_destroy(plan);
    return rc;
}

int feed_job_fill_plan_config(const struct feed_job *job, const uint64_t *counts, uint32_t W, uint32_t R,
                              struct feed_plan_config *cfg)
{
    if (job->files.n == 0 || counts == NULL || W == 0 || R == 0)
        return SL_EINVAL;
    /* AUTO is DATA for arrays, as TensorFlow's AUTO is for
     * from_tensor_slices (what experimental_make_numpy_dataset builds): there
     * is no file reader to shard. An explicit FILE still deals out the groups
     * (docs/semantics.md 3.4). */
    enum feed_policy policy = job->policy;
    if (policy == FEED_SHARD_AUTO && !fmt_format_reads_files(job->format) && !job->per_replica_input)
        policy = FEED_SHARD_DATA;
    *cfg = (struct feed_plan_config){
        .nfiles = job->files.n,
        .counts = counts,
        .source_is_files = 1,
        .policy = policy,
        .hint = job->hint,
        .global_batch = job->global_batch_size,
        .drop_remainder = job->drop_remainder,
        .shuffle_buffer = job->shuffle_buffer,
        .seed = job->shuffle_seed,
        .reshuffle_each_epoch = job->reshuffle_each_epoch,
        .epochs = job->epochs,
        .parallel_reads = (uint32_t)job->parallel_reads,
        .per_replica_input = job->per_replica_input,
        .pr_shard = job->pr_shard,
        .workers = W,
        .replicas = R,
    };
    return 0;
}

struct dump {
    struct sl_buf *out;
    int rc;
};

static int dump_to_buf(const char *p, size_t n, void *ctx)
{
    struct dump *d = ctx;
    d->rc = sl_buf_append(d->out, p, n);
    return d->rc == 0 ? 0 : -1;
}

int feed_job_to_json(const struct feed_job *job, int indent, struct sl_buf *out)
{
    const struct job_impl *j = (const struct job_impl *)job;
    int digits = 0;
    struct dump d = {out, 0};
    json_t *root = json_object();
    for (size_t i = 0; root != NULL && i < NKEYS; i++) {
        const struct key *k = &keys[i];
        if (strchr(k->name, '.') != NULL || ((k->flags & KEY_OPTIONAL) && !(j->given & key_bit(k))))
            continue;
        if (k->type == KEY_LIST && ((const struct feed_job_list *)((const char *)job + k->offset))->n == 0)
            continue; /* files, with format arrays */
        if (json_object_set_new(root, k->name, key_to_json(j, k, &digits)) != 0) {
            json_decref(root);
            root = NULL;
        }
    }
    if (root == NULL)
        return SL_ENOMEM;
    size_t before = out->len;
    indent = indent < 0 ? 0 : indent > 31 ? 31 : indent;
    if (json_dump_callback(root, dump_to_buf, &d, JSON_INDENT(indent) | JSON_REAL_PRECISION(digits)) != 0) {
        out->len = before;
        if (d.rc == 0)
            d.rc = SL_ENOMEM;
    }
    json_decref(root);
    return d.rc;
}

void feed_job_free(struct feed_job *job)
{
    if (job == NULL)
        return;
    sl_free(job->source);
    sl_free(job->name);
    feed__list_free(&job->patterns);
    feed__list_free(&job->files);
    feed__list_free(&job->members);
    feed__features_free(job->features, job->arrays, job->nfeatures);
    map_pipeline_free(job->map);
    sl_free((struct job_impl *)job);
}
