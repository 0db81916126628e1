"""TensorFlow 2 as the oracle for TensorArray mode "tf2" (skipped without TensorFlow).

Random op sequences (tf2_cases.random_case) run through the library and through
tf.TensorArray built in a TensorFlow 2 graph, as inside a tf.function: the same
TensorList-backed implementation (_GraphTensorArrayV2, asserted) and kernels. Each
op's output (or flow) is fetched in order, so the first failing op is known; the
sequence then continues without it, as ours changed nothing when it failed (a
graph, unlike one tf.function call, says which op failed without a bisection). Ops where
TensorFlow crashes the process or contradicts itself (tf2_cases.deviates_from_tf)
are not sent to TensorFlow; they must fail here. Error classes: TensorFlow's
Python-side ValueError matches our InvalidArgumentError (a ValueError); kernel
errors match by name. Messages are not compared.

Gradients: tf.GradientTape around a tf.function of writes, scatters, unstacks and
reads/gathers/stacks, against gpu_tensorarray.GradientTape. Scatter and gather
indices are distinct here: with a repeated index TensorFlow's gradients are wrong
(a scatter gives the overwritten row a gradient, a gather keeps one row's gradient
instead of the sum); test_documented_tf_gradient_errors shows both, and
tests/classes/test_tf2_mode.py checks ours against a plain reference.

TF2_ORACLE_CASES=<n> sets the number of sequences (default 120 of 10 ops).
Run with TensorFlow installed, e.g. in a throwaway venv with --system-site-packages:
``pip install tensorflow-cpu`` then ``python -m pytest tests/tf_parity/test_tf2_oracle.py``.
"""

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
tf = pytest.importorskip("tensorflow")

import gpu_tensorarray as gta  # noqa: E402
from tf2_cases import ListModel, deviates_from_tf, random_case, run_library, same, unnamed  # noqa: E402

CASES = int(os.environ.get("TF2_ORACLE_CASES", "120"))
OPS = 10


def _tf_error_name(error):
    if isinstance(error, tf.errors.OpError):
        return type(error).__name__
    if isinstance(error, (ValueError, TypeError)):
        return "InvalidArgumentError"       # Python-side checks: ours is InvalidArgumentError, a ValueError
    raise error


def _graph_results(params, ops):
    """Build ``ops`` in one graph (as a tf.function body is built: the TensorArray is
    TensorFlow 2's TensorList-backed _GraphTensorArrayV2) and run each op's output in
    order. Returns (results so far, position of a kernel error or None): a Python-side
    error while building is that op's result and the op is left out, as ours changed
    nothing; a kernel error needs a rebuild without the op (the caller's loop)."""
    dtype = tf.as_dtype(params["dtype"])
    graph = tf.Graph()
    fetches = []
    with graph.as_default():
        ta = tf.TensorArray(dtype, size=params["size"], dynamic_size=params["dynamic_size"],
                            element_shape=params["element_shape"], infer_shape=params["infer_shape"])
        assert type(ta._implementation).__name__ == "_GraphTensorArrayV2"
        for op in ops:
            kind = op[0]
            try:
                if kind == "write":
                    ta = ta.write(op[1], tf.constant(op[2]))
                    fetches.append(("flow", tf.raw_ops.TensorListLength(input_handle=ta.flow)))
                elif kind == "scatter":
                    ta = ta.scatter(tf.constant(op[1], tf.int32), tf.constant(op[2]))
                    fetches.append(("flow", tf.raw_ops.TensorListLength(input_handle=ta.flow)))
                elif kind == "unstack":
                    ta = ta.unstack(tf.constant(op[1]))
                    fetches.append(("flow", tf.raw_ops.TensorListLength(input_handle=ta.flow)))
                elif kind == "split":
                    ta = ta.split(tf.constant(op[1]), tf.constant(op[2], tf.int32))
                    fetches.append(("flow", tf.raw_ops.TensorListLength(input_handle=ta.flow)))
                elif kind == "read":
                    fetches.append(("value", ta.read(op[1])))
                elif kind == "gather":
                    fetches.append(("value", ta.gather(tf.constant(op[1], tf.int32))))
                elif kind == "stack":
                    fetches.append(("value", ta.stack()))
                elif kind == "concat":
                    fetches.append(("value", ta.concat()))
                else:
                    fetches.append(("value", ta.size()))
            except Exception as error:      # noqa: BLE001: classified, anything else re-raised
                fetches.append(("error", _tf_error_name(error)))
    results = []
    with tf.compat.v1.Session(graph=graph) as session:
        for position, (kind, fetch) in enumerate(fetches):
            if kind == "error":
                results.append(("error", fetch))
                continue
            try:
                value = session.run(fetch)
            except tf.errors.OpError as error:
                results.append(("error", type(error).__name__))
                return results, position
            results.append(("value", value if kind == "value" else None))
    return results, None


