/* bench.h: the subcommands of sluice-bench and what they share: statistics,
 * option parsing, endpoints, raw ZeroMQ and file baselines, and the
 * supervision of the processes a benchmark starts.
 *
 * Thread-safe: no; sluice-bench is one thread (children are processes).
 */
#ifndef BENCH_H
#define BENCH_H

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "sl_curve.h"
#include "sl_error.h"
#include "sl_opt.h"

int bench_formats_main(int argc, char **argv);
int bench_feed_main(int argc, char **argv);
int bench_run_main(int argc, char **argv);
int bench_wire_main(int argc, char **argv);
int bench_allreduce_main(int argc, char **argv);
int bench_link_main(int argc, char **argv);
int bench_seek_main(int argc, char **argv);
int bench_images_main(int argc, char **argv);

/* ---- statistics (bench_util.c) ---- */

/* Median of n values (sorts v in place). */
double bench_median(double *v, size_t n);

/* Median, smallest and largest of n values (v is sorted in place). */
struct bench_stat {
    double median, min, max;
};
struct bench_stat bench_stat_of(double *v, size_t n);

/* ---- options (bench_util.c) ----
 * Every subcommand's options are rows of an sl_opt table (shared/sl_opt.h)
 * over its own options struct, ending in BENCH_OPT_HELP_ROW: the same
 * --help layout, number checks and error texts in every subcommand. */
#define BENCH_OPT_HELP_ROW                                                     \
    {                                                                          \
        "help", 'h', SL_OPT_HELP, 0, 0, 0, NULL, NULL, "this help", NULL, NULL \
    }
/* --transport as a CHOICE row into an int field: bench_transport_names[i]. */
#define BENCH_TRANSPORTS "ipc|tcp"
extern const char *const bench_transport_names[2];
#define BENCH_OPT_TRANSPORT_ROW(type, field)                                                                         \
    {                                                                                                                \
        "transport", 0, SL_OPT_CHOICE, offsetof(type, field), 0, 0, "ipc", "T", "ipc or tcp", BENCH_TRANSPORTS, NULL \
    }
/* Parse argv[1..argc) (argv[0] the subcommand's name) with sl_opt into
 * opts: 0 parsed; 1 --help printed on stdout (exit 0); 2 a usage error,
 * said on stderr as "sluice-bench CMD: MSG" and a hint to use --help. */
int bench_opt_parse(const char *cmd, const struct sl_opt_cmd *c, int argc, char **argv, void *opts);
/* For an SL_OPT_FUNC row: s as a comma-separated list of 1 to cap integers
 * in [min, max] into out[0..*n); else SL_EINVAL with err naming the
 * option `opt` ("--feeders: not an integer: 'x'", sl_opt's words). out
 * and *n are left as they were on an error. */
int bench_opt_list(const char *opt, const char *s, uint64_t min, uint64_t max, int *out, int cap, int *n,
                   struct sl_error *err);

/* The sibling binaries of this sluice-bench: BUILD/feeder/sluice-feeder and
 * BUILD/trainer/sluice-trainer, written into the caller's buffers. */
void bench_find_bins(char *feeder, char *trainer, size_t n);

/* An endpoint for slot k on transport "ipc" (a socket file in dir) or
 * "tcp" (a loopback port free at the time of the call). bind and conn get
 * the address to bind and the one to connect to. 0, or -1 (no free port). */
int bench_endpoint(const char *transport, const char *dir, int k, char *bind, char *conn, size_t n);

/* "sluice-bench CMD: " + fmt (with one string argument) + a hint to use
 * --help, on stderr; returns 2, the usage exit status. */
int bench_usage_error(const char *cmd, const char *fmt, const char *arg);

/* A new private folder /tmp/sluice-bench-XXXXXX (or under $TMPDIR when
 * that is short) for sockets and logs, into dir; 0, or -1 said on stderr. */
int bench_tmpdir(const char *cmd, char *dir, size_t n);

/* Remove a folder and everything in it (best effort). */
void bench_rmtree(const char *dir);

/* ---- raw ZeroMQ (bench_zmq.c) ----
 * A sender process (forked) binds PUSH and calls send_fn `count` times;
 * this process connects PULL and calls recv_fn as often. The time runs
 * from the first message received to the last. Returns seconds for
 * count - 1 messages, or < 0 on failure. */
typedef int (*bench_send_fn)(void *sock, long i, void *arg);
typedef int (*bench_recv_fn)(void *sock, long i, void *arg);
double bench_zmq_pair(const char *transport, const char *dir, long count, bench_send_fn send, void *send_arg,
                      bench_recv_fn recv, void *recv_arg);
/* The same with CURVE when curve is not NULL: the sender's PUSH is a CURVE
 * server with curve->server's keys and a ZAP handler letting in the keys
 * of the folder curve->allow, as a feeder's ROUTER; the receiver's PULL a
 * client with curve->client's keys, as a trainer. The handshake is not
 * timed. */
struct bench_curve_pair;
double bench_zmq_pair_curve(const char *transport, const char *dir, long count, const struct bench_curve_pair *curve,
                            bench_send_fn send, void *send_arg, bench_recv_fn recv, void *recv_arg);
/* bench_zmq_pair_curve, also giving both ends' CPU seconds (the
 * sender's process and the receiver's, the calling process: keep its
 * other threads idle meanwhile) in *cpu_s when not NULL. */
double bench_zmq_pair_cpu(const char *transport, const char *dir, long count, const struct bench_curve_pair *curve,
                          bench_send_fn send, void *send_arg, bench_recv_fn recv, void *recv_arg, double *cpu_s);
