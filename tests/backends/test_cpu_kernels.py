"""The numpy backend's compiled scatter-add (backends/cpu_kernels.py, kernels/cpu_add_rows.cpp,
built at install) against a loop adding as TensorFlow does (reference_model.tf_add_at: np.add.at
but for the subnormals TensorFlow's CPU kernels flush), its NumPy fallback where it was not built
or is switched off (GPU_TENSORARRAY_CPU_KERNELS=0), and the aggregating scatter's O(1) checks
(storage.py) against the same loop and TensorFlow's errors. Tests that take the ``compiled``
fixture concern the compiled implementation only; the rest run on whichever is in use."""

import importlib
import os
import warnings

import numpy as np
import pytest

from gpu_tensorarray import device, errors
from gpu_tensorarray.backends import cpu_kernels, get_backend
from reference_model import tf_add, tf_add_at
from ta_conformance_util import (
    ALREADY_READ, NUMBER_DTYPES, assert_same, gather, grad, new, raises, read, sample, scatter, write,
)


@pytest.fixture
def compiled():
    """The compiled scatter-add. Where it is switched off (the suite's second run in CI)
    these tests are skipped; where it is missing otherwise, under CI=true they fail:
    CI builds it, and the benchmark figures rest on it."""
    usable, why = cpu_kernels.status()
    if not usable:
        if os.environ.get("CI") and os.environ.get(cpu_kernels.DISABLE_ENV, "1").strip() != "0":
            pytest.fail(f"CI=true and no compiled scatter-add: {why}")
        pytest.skip(f"no compiled scatter-add here: {why}")
    return cpu_kernels.add_rows_function


ADDED, REFUSED, OVERLAP = cpu_kernels.ADDED, cpu_kernels.REFUSED, cpu_kernels.OVERLAP


@pytest.fixture
def no_compiler(monkeypatch):
    """As where the install built no extension: importing it fails."""
    real_import = importlib.import_module

    def import_module(name, *args):
        if name == cpu_kernels.MODULE:
            raise ModuleNotFoundError(f"No module named {name!r}")
        return real_import(name, *args)
    monkeypatch.setattr(importlib, "import_module", import_module)
    monkeypatch.delenv(cpu_kernels.DISABLE_ENV, raising=False)     # the suite's second run sets it
    cpu_kernels.reset()
    yield
    monkeypatch.undo()
    cpu_kernels.reset()


def _inputs(dtype, slots, count, width, distribution, seed):
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, slots, size=count)
    if distribution == "hot":
        indices[rng.random(count) < 0.9] = int(rng.integers(0, slots))
    return indices, sample(rng, dtype, (slots, width)), sample(rng, dtype, (count, width))


def _reference(start, indices, rows):
    return tf_add_at(start, indices, rows)


@pytest.mark.parametrize("dtype", NUMBER_DTYPES)
@pytest.mark.parametrize("width,count,distribution", [(1, 50, "uniform"), (3, 40, "uniform"), (64, 300, "hot"),
                                                      (64, 300, "uniform"), (5, 1, "uniform")])
def test_compiled_add_is_bitwise_np_add_at(compiled, dtype, width, count, distribution):
    indices, start, rows = _inputs(dtype, 11, count, width, distribution, seed=width + count)
    dst = start.copy()
    assert compiled(np.dtype(dtype))(dst, indices, rows) == ADDED
    assert_same(dst, _reference(start, indices, rows))


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("width,count", [(1, 4096), (64, 300), (515, 41)])
def test_int32_and_int64_indices_add_alike(compiled, index_dtype, width, count):
    """TensorFlow's indices are int32: the loop reads them as they are (a column, and rows)."""
    indices, start, rows = _inputs("float32", 11, count, width, "hot", seed=count)
    dst = start.copy()
    assert compiled(np.dtype("float32"))(dst, indices.astype(index_dtype), rows) == ADDED
    assert_same(dst, _reference(start, indices, rows))


@pytest.fixture
def wide(compiled):
    """The compiled add, given rows of 2 KiB or more (which once took a loop of their own)."""
    return compiled


