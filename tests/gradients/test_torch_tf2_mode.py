"""gpu_tensorarray.torch.TensorArray(mode="tf2"): a list's rules (overwrite, re-read, zeros for
unwritten slots, unstack and split replace the contents) with the gradients of the same
program written with a Python list (float64, 1e-12 relative), at first and second order; only
the TensorArray an op returned may be used after it. TF1 rules stay the default. Where the
library's own class (gpu_tensorarray.TensorArray, mode "tf2") answers, the bridge gives its
values, or its error class and text.

Needs torch: skipped without it, except under CI=true, where a missing torch fails."""

import os

import numpy as np
import pytest

import gpu_tensorarray
from gpu_tensorarray.errors import InternalError, InvalidArgumentError, ResourceExhaustedError, UnimplementedError
from gpu_tensorarray.testing import import_torch

torch = import_torch()
from torch_helpers import torch_device  # noqa: E402
from tf2_cases import hostile_arguments, unnamed  # noqa: E402
from gpu_tensorarray.torch import TensorArray, tensor_array  # noqa: E402
from gpu_tensorarray.torch.tf2 import TF2TensorArray  # noqa: E402

F64 = torch.float64


def weights(*shape, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64).to(torch_device())


def curved(value, seed=1):
    return (torch.sin(value) * weights(*value.shape, seed=seed)).sum() + (value ** 3).sum() / 3


def _ours(p):
    ta = TensorArray(F64, size=4, mode="tf2", element_shape=(3,))
    ta = ta.write(0, p[0]).write(2, p[1] * 2)
    first = ta.read(0)                                   # re-read below: reads never clear
    ta = ta.write(0, torch.tanh(p[2]))                   # overwrite: p[0] is gone from slot 0
    ta = ta.scatter([3, 2, 3], torch.stack([p[0] * p[1], p[2] ** 2, p[1] + 1]))   # 3 twice: the last wins
    total = curved(first) + curved(ta.stack(), seed=2) + curved(ta.read(0), seed=3)
    total = total + curved(ta.gather([1, 3, 3]), seed=4)                          # slot 1 unwritten: zeros
    replaced = ta.unstack(torch.cat([p * 3, p[:1] - 1]))    # a fixed size: as many rows as slots
    total = total + curved(replaced.stack(), seed=5)
    pieces = TensorArray(F64, size=0, mode="tf2", dynamic_size=True).split(p.reshape(-1), [4, 0, 5])
    pieces = pieces.write(1, p[0, :2])
    return total + curved(pieces.concat(), seed=6) + curved(pieces.read(2), seed=7)


def _reference(p):
    rows = [None] * 4
    zeros = torch.zeros(3, dtype=F64, device=torch_device())
    rows[0], rows[2] = p[0], p[1] * 2
    first = rows[0]
    rows[0] = torch.tanh(p[2])
    for index, row in zip([3, 2, 3], torch.stack([p[0] * p[1], p[2] ** 2, p[1] + 1])):
        rows[index] = row
    listed = [zeros if row is None else row for row in rows]
    total = curved(first) + curved(torch.stack(listed), seed=2) + curved(listed[0], seed=3)
    total = total + curved(torch.stack([listed[1], listed[3], listed[3]]), seed=4)
    replaced = list(torch.cat([p * 3, p[:1] - 1]).unbind(0))
    total = total + curved(torch.stack(replaced), seed=5)
    pieces = list(torch.split(p.reshape(-1), [4, 0, 5]))
    pieces[1] = p[0, :2]
    return total + curved(torch.cat(pieces), seed=6) + curved(pieces[2], seed=7)


def _leaf():
    value = torch.randn(3, 3, generator=torch.Generator().manual_seed(0), dtype=F64)
    return value.to(torch_device()).requires_grad_()


def assert_close(mine, theirs, rtol=1e-12):
    scale = max(float(theirs.abs().max()), 1e-300)
    assert float((mine - theirs).abs().max()) <= rtol * scale, (mine, theirs)


def test_values_and_gradients_equal_the_list_model(backend):
    p = _leaf()
    ours, reference = _ours(p), _reference(p)
    assert ours.item() == pytest.approx(reference.item(), rel=1e-12)
    assert_close(torch.autograd.grad(ours, p)[0], torch.autograd.grad(reference, p)[0])


def test_second_order_equals_the_list_model(backend):
    p = _leaf()

    def penalty(program):
        out = program(p)
        g, = torch.autograd.grad(out, p, create_graph=True)
        return torch.autograd.grad(out + (g.norm() - 1) ** 2, p)[0]

    assert_close(penalty(_ours), penalty(_reference), rtol=1e-10)


def test_a_training_loop_keeps_writing_after_backward(backend):
    """A backward pass locks the storage's size; later writes move it to a fresh one."""
    p = _leaf()
    ta = TensorArray(F64, size=0, mode="tf2", dynamic_size=True)
    rows = []
    for step in range(4):
        ta = ta.write(step, p[step % 3] * (step + 1))
        rows.append(p[step % 3] * (step + 1))
        loss, reference = curved(ta.stack()), curved(torch.stack(rows))
        # retain_graph: the rows of earlier steps are differentiated again (as the list's are)
        assert_close(torch.autograd.grad(loss, p, retain_graph=True)[0],
                     torch.autograd.grad(reference, p, retain_graph=True)[0])


def test_only_the_returned_array_may_be_used(backend):
    ta = TensorArray(F64, size=2, mode="tf2")
    ta.write(0, torch.ones(2, dtype=F64))
    with pytest.raises(InvalidArgumentError, match="use the TensorArray they return"):
        ta.stack()


def test_errors(backend):
    ta = TensorArray(F64, size=2, mode="tf2")
    with pytest.raises(InvalidArgumentError, match="element 2 in a list with 2 elements"):
        ta.write(2, torch.ones(2, dtype=F64))
    with pytest.raises(InvalidArgumentError, match="not fully defined"):
        ta.read(0)
    with pytest.raises(InvalidArgumentError, match="Invalid data types; op elements float but list elements double"):
        ta.write(0, torch.ones(2, dtype=torch.float32))
    with pytest.raises(InvalidArgumentError, match="op elements bfloat16 but list elements double"):
        ta.write(0, torch.ones(2, dtype=torch.bfloat16))       # TensorFlow's name of the dtype
    with pytest.raises(UnimplementedError):
        ta.grad("gradients")
    with pytest.raises(UnimplementedError):
        TensorArray(F64, size=1, mode="tf2", flow=ta.flow)


