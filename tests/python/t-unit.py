"""The ringd package on its own (a ring of one, plus a few short-lived helper processes):
the error-message parser, the exception hierarchy, init's settings and launchers,
ConfigError, bad input (non-contiguous, wrong dtype, read-only, not on the CPU, wrong
sizes), calls before init and after shutdown."""

import os
import subprocess
import sys

import ringtest

PY = os.environ.get("RINGD_TEST_PYTHON", sys.executable)


def parser_checks(t, ringd):
    cases = [
        ("round 118, reduce-scatter step 3: connection reset by rank 2 (127.0.0.1:29502)",
         2, "127.0.0.1:29502", "round 118, reduce-scatter step 3"),
        ("round 4, allgather step 1: connection reset by peer by rank 3 (10.0.0.4:29500) "
         "(seen by rank 1, reported through rank 2)", 3, "10.0.0.4:29500",
         "round 4, allgather step 1"),
        ("round 7: rank 1 timed out waiting for rank 2 (127.0.0.1:29502), reported through "
         "rank 0", 2, "127.0.0.1:29502", "round 7"),
        ("round 9, reduce-scatter step 0: timed out after 5 s waiting for data from rank 1 "
         "([::1]:29501) (stopped, overloaded or unreachable?)", 1, "[::1]:29501",
         "round 9, reduce-scatter step 0"),
        ("round 2: rank 3 failed (timed out) and stopped the ring", 3, None, "round 2"),
        ("start-up: timed out after 1 s connecting to rank 1 (127.0.0.1:29501): connection "
         "refused; is rank 1 running, and is that its address in RING_PEERS?", 1,
         "127.0.0.1:29501", "start-up"),
        ("settings mismatch with rank 1 (node2:29500): codec differs: rank 0 has fp16, rank 1 "
         "has none", 1, "node2:29500", None),
        ("round 3, reduce-scatter step 0: allreduce arguments differ between rank 1 and rank 0 "
         "(127.0.0.1:29500): rank 1 called allreduce #3 with count 10, float32, sum, tensor id "
         "0; rank 0 called #3 with count 12, float32, sum, tensor id 0", 0, "127.0.0.1:29500",
         "round 3, reduce-scatter step 0"),
        ("round 5 (tensor id 0): the inputs of at least one peer hold inf or NaN, or a sum "
         "overflowed; the result is not finite", None, None, "round 5 (tensor id 0)"),
        ("ring doctor: rank 2 (h2:29502) closed its communicator during the ring doctor (seen "
         "by rank 1)", 2, "h2:29502", "ring doctor"),
        ("between allreduces: connection reset by rank 1 (?)", 1, None, "between allreduces"),
        ("invalid value 'x' for --codec (RING_CODEC): not one of the choices; expected "
         "none|fp16|bf16", None, None, None),
        ("", None, None, None),
    ]
    for msg, peer, addr, phase in cases:
        got = ringd.parse_message(msg)
        want = {"peer_rank": peer, "address": addr, "phase": phase}
        t.eq(got, want, "parse_message: %s" % (msg[:60] or "(empty)"))
    e = ringd.make_error(7, cases[0][0], "call", "RING_ERR_REMOTE")
    t.ok(isinstance(e, ringd.PeerError) and e.peer_rank == 2 and e.address == "127.0.0.1:29502"
         and e.phase == "round 118, reduce-scatter step 3" and e.status == "RING_ERR_REMOTE"
         and e.message == cases[0][0] and str(e) == cases[0][0],
         "a PeerError carries status, message, peer_rank, address and phase", repr(vars(e)))


