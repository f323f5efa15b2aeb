/* fmt_tar: WebDataset samples out of a tar shard, read with libarchive.
 *
 * Bytes come from an fmt_stream, which undoes gzip itself (ISA-L or zlib,
 * checking every member's CRC and length: libarchive's gzip filter checks
 * neither) and passes anything else through; libarchive then applies any
 * other filter it detects (xz, bzip2, zstd, ...) and parses the tar. Since
 * libarchive stops at the end-of-archive block, the rest of a gzip stream is
 * read through at the end so that its trailer is checked too. This file
 * groups the regular members into samples. Grouping needs one member of
 * lookahead: the header of the first member of the next sample is read (its
 * data is not) and stays libarchive's current entry until the next call, when
 * its data is read. A sample's bytes live in one reader-owned arena (and its
 * key and extensions in a second one) that is reset, not freed, per sample,
 * so a warmed reader allocates nothing per sample; the field table is filled
 * with offsets while the sample grows and turned into pointers only when it
 * is handed out, since the arena may move while it grows.
 *
 * Error positions ("at byte N") are offsets in the uncompressed tar stream:
 * the header of the member concerned, or of the header libarchive failed to
 * read. An error drops the sample being assembled (its remaining members are
 * unknown) and leaves the reader failed. An archive that ends without an
 * end-of-archive block (libarchive accepts that silently) is reported as
 * truncated, since a shard cut at a member boundary looks exactly like it;
 * a zero-byte file is not a tar archive, as for GNU tar.
 */
#include "fmt_tar.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fmt_features.h"
#include "fmt_format.h"
#include "fmt_job.h"
#include "fmt_stream.h"
#include "sl_alloc.h"
#include "sl_buf.h"

#define TAR_DEFAULT_MAX_MEMBER ((size_t)64 << 20)
#define TAR_DEFAULT_MAX_FIELDS 64
#define TAR_FIRST_CHUNK ((size_t)64 << 10)

struct fmt_tar {
    struct archive *a;
    struct archive_entry *entry; /* libarchive's, valid until the next header */
    struct fmt_stream *stream;
    size_t lent;     /* window bytes lent to libarchive, consumed at its next read */
    int stream_code; /* the stream's error, when a read for libarchive failed */
    struct sl_error stream_err;
    char *path;          /* owned: the name used in errors */
    uint64_t member_pos; /* header offset of the member in t->member */
    size_t max_member;
    size_t max_fields;
    struct sl_buf data;   /* the current sample's member bytes */
    struct sl_buf names;  /* key, then each extension, all NUL-terminated */
    struct sl_buf member; /* path of the latest header read, NUL-terminated */
    struct fmt_tar_field *fields;
    size_t fields_cap;
    size_t nfields;
    uint64_t index;
    int have_member; /* a header has been read (member is valid) */
    int pending;     /* libarchive's current entry starts the next sample */
    int done;
    int failed;
};

/* libarchive reports system errors with errno values and format errors with
 * EILSEQ (ARCHIVE_ERRNO_FILE_FORMAT) or -1 (ARCHIVE_ERRNO_MISC). */
static int archive_code(struct archive *a)
{
    int e = archive_errno(a);
    if (e == ENOMEM)
        return SL_ENOMEM;
    if (e > 0 && e != EILSEQ && e != EINVAL)
        return SL_EIO;
    return SL_ECORRUPT;
}

static const char *archive_what(struct archive *a)
{
    const char *s = archive_error_string(a);
    return s != NULL ? s : "unknown libarchive error";
}

/* Why libarchive failed: the stream's own error (without its path prefix)
 * when our read callback failed, else libarchive's. */