@pytest.mark.parametrize("call, match", [
    (lambda ta, x: ta.write(0, None), "Cannot convert value None"),
    (lambda ta, x: ta.write(0, "abc"), "Invalid data types; op elements string but list elements double"),
    (lambda ta, x: ta.split(x, ["a", "b"]), "lengths"),
    (lambda ta, x: ta.split(x, None), "lengths"),
    (lambda ta, x: ta.split(x, [1.9, 1.1]), "int64"),               # not truncated to [1, 1]
    (lambda ta, x: ta.split(x, [[1, 2]]), "lengths to be a vector"),
    (lambda ta, x: ta.scatter([[0, 1]], torch.ones(2, 3, dtype=F64)), "indices must be a vector"),
    (lambda ta, x: ta.unstack(torch.ones(2, 3, dtype=F64)).gather([[0, 1]]), "indices must be a vector"),
    (lambda ta, x: ta.write(0, x[None]).write(1, x[:2]).concat(), "Incompatible ranks during merge"),
    (lambda ta, x: ta.write(0, x[None]).write(1, x[:2][None]).concat(), "Incompatible shapes during merge"),
])
def test_bad_arguments_are_library_errors(backend, call, match):
    """What tf1 mode and the NumPy class's tf2 mode refuse with the library's errors, this mode
    refuses too: never a TypeError or RuntimeError from NumPy or torch, never a silent truncation."""
    ta = TensorArray(F64, size=2, infer_shape=False, mode="tf2")
    with pytest.raises(InvalidArgumentError, match=match):
        call(ta, torch.ones(3, dtype=F64, device=torch_device()))


def test_a_move_to_new_storage_keeps_values_as_written(backend):
    """A backward pass locks the storage's size; the next write of a new slot moves the values to
    a fresh storage: as they were written (a tensor changed in place since keeps its old value)."""
    kept = torch.ones(2, dtype=F64, device=torch_device())
    x = _leaf()[0, :2].detach().requires_grad_()
    ta = TensorArray(F64, size=2, mode="tf2").write(0, kept).write(1, x * 2)
    kept.add_(100)                                         # the array holds [1, 1]
    ta.stack().sum().backward()
    ta = ta.write(1, x * 3)                                # a new physical slot: the move
    assert torch.equal(ta.read(0), torch.ones(2, dtype=F64, device=torch_device()))
    changed = x * 4
    ta = TensorArray(F64, size=1, dynamic_size=True, mode="tf2").write(0, changed)
    ta.read(0).sum().backward(retain_graph=True)
    changed.mul_(2)                                        # the array holds x * 4: its gradient 4, not 8
    ta = ta.write(1, x)                                    # the move reads slot 0 back, with its gradient
    assert torch.autograd.grad(ta.read(0).sum(), x)[0].tolist() == [4.0, 4.0]


def test_a_move_under_no_grad_keeps_the_gradients_of_the_values_it_moves(backend):
    x = _leaf()[0, :2].detach().requires_grad_()
    ta = TensorArray(F64, size=2, mode="tf2").write(0, x * 3).write(1, x * 4)
    rows = [x * 3, x * 4]
    ta.stack().sum().backward(retain_graph=True)           # locks the storage's size
    with torch.no_grad():
        ta = ta.write(1, torch.zeros(2, dtype=F64, device=torch_device()))   # a move, and an untracked write
        rows[1] = torch.zeros(2, dtype=F64, device=torch_device())
    assert_close(torch.autograd.grad(ta.read(0).sum(), x)[0], torch.autograd.grad(rows[0].sum(), x)[0])


def test_tf1_stays_the_default(backend):
    assert not isinstance(TensorArray(F64, size=1), TF2TensorArray)
    assert isinstance(TensorArray(F64, size=1, mode="tf2"), TF2TensorArray)
    ta = TensorArray(F64, size=1).write(0, torch.ones(1, dtype=F64))
    with pytest.raises(InvalidArgumentError):
        ta.write(0, torch.ones(1, dtype=F64))                 # V3: a slot is written once


def _inference_ops():
    return {
        "write": (lambda ta, v: ta.write(1, v[1]).write(0, v[0]).stack(), lambda v: torch.stack([v[0], v[1]])),
        "scatter": (lambda ta, v: ta.scatter([1, 0], v).stack(), lambda v: torch.stack([v[1], v[0]])),
        "unstack": (lambda ta, v: ta.unstack(v).stack(), lambda v: v),
        "split": (lambda ta, v: ta.split(v.reshape(-1), [1, 3]).concat(), lambda v: v.reshape(-1)),
    }


@pytest.mark.parametrize("op", ["write", "scatter", "unstack", "split"])
def test_inference_tensors_are_written_and_read(backend, op):
    """An inference tensor has no version counter (reading it raises RuntimeError); it cannot need
    a gradient, so the array has no reason to read it: under torch.inference_mode(), and with an
    inference tensor made there earlier, each op gives the list's value (as mode "tf1" does)."""
    ours, reference = _inference_ops()[op]
    with torch.inference_mode():
        value = torch.arange(4, dtype=F64, device=torch_device()).reshape(2, 2)
        assert torch.equal(ours(TensorArray(F64, size=2, mode="tf2"), value), reference(value))
    assert torch.equal(ours(TensorArray(F64, size=2, mode="tf2"), value), reference(value))


def test_a_move_keeps_an_inference_tensor_as_written(backend):
    """A move to new storage (a backward pass locked the old one's size) after an inference
    tensor was written, and changed in place inside inference_mode since: the value written moves."""
    x = _leaf()[0, :2].detach().requires_grad_()
    with torch.inference_mode():
        kept = torch.ones(2, dtype=F64, device=torch_device())
    ta = TensorArray(F64, size=2, dynamic_size=True, mode="tf2").write(0, kept).write(1, x)
    with torch.inference_mode():
        kept.add_(100)                                     # the array holds [1, 1]
    ta.stack().sum().backward()
    ta = ta.write(2, x * 3)                                # a new physical slot: the move
    ones = torch.ones(2, dtype=F64, device=torch_device())
    rows = ta.stack()
    assert torch.equal(rows[0], ones)
    assert_close(torch.autograd.grad(curved(rows), x)[0],
                 torch.autograd.grad(curved(torch.stack([ones, x, x * 3])), x)[0])


