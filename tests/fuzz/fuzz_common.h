/* What the libFuzzer targets share: CHECK (an invariant that does not
 * hold traps, so the fuzzer keeps the input), error checks, CRC-32C, and
 * the scratch files of the targets whose entry point reads a path.
 * Header-only: every target is one .c file (plus replay.c for the seed
 * replays that ctest runs). */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sl_error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(x)              \
    do {                      \
        if (!(x))             \
            __builtin_trap(); \
    } while (0)

/* An error return: the code is one of `allowed` (0-terminated), err
 * carries it, and a message (NUL-terminated) says what is wrong. */
static inline void fuzz_check_error(int rc, const struct sl_error *err, const int *allowed)
{
    int ok = 0;
    for (const int *a = allowed; *a != 0; a++)
        ok |= rc == *a;
    CHECK(ok);
    CHECK(err->code == rc);
    CHECK(err->msg[0] != '\0');
    CHECK(memchr(err->msg, '\0', sizeof err->msg) != NULL);
}

/* With SLUICE_FUZZ_TRACE set, each target says on stderr what its entry
 * point answered (to see which seeds get past which checks). */
static inline void fuzz_note(const char *entry, int rc, const char *why)
{
    static int trace = -1;
    if (trace < 0)
        trace = getenv("SLUICE_FUZZ_TRACE") != NULL;
    if (trace)
        fprintf(stderr, "  %s: %d%s%s\n", entry, rc, rc != 0 && why != NULL ? " " : "",
                rc != 0 && why != NULL ? why : "");
}

/* CRC-32C (Castagnoli, reflected), bit by bit: for the targets that put a
 * valid checksum into an input so that the checks behind it are fuzzed
 * too (not the tree's own, so that a bug there is not hidden). */
static inline uint32_t fuzz_crc32c(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= b[i];
        for (int k = 0; k < 8; k++)
            c = c >> 1 ^ (0x82f63b78u & (0u - (c & 1u)));
    }
    return c ^ 0xffffffffu;
}

static inline void fuzz_store_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void fuzz_store_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t fuzz_load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t fuzz_load_le64(const uint8_t *p)
{
    return (uint64_t)fuzz_load_le32(p) | (uint64_t)fuzz_load_le32(p + 4) << 32;
}

/* A private directory for the process's scratch files, removed at exit
 * (libFuzzer's own exits skip that: scripts/fuzz.sh gives the targets a
 * directory of its own in SLUICE_FUZZ_TMPDIR and removes it), in
 * SLUICE_FUZZ_TMPDIR when set, else /dev/shm when it can be written (no
 * disk write per input), else /tmp. */
static char fuzz_dir_path[192];

static inline void fuzz_dir_remove(void)
{
    char cmd[sizeof fuzz_dir_path + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_path);
    if (fuzz_dir_path[0] != '\0' && system(cmd) != 0)
        fprintf(stderr, "fuzz: could not remove %s\n", fuzz_dir_path);
}

static inline const char *fuzz_dir(void)
{
    if (fuzz_dir_path[0] == '\0') {
        const char *base = getenv("SLUICE_FUZZ_TMPDIR");
        if (base == NULL || base[0] == '\0')
            base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        CHECK(strlen(base) < sizeof fuzz_dir_path - 32);
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/sluice-fuzz-XXXXXX", base);
        CHECK(mkdtemp(fuzz_dir_path) != NULL);
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

/* path holds exactly the n bytes at p afterwards. */
static inline void fuzz_write_file(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    for (size_t done = 0; done < n;) {
        ssize_t w = write(fd, (const uint8_t *)p + done, n - done);
        CHECK(w > 0 || (w < 0 && errno == EINTR));
        if (w > 0)
            done += (size_t)w;
    }
    CHECK(close(fd) == 0);
}

/* The whole of path in a new buffer (*n bytes; the caller frees it). */
static inline uint8_t *fuzz_read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    size_t cap = 4096, len = 0;
    uint8_t *b = malloc(cap);
    CHECK(b != NULL);
    size_t k;
    while ((k = fread(b + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap) {
            b = realloc(b, cap *= 2);
            CHECK(b != NULL);
        }
    }
    fclose(f);
    *n = len;
    return b;
}

#endif
