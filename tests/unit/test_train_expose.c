/* train_expose: the elastic families of the trainer's /metrics (absent
 * without --elastic; a joiner's world before its admission, a change, a
 * member let go), the worker label a joiner gets (its --join, escaped),
 * the counters carried past a closed client, and a scrape racing the main
 * thread's world changes (a ThreadSanitizer build checks the lock). The
 * processes are tests/integration/test_elastic_metrics.py's. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "sl_buf.h"
#include "sl_metrics.h"
#include "sl_test.h"
#include "train_expose.h"
#include "train_metrics.h"

static struct train_loop *no_loop;
static struct client *no_client;

/* A server on a free loopback port over a fresh table. */
static struct train_expose *start(struct sl_metrics **m, const char *worker)
{
    ck_assert_int_eq(train_metrics_create(m), 0);
    struct train_expose *e = NULL;
    ck_assert_int_eq(train_expose_start(&e, "127.0.0.1:0", *m, &no_loop, &no_client, "job-a", worker), 0);
    ck_assert_ptr_nonnull(e);
    return e;
}

static void stop(struct train_expose *e, struct sl_metrics *m)
{
    train_expose_stop(e);
    sl_metrics_destroy(m);
}

/* The exposition now (static buffer). */
static const char *text(struct train_expose *e)
{
    static char out[1 << 16];
    struct sl_buf b;
    sl_buf_init(&b, 1 << 16);
    ck_assert_int_eq(train_expose_write(e, &b), 0);
    ck_assert_uint_lt(b.len, sizeof out);
    memcpy(out, b.data, b.len);
    out[b.len] = '\0';
    sl_buf_free(&b);
    return out;
}

/* The sample line of `name` (with the labels every series carries), or
 * NULL. */
static const char *line(const char *t, const char *name, const char *worker)
{
    static char want[256];
    snprintf(want, sizeof want, "\n%s{sluice_job=\"job-a\",worker=\"%s\"} ", name, worker);
    return strstr(t, want);
}

static long long value(const char *t, const char *name, const char *worker)
{
    const char *l = line(t, name, worker);
    ck_assert_msg(l != NULL, "no %s for worker %s in:\n%s", name, worker, t);
    long long v = -1;
    ck_assert_int_eq(sscanf(strchr(l, '}') + 2, "%lld", &v), 1);
    return v;
}

START_TEST(test_absent_without_elastic)
{
    struct sl_metrics *m;
    struct train_expose *e = start(&m, "3");
    const char *t = text(e);
    ck_assert_ptr_nonnull(line(t, "sluice_trainer_steps_total", "3"));
    ck_assert_ptr_null(strstr(t, "sluice_trainer_workers"));
    ck_assert_ptr_null(strstr(t, "sluice_trainer_worker_index"));
    ck_assert_ptr_null(strstr(t, "sluice_trainer_world_changes_total"));
    train_expose_world(NULL, 3, 1, 1); /* NULL: nothing */
    train_expose_input_closing(NULL, NULL);
    train_expose_input_closing(e, NULL); /* no client yet: nothing */
    ck_assert_ptr_null(strstr(text(e), "sluice_trainer_workers"));
    stop(e, m);
}
END_TEST

START_TEST(test_member_world)
{
    struct sl_metrics *m;
    struct train_expose *e = start(&m, "1");
    train_expose_world(e, 2, 1, 0); /* a member of the starting world */
    const char *t = text(e);
    ck_assert_ptr_nonnull(strstr(t, "# TYPE sluice_trainer_workers gauge\n"));
    ck_assert_ptr_nonnull(strstr(t, "# TYPE sluice_trainer_worker_index gauge\n"));
    ck_assert_ptr_nonnull(strstr(t, "# TYPE sluice_trainer_world_changes_total counter\n"));
    ck_assert_int_eq(value(t, "sluice_trainer_workers", "1"), 2);
    ck_assert_int_eq(value(t, "sluice_trainer_worker_index", "1"), 1);
    ck_assert_int_eq(value(t, "sluice_trainer_world_changes_total", "1"), 0);
    /* steps before and after a change: the table is the process's */
    sl_metrics_add(m, TRAIN_M_STEPS, 5);
    train_expose_world(e, 3, 0, 1); /* renumbered: the label stays */
    sl_metrics_add(m, TRAIN_M_STEPS, 2);
    t = text(e);
    ck_assert_int_eq(value(t, "sluice_trainer_workers", "1"), 3);
    ck_assert_int_eq(value(t, "sluice_trainer_worker_index", "1"), 0);
    ck_assert_int_eq(value(t, "sluice_trainer_world_changes_total", "1"), 1);
    ck_assert_int_eq(value(t, "sluice_trainer_steps_total", "1"), 7);
    ck_assert_int_eq(value(t, "sluice_trainer_step_input_wait_seconds_count", "1"), 2); /* two watched adds */
    /* let go: no world, no index, one change more */
    train_expose_world(e, 0, 0, 1);
    t = text(e);
    ck_assert_int_eq(value(t, "sluice_trainer_workers", "1"), 0);
    ck_assert_ptr_null(strstr(t, "sluice_trainer_worker_index"));
    ck_assert_int_eq(value(t, "sluice_trainer_world_changes_total", "1"), 2);
    stop(e, m);
}
END_TEST