@pytest.mark.parametrize("move, change", [(False, False), (True, False), (True, True)])
def test_a_value_written_under_no_grad_stays_untracked_through_a_move(backend, move, change):
    """A write under torch.no_grad() records no gradient; a move to new storage (a backward pass
    locked the old one's size, then a write needed a fresh slot) keeps it so: one program, one
    gradient, with or without the move. Changing that tensor in place after its untracked write
    is no error at the move (nothing of its gradient is lost), and the value as written moves."""
    x = _leaf()[0, :2].detach().requires_grad_()
    w = _leaf()[1, :2].detach().requires_grad_()
    ta = TensorArray(F64, size=2, mode="tf2")
    with torch.no_grad():
        ta = ta.write(0, x)
    written = x.detach().clone()
    ta = ta.write(1, w)
    if move:
        ta.stack().sum().backward()
        if change:
            with torch.no_grad():
                x.add_(1)                                  # after the untracked write: not what slot 0 holds
        ta = ta.write(1, w * 2)                            # a new physical slot: the move
    rows = [written, w * 2 if move else w]               # the list: slot 0 a constant
    ours, reference = curved(ta.stack()), curved(torch.stack(rows))
    assert ours.item() == pytest.approx(reference.item(), rel=1e-12)
    grads = torch.autograd.grad(ours, (x, w), allow_unused=True)
    assert grads[0] is None
    assert_close(grads[1], torch.autograd.grad(reference, w)[0])


def _library_error(call):
    """What the library's own class (gpu_tensorarray.TensorArray, mode "tf2") raises for ``call``."""
    with pytest.raises(InvalidArgumentError) as caught:
        call(lambda **kwargs: gpu_tensorarray.TensorArray("float64", mode="tf2", **kwargs), np.asarray)
    return caught.value


@pytest.mark.parametrize("rows, size", [(2, 4), (0, 2), (4, 2)])
def test_unstack_into_a_fixed_size_needs_as_many_rows(backend, rows, size):
    """unstack of n rows into a fixed size m != n raises the library class's InvalidArgumentError,
    with its text (fewer rows were padded with unwritten slots here; tf.function raises too)."""
    def call(make, convert):
        return make(size=size).unstack(convert(np.arange(2.0 * rows).reshape(rows, 2)))

    expected = _library_error(call)
    with pytest.raises(InvalidArgumentError) as caught:
        call(lambda **kwargs: TensorArray(F64, mode="tf2", **kwargs),
             lambda value: torch.as_tensor(value, device=torch_device()))
    assert unnamed(str(caught.value)) == unnamed(str(expected))


def test_close_does_nothing(backend):
    """close() is a no-op, as in TensorFlow 2 (a tf.function reads after it) and the library's
    class: reads after it give the library class's values, gradients the list's."""
    x = _leaf()[0, :2].detach().requires_grad_()
    ta = TensorArray(F64, size=2, mode="tf2").write(0, x * 2)
    ta.close()
    ta.close()
    library = gpu_tensorarray.TensorArray("float64", size=2, mode="tf2").write(0, (x.detach() * 2).cpu().numpy())
    library.close()
    assert np.array_equal(ta.read(0).detach().cpu().numpy(), gpu_tensorarray.to_numpy(library.read(0)))
    assert np.array_equal(ta.stack().detach().cpu().numpy(), gpu_tensorarray.to_numpy(library.stack()))
    ta = ta.write(1, x)                                     # and writes go on
    assert_close(torch.autograd.grad(curved(ta.stack()), x)[0],
                 torch.autograd.grad(curved(torch.stack([x * 2, x])), x)[0])


def _library(**kwargs):
    return gpu_tensorarray.TensorArray("float64", mode="tf2", **kwargs)


def _bridge(**kwargs):
    return TensorArray(F64, mode="tf2", **kwargs)


def assert_same_as_library(call):
    """``call(make, convert)`` on the library's class (NumPy values) and on the bridge (tensors):
    the same values, or the same error class and text."""
    try:
        expected = gpu_tensorarray.to_numpy(call(_library, np.asarray))
    except InvalidArgumentError as error:
        with pytest.raises(type(error)) as caught:
            call(_bridge, lambda value: torch.as_tensor(np.asarray(value, np.float64), device=torch_device()))
        assert unnamed(str(caught.value)) == unnamed(str(error))
        return
    ours = call(_bridge, lambda value: torch.as_tensor(np.asarray(value, np.float64), device=torch_device()))
    assert ours.device == torch_device()
    assert ours.shape == expected.shape and np.array_equal(ours.cpu().numpy(), expected), (ours, expected)


_ROW = [1.0, 2.0]


@pytest.mark.parametrize("infer_shape", [False, True])
@pytest.mark.parametrize("call", [
    lambda make, c, **k: make(size=2, **k).write(0, c(_ROW)).read(1),
    lambda make, c, **k: make(size=2, **k).write(0, c(_ROW)).stack(),
    lambda make, c, **k: make(size=2, **k).write(0, c(_ROW)).gather([0, 1]),
    lambda make, c, **k: make(size=2, **k).write(0, c(_ROW)).gather([1]),       # no set slot among those gathered
    lambda make, c, **k: make(size=2, **k).write(0, c(_ROW)).gather([]),
    lambda make, c, **k: make(size=3, **k).scatter([2], c([_ROW])).read(0),
    lambda make, c, **k: make(size=1, dynamic_size=True, **k).unstack(c([_ROW])).write(2, c(_ROW)).read(1),
    lambda make, c, **k: make(size=0, dynamic_size=True, **k).split(c([1.0, 2.0]), [2]).write(2, c(_ROW)).stack(),
    lambda make, c, **k: make(size=2, **k).read(1),                              # no list element is set
    lambda make, c, **k: make(size=2, **k).stack(),
    lambda make, c, **k: make(size=2, element_shape=(None,), **k).gather([0]),
])
def test_an_unwritten_slot_reads_as_the_library_class_reads_it(backend, infer_shape, call):
    """An unwritten slot's zeros take the element shape merged with the shapes of the set slots
    (for a gather, of the slots gathered), also with infer_shape=False (TensorFlow returns zeros
    there too); where no shape is known, the error is the library class's, class and text."""
    assert_same_as_library(lambda make, convert: call(make, convert, infer_shape=infer_shape))


def test_an_unwritten_slot_among_set_slots_of_two_shapes_has_no_shape(backend):
    """With infer_shape=False, set slots of two shapes give an unwritten slot none: the library
    class's merge error, read and gather alike (a gather of one of the shapes is fine)."""
    def make3(make, convert):
        return make(size=3, infer_shape=False).write(0, convert(_ROW)).write(2, convert(_ROW + [3.0]))

    assert_same_as_library(lambda make, convert: make3(make, convert).read(1))
    assert_same_as_library(lambda make, convert: make3(make, convert).gather([0, 1]))
    assert_same_as_library(lambda make, convert: make3(make, convert).gather([1, 2]))