def expected_results(params, ops):
    """TensorFlow's result for each op; a failed op is left out of the ops after it."""
    alive = list(range(len(ops)))
    results = {}
    while True:
        seq_results, failed = _graph_results(params, [ops[i] for i in alive])
        for position, result in zip(alive, seq_results):
            results[position] = result
        if failed is None:
            break
        alive = alive[:failed] + alive[failed + 1:]
    return [results[i] for i in range(len(ops))]


@pytest.mark.parametrize("seed", range(CASES))
def test_random_sequences_match_tensorflow(seed):
    params, ops = random_case(np.random.default_rng(1000 + seed), OPS)
    ours = run_library(params, ops)
    model = ListModel(params)
    kept = []
    for i, op in enumerate(ops):
        deviation = deviates_from_tf(params, model, op)
        model_result = model.run([op])
        assert same(model_result, [ours[i]]), (params, ops[:i + 1], ours[i])
        if deviation == "drop":
            assert ours[i] == ("error", "InvalidArgumentError"), (params, op, ours[i])
        elif deviation == "stop":
            break
        else:
            kept.append(i)
    expected = expected_results(params, [ops[i] for i in kept])
    actual = [ours[i] for i in kept]
    if not same(expected, actual):
        lines = [f"{params}"]
        for i, e, a in zip(kept, expected, actual):
            mark = "" if same([e], [a]) else "   <-- differs"
            lines.append(f"  {ops[i][0]} {ops[i][1:] if ops[i][0] != 'split' else ops[i][2]}: "
                         f"tf {e[0]} {e[1] if e[0] == 'error' else (None if e[1] is None else e[1].tolist())} | "
                         f"ours {a[1] if a[0] == 'error' else (None if a[1] is None else a[1].tolist())}{mark}")
        pytest.fail("\n".join(lines))


# -- gradients ---------------------------------------------------------------------------------

def _gradient_case(rng):
    """(size, ops, sources): ops over a float64 array of fixed size with element shape (2,)."""
    size = int(rng.integers(2, 5))
    ops, sources = [], []

    def source(shape):
        sources.append(rng.integers(-3, 4, size=shape).astype(np.float64))
        return len(sources) - 1

    for _ in range(int(rng.integers(3, 9))):
        kind = ["write", "write", "write", "scatter", "unstack", "read", "read", "gather", "stack"][
            int(rng.integers(0, 9))]
        if kind == "write":
            ops.append(("write", int(rng.integers(0, size)), source((2,))))
        elif kind == "scatter":
            indices = rng.permutation(size)[:int(rng.integers(1, size + 1))].tolist()
            ops.append(("scatter", indices, source((len(indices), 2))))
        elif kind == "unstack":
            ops.append(("unstack", source((size, 2))))
        elif kind == "read":
            ops.append(("read", int(rng.integers(0, size)), rng.integers(-2, 3, size=(2,)).astype(np.float64)))
        elif kind == "gather":
            # distinct: TensorFlow's gather gradient scatters, so a repeated index keeps one row's gradient
            indices = rng.permutation(size)[:int(rng.integers(1, size + 1))].tolist()
            ops.append(("gather", indices, rng.integers(-2, 3, size=(len(indices), 2)).astype(np.float64)))
        else:
            ops.append(("stack", None, rng.integers(-2, 3, size=(size, 2)).astype(np.float64)))
    return size, ops, sources


