/* map: the map stage's pipeline (every op's arguments, hostile values
 * refused with the op index and key), its specs against features, the
 * tensor ops' exact outputs, and plugins (the example plugin, and one that
 * misbehaves). Every message is compared whole. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"
#include "sl_alloc.h"
#include "sl_rng.h"
#include "sl_test.h"

/* The pipeline's error for `text` as the job file would word it ("" when
 * it parses). */
static const char *parse_msg(const char *text)
{
    static char msg[1024];
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &je);
    ck_assert_msg(v != NULL, "bad test JSON %s: %s", text, je.text);
    struct map_pipeline *p = (struct map_pipeline *)1;
    struct map_why w;
    int rc = map_pipeline_parse(&p, v, &w);
    json_decref(v);
    msg[0] = '\0';
    if (rc == 0) {
        map_pipeline_free(p);
        return msg;
    }
    ck_assert_int_eq(rc, SL_EINVAL);
    ck_assert_ptr_null(p);
    if (w.unknown)
        snprintf(msg, sizeof msg, "unknown key '%s'", w.key);
    else
        snprintf(msg, sizeof msg, "'%s'%s", w.key, w.text);
    return msg;
}

static struct map_pipeline *parse_ok(const char *text)
{
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    ck_assert_ptr_nonnull(v);
    struct map_pipeline *p;
    struct map_why w;
    int rc = map_pipeline_parse(&p, v, &w);
    json_decref(v);
    ck_assert_msg(rc == 0, "%s: '%s'%s", text, w.key, w.text);
    return p;
}

static struct map_spec spec(const char *name, enum map_dtype dt, int varlen, int rank, int64_t d0, int64_t d1,
                            int64_t d2)
{
    struct map_spec s;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "%s", name);
    s.dtype = dt;
    s.varlen = varlen;
    s.rank = rank;
    s.shape[0] = d0;
    s.shape[1] = d1;
    s.shape[2] = d2;
    return s;
}

/* The features of the tests: image (bytes scalar), label (int64 []),
 * tokens (int64 varlen), dense (float32 [3]), pixels (uint8 [4, 5, 3]). */
static struct map_spec features[5];
static void setup_features(void)
{
    features[0] = spec("image", MAP_DT_BYTES, 0, 0, 0, 0, 0);
    features[1] = spec("label", MAP_DT_INT64, 0, 0, 0, 0, 0);
    features[2] = spec("tokens", MAP_DT_INT64, 1, 1, MAP_DIM_DATA, 0, 0);
    features[3] = spec("dense", MAP_DT_FLOAT32, 0, 1, 3, 0, 0);
    features[4] = spec("pixels", MAP_DT_UINT8, 0, 3, 4, 5, 3);
}

/* The plan's error for pipeline `text` over the features ("" when made). */
static const char *plan_msg(const char *text, unsigned flags)
{
    static char msg[1024];
    struct map_pipeline *p = parse_ok(text);
    struct map_plan *pl = (struct map_plan *)1;
    struct map_why w;
    setup_features();
    int rc = map_plan_create(&pl, p, features, 5, NULL, flags, &w);
    msg[0] = '\0';
    if (rc == 0)
        map_plan_destroy(pl);
    else {
        ck_assert_ptr_null(pl);
        snprintf(msg, sizeof msg, "'%s'%s", w.key, w.text);
    }
    map_pipeline_free(p);
    return msg;
}

