/* sl_error: the error codes and the error record every sluice library uses.
 *
 * Functions return int: 0 OK, 1 end (EOF), a negative SL_E* code on error.
 * The human-readable details travel in a caller-owned struct sl_error:
 * data errors read "path:offset: what", system errors name the call.
 * Callers add context with sl_error_prefix(); they never overwrite.
 */
#ifndef SL_ERROR_H
#define SL_ERROR_H

#include <stdarg.h>

#define SL_OK 0
#define SL_END 1
#define SL_EIO (-1)      /* a system call failed */
#define SL_ENOMEM (-2)   /* an allocation failed */
#define SL_EINVAL (-3)   /* bad argument, option or configuration */
#define SL_ECORRUPT (-4) /* the data is damaged or violates its format */
#define SL_EPROTO (-5)   /* the peer violated the wire protocol */
#define SL_ETIMEOUT (-6) /* a peer or operation timed out */
#define SL_EDEVICE (-7)  /* CUDA / NCCL failure */
#define SL_ECLOSED (-8)  /* the queue, socket or object was closed */

#define SL_ERROR_MSG_MAX 1024

#if defined(__GNUC__)
#define SL_MUST_CHECK __attribute__((warn_unused_result))
#define SL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SL_MUST_CHECK
#define SL_PRINTF(a, b)
#endif

/* Small value struct, caller-owned; all-zero is "no error". */
struct sl_error {
    int code;
    char msg[SL_ERROR_MSG_MAX];
};

/* Record an error and return `code`, so callers write `return sl_error_set(...)`.
 * `err` may be NULL (the code is still returned). */
int sl_error_set(struct sl_error *err, int code, const char *fmt, ...) SL_PRINTF(3, 4);
int sl_error_vset(struct sl_error *err, int code, const char *fmt, va_list ap);

/* Record a system error: "<what>: <strerror(errno_value)>", code SL_EIO
 * (SL_ENOMEM for ENOMEM). Returns the code. */
int sl_error_sys(struct sl_error *err, int errno_value, const char *fmt, ...) SL_PRINTF(3, 4);

/* Prepend context ("<prefix><old message>") keeping the code; returns the code.
 * Safe when err is NULL. */
int sl_error_prefix(struct sl_error *err, const char *fmt, ...) SL_PRINTF(2, 3);

void sl_error_clear(struct sl_error *err);

/* A short constant name for a code: "ok", "end", "io", "nomem", ... */
const char *sl_code_name(int code);

#endif
