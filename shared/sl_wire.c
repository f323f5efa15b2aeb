/* sl_wire: header frames, byte by byte.
 *
 * The decoder is the single place where the protocol's rules live: it reads
 * each field with a bounds check (a short frame is "truncated at byte N of
 * M (field)"), checks every length and count against its limit before the
 * length sizes a read or the count drives a loop, and rejects trailing
 * bytes. The encoders write fields in the same order and then run the
 * decoder over what they wrote, so a message that would be refused is never
 * sent and the two sides cannot drift apart. The only checks the encoders
 * make themselves are those that guard their own loops and the u16 length
 * prefixes (string lengths, ntensors, ranks), with the decoder's wording.
 */
#include "sl_wire.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sl_bytes.h"

static const uint8_t MAGIC[4] = {'S', 'L', 'C', '1'};

const char *sl_wire_type_name(unsigned type)
{
    switch (type) {
    case SL_WIRE_HELLO: return "HELLO";
    case SL_WIRE_WELCOME: return "WELCOME";
    case SL_WIRE_REFUSE: return "REFUSE";
    case SL_WIRE_CREDIT: return "CREDIT";
    case SL_WIRE_PIECE: return "PIECE";
    case SL_WIRE_END: return "END";
    case SL_WIRE_ERROR: return "ERROR";
    case SL_WIRE_HEARTBEAT: return "HEARTBEAT";
    case SL_WIRE_BYE: return "BYE";
    case SL_WIRE_STATUS: return "STATUS";
    case SL_WIRE_STATS: return "STATS";
    case SL_WIRE_ROSTER: return "ROSTER";
    case SL_WIRE_JOIN: return "JOIN";
    default: return "?";
    }
}

const char *sl_wire_dtype_name(unsigned dtype)
{
    switch (dtype) {
    case SL_WIRE_INT64: return "int64";
    case SL_WIRE_FLOAT32: return "float32";
    case SL_WIRE_BYTES: return "bytes";
    case SL_WIRE_UINT8: return "uint8";
    case SL_WIRE_FLOAT16: return "float16";
    case SL_WIRE_BFLOAT16: return "bfloat16";
    default: return "?";
    }
}

size_t sl_wire_dtype_size(unsigned dtype)
{
    switch (dtype) {
    case SL_WIRE_INT64: return 8;
    case SL_WIRE_FLOAT32: return 4;
    case SL_WIRE_UINT8: return 1;
    case SL_WIRE_FLOAT16:
    case SL_WIRE_BFLOAT16: return 2;
    default: return 0;
    }
}

/* ---- reading ---------------------------------------------------------- */

/* The shared bounded reader, with the field being read named in errors. */
struct rd {
    struct sl_reader in;
    const char *what; /* "HELLO header", ... */
    struct sl_error *err;
};

static int rd_fail(struct rd *r, size_t k, const char *field)
{
    return sl_error_set(r->err, SL_EPROTO, "%s: truncated at byte %zu of %zu (%s)", r->what, r->in.n, r->in.off + k,
                        field);
}

static int rd_u8(struct rd *r, const char *field, uint8_t *v)
{
    return sl_read_u8(&r->in, v) == 0 ? 0 : rd_fail(r, 1, field);
}

static int rd_u16(struct rd *r, const char *field, uint16_t *v)
{
    return sl_read_u16(&r->in, v) == 0 ? 0 : rd_fail(r, 2, field);
}

static int rd_u32(struct rd *r, const char *field, uint32_t *v)
{
    return sl_read_u32(&r->in, v) == 0 ? 0 : rd_fail(r, 4, field);
}

static int rd_u64(struct rd *r, const char *field, uint64_t *v)
{
    return sl_read_u64(&r->in, v) == 0 ? 0 : rd_fail(r, 8, field);
}

/* Two's complement without relying on implementation-defined conversion. */
static int64_t to_i64(uint64_t x)
{
    return x <= INT64_MAX ? (int64_t)x : -(int64_t)(~x) - 1;
}

static int32_t to_i32(uint32_t x)
{
    return x <= INT32_MAX ? (int32_t)x : -(int32_t)(~x) - 1;
}

/* A u16 length, checked against [min, max], then that many bytes, borrowed. */
static int rd_str(struct rd *r, const char *field, size_t min, size_t max, const char **s, size_t *len)
{
    uint16_t n;
    int rc = rd_u16(r, field, &n);
    if (rc != 0)
        return rc;
    if (n > max)
        return sl_error_set(r->err, SL_EPROTO, "%s: %s length %u exceeds %zu", r->what, field, n, max);
    if (n < min)
        return sl_error_set(r->err, SL_EPROTO, "%s: empty %s", r->what, field);
    const uint8_t *q = sl_read_bytes(&r->in, n);
    if (q == NULL)
        return rd_fail(r, n, field);
    *s = (const char *)q;
    *len = n;
    return 0;
}

static int bad(struct rd *r, const char *fmt, ...) SL_PRINTF(2, 3);

static int bad(struct rd *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_error_vset(r->err, SL_EPROTO, fmt, ap);
    va_end(ap);
    sl_error_prefix(r->err, "%s: ", r->what);
    return SL_EPROTO;
}

/* dims[0..rank): each >= 0, and the product of the non-zero ones at most
 * SL_WIRE_MAX_ELEMS, so no later product of a subset can overflow. Sets
 * *elems to the product of all dims. `who` names the tensor ("tensor 3"). */
static int check_shape(struct rd *r, const char *who, const int64_t *dims, unsigned rank, uint64_t *elems)
{
    uint64_t prod = 1;
    int zero = 0;
    for (unsigned i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return bad(r, "%s: dims[%u] = %" PRId64 " is negative", who, i, dims[i]);
        uint64_t d = (uint64_t)dims[i];
        if (d == 0) {
            zero = 1;
            continue;
        }
        if (d > SL_WIRE_MAX_ELEMS / prod)
            return bad(r, "%s: shape has more than %" PRIu64 " elements", who, SL_WIRE_MAX_ELEMS);
        prod *= d;
    }
    *elems = zero ? 0 : prod;
    return 0;
}

static int rd_end(struct rd *r)
{
    size_t left = sl_reader_left(&r->in);
    if (left != 0)
        return bad(r, "%zu trailing byte%s after byte %zu", left, left == 1 ? "" : "s", r->in.off);
    return 0;
}

