/* sl_env: Slurm node lists and task placement, TF_CONFIG checked, and the
 * TF_CONFIG-compatible spec both give (sl_env.h).
 *
 * A node list is read twice: the first pass checks the text and counts the
 * hosts and their bytes without allocating (so a hostile range costs a
 * scan, never memory), the second, over text known to be good, writes the
 * names into one block sized by the first. Each name's bracket groups are
 * walked as an odometer: a cursor per group holds its current range and
 * value, so expansion is linear in its output.
 */
#include "sl_env.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "sl_alloc.h"
#include "sl_buf.h"
#include "sl_json.h"

#define SHOWN 64 /* bytes of a name or value quoted in a message */

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Letters, digits, '-', '.', '_': what a node name may hold here (an
 * endpoint's host part; never ':', '/', quotes or blanks). */
static int host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '-' || c == '.' || c == '_';
}

/* A byte for a message: itself when printable, else \xNN; "end of text"
 * for the terminating NUL. */
static const char *show_char(char c, char buf[8])
{
    if (c == '\0')
        return "end of text";
    if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f && c != '\'')
        snprintf(buf, 8, "'%c'", c);
    else
        snprintf(buf, 8, "'\\x%02x'", (unsigned char)c);
    return buf;
}

static size_t ndigits(uint64_t v)
{
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

static const char *env_get(const char *const *envp, const char *name)
{
    if (envp == NULL)
        return getenv(name);
    size_t len = strlen(name);
    for (; *envp != NULL; envp++)
        if (strncmp(*envp, name, len) == 0 && (*envp)[len] == '=')
            return *envp + len + 1;
    return NULL;
}

/* The first of `names` that is set: its value, and *which its name. */
static const char *env_first(const char *const *envp, const char *const *names, size_t n, const char **which)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = env_get(envp, names[i]);
        if (v != NULL) {
            *which = names[i];
            return v;
        }
    }
    *which = names[0];
    return NULL;
}

/* ---- node lists ---- */

struct group {
    size_t open, close; /* offsets of '[' and ']' */
    uint64_t count;     /* values in the group */
    size_t width;       /* bytes of its widest value */
};

struct entry {
    size_t start, end; /* the name's text: [start, end) */
    int ngroups;
    struct group g[SL_ENV_MAX_GROUPS];
    uint64_t count; /* hosts it expands to */
    size_t maxlen;  /* bytes of its longest host name */
};

/* Digits at text + p (the caller saw the first): *v, *nd digits; *p after. */
static int read_number(const char *text, size_t *p, uint64_t *v, size_t *nd, const char *what, struct sl_error *err)
{
    size_t s = *p, n = 0;
    uint64_t x = 0;
    while (is_digit(text[s + n])) {
        if (n == SL_ENV_MAX_DIGITS) {
            size_t all = n;
            while (is_digit(text[s + all]))
                all++;
            return sl_error_set(err, SL_EINVAL, "%s: number '%.*s%s' at offset %zu is longer than %d digits", what,
                                (int)(all < SHOWN ? all : SHOWN), text + s, all > SHOWN ? "..." : "", s,
                                SL_ENV_MAX_DIGITS);
        }
        x = x * 10 + (uint64_t)(text[s + n] - '0');
        n++;
    }
    *v = x;
    *nd = n;
    *p = s + n;
    return 0;
}

static int unclosed(size_t open, const char *what, struct sl_error *err)
{
    return sl_error_set(err, SL_EINVAL, "%s: '[' at offset %zu is never closed", what, open);
}

