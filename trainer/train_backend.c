/* train_backend: the table of backends, and train_device.h's calls that
 * dispatch on a kind name (train_device_find, _count, _describe), so the
 * device layer itself needs no list. Each backend defines its tables in
 * its own file. The CUDA ones (train_device_cuda.c, train_coll_nccl.c,
 * train_loop_cuda.c) are compiled only when CMake finds CUDA and NCCL, and
 * then into a module of their own, libsluice-cuda.so
 * (train_cuda_module.h), loaded here the first time the "cuda" row is
 * asked for; the trainer's one #ifdef SLUICE_HAVE_CUDA is at that load.
 *
 * Global state: the "cuda" row and the reason it is missing are written
 * once, under pthread_once, and only read after it (any thread).
 */
#include "train_backend.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sl_version.h"
#include "train_cuda_module.h"
#include "train_device_int.h"

static struct train_backend backends[] = {
    {.kind = "cpu", .device = &train__device_cpu, .coll = NULL, .model = NULL},
    {.kind = "cuda", .device = NULL, .coll = NULL, .model = NULL}, /* filled by load_cuda */
};

static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static const struct train_cuda_module *cuda_preset; /* train_backend_use_cuda's, read by load_cuda */
static int cuda_loaded;                             /* backends[1] is filled */
static char cuda_why[SL_ERROR_MSG_MAX - 64];        /* why not, when it is not */

void train_backend_use_cuda(const struct train_cuda_module *m)
{
    cuda_preset = m;
}

#ifdef SLUICE_HAVE_CUDA
/* Where the module is, beside this program: the program's directory
 * (/proc/self/exe) + SLUICE_CUDA_MODULE_DIR (BINDIR/../LIBDIR/sluice, the
 * layout of an install and of the build tree), or that directory itself
 * when absolute. 0, or -1 when the path cannot be made. */
static int module_path(char *out, size_t n)
{
    const char *dir = SLUICE_CUDA_MODULE_DIR;
    if (dir[0] == '/')
        return snprintf(out, n, "%s/%s", dir, TRAIN_CUDA_MODULE_FILE) < (int)n ? 0 : -1;
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0)
        return -1;
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    return snprintf(out, n, "%s/%s/%s", exe, dir, TRAIN_CUDA_MODULE_FILE) < (int)n ? 0 : -1;
}

static const struct train_cuda_module *open_module(void)
{
    /* the module beside the program when it is there (its own dlerror if
     * it cannot be loaded: a library it needs missing), else the dynamic
     * loader's search for the bare name (LD_LIBRARY_PATH, the system's
     * directories). RTLD_LOCAL: the module's symbols stay its own; never
     * closed, as the CUDA runtime registers exit handlers from it. */
    char path[PATH_MAX + 64];
    int beside = module_path(path, sizeof path) == 0;
    void *h;
    if (beside && access(path, F_OK) == 0) {
        if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL) {
            snprintf(cuda_why, sizeof cuda_why, "the CUDA backend module could not be loaded: %s", dlerror());
            return NULL;
        }
    } else if ((h = dlopen(TRAIN_CUDA_MODULE_FILE, RTLD_NOW | RTLD_LOCAL)) == NULL) {
        const char *e = dlerror();
        if (beside) {
            *strrchr(path, '/') = '\0';
            /* a message of at most 1 KiB: the path's first 512 bytes */
            snprintf(cuda_why, sizeof cuda_why,
                     "the CUDA backend module could not be loaded: %.256s (looked in "
                     "%.512s, then LD_LIBRARY_PATH and the system's directories)",
                     e, path);
        } else
            snprintf(cuda_why, sizeof cuda_why, "the CUDA backend module could not be loaded: %s", e);
        return NULL;
    }
    void *sym = dlsym(h, TRAIN_CUDA_MODULE_SYMBOL);
    if (sym == NULL) {
        snprintf(cuda_why, sizeof cuda_why, "the CUDA backend module %s is not one: %s", TRAIN_CUDA_MODULE_FILE,
                 dlerror());
        dlclose(h);
        return NULL;
    }
    train_cuda_module_fn fn;
    memcpy(&fn, &sym, sizeof fn); /* dlsym's object pointer to the function it names (POSIX) */
    return fn();
}
#endif