def _tf_gradients(size, ops, sources):
    xs = [tf.constant(x) for x in sources]

    @tf.function(autograph=False)
    def loss(*xs):
        ta = tf.TensorArray(tf.float64, size=size, element_shape=[2])
        total = tf.constant(0.0, tf.float64)
        for op in ops:
            kind = op[0]
            if kind == "write":
                ta = ta.write(op[1], xs[op[2]])
            elif kind == "scatter":
                ta = ta.scatter(tf.constant(op[1], tf.int32), xs[op[2]])
            elif kind == "unstack":
                ta = ta.unstack(xs[op[1]])
            elif kind == "read":
                total += tf.reduce_sum(ta.read(op[1]) * op[2])
            elif kind == "gather":
                total += tf.reduce_sum(ta.gather(tf.constant(op[1], tf.int32)) * op[2])
            else:
                total += tf.reduce_sum(ta.stack() * op[2])
        return total

    with tf.GradientTape() as tape:
        for x in xs:
            tape.watch(x)
        y = loss(*xs)
    grads = tape.gradient(y, xs)
    return [np.zeros_like(x) if g is None else g.numpy() for x, g in zip(sources, grads)]


def library_gradients(size, ops, sources):
    """d(sum of weighted outputs)/d(sources) through gpu_tensorarray.GradientTape."""
    with gta.device("cpu"):
        targets, weights = [], []
        with gta.GradientTape() as tape:
            ta = gta.TensorArray("float64", size=size, element_shape=[2], mode="tf2")
            for op in ops:
                kind = op[0]
                if kind == "write":
                    ta = ta.write(op[1], sources[op[2]])
                elif kind == "scatter":
                    ta = ta.scatter(op[1], sources[op[2]])
                elif kind == "unstack":
                    ta = ta.unstack(sources[op[1]])
                else:
                    out = {"read": lambda: ta.read(op[1]), "gather": lambda: ta.gather(op[1]),
                           "stack": lambda: ta.stack()}[kind]()
                    targets.append(out)
                    weights.append(op[2])
        if not targets:
            return [np.zeros_like(x) for x in sources]
        # TF differentiates through a tf.function call, where every input is connected: zeros.
        return tape.gradient(targets, sources, output_gradients=weights, unconnected_gradients="zero")


