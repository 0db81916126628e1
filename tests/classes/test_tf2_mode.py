"""TensorArray mode "tf2": TensorFlow 2's rules (tf.TensorArray inside tf.function).

* tf.TensorArray's documentation examples, run as written with ``import
  gpu_tensorarray.tf2 as tf`` (tests/tf_parity/test_tf2_doc_examples.py runs them from
  TensorFlow's own docstring, against TensorFlow).
* Random op sequences against tf2_cases.ListModel, a plain Python list with the
  same rules (tests/tf_parity/test_tf2_oracle.py checks both against TensorFlow itself).
* Gradients against a plain reference that routes each output gradient to the value
  its row came from: an overwritten value gets none, a row read twice gets the sum.
* How the mode is chosen, the chain rule for used TensorArrays, values that never
  change after an overwrite, and the class's error messages.
"""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import gpu_tensorarray as gta
import gpu_tensorarray.tf2 as tf
from gpu_tensorarray import errors
from tf2_cases import ListModel, hostile_arguments, random_case, run_library, same, unnamed


def assert_tensor(value, expected, dtype, shape):
    value = gta.to_numpy(value)
    assert value.dtype == np.dtype(dtype) and value.shape == shape
    np.testing.assert_array_equal(value, np.asarray(expected, dtype))


# -- tf.TensorArray's documentation examples (tensorflow/python/ops/tensor_array_ops.py) ------------------
def test_doc_example_1_plain_reading_and_writing(backend):
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, clear_after_read=False)
    ta = ta.write(0, 10)
    ta = ta.write(1, 20)
    ta = ta.write(2, 30)

    assert_tensor(ta.read(0), 10.0, "float32", ())
    assert_tensor(ta.read(1), 20.0, "float32", ())
    assert_tensor(ta.read(2), 30.0, "float32", ())
    assert_tensor(ta.stack(), [10., 20., 30.], "float32", (3,))


def test_doc_example_2_fibonacci(backend):
    @tf.function
    def fibonacci(n):
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        ta = ta.unstack([0., 1.])

        for i in range(2, n):
            ta = ta.write(i, ta.read(i - 1) + ta.read(i - 2))

        return ta.stack()

    assert_tensor(fibonacci(7), [0., 1., 1., 2., 3., 5., 8.], "float32", (7,))


def test_doc_example_2_under_tf1_rules_reads_clear(backend):
    """What the issue reported: the same code with the V3 (TF1) class fails."""
    ta = gta.TensorArray("float32", size=0, dynamic_size=True, mode="tf1")
    ta = ta.unstack([0., 1.])
    ta = ta.write(2, ta.read(1) + ta.read(0))
    with pytest.raises(errors.InvalidArgumentError, match="Could not read index 1 twice"):
        ta.read(1)


def test_doc_example_3_loop_with_a_variable(backend):
    v = tf.Variable(1)

    @tf.function
    def f(x):
        ta = tf.TensorArray(tf.int32, size=0, dynamic_size=True)
        for i in tf.range(x):
            v.assign_add(i)
            ta = ta.write(i, v)
        return ta.stack()

    assert_tensor(f(5), [1, 2, 4, 7, 11], "int32", (5,))


def test_doc_example_stack(backend):
    ta = tf.TensorArray(tf.int32, size=3)
    ta = ta.write(0, tf.constant([1, 2]))
    ta = ta.write(1, tf.constant([3, 4]))
    ta = ta.write(2, tf.constant([5, 6]))
    assert_tensor(ta.stack(), [[1, 2], [3, 4], [5, 6]], "int32", (3, 2))


# -- random sequences against the list model ---------------------------------------------------------------
@pytest.mark.parametrize("chunk", range(4))
def test_random_sequences_match_the_list_model(backend, chunk):
    for seed in range(chunk * 100, chunk * 100 + 100):
        params, ops = random_case(np.random.default_rng(seed), 12)
        expected = ListModel(params).run(ops)
        actual = run_library(params, ops)
        assert same(expected, actual), (seed, params, ops)


# -- gradients against a plain reference -------------------------------------------------------------------
def _gradient_case(rng):
    """Writes, scatters and unstacks (repeated indices, overwrites) then reads, gathers
    (repeated indices) and stacks of a fixed-size float64 array of (2,) elements."""
    size = int(rng.integers(1, 5))
    ops, sources = [], []

    def source(shape):
        sources.append(rng.integers(-3, 4, size=shape).astype(np.float64))
        return len(sources) - 1

    def weight(shape):
        return rng.integers(-2, 3, size=shape).astype(np.float64)

    for _ in range(int(rng.integers(2, 10))):
        kind = ["write", "write", "scatter", "unstack", "read", "read", "gather", "stack"][int(rng.integers(0, 8))]
        if kind == "write":
            ops.append(("write", int(rng.integers(0, size)), source((2,))))
        elif kind == "scatter":
            indices = rng.integers(0, size, size=int(rng.integers(0, 4))).tolist()
            ops.append(("scatter", indices, source((len(indices), 2))))
        elif kind == "unstack":
            ops.append(("unstack", None, source((size, 2))))
        elif kind == "read":
            ops.append(("read", int(rng.integers(0, size)), weight((2,))))
        elif kind == "gather":
            indices = rng.integers(0, size, size=int(rng.integers(1, 5))).tolist()
            ops.append(("gather", indices, weight((len(indices), 2))))
        else:
            ops.append(("stack", None, weight((size, 2))))
    return size, ops, sources


def reference_gradients(size, ops, sources):
    """Each slot remembers which source row it holds; each output row's gradient goes there."""
    holder = [None] * size                  # slot -> (source, row or None)
    grads = [np.zeros_like(x) for x in sources]

    def route(slot, gradient):
        if holder[slot] is not None:
            source, row = holder[slot]
            if row is None:
                grads[source] += gradient
            else:
                grads[source][row] += gradient

    for kind, where, what in ops:
        if kind == "write":
            holder[where] = (what, None)
        elif kind == "scatter":
            for row, slot in enumerate(where):
                holder[slot] = (what, row)
        elif kind == "unstack":
            holder = [(what, row) for row in range(size)]
        elif kind == "read":
            route(where, what)
        else:
            slots = where if kind == "gather" else range(size)
            for row, slot in enumerate(slots):
                route(slot, what[row])
    return grads


