/* sl_env (issue #14 part 4): Slurm node lists expanded exactly (ranges,
 * padding, several groups), every malformed or hostile list refused with
 * its exact message and offset (a billion-host range without allocating),
 * tasks per node, task placement (block, cyclic, the node name checked),
 * the layout, the spec the binaries read (through sl_cluster), TF_CONFIG
 * checked, and --cluster-from's conflicts with the options it derives. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_alloc.h"
#include "sl_cluster.h"
#include "sl_env.h"
#include "sl_test.h"

/* Expand `text` and compare with the space-separated `want`. */
static void expect_hosts(const char *text, const char *want)
{
    struct sl_env_hosts h;
    struct sl_error err = {0};
    int rc = sl_env_nodelist(&h, text, "L", &err);
    ck_assert_msg(rc == 0, "'%s': %s", text, err.msg);
    char got[4096] = "";
    size_t used = 0;
    for (size_t i = 0; i < h.n; i++)
        used += (size_t)snprintf(got + used, sizeof got - used, "%s%s", i ? " " : "", h.names[i]);
    ck_assert_ptr_null(h.names[h.n]);
    ck_assert_msg(strcmp(got, want) == 0, "'%s': got '%s', want '%s'", text, got, want);
    sl_env_hosts_free(&h);
    ck_assert_uint_eq(h.n, 0);
    ck_assert_ptr_null(h.names);
}

static void expect_list_error(const char *text, const char *msg)
{
    struct sl_env_hosts h;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_env_nodelist(&h, text, "L", &err), SL_EINVAL);
    ck_assert_msg(strcmp(err.msg, msg) == 0, "'%s': got '%s', want '%s'", text, err.msg, msg);
    ck_assert_uint_eq(h.n, 0);
    ck_assert_ptr_null(h.names);
}

START_TEST(test_nodelist_expansions)
{
    expect_hosts("node[01-04,07]", "node01 node02 node03 node04 node07");
    expect_hosts("a1,b[2-3]", "a1 b2 b3");
    expect_hosts("host", "host");
    expect_hosts("a[1,3-4],b,c[09-11]", "a1 a3 a4 b c09 c10 c11");
    /* the width is the lower bound's: none, kept, and past it */
    expect_hosts("node[8-10]", "node8 node9 node10");
    expect_hosts("n[08-10]", "n08 n09 n10");
    expect_hosts("n[007]", "n007");
    expect_hosts("n[0098-0101]", "n0098 n0099 n0100 n0101");
    expect_hosts("n[9-10,001]", "n9 n10 n001");
    /* a suffix, a name that is only a group, IP-like names */
    expect_hosts("x[1-3].ib", "x1.ib x2.ib x3.ib");
    expect_hosts("[1-2]", "1 2");
    expect_hosts("10.0.0.[1-3]", "10.0.0.1 10.0.0.2 10.0.0.3");
    expect_hosts("gpu_a-1.cluster", "gpu_a-1.cluster");
    /* several groups in one name: the first outermost */
    expect_hosts("rack[1-2]-n[01-02]", "rack1-n01 rack1-n02 rack2-n01 rack2-n02");
    expect_hosts("r[1,3]n[5-6,9]", "r1n5 r1n6 r1n9 r3n5 r3n6 r3n9");
    expect_hosts("a[1-2]b[1]c[7-8]d[0]", "a1b1c7d0 a1b1c8d0 a2b1c7d0 a2b1c8d0");
    /* repeated names and single values stay as given */
    expect_hosts("n[1,1],n1", "n1 n1 n1");
    expect_hosts("z[0]", "z0");
}
END_TEST

START_TEST(test_nodelist_bounds)
{
    struct sl_env_hosts h;
    struct sl_error err = {0};
    /* exactly 65536 hosts, and names of exactly 240 bytes */
    ck_assert_int_eq(sl_env_nodelist(&h, "n[1-65536]", "L", &err), 0);
    ck_assert_uint_eq(h.n, 65536);
    ck_assert_str_eq(h.names[0], "n1");
    ck_assert_str_eq(h.names[65535], "n65536");
    sl_env_hosts_free(&h);
    ck_assert_int_eq(sl_env_nodelist(&h, "a[1-256]b[001-256]", "L", &err), 0);
    ck_assert_uint_eq(h.n, 65536);
    ck_assert_str_eq(h.names[257], "a2b002");
    ck_assert_str_eq(h.names[65535], "a256b256");
    sl_env_hosts_free(&h);
    char name[300];
    memset(name, 'a', 240);
    name[240] = '\0';
    ck_assert_int_eq(sl_env_nodelist(&h, name, "L", &err), 0);
    ck_assert_uint_eq(strlen(h.names[0]), 240);
    sl_env_hosts_free(&h);
    memcpy(name + 237, "[1-100]", 8); /* 237 + 3 digits = 240 */
    ck_assert_int_eq(sl_env_nodelist(&h, name, "L", &err), 0);
    ck_assert_uint_eq(h.n, 100);
    ck_assert_uint_eq(strlen(h.names[99]), 240);
    sl_env_hosts_free(&h);

    expect_list_error("n[0-65536]", "L: more than 65536 hosts: the range '0-65536' at offset 2");
    expect_list_error("n[0-65535],m", "L: more than 65536 hosts: the name 'm' at offset 11");
    expect_list_error("n[1-40000,1-40000]", "L: more than 65536 hosts: the range '1-40000' at offset 10");
    expect_list_error("a[1-256]b[1-257]", "L: more than 65536 hosts: the name 'a[1-256]b[1-257]' at offset 0");
    expect_list_error("a[1-300]b[1-300]c[1]", "L: more than 65536 hosts: the name 'a[1-300]b[1-300]' at offset 0");
    memset(name, 'a', 241);
    name[241] = '\0';
    expect_list_error(name,
                      "L: the name 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' at offset 0 "
                      "is longer than 240 bytes");
    memset(name, 'b', 238);
    memcpy(name + 238, "[1-100]", 8); /* 238 + 3 digits */
    expect_list_error(name,
                      "L: the name 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb...' at offset 0 "
                      "is longer than 240 bytes");
    expect_list_error("a[1]b[2]c[3]d[4]e[5]", "L: more than 4 bracket groups in the name at offset 0");
}
END_TEST

