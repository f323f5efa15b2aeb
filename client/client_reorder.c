/* client_reorder: a fixed ring; slot (seq % window) holds seq's item. */
#include "client_reorder.h"

#include "sl_alloc.h"

struct client_reorder {
    void **slots;
    size_t window;
    uint64_t next;
    size_t held;
};

int client_reorder_create(struct client_reorder **out, size_t window, struct sl_error *err)
{
    *out = NULL;
    if (window == 0)
        return sl_error_set(err, SL_EINVAL, "reorder window must be >= 1");
    struct client_reorder *r = sl_calloc(1, sizeof *r);
    if (r == NULL || (r->slots = sl_calloc(window, sizeof *r->slots)) == NULL) {
        sl_free(r);
        return sl_error_set(err, SL_ENOMEM, "out of memory for a reorder window of %zu", window);
    }
    r->window = window;
    *out = r;
    return 0;
}

void client_reorder_destroy(struct client_reorder *r)
{
    if (r == NULL)
        return;
    sl_free(r->slots);
    sl_free(r);
}

int client_reorder_put(struct client_reorder *r, uint64_t seq, void *item, struct sl_error *err)
{
    if (seq < r->next)
        return sl_error_set(err, SL_EPROTO, "piece %llu arrived again (already delivered up to %llu)",
                            (unsigned long long)seq, (unsigned long long)r->next);
    if (seq - r->next >= r->window)
        return sl_error_set(err, SL_EPROTO, "piece %llu is beyond the credit window (next %llu, window %zu)",
                            (unsigned long long)seq, (unsigned long long)r->next, r->window);
    void **slot = &r->slots[seq % r->window];
    if (*slot != NULL)
        return sl_error_set(err, SL_EPROTO, "piece %llu arrived twice", (unsigned long long)seq);
    *slot = item;
    r->held++;
    return 0;
}

void *client_reorder_pop(struct client_reorder *r)
{
    void **slot = &r->slots[r->next % r->window];
    void *item = *slot;
    if (item == NULL)
        return NULL;
    *slot = NULL;
    r->next++;
    r->held--;
    return item;
}

void *client_reorder_take(struct client_reorder *r, uint64_t seq)
{
    if (seq < r->next || seq - r->next >= r->window)
        return NULL;
    void **slot = &r->slots[seq % r->window];
    void *item = *slot;
    if (item != NULL) {
        *slot = NULL;
        r->held--;
    }
    return item;
}

int client_reorder_restart(struct client_reorder *r, uint64_t next)
{
    if (r->held != 0)
        return -1;
    r->next = next;
    return 0;
}

uint64_t client_reorder_next(const struct client_reorder *r)
{
    return r->next;
}

size_t client_reorder_held(const struct client_reorder *r)
{
    return r->held;
}

int client_reorder_resize(struct client_reorder *r, size_t window)
{
    if (r->held != 0 || window == 0)
        return -1;
    void **slots = sl_calloc(window, sizeof *slots);
    if (slots == NULL)
        return SL_ENOMEM;
    sl_free(r->slots);
    r->slots = slots;
    r->window = window;
    return 0;
}