/* One bracket group, text[open] == '[': its ranges checked and counted. */
static int parse_group(const char *text, size_t open, struct group *g, const char *what, struct sl_error *err)
{
    char cb[8];
    size_t p = open + 1;
    g->open = open;
    g->count = 0;
    g->width = 0;
    for (;;) {
        char c = text[p];
        if (c == '\0')
            return unclosed(open, what, err);
        if (c == ',' || c == ']')
            return sl_error_set(err, SL_EINVAL, "%s: empty range at offset %zu", what, p);
        if (!is_digit(c))
            return sl_error_set(err, SL_EINVAL, "%s: expected a number at offset %zu, got %s", what, p,
                                show_char(c, cb));
        size_t rs = p, dlo = 0, dhi = 0;
        uint64_t lo = 0, hi = 0;
        int rc = read_number(text, &p, &lo, &dlo, what, err);
        if (rc != 0)
            return rc;
        hi = lo;
        if (text[p] == '-') {
            c = text[++p];
            if (c == '\0')
                return unclosed(open, what, err);
            if (c == ',' || c == ']')
                return sl_error_set(err, SL_EINVAL, "%s: range '%.*s' at offset %zu has no upper bound", what,
                                    (int)(p - rs), text + rs, rs);
            if (!is_digit(c))
                return sl_error_set(err, SL_EINVAL, "%s: expected a number at offset %zu, got %s", what, p,
                                    show_char(c, cb));
            if ((rc = read_number(text, &p, &hi, &dhi, what, err)) != 0)
                return rc;
        }
        if (hi < lo)
            return sl_error_set(err, SL_EINVAL, "%s: reversed range '%.*s' at offset %zu", what, (int)(p - rs),
                                text + rs, rs);
        if (hi - lo >= SL_ENV_MAX_HOSTS - g->count) /* hi - lo + 1 > what is left */
            return sl_error_set(err, SL_EINVAL, "%s: more than %d hosts: the range '%.*s' at offset %zu", what,
                                SL_ENV_MAX_HOSTS, (int)(p - rs), text + rs, rs);
        g->count += hi - lo + 1;
        size_t w = ndigits(hi) > dlo ? ndigits(hi) : dlo;
        if (w > g->width)
            g->width = w;
        c = text[p];
        if (c == ']') {
            g->close = p;
            return 0;
        }
        if (c == ',') {
            p++;
            continue;
        }
        if (c == '\0')
            return unclosed(open, what, err);
        if (c == '[')
            return sl_error_set(err, SL_EINVAL, "%s: '[' inside brackets at offset %zu", what, p);
        return sl_error_set(err, SL_EINVAL, "%s: unexpected character %s at offset %zu in brackets", what,
                            show_char(c, cb), p);
    }
}

/* One name from text + start to the next ',' outside brackets (or the
 * end): checked, its groups found, its hosts counted. */
static int parse_entry(const char *text, size_t start, struct entry *e, const char *what, struct sl_error *err)
{
    char cb[8];
    size_t p = start, len = 0;
    memset(e, 0, sizeof *e);
    e->start = start;
    e->count = 1;
    if (text[p] == ',' || text[p] == '\0')
        return sl_error_set(err, SL_EINVAL, "%s: empty host name at offset %zu", what, p);
    for (;;) {
        char c = text[p];
        if (c == '\0' || c == ',')
            break;
        if (c == '[') {
            if (e->ngroups == SL_ENV_MAX_GROUPS)
                return sl_error_set(err, SL_EINVAL, "%s: more than %d bracket groups in the name at offset %zu", what,
                                    SL_ENV_MAX_GROUPS, start);
            struct group *g = &e->g[e->ngroups++];
            int rc = parse_group(text, p, g, what, err);
            if (rc != 0)
                return rc;
            if (g->count > SL_ENV_MAX_HOSTS / e->count) {
                size_t n = g->close + 1 - start;
                return sl_error_set(err, SL_EINVAL, "%s: more than %d hosts: the name '%.*s%s' at offset %zu", what,
                                    SL_ENV_MAX_HOSTS, (int)(n < SHOWN ? n : SHOWN), text + start,
                                    n > SHOWN ? "..." : "", start);
            }
            e->count *= g->count;
            len += g->width;
            p = g->close + 1;
            continue;
        }
        if (c == ']')
            return sl_error_set(err, SL_EINVAL, "%s: ']' without '[' at offset %zu", what, p);
        if (!host_char(c))
            return sl_error_set(err, SL_EINVAL, "%s: unexpected character %s at offset %zu", what, show_char(c, cb), p);
        len++;
        p++;
    }
    e->end = p;
    e->maxlen = len;
    if (len > SL_ENV_MAX_HOST) {
        size_t n = p - start;
        return sl_error_set(err, SL_EINVAL, "%s: the name '%.*s%s' at offset %zu is longer than %d bytes", what,
                            (int)(n < SHOWN ? n : SHOWN), text + start, n > SHOWN ? "..." : "", start, SL_ENV_MAX_HOST);
    }
    return 0;
}

