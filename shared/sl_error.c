/* sl_error: formatting of error records. Messages are truncated (never
 * overflowed) at SL_ERROR_MSG_MAX; a prefix that does not fit keeps the
 * start of the prefix and as much of the old message as fits. */
#include "sl_error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int sl_error_vset(struct sl_error *err, int code, const char *fmt, va_list ap)
{
    if (err == NULL)
        return code;
    err->code = code;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    return code;
}

int sl_error_set(struct sl_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_error_vset(err, code, fmt, ap);
    va_end(ap);
    return code;
}

int sl_error_sys(struct sl_error *err, int errno_value, const char *fmt, ...)
{
    int code = errno_value == ENOMEM ? SL_ENOMEM : SL_EIO;
    if (err == NULL)
        return code;
    char what[SL_ERROR_MSG_MAX / 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return sl_error_set(err, code, "%s: %s", what, strerror(errno_value));
}

int sl_error_prefix(struct sl_error *err, const char *fmt, ...)
{
    if (err == NULL)
        return SL_EINVAL;
    char old[SL_ERROR_MSG_MAX];
    memcpy(old, err->msg, sizeof old);
    old[sizeof old - 1] = '\0';
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof err->msg)
        snprintf(err->msg + n, sizeof err->msg - (size_t)n, "%s", old);
    return err->code;
}

void sl_error_clear(struct sl_error *err)
{
    if (err == NULL)
        return;
    err->code = 0;
    err->msg[0] = '\0';
}

const char *sl_code_name(int code)
{
    switch (code) {
    case SL_OK: return "ok";
    case SL_END: return "end";
    case SL_EIO: return "io";
    case SL_ENOMEM: return "nomem";
    case SL_EINVAL: return "invalid";
    case SL_ECORRUPT: return "corrupt";
    case SL_EPROTO: return "proto";
    case SL_ETIMEOUT: return "timeout";
    case SL_EDEVICE: return "device";
    case SL_ECLOSED: return "closed";
    default: return "unknown";
    }
}
