#!/usr/bin/env python3
"""s3:// sources and listings (storage/sto_s3.c, issue #28) against a real
S3-compatible server started here, npm's s3rver 3.7.1 on loopback (path
style), read through tests/integration/sto_fetch.c:

- objects put with curl's own SigV4: whole reads and ranges exact, the size
  and the ETag (the MD5, quoted); a missing key's 404 and a bucket's,
  named with the s3:// name and S3's Code and Message; an unknown access key
  refused with the server's InvalidAccessKeyId; credentials from the
  environment, the shared credentials file and a profile, none at all
  (named where looked), a file over 64 KiB.
- s3rver 3.7.1 does not verify SigV4 signatures (only the access key id):
  a Python server here does (the canonical request rebuilt and signed with
  hmac/hashlib), so that a wrong secret is refused with its
  SignatureDoesNotMatch and a right one, with a session token, is accepted;
  it also checks x-amz-content-sha256 (S3 requires it; curl 7.88 does not
  send it itself).
- the name -> URL mapping (path style, virtual host, the region's AWS
  endpoint, the environment's endpoint, key encoding, bad buckets and keys).
- listings: several pages (2 keys a page, sto_fetch --list-page), sorted,
  '*' crossing no '/', dot files left out; hostile listings from the Python
  server: a key with '..', a control character, an endless listing bounded
  by --list-max, a DOCTYPE; each refused naming the pattern.
- end to end: a job whose files are s3://bkt/data/part-*.tfrecord, served
  by a feeder to the Python client, equals the same job over local files.

    python3 tests/integration/test_sto_s3.py BUILD_DIR [BIN_BUILD_DIR]

BIN_BUILD_DIR (a sanitizer build): its sto_fetch, sluice-feeder and
sluice-record, with BUILD_DIR's Python package; the end-to-end case is
skipped (said so) where BUILD_DIR has no Python package.

s3rver is required: scripts/deps.sh installs it into /opt/sluice-test/s3rver
($SLUICE_S3RVER names another s3rver); without it the test fails saying so.
"""
import hashlib
import hmac
import http.server
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bed  # noqa: E402
import harness  # noqa: E402
from harness import fail, ok  # noqa: E402

S3RVER = os.environ.get("SLUICE_S3RVER", "/opt/sluice-test/s3rver/node_modules/.bin/s3rver")
EMPTY = hashlib.sha256(b"").hexdigest()
CLIENT = bed.ELEMENTS_CLIENT


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc, what):
    for _ in range(1000):
        if proc is not None and proc.poll() is not None:
            fail("%s exited (%s) before listening" % (what, proc.returncode))
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    fail("%s: not listening on %d" % (what, port))


def env_with(**kw):
    e = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    e.update({k: v for k, v in kw.items() if v is not None})
    return e


def fetch(name, *args, env=None, timeout=60):
    """sto_fetch ARGS NAME -> (rc, stdout, stderr, the bytes read)."""
    out = os.path.join(bed.TMP, "fetch.out")
    if os.path.exists(out):
        os.unlink(out)
    try:
        p = subprocess.run([FETCH, "--out", out] + list(args) + [name], capture_output=True, text=True,
                           timeout=timeout, env=env if env is not None else ENV)
    except subprocess.TimeoutExpired:
        fail("sto_fetch %s %s: no exit in %d s (a hang)" % (" ".join(args), name, timeout))
    data = open(out, "rb").read() if os.path.exists(out) else b""
    return p.returncode, p.stdout, p.stderr, data


def expect(what, res, rc, text):
    if res[0] != rc or text not in res[2]:
        fail("%s: rc %d (want %d), stderr %r lacks %r" % (what, res[0], rc, res[2][-600:], text))
    ok("%s: %s" % (what, text))


