/* fmt_tfrecord: TFRecord framing for the shared read loop, and the writer.
 *
 * Reading follows TensorFlow's RecordReader exactly (docs/semantics.md 1.1):
 * a file ending inside the 12-byte header ends the file (the partial bytes
 * are counted in dropped_tail so callers can warn); a bad header CRC is
 * "corrupted record at <start>", a bad data CRC "corrupted record at
 * <start+12>", a file ending inside data or footer "truncated record at
 * <start>". The length is checked against max_record_bytes before the
 * window grows, so a damaged length never sizes an allocation.
 *
 * Random access (the format's fmt_format_ops table): the scan is the read
 * loop's, or FILE.idx when asked to use index files; a record is framed
 * out of an image by its offset with the same checks (fmt_tfrecord_frame),
 * and decoded as a tf.train.Example (fmt_batch_add).
 *
 * The writer buffers 1 MiB and, for gzip/zlib, deflates with zlib using
 * TensorFlow's settings (default level, memLevel 9): the whole file is one
 * stream.
 */
#include "fmt_tfrecord.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "fmt_features.h"
#include "fmt_format.h"
#include "fmt_job.h"
#include "fmt_index.h"
#include "fmt_reader.h"
#include "sl_alloc.h"
#include "sl_bytes.h"
#include "sl_crc32c.h"
#include "sto.h"

void fmt_tfrecord_header(uint8_t out[FMT_TFRECORD_HEADER], uint64_t len)
{
    sl_store_le64(out, len);
    sl_store_le32(out + 8, sl_crc32c_mask(sl_crc32c(out, 8)));
}

uint32_t fmt_tfrecord_footer(const void *data, size_t len)
{
    return sl_crc32c_mask(sl_crc32c(data, len));
}

int fmt_tfrecord_looks_plain(const uint8_t *head, size_t n)
{
    return n >= FMT_TFRECORD_HEADER && sl_crc32c_unmask(sl_load_le32(head + 8)) == sl_crc32c(head, 8);
}

/* The CRC of a header's 8 length bytes: one crc32 instruction where the
 * CPU has it (a record costs two CRC calls; this one need not go through
 * sl_crc32c's dispatch). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2"))) static uint32_t crc8_sse42(const uint8_t *p)
{
    return ~(uint32_t)__builtin_ia32_crc32di(0xffffffffu, sl_load_le64(p));
}

static uint32_t header_crc(const uint8_t *p)
{
    static atomic_int have = -1; /* every thread computes the same value */
    int h = atomic_load_explicit(&have, memory_order_relaxed);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("sse4.2") != 0;
        atomic_store_explicit(&have, h, memory_order_relaxed);
    }
    return h ? crc8_sse42(p) : sl_crc32c(p, 8);
}
#else
static uint32_t header_crc(const uint8_t *p)
{
    return sl_crc32c(p, 8);
}
#endif

/* The 12 header bytes at p of the record starting at `start`: the length,
 * checked against its CRC (unless skip_crc) and against `max`. */
static inline int check_header(const uint8_t *p, uint64_t start, size_t max, int skip_crc, uint64_t *len,
                               struct sl_error *err)
{
    if (!skip_crc && sl_crc32c_unmask(sl_load_le32(p + 8)) != header_crc(p))
        return sl_error_set(err, SL_ECORRUPT, "corrupted record at %llu%s", (unsigned long long)start,
                            start == 0 ? " (Is this even a TFRecord file?)" : "");
    *len = sl_load_le64(p);
    if (*len > max)
        return sl_error_set(err, SL_ECORRUPT, "record length %llu exceeds max_record_bytes %zu at %llu",
                            (unsigned long long)*len, max, (unsigned long long)start);
    return 0;
}