@pytest.mark.parametrize("seed", range(max(1, CASES // 3)))
def test_gradients_match_tensorflow(seed):
    size, ops, sources = _gradient_case(np.random.default_rng(5000 + seed))
    expected = _tf_gradients(size, ops, sources)
    actual = library_gradients(size, ops, sources)
    for position, (e, a) in enumerate(zip(expected, actual)):
        np.testing.assert_array_equal(gta.to_numpy(a), e, err_msg=f"source {position}: {ops}")


def test_watch_accessed_variables_false_against_tensorflow():
    """With watch_accessed_variables=False TensorFlow records an op once an input is watched or
    recorded: a value read that depends on a watched one is a source too, whatever else is
    asked for (ours gave it None unless the watched value was a source in the same call), and
    values that depend on no watched value are not."""
    x0, z0 = np.array([1.0, 2.0]), np.array([3.0, 4.0])

    def program(module, x, z, tape):
        tape.watch(x)
        ta = module.TensorArray(module.float64, size=3).write(0, x).write(1, z)
        r = ta.read(0)
        ta = ta.write(2, r)
        apart = module.TensorArray(module.float64, size=1).write(0, z).read(0)
        return {"r": r, "z": z, "x": x, "apart": apart}, [ta.stack(), apart]

    asked = [["r"], ["x", "r"], ["z"], ["apart"], ["r", "apart", "x"]]     # "apart" is a target

    def gradients(module, x, z):
        with module.GradientTape(persistent=True, watch_accessed_variables=False) as tape:
            values, targets = program(module, x, z, tape)
        return [tape.gradient(targets, [values[name] for name in names]) for names in asked]

    def plain(results):
        return [[None if g is None else np.asarray(g).tolist() for g in call] for call in results]

    import gpu_tensorarray.tf2 as ours
    expected = plain(tf.function(lambda x, z: gradients(tf, x, z))(tf.constant(x0), tf.constant(z0)))
    assert expected[0] == [[1.0, 1.0]] and expected[2] == [None]
    assert plain(gradients(ours, x0, z0)) == expected


def test_documented_tf_gradient_errors():
    """docs/guide.md's two TensorFlow 2 gradient errors with repeated indices, still there."""
    x0, x1 = tf.constant([1.0, 2.0]), tf.constant([3.0, 4.0])

    @tf.function
    def scatter_twice(x0, x1):
        return tf.TensorArray(tf.float32, size=2).scatter([0, 0], tf.stack([x0, x1])).read(0)

    with tf.GradientTape() as tape:
        tape.watch([x0, x1])
        y = scatter_twice(x0, x1)
    g0, g1 = tape.gradient(y, [x0, x1])
    assert g0.numpy().tolist() == [1.0, 1.0]        # x0 was overwritten: the right gradient is 0
    assert g1.numpy().tolist() == [1.0, 1.0]

    @tf.function
    def gather_twice(x0):
        return tf.TensorArray(tf.float32, size=1).write(0, x0).gather([0, 0])

    with tf.GradientTape() as tape:
        tape.watch(x0)
        y = gather_twice(x0)
    assert tape.gradient(y, x0).numpy().tolist() == [1.0, 1.0]     # read twice: the right gradient is 2

    rows, ours_x0 = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1.0, 2.0])
    with gta.GradientTape(persistent=True) as tape:
        y = gta.TensorArray("float64", size=2, mode="tf2").scatter([0, 0], rows).read(0)
        z = gta.TensorArray("float64", size=1, mode="tf2").write(0, ours_x0).gather([0, 0])
    assert tape.gradient(y, rows).tolist() == [[0.0, 0.0], [1.0, 1.0]]     # ours: the rules
    assert tape.gradient(z, ours_x0).tolist() == [2.0, 2.0]


def test_documented_crashes_and_contradictions_are_still_there():
    """docs/guide.md's list of TensorFlow 2 inconsistencies, checked on the TensorFlow installed
    (the crashes run in a subprocess: they abort it)."""
    import subprocess
    import sys

    def crashes(snippet):
        code = ("import os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\nimport tensorflow as tf\n"
                "@tf.function\ndef f():\n" + "\n".join("    " + line for line in snippet.splitlines()) +
                "\ntry:\n    f()\nexcept Exception:\n    pass\n")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300)
        return done.returncode < 0 or done.returncode > 1

    assert crashes("ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)\n"
                   "return ta.write(-1, [1.0]).stack()")
    assert crashes("ta = tf.TensorArray(tf.float32, size=2)\n"
                   "return ta.scatter([-1], [[1.0]]).read(0)")

    @tf.function
    def scatter_past_size():
        ta = tf.TensorArray(tf.float32, size=2).scatter([3], [[1.0]])
        return ta.size(), ta.read(3)

    size, value = scatter_past_size()
    assert int(size) == 2 and value.numpy().tolist() == [1.0]      # grew silently, size() says 2

    @tf.function
    def unstack_into_fixed():
        ta = tf.TensorArray(tf.float32, size=2).unstack([[1.0], [2.0], [3.0]])
        return ta.size(), ta.read(2)

    size, value = unstack_into_fixed()
    assert int(size) == 2 and value.numpy().tolist() == [3.0]      # 3 rows, size() says 2

    @tf.function
    def split_into_fixed():
        ta = tf.TensorArray(tf.float32, size=2).split([1.0, 2.0, 3.0], [1, 1, 1])
        return ta.size(), ta.concat()

    size, value = split_into_fixed()
    assert int(size) == 2 and value.numpy().tolist() == [1.0, 2.0, 3.0]

    @tf.function
    def dynamic_scatter_past_end():
        ta = tf.TensorArray(tf.float32, size=1, dynamic_size=True, element_shape=[2])
        return ta.scatter([3, 1], [[1.0, 2.0], [3.0, 4.0]]).stack()

    rows = dynamic_scatter_past_end().numpy()
    assert rows.shape == (4, 2) and rows[2].tolist() == [1.0, 2.0]      # slot 3's row landed in slot 2

    @tf.function
    def stack_unequal_pieces():
        ta = tf.TensorArray(tf.float32, size=2, element_shape=[2], infer_shape=False)
        return ta.split([4.0, 5.0, 6.0], [1, 2]).stack()

    assert stack_unequal_pieces().shape == (2, 2)                       # no error: a (1,) piece read as (2,)

    @tf.function
    def gather_past_the_end_of_nothing():
        return tf.TensorArray(tf.float32, size=2, element_shape=[0]).gather([0, 5])

    assert gather_past_the_end_of_nothing().shape == (2, 0)          # slot 5 of 2: no error
    with pytest.raises(gta.errors.InvalidArgumentError, match="Index 5 out o range"):
        gta.TensorArray("float32", size=2, element_shape=[0], mode="tf2").gather([0, 5])

    @tf.function
    def split_no_lengths():
        return tf.TensorArray(tf.float32, size=0, dynamic_size=True).split(tf.zeros([0]), [0][:0]).size()

    with pytest.raises(ValueError):
        split_no_lengths()

    @tf.function
    def old_contents():
        ta = tf.TensorArray(tf.float32, size=1)
        ta.write(0, [1.0])
        return ta.stack()

    assert old_contents().numpy().tolist() == [[0.0]]
    assert old_contents.python_function().numpy().tolist() == [[1.0]]   # eager

    @tf.function
    def stack_after():
        return tf.TensorArray(tf.float32, size=2).unstack([[1.0], [2.0], [3.0]]).stack()

    with pytest.raises(tf.errors.InvalidArgumentError):
        stack_after()

    def eager_fibonacci():
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True).unstack([0.0, 1.0])
        for i in range(2, 4):
            ta = ta.write(i, ta.read(i - 1) + ta.read(i - 2))
        return ta.stack()

    with pytest.raises(tf.errors.InvalidArgumentError, match="twice"):
        eager_fibonacci()                                           # eager honours clear_after_read
    assert tf.function(eager_fibonacci)().numpy().tolist() == [0.0, 1.0, 1.0, 2.0]

    def one_write_unrecorded(x, z):
        with tf.GradientTape() as tape:
            tape.watch([x, z])
            ta = tf.TensorArray(tf.float64, size=2).write(0, x)
            with tape.stop_recording():
                ta = ta.write(1, z)
            rows = ta.stack()
        return tape.gradient(rows, [x, z])

    x, z = tf.constant([1.0, 2.0], tf.float64), tf.constant([3.0, 4.0], tf.float64)
    assert tf.function(one_write_unrecorded)(x, z) == [None, None]         # the list's chain is cut
    assert [g.numpy().tolist() for g in one_write_unrecorded(x, z)] == [[1.0, 1.0]] * 2    # eager records it
    x, z = x.numpy(), z.numpy()
    with gta.GradientTape() as tape:
        ta = gta.TensorArray("float64", size=2, mode="tf2").write(0, x)
        with tape.stop_recording():
            ta = ta.write(1, z)
        rows = ta.stack()
    gx, gz = tape.gradient(rows, [x, z])
    assert gx.tolist() == [1.0, 1.0] and gz is None                 # ours: only the unrecorded op's value


