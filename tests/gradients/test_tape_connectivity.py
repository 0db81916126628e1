"""GradientTape connectivity, on every backend: sources the targets do not depend on get
None (or zeros with unconnected_gradients="zero", as tf.GradientTape), and a target that
is not the output of a recorded TensorArray op is an error, never a silent zero."""

import gc

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import errors

F32 = np.dtype("float32")
NOT_RECORDED = r"is not the output of a TensorArray op recorded by this tape"


def arr(backend, value, dtype="float32"):
    return backend.asarray(np.asarray(value, dtype=dtype))


def host(value):
    return gta.to_numpy(value)


def live():
    gc.collect()
    return gta.stats()["live_arrays"]


def assert_on(backend, *values):
    for value in values:
        assert isinstance(value, backend.array_type), type(value)


def _program(backend):
    """x: written and read back (connected); y: never written; z: written into an array
    nothing reads; w: written after the last read of x's array (its flow feeds no target)."""
    x, y = arr(backend, [1.0, 2.0]), arr(backend, [[3.0]], "float64")
    z, w = arr(backend, [4.0, 5.0, 6.0]), arr(backend, [7.0, 8.0])
    tape = gta.GradientTape(persistent=True)
    with tape:
        ta = gta.TensorArray(F32, size=2).write(0, x)
        r = ta.read(0)
        ta.write(1, w)
        other = gta.TensorArray(F32, size=1).write(0, z)
    return tape, r, (x, y, z, w), (ta, other)


# -- unconnected sources ----------------------------------------------------------------------------

def test_unconnected_single_source_is_none_by_default_and_zeros_on_request(backend):
    tape, r, (x, y, z, w), arrays = _program(backend)
    for source in (y, z, w):
        assert tape.gradient(r, source) is None
        assert tape.gradient(r, source, unconnected_gradients="none") is None
        assert tape.gradient(r, source, unconnected_gradients=gta.UnconnectedGradients.NONE) is None
        zeros = tape.gradient(r, source, unconnected_gradients="zero")
        assert zeros.shape == source.shape and zeros.dtype == source.dtype and not host(zeros).any()
        assert_on(backend, zeros)
    np.testing.assert_array_equal(host(tape.gradient(r, x)), [1.0, 1.0])
    for array in arrays:
        array.close()


def test_unconnected_list_sources(backend):
    tape, r, (x, y, z, w), arrays = _program(backend)
    given = arr(backend, [2.0, -3.0])
    gx, gy, gz, gw = tape.gradient([r], [x, y, z, w], output_gradients=[given])
    np.testing.assert_array_equal(host(gx), [2.0, -3.0])
    assert gy is None and gz is None and gw is None
    as_tuple = tape.gradient(r, (y, x), unconnected_gradients=gta.UnconnectedGradients.ZERO)
    assert isinstance(as_tuple, tuple) and len(as_tuple) == 2
    assert as_tuple[0].shape == (1, 1) and as_tuple[0].dtype == np.float64 and not host(as_tuple[0]).any()
    np.testing.assert_array_equal(host(as_tuple[1]), [1.0, 1.0])
    zeros = tape.gradient([r], [z, w, x], unconnected_gradients="zero")
    assert [tuple(g.shape) for g in zeros] == [(3,), (2,), (2,)]
    assert not host(zeros[0]).any() and not host(zeros[1]).any()
    np.testing.assert_array_equal(host(zeros[2]), [1.0, 1.0])
    assert_on(backend, *zeros)
    for array in arrays:
        array.close()


