"""gpu_tensorarray.torch with torch.bfloat16: arrays of it (the library holds ml_dtypes'
bfloat16), every value crossing bit for bit in both directions, and gradients equal to the
list model's, on every backend. References are dumb: the tensors written, as bits; the same
program with a Python list under torch autograd, in bfloat16 (bit for bit where each value's
gradient is one term or the sum of two, which no order of adding changes), and TensorFlow's
bfloat16 aggregation as a Python loop (tests/ops/test_bfloat16.py's) where more terms add.

Needs torch and ml_dtypes (skipped without them, except under CI=true, where a missing
torch fails)."""

import subprocess
import sys

import numpy as np
import pytest

from gpu_tensorarray.errors import InvalidArgumentError
from gpu_tensorarray.testing import import_torch, open_array_names

torch = import_torch()
ml_dtypes = pytest.importorskip("ml_dtypes")
from torch_helpers import opened_since, torch_device  # noqa: E402
from gpu_tensorarray.torch import TensorArray, as_dtype, torch_dtype  # noqa: E402
from gpu_tensorarray.torch.autograd import open_passes  # noqa: E402

BF16 = torch.bfloat16


def bits(tensor):
    return tensor.detach().cpu().contiguous().view(torch.int16)


def every_bfloat16():
    """All 65536 bit patterns (NaNs with payloads, infinities, subnormals, -0.0) as (256, 256)."""
    return torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(BF16).reshape(256, 256)


def leaf(*shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator).to(BF16).to(torch_device()).requires_grad_()


