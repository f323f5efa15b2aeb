/* bench_proc: the processes a benchmark starts, and their end.
 *
 * Children go into one process group of their own (the first child's pid),
 * so a Ctrl-C on the terminal reaches sluice-bench only; sluice-bench then
 * ends the group itself, the same way it does when a child fails: SIGTERM
 * to every child (feeders and trainers stop cleanly on it), a grace period,
 * then SIGKILL to the whole group, which also catches anything a child
 * started, and every child reaped with wait4 so that its rusage (peak RSS,
 * CPU time) is known. bench_stop is the one global: a signal handler can
 * only set a flag.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "sl_clock.h"

volatile sig_atomic_t bench_stop;

static void on_signal(int sig)
{
    bench_stop = sig;
}

void bench_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void redirect(const char *path, int fd)
{
    if (path == NULL)
        return;
    int f = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f < 0 || dup2(f, fd) < 0)
        _exit(127);
}

int bench_spawn(struct bench_group *g, char *const argv[], const char *out_path, const char *err_path, const char *role,
                int index)
{
    if (g->n == BENCH_MAX_CHILDREN)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setpgid(0, g->pgid);
        /* sluice-bench's handlers are reset by exec; its SIGPIPE ignore is not */
        signal(SIGPIPE, SIG_DFL);
        redirect(out_path, STDOUT_FILENO);
        redirect(err_path, STDERR_FILENO);
        execv(argv[0], argv);
        fprintf(stderr, "sluice-bench: exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    /* both sides set the group, so it holds whichever runs first */
    setpgid(pid, g->pgid ? g->pgid : pid);
    if (g->pgid == 0)
        g->pgid = pid;
    struct bench_child *c = &g->c[g->n];
    memset(c, 0, sizeof *c);
    c->pid = pid;
    c->role = role;
    c->index = index;
    return g->n++;
}

int bench_group_poll(struct bench_group *g)
{
    int ended = 0;
    for (int i = 0; i < g->n; i++) {
        struct bench_child *c = &g->c[i];
        if (c->done)
            continue;
        pid_t got = wait4(c->pid, &c->status, WNOHANG, &c->ru);
        if (got == c->pid || (got < 0 && errno == ECHILD)) {
            c->done = 1;
            ended++;
        }
    }
    return ended;
}

static int running(const struct bench_group *g)
{
    int n = 0;
    for (int i = 0; i < g->n; i++)
        n += !g->c[i].done;
    return n;
}

int bench_group_wait(struct bench_group *g, double grace_s)
{
    double until = sl_clock_s() + grace_s;
    for (;;) {
        bench_group_poll(g);
        if (running(g) == 0)
            return 0;
        if (sl_clock_s() >= until)
            return -1;
        usleep(10000);
    }
}

void bench_group_end(struct bench_group *g, double grace_s)
{
    bench_group_poll(g);
    for (int i = 0; i < g->n; i++)
        if (!g->c[i].done)
            kill(g->c[i].pid, SIGTERM);
    if (bench_group_wait(g, grace_s) != 0 || g->pgid > 0) {
        /* the group too: a child's own children, or a child ignoring TERM */
        if (g->pgid > 0)
            kill(-g->pgid, SIGKILL);
        for (int i = 0; i < g->n; i++) {
            struct bench_child *c = &g->c[i];
            if (c->done)
                continue;
            kill(c->pid, SIGKILL);
            while (wait4(c->pid, &c->status, 0, &c->ru) < 0 && errno == EINTR)
                ;
            c->done = 1;
        }
    }
}

const char *bench_status_text(int status, char *buf, size_t n)
{
    if (WIFEXITED(status))
        snprintf(buf, n, "exited %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, n, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, n, "ended (status 0x%x)", (unsigned)status);
    return buf;
}

const char *bench_file_tail(const char *path, char *buf, size_t max)
{
    buf[0] = '\0';
    int fd = path ? open(path, O_RDONLY) : -1;
    if (fd < 0)
        return buf;
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from = end > (off_t)(max - 1) ? end - (off_t)(max - 1) : 0;
    ssize_t n = pread(fd, buf, max - 1, from);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    /* drop a trailing newline so callers can print it inside a message */
    size_t len = strlen(buf);
    while (len > 0 && buf[len - 1] == '\n')
        buf[--len] = '\0';
    return buf;
}
