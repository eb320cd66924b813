"""examples/tensorflow as users run them (a short run on the real Fashion-MNIST):

  keras    ring-launch -n 2 -- python fmnist_keras.py: both peers print the same test
           accuracy (their models are identical), above chance
  tf-config  fmnist_tape.py on 2 workers started by hand, each with its TF_CONFIG (the
           cluster of TensorFlow's distributed tutorial, without parameter servers):
           both train and rank 0 reports the accuracy
  mpirun   fmnist_tape.py under Open MPI's mpirun -n 2 (when mpirun is installed)
  porting  fmnist_keras.py differs from fmnist_keras_plain.py in at most 8 code lines
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.environ.get("top_srcdir") or os.path.dirname(os.path.dirname(HERE))
EX = os.path.join(TOP, "examples", "tensorflow")
PY = os.environ.get("RINGD_TEST_PYTHON", sys.executable)
LAUNCH = os.environ.get("RING_LAUNCH", "ring-launch")
n = 0


def line(ok, name, diag=""):
    global n
    n += 1
    print("%s %d - %s" % ("ok" if ok else "not ok", n, name))
    if not ok and diag:
        for ln in str(diag)[-3000:].splitlines():
            print("#   " + ln)


def skip(name, why):
    global n
    n += 1
    print("ok %d - %s # SKIP %s" % (n, name, why))


def run(cmd, env=None, timeout=400):
    e = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS="1", **(env or {}))
    try:
        p = subprocess.run(cmd, cwd=EX, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=timeout, text=True)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as ex:
        return 124, (ex.stdout or "") if isinstance(ex.stdout, str) else ""


def accuracies(out):
    return [float(a) for a in re.findall(r"test accuracy ([0-9.]+) %", out)]


def free_ports(k):
    socks = [socket.socket() for _ in range(k)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


if not os.path.exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz") and \
        not os.environ.get("FMNIST"):
    print("1..0 # SKIP no Fashion-MNIST: apt-get install dataset-fashion-mnist")
    sys.exit(0)

small = ["--epochs", "1", "--limit", "6000"]
rc, out = run([LAUNCH, "-n", "2", "--timeout", "300", "--", PY, "fmnist_keras.py"] + small)
acc = accuracies(out)
line(rc == 0 and len(acc) == 2 and acc[0] == acc[1] and acc[0] > 50,
     "keras: ring-launch -n 2 -- fmnist_keras.py: both peers end with the same test accuracy "
     "(%s %%)" % acc, out)

ports = free_ports(2)
cluster = {"worker": ["127.0.0.1:%d" % p for p in ports]}
procs = []
for i in range(2):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS="1",
               TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}))
    procs.append(subprocess.Popen([PY, "fmnist_tape.py"] + small, cwd=EX, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, text=True))
outs, codes = [], []
for p in procs:
    try:
        o, _ = p.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        p.kill()
        o, _ = p.communicate()
    outs.append(o)
    codes.append(p.returncode)
acc = accuracies(outs[0])
line(codes == [0, 0] and len(acc) == 1 and acc[0] > 50 and "average over 2 workers" in outs[0],
     "tf-config: fmnist_tape.py on 2 workers from TF_CONFIG: both exit 0, rank 0 reports "
     "%s %%" % acc, "\n".join(outs))

mpirun = shutil.which("mpirun")
if mpirun is None:
    skip("mpirun: fmnist_tape.py under mpirun -n 2", "no mpirun (apt-get install openmpi-bin)")
else:
    cmd = [mpirun, "--oversubscribe", "-n", "2"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    rc, out = run(cmd + ["-x", "PYTHONPATH", "-x", "TF_CPP_MIN_LOG_LEVEL", PY,
                         "fmnist_tape.py"] + small)
    acc = accuracies(out)
    line(rc == 0 and len(acc) == 1 and "average over 2 workers" in out,
         "mpirun: fmnist_tape.py under mpirun -n 2: exit 0, one report of %s %%" % acc, out)

plain = open(os.path.join(EX, "fmnist_keras_plain.py")).read().split('"""', 2)[2].splitlines()
ring = open(os.path.join(EX, "fmnist_keras.py")).read().split('"""', 2)[2].splitlines()
import difflib  # noqa: E402
changed = [d for d in difflib.unified_diff(plain, ring, lineterm="", n=0)
           if d[:1] in "+-" and not d.startswith(("+++", "---"))]
added = sum(1 for d in changed if d.startswith("+"))
line(added <= 8, "porting: fmnist_keras.py adds or changes %d code lines of the plain "
     "script (at most 8)" % added, "\n".join(changed))
print("1..%d" % n)
