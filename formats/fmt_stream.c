/* fmt_stream: one input path for every format.
 *
 * Source: a file descriptor (read(2) in chunks), a remote object (storage's
 * sto_read_at at the stream's own offset, in chunks of at least 1 MiB:
 * the same window and inflate input as a descriptor's) or a memory block.
 * A local name never goes through the seam's function pointers: it is
 * open(2)ed here as before (pipes and FIFOs included, which the seam's
 * file backend refuses), so its read loop is what it was. Layer:
 * none, or an inflater (ISA-L igzip when built with it, else zlib) that
 * decompresses whole-file gzip or zlib. The caller sees a window, a
 * contiguous run of decompressed bytes that grows on demand up to
 * max_window so that a whole record can always be lent without a copy.
 *
 * Uncompressed memory input is lent straight from the caller's block; an
 * uncompressed file is read straight into the window (no second buffer),
 * or mapped, as fmt_io.c's process-wide choice says.
 *
 * A lent block (a mapped file or the caller's memory) is prefetched a few
 * KiB ahead of the position as the window moves. A record's CRC is a short
 * call; from DRAM (a file larger than the last-level cache) each one would
 * otherwise start with a miss the hardware prefetcher has not covered,
 * since it stops at page boundaries. Measured in docs/performance.md
 * ("P1 at scale"): 1 GiB in the page cache, about 30% faster.
 *
 * ISA-L's inflate returns with the upper halves of the vector registers in
 * use; the framing code's SSE instructions would then each wait on them, so
 * the inflate call is followed by vzeroupper (as sl_crc32c does for its
 * ISA-L call).
 *
 * Compressed framing rules (docs/semantics.md 1.1): gzip members are read one
 * after another; bytes after the last member that are not another member,
 * and bytes after the end of a zlib stream, are an error (TensorFlow ignores
 * what follows a zlib stream; sluice refuses to drop data silently). A
 * compressed stream that ends early is an error at its compressed offset.
 */
#include "fmt_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#ifdef SLUICE_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

#include "sl_alloc.h"
#include "sto.h"

#define DEFAULT_BUFFER ((size_t)1 << 20)
/* A plain file read(2) into the window: 256 KiB calls keep the window in
 * the L2 cache while its records' CRCs read it (in one process against
 * read() + CRC32C of 1 MiB, 1 GiB in the page cache: 0.925-0.963x of the
 * baseline with 256 KiB, 0.894-0.955x with 1 MiB, the same runs). */
#define DEFAULT_PLAIN_READ ((size_t)256 << 10)
/* A remote object: each read is a request (or a part of one), so fewer,
 * larger ones; the window and inflate input are this large. */
#define DEFAULT_REMOTE_READ ((size_t)4 << 20)
#define DEFAULT_MAX_WINDOW (((size_t)64 << 20) + 64)
/* Lent blocks: keep between PREFETCH_AHEAD and 2 x PREFETCH_AHEAD bytes
 * past the position prefetched. `sluice-record verify` of 1 GiB in the page
 * cache against read() + CRC32C, medians of alternated runs: 2 KiB 1.14x,
 * 4 KiB 1.07x, 8 KiB 0.98x (31 runs); none 0.84x, 1 KiB 1.08x, 2 KiB 1.16x,
 * 4 KiB 1.07x (21 runs). */
#define PREFETCH_AHEAD ((size_t)2 << 10)
#define CACHE_LINE 64

enum inflater { INF_NONE, INF_ZLIB, INF_ISAL };

struct fmt_stream {
    char *path;
    int fd; /* -1 for memory and remote objects */
    int own_fd;
    struct sto_src *sto; /* a remote object (owned), read at sto_off; NULL otherwise */
    uint64_t sto_off;    /* remote: the object's offset of the next read */
    /* remote: the compression probe's bytes at offset 0, served before
     * sto_off's, so the first reads continue where the probe stopped (one
     * sequential stream for an HTTP source, not a range, then another) */
    uint8_t head[64];
    size_t head_len, head_pos;
    const uint8_t *mem;
    size_t mem_len, mem_pos; /* memory source: bytes handed to the layer so far */
    void *map;               /* mem is this mmap of the file (munmap at close) */
    uint64_t src_off;        /* plain file read(2): file offset of the next read */
    uint64_t src_limit;      /* plain regular file: its size at open (read no further); else UINT64_MAX */