/* A billion hosts is refused by counting, before any allocation. */
START_TEST(test_nodelist_huge_range_allocates_nothing)
{
    struct sl_env_hosts h;
    struct sl_error err = {0};
    sl_alloc_fail_after(1);
    int rc = sl_env_nodelist(&h, "node[0-999999999]", "SLURM_JOB_NODELIST", &err);
    sl_alloc_fail_reset();
    ck_assert_int_eq(rc, SL_EINVAL);
    ck_assert_str_eq(err.msg, "SLURM_JOB_NODELIST: more than 65536 hosts: the range '0-999999999' at offset 5");
    sl_alloc_fail_after(1);
    rc = sl_env_nodelist(&h, "a[0-999999999999999999]b[0-999999999999999999]", "L", &err);
    sl_alloc_fail_reset();
    ck_assert_int_eq(rc, SL_EINVAL);
    ck_assert_str_eq(err.msg, "L: more than 65536 hosts: the range '0-999999999999999999' at offset 2");
    /* a good list whose one allocation fails */
    sl_alloc_fail_after(1);
    rc = sl_env_nodelist(&h, "n[1-4]", "L", &err);
    sl_alloc_fail_reset();
    ck_assert_int_eq(rc, SL_ENOMEM);
    ck_assert_str_eq(err.msg, "L: out of memory for 4 host names");
    ck_assert_ptr_null(h.names);
}
END_TEST

START_TEST(test_nodelist_errors)
{
    expect_list_error("", "L: empty node list");
    expect_list_error("node[5-3]", "L: reversed range '5-3' at offset 5");
    expect_list_error("n[1,7-03]", "L: reversed range '7-03' at offset 4");
    expect_list_error("node[-1-3]", "L: expected a number at offset 5, got '-'");
    expect_list_error("node[a-b]", "L: expected a number at offset 5, got 'a'");
    expect_list_error("node[1-x]", "L: expected a number at offset 7, got 'x'");
    expect_list_error("node[1-3", "L: '[' at offset 4 is never closed");
    expect_list_error("node[1-", "L: '[' at offset 4 is never closed");
    expect_list_error("node[", "L: '[' at offset 4 is never closed");
    expect_list_error("node[1,", "L: '[' at offset 4 is never closed");
    expect_list_error("node1-3]", "L: ']' without '[' at offset 7");
    expect_list_error("node[1]]", "L: ']' without '[' at offset 7");
    expect_list_error("node[]", "L: empty range at offset 5");
    expect_list_error("node[1,]", "L: empty range at offset 7");
    expect_list_error("node[,1]", "L: empty range at offset 5");
    expect_list_error("node[1-]", "L: range '1-' at offset 5 has no upper bound");
    expect_list_error("node[1[2]]", "L: '[' inside brackets at offset 6");
    expect_list_error("node[1x]", "L: unexpected character 'x' at offset 6 in brackets");
    expect_list_error("node[1 ]", "L: unexpected character ' ' at offset 6 in brackets");
    expect_list_error("node[1-2-3]", "L: unexpected character '-' at offset 8 in brackets");
    expect_list_error("a,,b", "L: empty host name at offset 2");
    expect_list_error(",a", "L: empty host name at offset 0");
    expect_list_error("a,", "L: empty host name at offset 2");
    expect_list_error(",", "L: empty host name at offset 0");
    expect_list_error("node 1", "L: unexpected character ' ' at offset 4");
    expect_list_error("n:1", "L: unexpected character ':' at offset 1");
    expect_list_error("n/1", "L: unexpected character '/' at offset 1");
    expect_list_error("n\"1", "L: unexpected character '\"' at offset 1");
    expect_list_error("n'1", "L: unexpected character '\\x27' at offset 1");
    expect_list_error("\x01", "L: unexpected character '\\x01' at offset 0");
    expect_list_error("n\xc3\xa9", "L: unexpected character '\\xc3' at offset 1");
    /* numbers: 18 digits at most, so no value can wrap */
    expect_list_error("node[1234567890123456789]",
                      "L: number '1234567890123456789' at offset 5 is longer than 18 digits");
    expect_list_error("n[0-18446744073709551617]", "L: number '18446744073709551617' at offset 4 is longer than 18 "
                                                   "digits");
    expect_list_error("n[99999999999999999999999999]", "L: number '99999999999999999999999999' at offset 2 is longer "
                                                       "than 18 digits");
    /* the first error is the one reported */
    expect_list_error("a[2-1],b[", "L: reversed range '2-1' at offset 2");
}
END_TEST