@pytest.mark.parametrize("kwargs", [dict(size=0, dynamic_size=True), dict(size=3, dynamic_size=True), dict(size=0)])
def test_split_with_no_lengths_is_refused(backend, kwargs):
    """split(value, []) raises the library class's InvalidArgumentError, class and text (it made
    an array of size 0 here; TensorFlow fails building the graph, with a ValueError)."""
    assert_same_as_library(lambda make, convert: make(**kwargs).split(convert(np.zeros((0, 2))), []).size())


_EMPTY_RESULTS = [
    lambda make, c: make(size=2, element_shape=(3,)).gather([]),
    lambda make, c: make(size=2).write(1, c([1.0, 2.0, 3.0])).gather([]),
    lambda make, c: make(size=0, element_shape=(3,)).stack(),
    lambda make, c: make(size=0, element_shape=(2, 3)).concat(),
]


@pytest.mark.parametrize("call", _EMPTY_RESULTS)
def test_empty_results_are_the_library_class_s_on_the_array_s_device(backend, call, monkeypatch):
    """gather([]), and stack() and concat() of an empty array, give the library class's value on
    the array's device, as every other read does (they were made on the CPU): checked on the
    device tests run on, and with the storage's device reported as "meta" (a CUDA array's
    device on a machine without one)."""
    assert_same_as_library(call)
    monkeypatch.setattr(tensor_array.TensorArray, "device", property(lambda self: torch.device("meta")))
    assert call(_bridge, lambda value: torch.as_tensor(value, dtype=F64)).device == torch.device("meta")


def _tf_result(program):
    """``program(make, convert, ints)`` run by TensorFlow 2 inside a tf.function (the rules mode
    "tf2" follows, docs/guide.md): the value as NumPy, or "error" (TensorFlow's Python side
    raises ValueError or TypeError, its kernels an OpError). Skipped without TensorFlow."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    tf = pytest.importorskip("tensorflow")

    def run():
        return program(lambda **kwargs: tf.TensorArray(tf.float64, **kwargs),
                       lambda value: tf.constant(value, tf.float64), lambda value: tf.constant(value, tf.int32))

    try:
        return tf.function(run, autograph=False)().numpy()
    except (tf.errors.OpError, ValueError, TypeError):
        return "error"


def assert_same_as_tensorflow_and_library(program):
    """The bridge against TensorFlow (tf.function: the same value, or an error for an error) and
    against the library's class (the same value, or the same error class and text)."""
    expected = _tf_result(program)
    convert = (lambda value: torch.as_tensor(np.asarray(value, np.float64), device=torch_device()))
    try:
        ours = program(_bridge, convert, list).cpu().numpy()
    except InvalidArgumentError:
        ours = "error"
    if isinstance(expected, str) or isinstance(ours, str):
        assert ours == expected
    else:
        assert ours.shape == expected.shape and np.array_equal(ours, expected), (ours, expected)
    assert_same_as_library(lambda make, convert: program(make, convert, list))


_TABLE = np.arange(6.0).reshape(3, 2)
_LIST_SHAPE_PROGRAMS = {
    "unstack, gather([])": lambda make, c, i: make(size=3, infer_shape=False).unstack(c(_TABLE)).gather(i([])),
    "unstack, read past the rows": lambda make, c, i: make(
        size=0, dynamic_size=True, infer_shape=False).unstack(c(np.zeros((0, 2)))).write(1, c(_ROW)).read(0),
    "unstack, write of another shape": lambda make, c, i: make(
        size=3, infer_shape=False).unstack(c(_TABLE)).write(0, c([1.0, 2.0, 3.0])).stack(),
    "unstack of no rows, gather([])": lambda make, c, i: make(
        size=0, dynamic_size=True, infer_shape=False).unstack(c(np.zeros((0, 3)))).gather(i([])),
    "split, gather([])": lambda make, c, i: make(size=2).split(c(np.arange(8.0).reshape(4, 2)), i([2, 2])).gather(
        i([])),
    "split, stack with an unwritten slot": lambda make, c, i: make(size=2, dynamic_size=True).split(
        c(np.arange(8.0).reshape(4, 2)), i([2, 2])).write(3, c(np.ones((2, 2)))).stack(),
    "split, infer_shape=False, gather([])": lambda make, c, i: make(size=2, infer_shape=False).split(
        c(np.arange(8.0).reshape(4, 2)), i([2, 2])).gather(i([])),
    "split of pieces not of the element shape": lambda make, c, i: make(size=2, element_shape=(3,)).split(
        c([1.0, 2.0]), i([1, 1])).stack(),
    "split of rows not of the element shape": lambda make, c, i: make(size=2, element_shape=(None, 3)).split(
        c([[1.0, 2.0]]), i([1, 0])).concat(),
    "split of scalar elements": lambda make, c, i: make(size=2, element_shape=()).split(c(_ROW), i([1, 1])).stack(),
}


@pytest.mark.parametrize("name", list(_LIST_SHAPE_PROGRAMS))
def test_unstack_and_split_set_the_list_shape(backend, name):
    """An unstack sets the list's element shape to its rows' shape, a split to its pieces' (for equal
    lengths, and with infer_shape), also with infer_shape=False: an unwritten slot's zeros take it (an
    empty gather included), and a write of another shape is refused. A split checks its pieces' shape
    against the element shape. The bridge ignored all this (its zeros knew only the element shape)."""
    assert_same_as_tensorflow_and_library(_LIST_SHAPE_PROGRAMS[name])


def test_a_write_that_fails_at_the_move_changes_no_shape(backend):
    """A write that needs new storage (a backward pass locked the old one's size) and cannot move
    (under inference_mode a move takes the tensors written, and one was changed in place since)
    fails, and leaves the element shape as it was: the shape merges only once nothing else can
    fail (it merged before the move)."""
    x = _leaf()[0].detach().requires_grad_()
    value = (x * 2).reshape(3, 1).expand(3, 2) * 1                 # pieces of unequal lengths: no shape inferred
    ta = _bridge(size=2, dynamic_size=True).split(value, [1, 2])
    ta.concat().sum().backward()
    with torch.no_grad():
        value.mul_(2)
    with torch.inference_mode(), pytest.raises(InvalidArgumentError, match="modified in place after the write"):
        ta.write(2, torch.ones(2, dtype=F64, device=torch_device()))
    assert ta.element_shape is None


