"""param_digest.py OUT SCRIPT [ARGS...]: runs SCRIPT as __main__ (what
`python SCRIPT ARGS` does) and, when it returns, writes the SHA-256 of the
parameters of the first torch optimizer it made to OUT.<rank>, so that a test
can check that the ranks of a real training script ended with identical
parameters without changing the script. The rank is RANK or RING_RANK."""
import hashlib
import os
import runpy
import sys

import torch

made = []
_init = torch.optim.Optimizer.__init__


def _remember(self, *args, **kwargs):
    _init(self, *args, **kwargs)
    made.append(self)


torch.optim.Optimizer.__init__ = _remember
out, script = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[2:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
runpy.run_path(script, run_name="__main__")
if not made:
    sys.exit("param_digest: %s made no torch optimizer" % script)
h = hashlib.sha256()
count = 0
for group in made[0].param_groups:
    for p in group["params"]:
        h.update(p.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        count += p.numel()
rank = os.environ.get("RANK", os.environ.get("RING_RANK", "0"))
with open("%s.%s" % (out, rank), "w") as f:
    f.write("%s %d\n" % (h.hexdigest(), count))
