/* record gen: a synthetic, seeded dataset of tf.train.Example records for
 * benchmarks and tests.
 *
 * Record i is {id: int64 i, label: int64, image: bytes[image_bytes],
 * dense: float[K] (when K > 0), tokens: int64[0..M] (when M > 0)}, drawn from
 * a splitmix64 generator seeded from (seed, i) alone. A record's content
 * therefore depends only on the seed and its id, not on the shard count or on
 * what came before: the same seed gives identical files, and a dataset split
 * into more shards holds the same records. Record i goes to shard
 * floor(i * S / N), as in convert.
 */
#include <getopt.h>
#include <string.h>

#include "fmt_example.h"
#include "progress.h"
#include "record.h"
#include "sl_alloc.h"
#include "sl_log.h"

static const char gen_help[] = "Usage: sluice-record gen --output-dir DIR --records N [OPTION]...\n"
                               "Write a synthetic dataset of tf.train.Example records to S shards\n"
                               "DIR/PREFIX-00000-of-0000S.tfrecord (.gz with gzip, .zz with zlib). Record i\n"
                               "holds id: int64 i, label: int64 in [0, classes), image: bytes of a fixed\n"
                               "size, and optionally dense: K floats in [0, 1) and tokens: int64 values in\n"
                               "[0, vocab) of random length 0..M. The content of record i depends only on\n"
                               "the seed and i: the same seed always gives the same bytes.\n"
                               "\n"
                               "  -o, --output-dir=DIR      output folder (created if missing)\n"
                               "  -n, --records=N           number of records\n"
                               "  -s, --shards=S            number of shards (default 1)\n"
                               "      --seed=N              generator seed (default 0)\n"
                               "      --image-bytes=B       size of the image feature (default 784)\n"
                               "      --floats=K            add dense: K floats (default 0: no feature)\n"
                               "      --varlen-max=M        add tokens: 0..M int64 (default 0: no feature)\n"
                               "      --classes=C           labels in [0, C) (default 10)\n"
                               "      --vocab=V             token values in [0, V) (default 32000)\n"
                               "      --prefix=NAME         shard name prefix (default gen)\n"
                               "  -c, --compression=C       none (default), gzip or zlib\n"
                               "      --index               also write NAME.idx for every shard\n"
                               "  -h, --help                show this help and exit\n"
                               "\n"
                               "Shards are written under temporary names and renamed when all are complete;\n"
                               "on an error, SIGINT or SIGTERM every partial output is removed.\n";

enum {
    OPT_SEED = RECORD_OPT_FIRST_PRIVATE,
    OPT_IMAGE_BYTES,
    OPT_FLOATS,
    OPT_VARLEN_MAX,
    OPT_CLASSES,
    OPT_VOCAB,
};

struct gen_args {
    struct record_shard_opts output;
    uint64_t records, seed, image_bytes, floats, varlen_max, classes, vocab;
};

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A value in [0, n), n > 0 (the modulo bias is irrelevant here). */
static uint64_t below(uint64_t *state, uint64_t n)
{
    return splitmix64(state) % n;
}

struct gen_scratch {
    uint8_t *image;
    float *dense;
    int64_t *tokens;
};

static int gen_record(const struct gen_args *a, struct gen_scratch *s, uint64_t i, struct sl_buf *out)
{
    /* one stream per record: mix seed and id so neighbouring ids diverge */
    uint64_t st = a->seed;
    st = splitmix64(&st) ^ (i * 0xd1b54a32d192ed03ull);
    int64_t id = (int64_t)i;
    int64_t label = (int64_t)below(&st, a->classes);
    for (uint64_t k = 0; k < a->image_bytes; k += 8) {
        uint64_t v = splitmix64(&st);
        size_t n = a->image_bytes - k < 8 ? (size_t)(a->image_bytes - k) : 8;
        for (size_t b = 0; b < n; b++)
            s->image[k + b] = (uint8_t)(v >> (8 * b));
    }
    for (uint64_t k = 0; k < a->floats; k++)
        s->dense[k] = (float)(splitmix64(&st) >> 40) * (1.0f / 16777216.0f);
    size_t ntokens = a->varlen_max ? (size_t)below(&st, a->varlen_max + 1) : 0;
    for (size_t k = 0; k < ntokens; k++)
        s->tokens[k] = (int64_t)below(&st, a->vocab);

    struct fmt_example_enc enc;
    int rc = fmt_example_enc_begin(&enc, out);
    if (rc != 0)
        return rc;
    const uint8_t *img = s->image;
    size_t img_len = (size_t)a->image_bytes;
    rc = fmt_example_enc_int64(&enc, "id", &id, 1);
    rc = rc ? rc : fmt_example_enc_int64(&enc, "label", &label, 1);
    rc = rc ? rc : fmt_example_enc_bytes(&enc, "image", &img, &img_len, 1);
    if (a->floats)
        rc = rc ? rc : fmt_example_enc_float(&enc, "dense", s->dense, (size_t)a->floats);
    if (a->varlen_max)
        rc = rc ? rc : fmt_example_enc_int64(&enc, "tokens", s->tokens, ntokens);
    if (rc != 0) {
        fmt_example_enc_abort(&enc);
        return rc;
    }
    return fmt_example_enc_end(&enc);
}

