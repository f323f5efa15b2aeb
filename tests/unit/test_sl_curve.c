/* sl_curve (issue #16): key files made by keygen (modes, never overwritten,
 * no temporaries left), key files read (a secret open to others refused
 * naming the file, bad lengths and characters, directories, FIFOs, missing
 * files, symlinks followed and checked at their target), allow-lists read
 * from a directory (bad files named, an empty one refusing all, 65537 files
 * refused) and reloaded (the old list kept on an error), the ZAP handler
 * answering RFC 27 requests, and real CURVE servers and clients over ipc
 * and tcp: an allowed key talks, an unknown key and a wrong server key get
 * nothing and the client's monitor sees the handshake fail. Each case works
 * in its own folder. */
#define _GNU_SOURCE /* unshare */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_curve.h"
#include "sl_test.h"

/* A fresh folder for one case: "<test dir>/<name>" */
static const char *case_dir(const char *name)
{
    const char *d = sl_test_path(name);
    ck_assert_msg(mkdir(d, 0755) == 0, "mkdir(%s): %s", d, strerror(errno));
    return d;
}

static char *join(const char *dir, const char *name)
{
    static char slots[16][1024];
    static int next;
    char *p = slots[next++ % 16];
    snprintf(p, 1024, "%s/%s", dir, name);
    return p;
}

static void put_mode(const char *path, const void *data, size_t len, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    ck_assert_msg(fd >= 0, "open(%s): %s", path, strerror(errno));
    ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
    ck_assert_int_eq(fchmod(fd, mode), 0);
    ck_assert_int_eq(close(fd), 0);
}

static void put(const char *path, const char *text, mode_t mode)
{
    put_mode(path, text, strlen(text), mode);
}

/* the first line of a file, newline stripped */
static const char *first_line(const char *path)
{
    static char buf[4][256];
    static int next;
    char *b = buf[next++ % 4];
    size_t n = 0;
    uint8_t *d = sl_test_read(path, &n);
    ck_assert_msg(d != NULL, "cannot read %s", path);
    snprintf(b, sizeof buf[0], "%.*s", (int)n, (const char *)d);
    free(d);
    b[strcspn(b, "\n")] = '\0';
    return b;
}

static int count_entries(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    ck_assert_int_eq(fscanf(p, "%d", &n), 1);
    pclose(p);
    return n;
}

/* keygen NAME in dir; returns NAME's path (without the suffix) */
static const char *make_keys(const char *dir, const char *name)
{
    const char *p = join(dir, name);
    struct sl_error err = {0};
    int rc = sl_curve_keygen(p, &err);
    ck_assert_msg(rc == 0, "keygen %s: %s", p, err.msg);
    return p;
}

static struct sl_curve_keys load_keys(const char *name)
{
    char path[1100];
    snprintf(path, sizeof path, "%s.key", name);
    struct sl_curve_keys k;
    struct sl_error err = {0};
    int rc = sl_curve_load_secret(path, &k, &err);
    ck_assert_msg(rc == 0, "load %s: %s", path, err.msg);
    return k;
}

static const char *pub_of(const char *name)
{
    char path[1100];
    snprintf(path, sizeof path, "%s.pub", name);
    return first_line(path);
}

START_TEST(test_keygen_files_and_modes)
{
    const char *d = case_dir("keygen");
    mode_t old = umask(0); /* a permissive umask must not open the secret */
    const char *n = make_keys(d, "feeder-0");
    umask(old);
    struct stat st;
    ck_assert_int_eq(stat(join(d, "feeder-0.key"), &st), 0);
    ck_assert_int_eq(st.st_mode & 07777, 0600);
    ck_assert(S_ISREG(st.st_mode));
    ck_assert_int_eq(stat(join(d, "feeder-0.pub"), &st), 0);
    ck_assert_int_eq(st.st_mode & 07777, 0644); /* not 0666 under umask 0 (issue #24 item 9) */
    ck_assert_int_eq(st.st_size, SL_CURVE_KEY_Z85 + 1);
    ck_assert_int_eq(count_entries(d), 2); /* no temporary left */
    /* a .pub left world-writable (no .key beside it) is replaced 0644 */
    put(join(d, "stale.pub"), "old\n", 0666);
    old = umask(0);
    make_keys(d, "stale");
    umask(old);
    ck_assert_int_eq(stat(join(d, "stale.pub"), &st), 0);
    ck_assert_int_eq(st.st_mode & 07777, 0644);
    ck_assert_int_eq(stat(join(d, "stale.key"), &st), 0);
    ck_assert_int_eq(st.st_mode & 07777, 0600);
    ck_assert_int_eq(unlink(join(d, "stale.pub")), 0);
    ck_assert_int_eq(unlink(join(d, "stale.key")), 0);

    /* the pair belongs together: the secret's public half is NAME.pub */
    struct sl_curve_keys k = load_keys(n);
    char pub[SL_CURVE_KEY_Z85 + 1];
    struct sl_error err = {0};
    ck_assert_int_eq(sl_curve_load_public(join(d, "feeder-0.pub"), pub, &err), 0);
    ck_assert_str_eq(pub, k.public_z85);
    ck_assert_int_eq((int)strlen(k.secret_z85), SL_CURVE_KEY_Z85);

    /* two keygens give two different keys */
    const char *n2 = make_keys(d, "feeder-1");
    struct sl_curve_keys k2 = load_keys(n2);
    ck_assert_str_ne(k.secret_z85, k2.secret_z85);
    ck_assert_str_ne(k.public_z85, k2.public_z85);

    /* an existing key is never overwritten, and nothing else changes */
    char before[64];
    snprintf(before, sizeof before, "%s", first_line(join(d, "feeder-0.key")));
    char pub_before[64];
    snprintf(pub_before, sizeof pub_before, "%s", pub_of(n));
    ck_assert_int_eq(sl_curve_keygen(n, &err), SL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "feeder-0.key: exists already"));
    ck_assert_str_eq(first_line(join(d, "feeder-0.key")), before);
    ck_assert_str_eq(pub_of(n), pub_before);
    ck_assert_int_eq(count_entries(d), 4);

    /* a dangling symlink at NAME.key is not written through */
    ck_assert_int_eq(symlink(join(d, "elsewhere"), join(d, "linked.key")), 0);
    ck_assert_int_eq(sl_curve_keygen(join(d, "linked"), &err), SL_EINVAL);
    ck_assert_int_eq(access(join(d, "elsewhere"), F_OK), -1);

    /* a folder that does not exist, an empty name, a directory name */
    ck_assert_int_eq(sl_curve_keygen(join(d, "no/such/x"), &err), SL_EIO);
    ck_assert_ptr_nonnull(strstr(err.msg, "no/such/"));
    ck_assert_int_eq(sl_curve_keygen("", &err), SL_EINVAL);
    ck_assert_int_eq(sl_curve_keygen(join(d, "dir/"), &err), SL_EINVAL);
    char huge[5000];
    memset(huge, 'a', sizeof huge - 1);
    huge[sizeof huge - 1] = '\0';
    ck_assert_int_eq(sl_curve_keygen(huge, &err), SL_EINVAL);
}
END_TEST

