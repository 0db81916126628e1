"""examples/rnn_torch.py: the GRU through TensorArrays has the gradients of the same model
written with a Python list and torch.stack (float64, relative difference <= 1e-10), on
every backend, and trains (its loss falls) with no hand-written backward.

Needs torch: skipped without it, except under CI=true, where a missing torch fails."""

import importlib.util
import pathlib

import pytest

from gpu_tensorarray.testing import import_torch, open_array_names

torch = import_torch()
from torch_helpers import opened_since, torch_device  # noqa: E402

_PATH = pathlib.Path(__file__).resolve().parents[2] / "examples" / "rnn_torch.py"


@pytest.fixture(scope="module")
def rnn():
    spec = importlib.util.spec_from_file_location("rnn_torch_example", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("seed, steps", [(0, None), (1, 1), (2, 13)])
def test_gradients_equal_the_list_and_stack_model(rnn, backend, seed, steps):
    before = open_array_names()
    difference = rnn.max_relative_difference(seed=seed, backend=backend, steps=steps)
    print(f"\n{backend.name} seed {seed}: max relative gradient difference {difference:.3e}")
    assert difference <= 1e-10
    assert not opened_since(before)              # forward arrays freed, gradient arrays closed


def test_the_loop_length_comes_from_the_data(rnn, backend):
    device = torch_device(backend)
    model = rnn.RunningMeanModel().to(device, torch.float64)
    generator = torch.Generator().manual_seed(0)
    for steps in (3, 8):
        x, _ = rnn.make_batch(generator, dtype=torch.float64, min_steps=steps, max_steps=steps)
        x = x.to(device)
        predictions, states = model(x)
        reference_predictions, reference_states = model.forward_list(x)
        assert predictions.shape == (steps, 16) and states.shape == (steps, 16, 32)
        assert torch.allclose(predictions, reference_predictions, rtol=1e-12, atol=1e-14)
        assert torch.allclose(states, reference_states, rtol=1e-12, atol=1e-14)


def test_training_lowers_the_loss(rnn):
    losses = rnn.train(steps=60, seed=0, backend="numpy", report_every=0)
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    print(f"\nloss: mean of the first 5 steps {first:.5f}, of the last 5 {last:.5f}")
    assert last < first / 5
