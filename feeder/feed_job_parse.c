/* feed_job_parse: what parsing a job's keys needs below the keys and the
 * features: why a key is refused (worded later for the file or for a
 * flag), a value as the user wrote it, lists of owned strings.
 */
#include "feed_job_parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_alloc.h"

int feed__why_set(struct why *w, const char *key, const char *fmt, ...)
{
    va_list ap;
    w->unknown = 0;
    snprintf(w->key, sizeof w->key, "%s", key);
    va_start(ap, fmt);
    vsnprintf(w->text, sizeof w->text, fmt, ap);
    va_end(ap);
    return SL_EINVAL;
}

int feed__why_unknown(struct why *w, const char *key)
{
    w->unknown = 1;
    snprintf(w->key, sizeof w->key, "%s", key);
    w->text[0] = '\0';
    return SL_EINVAL;
}

/* A value as the user wrote it (compact JSON, 15 digits, cut at 60 bytes). */
const char *feed__got(const json_t *v, char *buf, size_t cap)
{
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(15));
    if (s == NULL)
        return "?";
    if (strlen(s) > 60)
        snprintf(buf, cap, "%.57s...", s);
    else
        snprintf(buf, cap, "%s", s);
    free(s);
    return buf;
}

/* ---- lists ---- */

void feed__list_free(struct feed_job_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        sl_free(l->items[i]);
    sl_free(l->items);
    l->items = NULL;
    l->n = 0;
}

int feed__list_push(struct feed_job_list *l, size_t *cap, const char *s)
{
    if (l->n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        char **items = sl_realloc(l->items, ncap * sizeof *items);
        if (items == NULL)
            return SL_ENOMEM;
        l->items = items;
        *cap = ncap;
    }
    if ((l->items[l->n] = sl_strdup(s)) == NULL)
        return SL_ENOMEM;
    l->n++;
    return 0;
}
