/* bench_curve: what sluice-bench needs to measure what CURVE costs (issue
 * #16): key files in a run's scratch folder, and the floor that libsodium
 * sets on this CPU.
 *
 * The keys are made with sl_curve_keygen, as `sluice-feeder keygen` makes
 * them, laid out the way the programs take them: one pair per feeder
 * (DIR/curve/feeder-J.key and .pub, the folder given to the trainers'
 * --curve-server-key), one pair for every trainer (DIR/curve/trainer.key),
 * and an allow-list folder holding a copy of the trainers' public key alone
 * (DIR/curve/allow/trainer.pub, the feeders' --curve-allow). The trainers
 * share one pair, as the workers of one job do for their ring.
 *
 * The floor: after the handshake, libzmq's CURVE seals every frame with
 * crypto_box_easy_afternm (XSalsa20-Poly1305 under the key agreed at the
 * handshake) in the sender's I/O thread, and opens it with
 * crypto_box_open_easy_afternm in the receiver's. One connection is one
 * I/O thread at each end, so one core sealing and one opening bound what
 * a connection can carry, before any copy or system call.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#ifdef SLUICE_HAVE_SODIUM
#include <sodium.h>
#endif

#include "bench.h"
#include "sl_clock.h"
#include "sl_curve.h"
#include "sl_error.h"

int bench_curve_available(void)
{
    return zmq_has("curve") != 0;
}

/* Copy a small file (a public key) to a new file of mode 0644. */
static int copy_file(const char *from, const char *to, struct sl_error *err)
{
    char buf[256];
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return sl_error_sys(err, errno, "open(%s)", from);
    ssize_t n = read(in, buf, sizeof buf);
    int e = errno;
    close(in);
    if (n <= 0)
        return n < 0 ? sl_error_sys(err, e, "read(%s)", from) : sl_error_set(err, SL_EIO, "%s: empty", from);
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0)
        return sl_error_sys(err, errno, "open(%s)", to);
    ssize_t w = write(out, buf, (size_t)n);
    e = errno;
    if (close(out) != 0 || w != n)
        return sl_error_sys(err, w < 0 ? e : EIO, "write(%s)", to);
    return 0;
}

int bench_curve_setup(const char *cmd, const char *scratch, int nfeeders, struct bench_curve *c)
{
    struct sl_error err = {0};
    char name[PATH_MAX + 64];
    memset(c, 0, sizeof *c);
    if (!bench_curve_available()) {
        fprintf(stderr,
                "sluice-bench %s: --curve: this libzmq has no CURVE (zmq_has(\"curve\") is false: it was "
                "built without libsodium)\n",
                cmd);
        return -1;
    }
    int w1 = snprintf(c->dir, sizeof c->dir, "%s/curve", scratch);
    int w2 = snprintf(c->allow, sizeof c->allow, "%s/curve/allow", scratch);
    int w3 = snprintf(c->client_key, sizeof c->client_key, "%s/curve/trainer.key", scratch);
    if (w1 < 0 || w2 < 0 || w3 < 0 || (size_t)w2 >= sizeof c->allow || (size_t)w3 >= sizeof c->client_key) {
        fprintf(stderr, "sluice-bench %s: --curve: scratch folder name too long: %s\n", cmd, scratch);
        return -1;
    }
    if (mkdir(c->dir, 0700) != 0 || mkdir(c->allow, 0700) != 0) {
        fprintf(stderr, "sluice-bench %s: --curve: mkdir(%s): %s\n", cmd, c->dir, strerror(errno));
        return -1;
    }
    int rc = 0;
    for (int j = 0; rc == 0 && j < nfeeders; j++) {
        snprintf(name, sizeof name, "%s/feeder-%d", c->dir, j);
        rc = sl_curve_keygen(name, &err);
    }
    if (rc == 0) {
        snprintf(name, sizeof name, "%s/trainer", c->dir);
        rc = sl_curve_keygen(name, &err);
    }
    if (rc == 0) {
        char from[PATH_MAX + 64], to[PATH_MAX + 64];
        snprintf(from, sizeof from, "%s/trainer.pub", c->dir);
        snprintf(to, sizeof to, "%s/trainer.pub", c->allow);
        rc = copy_file(from, to, &err);
    }
    if (rc != 0) {
        fprintf(stderr, "sluice-bench %s: --curve: cannot make the keys: %s\n", cmd, err.msg);
        return -1;
    }
    c->nfeeders = nfeeders;
    return 0;
}

void bench_curve_feeder_key(const struct bench_curve *c, int j, char *buf, size_t n)
{
    snprintf(buf, n, "%s/feeder-%d.key", c->dir, j);
}

int bench_curve_pair_load(const struct bench_curve *c, struct bench_curve_pair *p)
{
    char path[PATH_MAX + 64];
    struct sl_error err = {0};
    memset(p, 0, sizeof *p);
    bench_curve_feeder_key(c, 0, path, sizeof path);
    int rc = sl_curve_load_secret(path, &p->server, &err);
    if (rc == 0)
        rc = sl_curve_load_secret(c->client_key, &p->client, &err);
    if (rc != 0) {
        fprintf(stderr, "sluice-bench: --curve: %s\n", err.msg);
        return -1;
    }
    snprintf(p->allow, sizeof p->allow, "%s", c->allow);
    return 0;
}

#ifdef SLUICE_HAVE_SODIUM
double bench_rate_sodium(size_t size, int open_box, double min_time)
{
    if (sodium_init() < 0 || size == 0)
        return -1;
    unsigned char pk[crypto_box_PUBLICKEYBYTES], sk[crypto_box_SECRETKEYBYTES], k[crypto_box_BEFORENMBYTES];
    unsigned char nonce[crypto_box_NONCEBYTES] = {0};
    unsigned char *m = malloc(size), *box = malloc(size + crypto_box_MACBYTES);
    double rate = -1;
    if (m == NULL || box == NULL)
        goto out_free;
    crypto_box_keypair(pk, sk);
    if (crypto_box_beforenm(k, pk, sk) != 0)
        goto out_free;
    memset(m, 0xa5, size);
    if (crypto_box_easy_afternm(box, m, size, nonce, k) != 0)
        goto out_free;
    uint64_t bytes = 0;
    double t0 = sl_clock_s(), el;
    do {
        if (open_box) {
            /* the same box each time: opening checks the MAC over every byte */
            if (crypto_box_open_easy_afternm(m, box, size + crypto_box_MACBYTES, nonce, k) != 0)
                goto out_free;
        } else {
            sodium_increment(nonce, sizeof nonce); /* a new nonce per frame, as CURVE's */
            if (crypto_box_easy_afternm(box, m, size, nonce, k) != 0)
                goto out_free;
        }
        bytes += size;
        el = sl_clock_s() - t0;
    } while (el < min_time);
    rate = (double)bytes / el;
out_free:
    sodium_memzero(sk, sizeof sk);
    sodium_memzero(k, sizeof k);
    free(m);
    free(box);
    return rate;
}
#else
double bench_rate_sodium(size_t size, int open_box, double min_time)
{
    (void)size;
    (void)open_box;
    (void)min_time;
    return -1;
}
#endif
