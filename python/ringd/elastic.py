"""ringd.elastic: train on when a peer is lost, without restarting anyone
(Horovod's elastic shape, peer to peer; docs/elastic.md).

    state = ringd.torch.elastic.TorchState(model=model, optimizer=opt, step=0)

    @ringd.elastic.run(min_size=2)
    def train(state):
        while state.step < steps:
            ...one step: its collectives may raise the ringd.Error naming a lost peer...
            state.step += 1
            state.commit()          # the point a failure rolls back to

    train(state)

When a collective fails naming a lost peer (PeerError, TimeoutError or IOError with
its peer_rank), the survivors' run() catches it, shrinks the process's ring in place
(ring_comm_shrink: every survivor agrees on who is left, ranks renumbered 0..k-1 in
ring order), restores the last commit, syncs the state from the new rank 0 (the
survivors may have committed different steps: one finished the step the others
failed), calls the reset callbacks with the new size and rank, and calls
train(state) again. No process restarts. Any other exception propagates as it is.

The ring every ringd call uses is the process's one (ringd.init()'s); shrink()
replaces it there, so ringd.allreduce & co., ringd.torch's DistributedOptimizer,
allreduce_hook and the "ringd" process group use the new ring from their next call
without being told. What a State holds that belongs to the old ring (handles of
allreduces in flight) it drops in before_shrink().

Growing: on a ring opened with the elastic setting at a rendezvous store
(ringd.init(elastic=True, rendezvous="tcp://host:port"), or RING_ELASTIC=on and
RING_RENDEZVOUS), a peer started later with the same store and settings asks to join;
its ringd.init() returns once admitted. The members admit it at their next commit()
(ring_comm_grow: a collective; 8 bytes when nobody waits), which then leaves train()
for run() to sync the state from rank 0 to everyone, the joiner included, call the
reset callbacks and call train(state) again. The joiner itself just calls train(state):
run()'s first sync gives it the state.
"""

import collections
import copy
import pickle
import threading
import time


from . import _errors, _objects, _ringd, _runtime

__all__ = ["State", "Change", "run", "shrink", "grow", "has_grow", "is_elastic", "joined",
           "parent_rank", "broadcast_object", "ElasticError", "MinSizeError",
           "TooManyResetsError", "is_lost_peer"]


class ElasticError(_errors.Error):
    """run() stops: the ring cannot go on (too few peers left, too many changes)."""


class MinSizeError(ElasticError):
    """Fewer peers are left than run(min_size=) allows. `size` is how many are left."""
    size = None


class TooManyResetsError(ElasticError):
    """Another peer lost after run(max_resets=) losses survived."""


for _cls in (ElasticError, MinSizeError, TooManyResetsError):
    _cls.__module__ = "ringd.elastic"

_LOST = (_errors.PeerError, _errors.TimeoutError, _errors.IOError)


def is_lost_peer(error):
    """The ringd.Error that names a lost peer in error or its causes (a PeerError,
    TimeoutError or IOError with peer_rank), or None: what shrinking can cure."""
    seen = 0
    while error is not None and seen < 10:
        if isinstance(error, _LOST) and error.peer_rank is not None:
            return error
        error = error.__cause__ or error.__context__
        seen += 1
    return None


_swap_lock = threading.Lock()  # one change of the process's ring at a time


def _take_ring(what):
    return _runtime.take_ring(what)


def _install(old, new):
    _runtime.replace_comm(old, new)


def _lost_ranks(old_size, new):
    kept = {new.parent_rank(r) for r in range(new.size)}
    return tuple(r for r in range(old_size) if r not in kept)


_last_lost = ()  # the ranks (of the ring before) the last shrink left out


