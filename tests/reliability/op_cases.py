"""The ops the fault-injection tests run (test_fault_injection.py: failing allocations,
test_interrupts.py: interrupts): each case builds a fresh array and returns (the handles to
compare, the op). Building twice gives two identical arrays."""

import numpy as np

import gpu_tensorarray as gta
from ta_conformance_util import concat, f32, gather, grad, grad_with_shape, new, read, scatter, split, write


def _grad_with(values, shape=(2,), size_=3, written=(0,)):
    forward, _ = new(size_, "float32", element_shape=list(shape))
    for index in range(size_):
        write(forward, index, f32(np.full(shape, index + 1)))
    g = grad(forward)
    for index in written:
        write(g, index, f32(values[index]))
    return forward, g


def _ragged(clear_after_read=True):
    handle, _ = new(4, "float32", clear_after_read=clear_after_read)
    write(handle, 0, f32([1, 2]))
    write(handle, 1, f32([3, 4, 5]))
    return handle


def _growing():
    handle, _ = new(2, "float32", dynamic_size=True, element_shape=[3])
    write(handle, 0, f32([1, 2, 3]))
    return handle


_BIG_ROWS = 300          # scatter-adds of this many rows take the planned (not np.add.at) path


def registering(cases):
    """A decorator factory: ``@case(name)`` puts the decorated builder in ``cases``."""
    def case(name):
        def register(build):
            cases[name] = build
            return build
        return register
    return case


