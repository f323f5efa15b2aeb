/* sl_thread: start a thread that never runs the process's signal handlers.
 *
 * SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGUSR1 are handled by main (a stop
 * flag, a counters dump); a process-directed signal goes to any thread that
 * does not block it. Delivered to a worker, the handler's write raced with
 * main's reads of the flag (ThreadSanitizer saw it, a feeder's executor
 * taking SIGTERM), so every thread sluice starts blocks them, and they
 * reach the main thread. ZeroMQ's own threads block every signal already.
 */
#ifndef SL_THREAD_H
#define SL_THREAD_H

#include <pthread.h>
#include <signal.h>

/* pthread_create(t, NULL, fn, arg) with those signals blocked in the new
 * thread; the caller's mask is as it was. 0 or pthread_create's error. */
static inline int sl_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGQUIT);
    sigaddset(&block, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

#endif