def shrink():
    """After a collective failed naming a lost peer, replace the process's ring with the
    ring of the survivors (every survivor calls it; ring_comm_shrink). Returns the new
    ring's report ("shrunk from 4 to 3 peers (lost rank 2 of the old ring) in 0.041 s:
    ..."). ringd.rank() and ringd.size() are the new ring's afterwards. The handles started
    on the old ring fail (they keep its error). Raises the ringd.Error of the shrink: an
    InvalidError when the ring has not failed or its failure names no lost peer, a
    PeerError when the others counted this peer lost (it must leave), a TimeoutError."""
    global _last_lost
    with _swap_lock:
        old = _take_ring("elastic.shrink")
        new = old.shrink()  # blocks with the GIL released, bounded (ringd/elastic.h)
        _last_lost = _lost_ranks(old.size, new)
        _install(old, new)
        return new.shrink_report


def has_grow():
    """Whether this libringd can admit joiners (ring_comm_grow)."""
    return hasattr(_ringd.Comm, "grow")


def is_elastic():
    """Whether the process's ring was opened with the elastic setting (peers may join)."""
    _runtime._require("elastic.is_elastic")
    try:
        return _runtime._config.get("elastic") == "on"
    except _errors.Error:  # a libringd without the setting
        return False


def joined():
    """True in a peer that joined a running ring (its ringd.init() was admitted by the
    members' grow): it has no state of its own yet."""
    comm = _runtime._require("elastic.joined")
    return bool(getattr(comm, "joined", False))


def grow():
    """At a commit point every member of an elastic ring calls it: True when peers joined
    (the process's ring is then the grown one: the members keep their ranks, the joiners
    come after), False when nobody did, or when the ring is not elastic or this libringd
    cannot grow. The handles started on the ring are finished first (a grow needs no
    request in flight)."""
    if not has_grow() or not is_elastic():
        return False
    with _swap_lock:
        old = _take_ring("elastic.grow")
        new = old.grow()
        if new is old:
            return False
        _install(old, new)
        return True


def parent_rank(rank=None):
    """The rank that `rank` (default: this peer's) had in the ring this one was shrunk or
    grown from; -1 when it was not, or for a joiner."""
    comm = _runtime._require("elastic.parent_rank")
    return comm.parent_rank(comm.rank if rank is None else rank)


Change = collections.namedtuple("Change", "when seconds size lost report error")
Change.__doc__ = """One membership change run() went through: when (time.time() at the
failure's catch, or the grow's start), seconds (from then until the new ring was up), size
(peers after it), lost (the ranks left out, numbered as in the ring before; () for a
grow), report (libringd's shrink_report, or "grew from K to N peers"), error (the
ringd.Error that started a shrink; None for a grow)."""


class _Grew(Exception):
    """Raised by commit() when peers joined: run() syncs and calls train again."""

    def __init__(self, change):
        super().__init__(change.report)
        self.change = change


