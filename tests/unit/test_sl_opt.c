/* The option table: each type with its bounds, strict numbers (huge,
 * negative, empty, trailing junk, not finite), repeated options, the forms
 * of a value (--name=V, --name V, -xV, -x V, flag clusters), unknown
 * options with the nearest suggestion, extra names (the feeder's job keys),
 * and the generated help listing every row. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_opt.h"
#include "sl_test.h"

struct opts {
    const char *name, *path;
    uint32_t count;
    uint64_t big, bytes;
    double rate;
    int verbose, dry, mode;
    char seen[8][64];
    int nseen;
};

static int take_list(void *o, const char *value, struct sl_error *err)
{
    struct opts *p = o;
    if (strchr(value, '!') != NULL)
        return sl_error_set(err, SL_EINVAL, "--list: no '!' please, got '%s'", value);
    snprintf(p->seen[p->nseen++ & 7], sizeof p->seen[0], "list:%s", value);
    return 0;
}

static int take_extra(void *o, const char *name, const char *value, struct sl_error *err)
{
    struct opts *p = o;
    (void)err;
    snprintf(p->seen[p->nseen++ & 7], sizeof p->seen[0], "%s=%s", name, value);
    return 0;
}

#define OFF(f) offsetof(struct opts, f)
static const struct sl_opt rows[] = {
    {"name", 'N', SL_OPT_STRING, OFF(name), 0, 0, "anon", "NAME", "who", NULL, NULL},
    {"path", 0, SL_OPT_STRING, OFF(path), 0, 0, NULL, "FILE", "where", NULL, NULL},
    {"count", 'c', SL_OPT_U32, OFF(count), 1, 100, "5", "N", "how many", NULL, NULL},
    {"big", 0, SL_OPT_U64, OFF(big), 0, 4294967296.0 * 1024, NULL, "N", "a large one", NULL, NULL},
    {"bytes", 0, SL_OPT_BYTES, OFF(bytes), 4096, (double)((uint64_t)1 << 39), NULL, "BYTES", "memory", NULL, NULL},
    {"rate", 0, SL_OPT_DOUBLE, OFF(rate), 0, 1, "0.5", "X", "a fraction", NULL, NULL},
    {"verbose", 'v', SL_OPT_FLAG, OFF(verbose), 0, 0, NULL, NULL, "talk", NULL, NULL},
    {"dry-run", 'd', SL_OPT_FLAG, OFF(dry), 0, 0, NULL, NULL, "do nothing", NULL, NULL},
    {"mode", 0, SL_OPT_CHOICE, OFF(mode), 0, 0, "fast", NULL, "how", "fast|safe|slow", NULL},
    {"list", 0, SL_OPT_FUNC, 0, 0, 0, NULL, "A,B",
     "a list, the long help text of which goes on and on so that it "
     "has to be wrapped over several lines of the generated help text",
     NULL, take_list},
    {"help", 'h', SL_OPT_HELP, 0, 0, 0, NULL, NULL, "this help", NULL, NULL},
    {"version", 0, SL_OPT_VERSION, 0, 0, 0, NULL, NULL, "the version", NULL, NULL},
};
static const char *const extra[] = {"global_batch_size", "shuffle.seed", "epochs"};
static const struct sl_opt_cmd cmd = {.prog = "prog",
                                      .usage = "Usage: prog [OPTION]...\n\n",
                                      .footer = "Bye.\n",
                                      .rows = rows,
                                      .nrows = sizeof rows / sizeof rows[0]};
static const struct sl_opt_cmd xcmd = {.prog = "prog",
                                       .usage = "Usage: prog\n",
                                       .rows = rows,
                                       .nrows = sizeof rows / sizeof rows[0],
                                       .extra_names = extra,
                                       .nextra = 3,
                                       .extra_prefix = "features.",
                                       .extra_what = "job key",
                                       .extra_fn = take_extra};

/* Parse a NULL-terminated list of arguments (argv[0] added). */
static int parse(const struct sl_opt_cmd *c, struct opts *o, uint64_t *given, struct sl_error *err, ...)
{
    char *argv[32] = {"prog"};
    int argc = 1;
    va_list ap;
    va_start(ap, err);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL && argc < 31;)
        argv[argc++] = (char *)a;
    va_end(ap);
    memset(o, 0, sizeof *o);
    memset(err, 0, sizeof *err);
    return sl_opt_parse(c, argc, argv, o, given, err);
}

