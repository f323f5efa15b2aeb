/* rogue_ps: a raw parameter-server wire peer that sends whatever it is
 * told, for the hostile cases of integration/test_ps_integrity.py (a real
 * sluice-trainer ps task; issue #24 items 1 and 5).
 *
 *   rogue_ps ENDPOINT WORKER ACTION...
 *     pull:DESC       a PULL carrying DESC as its description ("pull:" alone:
 *                     none); the first VALUES teaches the incarnation, the
 *                     version and the server's size
 *     push:KIND       a PUSH of the server's size: KIND nan (every value a
 *                     NaN), inf, ones, version (ones, version 2^63), stray
 *                     (ones and a fourth frame), short (one float less)
 *     bye             a BYE
 *   --curve FILE      before the actions: be a CURVE client with the secret
 *                     key FILE of the server's public key (the same pair)
 *   --wait-ms MS      how long to wait for each answer (default 3000)
 *
 * Prints one JSON line per action:
 *   {"action":"push:nan","reply":"VALUES"|"ACK"|"ERROR"|"none",
 *    "why":"...","incarnation":"016x","version":V,"step":S,"bytes":B}
 * and exits 0, or 2 on a usage error. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "sl_buf.h"
#include "sl_bytes.h"
#include "sl_curve.h"
#include "sl_json.h"
#include "train_ps.h"

static const char *const type_names[] = {"?", "PULL", "VALUES", "PUSH", "ACK", "BYE", "ERROR"};

static int usage(void)
{
    fprintf(stderr, "usage: rogue_ps ENDPOINT WORKER [--curve FILE] [--wait-ms MS] ACTION...\n");
    return 2;
}

static void header(uint8_t *h, int type, uint32_t worker, uint64_t version, uint64_t incarnation)
{
    memset(h, 0, TRAIN_PS_HEADER);
    memcpy(h, "SLPS", 4);
    h[4] = TRAIN_PS_WIRE_VERSION;
    h[5] = (uint8_t)type;
    sl_store_le32(h + 8, worker);
    sl_store_le32(h + 12, type == TRAIN_PS_PUSH ? 1u : 0u);
    sl_store_le64(h + 16, version);
    sl_store_le64(h + 32, incarnation);
}

int main(int argc, char **argv)
{
    if (argc < 4)
        return usage();
    const char *ep = argv[1];
    uint32_t worker = (uint32_t)strtoul(argv[2], NULL, 10);
    const char *curve = NULL;
    long wait_ms = 3000;
    int a = 3;
    for (; a < argc && strncmp(argv[a], "--", 2) == 0; a += 2) {
        if (a + 1 >= argc)
            return usage();
        if (strcmp(argv[a], "--curve") == 0)
            curve = argv[a + 1];
        else if (strcmp(argv[a], "--wait-ms") == 0)
            wait_ms = strtol(argv[a + 1], NULL, 10);
        else
            return usage();
    }
    void *ctx = zmq_ctx_new();
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    if (curve != NULL) {
        struct sl_curve_keys k;
        struct sl_error err = {0};
        if (sl_curve_load_secret(curve, &k, &err) != 0 || sl_curve_client(d, &k, k.public_z85, &err) != 0) {
            fprintf(stderr, "rogue_ps: %s\n", err.msg);
            return 2;
        }
    }
    if (zmq_connect(d, ep) != 0) {
        fprintf(stderr, "rogue_ps: connect %s: %s\n", ep, zmq_strerror(zmq_errno()));
        return 2;
    }
    uint64_t incarnation = 0, version = 0;
    size_t floats = 0;
    for (; a < argc; a++) {
        const char *act = argv[a];
        uint8_t h[TRAIN_PS_HEADER];
        float *g = NULL;
        int sent = 0;
        if (strncmp(act, "pull:", 5) == 0) {
            header(h, TRAIN_PS_PULL, worker, 0, incarnation);
            size_t len = strlen(act + 5);
            sent =
                zmq_send(d, h, sizeof h, len ? ZMQ_SNDMORE : 0) >= 0 && (len == 0 || zmq_send(d, act + 5, len, 0) >= 0);
        } else if (strncmp(act, "push:", 5) == 0) {
            const char *kind = act + 5;
            size_t n = strcmp(kind, "short") == 0 && floats > 0 ? floats - 1 : floats;
            g = calloc(n ? n : 1, sizeof *g);
            if (g == NULL)
                return 2;
            for (size_t i = 0; i < n; i++)
                g[i] = strcmp(kind, "nan") == 0 ? NAN : strcmp(kind, "inf") == 0 ? INFINITY : 1.0f;
            header(h, TRAIN_PS_PUSH, worker, strcmp(kind, "version") == 0 ? UINT64_C(1) << 63 : version, incarnation);
            int stray = strcmp(kind, "stray") == 0;
            uint8_t pos[CLIENT_INPUT_POSITION_BYTES]; /* the first step's: what a worker's first push carries */
            client_input_position_encode(&(struct client_input_position){.step = 1, .seq = 1, .replicas = 1}, pos);
            sent = zmq_send(d, h, sizeof h, ZMQ_SNDMORE) >= 0 && zmq_send(d, g, n * sizeof *g, ZMQ_SNDMORE) >= 0 &&
                   zmq_send(d, pos, sizeof pos, stray ? ZMQ_SNDMORE : 0) >= 0 &&
                   (!stray || zmq_send(d, "x", 1, 0) >= 0);
        } else if (strcmp(act, "bye") == 0) {
            header(h, TRAIN_PS_BYE, worker, 0, incarnation);
            sent = zmq_send(d, h, sizeof h, 0) >= 0;
        } else
            return usage();
        free(g);
        struct sl_buf out;
        sl_buf_init(&out, 0);
        int w = sl_buf_printf(&out, "{\"action\":");
        w |= sl_json_string(&out, act, strlen(act));
        zmq_pollitem_t it = {.socket = d, .events = ZMQ_POLLIN};
        if (!sent || strcmp(act, "bye") == 0 || zmq_poll(&it, 1, wait_ms) <= 0) {
            w |= sl_buf_printf(&out, ",\"reply\":\"%s\"}\n", sent ? "none" : "unsent");
        } else {
            zmq_msg_t m, body;
            zmq_msg_init(&m);
            zmq_msg_init(&body);
            int got = zmq_msg_recv(&m, d, 0) >= 0;
            int has_body = got && zmq_msg_more(&m) && zmq_msg_recv(&body, d, 0) >= 0;
            const uint8_t *r = zmq_msg_data(&m);
            int type = got && zmq_msg_size(&m) == TRAIN_PS_HEADER && r[5] >= 1 && r[5] <= 6 ? r[5] : 0;
            uint64_t inc = type ? sl_load_le64(r + 32) : 0, ver = type ? sl_load_le64(r + 16) : 0;
            w |= sl_buf_printf(&out, ",\"reply\":\"%s\",\"why\":", type_names[type]);
            if (type == TRAIN_PS_ERROR && has_body)
                w |= sl_json_string(&out, zmq_msg_data(&body), zmq_msg_size(&body));
            else
                w |= sl_buf_printf(&out, "\"\"");
            w |= sl_buf_printf(&out,
                               ",\"incarnation\":\"%016" PRIx64 "\",\"version\":%" PRIu64 ",\"step\":%" PRIu64
                               ",\"bytes\":%zu}\n",
                               inc, ver, type ? sl_load_le64(r + 24) : 0, has_body ? zmq_msg_size(&body) : 0);
            if (type == TRAIN_PS_VALUES) {
                incarnation = inc;
                version = ver;
                floats = zmq_msg_size(&body) / sizeof(float);
            }
            zmq_msg_close(&m);
            zmq_msg_close(&body);
        }
        if (w != 0)
            return 2;
        fwrite(out.data, 1, out.len, stdout);
        fflush(stdout);
        sl_buf_free(&out);
    }
    zmq_close(d);
    zmq_ctx_term(ctx);
    return 0;
}