/* Random single-group lists against an expansion written here. */
START_TEST(test_nodelist_random)
{
    unsigned seed = 12345;
    for (int iter = 0; iter < 500; iter++) {
        char text[512], want[8192];
        size_t tu = 0, wu = 0;
        int entries = 1 + (int)(rand_r(&seed) % 3);
        for (int e = 0; e < entries; e++) {
            int ranges = 1 + (int)(rand_r(&seed) % 3), width = 1 + (int)(rand_r(&seed) % 3);
            tu += (size_t)snprintf(text + tu, sizeof text - tu, "%sh%d[", e ? "," : "", e);
            for (int r = 0; r < ranges; r++) {
                int lo = (int)(rand_r(&seed) % 120), n = (int)(rand_r(&seed) % 4);
                if (n == 0)
                    tu += (size_t)snprintf(text + tu, sizeof text - tu, "%s%0*d", r ? "," : "", width, lo);
                else
                    tu += (size_t)snprintf(text + tu, sizeof text - tu, "%s%0*d-%d", r ? "," : "", width, lo, lo + n);
                for (int v = lo; v <= lo + n; v++)
                    wu += (size_t)snprintf(want + wu, sizeof want - wu, "%sh%d%0*d", wu ? " " : "", e, width, v);
            }
            tu += (size_t)snprintf(text + tu, sizeof text - tu, "]");
        }
        expect_hosts(text, want);
    }
    /* random bytes from the list's alphabet: any outcome but a crash, a
     * leak or an error without a message */
    const char alphabet[] = "n0123456789[],-x ";
    for (int iter = 0; iter < 20000; iter++) {
        char text[24];
        int len = (int)(rand_r(&seed) % (sizeof text - 1));
        for (int i = 0; i < len; i++)
            text[i] = alphabet[rand_r(&seed) % (sizeof alphabet - 1)];
        text[len] = '\0';
        struct sl_env_hosts h;
        struct sl_error err = {0};
        int rc = sl_env_nodelist(&h, text, "L", &err);
        ck_assert_msg(rc == 0 || (rc == SL_EINVAL && strncmp(err.msg, "L: ", 3) == 0), "'%s': %d %s", text, rc,
                      err.msg);
        ck_assert(rc != 0 || (h.n >= 1 && h.n <= SL_ENV_MAX_HOSTS));
        sl_env_hosts_free(&h);
    }
}
END_TEST

static void expect_tpn(const char *text, const char *want)
{
    uint32_t *c;
    size_t n;
    struct sl_error err = {0};
    ck_assert_msg(sl_env_tasks_per_node(&c, &n, text, "T", &err) == 0, "'%s': %s", text, err.msg);
    char got[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < n; i++)
        used += (size_t)snprintf(got + used, sizeof got - used, "%s%u", i ? " " : "", c[i]);
    ck_assert_msg(strcmp(got, want) == 0, "'%s': got '%s', want '%s'", text, got, want);
    sl_free(c);
}

static void expect_tpn_error(const char *text, const char *msg)
{
    uint32_t *c = (uint32_t *)1;
    size_t n = 7;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_env_tasks_per_node(&c, &n, text, "T", &err), SL_EINVAL);
    ck_assert_msg(strcmp(err.msg, msg) == 0, "'%s': got '%s', want '%s'", text, err.msg, msg);
    ck_assert_ptr_null(c);
}

START_TEST(test_tasks_per_node)
{
    expect_tpn("2(x3),1", "2 2 2 1");
    expect_tpn("1(x4)", "1 1 1 1");
    expect_tpn("4", "4");
    expect_tpn("1,2,3", "1 2 3");
    expect_tpn("65536", "65536");
    uint32_t *c;
    size_t n;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_env_tasks_per_node(&c, &n, "1(x65536)", "T", &err), 0);
    ck_assert_uint_eq(n, 65536);
    sl_free(c);
    expect_tpn_error("", "T: empty");
    expect_tpn_error("0", "T: count '0' at offset 0 is not in [1, 65536]");
    expect_tpn_error("65537", "T: count '65537' at offset 0 is not in [1, 65536]");
    expect_tpn_error("99999999999999999999", "T: count '99999999999999999999' at offset 0 is not in [1, 65536]");
    expect_tpn_error("2(3)", "T: expected '(x' at offset 1");
    expect_tpn_error("2(x3", "T: expected ')' at offset 4, got end of text");
    expect_tpn_error("2(x)", "T: expected a count at offset 3, got ')'");
    expect_tpn_error("2(x0)", "T: count '0' at offset 3 is not in [1, 65536]");
    expect_tpn_error("2,,1", "T: expected a count at offset 2, got ','");
    expect_tpn_error("2,", "T: expected a count at offset 2, got end of text");
    expect_tpn_error("-1", "T: expected a count at offset 0, got '-'");
    expect_tpn_error("2 ", "T: unexpected character ' ' at offset 1");
    expect_tpn_error("2(x40000)", "T: more than 65536 nodes or tasks at offset 0");
    expect_tpn_error("1(x65536),1", "T: more than 65536 nodes or tasks at offset 10");
    expect_tpn_error("40000,40000", "T: more than 65536 nodes or tasks at offset 6");
}
END_TEST

