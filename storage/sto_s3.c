/* sto_s3: s3://bucket/key objects on an S3-compatible store, read through
 * sto_http.c's engine, and the listing of an s3:// pattern (sto_list).
 *
 * A name maps to an HTTP(S) URL at the configured endpoint: path style
 * (ENDPOINT/BUCKET/KEY) or virtual host (SCHEME://BUCKET.HOST[:PORT]/KEY),
 * the key percent-encoded as S3 wants (RFC 3986's unreserved characters and
 * '/' kept, every other byte %XX). Requests are signed by libcurl itself
 * (CURLOPT_AWS_SIGV4); this file holds no cryptography. curl 7.88 does not
 * send x-amz-content-sha256, which S3 requires with SigV4: it is sent here
 * as the SHA-256 of the empty body (every request is a GET or HEAD), a
 * constant, so the value agrees whether curl hashes the payload itself or
 * takes the header's.
 *
 * Credentials are read at each open and listing: $AWS_ACCESS_KEY_ID and
 * $AWS_SECRET_ACCESS_KEY (and $AWS_SESSION_TOKEN), else the profile
 * ($AWS_PROFILE, else "default") of $AWS_SHARED_CREDENTIALS_FILE or
 * ~/.aws/credentials, read whole (at most CRED_FILE_MAX bytes).
 *
 * Listings (ListObjectsV2) are parsed with libexpat, page by page (each
 * page at most PAGE_BYTES_MAX), bounded in keys and in name bytes.
 */
#include <ctype.h>
#include <errno.h>
#include <expat.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sl_alloc.h"
#include "sto_impl.h"

#define BUCKET_MIN 3
#define BUCKET_MAX 63
#define KEY_MAX 1024
#define CRED_FILE_MAX (64 * 1024)
#define CRED_MAX 512
#define PAGE_BYTES_MAX ((size_t)16 << 20)
#define ERROR_BODY_MAX ((size_t)64 << 10)
#define LIST_KEYS_MAX ((size_t)1000000)
#define LIST_NAME_BYTES_MAX ((size_t)256 << 20)
#define LIST_PAGES_MAX 100000
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static int list_page_keys = 1000;
static size_t list_keys_max = LIST_KEYS_MAX;

void sto__s3_list_limits(int page_keys, size_t max_keys)
{
    list_page_keys = page_keys >= 1 && page_keys <= 1000 ? page_keys : 1000;
    list_keys_max = max_keys >= 1 && max_keys <= LIST_KEYS_MAX ? max_keys : LIST_KEYS_MAX;
}

/* ---- names ---- */

int sto__s3_split(const char *name, char *bucket, size_t bucket_cap, const char **key, struct sl_error *err)
{
    const char *b = name + strlen("s3://");
    const char *slash = strchr(b, '/');
    size_t n = slash != NULL ? (size_t)(slash - b) : strlen(b);
    if (n < BUCKET_MIN || n > BUCKET_MAX || n >= bucket_cap)
        return sl_error_set(err, SL_EINVAL, "%s: the bucket name '%.*s' has %zu characters (S3's: %d to %d)", name,
                            (int)(n > 80 ? 80 : n), b, n, BUCKET_MIN, BUCKET_MAX);
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
        int edge = i == 0 || i == n - 1;
        if (!ok || (edge && (c == '-' || c == '.')) || (c == '.' && b[i + 1] == '.'))
            return sl_error_set(err, SL_EINVAL,
                                "%s: the bucket name '%.*s' is not S3's (lower-case letters, digits, '-' and '.', "
                                "starting and ending with a letter or digit)",
                                name, (int)n, b);
    }
    memcpy(bucket, b, n);
    bucket[n] = '\0';
    if (slash == NULL || slash[1] == '\0')
        return sl_error_set(err, SL_EINVAL, "%s: no key after the bucket (s3://BUCKET/KEY)", name);
    *key = slash + 1;
    if (strlen(*key) > KEY_MAX)
        return sl_error_set(err, SL_EINVAL, "%.200s...: the key has %zu bytes (S3's at most %d)", name, strlen(*key),
                            KEY_MAX);
    return 0;
}

/* Append s to out[*len..cap), percent-encoding all but RFC 3986's
 * unreserved characters (and '/' when keep_slash); -1 when it does not fit. */
