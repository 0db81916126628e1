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
