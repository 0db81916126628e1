"""bfloat16 (ml_dtypes' NumPy dtype, TensorFlow's and JAX's) on every backend.

References are dumb: Python lists of values, and for aggregation a Python loop
that adds as TensorFlow's CPU kernel does, ``acc = bfloat16(float(acc) + float(x))``
in arrival order (add in float, round to nearest even once), a subnormal operand or
sum counting as a zero of its sign (TensorFlow runs its CPU kernels with FTZ and DAZ
set). Values are compared bit for bit (as uint16).
"""

import copy
import math
import re
import subprocess
import sys

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import dtypes, errors
from gpu_tensorarray import raw_ops as ro
from gpu_tensorarray.backends import get_backend

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)


def bf16(values):
    return np.asarray(values, dtype=np.float64).astype(BF16)


def bits(array):
    return np.ascontiguousarray(gta.to_numpy(array)).view(np.uint16)


def assert_bitwise(actual, expected):
    actual_host = gta.to_numpy(actual)
    assert actual_host.dtype == BF16, actual_host.dtype
    assert actual_host.shape == np.shape(expected)
    expected = np.asarray(expected, BF16)
    differ = np.flatnonzero(bits(actual_host).reshape(-1) != bits(expected).reshape(-1))
    first = differ[:5]
    assert differ.size == 0, (f"{differ.size} elements differ, first at flat {first.tolist()}: "
                              f"{actual_host.reshape(-1)[first]} != {expected.reshape(-1)[first]}")


def flushed(value):
    """A subnormal float32 (or bfloat16) value as a zero of its sign: what FTZ and DAZ do."""
    return math.copysign(0.0, value) if abs(value) < 2.0 ** -126 else value


def sequential_sum(first, rest, flush=True):
    """TensorFlow's bfloat16 aggregation, one element at a time, in arrival order (without
    ``flush``: a GPU's bfloat16 atomicAdd, which keeps subnormals)."""
    kept = flushed if flush else float
    acc = first
    for value in rest:
        acc = ml_dtypes.bfloat16(kept(kept(float(acc)) + kept(float(value))))
    return acc


def loop_aggregate(destinations, indices, rows, flush=True):
    """dst[indices[k]] += rows[k] for k in order, element by element."""
    out = np.array(destinations, BF16)
    flat_out, flat_rows = out.reshape(len(out), -1), np.asarray(rows, BF16).reshape(len(rows), -1)
    for k, index in enumerate(indices):
        for column in range(flat_out.shape[1]):
            flat_out[index, column] = sequential_sum(flat_out[index, column], [flat_rows[k, column]], flush)
    return out


def order_sensitive_rows(rng, count, width):
    """Rows whose sums depend on the order of the adds in bfloat16 (8 significant
    bits): a large value, then many values of about half its ulp, with ties."""
    magnitudes = rng.choice([256.0, 1.0, 1.0, 0.5, 3.0, -1.0, 2.0 ** -130, 1e30], (count, width))
    return bf16(magnitudes * rng.choice([1.0, 1.0, 1.0078125, -1.0], (count, width)))


# -- names and the optional dependency ---------------------------------------------------------------------
class DTypeLike:
    """What as_dtype reads from a TensorFlow DType (tf.bfloat16.as_numpy_dtype is ml_dtypes.bfloat16)."""
    name = "bfloat16"
    as_numpy_dtype = ml_dtypes.bfloat16


@pytest.mark.parametrize("spec", ["bfloat16", "BFloat16", ml_dtypes.bfloat16, BF16, DTypeLike()],
                         ids=["name", "mixed-case", "ml_dtypes-type", "numpy-dtype", "tf-dtype-like"])
def test_every_spelling_is_ml_dtypes_bfloat16(spec):
    dtype = dtypes.as_dtype(spec)
    assert dtype == BF16 and dtype is np.dtype(ml_dtypes.bfloat16)
    assert dtypes.tf_name(dtype) == "bfloat16" and dtypes.c_type(dtype) == "__nv_bfloat16"
    assert dtype in dtypes.SUPPORTED and dtype in dtypes.AGGREGATABLE
    assert gta.TensorArray(spec, size=1).dtype == BF16


