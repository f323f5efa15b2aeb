/* libFuzzer target for Slurm's list grammars (shared/sl_env.c): the input,
 * up to its first NUL, as a node list (sl_env_nodelist:
 * "node[01-04,07],gpu1") and as a tasks-per-node list
 * (sl_env_tasks_per_node: "2(x3),1"). Each answers 0 or SL_EINVAL with a
 * message (SL_ENOMEM never: the lists are counted before anything is
 * allocated, and bounded). A node list accepted holds 1 to 65536 host
 * names of 1 to 240 host characters, NULL-terminated, and the names joined
 * with commas (a list without brackets) expand to the same names; tasks
 * per node accepted are each at least 1, at most 65536 in all, and written
 * plainly ("2,2,2,1") they read back the same. */
#include "fuzz_common.h"
#include "sl_alloc.h"
#include "sl_env.h"

static int host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_';
}

static void check_nodelist(const char *text)
{
    struct sl_env_hosts h, again;
    struct sl_error err = {0};
    int rc = sl_env_nodelist(&h, text, "LIST", &err);
    fuzz_note("sl_env_nodelist", rc, err.msg);
    if (rc != 0) {
        static const int errors[] = {SL_EINVAL, 0};
        fuzz_check_error(rc, &err, errors);
        CHECK(h.n == 0 && h.names == NULL);
        return;
    }
    CHECK(h.n >= 1 && h.n <= SL_ENV_MAX_HOSTS && h.names[h.n] == NULL);
    size_t total = 0;
    for (size_t i = 0; i < h.n; i++) {
        size_t len = strlen(h.names[i]);
        CHECK(len >= 1 && len <= SL_ENV_MAX_HOST);
        for (size_t k = 0; k < len; k++)
            CHECK(host_char(h.names[i][k]));
        total += len + 1;
    }
    if (total <= (1u << 20)) {
        char *joined = malloc(total), *at = joined;
        CHECK(joined != NULL);
        for (size_t i = 0; i < h.n; i++) {
            size_t len = strlen(h.names[i]);
            memcpy(at, h.names[i], len);
            at[len] = i + 1 < h.n ? ',' : '\0';
            at += len + 1;
        }
        CHECK(sl_env_nodelist(&again, joined, "LIST", &err) == 0);
        CHECK(again.n == h.n);
        for (size_t i = 0; i < h.n; i++)
            CHECK(strcmp(again.names[i], h.names[i]) == 0);
        sl_env_hosts_free(&again);
        free(joined);
    }
    sl_env_hosts_free(&h);
}

static void check_tasks(const char *text)
{
    uint32_t *counts = NULL, *again = NULL;
    size_t n = 0, m = 0;
    struct sl_error err = {0};
    int rc = sl_env_tasks_per_node(&counts, &n, text, "TASKS", &err);
    fuzz_note("sl_env_tasks_per_node", rc, err.msg);
    if (rc != 0) {
        static const int errors[] = {SL_EINVAL, 0};
        fuzz_check_error(rc, &err, errors);
        CHECK(counts == NULL);
        return;
    }
    CHECK(n >= 1 && n <= SL_ENV_MAX_HOSTS);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(counts[i] >= 1);
        sum += counts[i];
    }
    CHECK(sum <= SL_ENV_MAX_HOSTS);
    char *plain = malloc(n * 7 + 1);
    CHECK(plain != NULL);
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        at += (size_t)sprintf(plain + at, "%s%u", i ? "," : "", counts[i]);
    CHECK(sl_env_tasks_per_node(&again, &m, plain, "TASKS", &err) == 0);
    CHECK(m == n && memcmp(again, counts, n * sizeof *counts) == 0);
    free(plain);
    sl_free(again);
    sl_free(counts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *text = malloc(size + 1);
    CHECK(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    check_nodelist(text);
    check_tasks(text);
    free(text);
    return 0;
}
