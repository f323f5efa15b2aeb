/* sl_opt: one option table drives defaults, parsing and --help.
 *
 * A row's default and a command-line value go through the same setter
 * (set_value), so a default that would not parse fails like a user's
 * value. Names are matched whole: getopt_long's abbreviations let "--conn"
 * mean --connect and would let a typo mean something else, so an unknown
 * name is an error that names the nearest known one (an edit distance of 1
 * for short names, 2 for longer ones, or a name it is a prefix of).
 * --version's lines come from sl_version.h, which CMake generates at
 * configure time (the version, `git describe`, the build type and the
 * optional parts found).
 */
#include "sl_opt.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sl_version.h"

#define HELP_COL 27   /* where help text starts */
#define HELP_WIDTH 79 /* the last column used */
#define NAME_MAX_LEN 256

static int takes_value(const struct sl_opt *o)
{
    return o->type != SL_OPT_FLAG && o->type != SL_OPT_HELP && o->type != SL_OPT_VERSION;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* ---- numbers ---- */

int sl_opt_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out, struct sl_error *err)
{
    const char *p = s[0] == '-' ? s + 1 : s;
    size_t n = strspn(p, "0123456789");
    if (n == 0 || p[n] != '\0')
        return sl_error_set(err, SL_EINVAL, "not an integer: '%s'", s);
    errno = 0;
    unsigned long long v = strtoull(p, NULL, 10);
    if (p != s || errno == ERANGE || v < min || v > max)
        return sl_error_set(err, SL_EINVAL, "must be an integer in [%llu, %llu], got '%s'", (unsigned long long)min,
                            (unsigned long long)max, s);
    *out = (uint64_t)v;
    return 0;
}

int sl_opt_parse_double(const char *s, double min, double max, double *out, struct sl_error *err)
{
    /* strtod also takes blanks, "nan", "inf" and hex; a number here starts
     * like a decimal one */
    const char *p = s[0] == '-' || s[0] == '+' ? s + 1 : s;
    char *end = NULL;
    errno = 0;
    double v = is_digit(p[0]) || (p[0] == '.' && is_digit(p[1])) ? strtod(s, &end) : 0;
    if (end == NULL || *end != '\0' || strchr(s, 'x') != NULL || strchr(s, 'X') != NULL)
        return sl_error_set(err, SL_EINVAL, "not a number: '%s'", s);
    if (!isfinite(v))
        return sl_error_set(err, SL_EINVAL, "not a finite number: '%s'", s);
    if (v < min || v > max)
        return sl_error_set(err, SL_EINVAL, "must be in [%.15g, %.15g], got '%s'", min, max, s);
    *out = v;
    return 0;
}

/* A byte count: digits, then optionally K, M, G or T (powers of 1024). */
static int parse_bytes(const char *s, uint64_t min, uint64_t max, uint64_t *out, struct sl_error *err)
{
    size_t n = strspn(s, "0123456789");
    unsigned shift = 0;
    if (n > 0 && s[n] != '\0' && s[n + 1] == '\0') {
        const char *units = "KMGT", *u = strchr(units, s[n]);
        if (u != NULL)
            shift = 10 * (unsigned)(u - units + 1);
    }
    if (n == 0 || (s[n] != '\0' && shift == 0))
        return sl_error_set(err, SL_EINVAL, "not a byte count (digits, then K, M, G or T): '%s'", s);
    errno = 0;
    unsigned long long v = strtoull(s, NULL, 10);
    if (errno == ERANGE || v > (max >> shift) || ((uint64_t)v << shift) < min)
        return sl_error_set(err, SL_EINVAL, "must be a byte count in [%llu, %llu], got '%s'", (unsigned long long)min,
                            (unsigned long long)max, s);
    *out = (uint64_t)v << shift;
    return 0;
}

/* "a|b|c" -> "a, b or c" */
static void choices_text(const char *choices, char *buf, size_t cap)
{
    size_t used = 0, n = strlen(choices);
    for (size_t i = 0; i < n && used + 5 < cap; i++) {
        if (choices[i] != '|') {
            buf[used++] = choices[i];
            continue;
        }
        const char *sep = strchr(choices + i + 1, '|') ? ", " : " or ";
        used += (size_t)snprintf(buf + used, cap - used, "%s", sep);
    }
    buf[used < cap ? used : cap - 1] = '\0';
}