START_TEST(test_parse_errors)
{
    static const char *const cases[][2] = {
        {"{}", "'map' must be a list of at most 64 ops (got {})"},
        {"\"cast\"", "'map' must be a list of at most 64 ops (got \"cast\")"},
        {"[3]", "'map[0]' must be an object {\"op\": ..., \"feature\": ...} (got 3)"},
        {"[{\"feature\": \"x\"}]", "'map[0].op' is required"},
        {"[{\"op\": \"blur\", \"feature\": \"x\"}]",
         "'map[0].op': unknown op \"blur\" (expected decode_image, random_resized_crop, resize, center_crop, "
         "random_flip, normalize, cast, one_hot, pad_or_truncate, plugin)"},
        {"[{\"op\": 7, \"feature\": \"x\"}]",
         "'map[0].op': unknown op 7 (expected decode_image, random_resized_crop, resize, center_crop, random_flip, "
         "normalize, cast, one_hot, pad_or_truncate, plugin)"},
        {"[{\"op\": \"cast\"}]", "'map[0].feature' is required"},
        {"[{\"op\": \"cast\", \"feature\": \"\"}]", "'map[0].feature' must be a feature's name (got \"\")"},
        {"[{\"op\": \"cast\", \"feature\": [\"a\"]}]", "'map[0].feature' must be a feature's name (got [\"a\"])"},
        {"[{\"op\": \"cast\", \"feature\": \"x\", \"dtype\": \"int64\", \"dtpye\": 1}]", "unknown key 'map[0].dtpye'"},
        {"[{\"op\": \"cast\", \"feature\": \"x\"}]",
         "'map[0].dtype' is required (int64, float32, uint8, float16 or bfloat16)"},
        {"[{\"op\": \"cast\", \"feature\": \"x\", \"dtype\": \"int33\"}]",
         "'map[0].dtype' must be \"int64\", \"float32\", \"uint8\", \"float16\" or \"bfloat16\" (got \"int33\")"},
        {"[{\"op\": \"cast\", \"feature\": \"x\", \"dtype\": \"bytes\"}]",
         "'map[0].dtype' must be \"int64\", \"float32\", \"uint8\", \"float16\" or \"bfloat16\" (got \"bytes\")"},
        {"[{\"op\": \"cast\", \"feature\": \"x\", \"dtype\": \"half\"}]",
         "'map[0].dtype' must be \"int64\", \"float32\", \"uint8\", \"float16\" or \"bfloat16\" (got \"half\")"},
        {"[{\"op\": \"cast\", \"feature\": \"x\", \"dtype\": 16}]",
         "'map[0].dtype' must be \"int64\", \"float32\", \"uint8\", \"float16\" or \"bfloat16\" (got 16)"},
        {"[{\"op\": \"one_hot\", \"feature\": \"x\", \"depth\": 0}]",
         "'map[0].depth' must be an integer from 1 to 1048576 (got 0)"},
        {"[{\"op\": \"one_hot\", \"feature\": \"x\", \"depth\": -3}]",
         "'map[0].depth' must be an integer from 1 to 1048576 (got -3)"},
        {"[{\"op\": \"one_hot\", \"feature\": \"x\", \"depth\": 9223372036854775807}]",
         "'map[0].depth' must be an integer from 1 to 1048576 (got 9223372036854775807)"},
        {"[{\"op\": \"one_hot\", \"feature\": \"x\", \"depth\": 2.5}]",
         "'map[0].depth' must be an integer from 1 to 1048576 (got 2.5)"},
        {"[{\"op\": \"one_hot\", \"feature\": \"x\", \"depth\": \"10\"}]",
         "'map[0].depth' must be an integer from 1 to 1048576 (got \"10\")"},
        {"[{\"op\": \"pad_or_truncate\", \"feature\": \"x\"}]",
         "'map[0].length' is required (an integer from 1 to 16777216)"},
        {"[{\"op\": \"pad_or_truncate\", \"feature\": \"x\", \"length\": 4, \"pad\": \"NaN\"}]",
         "'map[0].pad' must be a number from -3.4e+38 to 3.4e+38 (got \"NaN\")"},
        {"[{\"op\": \"pad_or_truncate\", \"feature\": \"x\", \"length\": 4, \"pad\": 1e300}]",
         "'map[0].pad' must be a number from -3.4e+38 to 3.4e+38 (got 1e300)"},
        {"[{\"op\": \"pad_or_truncate\", \"feature\": \"x\", \"length\": 4, \"mask\": 1}]",
         "'map[0].mask' must be the name of a new feature (got 1)"},
        {"[{\"op\": \"pad_or_truncate\", \"feature\": \"x\", \"length\": 4, \"mask_dtype\": \"float32\"}]",
         "'map[0].mask_dtype' must be \"uint8\" or \"int64\" (got \"float32\")"},
        {"[{\"op\": \"pad_or_truncate\", \"feature\": \"x\", \"length\": 4, \"mask_dtype\": \"bfloat16\"}]",
         "'map[0].mask_dtype' must be \"uint8\" or \"int64\" (got \"bfloat16\")"},
        {"[{\"op\": \"cast\", \"feature\": \"x\", \"dtype\": \"int64\"}, {\"op\": \"resize\", \"feature\": \"i\", "
         "\"size\": [0, 224]}]",
         "'map[1].size' must be two integers from 1 to 65536 (got [0, 224])"},
        {"[{\"op\": \"resize\", \"feature\": \"i\", \"size\": [224]}]",
         "'map[0].size' must be two integers from 1 to 65536 (got [224])"},
        {"[{\"op\": \"resize\", \"feature\": \"i\", \"size\": [224, 100000]}]",
         "'map[0].size' must be two integers from 1 to 65536 (got [224, 100000])"},
        {"[{\"op\": \"center_crop\", \"feature\": \"i\"}]", "'map[0].size' is required (two integers from 1 to 65536)"},
        {"[{\"op\": \"resize\", \"feature\": \"i\", \"size\": [2, 2], \"antialias\": 1}]",
         "'map[0].antialias' must be true or false (got 1)"},
        {"[{\"op\": \"decode_image\", \"feature\": \"i\", \"channels\": 2}]",
         "'map[0].channels' must be 1 (grayscale) or 3 (RGB) (got 2)"},
        {"[{\"op\": \"decode_image\", \"feature\": \"i\", \"channels\": 4}]",
         "'map[0].channels' must be an integer from 1 to 3 (got 4)"},
        {"[{\"op\": \"decode_image\", \"feature\": \"i\", \"max_pixels\": 0}]",
         "'map[0].max_pixels' must be an integer from 1 to 1073741824 (got 0)"},
        {"[{\"op\": \"decode_image\", \"feature\": \"i\", \"max_pixels\": 3600000000}]",
         "'map[0].max_pixels' must be an integer from 1 to 1073741824 (got 3600000000)"},
        {"[{\"op\": \"random_resized_crop\", \"feature\": \"i\", \"size\": [8, 8], \"scale\": [0, 1]}]",
         "'map[0].scale' must be two numbers lo <= hi in (0, 1] (got [0, 1])"},
        {"[{\"op\": \"random_resized_crop\", \"feature\": \"i\", \"size\": [8, 8], \"scale\": [0.9, 0.1]}]",
         "'map[0].scale' must be two numbers lo <= hi in (0, 1] (got [0.9, 0.1])"},
        {"[{\"op\": \"random_resized_crop\", \"feature\": \"i\", \"size\": [8, 8], \"ratio\": [-1, 2]}]",
         "'map[0].ratio' must be two numbers lo <= hi in (0, 100] (got [-1, 2])"},
        {"[{\"op\": \"random_resized_crop\", \"feature\": \"i\", \"size\": [8, 8], \"ratio\": [\"a\", 2]}]",
         "'map[0].ratio' must be two numbers lo <= hi in (0, 100] (got [\"a\", 2])"},
        {"[{\"op\": \"random_flip\", \"feature\": \"i\", \"p\": 1.5}]",
         "'map[0].p' must be a number from 0 to 1 (got 1.5)"},
        {"[{\"op\": \"random_flip\", \"feature\": \"i\", \"p\": -0.1}]",
         "'map[0].p' must be a number from 0 to 1 (got -0.1)"},
        {"[{\"op\": \"normalize\", \"feature\": \"i\", \"std\": [1]}]",
         "'map[0].mean' is required (one number per channel)"},
        {"[{\"op\": \"normalize\", \"feature\": \"i\", \"mean\": [0.5], \"std\": [0]}]",
         "'map[0].std' must be 1 to 4 numbers, one per channel, each in (0, 1e6] (got [0])"},
        {"[{\"op\": \"normalize\", \"feature\": \"i\", \"mean\": [0.5], \"std\": [-1]}]",
         "'map[0].std' must be 1 to 4 numbers, one per channel, each in (0, 1e6] (got [-1])"},
        {"[{\"op\": \"normalize\", \"feature\": \"i\", \"mean\": [], \"std\": []}]",
         "'map[0].mean' must be 1 to 4 numbers, one per channel, each in [-1e6, 1e6] (got [])"},
        {"[{\"op\": \"normalize\", \"feature\": \"i\", \"mean\": [0.5, 0.5], \"std\": [0.2]}]",
         "'map[0].std' must have as many numbers as 'mean' (2, got 1)"},
        {"[{\"op\": \"normalize\", \"feature\": \"i\", \"mean\": [0.5], \"std\": [0.2], \"dtype\": \"float64\"}]",
         "'map[0].dtype' must be \"float32\", \"float16\" or \"bfloat16\" (got \"float64\")"},
        {"[{\"op\": \"normalize\", \"feature\": \"i\", \"mean\": [0.5], \"std\": [0.2], \"dtype\": \"uint8\"}]",
         "'map[0].dtype' must be \"float32\", \"float16\" or \"bfloat16\" (got \"uint8\")"},
        {"[{\"op\": \"normalize\", \"feature\": \"i\", \"mean\": [0.5], \"std\": [0.2], \"dtype\": null}]",
         "'map[0].dtype' must be \"float32\", \"float16\" or \"bfloat16\" (got null)"},
        {"[{\"op\": \"normalize\", \"feature\": \"i\", \"mean\": [0.5], \"std\": [0.2], \"dtype\": [\"float16\"]}]",
         "'map[0].dtype' must be \"float32\", \"float16\" or \"bfloat16\" (got [\"float16\"])"},
        {"[{\"op\": \"normalize\", \"feature\": \"i\", \"mean\": [0.5], \"std\": [0.2], \"layout\": \"WHC\"}]",
         "'map[0].layout' must be \"HWC\" or \"CHW\" (got \"WHC\")"},
        {"[{\"op\": \"plugin\", \"feature\": \"i\"}]", "'map[0].path' is required (the plugin's shared library)"},
        {"[{\"op\": \"plugin\", \"feature\": \"i\", \"path\": \"\"}]",
         "'map[0].path' must be a file's path (got \"\")"},
        {"[{\"op\": \"plugin\", \"feature\": \"i\", \"path\": \"x.so\", \"args\": [1]}]",
         "'map[0].args' must be an object (got [1])"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(strcmp(parse_msg(cases[i][0]), cases[i][1]) == 0, "%s\n  got  %s\n  want %s", cases[i][0],
                      parse_msg(cases[i][0]), cases[i][1]);
    /* 64 ops pass, 65 do not */
    char big[65 * 60 + 8];
    size_t n = (size_t)snprintf(big, sizeof big, "[");
    for (int i = 0; i < 65; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "%s{\"op\": \"cast\", \"feature\": \"x\", \"dtype\": \"int64\"}",
                              i ? "," : "");
    snprintf(big + n, sizeof big - n, "]");
    ck_assert_str_eq(parse_msg(big), "'map' must be a list of at most 64 ops (got [{\"op\": \"cast\", \"feature\": "
                                     "\"x\", \"dtype\": \"int64\"}, {\"op\":...)");
    ck_assert_str_eq(parse_msg("[]"), "");
}
END_TEST

START_TEST(test_to_json_defaults)
{
    struct map_pipeline *p =
        parse_ok("[{\"op\": \"decode_image\", \"feature\": \"image\"},"
                 " {\"op\": \"random_resized_crop\", \"feature\": \"image\", \"size\": [224, 224]},"
                 " {\"op\": \"pad_or_truncate\", \"feature\": \"tokens\", \"length\": 4}]");
    json_t *j = map_pipeline_to_json(p);
    char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(17));
    ck_assert_str_eq(s, "[{\"op\":\"decode_image\",\"feature\":\"image\",\"channels\":3,\"max_pixels\":67108864},"
                        "{\"op\":\"random_resized_crop\",\"feature\":\"image\",\"size\":[224,224],"
                        "\"scale\":[0.080000000000000002,1.0],\"ratio\":[0.75,1.3333333333333333],\"antialias\":true},"
                        "{\"op\":\"pad_or_truncate\",\"feature\":\"tokens\",\"length\":4,\"pad\":0.0,"
                        "\"mask_dtype\":\"uint8\"}]");
    /* loads back to the same */
    struct map_pipeline *q;
    struct map_why w;
    ck_assert_int_eq(map_pipeline_parse(&q, j, &w), 0);
    json_t *j2 = map_pipeline_to_json(q);
    ck_assert(json_equal(j, j2));
    ck_assert_int_eq(map_pipeline_random(p), 1);
    ck_assert_uint_eq(map_pipeline_nops(p), 3);
    free(s);
    json_decref(j);
    json_decref(j2);
    map_pipeline_free(p);
    map_pipeline_free(q);
}
END_TEST

START_TEST(test_plan_errors)
{
    static const char *const cases[][2] = {
        {"[{\"op\": \"cast\", \"feature\": \"lable\", \"dtype\": \"int64\"}]",
         "'map[0].feature': no feature 'lable' (the job's features and the masks of earlier ops)"},
        {"[{\"op\": \"cast\", \"feature\": \"image\", \"dtype\": \"int64\"}]",
         "'map[0].feature': cast takes an int64, float32, uint8, float16 or bfloat16 feature ('image' is bytes [])"},
        {"[{\"op\": \"cast\", \"feature\": \"tokens\", \"dtype\": \"float32\"}]",
         "'map[0].feature': cast takes a fixed-shape feature; 'tokens' is variable-length: pad_or_truncate it first"},
        {"[{\"op\": \"one_hot\", \"feature\": \"dense\", \"depth\": 3}]",
         "'map[0].feature': one_hot takes one int64 label per element ('dense' is float32 [3])"},
        {"[{\"op\": \"cast\", \"feature\": \"label\", \"dtype\": \"float32\"}, {\"op\": \"one_hot\", \"feature\": "
         "\"label\", \"depth\": 3}]",
         "'map[1].feature': one_hot takes one int64 label per element ('label' is float32 [])"},
        {"[{\"op\": \"pad_or_truncate\", \"feature\": \"label\", \"length\": 3}]",
         "'map[0].feature': pad_or_truncate takes a list of int64 or float32 values, variable-length or of rank 1 "
         "('label' is int64 [])"},
        {"[{\"op\": \"pad_or_truncate\", \"feature\": \"tokens\", \"length\": 3, \"pad\": 0.5}]",
         "'map[0].pad' must be an integer for int64 feature 'tokens' (got 0.5)"},
        {"[{\"op\": \"pad_or_truncate\", \"feature\": \"tokens\", \"length\": 3, \"mask\": \"label\"}]",
         "'map[0].mask': a feature 'label' exists already (a mask is a new feature)"},
        {"[{\"op\": \"decode_image\", \"feature\": \"label\"}]",
         "'map[0].feature': decode_image takes one encoded image, a bytes scalar ('label' is int64 [])"},
        {"[{\"op\": \"decode_image\", \"feature\": \"image\"}]",
         "'map[0].feature': feature 'image' leaves the map with a shape that depends on the data (uint8 [?, ?, 3] "
         "after map[0] decode_image): add a resize, center_crop or random_resized_crop"},
        {"[{\"op\": \"resize\", \"feature\": \"dense\", \"size\": [2, 2]}]",
         "'map[0].feature': resize takes an image, uint8 [height, width, channels] ('dense' is float32 [3]): "
         "decode_image it first"},
        {"[{\"op\": \"center_crop\", \"feature\": \"pixels\", \"size\": [5, 5]}]",
         "'map[0].size': a 5x5 crop of 'pixels', whose images are 4x5"},
        {"[{\"op\": \"normalize\", \"feature\": \"pixels\", \"mean\": [0.5], \"std\": [0.2]}]",
         "'map[0].mean': 1 numbers for 'pixels', whose images have 3 channels"},
        {"[{\"op\": \"plugin\", \"feature\": \"dense\", \"path\": \"/nonexistent/libx.so\"}]",
         "'map[0].path': cannot load plugin /nonexistent/libx.so: /nonexistent/libx.so: cannot open shared object "
         "file: No such file or directory"},
        {"[{\"op\": \"plugin\", \"feature\": \"dense\", \"path\": \"" SL_TEST_PLUGIN_NO_SYMBOL "\"}]",
         "'map[0].path': plugin " SL_TEST_PLUGIN_NO_SYMBOL " has no symbol sluice_map_plugin (sluice/map_plugin.h)"},
        {"[{\"op\": \"plugin\", \"feature\": \"dense\", \"path\": \"" SL_TEST_PLUGIN_BAD_ABI "\"}]",
         "'map[0].path': plugin " SL_TEST_PLUGIN_BAD_ABI " is built for map plugin ABI 99, this feeder takes 1"},
        {"[{\"op\": \"plugin\", \"feature\": \"dense\", \"path\": \"" SL_TEST_PLUGIN "\", \"args\": {\"mode\": "
         "\"refuse\"}}]",
         "'map[0].args': plugin " SL_TEST_PLUGIN " refused its args: mode refuse: no"},
        {"[{\"op\": \"plugin\", \"feature\": \"tokens\", \"path\": \"" SL_SCALE_PLUGIN "\"}]",
         "'map[0].feature': plugin " SL_SCALE_PLUGIN
         " refused feature 'tokens': scale takes a fixed-shape int64, float32 or uint8 feature"},
        {"[{\"op\": \"random_flip\", \"feature\": \"pixels\"}]", ""},
        /* float16 and bfloat16: no plugin takes them (its ABI has no such dtype), no image op either */
        {"[{\"op\": \"cast\", \"feature\": \"dense\", \"dtype\": \"bfloat16\"}, {\"op\": \"plugin\", \"feature\": "
         "\"dense\", \"path\": \"" SL_SCALE_PLUGIN "\"}]",
         "'map[1].feature': plugin " SL_SCALE_PLUGIN " cannot take 'dense', which is bfloat16 (the plugin ABI has "
         "int64, float32, bytes and uint8): cast it to float32 first"},
        {"[{\"op\": \"normalize\", \"feature\": \"pixels\", \"mean\": [0, 0, 0], \"std\": [1, 1, 1], \"dtype\": "
         "\"float16\"}, {\"op\": \"random_flip\", \"feature\": \"pixels\"}]",
         "'map[1].feature': random_flip takes an image, uint8 [height, width, channels] ('pixels' is float16 [4, 5, "
         "3]): decode_image it first"},
        {"[{\"op\": \"cast\", \"feature\": \"label\", \"dtype\": \"float16\"}, {\"op\": \"one_hot\", \"feature\": "
         "\"label\", \"depth\": 3}]",
         "'map[1].feature': one_hot takes one int64 label per element ('label' is float16 [])"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(strcmp(plan_msg(cases[i][0], 0), cases[i][1]) == 0, "%s\n  got  %s\n  want %s", cases[i][0],
                      plan_msg(cases[i][0], 0), cases[i][1]);
    /* repeated ops on one feature apply in order */
    ck_assert_str_eq(plan_msg("[{\"op\": \"cast\", \"feature\": \"label\", \"dtype\": \"float32\"},"
                              " {\"op\": \"cast\", \"feature\": \"label\", \"dtype\": \"int64\"},"
                              " {\"op\": \"one_hot\", \"feature\": \"label\", \"depth\": 4}]",
                              0),
                     "");
}
END_TEST

START_TEST(test_image_specs)
{
    /* the image ops' specs (SPECS_ONLY: derived without building a runner) */
    struct map_pipeline *p = parse_ok(
        "[{\"op\": \"decode_image\", \"feature\": \"image\", \"channels\": 3},"
        " {\"op\": \"random_resized_crop\", \"feature\": \"image\", \"size\": [224, 200]},"
        " {\"op\": \"random_flip\", \"feature\": \"image\"},"
        " {\"op\": \"normalize\", \"feature\": \"image\", \"mean\": [0.485, 0.456, 0.406], \"std\": [0.229, 0.224, "
        "0.225], \"layout\": \"CHW\"},"
        " {\"op\": \"resize\", \"feature\": \"pixels\", \"size\": [8, 8]},"
        " {\"op\": \"center_crop\", \"feature\": \"pixels\", \"size\": [2, 3]}]");
    struct map_plan *pl;
    struct map_why w;
    setup_features();
    ck_assert_int_eq(map_plan_create(&pl, p, features, 5, NULL, MAP_PLAN_SPECS_ONLY, &w), 0);
    char d[96];
    static const char *const want[] = {"uint8 [?, ?, 3]",       "uint8 [224, 200, 3]", "uint8 [224, 200, 3]",
                                       "float32 [3, 224, 200]", "uint8 [8, 8, 3]",     "uint8 [2, 3, 3]"};
    for (size_t i = 0; i < 6; i++)
        ck_assert_str_eq(map_spec_describe(map_plan_op_out(pl, i), d, sizeof d), want[i]);
    size_t n;
    const struct map_spec *out = map_plan_out(pl, &n);
    ck_assert_uint_eq(n, 5);
    ck_assert_str_eq(map_spec_describe(&out[0], d, sizeof d), "float32 [3, 224, 200]");
    ck_assert_str_eq(map_spec_describe(&out[2], d, sizeof d), "int64 [?] (variable-length)");
    ck_assert_int_eq(map_plan_out_touched(pl, 0), 1);
    ck_assert_int_eq(map_plan_out_touched(pl, 1), 0);
    /* every image op is built: the plan runs */
    struct map_runner *r = NULL;
    struct sl_error err = {0};
    ck_assert_int_eq(map_runner_create(&r, pl, &err), 0);
    ck_assert_ptr_nonnull(r);
    map_runner_destroy(r);
    map_plan_destroy(pl);
    map_pipeline_free(p);
}
END_TEST

/* A plan and a runner over the test features for `text`. */
struct rig {
    struct map_pipeline *p;
    struct map_plan *pl;
    struct map_runner *r;
    struct map_tensor in[5], out[8];
    int64_t label;
    int64_t tokens[6];
    float dense[3];
    uint8_t pixels[60];
};

static void rig_open(struct rig *g, const char *text)
{
    struct map_why w;
    struct sl_error err = {0};
    memset(g, 0, sizeof *g);
    g->p = parse_ok(text);
    setup_features();
    ck_assert_msg(map_plan_create(&g->pl, g->p, features, 5, NULL, 0, &w) == 0, "'%s'%s", w.key, w.text);
    ck_assert_msg(map_runner_create(&g->r, g->pl, &err) == 0, "%s", err.msg);
    g->in[0] = (struct map_tensor){.dtype = MAP_DT_BYTES, .data = "abc", .bytes = 3};
    g->in[1] = (struct map_tensor){.dtype = MAP_DT_INT64, .data = &g->label, .bytes = 8};
    g->in[2] = (struct map_tensor){.dtype = MAP_DT_INT64, .rank = 1, .shape = {0}, .data = g->tokens, .bytes = 0};
    g->in[3] = (struct map_tensor){.dtype = MAP_DT_FLOAT32, .rank = 1, .shape = {3}, .data = g->dense, .bytes = 12};
    g->in[4] =
        (struct map_tensor){.dtype = MAP_DT_UINT8, .rank = 3, .shape = {4, 5, 3}, .data = g->pixels, .bytes = 60};
}

static void rig_tokens(struct rig *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        g->tokens[i] = (int64_t)(i + 1) * 10;
    g->in[2].shape[0] = (int64_t)n;
    g->in[2].bytes = n * 8;
}

static int rig_run(struct rig *g, uint64_t element, struct sl_error *err)
{
    struct map_key key = {7, 1, element};
    return map_runner_run(g->r, &key, g->in, g->out, err);
}

static void rig_close(struct rig *g)
{
    map_runner_destroy(g->r);
    map_plan_destroy(g->pl);
    map_pipeline_free(g->p);
}

START_TEST(test_cast)
{
    struct rig g;
    struct sl_error err = {0};
    rig_open(&g, "[{\"op\": \"cast\", \"feature\": \"dense\", \"dtype\": \"int64\"},"
                 " {\"op\": \"cast\", \"feature\": \"pixels\", \"dtype\": \"float32\"}]");
    g.dense[0] = -2.7f;
    g.dense[1] = 3.9f;
    g.dense[2] = 1e30f;
    for (int i = 0; i < 60; i++)
        g.pixels[i] = (uint8_t)(i * 4);
    ck_assert_int_eq(rig_run(&g, 0, &err), 0);
    ck_assert_int_eq(g.out[3].dtype, MAP_DT_INT64);
    ck_assert_uint_eq(g.out[3].bytes, 24);
    const int64_t *iv = g.out[3].data;
    ck_assert_int_eq(iv[0], -2); /* toward zero */
    ck_assert_int_eq(iv[1], 3);
    ck_assert_int_eq(iv[2], INT64_MAX); /* saturated */
    const float *fv = g.out[4].data;
    ck_assert_uint_eq(g.out[4].bytes, 240);
    ck_assert(fv[59] == 236.0f && fv[1] == 4.0f);
    /* untouched features are the input's views */
    ck_assert_ptr_eq(g.out[1].data, &g.label);
    rig_close(&g);

    rig_open(&g, "[{\"op\": \"cast\", \"feature\": \"dense\", \"dtype\": \"uint8\"},"
                 " {\"op\": \"cast\", \"feature\": \"label\", \"dtype\": \"uint8\"}]");
    g.dense[0] = NAN;
    g.dense[1] = -5.5f;
    g.dense[2] = 255.9f;
    g.label = 300;
    ck_assert_int_eq(rig_run(&g, 0, &err), 0);
    const uint8_t *uv = g.out[3].data;
    ck_assert_uint_eq(uv[0], 0);
    ck_assert_uint_eq(uv[1], 0);
    ck_assert_uint_eq(uv[2], 255);
    ck_assert_uint_eq(*(const uint8_t *)g.out[1].data, 255);
    g.label = -1;
    ck_assert_int_eq(rig_run(&g, 0, &err), 0);
    ck_assert_uint_eq(*(const uint8_t *)g.out[1].data, 0);
    rig_close(&g);

    rig_open(&g, "[{\"op\": \"cast\", \"feature\": \"label\", \"dtype\": \"float32\"},"
                 " {\"op\": \"cast\", \"feature\": \"dense\", \"dtype\": \"int64\"}]");
    g.label = 16777217; /* float32's nearest: 16777216 */
    g.dense[0] = -1e30f;
    g.dense[1] = 0.0f;
    g.dense[2] = NAN;
    ck_assert_int_eq(rig_run(&g, 0, &err), 0);
    ck_assert(*(const float *)g.out[1].data == 16777216.0f);
    iv = g.out[3].data;
    ck_assert_int_eq(iv[0], INT64_MIN);
    ck_assert_int_eq(iv[1], 0);
    ck_assert_int_eq(iv[2], 0);
    rig_close(&g);
}
END_TEST

static uint16_t u16_at(const struct map_tensor *t, size_t i)
{
    uint16_t v;
    memcpy(&v, (const uint8_t *)t->data + 2 * i, 2);
    return v;
}

/* normalize into float16 and bfloat16: 2 bytes a value, each the float32
 * result rounded to nearest, ties to even (the float32 result is
 * test_img_ops's; numpy's rounding of it is tests/integration/
 * test_map_half.py's) */
START_TEST(test_normalize_half)
{
    static const char *const dts[] = {"float32", "float16", "bfloat16"};
    struct map_tensor out32 = {0};
    float f32[60];
    for (int k = 0; k < 3; k++) {
        char text[512];
        snprintf(text, sizeof text,
                 "[{\"op\": \"normalize\", \"feature\": \"pixels\", \"mean\": [0.485, 0.456, 0.406], \"std\": "
                 "[0.229, 0.224, 0.225], \"dtype\": \"%s\", \"layout\": \"CHW\"}]",
                 dts[k]);
        struct rig g;
        struct sl_error err = {0};
        rig_open(&g, text);
        for (int i = 0; i < 60; i++)
            g.pixels[i] = (uint8_t)(i * 37 + 11);
        ck_assert_int_eq(rig_run(&g, 0, &err), 0);
        const struct map_tensor *t = &g.out[4];
        char d[96];
        const struct map_spec *os = map_plan_op_out(g.pl, 0);
        ck_assert_int_eq(t->rank, 3);
        ck_assert_int_eq(t->shape[0], 3);
        ck_assert_int_eq(t->shape[1], 4);
        ck_assert_int_eq(t->shape[2], 5);
        if (k == 0) {
            ck_assert_str_eq(map_spec_describe(os, d, sizeof d), "float32 [3, 4, 5]");
            ck_assert_uint_eq(t->bytes, 240);
            memcpy(f32, t->data, sizeof f32);
            out32 = *t;
            out32.data = f32;
        } else {
            ck_assert_int_eq(t->dtype, k == 1 ? MAP_DT_FLOAT16 : MAP_DT_BFLOAT16);
            ck_assert_str_eq(map_spec_describe(os, d, sizeof d), k == 1 ? "float16 [3, 4, 5]" : "bfloat16 [3, 4, 5]");
            ck_assert_uint_eq(t->bytes, 120);
            for (size_t i = 0; i < 60; i++) {
                uint32_t x;
                memcpy(&x, &f32[i], 4);
                uint16_t want;
                if (k == 2) { /* bfloat16: nearest of the two truncations, by distance in double */
                    uint32_t lo = x & 0xffff0000u, hi = lo + 0x10000u;
                    float flo, fhi;
                    memcpy(&flo, &lo, 4);
                    memcpy(&fhi, &hi, 4);
                    double dlo = fabs((double)f32[i] - flo), dhi = fabs((double)fhi - f32[i]);
                    want = (uint16_t)((dlo < dhi || (dlo == dhi && !((lo >> 16) & 1)) ? lo : hi) >> 16);
                } else {
                    want = 0;
                    /* float16: the nearest by search over the 65536 values (finite ones, here) */
                    double best = INFINITY;
                    for (uint32_t h = 0; h < 0x7c00u * 2; h++) {
                        uint16_t b = (uint16_t)(h < 0x7c00u ? h : 0x8000u | (h - 0x7c00u));
                        int e = (b >> 10) & 0x1f, m = b & 0x3ff;
                        double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
                        v = b & 0x8000u ? -v : v;
                        double dist = fabs(v - (double)f32[i]);
                        if (dist < best || (dist == best && !(b & 1))) {
                            best = dist;
                            want = b;
                        }
                    }
                }
                ck_assert_msg(u16_at(t, i) == want, "%s value %zu (%.9g): %04x, want %04x", dts[k], i, (double)f32[i],
                              u16_at(t, i), want);
            }
        }
        rig_close(&g);
    }
    ck_assert_uint_eq(out32.bytes, 240);
}
END_TEST

/* cast to and from float16 and bfloat16: one rounding, to nearest, ties to
 * even (an int64 too: no double rounding through float32); past the range
 * an infinity; NaN kept; back to float32 exact, to integers as a float32
 * is cast (toward zero, saturated, NaN 0) */
START_TEST(test_cast_half)
{
    struct rig g;
    struct sl_error err = {0};
    static const struct {
        int64_t in;
        uint16_t f16, bf16;
    } ints[] = {
        {0, 0x0000, 0x0000},         {1, 0x3c00, 0x3f80},
        {-2, 0xc000, 0xc000},        {2049, 0x6800, 0x4500}, /* f16: a tie at 11 bits, to the even 2048 */
        {2051, 0x6802, 0x4500},                              /* f16: a tie, to the even 2052 */
        {257, 0x5c04, 0x4380},                               /* bf16: a tie at 8 bits, to the even 256 */
        {259, 0x5c0c, 0x4382},                               /* bf16: a tie, to the even 260 */
        {65504, 0x7bff, 0x4780},                             /* float16's largest; bfloat16: 255.875 x 2^8 rounds up */
        {65519, 0x7bff, 0x4780},                             /* below the midpoint: 65504 */
        {65520, 0x7c00, 0x4780},                             /* the midpoint, to even: infinity */
        {-65520, 0xfc00, 0xc780},                            /* and its negative */
        {16842753, 0x7c00, 0x4b81},  /* bf16: 16842752 (1 away); through float32 first, a tie: 16777216 */
        {INT64_MAX, 0x7c00, 0x5f00}, /* 2^63 */
        {INT64_MIN, 0xfc00, 0xdf00}, /* -2^63 */
    };
    for (int bf = 0; bf < 2; bf++) {
        rig_open(&g, bf ? "[{\"op\": \"cast\", \"feature\": \"label\", \"dtype\": \"bfloat16\"}]"
                        : "[{\"op\": \"cast\", \"feature\": \"label\", \"dtype\": \"float16\"}]");
        for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
            g.label = ints[i].in;
            ck_assert_int_eq(rig_run(&g, 0, &err), 0);
            ck_assert_int_eq(g.out[1].dtype, bf ? MAP_DT_BFLOAT16 : MAP_DT_FLOAT16);
            ck_assert_uint_eq(g.out[1].bytes, 2);
            uint16_t want = bf ? ints[i].bf16 : ints[i].f16;
            ck_assert_msg(u16_at(&g.out[1], 0) == want, "%s of %lld: %04x, want %04x", bf ? "bfloat16" : "float16",
                          (long long)ints[i].in, u16_at(&g.out[1], 0), want);
        }
        rig_close(&g);
    }
    /* float32 to float16: subnormals, the ties at the bottom, overflow, NaN, -0 */
    static const struct {
        float in;
        uint16_t f16, bf16;
    } fl[][3] = {
        {{0x1p-24f, 0x0001, 0x3380}, {0x1p-25f, 0x0000, 0x3300}, {0x1.8p-24f, 0x0002, 0x33c0}},
        {{0x1.000002p-25f, 0x0001, 0x3300}, {-0.0f, 0x8000, 0x8000}, {1e-8f, 0x0000, 0x322c}},
        {{65520.0f, 0x7c00, 0x4780}, {NAN, 0x7e00, 0x7fc0}, {0.1f, 0x2e66, 0x3dcd}},
        {{3.4028235e38f, 0x7c00, 0x7f80}, {-INFINITY, 0xfc00, 0xff80}, {0x1.ffcp-15f, 0x0400, 0x3880}},
    };
    for (int bf = 0; bf < 2; bf++) {
        rig_open(&g, bf ? "[{\"op\": \"cast\", \"feature\": \"dense\", \"dtype\": \"bfloat16\"}]"
                        : "[{\"op\": \"cast\", \"feature\": \"dense\", \"dtype\": \"float16\"}]");
        for (size_t r = 0; r < sizeof fl / sizeof fl[0]; r++) {
            for (int k = 0; k < 3; k++)
                g.dense[k] = fl[r][k].in;
            ck_assert_int_eq(rig_run(&g, 0, &err), 0);
            ck_assert_uint_eq(g.out[3].bytes, 6);
            for (int k = 0; k < 3; k++) {
                uint16_t want = bf ? fl[r][k].bf16 : fl[r][k].f16;
                ck_assert_msg(u16_at(&g.out[3], (size_t)k) == want, "%s of %a: %04x, want %04x",
                              bf ? "bfloat16" : "float16", (double)fl[r][k].in, u16_at(&g.out[3], (size_t)k), want);
            }
        }
        rig_close(&g);
    }
    /* and back: float16 -> float32 exact, -> int64 and uint8 as float32's cast, -> bfloat16 rounded once */
    rig_open(&g, "[{\"op\": \"cast\", \"feature\": \"dense\", \"dtype\": \"float16\"},"
                 " {\"op\": \"cast\", \"feature\": \"dense\", \"dtype\": \"float32\"},"
                 " {\"op\": \"cast\", \"feature\": \"pixels\", \"dtype\": \"float16\"},"
                 " {\"op\": \"cast\", \"feature\": \"pixels\", \"dtype\": \"bfloat16\"},"
                 " {\"op\": \"cast\", \"feature\": \"pixels\", \"dtype\": \"uint8\"},"
                 " {\"op\": \"cast\", \"feature\": \"label\", \"dtype\": \"bfloat16\"},"
                 " {\"op\": \"cast\", \"feature\": \"label\", \"dtype\": \"int64\"}]");
    g.dense[0] = 0.1f;
    g.dense[1] = 0x1p-24f;
    g.dense[2] = -70000.0f;
    for (int i = 0; i < 60; i++)
        g.pixels[i] = (uint8_t)(i * 4 + 3);
    g.label = -300; /* bfloat16 -300 exactly: 1.0010110b x 2^8, 7 bits */
    ck_assert_int_eq(rig_run(&g, 0, &err), 0);
    const float *fv = g.out[3].data;
    ck_assert(fv[0] == 0.0999755859375f && fv[1] == 0x1p-24f && isinf(fv[2]) && fv[2] < 0);
    ck_assert_int_eq(g.out[4].dtype, MAP_DT_UINT8); /* every uint8 survives float16 and bfloat16 */
    for (int i = 0; i < 60; i++)
        ck_assert_uint_eq(((const uint8_t *)g.out[4].data)[i], (uint8_t)(i * 4 + 3));
    ck_assert_int_eq(*(const int64_t *)g.out[1].data, -300);
    rig_close(&g);
    rig_open(&g, "[{\"op\": \"cast\", \"feature\": \"dense\", \"dtype\": \"bfloat16\"},"
                 " {\"op\": \"cast\", \"feature\": \"dense\", \"dtype\": \"int64\"}]");
    g.dense[0] = NAN;
    g.dense[1] = -2.75f;
    g.dense[2] = 3e38f; /* bfloat16 keeps it finite: saturated */
    ck_assert_int_eq(rig_run(&g, 0, &err), 0);
    const int64_t *iv = g.out[3].data;
    ck_assert_int_eq(iv[0], 0);
    ck_assert_int_eq(iv[1], -2);
    ck_assert_int_eq(iv[2], INT64_MAX);
    rig_close(&g);
    rig_open(&g, "[{\"op\": \"cast\", \"feature\": \"dense\", \"dtype\": \"float16\"},"
                 " {\"op\": \"cast\", \"feature\": \"dense\", \"dtype\": \"bfloat16\"}]");
    g.dense[0] = 1.0f + 0x1p-10f;            /* float16 1.0009765625: bfloat16's tie between 1 and 1.0078125: to 1 */
    g.dense[1] = 1.0f + 0x1p-10f + 0x1p-11f; /* float16 1.0019531: bfloat16 1 */
    g.dense[2] = NAN;
    ck_assert_int_eq(rig_run(&g, 0, &err), 0);
    ck_assert_uint_eq(u16_at(&g.out[3], 0), 0x3f80);
    ck_assert_uint_eq(u16_at(&g.out[3], 1), 0x3f80);
    ck_assert_uint_eq(u16_at(&g.out[3], 2), 0x7fc0);
    rig_close(&g);
}
END_TEST

START_TEST(test_one_hot)
{
    struct rig g;
    struct sl_error err = {0};
    rig_open(&g, "[{\"op\": \"one_hot\", \"feature\": \"label\", \"depth\": 4}]");
    g.label = 2;
    ck_assert_int_eq(rig_run(&g, 0, &err), 0);
    const float want[4] = {0, 0, 1, 0};
    ck_assert_int_eq(g.out[1].dtype, MAP_DT_FLOAT32);
    ck_assert_int_eq(g.out[1].rank, 1);
    ck_assert_int_eq(g.out[1].shape[0], 4);
    ck_assert_uint_eq(g.out[1].bytes, 16);
    ck_assert_mem_eq(g.out[1].data, want, 16);
    g.label = 4;
    ck_assert_int_eq(rig_run(&g, 0, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "map[0] one_hot: label 4 is outside [0, 4)");
    g.label = -1;
    ck_assert_int_eq(rig_run(&g, 0, &err), SL_EINVAL);
    ck_assert_str_eq(err.msg, "map[0] one_hot: label -1 is outside [0, 4)");
    g.label = 0;
    ck_assert_int_eq(rig_run(&g, 0, &err), 0);
    const float want0[4] = {1, 0, 0, 0};
    ck_assert_mem_eq(g.out[1].data, want0, 16);
    rig_close(&g);
}
END_TEST

START_TEST(test_pad_or_truncate)
{
    struct rig g;
    struct sl_error err = {0};
    rig_open(&g, "[{\"op\": \"pad_or_truncate\", \"feature\": \"tokens\", \"length\": 4, \"pad\": -1, "
                 "\"mask\": \"tokens_mask\"},"
                 " {\"op\": \"cast\", \"feature\": \"tokens\", \"dtype\": \"float32\"}]");
    size_t n;
    const struct map_spec *out = map_plan_out(g.pl, &n);
    ck_assert_uint_eq(n, 6);
    ck_assert_str_eq(out[5].name, "tokens_mask");
    ck_assert_uint_eq(map_plan_out_source(g.pl, 5), 5);
    char d[96];
    ck_assert_str_eq(map_spec_describe(&out[2], d, sizeof d), "float32 [4]");
    ck_assert_str_eq(map_spec_describe(&out[5], d, sizeof d), "uint8 [4]");
    rig_tokens(&g, 2);
    ck_assert_int_eq(rig_run(&g, 0, &err), 0);
    const float want2[4] = {10, 20, -1, -1};
    const uint8_t mask2[4] = {1, 1, 0, 0};
    ck_assert_mem_eq(g.out[2].data, want2, 16);
    ck_assert_mem_eq(g.out[5].data, mask2, 4);
    rig_tokens(&g, 6); /* truncated */
    ck_assert_int_eq(rig_run(&g, 0, &err), 0);
    const float want6[4] = {10, 20, 30, 40};
    const uint8_t mask6[4] = {1, 1, 1, 1};
    ck_assert_mem_eq(g.out[2].data, want6, 16);
    ck_assert_mem_eq(g.out[5].data, mask6, 4);
    rig_tokens(&g, 0); /* empty */
    ck_assert_int_eq(rig_run(&g, 0, &err), 0);
    const float want0[4] = {-1, -1, -1, -1};
    const uint8_t mask0[4] = {0, 0, 0, 0};
    ck_assert_mem_eq(g.out[2].data, want0, 16);
    ck_assert_mem_eq(g.out[5].data, mask0, 4);
    rig_close(&g);

    /* an int64 mask, no cast; a mask used by a later op */
    rig_open(&g, "[{\"op\": \"pad_or_truncate\", \"feature\": \"tokens\", \"length\": 3, \"mask\": \"m\", "
                 "\"mask_dtype\": \"int64\"}, {\"op\": \"cast\", \"feature\": \"m\", \"dtype\": \"float32\"}]");
    rig_tokens(&g, 1);
    ck_assert_int_eq(rig_run(&g, 0, &err), 0);
    const int64_t t1[3] = {10, 0, 0};
    const float m1[3] = {1, 0, 0};
    ck_assert_mem_eq(g.out[2].data, t1, 24);
    ck_assert_mem_eq(g.out[5].data, m1, 12);
    rig_close(&g);
}
END_TEST

START_TEST(test_plugins)
{
    struct rig g;
    struct sl_error err = {0};
    rig_open(&g, "[{\"op\": \"plugin\", \"feature\": \"dense\", \"path\": \"" SL_SCALE_PLUGIN "\", \"args\": "
                 "{\"scale\": 2, \"offset\": 0.5}},"
                 " {\"op\": \"plugin\", \"feature\": \"label\", \"path\": \"" SL_SCALE_PLUGIN "\"}]");
    g.dense[0] = 1;
    g.dense[1] = -2;
    g.dense[2] = 0.25f;
    g.label = 9;
    ck_assert_int_eq(rig_run(&g, 0, &err), 0);
    const float want[3] = {2.5f, -3.5f, 1.0f};
    ck_assert_mem_eq(g.out[3].data, want, 12);
    ck_assert_int_eq(g.out[1].dtype, MAP_DT_FLOAT32);
    ck_assert(*(const float *)g.out[1].data == 9.0f);
    rig_close(&g);

    static const char *const bad[][2] = {
        {"oversize", "map[0] plugin: plugin " SL_TEST_PLUGIN
                     " returned 4108 bytes, its output is 12 bytes (more than the capacity it was given)"},
        {"short", "map[0] plugin: plugin " SL_TEST_PLUGIN " returned 11 bytes, its output is 12 bytes (short)"},
        {"error", "map[0] plugin: plugin " SL_TEST_PLUGIN ": mode error at element 33"},
    };
    for (size_t i = 0; i < 3; i++) {
        char text[512];
        snprintf(text, sizeof text,
                 "[{\"op\": \"plugin\", \"feature\": \"dense\", \"path\": \"%s\", \"args\": {\"mode\": \"%s\"}}]",
                 SL_TEST_PLUGIN, bad[i][0]);
        rig_open(&g, text);
        ck_assert_int_eq(rig_run(&g, 33, &err), SL_EINVAL);
        ck_assert_str_eq(err.msg, bad[i][1]);
        rig_close(&g);
    }
    /* a relative path is relative to the plan's base directory */
    const char *slash = strrchr(SL_TEST_PLUGIN, '/');
    char dir[1024], text[1200];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - SL_TEST_PLUGIN), SL_TEST_PLUGIN);
    snprintf(text, sizeof text, "[{\"op\": \"plugin\", \"feature\": \"dense\", \"path\": \"%s\"}]", slash + 1);
    struct map_pipeline *p = parse_ok(text);
    struct map_plan *pl;
    struct map_why w;
    setup_features();
    ck_assert_int_eq(map_plan_create(&pl, p, features, 5, dir, 0, &w), 0);
    map_plan_destroy(pl);
    ck_assert_int_eq(map_plan_create(&pl, p, features, 5, "/nonexistent", 0, &w), SL_EINVAL);
    ck_assert_str_eq(w.key, "map[0].path");
    map_pipeline_free(p);
}
END_TEST

/* Each op's stream is sl_rng_key(seed, epoch, element, op index): the test
 * plugin's "seed" mode writes the first word of its stream's state. */
START_TEST(test_stream_key)
{
    struct rig g;
    struct sl_error err = {0};
    rig_open(&g, "[{\"op\": \"cast\", \"feature\": \"label\", \"dtype\": \"int64\"},"
                 " {\"op\": \"plugin\", \"feature\": \"dense\", \"path\": \"" SL_TEST_PLUGIN "\", \"args\": "
                 "{\"mode\": \"seed\"}}]");
    for (uint64_t e = 0; e < 3; e++) {
        ck_assert_int_eq(rig_run(&g, 1000 + e, &err), 0);
        uint64_t got;
        memcpy(&got, g.out[3].data, 8);
        ck_assert_uint_eq(got, sl_rng_key(7, 1, 1000 + e, 1).s);
    }
    rig_close(&g);
}
END_TEST

START_TEST(test_alloc_failures)
{
    /* every allocation of parse, plan and runner failing in turn: SL_ENOMEM, nothing leaked */
    const char *text = "[{\"op\": \"pad_or_truncate\", \"feature\": \"tokens\", \"length\": 4, \"mask\": \"m\"},"
                       " {\"op\": \"one_hot\", \"feature\": \"label\", \"depth\": 8}]";
    json_t *v = json_loads(text, 0, NULL);
    setup_features();
    int failed = 0;
    for (long n = 1;; n++) {
        struct map_pipeline *p = NULL;
        struct map_plan *pl = NULL;
        struct map_runner *r = NULL;
        struct map_why w;
        struct sl_error err = {0};
        sl_alloc_fail_after(n);
        int rc = map_pipeline_parse(&p, v, &w);
        if (rc == 0)
            rc = map_plan_create(&pl, p, features, 5, NULL, 0, &w);
        if (rc == 0)
            rc = map_runner_create(&r, pl, &err);
        sl_alloc_fail_reset();
        map_runner_destroy(r);
        map_plan_destroy(pl);
        map_pipeline_free(p);
        if (rc == 0)
            break;
        ck_assert_int_eq(rc, SL_ENOMEM);
        failed++;
    }
    ck_assert_int_ge(failed, 4);
    json_decref(v);
}
END_TEST

Suite *sl_test_suite(void)
{
    Suite *s = suite_create("map");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_parse_errors);
    tcase_add_test(tc, test_to_json_defaults);
    tcase_add_test(tc, test_plan_errors);
    tcase_add_test(tc, test_image_specs);
    tcase_add_test(tc, test_cast);
    tcase_add_test(tc, test_normalize_half);
    tcase_add_test(tc, test_cast_half);
    tcase_add_test(tc, test_one_hot);
    tcase_add_test(tc, test_pad_or_truncate);
    tcase_add_test(tc, test_plugins);
    tcase_add_test(tc, test_stream_key);
    tcase_add_test(tc, test_alloc_failures);
    suite_add_tcase(s, tc);
    return s;
}
