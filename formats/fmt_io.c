/* fmt_io: map or read. The probe maps a file once and times, on regions
 * spread over it and each touched once, read(2) into a reused buffer and
 * the mapping's page faults, each followed by the CRC the record path pays;
 * the process keeps the first answer (or SLUICE_IO's) for every later
 * file, so that all of a job's files are read one way.
 */
#include "fmt_io.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_crc32c.h"

#define PROBE_MIN_FILE ((uint64_t)32 << 20)
#define PROBE_REGION ((size_t)2 << 20)
#define PROBE_CALL ((size_t)1 << 20) /* read(2) size, as the baseline's */
#define PROBE_ROUNDS 3
#define PAGE 4096

int fmt_io_parse(const char *s, enum fmt_io *out)
{
    if (strcmp(s, "auto") == 0)
        *out = FMT_IO_AUTO;
    else if (strcmp(s, "read") == 0)
        *out = FMT_IO_READ;
    else if (strcmp(s, "map") == 0)
        *out = FMT_IO_MAP;
    else
        return SL_EINVAL;
    return 0;
}

const char *fmt_io_name(enum fmt_io io)
{
    switch (io) {
    case FMT_IO_AUTO: return "auto";
    case FMT_IO_READ: return "read";
    case FMT_IO_MAP: return "map";
    }
    return "?";
}

/* Are the probe's regions of the mapping `m` all in the page cache?
 * (mincore: the pages are not touched.) */
static int regions_cached(const uint8_t *m, const uint64_t *offs, size_t n)
{
    unsigned char vec[PROBE_REGION / PAGE];
    for (size_t i = 0; i < n; i++) {
        if (mincore((void *)(m + offs[i]), PROBE_REGION, vec) != 0)
            return 0;
        for (size_t k = 0; k < sizeof vec; k++)
            if (!(vec[k] & 1))
                return 0;
    }
    return 1;
}

static uint64_t probe_read(int fd, uint64_t off, uint8_t *buf, uint32_t *crc)
{
    uint64_t t0 = sl_clock_ns();
    for (size_t done = 0; done < PROBE_REGION;) {
        ssize_t r = pread(fd, buf, PROBE_CALL, (off_t)(off + done));
        if (r <= 0)
            return UINT64_MAX;
        *crc = sl_crc32c_extend(*crc, buf, (size_t)r);
        done += (size_t)r;
    }
    return sl_clock_ns() - t0;
}

/* A region of the file's mapping, its pages never touched before: the
 * faults and the CRC, as the mapped path pays them (the mapping is made
 * once for the whole file, as that path makes it). */
static uint64_t probe_map(const uint8_t *m, uint64_t off, uint32_t *crc)
{
    uint64_t t0 = sl_clock_ns();
    for (size_t done = 0; done < PROBE_REGION; done += PROBE_CALL)
        *crc = sl_crc32c_extend(*crc, m + off + done, PROBE_CALL);
    return sl_clock_ns() - t0;
}

/* The probe over an open file of `size` bytes: 2 x PROBE_ROUNDS regions
 * spread over it, each read once, by one method or the other in turn (a
 * region read twice would come from the CPU's caches). */
