/* sto_file: a local file as a byte source, read with pread(2). Its
 * descriptor stays open (sto_src.fd) for callers that map the file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_alloc.h"
#include "sto_impl.h"

static int file_open(struct sto_src **out, const char *name, struct sl_error *err)
{
    const char *path = sto_local_path(name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sl_error_sys(err, errno, "open(%s)", path);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int rc = sl_error_sys(err, errno, "fstat(%s)", path);
        close(fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return sl_error_set(err, SL_EINVAL, "open(%s): not a regular file", path);
    }
    struct sto_src *s = sl_calloc(1, sizeof(*s));
    char *copy = sl_strdup(path);
    if (s == NULL || copy == NULL) {
        free(s);
        free(copy);
        close(fd);
        return sl_error_set(err, SL_ENOMEM, "open(%s): out of memory", path);
    }
    s->ops = &sto_file_ops;
    s->kind = STO_FILE;
    s->name = copy;
    s->size = (uint64_t)st.st_size;
    s->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    s->fd = fd;
    *out = s;
    return 0;
}

static int file_read_at(struct sto_src *s, uint64_t off, void *dst, size_t n, size_t *got, struct sl_error *err)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(s->fd, (uint8_t *)dst + done, n - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return sl_error_sys(err, errno, "read(%s) at byte %llu", s->name, (unsigned long long)(off + done));
        }
        if (r == 0)
            break;
        done += (size_t)r;
    }
    *got = done;
    return 0;
}

static void file_close(struct sto_src *s)
{
    close(s->fd);
    free(s->name);
    free(s);
}

const struct sto_ops sto_file_ops = {"file", file_open, NULL, file_read_at, file_close};
