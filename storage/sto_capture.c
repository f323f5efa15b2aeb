/* sto_capture: a source that keeps a copy of the bytes read through it
 * (sto.h). Its fields are the inner source's (fd -1: never mapped); its
 * reads are the inner one's, copied into the caller's buffer while they
 * run on from byte 0.
 */
#include <stdlib.h>
#include <string.h>

#include "sl_alloc.h"
#include "sto_impl.h"

struct capture_src {
    struct sto_src base;
    struct sto_src *inner;
    struct sto_capture *c;
};

static int capture_read_at(struct sto_src *base, uint64_t off, void *dst, size_t n, size_t *got, struct sl_error *err)
{
    struct capture_src *s = (struct capture_src *)base;
    int rc = sto_read_at(s->inner, off, dst, n, got, err);
    if (rc != 0)
        return rc;
    struct sto_capture *c = s->c;
    uint64_t end = off + *got;
    if (off <= c->upto && end > c->upto && end <= c->cap) {
        memcpy(c->buf + c->upto, (const uint8_t *)dst + (c->upto - off), (size_t)(end - c->upto));
        c->upto = end;
    }
    return 0;
}

static void capture_close(struct sto_src *base)
{
    struct capture_src *s = (struct capture_src *)base;
    sto_close(s->inner);
    free(s->base.name);
    free(s);
}

static int capture_open(struct sto_src **out, const char *name, struct sl_error *err)
{
    (void)out;
    return sl_error_set(err, SL_EINVAL, "open(%s): a capture is made with sto_capture_open", name);
}

static const struct sto_ops capture_ops = {"capture", capture_open, NULL, capture_read_at, capture_close};

int sto_capture_open(struct sto_src **out, struct sto_src *inner, struct sto_capture *c, struct sl_error *err)
{
    *out = NULL;
    struct capture_src *s = sl_calloc(1, sizeof(*s));
    char *name = sl_strdup(inner->name);
    if (s == NULL || name == NULL) {
        free(s);
        free(name);
        int rc = sl_error_set(err, SL_ENOMEM, "open(%s): out of memory", inner->name);
        sto_close(inner);
        return rc;
    }
    s->base = *inner;
    s->base.ops = &capture_ops;
    s->base.name = name;
    s->base.fd = -1;
    s->inner = inner;
    s->c = c;
    *out = &s->base;
    return 0;
}
