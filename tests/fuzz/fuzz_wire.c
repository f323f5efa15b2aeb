/* libFuzzer target for sl_wire: any bytes as a header frame. The decoder
 * must return 0 or SL_EPROTO with a message; what it accepts must encode
 * back to exactly the same bytes (the encoding is canonical), lose its
 * validity when cut by one byte, and describe a body frame that
 * sl_wire_check_body accepts from the end of its last tensor on only. Borrowed strings
 * are read end to end so ASan sees any view past the frame. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sl_buf.h"
#include "sl_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void touch(const char *s, size_t n, volatile uint8_t *sink)
{
    for (size_t i = 0; i < n; i++)
        *sink ^= (uint8_t)s[i];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy of exactly `size` bytes, so a read past the end is caught */
    uint8_t *p = malloc(size ? size : 1);
    if (p == NULL)
        return 0;
    if (size)
        memcpy(p, data, size);
    static struct sl_wire_msg m; /* ~6 KiB: off the fuzzer's stack */
    struct sl_error err = {0};
    volatile uint8_t sink = 0;
    int rc = sl_wire_decode(p, size, &m, &err);
    if (rc != 0) {
        if (rc != SL_EPROTO || err.code != SL_EPROTO || err.msg[0] == '\0')
            __builtin_trap();
        free(p);
        return 0;
    }
    switch (m.type) {
    case SL_WIRE_HELLO:
        touch(m.hello.job, m.hello.job_len, &sink);
        if (m.hello.job_len == 0 || m.hello.job_len > SL_WIRE_MAX_JOB || m.hello.worker >= m.hello.workers)
            __builtin_trap();
        break;
    case SL_WIRE_WELCOME:
        if (m.welcome.ntensors > SL_WIRE_MAX_TENSORS)
            __builtin_trap();
        for (unsigned i = 0; i < m.welcome.ntensors; i++) {
            const struct sl_wire_field *f = &m.welcome.fields[i];
            touch(f->name, f->name_len, &sink);
            if (f->rank > SL_WIRE_MAX_RANK || f->name_len > SL_WIRE_MAX_NAME)
                __builtin_trap();
        }
        break;
    case SL_WIRE_REFUSE: touch(m.refuse.reason, m.refuse.reason_len, &sink); break;
    case SL_WIRE_ERROR: touch(m.error.msg, m.error.msg_len, &sink); break;
    case SL_WIRE_PIECE:
        if (m.piece.ntensors > SL_WIRE_MAX_TENSORS)
            __builtin_trap();
        for (unsigned i = 0; i < m.piece.ntensors; i++) {
            const struct sl_wire_tensor *t = &m.piece.tensors[i];
            if (t->rank == 0 || t->rank > SL_WIRE_MAX_PIECE_RANK || t->bytes > SL_WIRE_MAX_MSG)
                __builtin_trap();
            if (t->offset > SL_WIRE_MAX_MSG)
                __builtin_trap();
        }
        /* the body must reach the end of the last-ending tensor, no less */
        if (m.piece.ntensors > 0) {
            uint64_t end = 0;
            for (unsigned i = 0; i < m.piece.ntensors; i++)
                if (m.piece.tensors[i].offset + m.piece.tensors[i].bytes > end)
                    end = m.piece.tensors[i].offset + m.piece.tensors[i].bytes;
            if (sl_wire_check_body(&m.piece, (size_t)end, NULL) != 0 ||
                (end > 0 && sl_wire_check_body(&m.piece, (size_t)end - 1, NULL) != SL_EPROTO))
                __builtin_trap();
        }
        break;
    case SL_WIRE_STATUS:
        if (m.status.state != SL_WIRE_STATUS_SCANNING || m.status.retry_ms == 0 ||
            m.status.retry_ms > SL_WIRE_MAX_RETRY_MS || m.status.files == 0 || m.status.files > SL_WIRE_MAX_FILES ||
            m.status.files_done > m.status.files || m.status.records > SL_WIRE_MAX_COUNT ||
            m.status.bytes > SL_WIRE_MAX_COUNT || size != 48)
            __builtin_trap();
        break;
    default: break;
    }
    /* canonical: encoding what was decoded gives the input back */
    struct sl_buf b;
    sl_buf_init(&b, 0);
    if (sl_wire_encode(&m, &b, &err) != 0 || b.len != size || memcmp(b.data, p, size) != 0)
        __builtin_trap();
    sl_buf_free(&b);
    /* every prefix of a valid message is invalid; the last byte is enough */
    struct sl_wire_msg *cut = malloc(sizeof *cut);
    if (cut != NULL) {
        if (size == 0 || sl_wire_decode(p, size - 1, cut, &err) != SL_EPROTO)
            __builtin_trap();
        free(cut);
    }
    free(p);
    (void)sink;
    return 0;
}
