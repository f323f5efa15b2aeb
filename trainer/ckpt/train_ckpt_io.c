/* train_ckpt_io: see train_ckpt_io.h. */
#include "train_ckpt_io.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_bytes.h"
#include "sl_crc32c.h"
#include "sl_output.h"

int train__ckpt_put(FILE *f, uint32_t *crc, const void *p, size_t n)
{
    if (n == 0)
        return 0;
    *crc = sl_crc32c_extend(*crc, p, n);
    return fwrite(p, 1, n, f) == n ? 0 : -1;
}

int train__ckpt_fsync_dir(const char *dir, struct sl_error *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return sl_error_sys(err, errno, "open(%s)", dir);
    int rc = fsync(fd) == 0 ? 0 : sl_error_sys(err, errno, "fsync(%s)", dir);
    close(fd);
    return rc;
}

int train__ckpt_open(const char *path, int *fd, uint64_t *size, struct sl_error *err)
{
    struct stat st;
    /* O_NONBLOCK: a FIFO at the name must not block the open (nothing
     * would ever write to it); O_NOFOLLOW: a symlink is refused by name */
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (f < 0) {
        int e = errno;
        if (e == ELOOP && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
            return sl_error_set(err, SL_ECORRUPT,
                                "%s: a symbolic link: refused (checkpoints are never read "
                                "through symlinks; put the file itself in the directory)",
                                path);
        return sl_error_sys(err, e, "open(%s)", path);
    }
    int rc = 0;
    if (fstat(f, &st) != 0)
        rc = sl_error_sys(err, errno, "fstat(%s)", path);
    else if (!S_ISREG(st.st_mode))
        rc = sl_error_set(err, SL_ECORRUPT, "%s: not a regular file (%s): refused, a checkpoint is one", path,
                          train__ckpt_file_kind(st.st_mode));
    if (rc != 0) {
        close(f);
        return rc;
    }
    *fd = f;
    *size = (uint64_t)st.st_size;
    return 0;
}

const char *train__ckpt_file_kind(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISLNK(mode))
        return "a symbolic link";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISCHR(mode) || S_ISBLK(mode))
        return "a device";
    return S_ISREG(mode) ? "a regular file" : "not a file";
}

int train__ckpt_finish(struct sl_output *out, FILE *f, uint32_t crc, int bad, const char *dir, struct sl_error *err)
{
    uint8_t tail[4];
    sl_store_le32(tail, crc);
    if (bad || fwrite(tail, 1, 4, f) != 4) {
        int rc = sl_error_sys(err, errno ? errno : EIO, "checkpoint: write(%s)", sl_output_write_path(out));
        sl_output_abort(out);
        return rc;
    }
    if (sl_output_commit(out, err) != 0 || train__ckpt_fsync_dir(dir, err) != 0)
        return sl_error_prefix(err, "checkpoint: ");
    return 0;
}