static int parse_choice(const char *choices, const char *s, int *out, struct sl_error *err)
{
    size_t len = strlen(s);
    int index = 0;
    for (const char *c = choices; c != NULL; c = strchr(c, '|'), index++) {
        if (*c == '|')
            c++;
        size_t clen = strcspn(c, "|");
        if (clen == len && strncmp(c, s, len) == 0) {
            *out = index;
            return 0;
        }
    }
    char expected[256];
    choices_text(choices, expected, sizeof expected);
    return sl_error_set(err, SL_EINVAL, "expected %s, got '%s'", expected, s);
}

/* ---- one row ---- */

static int set_value(const struct sl_opt *o, void *opts, const char *value, struct sl_error *err)
{
    char *field = (char *)opts + o->offset;
    uint64_t u;
    int rc;
    switch (o->type) {
    case SL_OPT_FLAG: *(int *)field = 1; return 0;
    case SL_OPT_STRING: *(const char **)field = value; return 0;
    case SL_OPT_U32:
    case SL_OPT_U64:
    case SL_OPT_INT:
    case SL_OPT_LONG:
        if ((rc = sl_opt_parse_u64(value, (uint64_t)o->min, (uint64_t)o->max, &u, err)) != 0)
            return sl_error_prefix(err, "--%s: ", o->name);
        if (o->type == SL_OPT_U32)
            *(uint32_t *)field = (uint32_t)u;
        else if (o->type == SL_OPT_U64)
            *(uint64_t *)field = u;
        else if (o->type == SL_OPT_INT)
            *(int *)field = (int)u; /* max is an int's */
        else
            *(long *)field = (long)u;
        return 0;
    case SL_OPT_BYTES:
        if ((rc = parse_bytes(value, (uint64_t)o->min, (uint64_t)o->max, (uint64_t *)field, err)) != 0)
            return sl_error_prefix(err, "--%s: ", o->name);
        return 0;
    case SL_OPT_DOUBLE:
        if ((rc = sl_opt_parse_double(value, o->min, o->max, (double *)field, err)) != 0)
            return sl_error_prefix(err, "--%s: ", o->name);
        return 0;
    case SL_OPT_CHOICE:
        if ((rc = parse_choice(o->choices, value, (int *)field, err)) != 0)
            return sl_error_prefix(err, "--%s: ", o->name);
        return 0;
    case SL_OPT_FUNC: return o->fn(opts, value, err);
    case SL_OPT_HELP:
    case SL_OPT_VERSION: return 0;
    }
    return sl_error_set(err, SL_EINVAL, "--%s: bad option table row", o->name);
}

/* ---- names ---- */

/* Optimal string alignment distance (a swap of neighbours counts 1),
 * capped: names longer than NAME_MAX_LEN are far from everything. */
static size_t distance(const char *a, size_t la, const char *b)
{
    size_t lb = strlen(b);
    if (la > 64 || lb > 64)
        return (size_t)-1;
    size_t d[65][65];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] != b[j - 1], best = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* How near s is to name: 0 for a prefix of it, else the distance + 1;
 * (size_t)-1 when too far to suggest. */
static size_t nearness(const char *s, size_t len, const char *name)
{
    if (len >= 2 && strlen(name) > len && strncmp(name, s, len) == 0)
        return 0;
    size_t d = distance(s, len, name), limit = len <= 4 ? 1 : 2;
    return d <= limit ? d + 1 : (size_t)-1;
}

const char *sl_opt_nearest(const char *s, size_t len, const char *const *names, size_t n)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        size_t d = nearness(s, len, names[i]);
        if (d < best_d) {
            best_d = d;
            best = names[i];
        }
    }
    return best;
}

static const struct sl_opt *find_long(const struct sl_opt_cmd *cmd, const char *name, size_t len)
{
    for (size_t i = 0; i < cmd->nrows; i++)
        if (strlen(cmd->rows[i].name) == len && strncmp(cmd->rows[i].name, name, len) == 0)
            return &cmd->rows[i];
    return NULL;
}

static const struct sl_opt *find_short(const struct sl_opt_cmd *cmd, char c)
{
    for (size_t i = 0; i < cmd->nrows; i++)
        if (cmd->rows[i].short_name == c)
            return &cmd->rows[i];
    return NULL;
}

