"""Fusion buckets: parameters grouped so that many small gradients travel in
a few large allreduces (DDP's and Horovod's tensor fusion), and the requests
in flight, waited for in the order they started (ringd runs requests first
in, first out, at most 16 per communicator)."""
import collections

import ringd

# RING_MAX_REQUESTS is 16; leave room for the caller's own requests
MAX_IN_FLIGHT = 12


class Bucket:
    """Parameters whose gradients travel together, at offsets in one flat buffer."""
    __slots__ = ("index", "dtype", "params", "numel")

    def __init__(self, index, dtype):
        self.index = index
        self.dtype = dtype
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
    gets one of its own); a parameter in breaks starts a new bucket when the
    current one holds break_min bytes or more."""
    buckets, current = [], {}
    for p in params:
        b = current.get(p.dtype)
        size = p.numel() * p.element_size()
        if b is None or (p in breaks and b.numel * p.element_size() >= break_min) or \
                (b.numel > 0 and b.numel * p.element_size() + size > bucket_bytes):
            b = Bucket(len(buckets), p.dtype)
            buckets.append(b)
            current[p.dtype] = b
        b.add(p)
    return buckets


class InFlight:
    """Allreduce handles of numbered steps, waited for oldest first. A
    non-finite result (ringd.NonFiniteError: every peer gets it for the same
    call) marks its step instead of raising."""

    def __init__(self, limit=MAX_IN_FLIGHT):
        self.limit = limit
        self.queue = collections.deque()  # (step, tag, handle)
        self.nonfinite = set()            # steps with a non-finite result
        self.nonfinite_tags = set()       # and which (step, tag)

    def __len__(self):
        return len(self.queue)

    def _wait_oldest(self):
        step, tag, handle = self.queue.popleft()
        try:
            handle.wait()
        except ringd.NonFiniteError:
            self.nonfinite.add(step)
            self.nonfinite_tags.add((step, tag))

    def add(self, step, handle, tag=None):
        self.queue.append((step, tag, handle))

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
        while any(s == step and t == tag for s, t, _ in self.queue):
            self._wait_oldest()
        return (step, tag) not in self.nonfinite_tags

    def steps(self):
        return sorted({s for s, _, _ in self.queue})
