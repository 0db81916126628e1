"""docs/guide.md's recipe for torch and JAX users: values go in as they are (DLPack
import), and come out as torch tensors without a copy (torch.from_dlpack) or as JAX
arrays (jnp.asarray: JAX asks NumPy for an unversioned DLPack capsule, which cannot
carry NumPy's read-only flag, so on the CPU it copies). Each test is skipped where
its library is not installed (neither is a dependency)."""

import numpy as np
import pytest

import gpu_tensorarray as gta


def _address(array):
    return array.__array_interface__["data"][0]


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_torch_both_ways(mode):
    torch = pytest.importorskip("torch")
    with gta.device("cpu"):
        rows = torch.arange(6, dtype=torch.float32).reshape(2, 3)
        ta = gta.TensorArray("float32", size=2, mode=mode, clear_after_read=False).unstack(rows)     # torch -> ours
        stacked = ta.stack()
        as_torch = torch.from_dlpack(stacked)            # ours -> torch: a copy (docs/guide.md, "Returned values")
        assert as_torch.data_ptr() != _address(stacked)
        assert torch.equal(as_torch, rows)
        single = torch.from_dlpack(ta.read(1))
        assert torch.equal(single, rows[1])
        # The tensors are the caller's own: writing into them never changes the array.
        as_torch.mul_(100.0)
        single.mul_(100.0)
        assert gta.to_numpy(ta.stack()).tolist() == rows.tolist()


def test_torch_gradient_round_trip():
    """A torch value through a TF2 TensorArray and back, gradients by the tape."""
    torch = pytest.importorskip("torch")
    with gta.device("cpu"):
        x = np.asarray(torch.tensor([1.0, 2.0], dtype=torch.float64).numpy())
        with gta.GradientTape() as tape:
            ta = gta.TensorArray("float64", size=2, mode="tf2").write(0, x).write(1, x)
            y = ta.stack()
        grad = torch.from_dlpack(tape.gradient(y, x))
        assert grad.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_jax_both_ways(mode):
    jnp = pytest.importorskip("jax.numpy")
    with gta.device("cpu"):
        rows = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
        ta = gta.TensorArray("float32", size=2, mode=mode, clear_after_read=False).unstack(rows)     # JAX -> ours (DLPack)
        as_jax = jnp.asarray(ta.stack())                                     # ours -> JAX (a copy on the CPU)
        assert as_jax.dtype == jnp.float32 and bool((as_jax == rows).all())
        assert bool((jnp.asarray(ta.read(1)) == rows[1]).all())
