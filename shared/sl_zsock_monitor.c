/* train_monitor: see train_monitor.h. */
#include "sl_zsock_monitor.h"

#include <zmq.h>

void train_monitor_close(void *sock, void *mon)
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