START_TEST(test_keygen_unwritable_dir)
{
    const char *d = case_dir("ro");
    ck_assert_int_eq(chmod(sl_test_dir(), 0711), 0);
    ck_assert_int_eq(chmod(d, 0555), 0);
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
        return; /* cannot drop privileges: nothing to test */
    struct sl_error err = {0};
    ck_assert_int_eq(sl_curve_keygen(join(d, "k"), &err), SL_EIO);
    ck_assert_ptr_nonnull(strstr(err.msg, "Permission denied"));
    ck_assert_int_eq(count_entries(d), 0);
}
END_TEST

/* a good key, its text */
static const char *good_secret(void)
{
    static char s[SL_CURVE_KEY_Z85 + 1];
    char pub[SL_CURVE_KEY_Z85 + 1];
    ck_assert_int_eq(zmq_curve_keypair(pub, s), 0);
    return s;
}

START_TEST(test_load_secret_refusals)
{
    const char *d = case_dir("load");
    const char *key = good_secret();
    char line[64];
    snprintf(line, sizeof line, "%s\n", key);
    struct sl_curve_keys k;
    struct sl_error err = {0};

    /* accepted: 0600, 0400, without a newline, with \r\n */
    put(join(d, "a.key"), line, 0600);
    ck_assert_int_eq(sl_curve_load_secret(join(d, "a.key"), &k, &err), 0);
    ck_assert_str_eq(k.secret_z85, key);
    put(join(d, "b.key"), key, 0400);
    ck_assert_int_eq(sl_curve_load_secret(join(d, "b.key"), &k, &err), 0);
    char crlf[64];
    snprintf(crlf, sizeof crlf, "%s\r\n", key);
    put(join(d, "c.key"), crlf, 0600);
    ck_assert_int_eq(sl_curve_load_secret(join(d, "c.key"), &k, &err), 0);

    /* open to the group or others: refused naming the file and the fix */
    static const mode_t open_modes[] = {0644, 0640, 0604, 0660, 0606, 0610, 0601, 0777};
    for (size_t i = 0; i < sizeof open_modes / sizeof open_modes[0]; i++) {
        const char *p = join(d, "open.key");
        put(p, line, open_modes[i]);
        memset(&k, 'x', sizeof k);
        ck_assert_int_eq(sl_curve_load_secret(p, &k, &err), SL_EINVAL);
        char want[1400];
        snprintf(want, sizeof want,
                 "%s: a secret key readable or writable by others (mode %04o); make it the "
                 "owner's alone: chmod 600 %s",
                 p, (unsigned)open_modes[i], p);
        ck_assert_str_eq(err.msg, want);
        ck_assert_str_eq(k.secret_z85, ""); /* nothing half-filled */
    }

    /* damaged contents, each refused naming the file */
    struct {
        const char *text;
        size_t len;
        const char *says;
    } bad[] = {
        {"", 0, "got 0"},
        {"\n", 1, "got 0"},
        {"0123456789012345678901234567890123456789a\n", 42, "got 41"},
        {"012345678901234567890123456789012345678\n", 40, "got 39"},
        {"0123456789012345678901234567890123456789\n0123456789012345678901234567890123456789\n", 82,
         "longer than 64 bytes"},
        {"0123456789012345678901234567890123456789\n\n", 42, "got 41"},
        {"01234567890123456789 1234567890123456789\n", 41, "character 21, byte 0x20"},
        {"0123456789012345678\"01234567890123456789\n", 41, "character 20, byte 0x22"},
        {"0123456789012345678901234567890123456,89\n", 41, "character 38, byte 0x2c"},
        {"01234567890123456789\0001234567890123456789\n", 41, "character 21, byte 0x00"},
        {"#####56789012345678901234567890123456789\n", 41, "characters 1-5 overflow 32 bits"},
        {"\xc3\xa9\x31\x32\x33\x34\x35\x36\x37\x38\x39\x30\x31\x32\x33\x34\x35\x36\x37\x38\x39\x30\x31\x32\x33\x34\x35"
         "\x36\x37\x38\x39\x30\x31\x32\x33\x34\x35\x36\x37\x38\n",
         41, "character 1, byte 0xc3"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *p = join(d, "bad.key");
        put_mode(p, bad[i].text, bad[i].len, 0600);
        ck_assert_int_eq(sl_curve_load_secret(p, &k, &err), SL_EINVAL);
        ck_assert_msg(strncmp(err.msg, p, strlen(p)) == 0 && strstr(err.msg, bad[i].says) != NULL, "case %zu: %s", i,
                      err.msg);
        ck_assert_int_eq(sl_curve_load_public(p, k.public_z85, &err), SL_EINVAL);
        ck_assert_msg(strstr(err.msg, bad[i].says) != NULL, "case %zu (public): %s", i, err.msg);
    }

    /* a megabyte: refused without reading it all */
    char *big = malloc(1 << 20);
    memset(big, 'a', 1 << 20);
    put_mode(join(d, "big.key"), big, 1 << 20, 0600);
    free(big);
    ck_assert_int_eq(sl_curve_load_secret(join(d, "big.key"), &k, &err), SL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "longer than 64 bytes"));

    /* not a regular file: a directory, a FIFO (never blocks), /dev/null */
    ck_assert_int_eq(mkdir(join(d, "dir.key"), 0700), 0);
    ck_assert_int_eq(sl_curve_load_secret(join(d, "dir.key"), &k, &err), SL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "dir.key: not a regular file"));
    ck_assert_int_eq(mkfifo(join(d, "fifo.key"), 0600), 0);
    ck_assert_int_eq(sl_curve_load_secret(join(d, "fifo.key"), &k, &err), SL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "fifo.key: not a regular file"));
    ck_assert_int_eq(sl_curve_load_public("/dev/null", k.public_z85, &err), SL_EINVAL);

    /* missing, empty path */
    ck_assert_int_eq(sl_curve_load_secret(join(d, "absent.key"), &k, &err), SL_EIO);
    char want[1200];
    snprintf(want, sizeof want, "open(%s): No such file or directory", join(d, "absent.key"));
    ck_assert_str_eq(err.msg, want);
    ck_assert_int_eq(sl_curve_load_secret("", &k, &err), SL_EINVAL);

    /* symlinks are followed; the file they lead to is checked */
    ck_assert_int_eq(symlink(join(d, "a.key"), join(d, "link.key")), 0);
    ck_assert_int_eq(sl_curve_load_secret(join(d, "link.key"), &k, &err), 0);
    ck_assert_str_eq(k.secret_z85, key);
    put(join(d, "wide.key"), line, 0644);
    ck_assert_int_eq(symlink(join(d, "wide.key"), join(d, "link-wide.key")), 0);
    ck_assert_int_eq(sl_curve_load_secret(join(d, "link-wide.key"), &k, &err), SL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "mode 0644"));
    ck_assert_int_eq(symlink(join(d, "gone"), join(d, "dangling.key")), 0);
    ck_assert_int_eq(sl_curve_load_secret(join(d, "dangling.key"), &k, &err), SL_EIO);

    /* a public key file may be world-readable; a secret read as a public
     * key is just 40 characters (the caller names which file is which) */
    put(join(d, "p.pub"), line, 0644);
    char pub[SL_CURVE_KEY_Z85 + 1];
    ck_assert_int_eq(sl_curve_load_public(join(d, "p.pub"), pub, &err), 0);
    ck_assert_str_eq(pub, key);
}
END_TEST

