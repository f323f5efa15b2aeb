/* sl_alloc: thin wrappers over the C allocator with a failure-injection
 * countdown for tests. The countdown is the one piece of process-wide
 * mutable state besides the log sink; it is atomic and only tests set it. */
#include "sl_alloc.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_long fail_countdown; /* 0: off; k > 0: fail when it reaches 1 */

static int should_fail(void)
{
    long c = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    if (c == 0)
        return 0;
    if (c == 1)
        return 1; /* stays at 1: every later allocation fails too */
    atomic_fetch_sub_explicit(&fail_countdown, 1, memory_order_relaxed);
    return 0;
}

void *sl_malloc(size_t n)
{
    return should_fail() ? NULL : malloc(n ? n : 1);
}

void *sl_calloc(size_t count, size_t size)
{
    return should_fail() ? NULL : calloc(count ? count : 1, size ? size : 1);
}

void *sl_realloc(void *p, size_t n)
{
    return should_fail() ? NULL : realloc(p, n ? n : 1);
}

void sl_free(void *p)
{
    free(p);
}

char *sl_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = sl_malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

void sl_alloc_fail_after(long n)
{
    atomic_store(&fail_countdown, n < 0 ? 0 : n);
}

void sl_alloc_fail_reset(void)
{
    atomic_store(&fail_countdown, 0);
}
