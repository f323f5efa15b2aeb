/* bench_util: what every sluice-bench subcommand needs: medians, the glue
 * between its sl_opt option table and its usage errors (and the lists of
 * integers sl_opt has no type for), where the sibling binaries are, and
 * loopback endpoints.
 *
 * A tcp endpoint is a port the kernel handed out to a socket bound to
 * 127.0.0.1:0 and closed again, the same trick the integration tests use;
 * another program could take it in between, which then shows as a bind
 * error in the child that needed it.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

double bench_median(double *v, size_t n)
{
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    if (n == 0)
        return 0;
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct bench_stat bench_stat_of(double *v, size_t n)
{
    struct bench_stat s = {0, 0, 0};
    if (n == 0)
        return s;
    s.median = bench_median(v, n); /* sorts */
    s.min = v[0];
    s.max = v[n - 1];
    return s;
}

const char *const bench_transport_names[2] = {"ipc", "tcp"};

int bench_opt_list(const char *opt, const char *s, uint64_t min, uint64_t max, int *out, int cap, int *n,
                   struct sl_error *err)
{
    int got[64], k = 0;
    for (const char *p = s;; p++) {
        size_t len = strcspn(p, ",");
        char item[32];
        uint64_t v;
        if (k == cap || k == (int)(sizeof got / sizeof got[0]))
            return sl_error_set(err, SL_EINVAL, "%s: at most %d comma-separated integers, got '%s'", opt, cap, s);
        snprintf(item, sizeof item, "%.*s", (int)(len < sizeof item ? len : sizeof item - 1), p);
        if (len >= sizeof item)
            return sl_error_set(err, SL_EINVAL, "%s: not an integer: '%.*s...'", opt, (int)sizeof item - 1, p);
        if (sl_opt_parse_u64(item, min, max, &v, err) != 0)
            return sl_error_prefix(err, "%s: ", opt);
        got[k++] = (int)v; /* max is an int's */
        p += len;
        if (*p == '\0')
            break;
    }
    memcpy(out, got, (size_t)k * sizeof *out);
    *n = k;
    return 0;
}

int bench_opt_parse(const char *cmd, const struct sl_opt_cmd *c, int argc, char **argv, void *opts)
{
    struct sl_error err = {0};
    int rc = sl_opt_parse(c, argc, argv, opts, NULL, &err);
    if (rc == 0 || rc == 1)
        return rc;
    return bench_usage_error(cmd, "%s", err.msg);
}

void bench_find_bins(char *feeder, char *trainer, size_t n)
{
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    self[len > 0 ? len : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    snprintf(feeder, n, "%.3000s/../feeder/sluice-feeder", self);
    snprintf(trainer, n, "%.3000s/../trainer/sluice-trainer", self);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &alen) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

int bench_endpoint(const char *transport, const char *dir, int k, char *bind_ep, char *conn, size_t n)
{
    if (strcmp(transport, "tcp") == 0) {
        int port = free_port();
        if (port < 0)
            return -1;
        snprintf(bind_ep, n, "tcp://127.0.0.1:%d", port);
        snprintf(conn, n, "tcp://127.0.0.1:%d", port);
    } else {
        static unsigned serial; /* endpoints are never reused within a process */
        snprintf(bind_ep, n, "ipc://%s/ep-%d-%u.sock", dir, k, serial++);
        snprintf(conn, n, "%s", bind_ep);
    }
    return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void bench_rmtree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int bench_usage_error(const char *cmd, const char *fmt, const char *arg)
{
    fprintf(stderr, "sluice-bench %s: ", cmd);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'sluice-bench %s --help'\n", cmd);
    return 2;
}

int bench_tmpdir(const char *cmd, char *dir, size_t n)
{
    /* ipc:// paths must stay short (108 bytes for a socket address) */
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, n, "%s/sluice-bench-XXXXXX", tmp && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "sluice-bench %s: mkdtemp(%s): %s\n", cmd, dir, strerror(errno));
        return -1;
    }
    return 0;
}