_R = [1.0, 2.0]
_SAME_TEXT_PROGRAMS = {
    "write of another shape": lambda m, c: m(size=2, element_shape=(2,)).write(0, c([1.0, 2.0, 3.0])),
    "write out of range": lambda m, c: m(size=2).write(2, c(_R)),
    "write out of range and of another shape": lambda m, c: m(size=2, element_shape=(2,)).write(2, c([1.0])),
    "write at -1": lambda m, c: m(size=2, dynamic_size=True).write(-1, c(_R)),
    "read out of range": lambda m, c: m(size=2).read(2),
    "gather out of range": lambda m, c: m(size=2).gather([0, 2, -1]),
    "gather of a matrix": lambda m, c: m(size=2).gather([[0]]),
    "scatter of a matrix": lambda m, c: m(size=2).scatter([[0]], c([_R])),
    "scatter, rows": lambda m, c: m(size=2).scatter([0, 1], c([_R])),
    "scatter of a scalar": lambda m, c: m(size=2).scatter([0], c(1.0)),
    "scatter out of range": lambda m, c: m(size=2).scatter([5, -1], c([_R, _R])),
    "scatter past a fixed size": lambda m, c: m(size=2).scatter([0, 3], c([_R, _R])),
    "scatter of another shape": lambda m, c: m(size=2, element_shape=(3,)).scatter([0], c([_R])),
    "scatter of no rows of another shape": lambda m, c: m(size=2, element_shape=(3,)).scatter([], c(np.zeros((0, 2)))),
    "unstack of a scalar": lambda m, c: m(size=2).unstack(c(1.0)),
    "unstack into a fixed size": lambda m, c: m(size=2).unstack(c([_R])),
    "unstack of another shape": lambda m, c: m(size=1, element_shape=(3,)).unstack(c([_R])),
    "split of a scalar": lambda m, c: m(size=1).split(c(1.0), [1]),
    "split by a matrix": lambda m, c: m(size=1).split(c(_R), [[2]]),
    "split by a negative length": lambda m, c: m(size=2).split(c(_R), [3, -1]),
    "split by lengths that miss the rows": lambda m, c: m(size=2).split(c(_R), [1, 2]),
    "split into a fixed size": lambda m, c: m(size=3).split(c(_R), [1, 1]),
    "stack of an empty list": lambda m, c: m(size=0).stack(),
    "stack of rows of two shapes": lambda m, c: m(size=2, infer_shape=False).write(0, c(_R)).write(1, c([1.0])).stack(),
    "gather of rows of two shapes": lambda m, c: m(size=3, infer_shape=False).write(0, c(_R)).write(
        1, c([1.0])).gather([0, 2, 1]),
    "stack of pieces of two lengths": lambda m, c: m(size=2, element_shape=(None, 2)).split(
        c(np.ones((3, 2))), [1, 2]).stack(),
    "concat of an empty list": lambda m, c: m(size=0).concat(),
    "concat of an empty list of scalars": lambda m, c: m(size=0, element_shape=()).concat(),
    "concat of scalars": lambda m, c: m(size=2).write(0, c(1.0)).write(1, c(2.0)).concat(),
    "concat of a vector and a scalar": lambda m, c: m(size=2, infer_shape=False).write(0, c([1.0])).write(
        1, c(2.0)).concat(),
    "concat of rows of two shapes": lambda m, c: m(size=2, infer_shape=False).write(0, c([_R])).write(
        1, c([[1.0]])).concat(),
    "concat of unwritten slots only": lambda m, c: m(size=2).concat(),
    "concat of unwritten slots, rows known": lambda m, c: m(size=2, element_shape=(None, 2)).concat(),
    "concat of an unwritten slot": lambda m, c: m(size=3).write(0, c([_R])).concat(),
    "concat of an unwritten slot, two leading dimensions": lambda m, c: m(size=3, infer_shape=False).write(
        0, c([_R])).write(2, c([_R, _R])).concat(),
    "concat of an unwritten slot, leading dimension known": lambda m, c: m(size=3, element_shape=(2, 2)).write(
        0, c([_R, _R])).concat(),
    "concat of an unwritten slot after a split": lambda m, c: m(size=2, dynamic_size=True).split(
        c([_R, _R, _R]), [1, 2]).write(3, c([_R])).concat(),
    "the array an op replaced": lambda m, c: (lambda ta: (ta.write(0, c(_R)), ta.read(0))[1])(m(size=2)),
}


@pytest.mark.parametrize("name", list(_SAME_TEXT_PROGRAMS))
def test_errors_are_the_library_class_s_class_and_text(backend, name):
    """Each program gives the library class's value, or its error class and text: both classes build
    their texts in messages.py and take their checks, in one order, from tf2_lists. The bridge's own
    words differed ('Inconsistent shapes' one space short, the fixed-size split's, the scalar
    unstack's, concat's of unwritten slots read one by one, ...)."""
    assert_same_as_library(_SAME_TEXT_PROGRAMS[name])


def test_a_write_of_another_dtype_has_the_library_class_s_text(backend):
    """TensorFlow's dtype names (float, double), as the library's class says them."""
    expected = _library_error(lambda make, convert: make(size=2).write(0, np.ones(2, np.float32)))
    with pytest.raises(InvalidArgumentError) as caught:
        _bridge(size=2).write(0, torch.ones(2, dtype=torch.float32, device=torch_device()))
    assert unnamed(str(caught.value)) == unnamed(str(expected))


@pytest.mark.parametrize("value", [np.ones(2, np.float32), np.ones(2, np.int32), np.float32(1.0), [1.5, 2.0], [1, 2],
                                   ["a"], [None], 3])
def test_a_write_of_a_non_tensor_value_is_converted_as_by_the_library_class(backend, value):
    """A NumPy value of another dtype is refused, a Python value converted as the library's class converts it
    (the bridge cast every non-tensor value to the list's dtype: a float32 NumPy array into a float64 list was
    taken). Only the int32 list checks a float list's silent truncation, the float64 list the rest."""
    for dtype in ("float64", "int32"):
        try:
            expected = gpu_tensorarray.to_numpy(
                gpu_tensorarray.TensorArray(dtype, size=2, mode="tf2").write(0, value).stack())
        except InvalidArgumentError as error:
            with pytest.raises(type(error)) as caught:
                TensorArray(dtype, size=2, mode="tf2").write(0, value)
            assert unnamed(str(caught.value)) == unnamed(str(error))
            continue
        ours = TensorArray(dtype, size=2, mode="tf2").write(0, value).stack()
        assert np.array_equal(ours.cpu().numpy(), expected) and ours.cpu().numpy().dtype == expected.dtype



class _ExportsWithoutDtype:
    """A DLPack exporter with no ``dtype`` attribute, whose export fails."""

    def __dlpack__(self, *args, **kwargs):
        raise TypeError("no export")


def test_a_write_of_an_exporter_without_a_dtype_is_a_library_error(backend):
    """The bridge's dtype check asked such a value for its dtype: AttributeError escaped."""
    with pytest.raises(InvalidArgumentError, match="Cannot convert"):
        TensorArray("float32", size=2, mode="tf2").write(0, _ExportsWithoutDtype())

