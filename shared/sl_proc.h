/* sl_proc: figures about this process read from /proc (Linux).
 * Thread-safe: yes (nothing shared). */
#ifndef SL_PROC_H
#define SL_PROC_H

/* CPU seconds used so far by this process's threads whose name (comm)
 * starts with `prefix` (e.g. "ZMQbg/IO/", ZeroMQ's I/O threads): from
 * schedstat's nanoseconds where the kernel has them, else stat's clock
 * ticks. 0 where /proc is not there. */
double sl_proc_threads_cpu_s(const char *prefix);

#endif