def hierarchy_checks(t, ringd):
    from ringd import _ringd
    want = {"RING_ERR_TIMED_OUT": ringd.TimeoutError, "RING_ERR_REMOTE": ringd.PeerError,
            "RING_ERR_MISMATCH": ringd.MismatchError, "RING_ERR_PROTOCOL": ringd.ProtocolError,
            "RING_ERR_NONFINITE": ringd.NonFiniteError, "RING_ERR_IO": ringd.IOError,
            "RING_ERR_INVALID": ringd.InvalidError, "RING_ERR_UNSUPPORTED":
            ringd.UnsupportedError, "RING_ERR_CANCELED": ringd.CanceledError,
            "RING_ERR_INTERNAL": ringd.InternalError, "RING_ERR_NO_MEMORY": ringd.NoMemoryError}
    bad = []
    for code, name in enumerate(_ringd.STATUS_NAMES):
        if name in want:
            e = ringd.make_error(code, "m", "call", name)
            if type(e) is not want[name] or e.status != name:
                bad.append((name, type(e).__name__, e.status))
    t.ok(not bad and set(want) <= set(_ringd.STATUS_NAMES),
         "every error status maps to its class, with .status its name", bad)
    t.ok(isinstance(ringd.make_error(3, "m", "config", "RING_ERR_INVALID"), ringd.ConfigError)
         and isinstance(ringd.make_error(3, "m", "open", "RING_ERR_INVALID"), ringd.ConfigError)
         and not isinstance(ringd.make_error(3, "m", "call", "RING_ERR_INVALID"),
                            ringd.ConfigError),
         "RING_ERR_INVALID at init is a ConfigError, in a call an InvalidError")
    t.ok(issubclass(ringd.TimeoutError, TimeoutError) and issubclass(ringd.ConfigError,
                                                                     ValueError)
         and issubclass(ringd.PeerError, ringd.Error) and issubclass(ringd.NonFiniteError,
                                                                    ringd.Error)
         and issubclass(ringd.NotInitializedError, RuntimeError),
         "ringd errors are also the matching built-in exceptions")
    names = {}
    exec("from ringd import *", names)
    t.ok(names.get("TimeoutError", TimeoutError) is TimeoutError and "IOError" not in names
         and "PeerError" in names, "from ringd import * shadows no builtin (TimeoutError, "
         "IOError)", sorted(k for k in names if k in dir(__builtins__)))


def config_checks(t, ringd):
    for kw, setting in [({"codec": "fp8"}, "codec"), ({"timeout": "soon"}, "timeout"),
                        ({"chunk_size": "huge"}, "chunk-size"),
                        ({"no_such_setting": 1}, "no-such-setting")]:
        t.raises(ringd.ConfigError, lambda: ringd.init(**kw),
                 "init(%s): ConfigError naming the setting" % kw,
                 lambda e, s=setting: e.setting == s and s in str(e))
    t.raises(ringd.ConfigError, lambda: ringd.init(codc="fp16"),
             "init(codc=...): a typo of a setting is answered with did you mean 'codec'",
             lambda e: "did you mean 'codec'?" in str(e))
    t.raises(ringd.ConfigError, lambda: ringd.init(world_size=2, rank=5),
             "init(world_size=2, rank=5): ConfigError (rank outside the ring)",
             lambda e: "rank" in str(e))
    t.ok(not ringd.is_initialized(), "a failed init leaves ringd uninitialized")

    ringd.init(codec="fp16", timeout="5s", chunk_size="64K", lz4=False)
    cfg = ringd.config()
    t.eq((ringd.rank(), ringd.size(), ringd.local_rank(), ringd.local_size()), (0, 1, 0, 1),
         "no launcher and no world size: a ring of one (rank, size, local rank, local size)")
    t.eq((cfg["codec"], cfg["timeout"], cfg["chunk-size"], cfg["lz4"]),
         ("fp16", "5s", "64K", "off"), "keyword overrides reach the settings")
    t.eq(ringd.config(sources=True)["codec"], ("fp16", "api"), "config(sources=True)")
    if "progress-thread" in cfg:
        t.eq(cfg["progress-thread"], "on", "progress-thread is on by default")
    ringd.init()
    t.ok(ringd.is_initialized(), "init() again while initialized does nothing")
    t.raises(ringd.ConfigError, lambda: ringd.init(codec="bf16"),
             "init(codec=...) while initialized raises")
    ringd.shutdown()
    t.ok(not ringd.is_initialized(), "shutdown")
    os.environ["RING_CODEC"] = "bf16"
    os.environ["RING_PROGRESS_THREAD"] = "off"
    try:
        ringd.init()
        t.eq((ringd.config()["codec"], ringd.config()["progress-thread"]), ("bf16", "off"),
             "RING_* variables are read, and win over init's defaults")
        ringd.shutdown()
        ringd.init(codec="none")
        t.eq(ringd.config()["codec"], "none", "keyword overrides win over RING_* variables")
        ringd.shutdown()
    finally:
        del os.environ["RING_CODEC"]
        del os.environ["RING_PROGRESS_THREAD"]


def run_py(code, env_extra, timeout=60):
    env = {k: v for k, v in os.environ.items() if not k.startswith("RING_")}
    env.update(env_extra)
    p = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout.strip(), p.stderr.strip()


