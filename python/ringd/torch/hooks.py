"""A DDP communication hook that averages DDP's gradient buckets over ringd:

    ringd.init()
    model = DDP(model, process_group=...)        # gloo, or the "ringd" backend
    model.register_comm_hook(None, ringd.torch.allreduce_hook)

DDP launches its buckets in index order on every peer, which is the order
ringd needs. The hook starts the allreduce and returns at once; the future
completes when ringd's progress thread has finished it. A non-finite average
comes back as it is (the same inf/NaN on every peer) with a warning, for
GradScaler or the caller to skip the step.
"""
from . import _completer
import ringd


class HookState:
    """Optional state for allreduce_hook: codec None (the communicator's) or
    "exact" (fp32 whatever the codec)."""

    def __init__(self, codec=None):
        self.codec = codec
        self.allreduces = 0


def allreduce_hook(state, bucket):
    buf = bucket.buffer()
    codec = state.codec if isinstance(state, HookState) else None
    if isinstance(state, HookState):
        state.allreduces += 1
    _completer.raise_failure_at_end_of_backward()
    handles = _completer.start_or_fail(
        lambda: [ringd.allreduce_async(buf, op="avg", codec=codec, tensor_id=bucket.index())])
    return _completer.future_of(handles, buf)