static int dec_hello(struct rd *r, struct sl_wire_hello *m)
{
    int rc;
    if ((rc = rd_u32(r, "worker", &m->worker)) != 0 || (rc = rd_u32(r, "workers", &m->workers)) != 0 ||
        (rc = rd_u32(r, "replicas", &m->replicas)) != 0 || (rc = rd_u32(r, "credits", &m->credits)) != 0 ||
        (rc = rd_u32(r, "flags", &m->flags)) != 0 || (rc = rd_u32(r, "heartbeat_ms", &m->heartbeat_ms)) != 0 ||
        (rc = rd_u64(r, "resume_epoch", &m->resume_epoch)) != 0 ||
        (rc = rd_u64(r, "resume_seq", &m->resume_seq)) != 0 || (rc = rd_u64(r, "incarnation", &m->incarnation)) != 0 ||
        (rc = rd_u32(r, "share", &m->share)) != 0 ||
        (rc = rd_str(r, "job name", 1, SL_WIRE_MAX_JOB, &m->job, &m->job_len)) != 0)
        return rc;
    if (m->workers == 0 || m->workers > SL_WIRE_MAX_WORKERS)
        return bad(r, "workers %" PRIu32 " not in 1..%u", m->workers, SL_WIRE_MAX_WORKERS);
    if (m->worker >= m->workers)
        return bad(r, "worker %" PRIu32 " not below workers %" PRIu32, m->worker, m->workers);
    if (m->replicas == 0 || m->replicas > SL_WIRE_MAX_REPLICAS)
        return bad(r, "replicas %" PRIu32 " not in 1..%u", m->replicas, SL_WIRE_MAX_REPLICAS);
    if (m->credits > SL_WIRE_MAX_CREDITS)
        return bad(r, "credits %" PRIu32 " exceeds %u", m->credits, SL_WIRE_MAX_CREDITS);
    if (m->share >= SL_WIRE_MAX_FEEDERS)
        return bad(r, "share %" PRIu32 " not below %u", m->share, SL_WIRE_MAX_FEEDERS);
    if (m->flags & SL_WIRE_HELLO_FEEDERS) {
        if ((rc = rd_u32(r, "feeders", &m->feeders)) != 0)
            return rc;
        if (m->feeders == 0 || m->feeders > SL_WIRE_MAX_ROSTER)
            return bad(r, "feeders %" PRIu32 " not in 1..%u", m->feeders, SL_WIRE_MAX_ROSTER);
        if (m->share >= m->feeders)
            return bad(r, "share %" PRIu32 " not below feeders %" PRIu32, m->share, m->feeders);
    }
    if (m->flags & SL_WIRE_HELLO_TRANSITION) {
        if ((rc = rd_u32(r, "from_workers", &m->from_workers)) != 0 ||
            (rc = rd_u32(r, "from_replicas", &m->from_replicas)) != 0 ||
            (rc = rd_u64(r, "from_epoch", &m->from_epoch)) != 0 || (rc = rd_u64(r, "from_step", &m->from_step)) != 0)
            return rc;
        if (m->from_workers == 0 || m->from_workers > SL_WIRE_MAX_WORKERS)
            return bad(r, "from_workers %" PRIu32 " not in 1..%u", m->from_workers, SL_WIRE_MAX_WORKERS);
        if (m->from_replicas == 0 || m->from_replicas > SL_WIRE_MAX_REPLICAS)
            return bad(r, "from_replicas %" PRIu32 " not in 1..%u", m->from_replicas, SL_WIRE_MAX_REPLICAS);
        if (m->from_epoch > SL_WIRE_MAX_POSITION)
            return bad(r, "from_epoch %" PRIu64 " above 2^48", m->from_epoch);
        if (m->from_step == 0 || m->from_step > SL_WIRE_MAX_POSITION)
            return bad(r, "from_step %" PRIu64 " not in 1..2^48", m->from_step);
    }
    return rd_end(r);
}

static int dec_welcome(struct rd *r, struct sl_wire_welcome *m)
{
    int rc;
    if ((rc = rd_u32(r, "feeder", &m->feeder)) != 0 || (rc = rd_u32(r, "feeders", &m->feeders)) != 0 ||
        (rc = rd_u64(r, "steps_per_epoch", &m->steps_per_epoch)) != 0 || (rc = rd_u64(r, "epochs", &m->epochs)) != 0 ||
        (rc = rd_u32(r, "batch", &m->batch)) != 0 || (rc = rd_u32(r, "heartbeat_ms", &m->heartbeat_ms)) != 0)
        return rc;
    if (m->feeders == 0 || m->feeders > SL_WIRE_MAX_FEEDERS)
        return bad(r, "feeders %" PRIu32 " not in 1..%u", m->feeders, SL_WIRE_MAX_FEEDERS);
    if (m->feeder >= m->feeders)
        return bad(r, "feeder %" PRIu32 " not below feeders %" PRIu32, m->feeder, m->feeders);
    if (m->batch == 0 || m->batch > SL_WIRE_MAX_ROWS)
        return bad(r, "batch %" PRIu32 " not in 1..%u", m->batch, SL_WIRE_MAX_ROWS);
    if ((rc = rd_u16(r, "ntensors", &m->ntensors)) != 0)
        return rc;
    if (m->ntensors > SL_WIRE_MAX_TENSORS)
        return bad(r, "ntensors %u exceeds %d", m->ntensors, SL_WIRE_MAX_TENSORS);
    for (unsigned i = 0; i < m->ntensors; i++) {
        struct sl_wire_field *f = &m->fields[i];
        char who[32];
        snprintf(who, sizeof who, "tensor %u", i);
        if ((rc = rd_str(r, "tensor name", 1, SL_WIRE_MAX_NAME, &f->name, &f->name_len)) != 0 ||
            (rc = rd_u8(r, "dtype", &f->dtype)) != 0 || (rc = rd_u8(r, "ragged", &f->ragged)) != 0 ||
            (rc = rd_u8(r, "rank", &f->rank)) != 0)
            return rc;
        if (f->dtype > SL_WIRE_DTYPE_MAX)
            return bad(r, "%s: unknown dtype %u", who, f->dtype);
        if (f->ragged > 1)
            return bad(r, "%s: ragged %u is not 0 or 1", who, f->ragged);
        if (f->rank > SL_WIRE_MAX_RANK)
            return bad(r, "%s: rank %u exceeds %d", who, f->rank, SL_WIRE_MAX_RANK);
        for (unsigned k = 0; k < f->rank; k++) {
            uint64_t d;
            if ((rc = rd_u64(r, "dims", &d)) != 0)
                return rc;
            f->dims[k] = to_i64(d);
        }
        uint64_t elems = 0;
        if ((rc = check_shape(r, who, f->dims, f->rank, &elems)) != 0)
            return rc;
    }
    if ((rc = rd_u32(r, "shm_pid", &m->shm_pid)) != 0 || (rc = rd_u32(r, "shm_fd", &m->shm_fd)) != 0 ||
        (rc = rd_u64(r, "shm_size", &m->shm_size)) != 0 || (rc = rd_u64(r, "shm_token", &m->shm_token)) != 0)
        return rc;
    if (m->shm_size == 0 && (m->shm_pid != 0 || m->shm_fd != 0 || m->shm_token != 0))
        return bad(r, "shm_pid, shm_fd or shm_token set without shm_size");
    if (m->shm_size != 0 && (m->shm_size < SL_WIRE_SHM_HEADER || m->shm_size > SL_WIRE_MAX_SHM))
        return bad(r, "shm_size %" PRIu64 " not in %u..%" PRIu64, m->shm_size, SL_WIRE_SHM_HEADER, SL_WIRE_MAX_SHM);
    return rd_end(r);
}

