"""Turns ringd handles into torch.futures.Future objects: one daemon thread
waits for the handles in the order they started (ringd finishes requests in
that order) and completes each future. Its waits release the GIL, so the
training thread and autograd go on meanwhile."""
import queue
import threading
import warnings

import torch

import ringd

_queue = queue.Queue()
_thread = None
_lock = threading.Lock()


def _run():
    while True:
        item = _queue.get()
        if item is None:
            return
        handles, fut, value, on_done = item
        try:
            nonfinite = False
            for h in handles:
                try:
                    h.wait()
                except ringd.NonFiniteError:
                    nonfinite = True  # every peer has the same inf/NaN: pass it on
            if nonfinite:
                warnings.warn("ringd: a gradient average is not finite (some peer's gradient "
                              "held inf or NaN); AMP's GradScaler skips such a step",
                              RuntimeWarning)
            if on_done is not None:
                value = on_done()
            fut.set_result(value)
        except BaseException as e:  # noqa: B902 - handed to whoever waits on the future
            fut.set_exception(e)


def future_of(handles, value, on_done=None):
    """A Future that completes with `value` (or on_done()'s result) once every handle is done."""
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="ringd-futures", daemon=True)
            _thread.start()
    fut = torch.futures.Future()
    _queue.put((list(handles), fut, value, on_done))
    return fut
