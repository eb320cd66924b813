"""ringd: peer-to-peer ring collectives for numpy arrays and torch tensors (CPU, and CUDA:
allreduce on the device on the caller's stream, the others staged; docs/pytorch.md).

    import numpy as np, ringd
    ringd.init()                      # the launcher's variables, as the ringd program reads them
    g = np.ones(1000, np.float32)
    ringd.allreduce(g, op="avg")      # in place; bitwise identical on every peer
    h = ringd.allreduce_async(g)      # ... compute ...; h.wait() returns g
    ringd.broadcast(w, root=0)        # any dtype, bit for bit
    parts = ringd.allgather(x)        # the peers' x, concatenated in rank order
    ringd.barrier()
    ringd.shutdown()                  # also at interpreter exit

Run N peers with ring-launch -n N -- python3 train.py, mpirun, srun or
torchrun: ringd.init() reads RING_*, Open MPI, Slurm, torchrun and TF_CONFIG
variables (see ringd.launcher()). Without a launcher it makes a ring of one.
Failures raise a ringd.Error naming the peer (PeerError, TimeoutError,
MismatchError, NonFiniteError, ConfigError, ...); a dead peer makes every
other peer raise within the timeout setting, and ringd.elastic lets the
survivors shrink the ring and train on (docs/elastic.md).
"""

from . import _loader

_ringd = _loader.load_extension()
from ._errors import (CanceledError, ConfigError, Error, InternalError, InvalidError, IOError,
                      MismatchError, NoMemoryError, NonFiniteError, NotInitializedError,
                      PeerError, PerformanceWarning, ProtocolError, TimeoutError,
                      UnsupportedError, make_error, parse_message)
from ._runtime import (Handle, allgather, allgather_async, allreduce, allreduce_async, barrier,
                       barrier_async, broadcast, broadcast_async, config, init, is_initialized,
                       launcher, local_rank, local_size, rank, reduce_scatter,
                       reduce_scatter_async, shutdown, size, stats)

from . import elastic  # ringd.elastic: train on when a peer is lost (docs/elastic.md)

__version__ = _ringd.version()

MAX_REQUESTS = _ringd.MAX_REQUESTS


def _error_factory(code, message, where):
    return make_error(code, message, where, _ringd.status_name(code))


_ringd.set_error_factory(_error_factory)

# not in __all__: ringd.TimeoutError and ringd.IOError (subclasses of the builtins of the
# same names), so that `from ringd import *` does not shadow the builtins
__all__ = [
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size", "config",
    "launcher", "stats", "allreduce", "allreduce_async", "broadcast", "broadcast_async",
    "allgather", "allgather_async", "reduce_scatter", "reduce_scatter_async", "barrier",
    "barrier_async", "Handle", "Error", "ConfigError", "InvalidError", "NotInitializedError",
    "PeerError", "MismatchError", "ProtocolError", "NonFiniteError", "NoMemoryError", "UnsupportedError", "CanceledError", "InternalError", "parse_message",
    "MAX_REQUESTS",
]