def _wide(dtype, tail=3):
    """A wide row (2048 bytes or more), ending in a part cache line of ``tail`` elements."""
    return -(-2048 // np.dtype(dtype).itemsize) + tail


@pytest.mark.parametrize("dtype", NUMBER_DTYPES)
@pytest.mark.parametrize("distribution", ["uniform", "hot"])
def test_wide_rows_are_bitwise_np_add_at(wide, dtype, distribution):
    """Hot: about 37 rows into one destination; uniform: several destinations with rows
    interleaved in source order."""
    indices, start, rows = _inputs(dtype, 11, 41, _wide(dtype), distribution, seed=41)
    dst = start.copy()
    with np.errstate(over="ignore"):
        assert wide(np.dtype(dtype))(dst, indices, rows) == ADDED
    assert_same(dst, _reference(start, indices, rows))


@pytest.mark.parametrize("slots,count", [(1, 2), (3, 13), (300, 20), (2000, 20)])
def test_wide_rows_keep_source_order_per_destination(wide, slots, count):
    """Sums that rounding makes depend on their order: 1e8 + 1 - 1e8 is 0 in float32,
    1e8 - 1e8 + 1 is 1. Also with more destinations than rows (2000 over 20 rows) and
    destinations that get nothing."""
    rng = np.random.default_rng(slots + count)
    indices = rng.integers(0, slots, size=count)
    rows = rng.choice(np.array([1e8, 1, -1e8, 3, -2e8, 0.5], np.float32), size=(count, _wide("float32", 5)))
    start = sample(rng, "float32", (slots, rows.shape[1]))
    dst = start.copy()
    assert wide(np.dtype("float32"))(dst, indices, rows) == ADDED
    expected = _reference(start, indices, rows)
    assert_same(dst, expected)
    if slots < count:       # the check can fail: another order gives other sums
        assert not np.array_equal(expected, _reference(start, indices[::-1], rows[::-1]))


def test_wide_rows_refused_by_index_or_flag_change_nothing(wide):
    width = _wide("float32")
    dst, rows = np.ones((4, width), np.float32), np.ones((30, width), np.float32)
    add = wide(np.dtype("float32"))
    assert add(dst, np.array([0, 1, 2] * 9 + [0, 1, 4]), rows) == REFUSED
    assert add(dst, np.array([0, 1, 3] * 10), rows, bytearray([9, 9, 9, 1]), 9) == REFUSED
    assert (dst == 1).all()
    assert add(dst, np.array([0, 1, 3] * 10), rows, bytearray([9, 9, 1, 9]), 9) == ADDED
    assert_same(dst[:, -1], np.array([11, 11, 1, 11], np.float32))


@pytest.mark.parametrize("count", [1, 2, 7, 300])
def test_a_column_sums_runs_of_one_index_in_order(compiled, count):
    """Rows of one element keep a run of one index in a register: the same sums, bitwise,
    for runs at the start, the end, alone and interleaved."""
    rng = np.random.default_rng(count)
    indices = np.repeat(rng.integers(0, 5, size=count), rng.integers(1, 4, size=count))
    start, rows = sample(rng, "float32", (5, 1)), sample(rng, "float32", (len(indices), 1))
    dst = start.copy()
    assert compiled(np.dtype("float32"))(dst, indices, rows) == ADDED
    assert_same(dst, _reference(start, indices, rows))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64"])
def test_compiled_add_flushes_subnormals_keeps_signed_zeros_and_overflows(wide, dtype):
    """As TensorFlow's CPU kernels: subnormal operands and sums flushed (float16's kept: it adds
    in float32), -0.0 + -0.0 = -0.0, max + max = inf."""
    info = np.finfo(dtype)
    tiny, subnormal = float(info.tiny), float(info.smallest_subnormal)
    specials = np.array([-0.0, 0.0, subnormal, -subnormal, info.max, info.max, np.inf, -np.inf,
                         3 * subnormal, 2 * subnormal, tiny * 1.5, -tiny, -0.0, -subnormal], dtype)
    indices = np.array([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6])
    for width in (4, _wide(dtype)):
        rows = np.tile(specials[:, None], (1, width))
        start = np.full((7, width), -0.0, dtype)
        dst = start.copy()
        assert wide(np.dtype(dtype))(dst, indices, rows) == ADDED
        assert_same(dst, _reference(start, indices, rows))
        real = dst.real if dst.dtype.kind == "c" else dst
        if dtype == "float16":
            assert (real[4] == 5 * subnormal).all() and (real[6] == -subnormal).all()
        else:           # 3 and 2 subnormals, tiny * 1.5 - tiny: zeros; -0.0 with a flushed -subnormal: -0.0
            assert (real[4:7] == 0).all() and not np.signbit(real[4:6]).any() and np.signbit(real[6]).all()


def test_compiled_add_refuses_an_index_out_of_range_and_changes_nothing(compiled):
    dst = np.ones((4, 3), np.float32)
    rows = np.ones((2, 3), np.float32)
    assert compiled(np.dtype("float32"))(dst, np.array([1, 4]), rows) == REFUSED
    assert compiled(np.dtype("float32"))(dst, np.array([1, -1]), rows) == REFUSED
    assert (dst == 1).all()
    with pytest.raises(IndexError):       # the backend then answers as np.add.at does
        get_backend("numpy").add_rows(dst, np.array([1, 4]), rows)


def test_compiled_add_refuses_a_slot_whose_flag_differs_and_changes_nothing(compiled):
    dst, rows = np.ones((4, 3), np.float32), np.ones((3, 3), np.float32)
    flags = bytearray([9, 9, 1, 9])
    add = compiled(np.dtype("float32"))
    assert add(dst, np.array([0, 3, 2]), rows, flags, 9) == REFUSED      # slot 2's flag is 1
    assert add(dst, np.array([0, 3, 1]), rows, flags[:3], 9) == REFUSED  # slot 3 has no flag
    assert (dst == 1).all()
    assert add(dst, np.array([0, 3, 0]), rows, flags, 9) == ADDED
    assert_same(dst[:, 0], np.array([3, 1, 1, 2], np.float32))


def test_compiled_add_answers_overlap_for_rows_inside_the_destination(compiled):
    dst = np.arange(12, dtype=np.float64).reshape(4, 3)
    assert compiled(np.dtype("float64"))(dst, np.array([1, 2, 1]), dst[0:3]) == OVERLAP
    assert_same(dst, np.arange(12, dtype=np.float64).reshape(4, 3))


def test_compiled_add_rejects_buffers_that_do_not_match(compiled):
    add = compiled(np.dtype("float32"))
    dst = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError):
        add(dst, np.array([0, 1]), np.ones((2, 3), np.float64))            # another dtype
    with pytest.raises(ValueError):
        add(dst, np.array([0, 1], np.int16), np.ones((2, 3), np.float32))  # int16 indices
    with pytest.raises((ValueError, BufferError)):
        add(dst, np.array([0, 1]), np.ones((3, 2), np.float32).T)          # not C-contiguous
    assert (dst == 0).all()


