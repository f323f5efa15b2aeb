/* train_cuda_module: what libsluice-cuda.so hands the trainer (see
 * train_cuda_module.h): the "cuda" device table, the "nccl" collective and
 * the loop's GPU model, with the ABI and version they were built with.
 * Built only when CMake finds CUDA and NCCL. */
#include "train_cuda_module.h"

#include "sl_version.h"
#include "train_coll.h"
#include "train_device_int.h"
#include "train_loop_dev.h"

const struct train_cuda_module train__cuda_module = {
    .abi = TRAIN_CUDA_MODULE_ABI,
    .version = SL_VERSION,
    .device_ops_size = sizeof(struct train_device_ops),
    .coll_ops_size = sizeof(struct train_coll_device_ops),
    .loop_ops_size = sizeof(struct train_loop_dev_ops),
    .device = &train__device_cuda,
    .coll = &train__coll_nccl,
    .model = &train__loop_cuda,
};

/* The module's one exported symbol (the version script hides the rest). */
__attribute__((visibility("default"))) const struct train_cuda_module *sluice_cuda_module_v1(void);

const struct train_cuda_module *sluice_cuda_module_v1(void)
{
    return &train__cuda_module;
}
