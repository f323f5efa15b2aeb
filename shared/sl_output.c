/* sl_output: outputs written to an exclusive temporary and renamed, or,
 * for devices and FIFOs, written in place (the contract is in sl_output.h).
 *
 * The decision is made on stat(path) and confirmed on the descriptor: a
 * target that stat called a device but that open() finds to be a regular
 * file (it was swapped in between) falls back to the temporary, before a
 * byte is written. The temporary's name is random and created with
 * O_CREAT|O_EXCL|O_NOFOLLOW, so a link or file planted at a guessable name
 * is never followed nor truncated; it lives in the target's directory so
 * that rename() is atomic (same filesystem). SL_OUTPUT_STREAM skips the
 * temporary for regular files; a link in the way is removed first and the
 * file created O_EXCL|O_NOFOLLOW, so the link is never written through.
 */
#include "sl_output.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "sl_alloc.h"

#define PROC_SUPER_MAGIC_ 0x9fa0
#define TMP_TRIES 64

struct sl_output {
    char *path;
    char *tmp;    /* NULL when direct */
    FILE *f;      /* NULL once finished */
    int direct;   /* a device, FIFO or /proc link: never renamed nor removed */
    int in_place; /* SL_OUTPUT_STREAM on a regular file: removed by abort */
    unsigned flags;
    int write_errno; /* the first write error seen by finish */
};

/* "dir" of path (without the slash; "/" for "/x", "." for "x"), in a new
 * string. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return sl_strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = sl_malloc(n + 1);
    if (d != NULL) {
        memcpy(d, path, n);
        d[n] = '\0';
    }
    return d;
}

static int on_procfs(const char *dir)
{
    struct statfs s;
    return dir != NULL && statfs(dir, &s) == 0 && s.f_type == PROC_SUPER_MAGIC_;
}

/* Is path one of /proc's descriptor links, directly (/proc/self/fd/1,
 * /dev/fd/1, whose folder is on procfs) or through one symlink
 * (/dev/stdout -> /proc/self/fd/1)? */
static int via_proc(const char *path)
{
    char *d = dir_of(path);
    int yes = on_procfs(d);
    sl_free(d);
    struct stat ls;
    if (yes || lstat(path, &ls) != 0 || !S_ISLNK(ls.st_mode))
        return yes;
    char link[4096];
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n <= 0 || (size_t)n >= sizeof link - 1)
        return 0;
    link[n] = '\0';
    if (link[0] != '/')
        return 0; /* relative links stay in their folder, already checked */
    d = dir_of(link);
    yes = on_procfs(d);
    sl_free(d);
    return yes;
}

static void random_chars(char *out, size_t n)
{
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char r[32];
    if (n > sizeof r)
        n = sizeof r;
    if (getrandom(r, n, GRND_NONBLOCK) != (ssize_t)n) {
        /* no entropy yet (early boot): the clock and pid; O_EXCL keeps it safe */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec ^ (uint64_t)getpid() << 32;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            r[i] = (unsigned char)x;
        }
    }
    for (size_t i = 0; i < n; i++)
        out[i] = alphabet[r[i] % (sizeof alphabet - 1)];
}

/* Create the temporary "DIR/.BASE.XXXXXXXXXXXX.tmp"; on success o->tmp is
 * set and the descriptor returned. */
static int create_tmp(struct sl_output *o, const struct stat *old, struct sl_error *err)
{
    const char *slash = strrchr(o->path, '/');
    size_t dlen = slash ? (size_t)(slash - o->path + 1) : 0;
    const char *base = o->path + dlen;
    size_t n = dlen + 1 + strlen(base) + 1 + 12 + 4 + 1;
    o->tmp = sl_malloc(n);
    if (o->tmp == NULL)
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", o->path);
    for (int tries = 0; tries < TMP_TRIES; tries++) {
        char rnd[13];
        random_chars(rnd, 12);
        rnd[12] = '\0';
        snprintf(o->tmp, n, "%.*s.%s.%s.tmp", (int)dlen, o->path, base, rnd);
        int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0) {
            if (old != NULL)
                (void)fchmod(fd, old->st_mode & 07777); /* best effort: keep the replaced file's bits */
            return fd;
        }
        if (errno != EEXIST) {
            int e = errno;
            sl_free(o->tmp);
            o->tmp = NULL;
            return sl_error_sys(err, e, "open(%s)", o->path);
        }
    }
    sl_free(o->tmp);
    o->tmp = NULL;
    return sl_error_set(err, SL_EIO, "open(%s): no free temporary name after %d tries", o->path, TMP_TRIES);
}

/* Open a non-regular target in place (or, with `append`, a regular file
 * behind a /proc descriptor link). Returns the descriptor; -2 when the
 * target turned out to be a regular file after all (use a temporary); -1
 * with *rc set on error. */
static int open_direct(struct sl_output *o, int append, int *rc, struct sl_error *err)
{
    int fd = open(o->path, O_WRONLY | O_NOCTTY | O_CLOEXEC | (append ? O_APPEND : 0));
    if (fd < 0) {
        *rc = sl_error_sys(err, errno, "open(%s)", o->path);
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        *rc = sl_error_sys(err, errno, "fstat(%s)", o->path);
        close(fd);
        return -1;
    }
    if (S_ISREG(st.st_mode) && !append) {
        close(fd); /* swapped for a regular file since stat: nothing written */
        return -2;
    }
    return fd;
}