def library_gradients(size, ops, sources):
    targets, weights = [], []
    with gta.GradientTape() as tape:
        ta = gta.TensorArray("float64", size=size, element_shape=[2], mode="tf2")
        for kind, where, what in ops:
            if kind == "write":
                ta = ta.write(where, sources[what])
            elif kind == "scatter":
                ta = ta.scatter(where, sources[what])
            elif kind == "unstack":
                ta = ta.unstack(sources[what])
            else:
                targets.append(ta.read(where) if kind == "read" else
                               ta.gather(where) if kind == "gather" else ta.stack())
                weights.append(what)
    if not targets:
        return [np.zeros(x.shape, x.dtype) for x in sources]     # host zeros, on any backend
    return [gta.to_numpy(g) for g in tape.gradient(targets, sources, output_gradients=weights,
                                                         unconnected_gradients="zero")]


@pytest.mark.parametrize("chunk", range(3))
def test_gradients_match_the_reference(backend, chunk):
    for seed in range(chunk * 100, chunk * 100 + 100):
        size, ops, sources = _gradient_case(np.random.default_rng(seed))
        sources = [backend.asarray(x) for x in sources]
        expected = reference_gradients(size, ops, [gta.to_numpy(x) for x in sources])
        actual = library_gradients(size, ops, sources)
        for position, (e, a) in enumerate(zip(expected, actual)):
            np.testing.assert_array_equal(a, e, err_msg=f"seed {seed}, source {position}: {ops}")


def test_overwritten_value_gets_no_gradient_and_two_reads_the_sum(backend):
    x0, x1 = backend.asarray(np.array([1.0, 2.0])), backend.asarray(np.array([3.0, 4.0]))
    with gta.GradientTape() as tape:
        ta = gta.TensorArray("float64", size=1, mode="tf2")
        ta = ta.write(0, x0).write(0, x1)
        y0, y1 = ta.read(0), ta.read(0)
    g0, g1 = tape.gradient([y0, y1], [x0, x1])
    assert gta.to_numpy(g0).tolist() == [0.0, 0.0]
    assert gta.to_numpy(g1).tolist() == [2.0, 2.0]


def test_writes_after_a_gradient_computation(backend):
    """TensorArrayGradV3 locks the storage's size; a TF2 array moves to fresh storage and goes on."""
    x = backend.asarray(np.array([1.0, 2.0]))
    with gta.GradientTape(persistent=True) as tape:
        ta = gta.TensorArray("float64", size=0, dynamic_size=True, mode="tf2").write(0, x)
        first = ta.read(0)
        tape.gradient(first, x)
        ta = ta.write(3, x)
        stacked = ta.stack()
    assert gta.to_numpy(stacked).tolist() == [[1.0, 2.0], [0.0, 0.0], [0.0, 0.0], [1.0, 2.0]]
    assert gta.to_numpy(tape.gradient(stacked, x)).tolist() == [2.0, 2.0]


# -- the rules ----------------------------------------------------------------------------------------------
def test_overwrite_reads_never_clear_and_returned_values_never_change(backend):
    ta = gta.TensorArray("float32", size=2, mode="tf2", clear_after_read=True)   # ignored, as in TF 2
    ta = ta.write(0, [1.0, 2.0]).write(1, [3.0, 4.0])
    stacked, first = ta.stack(), ta.read(0)
    ta = ta.write(0, [5.0, 6.0])
    assert gta.to_numpy(ta.read(0)).tolist() == [5.0, 6.0]
    assert gta.to_numpy(ta.read(0)).tolist() == [5.0, 6.0]
    assert gta.to_numpy(stacked).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert gta.to_numpy(first).tolist() == [1.0, 2.0]
    assert gta.to_numpy(ta.concat()).tolist() == [5.0, 6.0, 3.0, 4.0]


def test_unwritten_slots_read_as_zeros_when_the_shape_is_known(backend):
    ta = gta.TensorArray("float32", size=3, mode="tf2")
    with pytest.raises(errors.InvalidArgumentError, match="not fully defined"):
        ta.read(1)
    ta = ta.write(0, [1.0, 2.0])
    assert gta.to_numpy(ta.read(2)).tolist() == [0.0, 0.0]
    assert gta.to_numpy(ta.stack()).tolist() == [[1.0, 2.0], [0.0, 0.0], [0.0, 0.0]]


def test_unstack_and_split_replace_the_contents(backend):
    ta = gta.TensorArray("float32", size=0, dynamic_size=True, mode="tf2").write(4, [9.0])
    ta = ta.unstack([[1.0], [2.0]])
    assert int(ta.size()) == 2 and gta.to_numpy(ta.stack()).tolist() == [[1.0], [2.0]]
    ta = ta.split([1.0, 2.0, 3.0], [1, 2])
    assert int(ta.size()) == 2 and gta.to_numpy(ta.read(1)).tolist() == [2.0, 3.0]


@pytest.mark.parametrize("op, expected_shape", [
    (lambda ta: ta.write(0, []).read(0), (0,)), (lambda ta: ta.write(0, [[]]).read(0), (1, 0)),
    (lambda ta: ta.unstack([[], []]).stack(), (2, 0)), (lambda ta: ta.split([], [0, 0]).concat(), (0,)),
    (lambda ta: ta.scatter([1], [[]]).read(1), (0,))], ids=["write", "write-nested", "unstack", "split", "scatter"])
def test_a_string_array_reads_python_lists_as_strings_empty_ones_too(backend, op, expected_shape):
    """TensorFlow converts a Python value with the array's dtype preferred: [] is an empty
    string tensor for a string array, as tf.constant([], tf.string) is."""
    ta = gta.TensorArray("string", size=2, infer_shape=False, mode="tf2")
    value = op(ta)
    assert value.dtype == object and value.shape == expected_shape


@pytest.mark.parametrize("op", ["unstack", "split", "scatter", "write"])
def test_a_failed_string_op_changes_nothing(backend, op):
    """unstack and split replace the contents: a value they cannot convert fails before that."""
    bad = np.array(["x", 1], dtype=object)
    ta = gta.TensorArray("string", size=2, dynamic_size=True, infer_shape=False, mode="tf2")
    ta = ta.unstack(np.array([b"a", b"b"], object))
    call = {"unstack": lambda: ta.unstack(bad), "split": lambda: ta.split(bad, [1, 1]),
            "scatter": lambda: ta.scatter([0, 1], bad), "write": lambda: ta.write(0, bad)}[op]
    with pytest.raises(errors.InvalidArgumentError, match="neither str nor bytes"):
        call()
    assert ta.stack().tolist() == [b"a", b"b"]


