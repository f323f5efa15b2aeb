/* sl_curve: CURVE key files, the allow-list and the ZAP handler.
 *
 * Key files are read through one descriptor: opened (following symlinks,
 * O_NONBLOCK so a FIFO cannot hang us), fstat'ed, and only then read, so
 * the mode and type checked are those of the bytes read. A symlink to a
 * good key file is therefore accepted; the checks (regular file, for a
 * secret key no group or other permission bits) apply to the file it
 * leads to (docs/security.md says so; Kubernetes-style mounted secrets are
 * links).
 *
 * `keygen` writes the secret key to a temporary created 0600 by mkstemp in
 * the target's directory, fsyncs it and link()s it to NAME.key: link never
 * replaces an existing name, so an existing secret is never overwritten and
 * a reader never sees half a key. NAME.pub goes through sl_output, 0644
 * whatever the umask.
 *
 * An allow-list entry and its directory may not be writable by the group
 * or others (whoever can write there can join), except on a read-only
 * mount; the check is on the descriptor read, as for secret keys.
 *
 * The allow-list is a sorted array of 32-byte keys behind a mutex; the ZAP
 * thread looks keys up (binary search) and SIGHUP's reload builds a new
 * array outside the lock and swaps it in. Lock order: only the allow-list's
 * own mutex exists here.
 *
 * The ZAP handler is a thread owning a REP socket bound to
 * inproc://zeromq.zap.01 in the server's context (RFC 27: ZAP), and a PAIR
 * socket through which sl_zap_stop wakes it. Both are created and bound in
 * sl_zap_start, so that the bind has happened (or failed) before the caller
 * binds its CURVE server, then handed to the thread (pthread_create is the
 * memory barrier ZeroMQ asks for when a socket changes threads).
 */
#define _GNU_SOURCE
#include "sl_curve.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_log.h"
#include "sl_output.h"
#include "sl_thread.h"
#include "sl_zsock.h"

/* A draft option in libzmq 4.3 (zmq.h declares it only with the draft API);
 * the library itself takes it when built with drafts (Debian's is). */
#ifndef ZMQ_ZAP_ENFORCE_DOMAIN
#define ZMQ_ZAP_ENFORCE_DOMAIN 93
#endif

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_DOMAIN "sluice"
/* a key file is 40 characters and a newline; anything longer is refused
 * without reading it all */
#define KEY_FILE_MAX 64