static int failure(struct fmt_tar *t, const char **what)
{
    if (t->stream_code == 0) {
        *what = archive_what(t->a);
        return archive_code(t->a);
    }
    const char *msg = t->stream_err.msg;
    size_t n = strlen(t->path);
    if (strncmp(msg, t->path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
        msg += n + 2;
    *what = msg;
    return t->stream_code;
}

/* Where libarchive's tar reader stands in the uncompressed stream: after a
 * failed header read, the start of that header (libarchive's own header
 * position is out of reach once the archive is in its fatal state). */
static uint64_t tar_pos(struct fmt_tar *t)
{
    la_int64_t pos = archive_filter_bytes(t->a, 0);
    return pos > 0 ? (uint64_t)pos : 0;
}

/* An error about the latest member read: "<path>: <what> (member '<name>',
 * at byte N)", N the offset of its header. */
static int member_error(struct fmt_tar *t, int code, const char *what, struct sl_error *err)
{
    t->failed = code;
    return sl_error_set(err, code, "%s: %s (member '%s', at byte %llu)", t->path, what, (const char *)t->member.data,
                        (unsigned long long)t->member_pos);
}

/* An error where a header was expected: there is no member to name yet, so
 * the previous one (if any) locates it. */
static int header_error(struct fmt_tar *t, int code, const char *what, uint64_t pos, struct sl_error *err)
{
    t->failed = code;
    if (!t->have_member)
        return sl_error_set(err, code, "%s: %s (at byte %llu)", t->path, what, (unsigned long long)pos);
    return sl_error_set(err, code, "%s: %s (after member '%s', at byte %llu)", t->path, what,
                        (const char *)t->member.data, (unsigned long long)pos);
}

size_t fmt_tar_split_key(const char *path, const char **ext)
{
    const char *base = strrchr(path, '/');
    base = base != NULL ? base + 1 : path;
    const char *dot = strchr(base, '.');
    if (dot == NULL) {
        size_t n = strlen(path);
        *ext = path + n;
        return n;
    }
    *ext = dot + 1;
    return (size_t)(dot - path);
}

/* libarchive hands out bytes from the stream's window; they stay lent until
 * its next read, as its read callback contract requires. */
static la_ssize_t read_cb(struct archive *a, void *arg, const void **buf)
{
    struct fmt_tar *t = arg;
    fmt_stream_consume(t->stream, t->lent);
    t->lent = 0;
    const uint8_t *p;
    size_t avail;
    int rc = fmt_stream_window(t->stream, 1, &p, &avail, &t->stream_err);
    if (rc != 0) {
        t->stream_code = rc;
        archive_set_error(a, rc == SL_ENOMEM ? ENOMEM : EILSEQ, "%s", t->stream_err.msg);
        return ARCHIVE_FATAL;
    }
    *buf = p;
    t->lent = avail;
    return (la_ssize_t)avail;
}

/* After the end-of-archive block: read a compressed stream to its end, so
 * that a damaged or cut trailer is an error. */
static int drain(struct fmt_tar *t, struct sl_error *err)
{
    if (fmt_stream_compression(t->stream) == FMT_COMP_NONE)
        return SL_END;
    for (;;) {
        fmt_stream_consume(t->stream, t->lent);
        t->lent = 0;
        const uint8_t *p;
        size_t avail;
        int rc = fmt_stream_window(t->stream, 1, &p, &avail, &t->stream_err);
        if (rc != 0) {
            t->stream_code = rc;
            const char *what;
            int code = failure(t, &what);
            return header_error(t, code, what, tar_pos(t), err);
        }
        if (avail == 0)
            return SL_END;
        t->lent = avail;
    }
}

/* Advance to the next regular member, skipping directories, links and the
 * rest. 0 with the member's path in t->member, SL_END, or an error. */
static int next_member(struct fmt_tar *t, struct sl_error *err)
{
    for (;;) {
        struct archive_entry *e;
        int r = archive_read_next_header(t->a, &e);
        if (r == ARCHIVE_EOF) {
            /* libarchive consumes the end-of-archive block; without one the
             * position has not moved past the (absent) header */
            la_int64_t at = archive_read_header_position(t->a);
            if (archive_filter_bytes(t->a, 0) <= at)
                return header_error(t, SL_ECORRUPT, "truncated archive: no end-of-archive block",
                                    at > 0 ? (uint64_t)at : 0, err);
            return drain(t, err);
        }
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            const char *what;
            int code = failure(t, &what);
            return header_error(t, code, what, tar_pos(t), err);
        }
        const char *name = archive_entry_pathname(e);
        if (name == NULL)
            name = archive_entry_pathname_utf8(e);
        if (name == NULL)
            return header_error(t, SL_ECORRUPT, "member without a readable name", tar_pos(t), err);
        sl_buf_reset(&t->member);
        if (sl_buf_append(&t->member, name, strlen(name) + 1) != 0)
            return header_error(t, SL_ENOMEM, "out of memory for a member name", tar_pos(t), err);
        la_int64_t at = archive_read_header_position(t->a);
        t->member_pos = at > 0 ? (uint64_t)at : 0;
        t->have_member = 1;
        t->entry = e;
        /* a hard link is a regular type with no data of its own */
        if (archive_entry_filetype(e) == AE_IFREG && archive_entry_hardlink(e) == NULL)
            return 0;
    }
}

/* Read the current member's data onto the end of the arena; *len gets its
 * size. The size is checked before anything is read, and a member whose size
 * is not known is bounded while it is read. */
static int read_member(struct fmt_tar *t, size_t *len, struct sl_error *err)
{
    struct archive_entry *e = t->entry;
    char what[160];
    size_t limit = t->max_member;
    size_t want = limit < TAR_FIRST_CHUNK ? limit + 1 : TAR_FIRST_CHUNK;
    if (archive_entry_size_is_set(e)) {
        la_int64_t size = archive_entry_size(e);
        if (size < 0 || (uint64_t)size > limit) {
            snprintf(what, sizeof what, "member of %lld bytes is over max_member_bytes (%zu)", (long long)size, limit);
            return member_error(t, SL_ECORRUPT, what, err);
        }
        /* one byte more, so the read that reports the end has room */
        want = (size_t)size + 1;
    }
    size_t got = 0;
    if (sl_buf_reserve(&t->data, want) != 0)
        return member_error(t, SL_ENOMEM, "out of memory for member data", err);
    for (;;) {
        size_t room = t->data.cap - t->data.len - got;
        if (room == 0) {
            size_t more = got < TAR_FIRST_CHUNK ? TAR_FIRST_CHUNK : got;
            if (more > limit + 1 - got)
                more = limit + 1 - got;
            if (sl_buf_reserve(&t->data, got + more) != 0)
                return member_error(t, SL_ENOMEM, "out of memory for member data", err);
            room = t->data.cap - t->data.len - got;
        }
        if (room > limit + 1 - got)
            room = limit + 1 - got;
        la_ssize_t n = archive_read_data(t->a, t->data.data + t->data.len + got, room);
        if (n < 0) {
            const char *why;
            int code = failure(t, &why);
            return member_error(t, code, why, err);
        }
        if (n == 0)
            break;
        got += (size_t)n;
        if (got > limit) {
            snprintf(what, sizeof what, "member is over max_member_bytes (%zu)", limit);
            return member_error(t, SL_ECORRUPT, what, err);
        }
    }
    t->data.len += got;
    *len = got;
    return 0;
}

int fmt_tar_next_member(struct fmt_tar *t, struct fmt_tar_member *m, struct sl_error *err)
{
    if (t->failed)
        return sl_error_set(err, SL_EINVAL, "%s: read after an error", t->path);
    if (t->done)
        return SL_END;
    if (archive_filter_code(t->a, 0) != ARCHIVE_FILTER_NONE) {
        t->failed = SL_EINVAL;
        return sl_error_set(err, SL_EINVAL, "%s: %s-compressed tar: only plain and gzip tar files can be served",
                            t->path, archive_filter_name(t->a, 0));
    }
    /* the previous member's data is read through (skipped) by libarchive */
    int rc = next_member(t, err);
    if (rc == SL_END)
        t->done = 1;
    if (rc != 0)
        return rc;
    struct archive_entry *e = t->entry;
    char what[160];
    la_int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : -1;
    if (size < 0)
        return member_error(t, SL_ECORRUPT, "member of unknown size", err);
    if ((uint64_t)size > t->max_member) {
        snprintf(what, sizeof what, "member of %lld bytes is over max_member_bytes (%zu)", (long long)size,
                 t->max_member);
        return member_error(t, SL_ECORRUPT, what, err);
    }
    if (archive_entry_sparse_count(e) > 0)
        return member_error(t, SL_ECORRUPT, "sparse member (its data is not stored in one piece)", err);
    /* libarchive has consumed the member's header blocks (PAX and GNU
     * long-name ones included) and nothing of its data */
    m->path = (const char *)t->member.data;
    m->header_offset = t->member_pos;
    m->data_offset = tar_pos(t);
    m->size = (uint64_t)size;
    return 0;
}

enum fmt_compression fmt_tar_compression(const struct fmt_tar *t)
{
    return fmt_stream_compression(t->stream);
}

uint64_t fmt_tar_stream_bytes(const struct fmt_tar *t)
{
    return fmt_stream_offset(t->stream) + t->lent;
}

static int same_key(const struct fmt_tar *t)
{
    const char *path = (const char *)t->member.data;
    const char *ext;
    size_t klen = fmt_tar_split_key(path, &ext);
    const char *key = (const char *)t->names.data;
    return strlen(key) == klen && memcmp(key, path, klen) == 0;
}

/* Add the current member (t->member, t->entry) as a field of the sample; the
 * first one also sets the key. */
static int add_field(struct fmt_tar *t, struct sl_error *err)
{
    const char *path = (const char *)t->member.data;
    const char *ext;
    size_t klen = fmt_tar_split_key(path, &ext);
    size_t elen = strlen(ext);
    char what[SL_ERROR_MSG_MAX / 2];

    if (t->nfields == 0) {
        if (sl_buf_append(&t->names, path, klen) != 0 || sl_buf_putc(&t->names, '\0') != 0)
            return member_error(t, SL_ENOMEM, "out of memory for a key", err);
    } else {
        /* the extensions follow the key, one after another */
        const char *p = (const char *)t->names.data;
        p += strlen(p) + 1;
        for (size_t i = 0; i < t->nfields; i++) {
            if (strcmp(p, ext) == 0) {
                snprintf(what, sizeof what, "repeated extension '%s' in sample '%s'", ext, (const char *)t->names.data);
                return member_error(t, SL_ECORRUPT, what, err);
            }
            p += strlen(p) + 1;
        }
    }
    if (t->nfields == t->max_fields) {
        snprintf(what, sizeof what, "sample '%s' has more than max_fields (%zu) fields", (const char *)t->names.data,
                 t->max_fields);
        return member_error(t, SL_ECORRUPT, what, err);
    }
    if (t->nfields == t->fields_cap) {
        size_t cap = t->fields_cap ? t->fields_cap * 2 : 8;
        if (cap > t->max_fields)
            cap = t->max_fields;
        struct fmt_tar_field *f = sl_realloc(t->fields, cap * sizeof *f);
        if (f == NULL)
            return member_error(t, SL_ENOMEM, "out of memory for the field table", err);
        t->fields = f;
        t->fields_cap = cap;
    }
    if (sl_buf_append(&t->names, ext, elen + 1) != 0)
        return member_error(t, SL_ENOMEM, "out of memory for an extension", err);
    size_t len = 0;
    int rc = read_member(t, &len, err);
    if (rc != 0)
        return rc;
    t->fields[t->nfields].len = len;
    t->nfields++;
    return 0;
}

/* Fields were appended in order to both arenas, so walking them gives every
 * field's data and extension. */
static void fill_sample(struct fmt_tar *t, struct fmt_tar_sample *s)
{
    const char *key = (const char *)t->names.data;
    const char *ext = key + strlen(key) + 1;
    const uint8_t *data = t->data.data;
    for (size_t i = 0; i < t->nfields; i++) {
        t->fields[i].ext = ext;
        t->fields[i].data = data;
        ext += strlen(ext) + 1;
        data += t->fields[i].len;
    }
    s->key = key;
    s->nfields = t->nfields;
    s->fields = t->fields;
    s->index = t->index++;
}

int fmt_tar_next(struct fmt_tar *t, struct fmt_tar_sample *s, struct sl_error *err)
{
    if (t->failed)
        return sl_error_set(err, SL_EINVAL, "%s: read after an error", t->path);
    if (t->done)
        return SL_END;
    sl_buf_reset(&t->data);
    sl_buf_reset(&t->names);
    t->nfields = 0;
    int rc;
    if (t->pending) {
        t->pending = 0;
    } else {
        rc = next_member(t, err);
        if (rc == SL_END)
            t->done = 1;
        if (rc != 0)
            return rc;
    }
    rc = add_field(t, err);
    if (rc != 0)
        return rc;
    for (;;) {
        rc = next_member(t, err);
        if (rc == SL_END) {
            t->done = 1;
            break;
        }
        if (rc != 0)
            return rc;
        if (!same_key(t)) {
            t->pending = 1;
            break;
        }
        rc = add_field(t, err);
        if (rc != 0)
            return rc;
    }
    fill_sample(t, s);
    return 0;
}

static int tar_new(struct fmt_tar **out, const char *name, const struct fmt_tar_opts *opts, struct sl_error *err)
{
    *out = NULL;
    struct fmt_tar *t = sl_calloc(1, sizeof *t);
    if (t == NULL)
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", name);
    t->path = sl_strdup(name);
    t->a = archive_read_new();
    if (t->path == NULL || t->a == NULL) {
        fmt_tar_close(t);
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", name);
    }
    t->max_member = opts && opts->max_member_bytes ? opts->max_member_bytes : TAR_DEFAULT_MAX_MEMBER;
    t->max_fields = opts && opts->max_fields ? opts->max_fields : TAR_DEFAULT_MAX_FIELDS;
    sl_buf_init(&t->data, 0);
    sl_buf_init(&t->names, 0);
    sl_buf_init(&t->member, 0);
    /* gzip is undone by fmt_stream (which checks the CRC and length that
     * libarchive 3.6 does not); these are the filters libarchive decodes in
     * process. filter_all would also run external programs (lrzip, lzop,
     * grzip) on crafted input. (Debian's libarchive links all five codec
     * libraries; one built without its library would answer ARCHIVE_WARN and
     * use the external program instead.) */
    int (*const filters[])(struct archive *) = {archive_read_support_filter_bzip2, archive_read_support_filter_xz,
                                                archive_read_support_filter_lzma, archive_read_support_filter_zstd,
                                                archive_read_support_filter_lz4};
    for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++)
        if (filters[i](t->a) != ARCHIVE_OK)
            archive_clear_error(t->a);
    if (archive_read_support_format_tar(t->a) != ARCHIVE_OK) {
        int rc = sl_error_set(err, archive_code(t->a), "%s: %s", name, archive_what(t->a));
        fmt_tar_close(t);
        return rc;
    }
    *out = t;
    return 0;
}