def _run(make, convert, params, ops):
    """One tf2_cases sequence: each op's value (NumPy) or error class and text; the chain goes on past a
    failed op (it changed nothing)."""
    from tf2_cases import _apply

    ta = make(params["dtype"], size=params["size"], dynamic_size=params["dynamic_size"],
              element_shape=params["element_shape"], infer_shape=params["infer_shape"], mode="tf2")
    results = []
    for op in ops:
        op = tuple(convert(arg) if isinstance(arg, np.ndarray) else arg for arg in op)
        try:
            ta, out = _apply(ta, op)
        except InvalidArgumentError as error:
            results.append((type(error).__name__, unnamed(str(error))))
            continue
        out = None if out is None else (out.cpu().numpy() if isinstance(out, torch.Tensor) else
                                         gpu_tensorarray.to_numpy(out))
        results.append(("value", None if out is None else (out.dtype, out.shape, out.tobytes())))
    return results


@pytest.mark.parametrize("seed", range(0, 300, 3))
def test_random_sequences_give_the_library_class_s_results(backend, seed):
    """tf2_cases' random op sequences (writes, reads, gathers, scatters, unstacks, splits, stacks,
    concats of every shape rule) through the library's class and the bridge: the same values
    (bit for bit) and the same error classes and texts, op by op (every sequence here differed in
    some text before, about one in seven in an error class or a value)."""
    from tf2_cases import random_case

    params, ops = random_case(np.random.default_rng(seed))
    expected = _run(gpu_tensorarray.TensorArray, lambda value: value, params, ops)
    ours = _run(lambda dtype, **kwargs: TensorArray(getattr(torch, dtype), **kwargs),
                lambda value: torch.as_tensor(value, device=torch_device()), params, ops)
    assert ours == expected


@pytest.mark.parametrize("op", ["gather", "scatter"])
@pytest.mark.parametrize("indices", [np.array([2, 0], np.int64), np.array([2, 0], np.uint8), np.array([[2], [0]]),
                                     np.array([[2, 0]]), np.array(1), torch.tensor([2, 0]), torch.tensor([[2], [0]])])
def test_index_vectors_are_the_library_class_s(backend, op, indices):
    """gather and scatter take integer index vectors of any integer dtype and refuse any other
    shape, as the library's class does (docs/semantics.md §6.5: TensorFlow's eager rule, not
    tf.function's): its values, or its error class and text."""
    def call(make, convert):
        ta = make(size=3).unstack(convert(_TABLE))
        return ta.gather(indices) if op == "gather" else ta.scatter(indices, convert(_TABLE[:2] + 10)).stack()

    assert_same_as_library(call)


def _hostile_cases():
    return hostile_arguments(lambda **kwargs: TensorArray(torch.float32, size=2, mode="tf2", **kwargs),
                             lambda shape: torch.ones(shape, device=torch_device()))


@pytest.mark.parametrize("label", [label for label, _, _ in _hostile_cases()[0]])
def test_hostile_arguments_are_errors_in_the_ops_context_and_change_nothing(backend, label):
    """As the library's class (tests/classes/test_tf2_mode.py runs the same cases)."""
    cases, ta = _hostile_cases()
    call, needles = next((call, needles) for name, call, needles in cases if name == label)
    with pytest.raises(InvalidArgumentError) as caught:
        call()
    assert all(needle in str(caught.value) for needle in needles), str(caught.value)
    assert int(ta.size()) == 2 and ta.stack().cpu().tolist() == [[0.0, 0.0], [1.0, 1.0]]


def test_a_ring_buffer_holds_storage_for_its_slots_not_its_writes(backend):
    """A list of 4 slots written 300 times: its values move to a fresh storage once overwrites
    have used more than twice its slots (and 16 more), so the storage keeps at most 26 slots,
    under no_grad no old storage stays open, and with gradients (through the moves) they are
    the list model's."""
    from gpu_tensorarray.registry import registry
    from gpu_tensorarray.testing import open_array_names
    x = torch.randn(300, 3, generator=torch.Generator().manual_seed(0), dtype=F64).to(torch_device())
    x.requires_grad_()

    def ours(x):
        ta, total = TensorArray(F64, size=4, mode="tf2", element_shape=(3,)), 0
        for t in range(300):
            ta = ta.write(t % 4, x[t] * 2)
            if t % 7 == 0:
                total = total + curved(ta.read((t + 2) % 4), seed=t % 5)
            assert registry.lookup(ta.handle).size <= 2 * (4 + 1) + 16
        return total + curved(ta.stack(), seed=9)

    def reference(x):
        rows, total = [torch.zeros(3, dtype=F64, device=torch_device())] * 4, 0
        for t in range(300):
            rows[t % 4] = x[t] * 2
            if t % 7 == 0:
                total = total + curved(rows[(t + 2) % 4], seed=t % 5)
        return total + curved(torch.stack(rows), seed=9)

    (got,) = torch.autograd.grad(ours(x), x)
    (expected,) = torch.autograd.grad(reference(x), x)
    assert float((got - expected).abs().max()) <= 1e-12 * float(expected.abs().max())
    before = open_array_names()
    with torch.no_grad():
        ta = TensorArray(F64, size=4, mode="tf2", element_shape=(3,))
        for t in range(300):
            ta = ta.write(t % 4, x[t])
        assert torch.equal(ta.stack(), x[296:].detach())
    assert len(open_array_names() - before) <= 2


def test_a_loop_with_a_backward_pass_per_write_moves_once_per_doubling(backend):
    """Each backward pass locks the storage's size, so the next write of a new slot moves the
    values: to a storage with room for as many again, and as the tensors written (a read back
    chained every storage's nodes: each step walked all earlier storages, ~t^2 nodes, and kept
    them alive). The gradients are the list model's."""
    w = torch.randn(3, dtype=F64, device=torch_device(), requires_grad=True)
    ta, storages, rows = TensorArray(F64, size=0, dynamic_size=True, mode="tf2"), set(), []
    for t in range(64):
        ta = ta.write(t, w * (t + 1))
        rows.append(w.detach() * (t + 1))
        ta.read(t).sum().backward(retain_graph=True)
        storages.add(ta.handle.name)
        assert torch.equal(ta.stack(), torch.stack(rows))
    assert len(storages) <= 8                      # a move per doubling of 64 values (was one per write)
    assert torch.allclose(w.grad, torch.full_like(w, sum(range(1, 65))), rtol=1e-12, atol=0)


