"""TensorFlow as the oracle (optional: skipped when TensorFlow is not installed).

The same op sequences run through ``tf.raw_ops.TensorArray*V3`` (eager, CPU),
through the reference model in its TF-faithful mode, and through a target: the
reference model (the library's contract) and ``gpu_tensorarray.raw_ops`` when it
imports. Outputs, error classes and error texts are compared op by op.

* TF vs the TF-faithful model: compared everywhere, including the partial effects
  TensorFlow keeps after a failed op (that is what validates the model, and with
  it docs/semantics.md, against the real kernels).
* TF vs the target: the target follows docs/semantics.md §6.1 (a failed op changes nothing), so
  an array is dropped from this comparison once TensorFlow kept a partial effect
  on it (detected by the TF-faithful model's state changing on a failed op).
* Calls where TensorFlow aborts the process (negative Split lengths, Concat of a
  gradient array with marked size -1) are never sent to it.

All eager resources live in one per-step container for the whole process, and
TensorFlow's name counter is process-wide: names are compared through
placeholders (see ta_harness). Set TA_ORACLE_TRACE=<file> to log every call sent
to TensorFlow (the way to find a call that aborts the process).

Run with TensorFlow installed, e.g. in a throwaway venv:
``pip install tensorflow-cpu numpy hypothesis pytest`` then ``python -m pytest
tests/tf_parity/test_tf_oracle.py`` (``-m slow`` adds the long searches and the crash checks).
"""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")

from hypothesis import HealthCheck, settings  # noqa: E402
from hypothesis.stateful import run_state_machine_as_test  # noqa: E402

from reference_model import ReferenceModel, as_dtype, errors  # noqa: E402
from ta_harness import LibrarySide, ModelSide, Runner, Side, build_machine  # noqa: E402

_TF_PREFIX = re.compile(r"^\{\{function_node [^}]*\}\}\s*")
_TF_SUFFIX = re.compile(r"\s*\[Op:[A-Za-z0-9_]+\].*$", re.S)
_HANDLE_NAME = re.compile(r'name="(_tensor_arrays|_tensor_array_grads)([^"]*)"')


def tf_message(error):
    return _TF_SUFFIX.sub("", _TF_PREFIX.sub("", error.message))


class TFSide(Side):
    """tf.raw_ops, eager on the CPU. Errors become gpu_tensorarray.errors classes
    with TensorFlow's text (the function-node prefix and [Op:...] suffix removed)."""

    label = "tensorflow"
    faithful = True
    exact_messages = True

    def invoke(self, op, kwargs):
        kwargs = dict(kwargs)
        if "dtype" in kwargs:
            kwargs["dtype"] = tf.as_dtype(as_dtype(kwargs["dtype"]))
        for key in ("element_shape", "element_shape_except0"):
            if key in kwargs:
                shape = kwargs[key]
                kwargs[key] = tf.TensorShape(None if shape is None else list(shape))
        if os.environ.get("TA_ORACLE_TRACE"):
            with open(os.environ["TA_ORACLE_TRACE"], "a") as trace:
                trace.write(f"{op} {kwargs!r}\n")
        with tf.device("/CPU:0"):
            try:
                return getattr(tf.raw_ops, op)(**kwargs)
            except tf.errors.OpError as error:
                raise getattr(errors, type(error).__name__)(tf_message(error)) from None

    def handle_name(self, handle):
        return _HANDLE_NAME.search(repr(handle)).group(2)

    def to_numpy(self, value):
        return value.numpy()


TARGETS = ["model", "library"]


# -- hand-picked sequences ------------------------------------------------------------------------
#
# Each scenario exercises claims of docs/semantics.md (every error text, every check order,
# the partial effects TensorFlow keeps) and the behaviours found by comparing with TF.
# The runner compares every call on every side; ``expect`` additionally pins TF's own
# result where the scenario is about a specific value.

F32, I32, BOOL = np.dtype("float32"), np.dtype("int32"), np.dtype("bool")


def val(*shape, dtype=F32, start=1):
    return (np.arange(int(np.prod(shape, dtype=np.int64))) + start).reshape(shape).astype(dtype)


