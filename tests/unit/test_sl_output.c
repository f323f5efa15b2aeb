/* sl_output (issue #12, item 5): devices and FIFOs are written in place and
 * never replaced; regular files are replaced atomically through a random
 * temporary in their folder, which a link planted at a guessable name
 * cannot redirect; an abort leaves the old file and no temporary; errors
 * name the call and the path. Each case works in its own folder. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sl_alloc.h"
#include "sl_output.h"
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
    static char slots[8][1024];
    static int next;
    char *p = slots[next++ % 8];
    snprintf(p, 1024, "%s/%s", dir, name);
    return p;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* The file's contents as a string ("<absent>" when it cannot be read). */
static const char *get(const char *path)
{
    static char buf[4][4096];
    static int next;
    char *b = buf[next++ % 4];
    size_t n = 0;
    uint8_t *d = sl_test_read(path, &n);
    if (d == NULL)
        return "<absent>";
    snprintf(b, sizeof buf[0], "%.*s", (int)n, (const char *)d);
    free(d);
    return b;
}

/* The names in dir, sorted, joined by spaces. */
static const char *listing(const char *dir)
{
    static char out[4096];
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    ck_assert_int_ge(n, 0);
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i]->d_name, ".") != 0 && strcmp(names[i]->d_name, "..") != 0) {
            if (out[0] != '\0')
                strcat(out, " ");
            strcat(out, names[i]->d_name);
        }
        free(names[i]);
    }
    free(names);
    return out;
}

static void write_text(struct sl_output *o, const char *text)
{
    ck_assert_int_ge(fputs(text, sl_output_stream(o)), 0);
}

START_TEST(test_dev_null_stays_a_device)
{
    struct sl_output *o = NULL;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_output_open(&o, "/dev/null", 0, &err), 0);
    ck_assert_int_eq(sl_output_is_direct(o), 1);
    ck_assert_str_eq(sl_output_write_path(o), "/dev/null");
    write_text(o, "weights\n");
    ck_assert_int_eq(sl_output_commit(o, &err), 0);
    struct stat st;
    ck_assert_int_eq(stat("/dev/null", &st), 0);
    ck_assert_msg(S_ISCHR(st.st_mode), "/dev/null is no longer a character device");
    /* an abort of a device write removes nothing */
    ck_assert_int_eq(sl_output_open(&o, "/dev/null", 0, &err), 0);
    write_text(o, "partial");
    sl_output_abort(o);
    ck_assert_int_eq(stat("/dev/null", &st), 0);
    ck_assert(S_ISCHR(st.st_mode));
}
END_TEST

/* A character device node of our own (root only: mknod), and a link to
 * /dev/null: both stay what they are. */
START_TEST(test_device_node_and_link_to_device)
{
    const char *d = case_dir("dev");
    char *node = join(d, "null"), *link = join(d, "out");
    struct sl_output *o = NULL;
    struct sl_error err = {0};
    struct stat st;
    if (mknod(node, S_IFCHR | 0666, makedev(1, 3)) == 0) {
        ck_assert_int_eq(sl_output_open(&o, node, 0, &err), 0);
        write_text(o, "x");
        ck_assert_int_eq(sl_output_commit(o, &err), 0);
        ck_assert_int_eq(lstat(node, &st), 0);
        ck_assert_msg(S_ISCHR(st.st_mode), "the device node was replaced");
    }
    ck_assert_int_eq(symlink("/dev/null", link), 0);
    ck_assert_int_eq(sl_output_open(&o, link, 0, &err), 0);
    ck_assert_int_eq(sl_output_is_direct(o), 1);
    write_text(o, "through the link");
    ck_assert_int_eq(sl_output_commit(o, &err), 0);
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert_msg(S_ISLNK(st.st_mode), "the link to /dev/null was replaced by a regular file");
    ck_assert_int_eq(stat(link, &st), 0);
    ck_assert(S_ISCHR(st.st_mode));
}
END_TEST

