/* train_ckpt_io: see train_ckpt_io.h. */
#include "train_ckpt_io.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fmt_crc32c.h" /* a checksum, not a format (trainer/CMakeLists.txt) */

int train__ckpt_put(FILE *f, uint32_t *crc, const void *p, size_t n)
{
    if (n == 0)
        return 0;
    *crc = fmt_crc32c_extend(*crc, p, n);
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
