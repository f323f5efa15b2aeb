/* bench_limits: the least work that reads, inflates or copies the bytes a
 * sluice path handles; sluice-bench compares its figures with these,
 * measured in the same run on the same machine.
 *
 * Each pass reads one file whole through read(2) into a 1 MiB buffer (the
 * page cache is warm after the first pass, so it is a memory-bandwidth and
 * syscall figure, not a disk one) and reports the bytes it produced: file
 * bytes for read, inflated bytes for the inflaters. The buffers are made
 * once per process and reused.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#ifdef SLUICE_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

#include "bench.h"
#include "sl_alloc.h"
#include "sl_clock.h"

#define BLOCK ((size_t)1 << 20)

/* Two 1 MiB blocks shared by the passes (one thread). */
static uint8_t *block(int which)
{
    static uint8_t *blocks[2];
    if (blocks[which] == NULL)
        blocks[which] = sl_malloc(BLOCK);
    return blocks[which];
}

int bench_pass_read(const char *path, uint64_t *bytes)
{
    uint8_t *buf = block(0);
    int fd = buf ? open(path, O_RDONLY) : -1;
    if (fd < 0)
        return -1;
    uint64_t total = 0;
    ssize_t n;
    while ((n = read(fd, buf, BLOCK)) > 0)
        total += (uint64_t)n;
    close(fd);
    *bytes = total;
    return n < 0 ? -1 : 0;
}

int bench_pass_zlib_inflate(const char *path, uint64_t *bytes)
{
    uint8_t *in = block(0), *out = block(1);
    int fd = in && out ? open(path, O_RDONLY) : -1;
    if (fd < 0)
        return -1;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK) { /* 15 + 32: gzip or zlib header, detected */
        close(fd);
        return -1;
    }
    uint64_t total = 0;
    int zr = Z_OK;
    ssize_t n = 0;
    while (zr != Z_STREAM_END && (n = read(fd, in, BLOCK)) > 0) {
        z.next_in = in;
        z.avail_in = (uInt)n;
        while (zr == Z_OK && z.avail_in > 0) {
            z.next_out = out;
            z.avail_out = (uInt)BLOCK;
            zr = inflate(&z, Z_NO_FLUSH);
            total += BLOCK - z.avail_out;
        }
    }
    inflateEnd(&z);
    close(fd);
    *bytes = total;
    return zr == Z_STREAM_END ? 0 : -1;
}

#ifdef SLUICE_HAVE_ISAL
int bench_pass_isal_inflate(const char *path, uint64_t *bytes)
{
    static struct inflate_state *st;
    uint8_t *in = block(0), *out = block(1);
    if (st == NULL)
        st = sl_malloc(sizeof *st);
    int fd = in && out && st ? open(path, O_RDONLY) : -1;
    if (fd < 0)
        return -1;
    isal_inflate_init(st);
    st->crc_flag = ISAL_GZIP;
    uint64_t total = 0;
    int bad = 0;
    ssize_t n;
    while (!bad && st->block_state != ISAL_BLOCK_FINISH && (n = read(fd, in, BLOCK)) > 0) {
        st->next_in = in;
        st->avail_in = (uint32_t)n;
        for (;;) {
            st->next_out = out;
            st->avail_out = (uint32_t)BLOCK;
            bad = isal_inflate(st) < 0;
            total += BLOCK - st->avail_out;
            /* a full output block may leave input to inflate */
            if (bad || st->block_state == ISAL_BLOCK_FINISH || (st->avail_in == 0 && st->avail_out > 0))
                break;
        }
    }
    close(fd);
    *bytes = total;
    return !bad && st->block_state == ISAL_BLOCK_FINISH ? 0 : -1;
}
#endif

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

bench_pass_fn bench_inflate_for(const char *path, const char **name)
{
    int gz = ends_with(path, ".gz") || ends_with(path, ".tgz");
    if (!gz && !ends_with(path, ".zlib") && !ends_with(path, ".zz")) {
        *name = NULL;
        return NULL;
    }
#ifdef SLUICE_HAVE_ISAL
    if (gz) {
        *name = "isal";
        return bench_pass_isal_inflate;
    }
#endif
    *name = "zlib";
    return bench_pass_zlib_inflate;
}

double bench_rate_files(bench_pass_fn fn, char *const *paths, size_t n, double min_time)
{
    uint64_t total = 0;
    double t0 = sl_clock_s(), el;
    do {
        for (size_t i = 0; i < n; i++) {
            uint64_t b = 0;
            if (fn(paths[i], &b) != 0)
                return -1;
            total += b;
        }
        el = sl_clock_s() - t0;
    } while (el < min_time && n > 0);
    return el > 0 ? (double)total / el : -1;
}

double bench_rate_memcpy(size_t size, double min_time)
{
    /* two buffers larger than the last-level cache would be unfair to small
     * pieces, which the feeder copies while they are hot; use the size given */
    uint8_t *src = sl_malloc(size ? size : 1), *dst = sl_malloc(size ? size : 1);
    if (src == NULL || dst == NULL) {
        sl_free(src);
        sl_free(dst);
        return -1;
    }
    memset(src, 1, size);
    memset(dst, 0, size);
    uint64_t total = 0;
    double t0 = sl_clock_s(), el;
    volatile uint8_t sink = 0; /* keeps the copies from being optimized away */
    do {
        for (int i = 0; i < 16; i++) {
            memcpy(dst, src, size);
            sink = dst[size ? size - 1 : 0];
            total += size;
        }
        el = sl_clock_s() - t0;
    } while (el < min_time);
    sl_free(src);
    sl_free(dst);
    (void)sink;
    return el > 0 ? (double)total / el : -1;
}
