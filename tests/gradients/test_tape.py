"""GradientTape and check_gradients (docs/semantics.md §5.5): TensorFlow's gradient
scenarios (from its tensor_array_ops_test.py, docs/semantics.md §7) replayed through
the tape, on every backend."""

import gc
import threading

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import errors, gradcheck, gradients, raw_ops

F32 = np.dtype("float32")


def arr(backend, value, dtype="float32"):
    return backend.asarray(np.asarray(value, dtype=dtype))


def host(value):
    return gta.to_numpy(value)


def live():
    gc.collect()           # unclosed arrays of earlier tests caught in reference cycles go now, not mid-test
    return gta.stats()["live_arrays"]


def assert_on(backend, *values):
    for value in values:
        assert isinstance(value, backend.array_type), type(value)


# -- TensorFlow's scenarios -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_tf24_gradient_write_read(backend, dtype):
    """testTensorArrayGradientWriteRead: four separate gradient computations, one forward."""
    c = lambda x: arr(backend, x, dtype)       # noqa: E731
    value_0, value_1 = c([[4.0, 5.0]]), c(3.0)
    with gta.GradientTape(persistent=True) as tape:
        ta = gta.TensorArray(dtype, size=3, infer_shape=False, clear_after_read=False)
        w1 = ta.write(0, value_0).write(1, value_1)
        r0, r1, r0_2 = w1.read(0), w1.read(1), w1.read(0)
    just_r0 = tape.gradient([r0], [value_0], output_gradients=[c([[2.0, 3.0]])])
    np.testing.assert_array_equal(host(just_r0[0]), [[2.0, 3.0]])
    r0_r0_2 = tape.gradient([r0, r0_2], [value_0], output_gradients=[c([[2.0, 3.0]]), c([[1.0, -1.0]])])
    np.testing.assert_array_equal(host(r0_r0_2[0]), [[3.0, 2.0]])
    just_r1 = tape.gradient([r1], [value_1], output_gradients=[c(-2.0)])
    np.testing.assert_array_equal(host(just_r1[0]), -2.0)
    both = tape.gradient([r0, r0_2, r1], [value_0, value_1],
                         output_gradients=[c([[2.0, 3.0]]), c([[1.0, -1.0]]), c(-2.0)])
    np.testing.assert_array_equal(host(both[0]), [[3.0, 2.0]])
    np.testing.assert_array_equal(host(both[1]), -2.0)
    assert both[0].dtype == np.dtype(dtype) and both[1].shape == ()
    assert_on(backend, *both)
    assert tape.sources_used == ["gradients", "gradients_1", "gradients_2", "gradients_3"]


def test_tf25_gradient_write_pack_concat_and_read(backend):
    value_0, value_1 = arr(backend, [-1.0, 1.0]), arr(backend, [-10.0, 10.0])
    with gta.GradientTape() as tape:
        ta = gta.TensorArray(F32, size=2, clear_after_read=False)
        w1 = ta.write(0, value_0).write(1, value_1)
        p0, r0, s0 = w1.stack(), w1.read(0), w1.concat()
    grads = tape.gradient([p0, r0, s0], [value_0, value_1],
                          output_gradients=[arr(backend, [[2.0, 3.0], [4.0, 5.0]]), arr(backend, [-0.5, 1.5]),
                                            arr(backend, [20.0, 30.0, 40.0, 50.0])])
    np.testing.assert_allclose(host(grads[0]), [2.0 - 0.5 + 20.0, 3.0 + 1.5 + 30.0])
    np.testing.assert_array_equal(host(grads[1]), [4.0 + 40.0, 5.0 + 50.0])


def test_tf27_gradient_unpack_read(backend):
    value = arr(backend, [[1.0, -1.0], [10.0, -10.0]])
    with gta.GradientTape() as tape:
        w = gta.TensorArray(F32, size=2, clear_after_read=False).unstack(value)
        r0, r0_1, r1 = w.read(0), w.read(0), w.read(1)
    grad = tape.gradient([r0, r0_1, r1], [value], output_gradients=[
        arr(backend, [2.0, 3.0]), arr(backend, [-1.5, 1.5]), arr(backend, [4.0, 5.0])])
    assert len(grad) == 1
    np.testing.assert_array_equal(host(grad[0]), [[2.0 - 1.5, 3.0 + 1.5], [4.0, 5.0]])


def test_tf28_gradient_split_concat(backend):
    value = arr(backend, [[1.0, -1.0], [10.0, -10.0], [100.0, -100.0]])
    grad_ys = arr(backend, [[2.0, -2.0], [20.0, -20.0], [200.0, -200.0]])
    with gta.GradientTape() as tape:
        r = gta.TensorArray(F32, size=2, infer_shape=False).split(value, [2, 1]).concat()
    grad = tape.gradient([r], [value], output_gradients=[grad_ys])
    np.testing.assert_array_equal(host(grad[0]), host(grad_ys))
    assert grad[0] is not grad_ys


def test_tf29_gradient_dynamic_unpack_read(backend):
    value = arr(backend, [[1.0, -1.0], [10.0, -10.0]])
    with gta.GradientTape() as tape:
        w = gta.TensorArray(F32, size=0, dynamic_size=True).unstack(value)
        r0, r1 = w.read(0), w.read(1)
    grad = tape.gradient([r0, r1], [value], output_gradients=[arr(backend, [2.0, 3.0]), arr(backend, [4.0, 5.0])])
    np.testing.assert_array_equal(host(grad[0]), [[2.0, 3.0], [4.0, 5.0]])