def test_connected_zero_gradients_stay_zeros(backend):
    """Written before a read of its array (its slot unread), or written as nothing (an
    empty unstack) into an array read later: connected, so zeros even under "none"."""
    x0, x1 = arr(backend, [5.0]), arr(backend, [10.0])
    empty = arr(backend, np.zeros((0, 3)))
    nothing_read = arr(backend, np.zeros((0, 2)))
    with gta.GradientTape() as tape:
        ta = gta.TensorArray(F32, size=2).write(0, x0).write(1, x1)
        dyn = gta.TensorArray(F32, size=0, dynamic_size=True, infer_shape=False).unstack(empty)
        dyn = dyn.write(0, arr(backend, [1.0, 2.0, 3.0]))
        gta.TensorArray(F32, size=0, infer_shape=False).split(nothing_read, [])
        targets = [ta.read(0), dyn.read(0)]
    g0, g1, g_empty, g_nothing = tape.gradient(targets, [x0, x1, empty, nothing_read])
    np.testing.assert_array_equal(host(g0), [1.0])
    np.testing.assert_array_equal(host(g1), [0.0])
    assert g_empty.shape == (0, 3) and g_empty.dtype == F32
    assert g_nothing is None
    assert_on(backend, g0, g1, g_empty)


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_a_scatter_or_unstack_of_no_rows_gets_zeros_of_its_shape(backend, mode):
    """Into an array read later: connected, so zeros of the value's shape, as TensorFlow gives
    (mode tf2 ran no op for a scatter of no rows: None)."""
    scattered, unstacked = arr(backend, np.zeros((0, 3))), arr(backend, np.zeros((0, 3)))
    with gta.GradientTape() as tape:
        ta = gta.TensorArray(F32, size=2, element_shape=[3], mode=mode).scatter([], scattered)
        other = gta.TensorArray(F32, size=0, dynamic_size=True, mode=mode).unstack(unstacked)
        ta = ta.write(0, arr(backend, [1.0, 2.0, 3.0]))
        other = other.write(0, arr(backend, [1.0, 2.0, 3.0]))
        targets = [ta.read(0), other.read(0)]
    for gradient in tape.gradient(targets, [scattered, unstacked]):
        assert gradient is not None and gradient.shape == (0, 3) and gradient.dtype == F32
        assert_on(backend, gradient)