def _op_cases():
    cases = {}
    case = registering(cases)

    @case("write-first-allocates-the-slab")
    def _():
        handle, _ = new(3, "float32", element_shape=[2])
        return [handle], lambda: write(handle, 1, f32([1, 2]))

    @case("write-dynamic-growth")
    def _():
        handle = _growing()
        return [handle], lambda: write(handle, 40, f32([4, 5, 6]))

    @case("write-widens-to-ragged")
    def _():
        handle, _ = new(3, "float32")
        write(handle, 0, f32([1, 2]))
        return [handle], lambda: write(handle, 1, f32([1, 2, 3]))

    @case("write-ragged-strided-value")
    def _():
        handle = _ragged()
        return [handle], lambda: write(handle, 2, f32(np.arange(8))[::2])

    @case("write-aggregates-into-grad")
    def _():
        forward, g = _grad_with({0: [1, 2]})
        return [forward, g], lambda: write(g, 0, f32([10, 20]))

    @case("read-grad-soft-zeros")
    def _():
        forward, g = _grad_with({}, written=())
        return [forward, g], lambda: read(g, 1)

    @case("read-past-grad-end")
    def _():
        forward, g = _grad_with({0: [1, 2]})
        return [forward, g], lambda: read(g, 50)

    @case("read-ragged-soft-zeros")
    def _():
        forward = _ragged()
        g = grad(forward)
        write(g, 0, f32([7, 8]))
        return [forward, g], lambda: read(g, 1)

    @case("gather")
    def _():
        handle, _ = new(12, "float32", element_shape=[2], clear_after_read=False)
        scatter(handle, list(range(12)), f32(np.arange(24).reshape(12, 2)))
        return [handle], lambda: gather(handle, [3, 1, 4, 1, 5, 9, 2, 6, 5, 3])

    @case("gather-grad-past-end")
    def _():
        forward, g = _grad_with({0: [1, 2], 1: [3, 4]}, written=(0, 1))
        return [forward, g], lambda: gather(g, [1, 30, 2, 0, 31])

    @case("gather-grad-past-end-vector-checks")
    def _():
        forward, g = _grad_with({0: [1, 2], 1: [3, 4]}, written=(0, 1))
        return [forward, g], lambda: gather(g, [1, 30, 2, 0, 31, 12, 40, 33, 34, 35, 36])

    @case("gather-ragged")
    def _():
        handle = _ragged(clear_after_read=False)
        write(handle, 2, f32([6, 7]))
        return [handle], lambda: gather(handle, [2, 0])

    @case("gather-zero-size-rows")
    def _():
        handle, _ = new(2, "float32", element_shape=[0])
        return [handle], lambda: gather(handle, [1, 0])

    @case("stack-of-soft-grad-slots")
    def _():
        forward, g = _grad_with({}, written=())
        return [forward, g], lambda: gather(g, range(3))

    @case("scatter-dynamic-broadcast-view")
    def _():
        handle = _growing()
        value = np.broadcast_to(f32([1, 2, 3]), (5, 3))
        return [handle], lambda: scatter(handle, [1, 7, 3, 4, 5], value)

    @case("scatter-aggregates-broadcast-view")
    def _():
        forward, _ = new(4, "float32", element_shape=[16])
        for index in range(4):
            write(forward, index, f32(np.full(16, index)))
        g = grad(forward)
        write(g, 1, f32(np.full(16, -1)))
        value = np.broadcast_to(f32(np.arange(16)), (_BIG_ROWS, 16))
        indices = np.arange(_BIG_ROWS) % 3
        return [forward, g], lambda: scatter(g, indices, value)

    @case("scatter-aggregates-few-rows")
    def _():
        forward, g = _grad_with({0: [1, 2]})
        return [forward, g], lambda: scatter(g, [0, 2, 0], f32([[1, 1], [2, 2], [3, 3]]))

    @case("scatter-into-ragged")
    def _():
        handle = _ragged()
        return [handle], lambda: scatter(handle, [3, 2], np.broadcast_to(f32([1, 2, 3, 4]), (2, 4)))

    @case("split-equal-lengths")
    def _():
        handle, _ = new(3, "float32", dynamic_size=True)
        return [handle], lambda: split(handle, f32(np.arange(12).reshape(6, 2)), [2, 2, 2])

    @case("split-unequal-lengths")
    def _():
        handle, _ = new(3, "float32")
        return [handle], lambda: split(handle, f32(np.arange(12).reshape(6, 2)), [1, 3, 2])

    @case("split-aggregates-into-grad")
    def _():
        forward, _ = new(3, "float32")
        split(forward, f32(np.arange(12).reshape(6, 2)), [2, 2, 2])
        g = grad(forward)
        split(g, f32(np.ones((6, 2))), [2, 2, 2])
        return [forward, g], lambda: split(g, f32(np.arange(12).reshape(6, 2))[:, ::-1], [2, 2, 2])

    @case("split-aggregates-into-ragged-grad")
    def _():
        forward, _ = new(3, "float32")
        split(forward, f32(np.arange(12).reshape(6, 2)), [1, 3, 2])
        g = grad(forward)
        split(g, f32(np.ones((6, 2))), [1, 3, 2])
        return [forward, g], lambda: split(g, f32(np.arange(12).reshape(6, 2))[:, ::-1], [1, 3, 2])

    @case("concat-ragged-out-of-order")
    def _():
        handle, _ = new(3, "float32")
        write(handle, 2, f32([[5, 6]]))
        write(handle, 0, f32([[1, 2], [3, 4]]))
        write(handle, 1, f32(np.zeros((3, 2))))
        return [handle], lambda: concat(handle)

    @case("concat-grad-with-soft-slots")
    def _():
        forward, _ = new(3, "float32")
        split(forward, f32(np.arange(12).reshape(6, 2)), [1, 3, 2])
        g = grad(forward)
        write(g, 1, f32(np.ones((3, 2))))
        return [forward, g], lambda: concat(g)

    @case("grad")
    def _():
        forward, _ = new(3, "float32", element_shape=[2])
        write(forward, 0, f32([1, 2]))
        return [forward], lambda: grad(forward, "other")

    @case("grad-with-shape-of-ragged")
    def _():
        forward = _ragged()
        return [forward], lambda: grad_with_shape(forward, [2], "other")

    # Strings live on the host: their reads' results and the flags go through the door.
    @case("string-write-dynamic-growth")
    def _():
        handle, _ = new(2, "string", dynamic_size=True)
        write(handle, 0, ["a", "bc"])
        return [handle], lambda: write(handle, 40, ["d", "ef"])

    @case("string-scatter-dynamic-growth")
    def _():
        handle, _ = new(2, "string", dynamic_size=True)
        write(handle, 0, "a")
        return [handle], lambda: scatter(handle, list(range(30, 42)), [f"s{k}" for k in range(12)])

    @case("string-read")
    def _():
        handle, _ = new(3, "string")
        write(handle, 1, [["a", "b"], ["c", "d"]])
        return [handle], lambda: read(handle, 1, "string")

    @case("string-read-empty-unwritten-slot")
    def _():
        handle, _ = new(3, "string", element_shape=[2, 0])
        return [handle], lambda: read(handle, 2, "string")

    @case("string-gather")
    def _():
        handle, _ = new(12, "string", clear_after_read=False)
        scatter(handle, list(range(12)), [[f"v{k}", "w"] for k in range(12)])
        return [handle], lambda: gather(handle, [3, 1, 4, 1, 5, 9, 2, 6, 5, 3], "string")

    @case("string-concat")
    def _():
        handle, _ = new(3, "string")
        write(handle, 2, ["e"])
        write(handle, 0, ["a", "b"])
        write(handle, 1, ["c", "d", ""])
        return [handle], lambda: concat(handle, "string")

    @case("class-unstack")
    def _():
        array = gta.TensorArray("float32", size=4)
        value = np.broadcast_to(f32([[1], [2]]), (4, 2, 3))
        return [array.handle], lambda: array.unstack(value)

    return cases


OP_CASES = _op_cases()