@pytest.mark.parametrize("op", [
    lambda ta: ta.scatter([2], [[1.0]]),                 # TF grows a fixed-size array silently
    lambda ta: ta.unstack([[1.0], [2.0], [3.0]]),        # TF: size() 2, stack() fails
    lambda ta: ta.split([1.0, 2.0, 3.0], [1, 1, 1]),     # TF: size() 2, concat() three pieces
    lambda ta: ta.scatter([-1], [[1.0]]),                # TF crashes the process
])
def test_sane_rules_where_tensorflow_contradicts_itself(backend, op):
    ta = gta.TensorArray("float32", size=2, mode="tf2").write(0, [7.0])
    with pytest.raises(errors.InvalidArgumentError, match=r"TensorArray\.(scatter|unstack|split)"):
        op(ta)
    assert gta.to_numpy(ta.stack()).tolist() == [[7.0], [0.0]]      # nothing changed


def test_negative_dynamic_write_is_an_error_not_a_crash(backend):
    ta = gta.TensorArray("float32", size=0, dynamic_size=True, mode="tf2")
    with pytest.raises(errors.InvalidArgumentError, match="Trying to modify element -1"):
        ta.write(-1, [1.0])


def test_a_used_tensor_array_refuses_further_use(backend):
    ta = gta.TensorArray("float32", size=2, mode="tf2")
    newer = ta.write(0, [1.0])
    for use in (lambda: ta.write(1, [2.0]), lambda: ta.read(0), lambda: ta.stack(), lambda: ta.size()):
        with pytest.raises(errors.InvalidArgumentError, match="use the TensorArray they return"):
            use()
    assert gta.to_numpy(newer.read(0)).tolist() == [1.0]
    same_list = newer.identity()
    assert gta.to_numpy(same_list.read(0)).tolist() == [1.0]


def test_grad_and_wrapping_are_not_tf2(backend):
    ta = gta.TensorArray("float32", size=1, mode="tf2")
    with pytest.raises(errors.UnimplementedError, match="GradientTape"):
        ta.grad("gradients")
    with pytest.raises(errors.UnimplementedError, match="mode='tf1'"):
        gta.TensorArray("float32", handle=ta.handle, flow=ta.flow, mode="tf2")


def test_shape_and_dtype_errors(backend):
    ta = gta.TensorArray("float32", size=2, mode="tf2").write(0, [1.0, 2.0])
    with pytest.raises(errors.InvalidArgumentError, match=r"Inconsistent shapes: saw \(3,\) but expected \(2,\)"):
        ta.write(1, [1.0, 2.0, 3.0])
    with pytest.raises(errors.InvalidArgumentError, match="op elements int32 but list elements float"):
        ta.write(1, np.array([1, 2], np.int32))


_CONCAT_ERRORS = {
    "scalars": lambda make, c: make(size=2).write(0, c(1.0)).write(1, c(2.0)).concat(),
    "a vector, then a scalar": lambda make, c: make(size=2, infer_shape=False).write(0, c([1.0])).write(
        1, c(2.0)).concat(),
    "rows of two shapes": lambda make, c: make(size=2, infer_shape=False).write(0, c([[1.0, 2.0]])).write(
        1, c([[1.0]])).concat(),
    "rows of two ranks": lambda make, c: make(size=3, infer_shape=False).write(0, c([[1.0, 2.0]])).write(
        2, c([1.0])).concat(),
}