static void load_cuda(void)
{
#ifdef SLUICE_HAVE_CUDA
    const struct train_cuda_module *m = cuda_preset != NULL ? cuda_preset : open_module();
    if (m == NULL)
        return;
    if (m->abi != TRAIN_CUDA_MODULE_ABI || m->version == NULL || strcmp(m->version, SL_VERSION) != 0 ||
        m->device_ops_size != sizeof(struct train_device_ops) ||
        m->coll_ops_size != sizeof(struct train_coll_device_ops) || m->device == NULL || m->coll == NULL ||
        m->model == NULL) {
        snprintf(cuda_why, sizeof cuda_why,
                 "the CUDA backend module %s is from another sluice (version %s, ABI %d; this is %s, ABI %d)",
                 TRAIN_CUDA_MODULE_FILE, m->version != NULL ? m->version : "(none)", m->abi, SL_VERSION,
                 TRAIN_CUDA_MODULE_ABI);
        return;
    }
    backends[1].device = m->device;
    backends[1].coll = m->coll;
    backends[1].model = m->model;
    cuda_loaded = 1;
#else
    snprintf(cuda_why, sizeof cuda_why,
             "this build has no CUDA backend (CUDA and NCCL were not found at configure time)");
#endif
}

int train_backend_load(const char *kind, const struct train_backend **out, struct sl_error *err)
{
    *out = NULL;
    if (kind != NULL && strcmp(kind, "cpu") == 0) {
        *out = &backends[0];
        return 0;
    }
    if (kind == NULL || strcmp(kind, "cuda") != 0)
        return sl_error_set(err, SL_EINVAL, "unknown device kind '%s' (cpu or cuda)", kind ? kind : "(null)");
    pthread_once(&cuda_once, load_cuda);
    if (!cuda_loaded)
        return sl_error_set(err, SL_EINVAL, "%s", cuda_why);
    *out = &backends[1];
    return 0;
}

const struct train_backend *train_backend_find(const char *kind)
{
    const struct train_backend *b;
    struct sl_error ignored = {0};
    return train_backend_load(kind, &b, &ignored) == 0 ? b : NULL;
}

size_t train_backend_count(void)
{
    pthread_once(&cuda_once, load_cuda);
    return cuda_loaded ? 2 : 1;
}

const struct train_backend *train_backend_at(size_t i)
{
    return i < train_backend_count() ? &backends[i] : NULL;
}

int train_backend_group_id(const struct train_backend *b, char out[TRAIN_COLL_ID_BYTES], struct sl_error *err)
{
    if (b == NULL || b->coll == NULL)
        return sl_error_set(err, SL_EINVAL, "'%s' devices have no group collectives in this build",
                            b != NULL ? b->kind : "(unknown)");
    return b->coll->group_id(out, err);
}

const struct train_device_ops *train_device_find(const char *kind)
{
    const struct train_backend *b = train_backend_find(kind);
    return b != NULL ? b->device : NULL;
}

int train_device_count(const char *kind)
{
    const struct train_device_ops *ops = train_device_find(kind);
    return ops == NULL ? 0 : ops->count();
}

int train_device_describe(const char *kind, int ordinal, char *buf, size_t n, struct sl_error *err)
{
    const struct train_backend *b;
    int rc = train_backend_load(kind, &b, err);
    if (rc == 0)
        rc = b->device->describe(ordinal, buf, n, err);
    if (rc != 0 && n > 0)
        snprintf(buf, n, "%s %d: unavailable", kind ? kind : "(null)", ordinal);
    return rc;
}