/* ---- the Slurm step ---- */

static void expect_nodes(const struct sl_env_slurm *s, const char *want)
{
    char got[512] = "";
    size_t used = 0;
    for (uint32_t t = 0; t < s->ntasks; t++)
        used += (size_t)snprintf(got + used, sizeof got - used, "%s%s", t ? " " : "", s->hosts.names[s->node[t]]);
    ck_assert_msg(strcmp(got, want) == 0, "got '%s', want '%s'", got, want);
}

static void expect_slurm_error(const char *const *envp, const char *msg)
{
    struct sl_env_slurm s;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_env_slurm_read(&s, envp, &err), SL_EINVAL);
    ck_assert_msg(strcmp(err.msg, msg) == 0, "got '%s', want '%s'", err.msg, msg);
    ck_assert_ptr_null(s.node);
    ck_assert_ptr_null(s.hosts.names);
}

START_TEST(test_slurm_placement)
{
    struct sl_env_slurm s;
    struct sl_error err = {0};
    const char *block[] = {"SLURM_PROCID=2",
                           "SLURM_NTASKS=4",
                           "SLURM_STEP_NODELIST=n[1-2]",
                           "SLURM_STEP_TASKS_PER_NODE=2(x2)",
                           "SLURMD_NODENAME=n2",
                           NULL};
    ck_assert_int_eq(sl_env_slurm_read(&s, block, &err), 0);
    ck_assert_uint_eq(s.procid, 2);
    ck_assert_uint_eq(s.ntasks, 4);
    ck_assert_int_eq(s.cyclic, 0);
    expect_nodes(&s, "n1 n1 n2 n2");
    sl_env_slurm_free(&s);
    const char *cyclic[] = {"SLURM_PROCID=1",
                            "SLURM_NTASKS=4",
                            "SLURM_STEP_NODELIST=n[1-2]",
                            "SLURM_STEP_TASKS_PER_NODE=2(x2)",
                            "SLURM_DISTRIBUTION=cyclic:block",
                            "SLURMD_NODENAME=n2",
                            NULL};
    ck_assert_int_eq(sl_env_slurm_read(&s, cyclic, &err), 0);
    ck_assert_int_eq(s.cyclic, 1);
    expect_nodes(&s, "n1 n2 n1 n2");
    sl_env_slurm_free(&s);
    /* cyclic with uneven counts: full nodes are skipped */
    const char *uneven[] = {"SLURM_PROCID=0",
                            "SLURM_NTASKS=5",
                            "SLURM_STEP_NODELIST=a,b,c",
                            "SLURM_STEP_TASKS_PER_NODE=3,1,1",
                            "SLURM_DISTRIBUTION=cyclic",
                            NULL};
    ck_assert_int_eq(sl_env_slurm_read(&s, uneven, &err), 0);
    expect_nodes(&s, "a b c a a");
    sl_env_slurm_free(&s);
    /* no tasks per node, one task per node; the job's variables when the
     * step's are missing; SLURM_STEP_NUM_TASKS before SLURM_NTASKS */
    const char *one[] = {"SLURM_PROCID=2", "SLURM_STEP_NUM_TASKS=3", "SLURM_NTASKS=8", "SLURM_JOB_NODELIST=gpu[07-09]",
                         NULL};
    ck_assert_int_eq(sl_env_slurm_read(&s, one, &err), 0);
    ck_assert_uint_eq(s.ntasks, 3);
    expect_nodes(&s, "gpu07 gpu08 gpu09");
    sl_env_slurm_free(&s);
    const char *job[] = {"SLURM_PROCID=0", "SLURM_NPROCS=3", "SLURM_NODELIST=x,y", "SLURM_TASKS_PER_NODE=1,2", NULL};
    ck_assert_int_eq(sl_env_slurm_read(&s, job, &err), 0);
    expect_nodes(&s, "x y y");
    sl_env_slurm_free(&s);
    /* any distribution is fine when every node runs one task */
    const char *plane1[] = {"SLURM_PROCID=0",
                            "SLURM_NTASKS=2",
                            "SLURM_STEP_NODELIST=x,y",
                            "SLURM_STEP_TASKS_PER_NODE=1(x2)",
                            "SLURM_DISTRIBUTION=plane=4",
                            NULL};
    ck_assert_int_eq(sl_env_slurm_read(&s, plane1, &err), 0);
    expect_nodes(&s, "x y");
    sl_env_slurm_free(&s);
}
END_TEST

