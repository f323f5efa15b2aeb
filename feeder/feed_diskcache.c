/* feed_diskcache: remote objects on local disk (see feed_diskcache.h). */
#include "feed_diskcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sl_alloc.h"

#define NAME_MAX_LEN 96

struct feed_diskcache {
    char *dir;
    uint64_t bound;
    pthread_mutex_t mu;
    struct feed_diskcache_stats st; /* under mu */
    uint64_t tmp_seq;               /* under mu */
};

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

/* "<url hash>-<etag hash>-<size>", the entry's name without its suffix */
static void entry_name(char *out, size_t cap, const char *url, uint64_t size, const char *etag)
{
    snprintf(out, cap, "%016" PRIx64 "-%016" PRIx64 "-%" PRIu64, fnv1a(url), fnv1a(etag), size);
}

static int path_of(char *out, size_t cap, const struct feed_diskcache *c, const char *name, const char *suffix)
{
    return snprintf(out, cap, "%s/%s%s", c->dir, name, suffix) < (int)cap ? 0 : -1;
}

struct old_entry {
    char name[NAME_MAX_LEN];
    uint64_t bytes;
    int64_t mtime;
};

static int older_first(const void *a, const void *b)
{
    const struct old_entry *x = a, *y = b;
    return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

static void remove_entry(struct feed_diskcache *c, const char *name)
{
    char p[4096];
    if (path_of(p, sizeof p, c, name, ".obj") == 0)
        unlink(p);
    if (path_of(p, sizeof p, c, name, ".key") == 0)
        unlink(p);
}

/* Count what an earlier run left; partial writes and entries past the
 * bound (oldest first) go. */
static int take_stock(struct feed_diskcache *c, struct sl_error *err)
{
    DIR *d = opendir(c->dir);
    if (d == NULL)
        return sl_error_sys(err, errno, "--cache-dir %s", c->dir);
    struct old_entry *all = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        char p[4096];
        if (strncmp(e->d_name, ".tmp-", 5) == 0) {
            if (snprintf(p, sizeof p, "%s/%s", c->dir, e->d_name) < (int)sizeof p && unlink(p) == 0)
                c->st.removed++;
            continue;
        }
        if (len < 5 || len >= NAME_MAX_LEN || strcmp(e->d_name + len - 4, ".obj") != 0)
            continue;
        struct stat st;
        if (snprintf(p, sizeof p, "%s/%s", c->dir, e->d_name) >= (int)sizeof p || stat(p, &st) != 0)
            continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 64;
            struct old_entry *na = sl_realloc(all, nc * sizeof *na);
            if (na == NULL) {
                rc = sl_error_set(err, SL_ENOMEM, "--cache-dir %s: out of memory", c->dir);
                break;
            }
            all = na;
            cap = nc;
        }
        memcpy(all[n].name, e->d_name, len - 4);
        all[n].name[len - 4] = '\0';
        all[n].bytes = (uint64_t)st.st_size;
        all[n].mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        n++;
    }
    closedir(d);
    if (rc == 0 && n > 0) {
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += all[i].bytes;
        qsort(all, n, sizeof *all, older_first);
        for (size_t i = 0; i < n; i++) {
            if (total > c->bound) {
                remove_entry(c, all[i].name);
                total -= all[i].bytes;
                c->st.removed++;
                continue;
            }
            c->st.bytes += all[i].bytes;
            c->st.entries++;
        }
    }
    sl_free(all);
    return rc;
}

int feed_diskcache_open(struct feed_diskcache **out, const char *dir, uint64_t bytes, struct sl_error *err)
{
    *out = NULL;
    if (bytes == 0)
        return sl_error_set(err, SL_EINVAL, "--cache-bytes: 0 (at least 1)");
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return sl_error_sys(err, errno, "--cache-dir %s", dir);
    struct stat st;
    if (stat(dir, &st) != 0)
        return sl_error_sys(err, errno, "--cache-dir %s", dir);
    if (!S_ISDIR(st.st_mode))
        return sl_error_set(err, SL_EINVAL, "--cache-dir %s: not a directory", dir);
    struct feed_diskcache *c = sl_calloc(1, sizeof *c);
    if (c == NULL || (c->dir = sl_strdup(dir)) == NULL) {
        sl_free(c);
        return sl_error_set(err, SL_ENOMEM, "out of memory");
    }
    c->bound = bytes;
    pthread_mutex_init(&c->mu, NULL);
    int rc = take_stock(c, err);
    if (rc != 0) {
        feed_diskcache_close(c);
        return rc;
    }
    *out = c;
    return 0;
}

void feed_diskcache_close(struct feed_diskcache *c)
{
    if (c == NULL)
        return;
    pthread_mutex_destroy(&c->mu);
    sl_free(c->dir);
    sl_free(c);
}

/* The .key file's text: the URL and the ETag, one a line. */
static int key_matches(const char *path, const char *url, const char *etag)
{
    char want[8192], got[8192];
    int n = snprintf(want, sizeof want, "%s\n%s\n", url, etag);
    if (n < 0 || n >= (int)sizeof want)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t r = read(fd, got, sizeof got);
    close(fd);
    return r == n && memcmp(got, want, (size_t)n) == 0;
}