def put(key, data, endpoint=None, bucket="bkt"):
    url = "%s/%s/%s" % (endpoint or ENDPOINT, bucket, urllib.parse.quote(key))
    p = subprocess.run(["curl", "-sS", "-f", "--aws-sigv4", "aws:amz:us-east-1:s3", "-u", "S3RVER:S3RVER", "-H",
                        "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-T", "-", url], input=data, capture_output=True)
    if p.returncode != 0:
        fail("put %s: curl %d: %s" % (key, p.returncode, p.stderr[-300:]))


def start_s3rver(data_dir, bucket="bkt"):
    """npm's s3rver on a free loopback port, a process of the harness's,
    serving data_dir with `bucket` made: (its endpoint URL, its process),
    once it listens (fails the test, saying how to install it, where it is
    missing). Its credentials: S3RVER / S3RVER."""
    if not os.access(S3RVER, os.X_OK):
        fail("no s3rver at %s: this test needs npm's s3rver 3.7.1 (scripts/deps.sh installs it: npm install "
             "--prefix /opt/sluice-test/s3rver s3rver@3.7.1; or set $SLUICE_S3RVER)" % S3RVER)
    port = free_port()
    # s3rver's continuation tokens use DES, which Node 17+'s OpenSSL 3 only has with the legacy provider
    s3env = dict(os.environ, NODE_OPTIONS="--openssl-legacy-provider")
    srv = harness.spawn([S3RVER, "-d", data_dir, "-a", "127.0.0.1", "-p", str(port), "--silent",
                         "--configure-bucket", bucket], log=data_dir + ".log", env=s3env)
    wait_port(port, srv, "s3rver")
    return "http://127.0.0.1:%d" % port, srv


# ---- a SigV4-checking, hostile S3 server (Python) ----

SECRET = "py-secret"
seen_headers = []