/* The least ZeroMQ can do: `count` messages of `size` bytes, zero-copy
 * PUSH to PULL (with CURVE when curve is not NULL), sent in turn from 8 MiB
 * of distinct buffers written beforehand (as a feeder's window of pieces;
 * fewer when count is smaller). Bytes per second, or < 0. */
double bench_raw_zmq(const char *transport, const char *dir, size_t size, long count);
double bench_raw_zmq_curve(const char *transport, const char *dir, size_t size, long count,
                           const struct bench_curve_pair *curve);
/* The same, with both ends' CPU seconds in *cpu_s (bench_zmq_pair_cpu). */
double bench_raw_zmq_cpu(const char *transport, const char *dir, size_t size, long count,
                         const struct bench_curve_pair *curve, double *cpu_s);

/* ---- CURVE (bench_curve.c) ----
 * Keys for a run, in its scratch folder (see bench_curve.c for the
 * layout): feeder j's secret key is bench_curve_feeder_key(j); `dir` holds
 * every feeder-J.pub (a trainer's --curve-server-key); `allow` holds the
 * trainers' public key (a feeder's --curve-allow); `client_key` is the
 * trainers' secret key (--curve-key). */
struct bench_curve {
    char dir[PATH_MAX];
    char allow[PATH_MAX];
    char client_key[PATH_MAX];
    int nfeeders;
};
/* 1 when this libzmq has CURVE. */
int bench_curve_available(void);
/* Make the keys of nfeeders feeders and of the trainers under scratch
 * (which must exist; its "curve" folder must not). 0, or -1 said on
 * stderr as "sluice-bench CMD: --curve: ...". */
int bench_curve_setup(const char *cmd, const char *scratch, int nfeeders, struct bench_curve *c);
void bench_curve_feeder_key(const struct bench_curve *c, int j, char *buf, size_t n);
/* The raw baseline's keys: feeder 0's pair for the server, the trainers'
 * for the client, the feeders' allow-list folder. */
struct bench_curve_pair {
    struct sl_curve_keys server, client;
    char allow[PATH_MAX];
};
/* 0, or -1 said on stderr. */
int bench_curve_pair_load(const struct bench_curve *c, struct bench_curve_pair *p);
/* libsodium on one core: crypto_box_easy_afternm (open_box 0) or
 * crypto_box_open_easy_afternm (1) of `size`-byte messages for at least
 * min_time seconds: bytes per second, or < 0 when sluice-bench was built
 * without libsodium's header. */
double bench_rate_sodium(size_t size, int open_box, double min_time);

/* ---- least-work file and memory baselines (bench_limits.c) ----
 * A pass reads one file whole and sets *bytes to the bytes it produced. */
typedef int (*bench_pass_fn)(const char *path, uint64_t *bytes);
int bench_pass_read(const char *path, uint64_t *bytes);         /* read(2), 1 MiB at a time */
int bench_pass_zlib_inflate(const char *path, uint64_t *bytes); /* gzip or zlib stream, zlib */
#ifdef SLUICE_HAVE_ISAL
int bench_pass_isal_inflate(const char *path, uint64_t *bytes); /* gzip stream, ISA-L igzip */
#endif
/* The fastest inflate built in for files of this name ("isal" or "zlib"
 * in *name), or NULL for names that are not compressed (.gz, .zlib, .tgz). */
bench_pass_fn bench_inflate_for(const char *path, const char **name);
/* Passes over every path for at least min_time seconds: bytes per second
 * produced, or < 0 on an error. */
double bench_rate_files(bench_pass_fn fn, char *const *paths, size_t n, double min_time);
/* memcpy of `size`-byte blocks for at least min_time: bytes per second. */
double bench_rate_memcpy(size_t size, double min_time);

/* ---- process supervision (bench_proc.c) ----
 * Every child of a group is in one process group (its first child's pid),
 * apart from sluice-bench's, so a terminal's Ctrl-C reaches only
 * sluice-bench, which then ends the group: SIGTERM, a grace period, then
 * SIGKILL to the whole process group, and every child reaped. */
#define BENCH_MAX_CHILDREN 80

struct bench_child {
    pid_t pid;
    const char *role; /* borrowed: "feeder", "trainer", ... */
    int index;
    int done;   /* reaped */
    int status; /* wait status, valid when done */
    struct rusage ru;
};

struct bench_group {
    pid_t pgid; /* 0 until the first child */
    int n;
    struct bench_child c[BENCH_MAX_CHILDREN];
};

/* Set by SIGINT / SIGTERM once bench_signals_install has run. */
extern volatile sig_atomic_t bench_stop;
void bench_signals_install(void);

/* Start argv[0] with stdout and stderr to files (NULL: inherited). Returns
 * the child's slot, or -1 (fork failed, or the group is full). A child that
 * cannot exec exits 127. */
int bench_spawn(struct bench_group *g, char *const argv[], const char *out_path, const char *err_path, const char *role,
                int index);
/* Reap whichever children have ended, without waiting. Returns how many. */
int bench_group_poll(struct bench_group *g);
/* Wait up to grace_s for every child to end by itself; 0 if all did. */
int bench_group_wait(struct bench_group *g, double grace_s);
/* SIGTERM every child still running, wait up to grace_s, SIGKILL the
 * process group, and reap everything. Safe to call more than once. */
void bench_group_end(struct bench_group *g, double grace_s);
/* "exited 3", "killed by signal 9" into buf. */
const char *bench_status_text(int status, char *buf, size_t n);
/* The last `max` bytes of a log file into buf (for error messages). */
const char *bench_file_tail(const char *path, char *buf, size_t max);

#endif