START_TEST(test_defaults_and_types)
{
    struct opts o;
    struct sl_error err;
    uint64_t given;
    ck_assert_int_eq(parse(&cmd, &o, &given, &err, NULL), 0);
    ck_assert_str_eq(o.name, "anon");
    ck_assert_ptr_null(o.path);
    ck_assert_uint_eq(o.count, 5);
    ck_assert(o.rate == 0.5);
    ck_assert_int_eq(o.mode, 0);
    ck_assert_uint_eq(given, 0);
    ck_assert_int_eq(parse(&cmd, &o, &given, &err, "--name=x", "--path", "p", "-c", "7", "--big=4398046511104",
                           "--bytes", "2G", "--rate=1e-3", "-v", "--mode", "slow", "--list=a,b", NULL),
                     0);
    ck_assert_str_eq(o.name, "x");
    ck_assert_str_eq(o.path, "p");
    ck_assert_uint_eq(o.count, 7);
    ck_assert_uint_eq(o.big, 4398046511104ull);
    ck_assert_uint_eq(o.bytes, 2ull << 30);
    ck_assert(o.rate == 1e-3);
    ck_assert_int_eq(o.verbose, 1);
    ck_assert_int_eq(o.dry, 0);
    ck_assert_int_eq(o.mode, 2);
    ck_assert_str_eq(o.seen[0], "list:a,b");
    ck_assert(sl_opt_given(&cmd, given, "count"));
    ck_assert(sl_opt_given(&cmd, given, "list"));
    ck_assert(!sl_opt_given(&cmd, given, "dry-run"));
    ck_assert(!sl_opt_given(&cmd, given, "no-such-row"));
    /* short forms: attached value, a cluster of flags ending in a valued one */
    ck_assert_int_eq(parse(&cmd, &o, &given, &err, "-c9", "-vdNjo", NULL), 0);
    ck_assert_uint_eq(o.count, 9);
    ck_assert_int_eq(o.verbose, 1);
    ck_assert_int_eq(o.dry, 1);
    ck_assert_str_eq(o.name, "jo");
    /* a value that looks like an option is still the value */
    ck_assert_int_eq(parse(&cmd, &o, &given, &err, "--name", "--path", NULL), 0);
    ck_assert_str_eq(o.name, "--path");
    /* empty strings are values */
    ck_assert_int_eq(parse(&cmd, &o, &given, &err, "--path=", NULL), 0);
    ck_assert_str_eq(o.path, "");
}
END_TEST

START_TEST(test_repeated_last_wins)
{
    struct opts o;
    struct sl_error err;
    ck_assert_int_eq(parse(&cmd, &o, NULL, &err, "--count=3", "-c", "4", "--count", "6", "--list=x", "--list=y", NULL),
                     0);
    ck_assert_uint_eq(o.count, 6);
    ck_assert_int_eq(o.nseen, 2); /* a FUNC sees each one */
    ck_assert_str_eq(o.seen[1], "list:y");
    /* a bad value after a good one is still an error */
    ck_assert_int_eq(parse(&cmd, &o, NULL, &err, "--count=3", "--count=0", NULL), SL_EINVAL);
}
END_TEST