def sigv4_check(h):
    """None when the request's SigV4 signature is right for SECRET, else
    why not (S3's Code)."""
    auth = h.headers.get("Authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "AccessDenied"
    parts = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    key, date, region, service, term = parts["Credential"].split("/")
    signed = parts["SignedHeaders"].split(";")
    payload = h.headers.get("x-amz-content-sha256")
    if payload is None:
        return "MissingContentSha256"
    path, _, query = h.path.partition("?")
    cq = "&".join(sorted(query.split("&"))) if query else ""
    ch = "".join("%s:%s\n" % (n, " ".join(h.headers.get(n, "").split())) for n in signed)
    creq = "\n".join([h.command, path, cq, ch, ";".join(signed), payload])
    amzdate = h.headers["x-amz-date"]
    scope = "/".join([date, region, service, term])
    sts = "\n".join(["AWS4-HMAC-SHA256", amzdate, scope, hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + SECRET).encode()
    for m in (date, region, service, term):
        k = hmac.new(k, m.encode(), hashlib.sha256).digest()
    if hmac.new(k, sts.encode(), hashlib.sha256).hexdigest() != parts["Signature"]:
        return "SignatureDoesNotMatch"
    if "x-amz-content-sha256" not in signed or (h.headers.get("x-amz-security-token") and
                                                "x-amz-security-token" not in signed):
        return "HeadersNotSigned"
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, status, body, extra=()):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        seen_headers.append(dict(self.headers))
        why = sigv4_check(self)
        if why is not None:
            msg = {"SignatureDoesNotMatch": "The request signature we calculated does not match the signature "
                   "you provided."}.get(why, why)
            return self.send(403, ("<?xml version=\"1.0\"?><Error><Code>%s</Code><Message>%s</Message></Error>" %
                                   (why, msg)).encode())
        path, _, query = self.path.partition("?")
        q = urllib.parse.parse_qs(query)
        if "list-type" not in q:
            body = b"0123456789" * 10
            rng = self.headers.get("Range")
            if rng is None:
                return self.send(200, body, [("ETag", '"py-etag"')])
            a, b = (int(x) for x in rng[len("bytes="):].split("-"))
            return self.send(206, body[a:b + 1], [("ETag", '"py-etag"'), ("Content-Range", "bytes %d-%d/%d" %
                                                                            (a, b, len(body)))])
        prefix = q.get("prefix", [""])[0]
        mode = prefix.split("/")[0]
        token = int(q.get("continuation-token", ["0"])[0])
        keys = {"dotdot": ["a.bin", "../etc/passwd"], "ctl": ["a\tb"],
                "endless": ["%08d" % (2 * token), "%08d" % (2 * token + 1)], "good": ["b", "a"]}.get(mode, [])
        keys = [prefix + k for k in keys]
        if mode == "doctype":
            return self.send(200, b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><ListBucketResult/>')
        xml = "".join("<Contents><Key>%s</Key></Contents>" % k.replace("\t", "&#9;") for k in keys)
        more = "<IsTruncated>true</IsTruncated><NextContinuationToken>%d</NextContinuationToken>" % (token + 1) \
            if mode == "endless" else "<IsTruncated>false</IsTruncated>"
        self.send(200, ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/'
                        'doc/2006-03-01/">%s%s</ListBucketResult>' % (xml, more)).encode())


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global FETCH, ENV, ENDPOINT
    bed.setup(sys.argv[1], "s3")
    FETCH = os.path.join(bed.BUILD, "tests", "sto_fetch")
    if len(sys.argv) > 2:
        other = os.path.abspath(sys.argv[2])
        FETCH = os.path.join(other, "tests", "sto_fetch")
        bed.FEEDER = os.path.join(other, "feeder", "sluice-feeder")
        bed.RECORD = os.path.join(other, "tools", "sluice-record")
    ENDPOINT, srv = start_s3rver(os.path.join(bed.TMP, "s3data"))
    ENV = env_with(AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER")
    S3 = ["--s3-endpoint", ENDPOINT, "--s3-path-style"]

    # ---- objects ----
    blob = os.urandom(300000)
    put("obj/a b+c.bin", blob)
    put("obj/empty", b"")
    res = fetch("s3://bkt/obj/a b+c.bin", *S3, "--chunk", "7000")
    md5 = hashlib.md5(blob).hexdigest()
    if res[0] != 0 or res[3] != blob or 'open size=300000 etag="%s"' % md5 not in res[1]:
        fail("whole read: rc %d, %d bytes, %r %r" % (res[0], len(res[3]), res[1][:200], res[2][-300:]))
    ok("whole read of s3://bkt/obj/a b+c.bin: 300000 bytes exact, ETag the MD5")
    res = fetch("s3://bkt/obj/a b+c.bin", *S3, "--range", "5:10", "--range", "299990:100", "--range", "100000:65536")
    if res[0] != 0 or res[3] != blob[5:15] + blob[299990:] + blob[100000:165536]:
        fail("ranges: rc %d %r" % (res[0], res[2][-300:]))
    ok("ranges exact (one past the end: what there is)")
    res = fetch("s3://bkt/obj/empty", *S3)
    if res[0] != 0 or "open size=0 " not in res[1]:
        fail("empty: %r %r" % (res[1], res[2]))
    ok("an empty object: size 0")
    expect("a missing key", fetch("s3://bkt/obj/none", *S3), 3,
           "open(s3://bkt/obj/none): HTTP 404 Not Found: NoSuchKey: The specified key does not exist.")
    expect("a missing bucket", fetch("s3://nobkt/obj/none", *S3), 3,
           "open(s3://nobkt/obj/none): HTTP 404 Not Found: NoSuchBucket: The specified bucket does not exist")
    expect("an unknown access key", fetch("s3://bkt/obj/empty", *S3, env=env_with(AWS_ACCESS_KEY_ID="WRONG",
                                                                                  AWS_SECRET_ACCESS_KEY="x")), 3,
           "open(s3://bkt/obj/empty): HTTP 403 Forbidden: InvalidAccessKeyId: The AWS Access Key Id you provided "
           "does not exist in our records.")

    # ---- credentials ----
    cred = os.path.join(bed.TMP, "credentials")
    with open(cred, "w") as f:
        f.write("# comment\n[default]\naws_access_key_id = WRONG\naws_secret_access_key = x\n\n"
                "[ other ]\n  aws_access_key_id=S3RVER\naws_secret_access_key = S3RVER  \n")
    res = fetch("s3://bkt/obj/empty", *S3, env=env_with(AWS_SHARED_CREDENTIALS_FILE=cred, AWS_PROFILE="other"))
    if res[0] != 0:
        fail("credentials file, profile 'other': %r" % res[2])
    ok("credentials from $AWS_SHARED_CREDENTIALS_FILE's [other] ($AWS_PROFILE)")
    expect("the file's [default]", fetch("s3://bkt/obj/empty", *S3, env=env_with(AWS_SHARED_CREDENTIALS_FILE=cred)),
           3, "HTTP 403 Forbidden: InvalidAccessKeyId")
    home = os.path.join(bed.TMP, "home")
    os.makedirs(os.path.join(home, ".aws"))
    with open(os.path.join(home, ".aws", "credentials"), "w") as f:
        f.write("[default]\naws_access_key_id=S3RVER\naws_secret_access_key=S3RVER\n")
    if fetch("s3://bkt/obj/empty", *S3, env=env_with(HOME=home))[0] != 0:
        fail("~/.aws/credentials not read")
    ok("credentials from ~/.aws/credentials")
    expect("no credentials", fetch("s3://bkt/obj/empty", *S3, env=env_with(HOME=os.path.join(bed.TMP, "none"))), 3,
           "s3://bkt/obj/empty: no S3 credentials: $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY are not set, and "
           "%s/none/.aws/credentials has no aws_access_key_id and aws_secret_access_key in [default] "
           "(it cannot be opened)" % bed.TMP)
    with open(cred, "w") as f:
        f.write("[default]\n" + "#" * 70000 + "\n")
    expect("a credentials file over 64 KiB", fetch("s3://bkt/obj/empty", *S3,
                                                   env=env_with(AWS_SHARED_CREDENTIALS_FILE=cred)), 3,
           "the credentials file %s is over 65536 bytes" % cred)

    # ---- names and URLs (no request) ----
    rows = [
        (S3, {}, "s3://bkt/a b/c+d~e_f.bin", "url %s/bkt/a%%20b/c%%2Bd~e_f.bin" % ENDPOINT),
        (["--s3-endpoint", "https://minio.example:9000/"], {}, "s3://my.bkt-1/k/é",
         "url https://my.bkt-1.minio.example:9000/k/%C3%A9"),
        ([], {"AWS_REGION": "eu-west-3"}, "s3://bkt/k", "url https://bkt.s3.eu-west-3.amazonaws.com/k"),
        (["--s3-region", "ap-south-1"], {"AWS_REGION": "eu-west-3"}, "s3://bkt/k",
         "url https://bkt.s3.ap-south-1.amazonaws.com/k"),
        ([], {}, "s3://bkt/k", "url https://bkt.s3.us-east-1.amazonaws.com/k"),
        (["--s3-path-style"], {"AWS_ENDPOINT_URL": "http://a:1", "AWS_ENDPOINT_URL_S3": "http://b:2/p"},
         "s3://bkt/x/../y", "url http://b:2/p/bkt/x/../y"),
    ]
    for args, extra, name, want in rows:
        res = fetch(name, *args, "--url", env=env_with(**extra))
        if res[0] != 0 or res[1].strip() != want:
            fail("url of %s %s %s: %r %r, want %r" % (name, args, extra, res[1], res[2], want))
    ok("names -> URLs: path style, virtual host, region, $AWS_ENDPOINT_URL_S3, encoding (%d rows)" % len(rows))
    for name, text in [("s3://ab/k", "the bucket name 'ab' has 2 characters (S3's: 3 to 63)"),
                       ("s3://" + "b" * 64 + "/k", "has 64 characters"),
                       ("s3://Bkt/k", "the bucket name 'Bkt' is not S3's"),
                       ("s3://-bk/k", "the bucket name '-bk' is not S3's"),
                       ("s3://b..k/k", "the bucket name 'b..k' is not S3's"),
                       ("s3://bkt", "s3://bkt: no key after the bucket (s3://BUCKET/KEY)"),
                       ("s3://bkt/" + "k" * 1025, "the key has 1025 bytes (S3's at most 1024)")]:
        expect("refused: %s" % name[:40], fetch(name, *S3, "--url"), 3, text)

    # ---- listings ----
    keys = ["list/part-%d.bin" % i for i in (3, 0, 5, 1, 4, 2)] + ["list/.part-9.bin", "list/sub/part-7.bin",
                                                                      "list/other.bin"]
    for k in keys:
        put(k, k.encode())
    res = fetch("s3://bkt/list/part-*.bin", *S3, "--list", "--list-page", "2")
    want = "".join("name s3://bkt/list/part-%d.bin\n" % i for i in range(6)) + "listed 6\n"
    if res[0] != 0 or res[1] != want:
        fail("listing: %r %r" % (res[1], res[2]))
    ok("listing over 5 pages of 2 keys: part-0..5 sorted; sub/ and .part-9 left out")
    res = fetch("s3://bkt/list/*/part-[7-9].bin", *S3, "--list")
    if res[0] != 0 or res[1] != "name s3://bkt/list/sub/part-7.bin\nlisted 1\n":
        fail("listing */: %r %r" % (res[1], res[2]))
    ok("'*/part-[7-9].bin' matches one directory down")
    res = fetch("s3://bkt/list/none-*", *S3, "--list")
    if res[0] != 0 or res[1] != "listed 0\n":
        fail("empty listing: %r %r" % (res[1], res[2]))
    ok("a listing that matches nothing: 0 names")
    expect("a listing of a missing bucket", fetch("s3://nobkt/k*", *S3, "--list"), 3,
           "list(s3://nobkt/k*): HTTP 404: NoSuchBucket: The specified bucket does not exist")

    # ---- SigV4 checked, and hostile listings (the Python server) ----
    pyport = free_port()
    py = Server(("127.0.0.1", pyport), Handler)
    threading.Thread(target=py.serve_forever, daemon=True).start()
    PY = ["--s3-endpoint", "http://127.0.0.1:%d" % pyport, "--s3-path-style", "--retries", "0"]
    good = env_with(AWS_ACCESS_KEY_ID="AKID", AWS_SECRET_ACCESS_KEY=SECRET, AWS_SESSION_TOKEN="tok/en+=")
    res = fetch("s3://pyb/k/a b.bin", *PY, "--range", "3:4", env=good)
    if res[0] != 0 or res[3] != b"3456":
        fail("SigV4 with the right secret and a session token: %r" % res[2])
    hs = seen_headers[-1]
    if hs.get("x-amz-security-token") != "tok/en+=" or hs.get("x-amz-content-sha256") != EMPTY:
        fail("headers sent: %r" % hs)
    ok("SigV4 checked by a server: the right secret (and a session token, signed) accepted, a HEAD and a range")
    res = fetch("s3://pyb/good/*", *PY, "--list", env=good)
    if res[0] != 0 or res[1] != "name s3://pyb/good/a\nname s3://pyb/good/b\nlisted 2\n":
        fail("SigV4 listing: %r %r" % (res[1], res[2]))
    res = fetch("s3://pyb/k*", *PY, "--list", env=good)
    if res[0] != 0:
        fail("SigV4 listing (query signed): %r" % res[2])
    ok("SigV4 of a listing's query accepted")
    bad = env_with(AWS_ACCESS_KEY_ID="AKID", AWS_SECRET_ACCESS_KEY="wrong")
    expect("a wrong secret", fetch("s3://pyb/k/a.bin", *PY, env=bad), 3,
           "open(s3://pyb/k/a.bin): HTTP 403 Forbidden: SignatureDoesNotMatch: The request signature we calculated "
           "does not match the signature you provided.")
    expect("a wrong secret, listing", fetch("s3://pyb/k*", *PY, "--list", env=bad), 3,
           "list(s3://pyb/k*): HTTP 403: SignatureDoesNotMatch")
    expect("a listed key with '..'", fetch("s3://pyb/dotdot/k/*", *PY, "--list", env=good), 3,
           "list(s3://pyb/dotdot/k/*): the server listed the key 'dotdot/k/../etc/passwd', which holds '..'")
    expect("a listed key with a control character", fetch("s3://pyb/ctl/k/*", *PY, "--list", env=good), 3,
           "list(s3://pyb/ctl/k/*): the server listed a key with a control character (byte 7 of")
    t0 = time.monotonic()
    expect("an endless listing", fetch("s3://pyb/endless/k/*", *PY, "--list", "--list-max", "300", env=good), 3,
           "list(s3://pyb/endless/k/*): the listing passes 300 keys (the most listed)")
    if time.monotonic() - t0 > 20:
        fail("the endless listing took %.1f s" % (time.monotonic() - t0))
    expect("a DOCTYPE", fetch("s3://pyb/doctype/k/*", *PY, "--list", env=good), 3,
           "list(s3://pyb/doctype/k/*): the server's XML has a DOCTYPE (refused)")
    py.shutdown()

    # ---- end to end: a feeder reading s3://bkt/data/part-*.tfrecord ----
    if not os.path.isdir(os.path.join(bed.BUILD, "python", "sluice")):
        print("# skipped: the end-to-end case (%s has no Python package)" % bed.BUILD)
        srv.terminate()
        srv.wait(timeout=10)
        bed.finish()
        bed.cleanup()
        return
    parts = bed.gen("data", 400, 3, seed=28)
    for p in parts:
        with open(p, "rb") as f:
            put("data/" + os.path.basename(p), f.read())
    os.environ.update({"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER"})
    jk = dict(epochs=2, shuffle={"buffer": 64, "seed": 5})
    local_job, _ = bed.write_job("local", parts, **jk)
    s3_job, _ = bed.write_job("s3job", ["s3://bkt/data/part-*.tfrecord"], **jk)

    def run(tag, job, args=()):
        p, codes = bed.serve_client(tag, job, 1, CLIENT, lambda j: list(args))
        if p.returncode != 0 or codes != [0]:
            fail("%s: client %s, feeder %s: %s %s" % (tag, p.returncode, codes, p.stderr[-500:],
                                                     bed.read_log(tag, "feeder0")[-1500:]))
        return json.loads(p.stdout)
    want = run("local", local_job)
    got = run("s3job", s3_job, S3)
    if len(want) != 800 or got != want:
        fail("s3 job: %d elements, the local run %d: they differ" % (len(got), len(want)))
    ok("a job of s3://bkt/data/part-*.tfrecord (3 shards, 2 epochs): the local run's 800 elements, in order")
    none_job, _ = bed.write_job("none", ["s3://bkt/data/nothing-*.tfrecord"])
    p = subprocess.run([bed.FEEDER, "plan", "--job", none_job, "--workers", "1", "--replicas", "1"] + S3,
                       capture_output=True, text=True, timeout=60)
    want_msg = "files: pattern 's3://bkt/data/nothing-*.tfrecord' matches no file"
    if p.returncode == 0 or want_msg not in p.stdout + p.stderr:
        fail("no match: rc %d %r" % (p.returncode, (p.stdout + p.stderr)[-400:]))
    ok(want_msg)
    srv.terminate()
    srv.wait(timeout=10)
    bed.finish()
    bed.cleanup()


if __name__ == "__main__":
    main()