static int gen_run(const struct gen_args *a)
{
    struct sl_error err = {0};
    struct record_shards out;
    struct gen_scratch s = {
        .image = sl_malloc(a->image_bytes ? (size_t)a->image_bytes : 1),
        .dense = sl_malloc((a->floats ? (size_t)a->floats : 1) * sizeof(float)),
        .tokens = sl_malloc((a->varlen_max ? (size_t)a->varlen_max : 1) * sizeof(int64_t)),
    };
    struct sl_buf rec;
    sl_buf_init(&rec, 0);
    int rc, shards_open = 0;
    if (!s.image || !s.dense || !s.tokens) {
        rc = sl_error_set(&err, SL_ENOMEM, "out of memory");
        goto out_free;
    }
    if ((rc = record_shards_init(&out, a->output.dir, a->output.prefix, a->output.shards, a->output.compression,
                                 a->output.index, &err)) != 0)
        goto out_free;
    shards_open = 1;
    record_signals_install();
    struct progress bar;
    progress_init(&bar, "gen", a->records, 0);
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < a->records && !record_interrupted(); i++) {
        sl_buf_reset(&rec);
        if ((rc = gen_record(a, &s, i, &rec)) != 0) {
            rc = sl_error_set(&err, rc, "record %llu: cannot encode the Example", (unsigned long long)i);
            break;
        }
        unsigned shard = (unsigned)(i * a->output.shards / a->records);
        if ((rc = record_shards_write(&out, shard, rec.data, rec.len, &err)) != 0)
            break;
        bytes += rec.len + 16;
        progress_update(&bar, i + 1, bytes);
    }
    progress_clear(&bar);
    if (rc == 0 && !record_interrupted())
        rc = record_shards_commit(&out, &err);

out_free:
    if (shards_open)
        record_shards_finish(&out, rc == 0 && !record_interrupted());
    sl_buf_free(&rec);
    sl_free(s.image);
    sl_free(s.dense);
    sl_free(s.tokens);
    return record_shards_exit("gen", rc, &err);
}

int record_gen_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output-dir", required_argument, NULL, 'o'},
        {"records", required_argument, NULL, 'n'},
        {"shards", required_argument, NULL, 's'},
        {"seed", required_argument, NULL, OPT_SEED},
        {"image-bytes", required_argument, NULL, OPT_IMAGE_BYTES},
        {"floats", required_argument, NULL, OPT_FLOATS},
        {"varlen-max", required_argument, NULL, OPT_VARLEN_MAX},
        {"classes", required_argument, NULL, OPT_CLASSES},
        {"vocab", required_argument, NULL, OPT_VOCAB},
        {"prefix", required_argument, NULL, RECORD_OPT_PREFIX},
        {"compression", required_argument, NULL, 'c'},
        {"index", no_argument, NULL, RECORD_OPT_INDEX},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd = "gen";
    struct gen_args a = {.output = {.prefix = "gen", .shards = 1, .compression = FMT_COMP_NONE},
                         .image_bytes = 784,
                         .classes = 10,
                         .vocab = 32000};
    int have_records = 0, c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:n:s:c:h", longopts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'h': return record_help(gen_help);
        case 'n':
            bad = record_parse_u64(cmd, "--records", optarg, 0, (uint64_t)1 << 40, &a.records);
            have_records = 1;
            break;
        case OPT_SEED: bad = record_parse_u64(cmd, "--seed", optarg, 0, UINT64_MAX, &a.seed); break;
        case OPT_IMAGE_BYTES:
            bad = record_parse_u64(cmd, "--image-bytes", optarg, 0, (uint64_t)16 << 20, &a.image_bytes);
            break;
        case OPT_FLOATS: bad = record_parse_u64(cmd, "--floats", optarg, 0, (uint64_t)4 << 20, &a.floats); break;
        case OPT_VARLEN_MAX:
            bad = record_parse_u64(cmd, "--varlen-max", optarg, 0, (uint64_t)1 << 20, &a.varlen_max);
            break;
        case OPT_CLASSES: bad = record_parse_u64(cmd, "--classes", optarg, 1, INT64_MAX, &a.classes); break;
        case OPT_VOCAB: bad = record_parse_u64(cmd, "--vocab", optarg, 1, INT64_MAX, &a.vocab); break;
        default:
            if ((bad = record_shard_opt(cmd, c, 's', optarg, &a.output)) < 0)
                return record_getopt_error(cmd, argv, c);
        }
        if (bad)
            return RECORD_EXIT_USAGE;
    }
    if (optind < argc)
        return record_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (a.output.dir == NULL)
        return record_usage_error(cmd, "missing --output-dir");
    if (!have_records)
        return record_usage_error(cmd, "missing --records");
    return gen_run(&a);
}