static int encode(char *out, size_t cap, size_t *len, const char *s, int keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        int keep = isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/');
        if (*len + (keep ? 1 : 3) >= cap)
            return -1;
        if (keep) {
            out[(*len)++] = (char)c;
        } else {
            out[(*len)++] = '%';
            out[(*len)++] = hex[c >> 4];
            out[(*len)++] = hex[c & 15];
        }
    }
    out[*len] = '\0';
    return 0;
}

static int append(char *out, size_t cap, size_t *len, const char *s)
{
    size_t n = strlen(s);
    if (*len + n >= cap)
        return -1;
    memcpy(out + *len, s, n + 1);
    *len += n;
    return 0;
}

/* The endpoint's scheme ("http"/"https"), host[:port] and path (no trailing
 * '/') from the configuration or the environment. */
struct endpoint {
    char scheme[8];
    char hostport[300];
    char path[512];
    char region[64];
};

static int endpoint_of(const char *name, struct endpoint *e, struct sl_error *err)
{
    const struct sto_config *c = sto__config();
    const char *region = c->s3_region;
    if (region == NULL || region[0] == '\0')
        region = getenv("AWS_REGION");
    if (region == NULL || region[0] == '\0')
        region = getenv("AWS_DEFAULT_REGION");
    if (region == NULL || region[0] == '\0')
        region = "us-east-1";
    if (strlen(region) >= sizeof(e->region) || strpbrk(region, ":/ \t\r\n") != NULL)
        return sl_error_set(err, SL_EINVAL, "%s: the S3 region '%.80s' is not usable", name, region);
    snprintf(e->region, sizeof(e->region), "%s", region);
    const char *url = c->s3_endpoint;
    if (url == NULL || url[0] == '\0')
        url = getenv("AWS_ENDPOINT_URL_S3");
    if (url == NULL || url[0] == '\0')
        url = getenv("AWS_ENDPOINT_URL");
    char aws[128];
    if (url == NULL || url[0] == '\0') {
        snprintf(aws, sizeof(aws), "https://s3.%s.amazonaws.com", e->region);
        url = aws;
    }
    const char *rest;
    if (strncmp(url, "http://", 7) == 0) {
        snprintf(e->scheme, sizeof(e->scheme), "http");
        rest = url + 7;
    } else if (strncmp(url, "https://", 8) == 0) {
        snprintf(e->scheme, sizeof(e->scheme), "https");
        rest = url + 8;
    } else {
        return sl_error_set(err, SL_EINVAL, "%s: the S3 endpoint '%.200s' is not an http:// or https:// URL", name,
                            url);
    }
    size_t h = strcspn(rest, "/?#");
    size_t p = strcspn(rest + h, "?#");
    while (p > 0 && rest[h + p - 1] == '/')
        p--;
    if (h == 0 || h >= sizeof(e->hostport) || p >= sizeof(e->path) || rest[h + strcspn(rest + h, "?#")] != '\0' ||
        memchr(rest, '@', h) != NULL)
        return sl_error_set(err, SL_EINVAL, "%s: the S3 endpoint '%.200s' is not usable (SCHEME://HOST[:PORT][/PATH])",
                            name, url);
    memcpy(e->hostport, rest, h);
    e->hostport[h] = '\0';
    memcpy(e->path, rest + h, p);
    e->path[p] = '\0';
    return 0;
}

/* The bucket's base URL, "SCHEME://HOST/BUCKET" (path style) or
 * "SCHEME://BUCKET.HOST" (virtual host), without a trailing '/'. */
