/* bench_util: what every sluice-bench subcommand needs: medians, option
 * values checked with a message naming the option, where the sibling
 * binaries are, and loopback endpoints.
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

int bench_parse_int(const char *cmd, const char *opt, const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (s == NULL || *s == '\0' || *end != '\0' || errno != 0 || v < min || v > max) {
        fprintf(stderr, "sluice-bench %s: %s: expected an integer in [%ld, %ld], got '%s'\n", cmd, opt, min, max,
                s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

int bench_parse_double(const char *cmd, const char *opt, const char *s, double min, double max, double *out)
{
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (s == NULL || *s == '\0' || *end != '\0' || errno != 0 || !(v >= min && v <= max)) {
        fprintf(stderr, "sluice-bench %s: %s: expected a number in [%g, %g], got '%s'\n", cmd, opt, min, max,
                s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

int bench_parse_int_list(const char *cmd, const char *opt, const char *s, long min, long max_v, int *out, int max,
                         int *n)
{
    *n = 0;
    const char *p = s;
    while (p != NULL && *p != '\0') {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[32];
        long v;
        if (len >= sizeof item || *n == max) {
            fprintf(stderr, "sluice-bench %s: %s: expected at most %d comma-separated integers, got '%s'\n", cmd, opt,
                    max, s);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        if (bench_parse_int(cmd, opt, item, min, max_v, &v) != 0)
            return -1;
        out[(*n)++] = (int)v;
        p = comma ? comma + 1 : NULL;
    }
    if (*n == 0) {
        fprintf(stderr, "sluice-bench %s: %s: expected a comma-separated list of integers, got '%s'\n", cmd, opt,
                s ? s : "");
        return -1;
    }
    return 0;
}

int bench_parse_transport(const char *cmd, const char *s, const char **out)
{
    if (s != NULL && (strcmp(s, "ipc") == 0 || strcmp(s, "tcp") == 0)) {
        *out = s;
        return 0;
    }
    fprintf(stderr, "sluice-bench %s: --transport: expected ipc or tcp, got '%s'\n", cmd, s ? s : "");
    return -1;
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

int bench_parse_opts(const char *cmd, const char *usage, int argc, char **argv, const struct bench_opt *opts,
                     size_t nopts)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 1;
        }
        const struct bench_opt *o = NULL;
        for (size_t k = 0; k < nopts && o == NULL; k++)
            if (strcmp(a, opts[k].name) == 0)
                o = &opts[k];
        if (o == NULL)
            return bench_usage_error(cmd, "unknown option '%s'", a);
        if (o->kind == BENCH_OPT_FLAG) {
            *o->flag = 1;
            continue;
        }
        if (v == NULL)
            return bench_usage_error(cmd, "%s needs a value", a);
        if (o->kind == BENCH_OPT_STRING) {
            if (*v == '\0')
                return bench_usage_error(cmd, "%s needs a value", a);
            *o->str = v;
            i++;
            continue;
        }
        int rc = o->kind == BENCH_OPT_INT ? bench_parse_int(cmd, a, v, o->min, o->max, o->num)
                 : o->kind == BENCH_OPT_LIST
                     ? bench_parse_int_list(cmd, a, v, o->min, o->max, o->list, o->cap, o->count)
                     : bench_parse_transport(cmd, v, o->str);
        if (rc != 0)
            return 2;
        i++;
    }
    return 0;
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
