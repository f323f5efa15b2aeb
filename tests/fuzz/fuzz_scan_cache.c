/* libFuzzer target for the feeder's scan cache entries
 * (feeder/feed_scan_cache.c, feed_scan_cache_load): an entry file as a
 * feeder finds it in its cache directory. The first input byte is a mode,
 * the rest the entry. The loader checks the entry against the feeder's
 * scan options, the data file's identity and absolute path, and two
 * CRC-32Cs before anything else; so that fuzzed bytes get past those:
 *  - mode bit 0 set: the entry is the bytes as given (options and identity
 *    fixed here), so the magic, checksum and staleness paths are fuzzed;
 *  - bit 0 clear: the first 136 bytes are the header, with the magic put
 *    in (unless bit 1), the options taken from it (format and compression
 *    reduced to known ones), the identity taken from it (nanoseconds cut to
 *    32 bits, as stat gives them), the path's length and the header CRC
 *    made right; the body is the data file's path, then the rest of the
 *    input, then its CRC (unless bit 2: then the input's own last 4 bytes).
 * The loader answers 0, SL_END (stale) or SL_ECORRUPT with a message. A
 * scan it accepts is in bounds (offsets in order inside the image, tar
 * parts inside it, names terminated), stores back into an entry that
 * loads to the same scan, and storing that scan gives the same bytes. */
#include <limits.h>
#include <stdlib.h>

#include "feed_scan_cache.h"
#include "fuzz_common.h"

#define HDR FEED_SCAN_CACHE_HEADER

static char data_path[PATH_MAX], abs_path[PATH_MAX], cache_dir[PATH_MAX];

static void setup(void)
{
    if (data_path[0] != '\0')
        return;
    snprintf(data_path, sizeof data_path, "%s/data", fuzz_dir());
    snprintf(cache_dir, sizeof cache_dir, "%s/cache", fuzz_dir());
    fuzz_write_file(data_path, "data", 4);
    CHECK(realpath(data_path, abs_path) != NULL);
}

static void check_scan(const struct fmt_scan *s, const struct feed_scan_key *key, const struct feed_file_id *id)
{
    CHECK(s->count <= s->image_bytes && s->dropped_tail <= s->image_bytes);
    CHECK(s->compression == FMT_COMP_NONE || s->compression == FMT_COMP_GZIP || s->compression == FMT_COMP_ZLIB);
    CHECK(s->compression != FMT_COMP_NONE || s->image_bytes == id->size);
    for (uint64_t i = 0; i < s->count; i++)
        CHECK(s->offsets[i] < s->image_bytes && (i == 0 || s->offsets[i] > s->offsets[i - 1]));
    if (key->format != FMT_FORMAT_TAR) {
        CHECK(s->first == NULL && s->nnames == 0);
        return;
    }
    CHECK(s->first != NULL && s->first[0] == 0 && s->nnames <= FMT__MAX_NAMES);
    for (uint64_t i = 1; i <= s->count; i++)
        CHECK(s->first[i] >= s->first[i - 1] && s->first[i] - s->first[i - 1] <= FMT_MAX_FIELDS);
    for (uint64_t i = 0; i < s->first[s->count]; i++) {
        const struct fmt__part *p = &s->parts[i];
        CHECK(p->name < s->nnames && p->off <= s->image_bytes && p->len <= s->image_bytes - p->off);
    }
    for (size_t i = 0; i < s->nnames; i++)
        CHECK(memchr(s->names[i], '\0', FMT__MAX_NAME_LEN) != NULL);
}

static void check_same(const struct fmt_scan *a, const struct fmt_scan *b)
{
    CHECK(a->count == b->count && a->image_bytes == b->image_bytes && a->dropped_tail == b->dropped_tail);
    CHECK(a->compression == b->compression && a->nnames == b->nnames);
    CHECK(a->count == 0 || memcmp(a->offsets, b->offsets, a->count * sizeof *a->offsets) == 0);
    CHECK((a->first == NULL) == (b->first == NULL));
    if (a->first == NULL)
        return;
    CHECK(memcmp(a->first, b->first, (a->count + 1) * sizeof *a->first) == 0);
    for (uint64_t i = 0; i < a->first[a->count]; i++)
        CHECK(a->parts[i].name == b->parts[i].name && a->parts[i].off == b->parts[i].off &&
              a->parts[i].len == b->parts[i].len);
    for (size_t i = 0; i < a->nnames; i++)
        CHECK(strcmp(a->names[i], b->names[i]) == 0);
}

