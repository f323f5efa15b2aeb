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

void client__map_unref(struct shm_map *m)
{
    if (m != NULL && --m->refs == 0) {
        munmap((void *)m->base, m->size);
        sl_free(m);
    }
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
    void *p = MAP_FAILED;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        why = strerror(errno);
    else if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != w->shm_size)
        why = "not the size the feeder gave";
    else if ((p = mmap(NULL, (size_t)w->shm_size, PROT_READ, MAP_SHARED, fd, 0)) == MAP_FAILED)
        why = strerror(errno);
    if (fd >= 0)
        close(fd);
    if (why == NULL) {
        const uint8_t *b = p;
        uint64_t token = 0;
        for (int i = 0; i < 8; i++)
            token |= (uint64_t)b[8 + i] << (8 * i);
        if (memcmp(b, "SLSHM001", 8) != 0 || token != w->shm_token)
            why = "another process's memory (another host?)";
    }
    struct shm_map *m = why == NULL ? sl_calloc(1, sizeof *m) : NULL;
    if (why == NULL && m == NULL)
        why = "out of memory";
    if (why != NULL) {
        if (p != MAP_FAILED)
            munmap(p, (size_t)w->shm_size);
        sl_log(SL_LOG_INFO, "feeder %s: its shared memory (%s) cannot be mapped: %s; pieces come by copy", f->addr,
               path, why);
        return NULL;
    }
    m->base = p;
    m->size = (size_t)w->shm_size;
    m->refs = 1;
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

void client__release_slot(struct client *c, struct slot *s)
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
    if (s->conn == c->f[s->feeder].conn) /* an old connection's credit is gone with it */
        c->f[s->feeder].owed++;
    c->free_slots[c->nfree++] = s;
}
