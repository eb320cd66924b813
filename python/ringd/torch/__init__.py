"""ringd.torch - PyTorch on ringd.

Three ways in, from the fewest changed lines to the most familiar:

* ``DistributedOptimizer(optimizer, named_parameters)`` (Horovod's shape):
  gradient hooks fill fusion buckets whose allreduces start during backward;
  ``step()`` waits for them and applies the average. ``staleness=S`` applies
  the average of step t-S while step t's is in flight (Pipe-SGD).
  ``broadcast_parameters`` and ``broadcast_optimizer_state`` start every peer
  from the same state.
* ``model.register_comm_hook(None, ringd.torch.allreduce_hook)`` for a model
  wrapped in DDP over any process group (gloo, or "ringd").
* ``SSP(model, staleness=S)``: bounded-staleness (SSP) or async training through
  libringd's SSP session, the engine of ``ringd --mode bounded|async``: ``with
  ssp.step(): loss.backward()`` waits for the bound and hands the gradient over.
* ``torch.distributed.init_process_group("ringd")`` after ``import
  ringd.torch``: a torch.distributed backend whose float allreduce and
  reduce-scatter, broadcast, allgather and barrier run on ringd (the rest on an
  inner Gloo group), on torch 1.13 to 2.x.
"""
try:
    import torch as _torch  # noqa: F401
except ImportError as _e:  # pragma: no cover - depends on the machine
    raise ImportError(
        "ringd.torch needs PyTorch (Debian: apt-get install python3-torch, then run "
        "/usr/bin/python3): %s" % _e) from None

from .optimizer import (Compression, DistributedOptimizer, broadcast_object,
                        broadcast_optimizer_state, broadcast_parameters)
from .hooks import allreduce_hook, HookState
from .process_group import ProcessGroupRingd, register_backend
from . import process_group as _process_group
from .. import _runtime
from .ssp import SSP
from . import elastic

register_backend()
_runtime._rendezvous_finders.append(_process_group._rendezvous_through_default_group)

__all__ = ["Compression", "DistributedOptimizer", "broadcast_parameters",
           "broadcast_optimizer_state", "broadcast_object", "allreduce_hook", "HookState",
           "ProcessGroupRingd", "register_backend", "SSP", "elastic"]
