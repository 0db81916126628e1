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
- Freed memory: CuPy's pool hands a freed block back to the stream that allocated it,
  for its next allocation, ordered after nothing on other streams. So once two origins
  have run ops, each op's exit also makes every other origin's stream wait on its
  event (every op's: the collector may free the array's memory later, outside any op),
  and memory the op drops (``hold``: a regrown slab, a replaced layout) goes only after
  that. Another thread's per-thread default stream cannot be named from here: the exit
  synchronises the device instead. From one origin every block goes back to the op's
  own stream: nothing is held, no wait is made.

Interrupts (KeyboardInterrupt, asynchronous exceptions), which CPython delivers when a
call returns or a Python function starts, cannot leave the lock held: the lock is taken
and given back by C code, and this step runs inside it. One landing in ``__enter__`` or
``__exit__`` may leave the caller's current device changed (the array's ops do not
depend on it: each makes its device current) and the event unrecorded; the next op from
another stream or thread then waits for the whole device instead (over-ordering is
harmless). An event cannot be recorded later for the interrupted op: a per-thread
default stream's handle names the recording thread's stream. An exit cut short with
other origins remembered synchronises the device before what the op held goes; one cut
short before its ``finally`` keeps it held until the next op's exit has ordered the streams.

A CPU backend's step is a C-level no-op (``Backend.array_device``): none of this costs it anything.
"""

from threading import get_ident

__all__ = ["DeviceScope"]


class DeviceScope:
    """The device step of one array's ops (``with``, under the array's lock) over
    ``device``, an object with ``activate() -> token`` (make the device current; the
    token restores the previous one), ``restore(token)``, ``current_stream()`` (a stream
    with ``wait_event(event)``), ``per_thread(stream)`` (whether the stream's handle
    names each calling thread's own stream: CUDA's per-thread default stream),
    ``new_event()`` (an event with ``record(stream)``) and ``synchronize()`` (wait for
    all the current device's work)."""

    __slots__ = ("_device", "_token", "_stream", "_last", "_event", "_recorded", "_origins", "_held")

    def __init__(self, device):
        self._device = device
        self._token = None        # what restores the caller's device (the holder's; None: nothing)
        self._stream = None       # the holder's stream
        self._last = None         # (stream, thread) of the last op; keeps that stream alive
        self._event = None        # recorded after the last op's work, on its stream
        self._recorded = True     # whether the last op's exit finished (False: it was interrupted)
        self._origins = None      # every (stream, thread) that ran an op, once there are two; else None
        self._held = ()           # what the running op dropped, kept until other streams are ordered

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
            # Remembered before the op allocates anything on its stream.
            if self._origins is None:
                self._origins = {self._last, origin}
            else:
                self._origins.add(origin)
        # One assignment, no call: an interrupt lands before it (the next op orders
        # again) or after it (the exit counts as unfinished: the next op synchronises).
        self._stream, self._last, self._recorded = stream, origin, False
        return self

    def hold(self, *buffers):
        """Keep ``buffers`` (memory the running op drops) until its exit has ordered the
        other origins' streams after its work. From one origin there is nothing to do:
        CuPy's pool hands freed memory to the stream that allocated it, here the op's own."""
        if self._origins is not None:
            self._held += buffers

    def __exit__(self, *exc_info):     # -> None: exceptions pass
        try:
            if self._event is None:
                self._event = self._device.new_event()     # on the array's device: it is current
            self._event.record(self._stream)
            if self._origins is not None:
                self._order_others()
            self._recorded = True
        finally:
            token, self._token, self._stream = self._token, None, None
            if not self._recorded and self._origins is not None:
                # Cut short (an interrupt, an error): other streams may be unordered, so
                # wait for the device before the memory the op dropped can go.
                self._device.synchronize()
                self._held = ()
            self._device.restore(token)

    def _order_others(self):
        """Make the other origins' streams wait on the event just recorded, so that their
        later work (a reuse of memory this op freed, which CuPy's pool returns to the
        allocating stream, included) runs after this op's; then drop what the op held."""
        current, me, device = self._stream, get_ident(), self._device
        waiting = []
        for stream, thread in self._origins:
            if thread != me and device.per_thread(stream):
                device.synchronize()        # another thread's own stream: no handle here names it
                break
            if stream != current and stream not in waiting:
                waiting.append(stream)
        else:
            for stream in waiting:
                stream.wait_event(self._event)
        self._held = ()
