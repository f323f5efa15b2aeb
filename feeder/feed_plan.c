/* feed_plan: the plan as an iterator (contract in feed_plan.h).
 *
 * A plan first derives its per-epoch figures from the record counts alone:
 * how many elements reach each stage, how many pieces every worker's split
 * yields, and so the common step count. Closed forms cover everything but the
 * tail of the RebatchDatasetV2 re-chunker, which is walked over at most one
 * cycle of the split sizes.
 *
 * Iteration then pulls elements through small stages, each a function over
 * the previous one: interleave -> record shard -> shuffle -> batch shard ->
 * split. Batching needs no buffer: only an epoch's last batch can be short,
 * so "batch by G, drop_remainder, keep batches b % W == w" reduces to which
 * positions of the shuffled stream the worker consumes, known in advance.
 * The state is the interleave cycle, the shuffle buffer and one piece.
 *
 * A seek (a trainer resuming) skips whole epochs by arithmetic and reaches
 * its piece within the epoch without making the pieces before it: the
 * split's position gives the number of shuffled elements already taken,
 * the shuffle buffer is rebuilt from its last choices (shuffle_seek) and
 * the interleave moves a turn of its cycle at a time (ilv_skip).
 */
#include "feed_plan.h"

#include <string.h>

#include "sl_alloc.h"

#define GOLDEN 0x9E3779B97F4A7C15ull

enum split_mode {
    SPLIT_STREAM = 0, /* RebatchDatasetV2 with sizes(w) (docs/semantics.md 4.1) */
    SPLIT_LEGACY,     /* RebatchDataset v1 + shard of the pieces (4.2, 3.3) */
    SPLIT_NONE        /* per-replica input: batches of G / N */
};

/* What one worker's pipeline does with one epoch, from the counts alone. */
struct figures {
    enum split_mode mode;
    int shard_files;   /* files j % W == w */
    int shard_records; /* interleaved elements p % W == w */
    int shard_batches; /* global batches b % W == w (HINT=batches) */
    uint64_t files;    /* files this worker reads */
    uint64_t in;       /* elements entering the shuffle */
    uint64_t flat;     /* STREAM: elements the re-chunker sees */
    uint64_t batches;  /* LEGACY, NONE: batches per epoch */
    uint64_t elements; /* elements delivered */
    uint64_t pieces;   /* pieces, empty ones of the split included */
};

struct slot {
    uint32_t file;
    int open;
    uint64_t next, count;
};

struct feed_plan {
    const struct feed_plan_config *cfg;
    uint32_t worker, W, R;
    uint64_t N, G;
    struct figures fig;
    uint64_t steps;

    uint32_t *files; /* this worker's file list */
    size_t nfiles;

    /* interleave */
    struct slot *slots;
    uint32_t cycle, ci, nopen;
    size_t next_file;
    int inputs_done;
    uint64_t ilv_pos; /* elements out of the interleave this epoch */

    /* shuffle */
    struct feed_elem *buf;
    uint64_t buf_cap, buf_len;
    int primed, src_done;
    uint64_t rng;
    uint64_t sh_pos; /* elements out of the shuffle this epoch */

    /* split */
    uint64_t flat_left, size_idx;

    /* position */
    uint64_t epoch, k;
    int done;

    struct feed_elem *elems;
    size_t elems_cap;
};

/* ---- helpers ---------------------------------------------------------- */

