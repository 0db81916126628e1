"""Host-side handles and the resources behind them.

A handle is what callers hold: opaque, hashable, naming its array. The
registry creates forward arrays with TensorFlow's unique names, registers the
gradient arrays that a forward array makes (storage.make_gradient: one per
source, so two gradient computations never share an accumulator; the forward
array keeps their handles, ``ArrayStorage.grads``), looks arrays up, and keeps
statistics of what is still open.
"""

import itertools
import os
import threading
import weakref

from .errors import InvalidArgumentError, NotFoundError, shown
from .host import element_count
from .shapes import is_fully_defined
from .storage import ArrayStorage

__all__ = ["Handle", "registry", "deep_copy_refused"]


class Handle:
    """An opaque reference to one TensorArray resource. ``array`` is the resource
    (storage.ArrayStorage, read through its public face); never reassign it.
    ``registry.lookup`` finds the array of any handle, TF's string names included."""

    __slots__ = ("name", "array", "__weakref__")

    def __init__(self, array):
        self.name = array.name
        self.array = array

    def __repr__(self):
        return f"<TensorArray handle {self.name!r}>"

    def __reduce__(self):
        raise TypeError(f"TensorArray {self.name} cannot be pickled: its handle refers to live device memory")

    def __copy__(self):
        return self                 # a reference: a copy of it refers to the same array

    def __deepcopy__(self, memo):
        raise deep_copy_refused(self.name)


def deep_copy_refused(name):
    """What copy.deepcopy of a TensorArray or its handle raises: TypeError, as for what pickle refuses."""
    return TypeError(f"TensorArray {name} cannot be deep-copied: it refers to an array in device memory, which a copy "
                     f"would share (as copy.copy's does); for an independent array, make a new TensorArray and write "
                     f"the values into it (new.unstack(ta.stack()))")


#: TensorFlow's resource containers: forward arrays in one, gradient arrays in the other,
#: so a forward array may bear a gradient array's name (TensorArrayV3 named "x@gradients").
FORWARD, GRADIENTS = "_tensor_arrays", "_tensor_array_grads"


class Registry:
    def __init__(self):
        self._counter = itertools.count()       # TensorFlow's process-wide name counter
        self._lock = threading.Lock()
        # container -> name -> every live array, closed ones too
        self._by_name = {FORWARD: weakref.WeakValueDictionary(), GRADIENTS: weakref.WeakValueDictionary()}

    def create(self, backend, dtype, size, element_shape, dynamic_size, clear_after_read,
               identical_element_shapes, tensor_array_name):
        if is_fully_defined(element_shape):
            backend.check_allocation(size * element_count(element_shape) * dtype.itemsize,
                                     lambda: f"a TensorArray of {size} elements of shape {list(element_shape)}")
        name = f"{tensor_array_name or 'TensorArrayV3'}_{next(self._counter)}"
        array = ArrayStorage(backend, dtype, size, element_shape, dynamic_size, clear_after_read,
                             identical_element_shapes, name)
        return self._register(array)

    def _register(self, array):
        handle = Handle(array)
        with self._lock:
            self._by_name[GRADIENTS if array.is_grad else FORWARD][array.name] = array
        return handle

    def lookup(self, handle):
        """The array behind a handle, behind a (container, name) pair (TF's string handle),
        or behind a bare name (a forward array's first, as a pair in FORWARD names it)."""
        if type(handle) is Handle:
            return handle.array
        if isinstance(handle, str) or (type(handle) is tuple and len(handle) == 2 and type(handle[0]) is str
                                       and handle[0] in self._by_name and type(handle[1]) is str):
            container, name = (None, handle) if isinstance(handle, str) else handle
            array = self._by_name[container or FORWARD].get(name)
            if array is None and container is None:
                array = self._by_name[GRADIENTS].get(name)
            if array is None:
                raise NotFoundError(f"Resource __per_step_0/{container or FORWARD}{name} does not exist. "
                                    f"(Could not find a TensorArray named {shown(name)}.)")
            return array
        raise InvalidArgumentError(
            f"Trying to access a handle's resource using the wrong type. Expected a TensorArray handle "
            f"(from TensorArrayV3 or TensorArrayGradV3), got {type(handle).__name__}: {shown(handle)}")

    def grad(self, handle, source, shape_to_prepend=None):
        """TensorArrayGradV3 / TensorArrayGradWithShape: the handle of the gradient array
        of (``handle``'s array, ``source``); ``shape_to_prepend`` is a host int64 array
        (GradWithShape) or None (GradV3)."""
        return self.lookup(handle).make_gradient(source, shape_to_prepend, self._register)

    def close(self, handle):
        self.lookup(handle).close()

    def end_gradient(self, forward, source):
        """End the gradient computation ``source`` on ``forward`` (an ArrayStorage): its
        gradient array, if it made one, is closed and leaves ``forward.grads``, so a forward
        array differentiated many times (a tape's ``gradient``, a retained graph's backward
        passes, each with a fresh source) holds no more than one computation's. Closing a
        gradient array with TensorArrayCloseV3 keeps it there instead: a later
        TensorArrayGradV3 of its source returns it closed, as TensorFlow does."""
        handle = forward.forget_gradient(source)
        if handle is not None:
            self.close(handle)

    def end_gradients(self, ends):
        """``end_gradient(forward, source)`` for every pair of ``ends``, each one even when an
        interrupt (an asynchronous exception) lands among them: it is raised once all are done.
        A call it lands at the start of ran nothing, and runs once more (ending is idempotent)."""
        raised = None
        for forward, source in ends:
            for _ in range(2):
                try:
                    self.end_gradient(forward, source)
                    break
                except BaseException as error:
                    raised = raised or error
        if raised is not None:
            raise raised

    def live_arrays(self):
        """Every array still alive (closed ones too), as a list made at once: a weak map's own
        iteration fails when another thread's array dies meanwhile."""
        references = [reference for names in self._by_name.values() for reference in names.valuerefs()]
        arrays = (reference() for reference in references)    # C-level copies of the refs
        return [array for array in arrays if array is not None]

    def stats(self):
        """Open arrays and the device bytes they hold, per backend."""
        arrays = [array for array in self.live_arrays() if not array.closed]
        per_backend = {}
        for array in arrays:
            entry = per_backend.setdefault(array.backend.name, {"arrays": 0, "bytes": 0})
            entry["arrays"] += 1
            entry["bytes"] += array.nbytes
        return {"live_arrays": len(arrays), "bytes": sum(e["bytes"] for e in per_backend.values()),
                "per_backend": per_backend}


    def _after_fork(self):
        """In a forked child: fresh locks (a thread holding one in the parent does not
        exist here), so arrays stay usable or say why not (ArrayStorage.after_fork)."""
        self._lock = threading.Lock()
        for array in self.live_arrays():
            array.after_fork()


registry = Registry()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=registry._after_fork)
