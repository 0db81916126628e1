"""What an array's ops enter inside its lock on a device backend: the one place that
puts an array's operations on its device and orders its device work across streams.

Every operation of an array runs ``with self._lock, self._on_device:`` (storage.py): the
lock is a C-level ``threading.Lock``, and this is the second step, so the device rule
lives here (docs/architecture.md, "Devices and streams"):

- Device: entering makes the array's device current (restored on exit), so everything
  the op does between (the layouts' element copies, fills, views, the backend's
  launches) runs there, whatever device the caller has current.
- Streams: work is enqueued on the caller's current stream. After each op the array
  records one event (reused) on that stream; an op that comes from another stream
  (or another thread: a per-thread default stream has one handle for many streams)
  first makes its stream wait on that event. So device work on the array runs in
  the order its ops took the lock, as the host work does, without synchronising.

Interrupts (KeyboardInterrupt, asynchronous exceptions), which CPython delivers when a
call returns or a Python function starts, cannot leave the lock held: the lock is taken
and given back by C code, and this step runs inside it. One landing in ``__enter__`` or
``__exit__`` may leave the caller's current device changed (the array's ops do not
depend on it: each makes its device current) and the event unrecorded; the next op from
another stream or thread then waits for the whole device instead (over-ordering is
harmless). An event cannot be recorded later for the interrupted op: a per-thread
default stream's handle names the recording thread's stream.

A CPU backend's step is a C-level no-op (``Backend.array_device``): none of this costs it anything.
"""

from threading import get_ident

__all__ = ["DeviceScope"]


class DeviceScope:
    """The device step of one array's ops (``with``, under the array's lock) over
    ``device``, an object with ``activate() -> token`` (make the device current; the
    token restores the previous one), ``restore(token)``, ``current_stream()`` (a stream
    with ``wait_event(event)``), ``new_event()`` (an event with ``record(stream)``) and
    ``synchronize()`` (wait for all the current device's work)."""

    __slots__ = ("_device", "_token", "_stream", "_last", "_event", "_recorded")

    def __init__(self, device):
        self._device = device
        self._token = None        # what restores the caller's device (the holder's; None: nothing)
        self._stream = None       # the holder's stream
        self._last = None         # (stream, thread) of the last op; keeps that stream alive
        self._event = None        # recorded after the last op's work, on its stream
        self._recorded = True     # whether the last op recorded it (False: its exit was interrupted)

    def __enter__(self):
        device = self._device
        self._token = device.activate()
        stream = device.current_stream()
        origin = (stream, get_ident())
        if self._last is not None and origin != self._last:
            if self._recorded:
                stream.wait_event(self._event)
            else:
                device.synchronize()
        # One assignment, no call: an interrupt lands before it (the next op orders
        # again) or after it (the event counts as unrecorded: the next op synchronises).
        self._stream, self._last, self._recorded = stream, origin, False
        return self

    def __exit__(self, *exc_info):     # -> None: exceptions pass
        try:
            if self._event is None:
                self._event = self._device.new_event()     # on the array's device: it is current
            self._event.record(self._stream)
            self._recorded = True
        finally:
            token, self._token, self._stream = self._token, None, None
            self._device.restore(token)