static int read_all(int fd, uint8_t *dst, uint64_t size)
{
    uint64_t done = 0;
    while (done < size) {
        size_t want = size - done > ((size_t)1 << 30) ? (size_t)1 << 30 : (size_t)(size - done);
        ssize_t r = pread(fd, dst + done, want, (off_t)done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        done += (uint64_t)r;
    }
    return 0;
}

int feed_diskcache_get(struct feed_diskcache *c, const char *url, uint64_t size, const char *etag, uint8_t *dst)
{
    char name[NAME_MAX_LEN], obj[4096], key[4096];
    entry_name(name, sizeof name, url, size, etag);
    if (path_of(obj, sizeof obj, c, name, ".obj") != 0 || path_of(key, sizeof key, c, name, ".key") != 0)
        return 0;
    if (!key_matches(key, url, etag))
        return 0;
    int fd = open(obj, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    int have = fstat(fd, &st) == 0;
    int ok = have && (uint64_t)st.st_size == size && read_all(fd, dst, size) == 0;
    close(fd);
    pthread_mutex_lock(&c->mu);
    if (ok) {
        c->st.hits++;
    } else if (have) { /* damaged (cut short, unreadable): gone, read from the server; counted as it was */
        remove_entry(c, name);
        uint64_t was = (uint64_t)st.st_size;
        if (c->st.entries > 0) {
            c->st.entries--;
            c->st.bytes -= c->st.bytes < was ? c->st.bytes : was;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return ok;
}

static int write_file(const char *path, const void *data, uint64_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    uint64_t done = 0;
    while (done < size) {
        size_t want = size - done > ((size_t)1 << 30) ? (size_t)1 << 30 : (size_t)(size - done);
        ssize_t w = write(fd, (const uint8_t *)data + done, want);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : ENOSPC;
            close(fd);
            unlink(path);
            errno = e;
            return -1;
        }
        done += (uint64_t)w;
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(path);
        errno = e;
        return -1;
    }
    return 0;
}

/* Remove url's entries other than `keep` (older versions of the object). */
static void drop_versions(struct feed_diskcache *c, const char *keep)
{
    DIR *d = opendir(c->dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || len >= NAME_MAX_LEN || strcmp(e->d_name + len - 4, ".obj") != 0 ||
            strncmp(e->d_name, keep, 17) != 0 || strncmp(e->d_name, keep, len - 4) == 0)
            continue;
        char name[NAME_MAX_LEN], p[4096];
        memcpy(name, e->d_name, len - 4);
        name[len - 4] = '\0';
        struct stat st;
        if (path_of(p, sizeof p, c, name, ".obj") != 0 || stat(p, &st) != 0)
            continue;
        remove_entry(c, name);
        pthread_mutex_lock(&c->mu);
        if (c->st.entries > 0) {
            c->st.entries--;
            c->st.bytes -= c->st.bytes < (uint64_t)st.st_size ? c->st.bytes : (uint64_t)st.st_size;
        }
        pthread_mutex_unlock(&c->mu);
    }
    closedir(d);
}

int feed_diskcache_put(struct feed_diskcache *c, const char *url, uint64_t size, const char *etag, const uint8_t *data,
                       struct sl_error *err)
{
    char name[NAME_MAX_LEN], obj[4096], key[4096], tobj[4096], tkey[4096];
    entry_name(name, sizeof name, url, size, etag);
    if (path_of(obj, sizeof obj, c, name, ".obj") != 0 || path_of(key, sizeof key, c, name, ".key") != 0)
        return 0;
    drop_versions(c, name); /* "<url hash>-": the first 17 characters */
    pthread_mutex_lock(&c->mu);
    if (c->st.bytes + size > c->bound || access(obj, F_OK) == 0) {
        c->st.full += c->st.bytes + size > c->bound;
        pthread_mutex_unlock(&c->mu);
        return 0;
    }
    c->st.bytes += size; /* reserved while it is written */
    uint64_t seq = ++c->tmp_seq;
    pthread_mutex_unlock(&c->mu);

    char text[8192];
    int n = snprintf(text, sizeof text, "%s\n%s\n", url, etag);
    int rc = 0;
    snprintf(tobj, sizeof tobj, "%s/.tmp-%d-%" PRIu64 ".obj", c->dir, (int)getpid(), seq);
    snprintf(tkey, sizeof tkey, "%s/.tmp-%d-%" PRIu64 ".key", c->dir, (int)getpid(), seq);
    if (n < 0 || n >= (int)sizeof text)
        rc = sl_error_set(err, SL_EIO, "--cache-dir: %s: a URL too long to keep", url);
    else if (write_file(tobj, data, size) != 0)
        rc = sl_error_sys(err, errno, "--cache-dir: writing %s", tobj);
    else if (write_file(tkey, text, (uint64_t)n) != 0 || rename(tkey, key) != 0 || rename(tobj, obj) != 0)
        rc = sl_error_sys(err, errno, "--cache-dir: writing %s", obj);
    if (rc != 0) {
        unlink(tobj);
        unlink(tkey);
    }
    pthread_mutex_lock(&c->mu);
    if (rc != 0) {
        c->st.bytes -= size;
    } else {
        c->st.entries++;
        c->st.kept++;
    }
    pthread_mutex_unlock(&c->mu);
    return rc != 0 ? rc : 1;
}

void feed_diskcache_stats(struct feed_diskcache *c, struct feed_diskcache_stats *out)
{
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    pthread_mutex_unlock(&c->mu);
}