class Script:
    """Terse calls for scenarios; every call goes through the runner (all sides)."""

    def __init__(self, runner):
        self.r = runner
        self.last = None

    def _call(self, op, **kwargs):
        results, gen = self.r.call(op, **kwargs)
        self.last = None if results is None else results[0]
        return self.last

    def new(self, size, dtype=F32, **kwargs):
        count = len(self.r.entries)
        self._call("TensorArrayV3", size=size, dtype=dtype, **kwargs)
        return self.r.entries[-1] if len(self.r.entries) > count else None

    def grad(self, ta, source="gradients", prepend=None, flow=0.0):
        count = len(self.r.entries)
        if prepend is None:
            self._call("TensorArrayGradV3", handle=ta, flow_in=flow, source=source)
        else:
            self._call("TensorArrayGradWithShape", handle=ta, flow_in=flow,
                       shape_to_prepend=np.asarray(prepend, np.int32), source=source)
        if len(self.r.entries) > count:
            return self.r.entries[-1]
        return self.r.by_canon.get(f"{ta.canon}@{source}")

    def write(self, ta, index, value, flow=0.0):
        return self._call("TensorArrayWriteV3", handle=ta, index=index, value=value, flow_in=flow)

    def read(self, ta, index, dtype=None):
        return self._call("TensorArrayReadV3", handle=ta, index=index, flow_in=0.0, dtype=dtype or self._dtype(ta))

    def gather(self, ta, indices, dtype=None, element_shape=None):
        return self._call("TensorArrayGatherV3", handle=ta, indices=np.asarray(indices, np.int32), flow_in=0.0,
                          dtype=dtype or self._dtype(ta), element_shape=element_shape)

    def scatter(self, ta, indices, value, flow=0.0):
        return self._call("TensorArrayScatterV3", handle=ta, indices=np.asarray(indices, np.int32), value=value,
                          flow_in=flow)

    def split(self, ta, value, lengths):
        return self._call("TensorArraySplitV3", handle=ta, value=value, lengths=np.asarray(lengths, np.int64),
                          flow_in=0.0)

    def concat(self, ta, dtype=None, element_shape_except0=None):
        return self._call("TensorArrayConcatV3", handle=ta, flow_in=0.0, dtype=dtype or self._dtype(ta),
                          element_shape_except0=element_shape_except0)

    def size(self, ta):
        return self._call("TensorArraySizeV3", handle=ta, flow_in=0.0)

    def close(self, ta):
        return self._call("TensorArrayCloseV3", handle=ta)

    def _dtype(self, ta):
        gen_i = self.r.sides.index(self.r.gen_side)
        return self.r.gen.state(ta.handles[gen_i]).dtype

    def expect(self, value=None, error=None, text=None):
        """Pin TensorFlow's result of the last call (not only its agreement with the model)."""
        got = self.last
        if error is not None:
            assert isinstance(got, error), got
            if text is not None:
                assert text in str(got), (text, str(got))
            return
        assert not isinstance(got, BaseException), got
        array = got[1] if got[0] == "array" else got[2][0][1]
        np.testing.assert_array_equal(array, np.asarray(value))
        assert array.shape == np.asarray(value).shape, (array.shape, np.asarray(value).shape)


IAE = errors.InvalidArgumentError


def scenario_create(s):
    first = s.new(1)
    s.new(np.array([2], np.int32))
    s.expect(error=IAE, text="TensorArray size must be scalar, but had shape: [1]")
    s.new(-1)
    s.expect(error=IAE, text="Size should be >= 0.")
    second = s.new(0, tensor_array_name="foo")
    for side, a, b in zip(s.r.sides, first.handles, second.handles):
        # the counter is process-wide and moves only when a creation gets past the size checks
        counter_a = int(side.handle_name(a).rsplit("_", 1)[1])
        assert side.handle_name(b) == f"foo_{counter_a + 1}", (side.label, side.handle_name(a), side.handle_name(b))
    s.size(second)
    s.expect(0)


def scenario_write_checks(s):
    ta = s.new(3)
    s.write(ta, np.array([1], np.int32), val(2))
    s.expect(error=IAE, text="TensorArray index must be scalar, but had shape: [1]")
    s.write(ta, 0, val(2, dtype=I32))
    s.expect(error=IAE, text="TensorArray dtype is float but Op is trying to write dtype int32.")
    s.write(ta, -1, val(2))
    s.write(ta, 3, val(2))
    s.write(ta, 0, val(2), flow=5.0)
    s.expect(5.0)  # flow_out is flow_in
    s.write(ta, 0, val(2))
    s.expect(error=IAE, text="because it has already been written to.")
    s.read(ta, 0)
    s.write(ta, 0, val(2))
    s.expect(error=IAE, text="because it has already been read.")  # read check before written check
    s.close(ta)
    s.write(ta, 1, val(2, dtype=I32))
    s.expect(error=IAE, text="TensorArray dtype is float")  # dtype before closed
    s.write(ta, 1, val(2))
    s.expect(error=IAE, text="has already been closed.")


def scenario_write_shapes(s):
    ta = s.new(3, element_shape=(None, 2))
    s.write(ta, 0, val(3))
    s.expect(error=IAE, text="because the value shape is [3] which is incompatible with the TensorArray's "
                             "inferred element shape: [?,2] (consider setting infer_shape=False).")
    s.write(ta, 0, val(4, 2))
    s.write(ta, 1, val(1, 2))  # not identical: element shape stays [?,2]
    s.read(ta, 2)
    s.expect(error=IAE, text="Furthermore, the element shape is not fully defined: [?,2].")
    same = s.new(3, identical_element_shapes=True)
    s.write(same, 0, val(2, 3))
    s.read(same, 2)
    s.expect(np.zeros((2, 3), np.float32))  # zeros of the captured element shape
    s.write(same, 1, val(3))
    s.expect(error=IAE, text="inferred element shape: [2,3]")


def scenario_dynamic_growth(s):
    ta = s.new(0, dynamic_size=True, element_shape=(2,))
    s.write(ta, 4, val(3))  # TF: fails, but the growth to 5 persists
    s.expect(error=IAE, text="incompatible")
    s.size(ta)
    s.expect(5)
    dyn = s.new(1, dynamic_size=True)
    s.write(dyn, -1, val(1))
    s.expect(error=IAE, text="Tried to write to index -1 but array is not resizeable and size is: 1")
    s.write(dyn, 3, val(1))
    s.size(dyn)
    s.expect(4)