def test_the_backend_reads_rows_that_alias_the_destination_as_they_were(compiled):
    start = np.arange(12, dtype=np.float64).reshape(4, 3)
    dst = start.copy()
    rows = dst[0:3]                                        # a view of dst itself
    indices = np.array([1, 2, 1])
    get_backend("numpy").add_rows(dst, indices, rows)
    assert_same(dst, _reference(start, indices, start[0:3]))


def test_the_backend_takes_strided_rows_and_int32_indices(compiled):
    indices, start, rows = _inputs("float32", 6, 20, 8, "uniform", seed=5)
    dst = start.copy()
    get_backend("numpy").add_rows(dst, indices.astype(np.int32), np.asfortranarray(rows))
    assert_same(dst, _reference(start, indices, rows))


def test_without_the_extension_np_add_at_gives_the_same_bits(no_compiler):
    usable, why = cpu_kernels.status()
    assert not usable and cpu_kernels.MODULE in why and "not built" in why
    assert cpu_kernels.add_rows_function(np.dtype("float32")) is None
    backend = get_backend("numpy")
    for dtype in ("float16", "float32", "complex128", "int8"):
        indices, start, rows = _inputs(dtype, 9, 400, 64, "hot", seed=1)
        dst = start.copy()
        with np.errstate(over="ignore"):
            backend.add_rows(dst, indices, rows)
        assert_same(dst, _reference(start, indices, rows))


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128", "bfloat16"])
def test_without_the_extension_subnormals_flush_as_tensorflow_adds(no_compiler, dtype):
    """The NumPy fallback (scatter_add.add_at) on values where subnormals arrive, cancel into
    being and repeat, in every arrival order the rounds of repeated indices make."""
    if dtype == "bfloat16":
        dtype = np.dtype(pytest.importorskip("ml_dtypes").bfloat16)
    part = np.float32 if np.dtype(dtype).name in ("complex64", "bfloat16") else np.float64
    info = np.finfo(part)
    rng = np.random.default_rng(3)
    scales = np.array([1.0, float(info.tiny), float(info.tiny) * 3, float(info.smallest_subnormal) * 5, 0.0])

    def values(shape):
        magnitudes = rng.standard_normal(shape) * scales[rng.integers(0, len(scales), shape)]
        if np.dtype(dtype).kind == "c":
            return (magnitudes + 1j * rng.standard_normal(shape) * scales[rng.integers(0, 5, shape)]).astype(dtype)
        return magnitudes.astype(dtype)

    backend = get_backend("numpy")
    for count in (1, 7, 200):
        indices = rng.integers(0, 6, size=count)
        start, rows = values((6, 5)), values((count, 5))
        dst = start.copy()
        backend.add_rows(dst, indices, rows)
        expected = tf_add_at(start, indices, rows)
        assert dst.tobytes() == expected.tobytes()
    flushed = start.copy()
    backend.add_rows(flushed, np.array([0]), np.full((1, 5), info.smallest_subnormal, part).astype(dtype))
    assert flushed[0].tobytes() == tf_add(start[0], np.zeros(5, dtype)).tobytes()     # the subnormal adds nothing