/* Only gzip is undone by the stream; a zlib-looking start is a tar whose
 * first name begins with, say, "80". */
static int plain_unless_gzip(const uint8_t *head, size_t n)
{
    return !(n >= 3 && head[0] == 0x1f && head[1] == 0x8b && head[2] == 8);
}

/* Attach libarchive to the open stream. It reads ahead at open to pick its
 * filters, so a damaged compressed start or a file that is no tar already
 * fails here. */
static int tar_start(struct fmt_tar *t, struct fmt_tar **out, struct sl_error *err)
{
    if (archive_read_open(t->a, t, NULL, read_cb, NULL) != ARCHIVE_OK) {
        const char *what;
        int code = failure(t, &what);
        code = sl_error_set(err, code, "%s: %s (at byte 0)", t->path, what);
        fmt_tar_close(t);
        return code;
    }
    *out = t;
    return 0;
}

static struct fmt_stream_opts tar_stream_opts(const struct fmt_tar_opts *opts)
{
    struct fmt_stream_opts so = {.compression = FMT_COMP_AUTO, .plain_probe = plain_unless_gzip};
    if (opts != NULL) {
        so.compression = opts->compression;
        so.max_output = opts->max_output;
    }
    return so;
}

int fmt_tar_open(struct fmt_tar **out, const char *path, const struct fmt_tar_opts *opts, struct sl_error *err)
{
    struct fmt_tar *t;
    *out = NULL;
    int rc = tar_new(&t, path, opts, err);
    if (rc != 0)
        return rc;
    struct fmt_stream_opts so = tar_stream_opts(opts);
    rc = fmt_stream_open(&t->stream, path, &so, err);
    if (rc != 0) {
        fmt_tar_close(t);
        return rc;
    }
    return tar_start(t, out, err);
}