static int dec_piece(struct rd *r, struct sl_wire_piece *m)
{
    int rc;
    if ((rc = rd_u64(r, "epoch", &m->epoch)) != 0 || (rc = rd_u64(r, "step", &m->step)) != 0 ||
        (rc = rd_u32(r, "worker", &m->worker)) != 0 || (rc = rd_u32(r, "replica", &m->replica)) != 0 ||
        (rc = rd_u64(r, "seq", &m->seq)) != 0 || (rc = rd_u32(r, "rows", &m->rows)) != 0 ||
        (rc = rd_u32(r, "flags", &m->flags)) != 0)
        return rc;
    if (m->worker >= SL_WIRE_MAX_WORKERS)
        return bad(r, "worker %" PRIu32 " exceeds %u", m->worker, SL_WIRE_MAX_WORKERS - 1);
    if (m->replica >= SL_WIRE_MAX_REPLICAS)
        return bad(r, "replica %" PRIu32 " exceeds %u", m->replica, SL_WIRE_MAX_REPLICAS - 1);
    if (m->rows > SL_WIRE_MAX_ROWS)
        return bad(r, "rows %" PRIu32 " exceeds %u", m->rows, SL_WIRE_MAX_ROWS);
    if ((rc = rd_u16(r, "ntensors", &m->ntensors)) != 0)
        return rc;
    if (m->ntensors > SL_WIRE_MAX_TENSORS)
        return bad(r, "ntensors %u exceeds %d", m->ntensors, SL_WIRE_MAX_TENSORS);
    for (unsigned i = 0; i < m->ntensors; i++) {
        struct sl_wire_tensor *t = &m->tensors[i];
        char who[32];
        snprintf(who, sizeof who, "tensor %u", i);
        if ((rc = rd_u8(r, "dtype", &t->dtype)) != 0 || (rc = rd_u8(r, "rank", &t->rank)) != 0)
            return rc;
        if (t->dtype > SL_WIRE_DTYPE_MAX)
            return bad(r, "%s: unknown dtype %u", who, t->dtype);
        if (t->rank == 0 || t->rank > SL_WIRE_MAX_PIECE_RANK)
            return bad(r, "%s: rank %u not in 1..%d", who, t->rank, SL_WIRE_MAX_PIECE_RANK);
        for (unsigned k = 0; k < t->rank; k++) {
            uint64_t d;
            if ((rc = rd_u64(r, "dims", &d)) != 0)
                return rc;
            t->dims[k] = to_i64(d);
        }
        uint64_t elems = 0;
        if ((rc = check_shape(r, who, t->dims, t->rank, &elems)) != 0 || (rc = rd_u64(r, "bytes", &t->bytes)) != 0)
            return rc;
        if (t->bytes > SL_WIRE_MAX_MSG)
            return bad(r, "%s: bytes %" PRIu64 " exceeds %u", who, t->bytes, SL_WIRE_MAX_MSG);
        if ((rc = rd_u64(r, "offset", &t->offset)) != 0)
            return rc;
        if (t->offset > SL_WIRE_MAX_MSG)
            return bad(r, "%s: offset %" PRIu64 " exceeds %u", who, t->offset, SL_WIRE_MAX_MSG);
        size_t es = sl_wire_dtype_size(t->dtype);
        /* elems <= 2^30 and es <= 8: no overflow */
        if (es != 0 && t->bytes != elems * es)
            return bad(r, "%s: bytes %" PRIu64 ", but %" PRIu64 " %s values take %" PRIu64, who, t->bytes, elems,
                       sl_wire_dtype_name(t->dtype), elems * es);
    }
    if ((rc = rd_u64(r, "shm_offset", &m->shm_offset)) != 0 || (rc = rd_u64(r, "shm_bytes", &m->shm_bytes)) != 0)
        return rc;
    if (!(m->flags & SL_WIRE_PIECE_SHM) && (m->shm_offset != 0 || m->shm_bytes != 0))
        return bad(r, "shm_offset or shm_bytes set without the SHM flag");
    if ((m->flags & SL_WIRE_PIECE_SHM) && m->shm_offset < SL_WIRE_SHM_HEADER)
        return bad(r, "shm_offset %" PRIu64 " is inside the shared memory's %u-byte header", m->shm_offset,
                   SL_WIRE_SHM_HEADER);
    if (m->shm_offset > SL_WIRE_MAX_SHM || m->shm_bytes > SL_WIRE_MAX_MSG)
        return bad(r, "shm_offset %" PRIu64 " or shm_bytes %" PRIu64 " out of range", m->shm_offset, m->shm_bytes);
    return rd_end(r);
}

