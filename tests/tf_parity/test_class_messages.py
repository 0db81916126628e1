"""The class's messages against TensorFlow's own class (TF1 graph mode, _GraphTensorArray),
where the class's op is a raw op underneath: the text TensorFlow gives comes first."""

import functools
import json
import subprocess
import sys

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import errors

pytest.importorskip("tensorflow")

# TF1 control flow is a process-wide switch: the TensorFlow side runs in its own process.
_TF1_UNSTACK = """
import json, os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf
tf.compat.v1.disable_control_flow_v2()
graph = tf.Graph()
with graph.as_default():
    ta = tf.TensorArray(tf.float32, size={size})
    assert type(ta._implementation).__name__ == "_GraphTensorArray"
    flow = ta.unstack(np.zeros(({rows}, 2), np.float32)).flow
    with tf.compat.v1.Session(graph=graph) as session:
        try:
            session.run(flow)
            print(json.dumps(None))
        except tf.errors.OpError as error:
            lines = error.message.splitlines()     # the kernel's text is the line above "[[{{node ...}}]]"
            text = next(line for line, after in zip(lines, lines[1:]) if after.strip().startswith("[["))
            print(json.dumps([type(error).__name__, text]))
"""


@functools.lru_cache(maxsize=None)
def _tensorflow_unstack_error(size, rows):
    done = subprocess.run([sys.executable, "-c", _TF1_UNSTACK.format(size=size, rows=rows)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("size, rows", [(4, 5), (2, 7)])
def test_unstack_past_a_fixed_size_gives_tensorflows_text(backend, size, rows):
    tf_class, tf_text = _tensorflow_unstack_error(size, rows)
    assert (tf_class, tf_text) == ("InvalidArgumentError", f"Max scatter index must be < array size ({rows - 1} vs. {size})")
    ta = gta.TensorArray("float32", size=size)
    with pytest.raises(errors.InvalidArgumentError) as raised:
        ta.unstack(np.zeros((rows, 2), np.float32))
    assert type(raised.value).__name__ == tf_class
    assert str(raised.value).startswith(tf_text)


_TF1_SPLIT = """
import json, os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, tensorflow as tf
tf.compat.v1.disable_control_flow_v2()
graph = tf.Graph()
with graph.as_default():
    try:
        ta = tf.TensorArray(tf.float32, size={size}, element_shape={element_shape})
        if {first} is not None:
            ta = ta.write(0, np.ones({first}, np.float32))
        flow = ta.split(np.ones({value}, np.float32), {lengths}).flow
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(flow)
        print(json.dumps(None))
    except (tf.errors.OpError, ValueError) as error:
        text = getattr(error, "message", str(error))
        lines = text.splitlines()
        after = [line for line, below in zip(lines, lines[1:]) if below.strip().startswith("[[")]
        print(json.dumps([type(error).__name__, (after or lines)[0]]))
"""

# (size, element_shape, a first write's shape or None, the value's shape, lengths): unequal lengths
# go to the op, whose checks (the number of pieces, their sum) come before any piece's shape.
_SPLITS = [(3, [2], None, (4, 2), [1, 3]), (3, None, (2,), (4, 2), [1, 2]), (2, [2], None, (4, 2), [1, 2])]


@functools.lru_cache(maxsize=None)
def _tensorflow_split_error(size, element_shape, first, value, lengths):
    script = _TF1_SPLIT.format(size=size, element_shape=element_shape, first=first, value=value, lengths=lengths)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("case", _SPLITS, ids=str)
def test_split_checks_come_in_tensorflows_order(backend, case):
    size, element_shape, first, value, lengths = case
    tf_class, tf_text = _tensorflow_split_error(size, None if element_shape is None else tuple(element_shape),
                                                first, value, tuple(lengths))
    ta = gta.TensorArray("float32", size=size, element_shape=element_shape)
    if first is not None:
        ta = ta.write(0, np.ones(first, np.float32))
    with pytest.raises(errors.OpError) as raised:
        ta.split(np.ones(value, np.float32), lengths)
    assert type(raised.value).__name__ == tf_class
    assert str(raised.value).startswith(tf_text.rstrip(".")), (str(raised.value), tf_text)
