/* sluice-bench: the benchmark front end. Each subcommand measures a sluice
 * path against a baseline doing the least possible work on the same data in
 * the same run, and reports the ratio (machines are shared and noisy, so
 * absolute figures alone mean little).
 *
 *   sluice-bench formats   record formats
 *   sluice-bench feed      feeder -> trainer throughput and memory
 *   sluice-bench run       the whole input pipeline on a user's job
 *   sluice-bench wire      the wire protocol against raw ZeroMQ
 *   sluice-bench allreduce the CPU ring all-reduce against raw ZeroMQ
 *   sluice-bench link      one end of a raw ZeroMQ transfer across hosts
 *   sluice-bench seek      the feeder's fast-forward to a resuming trainer's step
 *   sluice-bench images    the image map stage against decoding alone
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "sl_exit.h"
#include "sl_log.h"
#include "sl_opt.h"

static const char usage[] =
    "Usage: sluice-bench COMMAND [OPTIONS]\n"
    "\n"
    "Measure sluice's input paths against baselines on this machine.\n"
    "\n"
    "Commands:\n"
    "  run       a job's input pipeline end to end (feeders and trainers on loopback)\n"
    "            against read(), inflate, memcpy and raw ZeroMQ: throughput, stall,\n"
    "            feeder CPU per stage, memory; --json, --plot\n"
    "  formats   TFRecord scan + CRC vs read()+CRC32C; GZIP scan vs the fastest\n"
    "            inflate; tf.train.Example decode into batched columns\n"
    "  feed      feeder -> trainer throughput vs raw ZeroMQ PUSH/PULL of the same\n"
    "            message size, feeder memory vs its bound\n"
    "  wire      wire protocol encode/decode of headers + frames vs raw ZeroMQ\n"
    "  allreduce CPU ring all-reduce across P processes vs raw ZeroMQ\n"
    "  link      one end of a raw ZeroMQ transfer between two hosts (the baseline\n"
    "            of tools/bench_testbed.py)\n"
    "  seek      the plan's fast-forward to a resuming trainer's step, for 1x, 10x\n"
    "            and 100x the records, vs making the same pieces from the start\n"
    "\n"
    "Run 'sluice-bench COMMAND --help' (or 'sluice-bench help COMMAND') for the options of a command;\n"
    "'sluice-bench --version' for the version, commit, build type and optional parts.\n"
    "\n" SL_EXIT_STATUS_HELP;

/* The commands, in --help's order; each takes (argc, argv) from its own
 * name on. */
static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"run", bench_run_main},   {"formats", bench_formats_main},     {"feed", bench_feed_main},
    {"wire", bench_wire_main}, {"allreduce", bench_allreduce_main}, {"link", bench_link_main},
    {"seek", bench_seek_main}, {"images", bench_images_main},
};

int main(int argc, char **argv)
{
    sl_log_setup("sluice-bench", 2, SL_LOG_INFO);
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || (strcmp(cmd, "help") == 0 && argc < 3)) {
        fputs(usage, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        sl_opt_version("sluice-bench", stdout); /* version, commit, build type, optional parts */
        return 0;
    }
    /* "sluice-bench help CMD" is "sluice-bench CMD --help" */
    int help = strcmp(cmd, "help") == 0;
    if (help)
        cmd = argv[2];
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(cmd, commands[i].name) != 0)
            continue;
        if (help) {
            static char help_opt[] = "--help";
            char *args[] = {argv[2], help_opt, NULL};
            return commands[i].run(2, args);
        }
        return commands[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "sluice-bench: unknown command '%s'\n%s", cmd, usage);
    return 2;
}