static int bucket_url(const struct endpoint *e, const char *bucket, char *out, size_t cap)
{
    int n = sto__config()->s3_path_style ? snprintf(out, cap, "%s://%s%s/%s", e->scheme, e->hostport, e->path, bucket)
                                         : snprintf(out, cap, "%s://%s.%s%s", e->scheme, bucket, e->hostport, e->path);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int sto__s3_url(const char *name, char *out, size_t cap, struct sl_error *err)
{
    char bucket[BUCKET_MAX + 1];
    const char *key;
    struct endpoint e;
    size_t len;
    int rc = sto__s3_split(name, bucket, sizeof(bucket), &key, err);
    if (rc == 0)
        rc = endpoint_of(name, &e, err);
    if (rc != 0)
        return rc;
    if (bucket_url(&e, bucket, out, cap) != 0 || (len = strlen(out), append(out, cap, &len, "/")) != 0 ||
        encode(out, cap, &len, key, 1) != 0)
        return sl_error_set(err, SL_EINVAL, "%.200s: its URL is over %zu bytes", name, cap - 1);
    return 0;
}

/* ---- credentials ---- */

struct creds {
    char key[CRED_MAX], secret[CRED_MAX], token[4 * CRED_MAX];
    char userpwd[2 * CRED_MAX + 2];
    char token_header[4 * CRED_MAX + 32];
    char sigv4[96];
    struct sto_http_auth auth;
};

static void trim(char **s, char **e)
{
    while (*s < *e && isspace((unsigned char)**s))
        (*s)++;
    while (*e > *s && isspace((unsigned char)(*e)[-1]))
        (*e)--;
}

/* The profile's keys from an INI file already read into buf. */
static void ini_profile(char *buf, const char *profile, struct creds *c)
{
    int in = 0;
    for (char *line = buf; line != NULL && *line != '\0';) {
        char *nl = strchr(line, '\n');
        char *end = nl != NULL ? nl : line + strlen(line);
        char *s = line;
        trim(&s, &end);
        line = nl != NULL ? nl + 1 : NULL;
        if (s == end || *s == '#' || *s == ';')
            continue;
        if (*s == '[') {
            char *r = memchr(s, ']', (size_t)(end - s));
            char *n = s + 1;
            if (r == NULL)
                continue;
            trim(&n, &r);
            in = (size_t)(r - n) == strlen(profile) && strncmp(n, profile, (size_t)(r - n)) == 0;
            continue;
        }
        char *eq = memchr(s, '=', (size_t)(end - s));
        if (!in || eq == NULL)
            continue;
        char *ks = s, *ke = eq, *vs = eq + 1, *ve = end;
        trim(&ks, &ke);
        trim(&vs, &ve);
        size_t kn = (size_t)(ke - ks), vn = (size_t)(ve - vs);
        char *dst = NULL;
        size_t cap = 0;
        if (kn == 17 && strncmp(ks, "aws_access_key_id", kn) == 0) {
            dst = c->key;
            cap = sizeof(c->key);
        } else if (kn == 21 && strncmp(ks, "aws_secret_access_key", kn) == 0) {
            dst = c->secret;
            cap = sizeof(c->secret);
        } else if (kn == 17 && strncmp(ks, "aws_session_token", kn) == 0) {
            dst = c->token;
            cap = sizeof(c->token);
        }
        if (dst != NULL && vn < cap) {
            memcpy(dst, vs, vn);
            dst[vn] = '\0';
        }
    }
}

/* Fill c, or an error naming the places looked at. */
static int creds_of(const char *name, const struct endpoint *e, struct creds *c, struct sl_error *err)
{
    memset(c, 0, sizeof(*c));
    const char *k = getenv("AWS_ACCESS_KEY_ID"), *s = getenv("AWS_SECRET_ACCESS_KEY");
    char path[1024];
    const char *file = getenv("AWS_SHARED_CREDENTIALS_FILE"), *home = getenv("HOME");
    const char *profile = getenv("AWS_PROFILE");
    if (profile == NULL || profile[0] == '\0')
        profile = "default";
    if (file == NULL || file[0] == '\0') {
        snprintf(path, sizeof(path), "%s/.aws/credentials", home != NULL ? home : "");
        file = path;
    }
    if (k != NULL && k[0] != '\0' && s != NULL && s[0] != '\0') {
        const char *t = getenv("AWS_SESSION_TOKEN");
        if (strlen(k) >= sizeof(c->key) || strlen(s) >= sizeof(c->secret) ||
            (t != NULL && strlen(t) >= sizeof(c->token)))
            return sl_error_set(err, SL_EINVAL,
                                "%s: $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY or $AWS_SESSION_TOKEN "
                                "is too long",
                                name);
        snprintf(c->key, sizeof(c->key), "%s", k);
        snprintf(c->secret, sizeof(c->secret), "%s", s);
        snprintf(c->token, sizeof(c->token), "%s", t != NULL ? t : "");
    } else {
        FILE *f = fopen(file, "rb");
        int opened = f != NULL;
        if (opened) {
            char *buf = sl_malloc(CRED_FILE_MAX + 2);
            size_t n = buf != NULL ? fread(buf, 1, CRED_FILE_MAX + 1, f) : 0;
            int bad = ferror(f);
            fclose(f);
            if (buf == NULL)
                return sl_error_set(err, SL_ENOMEM, "%s: out of memory", name);
            if (bad || n > CRED_FILE_MAX) {
                sl_free(buf);
                return sl_error_set(err, SL_EINVAL, "%s: the credentials file %s %s", name, file,
                                    bad ? "could not be read" : "is over 65536 bytes");
            }
            buf[n] = '\0';
            ini_profile(buf, profile, c);
            sl_free(buf);
        }
        if (c->key[0] == '\0' || c->secret[0] == '\0')
            return sl_error_set(err, SL_EINVAL,
                                "%s: no S3 credentials: $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY are not set, "
                                "and %s has no aws_access_key_id and aws_secret_access_key in [%s]%s",
                                name, file, profile, opened ? "" : " (it cannot be opened)");
    }
    if (strchr(c->key, ':') != NULL || strpbrk(c->key, "\r\n") != NULL || strpbrk(c->secret, "\r\n") != NULL ||
        strpbrk(c->token, "\r\n") != NULL)
        return sl_error_set(err, SL_EINVAL, "%s: the S3 access key holds ':' or a line break", name);
    snprintf(c->userpwd, sizeof(c->userpwd), "%s:%s", c->key, c->secret);
    snprintf(c->sigv4, sizeof(c->sigv4), "aws:amz:%s:s3", e->region);
    c->auth.aws_sigv4 = c->sigv4;
    c->auth.userpwd = c->userpwd;
    size_t h = 0;
    c->auth.headers[h++] = "x-amz-content-sha256: " EMPTY_SHA256;
    if (c->token[0] != '\0') {
        snprintf(c->token_header, sizeof(c->token_header), "x-amz-security-token: %s", c->token);
        c->auth.headers[h++] = c->token_header;
    }
    c->auth.headers[h] = NULL;
    return 0;
}

/* ---- an S3 error's XML, and a listing page's ---- */

enum field { F_NONE = 0, F_KEY, F_TRUNC, F_TOKEN, F_CODE, F_MESSAGE };

struct page {
    XML_Parser p;
    const char *pattern;  /* for errors */
    const char *key_glob; /* the pattern's key part, fnmatch'ed */
    const char *bucket;
    enum field in;
    int depth, in_contents;
    char text[4 * KEY_MAX];
    size_t text_len;
    int text_over;
    int truncated;
    char token[4 * KEY_MAX];
    char code[64], message[256];
    /* the result, over all pages */
    char **names;
    size_t n, cap, name_bytes, seen;
    struct sl_error *err;
    int rc;
};

static void page_fail(struct page *g, int code, const char *fmt, ...) SL_PRINTF(3, 4);
static void page_fail(struct page *g, int code, const char *fmt, ...)
{
    if (g->rc == 0) {
        char msg[SL_ERROR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        g->rc = sl_error_set(g->err, code, "list(%s): %s", g->pattern, msg);
    }
    XML_StopParser(g->p, XML_FALSE);
}

static const char *local_name(const char *n)
{
    const char *sep = strrchr(n, ' '); /* no namespace processing: the name as written */
    return sep != NULL ? sep + 1 : n;
}

static void on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    struct page *g = ud;
    (void)attrs;
    const char *n = local_name(name);
    g->depth++;
    g->in = F_NONE;
    g->text_len = 0;
    g->text_over = 0;
    if (g->depth > 8) {
        page_fail(g, SL_EPROTO, "the server's XML nests deeper than 8");
        return;
    }
    if (strcmp(n, "Contents") == 0)
        g->in_contents = 1;
    else if (strcmp(n, "Key") == 0 && g->in_contents)
        g->in = F_KEY;
    else if (strcmp(n, "IsTruncated") == 0 && g->depth == 2)
        g->in = F_TRUNC;
    else if (strcmp(n, "NextContinuationToken") == 0 && g->depth == 2)
        g->in = F_TOKEN;
    else if (strcmp(n, "Code") == 0 && g->depth == 2)
        g->in = F_CODE;
    else if (strcmp(n, "Message") == 0 && g->depth == 2)
        g->in = F_MESSAGE;
}

static void on_text(void *ud, const XML_Char *s, int len)
{
    struct page *g = ud;
    if (g->in == F_NONE)
        return;
    if ((size_t)len >= sizeof(g->text) - g->text_len) {
        g->text_over = 1;
        return;
    }
    memcpy(g->text + g->text_len, s, (size_t)len);
    g->text_len += (size_t)len;
    g->text[g->text_len] = '\0';
}

/* A listed key: checked, matched, kept. */
static void on_key(struct page *g)
{
    const char *k = g->text;
    if (g->text_over || g->text_len > KEY_MAX) {
        page_fail(g, SL_EPROTO, "the server listed a key over %d bytes ('%.80s...')", KEY_MAX, k);
        return;
    }
    for (size_t i = 0; i < g->text_len; i++)
        if ((unsigned char)k[i] < 0x20 || k[i] == 0x7f) {
            page_fail(g, SL_EPROTO, "the server listed a key with a control character (byte %zu of '%.200s')", i, k);
            return;
        }
    for (const char *seg = k; seg != NULL; seg = strchr(seg, '/') != NULL ? strchr(seg, '/') + 1 : NULL)
        if (strncmp(seg, "..", 2) == 0 && (seg[2] == '/' || seg[2] == '\0')) {
            page_fail(g, SL_EPROTO, "the server listed the key '%.200s', which holds '..'", k);
            return;
        }
    if (++g->seen > list_keys_max) {
        page_fail(g, SL_EPROTO, "the listing passes %zu keys (the most listed)", list_keys_max);
        return;
    }
    if (g->text_len == 0 || k[g->text_len - 1] == '/' || fnmatch(g->key_glob, k, FNM_PATHNAME | FNM_PERIOD) != 0)
        return;
    size_t need = strlen("s3://") + strlen(g->bucket) + 1 + g->text_len + 1;
    if (g->name_bytes + need > LIST_NAME_BYTES_MAX) {
        page_fail(g, SL_EPROTO, "the listing's names pass %zu bytes", LIST_NAME_BYTES_MAX);
        return;
    }
    if (g->n == g->cap) {
        size_t cap = g->cap > 0 ? g->cap * 2 : 64;
        char **a = sl_realloc(g->names, cap * sizeof(*a));
        if (a == NULL) {
            page_fail(g, SL_ENOMEM, "out of memory");
            return;
        }
        g->names = a;
        g->cap = cap;
    }
    char *s = sl_malloc(need);
    if (s == NULL) {
        page_fail(g, SL_ENOMEM, "out of memory");
        return;
    }
    snprintf(s, need, "s3://%s/%s", g->bucket, k);
    g->names[g->n++] = s;
    g->name_bytes += need;
}

static void on_end(void *ud, const XML_Char *name)
{
    struct page *g = ud;
    const char *n = local_name(name);
    if (g->in != F_NONE && g->text_over && g->in != F_KEY) {
        page_fail(g, SL_EPROTO, "the server's <%s> is over %zu bytes", n, sizeof(g->text) - 1);
        return;
    }
    switch (g->in) {
    case F_KEY: on_key(g); break;
    case F_TRUNC: g->truncated = strcmp(g->text, "true") == 0; break;
    case F_TOKEN: snprintf(g->token, sizeof(g->token), "%s", g->text); break;
    case F_CODE: snprintf(g->code, sizeof(g->code), "%.63s", g->text); break;
    case F_MESSAGE: snprintf(g->message, sizeof(g->message), "%.255s", g->text); break;
    case F_NONE:
    default: break;
    }
    if (strcmp(n, "Contents") == 0)
        g->in_contents = 0;
    g->in = F_NONE;
    g->depth--;
}

static void on_doctype(void *ud, const XML_Char *name, const XML_Char *sysid, const XML_Char *pubid, int internal)
{
    (void)name;
    (void)sysid;
    (void)pubid;
    (void)internal;
    page_fail(ud, SL_EPROTO, "the server's XML has a DOCTYPE (refused)");
}

/* Parse one body into g (its per-page fields reset); 0, or g->rc. */
static int parse_page(struct page *g, const char *body, size_t len)
{
    g->p = XML_ParserCreate(NULL);
    if (g->p == NULL)
        return sl_error_set(g->err, SL_ENOMEM, "list(%s): out of memory", g->pattern);
    g->depth = g->in_contents = g->truncated = 0;
    g->in = F_NONE;
    g->token[0] = g->code[0] = g->message[0] = '\0';
    XML_SetUserData(g->p, g);
    XML_SetElementHandler(g->p, on_start, on_end);
    XML_SetCharacterDataHandler(g->p, on_text);
    XML_SetStartDoctypeDeclHandler(g->p, on_doctype);
    if (XML_Parse(g->p, body, (int)len, XML_TRUE) == XML_STATUS_ERROR && g->rc == 0)
        g->rc = sl_error_set(g->err, SL_EPROTO, "list(%s): the server's XML does not parse (line %lu: %s)", g->pattern,
                             (unsigned long)XML_GetCurrentLineNumber(g->p), XML_ErrorString(XML_GetErrorCode(g->p)));
    XML_ParserFree(g->p);
    g->p = NULL;
    return g->rc;
}

/* " (Code: Message)" from an S3 error body, or "". */
static void error_detail(const char *body, size_t len, char *out, size_t cap)
{
    struct sl_error e = {0};
    struct page g;
    memset(&g, 0, sizeof(g));
    g.pattern = "";
    g.err = &e;
    out[0] = '\0';
    if (len > 0 && parse_page(&g, body, len) == 0 && g.code[0] != '\0')
        snprintf(out, cap, ": %s: %s", g.code, g.message);
}

/* ---- open ---- */

static int s3_open_as(struct sto_src **out, const char *name, const struct sto_known *known, struct sl_error *err)
{
    *out = NULL;
    char url[4 * KEY_MAX + 512];
    struct endpoint e;
    struct creds *c = sl_malloc(sizeof(*c));
    if (c == NULL)
        return sl_error_set(err, SL_ENOMEM, "open(%s): out of memory", name);
    int rc = sto__s3_url(name, url, sizeof(url), err);
    if (rc == 0)
        rc = endpoint_of(name, &e, err);
    if (rc == 0)
        rc = creds_of(name, &e, c, err);
    if (rc != 0) {
        sl_free(c);
        return rc;
    }
    long status = 0;
    rc = sto__http_open(out, name, url, &c->auth, known, &sto_s3_ops, STO_S3, &status, err);
    if (rc != 0 && status >= 400 && status <= 499) {
        /* a HEAD's error has no body: ask again with a GET for the server's words */
        char *body = NULL, msg[SL_ERROR_MSG_MAX], detail[400];
        size_t len = 0;
        long st = 0;
        struct sl_error e2 = {0};
        snprintf(msg, sizeof(msg), "%s", err->msg);
        if (sto__http_get(name, url, &c->auth, ERROR_BODY_MAX, &body, &len, &st, &e2) == 0 && st == status) {
            error_detail(body, len, detail, sizeof(detail));
            sl_error_set(err, rc, "%s%s", msg, detail);
        }
        free(body);
    }
    sl_free(c);
    return rc;
}

static int s3_open(struct sto_src **out, const char *name, struct sl_error *err)
{
    return s3_open_as(out, name, NULL, err);
}

static int s3_open_known(struct sto_src **out, const char *name, const struct sto_known *k, struct sl_error *err)
{
    return s3_open_as(out, name, k, err);
}

const struct sto_ops sto_s3_ops = {"s3", s3_open, s3_open_known, sto__http_read_at, sto__http_close};

/* ---- listing ---- */

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sl_free(names[i]);
    sl_free(names);
}

