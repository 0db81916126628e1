"""tf.TensorArray's documentation examples, taken from TensorFlow's own docstring
(tensorflow/python/ops/tensor_array_ops.py, class TensorArray) and run twice from the
same source text: with ``tf`` TensorFlow itself and with ``tf`` gpu_tensorarray.tf2.
Every value an example shows is compared three ways: ours, TensorFlow's, and the value
the docstring prints."""

import doctest
import itertools
import linecache
import re

import numpy as np
import pytest

import gpu_tensorarray as gta
import gpu_tensorarray.tf2 as ours

tf = pytest.importorskip("tensorflow")

_SHOWN = re.compile(r"numpy=(.*)>\s*$", re.DOTALL)


def _examples():
    """[(title, [doctest.Example, ...])] for each "Example N:" of the docstring."""
    text = tf.TensorArray.__doc__
    parts = re.split(r"^\s*(Example \d+:.*)$", text, flags=re.MULTILINE)
    found = []
    for title, body in zip(parts[1::2], parts[2::2]):
        found.append((title.strip(), doctest.DocTestParser().get_examples(body)))
    return found


EXAMPLES = _examples()


def test_the_docstring_still_has_three_examples():
    assert [title.split(":")[0] for title, _ in EXAMPLES] == ["Example 1", "Example 2", "Example 3"]
    assert all(examples for _, examples in EXAMPLES)


_NUMBER = itertools.count()


def _compiled(source, mode):
    """``source`` compiled under a file name linecache knows (AutoGraph reads a
    tf.function's source)."""
    name = f"<tf.TensorArray example {next(_NUMBER)}>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    return compile(source, name, mode)


def _run(examples, module):
    """Run the examples in one namespace; the value of each one that shows output."""
    namespace = {"tf": module}
    shown = []
    for example in examples:
        if example.want.strip():
            shown.append(eval(_compiled(example.source, "eval"), namespace))
        else:
            exec(_compiled(example.source, "exec"), namespace)
    return shown


def _documented(want):
    """The value a docstring output shows: <tf.Tensor: ..., numpy=array([...], dtype=int32)>."""
    dtype = re.search(r"dtype=(\w+),", want).group(1)
    return np.asarray(eval(_SHOWN.search(want).group(1), {"array": np.array, "float32": np.float32,
                                                           "int32": np.int32}), dtype)


@pytest.mark.parametrize("title, examples", EXAMPLES, ids=[title.split(":")[0] for title, _ in EXAMPLES])
def test_each_example_runs_with_tf2_as_with_tensorflow(backend, title, examples):
    theirs = [value.numpy() for value in _run(examples, tf)]
    with gta.tensor_array_mode("tf1"):      # tf2.TensorArray follows TF 2's rules whatever the default
        mine = [gta.to_numpy(value) for value in _run(examples, ours)]
    documented = [_documented(example.want) for example in examples if example.want.strip()]
    assert len(mine) == len(theirs) == len(documented) > 0
    for value, tf_value, doc_value in zip(mine, theirs, documented):
        assert value.dtype == tf_value.dtype == doc_value.dtype
        assert value.shape == tf_value.shape == doc_value.shape
        np.testing.assert_array_equal(value, tf_value)
        np.testing.assert_array_equal(value, doc_value)


def test_watch_is_accepted_and_the_tape_still_differentiates(backend):
    x = np.arange(6, dtype=np.float64).reshape(3, 2)
    with ours.GradientTape() as tape:
        tape.watch(x)
        ta = ours.TensorArray(ours.float64, size=3).unstack(x)
        y = ta.read(1)
    grad = gta.to_numpy(tape.gradient(y, x))
    np.testing.assert_array_equal(grad, [[0, 0], [1, 1], [0, 0]])


def test_range_and_variable_follow_tensorflow():
    for args in [(5,), (2, 9, 3), (1.0, 3), (5, 0, -2)]:
        expected = tf.range(*args).numpy()
        value = ours.range(*args)
        assert value.dtype == expected.dtype and value.tolist() == expected.tolist(), args
    v, tv = ours.Variable(1.5), tf.Variable(1.5)
    for step in (v, tv):
        step.assign_add(2.0)
        step.assign_sub(0.5)
    assert v.numpy().dtype == tv.numpy().dtype and v.numpy() == tv.numpy()
