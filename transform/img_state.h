/* img_state: what the image kernels' .c files share inside transform/
 * (not part of the API): the per-thread scratch of a struct img_state.
 * The scratch grows to the largest request and is kept; it belongs to
 * the state's thread. */
#ifndef IMG_STATE_H
#define IMG_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "sl_error.h"

struct img_state;

struct img__scratch {
    uint8_t *buf;
    size_t cap;
};

struct img__scratch *img__state_scratch(struct img_state *st);

/* At least n bytes in s->buf (its old content lost when it grows): 0 or
 * SL_ENOMEM with err set. */
int img__scratch_reserve(struct img__scratch *s, size_t n, struct sl_error *err) SL_MUST_CHECK;

#endif