static uint64_t div_up(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* splitmix64's output for state z (after its increment): the n-th draw from
 * state s is mix(s + n * GOLDEN), so any draw can be computed directly. */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t splitmix64(uint64_t *state)
{
    *state += GOLDEN;
    return mix(*state);
}

/* Entry j of sizes(w): base = [lo+1] * hi + [lo] * (n - hi) rotated left by
 * w*R (docs/semantics.md 4.1). */
static uint64_t stream_size(uint64_t G, uint64_t n, uint64_t rot, uint64_t j)
{
    uint64_t i = (j + rot) % n;
    uint64_t lo = G / n, hi = G - n * lo;
    return lo + (i < hi);
}

/* Legacy split: piece kk of a batch of b elements over N replicas. */
static void legacy_range(uint64_t b, uint64_t N, uint64_t kk, uint64_t *start, uint64_t *len)
{
    uint64_t iv = div_up(b, N);
    *start = kk * iv;
    *len = *start >= b ? 0 : min_u64(iv, b - *start);
}

static enum feed_policy effective_policy(const struct feed_plan_config *cfg)
{
    if (cfg->policy == FEED_SHARD_AUTO)
        return cfg->source_is_files ? FEED_SHARD_FILE : FEED_SHARD_DATA;
    return cfg->policy;
}

static int shards_files(const struct feed_plan_config *cfg)
{
    if (cfg->per_replica_input)
        return cfg->pr_shard == FEED_PR_SHARD_FILES;
    enum feed_policy pol = effective_policy(cfg);
    return pol == FEED_SHARD_FILE || (pol == FEED_SHARD_HINT && cfg->hint == FEED_HINT_FILES);
}

/* ---- figures ---------------------------------------------------------- */

/* Sum of entries [0, i) of the base sizes repeated cyclically. */
static uint64_t base_prefix(uint64_t G, uint64_t n, uint64_t i)
{
    uint64_t lo = G / n, hi = G - n * lo, r = i % n;
    return (i / n) * G + r * lo + min_u64(r, hi);
}

/* Sum of the first j entries of sizes(w) (rotation rot). */
static uint64_t stream_prefix(uint64_t G, uint64_t n, uint64_t rot, uint64_t j)
{
    return base_prefix(G, n, rot + j) - base_prefix(G, n, rot);
}

/* Pieces of the RebatchDatasetV2 re-chunker over `flat` elements with
 * sizes(w): whole cycles take G elements in n pieces each; in the tail, with
 * `left` < G elements, a want of 0 yields an empty piece as long as the end
 * of input has not been seen, and the first want > 0 that finds fewer than
 * it wants ends the stream, after a partial piece if it found some. That
 * want is the first position j with prefix(j + 1) > left. */
static uint64_t stream_pieces(uint64_t G, uint64_t n, uint64_t rot, uint64_t flat)
{
    uint64_t q = flat / G, left = flat % G;
    uint64_t a = 0, b = n - 1; /* prefix(n) = G > left */
    while (a < b) {
        uint64_t m = a + (b - a) / 2;
        if (stream_prefix(G, n, rot, m + 1) > left)
            b = m;
        else
            a = m + 1;
    }
    return q * n + a + (left > stream_prefix(G, n, rot, a));
}

/* The same walk piece by piece, adding each piece's elements to its local
 * replica (first nrep): for summaries of one worker, O(n). */
static void stream_replicas(uint64_t G, uint64_t n, uint64_t rot, uint64_t R, uint64_t flat, uint64_t *rep, size_t nrep)
{
    uint64_t q = flat / G, left = flat % G, pieces = q * n;
    for (uint64_t j = 0; j < n; j++)
        if (j % R < nrep)
            rep[j % R] += q * stream_size(G, n, rot, j);
    for (uint64_t j = 0; j < n; j++, pieces++) {
        uint64_t want = stream_size(G, n, rot, j);
        if (want == 0)
            continue;
        uint64_t got = min_u64(want, left);
        if (got == 0)
            break;
        if (pieces % R < nrep)
            rep[pieces % R] += got;
        left -= got;
        if (got < want)
            break;
    }
}

/* cfg is valid; rep (may be NULL) gets per replica elements, first nrep. */
static void derive(const struct feed_plan_config *cfg, uint32_t w, struct figures *f, uint64_t *rep, size_t nrep)
{
    uint64_t W = cfg->workers, R = cfg->replicas, N = W * R, G = cfg->global_batch;
    enum feed_policy pol = effective_policy(cfg);
    memset(f, 0, sizeof *f);
    if (rep != NULL)
        memset(rep, 0, nrep * sizeof *rep);

    if (cfg->per_replica_input) {
        f->mode = SPLIT_NONE;
        f->shard_records = cfg->pr_shard == FEED_PR_SHARD_RECORDS;
    } else {
        f->mode = pol == FEED_SHARD_DATA ? SPLIT_LEGACY : SPLIT_STREAM;
        f->shard_records = pol == FEED_SHARD_HINT && cfg->hint == FEED_HINT_RECORDS;
        f->shard_batches = pol == FEED_SHARD_HINT && cfg->hint == FEED_HINT_BATCHES;
    }
    f->shard_files = shards_files(cfg);

    uint64_t t = 0;
    for (size_t j = f->shard_files ? w : 0; j < cfg->nfiles; j += f->shard_files ? W : 1) {
        t += cfg->counts[j];
        f->files++;
    }
    f->in = f->shard_records ? t / W + (w < t % W) : t;

    if (f->mode == SPLIT_NONE) {
        uint64_t g = G / N, full = f->in / g, rem = f->in % g;
        int partial = !cfg->drop_remainder && rem > 0;
        f->batches = full + (uint64_t)partial;
        f->pieces = f->batches;
        f->elements = full * g + (partial ? rem : 0);
        for (uint64_t r = 0; r < R && r < nrep && rep != NULL; r++) {
            rep[r] = (full / R + (r < full % R)) * g;
            if (partial && full % R == r)
                rep[r] += rem;
        }
        return;
    }

    uint64_t full = f->in / G, rem = f->in % G;
    int partial = !cfg->drop_remainder && rem > 0;
    if (f->mode == SPLIT_LEGACY) {
        /* every worker sees all batches; piece kk of a batch -> worker kk % W,
         * so worker w keeps pieces w + W*i, i = 0..R-1, for replica i */
        f->batches = full + (uint64_t)partial;
        f->pieces = f->batches * R;
        for (uint64_t i = 0; i < R; i++) {
            uint64_t start, len, e;
            legacy_range(G, N, w + W * i, &start, &len);
            e = full * len;
            if (partial) {
                legacy_range(rem, N, w + W * i, &start, &len);
                e += len;
            }
            f->elements += e;
            if (rep != NULL && i < nrep)
                rep[i] = e;
        }
        return;
    }

    if (f->shard_batches)
        f->flat = (full / W + (w < full % W)) * G + (partial && full % W == w ? rem : 0);
    else
        f->flat = full * G + (partial ? rem : 0);
    f->elements = f->flat;
    /* N == 1 runs no rebatch; the re-chunker with sizes [G] is the identity */
    f->pieces = stream_pieces(G, N, (uint64_t)w * R, f->flat);
    if (rep != NULL)
        stream_replicas(G, N, (uint64_t)w * R, R, f->flat, rep, nrep);
}

static uint64_t common_steps(const struct feed_plan_config *cfg)
{
    uint64_t steps = 0;
    for (uint32_t w = 0; w < cfg->workers; w++) {
        struct figures f;
        derive(cfg, w, &f, NULL, 0);
        uint64_t s = div_up(f.pieces, cfg->replicas);
        if (s > steps)
            steps = s;
    }
    return steps;
}

/* ---- validation ------------------------------------------------------- */

/* TensorFlow's ShardDataset(require_non_empty): a worker that gets a first
 * element while the input holds fewer than W fails (docs/semantics.md 3.6). For
 * the job, that is any 1 <= have < W. */
static int too_few(uint64_t have, uint64_t W)
{
    return have >= 1 && have < W;
}

static int validate(const struct feed_plan_config *cfg, struct sl_error *err)
{
    if (cfg == NULL)
        return sl_error_set(err, SL_EINVAL, "plan: no configuration");
    if (cfg->workers < 1)
        return sl_error_set(err, SL_EINVAL, "workers must be >= 1");
    if (cfg->replicas < 1)
        return sl_error_set(err, SL_EINVAL, "replicas per worker must be >= 1");
    if (cfg->global_batch < 1)
        return sl_error_set(err, SL_EINVAL, "global_batch_size must be >= 1");
    if (cfg->nfiles > 0 && cfg->counts == NULL)
        return sl_error_set(err, SL_EINVAL, "plan: record counts missing for %zu files", cfg->nfiles);
    if (cfg->nfiles > UINT32_MAX)
        return sl_error_set(err, SL_EINVAL, "plan: too many files (%zu)", cfg->nfiles);
    if ((unsigned)cfg->policy > FEED_SHARD_HINT)
        return sl_error_set(err, SL_EINVAL, "plan: unknown auto-shard policy %d", (int)cfg->policy);
    if ((unsigned)cfg->hint > FEED_HINT_BATCHES)
        return sl_error_set(err, SL_EINVAL, "plan: unknown shard hint %d", (int)cfg->hint);
    if ((unsigned)cfg->pr_shard > FEED_PR_SHARD_RECORDS)
        return sl_error_set(err, SL_EINVAL, "plan: unknown per-replica shard %d", (int)cfg->pr_shard);

    uint64_t W = cfg->workers, N = W * cfg->replicas, t = 0;
    for (size_t j = 0; j < cfg->nfiles; j++) {
        if (cfg->counts[j] > UINT64_MAX - t)
            return sl_error_set(err, SL_EINVAL, "plan: record counts overflow 64 bits");
        t += cfg->counts[j];
    }
    if (cfg->per_replica_input) {
        if (cfg->global_batch % N != 0)
            return sl_error_set(err, SL_EINVAL,
                                "The global_batch_size %llu is not divisible by num_replicas_in_sync %llu",
                                (unsigned long long)cfg->global_batch, (unsigned long long)N);
        return 0;
    }
    enum feed_policy pol = effective_policy(cfg);
    if (pol == FEED_SHARD_FILE && W > 1) {
        if (!cfg->source_is_files)
            return sl_error_set(err, SL_EINVAL,
                                "FILE sharding needs a file source (found an unshardable source dataset)");
        if (too_few(cfg->nfiles, W))
            return sl_error_set(err, SL_EINVAL, "FILE sharding needs at least %llu files, found %zu",
                                (unsigned long long)W, cfg->nfiles);
    }
    if (pol == FEED_SHARD_HINT) {
        uint64_t have = cfg->nfiles;
        const char *what = "files";
        if (cfg->hint == FEED_HINT_RECORDS) {
            have = t;
            what = "records";
        } else if (cfg->hint == FEED_HINT_BATCHES) {
            have = cfg->drop_remainder ? t / cfg->global_batch : div_up(t, cfg->global_batch);
            what = "batches";
        }
        if (too_few(have, W))
            return sl_error_set(err, SL_EINVAL, "HINT sharding needs at least %llu %s, found %llu",
                                (unsigned long long)W, what, (unsigned long long)have);
    }
    return 0;
}

/* ---- stages ----------------------------------------------------------- */

/* tf.data interleave, block length 1 (docs/semantics.md 2.3): an empty slot opens
 * the next file when the cycle reaches it and reads from it at once; a
 * finished file (an empty one too) empties its slot and the cycle moves on. */
static int ilv_next(struct feed_plan *p, struct feed_elem *e)
{
    while (!p->inputs_done || p->nopen > 0) {
        struct slot *s = &p->slots[p->ci];
        if (s->open) {
            if (s->next < s->count) {
                e->file = s->file;
                e->record = s->next++;
                p->ci = (p->ci + 1) % p->cycle;
                return 0;
            }
            s->open = 0;
            p->nopen--;
            p->ci = (p->ci + 1) % p->cycle;
        } else if (!p->inputs_done) {
            if (p->next_file < p->nfiles) {
                uint32_t f = p->files[p->next_file++];
                s->file = f;
                s->open = 1;
                s->next = 0;
                s->count = p->cfg->counts[f];
                p->nopen++;
            } else {
                p->inputs_done = 1;
            }
        } else {
            p->ci = (p->ci + 1) % p->cycle;
        }
    }
    return SL_END;
}

static int records_next(struct feed_plan *p, struct feed_elem *e)
{
    while (ilv_next(p, e) == 0) {
        uint64_t pos = p->ilv_pos++;
        if (!p->fig.shard_records || pos % p->W == p->worker)
            return 0;
    }
    return SL_END;
}

/* The header's shuffle: fill S, then emit a random slot and refill it with
 * the next input, or, once the input ends, with the last slot. */
static int shuffle_next(struct feed_plan *p, struct feed_elem *e)
{
    if (p->buf_cap == 0)
        return records_next(p, e);
    if (!p->primed) {
        while (p->buf_len < p->buf_cap && records_next(p, &p->buf[p->buf_len]) == 0)
            p->buf_len++;
        p->src_done = p->buf_len < p->buf_cap;
        p->primed = 1;
    }
    if (p->buf_len == 0)
        return SL_END;
    uint64_t i = splitmix64(&p->rng) % p->buf_len;
    *e = p->buf[i];
    if (!p->src_done && records_next(p, &p->buf[i]) == 0)
        return 0;
    p->src_done = 1;
    p->buf[i] = p->buf[--p->buf_len];
    return 0;
}

/* Next element of the shuffled stream, counting positions. Callers only ask
 * for elements the figures say exist. */
static void take(struct feed_plan *p, struct feed_elem *e)
{
    if (shuffle_next(p, e) != 0)
        memset(e, 0, sizeof *e); /* unreachable: the figures bound every request */
    p->sh_pos++;
}

/* Next element of the batched stream the re-chunker sees: with HINT=batches
 * only positions in batches b % W == w. */
static void flat_next(struct feed_plan *p, struct feed_elem *e)
{
    while (p->fig.shard_batches && (p->sh_pos / p->G) % p->W != p->worker) {
        struct feed_elem skip;
        take(p, &skip);
    }
    take(p, e);
}

static void epoch_start(struct feed_plan *p)
{
    const struct feed_plan_config *cfg = p->cfg;
    memset(p->slots, 0, p->cycle * sizeof *p->slots);
    p->ci = 0;
    p->nopen = 0;
    p->next_file = 0;
    p->inputs_done = 0;
    p->ilv_pos = 0;
    p->buf_len = 0;
    p->primed = 0;
    p->src_done = 0;
    p->rng = cfg->seed ^ (cfg->reshuffle_each_epoch ? p->epoch * GOLDEN : 0);
    p->sh_pos = 0;
    p->flat_left = p->fig.flat;
    p->size_idx = 0;
    p->k = 0;
}

/* Fill p->elems with real piece k of the current epoch; returns its size. */
static size_t make_piece(struct feed_plan *p, uint64_t k)
{
    size_t n = 0;
    if (p->fig.mode == SPLIT_NONE) {
        uint64_t g = p->G / p->N;
        n = (size_t)min_u64(g, p->fig.in - k * g);
        for (size_t i = 0; i < n; i++)
            take(p, &p->elems[i]);
    } else if (p->fig.mode == SPLIT_LEGACY) {
        uint64_t batch = k / p->R, i = k % p->R;
        uint64_t b = min_u64(p->G, p->fig.in - batch * p->G);
        uint64_t start, len;
        legacy_range(b, p->N, p->worker + (uint64_t)p->W * i, &start, &len);
        if (len > 0) {
            uint64_t at = batch * p->G + start;
            struct feed_elem skip;
            while (p->sh_pos < at)
                take(p, &skip); /* other workers' pieces */
            n = (size_t)len;
            for (size_t j = 0; j < n; j++)
                take(p, &p->elems[j]);
        }
    } else {
        uint64_t want = stream_size(p->G, p->N, (uint64_t)p->worker * p->R, p->size_idx % p->N);
        p->size_idx++;
        n = (size_t)min_u64(want, p->flat_left);
        for (size_t j = 0; j < n; j++)
            flat_next(p, &p->elems[j]);
        p->flat_left -= n;
    }
    return n;
}

/* ---- fast-forward ----------------------------------------------------- */

/* Pass over n elements of the interleave (fewer if it ends). While every
 * slot of the cycle holds an open file with elements left (or, once the
 * inputs are done, every open one does), a turn of the cycle takes one
 * element from each open slot and ends where it began, so whole turns are
 * taken at once, up to the first file to run out; the rest goes element by
 * element. After a turn that emptied a file, bulk turns wait for a whole
 * cycle of single elements, in which that slot is closed and refilled.
 * Cost: O(parallel_reads) per file opened, whatever the file's size. */
static void ilv_skip(struct feed_plan *p, uint64_t n)
{
    struct feed_elem e;
    uint64_t single = 0; /* elements to take one by one before the next bulk try */
    while (n > 0) {
        if (single == 0 && p->nopen > 0 && n >= p->nopen && (p->inputs_done || p->nopen == p->cycle)) {
            uint64_t turns = n / p->nopen;
            for (uint32_t j = 0; j < p->cycle; j++)
                if (p->slots[j].open)
                    turns = min_u64(turns, p->slots[j].count - p->slots[j].next);
            if (turns > 0) {
                for (uint32_t j = 0; j < p->cycle; j++)
                    if (p->slots[j].open)
                        p->slots[j].next += turns;
                n -= turns * p->nopen;
                p->ilv_pos += turns * p->nopen;
                continue;
            }
            single = p->cycle;
        }
        if (ilv_next(p, &e) != 0)
            return;
        p->ilv_pos++;
        n--;
        if (single > 0)
            single--;
    }
}

/* Make element j of the record stream (the interleave, record-sharded) the
 * next that records_next returns. j is at or after the stream's position. */
static void src_seek(struct feed_plan *p, uint64_t j)
{
    uint64_t at = p->fig.shard_records ? j * p->W + p->worker : j;
    if (at > p->ilv_pos)
        ilv_skip(p, at - p->ilv_pos);
}

#define PENDING UINT32_MAX /* a buffer slot whose element is not read yet */

/* From the start of an epoch, put the shuffle where it stands after
 * emitting T elements, without emitting them.
 *
 * With S = the buffer's size and `in` elements entering, emission t < in - S
 * draws slot i_t = draw(t) % S, emits it and refills it with input element
 * S + t; later emissions drain the buffer. So after T <= in - S emissions,
 * slot i holds input element S + t for the last t < T with i_t = i, or
 * element i if no draw chose it. Those last choices are found by replaying
 * the draws backwards from T - 1 until every slot has been chosen once (the
 * coupon collector's S * H(S) draws on average, about S (ln S + 0.58); all
 * T draws when T is less), then forwards over the same range to read the
 * chosen elements in input order. The interleave passes over the elements
 * in between with ilv_skip. Drain emissions (at most S) are replayed one by
 * one. The buffer itself holds the bookkeeping: {PENDING, position}. */
static void shuffle_seek(struct feed_plan *p, uint64_t T)
{
    if (p->buf_cap == 0) {
        src_seek(p, T);
        p->sh_pos = T;
        return;
    }
    uint64_t S = p->buf_cap, steady = p->fig.in - S, T1 = min_u64(T, steady), s0 = p->rng;
    struct feed_elem *buf = p->buf;
    for (uint64_t i = 0; i < S; i++) {
        buf[i].file = PENDING;
        buf[i].record = i; /* < S: no draw has chosen slot i yet */
    }
    uint64_t t = T1, left = S;
    while (t > 0 && left > 0) {
        t--;
        uint64_t i = mix(s0 + (t + 1) * GOLDEN) % S;
        if (buf[i].record < S) {
            buf[i].record = S + t;
            left--;
        }
    }
    for (uint64_t i = 0; i < S; i++) /* never chosen: the first fill, in order */
        if (buf[i].record < S) {
            src_seek(p, i);
            (void)records_next(p, &buf[i]);
        }
    for (; t < T1; t++) { /* each slot's last choice, in input order */
        uint64_t i = mix(s0 + (t + 1) * GOLDEN) % S;
        if (buf[i].file == PENDING && buf[i].record == S + t) {
            src_seek(p, S + t);
            (void)records_next(p, &buf[i]);
        }
    }
    src_seek(p, S + T1); /* the next refill (already there: draw T1 - 1 was read last) */
    p->buf_len = S;
    p->primed = 1;
    p->src_done = 0;
    p->rng = s0 + T1 * GOLDEN;
    p->sh_pos = T1;
    struct feed_elem skip;
    while (p->sh_pos < T)
        take(p, &skip); /* the drain */
}

/* From the start of the epoch, stand before real-or-padding piece k
 * (k < steps * R) as if pieces 0..k-1 had been made. Only the position in
 * the shuffled stream matters: the shuffled elements before the first that
 * piece k or a later one takes (any position between the end of the last
 * piece made and that element gives the same pieces). */
static void plan_forward(struct feed_plan *p, uint64_t k)
{
    uint64_t kk = min_u64(k, p->fig.pieces);
    if (p->fig.mode == SPLIT_STREAM) {
        uint64_t f = min_u64(stream_prefix(p->G, p->N, (uint64_t)p->worker * p->R, kk), p->fig.flat);
        p->size_idx = kk;
        p->flat_left = p->fig.flat - f;
        if (k < p->fig.pieces) {
            /* flat element f is in the worker's local batch f / G: with
             * HINT=batches, global batch (f / G) * W + w */
            uint64_t T = p->fig.shard_batches ? ((f / p->G) * p->W + p->worker) * p->G + f % p->G : f;
            shuffle_seek(p, min_u64(T, p->fig.in));
        }
    } else if (k < p->fig.pieces && p->fig.mode == SPLIT_LEGACY) {
        /* piece k's range starts after those of the batch's earlier pieces */
        uint64_t batch = k / p->R, i = k % p->R;
        uint64_t b = min_u64(p->G, p->fig.in - batch * p->G), start, len;
        legacy_range(b, p->N, p->worker + (uint64_t)p->W * i, &start, &len);
        shuffle_seek(p, batch * p->G + min_u64(start, b));
    } else if (k < p->fig.pieces) {
        shuffle_seek(p, min_u64(k * (p->G / p->N), p->fig.in));
    }
    p->k = k;
}

/* ---- API -------------------------------------------------------------- */

size_t feed_plan_worker_files(const struct feed_plan_config *cfg, uint32_t worker, uint32_t *out, size_t cap)
{
    if (cfg == NULL || cfg->workers < 1 || worker >= cfg->workers)
        return 0;
    int sharded = shards_files(cfg);
    size_t n = 0;
    for (size_t j = sharded ? worker : 0; j < cfg->nfiles; j += sharded ? cfg->workers : 1) {
        if (n < cap && out != NULL)
            out[n] = (uint32_t)j;
        n++;
    }
    return n;
}

int feed_plan_summarize(const struct feed_plan_config *cfg, uint32_t worker, struct feed_plan_summary *out,
                        struct sl_error *err)
{
    int rc = validate(cfg, err);
    if (rc != 0)
        return rc;
    if (worker >= cfg->workers)
        return sl_error_set(err, SL_EINVAL, "worker %u out of range (workers = %u)", worker, cfg->workers);
    struct figures f;
    memset(out, 0, sizeof *out);
    derive(cfg, worker, &f, out->replica_elements, sizeof out->replica_elements / sizeof out->replica_elements[0]);
    out->steps = common_steps(cfg);
    out->files = f.files;
    out->elements = f.elements;
    out->pieces = f.pieces;
    return 0;
}

int feed_plan_create(struct feed_plan **out, const struct feed_plan_config *cfg, uint32_t worker, struct sl_error *err)
{
    return feed_plan_create_steps(out, cfg, worker, UINT64_MAX, err);
}

int feed_plan_create_steps(struct feed_plan **out, const struct feed_plan_config *cfg, uint32_t worker, uint64_t steps,
                           struct sl_error *err)
{
    *out = NULL;
    int rc = validate(cfg, err);
    if (rc != 0)
        return rc;
    if (worker >= cfg->workers)
        return sl_error_set(err, SL_EINVAL, "worker %u out of range (workers = %u)", worker, cfg->workers);

    struct feed_plan *p = sl_calloc(1, sizeof *p);
    if (p == NULL)
        return sl_error_set(err, SL_ENOMEM, "plan: out of memory");
    p->cfg = cfg;
    p->worker = worker;
    p->W = cfg->workers;
    p->R = cfg->replicas;
    p->N = (uint64_t)p->W * p->R;
    p->G = cfg->global_batch;
    derive(cfg, worker, &p->fig, NULL, 0);
    p->steps = steps != UINT64_MAX ? steps : common_steps(cfg);

    p->nfiles = feed_plan_worker_files(cfg, worker, NULL, 0);
    p->cycle = cfg->parallel_reads > 1 ? cfg->parallel_reads : 1;
    p->buf_cap = min_u64(cfg->shuffle_buffer, p->fig.in);
    p->elems_cap = (size_t)div_up(p->G, p->N);
    p->files = sl_malloc((p->nfiles ? p->nfiles : 1) * sizeof *p->files);
    p->slots = sl_calloc(p->cycle, sizeof *p->slots);
    p->elems = sl_malloc(p->elems_cap * sizeof *p->elems);
    p->buf = p->buf_cap ? sl_malloc((size_t)p->buf_cap * sizeof *p->buf) : NULL;
    if (p->files == NULL || p->slots == NULL || p->elems == NULL || (p->buf_cap && p->buf == NULL)) {
        unsigned long long buffer = p->buf_cap, batch = p->G;
        feed_plan_destroy(p);
        return sl_error_set(err, SL_ENOMEM, "plan: out of memory (shuffle buffer %llu, batch %llu)", buffer, batch);
    }
    (void)feed_plan_worker_files(cfg, worker, p->files, p->nfiles);
    p->done = p->steps == 0; /* no step in any epoch: nothing would ever come */
    epoch_start(p);
    *out = p;
    return 0;
}

void feed_plan_destroy(struct feed_plan *p)
{
    if (p == NULL)
        return;
    sl_free(p->files);
    sl_free(p->slots);
    sl_free(p->elems);
    sl_free(p->buf);
    sl_free(p);
}

int feed_plan_next(struct feed_plan *p, struct feed_piece *piece, struct sl_error *err)
{
    (void)err;
    if (p->done)
        return SL_END;
    if (p->k == p->steps * p->R) {
        p->epoch++;
        if (p->cfg->epochs != 0 && p->epoch >= p->cfg->epochs) {
            p->done = 1;
            return SL_END;
        }
        epoch_start(p);
    }
    uint64_t k = p->k++;
    piece->worker = p->worker;
    piece->replica = (uint32_t)(k % p->R);
    piece->epoch = p->epoch;
    piece->step = k / p->R;
    piece->seq = p->epoch * p->steps * p->R + k;
    piece->n = k < p->fig.pieces ? make_piece(p, k) : 0; /* beyond: padding */
    piece->elems = p->elems;
    return 0;
}

int feed_plan_seek(struct feed_plan *p, uint64_t seq, uint64_t *within)
{
    *within = 0;
    if (p->done || p->steps == 0)
        return SL_END;
    uint64_t per = p->steps * p->R, epoch = seq / per;
    if (p->cfg->epochs != 0 && epoch >= p->cfg->epochs) {
        p->done = 1;
        return SL_END;
    }
    p->epoch = epoch;
    epoch_start(p);
    plan_forward(p, seq % per);
    return 0;
}

/* ---- names ------------------------------------------------------------ */

static const char *const policy_names[] = {"auto", "off", "file", "data", "hint"};
static const char *const hint_names[] = {"files", "records", "batches"};
static const char *const pr_shard_names[] = {"none", "files", "records"};

static int lookup(const char *s, const char *const *names, int n)
{
    for (int i = 0; s != NULL && i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

int feed_policy_parse(const char *s, enum feed_policy *out)
{
    int i = lookup(s, policy_names, 5);
    if (i < 0)
        return SL_EINVAL;
    *out = (enum feed_policy)i;
    return 0;
}

int feed_hint_parse(const char *s, enum feed_hint *out)
{
    int i = lookup(s, hint_names, 3);
    if (i < 0)
        return SL_EINVAL;
    *out = (enum feed_hint)i;
    return 0;
}

int feed_pr_shard_parse(const char *s, enum feed_pr_shard *out)
{
    int i = lookup(s, pr_shard_names, 3);
    if (i < 0)
        return SL_EINVAL;
    *out = (enum feed_pr_shard)i;
    return 0;
}

const char *feed_policy_name(enum feed_policy p)
{
    return (unsigned)p <= FEED_SHARD_HINT ? policy_names[p] : "?";
}

const char *feed_hint_name(enum feed_hint h)
{
    return (unsigned)h <= FEED_HINT_BATCHES ? hint_names[h] : "?";
}
