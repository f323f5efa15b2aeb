/* sto_fetch: open a name through storage/'s sto_open and read it, for the
 * storage tests (tests/integration/test_sto_http.py). Built for the tests
 * only.
 *
 *   sto_fetch [options] NAME
 *     --chunk N           read the whole object sequentially, N bytes a call (default 65536)
 *     --range OFF:LEN     read LEN bytes at OFF instead (repeatable, in the order given;
 *                         a range past the end gives what there is)
 *     --out FILE          write the bytes read there, in order (default: nowhere)
 *     --wait              after open, print the "open" line and wait for a line on stdin
 *     --pause-ms N        sleep N ms after each read (a slow consumer)
 *     --threads N         N threads at once each open NAME and read it whole (--chunk);
 *                         their bytes must agree ("threads N agree"), the first's go to --out
 *     --rounds N          with --threads: each thread opens, reads and closes NAME N times
 *                         (the storage's pool hands connections between the threads)
 *     --ca-file F --connect-ms N --stall-ms N --retries N --backoff-ms N
 *     --backoff-max-ms N --redirects N --cross-host   (struct sto_config)
 *     --s3-endpoint URL --s3-region NAME --s3-path-style  (the same)
 *     --list              NAME is an s3:// pattern: print "name N" per match
 *                         (sto_list), then "listed N"
 *     --list-page N --list-max N   the listing's keys per page and most keys
 *     --url               print the URL an s3:// NAME is read at ("url U"), nothing else
 *
 * stdout: "open size=N etag=E mtime_ns=T", then "read OFF LEN GOT" per read,
 * then "total N". Exit 0; 2 for bad usage; 3 when open fails; 4 when a read
 * fails (the error on stderr: "sto_fetch: <code>: <message>").
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sto.h"
#include "sto_impl.h"

#define RANGES_MAX 64
#define THREADS_MAX 16

/* --threads: one source per thread, read whole */
struct reader {
    pthread_t tid;
    const char *name;
    size_t chunk;
    int rounds;
    unsigned char *bytes;
    size_t size;
    struct sl_error err;
    int rc;
};

/* One round: open, read whole into r->bytes (the first round's size;
 * another size is an error), close. */
static int read_round(struct reader *r)
{
    struct sto_src *src = NULL;
    if ((r->rc = sto_open(&src, r->name, &r->err)) != 0)
        return -1;
    if (r->bytes == NULL) {
        r->size = (size_t)src->size;
        r->bytes = malloc(r->size > 0 ? r->size : 1);
    } else if (src->size != r->size) {
        r->rc = sl_error_set(&r->err, SL_ECORRUPT, "size %llu, then %zu", (unsigned long long)src->size, r->size);
    }
    for (size_t at = 0; r->rc == 0 && r->bytes != NULL && at < r->size;) {
        size_t n = r->size - at < r->chunk ? r->size - at : r->chunk, got = 0;
        if ((r->rc = sto_read_at(src, at, r->bytes + at, n, &got, &r->err)) != 0)
            break;
        at += got;
    }
    if (r->bytes == NULL)
        r->rc = SL_ENOMEM;
    sto_close(src);
    return r->rc == 0 ? 0 : -1;
}

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    for (int i = 0; i < r->rounds && read_round(r) == 0; i++) {
    }
    return NULL;
}

static int read_threaded(const char *name, int nthreads, int rounds, size_t chunk, FILE *out)
{
    struct reader rd[THREADS_MAX];
    memset(rd, 0, sizeof(rd));
    for (int i = 0; i < nthreads; i++) {
        rd[i].name = name;
        rd[i].chunk = chunk;
        rd[i].rounds = rounds;
        if (pthread_create(&rd[i].tid, NULL, reader_main, &rd[i]) != 0) {
            fprintf(stderr, "sto_fetch: pthread_create failed\n");
            exit(2);
        }
    }
    int rc = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(rd[i].tid, NULL);
        if (rd[i].rc != 0) {
            fprintf(stderr, "sto_fetch: thread %d: %s: %s\n", i, sl_code_name(rd[i].err.code), rd[i].err.msg);
            rc = 4;
        } else if (rd[i].size != rd[0].size || memcmp(rd[i].bytes, rd[0].bytes, rd[0].size) != 0) {
            fprintf(stderr, "sto_fetch: thread %d read other bytes than thread 0\n", i);
            rc = 4;
        }
    }
    if (rc == 0) {
        printf("threads %d agree, %zu bytes each\n", nthreads, rd[0].size);
        if (out != NULL && fwrite(rd[0].bytes, 1, rd[0].size, out) != rd[0].size)
            rc = 2;
    }
    for (int i = 0; i < nthreads; i++)
        free(rd[i].bytes);
    if (out != NULL && fclose(out) != 0)
        rc = 2;
    return rc;
}