def scenario_read_checks(s):
    ta = s.new(3, element_shape=(2,))
    s.read(ta, np.array([0], np.int32))
    s.expect(error=IAE, text="TensorArray index must be scalar, but had shape: [1]")
    s.read(ta, 0, dtype=np.dtype("float64"))
    s.expect(error=IAE, text="TensorArray dtype is float but Op requested dtype double.")
    s.read(ta, -1)
    s.expect(error=IAE, text="Tried to read from index -1 but array size is: 3")
    s.read(ta, 3)
    s.expect(error=IAE, text="Tried to read from index 3 but array size is: 3")
    s.read(ta, 1)
    s.expect(np.zeros(2, np.float32))
    s.read(ta, 1)
    s.expect(error=IAE, text="Could not read index 1 twice because it was cleared after a previous read "
                             "(perhaps try setting clear_after_read = false?).")
    s.write(ta, 1, val(2))
    s.expect(error=IAE, text="because it has already been read.")
    keep = s.new(2, clear_after_read=False)
    s.write(keep, 0, val(3))
    s.read(keep, 0)
    s.read(keep, 0)
    s.expect(val(3))
    s.read(keep, 1)
    s.expect(error=IAE, text="Could not read from TensorArray index 1.  Furthermore, the element shape is not "
                             "fully defined: <unknown>.  It is possible")
    s.close(keep)
    s.read(keep, 0, dtype=I32)
    s.expect(error=IAE, text="TensorArray dtype is float but Op requested dtype int32.")
    s.read(keep, 0)
    s.expect(error=IAE, text="has already been closed.")


def scenario_gather(s):
    ta = s.new(3, element_shape=(2,), clear_after_read=False)
    s.gather(ta, [0], dtype=I32)
    s.expect(error=IAE, text="TensorArray dtype is float but Op requested dtype int32.")
    s.gather(ta, [0], element_shape=(3,))
    s.expect(error=IAE, text="PartialTensorShape: Incompatible shapes during merge: [2] vs. [3]")
    s.gather(ta, [0], element_shape=(2, 1))
    s.expect(error=IAE, text="PartialTensorShape: Incompatible ranks during merge: 1 vs. 2")
    s.gather(ta, np.int32(0))
    s.expect(error=IAE, text="Expected indices to be a vector, but received shape: []")
    s.gather(ta, [], element_shape=(2,))
    s.expect(np.zeros((0, 2), np.float32))
    s.gather(ta, [], element_shape=(None,))
    s.expect(error=errors.UnimplementedError,
             text="TensorArray has size zero, but element shape [?] is not fully defined. Currently only static "
                  "shapes are supported when packing zero-size TensorArrays.")
    s.write(ta, 0, val(2))
    s.gather(ta, [0, 0, 1])  # duplicates; slot 1 zero-filled
    s.expect([[1, 2], [1, 2], [0, 0]])
    s.gather(ta, [0], element_shape=(None,))
    s.gather(ta, [0, 5])
    s.expect(error=IAE, text="Tried to read from index 5 but array size is: 3")
    s.close(ta)
    s.gather(ta, [0], element_shape=(3,))  # the merge comes before any closed check
    s.expect(error=IAE, text="Incompatible shapes during merge: [2] vs. [3]")
    s.gather(ta, [], element_shape=(2,))  # no closed check for empty indices
    s.expect(np.zeros((0, 2), np.float32))
    s.gather(ta, [0])
    s.expect(error=IAE, text="has already been closed.")


def scenario_gather_merge_persists(s):
    ta = s.new(2)  # unknown element shape
    s.read(ta, 0)
    s.expect(error=IAE, text="the element shape is not fully defined: <unknown>")
    s.gather(ta, np.int32(0), element_shape=(3,))  # fails after merging [3] in
    s.expect(error=IAE, text="Expected indices to be a vector")
    s.read(ta, 0)  # TF: zeros of the merged shape
    s.expect(np.zeros(3, np.float32))


def scenario_gather_shapes(s):
    def fresh():
        ta = s.new(3, clear_after_read=False)
        s.write(ta, 0, val(2))
        s.write(ta, 1, val(3))
        s.write(ta, 2, np.zeros((2, 0), np.float32))
        return ta

    s.gather(fresh(), [0, 1])
    s.expect(error=IAE, text="TensorArray has inconsistent shapes.  Index 0 has shape: [2] but index 1 has shape: [3]")
    s.gather(fresh(), [1, 1, 0])  # positions in indices, not array indices
    s.expect(error=IAE, text="Index 0 has shape: [3] but index 2 has shape: [2]")
    s.gather(fresh(), [2, 0, 1])  # value 0 has no elements: TF returns [3,2,0] without the consistency check
    s.expect(np.zeros((3, 2, 0), np.float32))
    s.gather(fresh(), [0, 2])
    s.expect(error=IAE, text="Index 0 has shape: [2] but index 1 has shape: [2,0]")
    s.gather(fresh(), [0, 1], element_shape=(3,))
    s.expect(error=IAE, text="TensorArray was passed element_shape [3] which does not match the Tensor at index 0: [2]")
    other = fresh()
    s.gather(other, [1, 0], element_shape=(None,))  # TF: merges [?]; the reads mark slots read
    s.expect(error=IAE, text="Index 0 has shape: [3] but index 1 has shape: [2]")
    s.write(other, 0, val(1))
    s.expect(error=IAE, text="already been read")


