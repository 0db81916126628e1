"""Raw Write, Read and Gather compiled (kernels/cpu_raw_ops.cpp, backends/cpu_kernels.py).

Every program runs twice, on fresh arrays: with the compiled ops, and with raw_ops'
Python ops in their place. Both runs must give the same results, the same errors
(class and text) and the same final state of every slot; the compiled ops must really
have taken calls themselves (calls that never reached the Python op); and values are
checked against plain NumPy copies of what was written."""

import os
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpu_tensorarray as gta
from gpu_tensorarray import errors, raw_ops
from gpu_tensorarray.backends import cpu_kernels
from gpu_tensorarray.layouts import UniformLayout
from gpu_tensorarray.registry import Handle
from gpu_tensorarray.storage import ArrayStorage

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


class _Counted:
    """A function, counting its calls."""

    def __init__(self, function):
        self.function, self.calls = function, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.function(*args, **kwargs)


class _Taken:
    """How many calls of a compiled op its common case took: the calls, less those that
    reached the Python op."""

    def __init__(self, monkeypatch, op, python_op):
        self.op, self.python_op = _Counted(getattr(raw_ops, op)), _Counted(getattr(raw_ops, python_op))
        monkeypatch.setattr(raw_ops, op, self.op)
        monkeypatch.setattr(raw_ops, python_op, self.python_op)

    @property
    def taken(self):
        return self.op.calls - self.python_op.calls


def _is_compiled(function):
    return type(function).__name__ == "builtin_function_or_method"


@pytest.fixture
def compiled(monkeypatch):
    """raw_ops' compiled Write and Read, counted; skipped where they could not be built,
    except under CI=true (CI machines have g++ and the headers, and the bench figures
    rest on them)."""
    if not all(_is_compiled(op) for op in (raw_ops.TensorArrayWriteV3, raw_ops.TensorArrayReadV3,
                                           raw_ops.TensorArrayGatherV3)):
        why = cpu_kernels.raw_op_status()[1]
        if os.environ.get("CI"):
            pytest.fail(f"CI=true and no compiled raw ops: {why}")
        pytest.skip(f"no compiled raw ops here: {why}")
    with monkeypatch.context() as patch:
        yield (_Taken(patch, "TensorArrayWriteV3", "_write_op"), _Taken(patch, "TensorArrayReadV3", "_read_op"),
               _Taken(patch, "TensorArrayGatherV3", "_gather_op"))


def _python_only(monkeypatch):
    monkeypatch.setattr(raw_ops, "TensorArrayWriteV3", raw_ops._write_op)
    monkeypatch.setattr(raw_ops, "TensorArrayReadV3", raw_ops._read_op)
    monkeypatch.setattr(raw_ops, "TensorArrayGatherV3", raw_ops._gather_op)


# -- one program, run both ways ----------------------------------------------------------------
def _outcome(call, names):
    try:
        result = call()
    except errors.OpError as error:
        text = str(error)
        for number, name in enumerate(names):
            text = text.replace(name, f"<array {number}>")
        return ("error", type(error).__name__, text)
    value = gta.to_numpy(result)
    return ("value", type(result).__name__, value.dtype.str, value.shape, value.tobytes(),
            bool(getattr(result, "flags", None) is not None and result.flags.writeable))


def _state(handle):
    array = handle.array
    if array.closed:
        return "closed"
    slots = []
    for index in range(array.size):
        slot = array.slot_state(index)
        value = None if slot.value is None else gta.to_numpy(slot.value).tobytes()
        slots.append((slot.written, slot.read, slot.cleared, slot.has_value, slot.shape, value))
    return array.size, array.closed, str(array.element_shape), slots


def _run(program, config):
    """program's outcomes and the final states of its arrays."""
    handles, outcomes = [], []
    for attrs in config:
        handle, flow = raw_ops.TensorArrayV3(**attrs)
        handles.append((handle, flow))
    names = [handle.name for handle, _ in handles]
    for step in program:
        outcomes.append(_outcome(lambda: step(handles), names))
    return outcomes, [_state(handle) for handle, _ in handles]


