"""The Python binding against a live cluster (run by
crates/cli/tests/python.rs, which starts the cluster and sets LOLIGO_CONF).

Covers what python-rados users reach for: connecting with a config and
keyring, pools, object I/O, xattrs, listing, omap through compound ops,
asserts that refuse and change nothing, object class methods, the
key-value store, threads sharing one handle, and the errors each misuse
raises.
"""
import os
import threading
import unittest

import loligo

CONF = os.environ["LOLIGO_CONF"]
POOL = "pybind"


def setUpModule():
    with loligo.Rados(conffile=CONF) as c:
        if not c.pool_exists(POOL):
            c.create_pool(POOL, pg_num=8, size=1)


class Connect(unittest.TestCase):
    def test_states_and_context_manager(self):
        r = loligo.Rados(conffile=CONF)
        self.assertEqual(r.state, "configuring")
        with self.assertRaises(loligo.RadosStateError):
            r.list_pools()
        r.connect()
        self.assertEqual(r.state, "connected")
        self.assertIn(POOL, r.list_pools())
        io = r.open_ioctx(POOL)
        io.write_full("before-shutdown", b"x")
        r.shutdown()
        self.assertEqual(r.state, "shutdown")
        with self.assertRaises(loligo.RadosStateError):
            r.open_ioctx(POOL)
        # What was opened through the handle goes with it.
        with self.assertRaises(loligo.RadosStateError):
            io.read("before-shutdown")

    def test_config_from_environment(self):
        # LOLIGO_CONF names the config when no conffile is given.
        with loligo.Rados() as c:
            self.assertTrue(c.pool_exists(POOL))

    def test_bad_configs_are_refused(self):
        with self.assertRaises(loligo.InvalidArgumentError):
            loligo.Rados(conffile="/nonexistent/loligo.conf")
        with self.assertRaises(loligo.InvalidArgumentError):
            loligo.Rados(conffile=CONF, conf={"no_such_option": "1"})
        with self.assertRaises(loligo.InvalidArgumentError):
            loligo.Rados(conffile=CONF, op_timeout=0)
        with self.assertRaises(loligo.InvalidArgumentError):
            loligo.Rados(conffile=CONF, op_timeout=1e300)
        with self.assertRaises(loligo.InvalidArgumentError):
            loligo.Rados(conffile=CONF, conf={"rados_osd_op_timeout": "nan"})
        with self.assertRaises(loligo.InvalidArgumentError):
            loligo.Rados(conffile=CONF, keyring="/nonexistent/keyring").connect()

    def test_mon_host_without_a_file(self):
        # The monitors named in conf=, with the keyring the config names.
        try:
            import tomllib
        except ImportError:  # Python < 3.11
            self.skipTest("tomllib needs Python 3.11")

        with open(CONF, "rb") as f:
            conf = tomllib.load(f)
        opts = {"mon_host": ",".join(conf["mon_addrs"]), "rados_osd_op_timeout": "10"}
        if "keyring" in conf:
            opts["keyring"] = os.path.join(os.path.dirname(CONF), conf["keyring"])
        with loligo.Rados(conf=opts) as c:
            self.assertTrue(c.pool_exists(POOL))