/* A FIFO with a reader: the bytes go through it, the FIFO stays. */
START_TEST(test_fifo_with_reader)
{
    const char *d = case_dir("fifo");
    char *fifo = join(d, "pipe");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        alarm(20);
        int fd = open(fifo, O_RDONLY);
        char buf[256];
        size_t n = 0;
        ssize_t r;
        while (fd >= 0 && n < sizeof buf && (r = read(fd, buf + n, sizeof buf - n)) > 0)
            n += (size_t)r;
        _exit(n == 12 && memcmp(buf, "through FIFO", 12) == 0 ? 0 : 1);
    }
    struct sl_output *o = NULL;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_output_open(&o, fifo, 0, &err), 0);
    ck_assert_int_eq(sl_output_is_direct(o), 1);
    write_text(o, "through FIFO");
    ck_assert_int_eq(sl_output_commit(o, &err), 0);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the reader did not get the bytes");
    struct stat st;
    ck_assert_int_eq(lstat(fifo, &st), 0);
    ck_assert_msg(S_ISFIFO(st.st_mode), "the FIFO was replaced");
    ck_assert_str_eq(listing(d), "pipe");
}
END_TEST

/* Links planted at the names a predictable writer would use (PATH.tmp,
 * .NAME.tmp, PATH.tmp.<pid>) are neither followed nor removed. */
