/* train_ps: see train_ps.h. Here: the model's placement over the servers
 * and the wire the server (train_ps_server.c) and the client
 * (train_ps_client.c) share (train_ps_int.h). */
#include "train_ps.h"

#include <inttypes.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_bytes.h"
#include "sl_clock.h"
#include "train_ps_int.h"

/* unit u: its first variable, its total size, and the server it gets */
struct unit {
    size_t first;
    uint64_t size;
    uint32_t server;
};

int train_ps_place(const size_t *sizes, const int *group, size_t n, uint32_t nps, enum train_ps_placement how,
                   uint32_t *owner, struct sl_error *err)
{
    if (nps == 0 || nps > TRAIN_PS_MAX_SERVERS)
        return sl_error_set(err, SL_EINVAL, "%u parameter servers (1 to %d)", nps, TRAIN_PS_MAX_SERVERS);
    if (n > TRAIN_PS_MAX_VARS)
        return sl_error_set(err, SL_EINVAL, "%zu variables (at most %d)", n, TRAIN_PS_MAX_VARS);
    if (how != TRAIN_PS_ROUND_ROBIN && how != TRAIN_PS_BALANCED)
        return sl_error_set(err, SL_EINVAL, "unknown placement %d", (int)how);
    for (size_t i = 0; group != NULL && i < n; i++)
        if (group[i] < -1)
            return sl_error_set(err, SL_EINVAL, "variable %zu: colocation group %d (-1: none, or >= 0)", i, group[i]);
    if (n == 0)
        return 0;
    struct unit *units = sl_calloc(n, sizeof *units);
    size_t *unit_of = sl_calloc(n, sizeof *unit_of);
    if (units == NULL || unit_of == NULL) {
        sl_free(units);
        sl_free(unit_of);
        return sl_error_set(err, SL_ENOMEM, "out of memory placing %zu variables", n);
    }
    /* units in the order of their first variable (n^2 at most 16M steps) */
    size_t nu = 0;
    for (size_t i = 0; i < n; i++) {
        size_t u = nu;
        if (group != NULL && group[i] >= 0)
            for (size_t k = 0; k < i; k++)
                if (group[k] == group[i]) {
                    u = unit_of[k];
                    break;
                }
        if (u == nu)
            units[nu++] = (struct unit){.first = i};
        units[u].size += sizes[i];
        unit_of[i] = u;
    }
    if (how == TRAIN_PS_ROUND_ROBIN) {
        for (size_t u = 0; u < nu; u++)
            units[u].server = (uint32_t)(u % nps);
    } else {
        uint64_t load[TRAIN_PS_MAX_SERVERS] = {0};
        char *done = sl_calloc(nu, 1);
        if (done == NULL) {
            sl_free(units);
            sl_free(unit_of);
            return sl_error_set(err, SL_ENOMEM, "out of memory placing %zu variables", n);
        }
        for (size_t step = 0; step < nu; step++) {
            size_t best = nu;
            for (size_t u = 0; u < nu; u++) /* the largest left; the first on ties */
                if (!done[u] && (best == nu || units[u].size > units[best].size))
                    best = u;
            uint32_t s = 0;
            for (uint32_t k = 1; k < nps; k++)
                if (load[k] < load[s])
                    s = k;
            units[best].server = s;
            load[s] += units[best].size;
            done[best] = 1;
        }
        sl_free(done);
    }
    for (size_t i = 0; i < n; i++)
        owner[i] = units[unit_of[i]].server;
    sl_free(units);
    sl_free(unit_of);
    return 0;
}

/* ---- the wire ---- */

size_t train_ps_elements(const struct train_ps_layout *l, uint32_t ps)
{
    size_t n = 0;
    for (size_t i = 0; i < l->nvars; i++)
        if (l->owner[i] == ps)
            n += l->vars[i].count;
    return n;
}

void train__ps_put_hdr(uint8_t *b, const struct train__ps_hdr *h)
{
    memset(b, 0, TRAIN_PS_HEADER);
    memcpy(b, "SLPS", 4);
    b[4] = TRAIN_PS_WIRE_VERSION;
    b[5] = h->type;
    sl_store_le32(b + 8, h->worker);
    sl_store_le32(b + 12, h->flags);
    sl_store_le64(b + 16, h->version);
    sl_store_le64(b + 24, h->step);
    sl_store_le64(b + 32, h->incarnation);
    sl_store_le64(b + 40, h->session);
}

int train__ps_get_hdr(const uint8_t *b, size_t n, struct train__ps_hdr *h)
{
    if (n != TRAIN_PS_HEADER || memcmp(b, "SLPS", 4) != 0 || b[4] != TRAIN_PS_WIRE_VERSION || b[5] < TRAIN_PS_PULL ||
        b[5] > TRAIN_PS_WORLD)
        return -1;
    h->type = b[5];
    h->worker = sl_load_le32(b + 8);
    h->flags = sl_load_le32(b + 12);
    h->version = sl_load_le64(b + 16);
    h->step = sl_load_le64(b + 24);
    h->incarnation = sl_load_le64(b + 32);
    h->session = sl_load_le64(b + 40);
    return 0;
}

int train_ps_hdr_check(const uint8_t *b, size_t n, uint8_t *back)
{
    struct train__ps_hdr h;
    if (train__ps_get_hdr(b, n, &h) != 0)
        return -1;
    train__ps_put_hdr(back, &h);
    return 0;
}

