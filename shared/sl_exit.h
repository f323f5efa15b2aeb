/* sl_exit: the exit statuses every sluice program uses, and the table that
 * each one's --help ends with (and so its man page, which help2man makes
 * from --help). docs/exit-codes.md holds the same table with examples;
 * tests/cli/test_exit_codes.sh checks every program's --help carries it.
 *
 * The rule: 1 when the world is not as the command expects (an input
 * missing, unreadable or damaged, a peer lost, a write failed), 2 when what
 * was typed or configured is wrong (an option, a value, the content of a
 * job, key or cluster file). A signal that cuts a run short gives 128 + its
 * number, except for sluice-feeder, a server whose stop is its normal end.
 */
#ifndef SL_EXIT_H
#define SL_EXIT_H

#define SL_EXIT_OK 0
#define SL_EXIT_DATA 1  /* runtime or data error */
#define SL_EXIT_USAGE 2 /* usage or configuration error */
#define SL_EXIT_IDLE 3  /* sluice-feeder --idle-exit */

#define SL_EXIT_STATUS_HELP                                                       \
    "Exit status:\n"                                                              \
    "  0    success\n"                                                            \
    "  1    runtime or data error: a file missing or unreadable (data, job,\n"    \
    "       keys), data or a checkpoint damaged, a glob matching no file, a\n"    \
    "       peer lost, a write or a measured run that failed\n"                   \
    "  2    usage error: an unknown option, a bad value, options in conflict,\n"  \
    "       a job, key or cluster file whose content or mode is refused\n"        \
    "  3    sluice-feeder only: stopped by --idle-exit\n"                         \
    "  130  SIGINT stopped the run before its end (143: SIGTERM; 128 + the\n"     \
    "       signal); sluice-feeder, a server whose stop is its end, exits 0\n"    \
    "The same table holds for sluice-feeder, sluice-trainer, sluice-record and\n" \
    "sluice-bench (docs/exit-codes.md).\n"

#endif