/* A group's cursor: the current range [v .. hi] of width `width`, the
 * offset after that range's text (',' or ']'). */
struct cursor {
    uint64_t v, hi;
    size_t width, next;
};

/* Load the range at text + p (checked already). */
static void cursor_load(const char *text, size_t p, struct cursor *c)
{
    uint64_t v = 0;
    size_t s = p;
    while (is_digit(text[p]))
        v = v * 10 + (uint64_t)(text[p++] - '0');
    c->v = c->hi = v;
    c->width = p - s;
    if (text[p] == '-') {
        uint64_t h = 0;
        p++;
        while (is_digit(text[p]))
            h = h * 10 + (uint64_t)(text[p++] - '0');
        c->hi = h;
    }
    c->next = p;
}

/* Write v zero-padded to `width` at out; returns the bytes written. */
static size_t put_number(char *out, uint64_t v, size_t width)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    size_t w = 0;
    for (; n + w < width; w++)
        out[w] = '0';
    while (n > 0)
        out[w++] = tmp[--n];
    return w;
}

/* Every host of a checked entry, appended at *at (room known). */
static void expand_entry(const char *text, const struct entry *e, struct sl_env_hosts *h, char **at)
{
    struct cursor cur[SL_ENV_MAX_GROUPS];
    for (int k = 0; k < e->ngroups; k++)
        cursor_load(text, e->g[k].open + 1, &cur[k]);
    for (;;) {
        char *out = *at;
        size_t p = e->start;
        for (int k = 0; k < e->ngroups; k++) {
            memcpy(out, text + p, e->g[k].open - p);
            out += e->g[k].open - p;
            out += put_number(out, cur[k].v, cur[k].width);
            p = e->g[k].close + 1;
        }
        memcpy(out, text + p, e->end - p);
        out += e->end - p;
        *out++ = '\0';
        h->names[h->n++] = *at;
        *at = out;
        int k = e->ngroups - 1;
        for (; k >= 0; k--) {
            if (cur[k].v < cur[k].hi) {
                cur[k].v++;
                break;
            }
            if (text[cur[k].next] == ',') {
                cursor_load(text, cur[k].next + 1, &cur[k]);
                break;
            }
            cursor_load(text, e->g[k].open + 1, &cur[k]); /* wrap; carry to the group before */
        }
        if (k < 0)
            break;
    }
    h->names[h->n] = NULL;
}

int sl_env_nodelist(struct sl_env_hosts *h, const char *text, const char *what, struct sl_error *err)
{
    memset(h, 0, sizeof *h);
    if (text == NULL || text[0] == '\0')
        return sl_error_set(err, SL_EINVAL, "%s: empty node list", what);
    uint64_t total = 0, bytes = 0;
    struct entry e;
    for (size_t p = 0;;) {
        int rc = parse_entry(text, p, &e, what, err);
        if (rc != 0)
            return rc;
        if (e.count > SL_ENV_MAX_HOSTS - total) {
            size_t n = e.end - e.start;
            return sl_error_set(err, SL_EINVAL, "%s: more than %d hosts: the name '%.*s%s' at offset %zu", what,
                                SL_ENV_MAX_HOSTS, (int)(n < SHOWN ? n : SHOWN), text + e.start, n > SHOWN ? "..." : "",
                                e.start);
        }
        total += e.count;
        bytes += e.count * (e.maxlen + 1);
        if (text[e.end] == '\0')
            break;
        p = e.end + 1;
    }
    h->names = sl_malloc((size_t)(total + 1) * sizeof *h->names + (size_t)bytes);
    if (h->names == NULL)
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory for %llu host names", what, (unsigned long long)total);
    char *at = (char *)(h->names + total + 1);
    for (size_t p = 0;;) {
        if (parse_entry(text, p, &e, what, err) != 0) /* checked above: cannot fail */
            break;
        expand_entry(text, &e, h, &at);
        if (text[e.end] == '\0')
            break;
        p = e.end + 1;
    }
    return 0;
}

