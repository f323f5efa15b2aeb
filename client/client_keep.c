/* client_keep.c: steps taken out of the client past the next step, kept
 * (copied where they lie in a feeder's shared memory) or lent (left where
 * they lie, their credits held until the caller lets go of them).
 *
 * Lending. A feeder takes its buffers back in order, one per credit: the
 * k-th credit of a connection frees its k-th piece. A lent piece's credit
 * therefore holds back the credits of every piece consumed after it from
 * the same connection: they wait in the feeder's queue of lent pieces
 * (`credits` of each entry: its own and those consumed after it), and go
 * back once the step is freed (any thread: an atomic flag the client reads
 * at its next call).
 *
 * A caller that keeps lent steps would so hold its feeders' windows. Before
 * a wait the client looks (client__unblock_lent): once a feeder has half
 * the grant held, or its window full and nothing comes for STARVED_NS,
 * the lent steps are copied out of the shared memory in place: a private
 * copy of their pages is moved over the same addresses (mremap), so the
 * caller's pointers stay good, and their credits go back; the feeder's
 * memory is mapped again (its old mapping now has private pages where the
 * feeder will write). After LEND_ROUNDS such rounds steps are copied, not
 * lent: this caller keeps them. The same copy is made for every lent step
 * before a
 * BYE (the feeder then takes all its buffers back), before a rejoined
 * feeder's HELLO, and at close.
 *
 * A lent step is owned twice, by the client (while its pieces are queued)
 * and by the caller (until it frees it); the last to let go frees it. Its
 * memory is read-only: the pages are the feeder's (PROT_READ).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zmq.h>

#include "client_int.h"
#include "sl_alloc.h"
#include "sl_clock.h"
#include "sl_log.h"

/* A window full, nothing arriving, for this long (0.2 s) while lent steps hold
 * credits: the caller is taken to keep them */
#define STARVED_NS 200000000u

/* Times lent steps are copied out for being kept before lending stops */
#define LEND_ROUNDS 4u

/* The kept step: one block holding the struct, the pieces, the body
 * frames moved over (msgs), the shared-memory bodies copied (copies), the
 * tensors' names, and when lent the pieces left in shared memory (lent). */
struct kept_block {
    struct client_kept k;
    zmq_msg_t *msgs; /* [n]; empty where the body was copied, lent or absent */
    void **copies;   /* [n]; NULL where none */
    char *names;
    struct lent_piece *lent; /* [n]; .map NULL where not lent; NULL: none lent */
    unsigned owners;         /* __atomic: 2 (the client, the caller) while queued, then 1 */
    int freed;               /* __atomic: the caller let go */
    int detached;            /* the client's: copied out of shared memory */
    uint32_t queued;         /* the client's: its pieces still in their feeders' queues */
};

static void free_block(struct kept_block *b)
{
    uint32_t n = b->k.n;
    for (uint32_t r = 0; r < n; r++) {
        if (b->msgs != NULL)
            zmq_msg_close(&b->msgs[r]);
        if (b->copies != NULL)
            sl_free(b->copies[r]);
        if (b->lent != NULL)
            client__map_unref(b->lent[r].map);
    }
    sl_free(b->msgs);
    sl_free(b->copies);
    sl_free(b->lent);
    sl_free(b->names);
    sl_free(b->k.pieces);
    sl_free(b);
}

/* One owner lets go; the last frees. */
static void let_go(struct kept_block *b)
{
    if (__atomic_sub_fetch(&b->owners, 1, __ATOMIC_ACQ_REL) == 0)
        free_block(b);
}

void client_kept_free(struct client_kept *k)
{
    if (k == NULL)
        return;
    struct kept_block *b = (struct kept_block *)k;
    __atomic_store_n(&b->freed, 1, __ATOMIC_RELEASE);
    let_go(b);
}

/* A block for the step handed out, every allocation made (so that a
 * failure leaves the step as it was): copies for the shared-memory bodies
 * that are not lent. */