    enum fmt_compression comp;
    enum inflater inflater;
    size_t chunk; /* read size */
    size_t max_window;
    uint64_t max_output; /* 0: no limit on the decompressed size */
    uint64_t produced;   /* decompressed bytes inflated so far */

    /* compressed input (INF_*): in[in_pos..in_len) unconsumed */
    uint8_t *in;
    size_t in_pos, in_len;
    uint64_t in_base; /* file offset of in[0] */
    int src_eof;

    /* decompressed window: win[win_pos..win_len) */
    uint8_t *win;
    size_t win_cap, win_pos, win_len;
    int win_borrowed; /* win points into mem (uncompressed memory source) */
    uint64_t out_off; /* decompressed offset of win[win_pos] */
    int out_eof;

    int member_open;   /* inflater is inside a member */
    size_t prefetched; /* lent window: win[..prefetched) has been prefetched */

    z_stream z;
    int z_ready;
#ifdef SLUICE_HAVE_ISAL
    struct inflate_state *isal;
#endif
};

int fmt_compression_parse(const char *s, enum fmt_compression *out)
{
    if (strcmp(s, "auto") == 0)
        *out = FMT_COMP_AUTO;
    else if (strcmp(s, "none") == 0 || strcmp(s, "") == 0)
        *out = FMT_COMP_NONE;
    else if (strcmp(s, "gzip") == 0 || strcmp(s, "GZIP") == 0)
        *out = FMT_COMP_GZIP;
    else if (strcmp(s, "zlib") == 0 || strcmp(s, "ZLIB") == 0)
        *out = FMT_COMP_ZLIB;
    else
        return SL_EINVAL;
    return 0;
}