class Pools(unittest.TestCase):
    def setUp(self):
        self.c = loligo.Rados(conffile=CONF)
        self.c.connect()

    def tearDown(self):
        self.c.shutdown()

    def test_create_list_lookup_delete(self):
        if self.c.pool_exists("pybind-tmp"):  # left by an earlier run
            self.c.delete_pool("pybind-tmp")
        self.c.create_pool("pybind-tmp", pg_num=4, size=1)
        self.assertTrue(self.c.pool_exists("pybind-tmp"))
        self.assertIn("pybind-tmp", self.c.list_pools())
        pid = self.c.pool_lookup("pybind-tmp")
        with self.c.open_ioctx("pybind-tmp") as io:
            self.assertEqual(io.get_pool_id(), pid)
            self.assertEqual(io.name, "pybind-tmp")
            io.write_full("x", b"y")
        with self.assertRaises(loligo.ObjectExists):
            self.c.create_pool("pybind-tmp", pg_num=4, size=1)
        self.c.delete_pool("pybind-tmp")
        self.assertFalse(self.c.pool_exists("pybind-tmp"))
        self.assertIsNone(self.c.pool_lookup("pybind-tmp"))
        with self.assertRaises(loligo.ObjectNotFound):
            self.c.open_ioctx("pybind-tmp")
        with self.assertRaises(loligo.ObjectNotFound):
            self.c.delete_pool("pybind-tmp")

    def test_stats_and_status(self):
        s = self.c.get_cluster_stats()
        for k in ("kb", "kb_used", "kb_avail", "num_objects"):
            self.assertIsInstance(s[k], int)
        self.assertGreater(s["kb"], 0)
        st = self.c.status()
        self.assertGreater(st["pgs"]["total"], 0)
        self.assertEqual(st["osdmap"]["num_osds"], st["osdmap"]["num_up_osds"])
        with self.c.open_ioctx(POOL) as io:
            p = io.get_stats()
            self.assertEqual(set(p), {"num_bytes", "num_kb", "num_objects"})
        self.c.wait_for_latest_osdmap()
        self.assertGreater(self.c.osdmap_epoch(), 0)


class Objects(unittest.TestCase):
    def setUp(self):
        self.c = loligo.Rados(conffile=CONF)
        self.c.connect()
        self.io = self.c.open_ioctx(POOL)

    def tearDown(self):
        self.io.close()
        self.c.shutdown()

    def test_write_read_stat_truncate_remove(self):
        io = self.io
        io.write_full("obj", b"hello world")
        self.assertEqual(io.read("obj"), b"hello world")
        self.assertEqual(io.read("obj", 5, 6), b"world")
        io.write("obj", b"HELLO")
        io.append("obj", b"!")
        self.assertEqual(io.read("obj"), b"HELLO world!")
        size, version = io.stat("obj")
        self.assertEqual(size, 12)
        self.assertEqual(len(version), 2)
        io.trunc("obj", 5)
        self.assertEqual(io.read("obj"), b"HELLO")
        self.assertEqual(io.read("obj", 0), b"")
        self.assertTrue(io.remove_object("obj"))
        with self.assertRaises(loligo.ObjectNotFound):
            io.read("obj")
        with self.assertRaises(loligo.ObjectNotFound):
            io.read("obj", 0)
        with self.assertRaises(loligo.ObjectNotFound):
            io.stat("obj")
        with self.assertRaises(loligo.ObjectNotFound):
            io.remove_object("obj")

    def test_large_objects_and_bytearrays(self):
        blob = os.urandom(5 << 20)
        self.io.write_full("big", blob)
        # python-rados reads 8192 bytes unless told how many.
        self.assertEqual(self.io.read("big"), blob[:8192])
        self.assertEqual(self.io.read("big", len(blob)), blob)
        buf = bytearray(b"abc")
        self.io.write_full("ba", buf)
        buf[0] = ord("z")  # a later change does not reach the stored copy
        self.assertEqual(self.io.read("ba"), b"abc")
        with self.assertRaises(TypeError):
            self.io.write_full("s", "text is not bytes")
        self.io.remove_object("big")
        self.io.remove_object("ba")

    def test_xattrs(self):
        io = self.io
        io.write_full("xa", b"")
        io.set_xattr("xa", "colour", b"blue")
        io.set_xattr("xa", "size", b"\x00\x01")
        self.assertEqual(io.get_xattr("xa", "colour"), b"blue")
        self.assertEqual(dict(io.get_xattrs("xa")), {"colour": b"blue", "size": b"\x00\x01"})
        io.rm_xattr("xa", "colour")
        with self.assertRaises(loligo.NoData):
            io.get_xattr("xa", "colour")
        self.assertEqual(dict(io.get_xattrs("xa")), {"size": b"\x00\x01"})
        io.remove_object("xa")

    def test_alloc_hint(self):
        io = self.io
        flags = loligo.LIBRADOS_ALLOC_HINT_FLAG_COMPRESSIBLE | loligo.LIBRADOS_ALLOC_HINT_FLAG_SEQUENTIAL_READ
        self.assertEqual(flags, 256 | 4)
        io.set_alloc_hint("hinted", 4 << 20, 64 << 10, flags)
        # The hint made the object, and is not a client's xattr.
        self.assertEqual(io.stat("hinted")[0], 0)
        self.assertEqual(dict(io.get_xattrs("hinted")), {})
        with loligo.WriteOpCtx() as op:
            op.set_alloc_hint(1 << 20, 4096)
            op.write_full(b"data")
            io.operate_write_op(op, "hinted")
        self.assertEqual(io.read("hinted"), b"data")
        with self.assertRaises(loligo.InvalidArgumentError):
            io.set_alloc_hint("hinted", 0, 0, 1 << 20)
        io.remove_object("hinted")

    def test_list_objects(self):
        names = {"list-%d" % i for i in range(40)}
        for n in names:
            self.io.write_full(n, n.encode())
        listed = {o.key for o in self.io.list_objects() if o.key.startswith("list-")}
        self.assertEqual(listed, names)
        o = next(o for o in self.io.list_objects() if o.key == "list-7")
        self.assertEqual(o.read(), b"list-7")
        self.assertEqual(o.nspace, "")
        self.assertEqual(o.stat()[0], 6)
        for n in names:
            self.io.remove_object(n)

    def test_closed_ioctx_refuses(self):
        io = self.c.open_ioctx(POOL)
        io.close()
        with self.assertRaises(loligo.IoctxStateError):
            io.read("anything")

    def test_threads_share_one_handle(self):
        errors = []

        def work(t):
            try:
                for i in range(25):
                    k = "t%d-%d" % (t, i)
                    self.io.write_full(k, k.encode() * 100)
                    if self.io.read(k, 1 << 20) != k.encode() * 100:
                        errors.append(k)
                    self.io.remove_object(k)
            except Exception as e:  # noqa: BLE001 (collected, then failed on)
                errors.append(repr(e))

        threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])