@pytest.mark.parametrize("name", list(_CONCAT_ERRORS))
def test_concat_errors_are_tensorlist_s(backend, name):
    """A concat of rows it cannot join fails in TensorListConcat's words, as inside a tf.function
    (TensorFlow's text, then the method), not in the V3 concat's, which named the array's storage."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    real = pytest.importorskip("tensorflow")
    program = _CONCAT_ERRORS[name]
    with pytest.raises(real.errors.InvalidArgumentError) as theirs:
        real.function(lambda: program(lambda **kwargs: real.TensorArray(real.float32, **kwargs),
                                      lambda value: real.constant(value, real.float32)), autograph=False)()
    expected = theirs.value.message.split("}} ", 1)[-1].split("\n")[0]
    with pytest.raises(errors.InvalidArgumentError) as ours:
        program(lambda **kwargs: gta.TensorArray("float32", mode="tf2", **kwargs),
                lambda value: np.asarray(value, np.float32))
    assert unnamed(str(ours.value)) == f"TensorArray NAME: {expected} (TensorArray.concat, mode 'tf2')"


# -- choosing the mode --------------------------------------------------------------------------------------
def test_mode_argument_context_and_default(backend):
    from gpu_tensorarray.tf2_array import TF2TensorArray

    assert type(gta.TensorArray("float32", size=1)) is gta.TensorArray
    assert type(gta.TensorArray("float32", size=1, mode="tf2")) is TF2TensorArray
    assert isinstance(gta.TensorArray("float32", size=1, mode="tf2"), gta.TensorArray)
    with gta.tensor_array_mode("tf2"):
        assert gta.get_tensor_array_mode() == "tf2"
        assert type(gta.TensorArray("float32", size=1)) is TF2TensorArray
        assert type(gta.TensorArray("float32", size=1, mode="tf1")) is gta.TensorArray
    assert gta.get_tensor_array_mode() == "tf1"
    gta.set_tensor_array_mode("tf2")
    try:
        assert type(gta.TensorArray("float32", size=1)) is TF2TensorArray
    finally:
        gta.set_tensor_array_mode(None)
    with pytest.raises(errors.InvalidArgumentError, match="mode must be one of"):
        gta.TensorArray("float32", size=1, mode="tf3")


def test_a_tf1_arrays_gradients_whatever_the_default_mode(backend):
    # The gradient functions and TensorArray.grad wrap the gradient array's handle under TF1
    # rules, the only ones a handle has, whatever mode the caller made the default.
    x = np.arange(6.0).reshape(2, 3)
    with gta.GradientTape() as tape:
        ta = gta.TensorArray("float64", size=2, mode="tf1").unstack(x)
        y = ta.read(1)
    with gta.tensor_array_mode("tf2"):
        gradient = gta.to_numpy(tape.gradient(y, x))
        grad = gta.TensorArray("float32", size=2, mode="tf1").grad("source")
    assert gradient.tolist() == [[0, 0, 0], [1, 1, 1]]
    assert type(grad) is gta.TensorArray
    gta.set_tensor_array_mode("tf2")
    try:
        assert type(gta.TensorArray("float32", size=2, mode="tf1").grad("source")) is gta.TensorArray
    finally:
        gta.set_tensor_array_mode(None)


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_a_tensor_array_can_be_weakly_referenced(backend, mode):
    # As tf.TensorArray can: a cache keyed weakly by the arrays a program makes works.
    import gc
    import weakref

    ta = gta.TensorArray("float32", size=1, mode=mode)
    reference = weakref.ref(ta)
    assert reference() is ta
    del ta
    gc.collect()
    assert reference() is None


def test_rows_of_two_shapes_under_a_partial_element_shape_stack_in_tensorflows_words(backend):
    ta = gta.TensorArray("float32", size=2, element_shape=[None, 2], infer_shape=False, mode="tf2")
    ta = ta.write(0, np.zeros((1, 2), np.float32)).write(1, np.zeros((3, 2), np.float32))
    with pytest.raises(errors.InvalidArgumentError,
                       match=re.escape("PartialTensorShape: Incompatible shapes during merge: [1,2] vs. [3,2]")):
        ta.stack()


def test_mode_from_the_environment():
    code = ("import gpu_tensorarray as gta; ta = gta.TensorArray('float32', size=1); "
            "print(type(ta).__name__, gta.get_tensor_array_mode())")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, GPU_TENSORARRAY_MODE="tf2", PYTHONPATH=root)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.split() == ["TF2TensorArray", "tf2"]


# -- the class's rough edges --------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_np_asarray_of_a_tensor_array_says_to_stack(backend, mode):
    ta = gta.TensorArray("float32", size=1, mode=mode).write(0, [1.0])
    with pytest.raises(errors.InvalidArgumentError, match=r"call ta.stack\(\)"):
        np.asarray(ta)


def test_tf1_unstack_into_a_smaller_array_gives_tensorflows_text_then_the_method(backend):
    ta = gta.TensorArray("float32", size=2)
    with pytest.raises(errors.InvalidArgumentError) as raised:
        ta.unstack(np.zeros((3, 1), np.float32))
    assert str(raised.value).startswith("Max scatter index must be < array size (2 vs. 2)")
    assert "TensorArray.unstack of 3 rows: create the TensorArray with size=3 or dynamic_size=True" in str(raised.value)
    assert gta.to_numpy(ta.write(0, np.ones(1, np.float32)).read(0)).tolist() == [1.0]    # the failed op changed nothing


def test_tf1_split_shape_error_keeps_tensorflows_text_and_says_what_is_already_set(backend):
    ta = gta.TensorArray("float32", size=2, infer_shape=False, element_shape=[2])
    with pytest.raises(errors.InvalidArgumentError) as raised:
        ta.split(np.zeros(3, np.float32), [1, 2])
    tensorflows, ours = str(raised.value).split("(consider setting infer_shape=False).")
    assert tensorflows.endswith("is incompatible with the TensorArray's inferred element shape: [2] ")
    assert ours.startswith(" (TensorArray.split: infer_shape is already False")


@pytest.mark.parametrize("dynamic", [False, True])
def test_tf1_split_size_error_advises_what_fits_the_array(backend, dynamic):
    ta = gta.TensorArray("float16", size=2, dynamic_size=dynamic)
    with pytest.raises(errors.InvalidArgumentError) as raised:
        if dynamic:                  # a dynamic array larger than the pieces: TensorFlow's kernel refuses it too
            ta.split(np.zeros(0, np.float16), [])
        else:
            ta.split(np.zeros(3, np.float16), [1, 1, 1])
    text = str(raised.value)
    assert text.startswith(f"TensorArray's size is not equal to the size of lengths (2 vs. {0 if dynamic else 3}), "
                           f"and the TensorArray is not marked as dynamically resizeable")
    assert ("dynamic_size=True" in text) is not dynamic
    assert ("as many pieces as it has slots" in text) is dynamic


def test_tf1_split_of_unequal_pieces_reports_the_ops_checks_first(backend):
    """TensorFlow's class checks the pieces' shape before the op only when the lengths are equal
    (tests/tf_parity/test_class_messages.py compares with TensorFlow itself)."""
    ta = gta.TensorArray("float32", size=2, element_shape=[2])
    with pytest.raises(errors.InvalidArgumentError) as raised:
        ta.split(np.ones((4, 2), np.float32), [1, 2])
    assert str(raised.value).startswith("Expected sum of lengths to be equal to values.shape[0], but sum of lengths "
                                        "is 3 and value's shape is: [4,2]")
    with pytest.raises(errors.InvalidArgumentError, match="shape"):
        ta.split(np.ones((4, 2), np.float32), [2, 2])       # equal pieces of (2, 2): the class's check


# -- index vectors: eager's rule, not tf.function's (docs/semantics.md §6.5) ---------------------------------
_TABLE = np.arange(6.0, dtype=np.float32).reshape(3, 2)


def _tensorflow(real, op, indices, in_function):
    """A gather of ``indices`` from, or a scatter of two rows into, an array of the rows of _TABLE,
    by TensorFlow eagerly or inside a tf.function: the value, or the class of the error."""
    def run():
        ta = real.TensorArray(real.float32, size=3).unstack(_TABLE)
        if op == "gather":
            return ta.gather(real.constant(indices))
        return ta.scatter(real.constant(indices), _TABLE[:2] + 10).stack()

    try:
        return (real.function(run, autograph=False) if in_function else run)().numpy()
    except (TypeError, ValueError) as error:
        return type(error).__name__


def _ours(op, indices):
    ta = gta.TensorArray("float32", size=3, mode="tf2").unstack(_TABLE)
    try:
        return gta.to_numpy(ta.gather(indices) if op == "gather" else ta.scatter(indices, _TABLE[:2] + 10).stack())
    except errors.InvalidArgumentError as error:
        return error


@pytest.mark.parametrize("op", ["gather", "scatter"])
@pytest.mark.parametrize("dtype", ["int64", "int16", "uint8"])
def test_index_vectors_of_other_integer_dtypes_are_taken_as_eager_takes_them(backend, op, dtype):
    """Eager gathers and scatters by int64 (or narrower) indices; tf.function refuses them at tracing
    (its TensorList ops take int32): the class takes them, with eager's values."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    real = pytest.importorskip("tensorflow")
    indices = np.array([2, 0], dtype)
    eager = _tensorflow(real, op, indices, in_function=False)
    assert isinstance(eager, np.ndarray) and _tensorflow(real, op, indices, in_function=True) == "TypeError"
    ours = _ours(op, indices)
    assert isinstance(ours, np.ndarray) and ours.shape == eager.shape and np.array_equal(ours, eager)


