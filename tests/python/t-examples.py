"""examples/pytorch: the porting diff docs/pytorch.md shows is the real one and
stays small, and the examples run under ring-launch on a small slice:

  1. fmnist_cnn.py differs from fmnist_cnn_plain.py in <= 10 lines of code (the
     module docstrings aside), and docs/pytorch.md's porting diff
     has exactly those + and - lines; the same for the realistic script
     fmnist_resume.py (clipping, accumulation, checkpoints; <= 30 lines), whose
     count docs/pytorch.md states
  2. fmnist_cnn_plain.py trains one epoch on 3000 images alone
  3. fmnist_cnn.py does under ring-launch -n 2, and learns (test accuracy > 0.5)
  4. synthetic_mlp.py runs with the ringd, ddp-gloo and ddp-ringd backends (-n 2), and
     with ddp-ringd-hook under mpirun -np 2 (init_process_group("gloo"), then ringd.init())
  5. fmnist_ssp.py's model is ringd's fmnist-mlp as initialised there (He normal
     weights, zero biases), and the sync-vs-stale experiment runs bounded under
     ring-launch -n 2 with jitter, writing its summary

TAP on stdout; every run has a time limit.
"""
import difflib
import json
import math
import os
import re
import shutil
import ringtest  # free_ports: below the ephemeral range
import subprocess
import sys

top = os.environ.get("top_srcdir", os.path.join(os.path.dirname(__file__), "..", ".."))
ex = os.path.join(top, "examples", "pytorch")
launch = os.environ.get("RING_LAUNCH", "ring-launch")
python = os.environ.get("RINGD_TEST_PYTHON", sys.executable)
n = 0
failed = 0


def ok(cond, name, diag=""):
    global n, failed
    n += 1
    failed += not cond
    print("%s %d - %s" % ("ok" if cond else "not ok", n, name))
    if not cond and diag:
        for line in str(diag).rstrip().splitlines()[-30:]:
            print("#   " + line)
    sys.stdout.flush()


def code_lines(path):
    """The file's lines after its module docstring."""
    text = open(path).read()
    m = re.match(r'\s*""".*?"""\n', text, re.S)
    return text[m.end() if m else 0:].splitlines()


def changed(a, b):
    return [d for d in difflib.unified_diff(a, b, lineterm="", n=0)
            if d[:1] in "+-" and not d.startswith(("+++", "---"))]


warned = []  # the Python warnings the runs printed (torch 2.x's deprecations above all)


