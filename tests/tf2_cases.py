"""Random op sequences for TensorArray mode "tf2", a runner for the library, and
ListModel: TensorFlow 2's rules (tf.TensorArray inside tf.function, a TensorList)
written out as a plain Python list, with docs/guide.md's sane rules where TensorFlow
crashes or contradicts itself.

A case is (params, ops). params: dtype, size, dynamic_size, element_shape,
infer_shape. ops: ("write", index, value), ("read", index), ("gather", indices),
("scatter", indices, value), ("unstack", value), ("split", value, lengths),
("stack",), ("concat",), ("size",). Every op's result continues the chain (ta = ...).
Results: ("value", array) or ("error", exception class name).
"""

import re

import numpy as np

import gpu_tensorarray as gta
from gpu_tensorarray import errors

SHAPES = [(2,), (2,), (2,), (3,), (1,), ()]


def unnamed(text):
    """An error text with the array's name (numbered array by array) as NAME, for comparing two
    arrays' errors: every mode tf2 error begins "TensorArray <name>: "."""
    return re.sub(r"^TensorArray [^\s:]+: ", "TensorArray NAME: ", text)


def deviates_from_tf(params, model, op):
    """Ops where TensorFlow (tf.function) crashes, contradicts itself or reads memory it
    never wrote, judged on the ListModel's state before the op. "drop": our rule is an
    error (and nothing changes), the op is not sent to TensorFlow; "stop": ours succeeds
    (as TensorFlow's eager mode does) and TensorFlow's tf.function result is wrong, so
    the comparison with TensorFlow ends there; None: compare."""
    static = None if params["dynamic_size"] else params["size"]
    kind = op[0]
    if kind == "scatter" and len(op[1]):
        if min(op[1]) < 0 or (static is not None and max(op[1]) >= static):
            return "drop"       # TF crashes / grows a fixed array while size() keeps the static size
        if max(op[1]) >= len(model.items):
            return "stop"       # TF puts rows in the wrong slots and stacks uninitialised memory
    if kind == "write" and params["dynamic_size"] and op[1] < 0:
        return "drop"           # TF crashes
    if kind == "unstack" and static is not None and np.ndim(op[1]) and np.shape(op[1])[0] != static:
        return "drop"           # TF: size() keeps the static size, stack() fails, read() sees the new rows
    if kind == "split" and static is not None and len(op[2]) != static:
        return "drop"           # TF: size() keeps the static size, concat() has the new pieces
    if kind in ("stack", "gather"):
        indices = range(len(model.items)) if kind == "stack" else [i for i in op[1] if 0 <= i < len(model.items)]
        try:
            if len(indices) == len(op[1] if kind == "gather" else indices) and model.odd_rows(indices):
                return "drop"   # TF copies rows of another shape as if they had the element shape
        except _Fail:
            pass
    return None


def random_case(rng, n_ops=10, dtype="float32"):
    dynamic = bool(rng.random() < 0.5)
    size = int(rng.integers(0, 3 if dynamic else 5))
    element_shape = [None, None, (2,), (None,), ()][int(rng.integers(0, 5))]
    params = dict(dtype=dtype, size=size, dynamic_size=dynamic, element_shape=element_shape,
                  infer_shape=bool(rng.random() < 0.7))
    counter = [0]

    def value(shape):
        count = int(np.prod(shape, dtype=np.int64))
        counter[0] += count + 1
        return (np.arange(count) + counter[0]).astype(dtype).reshape(shape)

    def shape():
        return SHAPES[int(rng.integers(0, len(SHAPES)))]

    def index(high):
        return int(rng.integers(-1, high + 3))

    ops = []
    for _ in range(n_ops):
        kind = ["write", "write", "write", "read", "read", "gather", "scatter", "unstack", "split",
                "stack", "stack", "concat", "size"][int(rng.integers(0, 13))]
        if kind == "write":
            ops.append(("write", index(size), value(shape())))
        elif kind == "read":
            ops.append(("read", index(size)))
        elif kind == "gather":
            ops.append(("gather", [index(size) for _ in range(int(rng.integers(0, 4)))]))
        elif kind == "scatter":
            count = int(rng.integers(0, 4))
            ops.append(("scatter", [int(rng.integers(0, size + 2)) for _ in range(count)],
                        value((count,) + shape())))
        elif kind == "unstack":
            count = size if rng.random() < 0.7 else int(rng.integers(0, 5))
            ops.append(("unstack", value((count,) + shape())))
        elif kind == "split":
            count = size if rng.random() < 0.7 else int(rng.integers(0, 5))
            lengths = [int(rng.integers(0, 3)) if rng.random() < 0.3 else 2 for _ in range(count)]
            rest = [(), (), (2,)][int(rng.integers(0, 3))]
            ops.append(("split", value((sum(lengths),) + rest), lengths))
        else:
            ops.append((kind,))
    return params, ops


