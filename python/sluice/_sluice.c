/* _sluice: the Python binding of libsluice (client/include/sluice/client.h).
 *
 * sluice.Client wraps a struct sluice_client. Each step is taken with
 * sluice_client_next_step and at once kept (sluice_client_keep_step): the
 * kept step owns its memory (a received frame moved over, a shared-memory
 * body copied out once), so the client's credits go back to the feeders at
 * once while the step's numpy arrays live as long as Python keeps them. An
 * internal _Memory object owns the kept step and is the base of every
 * array over it: the memory goes when the last array does. With
 * lend=True the step is lent instead (sluice_client_lend_step): no copy,
 * read-only arrays over the feeder's shared memory, whose credits wait
 * until the _Memory goes (its dealloc may run in any thread, holding the
 * GIL; the C client sees it at its next call).
 *
 * The GIL is released while the client waits for a step (and while it
 * opens). A wait in the main thread ends on SIGINT: a handler installed
 * for the wait's length sets the client's stop flag and calls Python's
 * own, and the KeyboardInterrupt is raised when the wait returns.
 *
 * A client belongs to one thread at a time: a second thread's call while
 * one waits raises RuntimeError rather than entering the C client twice.
 * It belongs to one process too: in a child of fork() (multiprocessing's
 * fork start method) libsluice refuses every call that would hand out
 * data, raised here as sluice.Error ("client used after fork(): ..."),
 * and close drops the child's copy only; kept steps own their memory and
 * stay readable in both processes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "sluice/client.h"

static PyObject *Error;       /* sluice.Error */
static PyTypeObject StepType; /* sluice.Step, a struct sequence */
static pthread_t main_thread; /* the importing thread: Python's main thread */

/* ---- errors ---------------------------------------------------------- */

static PyObject *raise_code(int code, const char *message)
{
    PyObject *exc = PyObject_CallFunction(Error, "s", message);
    if (exc == NULL)
        return NULL;
    PyObject *c = PyLong_FromLong(code);
    PyObject *n = PyUnicode_FromString(sluice_code_name(code));
    if (c == NULL || n == NULL || PyObject_SetAttrString(exc, "code", c) != 0 ||
        PyObject_SetAttrString(exc, "code_name", n) != 0) {
        Py_XDECREF(c);
        Py_XDECREF(n);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(c);
    Py_DECREF(n);
    PyErr_SetObject(Error, exc);
    Py_DECREF(exc);
    return NULL;
}

/* ---- SIGINT during a wait ------------------------------------------- */

static volatile sig_atomic_t *waiting_stop; /* the waiting client's flag */
static struct sigaction python_sigint;      /* the handler the wait displaced */

static void on_sigint(int sig)
{
    if (waiting_stop != NULL)
        *waiting_stop = 1;
    if (python_sigint.sa_handler != SIG_DFL && python_sigint.sa_handler != SIG_IGN)
        python_sigint.sa_handler(sig);
}

/* Before a wait: in the main thread, SIGINT sets `stop` too. Returns
 * whether a handler was installed (pass to wait_end). */
static int wait_begin(volatile sig_atomic_t *stop)
{
    *stop = 0;
    if (!pthread_equal(pthread_self(), main_thread))
        return 0;
    struct sigaction cur;
    if (sigaction(SIGINT, NULL, &cur) != 0 || cur.sa_handler == SIG_IGN || (cur.sa_flags & SA_SIGINFO))
        return 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    python_sigint = cur;
    waiting_stop = stop;
    if (sigaction(SIGINT, &sa, NULL) != 0) {
        waiting_stop = NULL;
        return 0;
    }
    return 1;
}

static void wait_end(int installed)
{
    if (!installed)
        return;
    sigaction(SIGINT, &python_sigint, NULL);
    waiting_stop = NULL;
}

/* ---- _Memory: owns a kept step -------------------------------------- */

typedef struct {
    PyObject_HEAD struct sluice_step *step;
} Memory;

static void memory_dealloc(Memory *m)
{
    sluice_step_free(m->step);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static PyTypeObject MemoryType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice._sluice._Memory",
    .tp_basicsize = sizeof(Memory),
    .tp_dealloc = (destructor)memory_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The memory of a kept step (the base of its arrays).",
};

/* ---- Client ---------------------------------------------------------- */

typedef struct {
    PyObject_HEAD struct sluice_client *c;
    volatile sig_atomic_t stop;
    int busy; /* a call is inside the C client */
    int over; /* the stream ended: 1 at its end, 2 with an error (last) */
    int lend; /* steps lent, not kept: read-only arrays over the feeders' memory */
    struct sluice_error last;
    PyObject *names; /* tuple of str: the tensors' names of the last step (reused) */
} Client;

static int client_enter(Client *self)
{
    if (self->c == NULL) {
        PyErr_SetString(PyExc_ValueError, "the client is closed");
        return -1;
    }
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the client is in use by another thread (a client belongs to one "
                                            "thread at a time)");
        return -1;
    }
    self->busy = 1;
    return 0;
}

