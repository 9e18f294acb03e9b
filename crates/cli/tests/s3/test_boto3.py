"""The S3 gateway as boto3 sees it: buckets, objects, listings, conditions,
checksums and signatures, refusals included. Run by `cargo test` (s3.rs)
against a live gateway; the endpoint and keys come in the environment:
S3_ENDPOINT, S3_ACCESS_KEY, S3_SECRET_KEY, S3_OTHER_ACCESS_KEY,
S3_OTHER_SECRET_KEY (a second user's)."""

import hashlib
import os
import time
import unittest
import urllib.request
import urllib.error

import boto3
import botocore
from botocore.config import Config

ENDPOINT = os.environ["S3_ENDPOINT"]


def client(access=None, secret=None, **cfg):
    return boto3.client(
        "s3",
        endpoint_url=ENDPOINT,
        aws_access_key_id=access or os.environ["S3_ACCESS_KEY"],
        aws_secret_access_key=secret or os.environ["S3_SECRET_KEY"],
        region_name="default",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, **cfg),
    )


def code(e):
    return e.response["Error"]["Code"]


def status(e):
    return e.response["ResponseMetadata"]["HTTPStatusCode"]


class Gateway(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s3 = client()
        cls.bucket = "boto-%d" % os.getpid()
        cls.s3.create_bucket(Bucket=cls.bucket)

    def test_buckets(self):
        names = [b["Name"] for b in self.s3.list_buckets()["Buckets"]]
        self.assertIn(self.bucket, names)
        self.s3.head_bucket(Bucket=self.bucket)
        loc = self.s3.get_bucket_location(Bucket=self.bucket)
        self.assertEqual(loc["LocationConstraint"], "default")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.create_bucket(Bucket=self.bucket)
        self.assertEqual(code(e.exception), "BucketAlreadyOwnedByYou")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.create_bucket(Bucket="Bad_Name")
        self.assertEqual(code(e.exception), "InvalidBucketName")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.head_bucket(Bucket="no-such-bucket-here")
        self.assertEqual(status(e.exception), 404)
        # Another user neither sees nor takes it.
        other = client(os.environ["S3_OTHER_ACCESS_KEY"], os.environ["S3_OTHER_SECRET_KEY"])
        self.assertNotIn(self.bucket, [b["Name"] for b in other.list_buckets()["Buckets"]])
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            other.create_bucket(Bucket=self.bucket)
        self.assertEqual(code(e.exception), "BucketAlreadyExists")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            other.get_object(Bucket=self.bucket, Key="x")
        self.assertEqual(code(e.exception), "AccessDenied")

    def test_objects_small_and_large(self):
        small = b"hello, loligo"
        big = os.urandom(9 * 1024 * 1024 + 123)
        for key, data in [("small", small), ("dir/big", big), ("empty", b"")]:
            r = self.s3.put_object(Bucket=self.bucket, Key=key, Body=data,
                                   ContentType="application/x-test",
                                   Metadata={"colour": "blue"})
            self.assertEqual(r["ETag"], '"%s"' % hashlib.md5(data).hexdigest())
            got = self.s3.get_object(Bucket=self.bucket, Key=key)
            self.assertEqual(got["Body"].read(), data)
            self.assertEqual(got["ContentType"], "application/x-test")
            self.assertEqual(got["Metadata"], {"colour": "blue"})
            self.assertEqual(got["ContentLength"], len(data))
            h = self.s3.head_object(Bucket=self.bucket, Key=key)
            self.assertEqual(h["ContentLength"], len(data))
            self.assertEqual(h["ETag"], r["ETag"])
        # Ranges, across a stripe boundary too.
        for rng, want in [("bytes=0-4", big[0:5]),
                          ("bytes=4194300-4194310", big[4194300:4194311]),
                          ("bytes=-100", big[-100:]),
                          ("bytes=9437180-", big[9437180:])]:
            got = self.s3.get_object(Bucket=self.bucket, Key="dir/big", Range=rng)
            self.assertEqual(got["Body"].read(), want, rng)
            self.assertEqual(got["ResponseMetadata"]["HTTPStatusCode"], 206)
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.get_object(Bucket=self.bucket, Key="small", Range="bytes=100-200")
        self.assertEqual(code(e.exception), "InvalidRange")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.get_object(Bucket=self.bucket, Key="nope")
        self.assertEqual(code(e.exception), "NoSuchKey")
        # Overwrite: the new object whole.
        self.s3.put_object(Bucket=self.bucket, Key="dir/big", Body=small)
        self.assertEqual(self.s3.get_object(Bucket=self.bucket, Key="dir/big")["Body"].read(), small)

    def test_conditions(self):
        r = self.s3.put_object(Bucket=self.bucket, Key="cond", Body=b"v1")
        tag = r["ETag"]
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.get_object(Bucket=self.bucket, Key="cond", IfNoneMatch=tag)
        self.assertEqual(status(e.exception), 304)
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.get_object(Bucket=self.bucket, Key="cond", IfMatch='"0000"')
        self.assertEqual(status(e.exception), 412)
        self.s3.get_object(Bucket=self.bucket, Key="cond", IfMatch=tag)
        future = time.time() + 3600
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.get_object(Bucket=self.bucket, Key="cond",
                               IfModifiedSince=time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(future)))
        self.assertEqual(status(e.exception), 304)
        # Conditional writes: create-only, and compare-and-swap on the ETag.
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.put_object(Bucket=self.bucket, Key="cond", Body=b"v2", IfNoneMatch="*")
        self.assertEqual(code(e.exception), "PreconditionFailed")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.put_object(Bucket=self.bucket, Key="cond", Body=b"v2", IfMatch='"0000"')
        self.assertEqual(code(e.exception), "PreconditionFailed")
        self.s3.put_object(Bucket=self.bucket, Key="cond", Body=b"v2", IfMatch=tag)
        self.assertEqual(self.s3.get_object(Bucket=self.bucket, Key="cond")["Body"].read(), b"v2")
        self.s3.put_object(Bucket=self.bucket, Key="fresh", Body=b"x", IfNoneMatch="*")

    def test_digests(self):
        import base64
        bad = base64.b64encode(hashlib.md5(b"other").digest()).decode()
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.put_object(Bucket=self.bucket, Key="md5", Body=b"data", ContentMD5=bad)
        self.assertEqual(code(e.exception), "BadDigest")
        with self.assertRaises(botocore.exceptions.ClientError):
            self.s3.head_object(Bucket=self.bucket, Key="md5")
        good = base64.b64encode(hashlib.md5(b"data").digest()).decode()
        self.s3.put_object(Bucket=self.bucket, Key="md5", Body=b"data", ContentMD5=good)
        # (CRC32C and CRC64NVME need botocore[crt] on the client side.)
        for alg in ["CRC32", "SHA1", "SHA256"]:
            r = self.s3.put_object(Bucket=self.bucket, Key="sum-" + alg, Body=b"x" * 70000,
                                   ChecksumAlgorithm=alg)
            self.assertIn("Checksum" + alg, r)
            h = self.s3.head_object(Bucket=self.bucket, Key="sum-" + alg, ChecksumMode="ENABLED")
            self.assertEqual(h["Checksum" + alg], r["Checksum" + alg])

    def test_listings(self):
        b = "list-%d" % os.getpid()
        self.s3.create_bucket(Bucket=b)
        keys = ["a/1", "a/2", "a/b/3", "b/1", "c", "d/x/y", "e"]
        for k in keys:
            self.s3.put_object(Bucket=b, Key=k, Body=k.encode())
        all_v2 = self.s3.list_objects_v2(Bucket=b)
        self.assertEqual([o["Key"] for o in all_v2["Contents"]], sorted(keys))
        self.assertEqual(all_v2["KeyCount"], len(keys))
        d = self.s3.list_objects_v2(Bucket=b, Delimiter="/")
        self.assertEqual([o["Key"] for o in d["Contents"]], ["c", "e"])
        self.assertEqual([p["Prefix"] for p in d["CommonPrefixes"]], ["a/", "b/", "d/"])
        p = self.s3.list_objects_v2(Bucket=b, Prefix="a/", Delimiter="/")
        self.assertEqual([o["Key"] for o in p["Contents"]], ["a/1", "a/2"])
        self.assertEqual([x["Prefix"] for x in p["CommonPrefixes"]], ["a/b/"])
        # Pages of two, v2 and v1, with and without a delimiter.
        for delim in [None, "/"]:
            seen, token = [], None
            while True:
                kw = {"Bucket": b, "MaxKeys": 2}
                if delim:
                    kw["Delimiter"] = delim
                if token:
                    kw["ContinuationToken"] = token
                r = self.s3.list_objects_v2(**kw)
                seen += [o["Key"] for o in r.get("Contents", [])]
                seen += [x["Prefix"] for x in r.get("CommonPrefixes", [])]
                if not r["IsTruncated"]:
                    break
                token = r["NextContinuationToken"]
            want = sorted(keys) if not delim else ["a/", "b/", "c", "d/", "e"]
            self.assertEqual(sorted(seen), want)
            self.assertEqual(len(seen), len(set(seen)), "no key twice")
        pages = self.s3.get_paginator("list_objects").paginate(Bucket=b, PaginationConfig={"PageSize": 3})
        self.assertEqual(sorted(o["Key"] for pg in pages for o in pg.get("Contents", [])), sorted(keys))
        r = self.s3.list_objects_v2(Bucket=b, StartAfter="b/1")
        self.assertEqual([o["Key"] for o in r["Contents"]], ["c", "d/x/y", "e"])
        v = self.s3.list_object_versions(Bucket=b)
        self.assertEqual(sorted(x["Key"] for x in v["Versions"]), sorted(keys))
        self.assertTrue(all(x["VersionId"] == "null" for x in v["Versions"]))
        # Copy, then delete in a batch; the bucket empties and goes.
        self.s3.copy_object(Bucket=b, Key="copy", CopySource={"Bucket": b, "Key": "a/1"})
        self.assertEqual(self.s3.get_object(Bucket=b, Key="copy")["Body"].read(), b"a/1")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.delete_bucket(Bucket=b)
        self.assertEqual(code(e.exception), "BucketNotEmpty")
        r = self.s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": k} for k in keys + ["copy", "absent"]]})
        self.assertEqual(len(r["Deleted"]), len(keys) + 2)
        self.assertEqual(self.s3.list_objects_v2(Bucket=b)["KeyCount"], 0)
        self.s3.delete_object(Bucket=b, Key="absent")  # S3 answers 204 for a missing key
        self.s3.delete_bucket(Bucket=b)
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.list_objects_v2(Bucket=b)
        self.assertEqual(code(e.exception), "NoSuchBucket")

    def test_signatures(self):
        bad = client(secret="wrong-secret")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            bad.list_buckets()
        self.assertEqual(code(e.exception), "SignatureDoesNotMatch")
        unknown = client(access="NOSUCHKEY0000000000", secret="x")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            unknown.list_buckets()
        self.assertEqual(code(e.exception), "InvalidAccessKeyId")
        # Anonymous requests are refused.
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen("%s/%s/x" % (ENDPOINT, self.bucket))
        self.assertEqual(e.exception.code, 403)
        # Presigned URLs: good until they expire.
        self.s3.put_object(Bucket=self.bucket, Key="shared", Body=b"presigned")
        url = self.s3.generate_presigned_url("get_object", Params={"Bucket": self.bucket, "Key": "shared"},
                                             ExpiresIn=60)
        self.assertEqual(urllib.request.urlopen(url).read(), b"presigned")
        url = self.s3.generate_presigned_url("get_object", Params={"Bucket": self.bucket, "Key": "shared"},
                                             ExpiresIn=1)
        time.sleep(2)
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url)
        self.assertEqual(e.exception.code, 403)
        self.assertIn(b"AccessDenied", e.exception.read())


if __name__ == "__main__":
    unittest.main(verbosity=2)