START_TEST(test_unreadable_secret)
{
    const char *d = case_dir("unreadable");
    put(join(d, "x.key"), good_secret(), 0000);
    ck_assert_int_eq(chmod(sl_test_dir(), 0711), 0);
    ck_assert_int_eq(chmod(d, 0755), 0);
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
        return;
    struct sl_curve_keys k;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_curve_load_secret(join(d, "x.key"), &k, &err), SL_EIO);
    ck_assert_ptr_nonnull(strstr(err.msg, "Permission denied"));
}
END_TEST

static void decode(const char *z85, uint8_t key[32])
{
    ck_assert_ptr_nonnull(zmq_z85_decode(key, z85));
}

START_TEST(test_allow_list_from_dir)
{
    const char *d = case_dir("allow");
    const char *a = make_keys(d, "a"), *b = make_keys(d, "b"), *c = make_keys(d, "c");
    const char *other = make_keys(case_dir("other"), "x");
    put(join(d, "README"), "not a key\n", 0644);      /* ignored: not NAME.pub */
    put(join(d, ".hidden.pub"), "not a key\n", 0644); /* ignored: hidden */
    put(join(d, "b-again.pub"), pub_of(b), 0644);     /* a duplicate counts once */
    struct sl_curve_allow *al = NULL;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_curve_allow_load(&al, d, NULL, 0, &err), 0);
    ck_assert_uint_eq(sl_curve_allow_count(al), 3);
    uint8_t key[32];
    decode(pub_of(a), key);
    ck_assert_int_eq(sl_curve_allow_has(al, key), 1);
    decode(pub_of(b), key);
    ck_assert_int_eq(sl_curve_allow_has(al, key), 1);
    decode(pub_of(c), key);
    ck_assert_int_eq(sl_curve_allow_has(al, key), 1);
    decode(pub_of(other), key);
    ck_assert_int_eq(sl_curve_allow_has(al, key), 0);
    sl_curve_allow_free(al);

    /* extras, with and without a directory */
    const char *extra[] = {pub_of(other)};
    ck_assert_int_eq(sl_curve_allow_load(&al, d, extra, 1, &err), 0);
    ck_assert_uint_eq(sl_curve_allow_count(al), 4);
    ck_assert_int_eq(sl_curve_allow_has(al, key), 1);
    sl_curve_allow_free(al);
    ck_assert_int_eq(sl_curve_allow_load(&al, NULL, extra, 1, &err), 0);
    ck_assert_uint_eq(sl_curve_allow_count(al), 1);
    sl_curve_allow_free(al);
    const char *bad_extra[] = {"tooshort"};
    ck_assert_int_eq(sl_curve_allow_load(&al, NULL, bad_extra, 1, &err), SL_EINVAL);
    ck_assert_ptr_null(al);
    ck_assert_ptr_nonnull(strstr(err.msg, "allowed key 1"));
    sl_curve_allow_free(NULL);

    /* an empty directory: an empty list, refusing everyone */
    const char *empty = case_dir("empty");
    ck_assert_int_eq(sl_curve_allow_load(&al, empty, NULL, 0, &err), 0);
    ck_assert_uint_eq(sl_curve_allow_count(al), 0);
    ck_assert_int_eq(sl_curve_allow_has(al, key), 0);
    sl_curve_allow_free(al);

    /* a bad file is named; nothing is returned */
    const char *bad = case_dir("bad");
    put(join(bad, "good.pub"), pub_of(a), 0644);
    put(join(bad, "broken.pub"), "0123456789\n", 0644);
    ck_assert_int_eq(sl_curve_allow_load(&al, bad, NULL, 0, &err), SL_EINVAL);
    ck_assert_ptr_null(al);
    char want[1200];
    snprintf(want, sizeof want, "%s/broken.pub: not a CURVE key (expected one line of 40 Z85 characters, got 10)", bad);
    ck_assert_str_eq(err.msg, want);
    /* a directory named NAME.pub is a bad file too */
    ck_assert_int_eq(unlink(join(bad, "broken.pub")), 0);
    ck_assert_int_eq(mkdir(join(bad, "sub.pub"), 0755), 0);
    ck_assert_int_eq(sl_curve_allow_load(&al, bad, NULL, 0, &err), SL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "sub.pub: not a regular file"));

    /* no directory, a file for a directory */
    ck_assert_int_eq(sl_curve_allow_load(&al, join(d, "absent"), NULL, 0, &err), SL_EIO);
    ck_assert_ptr_nonnull(strstr(err.msg, "opendir("));
    ck_assert_ptr_nonnull(strstr(err.msg, "No such file"));
    ck_assert_int_eq(sl_curve_allow_load(&al, join(d, "README"), NULL, 0, &err), SL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "README: not a directory"));
}
END_TEST