static struct kept_block *new_block(struct client *c, int lend)
{
    uint32_t n = c->o.replicas;
    size_t names = 0;
    for (uint32_t r = 0; r < n; r++)
        for (size_t i = 0; i < c->pieces[r].ntensors; i++)
            names += strlen(c->pieces[r].t[i].name) + 1;
    struct kept_block *b = sl_calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->k.n = n;
    b->owners = 1;
    b->k.pieces = sl_calloc(n, sizeof *b->k.pieces);
    b->msgs = sl_calloc(n, sizeof *b->msgs);
    b->copies = sl_calloc(n, sizeof *b->copies);
    b->names = sl_malloc(names ? names : 1);
    b->lent = lend ? sl_calloc(n, sizeof *b->lent) : NULL;
    int ok = b->k.pieces != NULL && b->msgs != NULL && b->copies != NULL && b->names != NULL && (!lend || b->lent);
    for (uint32_t r = 0; b->msgs != NULL && r < n; r++)
        zmq_msg_init(&b->msgs[r]);
    for (uint32_t r = 0; ok && r < n; r++) {
        const struct slot *s = c->step_slots[r];
        int lendable = lend && s->map != NULL && s->conn == c->f[s->feeder].conn;
        if (s->body != NULL && (s->map != NULL || s->copy != NULL) && !lendable)
            ok = (b->copies[r] = sl_malloc(s->piece.shm_bytes ? (size_t)s->piece.shm_bytes : 1)) != NULL;
    }
    if (!ok) {
        free_block(b);
        return NULL;
    }
    return b;
}

/* Piece r of the step into block b: its body copied, moved or lent. */
static void take_piece(struct client *c, struct kept_block *b, uint32_t r, char **name)
{
    struct slot *s = c->step_slots[r];
    const uint8_t *from = s->body, *to = NULL;
    if (b->copies[r] != NULL) {
        memcpy(b->copies[r], from, (size_t)s->piece.shm_bytes);
        to = b->copies[r];
    } else if (b->lent != NULL && s->map != NULL) {
        /* lent: the slot's reference to the mapping moves to the piece, and
         * its credit waits in its feeder's queue */
        struct feeder *f = &c->f[s->feeder];
        struct lent_piece *p = &b->lent[r];
        *p = (struct lent_piece){.b = b,
                                 .map = s->map,
                                 .body = from,
                                 .bytes = (size_t)s->piece.shm_bytes,
                                 .feeder = s->feeder,
                                 .conn = s->conn,
                                 .credits = 1};
        s->map = NULL;
        s->lent = 1;
        if (f->lent_tail != NULL)
            f->lent_tail->next = p;
        else
            f->lent_head = p;
        f->lent_tail = p;
        f->held++;
        b->queued++;
        to = from;
    } else if (from != NULL && s->nframes == 1) {
        /* a small message's data lies inside its zmq_msg_t: where it lands
         * after the move is asked, not assumed */
        zmq_msg_move(&b->msgs[r], &s->frames[0]);
        to = zmq_msg_data(&b->msgs[r]);
    }
    struct client_piece *p = &b->k.pieces[r];
    *p = c->pieces[r];
    for (size_t i = 0; i < p->ntensors; i++) {
        struct client_tensor *t = &p->t[i];
        size_t len = strlen(t->name) + 1;
        memcpy(*name, t->name, len);
        t->name = *name;
        *name += len;
        if (t->data != NULL)
            t->data = to + ((const uint8_t *)t->data - from);
    }
    if (b->lent == NULL || b->lent[r].map == NULL)
        p->flags &= ~(uint32_t)SL_WIRE_PIECE_SHM;
}

int client__take_step(struct client *c, struct client_kept **out, int lend, struct sl_error *err)
{
    *out = NULL;
    if (client__forked(c))
        return client__refuse_forked(c, err);
    if (!c->have_step)
        return sl_error_set(err, SL_EINVAL, "no step to keep (keep follows a next_step, before its release)");
    struct kept_block *b = new_block(c, lend);
    if (b == NULL)
        return sl_error_set(err, SL_ENOMEM, "out of memory keeping a step");
    char *name = b->names;
    for (uint32_t r = 0; r < b->k.n; r++)
        take_piece(c, b, r, &name);
    if (b->queued > 0)
        b->owners = 2;
    else if (b->lent != NULL) { /* nothing lent after all */
        sl_free(b->lent);
        b->lent = NULL;
    }
    *out = &b->k;
    return 0;
}

/* The client is done with lent piece p (its step freed or copied out). */
static void pop_lent(struct client *c, struct feeder *f)
{
    struct lent_piece *p = f->lent_head;
    f->lent_head = p->next;
    if (f->lent_head == NULL)
        f->lent_tail = NULL;
    f->held -= p->credits;
    if (p->conn == f->conn) /* an old connection's credits are gone with it */
        f->owed += p->credits;
    p->next = NULL;
    if (--p->b->queued == 0)
        let_go(p->b);
    (void)c;
}