static const char z85_chars[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

/* ---- key files ---- */

/* 0, or SL_EINVAL naming what is wrong with the 40 characters at s. */
static int check_z85(const char *path, const char *s, size_t len, uint8_t key[32], struct sl_error *err)
{
    if (len != SL_CURVE_KEY_Z85)
        return sl_error_set(err, SL_EINVAL, "%s: not a CURVE key (expected one line of %d Z85 characters, got %zu)",
                            path, SL_CURVE_KEY_Z85, len);
    for (size_t i = 0; i < len; i++)
        if (s[i] == '\0' || strchr(z85_chars, s[i]) == NULL)
            return sl_error_set(err, SL_EINVAL, "%s: not a CURVE key (character %zu, byte 0x%02x, is not Z85)", path,
                                i + 1, (unsigned)(unsigned char)s[i]);
    /* every 5 characters are a base-85 number that must fit 32 bits */
    for (size_t g = 0; g < len; g += 5) {
        uint64_t v = 0;
        for (size_t i = g; i < g + 5; i++)
            v = v * 85 + (uint64_t)(strchr(z85_chars, s[i]) - z85_chars);
        if (v > UINT32_MAX)
            return sl_error_set(err, SL_EINVAL, "%s: not a CURVE key (characters %zu-%zu overflow 32 bits)", path,
                                g + 1, g + 5);
    }
    char z[SL_CURVE_KEY_Z85 + 1];
    memcpy(z, s, SL_CURVE_KEY_Z85);
    z[SL_CURVE_KEY_Z85] = '\0';
    uint8_t tmp[32];
    if (zmq_z85_decode(key != NULL ? key : tmp, z) == NULL)
        return sl_error_set(err, SL_EINVAL, "%s: not a CURVE key (zmq_z85_decode: %s)", path, zmq_strerror(errno));
    return 0;
}

/* What a key file is for: its mode checks differ. */
enum key_kind {
    KEY_PUBLIC,  /* --curve-server-key: anyone may read it */
    KEY_SECRET,  /* no bit for the group or others */
    KEY_ALLOWED, /* an allow-list entry: nobody but its owner may write it */
};

/* Writable by the group or others, on a file system mounted read-write (a
 * read-only mount, e.g. a Kubernetes ConfigMap volume, cannot be written
 * through whatever its bits say). */
static int others_can_write(int fd, const struct stat *st)
{
    struct statvfs vfs;
    if ((st->st_mode & 022) == 0)
        return 0;
    return fstatvfs(fd, &vfs) != 0 || (vfs.f_flag & ST_RDONLY) == 0;
}

/* Read the one-line key file `path` into z (40 characters + NUL). */
static int read_key_file(const char *path, enum key_kind kind, char z[SL_CURVE_KEY_Z85 + 1], uint8_t key[32],
                         struct sl_error *err)
{
    if (path == NULL || path[0] == '\0')
        return sl_error_set(err, SL_EINVAL, "a CURVE key file: empty path");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return sl_error_sys(err, errno, "open(%s)", path);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return sl_error_sys(err, e, "fstat(%s)", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return sl_error_set(err, SL_EINVAL, "%s: not a regular file (a CURVE key file is one)", path);
    }
    if (kind == KEY_ALLOWED && others_can_write(fd, &st)) {
        close(fd);
        return sl_error_set(err, SL_EINVAL,
                            "%s: an allow-list key writable by others (mode %04o): whoever can write it can join; "
                            "make it writable by its owner alone: chmod go-w %s",
                            path, (unsigned)(st.st_mode & 07777), path);
    }
    if (kind == KEY_SECRET && (st.st_mode & 077) != 0) {
        close(fd);
        return sl_error_set(err, SL_EINVAL,
                            "%s: a secret key readable or writable by others (mode %04o); "
                            "make it the owner's alone: chmod 600 %s",
                            path, (unsigned)(st.st_mode & 07777), path);
    }
    char buf[KEY_FILE_MAX + 1];
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, buf + len, sizeof buf - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            close(fd);
            return sl_error_sys(err, e, "read(%s)", path);
        }
        if (r == 0)
            break;
        len += (size_t)r;
        if (len == sizeof buf)
            break;
    }
    close(fd);
    if (len > KEY_FILE_MAX)
        return sl_error_set(err, SL_EINVAL,
                            "%s: not a CURVE key (expected one line of %d Z85 characters, the file is longer "
                            "than %d bytes)",
                            path, SL_CURVE_KEY_Z85, KEY_FILE_MAX);
    size_t n = len;
    if (n > 0 && buf[n - 1] == '\n')
        n--;
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    int rc = check_z85(path, buf, n, key, err);
    if (rc != 0)
        return rc;
    memcpy(z, buf, SL_CURVE_KEY_Z85);
    z[SL_CURVE_KEY_Z85] = '\0';
    return 0;
}

int sl_curve_load_secret(const char *path, struct sl_curve_keys *out, struct sl_error *err)
{
    memset(out, 0, sizeof *out);
    int rc = read_key_file(path, KEY_SECRET, out->secret_z85, NULL, err);
    if (rc != 0)
        return rc;
    if (zmq_curve_public(out->public_z85, out->secret_z85) != 0) {
        int e = errno;
        memset(out, 0, sizeof *out);
        return sl_error_set(err, SL_EINVAL, "%s: zmq_curve_public: %s", path, zmq_strerror(e));
    }
    return 0;
}

int sl_curve_load_public(const char *path, char out_z85[SL_CURVE_KEY_Z85 + 1], struct sl_error *err)
{
    out_z85[0] = '\0';
    return read_key_file(path, KEY_PUBLIC, out_z85, NULL, err);
}

