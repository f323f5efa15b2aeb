/* libFuzzer target for fmt_tar: any bytes as a tar shard (plain, gzip or
 * another libarchive filter), read sample by sample to the end or the first
 * error. Small limits keep each input cheap; every field byte is touched so
 * the sanitizers see any view that points outside the reader's arena. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fmt_tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fmt_tar_opts opts = {.max_member_bytes = 1 << 20, .max_fields = 16};
    struct sl_error err = {0};
    struct fmt_tar *t;
    if (fmt_tar_open_mem(&t, "fuzz.tar", data, size, &opts, &err) != 0)
        return 0;
    struct fmt_tar_sample s;
    uint64_t expect = 0;
    volatile uint8_t sink = 0;
    int rc;
    while ((rc = fmt_tar_next(t, &s, &err)) == 0) {
        if (s.index != expect++ || s.nfields == 0 || s.nfields > opts.max_fields)
            __builtin_trap();
        size_t klen = strlen(s.key);
        for (size_t i = 0; i < s.nfields; i++) {
            const struct fmt_tar_field *f = &s.fields[i];
            if (f->len > opts.max_member_bytes)
                __builtin_trap();
            for (size_t j = 0; j < f->len; j++)
                sink ^= f->data[j];
            /* the key and extension put back together split the same way */
            char path[4096];
            size_t elen = strlen(f->ext);
            if (klen + 1 + elen < sizeof path && elen > 0) {
                memcpy(path, s.key, klen);
                path[klen] = '.';
                memcpy(path + klen + 1, f->ext, elen + 1);
                const char *ext;
                if (fmt_tar_split_key(path, &ext) != klen || strcmp(ext, f->ext) != 0)
                    __builtin_trap();
            }
        }
    }
    /* after the end or an error the reader stays put */
    if (rc == SL_END && fmt_tar_next(t, &s, &err) != SL_END)
        __builtin_trap();
    if (rc < 0 && (err.msg[0] == '\0' || fmt_tar_next(t, &s, &err) >= 0))
        __builtin_trap();
    fmt_tar_close(t);
    (void)sink;
    return 0;
}