def test_dtype_mismatch_messages_say_bfloat16(backend):
    ta = gta.TensorArray("bfloat16", size=2)
    with pytest.raises(errors.InvalidArgumentError,
                       match="^TensorArray dtype is bfloat16 but Op is trying to write dtype float\\."):
        ta.write(0, np.ones(2, np.float32))
    other = gta.TensorArray("float32", size=1)
    with pytest.raises(errors.InvalidArgumentError,
                       match="^TensorArray dtype is float but Op is trying to write dtype bfloat16\\."):
        other.write(0, bf16([1.0, 2.0]))
    ta = ta.write(0, bf16([1.0, 2.0]))
    with pytest.raises(errors.InvalidArgumentError,
                       match="^TensorArray dtype is bfloat16 but Op requested dtype float\\."):
        ro.TensorArrayReadV3(ta.handle, 0, ta.flow, "float32")


def _python(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_import_and_other_dtypes_leave_ml_dtypes_unimported():
    result = _python(
        "import sys, gpu_tensorarray as gta\n"
        "from gpu_tensorarray.backends import get_backend\n"
        "for device in ('cpu', 'emulated'):\n"
        "    with gta.device(device):\n"
        "        ta = gta.TensorArray('float16', size=2).write(0, [1.0]).write(1, [2.0])\n"
        "        g = ta.grad('g').scatter([0, 0], [[1.0], [2.0]])\n"
        "        assert gta.to_numpy(ta.stack()).tolist() == [[1.0], [2.0]]\n"
        "assert 'ml_dtypes' not in sys.modules, 'ml_dtypes was imported'\n"
        "gta.TensorArray('bfloat16', size=1)\n"
        "assert 'ml_dtypes' in sys.modules\n")
    assert result.returncode == 0, result.stderr


def test_without_ml_dtypes_bfloat16_is_unimplemented_and_says_what_to_install():
    result = _python(
        "import sys\n"
        "sys.modules['ml_dtypes'] = None          # import ml_dtypes raises ImportError\n"
        "import gpu_tensorarray as gta\n"
        "from gpu_tensorarray import errors\n"
        "try:\n"
        "    gta.TensorArray('bfloat16', size=1)\n"
        "except errors.UnimplementedError as error:\n"
        "    print(error)\n"
        "assert gta.TensorArray('float32', size=1).write(0, 1.0).read(0) == 1.0\n")
    assert result.returncode == 0, result.stderr
    assert "bfloat16" in result.stdout and "pip install ml_dtypes" in result.stdout


# -- the ops ------------------------------------------------------------------------------------------------
def test_write_read_stack_gather_concat(backend):
    rng = np.random.default_rng(1)
    values = [bf16(rng.standard_normal((2, 3)) * 100) for _ in range(4)]
    values[1][0, 0] = bf16(-0.0)
    values[2][1, 2] = bf16(2.0 ** -130)                      # subnormal bfloat16
    ta = gta.TensorArray("bfloat16", size=4, clear_after_read=False)
    for index, value in enumerate(values):
        ta = ta.write(index, backend.asarray(value))
    for index, value in enumerate(values):
        assert_bitwise(ta.read(index), value)
    assert_bitwise(ta.stack(), np.stack(values))
    assert_bitwise(ta.gather([3, 0, 3]), np.stack([values[3], values[0], values[3]]))
    assert_bitwise(ta.concat(), np.concatenate(values))
    assert isinstance(ta.stack(), backend.array_type)


def test_python_values_convert_to_bfloat16_rounding_to_nearest_even(backend):
    ta = gta.TensorArray("bfloat16", size=1).write(0, [1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 3 * 2.0 ** -134, -3])
    # ties to even: 1 + 2^-8 -> 1, 1 + 3 * 2^-8 -> 1 + 2^-6, 1.5 * 2^-133 (subnormal) -> 2^-132
    assert bits(ta.read(0)).tolist() == [0x3f80, 0x3f82, 0x0002, 0xc040]


def test_scatter_split_unstack(backend):
    rng = np.random.default_rng(2)
    value = bf16(rng.standard_normal((5, 4)) * 10)
    scattered = gta.TensorArray("bfloat16", size=5).scatter([4, 0, 2, 1, 3], backend.asarray(value))
    assert_bitwise(scattered.stack(), value[[1, 3, 2, 4, 0]])
    split = gta.TensorArray("bfloat16", size=3, infer_shape=False).split(backend.asarray(value), [2, 0, 3])
    assert_bitwise(split.read(0), value[:2])
    assert_bitwise(split.read(1), value[2:2])
    assert_bitwise(split.read(2), value[2:])
    assert_bitwise(gta.TensorArray("bfloat16", size=5).unstack(backend.asarray(value)).stack(), value)


def test_returned_values_do_not_alias_the_array(backend):
    ta = gta.TensorArray("bfloat16", size=1, clear_after_read=False)
    source = bf16([1.0, 2.0])
    ta = ta.write(0, backend.asarray(source))
    source[0] = bf16(7.0)
    first = ta.read(0)
    try:
        first[0] = bf16(9.0)
    except ValueError:
        pass                                                  # read-only view: fine too
    assert_bitwise(ta.read(0), bf16([1.0, 2.0]))


# -- aggregation in gradient arrays --------------------------------------------------------------------------
def test_reference_is_order_sensitive():
    """The values used below make the order of the adds visible, so the bitwise
    comparisons check the order too, not only the sum."""
    forward = sequential_sum(bf16(256.0), bf16([1.0, 1.0, 1.0, 1.0]))
    backward = sequential_sum(bf16(1.0), bf16([1.0, 1.0, 1.0, 256.0]))
    assert float(forward) == 256.0 and float(backward) == 260.0


@pytest.mark.parametrize("mode", ["deterministic", "atomic"])
def test_grad_array_aggregation_is_a_sequential_bfloat16_add(backend, mode):
    """Writes and scatters with repeated indices into a gradient array: each element
    is the Python loop's sequential sum. Atomic mode on numpy and emulated adds in
    arrival order too (numpy: one sequential sum for both modes; emulated: the atomic
    kernel's grid runs in order on one thread). On a GPU it is checked below."""
    if mode == "atomic" and backend.name == "cupy":
        pytest.skip("atomic order is unspecified on a GPU: see test_gpu_atomic_mode_within_reordering_bound")
    rng = np.random.default_rng(3)
    size, width = 6, 5
    handle, flow = ro.TensorArrayV3(size, "bfloat16", element_shape=[width])
    grad_handle, flow = ro.TensorArrayGradV3(handle, flow, "grad")
    expected = [None] * size
    with gta.accumulation(mode):
        for _ in range(4):
            indices = rng.integers(0, size, 40)
            rows = order_sensitive_rows(rng, 40, width)
            flow = ro.TensorArrayScatterV3(grad_handle, indices, backend.asarray(rows), flow)
            for index, row in zip(indices, rows):
                expected[index] = row.copy() if expected[index] is None else np.array(
                    [sequential_sum(a, [b]) for a, b in zip(expected[index], row)], BF16)
        for index in range(size):
            row = order_sensitive_rows(rng, 1, width)[0]
            flow = ro.TensorArrayWriteV3(grad_handle, index, backend.asarray(row), flow)
            expected[index] = row.copy() if expected[index] is None else np.array(
                [sequential_sum(a, [b]) for a, b in zip(expected[index], row)], BF16)
    result = ro.TensorArrayGatherV3(grad_handle, np.arange(size), flow, "bfloat16")
    assert_bitwise(result, np.stack(expected))


@pytest.mark.parametrize("mode", ["deterministic", "atomic"])
@pytest.mark.parametrize("shape", [(300, 1), (2000, 3), (3000, 70)], ids=str)
def test_add_rows_matches_python_loop(backend, mode, shape):
    """The primitive under every aggregation, sized for each strategy of the numpy
    backend (np.add.at, rounds, long groups) and many blocks of the kernels' grid."""
    if mode == "atomic" and backend.name == "cupy":
        pytest.skip("atomic order is unspecified on a GPU: see test_gpu_atomic_mode_within_reordering_bound")
    count, width = shape
    rng = np.random.default_rng(count)
    dst = order_sensitive_rows(rng, 30, width)
    indices = rng.integers(0, 30, count)
    indices[rng.random(count) < 0.5] = 7                       # one long group
    rows = order_sensitive_rows(rng, count, width)
    # Emulated atomics add as the GPU's (in order here): bfloat16's keep subnormals.
    expected = loop_aggregate(dst, indices, rows, flush=not (mode == "atomic" and backend.name == "emulated"))
    device_dst = backend.asarray(dst.copy())
    backend.add_rows(device_dst, indices, backend.asarray(rows), mode)
    assert_bitwise(device_dst, expected)


def test_emulated_equals_numpy_with_nan_inf_and_subnormals():
    """Special values too: the emulated kernels round, overflow and encode NaN as
    ml_dtypes does (a quiet NaN keeping the sign: 0x7fc0 / 0xffc0), bit for bit.
    A NaN's sign is left out: IEEE 754 leaves it open when both operands are NaNs, and
    C compilers pick either operand's (docs/guide.md: NaN bits are not bitwise)."""
    rng = np.random.default_rng(4)
    special = bf16([np.nan, -np.nan, np.inf, -np.inf, 3.3e38, 2.0 ** -133, -2.0 ** -133, -0.0, 0.0])
    rows = order_sensitive_rows(rng, 500, 9)
    mask = rng.random(rows.shape) < 0.05
    rows[mask] = special[rng.integers(0, len(special), int(mask.sum()))]
    indices = rng.integers(0, 12, 500)
    dst = order_sensitive_rows(rng, 12, 9)
    expected = loop_aggregate(dst, indices, rows)
    results = []
    for name in ("numpy", "emulated"):
        backend = get_backend(name)
        device_dst = backend.asarray(dst.copy())
        with np.errstate(over="ignore", invalid="ignore"):
            backend.add_rows(device_dst, indices, backend.asarray(rows), "deterministic")
        results.append(gta.to_numpy(device_dst))
    nan = np.isnan(expected.astype(np.float32))
    assert nan.any() and np.isinf(expected.astype(np.float32)).any()
    for result in results:
        assert np.array_equal(bits(result)[nan] & 0x7fff, np.full(nan.sum(), 0x7fc0))
        assert_bitwise(np.where(nan, expected, result), expected)


def test_emulated_rounding_of_every_bfloat16_pair_kind():
    """emulation.h's bfloat16 and common.cuh's rounding, through the kernel: a sweep
    of bit patterns added pairwise, then pairs chosen for overflow, inf - inf,
    NaN payloads, subnormals (flushed: operands, and a sum of normals), signed zeros and
    ties to even."""
    emulated = get_backend("emulated")
    sweep = np.arange(0, 0x10000, 97, dtype=np.uint32).astype(np.uint16)
    pairs = np.array([(0x7f7f, 0x7f7f), (0xff7f, 0xff7f), (0x7f80, 0xff80), (0x7f81, 0x3f80), (0xffc1, 0x3f80),
                      (0x0001, 0x0001), (0x0001, 0x8001), (0x8000, 0x8000), (0x3f80, 0x3b80), (0x3f81, 0x3b80),
                      (0x007f, 0x0001), (0x0081, 0x8080), (0x0000, 0x807f)], np.uint16)
    rng = np.random.default_rng(5)
    dst = np.concatenate([sweep, pairs[:, 0]]).view(BF16).reshape(-1, 1)
    rows = np.concatenate([rng.permutation(sweep), pairs[:, 1]]).view(BF16).reshape(-1, 1)
    expected = np.array([sequential_sum(a, [b]) for a, b in zip(dst[:, 0], rows[:, 0])], BF16).reshape(-1, 1)
    emulated.add_rows(dst, np.arange(len(dst)), rows, "deterministic")
    assert_bitwise(dst, expected)
    assert bits(expected[-len(pairs):]).reshape(-1).tolist() == [
        0x7f80, 0xff80, 0xffc0, 0x7fc0, 0xffc0, 0x0000, 0x0000, 0x8000, 0x3f80, 0x3f82, 0x0000, 0x0000, 0x0000]


def test_gpu_atomic_mode_within_reordering_bound():
    """Atomic adds run in any order on a GPU (sm_80 and up; older GPUs add bfloat16
    deterministically): within (group size + 1) * eps * sum of magnitudes. (numpy and
    emulated add in arrival order in both modes: checked bitwise above.)"""
    from gpu_tensorarray.testing import load_backend

    backend = load_backend("cupy")
    rng = np.random.default_rng(6)
    dst = bf16(rng.standard_normal((20, 4)))
    indices = rng.integers(0, 20, 500)
    rows = bf16(rng.standard_normal((500, 4)))
    device_dst = backend.asarray(dst.copy())
    backend.add_rows(device_dst, indices, backend.asarray(rows), "atomic")
    expected = loop_aggregate(dst, indices, rows).astype(np.float64)
    magnitudes = np.abs(dst).astype(np.float64)
    np.add.at(magnitudes, indices, np.abs(rows).astype(np.float64))
    group = np.bincount(indices, minlength=20).max() + 1
    bound = 2 * group * (float(ml_dtypes.finfo(BF16).eps) * magnitudes + float(ml_dtypes.finfo(BF16).tiny))
    assert np.all(np.abs(gta.to_numpy(device_dst).astype(np.float64) - expected) <= bound)


def test_atomic_mode_fallback_is_by_architecture():
    from gpu_tensorarray.backends import kernel_sources

    assert "bfloat16" in kernel_sources.atomic_dtypes(80) and "bfloat16" in kernel_sources.atomic_dtypes(90)
    assert "bfloat16" not in kernel_sources.atomic_dtypes(75) and "float32" in kernel_sources.atomic_dtypes(75)
    assert "bfloat16" in get_backend("emulated").atomic_dtypes        # emulation.h has every atomic


def test_atomic_mode_below_sm_80_runs_the_deterministic_kernel():
    """The emulated backend as an sm_75 GPU (no bfloat16 atomicAdd): bfloat16's atomic
    mode launches add_rows_deterministic and gives the sequential sum, bit for bit."""
    from gpu_tensorarray.backends import kernel_sources
    from gpu_tensorarray.testing import load_backend

    class Recorder:
        def __init__(self, module):
            self.module, self.launched = module, []

        def run(self, kernel, dtype, blocks, threads, args):
            self.launched.append(kernel)
            self.module.run(kernel, dtype, blocks, threads, args)

    backend = copy.copy(load_backend("emulated"))                    # the shared instance stays as it is
    backend.atomic_dtypes = kernel_sources.atomic_dtypes(75)
    backend._module = Recorder(backend._module)
    rng = np.random.default_rng(75)
    dst, rows = order_sensitive_rows(rng, 6, 3), order_sensitive_rows(rng, 200, 3)
    indices = rng.integers(0, 6, 200)
    device_dst = dst.copy()
    backend.add_rows(device_dst, indices, rows, "atomic")
    assert backend._module.launched == ["add_rows_deterministic"]
    assert_bitwise(device_dst, loop_aggregate(dst, indices, rows))


# -- gradients ----------------------------------------------------------------------------------------------
def test_gradient_tape_in_bfloat16(backend):
    """Two reads of element 0 and a stack: the gradient of value_0 is the sequential
    bfloat16 sum of the three incoming gradients, in the order the tape adds them."""
    value_0, value_1 = backend.asarray(bf16([[4.0, 5.0]])), backend.asarray(bf16([[3.0, -1.0]]))
    with gta.GradientTape() as tape:
        ta = gta.TensorArray("bfloat16", size=2, clear_after_read=False)
        ta = ta.write(0, value_0).write(1, value_1)
        r0, r0_again, stacked = ta.read(0), ta.read(0), ta.stack()
    g_r0, g_again = bf16([[256.0, 1.0]]), bf16([[1.0, 1.0]])
    g_stack = bf16([[[1.0, 2.0 ** -7]], [[0.5, 3.0]]])
    grads = tape.gradient([r0, r0_again, stacked], [value_0, value_1],
                          output_gradients=[backend.asarray(g) for g in (g_r0, g_again, g_stack)])
    for grad in grads:
        assert isinstance(grad, backend.array_type)
    incoming = [g_r0[0], g_again[0], g_stack[0, 0]]
    # Any order of the three adds is TensorFlow's; check the result is one of them, bitwise.
    orders = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]
    candidates = {tuple(bits(np.array([[sequential_sum(incoming[a][c], [incoming[b][c], incoming[d][c]])
                                        for c in range(2)]], BF16)).reshape(-1))
                  for a, b, d in orders}
    assert tuple(bits(grads[0]).reshape(-1)) in candidates
    assert_bitwise(grads[1], g_stack[1])


