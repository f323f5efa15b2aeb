/* sl_zsock: see sl_zsock.h. */
#include "sl_zsock.h"

#include <errno.h>
#include <stddef.h>
#include <zmq.h>

#ifndef ZMQ_ZAP_ENFORCE_DOMAIN /* libzmq's draft API: the same number as sl_curve.c's */
#define ZMQ_ZAP_ENFORCE_DOMAIN 93
#endif

static const char *option_name(int option)
{
    switch (option) {
    case ZMQ_LINGER: return "ZMQ_LINGER";
    case ZMQ_MAXMSGSIZE: return "ZMQ_MAXMSGSIZE";
    case ZMQ_SNDHWM: return "ZMQ_SNDHWM";
    case ZMQ_RCVHWM: return "ZMQ_RCVHWM";
    case ZMQ_SNDTIMEO: return "ZMQ_SNDTIMEO";
    case ZMQ_HANDSHAKE_IVL: return "ZMQ_HANDSHAKE_IVL";
    case ZMQ_ROUTER_MANDATORY: return "ZMQ_ROUTER_MANDATORY";
    case ZMQ_IPV6: return "ZMQ_IPV6";
    case ZMQ_CURVE_SERVER: return "ZMQ_CURVE_SERVER";
    case ZMQ_CURVE_SECRETKEY: return "ZMQ_CURVE_SECRETKEY";
    case ZMQ_CURVE_PUBLICKEY: return "ZMQ_CURVE_PUBLICKEY";
    case ZMQ_CURVE_SERVERKEY: return "ZMQ_CURVE_SERVERKEY";
    case ZMQ_ZAP_DOMAIN: return "ZMQ_ZAP_DOMAIN";
    case ZMQ_ZAP_ENFORCE_DOMAIN: return "ZMQ_ZAP_ENFORCE_DOMAIN";
    default: return "an option";
    }
}

/* The one call of ZeroMQ's setsockopt in the tree (see sl_zsock.h). */
int sl_zsock_set_bytes(void *sock, int option, const void *v, size_t len, const char *what, struct sl_error *err)
{
    if (zmq_setsockopt(sock, option, v, len) == 0)
        return 0;
    int e = zmq_errno();
    sl_error_set(err, SL_EIO, "%s: zmq_setsockopt(%s): %s", what, option_name(option), zmq_strerror(e));
    errno = e; /* for a caller that tells refusals apart */
    return SL_EIO;
}

int sl_zsock_set_int(void *sock, int option, int value, const char *what, struct sl_error *err)
{
    return sl_zsock_set_bytes(sock, option, &value, sizeof value, what, err);
}

void *sl_zsock_open(void *ctx, int type, const struct sl_zsock_opts *o, const char *what, struct sl_error *err)
{
    static const struct sl_zsock_opts none;
    if (o == NULL)
        o = &none;
    void *sock = zmq_socket(ctx, type);
    if (sock == NULL) {
        sl_error_set(err, SL_EIO, "%s: zmq_socket: %s", what, zmq_strerror(zmq_errno()));
        return NULL;
    }
    int rc = sl_zsock_set_int(sock, ZMQ_LINGER, o->linger_ms, what, err);
    if (rc == 0 && o->max_msg > 0)
        rc = sl_zsock_set_bytes(sock, ZMQ_MAXMSGSIZE, &o->max_msg, sizeof o->max_msg, what, err);
    if (rc == 0 && o->unbounded_send)
        rc = sl_zsock_set_int(sock, ZMQ_SNDHWM, 0, what, err);
    if (rc == 0 && o->unbounded_recv)
        rc = sl_zsock_set_int(sock, ZMQ_RCVHWM, 0, what, err);
    if (rc == 0 && o->send_timeout_ms > 0)
        rc = sl_zsock_set_int(sock, ZMQ_SNDTIMEO, o->send_timeout_ms, what, err);
    if (rc == 0 && o->handshake_ms > 0)
        rc = sl_zsock_set_int(sock, ZMQ_HANDSHAKE_IVL, o->handshake_ms, what, err);
    if (rc == 0 && o->router_mandatory)
        rc = sl_zsock_set_int(sock, ZMQ_ROUTER_MANDATORY, 1, what, err);
    if (rc != 0) {
        zmq_close(sock);
        return NULL;
    }
    return sock;
}

void sl_zsock_linger(void *sock, int ms)
{
    if (sl_zsock_set_int(sock, ZMQ_LINGER, ms, "", NULL) != 0)
        return; /* the close waits as long as it would have */
}
