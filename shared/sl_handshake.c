/* train_handshake: see train_handshake.h. */
#include "sl_handshake.h"

#include <string.h>
#include <zmq.h>

#define FAILED \
    (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

int train_monitor_event(void *mon, uint16_t *event, uint32_t *value)
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
    if (zmq_msg_more(&ev)) {
        zmq_msg_init(&addr);
        (void)zmq_msg_recv(&addr, mon, 0);
        zmq_msg_close(&addr);
    }
    zmq_msg_close(&ev);
    return 1;
}

static int mismatch(uint16_t event, uint32_t value)
{
    return event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH;
}

static void verdict(struct train_handshake *h, uint16_t event, uint32_t value)
{
    if (h->event == 0) {
        h->event = event;
        h->value = value;
    }
}

void train_handshake_read(struct train_handshake *h, void *mon, uint64_t now_ns)
{
    uint16_t event;
    uint32_t value;

    while (train_monitor_event(mon, &event, &value)) {
        if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            h->ok = 1;
            h->nodetail = 0;
            h->first_ns = 0;
        } else if (!(event & FAILED)) {
            continue;
        } else if (event != ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
            verdict(h, event, value);
        } else if (!h->ok) {
            if (h->nodetail++ == 0)
                h->first_ns = now_ns ? now_ns : 1;
            if (h->nodetail >= TRAIN_HANDSHAKE_NODETAIL)
                verdict(h, event, value);
        }
    }
}

uint64_t train_handshake_due(const struct train_handshake *h)
{
    if (h->event != 0 || h->first_ns == 0)
        return 0;
    return h->first_ns + (uint64_t)TRAIN_HANDSHAKE_GRACE_MS * 1000000u;
}

int train_handshake_failed(struct train_handshake *h, uint64_t now_ns)
{
    uint64_t due = train_handshake_due(h);

    if (due != 0 && now_ns >= due)
        verdict(h, ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL, 0);
    return h->event != 0;
}

int train_handshake_error(const struct train_handshake *h, const char *what, const char *peer, struct sl_error *err)
{
    if (mismatch(h->event, h->value) && h->curve)
        return sl_error_set(err, SL_EPROTO,
                            "%s: the handshake with %s failed: it does not use CURVE, but this worker has a trainer "
                            "key (give every worker the same --curve-key)",
                            what, peer);
    if (mismatch(h->event, h->value))
        return sl_error_set(err, SL_EPROTO,
                            "%s: the handshake with %s failed: it uses CURVE, but this worker has no trainer key "
                            "(give every worker the same --curve-key)",
                            what, peer);
    if (!h->curve)
        return sl_error_set(err, SL_EPROTO,
                            "%s: the handshake with %s failed: it closed the connection (a worker with a trainer "
                            "key? give every worker the same --curve-key, or none)",
                            what, peer);
    return sl_error_set(err, SL_EPROTO,
                        "%s: the CURVE handshake with %s failed: the workers do not share one trainer key "
                        "(--curve-key)",
                        what, peer);
}