/* A ListObjectsV2 page's URL: the query's parameters in SigV4's canonical
 * order (curl 7.88 signs the query as it is sent), each value encoded;
 * token NULL for the first page. -1: over cap. */
static int page_url(char *url, size_t cap, const char *base, const char *token, const char *prefix)
{
    size_t len = 0;
    char mk[32];
    snprintf(mk, sizeof(mk), "&max-keys=%d&prefix=", list_page_keys);
    int bad = append(url, cap, &len, base) != 0 || append(url, cap, &len, "/?") != 0;
    if (!bad && token != NULL)
        bad = append(url, cap, &len, "continuation-token=") != 0 || encode(url, cap, &len, token, 0) != 0 ||
              append(url, cap, &len, "&") != 0;
    bad = bad || append(url, cap, &len, "list-type=2") != 0 || append(url, cap, &len, mk) != 0 ||
          encode(url, cap, &len, prefix, 0) != 0;
    return bad ? -1 : 0;
}

int sto_list(const char *pattern, char ***names, size_t *n, struct sl_error *err)
{
    *names = NULL;
    *n = 0;
    if (sto_kind_of(pattern) != STO_S3)
        return sl_error_set(err, SL_EINVAL, "list(%s): only s3:// names are listed", pattern);
    char bucket[BUCKET_MAX + 1], base[1024], url[4 * KEY_MAX + 2048];
    const char *key;
    struct endpoint e;
    struct creds *c = sl_malloc(sizeof(*c));
    struct page *g = sl_calloc(1, sizeof(*g));
    if (c == NULL || g == NULL) {
        sl_free(c);
        sl_free(g);
        return sl_error_set(err, SL_ENOMEM, "list(%s): out of memory", pattern);
    }
    int rc = sto__s3_split(pattern, bucket, sizeof(bucket), &key, err);
    if (rc == 0)
        rc = endpoint_of(pattern, &e, err);
    if (rc == 0)
        rc = creds_of(pattern, &e, c, err);
    if (rc == 0 && bucket_url(&e, bucket, base, sizeof(base)) != 0)
        rc = sl_error_set(err, SL_EINVAL, "list(%s): the endpoint's URL is too long", pattern);
    char prefix[KEY_MAX + 1];
    size_t plen = strcspn(key != NULL && rc == 0 ? key : "", "*?[\\");
    if (rc == 0) {
        memcpy(prefix, key, plen);
        prefix[plen] = '\0';
    }
    g->pattern = pattern;
    g->key_glob = key;
    g->bucket = bucket;
    g->err = err;
    for (int page = 0; rc == 0; page++) {
        if (page >= LIST_PAGES_MAX) {
            rc = sl_error_set(err, SL_EPROTO, "list(%s): more than %d pages", pattern, LIST_PAGES_MAX);
            break;
        }
        if (page_url(url, sizeof(url), base, page > 0 ? g->token : NULL, prefix) != 0) {
            rc = sl_error_set(err, SL_EINVAL, "list(%s): a listing URL over %zu bytes", pattern, sizeof(url));
            break;
        }
        char *body = NULL;
        size_t blen = 0;
        long status = 0;
        rc = sto__http_get(pattern, url, &c->auth, PAGE_BYTES_MAX, &body, &blen, &status, err);
        if (rc != 0) {
            char msg[SL_ERROR_MSG_MAX]; /* "PATTERN: cause" -> "list(PATTERN): cause" */
            size_t skip = strncmp(err->msg, pattern, strlen(pattern)) == 0 ? strlen(pattern) : 0;
            snprintf(msg, sizeof(msg), "%s", err->msg + skip + (skip > 0 && err->msg[skip] == ':' ? 2 : 0));
            sl_error_set(err, rc, "list(%s): %s", pattern, msg);
            break;
        }
        if (status != 200) {
            char detail[400];
            error_detail(body, blen, detail, sizeof(detail));
            rc = sl_error_set(err, SL_EIO, "list(%s): HTTP %ld%s", pattern, status, detail);
            free(body);
            break;
        }
        rc = parse_page(g, body, blen);
        free(body);
        if (rc == 0 && g->truncated && g->token[0] == '\0')
            rc = sl_error_set(err, SL_EPROTO, "list(%s): a truncated page without a NextContinuationToken", pattern);
        if (rc != 0 || !g->truncated)
            break;
    }
    if (rc == 0) {
        if (g->n > 1)
            qsort(g->names, g->n, sizeof(*g->names), cmp_name);
        *names = g->names;
        *n = g->n;
    } else {
        free_names(g->names, g->n);
    }
    sl_free(g);
    sl_free(c);
    return rc;
}

void sto_list_free(char **names, size_t n)
{
    free_names(names, n);
}