def run_library(params, ops):
    """The library's results, op by op (the chain continues past a failed op: it changed nothing)."""
    ta = gta.TensorArray(params["dtype"], size=params["size"], dynamic_size=params["dynamic_size"],
                         element_shape=params["element_shape"], infer_shape=params["infer_shape"], mode="tf2")
    results = []
    for op in ops:
        try:
            ta, out = _apply(ta, op)
            results.append(("value", None if out is None else gta.to_numpy(out)))
        except errors.OpError as error:
            results.append(("error", type(error).__name__))
    return results


def _apply(ta, op):
    kind = op[0]
    if kind == "write":
        return ta.write(op[1], op[2]), None
    if kind == "read":
        return ta, ta.read(op[1])
    if kind == "gather":
        return ta, ta.gather(np.array(op[1], np.int32))
    if kind == "scatter":
        return ta.scatter(np.array(op[1], np.int32), op[2]), None
    if kind == "unstack":
        return ta.unstack(op[1]), None
    if kind == "split":
        return ta.split(op[1], np.array(op[2], np.int32)), None
    if kind == "stack":
        return ta, ta.stack()
    if kind == "concat":
        return ta, ta.concat()
    return ta, ta.size()


def _compatible(a, b):
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def _merge(a, b):
    if a is None:
        return b
    if b is None:
        return a
    if not _compatible(a, b):
        raise ValueError("incompatible")
    return tuple(x if x is not None else y for x, y in zip(a, b))


class _Fail(Exception):
    def __init__(self, name):
        self.name = name