/* Whoever can write an allow-list key or its directory can join (issue #24
 * item 9): a .pub or a directory writable by the group or others is
 * refused naming it and its mode, whatever the umask the files were made
 * under; a reload keeps the old list; a read-only mount is exempt. */
START_TEST(test_allow_list_modes)
{
    mode_t old = umask(0); /* as a careless deployment would make them */
    const char *d = case_dir("modes");
    ck_assert_int_eq(chmod(d, 0755), 0);
    const char *a = make_keys(d, "a");
    struct sl_curve_allow *al = NULL;
    struct sl_error err = {0};
    ck_assert_msg(sl_curve_allow_load(&al, d, NULL, 0, &err) == 0, "%s", err.msg); /* keygen's 0644 */
    ck_assert_uint_eq(sl_curve_allow_count(al), 1);
    char want[1400];

    /* a key the group or others can write */
    const mode_t bad_files[] = {0666, 0664, 0646, 0622, 0660, 0602};
    for (size_t i = 0; i < sizeof bad_files / sizeof bad_files[0]; i++) {
        ck_assert_int_eq(chmod(join(d, "a.pub"), bad_files[i]), 0);
        struct sl_curve_allow *no = NULL;
        ck_assert_int_eq(sl_curve_allow_load(&no, d, NULL, 0, &err), SL_EINVAL);
        ck_assert_ptr_null(no);
        snprintf(want, sizeof want,
                 "%s/a.pub: an allow-list key writable by others (mode %04o): whoever can write it "
                 "can join; make it writable by its owner alone: chmod go-w %s/a.pub",
                 d, (unsigned)bad_files[i], d);
        ck_assert_str_eq(err.msg, want);
        /* SIGHUP's reload refuses too and keeps the list */
        ck_assert_int_eq(sl_curve_allow_reload(al, &err), SL_EINVAL);
        ck_assert_str_eq(err.msg, want);
        ck_assert_uint_eq(sl_curve_allow_count(al), 1);
    }
    /* read-only for others, or the owner's alone: accepted */
    const mode_t good_files[] = {0644, 0600, 0400, 0444, 0640, 0755};
    for (size_t i = 0; i < sizeof good_files / sizeof good_files[0]; i++) {
        ck_assert_int_eq(chmod(join(d, "a.pub"), good_files[i]), 0);
        ck_assert_msg(sl_curve_allow_reload(al, &err) == 0, "mode %04o: %s", (unsigned)good_files[i], err.msg);
    }
    /* a symlink is checked at the file it leads to */
    const char *elsewhere = case_dir("modes-target");
    put(join(elsewhere, "t.pub"), pub_of(a), 0666);
    ck_assert_int_eq(symlink(join(elsewhere, "t.pub"), join(d, "t.pub")), 0);
    ck_assert_int_eq(sl_curve_allow_reload(al, &err), SL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "t.pub: an allow-list key writable by others (mode 0666)"));
    ck_assert_int_eq(chmod(join(elsewhere, "t.pub"), 0644), 0);
    ck_assert_msg(sl_curve_allow_reload(al, &err) == 0, "%s", err.msg);
    /* files not read (not NAME.pub, hidden) are not judged */
    put(join(d, "README"), "notes\n", 0666);
    put(join(d, ".x.pub"), "notes\n", 0666);
    ck_assert_msg(sl_curve_allow_reload(al, &err) == 0, "%s", err.msg);

    /* the directory: group or other write, sticky or not */
    const mode_t bad_dirs[] = {0777, 0775, 0757, 01777, 0770, 0730};
    for (size_t i = 0; i < sizeof bad_dirs / sizeof bad_dirs[0]; i++) {
        ck_assert_int_eq(chmod(d, bad_dirs[i]), 0);
        struct sl_curve_allow *no = NULL;
        ck_assert_int_eq(sl_curve_allow_load(&no, d, NULL, 0, &err), SL_EINVAL);
        ck_assert_ptr_null(no);
        snprintf(want, sizeof want,
                 "%s: an allow-list directory writable by others (mode %04o): whoever can write "
                 "there can join; make it writable by its owner alone: chmod go-w %s",
                 d, (unsigned)bad_dirs[i], d);
        ck_assert_str_eq(err.msg, want);
        ck_assert_int_eq(sl_curve_allow_reload(al, &err), SL_EINVAL);
        ck_assert_uint_eq(sl_curve_allow_count(al), 1);
    }
    const mode_t good_dirs[] = {0755, 0700, 0555, 0750, 0711};
    for (size_t i = 0; i < sizeof good_dirs / sizeof good_dirs[0]; i++) {
        ck_assert_int_eq(chmod(d, good_dirs[i]), 0);
        ck_assert_msg(sl_curve_allow_reload(al, &err) == 0, "mode %04o: %s", (unsigned)good_dirs[i], err.msg);
    }
    sl_curve_allow_free(al);

    /* a read-only mount cannot be written whatever its bits (a Kubernetes
     * ConfigMap volume): accepted. Needs a private mount namespace (this
     * case runs in its own process); skipped where none can be made. */
    ck_assert_int_eq(chmod(d, 0777), 0);
    ck_assert_int_eq(chmod(join(d, "a.pub"), 0666), 0);
    umask(old);
    if ((unshare(CLONE_NEWNS) == 0 || unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0) &&
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 && mount(d, d, NULL, MS_BIND, NULL) == 0 &&
        mount(NULL, d, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) == 0) {
        ck_assert_msg(sl_curve_allow_load(&al, d, NULL, 0, &err) == 0, "%s", err.msg);
        ck_assert_uint_eq(sl_curve_allow_count(al), 1); /* a, and t its copy */
        sl_curve_allow_free(al);
    } else {
        fprintf(stderr, "test_allow_list_modes: no private read-only mount here (%s): that part skipped\n",
                strerror(errno));
    }
}
END_TEST

