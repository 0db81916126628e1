"""Interrupting ops the way CPython does, and checking what an interrupt left.

CPython (3.11-3.13) delivers a KeyboardInterrupt (SIGINT) or an asynchronous exception
(PyThreadState_SetAsyncExc) only where it checks its "eval breaker": at the start of a
Python function, after a call returns and at a loop's backward jump; never between plain
assignments. The first two are the points where a ``sys.setprofile`` hook sees "call",
"return" and "c_return" events (not "c_call": nothing is checked before a call starts).
``Interrupt(k)`` raises KeyboardInterrupt at the k-th such event inside the library
(frames of gpu_tensorarray's own files); enumerating k = 1, 2, ... until an op runs to its
end tries every point at which an interrupt can land in it. (Backward jumps have no
event: no commit of the library contains a loop outside the ``try`` that undoes it.)
The collector is paused while an op runs, so that an op takes the same path each time.
An interrupt that lands in a callback the op triggers (a weak reference's) is reported
as "ignored" by Python and lost, as a real one would be: ``swallowed`` counts those.

``consistency`` checks what an interrupted op may not leave behind: a held lock, counters
that disagree with the slot flags, an unwritten slab row that is not zeros.
"""

import gc
import os
import sys

import numpy as np

import gpu_tensorarray
from gpu_tensorarray.layouts import UniformLayout
from gpu_tensorarray.registry import registry
from hostile_util import snapshot

PACKAGE = os.path.dirname(gpu_tensorarray.__file__) + os.sep

WRITTEN, READ, CLEARED, VALUE = 1, 2, 4, 8       # storage's flag bits (storage.py)
_EVENTS = ("call", "return", "c_return")


class Interrupt:
    """A profile hook raising KeyboardInterrupt at the ``at``-th event (1-based) in the
    library; ``events`` counts them. Python unsets a profile hook that raises, so an
    op gets one interrupt, as a user's one Ctrl-C."""

    def __init__(self, at=None):
        self.at = at
        self.events = 0
        self.where = None
        self.swallowed = 0

    def __call__(self, frame, event, arg):
        if event in _EVENTS and frame.f_code.co_filename.startswith(PACKAGE):
            self.events += 1
            if self.events == self.at:
                self.where = f"{event} {getattr(arg, '__qualname__', '')} in " \
                             f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno} {frame.f_code.co_name}"
                raise KeyboardInterrupt(f"injected at {self.where}")

    def run(self, op):
        """Run ``op`` under the hook -> whether it was interrupted."""
        gc.disable()
        unraisable, sys.unraisablehook = sys.unraisablehook, self._unraisable
        sys.setprofile(self)
        try:
            op()
        except KeyboardInterrupt:
            return True
        finally:
            sys.setprofile(None)
            sys.unraisablehook = unraisable
            gc.enable()
        return False

    def _unraisable(self, report):
        if isinstance(report.exc_value, KeyboardInterrupt):
            self.swallowed += 1
        else:
            sys.__unraisablehook__(report)


def lock_held(array):
    lock = array._lock
    return lock.locked()


def consistency(array):
    """What is wrong with ``array``'s own bookkeeping (an empty list: nothing). Reads
    storage's private state: the counters the fast paths trust must agree with the flags."""
    if lock_held(array):
        return ["its lock is held"]
    problems = []
    size = array._size
    flags = np.frombuffer(bytes(array._flags), np.uint8)
    inside, past = flags[:size], flags[size:]
    if past.any():
        problems.append(f"flags set past the size {size}: {np.nonzero(past)[0][:5].tolist()}")
    if array._closed:
        return problems
    written = int(((inside & WRITTEN) != 0).sum())
    if array._written_count != written:
        problems.append(f"written_count {array._written_count}, {written} slots written")
    cleared = int(((inside & CLEARED) != 0).sum())
    pending = array._unmarked_reads
    expected = cleared + (pending if array.clear_after_read else 0)
    if array._cleared_count != expected:
        problems.append(f"cleared_count {array._cleared_count}, {cleared} slots cleared and {pending} pending")
    if array._attention != bool(pending):
        problems.append(f"attention {array._attention} with {pending} pending read marks")
    if array._unread:
        if ((inside & (READ | CLEARED)) != 0).any() or pending:
            problems.append("unread, yet a slot was read")
        soft = int(((inside & (WRITTEN | VALUE)) == WRITTEN).sum())
        if array._soft_count != soft:
            problems.append(f"soft_count {array._soft_count}, {soft} soft slots")
    layout = array._layout
    accepted = array._accepted_shape
    if accepted is not None:
        from gpu_tensorarray.shapes import is_compatible
        if not is_compatible(array._element_shape, accepted):
            problems.append(f"accepted shape {accepted} beside element shape {array._element_shape}")
        if layout.common_shape is not None and layout.common_shape != accepted:
            problems.append(f"accepted shape {accepted} in a slab of rows {layout.common_shape}")
    if type(layout) is UniformLayout and layout.slab is not None:
        # Unwritten rows (and soft ones) are the zeros a read of them returns.
        rows = np.asarray(gpu_tensorarray.to_numpy(layout.slab))
        valueless = np.ones(layout.capacity, bool)
        valueless[:size] = (inside & VALUE) == 0
        valueless[:size] &= (inside & CLEARED) == 0
        dirty = valueless & rows.reshape(layout.capacity, -1).any(axis=1)
        if dirty.any():
            problems.append(f"slab rows without a value are not zeros: {np.nonzero(dirty)[0][:5].tolist()}")
    return problems


def state(handle):
    """The public snapshot (hostile_util.snapshot), or why there is none (a held lock
    would block it)."""
    array = registry.lookup(handle)
    if lock_held(array):
        return "locked"
    return snapshot(handle)