class ListModel:
    """tf.TensorArray in a tf.function, as a Python list of NumPy arrays (None: unwritten)."""

    def __init__(self, params):
        self.dtype = np.dtype(params["dtype"])
        self.static = None if params["dynamic_size"] else params["size"]
        self.dynamic = params["dynamic_size"]
        self.infer = params["infer_shape"]
        self.element_shape = params["element_shape"]
        self.list_shape = params["element_shape"]      # the TensorList's own element shape
        self.items = [None] * params["size"]

    def run(self, ops):
        results = []
        for op in ops:
            try:
                out = getattr(self, op[0])(*op[1:])
                results.append(("value", out))
            except _Fail as failure:
                results.append(("error", failure.name))
        return results

    # Python-side checks of TensorFlow's class: ValueError there, InvalidArgumentError here.
    def _shape_ok(self, shape, list_too=True):
        if not _compatible(self.element_shape, shape) or (list_too and not _compatible(self.list_shape, shape)):
            raise _Fail("InvalidArgumentError")

    def _infer(self, shape):
        if self.infer:
            self.element_shape = _merge(self.element_shape, shape)

    def _zero_shape(self, among=None):
        try:
            shape = _merge(self.element_shape, self.list_shape)
        except ValueError:
            raise _Fail("InvalidArgumentError") from None
        items = self.items if among is None else [self.items[i] for i in among]
        for item in items if shape is None or None in shape else ():
            if item is not None:
                try:
                    shape = _merge(shape, item.shape)
                except ValueError:
                    raise _Fail("InvalidArgumentError") from None
        if shape is None or None in shape:
            raise _Fail("InvalidArgumentError")
        return shape

    def _value(self, value):
        value = np.asarray(value)
        if value.dtype != self.dtype:
            raise _Fail("InvalidArgumentError")
        return value

    def write(self, index, value):
        value = self._value(value)
        self._shape_ok(value.shape)
        if index < 0 or (index >= len(self.items) and not self.dynamic):
            raise _Fail("InvalidArgumentError")
        if index >= len(self.items):
            self.items.extend([None] * (index + 1 - len(self.items)))
        self.items[index] = value.copy()
        self._infer(value.shape)

    def _get(self, index, among=None):
        item = self.items[index]
        return np.zeros(self._zero_shape(among), self.dtype) if item is None else item.copy()

    def read(self, index):
        if not 0 <= index < len(self.items):
            raise _Fail("InvalidArgumentError")
        return self._get(index)

    def merged(self):
        try:
            return _merge(self.element_shape, self.list_shape)
        except ValueError:
            raise _Fail("InvalidArgumentError") from None

    def odd_rows(self, indices):
        """Whether the set rows at ``indices`` differ from a fully defined element shape."""
        merged = self.merged()
        return merged is not None and None not in merged and any(
            self.items[i] is not None and self.items[i].shape != merged for i in indices)

    def _rows(self, indices, among=None):
        if not indices:
            return np.zeros((0,) + self._zero_shape(among), self.dtype)
        if self.odd_rows(indices):
            raise _Fail("InvalidArgumentError")
        rows = [self._get(index, among) for index in indices]
        if len({row.shape for row in rows}) > 1:
            raise _Fail("InvalidArgumentError")
        return np.stack(rows)

    def gather(self, indices):
        if any(not 0 <= index < len(self.items) for index in indices):
            raise _Fail("InvalidArgumentError")
        return self._rows(list(indices), among=list(indices))

    def stack(self):
        if not self.items:
            shape = self.merged()
            if shape is None or None in shape:
                raise _Fail("InvalidArgumentError")
            return np.zeros((0,) + shape, self.dtype)
        return self._rows(list(range(len(self.items))))

    def concat(self):
        if not self.items:
            shape = self.merged()
            if shape is None or self.list_shape == () or None in shape[1:]:
                raise _Fail("InvalidArgumentError")
            return np.zeros((0,) + shape[1:], self.dtype)
        zero_shape = None
        if any(item is None for item in self.items):
            # an unwritten slot: the leading dimension every set slot shares, the rest the element shape's
            set_shapes = [item.shape for item in self.items if item is not None and item.ndim]
            try:
                first_unknown = None if self.element_shape is None else (None,) + self.element_shape[1:]
                base = _merge(first_unknown, self.list_shape)
                if base is not None and base[0] is not None:
                    leading = {base[0]}
                else:
                    leading = {shape[0] for shape in set_shapes}
                rest = None if base is None else base[1:]
                for shape in set_shapes if rest is None or None in rest else ():
                    rest = _merge(rest, shape[1:])
            except ValueError:
                raise _Fail("InvalidArgumentError") from None
            if len(leading) != 1 or rest is None or None in rest:
                raise _Fail("InvalidArgumentError")
            zero_shape = (leading.pop(),) + rest
        rows = [np.zeros(zero_shape, self.dtype) if item is None else item for item in self.items]
        if any(row.ndim == 0 for row in rows) or len({row.shape[1:] for row in rows}) > 1:
            raise _Fail("InvalidArgumentError")
        return np.concatenate(rows)

    def scatter(self, indices, value):
        value = self._value(value)
        if value.ndim == 0 or value.shape[0] != len(indices):
            raise _Fail("InvalidArgumentError")
        self._shape_ok(value.shape[1:], list_too=False)
        if indices and (min(indices) < 0 or (max(indices) >= len(self.items) and not self.dynamic)):
            raise _Fail("InvalidArgumentError")
        if indices and max(indices) >= len(self.items):
            self.items.extend([None] * (max(indices) + 1 - len(self.items)))
        for index, row in zip(indices, value):
            self.items[index] = row.copy()
        self._infer(value.shape[1:])

    def unstack(self, value):
        value = self._value(value)
        if value.ndim == 0:
            raise _Fail("InvalidArgumentError")
        if self.static is not None and value.shape[0] != self.static:
            raise _Fail("InvalidArgumentError")
        self._shape_ok(value.shape[1:], list_too=False)
        self.items = [row.copy() for row in value]
        self.list_shape = value.shape[1:]
        self._infer(value.shape[1:])

    def split(self, value, lengths):
        value = self._value(value)
        if value.ndim == 0 or sum(lengths) != value.shape[0] or any(n < 0 for n in lengths):
            raise _Fail("InvalidArgumentError")
        if self.static is not None and len(lengths) != self.static:
            raise _Fail("InvalidArgumentError")
        if not lengths:
            raise _Fail("InvalidArgumentError")
        shapes = [(n,) + value.shape[1:] for n in lengths]
        element_shape = self.element_shape
        if len(set(shapes)) == 1:           # the piece shape is checked (and inferred) for equal lengths only
            self._shape_ok(shapes[0], list_too=False)
            if self.infer:
                element_shape = _merge(element_shape, shapes[0])
        if element_shape is not None and (not element_shape or not _compatible(element_shape[1:], value.shape[1:])):
            raise _Fail("InvalidArgumentError")
        bounds = np.cumsum([0] + list(lengths))
        self.items = [value[bounds[k]:bounds[k + 1]].copy() for k in range(len(lengths))]
        self.element_shape = self.list_shape = element_shape

    def size(self):
        return np.array(len(self.items), np.int32)


