/* libFuzzer target: the shared record loop over arbitrary bytes, as
 * TFRecord (compression AUTO, so the gzip and zlib paths are fuzzed too)
 * and as text lines, with a small record limit so huge lengths are cheap. */
#include <stddef.h>
#include <stdint.h>

#include "fmt_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void drain(const uint8_t *data, size_t size, enum fmt_format f, int use_zlib)
{
    struct fmt_reader_opts o = {.format = f, .max_record_bytes = 1 << 16, .buffer_size = 4096,
                                .use_zlib = use_zlib};
    struct fmt_reader *r;
    struct sl_error err = {0};
    if (fmt_reader_open_mem(&r, "fuzz", data, size, &o, &err) != 0)
        return;
    struct fmt_record rec;
    uint64_t sum = 0;
    while (fmt_reader_next(r, &rec, &err) == 0) {
        if (rec.len > 0)
            sum += rec.data[0] + rec.data[rec.len - 1];
    }
    (void)sum;
    fmt_reader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    drain(data, size, FMT_FORMAT_TFRECORD, 0);
    drain(data, size, FMT_FORMAT_TFRECORD, 1);
    drain(data, size, FMT_FORMAT_TEXT, 0);
    return 0;
}