/* Store s as the entry, reload it, and store that: the same scan, the same bytes. */
static void round_trip(const struct feed_scan_cache *c, const char *entry, const struct feed_file_id *id,
                       const struct fmt_scan *s, const uint8_t *was, size_t was_len, int tar)
{
    struct sl_error err = {0};
    CHECK(feed_scan_cache_store(c, data_path, id, s, &err) == 0);
    size_t n1, n2;
    uint8_t *e1 = fuzz_read_file(entry, &n1);
    CHECK(n1 == was_len);
    if (!tar) /* tar names may carry bytes after their NUL, which a store writes as zeros */
        CHECK(memcmp(e1, was, n1) == 0);
    struct fmt_scan *s2 = NULL;
    CHECK(feed_scan_cache_load(c, data_path, id, &s2, &err) == 0);
    check_same(s, s2);
    CHECK(feed_scan_cache_store(c, data_path, id, s2, &err) == 0);
    uint8_t *e2 = fuzz_read_file(entry, &n2);
    CHECK(n2 == n1 && memcmp(e1, e2, n1) == 0);
    fmt_scan_free(s2);
    free(e2);
    free(e1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || size > (1u << 20))
        return 0;
    setup();
    unsigned mode = data[0];
    const uint8_t *in = data + 1;
    size_t in_len = size - 1;
    struct feed_scan_key key = {.format = (enum fmt_format)(mode >> 4 & 3),
                                .compression = FMT_COMP_AUTO,
                                .max_record_bytes = 1 << 20,
                                .max_file = (uint64_t)1 << 40};
    struct feed_file_id id = {
        .dev = 1, .ino = 2, .size = 4096, .mtime_s = 3, .mtime_ns = 4, .ctime_s = 5, .ctime_ns = 6};
    uint8_t *e;
    size_t e_len;
    if (mode & 1) {
        e = malloc(in_len ? in_len : 1);
        CHECK(e != NULL);
        memcpy(e, in, in_len);
        e_len = in_len;
    } else {
        size_t plen = strlen(abs_path), rest = in_len > HDR ? in_len - HDR : 0;
        e_len = HDR + plen + rest + (mode & 4 ? 0 : 4);
        e = calloc(1, e_len);
        CHECK(e != NULL);
        memcpy(e, in, in_len < HDR ? in_len : HDR);
        if (!(mode & 2))
            memcpy(e, "SLSCANC", 8);
        fuzz_store_le32(e + 12, fuzz_load_le32(e + 12) % 4);
        fuzz_store_le32(e + 16, fuzz_load_le32(e + 16) % 4);
        fuzz_store_le32(e + 20, fuzz_load_le32(e + 20) & 1);
        if (fuzz_load_le64(e + 24) == 0)
            fuzz_store_le64(e + 24, 1);
        fuzz_store_le64(e + 64, fuzz_load_le32(e + 64));
        fuzz_store_le64(e + 80, fuzz_load_le32(e + 80));
        fuzz_store_le32(e + 128, (uint32_t)plen);
        fuzz_store_le32(e + 132, fuzz_crc32c(e, 132));
        key.format = (enum fmt_format)fuzz_load_le32(e + 12);
        key.compression = (enum fmt_compression)fuzz_load_le32(e + 16);
        key.count_only = (int)fuzz_load_le32(e + 20);
        key.max_record_bytes = fuzz_load_le64(e + 24);
        id = (struct feed_file_id){.dev = fuzz_load_le64(e + 32),
                                   .ino = fuzz_load_le64(e + 40),
                                   .size = fuzz_load_le64(e + 48),
                                   .mtime_s = (int64_t)fuzz_load_le64(e + 56),
                                   .mtime_ns = fuzz_load_le32(e + 64),
                                   .ctime_s = (int64_t)fuzz_load_le64(e + 72),
                                   .ctime_ns = fuzz_load_le32(e + 80)};
        memcpy(e + HDR, abs_path, plen);
        if (rest)
            memcpy(e + HDR + plen, in + HDR, rest);
        if (!(mode & 4))
            fuzz_store_le32(e + HDR + plen + rest, fuzz_crc32c(e + HDR, plen + rest));
    }
    struct feed_scan_cache *c;
    struct sl_error err = {0};
    CHECK(feed_scan_cache_open(&c, cache_dir, &key, &err) == 0);
    char entry[PATH_MAX + 64];
    CHECK(feed_scan_cache_entry(c, data_path, entry, sizeof entry, &err) == 0);
    fuzz_write_file(entry, e, e_len);
    struct fmt_scan *s = NULL;
    int rc = feed_scan_cache_load(c, data_path, &id, &s, &err);
    fuzz_note("feed_scan_cache_load", rc, err.msg);
    if (rc != 0) {
        static const int errors[] = {SL_END, SL_ECORRUPT, 0};
        fuzz_check_error(rc, &err, errors);
        CHECK(s == NULL);
    } else {
        CHECK(s != NULL);
        check_scan(s, &key, &id);
        round_trip(c, entry, &id, s, e, e_len, key.format == FMT_FORMAT_TAR);
        fmt_scan_free(s);
    }
    feed_scan_cache_close(c);
    free(e);
    return 0;
}