@pytest.mark.parametrize("op", ["gather", "scatter"])
@pytest.mark.parametrize("indices", [[[2], [0]], [[2, 0]], 1])
def test_indices_that_are_not_a_vector_are_refused(backend, op, indices):
    """Eager refuses them (by accident: NumPy's TypeError or ValueError from indexing a list), and so
    does tf.function's scatter; tf.function's gather flattens them. The class refuses them with
    InvalidArgumentError naming the method and the shape."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    real = pytest.importorskip("tensorflow")
    indices = np.array(indices, np.int32)
    assert _tensorflow(real, op, indices, in_function=False) in ("TypeError", "ValueError")
    in_function = _tensorflow(real, op, indices, in_function=True)
    if op == "gather":
        assert np.array_equal(in_function, _TABLE[indices.reshape(-1)])
    else:
        assert in_function == "ValueError"
    ours = _ours(op, indices)
    assert isinstance(ours, errors.InvalidArgumentError)
    assert unnamed(str(ours)) == (f"TensorArray NAME: indices must be a vector, got shape {list(indices.shape)} "
                                  f"(TensorArray.{op}, mode 'tf2')")



def _hostile_cases():
    return hostile_arguments(lambda **kwargs: gta.TensorArray("float32", size=2, mode="tf2", **kwargs),
                             lambda shape: np.ones(shape, np.float32))


@pytest.mark.parametrize("label", [label for label, _, _ in _hostile_cases()[0]])
def test_hostile_arguments_are_errors_in_the_ops_context_and_change_nothing(backend, label):
    cases, ta = _hostile_cases()
    call, needles = next((call, needles) for name, call, needles in cases if name == label)
    with pytest.raises(errors.InvalidArgumentError) as caught:
        call()
    assert all(needle in str(caught.value) for needle in needles), str(caught.value)
    assert int(ta.size()) == 2 and gta.to_numpy(ta.stack()).tolist() == [[0.0, 0.0], [1.0, 1.0]]


def test_a_ring_buffer_holds_storage_for_its_slots_not_its_writes(backend):
    """Each write takes a fresh storage slot; once overwrites have used more than twice the
    list's slots (and 16 more), the values move to a fresh storage. A ring buffer of 4 slots
    written 300 times keeps at most 26 storage slots and leaves no old storage open, and its
    gradients through the moves (under a tape) are the list model's: each row gets one per
    read that returned it and one if the final stack holds it."""
    from gpu_tensorarray.registry import registry
    from gpu_tensorarray.testing import open_array_names
    rows = [backend.asarray(np.full(2, float(i))) for i in range(300)]
    before = open_array_names()
    returned = []                                  # per read: which row it returned (None: zeros)
    latest = [None] * 4
    with gta.GradientTape() as tape:
        ta = gta.TensorArray("float64", size=4, mode="tf2", element_shape=[2])
        reads = []
        for i, row in enumerate(rows):
            ta = ta.write(i % 4, row)
            latest[i % 4] = i
            if i % 7 == 0:
                reads.append(ta.read((i + 2) % 4))
                returned.append(latest[(i + 2) % 4])
            assert registry.lookup(ta.handle).size <= 2 * (4 + 1) + 16
        stacked = ta.stack()
    assert gta.to_numpy(stacked)[:, 0].tolist() == [296.0, 297.0, 298.0, 299.0]
    assert [gta.to_numpy(value)[0] for value in reads] == [0.0 if j is None else float(j) for j in returned]
    grads = tape.gradient([*reads, stacked], rows, unconnected_gradients="zero")
    expected = [returned.count(i) + (i >= 296) for i in range(300)]
    assert [float(gta.to_numpy(g)[0]) for g in grads] == expected
    del tape, reads, stacked
    assert len(open_array_names() - before) <= 2          # the list's storage (and a scratch array)


def test_gradients_between_writes_move_the_values_once_per_doubling(backend):
    """Each gradient computation locks the storage's size (TensorArrayGradV3): the next write of a
    new slot moves the values, to a storage with room for as many again (it moved them at every
    write, to a storage of exactly the list's length, through recorded ops: a persistent tape grew
    by t ops a step). The gradients are each step's own."""
    rows = [backend.asarray(np.full(2, float(t))) for t in range(64)]
    storages = set()
    with gta.GradientTape(persistent=True) as tape:
        ta = gta.TensorArray("float64", size=0, dynamic_size=True, mode="tf2")
        for t, row in enumerate(rows):
            ta = ta.write(t, row)
            read = ta.read(t)
            with tape.stop_recording():
                grad = tape.gradient(read, row)
            assert gta.to_numpy(grad).tolist() == [1.0, 1.0]
            storages.add(ta.handle.name)
        assert gta.to_numpy(ta.stack())[:, 0].tolist() == [float(t) for t in range(64)]
    assert len(storages) <= 8                      # a move per doubling of 64 values
    assert len(tape.operations) <= 5 * 64          # a write, a read, and each value moved about twice: linear