/* dir and base of `path` into dir (with the trailing '/', or "") and base */
static void split_path(const char *path, char *dir, size_t dircap, const char **base)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash == NULL ? 0 : (size_t)(slash - path) + 1;
    if (n >= dircap)
        n = dircap - 1;
    memcpy(dir, path, n);
    dir[n] = '\0';
    *base = slash == NULL ? path : slash + 1;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int sl_curve_keygen(const char *name, struct sl_error *err)
{
    if (name == NULL || name[0] == '\0')
        return sl_error_set(err, SL_EINVAL, "keygen: empty name");
    size_t nlen = strlen(name);
    if (name[nlen - 1] == '/')
        return sl_error_set(err, SL_EINVAL,
                            "keygen: %s: a name, not a directory, is needed (NAME.key and NAME.pub "
                            "are written)",
                            name);
    if (nlen > 4000)
        return sl_error_set(err, SL_EINVAL, "keygen: the name is %zu bytes long (at most 4000)", nlen);
    char keypath[4096], pubpath[4096], tmp[4200], dir[4096];
    snprintf(keypath, sizeof keypath, "%s.key", name);
    snprintf(pubpath, sizeof pubpath, "%s.pub", name);
    const char *base;
    split_path(name, dir, sizeof dir, &base);
    snprintf(tmp, sizeof tmp, "%s.%s.key.XXXXXX", dir, base);

    struct sl_curve_keys k;
    memset(&k, 0, sizeof k);
    if (zmq_curve_keypair(k.public_z85, k.secret_z85) != 0)
        return sl_error_set(err, SL_EIO, "zmq_curve_keypair: %s (is libzmq built with CURVE?)", zmq_strerror(errno));

    /* fail early, before making anything */
    struct stat st;
    if (lstat(keypath, &st) == 0)
        return sl_error_set(err, SL_EINVAL,
                            "%s: exists already (keygen never overwrites a secret key; remove it "
                            "first or choose another name)",
                            keypath);

    int fd = mkstemp(tmp); /* O_EXCL, mode 0600 whatever the umask */
    if (fd < 0)
        return sl_error_sys(err, errno, "mkstemp(%s)", tmp);
    int rc = 0;
    char line[SL_CURVE_KEY_Z85 + 2];
    memcpy(line, k.secret_z85, SL_CURVE_KEY_Z85);
    line[SL_CURVE_KEY_Z85] = '\n';
    if (fchmod(fd, 0600) != 0 || write_all(fd, line, SL_CURVE_KEY_Z85 + 1) != 0 || fsync(fd) != 0)
        rc = sl_error_sys(err, errno, "write(%s)", tmp);
    if (close(fd) != 0 && rc == 0)
        rc = sl_error_sys(err, errno, "close(%s)", tmp);
    if (rc == 0 && link(tmp, keypath) != 0) {
        if (errno == EEXIST)
            rc = sl_error_set(err, SL_EINVAL,
                              "%s: exists already (keygen never overwrites a secret key; remove it "
                              "first or choose another name)",
                              keypath);
        else
            rc = sl_error_sys(err, errno, "link(%s, %s)", tmp, keypath);
    }
    unlink(tmp);
    memset(line, 0, sizeof line);
    memset(k.secret_z85, 0, sizeof k.secret_z85);
    if (rc != 0)
        return rc;

    struct sl_output *o = NULL;
    rc = sl_output_open(&o, pubpath, SL_OUTPUT_FSYNC, err);
    if (rc == 0) {
        /* 0644 whatever the umask (or the bits of a .pub replaced): an
         * allow-list refuses a key others can write */
        struct stat pst;
        int pfd = fileno(sl_output_stream(o));
        if (fstat(pfd, &pst) == 0 && S_ISREG(pst.st_mode) && fchmod(pfd, 0644) != 0) {
            int e = errno;
            sl_output_abort(o);
            rc = sl_error_sys(err, e, "fchmod(%s)", pubpath);
        } else if (fprintf(sl_output_stream(o), "%s\n", k.public_z85) < 0) {
            sl_output_abort(o);
            rc = sl_error_sys(err, errno, "write(%s)", pubpath);
        } else {
            rc = sl_output_commit(o, err);
        }
    }
    if (rc != 0) {
        unlink(keypath); /* a secret without its public half is of no use */
        return rc;
    }
    /* the new names durable too (best effort, as sl_output's own commit) */
    int dfd = open(dir[0] != '\0' ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return 0;
}

/* ---- the allow-list ---- */

struct sl_curve_allow {
    pthread_mutex_t mu;
    uint8_t (*keys)[32]; /* sorted, unique; under mu */
    size_t n;            /* under mu */
    char *dir;           /* NULL: extras only */
    uint8_t (*extra)[32];
    size_t nextra;
};

static int key_cmp(const void *a, const void *b)
{
    return memcmp(a, b, 32);
}

static int name_is_pub(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && n > 4 && strcmp(name + n - 4, ".pub") == 0;
}

/* Read dir's keys plus the extras into a new sorted, unique array. */
static int build_keys(const char *dir, uint8_t (*extra)[32], size_t nextra, uint8_t (**out)[32], size_t *nout,
                      struct sl_error *err)
{
    *out = NULL;
    *nout = 0;
    size_t cap = nextra + 16, n = 0;
    uint8_t(*keys)[32] = sl_malloc(cap * 32);
    if (keys == NULL)
        return sl_error_set(err, SL_ENOMEM, "an allow-list of %zu keys", cap);
    for (size_t i = 0; i < nextra; i++)
        memcpy(keys[n++], extra[i], 32);
    if (dir != NULL) {
        DIR *d = opendir(dir);
        if (d == NULL) {
            int e = errno;
            sl_free(keys);
            if (e == ENOTDIR)
                return sl_error_set(err, SL_EINVAL,
                                    "%s: not a directory (--curve-allow takes a directory of "
                                    "public key files, NAME.pub)",
                                    dir);
            return sl_error_sys(err, e, "opendir(%s)", dir);
        }
        size_t files = 0;
        int rc = 0;
        struct stat st;
        if (fstat(dirfd(d), &st) != 0)
            rc = sl_error_sys(err, errno, "fstat(%s)", dir);
        else if (others_can_write(dirfd(d), &st))
            rc = sl_error_set(err, SL_EINVAL,
                              "%s: an allow-list directory writable by others (mode %04o): whoever "
                              "can write there can join; make it writable by its owner alone: chmod go-w %s",
                              dir, (unsigned)(st.st_mode & 07777), dir);
        struct dirent *de;
        char path[4096];
        while (rc == 0) {
            errno = 0;
            de = readdir(d);
            if (de == NULL) {
                if (errno != 0)
                    rc = sl_error_sys(err, errno, "readdir(%s)", dir);
                break;
            }
            if (!name_is_pub(de->d_name))
                continue;
            if (++files > SL_CURVE_MAX_ALLOW) {
                rc = sl_error_set(err, SL_EINVAL, "%s: more than %d public key files (the most an allow-list holds)",
                                  dir, SL_CURVE_MAX_ALLOW);
                break;
            }
            int pl = snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
            if (pl < 0 || (size_t)pl >= sizeof path) {
                rc = sl_error_set(err, SL_EINVAL, "%s/%s: path too long", dir, de->d_name);
                break;
            }
            if (n == cap) {
                size_t ncap = cap * 2;
                uint8_t(*nk)[32] = sl_realloc(keys, ncap * 32);
                if (nk == NULL) {
                    rc = sl_error_set(err, SL_ENOMEM, "an allow-list of %zu keys", ncap);
                    break;
                }
                keys = nk;
                cap = ncap;
            }
            char z[SL_CURVE_KEY_Z85 + 1];
            rc = read_key_file(path, KEY_ALLOWED, z, keys[n], err);
            if (rc == 0)
                n++;
        }
        closedir(d);
        if (rc != 0) {
            sl_free(keys);
            return rc;
        }
    }
    if (n > 1) {
        qsort(keys, n, 32, key_cmp);
        size_t u = 1;
        for (size_t i = 1; i < n; i++)
            if (memcmp(keys[i], keys[u - 1], 32) != 0)
                memmove(keys[u++], keys[i], 32);
        n = u;
    }
    *out = keys;
    *nout = n;
    return 0;
}

int sl_curve_allow_load(struct sl_curve_allow **out, const char *dir, const char *const *extra, size_t nextra,
                        struct sl_error *err)
{
    *out = NULL;
    if (nextra > SL_CURVE_MAX_ALLOW)
        return sl_error_set(err, SL_EINVAL, "an allow-list of %zu keys (at most %d)", nextra, SL_CURVE_MAX_ALLOW);
    struct sl_curve_allow *a = sl_calloc(1, sizeof *a);
    if (a == NULL)
        return sl_error_set(err, SL_ENOMEM, "an allow-list");
    int rc = 0;
    if (nextra > 0) {
        a->extra = sl_malloc(nextra * 32);
        if (a->extra == NULL) {
            sl_free(a);
            return sl_error_set(err, SL_ENOMEM, "an allow-list of %zu keys", nextra);
        }
        for (size_t i = 0; i < nextra && rc == 0; i++) {
            const char *z = extra[i] != NULL ? extra[i] : "";
            char what[32];
            snprintf(what, sizeof what, "allowed key %zu", i + 1);
            rc = check_z85(what, z, strlen(z), a->extra[i], err);
        }
        a->nextra = nextra;
    }
    if (rc == 0 && dir != NULL && (a->dir = sl_strdup(dir)) == NULL)
        rc = sl_error_set(err, SL_ENOMEM, "an allow-list");
    if (rc == 0)
        rc = build_keys(a->dir, a->extra, a->nextra, &a->keys, &a->n, err);
    if (rc == 0 && pthread_mutex_init(&a->mu, NULL) != 0)
        rc = sl_error_set(err, SL_EIO, "pthread_mutex_init");
    if (rc != 0) {
        sl_free(a->keys);
        sl_free(a->extra);
        sl_free(a->dir);
        sl_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

int sl_curve_allow_reload(struct sl_curve_allow *a, struct sl_error *err)
{
    uint8_t(*keys)[32];
    size_t n;
    int rc = build_keys(a->dir, a->extra, a->nextra, &keys, &n, err);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&a->mu);
    uint8_t(*old)[32] = a->keys;
    a->keys = keys;
    a->n = n;
    pthread_mutex_unlock(&a->mu);
    sl_free(old);
    return 0;
}

int sl_curve_allow_has(struct sl_curve_allow *a, const uint8_t key[32])
{
    pthread_mutex_lock(&a->mu);
    int found = a->n > 0 && bsearch(key, a->keys, a->n, 32, key_cmp) != NULL;
    pthread_mutex_unlock(&a->mu);
    return found;
}

size_t sl_curve_allow_count(struct sl_curve_allow *a)
{
    pthread_mutex_lock(&a->mu);
    size_t n = a->n;
    pthread_mutex_unlock(&a->mu);
    return n;
}

void sl_curve_allow_free(struct sl_curve_allow *a)
{
    if (a == NULL)
        return;
    pthread_mutex_destroy(&a->mu);
    sl_free(a->keys);
    sl_free(a->extra);
    sl_free(a->dir);
    sl_free(a);
}

/* ---- the ZAP handler ---- */

struct sl_zap {
    void *rep;      /* the thread's */
    void *wake_in;  /* the thread's end of the stop pipe */
    void *wake_out; /* sl_zap_stop's end */
    pthread_t thread;
    struct sl_curve_allow *allow;
    char what[32];
    struct sl_log_limit lim; /* the thread's */
    _Atomic uint64_t refused, accepted;
};

/* Receive one multipart request into frames (at most `cap`; the rest are
 * counted and dropped). Returns the frame count, or -1 on an error. */
static int recv_request(void *sock, zmq_msg_t *frames, int cap)
{
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, 0) < 0) {
            zmq_msg_close(&m);
            for (int i = 0; i < n && i < cap; i++)
                zmq_msg_close(&frames[i]);
            return -1;
        }
        more = zmq_msg_more(&m);
        if (n < cap)
            frames[n] = m;
        else
            zmq_msg_close(&m);
        n++;
    }
    return n;
}