@pytest.mark.parametrize("inference", [False, True])
def test_a_move_keeps_the_value_written_when_torch_does_not_count_the_change(backend, inference):
    """A change through ``.data`` (or a NumPy or DLPack view) leaves the version counter as it was:
    the move takes what the storage holds, as written, and its gradient still reaches the tensor (a
    move that took the tensor itself turned the list's value into the changed one)."""
    w = torch.ones(3, dtype=F64, device=torch_device(), requires_grad=True)
    value = w * 1
    ta = TensorArray(F64, size=0, dynamic_size=True, mode="tf2").write(0, value)
    ta.read(0).sum().backward(retain_graph=True)              # locks the storage: the next write moves
    value.data.mul_(100)
    second = w * 2
    with torch.inference_mode(inference):               # (a move there took the tensor itself)
        ta = ta.write(1, second)
    assert ta.read(0).tolist() == [1.0, 1.0, 1.0]
    w.grad = None
    (ta.stack() * torch.tensor([[1.0], [10.0]], dtype=F64, device=torch_device())).sum().backward()
    # The moved value's gradient either way; a write under inference_mode records none (torch.md §1).
    assert w.grad.tolist() == [1.0 if inference else 21.0] * 3


def test_tracked_values_moved_by_overwrites_keep_no_old_storage_alive(backend):
    """A ring buffer of 4 slots written 300 times with values that need gradients: the moves take
    the tensors written, so at most the list's storage stays open while the graph lives (each
    move read its values back through the old storage, keeping every storage, and every value
    ever written, alive through the graph)."""
    from gpu_tensorarray.testing import open_array_names
    x = torch.randn(300, 3, dtype=F64, device=torch_device(), requires_grad=True)
    before = open_array_names()
    ta = TensorArray(F64, size=4, mode="tf2", element_shape=(3,))
    for t in range(300):
        ta = ta.write(t % 4, x[t] * 2)
    loss = curved(ta.stack())
    assert len(open_array_names() - before) <= 2
    (got,) = torch.autograd.grad(loss, x)
    (expected,) = torch.autograd.grad(curved(x[296:] * 2), x)
    assert torch.allclose(got, expected, rtol=1e-12, atol=0)


def test_moves_keep_gradients_of_values_read_back_and_under_no_grad(backend):
    """Moves made by overwrites read the values back through the old storage (no backward pass
    has run its nodes): rows of a buffer filled in place, each read right after its write (its
    node made then), move as written; and a move under no_grad keeps a value's gradient."""
    x = torch.randn(3, generator=torch.Generator().manual_seed(2), dtype=F64).to(torch_device()).requires_grad_()
    buffer = torch.zeros(40, 3, dtype=F64, device=torch_device())
    ta, total = TensorArray(F64, size=4, mode="tf2"), 0
    for t in range(40):
        buffer[t] = x * (t + 1)
        ta = ta.write(t % 4, buffer[t])
        total = total + ta.read(t % 4).sum()
    (grad,) = torch.autograd.grad(total, x)
    assert grad.tolist() == [820.0] * 3                  # sum of 1..40
    kept = TensorArray(F64, size=8, mode="tf2").write(7, x * 5)
    with torch.no_grad():
        for t in range(100):                             # many moves, x * 5 in slot 7 through each
            kept = kept.write(t % 7, torch.ones(3, dtype=F64, device=torch_device()))
    (grad,) = torch.autograd.grad(kept.read(7).sum() + kept.stack().sum(), x)
    assert grad.tolist() == [10.0] * 3


@pytest.mark.parametrize("op", ["unstack", "split"])
def test_unstack_and_split_that_fail_leave_the_contents(backend, monkeypatch, op):
    """unstack and split write the new contents into a fresh storage, put in place once it holds
    them: an op that fails halfway (an interrupt) leaves the old contents."""
    ta = TensorArray(F64, size=0, dynamic_size=True, mode="tf2")
    values = torch.tensor([[1.0, 1.0], [2.0, 2.0]], dtype=F64)
    leaf = values.clone().requires_grad_()
    ta = ta.unstack(leaf) if op == "unstack" else ta.split(leaf, [1, 1])
    ta.read(0).sum().backward()                            # the storage's size is now locked

    def failing(self, *args, **kwargs):
        raise KeyboardInterrupt("injected")
    with monkeypatch.context() as patch:
        patch.setattr(tensor_array.TensorArray, "scatter" if op == "unstack" else "write", failing)
        with pytest.raises(KeyboardInterrupt, match="injected"):
            ta.unstack(torch.zeros(3, 2, dtype=F64)) if op == "unstack" else \
                ta.split(torch.zeros(3, 2, dtype=F64), [1, 2])
    current = ta._next(ta._contents, bump=False)           # the list as it is now (ta itself if not superseded)
    assert (current.stack() if op == "unstack" else current.concat()).tolist() == [[1.0, 1.0], [2.0, 2.0]]


def test_moves_under_inference_mode_keep_gradients(backend):
    """Overwrites under torch.inference_mode that move the values (where a read would make an
    inference tensor, which has no version counter): a value written earlier with a gradient moves
    as the tensor written, and keeps its gradient."""
    x = torch.ones(2, dtype=F64, device=torch_device(), requires_grad=True)
    ta = TensorArray(F64, size=4, mode="tf2").write(3, x * 5)
    with torch.inference_mode():
        for t in range(60):
            ta = ta.write(t % 3, torch.ones(2, dtype=F64, device=torch_device()))
    (grad,) = torch.autograd.grad(ta.read(3).sum(), x)
    assert grad.tolist() == [5.0, 5.0]


def test_moves_after_a_backward_pass_read_the_values_back(backend):
    """A move after a backward pass locked the storage reads each value back through it (the bridge's
    nodes save no tensors, so they run again): rows of a buffer filled in place move as written."""
    x = torch.ones(3, dtype=F64, device=torch_device(), requires_grad=True)
    buffer = torch.zeros(2, 3, dtype=F64, device=torch_device())
    buffer[0] = x * 2
    ta = TensorArray(F64, size=4, mode="tf2").write(0, buffer[0])
    ta.read(0).sum().backward(retain_graph=True)           # locks the storage (a list model's second pass
    #                                                        through buffer[0]'s graph needs it kept too)
    buffer[1] = x * 3                                      # changes buffer[0]'s version counter
    for t in range(6):
        ta = ta.write(1 + t % 3, buffer[1])                # moves (the locked storage cannot grow)
    (grad,) = torch.autograd.grad(ta.stack().sum(), x)
    assert grad.tolist() == [2.0 + 3.0 * 3] * 3            # slot 0 (x * 2) and slots 1-3 (x * 3)


