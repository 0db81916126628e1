"""What the kernel path guards on its own: atomics an architecture lacks fall back
to the deterministic kernel, and the row primitives refuse indices outside the
array (on a GPU such a launch would write outside it) before launching anything.
Run on the emulated backend (the GPU's launch code on the CPU), no GPU needed."""

import copy

import numpy as np
import pytest

from gpu_tensorarray.backends import kernel_sources
from gpu_tensorarray.errors import InternalError
from gpu_tensorarray.testing import load_backend

F16, F32, F64, C64, C128 = (np.dtype(name) for name in ("float16", "float32", "float64", "complex64", "complex128"))


@pytest.mark.parametrize("arch, lacking", [              # the tables are keyed by dtype name
    (50, {"float16", "float64", "complex128", "bfloat16"}),   # Maxwell: float atomics only
    (53, {"float16", "float64", "complex128", "bfloat16"}),
    (60, {"float16", "bfloat16"}), ("61", {"float16", "bfloat16"}),  # Pascal: double, not half
    (70, {"bfloat16"}), ("75", {"bfloat16"}),             # Volta, Turing: half, not bfloat16
    (80, set()), ("90", set()), (120, set()),              # Ampere and later: every one
])
def test_atomic_dtypes_by_architecture(arch, lacking):
    assert kernel_sources.atomic_dtypes(arch) == kernel_sources.ATOMIC_DTYPES - lacking
    assert {"float32", "complex64", "int64"} <= kernel_sources.atomic_dtypes(arch)


class _Recorder:
    """A compiled module that remembers which kernels it launched."""

    def __init__(self, module):
        self.module, self.launched = module, []

    def run(self, kernel, dtype, blocks, threads, args):
        self.launched.append((kernel, np.dtype(dtype)))
        self.module.run(kernel, dtype, blocks, threads, args)


def _emulated_as(arch=None):
    backend = copy.copy(load_backend("emulated"))       # the shared instance stays as it is
    if arch is not None:
        backend.atomic_dtypes = kernel_sources.atomic_dtypes(arch)
    backend._module = _Recorder(backend._module)
    return backend


@pytest.mark.parametrize("dtype, kernel", [(F16, "add_rows_deterministic"), (F64, "add_rows_atomic"),
                                           (C128, "add_rows_atomic"), (F32, "add_rows_atomic")], ids=str)
def test_atomic_mode_on_a_pascal_gpu_adds_half_deterministically(dtype, kernel):
    backend = _emulated_as(61)
    rng = np.random.default_rng(0)
    indices = rng.integers(0, 5, 64)
    rows = rng.standard_normal((64, 3)).astype(dtype)
    dst = np.zeros((5, 3), dtype)
    backend.add_rows(dst, indices, rows, "atomic")
    assert backend._module.launched == [(kernel, dtype)]
    expected = np.zeros((5, 3), dtype)
    np.add.at(expected, indices, rows)
    if kernel == "add_rows_deterministic":
        assert dst.tobytes() == expected.tobytes()      # the sequential sum, bitwise
    else:
        np.testing.assert_allclose(dst, expected, rtol=1e-5)


# -- host-side index checks --------------------------------------------------------------------
BAD = {"negative": [0, -1, 2], "one past the end": [0, 4, 1], "far past the end": [2**40]}


def _call(backend, primitive, dst, indices, mode=None):
    rows = np.ones((len(indices), 3), dst.dtype)
    if primitive == "take_rows":
        return backend.take_rows(dst, indices)
    if primitive == "put_rows":
        return backend.put_rows(dst, indices, rows)
    return backend.add_rows(dst, indices, rows, mode)


@pytest.mark.parametrize("bad", BAD, ids=str)
@pytest.mark.parametrize("primitive, mode", [("take_rows", None), ("put_rows", None),
                                             ("add_rows", "deterministic"), ("add_rows", "atomic")])
def test_primitives_refuse_indices_outside_the_array(primitive, mode, bad):
    backend = _emulated_as()
    dst = np.arange(12, dtype=np.float32).reshape(4, 3)
    before = dst.copy()
    indices = np.array(BAD[bad], np.int64)
    offender = min(BAD[bad]) if min(BAD[bad]) < 0 else max(BAD[bad])
    with pytest.raises(InternalError, match=f"row index {offender} is outside an array of 4 rows"):
        _call(backend, primitive, dst, indices, mode)
    assert backend._module.launched == []                # nothing reached a kernel
    assert dst.tobytes() == before.tobytes()