static int frame_is(zmq_msg_t *m, const char *s)
{
    size_t n = strlen(s);
    return zmq_msg_size(m) == n && memcmp(zmq_msg_data(m), s, n) == 0;
}

static void send_reply(void *sock, zmq_msg_t *request_id, const char *code, const char *text, const char *user)
{
    const char *ver = "1.0";
    zmq_send(sock, ver, strlen(ver), ZMQ_SNDMORE);
    if (request_id != NULL)
        zmq_send(sock, zmq_msg_data(request_id), zmq_msg_size(request_id), ZMQ_SNDMORE);
    else
        zmq_send(sock, "", 0, ZMQ_SNDMORE);
    zmq_send(sock, code, strlen(code), ZMQ_SNDMORE);
    zmq_send(sock, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(sock, user, strlen(user), ZMQ_SNDMORE);
    zmq_send(sock, "", 0, 0); /* metadata: none */
}

/* Copy a frame as printable text (for a log line). */
static void frame_text(zmq_msg_t *m, char *out, size_t cap)
{
    size_t n = zmq_msg_size(m);
    const unsigned char *p = zmq_msg_data(m);
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, p[i] >= 0x20 && p[i] < 0x7f ? "%c" : "\\x%02x", p[i]);
    out[o] = '\0';
}