# -- foreign values: torch (DLPack) ---------------------------------------------------------------------------
def test_torch_bfloat16_tensors_are_written_through_their_bits(backend):
    """NumPy's DLPack knows no bfloat16 (either way), nor does torch's .numpy(): a torch
    bfloat16 tensor is written through its int16 bits. Back to torch the same way."""
    torch = pytest.importorskip("torch")
    tensor = torch.tensor([[1.5, -2.0], [3.0, 1e-39]], dtype=torch.bfloat16)
    original = tensor.clone()
    expected = original.view(torch.int16).numpy().view(BF16)
    ta = gta.TensorArray("bfloat16", size=2).write(0, tensor[0]).write(1, tensor[1])
    tensor[0, 0] = 9.0                                       # the array holds its own copy
    stacked = ta.stack()
    assert_bitwise(stacked, expected)
    back = torch.from_numpy(gta.to_numpy(stacked).copy().view(np.int16)).view(torch.bfloat16)
    assert back.dtype == torch.bfloat16 and torch.equal(back.view(torch.int16), original.view(torch.int16))


class JaxLikeArray:
    """What a JAX bfloat16 array offers NumPy: __array__ with ml_dtypes' dtype, and a
    __dlpack__ that NumPy's importer refuses (it has no bfloat16)."""

    def __init__(self, values):
        self._values = values
        self.shape, self.dtype = values.shape, values.dtype

    def __array__(self, dtype=None, copy=None):
        return self._values.copy()

    def __dlpack__(self, **kwargs):
        raise BufferError("bfloat16 is not exported")

    def __dlpack_device__(self):
        return (1, 0)