def _both_ways(program, config, counted):
    with_compiled = _run(program, config)
    taken = sum(op.taken for op in counted)
    with pytest.MonkeyPatch.context() as patch:
        _python_only(patch)
        python = _run(program, config)
    assert with_compiled == python
    return taken, with_compiled[0]


# -- the steps -----------------------------------------------------------------------------------
DTYPES = ["float32", "int64", "float16", "bool", "complex64"]
SHAPES = [(), (3,), (2, 2)]


def _value(kind, dtype, shape, seed):
    good = np.array(np.arange(int(np.prod(shape))).reshape(shape) + seed, dtype)
    if kind == "good":
        return good
    if kind == "wrong dtype":
        return good.astype("float64" if dtype != "float64" else "float32")
    if kind == "wrong shape":
        return np.zeros(shape + (1,), dtype)
    if kind == "strided":
        return np.repeat(good[..., None], 2, axis=-1)[..., 0]
    if kind == "fortran":
        return np.asfortranarray(good)
    if kind == "list":
        return good.tolist()
    if kind == "subclass":
        return good.view(np.ma.MaskedArray)
    raise AssertionError(kind)


VALUE_KINDS = ["good"] * 8 + ["wrong dtype", "wrong shape", "strided", "fortran", "list", "subclass"]


def _index(kind, index):
    return {"int": index, "numpy": np.int64(index), "bool": bool(index % 2), "big": 2 ** 31 + index}[kind]


def _write(which, index, kind, index_kind, seed, dtype, shape):
    def step(handles):
        handle, flow = handles[which]
        return raw_ops.TensorArrayWriteV3(handle, _index(index_kind, index), _value(kind, dtype, shape, seed), flow)
    return step


def _read(which, index, index_kind, spelling, dtype):
    requested = {"name": dtype, "type": np.dtype(dtype).type, "dtype": np.dtype(dtype), "wrong": "int8"}[spelling]

    def step(handles):
        handle, flow = handles[which]
        return raw_ops.TensorArrayReadV3(handle, _index(index_kind, index), flow, requested)
    return step


def _write_back(which, source, index):
    """Write what slot ``source`` reads as, through a plain ndarray view of the storage."""
    def step(handles):
        handle, flow = handles[which]
        dtype = handle.array.dtype
        value = np.asarray(raw_ops.TensorArrayReadV3(handle, source, flow, dtype))
        return raw_ops.TensorArrayWriteV3(handle, index, value, flow)
    return step


def _gather(which, indices, kind, dtype):
    requested = dtype

    def step(handles):
        handle, flow = handles[which]
        vector = {"int64": np.array(indices, np.int64), "int32": np.array(indices, np.int32), "list": list(indices),
                  "strided": np.repeat(np.array(indices, np.int64), 2)[::2]}[kind]
        return raw_ops.TensorArrayGatherV3(handle, vector, flow, requested)
    return step


def _fill(which, seed, dtype, shape):
    """Write every unwritten slot (so that gathers find them all written)."""
    def step(handles):
        handle, flow = handles[which]
        array = handle.array
        for index in range(array.size):
            if not array.closed and not array.slot_state(index).written:
                flow = raw_ops.TensorArrayWriteV3(handle, index, _value("good", dtype, shape, seed + index), flow)
        return flow
    return step


def _other(which, op):
    def step(handles):
        handle, flow = handles[which]
        if op == "stack":
            return raw_ops.TensorArrayGatherV3(handle, range(handle.array.size), flow, handle.array.dtype)
        if op == "size":
            return raw_ops.TensorArraySizeV3(handle, flow)
        return raw_ops.TensorArrayCloseV3(handle)
    return step