/* One request: frames per RFC 27 (version, request id, domain, address,
 * identity, mechanism, credentials...). */
static void zap_answer(struct sl_zap *z, zmq_msg_t *f, int n)
{
    char addr[128] = "?";
    if (n >= 4)
        frame_text(&f[3], addr, sizeof addr);
    if (n < 6 || !frame_is(&f[0], "1.0")) {
        /* not a request we understand: refuse it (a reply keeps REP going) */
        atomic_fetch_add(&z->refused, 1);
        if (sl_log_allowed(&z->lim))
            sl_log(SL_LOG_WARN, "%s: refused a peer from %s: a malformed ZAP request (%d frames)", z->what, addr, n);
        send_reply(z->rep, n >= 2 ? &f[1] : NULL, "500", "malformed ZAP request", "");
        return;
    }
    if (frame_is(&f[5], "CURVE") && (n != 7 || zmq_msg_size(&f[6]) != 32)) {
        atomic_fetch_add(&z->refused, 1);
        if (sl_log_allowed(&z->lim))
            sl_log(SL_LOG_WARN, "%s: refused a peer from %s: a malformed CURVE ZAP request (%d frames)", z->what, addr,
                   n);
        send_reply(z->rep, &f[1], "400", "malformed CURVE credentials", "");
        return;
    }
    if (!frame_is(&f[5], "CURVE")) {
        char mech[32];
        frame_text(&f[5], mech, sizeof mech);
        atomic_fetch_add(&z->refused, 1);
        if (sl_log_allowed(&z->lim))
            sl_log(SL_LOG_WARN, "%s: refused a peer from %s: mechanism %s, not CURVE (a client without keys?)", z->what,
                   addr, mech);
        send_reply(z->rep, &f[1], "400", "CURVE required", "");
        return;
    }
    const uint8_t *key = zmq_msg_data(&f[6]);
    char z85[SL_CURVE_KEY_Z85 + 1];
    if (zmq_z85_encode(z85, key, 32) == NULL)
        strcpy(z85, "?");
    if (z->allow != NULL && sl_curve_allow_has(z->allow, key)) {
        atomic_fetch_add(&z->accepted, 1);
        send_reply(z->rep, &f[1], "200", "OK", z85);
        return;
    }
    atomic_fetch_add(&z->refused, 1);
    if (sl_log_allowed(&z->lim))
        sl_log(SL_LOG_WARN, "%s: refused a CURVE client from %s: its public key %s is not on the allow-list", z->what,
               addr[0] != '\0' ? addr : "(a local socket)", z85);
    send_reply(z->rep, &f[1], "400", "public key not allowed", "");
}