void sl_env_hosts_free(struct sl_env_hosts *h)
{
    sl_free(h->names);
    memset(h, 0, sizeof *h);
}

/* ---- tasks per node ---- */

/* A count of 1 to SL_ENV_MAX_HOSTS at text + *p (at most 6 digits read). */
static int read_count(const char *text, size_t *p, uint64_t *v, const char *what, struct sl_error *err)
{
    char cb[8];
    size_t s = *p, n = 0;
    if (!is_digit(text[s]))
        return sl_error_set(err, SL_EINVAL, "%s: expected a count at offset %zu, got %s", what, s,
                            show_char(text[s], cb));
    while (is_digit(text[s + n]))
        n++;
    uint64_t x = 0;
    for (size_t i = 0; i < n && i < 7; i++)
        x = x * 10 + (uint64_t)(text[s + i] - '0');
    if (n > 6 || x < 1 || x > SL_ENV_MAX_HOSTS)
        return sl_error_set(err, SL_EINVAL, "%s: count '%.*s%s' at offset %zu is not in [1, %d]", what,
                            (int)(n < SHOWN ? n : SHOWN), text + s, n > SHOWN ? "..." : "", s, SL_ENV_MAX_HOSTS);
    *v = x;
    *p = s + n;
    return 0;
}

int sl_env_tasks_per_node(uint32_t **counts, size_t *n, const char *text, const char *what, struct sl_error *err)
{
    char cb[8];
    *counts = NULL;
    *n = 0;
    if (text == NULL || text[0] == '\0')
        return sl_error_set(err, SL_EINVAL, "%s: empty", what);
    /* pass 1 checks and counts; pass 2 fills */
    for (int pass = 0; pass < 2; pass++) {
        uint64_t nodes = 0, tasks = 0;
        for (size_t p = 0;;) {
            size_t at = p;
            uint64_t c, rep = 1;
            int rc = read_count(text, &p, &c, what, err);
            if (rc != 0)
                return rc;
            if (text[p] == '(') {
                if (text[p + 1] != 'x')
                    return sl_error_set(err, SL_EINVAL, "%s: expected '(x' at offset %zu", what, p);
                p += 2;
                if ((rc = read_count(text, &p, &rep, what, err)) != 0)
                    return rc;
                if (text[p] != ')')
                    return sl_error_set(err, SL_EINVAL, "%s: expected ')' at offset %zu, got %s", what, p,
                                        show_char(text[p], cb));
                p++;
            }
            if (rep > SL_ENV_MAX_HOSTS - nodes || c * rep > SL_ENV_MAX_HOSTS - tasks)
                return sl_error_set(err, SL_EINVAL, "%s: more than %d nodes or tasks at offset %zu", what,
                                    SL_ENV_MAX_HOSTS, at);
            for (uint64_t r = 0; pass == 1 && r < rep; r++)
                (*counts)[nodes + r] = (uint32_t)c;
            nodes += rep;
            tasks += c * rep;
            if (text[p] == '\0')
                break;
            if (text[p] != ',')
                return sl_error_set(err, SL_EINVAL, "%s: unexpected character %s at offset %zu", what,
                                    show_char(text[p], cb), p);
            p++;
        }
        if (pass == 0 && (*counts = sl_calloc((size_t)nodes, sizeof **counts)) == NULL)
            return sl_error_set(err, SL_ENOMEM, "%s: out of memory", what);
        *n = (size_t)nodes;
    }
    return 0;
}

/* ---- the Slurm step ---- */