class State:
    """What a failure rolls back to, and what a membership change hands to every member.

    A subclass says how to save(), restore() and sync() its objects (ringd.torch.elastic.
    TorchState: a model and an optimizer); this class does it for the keyword values
    given to it (epoch=0, batch=0, ...), which are attributes: state.epoch += 1.

    commit()   save a copy in memory (the point a failure rolls back to); on an elastic
               ring (ringd.init(elastic=True) at a rendezvous store), also the point
               where peers waiting to join are admitted
    restore()  back to the last commit
    sync()     every member takes the new rank 0's state (broadcast), after a change
    register_reset_callbacks([fn, ...])  fn(size, rank) after every membership change,
               once the state is restored and synced, on every member (a joiner too, once
               it has the state): set the learning rate for the size, re-shard a sampler.
               Set values from (size, rank) and the synced state, not relative to what
               this peer had: a joiner had nothing.

    Values travel in ringd's own format (numbers, strings, bytes, lists, tuples, dicts,
    sets, numpy arrays: what ringd.torch.broadcast_object takes); allow_pickle=True (on
    every peer) sends others with pickle, between peers that trust each other.
    """

    def __init__(self, allow_pickle=False, **values):
        object.__setattr__(self, "_names", list(values))
        object.__setattr__(self, "_allow_pickle", bool(allow_pickle))
        object.__setattr__(self, "_callbacks", [])
        object.__setattr__(self, "_saved", None)
        object.__setattr__(self, "commits", 0)
        object.__setattr__(self, "resets", 0)   # membership changes run() went through
        object.__setattr__(self, "changes", [])  # each membership change: a Change
        object.__setattr__(self, "grow_enabled", True)
        for k, v in values.items():
            object.__setattr__(self, k, v)
        self.save()

    def __setattr__(self, name, value):
        if not name.startswith("_") and name not in self.__dict__ and \
                not hasattr(type(self), name):
            self._names.append(name)  # a value added later is saved and synced too
        object.__setattr__(self, name, value)

    # ---- the user's values ------------------------------------------------------------

    def values(self):
        """The keyword values, {name: value}."""
        return {k: getattr(self, k) for k in self._names}

    def save(self):
        object.__setattr__(self, "_saved", copy.deepcopy(self.values()))

    def restore(self):
        for k, v in copy.deepcopy(self._saved).items():
            object.__setattr__(self, k, v)

    def sync(self):
        for k, v in broadcast_object(self.values(), 0, self._allow_pickle).items():
            object.__setattr__(self, k, v)

    # ---- the cycle ----------------------------------------------------------------

    def commit(self):
        """Save the state (what a failure rolls back to); on an elastic ring, inside run(),
        admit the peers waiting to join (run() then syncs them in and calls train again;
        grow_enabled = False turns that off for this state)."""
        self.save()
        object.__setattr__(self, "commits", self.commits + 1)
        if self.grow_enabled and _running and has_grow() and is_elastic():
            self.before_grow()
            when, t0, before = time.time(), time.monotonic(), _runtime._require("commit").size
            if grow():
                size = _runtime._require("commit").size
                raise _Grew(Change(when, time.monotonic() - t0, size, (),
                                   "grew from %d to %d peers" % (before, size), None))

    def register_reset_callbacks(self, callbacks):
        """callbacks: fn(size, rank), called after every membership change (in order)."""
        for fn in callbacks:
            if not callable(fn):
                raise TypeError("register_reset_callbacks: %r is not callable" % (fn,))
            self._callbacks.append(fn)

    def on_reset(self):
        comm = _runtime._require("elastic")
        for fn in self._callbacks:
            fn(comm.size, comm.rank)

    def before_shrink(self):
        """Drop what belongs to the failed ring (a subclass: its objects' handles in flight);
        called by run() before it shrinks."""

    def before_grow(self):
        """Finish what is in flight on the ring before commit() grows it (a subclass)."""

    def after_grow(self):
        """Peers joined: start over what a joiner cannot share (a subclass: a pipeline of
        stale steps); called by run() before it syncs."""


def broadcast_object(obj, root=0, allow_pickle=False):
    """root's obj on every peer, in ringd's own format (pickle only with allow_pickle on
    every peer); ringd.torch.broadcast_object's framework-free twin."""
    import numpy as _np  # here: ringd itself needs no numpy (pip-install.test)

    comm = _runtime._require("elastic.broadcast_object")
    header = _np.zeros(2, _np.int64)  # 1 ringd's format, 2 pickle, 3 refused; length
    error = None
    if comm.rank == root:
        try:
            payload, header[0] = _objects.encode_object(obj), 1
        except TypeError as e:
            if allow_pickle:
                payload, header[0] = pickle.dumps(obj), 2
            else:
                payload, header[0], error = str(e).encode(), 3, e
        header[1] = len(payload)
    _runtime.broadcast(header, root)
    kind, length = int(header[0]), int(header[1])
    buf = _np.frombuffer(bytearray(payload), _np.uint8) if comm.rank == root and length else \
        _np.zeros(length, _np.uint8)
    if length:
        _runtime.broadcast(buf, root)
    if kind == 3:
        if error is not None:
            raise error
        raise TypeError("elastic: rank %d's state cannot be sent: %s (pass allow_pickle=True "
                        "to the State on every peer)" % (root, bytes(buf).decode(errors="replace")))
    if comm.rank == root:
        return obj
    if kind == 2:
        if not allow_pickle:
            raise _errors.InvalidError("elastic: rank %d sent a pickle, which this peer does "
                                       "not load without allow_pickle=True" % root)
        return pickle.loads(bytes(buf))
    return _objects.decode_object(bytes(buf))


