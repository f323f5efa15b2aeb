/* feed_job_map: the job's 'map' key, parsed by the map stage's own parser
 * (transform/map.c) and worded as the job's other keys are. */
#include "feed_job_map.h"

#include <libgen.h>
#include <stdio.h>
#include <string.h>

#include "feed_job.h"
#include "sl_alloc.h"

/* The map's dtypes, the formats' and the wire's are one numbering. */
_Static_assert((int)MAP_DT_INT64 == (int)FMT_DTYPE_INT64 && (int)MAP_DT_FLOAT32 == (int)FMT_DTYPE_FLOAT32 &&
                   (int)MAP_DT_BYTES == (int)FMT_DTYPE_BYTES && (int)MAP_DT_UINT8 == (int)FMT_DTYPE_UINT8 &&
                   (int)MAP_DT_FLOAT16 == (int)FMT_DTYPE_FLOAT16 && (int)MAP_DT_BFLOAT16 == (int)FMT_DTYPE_BFLOAT16,
               "map dtypes follow fmt_types.h");

static int why_from(struct why *w, const struct map_why *mw)
{
    w->unknown = mw->unknown;
    snprintf(w->key, sizeof w->key, "%s", mw->key);
    snprintf(w->text, sizeof w->text, "%s", mw->text);
    return SL_EINVAL;
}

int feed__map_parse(json_t *v, struct map_pipeline **out, struct why *w)
{
    struct map_why mw;
    int rc = map_pipeline_parse(out, v, &mw);
    if (rc == SL_EINVAL)
        return why_from(w, &mw);
    return rc;
}

void feed_map_spec_from(const struct fmt_feature_spec *f, struct map_spec *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", f->name);
    out->dtype = (enum map_dtype)f->dtype; /* the same numbers (asserted above) */
    out->varlen = f->varlen;
    out->rank = f->varlen ? 1 : f->rank;
    for (int i = 0; !f->varlen && i < f->rank && i < MAP_MAX_RANK; i++)
        out->shape[i] = f->shape[i];
    if (f->varlen)
        out->shape[0] = MAP_DIM_DATA;
}

int feed_job_map_plan(const struct feed_job *job, unsigned flags, struct map_plan **out, struct sl_error *err)
{
    *out = NULL;
    if (map_pipeline_nops(job->map) == 0) /* "map": [] is no map */
        return 0;
    struct map_spec *in = sl_calloc(job->nfeatures ? job->nfeatures : 1, sizeof *in);
    char *dir = NULL;
    if (in == NULL)
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", job->source);
    for (size_t i = 0; i < job->nfeatures; i++)
        feed_map_spec_from(&job->features[i], &in[i]);
    /* a plugin's relative path: from the job file's directory */
    int is_file = strcmp(job->source, "command line") != 0;
    if (is_file && (dir = sl_strdup(job->source)) == NULL) {
        sl_free(in);
        return sl_error_set(err, SL_ENOMEM, "%s: out of memory", job->source);
    }
    struct map_why mw;
    int rc = map_plan_create(out, job->map, in, job->nfeatures, dir ? dirname(dir) : NULL, flags, &mw);
    if (rc == SL_EINVAL && mw.unknown)
        sl_error_set(err, rc, "%s: unknown key '%s'", job->source, mw.key);
    else if (rc == SL_EINVAL)
        sl_error_set(err, rc, "%s: '%s'%s", job->source, mw.key, mw.text);
    else if (rc != 0)
        sl_error_set(err, rc, "%s: out of memory", job->source);
    sl_free(dir);
    sl_free(in);
    return rc;
}

int feed_map_out_specs(const struct map_plan *plan, const struct fmt_feature_spec *in, size_t nin,
                       struct fmt_feature_spec **out, size_t *nout)
{
    size_t n;
    const struct map_spec *ms = map_plan_out(plan, &n);
    struct fmt_feature_spec *s = sl_calloc(n ? n : 1, sizeof *s);
    *out = NULL;
    *nout = 0;
    if (s == NULL)
        return SL_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        size_t src = map_plan_out_source(plan, i);
        if (!map_plan_out_touched(plan, i) && src < nin) {
            s[i] = in[src];
            continue;
        }
        snprintf(s[i].name, sizeof s[i].name, "%s", ms[i].name);
        s[i].dtype = (enum fmt_dtype)ms[i].dtype;
        s[i].rank = ms[i].rank;
        for (int k = 0; k < ms[i].rank && k < FMT_MAX_RANK; k++)
            s[i].shape[k] = ms[i].shape[k];
    }
    *out = s;
    *nout = n;
    return 0;
}