START_TEST(test_slurm_errors)
{
    const char *none[] = {NULL};
    expect_slurm_error(none, "SLURM_PROCID is not set (is this a task started by srun?)");
    const char *no_ntasks[] = {"SLURM_PROCID=0", NULL};
    expect_slurm_error(no_ntasks, "SLURM_STEP_NUM_TASKS is not set (is this a task started by srun?)");
    const char *bad_id[] = {"SLURM_PROCID=x", "SLURM_NTASKS=2", NULL};
    expect_slurm_error(bad_id, "SLURM_PROCID: not an integer: 'x'");
    const char *neg_id[] = {"SLURM_PROCID=-1", "SLURM_NTASKS=2", NULL};
    expect_slurm_error(neg_id, "SLURM_PROCID: must be an integer in [0, 65535], got '-1'");
    const char *zero[] = {"SLURM_PROCID=0", "SLURM_NTASKS=0", NULL};
    expect_slurm_error(zero, "SLURM_NTASKS: must be an integer in [1, 65536], got '0'");
    const char *huge[] = {"SLURM_PROCID=0", "SLURM_NTASKS=99999999999999999999999", NULL};
    expect_slurm_error(huge, "SLURM_NTASKS: must be an integer in [1, 65536], got '99999999999999999999999'");
    const char *past[] = {"SLURM_PROCID=4", "SLURM_NTASKS=4", "SLURM_STEP_NODELIST=n", NULL};
    expect_slurm_error(past, "SLURM_PROCID 4 is not below SLURM_NTASKS 4");
    const char *no_list[] = {"SLURM_PROCID=0", "SLURM_NTASKS=1", NULL};
    expect_slurm_error(no_list, "SLURM_JOB_NODELIST is not set (is this a task started by srun?)");
    const char *bad_list[] = {"SLURM_PROCID=0", "SLURM_NTASKS=1", "SLURM_JOB_NODELIST=n[2-1]", NULL};
    expect_slurm_error(bad_list, "SLURM_JOB_NODELIST: reversed range '2-1' at offset 2");
    const char *unplaced[] = {"SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_STEP_NODELIST=n[1-2]", NULL};
    expect_slurm_error(unplaced, "SLURM_STEP_TASKS_PER_NODE is not set and the 4 tasks are not one per node of the "
                                 "2 in SLURM_STEP_NODELIST: cannot tell which task runs where");
    const char *nodes[] = {"SLURM_PROCID=0", "SLURM_NTASKS=3", "SLURM_STEP_NODELIST=n[1-2]",
                           "SLURM_STEP_TASKS_PER_NODE=1(x3)", NULL};
    expect_slurm_error(nodes, "SLURM_STEP_TASKS_PER_NODE gives 3 nodes, but SLURM_STEP_NODELIST lists 2");
    const char *sum[] = {"SLURM_PROCID=0", "SLURM_NTASKS=3", "SLURM_STEP_NODELIST=n[1-2]",
                         "SLURM_STEP_TASKS_PER_NODE=2(x2)", NULL};
    expect_slurm_error(sum, "SLURM_STEP_TASKS_PER_NODE adds up to 4 tasks, but the step has 3 (SLURM_NTASKS)");
    const char *bad_tpn[] = {"SLURM_PROCID=0", "SLURM_NTASKS=3", "SLURM_STEP_NODELIST=n[1-2]",
                             "SLURM_STEP_TASKS_PER_NODE=2(x", NULL};
    expect_slurm_error(bad_tpn, "SLURM_STEP_TASKS_PER_NODE: expected a count at offset 3, got end of text");
    const char *plane[] = {"SLURM_PROCID=0",
                           "SLURM_NTASKS=4",
                           "SLURM_STEP_NODELIST=n[1-2]",
                           "SLURM_STEP_TASKS_PER_NODE=2(x2)",
                           "SLURM_DISTRIBUTION=plane=2",
                           NULL};
    expect_slurm_error(plane, "SLURM_DISTRIBUTION 'plane=2': tasks are placed from the tasks per node for block or "
                              "cyclic distributions only (srun --distribution=block)");
    const char *elsewhere[] = {"SLURM_PROCID=1",
                               "SLURM_NTASKS=4",
                               "SLURM_STEP_NODELIST=n[1-2]",
                               "SLURM_STEP_TASKS_PER_NODE=2(x2)",
                               "SLURMD_NODENAME=n2",
                               NULL};
    expect_slurm_error(elsewhere, "task 1 would run on 'n1' by the tasks per node (block placement), but "
                                  "SLURMD_NODENAME is 'n2' (srun --distribution=block, docs/deploy.md)");
}
END_TEST

START_TEST(test_layout)
{
    struct sl_env_layout l;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_env_layout_parse(&l, "", &err), 0);
    ck_assert_uint_eq(l.feeders, 1);
    ck_assert_uint_eq(l.feeder_port, 5555);
    ck_assert_uint_eq(l.ring_port, 7000);
    ck_assert_int_eq(sl_env_layout_parse(&l, "ring-port=9000,feeders=2,feeder-port=6000", &err), 0);
    ck_assert_uint_eq(l.feeders, 2);
    ck_assert_uint_eq(l.feeder_port, 6000);
    ck_assert_uint_eq(l.ring_port, 9000);
    const struct {
        const char *text, *msg;
    } bad[] = {
        {"feeders", "slurm layout: expected KEY=VALUE, got 'feeders'"},
        {"=2", "slurm layout: expected KEY=VALUE, got '=2'"},
        {"feeder=2", "slurm layout: unknown key 'feeder' (expected feeders, feeder-port or ring-port)"},
        {"feeders=2,feeders=3", "slurm layout: 'feeders' given twice"},
        {"feeders=0", "slurm layout: feeders: must be an integer in [1, 64], got '0'"},
        {"feeders=65", "slurm layout: feeders: must be an integer in [1, 64], got '65'"},
        {"feeders=", "slurm layout: feeders: not an integer: ''"},
        {"feeders=2x", "slurm layout: feeders: not an integer: '2x'"},
        {"ring-port=65536", "slurm layout: ring-port: must be an integer in [1, 65535], got '65536'"},
        {"ring-port=-1", "slurm layout: ring-port: must be an integer in [1, 65535], got '-1'"},
        {"feeders=2,", "slurm layout: empty item after the last ','"},
        {"feeders=2,,ring-port=1", "slurm layout: expected KEY=VALUE, got ''"},
        {"feeder-port=000000000000000000000000000000001", "slurm layout: feeder-port: value '0000000000000000...' is "
                                                          "too long"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(sl_env_layout_parse(&l, bad[i].text, &err), SL_EINVAL);
        ck_assert_msg(strcmp(err.msg, bad[i].msg) == 0, "'%s': got '%s'", bad[i].text, err.msg);
    }
}
END_TEST

