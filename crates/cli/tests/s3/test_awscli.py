"""The S3 gateway as the AWS CLI (`aws`, awscli v1 from PyPI) sees it:
`aws s3` (mb, cp with its multipart uploads, sync both ways, ls, mv, rm,
rb, presign) and `aws s3api` calls, refusals included. Run by
`cargo test` (s3.rs) against a live gateway with the environment of
test_boto3.py (S3_ENDPOINT, S3_ACCESS_KEY, S3_SECRET_KEY, S3_CA_BUNDLE),
and AWS_CLI naming the `aws` program."""

import filecmp
import hashlib
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import unittest
import urllib.request

ENDPOINT = os.environ["S3_ENDPOINT"]
CA = os.environ.get("S3_CA_BUNDLE") or ""
AWS = os.environ.get("AWS_CLI", "aws")


def aws(*args, secret=None, access=None, check=True, stdin=None):
    """Run `aws ARGS` against the gateway: (exit status, stdout, stderr)."""
    env = dict(os.environ)
    env.update({
        "AWS_ACCESS_KEY_ID": access or os.environ["S3_ACCESS_KEY"],
        "AWS_SECRET_ACCESS_KEY": secret or os.environ["S3_SECRET_KEY"],
        "AWS_DEFAULT_REGION": "default",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_MAX_ATTEMPTS": "1",
        "AWS_PAGER": "",
    })
    cmd = [AWS, "--endpoint-url", ENDPOINT] + (["--ca-bundle", CA] if CA else []) + list(args)
    p = subprocess.run(cmd, capture_output=True, env=env, input=stdin)
    if check and p.returncode != 0:
        raise AssertionError("%s: %s%s" % (" ".join(args), p.stdout.decode(), p.stderr.decode()))
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def api(*args):
    """`aws s3api ARGS` as JSON."""
    _, out, _ = aws("s3api", *args)
    return json.loads(out) if out.strip() else {}


class AwsCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.bucket = "awscli-%d" % os.getpid()
        cls.tmp = tempfile.mkdtemp(prefix="loligo-awscli.")
        aws("s3", "mb", "s3://%s" % cls.bucket)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def test_1_cp_small_and_large(self):
        small = self.path("small.txt")
        with open(small, "wb") as f:
            f.write(b"hello from the aws cli\n")
        aws("s3", "cp", small, "s3://%s/small.txt" % self.bucket)
        _, out, _ = aws("s3", "cp", "s3://%s/small.txt" % self.bucket, "-")
        self.assertEqual(out, "hello from the aws cli\n")
        # 20 MiB: the CLI uploads it in 8 MiB parts (multipart).
        big = self.path("big.bin")
        blob = os.urandom(20 << 20)
        with open(big, "wb") as f:
            f.write(blob)
        aws("s3", "cp", big, "s3://%s/big.bin" % self.bucket)
        head = api("head-object", "--bucket", self.bucket, "--key", "big.bin")
        self.assertEqual(head["ContentLength"], 20 << 20)
        self.assertTrue(head["ETag"].strip('"').endswith("-3"), head["ETag"])
        back = self.path("big.back")
        aws("s3", "cp", "s3://%s/big.bin" % self.bucket, back)
        with open(back, "rb") as f:
            self.assertEqual(hashlib.md5(f.read()).digest(), hashlib.md5(blob).digest())

    def test_2_sync_both_ways(self):
        src = self.path("tree")
        for rel in ("a.txt", "sub/b.txt", "sub/deeper/c.bin", "sp ace/d.txt"):
            os.makedirs(os.path.dirname(self.path("tree", rel)), exist_ok=True)
            with open(self.path("tree", rel), "wb") as f:
                f.write(os.urandom(1000) + rel.encode())
        dst = "s3://%s/tree/" % self.bucket
        aws("s3", "sync", src, dst)
        _, listing, _ = aws("s3", "ls", "--recursive", dst)
        keys = sorted(line.split(None, 3)[3] for line in listing.splitlines())
        self.assertEqual(keys, ["tree/a.txt", "tree/sp ace/d.txt", "tree/sub/b.txt",
                                "tree/sub/deeper/c.bin"])
        # Nothing changed: a second sync uploads nothing.
        _, out, _ = aws("s3", "sync", src, dst)
        self.assertEqual(out.strip(), "")
        down = self.path("down")
        aws("s3", "sync", dst, down)
        cmp = filecmp.dircmp(src, down)
        self.assertEqual((cmp.left_only, cmp.right_only, cmp.diff_files), ([], [], []))
        for sub in ("sub", "sp ace"):
            self.assertEqual(filecmp.dircmp(self.path("tree", sub), self.path("down", sub)).diff_files, [])
        # --delete removes what the source lost.
        os.remove(self.path("tree", "a.txt"))
        aws("s3", "sync", "--delete", src, dst)
        _, listing, _ = aws("s3", "ls", "--recursive", dst)
        self.assertNotIn("tree/a.txt", listing)
        # ls with a delimiter shows the prefixes.
        _, top, _ = aws("s3", "ls", dst)
        self.assertIn("PRE sub/", top)
        self.assertIn("PRE sp ace/", top)

    def test_3_s3api_objects(self):
        api("put-object", "--bucket", self.bucket, "--key", "meta.txt", "--body", self.path("small.txt"),
            "--content-type", "text/plain", "--metadata", "colour=blue")
        head = api("head-object", "--bucket", self.bucket, "--key", "meta.txt")
        self.assertEqual(head["ContentType"], "text/plain")
        self.assertEqual(head["Metadata"], {"colour": "blue"})
        api("copy-object", "--bucket", self.bucket, "--key", "meta-copy.txt",
            "--copy-source", "%s/meta.txt" % self.bucket)
        got = api("get-object", "--bucket", self.bucket, "--key", "meta-copy.txt",
                  "--range", "bytes=0-4", self.path("range.out"))
        self.assertEqual(got["ContentLength"], 5)
        with open(self.path("range.out"), "rb") as f:
            self.assertEqual(f.read(), b"hello")
        page = api("list-objects-v2", "--bucket", self.bucket, "--prefix", "meta", "--max-keys", "1")
        self.assertEqual([o["Key"] for o in page["Contents"]], ["meta-copy.txt"])
        self.assertTrue(page["IsTruncated"])
        gone = api("delete-objects", "--bucket", self.bucket, "--delete",
                   json.dumps({"Objects": [{"Key": "meta.txt"}, {"Key": "meta-copy.txt"}]}))
        self.assertEqual(sorted(d["Key"] for d in gone["Deleted"]), ["meta-copy.txt", "meta.txt"])
        rc, _, err = aws("s3api", "head-object", "--bucket", self.bucket, "--key", "meta.txt", check=False)
        self.assertNotEqual(rc, 0)
        self.assertIn("404", err)

    def test_4_presign_mv_rm(self):
        _, url, _ = aws("s3", "presign", "s3://%s/small.txt" % self.bucket, "--expires-in", "60")
        ctx = ssl.create_default_context(cafile=CA or None)
        with urllib.request.urlopen(url.strip(), context=ctx if CA else None) as r:
            self.assertEqual(r.read(), b"hello from the aws cli\n")
        aws("s3", "mv", "s3://%s/small.txt" % self.bucket, "s3://%s/moved.txt" % self.bucket)
        _, listing, _ = aws("s3", "ls", "s3://%s/" % self.bucket)
        self.assertIn("moved.txt", listing)
        self.assertNotIn("small.txt", listing)
        aws("s3", "rm", "s3://%s/moved.txt" % self.bucket)
        aws("s3", "rm", "--recursive", "s3://%s/tree/" % self.bucket)
        _, listing, _ = aws("s3", "ls", "--recursive", "s3://%s/" % self.bucket)
        self.assertEqual([line.split(None, 3)[3] for line in listing.splitlines()], ["big.bin"])

    def test_5_refusals(self):
        rc, _, err = aws("s3", "ls", secret="wrong-secret", check=False)
        self.assertNotEqual(rc, 0)
        self.assertIn("SignatureDoesNotMatch", err)
        rc, _, err = aws("s3", "ls", access="NOSUCHKEY", check=False)
        self.assertNotEqual(rc, 0)
        self.assertIn("InvalidAccessKeyId", err)
        rc, _, err = aws("s3", "rb", "s3://%s" % self.bucket, check=False)
        self.assertNotEqual(rc, 0)
        self.assertIn("BucketNotEmpty", err)
        # Tags are kept; default encryption is refused, not ignored.
        aws("s3api", "put-bucket-tagging", "--bucket", self.bucket, "--tagging",
            json.dumps({"TagSet": [{"Key": "k", "Value": "v"}]}))
        _, out, _ = aws("s3api", "get-bucket-tagging", "--bucket", self.bucket)
        self.assertEqual(json.loads(out)["TagSet"], [{"Key": "k", "Value": "v"}])
        rule = {"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}
        rc, _, err = aws("s3api", "put-bucket-encryption", "--bucket", self.bucket,
                         "--server-side-encryption-configuration", json.dumps(rule), check=False)
        self.assertNotEqual(rc, 0)
        self.assertIn("NotImplemented", err)
        rc, _, err = aws("s3", "cp", "s3://no-such-bucket-here/x", "-", check=False)
        self.assertNotEqual(rc, 0)
        self.assertIn("404", err)

    def test_6_rb_force(self):
        aws("s3", "rb", "--force", "s3://%s" % self.bucket)
        _, listing, _ = aws("s3", "ls")
        self.assertNotIn(self.bucket, listing)


if __name__ == "__main__":
    unittest.main(verbosity=2)
