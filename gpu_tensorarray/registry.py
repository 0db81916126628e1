"""Host-side handles and the resources behind them.

A handle is what callers hold: opaque, hashable, naming its array. The
registry creates forward arrays with TensorFlow's unique names, finds or
creates the gradient array of (forward array, source) so that two gradient
computations never share an accumulator, locks the forward array's size when
a gradient array is made, and keeps statistics of what is still open.
"""

import itertools
import threading
import weakref

from .errors import InvalidArgumentError, NotFoundError, about, shown
from .host import element_count, shape_text
from .shapes import is_fully_defined
from .storage import ArrayStorage

__all__ = ["Handle", "registry"]


class Handle:
    """An opaque reference to one TensorArray resource."""

    __slots__ = ("name", "_array", "__weakref__")

    def __init__(self, array):
        self.name = array.name
        self._array = array

    def __repr__(self):
        return f"<TensorArray handle {self.name!r}>"

    def __reduce__(self):
        raise TypeError("TensorArray handles refer to live device memory and cannot be pickled")


class Registry:
    def __init__(self):
        self._counter = itertools.count()       # TensorFlow's process-wide name counter
        self._lock = threading.Lock()
        self._by_name = weakref.WeakValueDictionary()
        self._open = weakref.WeakSet()

    def create(self, backend, dtype, size, element_shape, dynamic_size, clear_after_read,
               identical_element_shapes, tensor_array_name):
        if is_fully_defined(element_shape):
            backend.check_allocation(size * element_count(element_shape) * dtype.itemsize,
                                     f"a TensorArray of {size} elements of shape {list(element_shape)}")
        name = f"{tensor_array_name or 'TensorArrayV3'}_{next(self._counter)}"
        array = ArrayStorage(backend, dtype, size, element_shape, dynamic_size, clear_after_read,
                             identical_element_shapes, name)
        return self._register(array)

    def _register(self, array):
        handle = Handle(array)
        with self._lock:
            self._by_name[array.name] = array
            self._open.add(array)
        return handle

    def lookup(self, handle):
        """The array behind a handle (or behind its name, as TF's string handles)."""
        if type(handle) is Handle:
            return handle._array
        if isinstance(handle, str):
            array = self._by_name.get(handle)
            if array is None:
                raise NotFoundError(f"Resource __per_step_0/_tensor_arrays{handle} does not exist. "
                                    f"(Could not find a TensorArray named {shown(handle)}.)")
            return array
        raise InvalidArgumentError(
            f"Trying to access a handle's resource using the wrong type. Expected a TensorArray handle "
            f"(from TensorArrayV3 or TensorArrayGradV3), got {type(handle).__name__}: {shown(handle)}")

    def grad(self, handle, source, shape_to_prepend=None):
        """TensorArrayGradV3 / TensorArrayGradWithShape steps 1-9; ``shape_to_prepend``
        is a host int64 array (GradWithShape) or None (GradV3)."""
        forward = self.lookup(handle)
        if forward.is_grad:                                                    # 1
            raise InvalidArgumentError(
                f"Wrong input container. _tensor_array_grads{forward.name} (a gradient TensorArray has no "
                f"gradient TensorArray of its own)")
        with forward.lock:
            if forward.closed:                                                 # 5
                raise forward._closed_error()
            prepend = () if shape_to_prepend is None else _prepend_shape(shape_to_prepend, forward)   # 8
            existing = forward.grads.get(source)                               # 9: returned as is
            if existing is None:
                element_shape = forward.element_shape
                if element_shape is not None:
                    element_shape = prepend + element_shape
                array = ArrayStorage(forward.backend, forward.dtype, forward.size, element_shape,
                                     dynamic_size=False, clear_after_read=True,
                                     identical_element_shapes=forward.identical_element_shapes,
                                     name=f"{forward.name}@{source}", is_grad=True,
                                     marked_size=forward.marked_size)
                array.copy_shapes_from(forward, prepend)
                existing = forward.grads[source] = self._register(array)
            forward.dynamic_size = False                                       # 4
            return existing

    def close(self, handle):
        array = self.lookup(handle)
        array.close()
        with self._lock:
            self._open.discard(array)

    def stats(self):
        """Open arrays and the device bytes they hold, per backend."""
        with self._lock:
            arrays = list(self._open)
        per_backend = {}
        for array in arrays:
            entry = per_backend.setdefault(array.backend.name, {"arrays": 0, "bytes": 0})
            entry["arrays"] += 1
            entry["bytes"] += array.nbytes
        return {"live_arrays": len(arrays), "bytes": sum(e["bytes"] for e in per_backend.values()),
                "per_backend": per_backend}


def _prepend_shape(shape, forward):
    if shape.ndim != 1:
        raise InvalidArgumentError(f"shape must be a vector of {{int32,int64}}, got shape "
                                   f"{shape_text(shape.shape)}{about(forward)}")
    for dim in shape.tolist():
        if dim < 0:
            raise InvalidArgumentError(f"Dimension {dim} must be >= 0 (shape_to_prepend "
                                       f"{shape_text(shape.tolist())}){about(forward)}")
    return tuple(shape.tolist())


registry = Registry()