int fmt_tar_open_mem(struct fmt_tar **out, const char *name, const void *data, size_t len,
                     const struct fmt_tar_opts *opts, struct sl_error *err)
{
    static const uint8_t empty[1];
    struct fmt_tar *t;
    *out = NULL;
    int rc = tar_new(&t, name, opts, err);
    if (rc != 0)
        return rc;
    struct fmt_stream_opts so = tar_stream_opts(opts);
    rc = fmt_stream_open_mem(&t->stream, name, len ? data : empty, len, &so, err);
    if (rc != 0) {
        fmt_tar_close(t);
        return rc;
    }
    return tar_start(t, out, err);
}

void fmt_tar_close(struct fmt_tar *t)
{
    if (t == NULL)
        return;
    if (t->a != NULL)
        archive_read_free(t->a);
    fmt_stream_close(t->stream);
    sl_buf_free(&t->data);
    sl_buf_free(&t->names);
    sl_buf_free(&t->member);
    sl_free(t->fields);
    sl_free(t->path);
    sl_free(t);
}

/* ---- random access (fmt_format.h) ---------------------------------------
 *
 * The scan walks the members (fmt_tar_next_member: data located, read
 * through, never held) and groups them into samples by key as fmt_tar_next
 * does; each member is noted as a part (its extension's number in the
 * file's table of names, where its data lies). A sample is then framed out
 * of the image (the plain file, or the inflated tar stream) with no
 * libarchive at all. */

