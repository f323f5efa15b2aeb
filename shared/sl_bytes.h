/* sl_bytes: little-endian integers in byte buffers, and a bounded reader
 * and writer over a buffer, for every framing sluice speaks (the feeder
 * protocol, the ring, the rendezvous, TFRecord).
 *
 * The reader and the writer never step outside their buffer: a read or a
 * write that does not fit fails (an integer read then gives 0), leaves the
 * buffer and the position as they were and makes the object `bad`
 * (sticky), so a run of reads can be checked once at its end. Integers are read and written byte by byte
 * (no alignment, no host byte order). All-zero objects are empty.
 *
 * Thread-safe: no; one owner each. Header-only (inline): the framing code
 * is on hot paths.
 */
#ifndef SL_BYTES_H
#define SL_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t sl_load_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t sl_load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t sl_load_le64(const uint8_t *p)
{
    return (uint64_t)sl_load_le32(p) | (uint64_t)sl_load_le32(p + 4) << 32;
}

static inline void sl_store_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void sl_store_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline void sl_store_le64(uint8_t *p, uint64_t v)
{
    sl_store_le32(p, (uint32_t)v);
    sl_store_le32(p + 4, (uint32_t)(v >> 32));
}

/* ---- reader ---- */

struct sl_reader {
    const uint8_t *p; /* borrowed */
    size_t n, off;
    int bad; /* a read did not fit */
};

static inline struct sl_reader sl_reader_make(const void *p, size_t n)
{
    struct sl_reader r = {(const uint8_t *)p, n, 0, 0};
    return r;
}

static inline size_t sl_reader_left(const struct sl_reader *r)
{
    return r->n - r->off;
}

/* The next k bytes, borrowed, or NULL (and bad) when fewer are left. */
static inline const uint8_t *sl_read_bytes(struct sl_reader *r, size_t k)
{
    if (r->bad || k > r->n - r->off) {
        r->bad = 1;
        return NULL;
    }
    const uint8_t *q = r->p + r->off;
    r->off += k;
    return q;
}

/* 0, or -1 (bad; *v = 0) when the integer does not fit. */
static inline int sl_read_u8(struct sl_reader *r, uint8_t *v)
{
    const uint8_t *q = sl_read_bytes(r, 1);
    *v = q ? q[0] : 0;
    return q ? 0 : -1;
}

static inline int sl_read_u16(struct sl_reader *r, uint16_t *v)
{
    const uint8_t *q = sl_read_bytes(r, 2);
    *v = q ? sl_load_le16(q) : 0;
    return q ? 0 : -1;
}

static inline int sl_read_u32(struct sl_reader *r, uint32_t *v)
{
    const uint8_t *q = sl_read_bytes(r, 4);
    *v = q ? sl_load_le32(q) : 0;
    return q ? 0 : -1;
}

static inline int sl_read_u64(struct sl_reader *r, uint64_t *v)
{
    const uint8_t *q = sl_read_bytes(r, 8);
    *v = q ? sl_load_le64(q) : 0;
    return q ? 0 : -1;
}

/* ---- writer ---- */

struct sl_writer {
    uint8_t *p; /* borrowed, cap bytes */
    size_t cap, len;
    int bad; /* a write did not fit */
};

static inline struct sl_writer sl_writer_make(void *p, size_t cap)
{
    struct sl_writer w = {(uint8_t *)p, cap, 0, 0};
    return w;
}

/* Room for k more bytes at the end, or NULL (and bad). */
static inline uint8_t *sl_write_room(struct sl_writer *w, size_t k)
{
    if (w->bad || k > w->cap - w->len) {
        w->bad = 1;
        return NULL;
    }
    uint8_t *q = w->p + w->len;
    w->len += k;
    return q;
}

static inline void sl_write_bytes(struct sl_writer *w, const void *src, size_t k)
{
    uint8_t *q = sl_write_room(w, k);
    if (q != NULL && k > 0)
        memcpy(q, src, k);
}

static inline void sl_write_u8(struct sl_writer *w, uint8_t v)
{
    uint8_t *q = sl_write_room(w, 1);
    if (q != NULL)
        q[0] = v;
}

static inline void sl_write_u16(struct sl_writer *w, uint16_t v)
{
    uint8_t *q = sl_write_room(w, 2);
    if (q != NULL)
        sl_store_le16(q, v);
}

static inline void sl_write_u32(struct sl_writer *w, uint32_t v)
{
    uint8_t *q = sl_write_room(w, 4);
    if (q != NULL)
        sl_store_le32(q, v);
}

static inline void sl_write_u64(struct sl_writer *w, uint64_t v)
{
    uint8_t *q = sl_write_room(w, 8);
    if (q != NULL)
        sl_store_le64(q, v);
}

#endif