const char *fmt_compression_name(enum fmt_compression c)
{
    switch (c) {
    case FMT_COMP_AUTO: return "auto";
    case FMT_COMP_NONE: return "none";
    case FMT_COMP_GZIP: return "gzip";
    case FMT_COMP_ZLIB: return "zlib";
    }
    return "?";
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int is_gzip_magic(const uint8_t *p, size_t n)
{
    return n >= 3 && p[0] == 0x1f && p[1] == 0x8b && p[2] == 8;
}

static int is_zlib_magic(const uint8_t *p, size_t n)
{
    return n >= 2 && (p[0] & 0x0F) == 8 && (p[0] >> 4) <= 7 && ((p[0] << 8) | p[1]) % 31 == 0;
}

/* Raw bytes from the source into dst; returns count, 0 at EOF, <0 error. */
static long source_read(struct fmt_stream *s, uint8_t *dst, size_t n, struct sl_error *err)
{
    if (s->sto != NULL) {
        if (n > LONG_MAX)
            n = LONG_MAX;
        if (s->head_pos < s->head_len) {
            size_t k = s->head_len - s->head_pos < n ? s->head_len - s->head_pos : n;
            memcpy(dst, s->head + s->head_pos, k);
            s->head_pos += k;
            return (long)k;
        }
        size_t got = 0;
        int rc = sto_read_at(s->sto, s->sto_off, dst, n, &got, err);
        if (rc != 0)
            return rc;
        s->sto_off += got;
        return (long)got;
    }
    if (s->fd < 0) {
        size_t k = s->mem_len - s->mem_pos;
        if (k > n)
            k = n;
        memcpy(dst, s->mem + s->mem_pos, k);
        s->mem_pos += k;
        return (long)k;
    }
    for (;;) {
        ssize_t r = read(s->fd, dst, n);
        if (r >= 0)
            return (long)r;
        if (errno != EINTR)
            return sl_error_sys(err, errno, "read(%s)", s->path);
    }
}

/* An uncompressed file's next bytes: never past the size a regular file
 * had at open (a mapping would not see them either); a file that ends
 * before that shrank while read, an error at the offset where it ended. */
static long plain_read(struct fmt_stream *s, uint8_t *dst, size_t n, struct sl_error *err)
{
    if (s->src_limit != UINT64_MAX) {
        uint64_t left = s->src_limit > s->src_off ? s->src_limit - s->src_off : 0;
        if (n > left)
            n = (size_t)left;
        if (n == 0)
            return 0;
    }
    long r = source_read(s, dst, n, err);
    if (r == 0 && s->src_limit != UINT64_MAX)
        return sl_error_set(err, SL_ECORRUPT,
                            "%s: the file shrank while read: it ends at %llu, it held %llu bytes "
                            "when opened",
                            s->path, (unsigned long long)s->src_off, (unsigned long long)s->src_limit);
    if (r > 0)
        s->src_off += (uint64_t)r;
    return r;
}

/* Peek at the first bytes of the source without consuming them. */
static int source_head(struct fmt_stream *s, uint8_t *head, size_t want, size_t *got, struct sl_error *err)
{
    if (s->sto != NULL) {
        want = want < sizeof s->head ? want : sizeof s->head;
        int rc = sto_read_at(s->sto, 0, s->head, want, got, err);
        if (rc != 0)
            return rc;
        memcpy(head, s->head, *got);
        s->head_len = *got;
        s->head_pos = 0;
        s->sto_off = *got;
        return 0;
    }
    if (s->fd < 0) {
        *got = s->mem_len < want ? s->mem_len : want;
        memcpy(head, s->mem, *got);
        return 0;
    }
    ssize_t r;
    do
        r = pread(s->fd, head, want, 0);
    while (r < 0 && errno == EINTR);
    if (r < 0) {
        /* not seekable (a pipe): no magic detection, assume none */
        *got = 0;
        return errno == ESPIPE ? 0 : sl_error_sys(err, errno, "read(%s)", s->path);
    }
    *got = (size_t)r;
    return 0;
}

static int resolve_compression(struct fmt_stream *s, const struct fmt_stream_opts *o, struct sl_error *err)
{
    enum fmt_compression c = o->compression;
    if (c == FMT_COMP_AUTO) {
        if (ends_with(s->path, ".gz") || ends_with(s->path, ".gzip"))
            c = FMT_COMP_GZIP;
        else if (ends_with(s->path, ".zz") || ends_with(s->path, ".zlib"))
            c = FMT_COMP_ZLIB;
    }
    if (c == FMT_COMP_AUTO) {
        uint8_t head[64];
        size_t got;
        int rc = source_head(s, head, sizeof head, &got, err);
        if (rc != 0)
            return rc;
        c = FMT_COMP_NONE;
        if (is_gzip_magic(head, got) || is_zlib_magic(head, got)) {
            if (o->plain_probe == NULL || !o->plain_probe(head, got))
                c = is_gzip_magic(head, got) ? FMT_COMP_GZIP : FMT_COMP_ZLIB;
        }
    }
    s->comp = c;
    return 0;
}

#if defined(SLUICE_HAVE_ISAL) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx"))) static void zero_upper_avx(void)
{
    __builtin_ia32_vzeroupper();
}

/* After a call into ISA-L's vector code: the upper register halves back to
 * their clean state (vzeroupper exists only with AVX). */
static void zero_upper(void)
{
    if (__builtin_cpu_supports("avx"))
        zero_upper_avx();
}
#else
static void zero_upper(void)
{
}
#endif

static int inflater_start(struct fmt_stream *s, struct sl_error *err)
{
    if (s->inflater == INF_ZLIB) {
        memset(&s->z, 0, sizeof s->z);
        int wbits = s->comp == FMT_COMP_GZIP ? 15 + 16 : 15;
        if (inflateInit2(&s->z, wbits) != Z_OK)
            return sl_error_set(err, SL_ENOMEM, "%s: inflateInit2 failed", s->path);
        s->z_ready = 1;
    }
#ifdef SLUICE_HAVE_ISAL
    if (s->inflater == INF_ISAL) {
        s->isal = sl_malloc(sizeof *s->isal);
        if (s->isal == NULL)
            return sl_error_set(err, SL_ENOMEM, "%s: out of memory", s->path);
        isal_inflate_init(s->isal);
        s->isal->crc_flag = s->comp == FMT_COMP_GZIP ? ISAL_GZIP : ISAL_ZLIB;
    }
#endif
    return 0;
}

static void inflater_reset(struct fmt_stream *s)
{
    if (s->inflater == INF_ZLIB)
        inflateReset(&s->z);
#ifdef SLUICE_HAVE_ISAL
    if (s->inflater == INF_ISAL) {
        isal_inflate_reset(s->isal);
        s->isal->crc_flag = s->comp == FMT_COMP_GZIP ? ISAL_GZIP : ISAL_ZLIB;
    }
#endif
}

static uint64_t in_offset(const struct fmt_stream *s)
{
    return s->in_base + s->in_pos;
}

/* An uncompressed regular file: mapped and lent straight from the page
 * cache, or read(2) into the window, as `io` (or AUTO's choice) says.
 * Anything that cannot be mapped (a pipe, an empty file) is read. A regular
 * file is read up to its size at open, as a mapping would be (one whose
 * size is 0 to the end it has). */
static void map_file(struct fmt_stream *s, enum fmt_io io)
{
    struct stat st;
    if (fstat(s->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return;
    if (st.st_size > 0) /* 0: empty, or a pseudo-file (/proc) whose size says nothing */
        s->src_limit = (uint64_t)st.st_size;
    off_t pos = lseek(s->fd, 0, SEEK_CUR);
    s->src_off = pos > 0 ? (uint64_t)pos : 0;
    if (st.st_size <= 0 || (uint64_t)st.st_size > (uint64_t)SIZE_MAX)
        return;
    if (io == FMT_IO_AUTO)
        io = fmt__io_auto(s->fd, (uint64_t)st.st_size, s->path);
    if (io != FMT_IO_MAP)
        return;
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, s->fd, 0);
    if (m == MAP_FAILED)
        return;
    madvise(m, (size_t)st.st_size, MADV_SEQUENTIAL);
    s->map = m;
    s->mem = m;
    s->mem_len = (size_t)st.st_size;
}

static int open_common(struct fmt_stream *s, const struct fmt_stream_opts *opts, struct sl_error *err)
{
    static const struct fmt_stream_opts defaults;
    const struct fmt_stream_opts *o = opts ? opts : &defaults;
    s->chunk = o->buffer_size ? o->buffer_size : DEFAULT_BUFFER;
    s->max_window = o->max_window ? o->max_window : DEFAULT_MAX_WINDOW;
    s->max_output = o->max_output;
    int rc = resolve_compression(s, o, err);
    if (rc != 0)
        return rc;
    if (s->sto != NULL && o->buffer_size == 0)
        s->chunk = DEFAULT_REMOTE_READ;
    if (s->comp == FMT_COMP_NONE) {
        s->inflater = INF_NONE;
        if (s->fd >= 0)
            map_file(s, o->io);
        if (s->map == NULL && s->sto == NULL && o->buffer_size == 0)
            s->chunk = DEFAULT_PLAIN_READ;
        if ((s->fd < 0 && s->sto == NULL) || s->map != NULL) {
            s->win = (uint8_t *)s->mem;
            s->win_cap = s->win_len = s->mem_len;
            s->win_borrowed = 1;
            s->mem_pos = s->mem_len;
            s->src_eof = 1;
        }
        return 0;
    }
#ifdef SLUICE_HAVE_ISAL
    s->inflater = o->use_zlib ? INF_ZLIB : INF_ISAL;
#else
    s->inflater = INF_ZLIB;
#endif
    s->in = sl_malloc(s->chunk);
    if (s->in == NULL)
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", s->path);
    return inflater_start(s, err);
}

static int stream_new(struct fmt_stream **out, const char *name, struct sl_error *err)
{
    struct fmt_stream *s = sl_calloc(1, sizeof *s);
    if (s == NULL || (s->path = sl_strdup(name)) == NULL) {
        sl_free(s);
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", name);
    }
    s->fd = -1;
    s->src_limit = UINT64_MAX;
    *out = s;
    return 0;
}

/* A storage source: its size is fixed at open (src_limit, as a regular
 * file's), and it is read at the stream's own offset. */
int fmt_stream_open_source(struct fmt_stream **out, struct sto_src *src, const struct fmt_stream_opts *opts,
                           struct sl_error *err)
{
    *out = NULL;
    struct fmt_stream *s = NULL;
    int rc = stream_new(&s, src->name, err);
    if (rc != 0) {
        sto_close(src);
        return rc;
    }
    s->sto = src;
    s->src_limit = src->size;
    rc = open_common(s, opts, err);
    if (rc != 0) {
        fmt_stream_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

int fmt_stream_open(struct fmt_stream **out, const char *name, const struct fmt_stream_opts *opts, struct sl_error *err)
{
    *out = NULL;
    const char *path = sto_local_path(name);
    if (path == NULL) {
        struct sto_src *src;
        int rc = sto_open(&src, name, err);
        return rc != 0 ? rc : fmt_stream_open_source(out, src, opts, err);
    }
    int fd;
    do
        fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return sl_error_sys(err, errno, "open(%s)", path);
    struct fmt_stream *s = NULL;
    int rc = stream_new(&s, name, err);
    if (rc != 0) {
        close(fd);
        return rc;
    }
    s->fd = fd;
    s->own_fd = 1;
#ifdef POSIX_FADV_SEQUENTIAL
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    rc = open_common(s, opts, err);
    if (rc != 0) {
        fmt_stream_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

int fmt_stream_open_fd(struct fmt_stream **out, const char *name, int fd, const struct fmt_stream_opts *opts,
                       struct sl_error *err)
{
    *out = NULL;
    struct fmt_stream *s = NULL;
    int rc = stream_new(&s, name, err);
    if (rc != 0)
        return rc;
    s->fd = fd;
    rc = open_common(s, opts, err);
    if (rc != 0) {
        fmt_stream_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

int fmt_stream_open_mem(struct fmt_stream **out, const char *name, const void *data, size_t len,
                        const struct fmt_stream_opts *opts, struct sl_error *err)
{
    *out = NULL;
    struct fmt_stream *s = NULL;
    int rc = stream_new(&s, name, err);
    if (rc != 0)
        return rc;
    s->mem = data;
    s->mem_len = len;
    rc = open_common(s, opts, err);
    if (rc != 0) {
        fmt_stream_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void fmt_stream_close(struct fmt_stream *s)
{
    if (s == NULL)
        return;
    if (s->z_ready)
        inflateEnd(&s->z);
#ifdef SLUICE_HAVE_ISAL
    sl_free(s->isal);
#endif
    if (s->map != NULL)
        munmap(s->map, s->mem_len);
    if (s->own_fd)
        close(s->fd);
    sto_close(s->sto);
    if (!s->win_borrowed)
        sl_free(s->win);
    sl_free(s->in);
    sl_free(s->path);
    sl_free(s);
}

/* Refill the compressed input buffer; keeps unconsumed bytes. */
static int refill_in(struct fmt_stream *s, struct sl_error *err)
{
    if (s->in_pos > 0) {
        memmove(s->in, s->in + s->in_pos, s->in_len - s->in_pos);
        s->in_base += s->in_pos;
        s->in_len -= s->in_pos;
        s->in_pos = 0;
    }
    if (s->in_len == s->chunk || s->src_eof)
        return 0;
    long r = source_read(s, s->in + s->in_len, s->chunk - s->in_len, err);
    if (r < 0)
        return (int)r;
    if (r == 0)
        s->src_eof = 1;
    s->in_len += (size_t)r;
    return 0;
}

static int corrupt(struct fmt_stream *s, const char *what, uint64_t at, struct sl_error *err)
{
    return sl_error_set(err, SL_ECORRUPT, "%s: %s at compressed offset %llu", s->path, what, (unsigned long long)at);
}

/* The member (or zlib stream) just ended: decide what follows. */
static int member_end(struct fmt_stream *s, struct sl_error *err)
{
    s->member_open = 0;
    for (;;) {
        if (s->in_len - s->in_pos >= 3 || s->src_eof)
            break;
        int rc = refill_in(s, err);
        if (rc != 0)
            return rc;
    }
    size_t left = s->in_len - s->in_pos;
    if (left == 0) {
        s->out_eof = 1;
        return 0;
    }
    if (s->comp == FMT_COMP_GZIP && is_gzip_magic(s->in + s->in_pos, left)) {
        inflater_reset(s);
        return 0;
    }
    return corrupt(s,
                   s->comp == FMT_COMP_GZIP ? "trailing bytes after gzip member" : "trailing bytes after zlib stream",
                   in_offset(s), err);
}

/* Inflate into dst[0..cap); *made gets the count (0 only at the end). */
static int inflate_some(struct fmt_stream *s, uint8_t *dst, size_t cap, size_t *made, struct sl_error *err)
{
    *made = 0;
    while (*made == 0 && !s->out_eof) {
        if (s->in_pos == s->in_len) {
            int rc = refill_in(s, err);
            if (rc != 0)
                return rc;
            if (s->in_len == 0 && s->src_eof && !s->member_open) {
                s->out_eof = 1; /* an empty file: no members at all */
                break;
            }
            /* at the end with a member open, the inflater still gets a call:
             * it may hold buffered input that finishes the member */
        }
        s->member_open = 1;
        size_t avail_in = s->in_len - s->in_pos;
        size_t out_cap = cap > UINT32_MAX ? UINT32_MAX : cap;
        int finished = 0;
        if (s->inflater == INF_ZLIB) {
            s->z.next_in = s->in + s->in_pos;
            s->z.avail_in = (uInt)avail_in;
            s->z.next_out = dst;
            s->z.avail_out = (uInt)out_cap;
            int zr = inflate(&s->z, Z_NO_FLUSH);
            s->in_pos += avail_in - s->z.avail_in;
            *made = out_cap - s->z.avail_out;
            if (zr == Z_STREAM_END)
                finished = 1;
            else if (zr == Z_NEED_DICT || zr == Z_DATA_ERROR || zr == Z_STREAM_ERROR || zr == Z_MEM_ERROR) {
                char what[160];
                snprintf(what, sizeof what, "corrupt %s stream (%s)", s->comp == FMT_COMP_GZIP ? "gzip" : "zlib",
                         s->z.msg ? s->z.msg : "inflate error");
                return corrupt(s, what, in_offset(s), err);
            }
        }
#ifdef SLUICE_HAVE_ISAL
        else {
            struct inflate_state *st = s->isal;
            st->next_in = s->in + s->in_pos;
            st->avail_in = (uint32_t)avail_in;
            st->next_out = dst;
            st->avail_out = (uint32_t)out_cap;
            int ir = isal_inflate(st);
            zero_upper();
            s->in_pos += avail_in - st->avail_in;
            *made = out_cap - st->avail_out;
            if (ir < 0) {
                static const char *names[] = {"",
                                              "invalid block",
                                              "invalid symbol",
                                              "invalid distance",
                                              "invalid header",
                                              "unsupported method",
                                              "checksum mismatch"};
                char what[160];
                snprintf(what, sizeof what, "corrupt %s stream (%s)", s->comp == FMT_COMP_GZIP ? "gzip" : "zlib",
                         ir >= -6 ? names[-ir] : "inflate error");
                return corrupt(s, what, in_offset(s), err);
            }
            if (st->block_state == ISAL_BLOCK_FINISH) {
                /* igzip reads ahead into its bit buffer: whole bytes it did
                 * not use belong to what follows the member */
                size_t unused = (size_t)(st->read_in_length > 0 ? st->read_in_length / 8 : 0);
                s->in_pos -= unused < s->in_pos ? unused : s->in_pos;
                st->read_in = 0;
                st->read_in_length = 0;
                finished = 1;
            }
        }
#endif
        s->produced += *made;
        if (s->max_output != 0 && s->produced > s->max_output)
            return sl_error_set(err, SL_ECORRUPT,
                                "%s: inflates past the limit of %llu bytes (at decompressed offset %llu, "
                                "compressed offset %llu)",
                                s->path, (unsigned long long)s->max_output, (unsigned long long)s->max_output,
                                (unsigned long long)in_offset(s));
        if (finished) {
            int rc = member_end(s, err);
            if (rc != 0)
                return rc;
        } else if (*made == 0 && s->in_pos == s->in_len && s->src_eof) {
            return corrupt(s, s->comp == FMT_COMP_GZIP ? "truncated gzip stream" : "truncated zlib stream",
                           in_offset(s), err);
        }
    }
    return 0;
}

static int grow_window(struct fmt_stream *s, size_t need, struct sl_error *err)
{
    size_t cap = s->win_cap ? s->win_cap : s->chunk;
    while (cap < need)
        cap = cap > s->max_window / 2 ? s->max_window : cap * 2;
    if (cap < need)
        cap = need;
    uint8_t *w = sl_realloc(s->win, cap);
    if (w == NULL)
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory for a %zu-byte window", s->path, cap);
    s->win = w;
    s->win_cap = cap;
    return 0;
}

/* Lent window: prefetch ahead of the position (see the top of the file).
 * Called once or twice per record, it issues prefetches only once per
 * PREFETCH_AHEAD bytes consumed; each line is prefetched once. */
static void prefetch_ahead(struct fmt_stream *s)
{
    if (s->win_pos + PREFETCH_AHEAD <= s->prefetched)
        return;
    size_t from = s->prefetched > s->win_pos ? s->prefetched : s->win_pos; /* after a seek forward */
    size_t to = s->win_len - s->win_pos > 2 * PREFETCH_AHEAD ? s->win_pos + 2 * PREFETCH_AHEAD : s->win_len;
    for (size_t q = from; q < to; q += CACHE_LINE)
        __builtin_prefetch(s->win + q);
    s->prefetched = to > s->win_pos + PREFETCH_AHEAD ? to : s->win_pos + PREFETCH_AHEAD;
}

int fmt_stream_window(struct fmt_stream *s, size_t need, const uint8_t **p, size_t *avail, struct sl_error *err)
{
    if (s->win_borrowed)
        prefetch_ahead(s);
    size_t have = s->win_len - s->win_pos;
    if (need > s->max_window)
        return sl_error_set(err, SL_EINVAL, "%s: window of %zu bytes requested, limit %zu", s->path, need,
                            s->max_window);
    if (have < need && !s->win_borrowed) {
        if (s->win_pos > 0) {
            memmove(s->win, s->win + s->win_pos, have);
            s->win_len = have;
            s->win_pos = 0;
        }
        if (s->win_cap < need || s->win_cap < s->chunk) {
            int rc = grow_window(s, need > s->chunk ? need : s->chunk, err);
            if (rc != 0)
                return rc;
        }
        while (s->win_len < need) {
            size_t space = s->win_cap - s->win_len;
            size_t made = 0;
            if (s->inflater == INF_NONE) {
                if (s->src_eof)
                    break;
                long r = plain_read(s, s->win + s->win_len, space, err);
                if (r < 0)
                    return (int)r;
                if (r == 0)
                    s->src_eof = 1;
                made = (size_t)r;
            } else {
                if (s->out_eof)
                    break;
                int rc = inflate_some(s, s->win + s->win_len, space, &made, err);
                if (rc != 0)
                    return rc;
            }
            s->win_len += made;
        }
        have = s->win_len - s->win_pos;
    }
    *p = s->win + s->win_pos;
    *avail = have;
    return 0;
}

int fmt_stream_read(struct fmt_stream *s, void *dst, size_t n, size_t *got, struct sl_error *err)
{
    uint8_t *d = dst;
    size_t done = s->win_len - s->win_pos;
    if (done > n)
        done = n;
    if (done > 0) {
        memcpy(d, s->win + s->win_pos, done);
        s->win_pos += done;
        s->out_off += done;
    }
    int rc = 0;
    while (done < n) {
        size_t made = 0;
        if (s->inflater == INF_NONE) {
            if (s->src_eof)
                break;
            long r = plain_read(s, d + done, n - done, err);
            if (r < 0) {
                rc = (int)r;
                break;
            }
            if (r == 0)
                s->src_eof = 1;
            made = (size_t)r;
        } else {
            if (s->out_eof)
                break;
            if ((rc = inflate_some(s, d + done, n - done, &made, err)) != 0)
                break;
        }
        done += made;
        s->out_off += made;
    }
    *got = done;
    return rc;
}

void fmt_stream_consume(struct fmt_stream *s, size_t n)
{
    s->win_pos += n;
    s->out_off += n;
}

int fmt_stream_seek(struct fmt_stream *s, uint64_t off, struct sl_error *err)
{
    if (s->comp != FMT_COMP_NONE)
        return sl_error_set(err, SL_EINVAL, "%s: cannot seek in a %s-compressed file", s->path,
                            fmt_compression_name(s->comp));
    if (s->win_borrowed) {
        if (off > s->mem_len)
            return sl_error_set(err, SL_EINVAL, "%s: seek to %llu past the end (%zu bytes)", s->path,
                                (unsigned long long)off, s->mem_len);
        s->win_pos = (size_t)off;
        s->prefetched = s->win_pos;
        s->out_off = off;
        return 0;
    }
    if (s->sto != NULL) {
        s->sto_off = off; /* past the end: the next read finds the end, as a file's does */
        s->head_len = s->head_pos = 0;
    } else if (lseek(s->fd, (off_t)off, SEEK_SET) < 0) {
        return sl_error_sys(err, errno, "lseek(%s)", s->path);
    }
    s->win_pos = s->win_len = 0;
    s->out_off = off;
    s->src_off = off;
    s->src_eof = 0;
    return 0;
}

uint64_t fmt_stream_offset(const struct fmt_stream *s)
{
    return s->out_off;
}

uint64_t fmt_stream_in_offset(const struct fmt_stream *s)
{
    if (s->inflater == INF_NONE)
        return s->out_off;
    return in_offset(s);
}

const char *fmt_stream_path(const struct fmt_stream *s)
{
    return s->path;
}

enum fmt_compression fmt_stream_compression(const struct fmt_stream *s)
{
    return s->comp;
}

int fmt_file_size(const char *name, uint64_t *size, struct sl_error *err)
{
    const char *path = sto_local_path(name);
    if (path != NULL) {
        struct stat st;
        if (stat(path, &st) != 0)
            return sl_error_sys(err, errno, "stat(%s)", path);
        *size = (uint64_t)st.st_size;
        return 0;
    }
    struct sto_src *src;
    int rc = sto_open(&src, name, err);
    if (rc != 0)
        return rc;
    *size = src->size;
    sto_close(src);
    return 0;
}

int fmt_file_readable(const char *name)
{
    const char *path = sto_local_path(name);
    if (path != NULL)
        return access(path, R_OK) == 0;
    struct sto_src *src;
    struct sl_error ignored = {0};
    if (sto_open(&src, name, &ignored) != 0)
        return 0;
    sto_close(src);
    return 1;
}

enum fmt_io fmt_stream_io(const struct fmt_stream *s)
{
    return s->win_borrowed ? FMT_IO_MAP : FMT_IO_READ;
}

const char *fmt_stream_inflater_name(const struct fmt_stream *s)
{
    switch (s->inflater) {
    case INF_ZLIB: return "zlib";
    case INF_ISAL: return "isa-l";
    default: return "none";
    }
}