START_TEST(test_allow_list_limit)
{
    const char *d = case_dir("many");
    char line[64];
    snprintf(line, sizeof line, "%s\n", good_secret()); /* any 40 Z85 characters */
    char name[64];
    for (int i = 0; i < SL_CURVE_MAX_ALLOW; i++) {
        snprintf(name, sizeof name, "k%05d.pub", i);
        put(join(d, name), line, 0644);
    }
    struct sl_curve_allow *al = NULL;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_curve_allow_load(&al, d, NULL, 0, &err), 0); /* 65536 files: the most */
    ck_assert_uint_eq(sl_curve_allow_count(al), 1);                  /* all the same key */
    /* one more file, and reload refuses, keeping the list */
    put(join(d, "one-more.pub"), line, 0644);
    ck_assert_int_eq(sl_curve_allow_reload(al, &err), SL_EINVAL);
    char want[1200];
    snprintf(want, sizeof want, "%s: more than 65536 public key files (the most an allow-list holds)", d);
    ck_assert_str_eq(err.msg, want);
    ck_assert_uint_eq(sl_curve_allow_count(al), 1);
    sl_curve_allow_free(al);
    ck_assert_int_eq(sl_curve_allow_load(&al, d, NULL, 0, &err), SL_EINVAL);
    ck_assert_ptr_null(al);
}
END_TEST

START_TEST(test_allow_reload)
{
    const char *d = case_dir("reload");
    const char *keys = case_dir("keys");
    const char *a = make_keys(keys, "a"), *b = make_keys(keys, "b");
    put(join(d, "a.pub"), pub_of(a), 0644);
    struct sl_curve_allow *al = NULL;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_curve_allow_load(&al, d, NULL, 0, &err), 0);
    ck_assert_uint_eq(sl_curve_allow_count(al), 1);
    uint8_t ka[32], kb[32];
    decode(pub_of(a), ka);
    decode(pub_of(b), kb);
    ck_assert_int_eq(sl_curve_allow_has(al, kb), 0);

    put(join(d, "b.pub"), pub_of(b), 0644);
    ck_assert_int_eq(sl_curve_allow_reload(al, &err), 0);
    ck_assert_uint_eq(sl_curve_allow_count(al), 2);
    ck_assert_int_eq(sl_curve_allow_has(al, kb), 1);

    /* a damaged file: the old list stays, the file is named */
    put(join(d, "zz.pub"), "garbage\n", 0644);
    ck_assert_int_eq(unlink(join(d, "a.pub")), 0);
    ck_assert_int_eq(sl_curve_allow_reload(al, &err), SL_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.msg, "zz.pub: not a CURVE key"));
    ck_assert_uint_eq(sl_curve_allow_count(al), 2);
    ck_assert_int_eq(sl_curve_allow_has(al, ka), 1);
    ck_assert_int_eq(sl_curve_allow_has(al, kb), 1);

    /* the directory gone: the old list stays too */
    ck_assert_int_eq(unlink(join(d, "zz.pub")), 0);
    ck_assert_int_eq(rename(d, join(keys, "moved")), 0);
    ck_assert_int_eq(sl_curve_allow_reload(al, &err), SL_EIO);
    ck_assert_uint_eq(sl_curve_allow_count(al), 2);
    ck_assert_int_eq(rename(join(keys, "moved"), d), 0);

    /* a key removed: it is gone after the reload */
    ck_assert_int_eq(sl_curve_allow_reload(al, &err), 0);
    ck_assert_uint_eq(sl_curve_allow_count(al), 1);
    ck_assert_int_eq(sl_curve_allow_has(al, ka), 0);
    ck_assert_int_eq(sl_curve_allow_has(al, kb), 1);

    /* emptied: refuses everyone */
    ck_assert_int_eq(unlink(join(d, "b.pub")), 0);
    ck_assert_int_eq(sl_curve_allow_reload(al, &err), 0);
    ck_assert_uint_eq(sl_curve_allow_count(al), 0);
    ck_assert_int_eq(sl_curve_allow_has(al, kb), 0);
    sl_curve_allow_free(al);
}
END_TEST

/* ---- ZAP and real sockets ---- */

/* Receive a whole reply into frames[] as strings; returns the count. */
static int recv_frames(void *s, char frames[][64], size_t lens[], int cap)
{
    int n = 0, more = 1;
    while (more && n < cap) {
        int r = zmq_recv(s, frames[n], 63, 0);
        ck_assert_int_ge(r, 0);
        lens[n] = (size_t)r;
        frames[n][r < 63 ? r : 63] = '\0';
        size_t sz = sizeof more;
        zmq_getsockopt(s, ZMQ_RCVMORE, &more, &sz);
        n++;
    }
    return n;
}

static void send_request(void *req, const char *const *f, const size_t *lens, int n)
{
    for (int i = 0; i < n; i++)
        ck_assert_int_ge(zmq_send(req, f[i], lens[i], i + 1 < n ? ZMQ_SNDMORE : 0), 0);
}