START_TEST(test_planted_tmp_links_not_followed)
{
    const char *d = case_dir("planted");
    char victim[1024], out[1024], t1[1100], t2[1024], t3[1100];
    snprintf(victim, sizeof victim, "%s", join(d, "victim"));
    snprintf(out, sizeof out, "%s", join(d, "weights.npy"));
    snprintf(t1, sizeof t1, "%s.tmp", out);
    snprintf(t2, sizeof t2, "%s", join(d, ".weights.npy.tmp"));
    snprintf(t3, sizeof t3, "%s.tmp.%ld", out, (long)getpid());
    put(victim, "precious");
    ck_assert_int_eq(symlink(victim, t1), 0);
    ck_assert_int_eq(symlink(victim, t2), 0);
    ck_assert_int_eq(symlink(victim, t3), 0);
    struct sl_output *o = NULL;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_output_open(&o, out, 0, &err), 0);
    ck_assert_int_eq(sl_output_is_direct(o), 0);
    ck_assert_str_ne(sl_output_write_path(o), t1);
    ck_assert_str_ne(sl_output_write_path(o), t2);
    ck_assert_str_ne(sl_output_write_path(o), t3);
    write_text(o, "new weights");
    ck_assert_int_eq(sl_output_commit(o, &err), 0);
    ck_assert_str_eq(get(victim), "precious");
    ck_assert_str_eq(get(out), "new weights");
    struct stat st;
    ck_assert_int_eq(lstat(t1, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(lstat(t2, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(lstat(t3, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
}
END_TEST

/* The old contents stay until commit; the mode is kept; nothing else is
 * left in the folder. */
START_TEST(test_regular_file_replaced_atomically)
{
    const char *d = case_dir("regular");
    char *out = join(d, "metrics.jsonl");
    put(out, "old contents\n");
    ck_assert_int_eq(chmod(out, 0640), 0);
    struct sl_output *o = NULL;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_output_open(&o, out, SL_OUTPUT_FSYNC, &err), 0);
    ck_assert_str_eq(sl_output_path(o), out);
    ck_assert_int_eq(sl_output_is_direct(o), 0);
    /* the temporary is a hidden name in the same folder */
    const char *tmp = sl_output_write_path(o);
    ck_assert_int_eq(strncmp(tmp, d, strlen(d)), 0);
    ck_assert_int_eq(tmp[strlen(d)], '/');
    ck_assert_int_eq(tmp[strlen(d) + 1], '.');
    write_text(o, "new contents\n");
    ck_assert_int_eq(fflush(sl_output_stream(o)), 0);
    ck_assert_str_eq(get(out), "old contents\n");
    ck_assert_int_eq(sl_output_finish(o, &err), 0);
    ck_assert_ptr_null(sl_output_stream(o));
    ck_assert_str_eq(get(out), "old contents\n");
    ck_assert_int_eq(sl_output_commit(o, &err), 0);
    ck_assert_str_eq(get(out), "new contents\n");
    struct stat st;
    ck_assert_int_eq(stat(out, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0640);
    ck_assert_str_eq(listing(d), "metrics.jsonl");
    /* a new file: created */
    char *fresh = join(d, "fresh");
    ck_assert_int_eq(sl_output_open(&o, fresh, 0, &err), 0);
    write_text(o, "a");
    ck_assert_int_eq(sl_output_commit(o, &err), 0);
    ck_assert_str_eq(get(fresh), "a");
    ck_assert_str_eq(listing(d), "fresh metrics.jsonl");
}
END_TEST

START_TEST(test_abort_keeps_old_file)
{
    const char *d = case_dir("abort");
    char *out = join(d, "trace.jsonl"), *fresh = join(d, "never");
    put(out, "old\n");
    struct sl_output *o = NULL;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_output_open(&o, out, 0, &err), 0);
    write_text(o, "half a line");
    ck_assert_int_eq(fflush(sl_output_stream(o)), 0);
    sl_output_abort(o);
    ck_assert_str_eq(get(out), "old\n");
    ck_assert_str_eq(listing(d), "trace.jsonl");
    /* after finish, too; and an absent target stays absent */
    ck_assert_int_eq(sl_output_open(&o, fresh, 0, &err), 0);
    write_text(o, "x");
    ck_assert_int_eq(sl_output_finish(o, &err), 0);
    sl_output_abort(o);
    ck_assert_str_eq(listing(d), "trace.jsonl");
    sl_output_abort(NULL);
}
END_TEST

/* A link to a regular file is replaced, its target left alone; a dangling
 * link is replaced, nothing created where it pointed. */
START_TEST(test_symlink_final_component_replaced)
{
    const char *d = case_dir("links");
    char *target = join(d, "target"), *link = join(d, "link"), *dangling = join(d, "dangling"),
         *nowhere = join(d, "nowhere");
    put(target, "target's own");
    ck_assert_int_eq(symlink(target, link), 0);
    ck_assert_int_eq(symlink(nowhere, dangling), 0);
    struct sl_output *o = NULL;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_output_open(&o, link, 0, &err), 0);
    write_text(o, "new");
    ck_assert_int_eq(sl_output_commit(o, &err), 0);
    ck_assert_str_eq(get(target), "target's own");
    ck_assert_str_eq(get(link), "new");
    struct stat st;
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    ck_assert_int_eq(sl_output_open(&o, dangling, 0, &err), 0);
    write_text(o, "d");
    ck_assert_int_eq(sl_output_commit(o, &err), 0);
    ck_assert_int_eq(lstat(nowhere, &st), -1);
    ck_assert_str_eq(get(dangling), "d");
}
END_TEST

/* Regular files behind /proc's descriptor links (what the shell's ">"
 * opened) are appended to in place: nothing is created in /dev or /proc. */
START_TEST(test_proc_fd_links_written_in_place)
{
    const char *d = case_dir("procfd");
    char *file = join(d, "redirected");
    put(file, "before\n");
    int fd = open(file, O_WRONLY | O_APPEND);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_ge(dup2(fd, 1), 0);
    const char *paths[] = {"/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"};
    for (size_t i = 0; i < 3; i++) {
        struct sl_output *o = NULL;
        struct sl_error err = {0};
        ck_assert_msg(sl_output_open(&o, paths[i], 0, &err) == 0, "%s: %s", paths[i], err.msg);
        ck_assert_int_eq(sl_output_is_direct(o), 1);
        write_text(o, paths[i]);
        write_text(o, "\n");
        ck_assert_int_eq(sl_output_commit(o, &err), 0);
    }
    struct stat st;
    ck_assert_int_eq(lstat("/dev/stdout", &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_str_eq(get(file), "before\n/dev/stdout\n/dev/fd/1\n/proc/self/fd/1\n");
}
END_TEST

/* SL_OUTPUT_STREAM: the file grows in place (readable while written); a
 * link at the target is replaced, never written through; abort removes
 * the file; devices stay devices. */
START_TEST(test_stream_in_place)
{
    const char *d = case_dir("stream");
    char *out = join(d, "trace.jsonl"), *victim = join(d, "victim"), *link = join(d, "link");
    put(out, "old run\n");
    struct sl_output *o = NULL;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_output_open(&o, out, SL_OUTPUT_STREAM, &err), 0);
    ck_assert_str_eq(sl_output_write_path(o), out);
    ck_assert_int_eq(sl_output_is_direct(o), 0);
    ck_assert_str_eq(get(out), "");
    write_text(o, "line 1\n");
    ck_assert_int_eq(fflush(sl_output_stream(o)), 0);
    ck_assert_str_eq(get(out), "line 1\n");
    write_text(o, "summary\n");
    ck_assert_int_eq(sl_output_commit(o, &err), 0);
    ck_assert_str_eq(get(out), "line 1\nsummary\n");
    ck_assert_str_eq(listing(d), "trace.jsonl");
    /* a link in the way is replaced */
    put(victim, "precious");
    ck_assert_int_eq(symlink(victim, link), 0);
    ck_assert_int_eq(sl_output_open(&o, link, SL_OUTPUT_STREAM, &err), 0);
    write_text(o, "log");
    ck_assert_int_eq(sl_output_commit(o, &err), 0);
    ck_assert_str_eq(get(victim), "precious");
    ck_assert_str_eq(get(link), "log");
    struct stat st;
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    /* abort removes what was written */
    ck_assert_int_eq(sl_output_open(&o, out, SL_OUTPUT_STREAM, &err), 0);
    write_text(o, "partial");
    sl_output_abort(o);
    ck_assert_str_eq(listing(d), "link victim");
    /* /dev/null */
    ck_assert_int_eq(sl_output_open(&o, "/dev/null", SL_OUTPUT_STREAM, &err), 0);
    ck_assert_int_eq(sl_output_is_direct(o), 1);
    write_text(o, "x");
    sl_output_abort(o);
    ck_assert_int_eq(stat("/dev/null", &st), 0);
    ck_assert(S_ISCHR(st.st_mode));
}
END_TEST

START_TEST(test_errors_name_the_path)
{
    const char *d = case_dir("errors");
    struct sl_output *o = (struct sl_output *)1;
    struct sl_error err = {0};
    char want[2048];
    /* empty path */
    ck_assert_int_eq(sl_output_open(&o, "", 0, &err), SL_EINVAL);
    ck_assert_ptr_null(o);
    ck_assert_str_eq(err.msg, "empty output path");
    /* absent folder */
    char *absent = join(d, "no-such-dir/out.npy");
    ck_assert_int_eq(sl_output_open(&o, absent, 0, &err), SL_EIO);
    ck_assert_ptr_null(o);
    snprintf(want, sizeof want, "open(%s): No such file or directory", absent);
    ck_assert_str_eq(err.msg, want);
    /* a directory */
    ck_assert_int_eq(sl_output_open(&o, d, 0, &err), SL_EIO);
    snprintf(want, sizeof want, "open(%s): Is a directory", d);
    ck_assert_str_eq(err.msg, want);
    /* a write error surfaces at commit, naming the path */
    ck_assert_int_eq(sl_output_open(&o, "/dev/full", 0, &err), 0);
    write_text(o, "x");
    ck_assert_int_eq(sl_output_commit(o, &err), SL_EIO);
    ck_assert_str_eq(err.msg, "write(/dev/full): No space left on device");
    /* out of memory, at each allocation */
    for (long n = 1; n <= 2; n++) {
        sl_alloc_fail_after(n);
        int rc = sl_output_open(&o, join(d, "nomem"), 0, &err);
        sl_alloc_fail_reset();
        ck_assert_int_eq(rc, SL_ENOMEM);
        ck_assert_ptr_null(o);
    }
    ck_assert_str_eq(listing(d), "");
}
END_TEST

/* An unwritable folder: as root, drop to nobody first (this process only). */
START_TEST(test_unwritable_dir)
{
    const char *d = case_dir("readonly");
    ck_assert_int_eq(chmod(sl_test_dir(), 0711), 0);
    ck_assert_int_eq(chmod(d, 0555), 0);
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
        return; /* cannot drop privileges: nothing to test */
    char *out = join(d, "weights.npy");
    struct sl_output *o = NULL;
    struct sl_error err = {0};
    ck_assert_int_eq(sl_output_open(&o, out, 0, &err), SL_EIO);
    ck_assert_ptr_null(o);
    char want[2048];
    snprintf(want, sizeof want, "open(%s): Permission denied", out);
    ck_assert_str_eq(err.msg, want);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_output");
    TCase *tc = tcase_create("output");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_dev_null_stays_a_device);
    tcase_add_test(tc, test_device_node_and_link_to_device);
    tcase_add_test(tc, test_fifo_with_reader);
    tcase_add_test(tc, test_planted_tmp_links_not_followed);
    tcase_add_test(tc, test_regular_file_replaced_atomically);
    tcase_add_test(tc, test_abort_keeps_old_file);
    tcase_add_test(tc, test_symlink_final_component_replaced);
    tcase_add_test(tc, test_proc_fd_links_written_in_place);
    tcase_add_test(tc, test_stream_in_place);
    tcase_add_test(tc, test_errors_name_the_path);
    tcase_add_test(tc, test_unwritable_dir);
    suite_add_tcase(s, tc);
    return s;
}
