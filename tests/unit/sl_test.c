/* Runner and helpers for the Check unit tests. */
#define _XOPEN_SOURCE 700
#include "sl_test.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char test_dir[256];
static pid_t test_dir_owner; /* forked test cases must not remove it */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void cleanup(void)
{
    if (test_dir[0] != '\0' && getpid() == test_dir_owner)
        nftw(test_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *sl_test_dir(void)
{
    if (test_dir[0] == '\0') {
        const char *tmp = getenv("TMPDIR");
        snprintf(test_dir, sizeof test_dir, "%s/sluice-test-XXXXXX", tmp ? tmp : "/tmp");
        test_dir_owner = getpid();
        if (mkdtemp(test_dir) == NULL) {
            perror("mkdtemp");
            exit(2);
        }
    }
    return test_dir;
}

const char *sl_test_path(const char *name)
{
    static char slots[8][512];
    static int next;
    char *p = slots[next++ % 8];
    snprintf(p, 512, "%s/%s", sl_test_dir(), name);
    return p;
}

const char *sl_test_write(const char *name, const void *data, size_t len)
{
    const char *path = sl_test_path(name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
        perror(path);
        exit(2);
    }
    return path;
}

uint8_t *sl_test_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    *len = n;
    return buf;
}

size_t sl_test_hex(const char *hex, uint8_t *out, size_t cap)
{
    size_t n = 0;
    int hi = -1;
    for (const char *p = hex; *p; p++) {
        int v;
        if (*p >= '0' && *p <= '9')
            v = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            v = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            v = *p - 'A' + 10;
        else
            continue;
        if (hi < 0) {
            hi = v;
        } else {
            if (n < cap)
                out[n] = (uint8_t)(hi << 4 | v);
            n++;
            hi = -1;
        }
    }
    return n;
}

int main(void)
{
    sl_test_dir();
    atexit(cleanup);
    SRunner *sr = srunner_create(sl_test_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

int sl_test_xinuse(uint64_t *out)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)) || __get_cpuid_max(0, NULL) < 0xd)
        return 0;
    __cpuid_count(0xd, 1, a, b, c, d);
    if (!(a & (1u << 2)))
        return 0;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
    *out = (uint64_t)hi << 32 | lo;
    return 1;
}
#else
int sl_test_xinuse(uint64_t *out)
{
    (void)out;
    return 0;
}
#endif