START_TEST(test_zap_rfc27)
{
    const char *d = case_dir("zap");
    const char *a = make_keys(d, "a"), *x = make_keys(case_dir("zapx"), "x");
    void *ctx = zmq_ctx_new();
    struct sl_curve_allow *al = NULL;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_curve_allow_load(&al, d, NULL, 0, &err), 0);
    struct sl_zap *z = NULL;
    ck_assert_int_eq(sl_zap_start(&z, ctx, al, "test", &err), 0);
    /* one handler a context */
    struct sl_zap *z2 = NULL;
    ck_assert_int_eq(sl_zap_start(&z2, ctx, al, "test", &err), SL_EINVAL);
    ck_assert_ptr_null(z2);
    ck_assert_ptr_nonnull(strstr(err.msg, "this context has a ZAP handler already"));

    void *req = zmq_socket(ctx, ZMQ_REQ);
    int tmo = 5000, linger = 0;
    zmq_setsockopt(req, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    zmq_setsockopt(req, ZMQ_LINGER, &linger, sizeof linger);
    ck_assert_int_eq(zmq_connect(req, "inproc://zeromq.zap.01"), 0);
    uint8_t ka[32], kx[32];
    decode(pub_of(a), ka);
    decode(pub_of(x), kx);
    char fr[8][64];
    size_t ln[8];

    /* allowed: 200, the request id echoed, the key as user id, no metadata */
    const char *ok[] = {"1.0", "id-1", "sluice", "192.0.2.7", "", "CURVE", (const char *)ka};
    size_t okl[] = {3, 4, 6, 9, 0, 5, 32};
    send_request(req, ok, okl, 7);
    ck_assert_int_eq(recv_frames(req, fr, ln, 8), 6);
    ck_assert_str_eq(fr[0], "1.0");
    ck_assert_str_eq(fr[1], "id-1");
    ck_assert_str_eq(fr[2], "200");
    ck_assert_str_eq(fr[4], pub_of(a));
    ck_assert_uint_eq(ln[5], 0);

    /* unknown key: 400, no user id */
    const char *no[] = {"1.0", "id-2", "sluice", "192.0.2.8", "", "CURVE", (const char *)kx};
    send_request(req, no, okl, 7);
    ck_assert_int_eq(recv_frames(req, fr, ln, 8), 6);
    ck_assert_str_eq(fr[1], "id-2");
    ck_assert_str_eq(fr[2], "400");
    ck_assert_uint_eq(ln[4], 0);

    /* a 31-byte key, another mechanism: 400 */
    size_t shortl[] = {3, 4, 6, 9, 0, 5, 31};
    const char *sh[] = {"1.0", "id-3", "sluice", "192.0.2.9", "", "CURVE", (const char *)ka};
    send_request(req, sh, shortl, 7);
    ck_assert_int_eq(recv_frames(req, fr, ln, 8), 6);
    ck_assert_str_eq(fr[2], "400");
    const char *nul[] = {"1.0", "id-4", "sluice", "192.0.2.9", "", "NULL"};
    size_t nulll[] = {3, 4, 6, 9, 0, 4};
    send_request(req, nul, nulll, 6);
    ck_assert_int_eq(recv_frames(req, fr, ln, 8), 6);
    ck_assert_str_eq(fr[1], "id-4");
    ck_assert_str_eq(fr[2], "400");
    const char *plain[] = {"1.0", "id-5", "sluice", "192.0.2.9", "", "PLAIN", "user", "pass"};
    size_t plainl[] = {3, 4, 6, 9, 0, 5, 4, 4};
    send_request(req, plain, plainl, 8);
    ck_assert_int_eq(recv_frames(req, fr, ln, 8), 6);
    ck_assert_str_eq(fr[2], "400");

    /* malformed: another version, too few frames: 500 */
    const char *v2[] = {"2.0", "id-6", "sluice", "192.0.2.9", "", "CURVE", (const char *)ka};
    send_request(req, v2, okl, 7);
    ck_assert_int_eq(recv_frames(req, fr, ln, 8), 6);
    ck_assert_str_eq(fr[1], "id-6");
    ck_assert_str_eq(fr[2], "500");
    const char *few[] = {"1.0", "id-7"};
    send_request(req, few, okl, 2);
    ck_assert_int_eq(recv_frames(req, fr, ln, 8), 6);
    ck_assert_str_eq(fr[2], "500");
    /* 20 frames: answered, the handler still works afterwards */
    const char *many[20];
    size_t manyl[20];
    for (int i = 0; i < 20; i++) {
        many[i] = i == 0 ? "1.0" : "f";
        manyl[i] = i == 0 ? 3 : 1;
    }
    send_request(req, many, manyl, 20);
    ck_assert_int_eq(recv_frames(req, fr, ln, 8), 6);
    ck_assert_str_eq(fr[2], "400");
    send_request(req, ok, okl, 7);
    ck_assert_int_eq(recv_frames(req, fr, ln, 8), 6);
    ck_assert_str_eq(fr[2], "200");

    ck_assert_uint_eq(sl_zap_accepted(z), 2);
    ck_assert_uint_eq(sl_zap_refused(z), 7);
    zmq_close(req);
    sl_zap_stop(z);
    sl_zap_stop(NULL);
    ck_assert_uint_eq(sl_zap_accepted(NULL), 0);
    /* stopped: the endpoint is free for a new handler */
    ck_assert_msg(sl_zap_start(&z, ctx, NULL, "test", &err) == 0, "restart: %s", err.msg);
    sl_zap_stop(z);
    sl_curve_allow_free(al);
    ck_assert_int_eq(zmq_ctx_term(ctx), 0);
}
END_TEST

/* the next monitor event within ms (0 when none came) */
static int next_event(void *mon, int ms, uint32_t *value)
{
    zmq_pollitem_t it = {.socket = mon, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, ms) <= 0)
        return 0;
    uint8_t b[6];
    ck_assert_int_eq(zmq_recv(mon, b, sizeof b, 0), 6);
    char ep[256];
    ck_assert_int_ge(zmq_recv(mon, ep, sizeof ep, 0), 0);
    uint16_t ev;
    memcpy(&ev, b, 2);
    if (value != NULL)
        memcpy(value, b + 2, 4);
    return ev;
}

/* A handshake failure event within ms; 0 when the connection stayed up. */
static int wait_handshake_failed(void *mon, int ms, uint32_t *value)
{
    for (int waited = 0; waited < ms; waited += 50) {
        int ev = next_event(mon, 50, value);
        if (ev & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                  ZMQ_EVENT_HANDSHAKE_FAILED_AUTH))
            return ev;
        ck_assert_msg(ev != ZMQ_EVENT_HANDSHAKE_SUCCEEDED, "the handshake succeeded");
    }
    return 0;
}

static void *client_with_monitor(void *ctx, const char *name, void **mon)
{
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    char ep[128];
    snprintf(ep, sizeof ep, "inproc://mon-%s", name);
    ck_assert_int_eq(zmq_socket_monitor(s, ep, ZMQ_EVENT_ALL), 0);
    *mon = zmq_socket(ctx, ZMQ_PAIR);
    zmq_setsockopt(*mon, ZMQ_LINGER, &linger, sizeof linger);
    ck_assert_int_eq(zmq_connect(*mon, ep), 0);
    return s;
}

/* nothing arrives on s in ms */
static void assert_silent(void *s, int ms)
{
    zmq_pollitem_t it = {.socket = s, .events = ZMQ_POLLIN};
    ck_assert_int_eq(zmq_poll(&it, 1, ms), 0);
}