/* The data and footer CRC of a record whose data starts at `data`. */
static int check_data(const uint8_t *data, uint64_t len, uint64_t start, int skip_crc, struct sl_error *err)
{
    if (!skip_crc && sl_crc32c_unmask(sl_load_le32(data + len)) != sl_crc32c(data, (size_t)len))
        return sl_error_set(err, SL_ECORRUPT, "corrupted record at %llu",
                            (unsigned long long)(start + FMT_TFRECORD_HEADER));
    return 0;
}

int fmt_tfrecord_frame(const uint8_t *p, size_t avail, uint64_t start, size_t max_record_bytes, int skip_crc,
                       const uint8_t **data, size_t *len, struct sl_error *err)
{
    if (avail < FMT_TFRECORD_HEADER)
        return sl_error_set(err, SL_ECORRUPT, "truncated record at %llu", (unsigned long long)start);
    uint64_t n = 0;
    int rc = check_header(p, start, max_record_bytes, skip_crc, &n, err);
    if (rc != 0)
        return rc;
    if (n > avail - FMT_TFRECORD_HEADER || avail - FMT_TFRECORD_HEADER - n < FMT_TFRECORD_FOOTER)
        return sl_error_set(err, SL_ECORRUPT, "truncated record at %llu", (unsigned long long)start);
    if ((rc = check_data(p + FMT_TFRECORD_HEADER, n, start, skip_crc, err)) != 0)
        return rc;
    *data = p + FMT_TFRECORD_HEADER;
    *len = (size_t)n;
    return 0;
}

static int tfrecord_next(struct fmt_reader *r, struct fmt_stream *s, struct fmt_record *rec, struct sl_error *err)
{
    struct fmt__reader_state *st = fmt__reader_state(r);
    uint64_t start;
    const uint8_t *p;
    size_t avail;
    int rc;
    if (st->ahead_len >= FMT_TFRECORD_HEADER) { /* the rest of the last window */
        start = st->ahead_off;
        p = st->ahead;
        avail = st->ahead_len;
    } else {
        start = fmt_stream_offset(s);
        if ((rc = fmt_stream_window(s, FMT_TFRECORD_HEADER, &p, &avail, err)) != 0)
            return rc;
    }
    st->ahead_len = 0;
    if (avail < FMT_TFRECORD_HEADER) {
        st->dropped_tail = avail;
        fmt_stream_consume(s, avail);
        return SL_END;
    }
    uint64_t len = 0;
    if ((rc = check_header(p, start, st->max_record_bytes, st->skip_crc, &len, err)) != 0)
        return rc;
    size_t total = FMT_TFRECORD_HEADER + (size_t)len + FMT_TFRECORD_FOOTER;
    if (avail < total) {
        rc = fmt_stream_window(s, total, &p, &avail, err);
        if (rc != 0)
            return rc;
        if (avail < total)
            return sl_error_set(err, SL_ECORRUPT, "truncated record at %llu", (unsigned long long)start);
    }
    const uint8_t *data = p + FMT_TFRECORD_HEADER;
    if ((rc = check_data(data, len, start, st->skip_crc, err)) != 0)
        return rc;
    rec->data = data;
    rec->len = (size_t)len;
    rec->offset = start;
    rec->index = st->index++;
    fmt_stream_consume(s, total);
    if (st->lend_ahead) {
        st->ahead = p + total;
        st->ahead_len = avail - total;
        st->ahead_off = start + total;
    }
    return 0;
}

/* ---- random access (fmt_format.h) ---- */

/* Take a file's offsets from FILE.idx when it exists: 1 when the index was
 * used, 0 when there is none, or an error (a malformed index, or one that
 * does not fit the file). Its CRCs are then checked as records are read.
 * opts->source, when given, is this scan's from the index's finding on
 * (closed, or read for the compression probe, its size the file's). */