static int dec_status(struct rd *r, struct sl_wire_status *m)
{
    int rc;
    if ((rc = rd_u32(r, "state", &m->state)) != 0 || (rc = rd_u32(r, "retry_ms", &m->retry_ms)) != 0 ||
        (rc = rd_u64(r, "files_done", &m->files_done)) != 0 || (rc = rd_u64(r, "files", &m->files)) != 0 ||
        (rc = rd_u64(r, "records", &m->records)) != 0 || (rc = rd_u64(r, "bytes", &m->bytes)) != 0)
        return rc;
    if (m->state != SL_WIRE_STATUS_SCANNING)
        return bad(r, "state %" PRIu32 " is not %u (scanning)", m->state, SL_WIRE_STATUS_SCANNING);
    if (m->retry_ms == 0 || m->retry_ms > SL_WIRE_MAX_RETRY_MS)
        return bad(r, "retry_ms %" PRIu32 " not in 1..%u", m->retry_ms, SL_WIRE_MAX_RETRY_MS);
    if (m->files == 0 || m->files > SL_WIRE_MAX_FILES)
        return bad(r, "files %" PRIu64 " not in 1..%" PRIu64, m->files, SL_WIRE_MAX_FILES);
    if (m->files_done > m->files)
        return bad(r, "files_done %" PRIu64 " exceeds files %" PRIu64, m->files_done, m->files);
    if (m->records > SL_WIRE_MAX_COUNT)
        return bad(r, "records %" PRIu64 " exceeds %" PRIu64, m->records, SL_WIRE_MAX_COUNT);
    if (m->bytes > SL_WIRE_MAX_COUNT)
        return bad(r, "bytes %" PRIu64 " exceeds %" PRIu64, m->bytes, SL_WIRE_MAX_COUNT);
    return rd_end(r);
}

/* The five stages of the first STATS, then credit_wait_ns, then (the
 * 64-byte form) map_ns: whatever follows credit_wait_ns is map_ns, so 1-7
 * bytes there are a truncated map_ns and more than 8 trailing bytes. */
static int dec_stats(struct rd *r, struct sl_wire_stats *m)
{
    static const char *const names[SL_WIRE_STAGES] = {"read_ns",     "decompress_ns", "decode_ns",
                                                      "assemble_ns", "send_ns",       "map_ns"};
    int rc;
    for (int i = 0; i < SL_WIRE_STAGE_MAP; i++)
        if ((rc = rd_u64(r, names[i], &m->stage_ns[i])) != 0)
            return rc;
    if ((rc = rd_u64(r, "credit_wait_ns", &m->credit_wait_ns)) != 0)
        return rc;
    m->with_map = sl_reader_left(&r->in) != 0;
    if (m->with_map && (rc = rd_u64(r, names[SL_WIRE_STAGE_MAP], &m->stage_ns[SL_WIRE_STAGE_MAP])) != 0)
        return rc;
    for (int i = 0; i < SL_WIRE_STAGES; i++)
        if (m->stage_ns[i] > SL_WIRE_MAX_COUNT)
            return bad(r, "%s %" PRIu64 " exceeds %" PRIu64, names[i], m->stage_ns[i], SL_WIRE_MAX_COUNT);
    if (m->credit_wait_ns > SL_WIRE_MAX_COUNT)
        return bad(r, "credit_wait_ns %" PRIu64 " exceeds %" PRIu64, m->credit_wait_ns, SL_WIRE_MAX_COUNT);
    return rd_end(r);
}

/* An endpoint (u16 length, 1..SL_WIRE_MAX_ENDPOINT bytes, no NUL) and a
 * CURVE public key (u8 length, 0 or SL_WIRE_KEY_Z85 bytes of Z85). */
static int rd_endpoint_key(struct rd *r, const char **ep, size_t *ep_len, const char **key, size_t *key_len)
{
    int rc;
    if ((rc = rd_str(r, "endpoint", 1, SL_WIRE_MAX_ENDPOINT, ep, ep_len)) != 0)
        return rc;
    if (memchr(*ep, '\0', *ep_len) != NULL)
        return bad(r, "endpoint has a NUL byte");
    uint8_t n;
    if ((rc = rd_u8(r, "key length", &n)) != 0)
        return rc;
    if (n != 0 && n != SL_WIRE_KEY_Z85)
        return bad(r, "key length %u is not 0 or %d", n, SL_WIRE_KEY_Z85);
    const uint8_t *q = sl_read_bytes(&r->in, n);
    if (q == NULL)
        return rd_fail(r, n, "key");
    for (unsigned i = 0; i < n; i++)
        if (q[i] < 0x21 || q[i] > 0x7d || q[i] == '"' || q[i] == '\'' || q[i] == ',' || q[i] == ';' || q[i] == '\\' ||
            q[i] == '_' || q[i] == '`' || q[i] == '|' || q[i] == '~')
            return bad(r, "key byte %u (0x%02x) is not Z85", i, q[i]);
    *key = (const char *)q;
    *key_len = n;
    return 0;
}

static int dec_roster(struct rd *r, struct sl_wire_roster *m)
{
    int rc;
    if ((rc = rd_u32(r, "feeders", &m->feeders)) != 0 || (rc = rd_u16(r, "count", &m->count)) != 0)
        return rc;
    if (m->feeders == 0 || m->feeders > SL_WIRE_MAX_ROSTER)
        return bad(r, "feeders %" PRIu32 " not in 1..%u", m->feeders, SL_WIRE_MAX_ROSTER);
    if (m->count > m->feeders)
        return bad(r, "count %u exceeds feeders %" PRIu32, m->count, m->feeders);
    for (unsigned i = 0; i < m->count; i++) {
        struct sl_wire_roster_entry *e = &m->e[i];
        if ((rc = rd_u32(r, "index", &e->index)) != 0)
            return rc;
        if (e->index >= m->feeders)
            return bad(r, "entry %u: index %" PRIu32 " not below feeders %" PRIu32, i, e->index, m->feeders);
        if (i > 0 && e->index <= m->e[i - 1].index)
            return bad(r, "entry %u: index %" PRIu32 " after %" PRIu32 " (not increasing)", i, e->index,
                       m->e[i - 1].index);
        if ((rc = rd_endpoint_key(r, &e->endpoint, &e->endpoint_len, &e->key, &e->key_len)) != 0)
            return rc;
    }
    return rd_end(r);
}