def test_a_copy_is_the_same_list_whatever_the_default_mode(backend):
    """copy.copy gives identity() for both modes' classes, also where the default mode is the other
    (the class's __new__ picks a class by mode)."""
    import copy
    with gpu_tensorarray.tensor_array_mode("tf2"):
        tf1 = TensorArray(F64, size=1, mode="tf1").write(0, torch.ones(2, dtype=F64))
        assert copy.copy(tf1).read(0).tolist() == [1.0, 1.0]
    with gpu_tensorarray.tensor_array_mode("tf1"):
        tf2 = TensorArray(F64, size=1, mode="tf2").write(0, torch.ones(2, dtype=F64))
        assert copy.copy(tf2).read(0).tolist() == [1.0, 1.0]


def test_a_tf1_arrays_gradient_array_whatever_the_default_mode(backend):
    with gpu_tensorarray.tensor_array_mode("tf2"):
        grad = TensorArray(F64, size=2, mode="tf1").grad("source")
    assert type(grad) is TensorArray and int(grad.size()) == 2


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_a_torch_tensor_array_can_be_weakly_referenced(backend, mode):
    import gc
    import weakref

    ta = TensorArray(F64, size=1, mode=mode)
    reference = weakref.ref(ta)
    assert reference() is ta
    del ta
    gc.collect()
    assert reference() is None


@pytest.mark.parametrize("call", [
    lambda ta: ta.read(0), lambda ta: ta.stack(), lambda ta: ta.gather([1, 2]), lambda ta: ta.concat(),
])
def test_zeros_past_the_memory_are_the_library_class_s_resource_exhausted_error(backend, call):
    """Zeros for unwritten slots that no memory holds: the library class's ResourceExhaustedError
    and text, raised before torch allocates (torch's own error escaped: a RuntimeError)."""
    shape = (2 ** 20, 2 ** 20)
    with pytest.raises(ResourceExhaustedError) as expected:
        call(gpu_tensorarray.TensorArray("float64", size=3, element_shape=shape, mode="tf2"))
    with pytest.raises(ResourceExhaustedError) as caught:
        call(TensorArray(F64, size=3, element_shape=shape, mode="tf2"))
    assert str(caught.value) == str(expected.value)


@pytest.mark.parametrize("op", ["stack", "gather"])
def test_a_stack_or_gather_among_unwritten_slots_is_one_read_node(backend, monkeypatch, op):
    """The written rows come out in one gather and the zeros go in place by one index_select (each
    written slot was read on its own: a node and a Python call a slot); values and gradients are
    the list model's."""
    x = torch.randn(8, 3, dtype=F64, device=torch_device(), requires_grad=True)
    ta = TensorArray(F64, size=12, element_shape=(3,), mode="tf2")
    for k in range(8):
        ta = ta.write(k + k // 2, x[k] * 2)             # slots 0 1 3 4 6 7 9 10; 2 5 8 11 unwritten
    indices = [11, 0, 3, 3, 2, 10, 7]
    reads = []
    original = tensor_array.read_node

    def counted(*args):
        reads.append(args[4])
        return original(*args)
    monkeypatch.setattr(tensor_array, "read_node", counted)
    out = ta.stack() if op == "stack" else ta.gather(indices)
    monkeypatch.undo()
    assert len(reads) == 1
    rows = [None] * 12
    for k in range(8):
        rows[k + k // 2] = x[k] * 2
    zeros = torch.zeros(3, dtype=F64, device=torch_device())
    picked = range(12) if op == "stack" else indices
    expected = torch.stack([zeros if rows[i] is None else rows[i] for i in picked])
    assert torch.equal(out, expected)
    (got,) = torch.autograd.grad(curved(out), x)
    (reference,) = torch.autograd.grad(curved(expected), x)
    assert torch.allclose(got, reference, rtol=1e-12, atol=0)


@pytest.mark.parametrize("join, call", [("cat", lambda ta: ta.stack()), ("cat", lambda ta: ta.gather([0, 1])),
                                         ("cat", lambda ta: ta.concat())])
def test_torch_failing_to_join_values_is_resource_exhausted_error(backend, monkeypatch, join, call):
    """A list with an unwritten slot joins its values with torch: torch finding no memory for
    the result (a plain RuntimeError on the CPU) is the library's ResourceExhaustedError, and
    the list is as it was."""
    ta = TensorArray(F64, size=2, element_shape=(3,), mode="tf2").write(0, torch.ones(3, dtype=F64))
    original = getattr(torch, join)

    def no_memory(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 48 bytes")
    monkeypatch.setattr(torch, join, no_memory)
    with pytest.raises(ResourceExhaustedError, match="OOM when joining 2 values into .*can't allocate memory"):
        call(ta)
    monkeypatch.setattr(torch, join, original)
    assert ta.stack().tolist() == [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]


def test_no_memory_for_a_read_values_copy_reads_nothing(backend, monkeypatch):
    """A CPU read's value is a copy (torch has no read-only tensors), made before the read marks
    its slot: no host memory for it is ResourceExhaustedError and the slot is still unread (a
    copy made after the library's read left a clear_after_read slot cleared)."""
    if backend.name == "cupy":
        pytest.skip("a device array is copied on its device")
    from gpu_tensorarray.backends import numpy as numpy_backend
    from ta_conformance_util import NumpyWithoutMemory

    ta = TensorArray(F64, size=2).write(0, torch.ones(3, dtype=F64))
    monkeypatch.setattr(numpy_backend, "np", NumpyWithoutMemory("array"))
    with pytest.raises(ResourceExhaustedError, match="OOM in TensorArrayReadV3: host memory ran out"):
        ta.read(0)
    monkeypatch.undo()
    assert ta.read(0).tolist() == [1.0, 1.0, 1.0]


def test_torch_failing_to_allocate_zeros_is_resource_exhausted_error(backend, monkeypatch):
    """Below the limit torch may still find no memory (a plain RuntimeError on the CPU)."""
    def no_memory(*args, **kwargs):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory")

    ta = TensorArray(F64, size=2, element_shape=(3,), mode="tf2")
    monkeypatch.setattr(torch, "zeros", no_memory)
    with pytest.raises(ResourceExhaustedError, match=r"OOM when allocating tensor of shape \[3\] \(24 bytes\) on "
                                                     r".*can't allocate memory"):
        ta.read(0)

    def device_failure(*args, **kwargs):
        raise RuntimeError("CUDA error: device-side assert triggered")
    monkeypatch.setattr(torch, "zeros", device_failure)     # no memory problem: not called one
    with pytest.raises(InternalError, match="could not make the zeros of an unwritten slot .*device-side assert"):
        ta.read(0)