def scenario_gather_grows_grad(s):
    ta = s.new(0, dtype=I32, element_shape=(), dynamic_size=True)
    g = s.grad(ta)
    s.gather(g, [0, -1])  # TF: the read of 0 grows the grad array to 1 before -1 fails
    s.expect(error=IAE, text="Tried to read from index -1 but array size is: 1")
    s.size(g)


def scenario_gather_partial_clear(s):
    ta = s.new(2, element_shape=(2,))
    s.write(ta, 0, val(2))
    s.gather(ta, [0, 0])  # TF: first read clears slot 0, second fails
    s.expect(error=IAE, text="Could not read index 0 twice")
    s.read(ta, 0)


def scenario_scatter(s):
    ta = s.new(3)
    s.scatter(ta, [0], val(1, dtype=I32))
    s.expect(error=IAE, text="TensorArray dtype is float but Op is trying to write dtype int32.")
    s.scatter(ta, [0], np.float32(1))
    s.expect(error=IAE, text="Input value for unpack must be at least a vector but received shape: []")
    s.scatter(ta, np.int32(0), np.int32(1))  # dtype, then rank, then (closed,) indices
    s.expect(error=IAE, text="TensorArray dtype is float but Op is trying to write dtype int32.")
    s.scatter(ta, np.int32(0), val(1))
    s.expect(error=IAE, text="Expected indices to be a vector, but received shape: []")
    s.scatter(ta, [0, 1], val(3))
    s.expect(error=IAE, text="Expected len(indices) == values.shape[0], but saw: 2 vs. 3")
    s.scatter(ta, [0, 3], val(2))
    s.expect(error=IAE, text="Max scatter index must be < array size (3 vs. 3)")
    s.scatter(ta, [], np.zeros((0, 4), np.float32))
    s.expect(0.0)
    s.scatter(ta, [2, 0], val(2, 2), flow=5.5)
    s.expect(5.5)
    s.gather(ta, [0, 2])
    s.expect([[3, 4], [1, 2]])
    s.close(ta)
    s.scatter(ta, np.int32(0), val(1))
    s.expect(error=IAE, text="has already been closed.")  # closed before the indices check


def scenario_scatter_partial(s):
    ta = s.new(3)
    s.scatter(ta, [0, -1], val(2))  # TF writes slot 0, then fails
    s.expect(error=IAE, text="Tried to write to index -1 but array is not resizeable and size is: 3")
    s.read(ta, 0)
    other = s.new(3)
    s.scatter(other, [2, 2], val(2))
    s.expect(error=IAE, text="Could not write to TensorArray index 2 because it has already been written to.")
    s.read(other, 2)
    dyn = s.new(1, dynamic_size=True)
    s.scatter(dyn, [4, 1], val(2, 2))
    s.size(dyn)
    s.expect(5)
    s.scatter(dyn, [6, -1], val(2))  # grows to 7 first: the message says 7
    s.expect(error=IAE, text="Tried to write to index -1 but array is not resizeable and size is: 7")


def scenario_split(s):
    ta = s.new(3, clear_after_read=False)
    s.split(ta, val(3), np.int64(3))
    s.expect(error=IAE, text="Expected lengths to be a vector, received shape: []")
    s.split(ta, np.float32(1), np.int64(1))  # lengths, then value
    s.expect(error=IAE, text="Expected lengths to be a vector, received shape: []")
    s.split(ta, np.float32(1), [1])
    s.expect(error=IAE, text="Expected value to be at least a vector, but received shape: []")
    s.split(ta, val(2, dtype=I32), [1])  # sum before dtype
    s.expect(error=IAE, text="Expected sum of lengths")
    s.split(ta, val(3), [1, 1, 0])
    s.expect(error=IAE, text="Expected sum of lengths to be equal to values.shape[0], but sum of lengths is 2 and "
                             "value's shape is: [3]")
    s.split(ta, val(3), [3])
    s.expect(error=IAE, text="TensorArray's size is not equal to the size of lengths (3 vs. 1), and the TensorArray "
                             "is not marked as dynamically resizeable")
    s.split(ta, val(3, dtype=I32), [3])  # count checked before dtype
    s.expect(error=IAE, text="(3 vs. 1)")
    s.split(ta, val(3, dtype=I32), [1, 1, 1])
    s.expect(error=IAE, text="TensorArray dtype is float but Op is trying to write dtype int32.")
    s.split(ta, val(4, 2), [2, 0, 2])
    s.concat(ta)
    s.expect(val(4, 2))
    s.gather(ta, [1])
    s.expect(np.zeros((1, 0, 2), np.float32))
    s.close(ta)
    s.split(ta, val(3), [3])
    s.expect(error=IAE, text="has already been closed.")  # closed before the count


def scenario_split_dynamic(s):
    big = s.new(4, dynamic_size=True)
    s.split(big, val(2), [1, 1])  # larger dynamic arrays still fail
    s.expect(error=IAE, text="(4 vs. 2)")
    small = s.new(0, dynamic_size=True)
    s.split(small, val(3), [1, 2])
    s.size(small)
    s.expect(2)
    same = s.new(2, identical_element_shapes=True)
    s.split(same, val(3, 2), [2, 1])  # piece 0 fixes the element shape, piece 1 does not fit
    s.expect(error=IAE, text="Could not write to TensorArray index 1 because the value shape is [1,2]")
    s.read(same, 0)