static int is_extra(const struct sl_opt_cmd *cmd, const char *name, size_t len)
{
    if (cmd->extra_fn == NULL)
        return 0;
    for (size_t i = 0; i < cmd->nextra; i++)
        if (strlen(cmd->extra_names[i]) == len && strncmp(cmd->extra_names[i], name, len) == 0)
            return 1;
    size_t plen = cmd->extra_prefix ? strlen(cmd->extra_prefix) : 0;
    return plen > 0 && len > plen && strncmp(name, cmd->extra_prefix, plen) == 0;
}

static int unknown_long(const struct sl_opt_cmd *cmd, const char *name, size_t len, struct sl_error *err)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    for (size_t i = 0; i < cmd->nrows; i++) {
        size_t d = nearness(name, len, cmd->rows[i].name);
        if (d < best_d) {
            best_d = d;
            best = cmd->rows[i].name;
        }
    }
    for (size_t i = 0; cmd->extra_fn != NULL && i < cmd->nextra; i++) {
        size_t d = nearness(name, len, cmd->extra_names[i]);
        if (d < best_d) {
            best_d = d;
            best = cmd->extra_names[i];
        }
    }
    int shown = len > 64 ? 64 : (int)len;
    const char *what = cmd->extra_what ? " or " : "", *extra = cmd->extra_what ? cmd->extra_what : "";
    if (best != NULL)
        return sl_error_set(err, SL_EINVAL, "--%.*s%s: unknown option%s%s; did you mean --%s?", shown, name,
                            shown < (int)len ? "..." : "", what, extra, best);
    return sl_error_set(err, SL_EINVAL, "--%.*s%s: unknown option%s%s", shown, name, shown < (int)len ? "..." : "",
                        what, extra);
}

/* ---- parsing ---- */

static int apply(const struct sl_opt_cmd *cmd, const struct sl_opt *o, void *opts, const char *value, uint64_t *given,
                 struct sl_error *err)
{
    if (o->type == SL_OPT_HELP) {
        sl_opt_help(cmd, stdout);
        return 1;
    }
    if (o->type == SL_OPT_VERSION) {
        sl_opt_version(cmd->prog, stdout);
        return 1;
    }
    int rc = set_value(o, opts, value, err);
    if (rc == 0)
        *given |= (uint64_t)1 << (o - cmd->rows);
    return rc;
}

static int parse_long(const struct sl_opt_cmd *cmd, int argc, char **argv, int *i, void *opts, uint64_t *given,
                      struct sl_error *err)
{
    const char *name = argv[*i] + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const struct sl_opt *o = find_long(cmd, name, len);
    if (o == NULL && !is_extra(cmd, name, len))
        return cmd->pass_fn != NULL && eq != NULL ? cmd->pass_fn(opts, argv[*i], err)
                                                  : unknown_long(cmd, name, len, err);
    const char *value = eq ? eq + 1 : NULL;
    if (o != NULL && !takes_value(o) && value != NULL)
        return sl_error_set(err, SL_EINVAL, "--%s takes no value", o->name);
    if ((o == NULL || takes_value(o)) && value == NULL) {
        if (*i + 1 >= argc)
            return sl_error_set(err, SL_EINVAL, "--%.*s needs a value", (int)len, name);
        value = argv[++*i];
    }
    if (o != NULL)
        return apply(cmd, o, opts, value, given, err);
    if (len >= NAME_MAX_LEN)
        return sl_error_set(err, SL_EINVAL, "--%.64s...: name longer than %d bytes", name, NAME_MAX_LEN - 1);
    char key[NAME_MAX_LEN];
    memcpy(key, name, len);
    key[len] = '\0';
    return cmd->extra_fn(opts, key, value, err);
}

static int parse_short(const struct sl_opt_cmd *cmd, int argc, char **argv, int *i, void *opts, uint64_t *given,
                       struct sl_error *err)
{
    for (const char *p = argv[*i] + 1; *p != '\0'; p++) {
        const struct sl_opt *o = find_short(cmd, *p);
        if (o == NULL)
            return sl_error_set(err, SL_EINVAL, "-%c: unknown option", *p);
        if (!takes_value(o)) {
            int rc = apply(cmd, o, opts, NULL, given, err);
            if (rc != 0)
                return rc;
            continue;
        }
        const char *value = p[1] != '\0' ? p + 1 : NULL;
        if (value == NULL && *i + 1 >= argc)
            return sl_error_set(err, SL_EINVAL, "-%c (--%s) needs a value", *p, o->name);
        return apply(cmd, o, opts, value ? value : argv[++*i], given, err);
    }
    return 0;
}

