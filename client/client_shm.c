/* client_shm.c: a feeder's shared piece memory.
 *
 * Shared memory (protocol version 3): a feeder on this host offers its
 * piece memory in the WELCOME (a memfd, opened as /proc/<pid>/fd/<fd>);
 * once it is mapped read-only and its token checked, a CREDIT with the SHM
 * flag says so, and pieces may then come as a header naming where the body
 * lies. Such a slot points into the mapping until it is released, and its
 * credit is what lets the feeder reuse the buffer. A mapping is counted by
 * the slots using it, so a restarted feeder's old memory stays readable
 * for the pieces still held. When a feeder is rejoined, the pieces of it
 * already taken into the step being gathered are first copied out: the
 * feeder gives the old connection's buffers back at the new HELLO.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "sl_alloc.h"
#include "sl_log.h"
#include "client_int.h"

void client__map_ref(struct shm_map *m)
{
    __atomic_add_fetch(&m->refs, 1, __ATOMIC_RELAXED);
}

/* The last reference unmaps the whole range: the pages copied in place of
 * lent pieces (client_keep.c) go with it. */
void client__map_unref(struct shm_map *m)
{
    if (m != NULL && __atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) == 0) {
        munmap((void *)m->base, m->size);
        close(m->fd);
        sl_free(m);
    }
}

static struct shm_map *new_map(int fd, size_t size, const char **why)
{
    void *p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        *why = strerror(errno);
        return NULL;
    }
    struct shm_map *m = sl_calloc(1, sizeof *m);
    if (m == NULL) {
        munmap(p, size);
        *why = "out of memory";
        return NULL;
    }
    m->base = p;
    m->size = size;
    m->refs = 1;
    m->fd = fd;
    return m;
}

int client__remap(struct feeder *f)
{
    const char *why = NULL;
    int fd = f->map != NULL ? fcntl(f->map->fd, F_DUPFD_CLOEXEC, 0) : -1;
    struct shm_map *m = fd >= 0 ? new_map(fd, f->map->size, &why) : NULL;
    if (m == NULL) {
        if (fd >= 0)
            close(fd);
        sl_log(SL_LOG_WARN, "feeder %s: its shared memory cannot be mapped again: %s", f->addr,
               why != NULL ? why : strerror(errno));
        return -1;
    }
    client__map_unref(f->map);
    f->map = m;
    return 0;
}

static struct shm_map *map_shm(struct feeder *f, const struct sl_wire_welcome *w);

/* Map feeder j's shared piece memory from its WELCOME and answer the offer
 * with a CREDIT (the feeder sends no piece before it): the SHM flag when
 * mapped. Anything amiss (another host: no such process or file, or a
 * different one under that pid; another user) leaves the connection on
 * copies: worth a line in the log, not an error. */
int client__attach_shm(struct client *c, size_t j, const struct sl_wire_welcome *w, struct sl_error *err)
{
    struct feeder *f = &c->f[j];
    if (w->shm_size == 0) /* nothing offered (or not asked for) */
        return 0;
    struct shm_map *m = c->o.no_shm ? NULL : map_shm(f, w);
    struct sl_wire_credit cr = {.credits = 0, .flags = m != NULL ? SL_WIRE_CREDIT_SHM : 0};
    if (sl_wire_encode_credit(&cr, &c->buf) != 0 || client__send_buf(f->sock, &c->buf) != 0) {
        client__map_unref(m);
        return client__feeder_error(c, (int)j, err, SL_EIO, "send CREDIT: %s", zmq_strerror(errno));
    }
    f->map = m;
    return 0;
}

static struct shm_map *map_shm(struct feeder *f, const struct sl_wire_welcome *w)
{
    if (w->shm_size > SIZE_MAX)
        return NULL;
    char path[64];
    snprintf(path, sizeof path, "/proc/%" PRIu32 "/fd/%" PRIu32, w->shm_pid, w->shm_fd);
    const char *why = NULL;
    struct stat st;
    struct shm_map *m = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        why = strerror(errno);
    else if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != w->shm_size)
        why = "not the size the feeder gave";
    else
        m = new_map(fd, (size_t)w->shm_size, &why); /* the map owns fd from here */
    if (m != NULL) {
        uint64_t token = 0;
        for (int i = 0; i < 8; i++)
            token |= (uint64_t)m->base[8 + i] << (8 * i);
        if (memcmp(m->base, "SLSHM001", 8) != 0 || token != w->shm_token) {
            why = "another process's memory (another host?)";
            client__map_unref(m);
            m = NULL;
            fd = -1;
        }
    }
    if (m == NULL) {
        if (fd >= 0)
            close(fd);
        sl_log(SL_LOG_INFO, "feeder %s: its shared memory (%s) cannot be mapped: %s; pieces come by copy", f->addr,
               path, why);
        return NULL;
    }
    sl_log(SL_LOG_INFO, "feeder %s: pieces through shared memory (%.1f MB mapped)", f->addr, (double)w->shm_size / 1e6);
    return m;
}

/* Feeder j's connection is over: its mapping lives on in the slots that
 * still use it. */
void client__detach_shm(struct feeder *f)
{
    client__map_unref(f->map);
    f->map = NULL;
}

void client__drop_slot(struct client *c, struct slot *s)
{
    zmq_msg_close(&s->hdr);
    for (size_t i = 0; i < s->nframes; i++)
        zmq_msg_close(&s->frames[i]);
    s->nframes = 0;
    s->busy = 0;
    client__map_unref(s->map);
    s->map = NULL;
    sl_free(s->copy);
    s->copy = NULL;
    s->body = NULL;
    s->lent = 0;
    c->free_slots[c->nfree++] = s;
}

void client__release_slot(struct client *c, struct slot *s)
{
    struct feeder *f = &c->f[s->feeder];
    /* an old connection's credit is gone with it */
    if (!s->lent && s->conn == f->conn) {
        if (f->lent_tail != NULL && f->lent_tail->conn == s->conn) { /* in order: behind the lent pieces */
            f->lent_tail->credits++;
            f->held++;
        } else {
            f->owed++;
        }
    }
    client__drop_slot(c, s);
}
