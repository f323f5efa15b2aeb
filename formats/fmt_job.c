/* fmt_job: a job's input judged by its format's table. A format without
 * input rules reads 'files' and takes no arrays; one without features
 * rules takes any features, or none.
 */
#include "fmt_job.h"

#include "fmt_features.h"

/* Formats that read 'files' take no arrays. */
static int files_input(const struct fmt_job_input *in, struct sl_error *err)
{
    for (size_t i = 0; in->names_arrays != NULL && i < in->nfeatures; i++)
        if (in->names_arrays(in->ctx, i))
            return sl_error_set(err, SL_EINVAL, "'features.%s.array' applies only with format \"arrays\"",
                                in->features[i].name);
    return 0;
}

int fmt_format_check_job(enum fmt_format f, enum fmt_job_step step, const struct fmt_job_input *in,
                         struct sl_error *err)
{
    const struct fmt_format_ops *ops = fmt_format_get(f);
    if (ops == NULL)
        return sl_error_set(err, SL_EINVAL, "'format': not a format (%d)", (int)f);
    if (step == FMT_JOB_INPUT)
        return ops->job_input != NULL ? ops->job_input(in, err) : files_input(in, err);
    return ops->job_features != NULL ? ops->job_features(in, err) : 0;
}

int fmt_format_reads_files(enum fmt_format f)
{
    const struct fmt_format_ops *ops = fmt_format_get(f);
    return ops != NULL && ops->scan_group == NULL;
}
