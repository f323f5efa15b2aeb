/* sl_alloc: every sluice allocation goes through here so that tests can
 * make the Nth allocation fail (as curl's torture tests do).
 *
 * Thread-safe: yes (the failure countdown is atomic).
 */
#ifndef SL_ALLOC_H
#define SL_ALLOC_H

#include <stddef.h>

void *sl_malloc(size_t n);
void *sl_calloc(size_t count, size_t size);
void *sl_realloc(void *p, size_t n);
void sl_free(void *p);
char *sl_strdup(const char *s);

/* Test hook: the `n`th allocation from now (1-based) and every one after it
 * fails until sl_alloc_fail_reset(); n = 0 disables. */
void sl_alloc_fail_after(long n);
void sl_alloc_fail_reset(void);

#endif