/* An int option: absent (None) keeps `*out`; negative or above `max`:
 * ValueError naming it. */
static int int_option(PyObject *v, const char *name, long long max, long long *out)
{
    if (v == NULL || v == Py_None)
        return 0;
    if (PyBool_Check(v) || !PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s: an int, not %s", name, Py_TYPE(v)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (overflow != 0 || x < 0 || x > max) {
        PyErr_Format(PyExc_ValueError, "%s: %S is out of range (0 to %lld)", name, v, max);
        return -1;
    }
    *out = x;
    return 0;
}

/* transition=(from_workers, from_replicas, from_epoch, from_step), or None:
 * four ints, each at most what its field holds (TypeError, ValueError);
 * their ranges are the library's to check (sluice.Error naming the field). */
static int transition_option(PyObject *v, struct sluice_options *o)
{
    static const char *const names[4] = {"transition[0] (from_workers)", "transition[1] (from_replicas)",
                                         "transition[2] (from_epoch)", "transition[3] (from_step)"};
    if (v == NULL || v == Py_None)
        return 0;
    if (!PyTuple_Check(v) && !PyList_Check(v)) {
        PyErr_Format(PyExc_TypeError,
                     "transition: a tuple (from_workers, from_replicas, from_epoch, from_step), not %s",
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    if (PySequence_Size(v) != 4) {
        PyErr_Format(PyExc_ValueError,
                     "transition: %zd values; it is (from_workers, from_replicas, from_epoch, from_step)",
                     PySequence_Size(v));
        return -1;
    }
    long long x[4] = {0, 0, 0, 0};
    for (int i = 0; i < 4; i++) {
        PyObject *it = PySequence_GetItem(v, i);
        if (it == NULL)
            return -1;
        int bad = it == Py_None; /* None is no value here */
        if (bad)
            PyErr_Format(PyExc_TypeError, "%s: an int, not NoneType", names[i]);
        else
            bad = int_option(it, names[i], i < 2 ? (long long)UINT32_MAX : 1LL << 62, &x[i]) != 0;
        Py_DECREF(it);
        if (bad)
            return -1;
    }
    o->transition.from_workers = (uint32_t)x[0];
    o->transition.from_replicas = (uint32_t)x[1];
    o->transition.from_epoch = (uint64_t)x[2];
    o->transition.from_step = (uint64_t)x[3];
    return 0;
}

/* A str option without NUL bytes (borrowed UTF-8 while `v` lives). */
static int str_option(PyObject *v, const char *name, const char **out)
{
    if (!PyUnicode_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s: a str, not %s", name, Py_TYPE(v)->tp_name);
        return -1;
    }
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(v, &n);
    if (s == NULL)
        return -1;
    if ((size_t)n != strlen(s)) {
        PyErr_Format(PyExc_ValueError, "%s: contains a NUL character", name);
        return -1;
    }
    *out = s;
    return 0;
}

/* A sequence of str as an array of UTF-8 pointers (into `*keep`, a list
 * the caller releases). At most `max` entries. */
static const char **str_list(PyObject *v, const char *name, size_t max, size_t *n, PyObject **keep)
{
    *keep = PySequence_Fast(v, "");
    if (*keep == NULL || PyUnicode_Check(v)) {
        PyErr_Clear();
        Py_CLEAR(*keep);
        PyErr_Format(PyExc_TypeError, "%s: a list of str", name);
        return NULL;
    }
    Py_ssize_t len = PySequence_Fast_GET_SIZE(*keep);
    if (len == 0 || (size_t)len > max) {
        PyErr_Format(PyExc_ValueError, "%s: %zd entries (1 to %zu)", name, len, max);
        return NULL;
    }
    const char **out = PyMem_Calloc((size_t)len, sizeof *out);
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s[%zd]", name, i);
        if (str_option(PySequence_Fast_GET_ITEM(*keep, i), what, &out[i]) != 0) {
            PyMem_Free(out);
            return NULL;
        }
    }
    *n = (size_t)len;
    return out;
}

/* The numeric keyword options, checked, into `o` (worker to takeover_ms,
 * resume_seq); -1 with the exception set. */
static int client_numbers(PyObject *worker, PyObject *workers, PyObject *replicas, PyObject *credits, PyObject *hb,
                          PyObject *to, PyObject *cto, PyObject *rc_ms, PyObject *tk, PyObject *resume,
                          struct sluice_options *o)
{
    long long w = 0, nw = 1, r = 1, cr = 0, hbv = 0, tov = 0, ctov = 0, rcv = 0, tkv = 0, rs = 0;
    if (int_option(worker, "worker", UINT32_MAX - 1, &w) != 0 || int_option(workers, "workers", UINT32_MAX, &nw) != 0 ||
        int_option(replicas, "replicas", SLUICE_MAX_REPLICAS, &r) != 0 ||
        int_option(credits, "credits", SLUICE_MAX_CREDITS, &cr) != 0 ||
        int_option(hb, "heartbeat_ms", SLUICE_MAX_HEARTBEAT_MS, &hbv) != 0 ||
        int_option(to, "timeout_ms", SLUICE_MAX_TIMEOUT_MS, &tov) != 0 ||
        int_option(cto, "connect_timeout_ms", SLUICE_MAX_WAIT_MS, &ctov) != 0 ||
        int_option(rc_ms, "reconnect_ms", SLUICE_MAX_WAIT_MS, &rcv) != 0 ||
        int_option(tk, "takeover_ms", SLUICE_MAX_WAIT_MS, &tkv) != 0 ||
        int_option(resume, "resume_seq", LLONG_MAX, &rs) != 0)
        return -1;
    /* the least nonzero times, as the library words them */
    if ((hbv != 0 && hbv < SLUICE_MIN_HEARTBEAT_MS) || (tov != 0 && tov < SLUICE_MIN_TIMEOUT_MS)) {
        int hb_bad = hbv != 0 && hbv < SLUICE_MIN_HEARTBEAT_MS;
        PyErr_Format(PyExc_ValueError, "%s: %lld is out of range (0 or %d to %d)",
                     hb_bad ? "heartbeat_ms" : "timeout_ms", hb_bad ? hbv : tov,
                     hb_bad ? SLUICE_MIN_HEARTBEAT_MS : SLUICE_MIN_TIMEOUT_MS,
                     hb_bad ? SLUICE_MAX_HEARTBEAT_MS : SLUICE_MAX_TIMEOUT_MS);
        return -1;
    }
    if (nw == 0 || r == 0) {
        PyErr_SetString(PyExc_ValueError, nw == 0 ? "workers: at least 1" : "replicas: at least 1");
        return -1;
    }
    if (w >= nw) {
        PyErr_Format(PyExc_ValueError, "worker %lld of %lld: the worker is 0 to workers - 1", w, nw);
        return -1;
    }
    if (rs % r != 0) {
        PyErr_Format(PyExc_ValueError, "resume_seq %lld: not a step's first piece (a multiple of replicas %lld)", rs,
                     r);
        return -1;
    }
    o->worker = (uint32_t)w;
    o->workers = (uint32_t)nw;
    o->replicas = (uint32_t)r;
    o->credits = (uint32_t)cr;
    o->heartbeat_ms = (int)hbv;
    o->timeout_ms = (int)tov;
    o->connect_timeout_ms = (int)ctov;
    o->reconnect_ms = (int)rcv;
    o->takeover_ms = (int)tkv;
    o->resume_seq = (uint64_t)rs;
    return 0;
}

static int client_init(Client *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"feeders",
                             "job",
                             "worker",
                             "workers",
                             "replicas",
                             "credits",
                             "heartbeat_ms",
                             "timeout_ms",
                             "connect_timeout_ms",
                             "reconnect_ms",
                             "takeover_ms",
                             "no_shm",
                             "resume_seq",
                             "curve_key",
                             "curve_server_keys",
                             "lend",
                             "metrics_listen",
                             "resume_epoch",
                             "reshape",
                             "transition",
                             NULL};
    PyObject *feeders = NULL, *job = NULL, *worker = NULL, *workers = NULL, *replicas = NULL, *credits = NULL,
             *hb = NULL, *to = NULL, *cto = NULL, *rc_ms = NULL, *tk = NULL, *resume = NULL, *ckey = NULL,
             *skeys = NULL, *mlisten = NULL, *repoch = NULL, *trans = NULL;
    int no_shm = 0, lend = 0, reshape = 0;
    if (self->c != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the client is already open");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$OOOOOOOOOpOOOpOOpO", kwlist, &feeders, &job, &worker, &workers,
                                     &replicas, &credits, &hb, &to, &cto, &rc_ms, &tk, &no_shm, &resume, &ckey, &skeys,
                                     &lend, &mlisten, &repoch, &reshape, &trans))
        return -1;
    struct sluice_options o;
    memset(&o, 0, sizeof o);
    if (client_numbers(worker, workers, replicas, credits, hb, to, cto, rc_ms, tk, resume, &o) != 0)
        return -1;
    /* resume_epoch: the feeders say where it starts; with resume_seq, refused (by the library) */
    long long re = 0;
    if (int_option(repoch, "resume_epoch", 1LL << 48, &re) != 0)
        return -1;
    o.resume_epoch = (uint64_t)re;
    o.reshape = reshape;
    if (transition_option(trans, &o) != 0)
        return -1;
    PyObject *keep_f = NULL, *keep_k = NULL;
    const char **fv = NULL, **kv = NULL;
    size_t nf = 0, nk = 0;
    int ret = -1;
    if (str_option(job, "job", &o.job) != 0)
        goto out;
    if ((fv = str_list(feeders, "feeders", 64, &nf, &keep_f)) == NULL)
        goto out;
    /* "localhost:5555" or "/run/f.sock": ZeroMQ wants the transport too */
    for (size_t j = 0; j < nf; j++)
        if (strstr(fv[j], "://") == NULL) {
            PyErr_Format(PyExc_ValueError,
                         "feeders[%zu]: '%s' is not a ZeroMQ endpoint (TRANSPORT://ADDRESS): did you mean %s%s?", j,
                         fv[j], fv[j][0] == '/' ? "ipc://" : "tcp://", fv[j]);
            goto out;
        }
    if (ckey != NULL && ckey != Py_None) {
        if (str_option(ckey, "curve_key", &o.curve_key) != 0)
            goto out;
        if (skeys == NULL || skeys == Py_None) {
            PyErr_SetString(PyExc_ValueError, "curve_key given without curve_server_keys (one per feeder)");
            goto out;
        }
        if ((kv = str_list(skeys, "curve_server_keys", 64, &nk, &keep_k)) == NULL)
            goto out;
        if (nk != nf) {
            PyErr_Format(PyExc_ValueError, "curve_server_keys: %zu entries for %zu feeders (one per feeder)", nk, nf);
            goto out;
        }
        o.curve_server_keys = kv;
    } else if (skeys != NULL && skeys != Py_None) {
        PyErr_SetString(PyExc_ValueError, "curve_server_keys given without curve_key");
        goto out;
    }
    if (mlisten != NULL && mlisten != Py_None && str_option(mlisten, "metrics_listen", &o.metrics_listen) != 0)
        goto out;
    o.feeders = fv;
    o.nfeeders = nf;
    o.no_shm = no_shm;
    o.stop = &self->stop;
    self->lend = lend;
    struct sluice_error e;
    struct sluice_client *c = NULL;
    int rc;
    self->busy = 1;
    int installed = wait_begin(&self->stop);
    Py_BEGIN_ALLOW_THREADS rc = sluice_client_open(&c, &o, &e);
    Py_END_ALLOW_THREADS wait_end(installed);
    self->busy = 0;
    if (rc != 0) {
        if (!(self->stop && PyErr_CheckSignals() != 0))
            raise_code(rc, e.message);
        goto out;
    }
    self->c = c;
    self->over = 0; /* a client opened again (load_state_dict) starts a new stream */
    ret = 0;
