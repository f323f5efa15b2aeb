/* train_device_spec_parse: the trainer's --devices option, on this build's
 * backends and this machine's devices (GPU forms are checked against
 * whatever train_device_count("cuda") says here: 0 on a machine without a
 * GPU or without the cuda backend). */
#include <string.h>
#include <unistd.h>

#include "sl_test.h"
#include "train_device.h"

static struct train_device_spec spec;

START_TEST(test_cpu_forms)
{
    struct sl_error err = {0};
    ck_assert_int_eq(train_device_spec_parse("cpu:4", &spec, &err), 0);
    ck_assert_str_eq(spec.kind, "cpu");
    ck_assert_int_eq(spec.count, 4);
    ck_assert_int_eq(spec.ordinals[3], 3);
    ck_assert_int_eq(spec.automatic, 0);
    ck_assert_int_eq(train_device_spec_parse("cpu:1024", &spec, &err), 0);
    ck_assert_int_eq(spec.count, 1024);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    ck_assert_int_eq(train_device_spec_parse("cpu", &spec, &err), 0);
    ck_assert_int_eq(spec.count, cores < 1 ? 1 : cores > 1024 ? 1024 : (int)cores);
}
END_TEST

START_TEST(test_auto)
{
    struct sl_error err = {0};
    int gpus = train_device_count("cuda");
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    ck_assert_int_eq(train_device_spec_parse("auto", &spec, &err), 0);
    ck_assert_int_eq(spec.automatic, 1);
    if (gpus > 0) {
        ck_assert_str_eq(spec.kind, "cuda");
        ck_assert_int_eq(spec.count, gpus);
    } else {
        ck_assert_str_eq(spec.kind, "cpu");
        ck_assert_int_eq(spec.count, cores < 1 ? 1 : cores > 1024 ? 1024 : (int)cores);
    }
    ck_assert_int_eq(train_device_spec_parse(NULL, &spec, &err), 0);
    ck_assert_int_eq(spec.automatic, 1);
}
END_TEST

START_TEST(test_gpu_forms)
{
    struct sl_error err = {0};
    int gpus = train_device_count("cuda");
    if (train_device_find("cuda") == NULL) {
        ck_assert_int_eq(train_device_spec_parse("gpu:0,1", &spec, &err), SL_EINVAL);
        ck_assert_str_eq(err.msg, "--devices: 'gpu:0,1' asks for GPUs, but this build has no CUDA backend "
                                  "(CUDA and NCCL were not found at configure time)");
        return;
    }
    if (gpus >= 2) {
        ck_assert_int_eq(train_device_spec_parse("gpu:1,0", &spec, &err), 0);
        ck_assert_str_eq(spec.kind, "cuda");
        ck_assert_int_eq(spec.count, 2);
        ck_assert_int_eq(spec.ordinals[0], 1);
        ck_assert_int_eq(spec.ordinals[1], 0);
        ck_assert_int_eq(train_device_spec_parse("gpu:0,gpu:1", &spec, &err), 0);
        ck_assert_int_eq(spec.count, 2);
        ck_assert_int_eq(train_device_spec_parse("gpu:0,0", &spec, &err), SL_EINVAL);
        ck_assert_str_eq(err.msg, "--devices: GPU 0 is listed twice in 'gpu:0,0'");
    }
    if (gpus == 0) {
        ck_assert_int_eq(train_device_spec_parse("gpu", &spec, &err), SL_EINVAL);
        ck_assert_str_eq(err.msg, "--devices: gpu: no GPU found (or no driver)");
    }
    ck_assert_int_eq(train_device_spec_parse("gpu:4096", &spec, &err), SL_EINVAL);
    ck_assert(strstr(err.msg, "--devices: GPU 4096 is not present (") == err.msg);
    ck_assert_int_eq(train_device_spec_parse("gpu:x", &spec, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "--devices: 'x' in 'gpu:x' is not a GPU number");
    ck_assert_int_eq(train_device_spec_parse("gpu:0,", &spec, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "--devices: '' in 'gpu:0,' is not a GPU number");
}
END_TEST

START_TEST(test_errors)
{
    static const struct {
        const char *text, *msg;
    } cases[] = {
        {"cpu:0", "--devices: cpu:N needs N in [1, 1024], got 'cpu:0'"},
        {"cpu:1025", "--devices: cpu:N needs N in [1, 1024], got 'cpu:1025'"},
        {"cpu:", "--devices: cpu:N needs N in [1, 1024], got 'cpu:'"},
        {"cpu:-1", "--devices: cpu:N needs N in [1, 1024], got 'cpu:-1'"},
        {"cpu:2x", "--devices: cpu:N needs N in [1, 1024], got 'cpu:2x'"},
        {"cpu:99999999999999999999", "--devices: cpu:N needs N in [1, 1024], got 'cpu:99999999999999999999'"},
        {"tpu:1", "--devices: expected auto, cpu, cpu:N, gpu or gpu:I,J,..., got 'tpu:1'"},
        {"", "--devices: expected auto, cpu, cpu:N, gpu or gpu:I,J,..., got ''"},
        {"gpus", "--devices: expected auto, cpu, cpu:N, gpu or gpu:I,J,..., got 'gpus'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sl_error err = {0};
        ck_assert_int_eq(train_device_spec_parse(cases[i].text, &spec, &err), SL_EINVAL);
        ck_assert_str_eq(err.msg, cases[i].msg);
    }
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_device_spec");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_cpu_forms);
    tcase_add_test(tc, test_auto);
    tcase_add_test(tc, test_gpu_forms);
    tcase_add_test(tc, test_errors);
    suite_add_tcase(s, tc);
    return s;
}
