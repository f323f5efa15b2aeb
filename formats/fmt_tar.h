/* fmt_tar: tar shards read with libarchive (plain, gzip and any filter
 * libarchive detects), grouped into samples by the WebDataset convention.
 *
 * A member's key is its path up to the first dot of its last path component;
 * the extension is the rest ("a/b/x.seg.png" -> key "a/b/x", ext "seg.png").
 * Consecutive members with the same key form one sample whose fields are
 * named by extension; a repeated extension within a sample is an error.
 * Directories and other non-regular members are skipped.
 *
 * Thread-safe: no; one owner.
 */
#ifndef FMT_TAR_H
#define FMT_TAR_H

#include <stddef.h>
#include <stdint.h>

#include "fmt_stream.h"
#include "sl_error.h"

struct fmt_tar_field {
    const char *ext;     /* NUL-terminated, borrowed */
    const uint8_t *data; /* borrowed */
    size_t len;
};

/* A borrowed sample: everything valid until the next call on the reader. */
struct fmt_tar_sample {
    const char *key; /* NUL-terminated */
    size_t nfields;
    const struct fmt_tar_field *fields; /* in archive order */
    uint64_t index;                     /* 0-based sample number */
};

struct fmt_tar_opts {
    size_t max_member_bytes;          /* 0: 64 MiB; a larger member is an error */
    size_t max_fields;                /* 0: 64 fields per sample */
    enum fmt_compression compression; /* AUTO: gzip by extension or magic (the stream undoes
                                         it), then whatever filter libarchive detects */
    uint64_t max_output;              /* most bytes a gzip stream may inflate to; 0: no limit */
};

/* A regular member as an index sees it (fmt_tar_next_member). */
struct fmt_tar_member {
    const char *path;       /* NUL-terminated, the bytes stored in the archive (a PAX
                               UTF-8 name is not converted to the locale); borrowed
                               until the next call */
    uint64_t header_offset; /* its (first) header in the uncompressed tar stream */
    uint64_t data_offset;   /* its data: bytes [data_offset, data_offset + size) */
    uint64_t size;
};

struct fmt_tar;

int fmt_tar_open(struct fmt_tar **out, const char *path, const struct fmt_tar_opts *opts,
                 struct sl_error *err) SL_MUST_CHECK;
/* Read from memory (borrowed); `name` appears in errors. */
int fmt_tar_open_mem(struct fmt_tar **out, const char *name, const void *data, size_t len,
                     const struct fmt_tar_opts *opts, struct sl_error *err) SL_MUST_CHECK;
/* 0 and a sample, SL_END, or a negative code with "<path>: <what> (member
 * '<name>', at byte N)". */
int fmt_tar_next(struct fmt_tar *t, struct fmt_tar_sample *s, struct sl_error *err) SL_MUST_CHECK;
void fmt_tar_close(struct fmt_tar *t);

/* Walk the regular members without reading their data, for an index of
 * where each lies in the uncompressed stream: 0 and a member; SL_END once
 * the end-of-archive block and, for gzip, the rest of the stream (every
 * member's CRC and length) were checked; or an error naming the member and
 * its header offset. A member over max_member_bytes is refused from its
 * header, before any of its data is read (the data of the members taken is
 * read through in input-sized chunks, never held); so is a sparse member,
 * whose data does not lie in one piece, and any archive that libarchive
 * had to decode itself (xz, bzip2, ...: offsets would not be the file's).
 * Not to be mixed with fmt_tar_next on the same reader. */
int fmt_tar_next_member(struct fmt_tar *t, struct fmt_tar_member *m, struct sl_error *err) SL_MUST_CHECK;
/* The compression the stream undid (never AUTO). */
enum fmt_compression fmt_tar_compression(const struct fmt_tar *t);
/* Bytes of the uncompressed stream read so far: after fmt_tar_next_member's
 * SL_END on a gzip file, its whole inflated size. */
uint64_t fmt_tar_stream_bytes(const struct fmt_tar *t);

/* Split a member path into key and extension as described above. Returns
 * the length of the key; *ext points into path (after the dot), or at the
 * terminating NUL when there is no dot. */
size_t fmt_tar_split_key(const char *path, const char **ext);

#endif
