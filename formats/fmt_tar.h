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
    uint64_t index;  /* 0-based sample number */
};

struct fmt_tar_opts {
    size_t max_member_bytes; /* 0: 64 MiB; a larger member is an error */
    size_t max_fields;       /* 0: 64 fields per sample */
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

/* Split a member path into key and extension as described above. Returns
 * the length of the key; *ext points into path (after the dot), or at the
 * terminating NUL when there is no dot. */
size_t fmt_tar_split_key(const char *path, const char **ext);

#endif