static void curve_pair(const char *tag, const char *bind_ep)
{
    char dn[64], an[64];
    snprintf(dn, sizeof dn, "pair-%s", tag);
    snprintf(an, sizeof an, "allow-%s", tag);
    const char *d = case_dir(dn);
    const char *allowd = case_dir(an);
    const char *srv = make_keys(d, "server"), *good = make_keys(d, "good"), *bad = make_keys(d, "bad"),
               *wrong = make_keys(d, "wrong");
    put(join(allowd, "good.pub"), pub_of(good), 0644);
    struct sl_curve_keys ks = load_keys(srv), kg = load_keys(good), kb = load_keys(bad);
    char srv_pub[SL_CURVE_KEY_Z85 + 1], wrong_pub[SL_CURVE_KEY_Z85 + 1];
    snprintf(srv_pub, sizeof srv_pub, "%s", pub_of(srv));
    snprintf(wrong_pub, sizeof wrong_pub, "%s", pub_of(wrong));
    struct sl_error err = {0};
    struct sl_curve_allow *al = NULL;
    ck_assert_int_eq(sl_curve_allow_load(&al, allowd, NULL, 0, &err), 0);

    void *ctx = zmq_ctx_new();
    struct sl_zap *z = NULL;
    ck_assert_int_eq(sl_zap_start(&z, ctx, al, "test", &err), 0);
    void *server = zmq_socket(ctx, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(server, ZMQ_LINGER, &linger, sizeof linger);
    ck_assert_int_eq(sl_curve_server(server, &ks, &err), 0);
    ck_assert_int_eq(zmq_bind(server, bind_ep), 0);
    char endpoint[1100];
    size_t elen = sizeof endpoint;
    ck_assert_int_eq(zmq_getsockopt(server, ZMQ_LAST_ENDPOINT, endpoint, &elen), 0);

    /* the allowed client talks, both ways, its key as the User-Id */
    void *mon_g;
    void *cg = client_with_monitor(ctx, "good", &mon_g);
    ck_assert_int_eq(sl_curve_client(cg, &kg, srv_pub, &err), 0);
    ck_assert_int_eq(zmq_connect(cg, endpoint), 0);
    ck_assert_int_eq(zmq_send(cg, "hello", 5, 0), 5);
    int tmo = 5000;
    zmq_setsockopt(server, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    zmq_setsockopt(cg, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    zmq_msg_t id, m;
    zmq_msg_init(&id);
    zmq_msg_init(&m);
    ck_assert_int_ge(zmq_msg_recv(&id, server, 0), 1);
    ck_assert_int_eq(zmq_msg_recv(&m, server, 0), 5);
    ck_assert_int_eq(memcmp(zmq_msg_data(&m), "hello", 5), 0);
    const char *user = zmq_msg_gets(&m, "User-Id");
    ck_assert_ptr_nonnull(user);
    ck_assert_str_eq(user, kg.public_z85);
    int idlen = (int)zmq_msg_size(&id);
    ck_assert_int_eq(zmq_msg_send(&id, server, ZMQ_SNDMORE), idlen);
    ck_assert_int_eq(zmq_send(server, "welcome", 7, 0), 7);
    char buf[16];
    ck_assert_int_eq(zmq_recv(cg, buf, sizeof buf, 0), 7);
    ck_assert_int_eq(memcmp(buf, "welcome", 7), 0);
    zmq_msg_close(&m);
    ck_assert_uint_eq(sl_zap_accepted(z), 1);
    ck_assert_uint_eq(sl_zap_refused(z), 0);

    /* an unknown key: the ZAP handler says no, the client's monitor sees an
     * AUTH failure with the status code, and nothing reaches the server */
    void *mon_b;
    void *cb = client_with_monitor(ctx, "bad", &mon_b);
    ck_assert_int_eq(sl_curve_client(cb, &kb, srv_pub, &err), 0);
    ck_assert_int_eq(zmq_connect(cb, endpoint), 0);
    ck_assert_int_eq(zmq_send(cb, "let me in", 9, ZMQ_DONTWAIT), 9);
    uint32_t value = 0;
    ck_assert_int_eq(wait_handshake_failed(mon_b, 5000, &value), ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
    ck_assert_uint_eq(value, 400);
    assert_silent(server, 300);
    assert_silent(cb, 0);
    ck_assert_uint_ge(sl_zap_refused(z), 1);
    ck_assert_uint_eq(sl_zap_accepted(z), 1);

    /* the right client key, the wrong server key: the server cannot read its
     * HELLO, the client's monitor sees the handshake fail, nothing arrives,
     * and the ZAP handler is never asked */
    uint64_t refused = sl_zap_refused(z);
    void *mon_w;
    void *cw = client_with_monitor(ctx, "wrong", &mon_w);
    ck_assert_int_eq(sl_curve_client(cw, &kg, wrong_pub, &err), 0);
    ck_assert_int_eq(zmq_connect(cw, endpoint), 0);
    ck_assert_int_eq(zmq_send(cw, "hello?", 6, ZMQ_DONTWAIT), 6);
    ck_assert_int_ne(wait_handshake_failed(mon_w, 5000, NULL), 0);
    assert_silent(server, 300);
    ck_assert_uint_eq(sl_zap_accepted(z), 1);

    /* no keys at all (the NULL mechanism): refused in the greeting */
    void *mon_n;
    void *cn = client_with_monitor(ctx, "null", &mon_n);
    ck_assert_int_eq(zmq_connect(cn, endpoint), 0);
    ck_assert_int_eq(zmq_send(cn, "plain", 5, ZMQ_DONTWAIT), 5);
    ck_assert_int_ne(wait_handshake_failed(mon_n, 5000, NULL), 0);
    assert_silent(server, 300);
    ck_assert_uint_eq(sl_zap_accepted(z), 1);
    ck_assert_uint_ge(sl_zap_refused(z), refused);

    /* the refused key allowed after a reload: it talks on its next try */
    put(join(allowd, "bad.pub"), pub_of(bad), 0644);
    ck_assert_int_eq(sl_curve_allow_reload(al, &err), 0);
    void *mon_b2;
    void *cb2 = client_with_monitor(ctx, "bad2", &mon_b2);
    ck_assert_int_eq(sl_curve_client(cb2, &kb, srv_pub, &err), 0);
    ck_assert_int_eq(zmq_connect(cb2, endpoint), 0);
    ck_assert_int_eq(zmq_send(cb2, "again", 5, 0), 5);
    zmq_msg_init(&m);
    ck_assert_int_ge(zmq_msg_recv(&id, server, 0), 1);
    ck_assert_int_eq(zmq_msg_recv(&m, server, 0), 5);
    ck_assert_str_eq(zmq_msg_gets(&m, "User-Id"), kb.public_z85);
    zmq_msg_close(&m);
    zmq_msg_close(&id);

    void *socks[] = {cg, mon_g, cb, mon_b, cw, mon_w, cn, mon_n, cb2, mon_b2, server};
    for (size_t i = 0; i < sizeof socks / sizeof socks[0]; i++)
        zmq_close(socks[i]);
    sl_zap_stop(z);
    sl_curve_allow_free(al);
    ck_assert_int_eq(zmq_ctx_term(ctx), 0);
}

/* (not over inproc://: libzmq runs no security mechanism on inproc, so a
 * CURVE server's inproc peers are never asked for keys; the process's own
 * threads are trusted, see docs/security.md) */
START_TEST(test_curve_ipc)
{
    char ep[1100];
    snprintf(ep, sizeof ep, "ipc://%s", sl_test_path("curve.sock"));
    curve_pair("ipc", ep);
}
END_TEST

START_TEST(test_curve_tcp)
{
    curve_pair("tcp", "tcp://127.0.0.1:*");
}
END_TEST

START_TEST(test_socket_options_refused)
{
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    struct sl_curve_keys none;
    memset(&none, 0, sizeof none);
    struct sl_error err = {0};
    ck_assert_int_eq(sl_curve_server(s, &none, &err), SL_EINVAL);
    ck_assert_int_eq(sl_curve_server(s, NULL, &err), SL_EINVAL);
    struct sl_curve_keys k;
    ck_assert_int_eq(zmq_curve_keypair(k.public_z85, k.secret_z85), 0);
    ck_assert_int_eq(sl_curve_client(s, &k, NULL, &err), SL_EINVAL);
    ck_assert_int_eq(sl_curve_client(s, &k, "short", &err), SL_EINVAL);
    ck_assert_int_eq(sl_curve_client(s, &none, k.public_z85, &err), SL_EINVAL);
    ck_assert_int_eq(sl_curve_client(s, &k, k.public_z85, &err), 0);
    zmq_close(s);
    zmq_ctx_term(ctx);
}
END_TEST

START_TEST(test_endpoint_is_local)
{
    static const struct {
        const char *ep;
        int local;
    } cases[] = {
        {"ipc:///tmp/feeder.sock", 1},
        {"ipc://@abstract", 1},
        {"inproc://x", 1},
        {"tcp://127.0.0.1:5555", 1},
        {"tcp://127.255.255.254:1", 1},
        {"tcp://127.0.0.1:*", 1},
        {"tcp://localhost:5555", 1},
        {"tcp://LOCALHOST:5555", 1},
        {"tcp://[::1]:5555", 1},
        {"tcp://[0:0:0:0:0:0:0:1]:5555", 1},
        {"tcp://[::ffff:127.0.0.1]:5555", 1},
        {"tcp://*:5555", 0},
        {"tcp://0.0.0.0:5555", 0},
        {"tcp://[::]:5555", 0},
        {"tcp://10.0.0.1:5555", 0},
        {"tcp://128.0.0.1:5555", 0},
        {"tcp://[::2]:5555", 0},
        {"tcp://[::ffff:10.0.0.1]:5555", 0},
        {"tcp://lo:5555", 0},
        {"tcp://eth0:5555", 0},
        {"tcp://feeder-0.example:5555", 0},
        {"tcp://127.0.0.1.example.com:5555", 0},
        {"tcp://localhost.:5555", 0},
        {"tcp://127.1:5555", 0},
        {"tcp://127.0.0.1", 0},
        {"tcp://127.0.0.1:", 0},
        {"tcp://127.0.0.1:55a", 0},
        {"tcp://127.0.0.1;10.0.0.1:5555", 0},
        {"tcp://10.0.0.1;127.0.0.1:5555", 0},
        {"tcp://:5555", 0},
        {"tcp://", 0},
        {"TCP://127.0.0.1:5555", 0},
        {"udp://127.0.0.1:5555", 0},
        {"ws://127.0.0.1:5555", 0},
        {"pgm://eth0;239.192.1.1:5555", 0},
        {"127.0.0.1:5555", 0},
        {"", 0},
        {"tcp://[::1:5555", 0},
        {"tcp://[127.0.0.1]:5555", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(sl_endpoint_is_local(cases[i].ep) == cases[i].local, "%s: expected %d", cases[i].ep,
                      cases[i].local);
    ck_assert_int_eq(sl_endpoint_is_local(NULL), 0);
    char huge[5000];
    memcpy(huge, "tcp://", 6);
    memset(huge + 6, '1', sizeof huge - 7);
    huge[sizeof huge - 1] = '\0';
    ck_assert_int_eq(sl_endpoint_is_local(huge), 0);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_curve");
    TCase *tc = tcase_create("keys");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_keygen_files_and_modes);
    tcase_add_test(tc, test_keygen_unwritable_dir);
    tcase_add_test(tc, test_load_secret_refusals);
    tcase_add_test(tc, test_unreadable_secret);
    tcase_add_test(tc, test_allow_list_from_dir);
    tcase_add_test(tc, test_allow_reload);
    tcase_add_test(tc, test_allow_list_modes);
    tcase_add_test(tc, test_endpoint_is_local);
    tcase_add_test(tc, test_socket_options_refused);
    suite_add_tcase(s, tc);
    TCase *big = tcase_create("limit");
    tcase_set_timeout(big, 100);
    tcase_add_test(big, test_allow_list_limit);
    suite_add_tcase(s, big);
    TCase *net = tcase_create("sockets");
    tcase_set_timeout(net, 60);
    tcase_add_test(net, test_zap_rfc27);
    tcase_add_test(net, test_curve_ipc);
    tcase_add_test(net, test_curve_tcp);
    suite_add_tcase(s, net);
    return s;
}
