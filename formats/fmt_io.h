/* fmt_io: how an uncompressed file is read, mapped or read(2) (fmt_stream.h
 * says what each path costs and gives): the names, the probe that measures
 * both on one file, and the process-wide choice FMT_IO_AUTO takes: the
 * environment's SLUICE_IO, else a probe's, run once on the first plain file
 * of at least 32 MiB in the page cache; until a probe has run, read.
 *
 * Thread-safe: yes (the choice is made once, under a lock).
 */
#ifndef FMT_IO_H
#define FMT_IO_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

/* How an uncompressed file is read (fmt_stream.h). */
enum fmt_io { FMT_IO_AUTO = 0, FMT_IO_READ, FMT_IO_MAP };

/* "auto", "read", "map". Returns 0 or SL_EINVAL. */
int fmt_io_parse(const char *s, enum fmt_io *out) SL_MUST_CHECK;
const char *fmt_io_name(enum fmt_io io);

/* What the probe measured: over a few 2 MiB regions of one file in the page
 * cache, alternated, the fastest read(2) (1 MiB calls into a reused buffer)
 * + CRC32C, and the fastest mmap + CRC32C + munmap, in bytes/s. */
struct fmt_io_probe {
    int done;           /* 0: no probe ran (no plain file large enough, or SLUICE_IO set) */
    enum fmt_io choice; /* what AUTO uses: MAP only when it beat READ by 5% or more */
    double read_bps, map_bps;
    char path[256]; /* the file measured (truncated) */
};

/* Measure `path` now (the process-wide choice is not changed). SL_EINVAL
 * when it is under 32 MiB, or when its probed regions are not all in the
 * page cache (a probe of a disk would measure the disk). */
int fmt_io_probe_file(const char *path, struct fmt_io_probe *out, struct sl_error *err) SL_MUST_CHECK;
/* The process-wide choice so far, and where it came from: "SLUICE_IO",
 * "probe" or "default" (no probe yet). */
enum fmt_io fmt_io_current(struct fmt_io_probe *probe, const char **source);

/* Internal (fmt_stream): FMT_IO_AUTO's answer for the open plain file `fd`
 * of `size` bytes, probing it when it is the first one large enough. */
enum fmt_io fmt__io_auto(int fd, uint64_t size, const char *path);

#endif