void client__settle(struct client *c)
{
    for (size_t j = 0; j < c->o.nfeeders; j++) {
        struct feeder *f = &c->f[j];
        while (f->lent_head != NULL &&
               (f->lent_head->b->detached || __atomic_load_n(&f->lent_head->b->freed, __ATOMIC_ACQUIRE)))
            pop_lent(c, f);
        if (f->lent_head == NULL)
            f->starved_ns = 0;
    }
}

/* Replace the pages under a lent piece's body with a private copy of them,
 * at the same addresses. 0, or -1 (no memory: the body stays shared). */
static int copy_in_place(const struct lent_piece *p)
{
    if (p->bytes == 0)
        return 0;
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)p->body & ~(pg - 1);
    uintptr_t end = ((uintptr_t)p->body + p->bytes + pg - 1) & ~(pg - 1);
    size_t len = (size_t)(end - start);
    void *tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (tmp == MAP_FAILED)
        return -1;
    memcpy(tmp, (const void *)start, len);
    if (mprotect(tmp, len, PROT_READ) != 0 ||
        mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)start) == MAP_FAILED) {
        munmap(tmp, len);
        return -1;
    }
    return 0;
}

/* Copy lent step b out of shared memory. Feeders whose current mapping
 * lost pages are marked in *stale (bit j). */
static void detach_block(struct client *c, struct kept_block *b, uint64_t *stale)
{
    for (uint32_t r = 0; r < b->k.n; r++) {
        struct lent_piece *p = &b->lent[r];
        if (p->map == NULL)
            continue;
        if (copy_in_place(p) != 0) {
            /* never silent: the step's memory may now change under its caller */
            sl_log(SL_LOG_ERROR,
                   "feeder %s: a lent step could not be copied out of its shared memory (no memory): its "
                   "piece %" PRIu64 " may be overwritten once its credit goes back",
                   c->f[p->feeder].addr, b->k.pieces[r].seq);
            continue;
        }
        c->detached++;
        if (p->map == c->f[p->feeder].map)
            *stale |= (uint64_t)1 << p->feeder;
    }
    b->detached = 1;
}

void client__detach_lent(struct client *c, int j, int remap)
{
    uint64_t stale = 0;
    for (size_t k = 0; k < c->o.nfeeders; k++) {
        if (j >= 0 && (size_t)j != k)
            continue;
        for (struct lent_piece *p = c->f[k].lent_head; p != NULL; p = p->next)
            if (!p->b->detached && !__atomic_load_n(&p->b->freed, __ATOMIC_ACQUIRE))
                detach_block(c, p->b, &stale);
            else
                p->b->detached = 1; /* freed meanwhile: nothing to copy */
    }
    for (size_t k = 0; remap && k < c->o.nfeeders; k++)
        if ((stale >> k) & 1)
            (void)client__remap(&c->f[k]);
    client__settle(c);
}

void client__unblock_lent(struct client *c)
{
    uint64_t now = 0;
    client__settle(c);
    for (size_t j = 0; j < c->o.nfeeders; j++) {
        struct feeder *f = &c->f[j];

        if (f->lent_head == NULL || f->ended) /* an ended feeder waits for no credit */
            continue;
        int hoarded = f->held >= (c->o.credits / 2 > 0 ? c->o.credits / 2 : 1);
        if (!hoarded && f->unreturned >= f->peak) {
            if (now == 0)
                now = sl_clock_ns();
            if (f->starved_ns == 0)
                f->starved_ns = now;
            hoarded = now - f->starved_ns >= STARVED_NS;
        } else if (!hoarded) {
            f->starved_ns = 0;
        }
        if (!hoarded)
            continue;
        /* a step kept for long (a first batch shown at the end): copied
         * out, and lending goes on; steps kept again and again: copied
         * from now on (each round maps the feeder's memory anew) */
        c->lend_off = ++c->lend_rounds >= LEND_ROUNDS;
        sl_log(SL_LOG_INFO, "feeder %s: %u credits waited behind lent steps still in use: they are copied out%s",
               f->addr, f->held, c->lend_off ? ", and steps are copied from now on" : "");
        client__detach_lent(c, (int)j, 1);
    }
}

void client__drop_lent(struct client *c)
{
    client__detach_lent(c, -1, 0);
}