@pytest.mark.parametrize("tape", [False, True])
def test_concat_after_a_move_joins_the_list_not_the_storage_s_room(backend, tape):
    """A move leaves room in the fresh storage for as many values again; a concat of the list,
    in order there, joined every slot of the storage, the room's unwritten ones too (an error)."""
    with gta.GradientTape(persistent=True) as recorder:
        ta = gta.TensorArray("float64", size=0, dynamic_size=True, mode="tf2", element_shape=(2,))
        first = backend.asarray(np.zeros(2))
        ta = ta.write(0, first).write(1, np.ones(2))
        if tape:
            read = ta.read(0)
            with recorder.stop_recording():
                recorder.gradient(read, first)                     # its gradient array locks the storage
        for k in range(20):
            ta = ta.write(0, np.full(2, 10.0 + k))                 # overwrites, then a move
        ta = ta.write(2, np.full(2, 2.0))
    assert gta.to_numpy(ta.concat()).tolist() == [29.0, 29.0, 1.0, 1.0, 2.0, 2.0]      # outside: no scratch array
    assert gta.to_numpy(ta.stack()).tolist() == [[29.0, 29.0], [1.0, 1.0], [2.0, 2.0]]


def _overwritten_until_a_move(ta, index, rows):
    """Overwrite slot ``index`` with ``rows`` (one at a time) until the next write would move the
    values to a fresh storage: the storage has used 2 * (length + 1) + 16 physical slots."""
    from gpu_tensorarray.registry import registry
    length = int(ta.size())
    while registry.lookup(ta.handle).size < 2 * (length + 1) + 16:
        ta = ta.write(index, rows)
    return ta


def test_a_move_keeps_unwritten_slots_and_the_order_of_the_rest(backend):
    """A gather or stack that needs a zeros slot for an unwritten slot makes it first: making it
    may move the values, which then have other physical slots (it read the old ones)."""
    ta = gta.TensorArray("float32", size=20, mode="tf2", element_shape=[1])
    for index in reversed(range(19)):                   # slot 19 never written
        ta = ta.write(index, np.array([index], np.float32))
    ta = _overwritten_until_a_move(ta, 0, np.array([0.0], np.float32))
    assert gta.to_numpy(ta.gather([1, 2, 19])).ravel().tolist() == [1.0, 2.0, 0.0]
    ta = _overwritten_until_a_move(ta, 0, np.array([0.0], np.float32))
    assert gta.to_numpy(ta.stack()).ravel().tolist() == list(range(19)) + [0.0]