static void *zap_main(void *arg)
{
    struct sl_zap *z = arg;
    for (;;) {
        zmq_pollitem_t items[2] = {{.socket = z->rep, .events = ZMQ_POLLIN},
                                   {.socket = z->wake_in, .events = ZMQ_POLLIN}};
        int rc = zmq_poll(items, 2, 1000);
        if (rc < 0) {
            if (errno == EINTR)
                continue;
            break; /* ETERM: the context is going */
        }
        sl_log_limit_flush(&z->lim, 0);
        if (items[1].revents & ZMQ_POLLIN)
            break;
        if (items[0].revents & ZMQ_POLLIN) {
            zmq_msg_t f[8];
            int n = recv_request(z->rep, f, 8);
            if (n < 0) {
                if (errno == ETERM)
                    break;
                continue;
            }
            zap_answer(z, f, n);
            for (int i = 0; i < n && i < 8; i++)
                zmq_msg_close(&f[i]);
        }
    }
    sl_log_limit_flush(&z->lim, 1);
    /* free the endpoint now (a close lets the reaper do it later), so a
     * new handler may bind it as soon as sl_zap_stop returns */
    (void)zmq_unbind(z->rep, ZAP_ENDPOINT);
    return NULL;
}

int sl_zap_start(struct sl_zap **out, void *ctx, struct sl_curve_allow *allow, const char *what, struct sl_error *err)
{
    *out = NULL;
    struct sl_zap *z = sl_calloc(1, sizeof *z);
    if (z == NULL)
        return sl_error_set(err, SL_ENOMEM, "a ZAP handler");
    z->allow = allow;
    snprintf(z->what, sizeof z->what, "%s", what != NULL ? what : "zap");
    z->lim = (struct sl_log_limit){.kind = "CURVE refusals", .burst = 10};
    atomic_init(&z->refused, 0);
    atomic_init(&z->accepted, 0);
    int rc = 0;
    char wake[64];
    /* a name never used before in this process: a handler freed and started
     * again may get the same address, while the old name may still be
     * bound (a closed socket's inproc endpoints are released later, by
     * the context's reaper) */
    static atomic_ullong serial;
    snprintf(wake, sizeof wake, "inproc://sl-zap-wake-%llu", (unsigned long long)atomic_fetch_add(&serial, 1));
    /* linger 0, checked (sl_zsock) */
    if ((z->rep = sl_zsock_open(ctx, ZMQ_REP, NULL, "ZAP handler", err)) == NULL ||
        (z->wake_in = sl_zsock_open(ctx, ZMQ_PAIR, NULL, "ZAP handler", err)) == NULL ||
        (z->wake_out = sl_zsock_open(ctx, ZMQ_PAIR, NULL, "ZAP handler", err)) == NULL) {
        rc = SL_EIO;
        goto out_close;
    }
    if (zmq_bind(z->rep, ZAP_ENDPOINT) != 0) {
        int e = errno;
        rc = sl_error_set(err, e == EADDRINUSE ? SL_EINVAL : SL_EIO, "zmq_bind(%s): %s%s", ZAP_ENDPOINT,
                          zmq_strerror(e), e == EADDRINUSE ? " (this context has a ZAP handler already)" : "");
        goto out_close;
    }
    if (zmq_bind(z->wake_in, wake) != 0 || zmq_connect(z->wake_out, wake) != 0) {
        rc = sl_error_set(err, SL_EIO, "zmq_bind(%s): %s", wake, zmq_strerror(errno));
        goto out_close;
    }
    int e = sl_thread_start(&z->thread, zap_main, z);
    if (e != 0) {
        rc = sl_error_sys(err, e, "pthread_create (ZAP handler)");
        goto out_close;
    }
    *out = z;
    return 0;
out_close:
    if (z->rep != NULL)
        zmq_close(z->rep);
    if (z->wake_in != NULL)
        zmq_close(z->wake_in);
    if (z->wake_out != NULL)
        zmq_close(z->wake_out);
    sl_free(z);
    return rc;
}

