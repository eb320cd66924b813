"""The ringd.Error hierarchy, mapped from libringd's ring_status_t.

Every exception carries:
  status     the status's name, e.g. "RING_ERR_REMOTE" (None for errors of the
             Python layer itself, such as a call before init)
  message    libringd's message (ring_last_error()), e.g. "round 118,
             reduce-scatter step 3: connection reset by rank 2 (127.0.0.1:29502)"
  peer_rank  the peer the message names (int), or None
  address    that peer's "host:port", or None
  phase      where it happened: "round 118, reduce-scatter step 3",
             "start-up", "ring doctor", ...; or None
ConfigError adds `setting`: the setting the message names ("codec"), or None.
"""

import re

__all__ = [
    "Error", "ConfigError", "InvalidError", "TimeoutError", "PeerError", "MismatchError",
    "ProtocolError", "NonFiniteError", "IOError", "NoMemoryError", "UnsupportedError",
    "CanceledError", "InternalError", "NotInitializedError", "PerformanceWarning",
    "parse_message",
]

_builtin_TimeoutError = TimeoutError
_builtin_IOError = OSError


class PerformanceWarning(UserWarning):
    """Something in this process makes it run much slower than it could, and how to fix it
    (e.g. an OpenBLAS running generic kernels: set OPENBLAS_CORETYPE)."""


class Error(Exception):
    """A libringd failure (or a misuse of the ringd package)."""

    status = None

    def __init__(self, message, status=None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        info = parse_message(message)
        self.peer_rank = info["peer_rank"]
        self.address = info["address"]
        self.phase = info["phase"]

    def __str__(self):
        return self.message


class InvalidError(Error, ValueError):
    """RING_ERR_INVALID: a bad argument."""
    status = "RING_ERR_INVALID"


class ConfigError(InvalidError):
    """A bad setting name or value, or settings that do not fit together (at init)."""

    def __init__(self, message, status=None, setting=None):
        super().__init__(message, status)
        self.setting = setting if setting is not None else _setting_of(message)


class NotInitializedError(Error, RuntimeError):
    """A collective before ringd.init() or after ringd.shutdown()."""


class TimeoutError(Error, _builtin_TimeoutError):
    """RING_ERR_TIMED_OUT: a deadline passed (connect, or no progress within the timeout)."""
    status = "RING_ERR_TIMED_OUT"


class PeerError(Error):
    """RING_ERR_REMOTE: a peer closed, reset, died or reported a failure."""
    status = "RING_ERR_REMOTE"


class MismatchError(Error):
    """RING_ERR_MISMATCH: peers disagree on settings or call arguments (size, dtype, op)."""
    status = "RING_ERR_MISMATCH"


class ProtocolError(Error):
    """RING_ERR_PROTOCOL: bad magic, version or frame from the wire."""
    status = "RING_ERR_PROTOCOL"


class NonFiniteError(Error, ArithmeticError):
    """RING_ERR_NONFINITE: the collective finished, but some peer's input held inf or NaN
    (or a sum overflowed); the result is not to be trusted. Every peer gets it for the same
    call, and the communicator stays usable (skip the step, as AMP does). `tensor` is the
    (non-finite) result when the Python layer knows it."""
    status = "RING_ERR_NONFINITE"
    tensor = None


class IOError(Error, _builtin_IOError):
    """RING_ERR_IO: a system call failed."""
    status = "RING_ERR_IO"


class NoMemoryError(Error, MemoryError):
    """RING_ERR_NO_MEMORY."""
    status = "RING_ERR_NO_MEMORY"


class UnsupportedError(Error, NotImplementedError):
    """RING_ERR_UNSUPPORTED: not available in this build."""
    status = "RING_ERR_UNSUPPORTED"


class CanceledError(Error):
    """RING_ERR_CANCELED: aborted by shutdown."""
    status = "RING_ERR_CANCELED"


class InternalError(Error):
    """RING_ERR_INTERNAL: a bug in libringd; please report it with the message."""
    status = "RING_ERR_INTERNAL"


for _cls in (Error, InvalidError, ConfigError, NotInitializedError, TimeoutError, PeerError,
             MismatchError, ProtocolError, NonFiniteError, IOError, NoMemoryError,
             UnsupportedError, CanceledError, InternalError):
    _cls.__module__ = "ringd"  # tracebacks say ringd.PeerError

_BY_STATUS = {
    "RING_ERR_INVALID": InvalidError,
    "RING_ERR_TIMED_OUT": TimeoutError,
    "RING_ERR_REMOTE": PeerError,
    "RING_ERR_MISMATCH": MismatchError,
    "RING_ERR_PROTOCOL": ProtocolError,
    "RING_ERR_NONFINITE": NonFiniteError,
    "RING_ERR_IO": IOError,
    "RING_ERR_NO_MEMORY": NoMemoryError,
    "RING_ERR_UNSUPPORTED": UnsupportedError,
    "RING_ERR_CANCELED": CanceledError,
    "RING_ERR_INTERNAL": InternalError,
}

# "rank 2 (127.0.0.1:29502)": the peer a message blames comes with its address
_RANK_ADDR = re.compile(r"\brank (\d+) \(([^()\s]+)\)")
# "rank 3 failed (timed out) and stopped the ring": the origin, without an address
_RANK_FAILED = re.compile(r"\brank (\d+) failed\b")
# what comes before the first ": " when it says where: "round 118, reduce-scatter step 3"
_PHASE = re.compile(r"^(start-up|ring doctor|between [a-z ]+|round \d+[^:]*?|"
                    r"(?:allreduce|broadcast|allgather|reduce-scatter|barrier) [^:]*?): ")
_SETTING = re.compile(r"(?:--|\bsetting ')([a-z][a-z0-9-]*)")


def parse_message(message):
    """Pick the peer rank, its address and the phase out of a libringd message.

    >>> parse_message("round 118, reduce-scatter step 3: connection reset by rank 2 "
    ...               "(127.0.0.1:29502)")
    {'peer_rank': 2, 'address': '127.0.0.1:29502', 'phase': 'round 118, reduce-scatter step 3'}

    The peer is the first "rank N (ADDRESS)" of the message: libringd names the
    peer it blames that way ("timed out waiting for rank 1 (...)", "connection
    reset by rank 2 (...) (seen by rank 0)"), and names other ranks without an
    address. "?" as the address (rank unknown to the ring) gives None.
    """
    info = {"peer_rank": None, "address": None, "phase": None}
    if not message:
        return info
    m = _RANK_ADDR.search(message)
    if m:
        info["peer_rank"] = int(m.group(1))
        addr = m.group(2).strip()
        info["address"] = addr if addr and addr != "?" else None
    else:
        m = _RANK_FAILED.search(message)
        if m:
            info["peer_rank"] = int(m.group(1))
    m = _PHASE.match(message)
    if m:
        info["phase"] = m.group(1)
    return info


def _setting_of(message):
    m = _SETTING.search(message or "")
    return m.group(1) if m else None


def make_error(code, message, where, status_name):
    """The exception for a ring_status_t code (the extension's error factory)."""
    if status_name == "RING_ERR_INVALID" and where in ("config", "open"):
        return ConfigError(message, status_name)
    if status_name == "RING_ERR_UNSUPPORTED" and where == "config":
        return ConfigError(message, status_name)
    cls = _BY_STATUS.get(status_name, Error)
    return cls(message, status_name)