static int scan_index(struct fmt_scan **out, const char *path, const struct fmt_scan_opts *opts, struct sl_error *err)
{
    char idx[4096];
    if (snprintf(idx, sizeof idx, "%s.idx", path) >= (int)sizeof idx)
        return 0;
    struct fmt_index_entry *own = NULL;
    const struct fmt_index_entry *e = opts->index;
    size_t n = opts->nindex;
    int rc = 0;
    if (!opts->index_known) {
        int found = fmt_index_find(idx, &own, &n, err);
        if (found < 0)
            sto_close(opts->source);
        if (found <= 0)
            return found;
        e = own;
    } else if (!opts->index_found) {
        return 0;
    }
    struct sto_src *src = opts->source;
    /* the file's size for the check below: the open source's, else a stat or an open */
    uint64_t held = src != NULL ? src->size : 0;
    int held_known = src != NULL;
    struct fmt_scan *s = fmt__scan_new(opts);
    /* the compression: open the stream once */
    struct fmt_stream_opts so = {.compression = opts->compression, .plain_probe = fmt_tfrecord_looks_plain};
    struct fmt_stream *st = NULL;
    if (s == NULL) {
        rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory", idx);
        sto_close(src);
    } else if ((rc = src != NULL ? fmt_stream_open_source(&st, src, &so, err) : fmt_stream_open(&st, path, &so, err)) ==
               0) {
        s->compression = fmt_stream_compression(st);
    }
    fmt_stream_close(st);
    size_t cap = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (e[i].size - 16 > s->max_record_bytes)
            rc = sl_error_set(err, SL_ECORRUPT, "%s:%zu: record of %llu bytes exceeds max_record_bytes %zu", idx, i + 1,
                              (unsigned long long)e[i].size, s->max_record_bytes);
        else if (fmt__scan_push(s, e[i].offset, &cap) != 0)
            rc = sl_error_set(err, SL_ENOMEM, "%s: out of memory for %zu record offsets", idx, n);
    }
    uint64_t end = n ? e[n - 1].offset + e[n - 1].size : 0;
    sl_free(own);
    if (rc == 0 && s->compression != FMT_COMP_NONE && opts->max_output && end > opts->max_output)
        rc = sl_error_set(err, SL_ECORRUPT,
                          "%s: inflates to %llu bytes by its index, over the per-file limit of "
                          "%llu (max_file_bytes, at most the cache bound)",
                          path, (unsigned long long)end, (unsigned long long)opts->max_output);
    struct sl_error ignored = {0};
    if (rc == 0 && s->compression == FMT_COMP_NONE && !held_known)
        held_known = fmt_file_size(path, &held, &ignored) == 0;
    if (rc == 0 && s->compression == FMT_COMP_NONE && held_known && held != end)
        rc = sl_error_set(err, SL_ECORRUPT,
                          "%s: the index covers %llu bytes, the file holds %llu (rebuild it "
                          "with sluice-record index)",
                          idx, (unsigned long long)end, (unsigned long long)held);
    if (rc != 0) {
        fmt_scan_free(s);
        return rc;
    }
    s->image_bytes = end;
    *out = s;
    return 1;
}

static int tfrecord_scan(struct fmt_scan **out, const char *path, const struct fmt_scan_opts *opts,
                         struct sl_error *err)
{
    *out = NULL;
    if (opts->use_index) {
        int used = scan_index(out, path, opts, err);
        if (used != 0) /* the index stood for reading the file (scan_index took the source) */
            return used > 0 ? 0 : used;
    }
    return fmt__reader_scan(out, path, FMT_FORMAT_TFRECORD, opts, err);
}

static int tfrecord_frame(const struct fmt_scan *s, const uint8_t *img, size_t size, uint64_t rec, int verify,
                          struct fmt_frame *out, struct sl_error *err)
{
    if (rec >= s->count)
        return sl_error_set(err, SL_EINVAL, "record %llu does not exist", (unsigned long long)rec);
    uint64_t off = s->offsets[rec];
    if (off > size)
        return sl_error_set(err, SL_ECORRUPT, "truncated record at %llu", (unsigned long long)off);
    out->fields = NULL;
    out->nfields = 0;
    /* the scan checked the framing; check it (and both CRCs, when
     * verifying) again, as the file may have changed */
    return fmt_tfrecord_frame(img + off, size - off, off, s->max_record_bytes, !verify, &out->data, &out->len, err);
}