class Omap(unittest.TestCase):
    def setUp(self):
        self.c = loligo.Rados(conffile=CONF)
        self.c.connect()
        self.io = self.c.open_ioctx(POOL)

    def tearDown(self):
        try:
            self.io.remove_object("om")
        except loligo.ObjectNotFound:
            pass
        self.io.close()
        self.c.shutdown()

    def vals(self, start_after="", prefix="", n=100):
        with loligo.ReadOpCtx() as op:
            it, ret = self.io.get_omap_vals(op, start_after, prefix, n)
            self.assertEqual(ret, 0)
            self.assertEqual(list(it), [])  # filled only once the op runs
            self.io.operate_read_op(op, "om")
            return list(it)

    def test_set_get_remove_clear(self):
        keys = ("a1", "a2", "b1", "b2", "c1")
        with loligo.WriteOpCtx() as op:
            self.io.set_omap(op, keys, tuple(k.encode() * 2 for k in keys))
            self.io.operate_write_op(op, "om")
        self.assertEqual(self.vals(), [(k, k.encode() * 2) for k in keys])
        self.assertEqual([k for k, _ in self.vals(start_after="a2")], ["b1", "b2", "c1"])
        self.assertEqual([k for k, _ in self.vals(prefix="b")], ["b1", "b2"])
        self.assertEqual([k for k, _ in self.vals(start_after="b1", prefix="b")], ["b2"])
        self.assertEqual([k for k, _ in self.vals(n=2)], ["a1", "a2"])
        self.assertEqual(self.vals(n=0), [])
        with loligo.ReadOpCtx() as op:
            it, _ = self.io.get_omap_keys(op, "", 10)
            by, _ = self.io.get_omap_vals_by_keys(op, ("c1", "zz"))
            self.io.operate_read_op(op, "om")
            self.assertEqual(list(it), [(k, None) for k in keys])
            self.assertEqual(list(by), [("c1", b"c1c1")])
        with loligo.WriteOpCtx() as op:
            self.io.remove_omap_keys(op, ("a1", "b2"))
            self.io.operate_write_op(op, "om")
        self.assertEqual([k for k, _ in self.vals()], ["a2", "b1", "c1"])
        with loligo.WriteOpCtx() as op:
            self.io.clear_omap(op)
            self.io.operate_write_op(op, "om")
        self.assertEqual(self.vals(), [])

    def test_binary_keys_and_mismatched_lists(self):
        with loligo.WriteOpCtx() as op:
            self.io.set_omap(op, (b"\xff\x00", "text"), (b"1", b"2"))
            self.io.operate_write_op(op, "om")
        self.assertEqual(self.vals(), [("text", b"2"), (b"\xff\x00", b"1")])
        with loligo.WriteOpCtx() as op:
            with self.assertRaises(loligo.InvalidArgumentError):
                self.io.set_omap(op, ("a", "b"), (b"1",))
            with self.assertRaises(loligo.InvalidArgumentError):
                self.io.set_omap(op, (3,), (b"1",))