/* The spec goes through sl_cluster as --cluster would. */
START_TEST(test_slurm_spec)
{
    const char *env[] = {"SLURM_PROCID=2", "SLURM_NTASKS=4", "SLURM_STEP_NODELIST=n[1-2]",
                         "SLURM_STEP_TASKS_PER_NODE=1,3", NULL};
    char *spec;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_env_cluster_spec(&spec, "slurm", env, &err), 0);
    ck_assert_str_eq(spec, "{\"cluster\":{\"feeder\":[\"tcp://n1:5555\"],\"worker\":[\"tcp://n2:7000\","
                           "\"tcp://n2:7001\",\"tcp://n2:7002\"]},\"task\":{\"type\":\"worker\",\"index\":1}}");
    struct sl_cluster c;
    uint32_t w, W, j, F;
    ck_assert_int_eq(sl_cluster_parse(&c, spec, &err), 0);
    ck_assert_int_eq(sl_cluster_worker(&c, &w, &W, &err), 0);
    ck_assert_uint_eq(w, 1);
    ck_assert_uint_eq(W, 3);
    ck_assert_uint_eq(c.nfeeders, 1);
    ck_assert_str_eq(c.worker_addrs[1], "tcp://n2:7001");
    sl_cluster_free(&c);
    sl_free(spec);
    /* two feeders; task 1 is feeder 1 and binds its port on every interface */
    env[0] = "SLURM_PROCID=1";
    env[3] = "SLURM_STEP_TASKS_PER_NODE=2(x2)";
    ck_assert_int_eq(sl_env_cluster_spec(&spec, "slurm:feeders=2,feeder-port=6000,ring-port=6002", env, &err), 0);
    ck_assert_str_eq(spec, "{\"cluster\":{\"feeder\":[\"tcp://n1:6000\",\"tcp://n1:6001\"],\"worker\":["
                           "\"tcp://n2:6002\",\"tcp://n2:6003\"]},\"task\":{\"type\":\"feeder\",\"index\":1}}");
    char bind[SL_CLUSTER_MAX_ADDR + 8];
    ck_assert_int_eq(sl_cluster_parse(&c, spec, &err), 0);
    ck_assert_int_eq(sl_cluster_feeder(&c, &j, &F, bind, sizeof bind, &err), 0);
    ck_assert_uint_eq(j, 1);
    ck_assert_uint_eq(F, 2);
    ck_assert_str_eq(bind, "tcp://*:6001");
    ck_assert_int_eq(sl_cluster_worker(&c, &w, &W, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "cluster spec: this task is 'feeder', not a chief or worker");
    sl_cluster_free(&c);
    sl_free(spec);

    const struct {
        const char *source, *msg;
    } bad[] = {
        {"slurm:feeders=4", "slurm layout: feeders=4 leaves no task for a trainer worker: the step has 4 tasks"},
        {"slurm:feeder-port=65535,feeders=2", "slurm layout: feeder-port 65535 + 2 feeders passes port 65535"},
        {"slurm:ring-port=65534", "slurm layout: ring-port 65534 + 3 workers passes port 65535"},
        {"slurm:feeder-port=7002", "slurm layout: feeder ports 7002-7002 and ring ports 7000-7002 overlap"},
        {"slurm:feeders=2,feeder-port=6999", "slurm layout: feeder ports 6999-7000 and ring ports 7000-7001 overlap"},
        {"slurm:", "expected slurm, slurm:KEY=VALUE,... or tf_config, got 'slurm:'"},
        {"slurmx", "expected slurm, slurm:KEY=VALUE,... or tf_config, got 'slurmx'"},
        {"TF_CONFIG", "expected slurm, slurm:KEY=VALUE,... or tf_config, got 'TF_CONFIG'"},
        {"slurm:nodes=2", "slurm layout: unknown key 'nodes' (expected feeders, feeder-port or ring-port)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        spec = (char *)1;
        ck_assert_int_eq(sl_env_cluster_spec(&spec, bad[i].source, env, &err), SL_EINVAL);
        ck_assert_msg(strcmp(err.msg, bad[i].msg) == 0, "'%s': got '%s'", bad[i].source, err.msg);
        ck_assert_ptr_null(spec);
    }
    /* the largest step: 65536 one-task nodes, the spec of its last worker */
    const char *big[] = {"SLURM_PROCID=65535", "SLURM_NTASKS=65536", "SLURM_STEP_NODELIST=n[00001-65536]",
                         "SLURM_STEP_TASKS_PER_NODE=1(x65536)", NULL};
    ck_assert_int_eq(sl_env_cluster_spec(&spec, "slurm:ring-port=2", big, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "slurm layout: ring-port 2 + 65535 workers passes port 65535");
    const char *many[] = {"SLURM_PROCID=60000", "SLURM_NTASKS=60001", "SLURM_STEP_NODELIST=n[00001-60001]", NULL};
    ck_assert_int_eq(sl_env_cluster_spec(&spec, "slurm:feeder-port=1,ring-port=2", many, &err), 0);
    ck_assert(strstr(spec, "\"tcp://n60001:60001\"]},\"task\":{\"type\":\"worker\",\"index\":59999}}") != NULL);
    ck_assert_int_eq(sl_cluster_parse(&c, spec, &err), 0);
    ck_assert_int_eq(sl_cluster_worker(&c, &w, &W, &err), 0);
    ck_assert_uint_eq(w, 59999);
    ck_assert_uint_eq(W, 60000);
    sl_cluster_free(&c);
    sl_free(spec);
}
END_TEST

/* ---- TF_CONFIG ---- */

static void expect_tf_error(const char *value, const char *msg)
{
    char var[512];
    snprintf(var, sizeof var, "TF_CONFIG=%s", value);
    const char *env[] = {var, NULL};
    char *spec = (char *)1;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_env_cluster_spec(&spec, "tf_config", env, &err), SL_EINVAL);
    ck_assert_msg(strcmp(err.msg, msg) == 0, "'%s': got '%s', want '%s'", value, err.msg, msg);
    ck_assert_ptr_null(spec);
}

START_TEST(test_tf_config)
{
    const char *env[] = {"TF_CONFIG=\n  {\"cluster\": {\"worker\": [\"h0:2222\", \"h1:2222\"], \"feeder\": "
                         "[\"tcp://f:5555\"]},\n   \"task\": {\"type\": \"worker\", \"index\": 1}}\n",
                         NULL};
    char *spec;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_env_cluster_spec(&spec, "tf_config", env, &err), 0);
    ck_assert_str_eq(spec, "{\"cluster\":{\"worker\":[\"h0:2222\",\"h1:2222\"],\"feeder\":[\"tcp://f:5555\"]},"
                           "\"task\":{\"type\":\"worker\",\"index\":1}}");
    struct sl_cluster c;
    uint32_t w, W;
    ck_assert_int_eq(sl_cluster_parse(&c, spec, &err), 0);
    ck_assert_int_eq(sl_cluster_worker(&c, &w, &W, &err), 0);
    ck_assert_uint_eq(w, 1);
    ck_assert_uint_eq(W, 2);
    sl_cluster_free(&c);
    sl_free(spec);

    const char *unset[] = {"TF_CONFIGX={}", NULL};
    ck_assert_int_eq(sl_env_cluster_spec(&spec, "tf_config", unset, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "TF_CONFIG is not set");
    expect_tf_error("", "TF_CONFIG:1:0: '[' or '{' expected near end of file");
    expect_tf_error("[1]", "TF_CONFIG: not a JSON object");
    expect_tf_error("{\"cluster\": {}, \"cluster\": {}}", "TF_CONFIG:1:25: duplicate object key near '\"cluster\"'");
    expect_tf_error("{\"cluster\": {\"worker\": [], \"worker\": [\"a:1\"]}}",
                    "TF_CONFIG:1:35: duplicate object key near '\"worker\"'");
    expect_tf_error("{\"cluster\": {}, \"task\": {\"type\": \"worker\", \"type\": \"chief\", \"index\": 0}}",
                    "TF_CONFIG:1:49: duplicate object key near '\"type\"'");
    expect_tf_error("{\"cluster\": {}} x", "TF_CONFIG:1:17: end of file expected near 'x'");
    expect_tf_error("{\"task\": {\"type\": \"worker\", \"index\": 0}}", "TF_CONFIG: 'cluster' must be an object");
    expect_tf_error("{\"cluster\": []}", "TF_CONFIG: 'cluster' must be an object");
    expect_tf_error("{\"cluster\": {\"worker\": [\"a:1\"]}}",
                    "TF_CONFIG: 'task' must be an object with 'type' and 'index' (which task is this process?)");
    expect_tf_error("{\"cluster\": {}, \"task\": {\"type\": \"\", \"index\": 0}}",
                    "TF_CONFIG: 'task.type' must be a string of 1 to 31 bytes");
    expect_tf_error("{\"cluster\": {}, \"task\": {\"type\": \"workerworkerworkerworkerworkerwor\", \"index\": 0}}",
                    "TF_CONFIG: 'task.type' must be a string of 1 to 31 bytes");
    expect_tf_error("{\"cluster\": {}, \"task\": {\"type\": 3, \"index\": 0}}",
                    "TF_CONFIG: 'task.type' must be a string of 1 to 31 bytes");
    expect_tf_error("{\"cluster\": {}, \"task\": {\"type\": \"worker\", \"index\": \"1\"}}",
                    "TF_CONFIG: 'task.index' must be an integer in [0, 65535]");
    expect_tf_error("{\"cluster\": {}, \"task\": {\"type\": \"worker\", \"index\": 1.0}}",
                    "TF_CONFIG: 'task.index' must be an integer in [0, 65535]");
    expect_tf_error("{\"cluster\": {}, \"task\": {\"type\": \"worker\", \"index\": -1}}",
                    "TF_CONFIG: 'task.index' must be an integer in [0, 65535]");
    expect_tf_error("{\"cluster\": {}, \"task\": {\"type\": \"worker\", \"index\": 65536}}",
                    "TF_CONFIG: 'task.index' must be an integer in [0, 65535]");
    expect_tf_error("{\"cluster\": {}, \"task\": {\"type\": \"worker\", \"index\": 99999999999999999999999}}",
                    "TF_CONFIG:1:75: too big integer");
    /* a list of 65537 tasks */
    size_t cap = 16 + 65537 * 6 + 64;
    char *big = malloc(cap);
    ck_assert_ptr_nonnull(big);
    size_t used = (size_t)snprintf(big, cap, "TF_CONFIG={\"cluster\":{\"ps\":[");
    for (int i = 0; i < 65537; i++)
        used += (size_t)snprintf(big + used, cap - used, "%s\"a:1\"", i ? "," : "");
    snprintf(big + used, cap - used, "]}}");
    const char *benv[] = {big, NULL};
    ck_assert_int_eq(sl_env_cluster_spec(&spec, "tf_config", benv, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "TF_CONFIG: 'cluster.ps' lists 65537 tasks, at most 65536");
    free(big);
    /* longer than 4 MiB: refused before parsing */
    big = malloc(SL_ENV_MAX_TF_CONFIG + 32);
    ck_assert_ptr_nonnull(big);
    memcpy(big, "TF_CONFIG={", 11);
    memset(big + 11, ' ', SL_ENV_MAX_TF_CONFIG);
    memcpy(big + 11 + SL_ENV_MAX_TF_CONFIG - 1, "}", 2);
    benv[0] = big;
    ck_assert_int_eq(sl_env_cluster_spec(&spec, "tf_config", benv, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "TF_CONFIG is longer than 4194304 bytes");
    free(big);
}
END_TEST

/* ---- --cluster-from against the options it derives ---- */

struct fake_opts {
    const char *cluster, *listen, *from;
    uint64_t index, feeders;
};

START_TEST(test_refuse_given)
{
    static const struct sl_opt rows[] = {
        {"cluster", 0, SL_OPT_STRING, offsetof(struct fake_opts, cluster), 0, 0, NULL, "S", "", NULL, NULL},
        {"listen", 0, SL_OPT_STRING, offsetof(struct fake_opts, listen), 0, 0, NULL, "A", "", NULL, NULL},
        {"feeder-index", 0, SL_OPT_U64, offsetof(struct fake_opts, index), 0, 9, "0", "J", "", NULL, NULL},
        {"feeders", 0, SL_OPT_U64, offsetof(struct fake_opts, feeders), 1, 9, "1", "F", "", NULL, NULL},
        {"cluster-from", 0, SL_OPT_STRING, offsetof(struct fake_opts, from), 0, 0, NULL, "S", "", NULL, NULL},
    };
    static const char *const derived[] = {"cluster", "listen", "feeder-index", "feeders"};
    const struct sl_opt_cmd cmd = {.prog = "p", .usage = "", .rows = rows, .nrows = 5};
    const struct {
        const char *args[4];
        const char *msg;
    } cases[] = {
        {{"p", "--cluster-from=slurm", NULL}, NULL},
        {{"p", "--cluster-from=slurm:feeders=2", "--feeders=2", NULL},
         "--cluster-from slurm gives --listen, --feeder-index and --feeders: give it or --feeders, not both"},
        {{"p", "--listen=tcp://*:1", "--cluster-from=tf_config", NULL},
         "--cluster-from tf_config gives --listen, --feeder-index and --feeders: give it or --listen, not both"},
        {{"p", "--cluster={}", "--cluster-from=tf_config", NULL}, "give --cluster-from or --cluster, not both"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct fake_opts o = {0};
        uint64_t given = 0;
        struct sl_error err = {0};
        int argc = 0;
        while (cases[i].args[argc] != NULL)
            argc++;
        ck_assert_int_eq(sl_opt_parse(&cmd, argc, (char **)cases[i].args, &o, &given, &err), 0);
        int rc = sl_env_refuse_given(&cmd, given, o.from, derived, 4, &err);
        if (cases[i].msg == NULL) {
            ck_assert_int_eq(rc, 0);
            continue;
        }
        ck_assert_int_eq(rc, SL_EINVAL);
        ck_assert_str_eq(err.msg, cases[i].msg);
    }
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_env");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_nodelist_expansions);
    tcase_add_test(tc, test_nodelist_bounds);
    tcase_add_test(tc, test_nodelist_huge_range_allocates_nothing);
    tcase_add_test(tc, test_nodelist_errors);
    tcase_add_test(tc, test_nodelist_random);
    tcase_add_test(tc, test_tasks_per_node);
    tcase_add_test(tc, test_slurm_placement);
    tcase_add_test(tc, test_slurm_errors);
    tcase_add_test(tc, test_layout);
    tcase_add_test(tc, test_slurm_spec);
    tcase_add_test(tc, test_tf_config);
    tcase_add_test(tc, test_refuse_given);
    suite_add_tcase(s, tc);
    return s;
}