def test_tf36_grad_serial_two_loops(backend):
    """testGradSerialTwoLoops: x_0 = x, x_i = 2 * read(i - 1) for i < 5, zeros after, stack.
    The multiplications are the program's own math, so the chain through them is
    hand-written: one gradient computation per step on a persistent tape."""
    num_steps = 100
    x = arr(backend, 2.0)
    z = arr(backend, 0.0)
    written, reads = [x], []
    with gta.GradientTape(persistent=True) as tape:
        acc = gta.TensorArray(F32, size=num_steps, clear_after_read=False, element_shape=())
        acc = acc.write(0, x)
        for i in range(1, 5):
            reads.append(acc.read(i - 1))
            written.append(arr(backend, 2.0 * host(reads[-1])))
            acc = acc.write(i, written[-1])
        for i in range(5, num_steps):
            acc = acc.write(i, z)
        r = acc.stack()
    direct = tape.gradient(r, written)                 # d sum(r) / d x_i through the stack: ones
    total = host(direct[4])
    for i in range(3, -1, -1):                          # x_{i+1} = 2 * read(i)
        through_read = tape.gradient(reads[i], written[i], output_gradients=arr(backend, 2.0 * total))
        total = host(direct[i]) + host(through_read)
    assert float(total) == 31.0
    assert len(tape.sources_used) == 5 and len(set(tape.sources_used)) == 5


def test_tf38_sum_of_two_reads_without_repeat_grad(backend):
    a = arr(backend, np.arange(15).reshape(3, 5) + 1)
    b = arr(backend, np.arange(15).reshape(3, 5) + 16)
    g0 = arr(backend, -(np.arange(15).reshape(3, 5) + 1))
    with gta.GradientTape(persistent=True) as tape:
        ta = gta.TensorArray(F32, size=2).write(0, a).write(1, b)
        read_a, read_b = ta.read(0), ta.read(1)       # c = read_a + read_b: dc/dread_* = 1
    grad_a = tape.gradient([read_a, read_b], [a], output_gradients=[g0, g0])[0]
    grad_b = tape.gradient([read_a, read_b], [b], output_gradients=[g0, g0])[0]
    np.testing.assert_array_equal(host(grad_a), host(g0))
    np.testing.assert_array_equal(host(grad_b), host(g0))
    joint_a, joint_b = tape.gradient([read_a, read_b], [a, b], output_gradients=[g0, g0])
    np.testing.assert_array_equal(host(joint_a), host(g0))
    np.testing.assert_array_equal(host(joint_b), host(g0))


def test_tf48_gradient_when_not_all_components_read(backend):
    x = arr(backend, [2.0, 3.0])
    with gta.GradientTape() as tape:
        r0 = gta.TensorArray(F32, size=2).unstack(x).read(0)
    grad = tape.gradient([r0], [x], output_gradients=[arr(backend, 1.0)])
    np.testing.assert_array_equal(host(grad[0]), [1.0, 0.0])


def test_tf49_write_but_not_all_components_read(backend):
    x0, x1 = arr(backend, 5.0), arr(backend, 10.0)
    with gta.GradientTape() as tape:
        r0 = gta.TensorArray(F32, size=2).write(0, x0).write(1, x1).read(0)
    grads = tape.gradient([r0], [x0, x1], output_gradients=[arr(backend, 1.0)])
    assert [float(host(g)) for g in grads] == [1.0, 0.0]
    assert_on(backend, *grads)