class Compound(unittest.TestCase):
    def setUp(self):
        self.c = loligo.Rados(conffile=CONF)
        self.c.connect()
        self.io = self.c.open_ioctx(POOL)
        for k in ("cw", "cx"):
            try:
                self.io.remove_object(k)
            except loligo.ObjectNotFound:
                pass

    def tearDown(self):
        self.io.close()
        self.c.shutdown()

    def test_all_or_nothing(self):
        io = self.io
        # An assert on a missing object fails the whole op: nothing written.
        op = io.create_write_op()
        op.assert_exists()
        op.write_full(b"data")
        op.set_xattr("v", b"1")
        with self.assertRaises(loligo.ObjectNotFound):
            io.operate_write_op(op, "cw")
        with self.assertRaises(loligo.ObjectNotFound):
            io.stat("cw")
        # Exclusive create: the first succeeds, the second refuses.
        with loligo.WriteOpCtx() as op:
            op.new(1)
            op.write_full(b"first")
            op.set_xattr("v", b"1")
            io.set_omap(op, ("k",), (b"1",))
            io.operate_write_op(op, "cw")
        with loligo.WriteOpCtx() as op:
            op.new(loligo.LIBRADOS_CMPXATTR_OP_EQ)  # any true value
            op.write_full(b"second")
            with self.assertRaises(loligo.ObjectExists):
                io.operate_write_op(op, "cw")
        self.assertEqual(io.read("cw"), b"first")
        # Compare-and-set on an xattr: the given value OP the stored one.
        with loligo.WriteOpCtx() as op:
            op.cmpxattr("v", loligo.LIBRADOS_CMPXATTR_OP_EQ, b"2")
            op.write_full(b"lost")
            with self.assertRaises(loligo.OperationCanceled):
                io.operate_write_op(op, "cw")
        with loligo.WriteOpCtx() as op:
            # As in Ceph: GT holds when the given value is the greater.
            op.cmpxattr("v", loligo.LIBRADOS_CMPXATTR_OP_GT, b"0")
            with self.assertRaises(loligo.OperationCanceled):
                io.operate_write_op(op, "cw")
        with loligo.WriteOpCtx() as op:
            op.cmpxattr("v", loligo.LIBRADOS_CMPXATTR_OP_LT, b"0")
            op.set_xattr("v", b"2")
            op.append(b"+")
            io.operate_write_op(op, "cw")
        self.assertEqual(io.read("cw"), b"first+")
        with loligo.WriteOpCtx() as op:
            op.cmpxattr("v", loligo.LIBRADOS_CMPXATTR_OP_LT, b"9")
            with self.assertRaises(loligo.OperationCanceled):
                io.operate_write_op(op, "cw")
            with self.assertRaises(loligo.InvalidArgumentError):
                op.cmpxattr("v", 99, b"9")
        # An omap compare (as Ceph's: the stored value OP the given one)
        # and a version assert.
        with loligo.WriteOpCtx() as op:
            op.omap_cmp("k", b"2", loligo.LIBRADOS_CMPXATTR_OP_GT)  # "1" > "2"
            with self.assertRaises(loligo.OperationCanceled):
                io.operate_write_op(op, "cw")
            with self.assertRaises(loligo.InvalidArgumentError):
                op.omap_cmp("k", b"2", loligo.LIBRADOS_CMPXATTR_OP_GTE)
        with loligo.WriteOpCtx() as op:
            op.omap_cmp("k", b"2", loligo.LIBRADOS_CMPXATTR_OP_LT)  # "1" < "2"
            op.omap_cmp("k", b"1", loligo.LIBRADOS_CMPXATTR_OP_EQ)
            op.truncate(2)
            io.operate_write_op(op, "cw")
        self.assertEqual(io.read("cw"), b"fi")
        _, version = io.stat("cw")
        io.append("cw", b"x")
        with loligo.WriteOpCtx() as op:
            op.assert_version(version)
            op.remove()
            with self.assertRaises(loligo.OperationCanceled):
                io.operate_write_op(op, "cw")
        _, now = io.stat("cw")
        with loligo.WriteOpCtx() as op:
            op.assert_version(now)
            op.zero(0, 1)
            io.operate_write_op(op, "cw")
        self.assertEqual(io.read("cw"), b"\x00ix")
        with loligo.ReadOpCtx() as op:
            op.assert_version(version)
            with self.assertRaises(loligo.OperationCanceled):
                io.operate_read_op(op, "cw")
        with loligo.WriteOpCtx() as op:
            op.remove()
            io.operate_write_op(op, "cw")
        with self.assertRaises(loligo.ObjectNotFound):
            io.stat("cw")

    def test_object_class_methods(self):
        with self.assertRaises(loligo.NotSupported):
            self.io.execute("cx", "nosuchclass", "nosuchmethod", b"")