_running = 0  # run() calls active in this process (commit() grows only inside one)


def run(func=None, min_size=1, max_resets=100):
    """Decorate train(state, ...) to survive lost peers (see the module's doc):

        @ringd.elastic.run                       # or @ringd.elastic.run(min_size=2)
        def train(state): ...

    min_size: below this many peers, raise MinSizeError (from the lost peer's error).
    max_resets: after this many losses survived (shrinks), the next lost peer raises
    TooManyResetsError (peers joining do not count). Exceptions that are not a lost
    peer's ringd.Error propagate as they are (the state is not restored). state.changes
    lists every membership change (Change), state.resets counts them."""
    if func is None:
        return lambda f: run(f, min_size=min_size, max_resets=max_resets)
    if min_size < 1:
        raise ValueError("ringd.elastic.run: min_size must be >= 1, not %r" % (min_size,))
    if max_resets < 0:
        raise ValueError("ringd.elastic.run: max_resets must be >= 0, not %r" % (max_resets,))

    def wrapper(state, *args, **kw):
        global _running
        if not isinstance(state, State):
            raise TypeError("ringd.elastic.run: the first argument must be a "
                            "ringd.elastic.State (ringd.torch.elastic.TorchState), not %s"
                            % type(state).__name__)
        _runtime._require("elastic.run")
        # a joiner runs the reset callbacks too, after its first sync: they set what depends
        # on the ring (a learning rate from the size, a shard) as the members' do
        changed = joined() and not state.changes
        if changed:
            comm = _runtime._require("elastic.run")
            state.changes.append(Change(time.time(), 0.0, comm.size, (),
                                        "joined the running ring as rank %d of %d"
                                        % (comm.rank, comm.size), None))
        _running += 1
        try:
            while True:
                try:
                    state.sync()  # a peer lost here is handled as one lost in train
                    if changed:
                        state.on_reset()
                    return func(state, *args, **kw)
                except _Grew as g:  # the commit was just saved: the sync hands it over
                    state.after_grow()
                    state.changes.append(g.change)
                except Exception as e:  # noqa: B902 - a lost peer's error may come wrapped
                    if is_lost_peer(e) is None:
                        raise
                    shrinks = sum(1 for c in state.changes if c.error is not None)
                    if shrinks >= max_resets:
                        raise TooManyResetsError(
                            "ringd.elastic: %d lost peer(s) survived already (max_resets=%d); "
                            "not going on after: %s" % (shrinks, max_resets, e)) from e
                    when, t0 = time.time(), time.monotonic()
                    state.before_shrink()
                    try:
                        report = shrink()
                    except _errors.InvalidError as why:
                        raise e from why  # not curable by a shrink: the failure itself
                    size = _runtime._require("elastic").size
                    state.changes.append(Change(when, time.monotonic() - t0, size,
                                                _last_lost, report, e))
                    if size < min_size:
                        err = MinSizeError(
                            "ringd.elastic: %d peer(s) left after losing rank(s) %s, fewer "
                            "than min_size=%d: %s" % (size, ",".join(map(str, _last_lost)),
                                                      min_size, report))
                        err.size = size
                        raise err from e
                    state.restore()
                object.__setattr__(state, "resets", state.resets + 1)
                changed = True
        finally:
            _running -= 1

    wrapper.__name__ = getattr(func, "__name__", "train")
    wrapper.__qualname__ = getattr(func, "__qualname__", wrapper.__name__)
    wrapper.__doc__ = getattr(func, "__doc__", None)
    wrapper.__wrapped__ = func
    return wrapper