@pytest.mark.parametrize("failure", [MemoryError, KeyboardInterrupt])
def test_without_the_extension_a_failed_add_changes_nothing(no_compiler, monkeypatch, failure):
    """The NumPy fallback adds aside and assigns at its end: a failure in its second round of
    adds (repeated indices) leaves the gradient array as it was."""
    from gpu_tensorarray.backends import scatter_add

    with device("cpu"):
        forward, _ = new(2, "float32", element_shape=[2])
        g = grad(forward)
        scatter(g, [0, 1], np.ones((2, 2), np.float32))
        real, rounds = scatter_add._flushed_sum, []

        def failing(*args):
            rounds.append(None)
            if len(rounds) == 2:
                raise failure()
            return real(*args)
        monkeypatch.setattr(scatter_add, "_flushed_sum", failing)
        with pytest.raises((errors.ResourceExhaustedError, KeyboardInterrupt)):
            scatter(g, [0, 0, 1], np.full((3, 2), 2, np.float32))
        monkeypatch.setattr(scatter_add, "_flushed_sum", real)
        assert len(rounds) == 2
        assert_same(gather(g, [0, 1], "float32"), np.ones((2, 2), np.float32))


@pytest.mark.parametrize("dtype", ["float16", "float32", "complex64"])
def test_without_the_extension_overflow_is_inf_whatever_numpys_error_settings(no_compiler, dtype):
    """inf, as TensorFlow and the compiled loop give, not NumPy's FloatingPointError."""
    backend = get_backend("numpy")
    big = np.finfo(dtype).max
    dst = np.full((2, 2), big, dtype)
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        backend.add_rows(dst, np.array([0, 0, 1]), np.full((3, 2), big, dtype))
    assert np.isinf(dst.real).all()