class KeyValue(unittest.TestCase):
    def setUp(self):
        self.c = loligo.Rados(conffile=CONF)
        self.c.connect()
        self.io = self.c.open_ioctx(POOL)

    def tearDown(self):
        self.io.close()
        self.c.shutdown()

    def test_store(self):
        kv = loligo.KvStore.create(self.io, "pykv", k=4)
        self.assertEqual(kv.name, "pykv")
        with self.assertRaises(loligo.ObjectExists):
            loligo.KvStore.create(self.io, "pykv", k=4)
        kv.put("alpha", b"1")
        self.assertEqual(kv.get("alpha"), b"1")
        self.assertIsNone(kv.get("beta"))
        self.assertTrue(kv.insert("beta", b"2"))
        self.assertFalse(kv.insert("beta", b"3"))
        self.assertEqual(kv.get("beta"), b"2")
        kv.put_many([("k%03d" % i, b"v%d" % i) for i in range(50)])
        got = kv.scan("k010", "k015")
        self.assertEqual(got, [(b"k%03d" % i, b"v%d" % i) for i in range(10, 15)])
        self.assertEqual(len(kv.scan(limit=7)), 7)
        self.assertTrue(kv.remove("alpha"))
        self.assertFalse(kv.remove("alpha"))
        s = kv.stats()
        self.assertEqual(s["entries"], 51)
        self.assertGreater(s["nodes"], 1)  # 51 entries in nodes of at most 8
        other = loligo.KvStore.open(self.io, "pykv")
        self.assertEqual(other.get("beta"), b"2")
        self.assertEqual(other.check()["problems"], [])
        kv.destroy()
        with self.assertRaises(loligo.ObjectNotFound):
            loligo.KvStore.open(self.io, "pykv")


if __name__ == "__main__":
    unittest.main(verbosity=2)