static int dec_join(struct rd *r, struct sl_wire_join *m)
{
    int rc;
    if ((rc = rd_u32(r, "feeder", &m->feeder)) != 0 || (rc = rd_u32(r, "feeders", &m->feeders)) != 0 ||
        (rc = rd_u64(r, "digest", &m->digest)) != 0 ||
        (rc = rd_str(r, "job name", 1, SL_WIRE_MAX_JOB, &m->job, &m->job_len)) != 0 ||
        (rc = rd_endpoint_key(r, &m->endpoint, &m->endpoint_len, &m->key, &m->key_len)) != 0)
        return rc;
    if (m->feeders < 2 || m->feeders > SL_WIRE_MAX_ROSTER)
        return bad(r, "feeders %" PRIu32 " not in 2..%u", m->feeders, SL_WIRE_MAX_ROSTER);
    if (m->feeder >= m->feeders)
        return bad(r, "feeder %" PRIu32 " not below feeders %" PRIu32, m->feeder, m->feeders);
    return rd_end(r);
}

static int dec_body(struct rd *r, struct sl_wire_msg *m)
{
    int rc;
    switch (m->type) {
    case SL_WIRE_HELLO: return dec_hello(r, &m->hello);
    case SL_WIRE_WELCOME: return dec_welcome(r, &m->welcome);
    case SL_WIRE_REFUSE:
        if ((rc = rd_str(r, "reason", 0, SL_WIRE_MAX_REASON, &m->refuse.reason, &m->refuse.reason_len)) != 0)
            return rc;
        return rd_end(r);
    case SL_WIRE_CREDIT:
        if ((rc = rd_u32(r, "credits", &m->credit.credits)) != 0 || (rc = rd_u32(r, "flags", &m->credit.flags)) != 0)
            return rc;
        if (m->credit.credits > SL_WIRE_MAX_CREDITS)
            return bad(r, "credits %" PRIu32 " exceeds %u", m->credit.credits, SL_WIRE_MAX_CREDITS);
        return rd_end(r);
    case SL_WIRE_PIECE: return dec_piece(r, &m->piece);
    case SL_WIRE_END:
        if ((rc = rd_u32(r, "worker", &m->end.worker)) != 0 || (rc = rd_u64(r, "pieces", &m->end.pieces)) != 0 ||
            (rc = rd_u64(r, "epochs", &m->end.epochs)) != 0)
            return rc;
        if (m->end.worker >= SL_WIRE_MAX_WORKERS)
            return bad(r, "worker %" PRIu32 " exceeds %u", m->end.worker, SL_WIRE_MAX_WORKERS - 1);
        return rd_end(r);
    case SL_WIRE_ERROR: {
        uint32_t code;
        if ((rc = rd_u32(r, "code", &code)) != 0)
            return rc;
        m->error.code = to_i32(code);
        if (m->error.code < SL_ECLOSED || m->error.code > SL_EIO)
            return bad(r, "code %" PRId32 " is not an error code (%d..%d)", m->error.code, SL_ECLOSED, SL_EIO);
        if ((rc = rd_str(r, "message", 0, SL_WIRE_MAX_ERROR, &m->error.msg, &m->error.msg_len)) != 0)
            return rc;
        return rd_end(r);
    }
    case SL_WIRE_HEARTBEAT:
        if ((rc = rd_u64(r, "sent_ns", &m->heartbeat.sent_ns)) != 0)
            return rc;
        return rd_end(r);
    case SL_WIRE_BYE: return rd_end(r);
    case SL_WIRE_STATUS: return dec_status(r, &m->status);
    case SL_WIRE_STATS: return dec_stats(r, &m->stats);
    case SL_WIRE_ROSTER: return dec_roster(r, &m->roster);
    case SL_WIRE_JOIN: return dec_join(r, &m->join);
    default: return sl_error_set(r->err, SL_EPROTO, "unknown message type %u", m->type);
    }
}

int sl_wire_decode(const uint8_t *p, size_t n, struct sl_wire_msg *m, struct sl_error *err)
{
    memset(m, 0, sizeof *m);
    if (n > SL_WIRE_MAX_HEADER)
        return sl_error_set(err, SL_EPROTO, "header frame of %zu bytes exceeds %u", n, SL_WIRE_MAX_HEADER);
    struct rd r = {.in = sl_reader_make(p, n), .what = "header", .err = err};
    if (sl_read_bytes(&r.in, 4) == NULL)
        return rd_fail(&r, 4, "magic");
    if (memcmp(p, MAGIC, 4) != 0)
        return sl_error_set(err, SL_EPROTO, "bad magic %02x %02x %02x %02x (expected \"SLC1\")", p[0], p[1], p[2],
                            p[3]);
    int rc;
    uint16_t version, type;
    if ((rc = rd_u16(&r, "version", &version)) != 0)
        return rc;
    if (version != SL_WIRE_VERSION)
        return sl_error_set(err, SL_EPROTO, "unsupported version %u (this build speaks %d)", version, SL_WIRE_VERSION);
    if ((rc = rd_u16(&r, "type", &type)) != 0)
        return rc;
    m->type = type;
    char what[32];
    snprintf(what, sizeof what, "%s header", sl_wire_type_name(type));
    r.what = what;
    return dec_body(&r, m);
}

/* ---- writing ---------------------------------------------------------- */

struct wr {
    struct sl_buf *b;
    int rc; /* first buffer error; later writes do nothing */
};

static void wr_bytes(struct wr *w, const void *p, size_t n)
{
    if (w->rc == 0)
        w->rc = sl_buf_append(w->b, p, n);
}

static void wr_u8(struct wr *w, unsigned v)
{
    uint8_t q = (uint8_t)v;
    wr_bytes(w, &q, 1);
}

static void wr_u16(struct wr *w, unsigned v)
{
    uint8_t q[2];
    sl_store_le16(q, (uint16_t)v);
    wr_bytes(w, q, 2);
}

static void wr_u32(struct wr *w, uint32_t v)
{
    uint8_t q[4];
    sl_store_le32(q, v);
    wr_bytes(w, q, 4);
}

static void wr_u64(struct wr *w, uint64_t v)
{
    uint8_t q[8];
    sl_store_le64(q, v);
    wr_bytes(w, q, 8);
}

/* The encoder's own checks, worded as the decoder would word them. */
static int enc_bad(struct sl_error *err, unsigned type, const char *fmt, ...) SL_PRINTF(3, 4);

static int enc_bad(struct sl_error *err, unsigned type, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_error_vset(err, SL_EINVAL, fmt, ap);
    va_end(ap);
    sl_error_prefix(err, "cannot encode: %s header: ", sl_wire_type_name(type));
    return SL_EINVAL;
}