def same(expected, actual):
    """Whether two result lists agree: same values (dtype, shape, bits) and error classes."""
    if len(expected) != len(actual):
        return False
    for (kind_e, e), (kind_a, a) in zip(expected, actual):
        if kind_e != kind_a:
            return False
        if kind_e == "error":
            if e != a:
                return False
        elif (e is None) != (a is None):
            return False
        elif e is not None and not (e.dtype == a.dtype and e.shape == a.shape and np.array_equal(e, a)):
            return False
    return True


class _NoTruth:
    def __bool__(self):
        raise RuntimeError("no truth value")


class _DtypeRaises:
    """A value whose ``dtype`` property fails, readable as an array all the same."""
    @property
    def dtype(self):
        raise RuntimeError("dtype property failed")

    def __array__(self, dtype=None, copy=None):
        return np.ones(2, np.float32)


class _GetattrRaises:
    def __getattr__(self, name):
        raise RuntimeError(f"no attribute {name}")


def hostile_arguments(make, ones):
    """(label, call, needles) of hostile arguments to a mode tf2 class: ``make(**kwargs)`` makes a
    float32 TensorArray of size 2 in mode tf2, ``ones(shape)`` a float32 value; each call must raise
    InvalidArgumentError whose text holds every needle (a constructor's argument, or an op's context).
    -> (the cases, the TensorArray the ops' cases call: slot 1 written with ones, which a failed op
    leaves as it is)."""
    ta = make(dynamic_size=True).write(1, ones(2))
    return [
        ("dynamic_size-no-truth", lambda: make(dynamic_size=_NoTruth()), ["dynamic_size", "truth value"]),
        ("dynamic_size-array", lambda: make(dynamic_size=np.array([1, 0])), ["dynamic_size", "truth value"]),
        ("infer_shape-no-truth", lambda: make(infer_shape=_NoTruth()), ["infer_shape", "truth value"]),
        ("write-index-past-int32", lambda: ta.write(2**31, ones(2)),
         ["int32", "(TensorArray.write at index 2147483648, mode 'tf2')"]),
        ("read-index-float", lambda: ta.read(1.0), ["index", "(TensorArray.read, mode 'tf2')"]),
        ("gather-indices-float", lambda: ta.gather([0.5]), ["indices", "(TensorArray.gather, mode 'tf2')"]),
        ("scatter-indices-float", lambda: ta.scatter([0.5], ones((1, 2))), ["indices", "(TensorArray.scatter"]),
        ("split-lengths-float", lambda: ta.split(ones((2, 2)), [1.0, 1.0]), ["lengths", "(TensorArray.split"]),
        ("write-None", lambda: ta.write(0, None), ["None", "(TensorArray.write at index 0, mode 'tf2')"]),
        ("write-getattr-raises", lambda: ta.write(0, _GetattrRaises()), ["(TensorArray.write at index 0, mode 'tf2')"]),
        ("scatter-getattr-raises", lambda: ta.scatter([0], _GetattrRaises()), ["(TensorArray.scatter, mode 'tf2')"]),
        ("scatter-dtype-raises", lambda: ta.scatter([0], _DtypeRaises()), ["rows", "(TensorArray.scatter"]),
    ], ta
