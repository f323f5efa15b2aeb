/* train_cuda_inc: the one place sluice includes the CUDA runtime and NCCL
 * headers. nccl.h declares a few functions with empty parentheses
 * (ncclGroupStart(), ncclGroupEnd(), ncclResetDebugInit()), which our
 * -Wstrict-prototypes -Werror rejects; the warning is silenced for these
 * includes only, and stays on for our own code. Include only from code built
 * when SLUICE_HAVE_CUDA is set. */
#ifndef TRAIN_CUDA_INC_H
#define TRAIN_CUDA_INC_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <cuda_runtime.h>
#include <nccl.h>
#pragma GCC diagnostic pop

#endif