static int usage(const char *why)
{
    fprintf(stderr,
            "sto_fetch: %s\nusage: sto_fetch [--chunk N | --range OFF:LEN ...] [--out FILE] [--wait] "
            "[--pause-ms N] [--threads N] [--ca-file F] [--connect-ms N] [--stall-ms N] [--retries N] [--backoff-ms N] "
            "[--backoff-max-ms N] "
            "[--redirects N] [--cross-host] NAME\n",
            why);
    return 2;
}

static int num(const char *s, unsigned long long *v)
{
    char *end;
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    *v = strtoull(s, &end, 10);
    return *end == '\0' ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct sto_config cfg;
    sto_config_default(&cfg);
    unsigned long long chunk = 65536, offs[RANGES_MAX], lens[RANGES_MAX], v;
    unsigned long long pause_ms = 0;
    int nranges = 0, wait_line = 0, nthreads = 0, rounds = 1, list = 0, url_only = 0;
    unsigned long long list_page = 1000, list_max = 1000000;
    const char *out_path = NULL, *name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--cross-host") == 0) {
            cfg.cross_host_redirects = 1;
        } else if (strcmp(a, "--s3-path-style") == 0) {
            cfg.s3_path_style = 1;
        } else if (strcmp(a, "--list") == 0) {
            list = 1;
        } else if (strcmp(a, "--url") == 0) {
            url_only = 1;
        } else if (strcmp(a, "--s3-endpoint") == 0 && val != NULL) {
            cfg.s3_endpoint = argv[++i];
        } else if (strcmp(a, "--s3-region") == 0 && val != NULL) {
            cfg.s3_region = argv[++i];
        } else if (strcmp(a, "--wait") == 0) {
            wait_line = 1;
        } else if (strcmp(a, "--out") == 0 && val != NULL) {
            out_path = argv[++i];
        } else if (strcmp(a, "--ca-file") == 0 && val != NULL) {
            cfg.ca_file = argv[++i];
        } else if (strcmp(a, "--range") == 0 && val != NULL) {
            const char *colon = strchr(val, ':');
            char off[32];
            if (nranges == RANGES_MAX || colon == NULL || (size_t)(colon - val) >= sizeof(off))
                return usage("--range wants OFF:LEN");
            memcpy(off, val, (size_t)(colon - val));
            off[colon - val] = '\0';
            if (num(off, &offs[nranges]) != 0 || num(colon + 1, &lens[nranges]) != 0)
                return usage("--range wants OFF:LEN");
            nranges++;
            i++;
        } else if (a[0] == '-' && a[1] == '-' && val != NULL && num(val, &v) == 0) {
            i++;
            if (strcmp(a, "--chunk") == 0 && v > 0)
                chunk = v;
            else if (strcmp(a, "--threads") == 0 && v >= 1 && v <= THREADS_MAX)
                nthreads = (int)v;
            else if (strcmp(a, "--rounds") == 0 && v >= 1 && v <= 1000)
                rounds = (int)v;
            else if (strcmp(a, "--pause-ms") == 0)
                pause_ms = v;
            else if (strcmp(a, "--connect-ms") == 0)
                cfg.connect_timeout_ms = (long)v;
            else if (strcmp(a, "--stall-ms") == 0)
                cfg.stall_timeout_ms = (long)v;
            else if (strcmp(a, "--retries") == 0)
                cfg.max_retries = (int)v;
            else if (strcmp(a, "--backoff-ms") == 0)
                cfg.backoff_ms = (long)v;
            else if (strcmp(a, "--backoff-max-ms") == 0)
                cfg.backoff_max_ms = (long)v;
            else if (strcmp(a, "--redirects") == 0)
                cfg.max_redirects = (int)v;
            else if (strcmp(a, "--list-page") == 0)
                list_page = v;
            else if (strcmp(a, "--list-max") == 0)
                list_max = v;
            else
                return usage(a);
        } else if (a[0] != '-' && name == NULL) {
            name = a;
        } else {
            return usage(a);
        }
    }
    if (name == NULL)
        return usage("no NAME");
    struct sl_error err = {0};
    if (sto_configure(&cfg, &err) != 0) {
        fprintf(stderr, "sto_fetch: %s: %s\n", sl_code_name(err.code), err.msg);
        return 2;
    }
    if (url_only) {
        char url[8192];
        if (sto__s3_url(name, url, sizeof(url), &err) != 0) {
            fprintf(stderr, "sto_fetch: %s: %s\n", sl_code_name(err.code), err.msg);
            return 3;
        }
        printf("url %s\n", url);
        return 0;
    }
    if (list) {
        char **names = NULL;
        size_t n = 0;
        sto__s3_list_limits((int)list_page, (size_t)list_max);
        if (sto_list(name, &names, &n, &err) != 0) {
            fprintf(stderr, "sto_fetch: %s: %s\n", sl_code_name(err.code), err.msg);
            return 3;
        }
        for (size_t i = 0; i < n; i++)
            printf("name %s\n", names[i]);
        printf("listed %zu\n", n);
        sto_list_free(names, n);
        return 0;
    }
    FILE *out = NULL;
    if (out_path != NULL && (out = fopen(out_path, "wb")) == NULL) {
        perror(out_path);
        return 2;
    }
    if (nthreads > 0)
        return read_threaded(name, nthreads, rounds, (size_t)chunk, out);
    struct sto_src *src = NULL;
    if (sto_open(&src, name, &err) != 0) {
        fprintf(stderr, "sto_fetch: %s: %s\n", sl_code_name(err.code), err.msg);
        return 3;
    }
    printf("open size=%llu etag=%s mtime_ns=%lld\n", (unsigned long long)src->size, src->etag,
           (long long)src->mtime_ns);
    fflush(stdout);
    if (wait_line) {
        char line[16];
        if (fgets(line, sizeof(line), stdin) == NULL)
            return 2;
    }
    if (nranges == 0) { /* the whole object, sequentially */
        offs[0] = 0;
        lens[0] = src->size;
        nranges = 1;
    } else {
        chunk = 0; /* each range in one call */
    }
    unsigned long long total = 0;
    int rc = 0;
    for (int r = 0; r < nranges && rc == 0; r++) {
        unsigned long long step = chunk > 0 ? chunk : (lens[r] > 0 ? lens[r] : 1);
        unsigned char *buf = malloc(step);
        if (buf == NULL) {
            fprintf(stderr, "sto_fetch: out of memory\n");
            return 2;
        }
        for (unsigned long long at = offs[r]; at < offs[r] + lens[r];) {
            unsigned long long n = offs[r] + lens[r] - at < step ? offs[r] + lens[r] - at : step;
            size_t got = 0;
            if (sto_read_at(src, at, buf, (size_t)n, &got, &err) != 0) {
                fprintf(stderr, "sto_fetch: %s: %s\n", sl_code_name(err.code), err.msg);
                rc = 4;
                break;
            }
            if (chunk == 0)
                printf("read %llu %llu %zu\n", at, n, got);
            if (out != NULL && fwrite(buf, 1, got, out) != got) {
                perror(out_path);
                rc = 2;
                break;
            }
            total += got;
            if (pause_ms > 0) {
                struct timespec t = {(time_t)(pause_ms / 1000), (long)(pause_ms % 1000) * 1000000L};
                nanosleep(&t, NULL);
            }
            if (got < n)
                break; /* the end of the object */
            at += n;
        }
        free(buf);
    }
    printf("total %llu\n", total);
    sto_close(src);
    if (out != NULL && fclose(out) != 0)
        rc = 2;
    return rc;
}