/* Every bad number, with the message that names the option. */
START_TEST(test_bad_numbers)
{
    static const struct {
        const char *arg, *msg;
    } cases[] = {
        {"--count=abc", "--count: not an integer: 'abc'"},
        {"--count=", "--count: not an integer: ''"},
        {"--count=7x", "--count: not an integer: '7x'"},
        {"--count= 7", "--count: not an integer: ' 7'"},
        {"--count=+7", "--count: not an integer: '+7'"},
        {"--count=0x10", "--count: not an integer: '0x10'"},
        {"--count=1.5", "--count: not an integer: '1.5'"},
        {"--count=-1", "--count: must be an integer in [1, 100], got '-1'"},
        {"--count=0", "--count: must be an integer in [1, 100], got '0'"},
        {"--count=101", "--count: must be an integer in [1, 100], got '101'"},
        {"--count=4294967297", "--count: must be an integer in [1, 100], got '4294967297'"},
        {"--count=99999999999999999999999", "--count: must be an integer in [1, 100], got '99999999999999999999999'"},
        {"--big=4398046511105", "--big: must be an integer in [0, 4398046511104], got '4398046511105'"},
        {"--big=18446744073709551616", "--big: must be an integer in [0, 4398046511104], got '18446744073709551616'"},
        {"--rate=abc", "--rate: not a number: 'abc'"},
        {"--rate=", "--rate: not a number: ''"},
        {"--rate=0.5x", "--rate: not a number: '0.5x'"},
        {"--rate=nan", "--rate: not a number: 'nan'"},
        {"--rate=inf", "--rate: not a number: 'inf'"},
        {"--rate=0x1p-2", "--rate: not a number: '0x1p-2'"},
        {"--rate= 0.5", "--rate: not a number: ' 0.5'"},
        {"--rate=1e999", "--rate: not a finite number: '1e999'"},
        {"--rate=-0.1", "--rate: must be in [0, 1], got '-0.1'"},
        {"--rate=1.0001", "--rate: must be in [0, 1], got '1.0001'"},
        {"--bytes=1P", "--bytes: not a byte count (digits, then K, M, G or T): '1P'"},
        {"--bytes=", "--bytes: not a byte count (digits, then K, M, G or T): ''"},
        {"--bytes=-5", "--bytes: not a byte count (digits, then K, M, G or T): '-5'"},
        {"--bytes=1KK", "--bytes: not a byte count (digits, then K, M, G or T): '1KK'"},
        {"--bytes=1", "--bytes: must be a byte count in [4096, 549755813888], got '1'"},
        {"--bytes=513G", "--bytes: must be a byte count in [4096, 549755813888], got '513G'"},
        {"--bytes=99999999999999999999",
         "--bytes: must be a byte count in [4096, 549755813888], got '99999999999999999999'"},
        {"--bytes=17179869184T", "--bytes: must be a byte count in [4096, 549755813888], got '17179869184T'"},
        {"--mode=quick", "--mode: expected fast, safe or slow, got 'quick'"},
        {"--mode=", "--mode: expected fast, safe or slow, got ''"},
        {"--list=a!", "--list: no '!' please, got 'a!'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct opts o;
        struct sl_error err;
        ck_assert_int_eq(parse(&cmd, &o, NULL, &err, cases[i].arg, NULL), SL_EINVAL);
        ck_assert_str_eq(err.msg, cases[i].msg);
    }
    /* the edges themselves are fine */
    struct opts o;
    struct sl_error err;
    ck_assert_int_eq(parse(&cmd, &o, NULL, &err, "--count=100", "--rate=1", "--bytes=512G", "--big=0", NULL), 0);
    ck_assert_uint_eq(o.bytes, 512ull << 30);
    ck_assert_int_eq(parse(&cmd, &o, NULL, &err, "--count=001", "--rate=.25", "--bytes=4K", NULL), 0);
    ck_assert_uint_eq(o.count, 1);
    ck_assert(o.rate == 0.25);
}
END_TEST

START_TEST(test_usage_errors)
{
    static const struct {
        const char *a, *b, *msg;
    } cases[] = {
        {"--nme=x", NULL, "--nme: unknown option; did you mean --name?"},
        {"--coutn=3", NULL, "--coutn: unknown option; did you mean --count?"},
        {"--dry", NULL, "--dry: unknown option; did you mean --dry-run?"},
        {"--verbose=1", NULL, "--verbose takes no value"},
        {"--count", NULL, "--count needs a value"},
        {"-c", NULL, "-c (--count) needs a value"},
        {"-x", NULL, "-x: unknown option"},
        {"-vx", NULL, "-x: unknown option"},
        {"stray", NULL, "unexpected argument 'stray'"},
        {"-", NULL, "unexpected argument '-'"},
        {"--", NULL, "unexpected argument '--'"},
        {"--zzzzzzzz", NULL, "--zzzzzzzz: unknown option"},
        {"--global_batch_size=8", NULL, "--global_batch_size: unknown option"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct opts o;
        struct sl_error err;
        ck_assert_int_eq(parse(&cmd, &o, NULL, &err, cases[i].a, cases[i].b, NULL), SL_EINVAL);
        ck_assert_str_eq(err.msg, cases[i].msg);
    }
}
END_TEST

/* Extra names (the feeder's job keys): exact names and the prefix go to
 * the callback, in order with --name=V or --name V; near misses of either
 * family are suggested and refused. */
START_TEST(test_extra_names)
{
    struct opts o;
    struct sl_error err;
    ck_assert_int_eq(
        parse(&xcmd, &o, NULL, &err, "--epochs=3", "--shuffle.seed", "9", "--features.x.shape=[2]", "--count=2", NULL),
        0);
    ck_assert_int_eq(o.nseen, 3);
    ck_assert_str_eq(o.seen[0], "epochs=3");
    ck_assert_str_eq(o.seen[1], "shuffle.seed=9");
    ck_assert_str_eq(o.seen[2], "features.x.shape=[2]");
    ck_assert_uint_eq(o.count, 2);
    static const struct {
        const char *arg, *msg;
    } cases[] = {
        {"--epoch=3", "--epoch: unknown option or job key; did you mean --epochs?"},
        {"--global_bach_size=3", "--global_bach_size: unknown option or job key; did you mean --global_batch_size?"},
        {"--shuffle.sed=3", "--shuffle.sed: unknown option or job key; did you mean --shuffle.seed?"},
        {"--nam=3", "--nam: unknown option or job key; did you mean --name?"},
        {"--features.", "--features.: unknown option or job key"},
        {"--epochs", "--epochs needs a value"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(parse(&xcmd, &o, NULL, &err, cases[i].arg, NULL), SL_EINVAL);
        ck_assert_str_eq(err.msg, cases[i].msg);
    }
    /* a name of 300 bytes is cut in the message, and is nobody's near miss */
    char longname[310] = "--";
    memset(longname + 2, 'e', 300);
    longname[302] = '\0';
    ck_assert_int_eq(parse(&xcmd, &o, NULL, &err, longname, NULL), SL_EINVAL);
    ck_assert(strstr(err.msg, "...: unknown option or job key") != NULL);
    ck_assert(strlen(err.msg) < 120);
}
END_TEST

/* SL_OPT_INT and SL_OPT_LONG (sluice-bench's int and long fields): the
 * same strict digits and bounds as U32/U64; pass_fn takes any other
 * --NAME=VALUE whole, in order, and only in that form. */
struct bench_like {
    int n;
    long big;
    const char *passed[4];
    int npassed;
};

static int take_pass(void *o, const char *arg, struct sl_error *err)
{
    struct bench_like *b = o;
    if (b->npassed == 4)
        return sl_error_set(err, SL_EINVAL, "'%s': at most 4", arg);
    b->passed[b->npassed++] = arg;
    return 0;
}

START_TEST(test_int_long_and_pass)
{
    static const struct sl_opt brows[] = {
        {"n", 0, SL_OPT_INT, offsetof(struct bench_like, n), 1, 64, "3", "N", "an int", NULL, NULL},
        {"big", 0, SL_OPT_LONG, offsetof(struct bench_like, big), 2, (double)(1L << 40), "10000", "N", "a long", NULL,
         NULL},
    };
    const struct sl_opt_cmd bcmd = {.prog = "b", .usage = "", .rows = brows, .nrows = 2, .pass_fn = take_pass};
    struct bench_like b;
    struct sl_error err;
    char *ok[] = {"b", "--epochs=5", "--n", "64", "--big=1099511627776", "--files=a*,b*", "--n=7", NULL};
    memset(&b, 0, sizeof b);
    memset(&err, 0, sizeof err);
    ck_assert_int_eq(sl_opt_parse(&bcmd, 7, ok, &b, NULL, &err), 0);
    ck_assert_int_eq(b.n, 7); /* the last one wins */
    ck_assert(b.big == 1L << 40);
    ck_assert_int_eq(b.npassed, 2);
    ck_assert_ptr_eq(b.passed[0], ok[1]); /* the argument itself, borrowed */
    ck_assert_str_eq(b.passed[1], "--files=a*,b*");
    memset(&b, 0, sizeof b);
    ck_assert_int_eq(sl_opt_parse(&bcmd, 1, ok, &b, NULL, &err), 0);
    ck_assert_int_eq(b.n, 3);
    ck_assert(b.big == 10000);
    static const struct {
        const char *arg, *msg;
    } cases[] = {
        {"--n=0", "--n: must be an integer in [1, 64], got '0'"},
        {"--n=-1", "--n: must be an integer in [1, 64], got '-1'"},
        {"--n=99999999999999999999", "--n: must be an integer in [1, 64], got '99999999999999999999'"},
        {"--n=4294967297", "--n: must be an integer in [1, 64], got '4294967297'"},
        {"--n=1x", "--n: not an integer: '1x'"},
        {"--n=", "--n: not an integer: ''"},
        {"--big=1", "--big: must be an integer in [2, 1099511627776], got '1'"},
        {"--big=1099511627777", "--big: must be an integer in [2, 1099511627776], got '1099511627777'"},
        {"--big=-5", "--big: must be an integer in [2, 1099511627776], got '-5'"},
        {"--n", "--n needs a value"},
        {"--epochs", "--epochs: unknown option"}, /* a pass name needs =VALUE */
        {"--bi=3", NULL},                         /* passed on, not a near miss */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[] = {"b", (char *)cases[i].arg, NULL};
        memset(&b, 0, sizeof b);
        memset(&err, 0, sizeof err);
        int rc = sl_opt_parse(&bcmd, 2, argv, &b, NULL, &err);
        if (cases[i].msg == NULL) {
            ck_assert_int_eq(rc, 0);
            ck_assert_int_eq(b.npassed, 1);
            continue;
        }
        ck_assert_int_eq(rc, SL_EINVAL);
        ck_assert_str_eq(err.msg, cases[i].msg);
    }
    /* the callback's own error stops the parse */
    char *many[] = {"b", "--a=1", "--b=2", "--c=3", "--d=4", "--e=5", NULL};
    memset(&b, 0, sizeof b);
    ck_assert_int_eq(sl_opt_parse(&bcmd, 6, many, &b, NULL, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "'--e=5': at most 4");
}
END_TEST

START_TEST(test_nearest)
{
    const char *const names[] = {"job", "listen", "workers", "worker", "threads"};
    ck_assert_str_eq(sl_opt_nearest("jb", 2, names, 5), "job");
    ck_assert_str_eq(sl_opt_nearest("lsiten", 6, names, 5), "listen"); /* a swap counts 1 */
    ck_assert_str_eq(sl_opt_nearest("workrs", 6, names, 5), "workers");
    ck_assert_str_eq(sl_opt_nearest("thr", 3, names, 5), "threads"); /* a prefix */
    ck_assert_ptr_null(sl_opt_nearest("x", 1, names, 5));
    ck_assert_ptr_null(sl_opt_nearest("replicas", 8, names, 5));
    ck_assert_ptr_null(sl_opt_nearest("jb", 2, names, 0));
}
END_TEST

/* Run the parser in a child with stdout in a file; return that text. */
static char *captured(const struct sl_opt_cmd *c, const char *arg, int *rc)
{
    const char *path = sl_test_path("stdout.txt");
    fflush(stdout);
    FILE *saved = stdout;
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    stdout = f;
    struct opts o;
    struct sl_error err;
    *rc = parse(c, &o, NULL, &err, arg, NULL);
    fclose(f);
    stdout = saved;
    size_t len;
    char *text = (char *)sl_test_read(path, &len);
    ck_assert_ptr_nonnull(text);
    text = realloc(text, len + 1);
    text[len] = '\0';
    return text;
}

START_TEST(test_help_lists_every_row)
{
    int rc;
    char *h = captured(&cmd, "--help", &rc);
    ck_assert_int_eq(rc, 1);
    ck_assert(strncmp(h, "Usage: prog [OPTION]...\n\n", 25) == 0);
    for (size_t i = 0; i < cmd.nrows; i++) {
        char want[64];
        snprintf(want, sizeof want, "--%s", rows[i].name);
        ck_assert_msg(strstr(h, want) != NULL, "--help lacks %s", want);
        if (rows[i].short_name) {
            snprintf(want, sizeof want, "  -%c, --%s", rows[i].short_name, rows[i].name);
            ck_assert_msg(strstr(h, want) != NULL, "--help lacks %s", want);
        }
    }
    ck_assert_ptr_nonnull(strstr(h, "  -c, --count=N            how many (default 5)\n"));
    ck_assert_ptr_nonnull(strstr(h, "      --mode=fast|safe|slow\n"));
    ck_assert_ptr_nonnull(strstr(h, "\nBye.\n"));
    for (char *line = h; *line != '\0';) { /* wrapped to 79 columns */
        size_t len = strcspn(line, "\n");
        ck_assert_msg(len <= 79, "line too long: %.*s", (int)len, line);
        line += len + (line[len] == '\n');
    }
    free(h);
    char *v = captured(&cmd, "--version", &rc);
    ck_assert_int_eq(rc, 1);
    ck_assert(strncmp(v, "prog ", 5) == 0);
    ck_assert_ptr_nonnull(strstr(v, "\ncommit: "));
    ck_assert_ptr_nonnull(strstr(v, "\nbuild type: "));
    ck_assert_ptr_nonnull(strstr(v, "\noptional parts: CUDA "));
    free(v);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_opt");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_defaults_and_types);
    tcase_add_test(tc, test_repeated_last_wins);
    tcase_add_test(tc, test_bad_numbers);
    tcase_add_test(tc, test_usage_errors);
    tcase_add_test(tc, test_extra_names);
    tcase_add_test(tc, test_int_long_and_pass);
    tcase_add_test(tc, test_nearest);
    tcase_add_test(tc, test_help_lists_every_row);
    suite_add_tcase(s, tc);
    return s;
}
