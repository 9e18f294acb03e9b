"""The S3 gateway under concurrency and failure, as boto3 sees it. Run by
`cargo test` (s3.rs), one scenario per invocation (argv[1]):

  race      two gateways, many writers overwriting one key: every read
            is one whole version, and HEAD and the listing agree with it
  killed    a PUT whose gateway is killed mid-body leaves nothing visible
  doomed    a PUT whose bucket is deleted mid-body is refused (the test
            then checks its data is gone)
  acked     writes for S3_SECONDS (while the test kills and restarts an
            OSD), then every acknowledged object reads back whole; the
            acknowledged keys are kept in the file S3_STATE
  reread    every object `acked` kept reads back whole

Env: S3_ENDPOINTS (comma-separated), S3_ACCESS_KEY, S3_SECRET_KEY,
S3_BUCKET; `killed` also S3_KILL_PID (the gateway to kill).
"""

import hashlib
import http.client
import json
import os
import signal
import sys
import threading
import time
import urllib.parse

import boto3
import botocore
from botocore.config import Config

ENDPOINTS = os.environ["S3_ENDPOINTS"].split(",")
BUCKET = os.environ["S3_BUCKET"]


def client(endpoint, retries=1):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=os.environ["S3_ACCESS_KEY"],
        aws_secret_access_key=os.environ["S3_SECRET_KEY"],
        region_name="default",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": retries},
                      connect_timeout=5, read_timeout=60),
    )


def payload(writer, i):
    # Sizes from inline (< 16 KiB) to striped over two data objects.
    size = [100, 20000, 300000, 5 * 1024 * 1024][(writer + i) % 4]
    head = ("w%d-i%d|" % (writer, i)).encode()
    return (head * (size // len(head) + 1))[:size]


# Every payload any writer of `race` sends.
ANY = {hashlib.md5(payload(w, i)).hexdigest() for w in range(8) for i in range(12)}


def make_bucket(c):
    try:
        c.create_bucket(Bucket=BUCKET)
    except botocore.exceptions.ClientError as e:
        assert e.response["Error"]["Code"] == "BucketAlreadyOwnedByYou", e.response


def race():
    clients = [client(e) for e in ENDPOINTS]
    make_bucket(clients[0])
    written = {}
    lock = threading.Lock()
    errors = []

    def writer(w):
        for i in range(12):
            body = payload(w, i)
            try:
                clients[(w + i) % len(clients)].put_object(Bucket=BUCKET, Key="race", Body=body)
            except Exception as e:  # a refused write is allowed; a torn one is not
                errors.append(repr(e))
                continue
            with lock:
                written[hashlib.md5(body).hexdigest()] = len(body)
            got = clients[i % len(clients)].get_object(Bucket=BUCKET, Key="race")["Body"].read()
            # Whatever is read is one whole version some writer sent.
            assert hashlib.md5(got).hexdigest() in ANY, "a torn read (%d bytes)" % len(got)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert written, "no write went through: %s" % errors[:3]
    final = clients[0].get_object(Bucket=BUCKET, Key="race")["Body"].read()
    digest = hashlib.md5(final).hexdigest()
    assert digest in written, "the object is not a version anyone wrote"
    assert written[digest] == len(final)
    for c in clients:
        h = c.head_object(Bucket=BUCKET, Key="race")
        assert h["ETag"] == '"%s"' % digest and h["ContentLength"] == len(final), h
        listed = [o for o in c.list_objects_v2(Bucket=BUCKET, Prefix="race")["Contents"] if o["Key"] == "race"]
        assert len(listed) == 1 and listed[0]["ETag"] == h["ETag"] and listed[0]["Size"] == len(final), listed
    print("race: %d writes acknowledged, %d refused, one whole version left" % (len(written), len(errors)))
    print("final_size=%d" % len(final))


def killed():
    c = client(ENDPOINTS[0])
    pid = int(os.environ["S3_KILL_PID"])
    mib = 1024 * 1024
    size = 48 * mib
    # A presigned PUT sent by hand, so the body can stop half way.
    url = urllib.parse.urlsplit(c.generate_presigned_url(
        "put_object", Params={"Bucket": BUCKET, "Key": "half"}, ExpiresIn=300))
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    conn.putrequest("PUT", url.path + "?" + url.query)
    conn.putheader("Content-Length", str(size))
    conn.endheaders()
    try:
        for sent in range(1, 49):
            conn.send(b"k" * mib)
            if sent == 12:
                os.kill(pid, signal.SIGKILL)
                time.sleep(0.5)
        status = conn.getresponse().status
        raise AssertionError("the PUT answered %d though its gateway was killed" % status)
    except (OSError, http.client.HTTPException):
        pass
    other = client(ENDPOINTS[1])
    try:
        other.head_object(Bucket=BUCKET, Key="half")
        raise AssertionError("a partial object is visible")
    except botocore.exceptions.ClientError as e:
        assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 404, e.response
    print("killed: nothing visible of the interrupted PUT")


def doomed():
    c = client(ENDPOINTS[0])
    name = BUCKET + "-doomed"
    c.create_bucket(Bucket=name)
    mib = 1024 * 1024
    url = urllib.parse.urlsplit(c.generate_presigned_url(
        "put_object", Params={"Bucket": name, "Key": "late"}, ExpiresIn=300))
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    conn.putrequest("PUT", url.path + "?" + url.query)
    conn.putheader("Content-Length", str(24 * mib))
    conn.endheaders()
    for sent in range(1, 25):
        conn.send(b"d" * mib)
        if sent == 8:
            time.sleep(1)  # the upload has begun: its pending record is in
            c.delete_bucket(Bucket=name)
    status = conn.getresponse().status
    assert status == 404, "a PUT into a bucket deleted under it answered %d" % status
    print("doomed: the PUT into a bucket deleted under it was refused")


def acked():
    c = client(ENDPOINTS[0], retries=3)
    seconds = float(os.environ.get("S3_SECONDS", "12"))
    ok, refused = {}, 0
    t0 = time.time()
    i = 0
    while time.time() - t0 < seconds:
        body = payload(i % 7, i)
        key = "acked/%05d" % i
        try:
            c.put_object(Bucket=BUCKET, Key=key, Body=body)
            ok[key] = hashlib.md5(body).hexdigest()
        except Exception:
            refused += 1
        i += 1
    assert ok, "nothing was acknowledged"
    with open(os.environ["S3_STATE"], "w") as f:
        json.dump(ok, f)
    reread()
    print("acked: %d acknowledged writes all read back whole (%d refused)" % (len(ok), refused))


def reread():
    with open(os.environ["S3_STATE"]) as f:
        ok = json.load(f)
    c = client(ENDPOINTS[-1], retries=5)
    for key, digest in ok.items():
        got = c.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        assert hashlib.md5(got).hexdigest() == digest, key
    print("reread: %d acknowledged writes read back whole" % len(ok))


if __name__ == "__main__":
    {"race": race, "killed": killed, "doomed": doomed, "acked": acked,
     "reread": reread}[sys.argv[1]]()