START_TEST(test_joiner)
{
    struct sl_metrics *m;
    /* a joiner is labelled by its --join, escaped as the format says */
    struct train_expose *e = start(&m, "tcp://h\"x\\:7001");
    const char *esc = "tcp://h\\\"x\\\\:7001";
    train_expose_world(e, 0, 0, 0); /* before its admission */
    const char *t = text(e);
    ck_assert_int_eq(value(t, "sluice_trainer_workers", esc), 0);
    ck_assert_ptr_null(strstr(t, "sluice_trainer_worker_index"));
    ck_assert_int_eq(value(t, "sluice_trainer_world_changes_total", esc), 0);
    ck_assert_int_eq(value(t, "sluice_trainer_steps_total", esc), 0);
    train_expose_world(e, 3, 2, 1); /* admitted as worker 2 of 3 */
    t = text(e);
    ck_assert_int_eq(value(t, "sluice_trainer_workers", esc), 3);
    ck_assert_int_eq(value(t, "sluice_trainer_worker_index", esc), 2);
    ck_assert_int_eq(value(t, "sluice_trainer_world_changes_total", esc), 1);
    stop(e, m);
}
END_TEST

START_TEST(test_label_too_long)
{
    struct sl_metrics *m;
    ck_assert_int_eq(train_metrics_create(&m), 0);
    static char worker[8192];
    memset(worker, 'w', sizeof worker - 1);
    struct train_expose *e = (struct train_expose *)&e;
    int rc = train_expose_start(&e, "127.0.0.1:0", m, &no_loop, &no_client, "job-a", worker);
    ck_assert_int_ne(rc, 0);
    ck_assert_ptr_null(e);
    sl_metrics_destroy(m);
}
END_TEST

/* A scrape thread against the main thread's changes: each exposition's
 * triple is one the main thread set (workers = index + 2, changes =
 * index), never a mix. */
struct race {
    struct train_expose *e;
    atomic_int done;
    int bad;
};

static void *scrape(void *arg)
{
    struct race *r = arg;
    struct sl_buf b;
    sl_buf_init(&b, 1 << 16);
    while (!atomic_load(&r->done)) {
        sl_buf_reset(&b);
        if (train_expose_write(r->e, &b) != 0 || sl_buf_putc(&b, '\0') != 0) {
            r->bad = 1;
            break;
        }
        const char *t = (const char *)b.data;
        const char *w = line(t, "sluice_trainer_workers", "0"), *i = line(t, "sluice_trainer_worker_index", "0"),
                   *c = line(t, "sluice_trainer_world_changes_total", "0");
        long long wv = -1, iv = -1, cv = -1;
        if (w == NULL || i == NULL || c == NULL || sscanf(strchr(w, '}') + 2, "%lld", &wv) != 1 ||
            sscanf(strchr(i, '}') + 2, "%lld", &iv) != 1 || sscanf(strchr(c, '}') + 2, "%lld", &cv) != 1 ||
            wv != iv + 2 || cv != iv) {
            r->bad = 1;
            break;
        }
    }
    sl_buf_free(&b);
    return NULL;
}

START_TEST(test_race)
{
    struct sl_metrics *m;
    struct race r = {.e = start(&m, "0")};
    atomic_init(&r.done, 0);
    train_expose_world(r.e, 2, 0, 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, scrape, &r), 0);
    for (uint32_t k = 1; k <= 20000; k++) {
        train_expose_world(r.e, k + 2, k, 1);
        sl_metrics_add(m, TRAIN_M_STEPS, 1);
    }
    atomic_store(&r.done, 1);
    pthread_join(th, NULL);
    ck_assert_int_eq(r.bad, 0);
    ck_assert_int_eq(value(text(r.e), "sluice_trainer_world_changes_total", "0"), 20000);
    stop(r.e, m);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("train_expose");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_absent_without_elastic);
    tcase_add_test(tc, test_member_world);
    tcase_add_test(tc, test_joiner);
    tcase_add_test(tc, test_label_too_long);
    tcase_add_test(tc, test_race);
    suite_add_tcase(s, tc);
    return s;
}
