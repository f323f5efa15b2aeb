/* plan_dump: print every worker's plan as JSON lines, for comparison with
 * the Python model tests/plan/ref_plan.py (same config keys, same output;
 * see that file). Usage: plan_dump [--seek] CONFIG (JSON text or a path).
 * With --seek each piece is printed as a fresh plan gives it right after
 * feed_plan_seek to its seq, and the rest of its epoch is checked against
 * iteration (exit 1 on a difference): the same output is expected.
 * A config with from_W, from_R, from_epoch and from_step prints each new
 * worker's transition stream (feed_transition.h) instead, pieces only;
 * with --seek each piece as a fresh stream gives it after
 * feed_stream_seek to its seq, the rest of the stream checked. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "feed_plan.h"
#include "feed_transition.h"
#include "sl_alloc.h"

static int get_int(json_t *root, const char *key, long long def, long long *out)
{
    json_t *v = json_object_get(root, key);
    if (v == NULL) {
        *out = def;
        return 0;
    }
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return 0;
    }
    if (!json_is_integer(v)) {
        fprintf(stderr, "plan_dump: '%s' must be an integer\n", key);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

static const char *get_str(json_t *root, const char *key, const char *def)
{
    json_t *v = json_object_get(root, key);
    return json_is_string(v) ? json_string_value(v) : def;
}

/* A seed may be a JSON integer or a decimal string (for values >= 2^63). */
static int get_seed(json_t *root, uint64_t *out)
{
    json_t *v = json_object_get(root, "seed");
    if (v == NULL) {
        *out = 0;
        return 0;
    }
    if (json_is_integer(v)) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        char *end;
        *out = strtoull(json_string_value(v), &end, 10);
        return *end == '\0' ? 0 : -1;
    }
    return -1;
}

static void print_error(const char *msg)
{
    json_t *o = json_pack("{s:s}", "error", msg);
    char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    printf("%s\n", s);
    free(s);
    json_decref(o);
}

static void print_piece(const struct feed_piece *pc)
{
    printf("{\"worker\":%u,\"replica\":%u,\"epoch\":%llu,\"step\":%llu,\"seq\":%llu,\"elems\":[", pc->worker,
           pc->replica, (unsigned long long)pc->epoch, (unsigned long long)pc->step, (unsigned long long)pc->seq);
    for (size_t i = 0; i < pc->n; i++)
        printf("%s[%u,%llu]", i ? "," : "", pc->elems[i].file, (unsigned long long)pc->elems[i].record);
    printf("]}\n");
}

/* One worker's pieces as iteration made them (--seek). */
struct pieces {
    size_t n, cap, nelems, ecap;
    struct feed_piece *v;
    size_t *first;
    struct feed_elem *elems;
};

static int remember(struct pieces *ps, const struct feed_piece *pc)
{
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 64;
        struct feed_piece *v = realloc(ps->v, cap * sizeof *v);
        size_t *first = v ? realloc(ps->first, cap * sizeof *first) : NULL;
        if (v != NULL)
            ps->v = v;
        if (first == NULL) {
            fprintf(stderr, "plan_dump: out of memory\n");
            return -1;
        }
        ps->first = first;
        ps->cap = cap;
    }
    while (ps->nelems + pc->n > ps->ecap) {
        size_t cap = ps->ecap ? 2 * ps->ecap : 256;
        struct feed_elem *e = realloc(ps->elems, cap * sizeof *e);
        if (e == NULL) {
            fprintf(stderr, "plan_dump: out of memory\n");
            return -1;
        }
        ps->elems = e;
        ps->ecap = cap;
    }
    if (pc->n > 0)
        memcpy(ps->elems + ps->nelems, pc->elems, pc->n * sizeof *pc->elems);
    ps->first[ps->n] = ps->nelems;
    ps->nelems += pc->n;
    ps->v[ps->n++] = *pc;
    return 0;
}