uint64_t sl_zap_refused(const struct sl_zap *z)
{
    return z == NULL ? 0 : atomic_load(&((struct sl_zap *)z)->refused);
}

uint64_t sl_zap_accepted(const struct sl_zap *z)
{
    return z == NULL ? 0 : atomic_load(&((struct sl_zap *)z)->accepted);
}

void sl_zap_stop(struct sl_zap *z)
{
    if (z == NULL)
        return;
    /* a zero-length wake; if the send fails (the context is terminating),
     * the thread's poll fails with ETERM and it returns all the same */
    zmq_send(z->wake_out, "", 0, ZMQ_DONTWAIT);
    pthread_join(z->thread, NULL);
    /* the ZAP endpoint is released now, for a handler started right
     * after this one (zmq_close alone releases it later, in the reaper) */
    zmq_unbind(z->rep, ZAP_ENDPOINT);
    zmq_close(z->wake_out);
    zmq_close(z->wake_in);
    zmq_close(z->rep);
    sl_free(z);
}

/* ---- sockets ---- */

int sl_curve_server(void *sock, const struct sl_curve_keys *k, struct sl_error *err)
{
    const char *what = "CURVE server";
    if (k == NULL || k->secret_z85[0] == '\0')
        return sl_error_set(err, SL_EINVAL, "a CURVE server needs a secret key");
    int rc = sl_zsock_set_int(sock, ZMQ_CURVE_SERVER, 1, what, err);
    if (rc == 0)
        rc = sl_zsock_set_bytes(sock, ZMQ_CURVE_SECRETKEY, k->secret_z85, SL_CURVE_KEY_Z85, what, err);
    if (rc == 0)
        rc = sl_zsock_set_bytes(sock, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN), what, err);
    if (rc != 0)
        return rc;
    /* A libzmq without the draft API refuses this option (EINVAL); the ZAP
     * handler is started before every bind, so ZAP happens all the same.
     * Any other refusal is an error. */
    struct sl_error e = {0};
    if (sl_zsock_set_int(sock, ZMQ_ZAP_ENFORCE_DOMAIN, 1, what, &e) != 0 && zmq_errno() != EINVAL)
        return sl_error_set(err, e.code, "%s", e.msg);
    return 0;
}