def run(cmd, timeout):
    try:
        p = subprocess.run(cmd, cwd=ex, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout, text=True,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
        rc, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        rc, out = "timeout", (e.stdout or b"").decode(errors="replace") if isinstance(
            e.stdout, bytes) else (e.stdout or "")
    script = next((os.path.basename(c) for c in cmd if c.endswith(".py")), cmd[0])
    warned.extend("%s: %s" % (script, w) for w in ringtest.printed_warnings(out))
    return rc, out


try:
    import torch  # noqa: F401
except ImportError as e:
    print("1..0 # SKIP no PyTorch (%s): apt-get install python3-torch" % e)
    sys.exit(0)

diff = changed(code_lines(os.path.join(ex, "fmnist_cnn_plain.py")),
               code_lines(os.path.join(ex, "fmnist_cnn.py")))
ok(0 < len(diff) <= 10, "porting fmnist_cnn_plain.py to ringd changes %d lines of code (<= 10)"
   % len(diff), "\n".join(diff))
readme = open(os.path.join(top, "docs", "pytorch.md")).read()
block = re.search(r"<!-- porting-diff -->\n```diff\n(.*?)```", readme, re.S)
shown = [ln for ln in (block.group(1).splitlines() if block else [])
         if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
ok(shown == diff, "docs/pytorch.md's porting diff is the examples' real diff",
   "docs/pytorch.md:\n%s\nreal:\n%s" % ("\n".join(shown), "\n".join(diff)))

# the realistic script (t-torch-script.py runs it): its diff in docs/pytorch.md is the real one
diff = changed(code_lines(os.path.join(ex, "fmnist_resume_plain.py")),
               code_lines(os.path.join(ex, "fmnist_resume.py")))
block = re.search(r"<!-- porting-diff-resume -->\n```diff\n(.*?)```", readme, re.S)
shown = [ln for ln in (block.group(1).splitlines() if block else [])
         if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
ok(shown == diff and len(diff) <= 30, "docs/pytorch.md's porting diff of fmnist_resume.py is its "
   "real diff (%d lines <= 30)" % len(diff),
   "docs/pytorch.md:\n%s\nreal:\n%s" % ("\n".join(shown), "\n".join(diff)))
count = re.search(r"<!-- porting-diff-resume-lines -->(\d+)", readme)
ok(count is not None and int(count.group(1)) == len(diff),
   "docs/pytorch.md states that diff's line count (%d)" % len(diff),
   count.group(0) if count else "no <!-- porting-diff-resume-lines --> N in docs/pytorch.md")

small = ["--epochs", "1", "--limit", "3000", "--width", "8,16,64", "--batch", "32"]
rc, out = run([python, "fmnist_cnn_plain.py"] + small, 300)
ok(rc == 0 and "test accuracy" in out, "fmnist_cnn_plain.py trains an epoch alone", out)

rc, out = run([launch, "-n", "2", "--timeout", "300", "--", python, "fmnist_cnn.py"] + small, 320)
acc = re.findall(r"test accuracy ([0-9.]+)", out)
ok(rc == 0 and len(acc) == 1 and float(acc[0]) > 0.5,
   "fmnist_cnn.py under ring-launch -n 2: one epoch, rank 0 reports test accuracy %s > 0.5"
   % (acc[0] if acc else "?"), out)

for backend in ("ringd", "ddp-gloo", "ddp-ringd"):
    port = ringtest.free_ports(1)[0]  # DDP's store port
    rc, out = run(["env", "MASTER_PORT=%d" % port, launch, "-n", "2", "--timeout", "200", "--",
                   python, "synthetic_mlp.py", "--backend", backend, "--width", "256",
                   "--steps", "3"], 220)
    ok(rc == 0 and "samples/s" in out, "synthetic_mlp.py --backend %s under ring-launch -n 2"
       % backend, out)

# the order a DDP user adding ringd's hook writes: init_process_group("gloo"), then
# ringd.init(), under mpirun (ringd meets through gloo's store, not on MASTER_PORT)
mpirun = shutil.which("mpirun")
if mpirun is None:
    print("ok %d - synthetic_mlp.py --backend ddp-ringd-hook under mpirun -np 2 # SKIP no "
          "mpirun (apt-get install openmpi-bin)" % (n + 1))
    n += 1
else:
    port = ringtest.free_ports(1)[0]
    env_vars = ["-x", "MASTER_ADDR=127.0.0.1", "-x", "MASTER_PORT=%d" % port, "-x",
                "PYTHONPATH", "-x", "PYTHONDONTWRITEBYTECODE", "-x", "OMP_NUM_THREADS=1"]
    rc, out = run([mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2"] + env_vars +
                  [python, "synthetic_mlp.py", "--backend", "ddp-ringd-hook", "--width", "256",
                   "--steps", "3"], 200)
    ok(rc == 0 and "samples/s" in out and "Address already in use" not in out,
       "synthetic_mlp.py --backend ddp-ringd-hook under mpirun -np 2 (gloo's store, then "
       "ringd.init())", out)

sys.path.insert(0, ex)
import fmnist_ssp  # noqa: E402

torch.manual_seed(3)
lin = [m for m in fmnist_ssp.mlp() if isinstance(m, torch.nn.Linear)]
stds = [(m.weight.std().item(), math.sqrt(2.0 / m.in_features)) for m in lin]
ok(len(lin) == 3 and all(abs(got / want - 1) < 0.1 for got, want in stds[:2]) and
   all(m.bias.abs().max().item() == 0 for m in lin),
   "fmnist_ssp.py's MLP starts as ringd's fmnist-mlp: weight std / sqrt(2 / fan_in) = %s, "
   "zero biases" % ", ".join("%.3f" % (got / want) for got, want in stds))

summary = os.path.join(os.environ.get("TMPDIR", "/tmp"), "t-examples-ssp-%d.json" % os.getpid())
rc, out = run([launch, "-n", "2", "--timeout", "200", "--", python, "fmnist_ssp.py", "--mode",
               "bounded", "--staleness", "2", "--epochs", "1", "--train-limit", "3000",
               "--device-ms", "2", "--jitter", "0.2:3", "--eval-every", "5", "--json", summary],
              220)
try:
    s = json.load(open(summary))
    os.unlink(summary)
except (OSError, ValueError) as e:
    s = {"error": str(e)}
ok(rc == 0 and s.get("mode") == "bounded" and s.get("steps", 0) >= 20 and
   s.get("final_acc", 0) > 0.5 and len(s.get("curve", [])) >= 4,
   "fmnist_ssp.py --mode bounded --staleness 2 under ring-launch -n 2 with jitter: %s steps, "
   "test accuracy %s > 0.5, %d snapshots evaluated" % (s.get("steps"), s.get("final_acc"),
                                                        len(s.get("curve", []))),
   "%s\n%s" % (out, s))

ok(not warned, "the example runs printed no Python warning", "\n".join(warned))

print("1..%d" % n)
sys.exit(1 if failed else 0)