/* SL_OUTPUT_STREAM: truncate or create the regular target itself. */
static int open_in_place(struct sl_output *o, struct sl_error *err)
{
    struct stat ls;
    int oflags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC;
    if (lstat(o->path, &ls) == 0 && S_ISLNK(ls.st_mode)) {
        if (unlink(o->path) != 0)
            return sl_error_sys(err, errno, "unlink(%s)", o->path);
        oflags |= O_EXCL; /* a link planted again in between fails, not followed */
    } else {
        oflags |= O_TRUNC;
    }
    int fd = open(o->path, oflags, 0666);
    if (fd < 0)
        return sl_error_sys(err, errno, "open(%s)", o->path);
    struct stat st;
    if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode))
        o->direct = 1; /* became a device since stat: never remove it */
    else
        o->in_place = 1;
    return fd;
}

int sl_output_open(struct sl_output **out, const char *path, unsigned flags, struct sl_error *err)
{
    *out = NULL;
    if (path == NULL || path[0] == '\0')
        return sl_error_set(err, SL_EINVAL, "empty output path");
    size_t len = strlen(path);
    if (path[len - 1] == '/')
        return sl_error_set(err, SL_EINVAL, "open(%s): Is a directory", path);
    struct sl_output *o = sl_calloc(1, sizeof *o);
    if (o == NULL || (o->path = sl_strdup(path)) == NULL) {
        sl_free(o);
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", path);
    }
    o->flags = flags;
    int rc = 0, fd = -1;
    struct stat st;
    int exists = stat(path, &st) == 0;
    if (!exists && errno != ENOENT) {
        rc = sl_error_sys(err, errno, "open(%s)", path);
        goto out_free;
    }
    if (exists && S_ISDIR(st.st_mode)) {
        rc = sl_error_sys(err, EISDIR, "open(%s)", path);
        goto out_free;
    }
    if (exists && (!S_ISREG(st.st_mode) || via_proc(path))) {
        fd = open_direct(o, S_ISREG(st.st_mode), &rc, err);
        if (fd == -1)
            goto out_free;
        o->direct = fd >= 0;
    }
    if (!o->direct && (flags & SL_OUTPUT_STREAM)) {
        if ((fd = open_in_place(o, err)) < 0) {
            rc = fd;
            goto out_free;
        }
    } else if (!o->direct) {
        fd = create_tmp(o, exists && S_ISREG(st.st_mode) ? &st : NULL, err);
        if (fd < 0) {
            rc = fd;
            goto out_free;
        }
    }
    o->f = fdopen(fd, "w");
    if (o->f == NULL) {
        rc = sl_error_sys(err, errno, "fdopen(%s)", path);
        close(fd);
        if (o->tmp != NULL || o->in_place)
            unlink(o->tmp != NULL ? o->tmp : o->path);
        goto out_free;
    }
    *out = o;
    return 0;

out_free:
    sl_free(o->tmp);
    sl_free(o->path);
    sl_free(o);
    return rc;
}

FILE *sl_output_stream(struct sl_output *o)
{
    return o->f;
}

const char *sl_output_path(const struct sl_output *o)
{
    return o->path;
}

const char *sl_output_write_path(const struct sl_output *o)
{
    return o->direct || o->in_place ? o->path : o->tmp;
}

int sl_output_is_direct(const struct sl_output *o)
{
    return o->direct;
}

int sl_output_finish(struct sl_output *o, struct sl_error *err)
{
    if (o->f == NULL)
        return o->write_errno ? sl_error_sys(err, o->write_errno, "write(%s)", o->path) : 0;
    FILE *f = o->f;
    o->f = NULL;
    int e = 0;
    errno = 0;
    if (fflush(f) != 0)
        e = errno ? errno : EIO;
    else if (ferror(f))
        e = EIO; /* an earlier buffered write failed; its errno is gone */
    if (e == 0 && (o->flags & SL_OUTPUT_FSYNC) && !o->direct && fsync(fileno(f)) != 0)
        e = errno;
    errno = 0;
    if (fclose(f) != 0 && e == 0)
        e = errno ? errno : EIO;
    if (e != 0) {
        o->write_errno = e;
        return sl_error_sys(err, e, "write(%s)", o->path);
    }
    return 0;
}

int sl_output_commit(struct sl_output *o, struct sl_error *err)
{
    int rc = sl_output_finish(o, err);
    if (rc == 0 && o->tmp != NULL && rename(o->tmp, o->path) != 0)
        rc = sl_error_sys(err, errno, "rename(%s, %s)", o->tmp, o->path);
    if (rc != 0 && o->tmp != NULL)
        unlink(o->tmp);
    sl_free(o->tmp);
    sl_free(o->path);
    sl_free(o);
    return rc;
}

void sl_output_abort(struct sl_output *o)
{
    if (o == NULL)
        return;
    if (o->f != NULL)
        fclose(o->f);
    if (o->tmp != NULL || o->in_place)
        unlink(o->tmp != NULL ? o->tmp : o->path);
    sl_free(o->tmp);
    sl_free(o->path);
    sl_free(o);
}