static int env_u32(const char *const *envp, const char *const *names, size_t nnames, uint64_t min, uint64_t max,
                   uint32_t *out, const char **which, struct sl_error *err)
{
    const char *v = env_first(envp, names, nnames, which);
    if (v == NULL)
        return sl_error_set(err, SL_EINVAL, "%s is not set (is this a task started by srun?)", names[0]);
    uint64_t u;
    if (sl_opt_parse_u64(v, min, max, &u, err) != 0)
        return sl_error_prefix(err, "%s: ", *which);
    *out = (uint32_t)u;
    return 0;
}

static int slurm_place(struct sl_env_slurm *s, const char *const *envp, const char *list_var, struct sl_error *err)
{
    static const char *const tpn_vars[] = {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"};
    const char *tpn_var, *tpn = env_first(envp, tpn_vars, 2, &tpn_var);
    uint32_t *counts = NULL;
    size_t ncounts = 0;
    int rc = 0;
    if (tpn == NULL && s->ntasks != s->hosts.n)
        return sl_error_set(err, SL_EINVAL,
                            "SLURM_STEP_TASKS_PER_NODE is not set and the %u tasks are not one per "
                            "node of the %zu in %s: cannot tell which task runs where",
                            s->ntasks, s->hosts.n, list_var);
    if (tpn != NULL && (rc = sl_env_tasks_per_node(&counts, &ncounts, tpn, tpn_var, err)) != 0)
        return rc;
    uint64_t sum = 0;
    int all_one = 1;
    for (size_t i = 0; i < ncounts; i++) {
        sum += counts[i];
        all_one &= counts[i] == 1;
    }
    if (tpn != NULL && ncounts != s->hosts.n)
        rc = sl_error_set(err, SL_EINVAL, "%s gives %zu nodes, but %s lists %zu", tpn_var, ncounts, list_var,
                          s->hosts.n);
    else if (tpn != NULL && sum != s->ntasks)
        rc = sl_error_set(err, SL_EINVAL, "%s adds up to %llu tasks, but the step has %u (SLURM_NTASKS)", tpn_var,
                          (unsigned long long)sum, s->ntasks);
    const char *dist = env_get(envp, "SLURM_DISTRIBUTION");
    if (rc == 0 && dist != NULL && !all_one) {
        size_t kind = strcspn(dist, ":,");
        if (kind == 6 && strncmp(dist, "cyclic", 6) == 0)
            s->cyclic = 1;
        else if (!(kind == 5 && strncmp(dist, "block", 5) == 0))
            rc = sl_error_set(err, SL_EINVAL,
                              "SLURM_DISTRIBUTION '%.*s%s': tasks are placed from the tasks per node "
                              "for block or cyclic distributions only (srun --distribution=block)",
                              (int)(strlen(dist) < SHOWN ? strlen(dist) : SHOWN), dist,
                              strlen(dist) > SHOWN ? "..." : "");
    }
    if (rc == 0 && (s->node = sl_calloc(s->ntasks, sizeof *s->node)) == NULL)
        rc = sl_error_set(err, SL_ENOMEM, "out of memory");
    if (rc == 0 && tpn == NULL) {
        for (uint32_t t = 0; t < s->ntasks; t++)
            s->node[t] = t;
    } else if (rc == 0 && !s->cyclic) {
        uint32_t t = 0;
        for (size_t k = 0; k < ncounts; k++)
            for (uint32_t i = 0; i < counts[k]; i++)
                s->node[t++] = (uint32_t)k;
    } else if (rc == 0) { /* round-robin over the nodes that still have room */
        uint32_t t = 0;
        for (uint32_t round = 0; t < s->ntasks; round++)
            for (size_t k = 0; k < ncounts && t < s->ntasks; k++)
                if (counts[k] > round)
                    s->node[t++] = (uint32_t)k;
    }
    sl_free(counts);
    return rc;
}

int sl_env_slurm_read(struct sl_env_slurm *s, const char *const *envp, struct sl_error *err)
{
    static const char *const procid_vars[] = {"SLURM_PROCID"};
    static const char *const ntasks_vars[] = {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"};
    static const char *const list_vars[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"};
    const char *which, *list_var;
    memset(s, 0, sizeof *s);
    int rc = env_u32(envp, procid_vars, 1, 0, SL_ENV_MAX_HOSTS - 1, &s->procid, &which, err);
    if (rc == 0)
        rc = env_u32(envp, ntasks_vars, 3, 1, SL_ENV_MAX_HOSTS, &s->ntasks, &which, err);
    if (rc == 0 && s->procid >= s->ntasks)
        rc = sl_error_set(err, SL_EINVAL, "SLURM_PROCID %u is not below %s %u", s->procid, which, s->ntasks);
    const char *list = rc == 0 ? env_first(envp, list_vars, 3, &list_var) : NULL;
    if (rc == 0 && list == NULL)
        rc = sl_error_set(err, SL_EINVAL, "SLURM_JOB_NODELIST is not set (is this a task started by srun?)");
    if (rc == 0)
        rc = sl_env_nodelist(&s->hosts, list, list_var, err);
    if (rc == 0)
        rc = slurm_place(s, envp, list_var, err);
    const char *self = rc == 0 ? env_get(envp, "SLURMD_NODENAME") : NULL;
    if (self != NULL && strcmp(self, s->hosts.names[s->node[s->procid]]) != 0)
        rc = sl_error_set(err, SL_EINVAL,
                          "task %u would run on '%s' by the tasks per node (%s placement), but "
                          "SLURMD_NODENAME is '%.*s%s' (srun --distribution=block, docs/deploy.md)",
                          s->procid, s->hosts.names[s->node[s->procid]], s->cyclic ? "cyclic" : "block",
                          (int)(strlen(self) < SHOWN ? strlen(self) : SHOWN), self, strlen(self) > SHOWN ? "..." : "");
    if (rc != 0)
        sl_env_slurm_free(s);
    return rc;
}

void sl_env_slurm_free(struct sl_env_slurm *s)
{
    sl_env_hosts_free(&s->hosts);
    sl_free(s->node);
    memset(s, 0, sizeof *s);
}

/* ---- layout and spec ---- */

int sl_env_layout_parse(struct sl_env_layout *l, const char *text, struct sl_error *err)
{
    static const char *const keys[] = {"feeders", "feeder-port", "ring-port"};
    static const uint64_t min[] = {1, 1, 1}, max[] = {SL_ENV_MAX_FEEDERS, 65535, 65535};
    uint32_t *fields[] = {&l->feeders, &l->feeder_port, &l->ring_port};
    int seen[3] = {0, 0, 0};
    l->feeders = 1;
    l->feeder_port = 5555;
    l->ring_port = 7000;
    for (const char *p = text; *p != '\0';) {
        size_t len = strcspn(p, ","), klen = strcspn(p, "=,");
        int shown = (int)(len < SHOWN ? len : SHOWN);
        if (klen == len || klen == 0)
            return sl_error_set(err, SL_EINVAL, "slurm layout: expected KEY=VALUE, got '%.*s'", shown, p);
        int k = 0;
        while (k < 3 && !(strlen(keys[k]) == klen && strncmp(keys[k], p, klen) == 0))
            k++;
        if (k == 3)
            return sl_error_set(err, SL_EINVAL,
                                "slurm layout: unknown key '%.*s' (expected feeders, feeder-port or "
                                "ring-port)",
                                (int)(klen < SHOWN ? klen : SHOWN), p);
        if (seen[k]++)
            return sl_error_set(err, SL_EINVAL, "slurm layout: '%s' given twice", keys[k]);
        char value[32];
        size_t vlen = len - klen - 1;
        uint64_t v;
        snprintf(value, sizeof value, "%.*s", (int)(vlen < sizeof value ? vlen : sizeof value - 1), p + klen + 1);
        if (vlen >= sizeof value)
            return sl_error_set(err, SL_EINVAL, "slurm layout: %s: value '%.*s...' is too long", keys[k], 16, value);
        if (sl_opt_parse_u64(value, min[k], max[k], &v, err) != 0)
            return sl_error_prefix(err, "slurm layout: %s: ", keys[k]);
        *fields[k] = (uint32_t)v;
        p += len;
        if (*p == ',' && *++p == '\0')
            return sl_error_set(err, SL_EINVAL, "slurm layout: empty item after the last ','");
    }
    return 0;
}

static int put_endpoint(struct sl_buf *b, const char *host, uint32_t port, int first)
{
    char ep[SL_ENV_MAX_HOST + 32];
    int n = snprintf(ep, sizeof ep, "tcp://%s:%u", host, port);
    int rc = first ? 0 : sl_buf_putc(b, ',');
    return rc != 0 ? rc : sl_json_string(b, ep, (size_t)n);
}

int sl_env_slurm_spec(char **spec, const struct sl_env_slurm *s, const struct sl_env_layout *l, struct sl_error *err)
{
    *spec = NULL;
    uint32_t F = l->feeders;
    if (F >= s->ntasks)
        return sl_error_set(err, SL_EINVAL,
                            "slurm layout: feeders=%u leaves no task for a trainer worker: the step "
                            "has %u tasks",
                            F, s->ntasks);
    uint32_t W = s->ntasks - F;
    if (l->feeder_port + F - 1 > 65535)
        return sl_error_set(err, SL_EINVAL, "slurm layout: feeder-port %u + %u feeders passes port 65535",
                            l->feeder_port, F);
    if (l->ring_port + W - 1 > 65535)
        return sl_error_set(err, SL_EINVAL, "slurm layout: ring-port %u + %u workers passes port 65535", l->ring_port,
                            W);
    if (l->feeder_port <= l->ring_port + W - 1 && l->ring_port <= l->feeder_port + F - 1)
        return sl_error_set(err, SL_EINVAL, "slurm layout: feeder ports %u-%u and ring ports %u-%u overlap",
                            l->feeder_port, l->feeder_port + F - 1, l->ring_port, l->ring_port + W - 1);
    struct sl_buf b;
    sl_buf_init(&b, (size_t)64 << 20);
    int rc = sl_buf_puts(&b, "{\"cluster\":{\"feeder\":[");
    for (uint32_t j = 0; rc == 0 && j < F; j++)
        rc = put_endpoint(&b, s->hosts.names[s->node[j]], l->feeder_port + j, j == 0);
    if (rc == 0)
        rc = sl_buf_puts(&b, "],\"worker\":[");
    for (uint32_t w = 0; rc == 0 && w < W; w++)
        rc = put_endpoint(&b, s->hosts.names[s->node[F + w]], l->ring_port + w, w == 0);
    if (rc == 0)
        rc = sl_buf_printf(&b, "]},\"task\":{\"type\":\"%s\",\"index\":%u}}", s->procid < F ? "feeder" : "worker",
                           s->procid < F ? s->procid : s->procid - F);
    if (rc == 0)
        rc = sl_buf_putc(&b, '\0');
    if (rc != 0) {
        sl_buf_free(&b);
        return sl_error_set(err, SL_ENOMEM, "out of memory for the cluster spec");
    }
    *spec = (char *)b.data;
    return 0;
}

/* ---- TF_CONFIG ---- */

static int tf_config_check(json_t *root, struct sl_error *err)
{
    if (!json_is_object(root))
        return sl_error_set(err, SL_EINVAL, "TF_CONFIG: not a JSON object");
    json_t *cluster = json_object_get(root, "cluster");
    if (!json_is_object(cluster))
        return sl_error_set(err, SL_EINVAL, "TF_CONFIG: 'cluster' must be an object");
    const char *key;
    json_t *v;
    json_object_foreach(cluster, key, v)
    {
        if (json_is_array(v) && json_array_size(v) > SL_ENV_MAX_HOSTS)
            return sl_error_set(err, SL_EINVAL, "TF_CONFIG: 'cluster.%.*s' lists %zu tasks, at most %d", SHOWN, key,
                                json_array_size(v), SL_ENV_MAX_HOSTS);
    }
    json_t *task = json_object_get(root, "task");
    if (!json_is_object(task))
        return sl_error_set(err, SL_EINVAL,
                            "TF_CONFIG: 'task' must be an object with 'type' and 'index' (which task "
                            "is this process?)");
    json_t *type = json_object_get(task, "type"), *index = json_object_get(task, "index");
    if (!json_is_string(type) || json_string_length(type) == 0 || json_string_length(type) > 31)
        return sl_error_set(err, SL_EINVAL, "TF_CONFIG: 'task.type' must be a string of 1 to 31 bytes");
    if (!json_is_integer(index) || json_integer_value(index) < 0 || json_integer_value(index) > SL_ENV_MAX_HOSTS - 1)
        return sl_error_set(err, SL_EINVAL, "TF_CONFIG: 'task.index' must be an integer in [0, %d]",
                            SL_ENV_MAX_HOSTS - 1);
    return 0;
}

int sl_env_tf_config_spec(char **spec, const char *const *envp, struct sl_error *err)
{
    *spec = NULL;
    const char *text = env_get(envp, "TF_CONFIG");
    if (text == NULL)
        return sl_error_set(err, SL_EINVAL, "TF_CONFIG is not set");
    size_t len = strnlen(text, SL_ENV_MAX_TF_CONFIG + 1);
    if (len > SL_ENV_MAX_TF_CONFIG)
        return sl_error_set(err, SL_EINVAL, "TF_CONFIG is longer than %u bytes", SL_ENV_MAX_TF_CONFIG);
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL)
        return sl_error_set(err, SL_EINVAL, "TF_CONFIG:%d:%d: %s", je.line, je.column, je.text);
    int rc = tf_config_check(root, err);
    char *dumped = rc == 0 ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (rc != 0)
        return rc;
    if (dumped == NULL || (*spec = sl_strdup(dumped)) == NULL)
        rc = sl_error_set(err, SL_ENOMEM, "out of memory for the cluster spec");
    free(dumped); /* jansson's own allocation */
    return rc;
}

int sl_env_cluster_spec(char **spec, const char *source, const char *const *envp, struct sl_error *err)
{
    *spec = NULL;
    if (strcmp(source, "tf_config") == 0)
        return sl_env_tf_config_spec(spec, envp, err);
    if (strcmp(source, "slurm") != 0 && (strncmp(source, "slurm:", 6) != 0 || source[6] == '\0'))
        return sl_error_set(err, SL_EINVAL, "expected slurm, slurm:KEY=VALUE,... or tf_config, got '%.*s%s'", SHOWN,
                            source, strlen(source) > SHOWN ? "..." : "");
    struct sl_env_layout l;
    struct sl_env_slurm s;
    int rc = sl_env_layout_parse(&l, source[5] == ':' ? source + 6 : "", err);
    if (rc == 0 && (rc = sl_env_slurm_read(&s, envp, err)) == 0) {
        rc = sl_env_slurm_spec(spec, &s, &l, err);
        sl_env_slurm_free(&s);
    }
    return rc;
}

int sl_env_refuse_given(const struct sl_opt_cmd *cmd, uint64_t given, const char *source, const char *const *names,
                        size_t n, struct sl_error *err)
{
    for (size_t i = 0; i < n; i++) {
        if (!sl_opt_given(cmd, given, names[i]))
            continue;
        if (strcmp(names[i], "cluster") == 0)
            return sl_error_set(err, SL_EINVAL, "give --cluster-from or --cluster, not both");
        char list[512] = "";
        size_t used = 0, m = 0, shown = 0;
        for (size_t k = 0; k < n; k++)
            m += strcmp(names[k], "cluster") != 0;
        for (size_t k = 0; k < n && used < sizeof list; k++) {
            if (strcmp(names[k], "cluster") == 0)
                continue;
            shown++;
            int w = snprintf(list + used, sizeof list - used, "%s--%s",
                             shown == 1   ? ""
                             : shown == m ? " and "
                                          : ", ",
                             names[k]);
            used += w > 0 ? (size_t)w : 0;
        }
        return sl_error_set(err, SL_EINVAL, "--cluster-from %.*s gives %s: give it or --%s, not both",
                            (int)strcspn(source, ":"), source, list, names[i]);
    }
    return 0;
}