@pytest.mark.parametrize("primitive, mode", [("take_rows", None), ("put_rows", None),
                                             ("add_rows", "deterministic"), ("add_rows", "atomic")])
def test_primitives_accept_the_first_and_last_rows(primitive, mode):
    backend = _emulated_as()
    dst = np.zeros((4, 3), np.float32)
    _call(backend, primitive, dst, np.array([3, 0], np.int64), mode)
    _call(backend, primitive, dst, np.array([3], np.int64), mode)
    assert len(backend._module.launched) == 2


@pytest.mark.parametrize("primitive, mode", [("put_rows", None), ("add_rows", "deterministic"),
                                             ("add_rows", "atomic")])
def test_primitives_refuse_fewer_rows_than_indices(primitive, mode):
    backend = _emulated_as()
    dst = np.zeros((4, 3), np.float32)
    rows = np.ones((1, 3), np.float32)                   # numpy would broadcast; the kernel would overrun
    with pytest.raises(InternalError, match=r"3 indices of rows of 3 elements, but the rows have shape \[1, 3\]"):
        if primitive == "put_rows":
            backend.put_rows(dst, np.array([0, 1, 2], np.int64), rows)
        else:
            backend.add_rows(dst, np.array([0, 1, 1], np.int64), rows, mode)
    assert backend._module.launched == [] and not dst.any()


@pytest.mark.parametrize("primitive, mode", [("take_rows", None), ("put_rows", None),
                                             ("add_rows", "deterministic"), ("add_rows", "atomic")])
def test_primitives_refuse_rows_of_another_size_than_the_arrays(primitive, mode):
    # The kernels index the array with the rows' size: rows of 6 elements into an array of
    # rows of 3 would reach past its last row (its memory here is the head of a larger buffer).
    backend = _emulated_as()
    buffer = np.zeros(64, np.float32)
    dst = buffer[:12].reshape(4, 3)
    indices = np.array([3], np.int64)
    with pytest.raises(InternalError, match=r"rows of 6 elements, but the array's rows hold 3 \(shape \[4, 3\]\)"):
        if primitive == "take_rows":
            backend.prepare_take_rows(indices, (6,), dst.dtype)(dst)
        elif primitive == "put_rows":
            backend.put_rows(dst, indices, np.ones((1, 6), np.float32))
        else:
            backend.add_rows(dst, indices, np.ones((1, 6), np.float32), mode)
    assert backend._module.launched == [] and not buffer.any()


def test_a_scatter_with_repeats_into_empty_slots_puts_each_row_once(monkeypatch):
    # put_rows' threads write distinct rows (kernels/put_rows.cu): the first arrivals' identity
    # fill of a gradient array names each empty slot once, however often the scatter names it.
    import gpu_tensorarray as gta
    from gpu_tensorarray import raw_ops

    backend = load_backend("emulated")
    puts, run = [], backend._module.run

    def recording(kernel, dtype, blocks, threads, args):
        if kernel == "put_rows":
            puts.append(np.array(args[2][:int(args[3])]))
        return run(kernel, dtype, blocks, threads, args)

    monkeypatch.setattr(backend._module, "run", recording)
    with gta.device("emulated"):
        handle, flow = raw_ops.TensorArrayV3(size=3, dtype=np.float32)
        grad, flow = raw_ops.TensorArrayGradV3(handle=handle, flow_in=flow, source="gradients")
        indices = np.array([0, 0, 1, 0], np.int32)
        rows = np.arange(8, dtype=np.float32).reshape(4, 2)
        flow = raw_ops.TensorArrayScatterV3(handle=grad, indices=indices, value=rows, flow_in=flow)
        value = raw_ops.TensorArrayGatherV3(handle=grad, indices=[0, 1], flow_in=flow, dtype=np.float32)
    assert puts and all(len(np.unique(put)) == len(put) for put in puts)
    expected = np.zeros((3, 2), np.float32)
    np.add.at(expected, indices, rows)
    assert np.array_equal(np.asarray(value), expected[:2])
