"""The S3 gateway as boto3 sees it: buckets, objects, listings, conditions,
checksums and signatures, refusals included. Run by `cargo test` (s3.rs)
against a live gateway; the endpoint and keys come in the environment:
S3_ENDPOINT, S3_ACCESS_KEY, S3_SECRET_KEY, S3_OTHER_ACCESS_KEY,
S3_OTHER_SECRET_KEY (a second user's), and S3_CA_BUNDLE for HTTPS (over
which boto3 sends its bodies aws-chunked with trailing checksums)."""

import hashlib
import http.client
import urllib.parse
import os
import ssl
import time
import unittest
import urllib.request
import urllib.error

import boto3
import botocore
from botocore.config import Config

ENDPOINT = os.environ["S3_ENDPOINT"]
TLS = ssl.create_default_context(cafile=os.environ.get("S3_CA_BUNDLE") or None)


def client(access=None, secret=None, endpoint=None, addressing="path", **cfg):
    return boto3.client(
        "s3",
        endpoint_url=endpoint or ENDPOINT,
        aws_access_key_id=access or os.environ["S3_ACCESS_KEY"],
        aws_secret_access_key=secret or os.environ["S3_SECRET_KEY"],
        region_name="default",
        verify=os.environ.get("S3_CA_BUNDLE") or None,
        config=Config(s3={"addressing_style": addressing}, retries={"max_attempts": 1}, **cfg),
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
        # Making one's own bucket again succeeds (as RGW and us-east-1);
        # with another ACL it is refused.
        self.s3.put_object(Bucket=self.bucket, Key="kept", Body=b"kept")
        self.s3.create_bucket(Bucket=self.bucket)
        self.assertEqual(self.s3.get_object(Bucket=self.bucket, Key="kept")["Body"].read(), b"kept")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.create_bucket(Bucket=self.bucket, ACL="public-read")
        self.assertEqual(code(e.exception), "BucketAlreadyExists")
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
        self.assertEqual(e.exception.response["ResponseMetadata"]["HTTPHeaders"]["etag"], tag)
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

    def test_unsupported_features_are_refused(self):
        for kw, want in [({"ServerSideEncryption": "AES256"}, "NotImplemented"),
                         ({"ObjectLockLegalHoldStatus": "ON"}, "InvalidRequest")]:
            with self.assertRaises(botocore.exceptions.ClientError) as e:
                self.s3.put_object(Bucket=self.bucket, Key="refused", Body=b"x", **kw)
            self.assertEqual(code(e.exception), want, kw)
        with self.assertRaises(botocore.exceptions.ClientError):
            self.s3.head_object(Bucket=self.bucket, Key="refused")
        self.s3.put_object(Bucket=self.bucket, Key="one-version", Body=b"x")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.get_object(Bucket=self.bucket, Key="one-version", VersionId="v2")
        self.assertEqual(code(e.exception), "NoSuchVersion")
        got = self.s3.get_object(Bucket=self.bucket, Key="one-version", VersionId="null")
        self.assertEqual(got["Body"].read(), b"x")

    def test_tags_and_parts(self):
        b = self.bucket
        self.s3.put_object(Bucket=b, Key="tagged", Body=b"x", Tagging="a=1&b%20c=d%2Fe")
        got = self.s3.get_object(Bucket=b, Key="tagged")
        self.assertEqual(got["TagCount"], 2)
        tags = self.s3.get_object_tagging(Bucket=b, Key="tagged")["TagSet"]
        self.assertEqual(sorted((t["Key"], t["Value"]) for t in tags), [("a", "1"), ("b c", "d/e")])
        self.s3.put_object_tagging(Bucket=b, Key="tagged", Tagging={"TagSet": [{"Key": "z", "Value": ""}]})
        self.assertEqual(self.s3.get_object_tagging(Bucket=b, Key="tagged")["TagSet"], [{"Key": "z", "Value": ""}])
        too_many = {"TagSet": [{"Key": str(i), "Value": "v"} for i in range(11)]}
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.put_object_tagging(Bucket=b, Key="tagged", Tagging=too_many)
        self.assertEqual(code(e.exception), "InvalidTag")
        self.s3.delete_object_tagging(Bucket=b, Key="tagged")
        self.assertEqual(self.s3.get_object_tagging(Bucket=b, Key="tagged")["TagSet"], [])
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.get_bucket_tagging(Bucket=b)
        self.assertEqual(code(e.exception), "NoSuchTagSet")
        # One part of a multipart object, or of a single PUT (its part 1).
        parts, size = [b"a" * (5 << 20), b"tail"], (5 << 20) + 4
        up = self.s3.create_multipart_upload(Bucket=b, Key="in-parts")["UploadId"]
        done = [{"PartNumber": n + 1, "ETag": self.s3.upload_part(
            Bucket=b, Key="in-parts", UploadId=up, PartNumber=n + 1, Body=p)["ETag"]} for n, p in enumerate(parts)]
        self.s3.complete_multipart_upload(Bucket=b, Key="in-parts", UploadId=up, MultipartUpload={"Parts": done})
        got = self.s3.get_object(Bucket=b, Key="in-parts", PartNumber=2)
        self.assertEqual((got["Body"].read(), got["PartsCount"]), (b"tail", 2))
        self.assertEqual(got["ContentRange"], "bytes %d-%d/%d" % (5 << 20, size - 1, size))
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.get_object(Bucket=b, Key="in-parts", PartNumber=3)
        self.assertEqual(code(e.exception), "InvalidPart")
        self.assertEqual(self.s3.get_object(Bucket=b, Key="tagged", PartNumber=1)["Body"].read(), b"x")
        # (The harness counts what is left in the data pool afterwards.)
        self.s3.delete_object(Bucket=b, Key="in-parts")

    def test_multipart_checksums(self):
        import base64
        import zlib
        b = self.bucket
        parts = [b"a" * (5 << 20), b"b" * 1000]
        sha = lambda d: base64.b64encode(hashlib.sha256(d).digest()).decode()
        crc = lambda d: base64.b64encode(zlib.crc32(d).to_bytes(4, "big")).decode()
        for alg, ty, f, whole in [
                ("SHA256", "COMPOSITE", sha,
                 base64.b64encode(hashlib.sha256(b"".join(
                     hashlib.sha256(p).digest() for p in parts)).digest()).decode() + "-2"),
                ("CRC32", "FULL_OBJECT", crc, crc(b"".join(parts)))]:
            key = "sums-" + alg
            up = self.s3.create_multipart_upload(Bucket=b, Key=key, ChecksumAlgorithm=alg, ChecksumType=ty)
            self.assertEqual((up["ChecksumAlgorithm"], up.get("ChecksumType")), (alg, ty))
            done = []
            for n, p in enumerate(parts, 1):
                r = self.s3.upload_part(Bucket=b, Key=key, UploadId=up["UploadId"], PartNumber=n, Body=p,
                                        ChecksumAlgorithm=alg)
                self.assertEqual(r["Checksum" + alg], f(p))
                done.append({"PartNumber": n, "ETag": r["ETag"], "Checksum" + alg: r["Checksum" + alg]})
            # A wrong whole-object checksum is refused, the upload kept.
            with self.assertRaises(botocore.exceptions.ClientError) as e:
                self.s3.complete_multipart_upload(Bucket=b, Key=key, UploadId=up["UploadId"],
                                                  MultipartUpload={"Parts": done}, **{"Checksum" + alg: f(b"x")})
            self.assertEqual(code(e.exception), "BadDigest")
            r = self.s3.complete_multipart_upload(Bucket=b, Key=key, UploadId=up["UploadId"],
                                                  MultipartUpload={"Parts": done})
            self.assertEqual((r["Checksum" + alg], r["ChecksumType"]), (whole, ty))
            h = self.s3.head_object(Bucket=b, Key=key, ChecksumMode="ENABLED")
            self.assertEqual(h["Checksum" + alg], whole)
            self.assertNotIn("Checksum" + alg, self.s3.head_object(Bucket=b, Key=key))
            got = self.s3.get_object(Bucket=b, Key=key, PartNumber=2, ChecksumMode="ENABLED")
            self.assertEqual(got["Checksum" + alg], f(parts[1]))
            attrs = self.s3.get_object_attributes(Bucket=b, Key=key, MaxParts=1,
                                                  ObjectAttributes=["Checksum", "ObjectParts", "ObjectSize"])
            self.assertEqual(attrs["Checksum"]["Checksum" + alg], whole)
            self.assertEqual(attrs["ObjectSize"], sum(map(len, parts)))
            op = attrs["ObjectParts"]
            self.assertEqual((op["TotalPartsCount"], op["IsTruncated"], op["NextPartNumberMarker"]), (2, True, 1))
            self.assertEqual(op["Parts"][0]["Size"], 5 << 20)
            self.s3.delete_object(Bucket=b, Key=key)

    def test_cors(self):
        b = self.bucket
        self.s3.put_bucket_cors(Bucket=b, CORSConfiguration={"CORSRules": [
            {"AllowedMethods": ["GET", "PUT"], "AllowedOrigins": ["https://*.example"],
             "AllowedHeaders": ["content-type"], "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 60}]})
        self.assertEqual(self.s3.get_bucket_cors(Bucket=b)["CORSRules"][0]["AllowedOrigins"], ["https://*.example"])
        self.s3.put_object(Bucket=b, Key="cors", Body=b"x")
        u = urllib.parse.urlparse(ENDPOINT)

        def ask(method, headers):
            if u.scheme == "https":
                conn = http.client.HTTPSConnection(u.hostname, u.port, context=TLS)
            else:
                conn = http.client.HTTPConnection(u.hostname, u.port)
            conn.request(method, "/%s/cors" % b, headers=headers)
            r = conn.getresponse()
            r.read()
            return r
        ok = ask("OPTIONS", {"Origin": "https://app.example", "Access-Control-Request-Method": "PUT",
                             "Access-Control-Request-Headers": "Content-Type"})
        self.assertEqual(ok.status, 200)
        self.assertEqual(ok.headers["Access-Control-Allow-Origin"], "https://app.example")
        self.assertEqual(ok.headers["Access-Control-Max-Age"], "60")
        self.assertEqual(ask("OPTIONS", {"Origin": "https://evil.test",
                                         "Access-Control-Request-Method": "GET"}).status, 403)
        self.assertEqual(ask("OPTIONS", {"Origin": "https://app.example",
                                         "Access-Control-Request-Method": "DELETE"}).status, 403)
        self.assertEqual(ask("OPTIONS", {}).status, 400)
        # An anonymous GET is still refused (CORS opens no ACL), but its
        # answer carries the headers that let the page read the refusal.
        r = ask("GET", {"Origin": "https://app.example"})
        self.assertEqual((r.status, r.headers["Access-Control-Allow-Origin"]), (403, "https://app.example"))
        self.s3.delete_bucket_cors(Bucket=b)
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.get_bucket_cors(Bucket=b)
        self.assertEqual(code(e.exception), "NoSuchCORSConfiguration")

    def test_versions(self):
        b = "versions-%d" % os.getpid()
        self.s3.create_bucket(Bucket=b)
        self.s3.put_object(Bucket=b, Key="k", Body=b"before")
        self.s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        self.assertEqual(self.s3.get_bucket_versioning(Bucket=b)["Status"], "Enabled")
        v1 = self.s3.put_object(Bucket=b, Key="k", Body=b"one")["VersionId"]
        v2 = self.s3.put_object(Bucket=b, Key="k", Body=b"two" * 10000)["VersionId"]
        self.assertNotIn(v2, (v1, "null"))
        read = lambda v: self.s3.get_object(Bucket=b, Key="k", VersionId=v)["Body"].read()
        self.assertEqual((read("null"), read(v1), read(v2)), (b"before", b"one", b"two" * 10000))
        self.assertEqual(self.s3.get_object(Bucket=b, Key="k")["VersionId"], v2)
        # A delete puts a marker: the key is gone, its versions stay.
        gone = self.s3.delete_object(Bucket=b, Key="k")
        self.assertTrue(gone["DeleteMarker"])
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.get_object(Bucket=b, Key="k")
        self.assertEqual(status(e.exception), 404)
        self.assertEqual(e.exception.response["ResponseMetadata"]["HTTPHeaders"].get("x-amz-delete-marker"), "true")
        self.assertNotIn("Contents", self.s3.list_objects_v2(Bucket=b))
        listed = self.s3.list_object_versions(Bucket=b)
        self.assertEqual([(v["VersionId"], v["IsLatest"]) for v in listed["Versions"]],
                         [(v2, False), (v1, False), ("null", False)])
        self.assertEqual([(m["VersionId"], m["IsLatest"]) for m in listed["DeleteMarkers"]],
                         [(gone["VersionId"], True)])
        # Paged one version at a time, the listing is the same.
        seen, kw = [], {}
        while True:
            page = self.s3.list_object_versions(Bucket=b, MaxKeys=1, **kw)
            seen += [v["VersionId"] for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
            if not page["IsTruncated"]:
                break
            kw = {"KeyMarker": page["NextKeyMarker"], "VersionIdMarker": page["NextVersionIdMarker"]}
        self.assertEqual(seen, [gone["VersionId"], v2, v1, "null"])
        # Removing the marker brings the newest version back.
        self.s3.delete_object(Bucket=b, Key="k", VersionId=gone["VersionId"])
        self.assertEqual(self.s3.get_object(Bucket=b, Key="k")["Body"].read(), b"two" * 10000)
        # Suspended: a write replaces the null version, keeps the others.
        self.s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Suspended"})
        self.assertNotIn("VersionId", self.s3.put_object(Bucket=b, Key="k", Body=b"null again"))
        ids = [v["VersionId"] for v in self.s3.list_object_versions(Bucket=b)["Versions"]]
        self.assertEqual(ids, ["null", v2, v1])
        # A bucket holding versions is not empty; removed one by one, it is.
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.delete_bucket(Bucket=b)
        self.assertEqual(code(e.exception), "BucketNotEmpty")
        self.s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": "k", "VersionId": v} for v in ids]})
        self.assertEqual(self.s3.list_object_versions(Bucket=b).get("Versions", []), [])
        self.s3.delete_bucket(Bucket=b)

    def test_object_lock(self):
        import datetime
        b = "locked-%d" % os.getpid()
        self.s3.create_bucket(Bucket=b, ObjectLockEnabledForBucket=True)
        self.assertEqual(self.s3.get_bucket_versioning(Bucket=b)["Status"], "Enabled")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Suspended"})
        self.assertEqual(code(e.exception), "InvalidBucketState")
        self.s3.put_object_lock_configuration(Bucket=b, ObjectLockConfiguration={
            "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}})
        v = self.s3.put_object(Bucket=b, Key="k", Body=b"kept")["VersionId"]
        head = self.s3.head_object(Bucket=b, Key="k")
        self.assertEqual(head["ObjectLockMode"], "GOVERNANCE", "the default retention")
        # A retained version stays; a bypass lifts governance retention.
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.delete_object(Bucket=b, Key="k", VersionId=v)
        self.assertEqual(code(e.exception), "AccessDenied")
        later = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=2)
        self.s3.put_object_retention(Bucket=b, Key="k", Retention={"Mode": "COMPLIANCE", "RetainUntilDate": later},
                                     BypassGovernanceRetention=True)
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.delete_object(Bucket=b, Key="k", VersionId=v, BypassGovernanceRetention=True)
        self.assertEqual(code(e.exception), "AccessDenied", "compliance yields to no one")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.put_object_retention(Bucket=b, Key="k", Retention={
                "Mode": "COMPLIANCE", "RetainUntilDate": later - datetime.timedelta(days=1)})
        self.assertEqual(code(e.exception), "AccessDenied", "compliance is never shortened")
        # A legal hold keeps a version until it is lifted.
        h = self.s3.put_object(Bucket=b, Key="held", Body=b"x", ObjectLockLegalHoldStatus="ON",
                               ObjectLockMode="GOVERNANCE",
                               ObjectLockRetainUntilDate=datetime.datetime(2000, 1, 1))["VersionId"]
        self.assertEqual(self.s3.get_object_legal_hold(Bucket=b, Key="held")["LegalHold"]["Status"], "ON")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.delete_object(Bucket=b, Key="held", VersionId=h, BypassGovernanceRetention=True)
        self.assertEqual(code(e.exception), "AccessDenied")
        self.s3.put_object_legal_hold(Bucket=b, Key="held", LegalHold={"Status": "OFF"})
        self.s3.delete_object(Bucket=b, Key="held", VersionId=h)
        # A delete without a version only puts a marker over it.
        self.assertTrue(self.s3.delete_object(Bucket=b, Key="k")["DeleteMarker"])
        self.assertEqual(self.s3.get_object(Bucket=b, Key="k", VersionId=v)["Body"].read(), b"kept")
        # Lock settings need a bucket made with the lock.
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.put_object_legal_hold(Bucket=self.bucket, Key="one-version", LegalHold={"Status": "ON"})
        self.assertEqual(code(e.exception), "InvalidRequest")

    def test_acls(self):
        other = client(os.environ["S3_OTHER_ACCESS_KEY"], os.environ["S3_OTHER_SECRET_KEY"])
        b = "acl-%d" % os.getpid()
        self.s3.create_bucket(Bucket=b)
        acl = self.s3.get_bucket_acl(Bucket=b)
        me = acl["Owner"]["ID"]
        self.assertEqual([(g["Grantee"]["ID"], g["Permission"]) for g in acl["Grants"]], [(me, "FULL_CONTROL")])
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            other.put_object(Bucket=b, Key="theirs", Body=b"x")
        self.assertEqual(code(e.exception), "AccessDenied")
        # Grant the other user WRITE by id: it may write, not read the ACL.
        them = other.list_buckets()["Owner"]["ID"]
        policy = {"Owner": acl["Owner"], "Grants": acl["Grants"] + [
            {"Grantee": {"ID": them, "Type": "CanonicalUser"}, "Permission": "WRITE"}]}
        self.s3.put_bucket_acl(Bucket=b, AccessControlPolicy=policy)
        other.put_object(Bucket=b, Key="theirs", Body=b"x")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            other.get_bucket_acl(Bucket=b)
        self.assertEqual(code(e.exception), "AccessDenied")
        # The writer owns its object: the bucket's owner may not read it
        # until granted.
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.get_object(Bucket=b, Key="theirs")
        self.assertEqual(code(e.exception), "AccessDenied")
        other.put_object_acl(Bucket=b, Key="theirs", ACL="bucket-owner-read")
        self.assertEqual(self.s3.get_object(Bucket=b, Key="theirs")["Body"].read(), b"x")
        # Grants name users that exist.
        bad = {"Owner": acl["Owner"], "Grants": [
            {"Grantee": {"ID": "no-such-user", "Type": "CanonicalUser"}, "Permission": "READ"}]}
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.put_bucket_acl(Bucket=b, AccessControlPolicy=bad)
        self.assertEqual(code(e.exception), "InvalidArgument")
        # A public access block refuses public ACLs.
        self.s3.put_public_access_block(Bucket=b, PublicAccessBlockConfiguration={
            "BlockPublicAcls": True, "IgnorePublicAcls": False, "BlockPublicPolicy": False,
            "RestrictPublicBuckets": False})
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.put_bucket_acl(Bucket=b, ACL="public-read")
        self.assertEqual(code(e.exception), "AccessDenied")
        self.s3.put_bucket_acl(Bucket=b, ACL="private")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            other.put_object(Bucket=b, Key="again", Body=b"x")
        self.assertEqual(code(e.exception), "AccessDenied")
        # A bucket policy: an allow stands in for the ACL, a deny
        # outweighs even the owner's; documents it cannot honour are
        # refused when set.
        import json
        self.s3.put_object(Bucket=b, Key="public/doc", Body=b"by policy")
        with self.assertRaises(botocore.exceptions.ClientError):
            other.get_object(Bucket=b, Key="public/doc")
        policy = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam:::user/%s" % them},
             "Action": "s3:GetObject", "Resource": "arn:aws:s3:::%s/public/*" % b},
            {"Effect": "Deny", "Principal": "*", "Action": "s3:DeleteObject",
             "Resource": "arn:aws:s3:::%s/public/*" % b}]}
        self.s3.put_bucket_policy(Bucket=b, Policy=json.dumps(policy))
        self.assertEqual(json.loads(self.s3.get_bucket_policy(Bucket=b)["Policy"]), policy)
        self.assertEqual(other.get_object(Bucket=b, Key="public/doc")["Body"].read(), b"by policy")
        self.s3.put_object(Bucket=b, Key="private/doc", Body=b"mine")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            other.get_object(Bucket=b, Key="private/doc")
        self.assertEqual(code(e.exception), "AccessDenied", "outside the policy's resources")
        self.s3.delete_object(Bucket=b, Key="private/doc")
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.delete_object(Bucket=b, Key="public/doc")
        self.assertEqual(code(e.exception), "AccessDenied", "a deny binds the owner too")
        self.assertFalse(self.s3.get_bucket_policy_status(Bucket=b)["PolicyStatus"]["IsPublic"])
        bad = dict(policy, Statement=[dict(policy["Statement"][0], Condition={
            "DateGreaterThan": {"aws:CurrentTime": "2020-01-01T00:00:00Z"}})])
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.put_bucket_policy(Bucket=b, Policy=json.dumps(bad))
        self.assertEqual(code(e.exception), "MalformedPolicy")
        self.s3.delete_bucket_policy(Bucket=b)
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            other.get_object(Bucket=b, Key="public/doc")
        self.assertEqual(code(e.exception), "AccessDenied")
        self.s3.delete_object(Bucket=b, Key="public/doc")
        self.s3.delete_object(Bucket=b, Key="theirs")
        self.s3.delete_bucket(Bucket=b)

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

    def test_keys_with_any_characters(self):
        keys = ["sp ace+plus%pct&amp", "ünï/cödé", "tab\tnew?q=1#frag", "dots/../x"]
        for k in keys:
            self.s3.put_object(Bucket=self.bucket, Key="odd/" + k, Body=k.encode())
        for v2 in (True, False):
            r = (self.s3.list_objects_v2 if v2 else self.s3.list_objects)(Bucket=self.bucket, Prefix="odd/")
            self.assertEqual(sorted(o["Key"] for o in r["Contents"]), sorted("odd/" + k for k in keys))
        for k in keys:
            self.assertEqual(self.s3.get_object(Bucket=self.bucket, Key="odd/" + k)["Body"].read(), k.encode())
            self.s3.delete_object(Bucket=self.bucket, Key="odd/" + k)
        self.assertEqual(self.s3.list_objects_v2(Bucket=self.bucket, Prefix="odd/", MaxKeys=0)["KeyCount"], 0)

    def test_multipart(self):
        mib = 1024 * 1024
        b = self.bucket
        self.s3.put_object(Bucket=b, Key="src", Body=bytes(range(256)) * 8)
        up = self.s3.create_multipart_upload(Bucket=b, Key="mp", ContentType="video/x-test",
                                             Metadata={"kind": "multi"})
        uid = up["UploadId"]
        p1, p2 = os.urandom(5 * mib), os.urandom(5 * mib + 7)
        first = self.s3.upload_part(Bucket=b, Key="mp", UploadId=uid, PartNumber=1, Body=os.urandom(5 * mib))
        # The same number again replaces the part.
        r1 = self.s3.upload_part(Bucket=b, Key="mp", UploadId=uid, PartNumber=1, Body=p1)
        self.assertNotEqual(first["ETag"], r1["ETag"])
        r2 = self.s3.upload_part(Bucket=b, Key="mp", UploadId=uid, PartNumber=2, Body=p2)
        r3 = self.s3.upload_part_copy(Bucket=b, Key="mp", UploadId=uid, PartNumber=3,
                                      CopySource={"Bucket": b, "Key": "src"}, CopySourceRange="bytes=10-999")
        p3 = (bytes(range(256)) * 8)[10:1000]
        parts = self.s3.list_parts(Bucket=b, Key="mp", UploadId=uid)["Parts"]
        self.assertEqual([(p["PartNumber"], p["Size"]) for p in parts], [(1, len(p1)), (2, len(p2)), (3, len(p3))])
        ups = self.s3.list_multipart_uploads(Bucket=b)["Uploads"]
        self.assertIn(("mp", uid), [(u["Key"], u["UploadId"]) for u in ups])
        tags = [r1["ETag"], r2["ETag"], r3["CopyPartResult"]["ETag"]]
        named = [{"PartNumber": n + 1, "ETag": t} for n, t in enumerate(tags)]
        for bad, why in [([named[1], named[0], named[2]], "InvalidPartOrder"),
                         ([named[0], {"PartNumber": 2, "ETag": '"%s"' % ("0" * 32)}, named[2]], "InvalidPart"),
                         ([named[0], named[2], {"PartNumber": 4, "ETag": tags[1]}], "InvalidPart")]:
            with self.assertRaises(botocore.exceptions.ClientError) as e:
                self.s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=uid,
                                                  MultipartUpload={"Parts": bad})
            self.assertEqual(code(e.exception), why)
        # Each part but the last is at least 5 MiB.
        small = self.s3.create_multipart_upload(Bucket=b, Key="small-parts")["UploadId"]
        st = [self.s3.upload_part(Bucket=b, Key="small-parts", UploadId=small, PartNumber=n,
                                  Body=b"z" * 100)["ETag"] for n in (1, 2)]
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.complete_multipart_upload(
                Bucket=b, Key="small-parts", UploadId=small,
                MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": t} for n, t in enumerate(st)]})
        self.assertEqual(code(e.exception), "EntityTooSmall")
        self.s3.abort_multipart_upload(Bucket=b, Key="small-parts", UploadId=small)
        done = self.s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=uid,
                                                 MultipartUpload={"Parts": named})
        md5s = b"".join(bytes.fromhex(t.strip('"')) for t in tags)
        self.assertEqual(done["ETag"], '"%s-3"' % hashlib.md5(md5s).hexdigest())
        whole = p1 + p2 + p3
        got = self.s3.get_object(Bucket=b, Key="mp")
        self.assertEqual(got["Body"].read(), whole)
        self.assertEqual(got["ContentType"], "video/x-test")
        self.assertEqual(got["Metadata"], {"kind": "multi"})
        span = self.s3.get_object(Bucket=b, Key="mp", Range="bytes=%d-%d" % (len(p1) - 5, len(p1) + len(p2) + 5))
        self.assertEqual(span["Body"].read(), whole[len(p1) - 5:len(p1) + len(p2) + 6])
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.list_parts(Bucket=b, Key="mp", UploadId=uid)
        self.assertEqual(code(e.exception), "NoSuchUpload")
        # An aborted upload is gone with its parts.
        up = self.s3.create_multipart_upload(Bucket=b, Key="gone")
        self.s3.upload_part(Bucket=b, Key="gone", UploadId=up["UploadId"], PartNumber=1, Body=b"x" * 100)
        self.s3.abort_multipart_upload(Bucket=b, Key="gone", UploadId=up["UploadId"])
        with self.assertRaises(botocore.exceptions.ClientError) as e:
            self.s3.upload_part(Bucket=b, Key="gone", UploadId=up["UploadId"], PartNumber=2, Body=b"y")
        self.assertEqual(code(e.exception), "NoSuchUpload")
        # boto3's own multipart transfer.
        from boto3.s3.transfer import TransferConfig
        import io
        data = os.urandom(12 * mib + 5)
        cfg = TransferConfig(multipart_threshold=5 * mib, multipart_chunksize=5 * mib)
        self.s3.upload_fileobj(io.BytesIO(data), b, "transfer", Config=cfg)
        out = io.BytesIO()
        self.s3.download_fileobj(b, "transfer", out, Config=cfg)
        self.assertEqual(out.getvalue(), data)
        self.assertTrue(self.s3.head_object(Bucket=b, Key="transfer")["ETag"].endswith('-3"'))
        # Deleted, their parts' data is collected (s3.rs counts what is left).
        for k in ["mp", "transfer", "src"]:
            self.s3.delete_object(Bucket=b, Key=k)

    def test_virtual_hosted(self):
        dom = os.environ.get("S3_DOMAIN")
        if not dom:
            self.skipTest("the gateway serves no domain")
        self.s3.put_object(Bucket=self.bucket, Key="vhost", Body=b"virtual")
        u = urllib.parse.urlsplit(ENDPOINT)
        vc = client(endpoint="%s://%s:%d" % (u.scheme, dom, u.port), addressing="virtual")
        url = urllib.parse.urlsplit(vc.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": "vhost"}, ExpiresIn=60))
        self.assertEqual(url.hostname, "%s.%s" % (self.bucket, dom))
        # Sent to the gateway's address with the bucket's name as Host.
        if u.scheme == "https":
            conn = http.client.HTTPSConnection(u.hostname, u.port, context=TLS)
        else:
            conn = http.client.HTTPConnection(u.hostname, u.port)
        conn.request("GET", url.path + "?" + url.query, headers={"Host": url.netloc})
        r = conn.getresponse()
        self.assertEqual((r.status, r.read()), (200, b"virtual"))

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
            urllib.request.urlopen("%s/%s/x" % (ENDPOINT, self.bucket), context=TLS)
        self.assertEqual(e.exception.code, 403)
        # Canned ACLs: a public-read object is open to anonymous reads; a
        # public-read bucket to anonymous listing (and only that).
        self.s3.put_object(Bucket=self.bucket, Key="open", Body=b"for all", ACL="public-read")
        got = urllib.request.urlopen("%s/%s/open" % (ENDPOINT, self.bucket), context=TLS).read()
        self.assertEqual(got, b"for all")
        pub = "pub-%d" % os.getpid()
        self.s3.create_bucket(Bucket=pub, ACL="public-read")
        self.s3.put_object(Bucket=pub, Key="k", Body=b"v")
        listing = urllib.request.urlopen("%s/%s?list-type=2" % (ENDPOINT, pub), context=TLS).read()
        self.assertIn(b"<Key>k</Key>", listing)
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen("%s/%s/k" % (ENDPOINT, pub), context=TLS)
        self.assertEqual(e.exception.code, 403, "a private object in a public bucket")
        put = urllib.request.Request("%s/%s/new" % (ENDPOINT, pub), data=b"x", method="PUT")
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(put, context=TLS)
        self.assertEqual(e.exception.code, 403)
        self.s3.delete_object(Bucket=pub, Key="k")
        self.s3.delete_bucket(Bucket=pub)
        # Presigned URLs: good until they expire, and may ask for other
        # response headers.
        self.s3.put_object(Bucket=self.bucket, Key="shared", Body=b"presigned")
        url = self.s3.generate_presigned_url("get_object", Params={"Bucket": self.bucket, "Key": "shared"},
                                             ExpiresIn=60)
        self.assertEqual(urllib.request.urlopen(url, context=TLS).read(), b"presigned")
        url = self.s3.generate_presigned_url("get_object", ExpiresIn=60, Params={
            "Bucket": self.bucket, "Key": "shared", "ResponseContentDisposition": "attachment; filename=x.txt"})
        r = urllib.request.urlopen(url, context=TLS)
        self.assertEqual(r.headers["Content-Disposition"], "attachment; filename=x.txt")
        url = self.s3.generate_presigned_url("get_object", Params={"Bucket": self.bucket, "Key": "shared"},
                                             ExpiresIn=1)
        time.sleep(2)
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url, context=TLS)
        self.assertEqual(e.exception.code, 403)
        self.assertIn(b"AccessDenied", e.exception.read())


if __name__ == "__main__":
    unittest.main(verbosity=2)