int sl_opt_parse(const struct sl_opt_cmd *cmd, int argc, char **argv, void *opts, uint64_t *given, struct sl_error *err)
{
    uint64_t mask = 0;
    int rc = 0;
    if (cmd->nrows > 64)
        return sl_error_set(err, SL_EINVAL, "%s: more than 64 options in the table", cmd->prog);
    for (size_t k = 0; k < cmd->nrows; k++) {
        const struct sl_opt *o = &cmd->rows[k];
        if (o->def != NULL && takes_value(o) && (rc = set_value(o, opts, o->def, err)) != 0)
            return sl_error_prefix(err, "default of ");
    }
    for (int i = 1; rc == 0 && i < argc; i++) {
        const char *a = argv[i];
        if (a[0] == '-' && a[1] == '-' && a[2] != '\0')
            rc = parse_long(cmd, argc, argv, &i, opts, &mask, err);
        else if (a[0] == '-' && a[1] != '-' && a[1] != '\0')
            rc = parse_short(cmd, argc, argv, &i, opts, &mask, err);
        else
            rc = sl_error_set(err, SL_EINVAL, "unexpected argument '%s'", a);
    }
    if (given != NULL)
        *given = mask;
    return rc;
}

int sl_opt_given(const struct sl_opt_cmd *cmd, uint64_t given, const char *name)
{
    const struct sl_opt *o = find_long(cmd, name, strlen(name));
    return o != NULL && (given >> (o - cmd->rows) & 1) != 0;
}

/* ---- help and version ---- */

/* Words of text from column `col` to HELP_WIDTH, continuation lines
 * indented to HELP_COL. */
static void wrap(FILE *f, const char *text, size_t col)
{
    const char *p = text;
    while (*p != '\0') {
        p += strspn(p, " ");
        size_t w = strcspn(p, " ");
        if (w == 0)
            break;
        if (col > HELP_COL && col + 1 + w > HELP_WIDTH) {
            fprintf(f, "\n%*s", HELP_COL, "");
            col = HELP_COL;
        } else if (col > HELP_COL) {
            fputc(' ', f);
            col++;
        }
        fwrite(p, 1, w, f);
        col += w;
        p += w;
    }
    fputc('\n', f);
}

void sl_opt_help(const struct sl_opt_cmd *cmd, FILE *f)
{
    fputs(cmd->usage, f);
    for (size_t i = 0; i < cmd->nrows; i++) {
        const struct sl_opt *o = &cmd->rows[i];
        char left[128];
        const char *arg = o->arg ? o->arg : o->choices;
        int n = snprintf(left, sizeof left, "  %c%c%s--%s%s%s", o->short_name ? '-' : ' ',
                         o->short_name ? o->short_name : ' ', o->short_name ? ", " : "  ", o->name,
                         takes_value(o) && arg ? (strchr(arg, '=') ? " " : "=") : "", takes_value(o) && arg ? arg : "");
        size_t col = n > 0 ? (size_t)n : 0;
        fputs(left, f);
        if (col + 2 > HELP_COL) {
            fprintf(f, "\n%*s", HELP_COL, "");
        } else {
            fprintf(f, "%*s", (int)(HELP_COL - col), "");
        }
        char text[1024];
        const char *help = o->help ? o->help : "";
        if (o->def != NULL && strstr(help, "default") == NULL)
            snprintf(text, sizeof text, "%s (default %s)", help, o->def);
        else
            snprintf(text, sizeof text, "%s", help);
        /* the first word goes on the line as it is; wrap() breaks after it */
        wrap(f, text, HELP_COL);
    }
    if (cmd->footer != NULL)
        fputs(cmd->footer, f);
}

void sl_opt_version(const char *prog, FILE *f)
{
    fprintf(f, "%s %s\n", prog, SL_VERSION);
    fprintf(f, "commit: %s\n", SL_VERSION_COMMIT);
    fprintf(f, "build type: %s%s%s\n", SL_VERSION_BUILD_TYPE, SL_VERSION_SANITIZE[0] ? ", sanitizers: " : "",
            SL_VERSION_SANITIZE);
    fprintf(f, "optional parts: CUDA %s, NCCL %s, ISA-L %s\n", SL_VERSION_CUDA ? "yes" : "no",
            SL_VERSION_NCCL ? "yes" : "no", SL_VERSION_ISAL ? "yes" : "no");
}
