"""The lock of an array on a device backend: the one place that puts an array's
operations on its device and orders its device work across streams.

Every operation of an array runs under its lock (storage.py), so the lock is where
the device rule lives (docs/architecture.md, "Devices and streams"):

- Device: acquiring makes the array's device current (restored on release), so
  everything the op does between (the layouts' element copies, fills, views, the
  backend's launches) runs there, whatever device the caller has current.
- Streams: work is enqueued on the caller's current stream. After each op the array
  records one event (reused) on that stream; an op that comes from another stream
  (or another thread: a per-thread default stream has one handle for many streams)
  first makes its stream wait on that event. So device work on the array runs in
  the order its ops took the lock, as the host work does, without synchronising.

A CPU backend's lock is a plain ``threading.Lock``: none of this costs it anything.
"""

import threading
from threading import get_ident

__all__ = ["ArrayGuard"]


class ArrayGuard:
    """A lock (``acquire``/``release``, ``with``) that also enters ``device``, an
    object with ``activate() -> token`` (make the device current; the token restores
    the previous one), ``restore(token)``, ``current_stream()`` (a stream with
    ``wait_event(event)``) and ``new_event()`` (an event with ``record(stream)``).

    Interrupts (KeyboardInterrupt, asynchronous exceptions), which CPython delivers when
    a call returns or a Python function starts: one landing in ``acquire`` after the lock
    was taken gives it back (an RLock, whose ``_is_owned`` tells whether this thread holds
    it, which ``acquire`` cannot say when it is interrupted itself); one landing in
    ``release`` still releases, except at its very first instruction, where nothing runs
    yet: the lock then stays with the interrupted thread until its next op on the array,
    which finishes that release first (an op never runs inside another op of its array,
    so a lock this thread holds in ``acquire`` is such a leftover)."""

    __slots__ = ("_lock", "_device", "_token", "_stream", "_last", "_event")

    def __init__(self, device):
        self._lock = threading.RLock()
        self._device = device
        self._token = None        # what restores the caller's device (the holder's; None: nothing)
        self._stream = None       # the holder's stream
        self._last = None         # (stream, thread) of the last op; keeps that stream alive
        self._event = None        # recorded after the last op's work, on its stream

    def acquire(self):
        lock = self._lock
        if lock._is_owned():
            self.release()        # a release interrupted before it began (see the class)
        try:
            lock.acquire()
            self._token = self._device.activate()
            stream = self._device.current_stream()
            origin = (stream, get_ident())
            if self._event is not None and origin != self._last:
                stream.wait_event(self._event)
            self._stream, self._last = stream, origin
        except BaseException:
            if lock._is_owned():
                try:
                    self._device.restore(self._token)
                finally:
                    self._stream = self._token = None
                    lock.release()
            raise
        return True

    def release(self, *exc_info):
        owned = True                # (an interrupt as ``_is_owned`` returns leaves it so)
        try:
            owned = self._lock._is_owned()
            if owned and self._stream is not None:
                if self._event is None:
                    self._event = self._device.new_event()      # on the array's device: it is current
                self._event.record(self._stream)
        finally:
            if owned:
                try:
                    self._device.restore(self._token)
                finally:
                    self._stream = self._token = None
                    self._lock.release()
        if not owned:               # as an RLock's: never another thread's (storage.py)
            raise RuntimeError("cannot release un-acquired lock")

    def locked(self):
        """Whether some thread holds the lock."""
        if self._lock._is_owned():
            return True
        if self._lock.acquire(blocking=False):
            self._lock.release()
            return False
        return True

    __enter__ = acquire
    __exit__ = release      # -> None: exceptions pass
