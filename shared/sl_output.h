/* sl_output: how every sluice program writes an output file (issue #12).
 *
 * A regular target (or an absent one) is written to a fresh temporary in
 * the target's own directory, ".NAME.XXXXXX.tmp" created with O_EXCL (a
 * random name that never follows a pre-planted link), and renamed over the
 * target by sl_output_commit(): readers see the old file or the whole new
 * one, never a part, and a failed or aborted run leaves the target as it
 * was and no temporary behind. A target that exists and is not a regular
 * file (a character device such as /dev/null, a FIFO, a terminal, a socket)
 * is written directly, opened O_WRONLY without O_CREAT or O_TRUNC, and is
 * never replaced: an aborted write to it cannot be taken back. Paths
 * reached through /proc's descriptor links (/dev/stdout, /dev/stderr,
 * /dev/fd/N, /proc/self/fd/N) are written directly too, appending when they
 * lead to a regular file (the shell's redirection already chose it).
 *
 * Symlinks: a symlink as the final component that leads to a device or
 * FIFO is written through (direct, as above); one that leads to a regular
 * file, or dangles, is replaced by the new regular file (rename replaces the
 * link, not its target), so an output never writes through a link into a
 * regular file elsewhere. Give the link's resolved path to update its target.
 * A directory as the target is an error.
 *
 * A replaced regular file's permission bits are kept; a new file gets 0666
 * less the umask, as fopen would give it.
 *
 * SL_OUTPUT_STREAM is for logs read while they grow (--trace, --metrics):
 * a regular or absent target is written in place, truncated and created as
 * fopen(path, "w") would, except that a symlink as the final component is
 * removed and a new file created with O_EXCL (never written through); abort
 * removes the file. Devices, FIFOs and /proc links are direct as above.
 *
 * Errors name the call and the path: "open(PATH): Permission denied",
 * "rename(TMP, PATH): ...". One owner; not thread-safe.
 */
#ifndef SL_OUTPUT_H
#define SL_OUTPUT_H

#include <stdio.h>

#include "sl_error.h"

struct sl_output;

/* sl_output_open flags */
#define SL_OUTPUT_FSYNC 1u  /* fsync the file before the rename (or the close) */
#define SL_OUTPUT_STREAM 2u /* write a regular target in place (see above) */

/* Open `path` for writing as described above. On success *out owns an open
 * stream; on error *out is NULL and err says why ("PATH: empty path",
 * "open(PATH): ..."). Returns 0, SL_EINVAL, SL_EIO or SL_ENOMEM. */
int sl_output_open(struct sl_output **out, const char *path, unsigned flags, struct sl_error *err) SL_MUST_CHECK;

/* The stream to write to (borrowed; valid until sl_output_finish, commit or
 * abort). NULL after sl_output_finish. */
FILE *sl_output_stream(struct sl_output *o);

/* The target path given to sl_output_open (borrowed). */
const char *sl_output_path(const struct sl_output *o);

/* The name the bytes are going to: the temporary, or the target itself when
 * writing directly or in place (borrowed). For writers that must reopen the file by
 * name (the TFRecord writer): open it O_WRONLY, never unlink it. */
const char *sl_output_write_path(const struct sl_output *o);

/* 1 when the target is written directly (device, FIFO, /proc link): commit
 * renames nothing and abort removes nothing. */
int sl_output_is_direct(const struct sl_output *o);

/* Flush and close the stream, reporting any write error (ENOSPC surfaces
 * here), without renaming: the temporary keeps its name until commit or
 * abort. Lets a caller finish many outputs before renaming them together
 * without holding a descriptor each. Idempotent. */
int sl_output_finish(struct sl_output *o, struct sl_error *err) SL_MUST_CHECK;

/* Finish (if not yet), then rename the temporary over the target. Frees o
 * in every case; on error the temporary is removed and the target is left
 * as it was. */
int sl_output_commit(struct sl_output *o, struct sl_error *err) SL_MUST_CHECK;

/* Close and remove the temporary (a direct target is only closed); frees o.
 * NULL is accepted. */
void sl_output_abort(struct sl_output *o);

#endif