def test_spellings_give_torch_bfloat16(backend):
    for spelling in (BF16, "bfloat16", "BFloat16", ml_dtypes.bfloat16, np.dtype(ml_dtypes.bfloat16)):
        for mode in ("tf1", "tf2"):
            assert TensorArray(spelling, size=1, mode=mode).dtype is BF16
    assert as_dtype(BF16) == np.dtype(ml_dtypes.bfloat16) and torch_dtype(ml_dtypes.bfloat16) is BF16
    assert torch_dtype(as_dtype(BF16)) is BF16


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_every_bit_pattern_crosses_both_ways(backend, mode):
    values = every_bfloat16()
    expected = bits(values)
    ta = TensorArray(BF16, size=256, clear_after_read=False, mode=mode).unstack(values.to(torch_device()))
    for out in (ta.stack(), ta.gather(list(range(256))), ta.concat().reshape(256, 256)):
        assert out.dtype is BF16 and out.device == ta.device
        assert torch.equal(bits(out), expected)
    assert torch.equal(bits(ta.read(255)), expected[255])
    # write, scatter and split of non-contiguous views take their values as they are.
    columns = values.t()
    by_write = TensorArray(BF16, size=2, mode=mode).write(0, columns[0]).write(1, columns[1])
    assert torch.equal(bits(by_write.stack()), bits(columns[:2]))
    by_scatter = TensorArray(BF16, size=256, mode=mode).scatter(list(range(255, -1, -1)), columns)
    assert torch.equal(bits(by_scatter.stack()), bits(columns.flip(0)))
    flat = values.reshape(-1)[::2]                          # every other element: strided
    by_split = TensorArray(BF16, size=2, mode=mode).split(flat, [flat.shape[0] // 2] * 2)
    assert torch.equal(bits(by_split.concat()), bits(flat))


def test_a_read_value_is_the_callers_own(backend):
    values = every_bfloat16()[:3]
    ta = TensorArray(BF16, size=3, clear_after_read=False).unstack(values.to(torch_device()))
    ta.read(0).zero_()
    ta.stack().fill_(1.0)
    assert torch.equal(bits(ta.stack()), bits(values))


def test_gradients_equal_the_list_models_bit_for_bit(backend):
    """Each value's gradient has one or two terms (slot 1 is read twice), which add the
    same in any order: ours and the list model's agree bit for bit, in bfloat16."""
    x, h = leaf(4, 3, seed=1), leaf(3, seed=2)
    w = torch.randn(6, 3, generator=torch.Generator().manual_seed(3)).to(BF16).to(torch_device())

    def ours(x, h):
        inputs = TensorArray(BF16, size=4, clear_after_read=False).unstack(x)
        states = TensorArray(BF16, size=0, dynamic_size=True)
        state = h
        for t in range(4):
            state = torch.tanh(inputs.read(t) * w[t] + state)
            states = states.write(t, state)
        extra = (inputs.gather([1, 3]) * w[4:6]).sum()
        return (states.stack() ** 2).sum() + extra

    def reference(x, h):
        rows, outputs, state = list(x.unbind(0)), [], h
        for t in range(4):
            state = torch.tanh(rows[t] * w[t] + state)
            outputs.append(state)
        extra = (torch.stack([rows[1], rows[3]]) * w[4:6]).sum()
        return (torch.stack(outputs) ** 2).sum() + extra

    before = open_array_names()
    got = torch.autograd.grad(ours(x, h), (x, h))
    expected = torch.autograd.grad(reference(x, h), (x, h))
    for mine, theirs in zip(got, expected):
        assert mine.dtype is BF16 and torch.equal(bits(mine), bits(theirs))
    assert not opened_since(before) and open_passes() == 0


def test_repeated_gather_indices_add_as_tensorflow_does(backend):
    """Many terms into one slot: the gradient array adds them in arrival order, each sum
    rounded to bfloat16 once (TensorFlow's aggregation): a Python loop is the reference."""
    x = leaf(3, 5, seed=4)
    indices = [2, 0, 2, 2, 1, 2, 0, 2]
    grads = torch.randn(len(indices), 5, generator=torch.Generator().manual_seed(5)).to(BF16).to(torch_device())
    ta = TensorArray(BF16, size=3, clear_after_read=False).unstack(x)
    (got,) = torch.autograd.grad(ta.gather(indices), x, grads)
    expected = np.zeros((3, 5), np.float32).astype(ml_dtypes.bfloat16)
    seen = set()
    for position, slot in enumerate(indices):
        for column in range(5):
            term = ml_dtypes.bfloat16(float(grads[position, column]))
            expected[slot, column] = term if slot not in seen else \
                ml_dtypes.bfloat16(_flushed(float(expected[slot, column])) + _flushed(float(term)))
        seen.add(slot)
    assert got.dtype is BF16
    assert torch.equal(bits(got), torch.from_numpy(expected.view(np.int16)))


def _flushed(value):
    return 0.0 * value if abs(value) < 2.0 ** -126 else value


def test_second_order_through_bfloat16_arrays(backend):
    """create_graph=True: the gradient rules run as bridge ops on bfloat16 gradient arrays."""
    x = leaf(3, 2, seed=6)

    def ours(x):
        ta = TensorArray(BF16, size=3).unstack(x)
        return (torch.stack([ta.read(2), ta.read(0), ta.read(1)]) ** 3).sum()

    def reference(x):
        rows = x.unbind(0)
        return (torch.stack([rows[2], rows[0], rows[1]]) ** 3).sum()

    results = []
    for program in (ours, reference):
        (first,) = torch.autograd.grad(program(x), x, create_graph=True)
        (second,) = torch.autograd.grad((first ** 2).sum(), x)
        results.append((first, second))
    assert torch.equal(bits(results[0][0]), bits(results[1][0]))
    assert torch.equal(bits(results[0][1]), bits(results[1][1]))


def test_dtype_errors_name_bfloat16(backend):
    with pytest.raises(InvalidArgumentError, match="TensorArray dtype is double but Op is trying to write dtype "
                                                   "bfloat16"):
        TensorArray(torch.float64, size=1).write(0, torch.ones(2, dtype=BF16, device=torch_device()))
    with pytest.raises(InvalidArgumentError, match="TensorArray dtype is bfloat16 but Op is trying to write dtype "
                                                   "float"):
        TensorArray(BF16, size=1).write(0, torch.ones(2, device=torch_device()))
    with pytest.raises(InvalidArgumentError, match="op elements float but list elements bfloat16"):
        TensorArray(BF16, size=1, mode="tf2").write(0, torch.ones(2, device=torch_device()))


def test_without_ml_dtypes_bfloat16_says_what_to_install():
    code = (
        "import sys\n"
        "sys.modules['ml_dtypes'] = None          # import ml_dtypes raises ImportError\n"
        "import torch\n"
        "import gpu_tensorarray as gta\n"
        "from gpu_tensorarray import errors\n"
        "from gpu_tensorarray.torch import TensorArray\n"
        "with gta.device('numpy'):\n"
        "    for make in (lambda: TensorArray(torch.bfloat16, size=1),\n"
        "                 lambda: TensorArray(torch.float32, size=1).write(0, torch.ones(1, dtype=torch.bfloat16))):\n"
        "        try:\n"
        "            make()\n"
        "        except errors.UnimplementedError as error:\n"
        "            print(error)\n"
        "        else:\n"
        "            raise AssertionError('no error')\n"
        "    assert TensorArray(torch.float32, size=1).write(0, torch.ones(1)).read(0).item() == 1.0\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("pip install ml_dtypes") == 2, result.stdout


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_python_and_numpy_values_convert_to_bfloat16(backend, mode):
    """Values that are not tensors: Python numbers and lists rounded to bfloat16 (to nearest
    even, as ml_dtypes rounds), and ml_dtypes arrays taken as they are."""
    exact = np.array([1.5, -2.25], ml_dtypes.bfloat16)
    rounded = 1.0 + 2.0 ** -9                              # between two bfloat16 values: to the even one
    ta = TensorArray(BF16, size=4, mode=mode).write(0, 1.5).write(1, rounded).write(2, exact[1])
    ta = ta.scatter([3], exact[:1])
    expected = np.array([1.5, ml_dtypes.bfloat16(rounded), -2.25, 1.5], ml_dtypes.bfloat16)
    assert torch.equal(bits(ta.stack()), torch.from_numpy(expected.view(np.int16)))
    unstacked = TensorArray(BF16, size=2, mode=mode).unstack([[1.0, 2.0], [3.0, 4.0]])
    assert unstacked.stack().tolist() == [[1.0, 2.0], [3.0, 4.0]]