def test_array_likes_of_bfloat16_keep_their_dtype(backend):
    values = bf16([[1.5, -2.0], [2.0 ** -130, 3.0]])
    ta = gta.TensorArray("bfloat16", size=1).write(0, JaxLikeArray(values))
    assert_bitwise(ta.read(0), values)


# -- CuPy versions -------------------------------------------------------------------------------------------
def test_cupy_before_14_refuses_bfloat16_naming_the_version(monkeypatch):
    """CuPy stores ml_dtypes' bfloat16 from v14 on; an older one gets UnavailableError
    (never a ValueError from CuPy, which the allocator would report as out of memory)."""
    cupy_backend = pytest.importorskip("gpu_tensorarray.backends.cupy", exc_type=ImportError)
    monkeypatch.setattr(cupy_backend, "_CUPY_VERSION", (13, 6))
    monkeypatch.setattr(cupy_backend.cupy, "__version__", "13.6.0")
    with pytest.raises(errors.UnavailableError, match=r"need CuPy >= 14\.0 \(installed: 13\.6\.0\)"):
        cupy_backend._check_dtype(BF16)
    cupy_backend._check_dtype(np.dtype("float16"))           # other dtypes are unaffected
    monkeypatch.setattr(cupy_backend, "_CUPY_VERSION", (14, 0))
    cupy_backend._check_dtype(BF16)


def test_numpy_before_2_1_2_refuses_bfloat16_on_cupy_naming_the_version(monkeypatch):
    """CuPy registers bfloat16 only beside NumPy >= 2.1.2 (cupy/_core/_scalar.pyx), and refuses
    it otherwise with a ValueError that the allocator would report as out of memory."""
    cupy_backend = pytest.importorskip("gpu_tensorarray.backends.cupy", exc_type=ImportError)
    monkeypatch.setattr(cupy_backend, "_NUMPY_HOLDS_BFLOAT16", False)
    installed = re.escape(np.__version__)
    with pytest.raises(errors.UnavailableError, match=rf"need NumPy >= 2\.1\.2.*installed: {installed}"):
        cupy_backend._check_dtype(BF16)
    cupy_backend._check_dtype(np.dtype("float16"))