char *train_ps_printable(char *out, size_t cap, const void *text, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const uint8_t *t = text;
    size_t at = 0;
    for (size_t i = 0; i < len; i++) {
        int plain = t[i] >= 0x20 && t[i] < 0x7f && t[i] != '\\';
        if (at + (plain ? 1 : 4) >= cap)
            break;
        if (plain) {
            out[at++] = (char)t[i];
        } else {
            out[at++] = '\\';
            out[at++] = 'x';
            out[at++] = hex[t[i] >> 4];
            out[at++] = hex[t[i] & 15];
        }
    }
    out[at] = '\0';
    return out;
}

/* Send [routing id?] header [body]. */
int train__ps_send(void *sock, zmq_msg_t *id, const struct train__ps_hdr *h, const void *body, size_t len)
{
    uint8_t b[TRAIN_PS_HEADER];
    train__ps_put_hdr(b, h);
    int more = body != NULL ? ZMQ_SNDMORE : 0;
    if (id != NULL && zmq_msg_send(id, sock, ZMQ_SNDMORE) < 0)
        return -1;
    if (zmq_send(sock, b, sizeof b, more) < 0)
        return -1;
    if (body != NULL && zmq_send(sock, body, len, 0) < 0)
        return -1;
    return 0;
}

/* Receive one multipart message: its first `cap` frames into f (*nf of
 * them, each to be closed by the caller), the rest closed. Returns how
 * many frames the message had. */
size_t train__ps_recv_frames(void *sock, zmq_msg_t *f, size_t cap, size_t *nf)
{
    size_t frames = 0;
    int more = 1;
    *nf = 0;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, 0) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        frames++;
        if (*nf < cap)
            f[(*nf)++] = m;
        else
            zmq_msg_close(&m);
    }
    return frames;
}

/* ---- the model's placement ---- */

int train_ps_model_init(struct train_ps_model *pm, const struct train_model_config *cfg, uint32_t nps,
                        enum train_ps_placement how, struct sl_error *err)
{
    memset(pm, 0, sizeof *pm);
    int rc = train_model_create(&pm->model, cfg, err);
    if (rc != 0)
        return rc;
    size_t n = train_model_variables(pm->model, pm->vars, TRAIN_MODEL_MAX_VARS), sizes[TRAIN_MODEL_MAX_VARS];
    for (size_t i = 0; i < n; i++)
        sizes[i] = pm->vars[i].count;
    if ((rc = train_ps_place(sizes, NULL, n, nps, how, pm->owner, err)) != 0) {
        train_ps_model_free(pm);
        return rc;
    }
    pm->layout = (struct train_ps_layout){.vars = pm->vars, .nvars = n, .owner = pm->owner, .nps = nps};
    char hidden[64] = "-";
    for (int h = 0, at = 0; h < cfg->nhidden; h++)
        at += snprintf(hidden + at, sizeof hidden - (size_t)at, "%s%d", h ? "," : "", cfg->hidden[h]);
    snprintf(pm->config, sizeof pm->config,
             "inputs=%d classes=%d hidden=%s seed=%" PRIu64 " lr=%.9g momentum=%.9g servers=%u placement=%s",
             cfg->inputs, cfg->classes, hidden, cfg->seed, (double)cfg->lr, (double)cfg->momentum, nps,
             how == TRAIN_PS_BALANCED ? "balanced" : "round-robin");
    return 0;
}

void train_ps_model_free(struct train_ps_model *pm)
{
    train_model_destroy(pm->model);
    memset(pm, 0, sizeof *pm);
}

uint32_t train_ps_config_inputs(const char *config, size_t len)
{
    static const char key[] = "inputs=";
    if (len < sizeof key - 1 || memcmp(config, key, sizeof key - 1) != 0)
        return 0;
    uint64_t v = 0;
    size_t i = sizeof key - 1, start = i;
    for (; i < len && config[i] >= '0' && config[i] <= '9' && i - start < 9; i++)
        v = v * 10 + (uint64_t)(config[i] - '0');
    if (i == start || (i < len && config[i] != ' ') || v == 0 || v > TRAIN_MODEL_MAX_WIDTH)
        return 0;
    return (uint32_t)v;
}

/* ---- the packed elements and the ids ---- */

void train__ps_pack(const struct train_ps_layout *l, uint32_t ps, const float *whole, float *packed)
{
    for (size_t i = 0; i < l->nvars; i++)
        if (l->owner[i] == ps) {
            memcpy(packed, whole + l->vars[i].offset, l->vars[i].count * sizeof *packed);
            packed += l->vars[i].count;
        }
}

void train__ps_unpack(const struct train_ps_layout *l, uint32_t ps, const float *packed, float *whole)
{
    for (size_t i = 0; i < l->nvars; i++)
        if (l->owner[i] == ps) {
            memcpy(whole + l->vars[i].offset, packed, l->vars[i].count * sizeof *packed);
            packed += l->vars[i].count;
        }
}

/* A random nonzero id: getrandom, else the clock and the pid. */
uint64_t train_ps_draw_id(void)
{
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x || x == 0)
        x = (sl_clock_ns() ^ ((uint64_t)getpid() << 40)) | 1u;
    return x;
}