def test_tf50_unpack_dynamic(backend):
    x = arr(backend, [1.0, 2.0, 3.0])
    with gta.GradientTape() as tape:
        w1 = gta.TensorArray(F32, size=3, dynamic_size=True).unstack(x).write(3, arr(backend, 4.0))
        r = w1.stack()
    np.testing.assert_array_equal(host(r), [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(host(tape.gradient([r], [x])[0]), [1.0, 1.0, 1.0])


def test_tf51_split_dynamic(backend):
    x = arr(backend, [1.0, 2.0, 3.0])
    with gta.GradientTape() as tape:
        w1 = gta.TensorArray(F32, size=3, dynamic_size=True).split(x, [1, 1, 1]).write(3, arr(backend, [4.0]))
        r = w1.concat()
    np.testing.assert_array_equal(host(r), [1.0, 2.0, 3.0, 4.0])
    # The grad array's concat uses the forward's marked size (3 split pieces), not its size 4.
    np.testing.assert_array_equal(host(tape.gradient([r], [x])[0]), [1.0, 1.0, 1.0])


def test_tf57_scatter_read_and_gradients(backend):
    value = arr(backend, [[1.0, -1.0], [10.0, -10.0]])
    with gta.GradientTape() as tape:
        w = gta.TensorArray(F32, size=0, dynamic_size=True).scatter([1, 8], value)
        r0, r1 = w.read(1), w.read(8)
    np.testing.assert_array_equal(host(r0), [1.0, -1.0])
    np.testing.assert_array_equal(host(r1), [10.0, -10.0])
    grad = tape.gradient([r0, r1], [value], output_gradients=[arr(backend, [2.0, 3.0]), arr(backend, [4.0, 5.0])])
    np.testing.assert_array_equal(host(grad[0]), [[2.0, 3.0], [4.0, 5.0]])


def test_tf58_scatter_partial_read_and_gradients(backend):
    value = arr(backend, [[1.0, -1.0], [10.0, -10.0]])
    with gta.GradientTape() as tape:
        r0 = gta.TensorArray(F32, size=0, dynamic_size=True).scatter([1, 8], value).read(1)
    grad = tape.gradient([r0], [value], output_gradients=[arr(backend, [2.0, 3.0])])[0]
    np.testing.assert_array_equal(host(grad), [[2.0, 3.0], [0.0, 0.0]])


def test_tf60_write_gather_and_gradients(backend):
    values = arr(backend, [[1.0 * x, -1.0 * x] for x in range(10)])
    with gta.GradientTape() as tape:
        g = gta.TensorArray(F32, size=0, dynamic_size=True).unstack(values).gather([1, 8])
    np.testing.assert_array_equal(host(g), [[1.0, -1.0], [8.0, -8.0]])
    grad = tape.gradient(g, values, output_gradients=arr(backend, [[2.0, 3.0], [4.0, 5.0]]))
    expected = np.zeros((10, 2))
    expected[1], expected[8] = [2.0, 3.0], [4.0, 5.0]
    np.testing.assert_array_equal(host(grad), expected)


# -- two gradient computations (TensorArrayGradV3's docs) -------------------------------------------

def test_two_gradient_computations_keep_separate_accumulators(backend):
    before = live()
    states = [arr(backend, np.full(3, t + 1.0)) for t in range(4)]
    with gta.GradientTape(persistent=True) as tape:
        ta = gta.TensorArray(F32, size=0, dynamic_size=True, clear_after_read=False)
        for t, state in enumerate(states):
            ta = ta.write(t, state)
        every = [ta.read(t) for t in range(4)]
        first, first_again, last = ta.read(0), ta.read(0), ta.read(3)
    forward = gta.registry.lookup(ta.handle)
    assert forward.dynamic_size
    d1 = tape.gradient(every, states, output_gradients=[arr(backend, np.full(3, t + 1.0)) for t in range(4)])
    # The first computation locked the forward array's size.
    assert not forward.dynamic_size and int(host(ta.size())) == 4
    with pytest.raises(errors.InvalidArgumentError, match="Tried to write to index 4 but array is not resizeable"):
        ta.write(4, states[0])
    d2 = tape.gradient([first, first_again, last], states,
                       output_gradients=[arr(backend, np.ones(3)), arr(backend, np.ones(3)),
                                         arr(backend, np.full(3, 2.0))])
    assert tape.sources_used == ["gradients", "gradients_1"]
    assert dict(forward.grads) == {}        # each computation ended: its gradient array closed and gone
    np.testing.assert_array_equal([host(g)[0] for g in d1], [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal([host(g)[0] for g in d2], [2.0, 0.0, 0.0, 2.0])
    # Computation 1 again: its own fresh accumulator, the same values (never doubled).
    d1_again = tape.gradient(every, states, output_gradients=[arr(backend, np.full(3, t + 1.0)) for t in range(4)])
    np.testing.assert_array_equal([host(g)[0] for g in d1_again], [1.0, 2.0, 3.0, 4.0])
    assert tape.sources_used[-1] == "gradients_2"
    # Every gradient array was closed by the tape; only the forward array is left.
    assert live() == before + 1
    ta.close()
    assert live() == before


def test_tapes_sharing_a_forward_array_never_share_an_accumulator(backend):
    x = arr(backend, [1.0, 2.0])
    with gta.GradientTape() as outer:
        with gta.GradientTape() as inner:
            ta = gta.TensorArray(F32, size=1, clear_after_read=False).write(0, x)
            r = ta.read(0)
    np.testing.assert_array_equal(host(inner.gradient(r, x)), [1.0, 1.0])
    np.testing.assert_array_equal(host(outer.gradient(r, x, output_gradients=arr(backend, [3.0, 4.0]))), [3.0, 4.0])
    # The inner computation ended (its gradient array closed and dropped): its name is free again.
    assert inner.sources_used == ["gradients"] and outer.sources_used == ["gradients"]


# -- what a gradient is made of ---------------------------------------------------------------------

def test_value_written_at_two_indices_gets_the_sum(backend):
    x = arr(backend, [1.0, 2.0])
    with gta.GradientTape() as tape:
        ta = gta.TensorArray(F32, size=3).write(0, x).write(2, x)
        stacked = ta.stack()
    grad = tape.gradient(stacked, x, output_gradients=arr(backend, [[1.0, 2.0], [5.0, 5.0], [10.0, 20.0]]))
    np.testing.assert_array_equal(host(grad), [11.0, 22.0])


def test_gather_with_repeated_indices_matches_np_add_at(backend):
    rng = np.random.default_rng(0)
    x = arr(backend, rng.standard_normal((6, 3)), "float64")
    indices = [5, 0, 5, 2, 5, 0, 3]
    out_grad = rng.standard_normal((len(indices), 3))
    with gta.GradientTape() as tape:
        gathered = gta.TensorArray("float64", size=6, clear_after_read=False).unstack(x).gather(indices)
    grad = tape.gradient(gathered, x, output_gradients=arr(backend, out_grad, "float64"))
    expected = np.zeros((6, 3))
    np.add.at(expected, indices, out_grad)
    np.testing.assert_array_equal(host(grad), expected)     # same arrival order: bitwise equal


def test_scatter_then_gather_repeated_indices_through_two_arrays(backend):
    rng = np.random.default_rng(1)
    x = arr(backend, rng.standard_normal((4, 2)), "float64")
    with gta.GradientTape() as tape:
        ta = gta.TensorArray("float64", size=8, clear_after_read=False).scatter([6, 1, 3, 0], x)
        gathered = ta.gather([1, 1, 0, 6, 1])
    out_grad = rng.standard_normal((5, 2))
    grad = tape.gradient(gathered, x, output_gradients=arr(backend, out_grad, "float64"))
    slots = np.zeros((8, 2))
    np.add.at(slots, [1, 1, 0, 6, 1], out_grad)
    np.testing.assert_array_equal(host(grad), slots[[6, 1, 3, 0]])


def test_unwritten_and_unread_slots(backend):
    """Reads of unwritten slots (zeros) pass gradients nowhere; written but unread
    slots get zero gradients of their own shape."""
    x1, x3 = arr(backend, [1.0, 2.0]), arr(backend, [3.0, 4.0])
    with gta.GradientTape() as tape:
        ta = gta.TensorArray(F32, size=5, element_shape=(2,), clear_after_read=False)
        ta = ta.write(1, x1).write(3, x3)
        zeros_read = ta.read(0)
        stacked = ta.gather([0, 1, 2])
    np.testing.assert_array_equal(host(zeros_read), [0.0, 0.0])
    g1, g3 = tape.gradient([zeros_read, stacked], [x1, x3],
                           output_gradients=[arr(backend, [9.0, 9.0]),
                                             arr(backend, [[7.0, 7.0], [1.0, 2.0], [8.0, 8.0]])])
    np.testing.assert_array_equal(host(g1), [1.0, 2.0])
    np.testing.assert_array_equal(host(g3), [0.0, 0.0])
    assert_on(backend, g1, g3)


def test_unconnected_sources_get_zeros_and_arrays_stay_untouched(backend):
    x, y = arr(backend, [1.0, 2.0]), arr(backend, [[3.0]], "float64")
    with gta.GradientTape() as tape:
        ta = gta.TensorArray(F32, size=0, dynamic_size=True).write(0, x)
        other = gta.TensorArray("float64", size=0, dynamic_size=True).write(0, y)
        r = ta.read(0)
    gx, gy, g_outside = tape.gradient(r, (x, y, arr(backend, [5.0, 6.0, 7.0])), unconnected_gradients="zero")
    np.testing.assert_array_equal(host(gx), [1.0, 1.0])
    assert host(gy).shape == (1, 1) and gy.dtype == np.float64 and not host(gy).any()
    assert host(g_outside).shape == (3,) and not host(g_outside).any()
    # The array no target read from got no gradient array, so it can still grow.
    assert gta.registry.lookup(other.handle).dynamic_size and not gta.registry.lookup(other.handle).grads
    other.write(1, y)


def test_torch_tensor_sources(backend):
    # A write takes a torch tensor as its value (through DLPack), so the tape knows it as a source:
    # its gradient is the array's, as for any value; unconnected ones get zeros of its dtype.
    torch = pytest.importorskip("torch")
    x, unwritten = torch.tensor([1.0, 2.0]), torch.zeros((2, 3), dtype=torch.float64)
    counts = torch.tensor([1, 2])
    with gta.GradientTape() as tape:
        ta = gta.TensorArray(F32, size=3).write(0, x).write(2, x)
        ints = gta.TensorArray("int64", size=1).write(0, counts)
        stacked, read_ints = ta.stack(), ints.read(0)
    out_grad = arr(backend, [[1.0, 2.0], [5.0, 5.0], [10.0, 20.0]])
    gx, g_unwritten, g_counts = tape.gradient([stacked, read_ints], [x, unwritten, counts],
                                              output_gradients=[out_grad, None], unconnected_gradients="zero")
    np.testing.assert_array_equal(host(gx), host(out_grad)[0] + host(out_grad)[2])
    assert host(g_unwritten).shape == (2, 3) and g_unwritten.dtype == np.float64 and not host(g_unwritten).any()
    assert g_counts.dtype == np.int64 and host(g_counts).tolist() == [0, 0]     # integers: not connected


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_torch_tensors_written_by_every_op_are_sources(backend, mode):
    """Write, unstack, scatter and split of torch tensors: each tensor is a source, with the
    gradient the op's rule gives it (mode tf2 converted them first: their gradients were None)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    row, rows, scattered_rows, joined = (torch.from_numpy(rng.random(shape)) for shape in [(2,), (2, 2), (2, 2), (3,)])
    grads = [arr(backend, rng.random(shape), "float64") for shape in [(2,), (2, 2), (2, 2), (3,)]]
    with gta.GradientTape() as tape:
        targets = [gta.TensorArray("float64", size=1, mode=mode).write(0, row).read(0),
                   gta.TensorArray("float64", size=2, mode=mode).unstack(rows).stack(),
                   gta.TensorArray("float64", size=2, mode=mode).scatter([1, 0], scattered_rows).stack(),
                   gta.TensorArray("float64", size=2, mode=mode, infer_shape=False).split(joined, [1, 2]).concat()]
    ours = tape.gradient(targets, [row, rows, scattered_rows, joined], output_gradients=grads)
    expected = [host(grads[0]), host(grads[1]), host(grads[2])[[1, 0]], host(grads[3])]
    for position, (gradient, want) in enumerate(zip(ours, expected)):
        assert gradient is not None, position
        np.testing.assert_array_equal(host(gradient), want)


def test_chained_through_two_arrays(backend):
    """A value read from one array and written, unchanged, into another."""
    x = arr(backend, [[1.0, 2.0], [3.0, 4.0]])
    with gta.GradientTape() as tape:
        first = gta.TensorArray(F32, size=2).unstack(x)
        middle = first.read(1)
        second = gta.TensorArray(F32, size=3).write(2, middle)
        out = second.read(2)
    np.testing.assert_array_equal(host(tape.gradient(out, x, output_gradients=arr(backend, [5.0, 6.0]))),
                                  [[0.0, 0.0], [5.0, 6.0]])


def test_target_that_is_its_own_source(backend):
    x = arr(backend, [1.0, 2.0])
    given = arr(backend, [3.0, 4.0])
    with gta.GradientTape() as tape:
        r = gta.TensorArray(F32, size=1).write(0, x).read(0)
    g_r, g_x = tape.gradient(r, [r, x], output_gradients=given)
    np.testing.assert_array_equal(host(g_r), [3.0, 4.0])
    np.testing.assert_array_equal(host(g_x), [3.0, 4.0])
    assert g_r is not given


def test_structures_defaults_and_writable_results(backend):
    x = arr(backend, [[1.0, 2.0], [3.0, 4.0]])
    with gta.GradientTape(persistent=True) as tape:
        ta = gta.TensorArray(F32, size=2, clear_after_read=False).unstack(x)
        r0, s = ta.read(0), ta.stack()
    single = tape.gradient(r0, x)                        # single target, single source, ones
    assert not isinstance(single, (list, tuple))
    np.testing.assert_array_equal(host(single), [[1.0, 1.0], [0.0, 0.0]])
    as_tuple = tape.gradient((r0, s), (x,), output_gradients=(None, arr(backend, [[1.0, 1.0], [2.0, 2.0]])))
    assert isinstance(as_tuple, tuple) and len(as_tuple) == 1
    np.testing.assert_array_equal(host(as_tuple[0]), [[2.0, 2.0], [2.0, 2.0]])
    as_list = tape.gradient([s], [x, x], output_gradients=[[[1.0, 2.0], [3.0, 4.0]]])   # Python lists convert
    assert isinstance(as_list, list) and len(as_list) == 2
    np.testing.assert_array_equal(host(as_list[1]), [[1.0, 2.0], [3.0, 4.0]])
    assert_on(backend, single, *as_tuple, *as_list)
    if backend.array_type is np.ndarray:
        single[0, 0] = 5.0                               # results are the caller's: writable
        as_list[0] += 1


def test_gradient_argument_errors(backend):
    x = arr(backend, [1.0, 2.0])
    with gta.GradientTape(persistent=True) as tape:
        r = gta.TensorArray(F32, size=1).write(0, x).read(0)
    with pytest.raises(errors.InvalidArgumentError, match="shape"):
        tape.gradient(r, x, output_gradients=arr(backend, [1.0, 2.0, 3.0]))
    with pytest.raises(errors.InvalidArgumentError, match="dtype"):
        tape.gradient(r, x, output_gradients=arr(backend, [1.0, 2.0], "float64"))
    with pytest.raises(errors.InvalidArgumentError, match="one entry per target"):
        tape.gradient([r], x, output_gradients=[arr(backend, [1.0, 2.0])] * 2)
    with pytest.raises(errors.InvalidArgumentError, match=r"sources\[0\] is a float, not an array"):
        tape.gradient(r, [[1.0, 2.0]])                    # a structure (tf.nest's) whose leaves are no arrays
    with pytest.raises(errors.InvalidArgumentError, match=r"targets\[1\] is a NoneType, not an array"):
        tape.gradient([r, None], x)
    for unconvertible in ("abc", [[1.0, 2.0], [3.0]]):          # never NumPy's own ValueError
        with pytest.raises(errors.InvalidArgumentError, match="cannot be converted to the target's dtype"):
            tape.gradient(r, x, output_gradients=unconvertible)


def test_empty_unstack_and_split(backend):
    """Writing nothing has an empty gradient, even where the array's element shape is
    unknown (a Gather of [] / a Concat of nothing on the grad array would need one)."""
    empty, y = arr(backend, np.zeros((0, 3))), arr(backend, [1.0, 2.0, 3.0])
    with gta.GradientTape() as tape:
        ta = gta.TensorArray(F32, size=0, dynamic_size=True, infer_shape=False).unstack(empty).write(0, y)
        gta.TensorArray(F32, size=0, infer_shape=False).split(empty, [])
        r = ta.read(0)
    g_empty, g_y, g_none = tape.gradient(r, [empty, y, empty])
    assert host(g_empty).shape == (0, 3) and host(g_none).shape == (0, 3)
    np.testing.assert_array_equal(host(g_y), [1.0, 1.0, 1.0])


def test_non_persistent_tape_computes_once(backend):
    x = arr(backend, [1.0])
    with gta.GradientTape() as tape:
        r = gta.TensorArray(F32, size=1).write(0, x).read(0)
    tape.gradient(r, x)
    with pytest.raises(errors.FailedPreconditionError,
                       match=r"A non-persistent GradientTape can only be used to compute one set of gradients") as info:
        tape.gradient(r, x)
    assert isinstance(info.value, RuntimeError)
    assert tape.operations == ()                          # the recording was released
    with gta.GradientTape() as inside:                    # used inside its own with: records nothing more
        ta = gta.TensorArray(F32, size=2).write(0, x)
        inside.gradient(ta.read(0), x)
        ta.write(1, x)
    assert inside.operations == ()
    # Entered again, as TensorFlow's eager tape, it records afresh, for one more gradient.
    with tape:
        again = gta.TensorArray(F32, size=1).write(0, x).read(0)
    np.testing.assert_array_equal(host(tape.gradient(again, x)), [1.0])
    with pytest.raises(errors.FailedPreconditionError, match="non-persistent"):
        tape.gradient(again, x)


def test_no_leaks(backend):
    before = live()
    x = arr(backend, np.arange(12).reshape(4, 3))
    y = arr(backend, np.arange(6).reshape(6, 1))
    z = arr(backend, [1.0])
    with gta.GradientTape(persistent=True) as tape:
        closed_later = gta.TensorArray(F32, size=1).write(0, z)
        read_closed = closed_later.read(0)
        ta = gta.TensorArray(F32, size=4, clear_after_read=False).unstack(x)
        pieces = gta.TensorArray(F32, size=3, infer_shape=False).split(y, [1, 2, 3])
        reads = [ta.read(i) for i in range(4)]
        stacked, concatenated, joined = ta.stack(), ta.concat(), pieces.concat()
    for _ in range(3):
        gx, gy = tape.gradient([stacked, concatenated, joined] + reads, [x, y])
        np.testing.assert_array_equal(host(gx), np.full((4, 3), 3.0))
        np.testing.assert_array_equal(host(gy), np.ones((6, 1)))
        assert live() == before + 3
    closed_later.close()
    # A gradient computation that fails half way (TensorArrayGradV3 on a closed forward
    # array) closes the gradient arrays it had made already.
    with pytest.raises(errors.InvalidArgumentError, match="has already been closed"):
        tape.gradient([read_closed, stacked, joined], [z, x, y])
    assert all(len(gta.registry.lookup(a.handle).grads) == 0 for a in (ta, pieces))
    assert live() == before + 2
    ta.close()
    pieces.close()
    assert live() == before


# -- recording ------------------------------------------------------------------------------------

def test_records_raw_ops_and_the_class_and_nothing_else(backend):
    assert raw_ops._record is None                        # nothing recording: one None check per op
    x = arr(backend, [[1.0], [2.0]])
    handle, flow = raw_ops.TensorArrayV3(2, F32, clear_after_read=False)
    flow = raw_ops.TensorArrayScatterV3(handle, [0, 1], x, flow)     # before the tape: not recorded
    with gta.GradientTape() as tape:
        assert raw_ops._record is not None
        r = raw_ops.TensorArrayReadV3(handle.name, 1, flow, F32)    # a name handle
        with pytest.raises(errors.InvalidArgumentError):
            raw_ops.TensorArrayReadV3(handle, 7, flow, F32)         # failed ops are not recorded
        with tape.stop_recording():
            raw_ops.TensorArrayReadV3(handle, 0, flow, F32)
        ta = gta.TensorArray(F32, handle=handle, flow=flow)
        s = ta.gather([1, 0])
        raw_ops.TensorArraySizeV3(handle, flow)                     # not differentiable: not recorded
    assert raw_ops._record is None
    assert [op.type for op in tape.operations] == ["TensorArrayReadV3", "TensorArrayGatherV3"]
    assert tape.operations[0].outputs[0] is r and tape.operations[1].outputs[0] is s
    # The scatter was not recorded: x is not connected.
    assert not host(tape.gradient([r, s], x, unconnected_gradients="zero")).any()


def test_nested_tapes_record_and_gradient_ops_are_not_recorded(backend):
    x = arr(backend, [1.0, 2.0])
    with gta.GradientTape(persistent=True) as outer:
        ta = gta.TensorArray(F32, size=1).write(0, x)
        with gta.GradientTape() as inner:
            r = ta.read(0)
        np.testing.assert_array_equal(host(outer.gradient(r, x)), [1.0, 1.0])    # inside the with: allowed
        count = len(outer.operations)
    assert count == 2 and len(inner.operations) == 1
    # The inner tape saw the read, not the write: x is not connected there.
    np.testing.assert_array_equal(host(inner.gradient(r, x, unconnected_gradients="zero")), [0.0, 0.0])


def test_tapes_are_per_thread(backend):
    x = arr(backend, [1.0])
    ta = gta.TensorArray(F32, size=2, clear_after_read=False).write(0, x).write(1, x)
    other_thread = []
    with gta.GradientTape() as tape:
        worker = threading.Thread(target=lambda: other_thread.append(ta.read(1)))
        with gta.device(backend):
            worker.start()
            worker.join()
        ta.read(0)
    assert other_thread and [op.inputs[1] for op in tape.operations] == [0]


def test_reentering_tapes(backend):
    x = arr(backend, [1.0])
    tape = gta.GradientTape(persistent=True)
    with tape:
        ta = gta.TensorArray(F32, size=2).write(0, x)
        with pytest.raises(errors.InvalidArgumentError, match="^Tape is still recording, This can happen if you "
                                                              "try to re-enter an already-active tape.$"):
            tape.__enter__()                              # TensorFlow's ValueError (an InvalidArgumentError)
    with tape:                                            # a persistent tape records again
        r = ta.read(0)
    np.testing.assert_array_equal(host(tape.gradient(r, x)), [1.0])
    with pytest.raises(errors.InvalidArgumentError, match="^Tape is not recording.$"):
        tape.reset()                                      # TensorFlow's ValueError: only inside the block
    assert len(tape.operations) == 2
    with tape:
        tape.reset()
    assert tape.operations == ()


def test_a_non_persistent_tape_s_gradient_inside_its_block_stops_its_recording(backend):
    """As TensorFlow's: later ops are not recorded, and stop_recording() and reset() say it is not
    recording (both were taken)."""
    x = arr(backend, [1.0])
    with gta.GradientTape() as tape:
        ta = gta.TensorArray(F32, size=2, clear_after_read=False).write(0, x)
        np.testing.assert_array_equal(host(tape.gradient(ta.read(0), x)), [1.0])
        with pytest.raises(errors.FailedPreconditionError, match="^Trying to stop recording a tape which is not "
                                                                 "recording.$"):
            with tape.stop_recording():
                pass
        with pytest.raises(errors.InvalidArgumentError, match="^Tape is not recording.$"):
            tape.reset()
        ta.read(0)
    assert tape.operations == () and not gta.raw_ops.recording()
    with gta.GradientTape() as tape:                  # nor inside stop_recording(), as TensorFlow's
        with tape.stop_recording():
            with pytest.raises(errors.InvalidArgumentError, match="^Tape is not recording.$"):
                tape.reset()


# -- check_gradients ----------------------------------------------------------------------------------

def _program(x, y):
    """unstack / write / split into dynamic arrays; reads, gather, stack, concat out."""
    a = gta.TensorArray(x.dtype, size=0, dynamic_size=True, clear_after_read=False).unstack(x)
    b = gta.TensorArray(y.dtype, size=0, dynamic_size=True, infer_shape=False).split(y, [2, 0, 1])
    c = gta.TensorArray(x.dtype, size=0, dynamic_size=True).write(0, a.read(1))
    return [a.read(0), a.gather([2, 2, 0]), a.stack(), b.concat(), c.read(0)]


def test_check_gradients_on_a_tensor_array_program(backend):
    before = live()
    rng = np.random.default_rng(0)
    x = arr(backend, rng.standard_normal((3, 2)), "float64")
    y = arr(backend, rng.standard_normal((3, 2)), "float64")
    error = gta.check_gradients(_program, [x, y])
    assert 0.0 <= error < 1e-9
    details = gta.check_gradients(_program, [x, y], details=True)
    assert isinstance(details, gradcheck.GradientCheck) and len(details.analytic) == 2
    assert details.max_relative_error == max(details.errors)
    assert live() == before                                 # the checker closed what fn made


def test_check_gradients_float32_and_a_single_input(backend):
    x = arr(backend, [[1.0, 2.0], [3.0, 4.0]])
    assert gta.check_gradients(lambda v: gta.TensorArray(F32, size=2).unstack(v).stack(), x) < 1e-3


def test_check_gradients_catches_a_wrong_gradient(backend, monkeypatch):
    def doubled(op, grad, grad_name="gradients"):
        return gradients.read_grad(op, grad + grad, grad_name=grad_name)

    monkeypatch.setitem(gradients.GRADIENTS, "TensorArrayReadV3", doubled)
    x = arr(backend, [[1.0, 2.0], [3.0, 4.0]], "float64")
    program = lambda v: gta.TensorArray("float64", size=2).unstack(v).read(1)     # noqa: E731
    with pytest.raises(gradcheck.GradientCheckError,
                       match=r"relative error 0.5 > rtol 1e-06 for input 0; worst element \(1, 1\)"):
        gta.check_gradients(program, x)
    assert gta.check_gradients(program, x, raise_on_mismatch=False) == pytest.approx(0.5)


def test_check_gradients_needs_real_floats(backend):
    with pytest.raises(errors.InvalidArgumentError, match="real floating"):
        gta.check_gradients(lambda v: v, arr(backend, [1, 2], "int32"))


def test_numeric_gradients():
    grads = gradcheck.numeric_gradients(lambda a, b: float((a ** 2).sum() + 3 * b.sum()),
                                        [np.array([1.0, -2.0]), np.array([[5.0]])])
    np.testing.assert_allclose(grads[0], [2.0, -4.0], rtol=1e-8)
    np.testing.assert_allclose(grads[1], [[3.0]], rtol=1e-8)


def test_demo_uses_the_tape(backend, capsys):
    from gpu_tensorarray.__main__ import main

    assert main(["demo", "--backend", backend.name]) == 0
    out = capsys.readouterr().out
    assert "tape.gradient #1 used source 'gradients'" in out
    assert "tape.gradient #2 used source 'gradients_1'" in out
    assert "nothing double counted: True" in out


# -- what TensorFlow differentiates, and TF2's concat ---------------------------------------------

def test_a_read_before_the_sources_were_written_is_not_differentiated(backend):
    """TensorFlow differentiates only the ops between the sources and the targets: a concat made
    before the source's write (zeros) gets no gradient rule, which would split into a gradient
    array the later write grew (tf.gradients gives [1.] here)."""
    x = arr(backend, [5.0], "float64")
    with gta.GradientTape() as tape:
        ta = gta.TensorArray("float64", size=2, dynamic_size=True, clear_after_read=False, element_shape=[1])
        c = ta.concat()
        ta = ta.write(3, x)
        r = ta.read(3)
    grad, = tape.gradient([c, r], [x])
    assert host(grad).tolist() == [1.0]


@pytest.mark.parametrize("later", ["overwrite", "growth"])
def test_a_tf2_concat_then_a_write_has_the_concats_gradient(backend, later):
    """Mode tf2 writes each value to a fresh storage slot, so the storage grows after a concat;
    the concat's gradient still goes to the pieces it joined, as TensorFlow 2's does."""
    a, b, z = arr(backend, [1.0, 2.0], "float64"), arr(backend, [3.0], "float64"), arr(backend, [9.0, 9.0], "float64")
    with gta.GradientTape() as tape:
        ta = gta.TensorArray("float64", size=2, dynamic_size=later == "growth", infer_shape=False, mode="tf2")
        ta = ta.write(0, a).write(1, b)
        c = ta.concat()
        ta = ta.write(0 if later == "overwrite" else 2, z)
        s = ta.read(0 if later == "overwrite" else 2)
    grads = tape.gradient([c, s], [a, b, z], output_gradients=[arr(backend, [10.0, 20.0, 30.0], "float64"),
                                                                arr(backend, [1.0, 2.0], "float64")])
    assert [host(g).tolist() for g in grads] == [[10.0, 20.0], [30.0], [1.0, 2.0]]



@pytest.mark.parametrize("where", ["end_gradient", "end_gradients"])
def test_an_interrupt_as_a_computation_releases_its_gradient_arrays_leaks_none(backend, where):
    """Ctrl-C where a gradient() call closes its gradient arrays (as a closing, or the whole
    release, begins): every one is closed all the same."""
    from gpu_tensorarray.registry import Registry
    from ta_conformance_util import interrupt_at
    x = arr(backend, np.ones((4, 3)))
    with gta.GradientTape(persistent=True) as tape:
        ta = gta.TensorArray("float32", size=4).unstack(x)
        y = ta.stack()
    forward, before = gta.registry.lookup(ta.handle), live()
    for _ in range(3):
        with interrupt_at(getattr(Registry, where).__code__, "call"), pytest.raises(KeyboardInterrupt):
            tape.gradient(y, x)
    assert live() == before and not forward.grads
    assert host(tape.gradient(y, x)).tolist() == np.ones((4, 3)).tolist()     # and it still differentiates


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_a_read_written_into_another_array_stays_connected(backend, mode):
    """What a read returns, written into a second array twice: its gradient is the sum of what
    reaches it, the target's own and both reads' (each a copy of it: their output gradients)."""
    x = backend.asarray(np.array([1.0, -1.0], np.float32))
    with gta.GradientTape() as tape:
        y = gta.TensorArray("float32", size=1, mode=mode).write(0, x).read(0)
        z = gta.TensorArray("float32", size=2, mode=mode).write(0, y).write(1, y)
        targets = [y, z.read(0), z.read(1)]
    given = [np.array([1.0, 10.0], np.float32), np.array([2.0, 20.0], np.float32), np.array([4.0, 40.0], np.float32)]
    gradient = tape.gradient(targets, x, output_gradients=[backend.asarray(g) for g in given])
    assert gta.to_numpy(gradient).tolist() == [7.0, 70.0]


def test_what_tensorflows_tape_does_with_sources_scalars_and_stops(backend):
    """As tf.GradientTape: NumPy scalars, values in the other byte order and tf2.Variables written in
    mode tf2 are sources by identity (the op takes them as they are); a source of an integer dtype
    is not connected (None, or zeros with "zero"); stop_recording pauses its own tape only and
    raises RuntimeError (FailedPreconditionError) outside the tape; a single target's
    output_gradients may be a list of one; TensorFlow's UnconnectedGradients enum is taken."""
    import enum
    import gpu_tensorarray.tf2 as gtf
    for mode in ("tf1", "tf2"):
        for x in (np.float32(2.0), np.ones(3, ">f4")):
            with gta.GradientTape() as tape:
                y = gta.TensorArray("float32", size=1, mode=mode).write(0, x).read(0)
            np.testing.assert_array_equal(host(tape.gradient(y, x)), np.ones(np.shape(x), np.float32))
    v = gtf.Variable(np.ones(3, np.float32))
    with gtf.GradientTape() as tape:
        y = gtf.TensorArray(gtf.float32, size=1).write(0, v).read(0)
    np.testing.assert_array_equal(host(tape.gradient(y, v)), np.ones(3, np.float32))

    ints = arr(backend, [1, 2], "int32")
    floats = arr(backend, [1.0, 2.0])
    with gta.GradientTape(persistent=True) as tape:
        y = gta.TensorArray("int32", size=1).write(0, ints).read(0)
        z = gta.TensorArray(F32, size=1).write(0, floats).read(0)
    assert tape.gradient([y, z], [ints, floats])[0] is None
    zero = enum.Enum("TensorFlowsUnconnectedGradients", {"NONE": "none", "ZERO": "zero"}).ZERO
    grads = tape.gradient([y, z], [ints, floats], unconnected_gradients=zero)
    assert host(grads[0]).tolist() == [0, 0] and host(grads[1]).tolist() == [1.0, 1.0]
    np.testing.assert_array_equal(host(tape.gradient(z, floats, output_gradients=[arr(backend, [2.0, 3.0])])),
                                  [2.0, 3.0])

    a, b = arr(backend, [1.0, 1.0]), arr(backend, [1.0, 1.0])
    with gta.GradientTape() as outer:
        with gta.GradientTape() as inner:
            ta = gta.TensorArray(F32, size=2).write(0, a)
            with inner.stop_recording():
                ta = ta.write(1, b)
            stacked = ta.stack()
        with pytest.raises(errors.FailedPreconditionError, match="^Trying to stop recording a tape which is not "
                                                                 "recording.$"):
            with inner.stop_recording():
                pass
    assert [host(g).tolist() for g in outer.gradient(stacked, [a, b])] == [[1.0, 1.0], [1.0, 1.0]]


def test_nested_structures_of_targets_sources_and_output_gradients(backend):
    """As tf.GradientTape (tf.nest): dicts (by sorted keys), nested lists and tuples and namedtuples
    of targets and sources; the gradients come back in the sources' structure, and output_gradients
    take the targets' structure."""
    import collections
    x, y = arr(backend, [1.0, 1.0]), arr(backend, [2.0, 2.0])
    with gta.GradientTape(persistent=True) as tape:
        ta = gta.TensorArray(F32, size=2, clear_after_read=False).write(0, x).write(1, y)
        stacked, second = ta.stack(), ta.read(1)
    by_key = tape.gradient(stacked, {"y": y, "x": x})
    assert list(by_key) == ["y", "x"] and [host(by_key[k]).tolist() for k in "xy"] == [[1.0, 1.0], [1.0, 1.0]]
    nested = tape.gradient([stacked, (second,)], [[x], (y,)])
    assert isinstance(nested[0], list) and isinstance(nested[1], tuple)
    assert host(nested[0][0]).tolist() == [1.0, 1.0] and host(nested[1][0]).tolist() == [2.0, 2.0]
    Pair = collections.namedtuple("Pair", "first second")
    pair = tape.gradient({"s": stacked, "r": second}, Pair(x, y),
                         output_gradients={"r": arr(backend, [5.0, 5.0]), "s": None})
    assert type(pair) is Pair and host(pair.first).tolist() == [1.0, 1.0] and host(pair.second).tolist() == [6.0, 6.0]
    with pytest.raises(errors.InvalidArgumentError, match="the targets' keys"):
        tape.gradient({"s": stacked}, x, output_gradients={"t": None, "u": None})
    # Another structure that tf.nest flattens to one leaf per target: TensorFlow's way, taken too.
    assert host(tape.gradient({"r": second}, y, output_gradients=[arr(backend, [5.0, 6.0])])).tolist() == [5.0, 6.0]
    assert host(tape.gradient([second], y, output_gradients={"any": arr(backend, [5.0, 6.0])})).tolist() == [5.0, 6.0]


def test_dicts_whose_keys_do_not_sort_are_invalid_arguments(backend):
    """tf.nest sorts a dict's keys (TensorFlow raises TypeError for {1: .., "x": ..}): the library's
    error, for targets, sources, output gradients and tf2's watch alike."""
    import gpu_tensorarray.tf2 as tf2
    x = arr(backend, [1.0, 2.0])
    with tf2.GradientTape(persistent=True) as tape:
        with pytest.raises(errors.InvalidArgumentError, match="^A dict's keys must sort"):
            tape.watch({1: x, "x": x})
        read = gta.TensorArray(F32, size=1).write(0, x).read(0)
    for call in (lambda: tape.gradient(read, {1: x, "x": x}), lambda: tape.gradient({1: read, "r": read}, x),
                 lambda: tape.gradient([read], x, output_gradients={1: None, "r": None})):
        with pytest.raises(errors.InvalidArgumentError, match="^A dict's keys must sort|one entry per target"):
            call()


def test_output_gradients_as_torch_tensors_are_taken_and_of_the_target_s_dtype_only(backend):
    """A torch tensor is an array like any (it was refused: 'dtype torch.float64 for a target of
    dtype float64'); another dtype is refused, float32 for float64 too, as tf.function refuses it."""
    torch = pytest.importorskip("torch")
    x = arr(backend, [1.0, 2.0], "float64")
    with gta.GradientTape(persistent=True) as tape:
        wide = gta.TensorArray("float64", size=1).write(0, x).read(0)
    gradient = tape.gradient(wide, x, output_gradients=torch.tensor([2.0, 3.0], dtype=torch.float64))
    assert gradient.dtype == np.float64 and host(gradient).tolist() == [2.0, 3.0]
    assert_on(backend, gradient)
    for given in (np.array([2.0, 3.0], np.float32), torch.tensor([2, 3])):
        with pytest.raises(errors.InvalidArgumentError, match="was given for a target of dtype float64"):
            tape.gradient(wide, x, output_gradients=given)
    # One target: any structure that tf.nest flattens to one array, as TensorFlow takes it.
    for given in ({"g": arr(backend, [2.0, 3.0], "float64")}, [[arr(backend, [2.0, 3.0], "float64")]]):
        assert host(tape.gradient(wide, x, output_gradients=given)).tolist() == [2.0, 3.0]
