"""Fusion buckets: parameters grouped so that many small gradients travel in
a few large allreduces (DDP's and Horovod's tensor fusion), and the requests
in flight, waited for in the order they started (ringd runs requests first
in, first out, at most 16 per communicator). A bucket holds parameters of one
dtype on one device: CUDA parameters are flattened, allreduced and unflattened
on their GPU (one allreduce of device memory per bucket)."""
import collections

import ringd

# RING_MAX_REQUESTS is 16; leave room for the caller's own requests
MAX_IN_FLIGHT = 12


class Bucket:
    """Parameters whose gradients travel together, at offsets in one flat buffer."""
    __slots__ = ("index", "dtype", "device", "params", "numel")

    def __init__(self, index, dtype, device=None):
        self.index = index
        self.dtype = dtype
        self.device = device
        self.params = []  # (parameter, offset, numel)
        self.numel = 0

    def add(self, p):
        self.params.append((p, self.numel, p.numel()))
        self.numel += p.numel()


# a bucket ends early at a pause of backward only when it holds this much already
# (smaller allreduces pay their latency for little overlap; DDP's first bucket is 1 MiB)
BREAK_MIN_BYTES = 1 << 20


def plan_buckets(params, bucket_bytes, breaks=(), break_min=0):
    """Buckets of params, given in the order their gradients are expected to
    arrive, one dtype per bucket, each up to bucket_bytes (a larger parameter
    gets one of its own, and each device its own buckets); a parameter in breaks starts a
    new bucket when the current one holds break_min bytes or more."""
    buckets, current = [], {}
    for p in params:
        key = (p.dtype, p.device)
        b = current.get(key)
        size = p.numel() * p.element_size()
        if b is None or (p in breaks and b.numel * p.element_size() >= break_min) or \
                (b.numel > 0 and b.numel * p.element_size() + size > bucket_bytes):
            b = Bucket(len(buckets), p.dtype, p.device)
            buckets.append(b)
            current[key] = b
        b.add(p)
    return buckets


class InFlight:
    """Allreduce handles of numbered steps, waited for oldest first. A
    non-finite result (ringd.NonFiniteError: every peer gets it for the same
    call) marks its step instead of raising."""

    def __init__(self, limit=MAX_IN_FLIGHT):
        self.limit = limit
        self.queue = collections.deque()  # (step, tag, handle, CUDA stream or None)
        self.nonfinite = set()            # steps with a non-finite result
        self.nonfinite_tags = set()       # and which (step, tag)

    def __len__(self):
        return len(self.queue)

    def _wait_oldest(self):
        step, tag, handle, stream = self.queue.popleft()
        try:
            handle.wait()  # CUDA: the result is ordered on the stream it started on
        except ringd.NonFiniteError:
            self.nonfinite.add(step)
            self.nonfinite_tags.add((step, tag))
        if stream is not None:
            # and on the waiter's (step() may run on another stream than the backward pass
            # that started it)
            import torch
            current = torch.cuda.current_stream(stream.device)
            if current != stream:
                current.wait_stream(stream)

    def add(self, step, handle, tag=None, stream=None):
        """stream: the CUDA stream the handle's allreduce started on (its device memory's),
        None for host memory."""
        self.queue.append((step, tag, handle, stream))

    def make_room(self):
        while len(self.queue) >= self.limit:
            self._wait_oldest()

    def wait_through(self, step):
        """Wait for every handle of steps <= step; True when that step's results are finite."""
        while self.queue and self.queue[0][0] <= step:
            self._wait_oldest()
        finite = step not in self.nonfinite
        self.nonfinite = {s for s in self.nonfinite if s > step}
        self.nonfinite_tags = {(s, t) for s, t in self.nonfinite_tags if s > step}
        return finite

    def wait_tag(self, step, tag):
        """Wait for the handle added with (step, tag) (and the older ones); True when
        its result is finite. wait_through(step) afterwards forgets the step."""
        while any(s == step and t == tag for s, t, _, _ in self.queue):
            self._wait_oldest()
        return (step, tag) not in self.nonfinite_tags

    def steps(self):
        return sorted({s for s, _, _, _ in self.queue})