@st.composite
def programs(draw):
    dtype, shape = draw(st.sampled_from(DTYPES)), draw(st.sampled_from(SHAPES))
    config = [dict(size=draw(st.one_of(st.integers(0, 6), st.integers(9, 12))), dtype=dtype,
                   element_shape=draw(st.sampled_from([list(shape), None])), dynamic_size=draw(st.booleans()),
                   clear_after_read=draw(st.booleans()))
              for _ in range(2)]
    steps = []
    for seed in range(draw(st.integers(1, 30))):
        which = draw(st.integers(0, 1))
        size = config[which]["size"]
        index = draw(st.one_of(st.integers(0, max(size - 1, 0)), st.integers(0, max(size - 1, 0)),
                               st.integers(-1, size + 1)))
        index_kind = draw(st.sampled_from(["int"] * 12 + ["numpy", "bool", "big"]))
        kind = draw(st.sampled_from(["write"] * 5 + ["read"] * 5 + ["gather"] * 3
                                    + ["fill", "write back", "stack", "size"]))
        if kind == "write":
            steps.append(_write(which, index, draw(st.sampled_from(VALUE_KINDS)), index_kind, seed, dtype, shape))
        elif kind == "read":
            spelling = draw(st.sampled_from(["name", "name", "type", "dtype", "wrong"]))
            steps.append(_read(which, index, index_kind, spelling, dtype))
        elif kind == "gather":
            within = st.integers(0, max(size - 1, 0))
            if draw(st.booleans()) and size >= 9:     # distinct: what a clearing array can gather
                indices = draw(st.lists(within, min_size=9, max_size=size, unique=True))
            else:
                indices = draw(st.lists(st.one_of(within, within, within, st.integers(-1, size + 1)), min_size=9,
                                        max_size=14))
            steps.append(_gather(which, indices, draw(st.sampled_from(["int64"] * 4 + ["int32", "list", "strided"])),
                                 dtype))
        elif kind == "fill":
            steps.append(_fill(which, seed, dtype, shape))
        elif kind == "write back":
            steps.append(_write_back(which, draw(st.integers(0, 4)), index))
        else:
            steps.append(_other(which, kind))
    if draw(st.booleans()):         # a close, late: the steps after it fail (as they should)
        steps.insert(draw(st.integers(len(steps) // 2, len(steps))), _other(draw(st.integers(0, 1)), "close"))
    return steps, config


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=programs())
def test_every_program_runs_alike_with_and_without_the_compiled_paths(program, compiled):
    with gta.device("cpu"):
        _both_ways(*program, compiled)


def _config(size, dtype="float32", shape=(4,), **attrs):
    return [dict(size=size, dtype=dtype, element_shape=list(shape), **attrs)]


@pytest.mark.parametrize("backend", ["numpy", "emulated"])
@pytest.mark.parametrize("dtype,shape", [("float32", (64,)), ("int64", ()), ("complex128", (2, 3)), ("bool", (5,))])
def test_the_common_case_is_compiled_and_stores_copies(backend, dtype, shape, compiled):
    """Writes after the first (which allocates the slab, in Python) and reads of
    written slots are taken by the compiled paths; what they store and return is what
    NumPy copies of the values say, and changing a value after writing it changes nothing."""
    count = 12
    written = [np.array(np.arange(int(np.prod(shape))).reshape(shape) * (k + 1), dtype) for k in range(count)]

    def program():
        steps = [_write_values(written)]
        steps += [_read(0, k, "int", "name", dtype) for k in range(count)]
        return steps

    with gta.device(backend):
        taken, outcomes = _both_ways(program(), _config(count, dtype, shape, clear_after_read=False),
                                     compiled)
    assert taken == (count - 1) + count
    for k, outcome in enumerate(outcomes[1:]):
        assert outcome[:4] == ("value", "ReadOnlyArray", written[k].dtype.str, shape)
        assert outcome[4] == np.array(np.arange(int(np.prod(shape))).reshape(shape) * (k + 1), dtype).tobytes()
        assert outcome[5] is False                           # read-only


def _write_values(values):
    def step(handles):
        handle, flow = handles[0]
        for index, value in enumerate(values):
            value = value.copy()
            flow = raw_ops.TensorArrayWriteV3(handle, index, value, flow)
            value[...] = 0                     # the caller's array is theirs: the stored value stays
        return flow
    return step


def test_a_dynamic_array_grows_within_its_capacity_compiled(compiled):
    """Writes past the size into room the slab already has (doubling) are compiled, and
    the size follows; writes past the capacity grow it in Python."""
    values = [np.full(4, k, np.float32) for k in range(40)]
    taken, outcomes = _both_ways([_write_values(values)], _config(0, dynamic_size=True), compiled)
    assert 30 <= taken < 40                    # the slab grew a handful of times, in Python
    assert outcomes[0][:4] == ("value", "ndarray", "<f4", ())          # the flow


def test_a_read_result_written_back_is_stored_correctly(compiled):
    """A plain ndarray view of the storage, written to another slot (and to its own
    slot's neighbour), through the compiled copy."""
    values = [np.full(4, k + 1, np.float32) for k in range(3)]
    program = [_write_values(values), _write_back(0, 0, 3), _write_back(0, 3, 4), _read(0, 4, "int", "name", "float32")]
    taken, outcomes = _both_ways(program, _config(5, clear_after_read=False), compiled)
    assert outcomes[-1][4] == np.full(4, 1, np.float32).tobytes()
    assert taken >= 4


@pytest.mark.parametrize("clear_after_read", [False, True])
@pytest.mark.parametrize("dtype,shape", [("float32", (16,)), ("int16", ()), ("complex64", (2, 3))])
def test_a_gather_is_compiled_and_gives_the_rows(dtype, shape, clear_after_read, compiled):
    """A gather of an index vector (repeats on a non-clearing array) from written slots is
    compiled: the rows np.take gives, in an array of the caller's own, the reads marked
    (a clearing array's slots read again fail, as in Python)."""
    slots, rng = 40, np.random.default_rng(3)
    values = [np.array(rng.integers(-50, 50, size=shape), dtype) for _ in range(slots)]
    indices = rng.permutation(slots)[:25] if clear_after_read else rng.integers(0, slots, size=60)
    program = [_write_values(values), _gather(0, indices.tolist(), "int64", dtype), _gather(0, indices.tolist(),
                                                                                             "int64", dtype)]
    taken, outcomes = _both_ways(program, _config(slots, dtype, shape, clear_after_read=clear_after_read), compiled)
    expected = np.stack(values)[indices]
    assert outcomes[1] == ("value", "ndarray", expected.dtype.str, expected.shape, expected.tobytes(), True)
    if clear_after_read:
        assert outcomes[2][0] == "error" and "twice because it was cleared" in outcomes[2][2]
    else:
        assert outcomes[2] == outcomes[1]
    assert taken == (slots - 1) + (1 if clear_after_read else 2)


def test_a_held_lock_sends_the_call_to_python(compiled):
    """While another op holds the array's lock, the compiled ops leave the call to the
    Python op (which would wait for the lock), having changed nothing."""
    handle, flow = raw_ops.TensorArrayV3(size=3, dtype="float32", element_shape=[2])
    flow = raw_ops.TensorArrayWriteV3(handle, 0, np.ones(2, np.float32), flow)
    write, read = compiled[0].op.function, compiled[1].op.function          # the compiled ops themselves
    before = _state(handle)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(raw_ops, "_write_op", lambda *args: "to python")
        patch.setattr(raw_ops, "_read_op", lambda *args: "to python")
        handle.array._lock.acquire()
        try:
            answers = (write(handle, 1, np.ones(2, np.float32), flow), read(handle, 0, flow, "float32"))
        finally:
            handle.array._lock.release()
    assert answers == ("to python", "to python")
    assert _state(handle) == before
    assert write(handle, 1, np.ones(2, np.float32), flow) is flow
    assert read(handle, 0, flow, "float32").shape == (2,)


def test_a_recorder_sends_the_call_to_python(compiled):
    """Under a GradientTape every write and read is recorded, so none is compiled (the
    same loop outside a tape is), and the gradient is each read's output gradient."""
    write, read, _ = compiled
    states = [np.full(2, t, np.float32) for t in range(3)]

    def forward():
        ta = gta.TensorArray("float32", size=3, element_shape=(2,))
        for t in range(3):
            ta = ta.write(t, states[t])
        return [ta.read(t) for t in range(3)]

    forward()
    assert (write.taken, read.taken) == (2, 3)
    with gta.GradientTape() as tape:
        reads = forward()
    assert (write.taken, read.taken) == (2, 3)
    gradients = tape.gradient(reads, states, output_gradients=[np.full(2, t + 1.0, np.float32) for t in range(3)])
    for t, gradient in enumerate(gradients):
        np.testing.assert_array_equal(gta.to_numpy(gradient), np.full(2, t + 1.0, np.float32))


def test_threads_writing_and_growing_one_array_lose_nothing(compiled):
    """Four threads write their own slots of one dynamic array (its growth runs in
    Python, under the lock, while others take the compiled path) and read them back."""
    handle, flow = raw_ops.TensorArrayV3(size=0, dtype="int64", element_shape=[3], dynamic_size=True,
                                         clear_after_read=False)
    per_thread, threads, failures = 2000, 4, []

    def work(first):
        try:
            for index in range(first, per_thread * threads, threads):
                raw_ops.TensorArrayWriteV3(handle, index, np.full(3, index, np.int64), flow)
            for index in range(first, per_thread * threads, threads):
                value = raw_ops.TensorArrayReadV3(handle, index, flow, "int64")
                if not np.array_equal(value, np.full(3, index)):
                    failures.append((index, np.array(value)))
        except Exception as error:          # reported below, not lost in the thread
            failures.append(error)

    workers = [threading.Thread(target=work, args=(first,)) for first in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert failures == []
    stacked = gta.to_numpy(raw_ops.TensorArrayGatherV3(handle, range(per_thread * threads), flow, "int64"))
    np.testing.assert_array_equal(stacked, np.repeat(np.arange(per_thread * threads)[:, None], 3, axis=1))
    assert compiled[0].taken > 0


def _rebuilt_raw_ops(storage_type=ArrayStorage):
    """compiled_raw_ops as raw_ops.py calls it, after forgetting what was loaded."""
    cpu_kernels.reset()
    return cpu_kernels.compiled_raw_ops(vars(raw_ops), Handle, storage_type, UniformLayout)


def test_without_the_compiled_code_the_ops_are_python(monkeypatch):
    monkeypatch.setenv(cpu_kernels.DISABLE_ENV, "0")
    try:
        assert _rebuilt_raw_ops() is None
        assert cpu_kernels.raw_op_status() == (False, f"{cpu_kernels.DISABLE_ENV}=0")
    finally:
        monkeypatch.undo()
        _rebuilt_raw_ops()


def test_state_the_compiled_code_cannot_read_turns_it_off():
    """Classes whose fields are not slots (a mismatch between storage.py and the C
    source) leave the ops in Python, with the reason, and the ops already made work on."""
    if not _is_compiled(raw_ops.TensorArrayWriteV3):
        pytest.skip(f"no compiled raw ops here: {cpu_kernels.raw_op_status()[1]}")
    try:
        assert _rebuilt_raw_ops(type("NoSlots", (), {"dtype": None})) is None
        usable, why = cpu_kernels.raw_op_status()
        assert not usable and "NoSlots.dtype is not a slot of objects" in why
        handle, flow = raw_ops.TensorArrayV3(size=2, dtype="float32", element_shape=[2])
        for index in range(2):
            flow = raw_ops.TensorArrayWriteV3(handle, index, np.full(2, index, np.float32), flow)
        np.testing.assert_array_equal(raw_ops.TensorArrayReadV3(handle, 1, flow, "float32"), [1, 1])
    finally:
        assert _rebuilt_raw_ops() is not None
    assert cpu_kernels.raw_op_status()[0]


@pytest.mark.parametrize("dtype", ["bool", "float32"])
def test_no_array_grows_past_an_int32_size(dtype):
    """A dynamic array written at index 2**31 - 1 would need 2**31 slots, which
    TensorArraySizeV3's int32 cannot count (TensorFlow overflows there): the write
    fails with the rule's text and changes nothing (found by the program test above)."""
    handle, flow = raw_ops.TensorArrayV3(size=0, dtype=dtype, element_shape=[], dynamic_size=True)
    with pytest.raises(errors.InvalidArgumentError, match=r"Could not grow to 2147483648 slots: a TensorArray's "
                                                          r"size is an int32, at most 2147483647"):
        raw_ops.TensorArrayWriteV3(handle, 2**31 - 1, np.array(1, dtype), flow)
    assert gta.to_numpy(raw_ops.TensorArraySizeV3(handle, flow)) == 0