static int same_piece(const struct feed_piece *a, const struct pieces *ps, size_t k)
{
    const struct feed_piece *b = &ps->v[k];
    if (a->worker != b->worker || a->replica != b->replica || a->epoch != b->epoch || a->step != b->step ||
        a->seq != b->seq || a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (a->elems[i].file != ps->elems[ps->first[k] + i].file ||
            a->elems[i].record != ps->elems[ps->first[k] + i].record)
            return 0;
    return 1;
}

/* --seek: print piece s as a fresh plan gives it right after
 * feed_plan_seek(s) (passing over the `within` pieces it names), for every
 * s; and check that the pieces after it, to the end of its epoch, are the
 * ones iteration made. Frees the pieces. */
static int seek_all(const struct feed_plan_config *cfg, uint32_t w, struct pieces *ps, uint64_t per)
{
    struct sl_error err = {0};
    int status = 0;
    for (size_t s = 0; s < ps->n && status == 0; s++) {
        struct feed_plan *p;
        struct feed_piece pc;
        uint64_t within = 0;
        if (feed_plan_create(&p, cfg, w, &err) != 0) {
            fprintf(stderr, "plan_dump: worker %u: %s\n", w, err.msg);
            status = 1;
            break;
        }
        if (feed_plan_seek(p, s, &within) != 0) {
            fprintf(stderr, "plan_dump: worker %u: the seek to %zu failed\n", w, s);
            status = 1;
        }
        for (uint64_t i = 0; i < within && status == 0; i++)
            status = feed_plan_next(p, &pc, &err) != 0;
        size_t end = per ? (s / per + 1) * per : s + 1;
        for (size_t k = s; k < end && k < ps->n && status == 0; k++) {
            if (feed_plan_next(p, &pc, &err) != 0) {
                fprintf(stderr, "plan_dump: worker %u: after the seek to %zu, no piece %zu\n", w, s, k);
                status = 1;
            } else if (k == s) {
                print_piece(&pc);
            } else if (!same_piece(&pc, ps, k)) {
                fprintf(stderr, "plan_dump: worker %u: after the seek to %zu, piece %zu differs from iteration's\n", w,
                        s, k);
                status = 1;
            }
        }
        feed_plan_destroy(p);
    }
    free(ps->v);
    free(ps->first);
    free(ps->elems);
    memset(ps, 0, sizeof *ps);
    return status;
}

static int dump(const struct feed_plan_config *cfg, uint64_t forever_epochs, int seek)
{
    struct sl_error err = {0};
    struct pieces pieces = {0};
    for (uint32_t w = 0; w < cfg->workers; w++) {
        struct feed_plan_summary sum;
        if (feed_plan_summarize(cfg, w, &sum, &err) != 0) {
            print_error(err.msg);
            return 0;
        }
        if (w == 0) {
            /* every worker validates alike; check create agrees before printing */
            struct feed_plan *probe;
            if (feed_plan_create(&probe, cfg, 0, &err) != 0) {
                print_error(err.msg);
                return 0;
            }
            feed_plan_destroy(probe);
        }
        printf("{\"worker\":%u,\"steps\":%llu,\"files\":%llu,\"elements\":%llu,\"pieces\":%llu,"
               "\"replica_elements\":[",
               w, (unsigned long long)sum.steps, (unsigned long long)sum.files, (unsigned long long)sum.elements,
               (unsigned long long)sum.pieces);
        for (uint32_t r = 0; r < cfg->replicas && r < 64; r++)
            printf("%s%llu", r ? "," : "", (unsigned long long)sum.replica_elements[r]);
        printf("]}\n");

        struct feed_plan *p;
        if (feed_plan_create(&p, cfg, w, &err) != 0) {
            fprintf(stderr, "plan_dump: worker %u: %s\n", w, err.msg);
            return 1;
        }
        struct feed_piece pc;
        int rc;
        while ((rc = feed_plan_next(p, &pc, &err)) == 0) {
            if (cfg->epochs == 0 && pc.epoch >= forever_epochs)
                break;
            if (seek) {
                if (remember(&pieces, &pc) != 0) {
                    feed_plan_destroy(p);
                    return 1;
                }
            } else {
                print_piece(&pc);
            }
        }
        feed_plan_destroy(p);
        if (rc < 0) {
            fprintf(stderr, "plan_dump: worker %u: %s\n", w, err.msg);
            return 1;
        }
        if (seek && seek_all(cfg, w, &pieces, sum.steps * cfg->replicas) != 0)
            return 1;
    }
    return 0;
}

/* The transition streams of every new worker (from_* keys). */
static int dump_transition(const struct feed_plan_config *cfg, const struct feed_transition *x, uint64_t forever_epochs,
                           int seek)
{
    struct sl_error err = {0};
    struct pieces ps = {0};
    int status = 0;
    for (uint32_t w = 0; w < cfg->workers && status == 0; w++) {
        struct feed_stream *st;
        if (feed_stream_create(&st, cfg, x, w, &err) != 0) {
            print_error(err.msg);
            return 0;
        }
        struct feed_piece pc;
        int rc;
        while ((rc = feed_stream_next(st, &pc, &err)) == 0 && (cfg->epochs != 0 || pc.epoch < forever_epochs)) {
            if (!seek)
                print_piece(&pc);
            else if (remember(&ps, &pc) != 0)
                status = 1;
        }
        feed_stream_destroy(st);
        if (rc < 0) {
            fprintf(stderr, "plan_dump: worker %u: %s\n", w, err.msg);
            return 1;
        }
        /* --seek: piece q as a fresh stream gives it right after a seek to
         * q, and the rest as iteration gave it */
        for (size_t q = 0; seek && q < ps.n && status == 0; q++) {
            if (feed_stream_create(&st, cfg, x, w, &err) != 0 || feed_stream_seek(st, q, &err) != 0) {
                fprintf(stderr, "plan_dump: worker %u: the seek to %zu failed: %s\n", w, q, err.msg);
                return 1;
            }
            for (size_t k = q; k < ps.n && status == 0; k++) {
                if (feed_stream_next(st, &pc, &err) != 0) {
                    fprintf(stderr, "plan_dump: worker %u: after the seek to %zu, no piece %zu\n", w, q, k);
                    status = 1;
                } else if (k == q) {
                    print_piece(&pc);
                } else if (!same_piece(&pc, &ps, k)) {
                    fprintf(stderr, "plan_dump: worker %u: after the seek to %zu, piece %zu differs from iteration's\n",
                            w, q, k);
                    status = 1;
                }
            }
            feed_stream_destroy(st);
        }
        free(ps.v);
        free(ps.first);
        free(ps.elems);
        memset(&ps, 0, sizeof ps);
    }
    return status;
}

int main(int argc, char **argv)
{
    int seek = argc == 3 && strcmp(argv[1], "--seek") == 0;
    if (argc != 2 + seek) {
        fprintf(stderr, "usage: plan_dump [--seek] CONFIG-JSON-or-PATH\n");
        return 2;
    }
    json_error_t jerr;
    const char *arg = argv[1 + seek];
    while (*arg == ' ' || *arg == '\t' || *arg == '\n')
        arg++;
    json_t *root = *arg == '{' ? json_loads(arg, 0, &jerr) : json_load_file(arg, 0, &jerr);
    if (root == NULL || !json_is_object(root)) {
        fprintf(stderr, "plan_dump: bad config: %s (line %d)\n", root ? "not an object" : jerr.text, jerr.line);
        return 2;
    }

    struct feed_plan_config cfg;
    memset(&cfg, 0, sizeof cfg);
    json_t *counts = json_object_get(root, "counts");
    size_t n = json_is_array(counts) ? json_array_size(counts) : 0;
    uint64_t *cv = sl_calloc(n ? n : 1, sizeof *cv);
    for (size_t i = 0; i < n; i++)
        cv[i] = (uint64_t)json_integer_value(json_array_get(counts, i));
    cfg.nfiles = n;
    cfg.counts = cv;

    long long v[12];
    int bad = get_int(root, "source_is_files", 1, &v[0]) || get_int(root, "G", 0, &v[1]) ||
              get_int(root, "drop_remainder", 0, &v[2]) || get_int(root, "shuffle_buffer", 0, &v[3]) ||
              get_int(root, "reshuffle", 1, &v[4]) || get_int(root, "epochs", 1, &v[5]) ||
              get_int(root, "parallel_reads", 1, &v[6]) || get_int(root, "per_replica", 0, &v[7]) ||
              get_int(root, "W", 0, &v[8]) || get_int(root, "R", 0, &v[9]) ||
              get_int(root, "forever_epochs", 2, &v[10]) || get_seed(root, &cfg.seed) ||
              feed_policy_parse(get_str(root, "policy", "auto"), &cfg.policy) ||
              feed_hint_parse(get_str(root, "hint", "files"), &cfg.hint) ||
              feed_pr_shard_parse(get_str(root, "pr_shard", "none"), &cfg.pr_shard);
    if (bad) {
        fprintf(stderr, "plan_dump: bad config value\n");
        sl_free(cv);
        json_decref(root);
        return 2;
    }
    cfg.source_is_files = (int)v[0];
    cfg.global_batch = (uint64_t)v[1];
    cfg.drop_remainder = (int)v[2];
    cfg.shuffle_buffer = (uint64_t)v[3];
    cfg.reshuffle_each_epoch = (int)v[4];
    cfg.epochs = (uint64_t)v[5];
    cfg.parallel_reads = (uint32_t)v[6];
    cfg.per_replica_input = (int)v[7];
    cfg.workers = (uint32_t)v[8];
    cfg.replicas = (uint32_t)v[9];

    long long x[4];
    int rc;
    if (json_object_get(root, "from_W") != NULL) {
        if (get_int(root, "from_W", 0, &x[0]) || get_int(root, "from_R", 0, &x[1]) ||
            get_int(root, "from_epoch", 0, &x[2]) || get_int(root, "from_step", 0, &x[3])) {
            sl_free(cv);
            json_decref(root);
            return 2;
        }
        struct feed_transition tr = {.from_workers = (uint32_t)x[0],
                                     .from_replicas = (uint32_t)x[1],
                                     .from_epoch = (uint64_t)x[2],
                                     .from_step = (uint64_t)x[3]};
        rc = dump_transition(&cfg, &tr, (uint64_t)v[10], seek);
    } else {
        rc = dump(&cfg, (uint64_t)v[10], seek);
    }
    sl_free(cv);
    json_decref(root);
    return rc;
}