static int probe_fd(int fd, uint64_t size, const char *path, struct fmt_io_probe *out, struct sl_error *err)
{
    memset(out, 0, sizeof *out);
    if (size < PROBE_MIN_FILE)
        return sl_error_set(err, SL_EINVAL, "%s: %llu bytes, too small to probe (at least %llu)", path,
                            (unsigned long long)size, (unsigned long long)PROBE_MIN_FILE);
    uint64_t offs[2 * PROBE_ROUNDS];
    uint64_t step = size / (2 * PROBE_ROUNDS);
    for (size_t i = 0; i < 2 * PROBE_ROUNDS; i++)
        offs[i] = (step * i) / PROBE_REGION * PROBE_REGION;
    if (size > (uint64_t)SIZE_MAX)
        return sl_error_set(err, SL_EINVAL, "%s: too large to map", path);
    uint8_t *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED)
        return sl_error_sys(err, errno, "mmap(%s)", path);
    madvise(m, (size_t)size, MADV_SEQUENTIAL);
    uint8_t *buf = NULL;
    int rc = 0;
    if (!regions_cached(m, offs, 2 * PROBE_ROUNDS))
        rc = sl_error_set(err, SL_EINVAL, "%s: not in the page cache, not probed", path);
    else if ((buf = sl_malloc(PROBE_CALL)) == NULL)
        rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory for the probe", path);
    uint64_t best_read = UINT64_MAX, best_map = UINT64_MAX;
    uint32_t crc = 0;
    if (rc == 0) {
        memset(buf, 0, PROBE_CALL); /* its pages faulted in before timing, as a reused window's are */
        for (size_t r = 0; r < PROBE_ROUNDS; r++) {
            uint64_t a = offs[2 * r + (r & 1)], b = offs[2 * r + 1 - (r & 1)];
            uint64_t tr = probe_read(fd, a, buf, &crc), tm = probe_map(m, b, &crc);
            best_read = tr < best_read ? tr : best_read;
            best_map = tm < best_map ? tm : best_map;
        }
        if (best_read == UINT64_MAX)
            rc = sl_error_set(err, SL_EIO, "%s: the probe could not read the file", path);
    }
    sl_free(buf);
    munmap(m, (size_t)size);
    if (rc != 0)
        return rc;
    out->done = 1;
    out->read_bps = (double)PROBE_REGION * 1e9 / (double)(best_read ? best_read : 1);
    out->map_bps = (double)PROBE_REGION * 1e9 / (double)(best_map ? best_map : 1);
    out->choice = out->map_bps >= out->read_bps * 1.05 ? FMT_IO_MAP : FMT_IO_READ;
    snprintf(out->path, sizeof out->path, "%s", path);
    (void)crc;
    return 0;
}

int fmt_io_probe_file(const char *path, struct fmt_io_probe *out, struct sl_error *err)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sl_error_sys(err, errno, "open(%s)", path);
    struct stat st;
    int rc = fstat(fd, &st) != 0    ? sl_error_sys(err, errno, "fstat(%s)", path)
             : !S_ISREG(st.st_mode) ? sl_error_set(err, SL_EINVAL, "%s: not a regular file", path)
                                    : probe_fd(fd, (uint64_t)st.st_size, path, out, err);
    close(fd);
    return rc;
}

/* The process-wide choice: io_state is 0 until SLUICE_IO or a probe sets
 * it; io_mu serializes the probe (others wait the ~2 ms it takes). */
static pthread_mutex_t io_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int io_state;
static int io_env_read;                   /* under io_mu */
static const char *io_source = "default"; /* under io_mu */
static struct fmt_io_probe io_probe;      /* under io_mu */

/* SLUICE_IO, read once: it decides for the whole process. Called with
 * io_mu held. */
static void io_env_locked(void)
{
    if (io_env_read)
        return;
    io_env_read = 1;
    const char *e = getenv("SLUICE_IO");
    enum fmt_io io;
    if (e != NULL && fmt_io_parse(e, &io) == 0 && io != FMT_IO_AUTO) {
        io_source = "SLUICE_IO";
        atomic_store(&io_state, (int)io);
    }
}

enum fmt_io fmt__io_auto(int fd, uint64_t size, const char *path)
{
    int st = atomic_load_explicit(&io_state, memory_order_acquire);
    if (st != 0)
        return (enum fmt_io)st;
    pthread_mutex_lock(&io_mu);
    io_env_locked();
    st = atomic_load(&io_state);
    if (st == 0 && size >= PROBE_MIN_FILE) {
        struct fmt_io_probe p;
        struct sl_error ignored = {0};
        if (probe_fd(fd, size, path, &p, &ignored) == 0) {
            io_probe = p;
            io_source = "probe";
            st = (int)p.choice;
            atomic_store(&io_state, st);
        }
    }
    pthread_mutex_unlock(&io_mu);
    return st != 0 ? (enum fmt_io)st : FMT_IO_READ;
}

enum fmt_io fmt_io_current(struct fmt_io_probe *probe, const char **source)
{
    pthread_mutex_lock(&io_mu);
    io_env_locked();
    int st = atomic_load(&io_state);
    if (probe != NULL)
        *probe = io_probe;
    if (source != NULL)
        *source = io_source;
    pthread_mutex_unlock(&io_mu);
    return st != 0 ? (enum fmt_io)st : FMT_IO_READ;
}
