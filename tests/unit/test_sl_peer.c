/* sl_peer: the uid at the other end of real unix and TCP connections,
 * ours and (as root) another user's; refusals for what has no local peer. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_peer.h"
#include "sl_test.h"

/* A listening TCP socket on addr (AF_INET or AF_INET6 loopback), port
 * chosen by the kernel; -1 when the family is unavailable. */
static int listen_on(int family, struct sockaddr_storage *addr, socklen_t *len)
{
    int s = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    memset(addr, 0, sizeof *addr);
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)addr;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        *len = sizeof *a;
    } else {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)addr;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        *len = sizeof *a;
    }
    if (bind(s, (struct sockaddr *)addr, *len) != 0 || listen(s, 4) != 0 ||
        getsockname(s, (struct sockaddr *)addr, len) != 0) {
        close(s);
        return -1;
    }
    return s;
}

static void tcp_case(int family)
{
    struct sockaddr_storage addr;
    socklen_t len;
    int l = listen_on(family, &addr, &len);
    if (l < 0)
        return; /* no IPv6 here: nothing to check */
    int c = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(c, 0);
    ck_assert_int_eq(connect(c, (struct sockaddr *)&addr, len), 0);
    int a = accept(l, NULL, NULL);
    ck_assert_int_ge(a, 0);
    struct sl_error err = {0};
    uid_t uid = (uid_t)-1;
    ck_assert_msg(sl_peer_uid(a, &uid, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(uid, getuid());
    uid = (uid_t)-1;
    ck_assert_msg(sl_peer_uid(c, &uid, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(uid, getuid());
    close(c);
    close(a);
    close(l);
}

START_TEST(test_tcp_loopback_is_ours)
{
    tcp_case(AF_INET);
    tcp_case(AF_INET6);
}
END_TEST

START_TEST(test_unix_is_ours)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct sl_error err = {0};
    uid_t uid = (uid_t)-1;
    ck_assert_int_eq(sl_peer_uid(sv[0], &uid, &err), 0);
    ck_assert_uint_eq(uid, getuid());
    close(sv[0]);
    close(sv[1]);
}
END_TEST

/* As root: a child that became another user (nobody, 65534) connects over
 * TCP; the accepted socket shows its uid, not ours. */
START_TEST(test_another_user)
{
    if (geteuid() != 0)
        return;
    struct sockaddr_storage addr;
    socklen_t len;
    int l = listen_on(AF_INET, &addr, &len);
    ck_assert_int_ge(l, 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(2);
        int c = socket(AF_INET, SOCK_STREAM, 0);
        if (c < 0 || connect(c, (struct sockaddr *)&addr, len) != 0)
            _exit(3);
        char b;
        if (read(c, &b, 1) < 0) /* until the parent has looked */
            _exit(4);
        _exit(0);
    }
    int a = accept(l, NULL, NULL);
    ck_assert_int_ge(a, 0);
    struct sl_error err = {0};
    uid_t uid = 0;
    ck_assert_msg(sl_peer_uid(a, &uid, &err) == 0, "%s", err.msg);
    ck_assert_uint_eq(uid, 65534);
    ck_assert_int_eq(write(a, "x", 1), 1);
    int st = 0;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(a);
    close(l);
}
END_TEST

START_TEST(test_no_local_peer)
{
    struct sl_error err = {0};
    uid_t uid;
    /* not a socket, an unconnected one, a UDP one */
    int fd = dup(0);
    ck_assert_int_eq(sl_peer_uid(fd, &uid, &err), SL_EINVAL);
    ck_assert(strstr(err.msg, "getpeername") != NULL);
    close(fd);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(sl_peer_uid(s, &uid, &err), SL_EINVAL);
    close(s);
    ck_assert_int_eq(sl_peer_uid(-1, &uid, &err), SL_EINVAL);
}
END_TEST

/* sl_bind_private: an ipc socket file 0600 (whatever the umask), or the
 * group's 0660; an unknown group and a bad endpoint refused naming them;
 * the process's umask as it was. */
START_TEST(test_bind_private)
{
    void *ctx = zmq_ctx_new();
    struct sl_error err = {0};
    mode_t before = umask(0);
    umask(before);
    char ep[512];
    struct stat st;
    /* a permissive umask does not leak into the socket file */
    umask(0);
    void *a = zmq_socket(ctx, ZMQ_ROUTER);
    snprintf(ep, sizeof ep, "ipc://%s", sl_test_path("a.sock"));
    ck_assert_msg(sl_bind_private(a, ep, NULL, &err) == 0, "%s", err.msg);
    ck_assert_int_eq(stat(sl_test_path("a.sock"), &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0600);
    ck_assert_uint_eq(umask(before), 0); /* restored to what it was (0 here) */
    struct group *g = getgrnam("nogroup");
    if (g != NULL && geteuid() == 0) {
        void *b = zmq_socket(ctx, ZMQ_ROUTER);
        snprintf(ep, sizeof ep, "ipc://%s", sl_test_path("b.sock"));
        ck_assert_msg(sl_bind_private(b, ep, "nogroup", &err) == 0, "%s", err.msg);
        ck_assert_int_eq(stat(sl_test_path("b.sock"), &st), 0);
        ck_assert_uint_eq(st.st_mode & 07777, 0660);
        ck_assert_uint_eq(st.st_gid, g->gr_gid);
        zmq_close(b);
    }
    void *c = zmq_socket(ctx, ZMQ_ROUTER);
    snprintf(ep, sizeof ep, "ipc://%s", sl_test_path("c.sock"));
    ck_assert_int_eq(sl_bind_private(c, ep, "no-such-group-here", &err), SL_EINVAL);
    ck_assert(strstr(err.msg, "no group 'no-such-group-here'") != NULL);
    ck_assert_int_eq(sl_bind_private(c, "ipc:///no/such/dir/x.sock", NULL, &err), SL_EIO);
    ck_assert(strstr(err.msg, "bind(ipc:///no/such/dir/x.sock)") != NULL);
    /* tcp: bound as given */
    ck_assert_msg(sl_bind_private(c, "tcp://127.0.0.1:*", NULL, &err) == 0, "%s", err.msg);
    zmq_close(a);
    zmq_close(c);
    zmq_ctx_term(ctx);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("sl_peer");
    TCase *tc = tcase_create("peer");
    tcase_add_test(tc, test_tcp_loopback_is_ours);
    tcase_add_test(tc, test_unix_is_ours);
    tcase_add_test(tc, test_another_user);
    tcase_add_test(tc, test_no_local_peer);
    tcase_add_test(tc, test_bind_private);
    suite_add_tcase(s, tc);
    return s;
}