SHOW = ("import ringd; ringd.init(); l = ringd.launcher(); "
        "print(ringd.rank(), ringd.size(), ringd.local_rank(), l['launcher']); "
        "ringd.shutdown()")


def launcher_checks(t):
    port = str(ringtest.free_ports(1)[0])
    rc, out, err = run_py(SHOW, {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
                                 "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                                 "MASTER_PORT": port})
    t.eq((rc, out), (0, "0 1 0 torchrun"), "init under torchrun's variables " + err[-300:])
    rc, out, err = run_py(SHOW, {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1",
                                 "OMPI_COMM_WORLD_LOCAL_RANK": "0",
                                 "OMPI_COMM_WORLD_LOCAL_SIZE": "1", "RING_PORT": port})
    t.eq((rc, out), (0, "0 1 0 openmpi"), "init under Open MPI's variables " + err[-300:])
    rc, out, err = run_py("import ringd\ntry:\n ringd.init()\nexcept ringd.ConfigError as e:\n"
                          " print(type(e).__name__, 'RANK' in str(e))",
                          {"RANK": "abc", "WORLD_SIZE": "2"})
    t.eq((rc, out), (0, "ConfigError True"), "a malformed launcher variable: ConfigError "
         "naming it " + err[-300:])
    # two peers meeting through torchrun's MASTER_ADDR/MASTER_PORT store
    code = ("import ringd, numpy as np; ringd.init(); a = np.ones(5, np.float32); "
            "ringd.allreduce(a); print(ringd.rank(), ringd.size(), ringd.local_rank(), "
            "int(a[0]))")
    port = str(ringtest.free_ports(1)[0])
    procs = []
    for r in range(2):
        env = {k: v for k, v in os.environ.items() if not k.startswith("RING_")}
        env.update({"RANK": str(r), "WORLD_SIZE": "2", "LOCAL_RANK": str(r),
                    "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                    "RING_CONNECT_TIMEOUT": "20s"})
        procs.append(subprocess.Popen([PY, "-c", code], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
        outs.append((p.returncode, o.strip(), e.strip()[-300:]))
    t.eq([o[:2] for o in outs], [(0, "0 2 0 2"), (0, "1 2 1 2")],
         "2 peers under torchrun's variables meet at its store and allreduce %s" % outs)
    # the ring cannot form: a clear TimeoutError naming the missing peer, within the bound
    p0, p1 = ringtest.free_ports(2)
    rc, out, err = run_py(
        "import ringd, time\nt0 = time.monotonic()\ntry:\n"
        " ringd.init(world_size=2, rank=0, peers='127.0.0.1:%d,127.0.0.1:%d', "
        "connect_timeout='1s')\nexcept ringd.Error as e:\n"
        " print(type(e).__name__, e.peer_rank, e.address, e.phase, time.monotonic() - t0 < 15)"
        % (p0, p1), {})
    t.eq((rc, out), (0, "TimeoutError 1 127.0.0.1:%d start-up True" % p1),
         "a peer that never comes: TimeoutError naming it, at start-up " + err[-300:])


# OpenBLAS forced to its generic kernels (as Debian 12's picks on a CPU newer than it),
# then OPENBLAS_CORETYPE removed, so nobody chose: ringd.init() must say so once
BLAS_CODE = """import ctypes, os, warnings
import numpy  # loads OpenBLAS (RTLD_LOCAL, as frameworks do), reading OPENBLAS_CORETYPE
if os.environ.get('T_UNSET') == '1':
    del os.environ['OPENBLAS_CORETYPE']
import ringd
with open('/proc/self/maps') as f:
    libs = sorted({ln.split()[-1] for ln in f if 'openblas' in ln})
# the kernels it runs, asked by the names ringd asks: OpenBLAS's own, or the renamed
# copies of the scipy-openblas builds numpy's and scipy's wheels bundle
core = ''
for p in libs:
    for name in ('openblas_get_corename', 'scipy_openblas_get_corename64_',
                 'scipy_openblas_get_corename'):
        fn = getattr(ctypes.CDLL(p), name, None)
        if fn is not None and not core:
            fn.restype = ctypes.c_char_p
            core = fn().decode()
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter('always')
    ringd.init()
    ringd.shutdown()
said = [str(x.message) for x in w if issubclass(x.category, ringd.PerformanceWarning)]
print(core or '-', len(said), said[0] if said else '', '|', ' '.join(libs))
"""


def blas_checks(t):
    with open("/proc/cpuinfo") as f:
        flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")),
                     [])
    avx2 = "avx2" in flags and "fma" in flags
    rc, out, err = run_py(BLAS_CODE, {"OPENBLAS_CORETYPE": "Prescott", "T_UNSET": "1"})
    core = out.split()[0] if out.split() else "-"
    if core == "-" or not avx2:
        t.skip("init on OpenBLAS's generic kernels", "no AVX2 CPU" if core != "-" else
               "numpy's BLAS is not OpenBLAS here (%s)" % out.split("|")[-1].strip())
    else:
        # forced to Prescott, an OpenBLAS reports its oldest x86-64 kernels under its own
        # name for them (Debian's 0.3.21: Prescott; scipy-openblas: Katmai)
        t.ok(rc == 0 and out.split()[1:2] == ["1"] and "ringd: OpenBLAS" in out and
             "generic %s kernels" % core in out and "OPENBLAS_CORETYPE=" in out,
             "init with OpenBLAS (%s) on its generic kernels and OPENBLAS_CORETYPE unset: one "
             "PerformanceWarning naming the kernels and the value to set" % core,
             out + err[-300:])
    rc, out, err = run_py(BLAS_CODE, {"OPENBLAS_CORETYPE": "Prescott", "T_UNSET": "0"})
    t.ok(rc == 0 and out.split()[1:2] == ["0"],
         "OPENBLAS_CORETYPE set (someone chose): no warning", out + err[-300:])


def input_checks(t, ringd, np, torch):
    a = np.arange(8, dtype=np.float32)
    t.raises(ValueError, lambda: ringd.allreduce(a[::2]), "numpy: non-contiguous: ValueError",
             lambda e: "contiguous" in str(e))
    t.raises(TypeError, lambda: ringd.allreduce(np.arange(4, dtype=np.int32)),
             "numpy: int32 allreduce: TypeError naming the dtype", lambda e: "int32" in str(e))
    t.raises(TypeError, lambda: ringd.allreduce(np.arange(4, dtype=np.float64)),
             "numpy: float64 allreduce: TypeError", lambda e: "float64" in str(e))
    ro = np.ones(4, np.float32)
    ro.flags.writeable = False
    t.raises(ValueError, lambda: ringd.allreduce(ro), "numpy: read-only in place: ValueError",
             lambda e: "read-only" in str(e))
    out = np.zeros(4, np.float32)
    ringd.allreduce(ro, out=out)
    t.ok((out == 1).all(), "numpy: a read-only input with out= is fine")
    t.raises(ValueError, lambda: ringd.allreduce(a, out=np.zeros(5, np.float32)),
             "out= of another size: ValueError")
    t.raises(TypeError, lambda: ringd.allreduce(a, out=np.zeros(8, np.float16)),
             "out= of another dtype: TypeError")
    t.raises(ValueError, lambda: ringd.allreduce(a[:6], out=a[2:]),
             "out= overlapping the input: ValueError", lambda e: "overlap" in str(e))
    t.raises(TypeError, lambda: ringd.allreduce([1.0, 2.0]), "a list: TypeError",
             lambda e: "list" in str(e))
    t.raises(TypeError, lambda: ringd.broadcast(np.ones(3, ">f4")),
             "a big-endian array: TypeError saying so", lambda e: "big-endian" in str(e))
    t.raises(TypeError, lambda: ringd.broadcast(np.array(["2026-01-01"], "datetime64[D]")),
             "a dtype numpy cannot export (datetime64): TypeError with numpy's reason",
             lambda e: "datetime64" in str(e) or "'M'" in str(e))
    t.raises(TypeError, lambda: ringd.allreduce(bytearray(8)),
             "a bytearray allreduce (uint8): TypeError", lambda e: "uint8" in str(e))
    ba = bytearray(b"abc")
    t.ok(ringd.broadcast(ba) is ba and ba == b"abc", "a bytearray broadcast (any buffer)")
    t.raises(TypeError, lambda: ringd.allreduce(np.array([object()] * 3)),
             "numpy object arrays cannot be moved: TypeError")
    t.raises(ValueError, lambda: ringd.allreduce(a, op="max"), "op='max': ValueError")
    t.raises(ValueError, lambda: ringd.allreduce(a, codec="fp16"),
             "a per-call codec other than 'exact': ValueError")
    if torch is None:
        t.skip("torch input checks", "torch is not installed for this Python")
        return
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    t.raises(ValueError, lambda: ringd.allreduce(x.t()), "torch: non-contiguous: ValueError",
             lambda e: "contiguous" in str(e))
    t.raises(TypeError, lambda: ringd.allreduce(torch.arange(4)),
             "torch: int64 allreduce: TypeError naming the dtype", lambda e: "int64" in str(e))
    t.raises(TypeError, lambda: ringd.allreduce(torch.empty(4, device="meta")),
             "torch: a tensor not on the CPU (meta; CUDA takes the same path): TypeError",
             lambda e: "CPU" in str(e) and "meta" in str(e))
    t.raises(TypeError, lambda: ringd.allreduce(torch.ones(4).to_sparse()),
             "torch: a sparse tensor: TypeError")
    # CUDA tensors are taken (allreduce on the device, the others staged): t-cuda-args.py
    # checks their plumbing without a GPU, t-torch-cuda.py on one


class _Boom:
    """A pickle of this runs a command when loaded (what a hostile peer would send)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, ("touch %s" % self.path,))


def object_checks(t, np, torch):
    """broadcast_object's format (ringd._objects.encode_object/decode_object), no pickle:
    values round-trip; bytes it did not make are refused, nothing from them runs, and no
    length in them makes it allocate more than the bytes hold."""
    import pickle
    import struct
    import tempfile
    import time
    from ringd import _objects
    obj = {"a": [1, -2 ** 80, 2.5, None, True, "é", b"\x00"], ("t", 1): {3, 4},
           "np": np.arange(4, dtype=np.float32), "f16": np.float16(1.5)}
    if torch is not None:
        obj.update(x=torch.arange(6, dtype=torch.bfloat16).reshape(2, 3), d=torch.int8,
                   s=torch.Size([1, 2]), e=torch.zeros(0, 2))
    back = _objects.decode_object(_objects.encode_object(obj))
    same = back.keys() == obj.keys() and back["a"] == obj["a"] and back[("t", 1)] == {3, 4} \
        and back["np"].tolist() == [0, 1, 2, 3] and back["f16"] == np.float16(1.5)
    if torch is not None:
        same = same and torch.equal(back["x"], obj["x"]) and back["d"] is torch.int8 and \
            back["s"] == torch.Size([1, 2]) and back["e"].shape == (0, 2)
    t.ok(same, "object format: values round-trip, of their types", repr(back)[:500])
    t.raises(TypeError, lambda: _objects.encode_object({"k": [object()]}),
             "object format: an object it does not send: TypeError naming where",
             lambda e: "['k'][0]" in str(e) and "builtins.object" in str(e))
    mark = os.path.join(tempfile.mkdtemp(prefix="t-unit-"), "ran")
    t.raises(ValueError, lambda: _objects.decode_object(pickle.dumps(_Boom(mark))),
             "object format: a pickle is refused (not its magic)")
    t.ok(not os.path.exists(mark), "object format: ... and nothing in it ran")
    good = _objects.encode_object(obj)
    magic = _objects.OBJECT_MAGIC
    bad = {"truncated": good[:-1], "trailing bytes": good + b"\x00",
           "an unknown tag": magic + b"Q",
           "a list of 2^60 items": magic + b"l" + struct.pack("<Q", 1 << 60),
           "a numpy object array": magic + b"A" + struct.pack("<Q", 2) + b"|O" +
           struct.pack("<QQ", 1, 1) + struct.pack("<Q", 8) + b"\x00" * 8,
           "nested 1000 deep": magic + b"l\x01" + b"\x00" * 7 + (b"l\x01" + b"\x00" * 7) * 999}
    if torch is not None:
        # a tensor of 2^40 floats in 4 bytes: refused before anything is allocated
        bad["a huge tensor shape"] = magic + b"X" + struct.pack("<Q", 7) + b"float32" + \
            struct.pack("<QQ", 1, 1 << 40) + struct.pack("<Q", 4) + b"\x00" * 4
        bad["a dtype that is not one"] = magic + b"D" + struct.pack("<Q", 4) + b"load"
    for what, data in bad.items():
        t0 = time.monotonic()
        t.raises(ValueError, lambda: _objects.decode_object(data),
                 "object format: %s: ValueError" % what,
                 lambda e: time.monotonic() - t0 < 1.0)


def object_fuzz_checks(t, np, torch):
    """The object decoder is fed a peer's bytes: mutated, truncated, spliced and
    extended encodings of real objects either decode or raise ValueError, each in
    well under a second (bounded: 4000 inputs, at most 30 s)."""
    import random
    import time
    from ringd import _objects
    seeds = [{"a": [1, 2.5, None, "x" * 40, b"\x00\x01"], ("k", 1): {3, 4}},
             [np.arange(12, dtype=np.float32).reshape(3, 4), np.int64(7), (1j, False)],
             "", 0, -2 ** 70]
    if torch is not None:
        seeds.append({"w": torch.ones(2, 3, dtype=torch.float16), "d": torch.float32,
                      "s": torch.Size([2, 3]), "v": torch.device("cpu")})
    corpus = [_objects.encode_object(x) for x in seeds]
    rng = random.Random(44)
    other, slow, worst, done = [], 0, 0.0, 0
    deadline = time.monotonic() + 30
    for i in range(4000):
        if time.monotonic() > deadline:
            break
        data = bytearray(rng.choice(corpus))
        op = i % 5
        if op == 0:  # flip bytes
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif op == 1:  # truncate
            del data[rng.randrange(len(data)):]
        elif op == 2:  # splice another encoding's tail
            b = rng.choice(corpus)
            cut = rng.randrange(len(data))
            data = data[:cut] + b[rng.randrange(len(b)):]
        elif op == 3:  # a length or count made huge
            at = rng.randrange(max(1, len(data) - 8))
            data[at:at + 8] = rng.choice([2 ** 63, 2 ** 40, 2 ** 32 - 1, 255]).to_bytes(8, "little")
        else:  # random bytes after the magic
            data = bytearray(_objects.OBJECT_MAGIC) + bytes(rng.randrange(256)
                                                            for _ in range(rng.randint(0, 40)))
        t0 = time.monotonic()
        try:
            _objects.decode_object(bytes(data))
        except ValueError:
            pass
        except Exception as e:  # anything else is a decoder bug
            other.append("%s: %s (input %s)" % (type(e).__name__, e, bytes(data[:60]).hex()))
        took = time.monotonic() - t0
        worst = max(worst, took)
        slow += took > 1.0
        done += 1
    t.ok(done >= 1000 and not other and not slow,
         "object format fuzzed: %d inputs decode or raise ValueError, none slow (worst %.3f s)"
         % (done, worst), "\n".join(other[:10]))


def ring_of_one_checks(t, ringd, np, torch):
    a = np.arange(6, dtype=np.float32)
    t.ok((ringd.allreduce(a.copy()) == a).all() and (ringd.allreduce(a.copy(), op="avg") == a)
         .all(), "a ring of one: allreduce sum and avg leave the tensor as it is")
    h = ringd.allreduce_async(a)
    t.ok(h.wait() is a and h.done(), "allreduce_async: wait() returns the tensor, then done()")
    if torch is not None:
        b = torch.arange(4, dtype=torch.bfloat16)
        t.ok(ringd.allreduce(b) is b and b.tolist() == [0, 1, 2, 3],
             "a ring of one: torch bfloat16 allreduce in place")


def checks(t):
    import numpy as np
    try:
        import torch
    except ImportError:
        torch = None
    import ringd

    # the driver's RING_RANK/RING_WORLD_SIZE/RING_PEERS: this test wants no launcher at all
    for v in [v for v in os.environ if v.startswith("RING_")]:
        del os.environ[v]
    parser_checks(t, ringd)
    hierarchy_checks(t, ringd)
    a = np.ones(3, np.float32)
    t.ok(not ringd.is_initialized(), "not initialized before init()")
    t.raises(ringd.NotInitializedError, lambda: ringd.allreduce(a),
             "allreduce before init: NotInitializedError", lambda e: "init" in str(e))
    t.raises(ringd.NotInitializedError, ringd.rank, "rank() before init: NotInitializedError")
    config_checks(t, ringd)
    launcher_checks(t)
    blas_checks(t)
    ringd.init()
    input_checks(t, ringd, np, torch)
    ring_of_one_checks(t, ringd, np, torch)
    object_checks(t, np, torch)
    object_fuzz_checks(t, np, torch)
    ringd.shutdown()
    ringd.shutdown()
    t.ok(True, "shutdown twice is fine")
    t.raises(ringd.NotInitializedError, lambda: ringd.allreduce(a),
             "allreduce after shutdown: NotInitializedError saying so",
             lambda e: "shutdown" in str(e))
    t.raises(ringd.NotInitializedError, ringd.barrier, "barrier after shutdown")
    ringd.init()
    t.ok(ringd.allreduce(a) is a, "init again after shutdown works")


ringtest.main(checks, worlds=(1,), launcher="env")