@pytest.mark.parametrize("case", [
    (dict(size=3, element_shape=[None]), lambda ta: ta.stack()),
    (dict(size=0, dynamic_size=True, element_shape=[None]), lambda ta: ta.gather([0])),
    (dict(size=1, element_shape=[2]), lambda ta: ta.gather([1])),
    (dict(size=2, element_shape=[None]), lambda ta: ta.gather([0, 1])),
    (dict(size=2), lambda ta: ta.write(0, [1.0, 1.0, 1.0]).gather([1, 5])),     # the list's own shape decides
    (dict(size=5, infer_shape=False), lambda ta: ta.gather(np.zeros(0, np.int32))),          # no indices
    (dict(size=5, element_shape=[None, 3]), lambda ta: ta.gather(np.zeros(0, np.int32))),
])
def test_list_kernel_error_texts_are_tensorflows(case):
    """The TensorList kernels' own texts, as tf.function gives them (TensorFlow's typo included)."""
    arguments, op = case
    graph = tf.Graph()
    with graph.as_default():
        fetch = op(tf.TensorArray(tf.float32, **arguments))
    with tf.compat.v1.Session(graph=graph) as session, pytest.raises(tf.errors.InvalidArgumentError) as expected:
        session.run(fetch)
    text = expected.value.message.split("\n\t [[")[0].rsplit("\n", 1)[-1]     # the kernel's line, before the node
    with pytest.raises(gta.errors.InvalidArgumentError) as raised:
        op(gta.TensorArray("float32", mode="tf2", **arguments))
    assert unnamed(str(raised.value)) == \
        f"TensorArray NAME: {text} (TensorArray.{'stack' if 'stack' in text else 'gather'}, mode 'tf2')"