static int name_id(struct fmt_scan *s, const char *ext, uint32_t *id, const char *path, struct sl_error *err)
{
    for (size_t i = 0; i < s->nnames; i++)
        if (strcmp(s->names[i], ext) == 0) {
            *id = (uint32_t)i;
            return 0;
        }
    if (s->nnames == FMT__MAX_NAMES || strlen(ext) >= FMT__MAX_NAME_LEN)
        return sl_error_set(err, SL_EINVAL, "%s: more than %d field names, or a name of %d bytes or more ('%s')", path,
                            FMT__MAX_NAMES, FMT__MAX_NAME_LEN, ext);
    if ((s->nnames & (s->nnames - 1)) == 0) { /* 0, 1, 2, 4, ...: full */
        size_t cap = s->nnames ? s->nnames * 2 : 8;
        char(*n)[FMT__MAX_NAME_LEN] = sl_realloc(s->names, cap * sizeof *n);
        if (n == NULL)
            return sl_error_set(err, SL_ENOMEM, "%s: out of memory", path);
        s->names = n;
    }
    snprintf(s->names[s->nnames], FMT__MAX_NAME_LEN, "%s", ext);
    *id = (uint32_t)s->nnames++;
    return 0;
}

static int group_members(struct fmt_tar *t, struct fmt_scan *s, const char *path, struct sl_error *err)
{
    size_t cap = 0, pcap = 0, nparts = 0, sample_start = 0;
    char key[4096] = "";
    struct fmt_tar_member m;
    int rc;
    while ((rc = fmt_tar_next_member(t, &m, err)) == 0) {
        const char *ext;
        size_t klen = fmt_tar_split_key(m.path, &ext);
        if (s->count == 0 || klen != strlen(key) || strncmp(m.path, key, klen) != 0) {
            if (klen >= sizeof key)
                return sl_error_set(err, SL_EINVAL, "%s: key of member '%s' is too long (at byte %llu)", path, m.path,
                                    (unsigned long long)m.header_offset);
            memcpy(key, m.path, klen);
            key[klen] = '\0';
            if (s->count + 2 > cap) {
                size_t c2 = cap ? cap * 2 : 1024;
                uint64_t *nf = sl_realloc(s->first, c2 * sizeof *nf);
                if (nf == NULL)
                    return sl_error_set(err, SL_ENOMEM, "%s: out of memory", path);
                s->first = nf;
                uint64_t *no = sl_realloc(s->offsets, c2 * sizeof *no);
                if (no == NULL)
                    return sl_error_set(err, SL_ENOMEM, "%s: out of memory", path);
                s->offsets = no;
                cap = c2;
            }
            s->first[s->count] = nparts;
            s->offsets[s->count++] = m.header_offset;
            sample_start = nparts;
        }
        uint32_t id = 0;
        if ((rc = name_id(s, ext, &id, path, err)) != 0)
            return rc;
        for (size_t k = sample_start; k < nparts; k++)
            if (s->parts[k].name == id)
                return sl_error_set(err, SL_ECORRUPT,
                                    "%s: repeated extension '%s' in sample '%s' (member '%s', at byte %llu)", path, ext,
                                    key, m.path, (unsigned long long)m.header_offset);
        if (nparts - sample_start >= FMT_MAX_FIELDS)
            return sl_error_set(err, SL_EINVAL, "%s: sample '%s' has more than %d fields (member '%s', at byte %llu)",
                                path, key, FMT_MAX_FIELDS, m.path, (unsigned long long)m.header_offset);
        if (nparts == pcap) {
            size_t c2 = pcap ? pcap * 2 : 1024;
            struct fmt__part *np = sl_realloc(s->parts, c2 * sizeof *np);
            if (np == NULL)
                return sl_error_set(err, SL_ENOMEM, "%s: out of memory", path);
            s->parts = np;
            pcap = c2;
        }
        s->parts[nparts++] = (struct fmt__part){.name = id, .off = m.data_offset, .len = m.size};
    }
    if (rc != SL_END)
        return rc;
    if (s->first == NULL && (s->first = sl_malloc(sizeof *s->first)) == NULL)
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", path);
    s->first[s->count] = nparts; /* the end of the last sample */
    return 0;
}