static int tfrecord_frame_at(const struct fmt_scan *s, const uint8_t *at, size_t len, uint64_t rec, int verify,
                             struct fmt_frame *out, struct sl_error *err)
{
    if (rec >= s->count)
        return sl_error_set(err, SL_EINVAL, "record %llu does not exist", (unsigned long long)rec);
    out->fields = NULL;
    out->nfields = 0;
    return fmt_tfrecord_frame(at, len, s->offsets[rec], s->max_record_bytes, !verify, &out->data, &out->len, err);
}

static int tfrecord_decode(struct fmt_batch *b, const struct fmt_frame *f, struct sl_error *err)
{
    return fmt_batch_add(b, f->data, f->len, err);
}

static int any_specs(const struct fmt_feature_spec *specs, size_t nspecs, struct sl_error *err)
{
    (void)specs;
    (void)nspecs;
    (void)err;
    return 0;
}

/* Records are Examples: the job says which features to take. */
static int tfrecord_job_features(const struct fmt_job_input *in, struct sl_error *err)
{
    if (in->nfeatures == 0)
        return sl_error_set(err, SL_EINVAL, "'features' is required with format \"tfrecord\"");
    return 0;
}

const struct fmt_format_ops fmt__tfrecord_format = {
    .name = "tfrecord",
    .element = "record",
    .plain_probe = fmt_tfrecord_looks_plain,
    .next = tfrecord_next,
    .frame_head = FMT_TFRECORD_HEADER,
    .frame_tail = FMT_TFRECORD_FOOTER,
    .check_specs = any_specs,
    .job_features = tfrecord_job_features,
    .scan = tfrecord_scan,
    .frame = tfrecord_frame,
    .frame_at = tfrecord_frame_at,
    .decode = tfrecord_decode,
};

/* ---- writer ---- */

#define WRITE_BUF ((size_t)1 << 20)