@pytest.mark.parametrize("failure", [errors.ResourceExhaustedError, KeyboardInterrupt])
def test_a_move_that_fails_changes_nothing(backend, monkeypatch, failure):
    """A write whose move to a fresh storage fails halfway (out of memory, an interrupt) leaves
    the list as it was: the fresh storage is put in place only once it holds every value."""
    from gpu_tensorarray import tf2_array
    ta = gta.TensorArray("float32", size=4, mode="tf2")
    for index in range(4):
        ta = ta.write(index, np.full(2, index, np.float32))
    ta = _overwritten_until_a_move(ta, 3, np.full(2, 3, np.float32))
    real, calls = tf2_array.raw_ops.TensorArrayWriteV3, [0]

    def failing(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 3:                               # the move's third write
            raise failure("injected")
        return real(*args, **kwargs)
    with monkeypatch.context() as patch:
        patch.setattr(tf2_array.raw_ops, "TensorArrayWriteV3", failing)
        with pytest.raises(failure, match="injected"):
            ta.write(0, np.full(2, 9, np.float32))
    assert gta.to_numpy(ta.stack()).tolist() == [[0, 0], [1, 1], [2, 2], [3, 3]]
    ta = ta.write(0, np.full(2, 9, np.float32))
    assert gta.to_numpy(ta.stack()).tolist() == [[9, 9], [1, 1], [2, 2], [3, 3]]


@pytest.mark.parametrize("op", ["unstack", "split"])
def test_unstack_and_split_that_fail_leave_the_contents(backend, monkeypatch, op):
    """unstack and split replace the contents by a fresh storage, put in place once it holds them."""
    from gpu_tensorarray import tf2_array
    ta = gta.TensorArray("float32", size=0, dynamic_size=True, mode="tf2")
    ta = ta.write(0, np.ones(2, np.float32)) if op == "unstack" else ta.split(np.ones((1, 2), np.float32), [1])
    before = gta.to_numpy(ta.concat() if op == "split" else ta.stack()).tolist()
    name = "TensorArrayScatterV3" if op == "unstack" else "TensorArraySplitV3"

    def failing(*args, **kwargs):
        raise KeyboardInterrupt("injected")
    with monkeypatch.context() as patch:
        patch.setattr(tf2_array.raw_ops, name, failing)
        with pytest.raises(KeyboardInterrupt, match="injected"):
            ta.unstack(np.zeros((3, 2), np.float32)) if op == "unstack" else \
                ta.split(np.zeros((3, 2), np.float32), [1, 2])
    assert gta.to_numpy(ta.concat() if op == "split" else ta.stack()).tolist() == before == [[1.0, 1.0]]


@pytest.mark.parametrize("value, text", [
    ([[1, 2], [3]], "Cannot convert a value of type list to a tensor: ValueError"),
    ([True, 2.0], "Cannot convert value [True, 2.0] to a tensor: it mixes bools and numbers"),
    ([0, 2**63], "Cannot convert [0, 9223372036854775808] to a tensor: 9223372036854775808 does not fit in int64"),
], ids=["ragged", "bool-and-float", "past-int64"])
def test_constant_refuses_what_tensorflow_refuses_with_the_librarys_error(value, text):
    with pytest.raises(errors.InvalidArgumentError, match="^" + re.escape(text)):
        tf.constant(value)
    assert tf.constant([np.int64(1), np.uint64(2)]).dtype == np.int32     # integers, where NumPy makes floats


@pytest.mark.parametrize("value, dtype, expected", [
    ("a", None, b"a"), (np.str_("a"), None, b"a"), (np.array(["a", "bc"]), None, [b"a", b"bc"]),
    (["a", b"b"], None, [b"a", b"b"]), ([], "string", []), ([[b"x"], ["y"]], None, [[b"x"], [b"y"]])],
    ids=["str", "np.str_", "np-str-array", "str-and-bytes", "empty", "nested"])
def test_constant_makes_strings_as_tensorflow_does(value, dtype, expected):
    """tf.constant makes a string tensor of str and bytes (str encoded as UTF-8)."""
    made = tf.constant(value, dtype)
    assert made.dtype == object and np.array(made, object).reshape(-1).tolist() == np.array(expected, object).reshape(-1).tolist()
    assert made.shape == np.array(expected, object).shape


@pytest.mark.parametrize("value, dtype", [(1, "string"), (2.5, "int32"), ([1.5], "int64")])
def test_constant_refuses_a_value_its_dtype_cannot_hold(value, dtype):
    with pytest.raises(errors.InvalidArgumentError, match="^Cannot convert"):
        tf.constant(value, dtype)


@pytest.mark.parametrize("args, dtype, expected, expected_dtype", [
    ((5,), None, list(range(5)), "int32"), ((5, 1, -2), None, [5, 3], "int32"), ((2, 2), None, [], "int32"),
    ((0, 1, 0.25), None, [0.0, 0.25, 0.5, 0.75], "float32"), ((2**31, 2**31 + 2), None, [2**31, 2**31 + 1], "int64"),
    ((np.float64(2.5),), None, [0.0, 1.0, 2.0], "float64"), ((3,), "float32", [0.0, 1.0, 2.0], "float32"),
    ((np.float16(3),), None, [0.0, 1.0, 2.0], "float16"), ((0, np.float16(1.5), 0.5), None, [0.0, 0.5, 1.0], "float32"),
    ((3,), "int64", [0, 1, 2], "int64")])
def test_range_counts_and_types_as_tf_range(args, dtype, expected, expected_dtype):
    """The values: Python's range, or its float steps. The dtype, unless given: the highest of the
    arguments' (each typed as tf.constant types it: int32, int64 past it, float32 for a float) in
    tf.range's order, int32, int64, float16, bfloat16, float32, float64."""
    made = tf.range(*args, dtype=dtype)
    assert made.dtype == np.dtype(expected_dtype) and made.tolist() == expected


@pytest.mark.parametrize("args, dtype, text", [
    ((-3,), None, "Requires start <= limit when delta > 0: 0/-3"),
    ((1, 2, -1), None, "Requires start >= limit when delta < 0: 1/2"),
    ((0, 1, 0), None, "Requires delta != 0: 0"),
    ((2.0,), "int32", "Cannot convert value 2.0"),
    ((3,), "complex64", "tf.range makes no values of dtype 'complex64'"),
    ((3,), "int16", "tf.range makes no values of dtype 'int16'")])
def test_range_refuses_what_tf_range_refuses(args, dtype, text):
    with pytest.raises(errors.InvalidArgumentError, match="^" + re.escape(text)):
        tf.range(*args, dtype=dtype)


@pytest.mark.parametrize("initial, op, value", [(1, "assign", 2.7), (1, "assign_add", 2.5), (1, "assign_sub", 0.5),
                                                (1.0, "assign", "a")])
def test_variable_refuses_a_value_its_dtype_cannot_hold(initial, op, value):
    """tf.Variable converts to its dtype: TypeError for 2.5 into int32, where a cast would truncate silently."""
    v = tf.Variable(initial)
    with pytest.raises(errors.InvalidArgumentError):
        getattr(v, op)(value)
    assert v.numpy() == initial
    assert getattr(v, op)(2).numpy() == {"assign": 2, "assign_add": initial + 2, "assign_sub": initial - 2}[op]


@pytest.mark.parametrize("attributes, text", [
    (dict(size=1), "Trying to concat list with only uninitialized tensors but element_shape_except_first_dim is "
                   "not fully defined: <unknown>"),
    (dict(size=2, element_shape=[None, None]), "Trying to concat list with only uninitialized tensors but "
                                               "element_shape_except_first_dim is not fully defined: [?]"),
    (dict(size=2, dynamic_size=True), "Trying to concat list with only uninitialized tensors but "
                                      "element_shape_except_first_dim is not fully defined: <unknown>"),
    (dict(size=2, element_shape=[None, 3]), "List contains uninitialized tensor at index 0 but leading_dims has "
                                            "only 0 elements.")], ids=["size-1", "rank-2", "dynamic", "rest-known"])
def test_concat_of_only_unwritten_slots_says_what_tensorflow_says(backend, attributes, text):
    """TensorListConcat (list_kernels.h) asks for the shape past the first dimension first: with
    every slot unwritten and that shape unknown, that is the error, before the leading dimensions."""
    with pytest.raises(errors.InvalidArgumentError, match=r"^TensorArray TensorArrayV2_\d+: " + re.escape(text)):
        gta.TensorArray("float32", mode="tf2", **attributes).concat()


@pytest.mark.parametrize("make", [
    lambda: gta.TensorArray("float32", size=100_000, mode="tf2"),
    lambda: gta.TensorArray("float32", size=0, dynamic_size=True, mode="tf2").write(99_999, 1.0),
    lambda: gta.TensorArray("float32", size=0, dynamic_size=True, mode="tf2").scatter([99_999], [1.0]),
    lambda: _torch_tensor_array(size=100_000),
    lambda: _torch_tensor_array(size=0, dynamic_size=True).write(99_999, _torch().ones(1))],
    ids=["size", "write", "scatter", "torch-size", "torch-write"])
def test_a_list_whose_tables_host_memory_cannot_hold_is_refused_before_they_are_made(monkeypatch, make):
    """Asking for more than the host has may succeed (Linux overcommits) and filling it get the
    process killed: tables of a huge size or index are refused against host memory first."""
    from gpu_tensorarray import tf2_lists
    monkeypatch.setattr(tf2_lists, "host_memory_limit", lambda: 1 << 20)       # 1 MiB: 65536 slots
    with pytest.raises(errors.ResourceExhaustedError,
                       match=r"^(TensorArray \S+: )?OOM when allocating a list of 100000 elements"):
        make()


def _torch():
    return pytest.importorskip("torch")


def _torch_tensor_array(**attributes):
    torch = _torch()                    # (skips without torch, before the bridge's import fails)
    from gpu_tensorarray.torch import TensorArray as TorchTensorArray
    return TorchTensorArray(torch.float32, mode="tf2", **attributes)


@pytest.mark.parametrize("watch_accessed", [True, False])
def test_watch_accessed_variables_false_makes_only_watched_values_sources(backend, watch_accessed):
    """tf.GradientTape(watch_accessed_variables=False): a variable (and, here, any value written)
    is a source only once watched; an unwatched one's gradient is unconnected (None, or zeros)."""
    x, v = np.ones(2), tf.Variable(np.full(2, 3.0))
    with tf.GradientTape(persistent=True, watch_accessed_variables=watch_accessed) as tape:
        tape.watch([x])
        ta = tf.TensorArray(tf.float64, size=2).write(0, x).write(1, v)
        rows = ta.stack()
    dx, dv = tape.gradient(rows, [x, v])
    assert gta.to_numpy(dx).tolist() == [1.0, 1.0]
    if watch_accessed:
        assert gta.to_numpy(dv).tolist() == [1.0, 1.0] and tape.watched_variables() == (v,)
    else:
        assert dv is None and tape.watched_variables() == ()
        assert gta.to_numpy(tape.gradient(rows, v, unconnected_gradients="zero")).tolist() == [0.0, 0.0]
        with tf.GradientTape(watch_accessed_variables=False) as watching:
            watching.watch(v)
            rows = tf.TensorArray(tf.float64, size=1).write(0, v).stack()
        assert watching.watched_variables() == (v,)
        assert gta.to_numpy(watching.gradient(rows, v)).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("leaf", [3.0, None, object(), "x"])
def test_watch_of_what_is_no_array_is_refused_and_watches_nothing(backend, leaf):
    """TensorFlow's ValueError (ours an InvalidArgumentError) and its first words; a structure
    with one such leaf watches none of it (they were taken, and never a source)."""
    x = np.ones(2)
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        for value in (leaf, [x, leaf]):
            with pytest.raises(errors.InvalidArgumentError, match=f"^Passed in object {re.escape(repr(leaf))} of "
                                                                  f"type '{type(leaf).__name__}', not an array"):
                tape.watch(value)
        rows = tf.TensorArray(tf.float64, size=1).write(0, x).stack()
    assert tape.gradient(rows, x) is None


@pytest.mark.parametrize("fresh", ["reset", "entered again"])
def test_a_reset_or_reentered_tape_forgets_what_was_watched(backend, fresh):
    """As in TensorFlow, reset() and entering a used non-persistent tape again start a new tape: a
    value watched before is no source now (watch_accessed_variables=False)."""
    x = np.ones(2)
    tape = tf.GradientTape(watch_accessed_variables=False)
    with tape:
        tape.watch(x)
        rows = tf.TensorArray(tf.float64, size=1).write(0, x).stack()
        if fresh == "reset":                         # inside the block, as TensorFlow takes it
            tape.reset()
            rows = tf.TensorArray(tf.float64, size=1).write(0, x).stack()
    if fresh != "reset":
        assert gta.to_numpy(tape.gradient(rows, x)).tolist() == [1.0, 1.0]
        with tape:
            rows = tf.TensorArray(tf.float64, size=1).write(0, x).stack()
    assert tape.gradient(rows, x) is None


@pytest.mark.parametrize("make", ["library", "torch"])
def test_errors_name_the_array_and_the_index_as_mode_tf1_s_do(backend, make):
    """TensorFlow's TensorList texts name neither the array nor the index: mode tf2's errors gave
    neither, where a model's two arrays both take writes."""
    if make == "torch":
        torch = _torch()
        from gpu_tensorarray.torch import TensorArray

        def array(**name):
            return TensorArray(torch.float64, size=3, mode="tf2", **name)

        def value(*shape):
            return torch.ones(*shape, dtype=torch.float64)
    else:
        def array(**name):
            return gta.TensorArray("float64", size=3, mode="tf2", **name)

        def value(*shape):
            return np.ones(shape)
    values = array(tensor_array_name="values").write(0, value(3))
    with pytest.raises(errors.InvalidArgumentError, match=r"^TensorArray values_\d+: Inconsistent shapes: saw \(2, 3\) "
                                                          r"but expected \(3,\)  \(TensorArray.write at index 2, "
                                                          r"mode 'tf2'\)$"):
        values.write(2, value(2, 3))
    with pytest.raises(errors.InvalidArgumentError, match=r"^TensorArray values_\d+: Trying to access element 7 in a "
                                                          r"list with 3 elements. \(TensorArray.read at index 7, "):
        values.read(7)
    keys = array(tensor_array_name="keys")
    keys.write(0, value(3))
    with pytest.raises(errors.InvalidArgumentError, match=r"^TensorArray keys_\d+: This TensorArray was already used"):
        keys.stack()
    with pytest.raises(errors.InvalidArgumentError, match=r"^TensorArray TensorArrayV2_\d+: indices must be a vector"):
        array().gather([[0]])
    for index in (True, np.array(True)) + ((torch.tensor(True),) if make == "torch" else ()):
        with pytest.raises(errors.InvalidArgumentError, match=r"dtype bool \(.*\) \(TensorArray.write, mode 'tf2'\)$"):
            values.write(index, value(3))                      # refused, so not "at index 1"
    name = re.match(r"TensorArray (\S+):", str(pytest.raises(errors.InvalidArgumentError, values.read, 9).value))[1]
    moved = values.unstack(value(3, 3))                         # new storage (unstack)
    for k in range(30):
        moved = moved.write(0, value(3))                        # overwrites, then a move to new storage
    with pytest.raises(errors.InvalidArgumentError, match=rf"^TensorArray {name}: Trying to access element 9"):
        moved.read(9)                                           # the name the array had when it was made


@pytest.mark.parametrize("make", ["library", "torch"])
def test_a_tensor_array_name_that_is_no_string_is_ignored_by_both_classes(backend, make):
    """TensorFlow 2 ignores tensor_array_name; a string (or bytes) names the array in errors here. The
    torch class refused 5 (the library's took it), and the two classes named a bytes name differently."""
    if make == "torch":
        torch = _torch()
        from gpu_tensorarray.torch import TensorArray

        def array(name):
            return TensorArray(torch.float64, size=1, tensor_array_name=name, mode="tf2")
    else:
        def array(name):
            return gta.TensorArray("float64", size=1, tensor_array_name=name, mode="tf2")
    for name, shown in [(5, "TensorArrayV2"), (np.array([1, 0]), "TensorArrayV2"), ("", "TensorArrayV2"),
                        (b"keys", "keys")]:
        with pytest.raises(errors.InvalidArgumentError, match=rf"^TensorArray {shown}_\d+: Trying to access element 3"):
            array(name).read(3)