def scenario_concat(s):
    ta = s.new(3)
    s.concat(ta, dtype=I32)
    s.expect(error=IAE, text="TensorArray dtype is float but Op requested dtype int32.")
    s.write(ta, 0, val(2))
    s.write(ta, 1, val(0))
    s.write(ta, 2, val(1))
    s.concat(ta, element_shape_except0=(3,))
    s.expect(error=IAE, text="TensorArray was passed element_shape_except0 [3] but index 0 has (excepting "
                             "dimension 0) shape: [] which does not match.")
    keep = s.new(3, clear_after_read=False)
    s.write(keep, 0, val(2))
    s.write(keep, 1, val(0))
    s.write(keep, 2, val(1, start=7))
    s.concat(keep)
    s.expect([1, 2, 7])
    s._call("TensorArrayConcatV3", handle=keep, flow_in=0.0, dtype=F32)
    s.expect([1, 2, 7])
    assert s.last[2][1][1].tolist() == [2, 0, 1] and s.last[2][1][1].dtype == np.int64
    scal = s.new(1)
    s.write(scal, 0, np.float32(3))
    s.concat(scal)
    s.expect(error=IAE, text="Concat saw a scalar shape at index 0 but requires at least vectors.  Did you mean to "
                             "call pack?")
    mixed = s.new(2)
    s.write(mixed, 0, val(1, 2))
    s.write(mixed, 1, val(1, 3))
    s.concat(mixed)
    s.expect(error=IAE, text="TensorArray has inconsistent shapes.  Index 0 has (excepting dimension 0) shape: [2] "
                             "but index 1 has (excepting dimension 0) shape: [3]")
    empty = s.new(0)
    s.concat(empty, element_shape_except0=(2,))
    s.expect(np.zeros((0, 2), np.float32))
    s.concat(empty)
    s.expect(error=errors.UnimplementedError,
             text="TensorArray has size zero, but element_shape_except0 <unknown> is not fully defined. Currently "
                  "only static shapes are supported when concatenating zero-size TensorArrays.")
    s.close(empty)
    s.concat(empty, element_shape_except0=(2,))
    s.expect(error=IAE, text="has already been closed.")


def scenario_size_close(s):
    ta = s.new(2)
    g = s.grad(ta)
    s.close(ta)
    s.close(ta)  # twice is fine
    s.size(ta)
    s.expect(error=IAE, text="has already been closed.")
    s.size(g)  # closing the forward leaves the gradient array open
    s.expect(2)
    s.grad(ta)
    s.expect(error=IAE, text="has already been closed.")


def scenario_grad_basics(s):
    ta = s.new(3, element_shape=(2,), dynamic_size=True)
    s.write(ta, 0, val(2))
    s.write(ta, 1, np.zeros((2,), np.float32))
    g = s.grad(ta, flow=7.0)
    assert s.last[2][1][1] == 0.0  # flow_out is a fresh 0.0, not flow_in
    s.grad(g)
    s.expect(error=IAE, text="Wrong input container. _tensor_array_grads")
    s.write(ta, 3, val(2))  # growth disabled by the grad call
    s.expect(error=IAE, text="Tried to write to index 3 but array is not resizeable and size is: 3")
    s.size(g)
    s.expect(3)
    s.read(g, 0)  # soft zeros shaped like the forward slot
    s.expect(np.zeros(2, np.float32))
    s.read(g, 0)
    s.expect(error=IAE, text="twice")  # grad arrays clear after read
    s.read(g, 4)  # past the end: zeros, and the array grows
    s.expect(np.zeros(2, np.float32))
    s.size(g)
    s.expect(5)
    s.write(g, 5, val(2))
    s.expect(error=IAE, text="Tried to write to index 5 but array is not resizeable and size is: 5")
    s.write(g, 1, val(2))
    s.write(g, 1, val(2, start=10))
    s.write(g, 1, val(2, start=100))
    s.read(g, 1)
    s.expect([111, 114])
    s.write(g, 2, val(2))  # forward slot 2 was never written: a plain first write
    s.write(g, 2, val(3))
    s.expect(error=IAE, text="is incompatible with the TensorArray's inferred element shape: [2]")


def scenario_grad_sources(s):
    ta = s.new(2)
    s.write(ta, 0, np.float32(1))
    a = s.grad(ta, source="gradients", prepend=[4])
    b = s.grad(ta, source="gradients")  # the existing array, as is
    assert a is b
    s.write(a, 0, val(4))  # shape prepend ++ []
    s.write(ta, 1, np.float32(2))
    s.read(a, 1)  # no soft shape for slot 1 and an unknown element shape
    s.expect(error=IAE, text="Could not read from TensorArray index 1.")
    c = s.grad(ta, source="")
    s.write(c, 0, val(1))
    s.expect(error=IAE, text="Could not aggregate to TensorArray index 0 because the existing shape is [] but the "
                             "new input shape is [1].")
    s.write(c, 0, np.float32(5))  # soft scalar slot: stored, not added
    s.read(c, 0)
    s.expect(np.float32(5))
    s.close(c)
    s.grad(ta, source="")  # a closed grad array is returned closed
    s.size(c)
    s.expect(error=IAE, text="has already been closed.")