struct fmt_tfrecord_writer {
    char *path;
    int fd;
    enum fmt_compression comp;
    z_stream z;
    int z_ready;
    uint8_t *buf; /* uncompressed: pending output; compressed: deflate output */
    size_t buf_len;
    uint64_t offset;
    uint64_t count;
};

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int write_all(struct fmt_tfrecord_writer *w, const uint8_t *p, size_t n, struct sl_error *err)
{
    while (n > 0) {
        ssize_t k = write(w->fd, p, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return sl_error_sys(err, errno, "write(%s)", w->path);
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int deflate_run(struct fmt_tfrecord_writer *w, const void *p, size_t n, int flush, struct sl_error *err)
{
    w->z.next_in = (Bytef *)p;
    w->z.avail_in = (uInt)n;
    for (;;) {
        w->z.next_out = w->buf;
        w->z.avail_out = (uInt)WRITE_BUF;
        int zr = deflate(&w->z, flush);
        if (zr == Z_STREAM_ERROR)
            return sl_error_set(err, SL_EIO, "%s: deflate failed", w->path);
        size_t made = WRITE_BUF - w->z.avail_out;
        int rc = write_all(w, w->buf, made, err);
        if (rc != 0)
            return rc;
        if (flush == Z_FINISH ? zr == Z_STREAM_END : (w->z.avail_in == 0 && w->z.avail_out != 0))
            return 0;
    }
}

static int emit(struct fmt_tfrecord_writer *w, const void *p, size_t n, struct sl_error *err)
{
    if (w->comp != FMT_COMP_NONE) {
        while (n > 0) { /* avail_in is 32-bit */
            size_t k = n > (1u << 30) ? (1u << 30) : n;
            int rc = deflate_run(w, p, k, Z_NO_FLUSH, err);
            if (rc != 0)
                return rc;
            p = (const uint8_t *)p + k;
            n -= k;
        }
        return 0;
    }
    if (w->buf_len + n > WRITE_BUF) {
        int rc = write_all(w, w->buf, w->buf_len, err);
        if (rc != 0)
            return rc;
        w->buf_len = 0;
        if (n >= WRITE_BUF)
            return write_all(w, p, n, err);
    }
    memcpy(w->buf + w->buf_len, p, n);
    w->buf_len += n;
    return 0;
}

int fmt_tfrecord_writer_open(struct fmt_tfrecord_writer **out, const char *path, enum fmt_compression compression,
                             int level, struct sl_error *err)
{
    *out = NULL;
    if (compression == FMT_COMP_AUTO)
        compression = ends_with(path, ".gz")                                 ? FMT_COMP_GZIP
                      : (ends_with(path, ".zz") || ends_with(path, ".zlib")) ? FMT_COMP_ZLIB
                                                                             : FMT_COMP_NONE;
    struct fmt_tfrecord_writer *w = sl_calloc(1, sizeof *w);
    if (w == NULL || (w->path = sl_strdup(path)) == NULL || (w->buf = sl_malloc(WRITE_BUF)) == NULL) {
        if (w != NULL) {
            sl_free(w->path);
            sl_free(w);
        }
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", path);
    }
    w->comp = compression;
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int rc = sl_error_sys(err, errno, "open(%s)", path);
        sl_free(w->buf);
        sl_free(w->path);
        sl_free(w);
        return rc;
    }
    if (compression != FMT_COMP_NONE) {
        int wbits = compression == FMT_COMP_GZIP ? 15 + 16 : 15;
        if (deflateInit2(&w->z, level < 0 ? Z_DEFAULT_COMPRESSION : level, Z_DEFLATED, wbits, 9, Z_DEFAULT_STRATEGY) !=
            Z_OK) {
            fmt_tfrecord_writer_abort(w);
            return sl_error_set(err, SL_EINVAL, "%s: deflateInit2 failed (level %d)", path, level);
        }
        w->z_ready = 1;
    }
    *out = w;
    return 0;
}

int fmt_tfrecord_writer_write(struct fmt_tfrecord_writer *w, const void *data, size_t len, struct sl_error *err)
{
    uint8_t head[FMT_TFRECORD_HEADER], foot[FMT_TFRECORD_FOOTER];
    fmt_tfrecord_header(head, len);
    sl_store_le32(foot, fmt_tfrecord_footer(data, len));
    int rc = emit(w, head, sizeof head, err);
    if (rc == 0)
        rc = emit(w, data, len, err);
    if (rc == 0)
        rc = emit(w, foot, sizeof foot, err);
    if (rc != 0)
        return rc;
    w->offset += sizeof head + len + sizeof foot;
    w->count++;
    return 0;
}

uint64_t fmt_tfrecord_writer_offset(const struct fmt_tfrecord_writer *w)
{
    return w->offset;
}

uint64_t fmt_tfrecord_writer_count(const struct fmt_tfrecord_writer *w)
{
    return w->count;
}

static void writer_free(struct fmt_tfrecord_writer *w)
{
    if (w->z_ready)
        deflateEnd(&w->z);
    sl_free(w->buf);
    sl_free(w->path);
    sl_free(w);
}

int fmt_tfrecord_writer_close(struct fmt_tfrecord_writer *w, struct sl_error *err)
{
    if (w == NULL)
        return 0;
    int rc = w->comp != FMT_COMP_NONE ? deflate_run(w, NULL, 0, Z_FINISH, err) : write_all(w, w->buf, w->buf_len, err);
    if (close(w->fd) != 0 && rc == 0)
        rc = sl_error_sys(err, errno, "close(%s)", w->path);
    writer_free(w);
    return rc;
}

void fmt_tfrecord_writer_abort(struct fmt_tfrecord_writer *w)
{
    if (w == NULL)
        return;
    close(w->fd);
    unlink(w->path);
    writer_free(w);
}