def test_without_the_extension_negative_indices_add_as_np_add_at(no_compiler):
    from gpu_tensorarray.backends.scatter_add import add_at

    start = np.arange(6, dtype=np.float32).reshape(3, 2)
    indices, rows = np.array([-1, 2, 0, -3]), np.arange(8, dtype=np.float32).reshape(4, 2)
    dst = start.copy()
    add_at(dst, indices, rows)
    expected = start.copy()
    np.add.at(expected, indices, rows)           # no subnormals here: the same sums
    assert_same(dst, expected)


def test_the_environment_turns_the_compiled_add_off(monkeypatch):
    monkeypatch.setenv(cpu_kernels.DISABLE_ENV, "0")
    cpu_kernels.reset()
    try:
        assert cpu_kernels.status() == (False, f"{cpu_kernels.DISABLE_ENV}=0")
        assert cpu_kernels.add_rows_function(np.dtype("float32")) is None
    finally:
        monkeypatch.undo()
        cpu_kernels.reset()


@pytest.mark.parametrize("path", ["compiled", "wide", "no_compiler"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64", "int32", "uint8"])
def test_grad_scatter_aggregates_like_np_add_at(path, dtype, request):
    """Every slot valued (the O(1) check), then some unwritten (the flag gather), then a
    forward array's soft slots, each compared with np.add.at from the same start; "wide":
    rows of 2 KiB or more."""
    request.getfixturevalue(path)
    with device("cpu"):
        rng = np.random.default_rng(7)
        slots, width = 10, (_wide(dtype) if path == "wide" else 16)
        for covered in (slots, 6):
            forward, _ = new(slots, dtype, element_shape=[width])
            for index in range(0, slots, 2):            # half the slots become soft in the gradient
                write(forward, index, sample(rng, dtype, (width,)))
            g = grad(forward)
            first = sample(rng, dtype, (covered, width))
            scatter(g, np.arange(covered), first)
            expected = np.zeros((slots, width), dtype)
            expected[:covered] = first
            for _ in range(3):
                indices = rng.integers(0, covered, size=40)
                rows = sample(rng, dtype, (40, width))
                scatter(g, indices, rows)
                expected = _reference(expected, indices, rows)
            assert_same(gather(g, np.arange(covered), dtype), expected[:covered])


def test_a_read_slot_still_refuses_aggregation_after_fast_scatters(backend):
    forward, _ = new(12, element_shape=[2])
    g = grad(forward)
    scatter(g, np.arange(12), np.ones((12, 2), np.float32))
    scatter(g, np.arange(12), np.ones((12, 2), np.float32))        # every slot valued: the O(1) path
    read(g, 5)
    with raises(errors.InvalidArgumentError, ALREADY_READ.format(name=g.name, index=5)):
        scatter(g, np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]), np.ones((10, 2), np.float32))
    scatter(g, np.array([0, 1, 2, 3, 4, 6, 7, 8, 9, 10]), np.ones((10, 2), np.float32))   # the others still add
    assert_same(gather(g, [0, 11]), np.array([[3, 3], [2, 2]], np.float32))


@pytest.mark.parametrize("checkout", [True, False], ids=["source-checkout", "installed"])
def test_without_the_extension_the_reason_says_where_the_package_is(no_compiler, monkeypatch, tmp_path, checkout):
    # Python run from a source checkout imports its package, which has no extensions until
    # built there: "not built when installed" would send the user after the wrong install.
    package = tmp_path / "gpu_tensorarray"
    (package / "backends").mkdir(parents=True)
    if checkout:
        (tmp_path / "setup.py").write_text("")
    from gpu_tensorarray.backends import extensions
    monkeypatch.setattr(extensions, "__file__", str(package / "backends" / "extensions.py"))
    cpu_kernels.reset()
    usable, why = cpu_kernels.status()
    assert not usable and cpu_kernels.MODULE in why and str(package) in why, why
    assert ("python setup.py build_ext --inplace" in why and "outside the checkout" in why) == checkout, why
    assert ("when gpu_tensorarray was installed" in why) != checkout, why