def scenario_grad_with_shape(s):
    for prepend, text in ((np.int32(3), "shape must be a vector of {int32,int64}, got shape []"),
                          ([[1]], "shape must be a vector of {int32,int64}, got shape [1,1]"),
                          ([-1], "Dimension -1 must be >= 0")):
        ta = s.new(2, element_shape=(2, 3), dynamic_size=True)
        s.grad(ta, source="x", prepend=prepend)
        s.expect(error=IAE, text=text)
    s.write(ta, 2, val(2, 3))  # TF: the failed grad calls already disabled growth
    s.expect(error=IAE, text="Tried to write to index 2 but array is not resizeable and size is: 2")
    fwd = s.new(2, element_shape=(2, 3))
    g = s.grad(fwd, source="y", prepend=[4, 5])
    s.write(g, 0, val(2, 3))
    s.expect(error=IAE, text="Could not write to TensorArray")
    s.write(g, 0, val(4, 5, 2, 3))
    s.read(g, 1)
    s.expect(np.zeros((4, 5, 2, 3), np.float32))
    unknown = s.new(1)
    h = s.grad(unknown, source="y", prepend=[4, 5])
    s.write(h, 0, val(4, 5, 7))
    s.read(h, 0)
    s.expect(val(4, 5, 7))


def scenario_grad_aggregation(s):
    for dtype in (F32, I32, np.dtype("int64"), np.dtype("float64"), np.dtype("complex64"), np.dtype("float16")):
        ta = s.new(3, dtype=dtype)
        g = s.grad(ta)
        for k in (3, 4, 5):
            s.write(g, 2, np.asarray(k, dtype))
        s.read(g, 2)
        s.expect(np.asarray(12, dtype))
    ta = s.new(2)
    g = s.grad(ta)
    s.scatter(g, [0, 0, 1], val(3))  # duplicate indices sum
    s.gather(g, [0, 1])
    s.expect([3, 3])
    b = s.new(2, dtype=BOOL)
    gb = s.grad(b)
    s.write(gb, 0, np.array([True]))
    s.write(gb, 0, np.array([True]))
    s.expect(error=IAE, text="tensor_array::AddToTensor type not supported: bool")
    s.read(gb, 0)
    s.expect([True])
    f = s.new(2, dtype=BOOL)
    s.write(f, 0, np.array([True]))
    s.write(f, 0, np.array([True]))
    s.expect(error=IAE, text="already been written to")


def scenario_grad_concat_split(s):
    ta = s.new(0, dynamic_size=True, clear_after_read=False)
    s.split(ta, val(3), [1, 2])  # marked size 2
    s.write(ta, 3, val(1))  # size 4
    g = s.grad(ta)
    s.size(g)
    s.expect(4)
    s.write(g, 0, val(1))
    s.write(g, 1, val(2))
    s.concat(g)  # uses the marked size: slots 0 and 1 only
    s.expect([1, 1, 2])
    s.split(g, val(2), [1, 1])  # a grad split must match the size (4), not the marked size
    s.expect(error=IAE, text="(4 vs. 2)")
    s.split(g, val(4), [1, 1, 1, 1])
    s.expect(error=IAE, text="because it has already been read.")
    fresh = s.new(3)
    g3 = s.grad(fresh)
    s.split(g3, val(3), [1, 1, 1])  # a grad array of a never-split forward (marked -1) accepts splits
    s.read(g3, 2)
    s.expect([3])


