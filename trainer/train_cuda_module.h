/* train_cuda_module: the CUDA/NCCL backend as a loadable module.
 *
 * The "cuda" row of the backend table (train_backend.h: its device table,
 * its "nccl" collective and the loop's GPU model) lives in a shared object
 * of its own, libsluice-cuda.so, the only part of sluice linked against
 * libcudart and libnccl. The trainer and every other program link the CPU
 * backend only, so they start on a machine without the CUDA runtime or
 * NCCL; train_backend.c dlopen()s the module the first time a "cuda" device
 * is asked for (--devices gpu..., or `auto` probing for GPUs) and reports
 * dlerror() when it cannot (the module, or a library it needs, missing).
 *
 * Where it is looked for: beside the program, in BINDIR/../LIBDIR/sluice
 * from the program's own directory (/proc/self/exe; SLUICE_CUDA_MODULE_DIR),
 * where `cmake --install` puts it and where the build tree has it
 * (BUILD/LIBDIR/sluice, two levels from BUILD/trainer/sluice-trainer and
 * BUILD/tests/...); when it is not there, dlopen's search for the bare
 * name TRAIN_CUDA_MODULE_FILE (LD_LIBRARY_PATH, the system's directories).
 * The program's RUNPATH is not relied on: a sanitizer's dlopen interceptor
 * makes the loader search the runtime's instead.
 *
 * The module exports one symbol, TRAIN_CUDA_MODULE_SYMBOL, a function
 * returning its struct train_cuda_module. The tables' layouts are the
 * trainer's own headers, so a module is used only by a trainer of the same
 * version and ABI (checked at load; a mismatch is refused, naming both).
 * The module carries its own copies of the small host-side pieces it uses
 * (sl_alloc, sl_error, train_model's initial weights, train_coll's failure
 * record), each without global state that the program's copies would need
 * to share.
 */
#ifndef TRAIN_CUDA_MODULE_H
#define TRAIN_CUDA_MODULE_H

#include <stddef.h>

struct train_device_ops;
struct train_coll_device_ops;
struct train_loop_dev_ops;

/* Bumped whenever a table's layout or contract changes. */
#define TRAIN_CUDA_MODULE_ABI 1
#define TRAIN_CUDA_MODULE_FILE "libsluice-cuda.so"
#define TRAIN_CUDA_MODULE_SYMBOL "sluice_cuda_module_v1"

struct train_cuda_module {
    int abi;                                              /* TRAIN_CUDA_MODULE_ABI as built */
    const char *version;                                  /* the sluice version it was built from (SL_VERSION) */
    size_t device_ops_size, coll_ops_size, loop_ops_size; /* sizeof of the three tables as built */
    const struct train_device_ops *device;                /* "cuda" */
    const struct train_coll_device_ops *coll;             /* "nccl" */
    const struct train_loop_dev_ops *model;               /* the loop's GPU model */
};

/* The module's description, defined in train_cuda_module.c (built only
 * with CUDA and NCCL): the module exports it through
 * TRAIN_CUDA_MODULE_SYMBOL; the GPU tests, which link the CUDA code into
 * their own program to call its internals, hand it to
 * train_backend_use_cuda. */
extern const struct train_cuda_module train__cuda_module;
typedef const struct train_cuda_module *(*train_cuda_module_fn)(void);

/* Use m as the "cuda" backend instead of loading the module (m borrowed
 * for the program's life). Call before the first look-up of "cuda" (the
 * first train_backend_find, train_device_find or train_device_count), in
 * one thread; later calls change nothing. */
void train_backend_use_cuda(const struct train_cuda_module *m);

#endif
