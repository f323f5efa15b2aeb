/* train_device_spec: the trainer's --devices option, resolved against the
 * backends this build has and the devices this machine has.
 *
 *   auto       every GPU when the cuda backend is built, loads (the module
 *              libsluice-cuda.so and the CUDA libraries) and sees one, else
 *              one CPU replica per online core (sysconf)
 *   cpu        one CPU replica per online core
 *   cpu:N      N CPU replicas
 *   gpu        every GPU
 *   gpu:0,1    those GPUs ("gpu:0,gpu:1" reads the same), each once
 *
 * Errors read "--devices: ..." and say what was expected. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train_backend.h"
#include "train_device.h"

static int parse_int(const char *s, const char *end, long max, long *out)
{
    long v = 0;
    if (s == end)
        return -1;
    for (const char *p = s; p < end; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
        if (v > max)
            return -1;
    }
    *out = v;
    return 0;
}

static int cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        return 1;
    return n > TRAIN_DEVICE_MAX_REPLICAS ? TRAIN_DEVICE_MAX_REPLICAS : (int)n;
}

static void set_cpu(struct train_device_spec *out, int n)
{
    snprintf(out->kind, sizeof out->kind, "cpu");
    out->count = n;
    for (int i = 0; i < n; i++)
        out->ordinals[i] = i;
}

static void set_all_gpus(struct train_device_spec *out, int n)
{
    snprintf(out->kind, sizeof out->kind, "cuda");
    out->count = n > TRAIN_DEVICE_MAX_REPLICAS ? TRAIN_DEVICE_MAX_REPLICAS : n;
    for (int i = 0; i < out->count; i++)
        out->ordinals[i] = i;
}

int train_device_spec_parse(const char *text, struct train_device_spec *out, struct sl_error *err)
{
    memset(out, 0, sizeof *out);
    if (text == NULL || strcmp(text, "auto") == 0) {
        int g = train_device_count("cuda");
        if (g > 0)
            set_all_gpus(out, g);
        else
            set_cpu(out, cpu_count());
        out->automatic = 1;
        return 0;
    }
    if (strcmp(text, "cpu") == 0) {
        set_cpu(out, cpu_count());
        return 0;
    }
    if (strncmp(text, "cpu:", 4) == 0) {
        long n;
        if (parse_int(text + 4, text + strlen(text), TRAIN_DEVICE_MAX_REPLICAS, &n) != 0 || n < 1)
            return sl_error_set(err, SL_EINVAL, "--devices: cpu:N needs N in [1, %d], got '%s'",
                                TRAIN_DEVICE_MAX_REPLICAS, text);
        set_cpu(out, (int)n);
        return 0;
    }
    if (strcmp(text, "gpu") != 0 && strncmp(text, "gpu:", 4) != 0)
        return sl_error_set(err, SL_EINVAL, "--devices: expected auto, cpu, cpu:N, gpu or gpu:I,J,..., got '%s'", text);
    const struct train_backend *cuda;
    struct sl_error why = {0};
    if (train_backend_load("cuda", &cuda, &why) != 0)
        return sl_error_set(err, SL_EINVAL, "--devices: '%s' asks for GPUs, but %s", text, why.msg);
    int present = train_device_count("cuda");
    if (strcmp(text, "gpu") == 0) {
        if (present == 0)
            return sl_error_set(err, SL_EINVAL, "--devices: gpu: no GPU found (or no driver)");
        set_all_gpus(out, present);
        return 0;
    }
    snprintf(out->kind, sizeof out->kind, "cuda");
    const char *p = text + 4;
    for (;;) {
        const char *end = strchr(p, ',');
        if (end == NULL)
            end = p + strlen(p);
        const char *num = strncmp(p, "gpu:", 4) == 0 && p != text + 4 ? p + 4 : p;
        long g;
        if (parse_int(num, end, 1 << 20, &g) != 0)
            return sl_error_set(err, SL_EINVAL, "--devices: '%.*s' in '%s' is not a GPU number", (int)(end - p), p,
                                text);
        for (int i = 0; i < out->count; i++)
            if (out->ordinals[i] == (int)g)
                return sl_error_set(err, SL_EINVAL, "--devices: GPU %ld is listed twice in '%s'", g, text);
        if (out->count == TRAIN_DEVICE_MAX_REPLICAS)
            return sl_error_set(err, SL_EINVAL, "--devices: more than %d devices", TRAIN_DEVICE_MAX_REPLICAS);
        out->ordinals[out->count++] = (int)g;
        if (*end == '\0')
            break;
        p = end + 1;
    }
    /* the syntax first, then the machine */
    for (int i = 0; i < out->count; i++)
        if (out->ordinals[i] >= present)
            return sl_error_set(err, SL_EINVAL, "--devices: GPU %d is not present (%d found)", out->ordinals[i],
                                present);
    return 0;
}