@pytest.mark.parametrize("value", ["zeros", "NONE", "", None, 0, ["zero"]])
def test_invalid_unconnected_gradients(backend, value):
    before = live()
    x = arr(backend, [1.0, 2.0])
    with gta.GradientTape() as tape:                     # non-persistent: a failed call must not use it up
        ta = gta.TensorArray(F32, size=1).write(0, x)
        r = ta.read(0)
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^Unknown value for unconnected_gradients: " + repr(value).replace("[", r"\[")
                       .replace("]", r"\]") + "$") as info:
        tape.gradient(r, x, unconnected_gradients=value)
    assert isinstance(info.value, ValueError)             # TensorFlow raises ValueError there
    assert tape.sources_used == [] and not gta.registry.lookup(ta.handle).grads
    np.testing.assert_array_equal(host(tape.gradient(r, x)), [1.0, 1.0])
    ta.close()
    assert live() == before


# -- targets that no recorded op returned -----------------------------------------------------------

def _not_recorded_message(position, shape, dtype):
    return (rf"targets\[{position}\] \(shape \[{', '.join(map(str, shape))}\], dtype {dtype}\) " + NOT_RECORDED
            + r".*gpu_tensorarray\.torch")


@pytest.mark.parametrize("make", [
    pytest.param(lambda r, backend: r * 2.0, id="math"),
    pytest.param(lambda r, backend: r.copy(), id="copy"),
    pytest.param(lambda r, backend: r[...], id="view"),
    pytest.param(lambda r, backend: r.reshape(2), id="reshape"),
    pytest.param(lambda r, backend: np.array([1.0, 2.0], np.float32), id="numpy"),
    pytest.param(lambda r, backend: arr(backend, [1.0, 2.0]), id="backend-array"),
])
def test_target_that_no_recorded_op_returned(backend, make):
    before = live()
    x = arr(backend, [1.0, 2.0])
    with gta.GradientTape() as tape:
        ta = gta.TensorArray(F32, size=1).write(0, x)
        r = ta.read(0)
    target = make(r, backend)
    assert target is not r
    with pytest.raises(errors.InvalidArgumentError, match=_not_recorded_message(0, [2], "float32")):
        tape.gradient(target, x)
    # Nothing happened: no gradient computation, no gradient array, the tape still usable.
    assert tape.sources_used == [] and not gta.registry.lookup(ta.handle).grads
    np.testing.assert_array_equal(host(tape.gradient(r, x)), [1.0, 1.0])
    ta.close()
    assert live() == before


def test_a_recorded_and_an_unrecorded_target_together(backend):
    x = arr(backend, [[1.0, 2.0], [3.0, 4.0]])
    with gta.GradientTape(persistent=True) as tape:
        ta = gta.TensorArray(F32, size=2, clear_after_read=False).unstack(x)
        r, stacked = ta.read(1), ta.stack()
    doubled = stacked * 2.0
    with pytest.raises(errors.InvalidArgumentError, match=_not_recorded_message(2, [2, 2], "float32")):
        tape.gradient([r, stacked, doubled], x)
    with pytest.raises(errors.InvalidArgumentError, match=_not_recorded_message(0, [2], "float32")):
        tape.gradient([r + 0.0, stacked], [x])
    assert tape.sources_used == [] and not gta.registry.lookup(ta.handle).grads
    # The recorded ones alone: d(sum r + sum stacked)/dx = row 1 twice, row 0 once.
    np.testing.assert_array_equal(host(tape.gradient([r, stacked], x)), [[1.0, 1.0], [2.0, 2.0]])
    ta.close()


def test_targets_other_tapes_or_no_tape_recorded(backend):
    x = arr(backend, [1.0, 2.0])
    with gta.GradientTape(persistent=True) as tape:
        ta = gta.TensorArray(F32, size=1, clear_after_read=False).write(0, x)
        with tape.stop_recording():
            unrecorded = ta.read(0)
        recorded = ta.read(0)
        handle, flow = ta.handle, ta.flow
        value, lengths = gta.raw_ops.TensorArrayConcatV3(handle, flow, F32)
    with gta.GradientTape() as other:
        elsewhere = ta.read(0)
    outside = ta.read(0)
    for position, target in enumerate([unrecorded, elsewhere, outside, lengths, x]):
        with pytest.raises(errors.InvalidArgumentError, match=NOT_RECORDED):
            tape.gradient([recorded] * position + [target], x)
    np.testing.assert_array_equal(host(tape.gradient([recorded, value], x)), [2.0, 2.0])
    np.testing.assert_array_equal(host(other.gradient(elsewhere, x, unconnected_gradients="zero")), [0.0, 0.0])
    with tape:
        tape.reset()
    with pytest.raises(errors.InvalidArgumentError, match=NOT_RECORDED):
        tape.gradient(recorded, x)
    ta.close()


def test_recorded_outputs_still_differentiate(backend):
    """Every kind of recorded output as a target, against a hand-computed reference."""
    rng = np.random.default_rng(3)
    x_host = rng.standard_normal((3, 2))
    x, flat = arr(backend, x_host, "float64"), arr(backend, x_host.reshape(-1), "float64")
    weights = [rng.standard_normal(shape) for shape in [(2,), (4, 2), (3, 2), (6,)]]
    with gta.GradientTape() as tape:
        ta = gta.TensorArray("float64", size=3, clear_after_read=False).unstack(x)
        read, gathered, stacked = ta.read(2), ta.gather([0, 2, 2, 1]), ta.stack()
        pieces = gta.TensorArray("float64", size=2, infer_shape=False).split(flat, [4, 2])
        joined = pieces.concat()
    grads = tape.gradient([read, gathered, stacked, joined], [x, flat],
                          output_gradients=[arr(backend, w, "float64") for w in weights])
    expected_x = np.zeros((3, 2))
    expected_x[2] += weights[0]
    for row, index in enumerate([0, 2, 2, 1]):
        expected_x[index] += weights[1][row]
    expected_x += weights[2]
    np.testing.assert_allclose(host(grads[0]), expected_x, rtol=1e-15)
    np.testing.assert_array_equal(host(grads[1]), weights[3])
    assert_on(backend, *grads)
    ta.close()
    pieces.close()