out:
    PyMem_Free(fv);
    PyMem_Free(kv);
    Py_XDECREF(keep_f);
    Py_XDECREF(keep_k);
    return ret;
}

static void client_close_c(Client *self)
{
    if (self->c != NULL) {
        struct sluice_client *c = self->c;
        self->c = NULL;
        Py_BEGIN_ALLOW_THREADS sluice_client_close(c);
        Py_END_ALLOW_THREADS
    }
}

static void client_dealloc(Client *self)
{
    if (self->c != NULL && !self->busy)
        client_close_c(self);
    Py_XDECREF(self->names);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *client_close(Client *self, PyObject *Py_UNUSED(ignored))
{
    if (self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the client is in use by another thread");
        return NULL;
    }
    client_close_c(self);
    Py_RETURN_NONE;
}

/* The stream failed with rc: remembered (raised again by later calls);
 * KeyboardInterrupt when SIGINT ended the wait, else sluice.Error. */
static PyObject *stream_failed(Client *self, int rc, const struct sluice_error *e)
{
    self->over = 2;
    self->last = *e;
    self->last.code = rc;
    if (self->stop && PyErr_CheckSignals() != 0)
        return NULL;
    return raise_code(rc, e->message);
}

/* numpy has no bfloat16: such a tensor arrives as uint16 (its bits), of
 * this dtype: uint16 with metadata {"sluice_dtype": "bfloat16"}, which
 * sluice.torch turns into torch.bfloat16 (docs/python.md). */
static PyArray_Descr *bf16_descr;

static int make_bf16_descr(void)
{
    PyObject *np = PyImport_ImportModule("numpy"), *fn = np != NULL ? PyObject_GetAttrString(np, "dtype") : NULL;
    PyObject *args = Py_BuildValue("(s)", "<u2"),
             *kw = Py_BuildValue("{s:{s:s}}", "metadata", "sluice_dtype", "bfloat16");
    PyObject *d = fn != NULL && args != NULL && kw != NULL ? PyObject_Call(fn, args, kw) : NULL;
    Py_XDECREF(np);
    Py_XDECREF(fn);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    if (d == NULL)
        return -1;
    if (!PyArray_DescrCheck(d)) {
        Py_DECREF(d);
        PyErr_SetString(PyExc_TypeError, "numpy.dtype did not make a dtype");
        return -1;
    }
    bf16_descr = (PyArray_Descr *)d;
    return 0;
}

/* The numpy type of a sluice dtype, and its bytes a value; -1 for a dtype
 * this binding does not know (never read as another). */
static int npy_type(int dtype, uint64_t *size)
{
    switch (dtype) {
    case SLUICE_INT64: *size = 8; return NPY_INT64;
    case SLUICE_FLOAT32: *size = 4; return NPY_FLOAT32;
    case SLUICE_UINT8:
    case SLUICE_BYTES: *size = 1; return NPY_UINT8; /* bytes: the values concatenated */
    case SLUICE_FLOAT16: *size = 2; return NPY_FLOAT16;
    case SLUICE_BFLOAT16: *size = 2; return NPY_UINT16; /* with bf16_descr */
    default: return -1;
    }
}

static PyArray_Descr *descr_of(int dtype, int type)
{
    if (dtype == SLUICE_BFLOAT16) {
        Py_INCREF(bf16_descr);
        return bf16_descr;
    }
    return PyArray_DescrFromType(type);
}

/* The tensor's name as a str, reused from the last step when equal. */
static PyObject *name_of(Client *self, size_t i, const char *name)
{
    if (self->names != NULL && (Py_ssize_t)i < PyTuple_GET_SIZE(self->names)) {
        PyObject *s = PyTuple_GET_ITEM(self->names, i);
        const char *u = PyUnicode_AsUTF8(s);
        if (u != NULL && strcmp(u, name) == 0) {
            Py_INCREF(s);
            return s;
        }
    }
    PyObject *s = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace");
    if (s == NULL)
        return NULL;
    /* remember it for the next steps */
    Py_ssize_t n = self->names != NULL ? PyTuple_GET_SIZE(self->names) : 0;
    if ((Py_ssize_t)i >= n) {
        PyObject *t = PyTuple_New((Py_ssize_t)i + 1);
        if (t == NULL) {
            Py_DECREF(s);
            return NULL;
        }
        for (Py_ssize_t k = 0; k < (Py_ssize_t)i + 1; k++) {
            PyObject *v = k < n ? PyTuple_GET_ITEM(self->names, k) : Py_None;
            Py_INCREF(v);
            PyTuple_SET_ITEM(t, k, v);
        }
        Py_XSETREF(self->names, t);
    }
    PyObject *old = PyTuple_GET_ITEM(self->names, i);
    Py_INCREF(s);
    PyTuple_SET_ITEM(self->names, i, s);
    Py_DECREF(old);
    return s;
}

/* One piece as {name: ndarray}; the arrays' base is `mem`. */
static PyObject *piece_dict(Client *self, const struct sluice_piece *p, PyObject *mem)
{
    PyObject *d = PyDict_New();
    if (d == NULL)
        return NULL;
    for (size_t i = 0; i < p->ntensors; i++) {
        const struct sluice_tensor *t = &p->tensors[i];
        npy_intp dims[NPY_MAXDIMS];
        if (t->rank < 0 || t->rank > NPY_MAXDIMS) {
            Py_DECREF(d);
            return raise_code(SLUICE_EPROTO, "a tensor's rank is out of range");
        }
        uint64_t items = 1;
        for (int k = 0; k < t->rank; k++) {
            if (t->shape[k] < 0) {
                Py_DECREF(d);
                return raise_code(SLUICE_EPROTO, "a tensor's shape is negative");
            }
            dims[k] = (npy_intp)t->shape[k];
            items *= (uint64_t)t->shape[k];
        }
        npy_intp flat[1];
        if (t->dtype == SLUICE_BYTES) {
            /* variable-length values: their bytes concatenated, one flat
             * uint8 array (the shape counts values; NAME.offsets splits
             * them) */
            if (t->bytes > (uint64_t)NPY_MAX_INTP) {
                Py_DECREF(d);
                return raise_code(SLUICE_EPROTO, "a bytes tensor is too large");
            }
            flat[0] = (npy_intp)t->bytes;
            items = t->bytes;
        }
        int rank = t->dtype == SLUICE_BYTES ? 1 : t->rank;
        npy_intp *shape = t->dtype == SLUICE_BYTES ? flat : dims;
        uint64_t size = 0;
        int type = npy_type(t->dtype, &size);
        if (type < 0) {
            Py_DECREF(d);
            PyErr_Format(Error, "tensor '%s': dtype %d is not known to this binding", t->name, t->dtype);
            return NULL;
        }
        if (items * size != t->bytes) {
            Py_DECREF(d);
            PyErr_Format(Error, "tensor '%s': %llu bytes for a shape of %llu values of %llu bytes", t->name,
                         (unsigned long long)t->bytes, (unsigned long long)items, (unsigned long long)size);
            return NULL;
        }
        PyObject *a;
        if (t->data != NULL) {
            a = PyArray_NewFromDescr(&PyArray_Type, descr_of(t->dtype, type), rank, shape, NULL, (void *)t->data,
                                     NPY_ARRAY_C_CONTIGUOUS | (self->lend ? 0 : NPY_ARRAY_WRITEABLE), NULL);
            if (a != NULL) {
                Py_INCREF(mem);
                if (PyArray_SetBaseObject((PyArrayObject *)a, mem) != 0)
                    Py_CLEAR(a);
            }
        } else {
            a = PyArray_Zeros(rank, shape, descr_of(t->dtype, type), 0); /* no values: owns its (empty) memory */
            if (a != NULL && self->lend)                                 /* read-only like every lent array */
                PyArray_CLEARFLAGS((PyArrayObject *)a, NPY_ARRAY_WRITEABLE);
        }
        PyObject *key = a != NULL ? name_of(self, i, t->name) : NULL;
        if (key == NULL || PyDict_SetItem(d, key, a) != 0) {
            Py_XDECREF(key);
            Py_XDECREF(a);
            Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(key);
        Py_DECREF(a);
    }
    return d;
}

static PyObject *client_next(Client *self)
{
    if (self->over == 1 && self->c != NULL) {
        PyErr_SetNone(PyExc_StopIteration);
        return NULL;
    }
    if (self->over == 2 && self->c != NULL) /* not a quiet end: the error again */
        return raise_code(self->last.code, self->last.message);
    if (client_enter(self) != 0)
        return NULL;
    struct sluice_error e;
    const struct sluice_piece *pieces = NULL;
    struct sluice_step *step = NULL;
    int rc;
    int installed = wait_begin(&self->stop);
    Py_BEGIN_ALLOW_THREADS rc = sluice_client_next_step(self->c, &pieces, &e);
    if (rc == SLUICE_OK)
        rc = self->lend ? sluice_client_lend_step(self->c, &step, &pieces, &e)
                        : sluice_client_keep_step(self->c, &step, &pieces, &e);
    Py_END_ALLOW_THREADS wait_end(installed);
    self->busy = 0;
    if (rc == SLUICE_END) {
        self->over = 1;
        PyErr_SetNone(PyExc_StopIteration);
        return NULL;
    }
    if (rc != SLUICE_OK)
        return stream_failed(self, rc, &e);
    Memory *mem = PyObject_New(Memory, &MemoryType);
    if (mem == NULL) {
        sluice_step_free(step);
        return NULL;
    }
    mem->step = step;
    uint32_t n = sluice_client_replicas(self->c);
    PyObject *reps = PyList_New(n), *rows = PyList_New(n), *out = NULL;
    if (reps == NULL || rows == NULL)
        goto done;
    for (uint32_t r = 0; r < n; r++) {
        PyObject *d = piece_dict(self, &pieces[r], (PyObject *)mem);
        PyObject *k = PyLong_FromUnsignedLong(pieces[r].rows);
        if (d == NULL || k == NULL) {
            Py_XDECREF(d);
            Py_XDECREF(k);
            goto done;
        }
        PyList_SET_ITEM(reps, r, d);
        PyList_SET_ITEM(rows, r, k);
    }
    out = PyStructSequence_New(&StepType);
    if (out == NULL)
        goto done;
    PyStructSequence_SET_ITEM(out, 0, PyLong_FromUnsignedLongLong(pieces[0].step));
    PyStructSequence_SET_ITEM(out, 1, PyLong_FromUnsignedLongLong(pieces[0].epoch));
    PyStructSequence_SET_ITEM(out, 2, PyLong_FromUnsignedLongLong(pieces[0].seq));
    PyStructSequence_SET_ITEM(out, 3, PyBool_FromLong(pieces[0].last_step != 0));
    PyStructSequence_SET_ITEM(out, 4, reps);
    PyStructSequence_SET_ITEM(out, 5, rows);
    reps = rows = NULL;
    for (int i = 0; i < 4; i++)
        if (PyStructSequence_GET_ITEM(out, i) == NULL) { /* an int or bool failed: its error is set */
            Py_CLEAR(out);
            break;
        }
done:
    Py_XDECREF(reps);
    Py_XDECREF(rows);
    Py_DECREF(mem);
    return out;
}

static PyObject *client_iter(PyObject *self)
{
    Py_INCREF(self);
    return self;
}

static PyObject *client_keepalive(Client *self, PyObject *args)
{
    int ms;
    if (!PyArg_ParseTuple(args, "i", &ms))
        return NULL;
    if (ms < 0) {
        PyErr_SetString(PyExc_ValueError, "keepalive: ms must be >= 0");
        return NULL;
    }
    if (client_enter(self) != 0)
        return NULL;
    struct sluice_error e;
    int rc;
    int installed = wait_begin(&self->stop);
    Py_BEGIN_ALLOW_THREADS rc = sluice_client_keepalive(self->c, ms, &e);
    Py_END_ALLOW_THREADS wait_end(installed);
    self->busy = 0;
    if (rc != 0)
        return stream_failed(self, rc, &e);
    Py_RETURN_NONE;
}

static PyObject *client_get(Client *self, void *which)
{
    if (self->c == NULL) {
        PyErr_SetString(PyExc_ValueError, "the client is closed");
        return NULL;
    }
    switch ((int)(intptr_t)which) {
    case 0: return PyLong_FromUnsignedLongLong(sluice_client_position(self->c));
    case 1: return PyLong_FromUnsignedLongLong(sluice_client_steps_per_epoch(self->c));
    case 2: return PyLong_FromUnsignedLongLong(sluice_client_epochs(self->c));
    case 4: return PyLong_FromUnsignedLong(sluice_client_feeders(self->c));
    default: return PyLong_FromUnsignedLong(sluice_client_replicas(self->c));
    }
}

static PyObject *client_metrics_url(Client *self, void *Py_UNUSED(x))
{
    const char *a = self->c != NULL ? sluice_client_metrics_address(self->c) : NULL;
    if (a == NULL)
        Py_RETURN_NONE;
    return PyUnicode_FromFormat("http://%s/metrics", a);
}

static PyObject *client_closed(Client *self, void *Py_UNUSED(x))
{
    return PyBool_FromLong(self->c == NULL);
}

static PyGetSetDef client_getset[] = {
    {"position", (getter)client_get, NULL,
     "The seq of the first piece not handed out yet: pass it as resume_seq to continue exactly there.", (void *)0},
    {"steps_per_epoch", (getter)client_get, NULL, "Steps per epoch as the feeders announced (0: not known).",
     (void *)1},
    {"epochs", (getter)client_get, NULL, "The job's epochs (0: forever).", (void *)2},
    {"replicas_per_step", (getter)client_get, NULL, "Pieces (replicas) per step.", (void *)3},
    {"feeders", (getter)client_get, NULL,
     "The feeders the stream comes from now: those given, plus those that joined the running job since.", (void *)4},
    {"closed", (getter)client_closed, NULL, "Whether close() was called.", NULL},
    {"metrics_url", (getter)client_metrics_url, NULL,
     "http://HOST:PORT/metrics where metrics_listen serves (the port as bound); None without it, or closed.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef client_methods[] = {
    {"close", (PyCFunction)client_close, METH_NOARGS,
     "close($self, /)\n--\n\nSay goodbye to the feeders and free the client (arrays already handed out stay valid)."},
    {"keepalive", (PyCFunction)client_keepalive, METH_VARARGS,
     "keepalive($self, ms, /)\n--\n\nKeep the connections alive for about ms milliseconds while busy elsewhere."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ClientType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sluice._sluice.Client",
    .tp_basicsize = sizeof(Client),
    .tp_dealloc = (destructor)client_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    /* the signature help() and inspect show (the options are keyword-only;
     * None, or absent, is the C library's default) */
    .tp_doc = "Client(feeders, job, *, worker=0, workers=1, replicas=1, credits=None, heartbeat_ms=None, "
              "timeout_ms=None, connect_timeout_ms=None, reconnect_ms=None, takeover_ms=None, no_shm=False, "
              "resume_seq=0, curve_key=None, curve_server_keys=None, lend=False, metrics_listen=None, "
              "resume_epoch=0, reshape=False, transition=None)\n--\n\n"
              "The C client of a job's stream (see sluice.Client).",
    .tp_iter = client_iter,
    .tp_iternext = (iternextfunc)client_next,
    .tp_methods = client_methods,
    .tp_getset = client_getset,
    .tp_init = (initproc)client_init,
    .tp_new = PyType_GenericNew,
};

/* ---- module ---------------------------------------------------------- */

static PyStructSequence_Field step_fields[] = {
    {"step", "the step within its epoch (0-based)"},
    {"epoch", "the epoch (0-based)"},
    {"seq", "the sequence number of the step's first piece over the whole stream"},
    {"last_step", "whether this is its epoch's last step"},
    {"replicas", "one dict per replica: feature name -> numpy.ndarray (rows first)"},
    {"rows", "the rows of each replica's piece (0: an empty piece)"},
    {NULL, NULL},
};

/* repr(step): where it stands and what it holds, not its arrays:
 * <sluice.Step epoch=0 step=3 seq=6 last_step=False rows=[4, 4]
 * tensors=['id', 'image', 'label']> (the tensors of its first replica;
 * any items, as Python code may make a Step of anything) */
static PyObject *step_repr(PyObject *s)
{
    PyObject *reps = PyStructSequence_GetItem(s, 4);
    PyObject *names;
    if (reps != NULL && PyList_Check(reps) && PyList_GET_SIZE(reps) > 0 && PyDict_Check(PyList_GET_ITEM(reps, 0)))
        names = PyDict_Keys(PyList_GET_ITEM(reps, 0));
    else
        names = PyList_New(0);
    if (names == NULL)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("<sluice.Step epoch=%S step=%S seq=%S last_step=%S rows=%R tensors=%R>",
                                       PyStructSequence_GetItem(s, 1), PyStructSequence_GetItem(s, 0),
                                       PyStructSequence_GetItem(s, 2), PyStructSequence_GetItem(s, 3),
                                       PyStructSequence_GetItem(s, 5), names);
    Py_DECREF(names);
    return r;
}

static PyObject *step_repr_method(PyObject *s, PyObject *Py_UNUSED(ignored))
{
    return step_repr(s);
}

static PyMethodDef step_repr_def = {"__repr__", step_repr_method, METH_NOARGS, "Return repr(self)."};

/* Step's repr in place of the struct sequence's (which prints every array):
 * the slot and the type's __repr__ */
static int step_set_repr(void)
{
    StepType.tp_repr = step_repr;
    PyObject *d = PyDescr_NewMethod(&StepType, &step_repr_def);
    if (d == NULL)
        return -1;
    int rc = PyDict_SetItemString(StepType.tp_dict, "__repr__", d);
    Py_DECREF(d);
    PyType_Modified(&StepType);
    return rc;
}

static PyStructSequence_Desc step_desc = {
    "sluice.Step",
    "One step of the stream: its position and each replica's tensors.",
    step_fields,
    6,
};

static PyObject *mod_log_setup(PyObject *Py_UNUSED(m), PyObject *args)
{
    const char *prog;
    int fd, level;
    if (!PyArg_ParseTuple(args, "sii", &prog, &fd, &level))
        return NULL;
    sluice_log_setup(prog, fd, level);
    Py_RETURN_NONE;
}

static PyObject *mod_code_name(PyObject *Py_UNUSED(m), PyObject *args)
{
    int code;
    if (!PyArg_ParseTuple(args, "i", &code))
        return NULL;
    return PyUnicode_FromString(sluice_code_name(code));
}

/* tf_config(text or None) -> (feeders, worker, workers), through the C
 * library's reading of TF_CONFIG (the environment variable for None). */
static PyObject *mod_tf_config(PyObject *Py_UNUSED(m), PyObject *arg)
{
    const char *text = NULL;
    if (arg != Py_None && str_option(arg, "tf_config", &text) != 0)
        return NULL;
    struct sluice_cluster *cl;
    struct sluice_error e;
    if (sluice_cluster_from_tf_config(&cl, text, &e) != 0) {
        PyErr_SetString(PyExc_ValueError, e.message);
        return NULL;
    }
    struct sluice_options o;
    memset(&o, 0, sizeof o);
    sluice_cluster_apply(cl, &o);
    PyObject *feeders = PyList_New((Py_ssize_t)o.nfeeders), *out = NULL;
    for (size_t i = 0; feeders != NULL && i < o.nfeeders; i++) {
        PyObject *f = PyUnicode_DecodeUTF8(o.feeders[i], (Py_ssize_t)strlen(o.feeders[i]), "replace");
        if (f == NULL) {
            Py_CLEAR(feeders);
            break;
        }
        PyList_SET_ITEM(feeders, (Py_ssize_t)i, f);
    }
    if (feeders != NULL)
        out = Py_BuildValue("(NII)", feeders, o.worker, o.workers);
    sluice_cluster_free(cl);
    return out;
}

static PyMethodDef module_methods[] = {
    {"tf_config", mod_tf_config, METH_O,
     "tf_config($module, text, /)\n--\n\n(feeders, worker, workers) of TF_CONFIG (None: the environment variable)."},
    {"log_setup", mod_log_setup, METH_VARARGS,
     "log_setup($module, prog, fd, level, /)\n--\n\nWhere the library's log lines go."},
    {"code_name", mod_code_name, METH_VARARGS, "code_name($module, code, /)\n--\n\nThe name of a sluice error code."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_sluice",
    "The C binding of libsluice (use the sluice package).",
    -1,
    module_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__sluice(void); /* the one symbol the interpreter looks up */

PyMODINIT_FUNC PyInit__sluice(void)
{
    import_array();
    main_thread = pthread_self();
    if (PyType_Ready(&MemoryType) < 0 || PyType_Ready(&ClientType) < 0 || make_bf16_descr() < 0)
        return NULL;
    if (StepType.tp_name == NULL && (PyStructSequence_InitType2(&StepType, &step_desc) < 0 || step_set_repr() < 0))
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Error = PyErr_NewExceptionWithDoc(
        "sluice.Error",
        "A sluice error: str() is the C library's message; .code (a negative "
        "SLUICE_E* number) and .code_name ('proto', 'timeout', 'invalid', ...) say which kind.",
        NULL, NULL);
    if (Error == NULL || PyModule_AddObjectRef(m, "Error", Error) < 0 ||
        PyModule_AddObjectRef(m, "Client", (PyObject *)&ClientType) < 0 ||
        PyModule_AddObjectRef(m, "Step", (PyObject *)&StepType) < 0 ||
        PyModule_AddObjectRef(m, "bfloat16", (PyObject *)bf16_descr) < 0 ||
        PyModule_AddStringConstant(m, "version", sluice_version()) < 0 ||
        PyModule_AddIntConstant(m, "LOG_DEBUG", SLUICE_LOG_DEBUG) < 0 ||
        PyModule_AddIntConstant(m, "LOG_INFO", SLUICE_LOG_INFO) < 0 ||
        PyModule_AddIntConstant(m, "LOG_WARNING", SLUICE_LOG_WARNING) < 0 ||
        PyModule_AddIntConstant(m, "LOG_ERROR", SLUICE_LOG_ERROR) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