SCENARIOS = {name[len("scenario_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("scenario_")}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_against_tensorflow(name, target):
    SCENARIOS[name](Script(oracle_runner(target)))


def make_target(name):
    if name == "model":
        return ModelSide(ReferenceModel(), "target")
    pytest.importorskip("gpu_tensorarray.raw_ops")
    return LibrarySide()


def oracle_runner(target):
    sides = [TFSide(), ModelSide(ReferenceModel(tf_faithful=True))]
    if target is not None:
        sides.append(make_target(target))
    return Runner(sides, gen_index=1)


_COMMON = dict(deadline=None, suppress_health_check=list(HealthCheck), print_blob=True)


@pytest.mark.parametrize("target", TARGETS)
def test_random_sequences_against_tensorflow(target):
    make_target(target)  # skip early when the library is missing
    machine = build_machine(lambda: oracle_runner(target), "TFOracle")
    run_state_machine_as_test(machine, settings=settings(max_examples=200, stateful_step_count=30, **_COMMON))


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_random_sequences_against_tensorflow_long(target):
    make_target(target)
    machine = build_machine(lambda: oracle_runner(target), "TFOracle")
    run_state_machine_as_test(machine, settings=settings(max_examples=2000, stateful_step_count=60, **_COMMON))


_CRASHES = {
    "negative_split_length": """
        h, _ = r.TensorArrayV3(size=2, dtype=tf.float32)
        r.TensorArraySplitV3(handle=h, value=np.zeros(2, np.float32), lengths=np.array([3, -1], np.int64),
                             flow_in=0.0)
    """,
    "concat_of_grad_with_marked_size_minus_1": """
        h, _ = r.TensorArrayV3(size=2, dtype=tf.float32, element_shape=[1])
        g, _ = r.TensorArrayGradV3(handle=h, flow_in=0.0, source="g")
        r.TensorArrayConcatV3(handle=g, flow_in=0.0, dtype=tf.float32, element_shape_except0=[])
    """,
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(_CRASHES))
def test_tensorflow_still_aborts_where_we_raise(case):
    """docs/semantics.md §6.2: these calls kill a TensorFlow process (so the oracle never
    sends them); the model (and the library) raise InvalidArgumentError instead."""
    script = "import numpy as np, tensorflow as tf\nr = tf.raw_ops\n" + textwrap.dedent(_CRASHES[case])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=300)
    assert done.returncode < 0 or done.returncode > 128, (done.returncode, done.stderr[-2000:])


# -- arguments the scenarios never send: integer and oversized element shapes, values NumPy holds as objects --
def _library():
    pytest.importorskip("gpu_tensorarray.raw_ops")
    from gpu_tensorarray import raw_ops
    return raw_ops


def _tf_error(call):
    """TensorFlow's error class name and text (eager, CPU) for ``call``, or None when it succeeds."""
    with tf.device("/CPU:0"):
        try:
            call()
        except tf.errors.OpError as error:
            return type(error).__name__, tf_message(error)
        except (ValueError, TypeError) as error:       # conversion errors, before any op
            return type(error).__name__, str(error)
    return None


@pytest.mark.parametrize("spec", [3, np.int64(3)], ids=["int", "np-int64"])
def test_an_integer_element_shape_against_tensorflow(spec):
    ro, r = _library(), tf.raw_ops
    with tf.device("/CPU:0"):
        handle, flow = r.TensorArrayV3(size=2, dtype=tf.float32, element_shape=spec)
        expected_read = r.TensorArrayReadV3(handle=handle, index=0, flow_in=flow, dtype=tf.float32).numpy()
        flow = r.TensorArrayWriteV3(handle=handle, index=1, value=[1.0, 2.0, 3.0], flow_in=flow)
        expected_gather = r.TensorArrayGatherV3(handle=handle, indices=[1], flow_in=flow, dtype=tf.float32,
                                                element_shape=spec).numpy()
    handle, flow = ro.TensorArrayV3(2, "float32", element_shape=spec)
    np.testing.assert_array_equal(ro.TensorArrayReadV3(handle, 0, flow, "float32"), expected_read)
    flow = ro.TensorArrayWriteV3(handle, 1, [1.0, 2.0, 3.0], flow)
    np.testing.assert_array_equal(ro.TensorArrayGatherV3(handle, [1], flow, "float32", element_shape=spec),
                                  expected_gather)
    assert expected_read.shape == (3,) and expected_gather.shape == (1, 3)


@pytest.mark.parametrize("shape", [[2**62, 4], [2**62, 4, None], [2**62, 4, 0], [3, 2**62], [None, 2**62, 4],
                                   [2**62, None, 4], [0, 2**62, 4]],
                         ids=["2**62x4", "then-unknown", "then-zero", "3x2**62", "unknown-first", "unknown-between",
                              "zero-first"])
def test_element_shapes_past_int64_entries_against_tensorflow(shape):
    ro, r, lib = _library(), tf.raw_ops, errors.InvalidArgumentError
    import gpu_tensorarray.errors as library_errors
    expected = _tf_error(lambda: r.TensorArrayV3(size=2, dtype=tf.float32, element_shape=shape))
    try:
        ro.TensorArrayV3(2, "float32", element_shape=shape)
        got = None
    except library_errors.OpError as error:
        got = type(error).__name__, error.message
    assert got == expected, (got, expected)
    with tf.device("/CPU:0"):
        handle, flow = r.TensorArrayV3(size=2, dtype=tf.float32)
    expected = _tf_error(lambda: r.TensorArrayGatherV3(handle=handle, indices=[0], flow_in=flow, dtype=tf.float32,
                                                       element_shape=shape))
    if got is None:
        return      # a valid shape: what Gather then does with it is the scenarios' business
    handle, flow = ro.TensorArrayV3(2, "float32")
    with pytest.raises(library_errors.InvalidArgumentError) as caught:
        ro.TensorArrayGatherV3(handle, [0], flow, "float32", element_shape=shape)
    assert expected[0] == lib.__name__
    assert caught.value.message == f"{expected[1]} (TensorArray {handle.name})"     # TensorFlow's text, then the name


@pytest.mark.parametrize("dtype", ["float32", "string", "int64"])
@pytest.mark.parametrize("value", [-(2**63) - 1, [-(2**63) - 1], [1, None], ["a", None], 2**64],
                         ids=["below-int64", "list-below-int64", "int-and-None", "str-and-None", "2**64"])
def test_values_numpy_holds_only_as_objects_against_tensorflow(dtype, value):
    ro, r = _library(), tf.raw_ops
    import gpu_tensorarray.errors as library_errors
    with tf.device("/CPU:0"):
        handle, flow = r.TensorArrayV3(size=1, dtype=tf.as_dtype(dtype))
    kind, text = _tf_error(lambda: r.TensorArrayWriteV3(handle=handle, index=0, value=value, flow_in=flow))
    assert kind == "ValueError" and text.startswith(("Can't convert Python sequence", "Attempt to convert")), text
    handle, flow = ro.TensorArrayV3(1, dtype)
    with pytest.raises(library_errors.InvalidArgumentError, match="^Cannot convert ") as caught:
        ro.TensorArrayWriteV3(handle, 0, value, flow)
    assert "trying to write dtype" not in caught.value.message and handle.name in caught.value.message


@pytest.mark.parametrize("value", [[np.float16(1), np.float16(2)], [[np.float16(1)], [np.float16(2)]],
                                   [np.float16(1), 2.0], [np.float64(1), np.float64(2)], [np.int32(1), np.int32(2)],
                                   [np.int64(1), np.int64(2)]],
                         ids=["f16", "f16-nested", "f16-float", "f64", "i32", "i64"])
def test_lists_of_numpy_scalars_against_tensorflow(value):
    """The library's dtype is TensorFlow's in tf.function, and TensorFlow's eager one where the two agree."""
    _library()
    from gpu_tensorarray import conversion
    from gpu_tensorarray.backends import get_backend
    in_graph = tf.function(lambda: tf.convert_to_tensor(value))().dtype.as_numpy_dtype
    eager = tf.convert_to_tensor(value).dtype.as_numpy_dtype
    ours = conversion.to_tensor(get_backend(), value).dtype
    assert ours == in_graph, (ours, in_graph, eager)
    if eager == in_graph:
        assert ours == eager


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64", "complex128", "bfloat16"])
def test_gradient_arrays_add_subnormals_as_tensorflow(backend, dtype):
    """TensorFlow's CPU kernels run with FTZ and DAZ: a gradient array's adds flush subnormal
    operands and sums to zeros of their sign, a first arrival is stored with every bit.
    Repeated indices in one scatter, then writes into slots with and without values."""
    import gpu_tensorarray as gta
    from gpu_tensorarray import raw_ops as ro

    if dtype == "bfloat16":
        dtype = np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    dtype = np.dtype(dtype)
    info = np.finfo({"complex64": np.float32, "complex128": np.float64, "bfloat16": np.float32}.get(dtype.name, dtype))
    rng = np.random.default_rng(11)
    # Mostly tiny magnitudes: an element whose arrivals are all tiny shows the flush.
    subnormal = float(info.smallest_subnormal)
    scales = np.array([1.0, float(info.tiny), float(info.tiny) * 1.5, subnormal * 3, subnormal * 50, 0.0])

    def values(shape):
        def part():
            return rng.standard_normal(shape) * scales[rng.integers(0, len(scales), shape)]
        return (part() + 1j * part()).astype(dtype) if dtype.kind == "c" else part().astype(dtype)

    indices = rng.integers(0, 5, size=12).astype(np.int32)
    rows, extra = values((12, 3)), values((2, 3))

    def run(ops):
        handle, flow = ops.TensorArrayV3(size=6, dtype=dtype, element_shape=[3])
        grad, flow = ops.TensorArrayGradV3(handle=handle, flow_in=flow, source="gradients")
        flow = ops.TensorArrayScatterV3(handle=grad, indices=indices, value=rows, flow_in=flow)
        flow = ops.TensorArrayWriteV3(handle=grad, index=1, value=extra[0], flow_in=flow)   # onto a value
        flow = ops.TensorArrayWriteV3(handle=grad, index=5, value=extra[1], flow_in=flow)   # a first arrival
        return ops.TensorArrayGatherV3(handle=grad, indices=np.arange(6, dtype=np.int32), flow_in=flow,
                                       dtype=dtype)

    expected = np.asarray(run(tf.raw_ops))
    unflushed = np.zeros((6, 3), dtype)          # the same adds in IEEE arithmetic, subnormals kept
    seen = set()
    for index, row in zip([*indices.tolist(), 1, 5], [*rows, *extra]):
        unflushed[index] = unflushed[index] + row if index in seen else row
        seen.add(index)
    assert (unflushed.tobytes() == expected.tobytes()) == (dtype == np.float16)   # the data meets the flush
    actual = gta.to_numpy(run(ro))
    assert actual.dtype == expected.dtype and actual.tobytes() == expected.tobytes()


@pytest.mark.parametrize("spec", list(range(0, 40)) + list(range(100, 140)) + [np.int8(1), np.uint8(3), np.float32(1.0),
                                                                              np.float64(2.5), True, np.True_, 1 + 0j],
                         ids=repr)
def test_dtype_numbers_against_tensorflow(spec):
    """TensorFlow's DataType numbers name the dtypes tf.as_dtype gives them; one no array here holds
    (quantized, float8, resource, a reference type) or no DataType at all is InvalidArgumentError."""
    _library()
    from gpu_tensorarray import dtypes
    from gpu_tensorarray.errors import InvalidArgumentError
    try:
        theirs = tf.as_dtype(spec)
    except TypeError:
        theirs = None
    holdable = theirs is not None and not theirs._is_ref_dtype and theirs.name in dtypes.NAMES | {"string"}
    if not holdable:
        with pytest.raises(InvalidArgumentError, match="^Unsupported dtype" if theirs is not None else "^Unknown dtype"):
            dtypes.as_dtype(spec)
        return
    ours = dtypes.as_dtype(spec)
    assert ours == theirs.as_numpy_dtype or (theirs.name == "string" and ours == dtypes.STRING), (ours, theirs)