static int tar_scan(struct fmt_scan **out, const char *path, const struct fmt_scan_opts *opts, struct sl_error *err)
{
    *out = NULL;
    struct fmt_scan *s = fmt__scan_new(opts);
    if (s == NULL)
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", path);
    struct fmt_tar_opts to = {.max_member_bytes = s->max_record_bytes,
                              .max_fields = FMT_MAX_FIELDS,
                              .compression = opts->compression,
                              .max_output = opts->max_output};
    struct fmt_tar *t;
    int rc = fmt_tar_open(&t, path, &to, err);
    if (rc != 0) {
        fmt_scan_free(s);
        return rc;
    }
    s->compression = fmt_tar_compression(t);
    rc = group_members(t, s, path, err);
    if (rc == 0 && s->compression == FMT_COMP_NONE) {
        uint64_t size = 0;
        if ((rc = fmt_file_size(path, &size, err)) == 0)
            s->image_bytes = size;
    } else if (rc == 0) {
        s->image_bytes = fmt_tar_stream_bytes(t);
    }
    fmt_tar_close(t);
    if (rc != 0) {
        fmt_scan_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static int tar_frame(const struct fmt_scan *s, const uint8_t *img, size_t size, uint64_t rec, int verify,
                     struct fmt_frame *out, struct sl_error *err)
{
    (void)verify;
    if (rec >= s->count)
        return sl_error_set(err, SL_EINVAL, "sample %llu does not exist", (unsigned long long)rec);
    size_t k = 0;
    for (uint64_t i = s->first[rec]; i < s->first[rec + 1]; i++, k++) {
        const struct fmt__part *p = &s->parts[i];
        if (p->off > size || p->len > size - p->off)
            return sl_error_set(err, SL_ECORRUPT, "the file changed since it was scanned");
        out->field_buf[k] = (struct fmt_field){s->names[p->name], img + p->off, (size_t)p->len, NULL};
    }
    out->data = NULL;
    out->len = 0;
    out->fields = out->field_buf;
    out->nfields = k;
    return 0;
}

static int tar_decode(struct fmt_batch *b, const struct fmt_frame *f, struct sl_error *err)
{
    return fmt_batch_add_fields(b, f->fields, f->nfields, err);
}

static int tar_specs(const struct fmt_feature_spec *specs, size_t nspecs, struct sl_error *err)
{
    for (size_t i = 0; i < nspecs; i++)
        if (specs[i].varlen || (specs[i].dtype == FMT_DTYPE_BYTES && specs[i].rank != 0))
            return sl_error_set(err, SL_EINVAL,
                                "feature %s: tar fields are scalar bytes or fixed-shape int64/float32/uint8",
                                specs[i].name);
    return 0;
}

/* A job names a feature per field extension, each one tar_specs takes. */
static int tar_job_features(const struct fmt_job_input *in, struct sl_error *err)
{
    if (in->nfeatures == 0)
        return sl_error_set(err, SL_EINVAL, "'features' is required with format \"tar\" (one per field extension)");
    for (size_t i = 0; i < in->nfeatures; i++)
        if (in->features[i].varlen || (in->features[i].dtype == FMT_DTYPE_BYTES && in->features[i].rank != 0))
            return sl_error_set(err, SL_EINVAL,
                                "'features.%s': a tar field is a scalar bytes feature or a fixed-shape "
                                "int64/float32/uint8 one",
                                in->features[i].name);
    return 0;
}

const struct fmt_format_ops fmt__tar_format = {
    .name = "tar",
    .element = "sample",
    .plain_probe = NULL,
    .next = NULL, /* samples: fmt_tar_next */
    .check_specs = tar_specs,
    .job_features = tar_job_features,
    .scan = tar_scan,
    .keep = &fmt__tar_keep,
    .frame = tar_frame,
    .decode = tar_decode,
};
