/* sl_zsock_monitor: a socket's monitor (see sl_zsock.h). */
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "sl_zsock.h"

void *sl_zsock_monitor_open(void *ctx, void *sock, const char *addr, int events, const char *what, struct sl_error *err)
{
    char name[SL_ERROR_MSG_MAX / 2];
    snprintf(name, sizeof name, "%s: the monitor", what);
    void *mon = sl_zsock_open(ctx, ZMQ_PAIR, NULL, name, err);
    if (mon == NULL)
        return NULL;
    if (zmq_socket_monitor(sock, addr, events) < 0 || zmq_connect(mon, addr) < 0) {
        sl_error_set(err, SL_EIO, "%s: zmq_socket_monitor: %s", what, zmq_strerror(zmq_errno()));
        zmq_socket_monitor(sock, NULL, 0);
        zmq_close(mon);
        return NULL;
    }
    return mon;
}

int sl_zsock_monitor_event(void *mon, uint16_t *event, uint32_t *value)
{
    zmq_msg_t ev, addr;

    *event = 0;
    *value = 0;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ev);
        return 0;
    }
    if (zmq_msg_size(&ev) >= 6) {
        memcpy(event, zmq_msg_data(&ev), sizeof *event);
        memcpy(value, (const char *)zmq_msg_data(&ev) + 2, sizeof *value);
    }
    if (zmq_msg_more(&ev)) { /* the endpoint */
        zmq_msg_init(&addr);
        (void)zmq_msg_recv(&addr, mon, 0);
        zmq_msg_close(&addr);
    }
    zmq_msg_close(&ev);
    return 1;
}

void sl_zsock_monitor_close(void *sock, void *mon)
{
    if (sock != NULL && mon != NULL)
        zmq_socket_monitor(sock, NULL, 0);
    if (sock != NULL)
        zmq_close(sock);
    if (mon == NULL)
        return;
    zmq_pollitem_t it = {.socket = mon, .events = ZMQ_POLLIN};
    while (zmq_poll(&it, 1, 20) > 0) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        int got = zmq_msg_recv(&m, mon, ZMQ_DONTWAIT);
        zmq_msg_close(&m);
        if (got < 0)
            break;
    }
    zmq_close(mon);
}