static int wr_str(struct wr *w, struct sl_error *err, unsigned type, const char *field, const char *s, size_t len,
                  size_t max)
{
    if (len > max)
        return enc_bad(err, type, "%s length %zu exceeds %zu", field, len, max);
    if (len > 0 && s == NULL)
        return enc_bad(err, type, "%s is NULL with length %zu", field, len);
    wr_u16(w, (unsigned)len);
    if (len > 0)
        wr_bytes(w, s, len);
    return 0;
}

static int enc_hello(struct wr *w, const struct sl_wire_hello *m, struct sl_error *err)
{
    wr_u32(w, m->worker);
    wr_u32(w, m->workers);
    wr_u32(w, m->replicas);
    wr_u32(w, m->credits);
    wr_u32(w, m->flags);
    wr_u32(w, m->heartbeat_ms);
    wr_u64(w, m->resume_epoch);
    wr_u64(w, m->resume_seq);
    wr_u64(w, m->incarnation);
    wr_u32(w, m->share);
    int rc = wr_str(w, err, SL_WIRE_HELLO, "job name", m->job, m->job_len, SL_WIRE_MAX_JOB);
    if (rc != 0)
        return rc;
    if (m->flags & SL_WIRE_HELLO_FEEDERS)
        wr_u32(w, m->feeders);
    else if (m->feeders != 0)
        return enc_bad(err, SL_WIRE_HELLO, "feeders %" PRIu32 " without the FEEDERS flag", m->feeders);
    if (m->flags & SL_WIRE_HELLO_TRANSITION) {
        wr_u32(w, m->from_workers);
        wr_u32(w, m->from_replicas);
        wr_u64(w, m->from_epoch);
        wr_u64(w, m->from_step);
    } else if (m->from_workers != 0 || m->from_replicas != 0 || m->from_epoch != 0 || m->from_step != 0) {
        return enc_bad(err, SL_WIRE_HELLO, "a transition (from %" PRIu32 " x %" PRIu32 ") without the TRANSITION flag",
                       m->from_workers, m->from_replicas);
    }
    return 0;
}

static int wr_endpoint_key(struct wr *w, struct sl_error *err, unsigned type, const char *ep, size_t ep_len,
                           const char *key, size_t key_len)
{
    int rc = wr_str(w, err, type, "endpoint", ep, ep_len, SL_WIRE_MAX_ENDPOINT);
    if (rc != 0)
        return rc;
    if (key_len != 0 && key_len != SL_WIRE_KEY_Z85)
        return enc_bad(err, type, "key length %zu is not 0 or %d", key_len, SL_WIRE_KEY_Z85);
    if (key_len != 0 && key == NULL)
        return enc_bad(err, type, "key is NULL with length %zu", key_len);
    wr_u8(w, (unsigned)key_len);
    if (key_len != 0)
        wr_bytes(w, key, key_len);
    return 0;
}

