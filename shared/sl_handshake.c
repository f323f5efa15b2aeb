/* sl_handshake: see sl_handshake.h. */
#include "sl_handshake.h"

#include <zmq.h>

#include "sl_zsock.h"

static int mismatch(uint16_t event, uint32_t value)
{
    return event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH;
}

/* The first verdict stands. */
static void verdict(struct sl_handshake *h, uint16_t event, uint32_t value)
{
    if (h->event == 0) {
        h->event = event;
        h->value = value;
    }
}

void sl_handshake_init(struct sl_handshake *h, enum sl_handshake_kind kind, int curve)
{
    *h = (struct sl_handshake){.kind = kind, .curve = curve != 0};
}

void sl_handshake_note(struct sl_handshake *h, uint16_t event, uint32_t value, uint64_t now_ns)
{
    if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        h->settled = h->kind == SL_HANDSHAKE_PEERS;
        h->nodetail = 0;
        h->first_ns = 0;
    } else if (!(event & SL_HANDSHAKE_FAILED_EVENTS)) {
        return;
    } else if (event != ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
        verdict(h, event, value);
    } else if (!h->settled) {
        if (h->nodetail++ == 0 && h->kind == SL_HANDSHAKE_PEERS)
            h->first_ns = now_ns ? now_ns : 1;
        if (h->nodetail >= SL_HANDSHAKE_NODETAIL)
            verdict(h, event, value);
    }
}

void sl_handshake_read(struct sl_handshake *h, void *mon, uint64_t now_ns)
{
    uint16_t event;
    uint32_t value;

    while (sl_zsock_monitor_event(mon, &event, &value))
        sl_handshake_note(h, event, value, now_ns);
}

uint64_t sl_handshake_due(const struct sl_handshake *h)
{
    if (h->event != 0 || h->first_ns == 0)
        return 0;
    return h->first_ns + (uint64_t)SL_HANDSHAKE_GRACE_MS * 1000000u;
}

int sl_handshake_failed(struct sl_handshake *h, uint64_t now_ns)
{
    uint64_t due = sl_handshake_due(h);

    if (due != 0 && now_ns >= due)
        verdict(h, ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL, 0);
    return h->event != 0;
}

enum sl_handshake_verdict sl_handshake_verdict(const struct sl_handshake *h)
{
    switch (h->event) {
    case 0: return SL_HANDSHAKE_NONE;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH: return SL_HANDSHAKE_REFUSED;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
        return mismatch(h->event, h->value) ? SL_HANDSHAKE_MISMATCH : SL_HANDSHAKE_PROTOCOL;
    default: return SL_HANDSHAKE_CLOSED;
    }
}

int sl_handshake_peers_error(const struct sl_handshake *h, const char *what, const char *peer, struct sl_error *err)
{
    enum sl_handshake_verdict v = sl_handshake_verdict(h);

    if (v == SL_HANDSHAKE_MISMATCH && h->curve)
        return sl_error_set(err, SL_EPROTO,
                            "%s: the handshake with %s failed: it does not use CURVE, but this worker has a trainer "
                            "key (give every worker the same --curve-key)",
                            what, peer);
    if (v == SL_HANDSHAKE_MISMATCH)
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

int sl_handshake_feeder_error(const struct sl_handshake *h, const char *key_opt, const char *server_key_opt,
                              struct sl_error *err)
{
    switch (sl_handshake_verdict(h)) {
    case SL_HANDSHAKE_NONE: return 0;
    case SL_HANDSHAKE_REFUSED:
        return sl_error_set(err, SL_EPROTO,
                            "the CURVE handshake failed: the feeder refused this trainer's key (ZAP status %u): this "
                            "trainer's public key is not on the feeder's allow-list (add its NAME.pub to the "
                            "feeder's --curve-allow directory and send the feeder SIGHUP)",
                            h->value);
    case SL_HANDSHAKE_MISMATCH:
        if (h->curve)
            return sl_error_set(err, SL_EPROTO,
                                "the handshake failed: this trainer uses CURVE (%s) and the feeder does not "
                                "(started without --curve-key?): give both sides keys, or neither",
                                key_opt);
        return sl_error_set(err, SL_EPROTO,
                            "the handshake failed: the feeder requires CURVE and this trainer has no keys: "
                            "give %s and %s (docs/security.md)",
                            key_opt, server_key_opt);
    case SL_HANDSHAKE_PROTOCOL:
        if (h->curve)
            return sl_error_set(err, SL_EPROTO,
                                "the CURVE handshake failed (protocol error 0x%08x): the feeder refused this "
                                "trainer's key, or %s is not this feeder's key",
                                h->value, server_key_opt);
        return sl_error_set(err, SL_EPROTO, "the ZeroMQ handshake failed (protocol error 0x%08x)", h->value);
    case SL_HANDSHAKE_CLOSED: break;
    }
    if (h->curve)
        return sl_error_set(err, SL_EPROTO,
                            "the CURVE handshake failed (the feeder refused this trainer's key, or "
                            "%s is not this feeder's key, or the feeder does not use CURVE: "
                            "the connection closed during the handshake %u times)",
                            server_key_opt, h->nodetail);
    return sl_error_set(err, SL_EPROTO,
                        "the connection closed during the ZeroMQ handshake %u times: is a sluice feeder "
                        "listening at that address, and does it use CURVE (then give %s and %s)?",
                        h->nodetail, key_opt, server_key_opt);
}
