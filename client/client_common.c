/* client_common.c: what every part of the client uses to speak of
 * and to a feeder: an error naming it, a message sent to it, and the stop
 * flag's check.
 */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>
#include <zmq.h>

#include "client_int.h"

int client__feeder_error(struct client *c, int j, struct sl_error *err, int code, const char *fmt, ...)
{
    char what[SL_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return sl_error_set(err, code, "feeder %s: %s", c->f[j].addr, what);
}

int client__send_buf(void *sock, const struct sl_buf *b)
{
    return zmq_send(sock, b->data, b->len, ZMQ_DONTWAIT) < 0 ? -1 : 0;
}

int client__stopped(const struct client *c, const char *what, struct sl_error *err)
{
    if (c->o.stop == NULL || !*c->o.stop)
        return 0;
    return sl_error_set(err, SL_ECLOSED, "stopped by a signal while %s", what);
}

/* After fork() the child's copy shares the parent's sockets (without
 * ZeroMQ's threads) and its view of the feeders' shared memory: no call
 * may hand out data from it or send on it. getpid() is one system call. */
int client__forked(const struct client *c)
{
    return getpid() != c->pid;
}

int client__refuse_forked(const struct client *c, struct sl_error *err)
{
    return sl_error_set(err, SL_EINVAL,
                        "client used after fork(): create a new client in the child (this one belongs to process "
                        "%ld)",
                        (long)c->pid);
}