static int enc_roster(struct wr *w, const struct sl_wire_roster *m, struct sl_error *err)
{
    if (m->count > SL_WIRE_MAX_ROSTER)
        return enc_bad(err, SL_WIRE_ROSTER, "count %u exceeds %d", m->count, SL_WIRE_MAX_ROSTER);
    wr_u32(w, m->feeders);
    wr_u16(w, m->count);
    for (unsigned i = 0; i < m->count; i++) {
        const struct sl_wire_roster_entry *e = &m->e[i];
        wr_u32(w, e->index);
        int rc = wr_endpoint_key(w, err, SL_WIRE_ROSTER, e->endpoint, e->endpoint_len, e->key, e->key_len);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int enc_join(struct wr *w, const struct sl_wire_join *m, struct sl_error *err)
{
    wr_u32(w, m->feeder);
    wr_u32(w, m->feeders);
    wr_u64(w, m->digest);
    int rc = wr_str(w, err, SL_WIRE_JOIN, "job name", m->job, m->job_len, SL_WIRE_MAX_JOB);
    if (rc != 0)
        return rc;
    return wr_endpoint_key(w, err, SL_WIRE_JOIN, m->endpoint, m->endpoint_len, m->key, m->key_len);
}

static int enc_welcome(struct wr *w, const struct sl_wire_welcome *m, struct sl_error *err)
{
    wr_u32(w, m->feeder);
    wr_u32(w, m->feeders);
    wr_u64(w, m->steps_per_epoch);
    wr_u64(w, m->epochs);
    wr_u32(w, m->batch);
    wr_u32(w, m->heartbeat_ms);
    if (m->ntensors > SL_WIRE_MAX_TENSORS)
        return enc_bad(err, SL_WIRE_WELCOME, "ntensors %u exceeds %d", m->ntensors, SL_WIRE_MAX_TENSORS);
    wr_u16(w, m->ntensors);
    for (unsigned i = 0; i < m->ntensors; i++) {
        const struct sl_wire_field *f = &m->fields[i];
        int rc = wr_str(w, err, SL_WIRE_WELCOME, "tensor name", f->name, f->name_len, SL_WIRE_MAX_NAME);
        if (rc != 0)
            return rc;
        if (f->rank > SL_WIRE_MAX_RANK)
            return enc_bad(err, SL_WIRE_WELCOME, "tensor %u: rank %u exceeds %d", i, f->rank, SL_WIRE_MAX_RANK);
        wr_u8(w, f->dtype);
        wr_u8(w, f->ragged);
        wr_u8(w, f->rank);
        for (unsigned k = 0; k < f->rank; k++)
            wr_u64(w, (uint64_t)f->dims[k]);
    }
    if (m->shm_size != 0 && (m->shm_size < SL_WIRE_SHM_HEADER || m->shm_size > SL_WIRE_MAX_SHM))
        return enc_bad(err, SL_WIRE_WELCOME, "shm_size %" PRIu64 " not in %u..%" PRIu64, m->shm_size,
                       SL_WIRE_SHM_HEADER, SL_WIRE_MAX_SHM);
    if (m->shm_size == 0 && (m->shm_pid != 0 || m->shm_fd != 0 || m->shm_token != 0))
        return enc_bad(err, SL_WIRE_WELCOME, "shm_pid, shm_fd or shm_token set without shm_size");
    wr_u32(w, m->shm_pid);
    wr_u32(w, m->shm_fd);
    wr_u64(w, m->shm_size);
    wr_u64(w, m->shm_token);
    return 0;
}

static int enc_piece(struct wr *w, const struct sl_wire_piece *m, struct sl_error *err)
{
    wr_u64(w, m->epoch);
    wr_u64(w, m->step);
    wr_u32(w, m->worker);
    wr_u32(w, m->replica);
    wr_u64(w, m->seq);
    wr_u32(w, m->rows);
    wr_u32(w, m->flags);
    if (m->ntensors > SL_WIRE_MAX_TENSORS)
        return enc_bad(err, SL_WIRE_PIECE, "ntensors %u exceeds %d", m->ntensors, SL_WIRE_MAX_TENSORS);
    wr_u16(w, m->ntensors);
    for (unsigned i = 0; i < m->ntensors; i++) {
        const struct sl_wire_tensor *t = &m->tensors[i];
        if (t->rank == 0 || t->rank > SL_WIRE_MAX_PIECE_RANK)
            return enc_bad(err, SL_WIRE_PIECE, "tensor %u: rank %u not in 1..%d", i, t->rank, SL_WIRE_MAX_PIECE_RANK);
        wr_u8(w, t->dtype);
        wr_u8(w, t->rank);
        if (t->offset > SL_WIRE_MAX_MSG)
            return enc_bad(err, SL_WIRE_PIECE, "tensor %u: offset %" PRIu64 " exceeds %u", i, t->offset,
                           SL_WIRE_MAX_MSG);
        for (unsigned k = 0; k < t->rank; k++)
            wr_u64(w, (uint64_t)t->dims[k]);
        wr_u64(w, t->bytes);
        wr_u64(w, t->offset);
    }
    if (!(m->flags & SL_WIRE_PIECE_SHM) && (m->shm_offset != 0 || m->shm_bytes != 0))
        return enc_bad(err, SL_WIRE_PIECE, "shm_offset or shm_bytes set without the SHM flag");
    if ((m->flags & SL_WIRE_PIECE_SHM) && m->shm_offset < SL_WIRE_SHM_HEADER)
        return enc_bad(err, SL_WIRE_PIECE, "shm_offset %" PRIu64 " is inside the shared memory's %u-byte header",
                       m->shm_offset, SL_WIRE_SHM_HEADER);
    if (m->shm_offset > SL_WIRE_MAX_SHM || m->shm_bytes > SL_WIRE_MAX_MSG)
        return enc_bad(err, SL_WIRE_PIECE, "shm_offset %" PRIu64 " or shm_bytes %" PRIu64 " out of range",
                       m->shm_offset, m->shm_bytes);
    wr_u64(w, m->shm_offset);
    wr_u64(w, m->shm_bytes);
    return 0;
}

static int enc_body(struct wr *w, unsigned type, const void *msg, struct sl_error *err)
{
    switch (type) {
    case SL_WIRE_HELLO: return enc_hello(w, msg, err);
    case SL_WIRE_WELCOME: return enc_welcome(w, msg, err);
    case SL_WIRE_REFUSE: {
        const struct sl_wire_refuse *m = msg;
        return wr_str(w, err, type, "reason", m->reason, m->reason_len, SL_WIRE_MAX_REASON);
    }
    case SL_WIRE_CREDIT:
        wr_u32(w, ((const struct sl_wire_credit *)msg)->credits);
        wr_u32(w, ((const struct sl_wire_credit *)msg)->flags);
        return 0;
    case SL_WIRE_PIECE: return enc_piece(w, msg, err);
    case SL_WIRE_END: {
        const struct sl_wire_end *m = msg;
        wr_u32(w, m->worker);
        wr_u64(w, m->pieces);
        wr_u64(w, m->epochs);
        return 0;
    }
    case SL_WIRE_ERROR: {
        const struct sl_wire_error *m = msg;
        wr_u32(w, (uint32_t)m->code);
        return wr_str(w, err, type, "message", m->msg, m->msg_len, SL_WIRE_MAX_ERROR);
    }
    case SL_WIRE_HEARTBEAT: wr_u64(w, ((const struct sl_wire_heartbeat *)msg)->sent_ns); return 0;
    case SL_WIRE_BYE: return 0;
    case SL_WIRE_STATUS: {
        const struct sl_wire_status *m = msg;
        wr_u32(w, m->state);
        wr_u32(w, m->retry_ms);
        wr_u64(w, m->files_done);
        wr_u64(w, m->files);
        wr_u64(w, m->records);
        wr_u64(w, m->bytes);
        return 0;
    }
    case SL_WIRE_STATS: {
        const struct sl_wire_stats *m = msg;
        if (m->with_map > 1)
            return enc_bad(err, type, "with_map %u is not 0 or 1", m->with_map);
        if (!m->with_map && m->stage_ns[SL_WIRE_STAGE_MAP] != 0)
            return enc_bad(err, type, "map_ns %" PRIu64 " in the form without the map stage",
                           m->stage_ns[SL_WIRE_STAGE_MAP]);
        for (int i = 0; i < SL_WIRE_STAGE_MAP; i++)
            wr_u64(w, m->stage_ns[i]);
        wr_u64(w, m->credit_wait_ns);
        if (m->with_map)
            wr_u64(w, m->stage_ns[SL_WIRE_STAGE_MAP]);
        return 0;
    }
    case SL_WIRE_ROSTER: return enc_roster(w, msg, err);
    case SL_WIRE_JOIN: return enc_join(w, msg, err);
    default: return sl_error_set(err, SL_EINVAL, "cannot encode: unknown message type %u", type);
    }
}

static int encode(unsigned type, const void *msg, struct sl_buf *out, struct sl_error *err)
{
    struct wr w = {.b = out, .rc = 0};
    sl_buf_reset(out);
    wr_bytes(&w, MAGIC, 4);
    wr_u16(&w, SL_WIRE_VERSION);
    wr_u16(&w, type);
    int rc = enc_body(&w, type, msg, err);
    if (rc == 0 && w.rc != 0)
        rc = sl_error_set(err, w.rc, "cannot encode: %s header: %s", sl_wire_type_name(type),
                          w.rc == SL_ENOMEM ? "out of memory" : "over the buffer's limit");
    if (rc == 0) {
        /* The decoder holds the rules; ~6 KiB of stack for its result. */
        struct sl_wire_msg check;
        rc = sl_wire_decode(out->data, out->len, &check, err);
        if (rc != 0) {
            rc = SL_EINVAL;
            if (err != NULL) {
                err->code = rc;
                sl_error_prefix(err, "cannot encode: ");
            }
        }
    }
    if (rc != 0)
        sl_buf_reset(out);
    return rc;
}

int sl_wire_encode_hello(const struct sl_wire_hello *m, struct sl_buf *out)
{
    return encode(SL_WIRE_HELLO, m, out, NULL);
}

int sl_wire_encode_welcome(const struct sl_wire_welcome *m, struct sl_buf *out)
{
    return encode(SL_WIRE_WELCOME, m, out, NULL);
}

int sl_wire_encode_refuse(const struct sl_wire_refuse *m, struct sl_buf *out)
{
    return encode(SL_WIRE_REFUSE, m, out, NULL);
}

int sl_wire_encode_credit(const struct sl_wire_credit *m, struct sl_buf *out)
{
    return encode(SL_WIRE_CREDIT, m, out, NULL);
}

int sl_wire_encode_piece(const struct sl_wire_piece *m, struct sl_buf *out)
{
    return encode(SL_WIRE_PIECE, m, out, NULL);
}

int sl_wire_encode_end(const struct sl_wire_end *m, struct sl_buf *out)
{
    return encode(SL_WIRE_END, m, out, NULL);
}

int sl_wire_encode_error(const struct sl_wire_error *m, struct sl_buf *out)
{
    return encode(SL_WIRE_ERROR, m, out, NULL);
}

int sl_wire_encode_heartbeat(const struct sl_wire_heartbeat *m, struct sl_buf *out)
{
    return encode(SL_WIRE_HEARTBEAT, m, out, NULL);
}

int sl_wire_encode_bye(struct sl_buf *out)
{
    return encode(SL_WIRE_BYE, NULL, out, NULL);
}

int sl_wire_encode_status(const struct sl_wire_status *m, struct sl_buf *out)
{
    return encode(SL_WIRE_STATUS, m, out, NULL);
}

int sl_wire_encode_stats(const struct sl_wire_stats *m, struct sl_buf *out)
{
    return encode(SL_WIRE_STATS, m, out, NULL);
}

int sl_wire_encode_roster(const struct sl_wire_roster *m, struct sl_buf *out)
{
    return encode(SL_WIRE_ROSTER, m, out, NULL);
}

int sl_wire_encode_join(const struct sl_wire_join *m, struct sl_buf *out)
{
    return encode(SL_WIRE_JOIN, m, out, NULL);
}

int sl_wire_encode(const struct sl_wire_msg *m, struct sl_buf *out, struct sl_error *err)
{
    const void *body;
    switch (m->type) {
    case SL_WIRE_HELLO: body = &m->hello; break;
    case SL_WIRE_WELCOME: body = &m->welcome; break;
    case SL_WIRE_REFUSE: body = &m->refuse; break;
    case SL_WIRE_CREDIT: body = &m->credit; break;
    case SL_WIRE_PIECE: body = &m->piece; break;
    case SL_WIRE_END: body = &m->end; break;
    case SL_WIRE_ERROR: body = &m->error; break;
    case SL_WIRE_HEARTBEAT: body = &m->heartbeat; break;
    case SL_WIRE_STATUS: body = &m->status; break;
    case SL_WIRE_STATS: body = &m->stats; break;
    case SL_WIRE_ROSTER: body = &m->roster; break;
    case SL_WIRE_JOIN: body = &m->join; break;
    default: body = NULL; break;
    }
    return encode(m->type, body, out, err);
}

/* ---- the body frame ---------------------------------------------------- */

int sl_wire_check_body(const struct sl_wire_piece *p, size_t body_bytes, struct sl_error *err)
{
    for (unsigned i = 0; i < p->ntensors; i++) {
        const struct sl_wire_tensor *t = &p->tensors[i];
        /* offset and bytes are each <= SL_WIRE_MAX_MSG (decoded so): no overflow */
        if (t->offset + t->bytes > (uint64_t)body_bytes)
            return sl_error_set(err, SL_EPROTO, "tensor %u: bytes [%" PRIu64 ", %" PRIu64 ") past the body's %zu", i,
                                t->offset, t->offset + t->bytes, body_bytes);
    }
    return 0;
}

static void fmt_dims(char *out, size_t cap, const int64_t *dims, unsigned rank)
{
    size_t n = 0;
    out[0] = '\0';
    n += (size_t)snprintf(out + n, cap - n, "[");
    for (unsigned i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(out + n, cap - n, "%s%" PRId64, i ? ", " : "", dims[i]);
    if (n < cap)
        snprintf(out + n, cap - n, "]");
}

int sl_wire_check_piece(const struct sl_wire_piece *p, const struct sl_wire_welcome *schema, struct sl_error *err)
{
    if (p->ntensors != schema->ntensors)
        return sl_error_set(err, SL_EPROTO, "piece has %u tensors, schema says %u", p->ntensors, schema->ntensors);
    for (unsigned i = 0; i < p->ntensors; i++) {
        const struct sl_wire_tensor *t = &p->tensors[i];
        const struct sl_wire_field *f = &schema->fields[i];
        int nl = (int)f->name_len;
        if (t->dtype != f->dtype)
            return sl_error_set(err, SL_EPROTO, "tensor %u '%.*s': dtype %s, schema says %s", i, nl, f->name,
                                sl_wire_dtype_name(t->dtype), sl_wire_dtype_name(f->dtype));
        int ok = t->rank == f->rank + 1 && (f->ragged || t->dims[0] == (int64_t)p->rows);
        for (unsigned k = 0; ok && k < f->rank; k++)
            ok = t->dims[k + 1] == f->dims[k];
        if (!ok) {
            char got[160], want[160];
            fmt_dims(got, sizeof got, t->dims, t->rank);
            int64_t w[SL_WIRE_MAX_PIECE_RANK];
            w[0] = (int64_t)p->rows;
            for (unsigned k = 0; k < f->rank; k++)
                w[k + 1] = f->dims[k];
            fmt_dims(want, sizeof want, w, f->rank + 1u);
            return sl_error_set(err, SL_EPROTO, "tensor %u '%.*s': dims %s, schema says %s%s", i, nl, f->name, got,
                                want, f->ragged ? " (dims[0] free: ragged)" : "");
        }
    }
    return 0;
}