int sl_curve_client(void *sock, const struct sl_curve_keys *k, const char *server_z85, struct sl_error *err)
{
    const char *what = "CURVE client";
    if (k == NULL || k->secret_z85[0] == '\0' || k->public_z85[0] == '\0')
        return sl_error_set(err, SL_EINVAL, "a CURVE client needs its key pair");
    if (server_z85 == NULL || strlen(server_z85) != SL_CURVE_KEY_Z85)
        return sl_error_set(err, SL_EINVAL, "a CURVE client needs the server's public key (%d Z85 characters)",
                            SL_CURVE_KEY_Z85);
    int rc = sl_zsock_set_bytes(sock, ZMQ_CURVE_SERVERKEY, server_z85, SL_CURVE_KEY_Z85, what, err);
    if (rc == 0)
        rc = sl_zsock_set_bytes(sock, ZMQ_CURVE_PUBLICKEY, k->public_z85, SL_CURVE_KEY_Z85, what, err);
    if (rc == 0)
        rc = sl_zsock_set_bytes(sock, ZMQ_CURVE_SECRETKEY, k->secret_z85, SL_CURVE_KEY_Z85, what, err);
    return rc;
}

/* ---- endpoints ---- */

static int host_is_loopback(const char *h, size_t n)
{
    char buf[64];
    if (n == 0 || n >= sizeof buf)
        return 0;
    memcpy(buf, h, n);
    buf[n] = '\0';
    if (strcasecmp(buf, "localhost") == 0)
        return 1;
    struct in_addr a4;
    if (inet_pton(AF_INET, buf, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (n >= 2 && buf[0] == '[' && buf[n - 1] == ']') {
        buf[n - 1] = '\0';
        struct in6_addr a6;
        if (inet_pton(AF_INET6, buf + 1, &a6) != 1)
            return 0;
        static const uint8_t lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(a6.s6_addr, lo, 16) == 0)
            return 1;
        return memcmp(a6.s6_addr, mapped, 12) == 0 && a6.s6_addr[12] == 127;
    }
    return 0;
}

int sl_endpoint_is_local(const char *endpoint)
{
    if (endpoint == NULL)
        return 0;
    if (strncmp(endpoint, "ipc://", 6) == 0 || strncmp(endpoint, "inproc://", 9) == 0)
        return 1;
    if (strncmp(endpoint, "tcp://", 6) != 0)
        return 0;
    const char *h = endpoint + 6;
    /* a connect's "source;destination" form: judge the whole, so refuse */
    if (strchr(h, ';') != NULL)
        return 0;
    const char *colon = strrchr(h, ':');
    if (colon == NULL || colon[1] == '\0')
        return 0;
    for (const char *p = colon + 1; *p != '\0'; p++)
        if ((*p < '0' || *p > '9') && !(*p == '*' && p == colon + 1 && p[1] == '\0'))
            return 0;
    return host_is_loopback(h, (size_t)(colon - h));
}
