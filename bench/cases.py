"""What the benchmark times: one table of sizes (SIZES), one setup factory per op,
and OPS, the table that turns them into rows, which ``python -m bench`` runs.

A factory is called as ``factory(**params)`` and returns ``{provider: build}``;
``build(backend, peer)`` returns a ``Case`` (``peer``: what providers.PROVIDERS
loaded for that provider). A Case's ``run()`` does the timed work once and ends
with a device synchronize; ``setup()``, where there is one, runs untimed before
every timed ``run()``; ``calls`` is how many op calls one ``run()`` makes;
``nbytes`` is how many bytes one ``run()`` must move at least (read + written),
or None for a view (nothing moves); ``footprint``, how many distinct bytes those
are, where fewer (a scatter-add reads and writes each destination row: twice in
``nbytes``, once here), so that it is compared with a copy that touches as much
memory (runner.py); ``check()``, where there is one, runs once
after timing and raises ``WrongResult`` when the op's result is wrong. A one-shot
measurement (the memory row) has ``measure()`` instead, returning a dict.

Adding an op is one entry in OPS and one factory.
"""

import contextlib
import importlib
import importlib.util
import pathlib
import tracemalloc
from collections import namedtuple
from time import perf_counter

import numpy as np

from gpu_tensorarray import GradientTape, device, raw_ops, stats
from gpu_tensorarray.backends.accumulation import MODES, accumulation
from gpu_tensorarray.tensor_array import TensorArray
from .providers import PROVIDERS, Skip

__all__ = ["SIZES", "TINY_SIZES", "OPS", "Op", "Case", "Row", "WrongResult", "plan", "scatter_add_inputs",
           "MODES"]

# One table of sizes for every runner. Scatter-add row counts n are multiples of S (rows).
SIZES = {
    "copy": {"nbytes": 256 << 20},
    "write_loop": {"steps": 1000, "width": 64},
    "stack": {"counts": (1000, 100000), "width": 1024},
    "scatter_add": {"rows": 1024, "widths": (1, 64, 4096), "multiples": (1, 4),
                    "distributions": ("uniform", "hot"), "hot_fraction": 0.9},
    "gather": {"rows": 4096, "width": 1024, "count": 512},
    "tape": {"steps": 1000, "width": 64},
    "memory": {"steps": 100000, "width": 64},
    "torch_rnn": {"steps": 20, "batch": 16},
    "torch_elman": {"steps": (20, 200), "batch": 16},
}

# The same rows at sizes that run in well under a second (the CLI's own test).
TINY_SIZES = {
    "copy": {"nbytes": 1 << 20},
    "write_loop": {"steps": 20, "width": 8},
    "stack": {"counts": (10, 100), "width": 16},
    "scatter_add": {"rows": 16, "widths": (1, 8), "multiples": (1, 4),
                    "distributions": ("uniform", "hot"), "hot_fraction": 0.9},
    "gather": {"rows": 64, "width": 16, "count": 8},
    "tape": {"steps": 10, "width": 8},
    "memory": {"steps": 1000, "width": 8},
    "torch_rnn": {"steps": 3, "batch": 2},
    "torch_elman": {"steps": (3,), "batch": 2},
}

_F32 = np.dtype("float32")


class WrongResult(Exception):
    """One of our ops gave a wrong result: the bench run fails."""


class Case:
    """What one benchmark row times; see the module docstring."""

    __slots__ = ("run", "setup", "calls", "nbytes", "teardown", "measure", "check", "footprint")

    def __init__(self, run=None, setup=None, calls=1, nbytes=None, teardown=None, measure=None, check=None,
                 footprint=None):
        self.run, self.setup, self.calls, self.nbytes = run, setup, calls, nbytes
        self.teardown = teardown or (lambda: None)
        self.measure, self.check = measure, check
        self.footprint = footprint or nbytes


class _Arrays:
    """The arrays a case opened: ``close()`` closes them (at teardown)."""

    def __init__(self):
        self.handles = []

    def open(self, *args, **kwargs):
        handle, flow = raw_ops.TensorArrayV3(*args, **kwargs)
        self.handles.append(handle)
        return handle, flow

    def close(self):
        for handle in self.handles:
            raw_ops.TensorArrayCloseV3(handle)
        self.handles.clear()


def _written(arrays, backend, count, width, value, **attributes):
    """A fresh (count, width) float32 array, every slot written with ``value``."""
    handle, flow = arrays.open(count, "float32", element_shape=(width,), **attributes)
    for index in range(count):
        flow = raw_ops.TensorArrayWriteV3(handle, index, value, flow)
    backend.synchronize()
    return handle, flow


def _expect(ok, what):
    if not ok:
        raise WrongResult(what)


# -- the machine's copy bandwidth (the physical limit) ------------------------------------------
def copy(nbytes):
    """One copy of ``nbytes`` float32 bytes (np.copyto, CuPy's on a GPU): bytes read + written."""
    def build(backend, peer):
        xp = peer.module
        source = xp.ones(nbytes // _F32.itemsize, _F32)
        target = xp.empty_like(source)

        def run():
            xp.copyto(target, source)
            peer.sync()
        return Case(run, calls=1, nbytes=2 * source.nbytes)
    return {"numpy": build}


# -- write loop, read loop ----------------------------------------------------------------------
def write_loop(steps, width):
    """``steps`` writes of (width,) float32 into a fresh array of ``steps`` slots."""
    host = np.ones(width, _F32)
    nbytes = 2 * steps * host.nbytes

    def ours(make_writer):
        def build(backend, peer):
            value, arrays, state = backend.asarray(host), _Arrays(), {}

            def setup():
                arrays.close()
                state["ta"] = TensorArray("float32", size=steps, element_shape=(width,))
                state["handle"], state["flow"] = state["ta"].handle, state["ta"].flow
                arrays.handles.append(state["handle"])
            return Case(make_writer(state, value, backend), setup, steps, nbytes, arrays.close)
        return build

    def raw(indices, keywords):
        def make(state, value, backend):
            def run():
                handle, flow = state["handle"], state["flow"]
                for index in indices:
                    flow = raw_ops.TensorArrayWriteV3(handle, index, value, flow)
                backend.synchronize()

            def run_keywords():     # as tf.raw_ops is called: keyword arguments only
                handle, flow = state["handle"], state["flow"]
                for index in indices:
                    flow = raw_ops.TensorArrayWriteV3(handle=handle, index=index, value=value, flow_in=flow)
                backend.synchronize()
            return run_keywords if keywords else run
        return make

    def cls(state, value, backend):
        def run():
            ta = state["ta"]
            for index in range(steps):
                ta = ta.write(index, value)
            backend.synchronize()
        return run

    def row_assignment(backend, peer):
        buffer, value = _peer_empty(peer, (steps, width)), _peer_array(peer, host)

        def run():
            for index in range(steps):
                buffer[index] = value
            peer.sync()
        return Case(run, None, steps, nbytes)

    def tensorflow(backend, peer):
        tf, value = peer.module, peer.module.constant(host)

        def run():
            ta = tf.TensorArray(tf.float32, size=steps, element_shape=(width,))
            for index in range(steps):
                ta = ta.write(index, value)
            ta.mark_used()          # else TensorFlow logs that the last write's result was never used
            peer.sync()
        return Case(run, None, steps, nbytes)

    def tf_raw_ops(backend, peer):
        tf, value = peer.module, peer.module.constant(host)

        def run():
            handle, flow = tf.raw_ops.TensorArrayV3(size=steps, dtype=tf.float32, element_shape=[width])
            for index in range(steps):
                flow = tf.raw_ops.TensorArrayWriteV3(handle=handle, index=index, value=value, flow_in=flow)
            tf.raw_ops.TensorArrayCloseV3(handle=handle)
            peer.sync()
        return Case(run, None, steps, nbytes)

    return {"ours": ours(raw(range(steps), True)), "ours.positional": ours(raw(range(steps), False)),
            "ours.np_int32": ours(raw(_np_int32(steps), True)), "ours.class": ours(cls),
            "numpy": row_assignment, "torch": row_assignment, "tensorflow": tensorflow, "tf.raw_ops": tf_raw_ops}


def read_loop(steps, width):
    """``steps`` reads of (width,) float32 from a written array (clear_after_read off,
    so every round reads the same array). Reads return views: no bytes move."""
    host = np.arange(steps * width, dtype=_F32).reshape(steps, width)

    def ours(form):
        def build(backend, peer):
            arrays = _Arrays()
            handle, flow = arrays.open(steps, "float32", element_shape=(width,), clear_after_read=False)
            flow = raw_ops.TensorArrayScatterV3(handle, np.arange(steps), backend.asarray(host), flow)
            ta = TensorArray("float32", handle=handle, flow=flow)
            indices = _np_int32(steps) if form == "np_int32" else range(steps)

            def run():
                for index in indices:
                    raw_ops.TensorArrayReadV3(handle, index, flow, "float32")
                backend.synchronize()

            def run_keywords():     # as tf.raw_ops is called: keyword arguments only
                for index in indices:
                    raw_ops.TensorArrayReadV3(handle=handle, index=index, flow_in=flow, dtype="float32")
                backend.synchronize()

            def run_class():
                for index in range(steps):
                    ta.read(index)
                backend.synchronize()

            def check():
                _expect(np.array_equal(backend.to_numpy(ta.read(steps - 1)), host[-1]), "read: wrong row")
            timed = {"class": run_class, "positional": run}.get(form, run_keywords)
            return Case(timed, None, steps, None, arrays.close, check=check)
        return build

    def indexing(backend, peer):
        buffer = _peer_array(peer, host)

        def run():
            for index in range(steps):
                buffer[index]
            peer.sync()
        return Case(run, None, steps)

    def tensorflow(backend, peer):
        tf = peer.module
        ta = tf.TensorArray(tf.float32, size=steps, element_shape=(width,), clear_after_read=False).unstack(host)

        def run():
            for index in range(steps):
                ta.read(index)
            peer.sync()
        return Case(run, None, steps)

    def tf_raw_ops(backend, peer):
        tf = peer.module
        handle, flow = tf.raw_ops.TensorArrayV3(size=steps, dtype=tf.float32, element_shape=[width],
                                                clear_after_read=False)
        flow = tf.raw_ops.TensorArrayScatterV3(handle=handle, indices=tf.range(steps), value=host, flow_in=flow)

        def run():
            for index in range(steps):
                tf.raw_ops.TensorArrayReadV3(handle=handle, index=index, flow_in=flow, dtype=tf.float32)
            peer.sync()
        return Case(run, None, steps, None, lambda: tf.raw_ops.TensorArrayCloseV3(handle=handle))

    return {"ours": ours("keywords"), "ours.positional": ours("positional"), "ours.np_int32": ours("np_int32"),
            "ours.class": ours("class"), "numpy": indexing, "torch": indexing, "tensorflow": tensorflow,
            "tf.raw_ops": tf_raw_ops}


def _np_int32(count):
    """Indices as NumPy int32 scalars: what an index that came from a tensor is."""
    return [np.int32(index) for index in range(count)]


# -- stack and gather ---------------------------------------------------------------------------
def stack_written(count, width):
    """The stack of a fully written array of ``count`` (width,) float32 elements: a
    view, O(1) work. Timed warm: the array is written once (clear_after_read off, so
    it can be stacked again); before every timed stack an untimed stack and a read
    (which applies the previous stack's deferred flag update) run in the same place.
    "ours.size" times TensorArraySizeV3 in exactly that position: the floor of any
    op there. Peers stack a list of ``count`` rows (a copy)."""
    nbytes = 2 * count * width * _F32.itemsize

    def ours(timed_op):
        def build(backend, peer):
            arrays = _Arrays()
            first = np.random.default_rng(1).standard_normal(width, dtype=_F32)
            handle, flow = _written(arrays, backend, count, width, backend.asarray(first), clear_after_read=False)
            ta = TensorArray("float32", handle=handle, flow=flow)
            ops = {
                "stack": lambda: raw_ops.TensorArrayGatherV3(handle, range(count), flow, "float32"),
                "class stack": ta.stack,
                "size": lambda: raw_ops.TensorArraySizeV3(handle, flow),
            }
            op = ops[timed_op]

            def setup():
                ta.stack()
                raw_ops.TensorArrayReadV3(handle, 0, flow, "float32")

            def run():
                op()
                backend.synchronize()

            def check():
                stacked = backend.to_numpy(ta.stack())
                _expect(stacked.shape == (count, width) and np.array_equal(stacked[-1], first), "stack: wrong value")
            return Case(run, setup, 1, None, arrays.close, check=check)
        return build

    def rows(peer):
        host = np.random.default_rng(1).standard_normal((count, width), dtype=_F32)
        return [_peer_array(peer, row) for row in host]

    def stack_list(backend, peer):
        listed = rows(peer)

        def run():
            peer.module.stack(listed)
            peer.sync()
        return Case(run, None, 1, nbytes)

    def tensorflow(backend, peer):
        tf = peer.module
        host = np.random.default_rng(1).standard_normal((count, width), dtype=_F32)
        ta = tf.TensorArray(tf.float32, size=count, element_shape=(width,), clear_after_read=False).unstack(host)

        def run():
            ta.stack()
            peer.sync()
        return Case(run, None, 1, nbytes)

    return {"ours": ours("stack"), "ours.class": ours("class stack"), "ours.size": ours("size"),
            "numpy": stack_list, "torch": stack_list, "tensorflow": tensorflow}


def gather_rows(rows, width, count):
    """Gather of ``count`` random distinct rows (random order) of a written
    (rows, width) float32 array (clear_after_read off, so rounds repeat). Bytes:
    the rows read and the output written."""
    rng = np.random.default_rng(2)
    host = rng.standard_normal((rows, width), dtype=_F32)
    indices = rng.choice(rows, count, replace=False).astype(np.int64)
    nbytes = 2 * count * width * _F32.itemsize

    def ours(backend, peer):
        arrays = _Arrays()
        handle, flow = arrays.open(rows, "float32", element_shape=(width,), clear_after_read=False)
        flow = raw_ops.TensorArrayScatterV3(handle, np.arange(rows), backend.asarray(host), flow)

        def run():
            raw_ops.TensorArrayGatherV3(handle, indices, flow, "float32")
            backend.synchronize()

        # The check keeps only the expected rows: holding ``host`` during timing would
        # change where the allocator puts each 2 MB output (see runner._compare_with_copies).
        expected = host[indices]

        def check():
            gathered = backend.to_numpy(raw_ops.TensorArrayGatherV3(handle, indices, flow, "float32"))
            _expect(np.array_equal(gathered, expected), "gather: wrong rows")
        return Case(run, None, 1, nbytes, arrays.close, check=check)

    def take(backend, peer):
        xp = peer.module
        source, where = xp.asarray(host), xp.asarray(indices)

        def run():
            xp.take(source, where, axis=0)
            peer.sync()
        return Case(run, None, 1, nbytes)

    def index_select(backend, peer):
        torch = peer.module
        source, where = _peer_array(peer, host), _peer_array(peer, indices)

        def run():
            torch.index_select(source, 0, where)
            peer.sync()
        return Case(run, None, 1, nbytes)

    def tensorflow(backend, peer):
        tf = peer.module
        ta = tf.TensorArray(tf.float32, size=rows, element_shape=(width,), clear_after_read=False).unstack(host)
        where = tf.constant(indices)

        def run():
            ta.gather(where)
            peer.sync()
        return Case(run, None, 1, nbytes)

    return {"ours": ours, "numpy": take, "torch": index_select, "tensorflow": tensorflow}


# -- gradient scatter-add -----------------------------------------------------------------------
def scatter_add_inputs(rows, width, count, distribution, hot_fraction=0.9, seed=3):
    """(indices, values, distinct): ``count`` float32 rows of ``width`` to add into
    ``rows`` destination rows; "uniform" indices, or "hot": ``hot_fraction`` of them
    at one index, the rest uniform."""
    rng = np.random.default_rng(seed)
    indices = rng.integers(0, rows, count, dtype=np.int64)
    if distribution == "hot":
        indices[rng.random(count) < hot_fraction] = rng.integers(0, rows)
    elif distribution != "uniform":
        raise ValueError(f"unknown distribution {distribution!r}; known: uniform, hot")
    values = rng.standard_normal((count, width), dtype=_F32)
    return indices, values, len(np.unique(indices))


def grad_scatter_add(rows, width, multiple, distribution, hot_fraction=0.9, mode=None):
    """``multiple * rows`` rows of ``width`` float32 added into ``rows`` destination rows.

    "ours": the op users see: TensorArrayGradV3 of a fresh forward array and a first
    TensorArrayScatterV3 into the gradient array (once), then the timed scatters,
    each aggregating every row, repeated as the floor and the peers are; called with
    keywords and int32 indices, as TensorFlow requires; "ours.int64": int64 indices. "ours.first":
    the first aggregating scatter after a fresh setup, one per round: what a training
    step pays when it makes its gradient arrays anew (cold caches, fresh temporaries).
    "ours.add_rows": the backend's scatter-add primitive on a (rows, width) slab, the
    floor under the op. ``mode``: "deterministic" or "atomic" (ours only). Bytes: the
    values read once, each distinct destination row read and written once; in the
    footprint, each of those rows once."""
    count = multiple * rows
    indices, host_values, distinct = scatter_add_inputs(rows, width, count, distribution, hot_fraction)
    nbytes = (count + 2 * distinct) * width * _F32.itemsize
    footprint = (count + distinct) * width * _F32.itemsize

    indices32 = indices.astype(np.int32)

    def scatters(first, where=indices32):
        def build(backend, peer):
            values, arrays, state = backend.asarray(host_values), _Arrays(), {}
            # The mode holds for the whole case, as around a training loop: a context per
            # call would be timed too (the floor and the peers have none).
            in_mode = contextlib.ExitStack()
            in_mode.enter_context(accumulation(mode))

            def teardown():
                arrays.close()
                in_mode.close()

            def setup():
                arrays.close()
                handle, flow = arrays.open(rows, "float32", element_shape=(width,))
                grad, grad_flow = raw_ops.TensorArrayGradV3(handle, flow, "gradients")
                grad_flow = raw_ops.TensorArrayScatterV3(grad, indices, values, grad_flow)
                state["grad"], state["flow"] = grad, grad_flow
                backend.synchronize()

            def run():
                raw_ops.TensorArrayScatterV3(handle=state["grad"], indices=where, value=values, flow_in=state["flow"])
                backend.synchronize()

            def check():
                setup()
                run()
                got = backend.to_numpy(raw_ops.TensorArrayGatherV3(state["grad"], np.arange(rows), state["flow"],
                                                                   "float32"))
                # Exact sums in float64, and the worst-case error of m float32 additions in any
                # order (atomic mode has none): (m - 1) * 2**-24 * the sum of the magnitudes.
                exact, magnitude = np.zeros((rows, width)), np.zeros((rows, width))
                np.add.at(exact, indices, 2.0 * host_values)
                np.add.at(magnitude, indices, 2.0 * np.abs(host_values))
                terms = 2 * np.bincount(indices, minlength=rows)[:, None]
                _expect(bool((np.abs(got - exact) <= terms * 2.0 ** -24 * magnitude).all()),
                        "scatter-add: wrong sums")
            if first:
                return Case(run, setup, 1, nbytes, teardown, check=check, footprint=footprint)
            setup()
            return Case(run, None, 1, nbytes, teardown, check=check, footprint=footprint)
        return build

    def add_rows(backend, peer):
        values, slab = backend.asarray(host_values), backend.zeros((rows, width), _F32)

        def run():
            backend.add_rows(slab, indices, values, mode)
            backend.synchronize()
        return Case(run, None, 1, nbytes, footprint=footprint)

    def add_at(backend, peer):
        xp = peer.module
        values, where, slab = xp.asarray(host_values), xp.asarray(indices32), xp.zeros((rows, width), _F32)
        scatter = np.add.at if xp is np else importlib.import_module("cupyx").scatter_add

        def run():
            scatter(slab, where, values)
            peer.sync()
        return Case(run, None, 1, nbytes, footprint=footprint)

    def index_add(backend, peer):
        values, where = _peer_array(peer, host_values), _peer_array(peer, indices)
        slab = peer.module.zeros((rows, width), device=peer.device)

        def run():
            slab.index_add_(0, where, values)
            peer.sync()
        return Case(run, None, 1, nbytes, footprint=footprint)

    def tensor_scatter_nd_add(backend, peer):
        tf = peer.module
        values, where, slab = tf.constant(host_values), tf.constant(indices[:, None]), tf.zeros((rows, width))

        def run():
            tf.tensor_scatter_nd_add(slab, where, values)
            peer.sync()
        return Case(run, None, 1, nbytes, footprint=footprint)

    return {"ours": scatters(first=False), "ours.int64": scatters(first=False, where=indices),
            "ours.first": scatters(first=True), "ours.add_rows": add_rows,
            "numpy": add_at, "torch": index_add,
            "tensorflow": tensor_scatter_nd_add}


# -- forward and backward through the GradientTape ----------------------------------------------
def tape_loop(steps, width):
    """Forward: ``steps`` writes of (width,) float32 inputs into a TensorArray, then its
    stack, recorded by gpu_tensorarray.GradientTape; backward: the gradient of the
    stack with respect to every input (output gradient: ones, so every input's
    gradient must be ones: checked once). Per call: per step."""
    def ours(backend, peer):
        host = np.random.default_rng(4).standard_normal((steps, width), dtype=_F32)
        inputs = [backend.asarray(row) for row in host]
        ones = backend.asarray(np.ones((steps, width), _F32))

        def forward_backward():
            with GradientTape() as tape:
                ta = TensorArray("float32", size=steps, element_shape=(width,))
                for index in range(steps):
                    ta = ta.write(index, inputs[index])
                stacked = ta.stack()
            grads = tape.gradient(stacked, inputs, output_gradients=ones)
            ta.close()
            backend.synchronize()
            return grads

        def check():
            grads = forward_backward()
            _expect(len(grads) == steps and all(np.array_equal(backend.to_numpy(g), np.ones(width, _F32))
                                                for g in grads),
                    "GradientTape gave a wrong gradient (expected ones for every input)")
        return Case(forward_backward, None, steps, None, check=check)
    return {"ours": ours}


# -- memory ---------------------------------------------------------------------------------------
def dynamic_growth_memory(steps, width):
    """A dynamic_size array grown one write at a time to ``steps`` elements of (width,)
    float32: peak traced memory over the final data size, the bytes the array holds
    (gta.stats()) over the data, and host bytes per element beyond them (tracemalloc
    traces NumPy's allocations; on a GPU only the host side)."""
    def ours(backend, peer):
        value = backend.asarray(np.ones(width, _F32))
        data = steps * width * _F32.itemsize
        on_host = backend.name != "cupy"

        def grow():
            handle, flow = raw_ops.TensorArrayV3(0, "float32", element_shape=(width,), dynamic_size=True)
            for index in range(steps):
                flow = raw_ops.TensorArrayWriteV3(handle, index, value, flow)
            backend.synchronize()
            return handle

        def measure():
            start = perf_counter()
            raw_ops.TensorArrayCloseV3(grow())
            seconds = perf_counter() - start
            tracing = tracemalloc.is_tracing()
            if not tracing:
                tracemalloc.start()
            tracemalloc.reset_peak()
            base, held_before = tracemalloc.get_traced_memory()[0], stats()["bytes"]
            handle = grow()
            current, peak = tracemalloc.get_traced_memory()
            if not tracing:
                tracemalloc.stop()
            slab = stats()["bytes"] - held_before
            raw_ops.TensorArrayCloseV3(handle)
            host = current - base - (slab if on_host else 0)
            return {
                "data_bytes": data, "slab_bytes": slab, "capacity_over_data": slab / data,
                "peak_bytes": peak - base if on_host else None,
                "peak_over_data": (peak - base) / data if on_host else None,
                "host_bytes_per_element": host / steps, "seconds": seconds, "per_call_s": seconds / steps,
            }
        return Case(measure=measure, calls=steps)
    return {"ours": ours}


# -- a model trained through torch autograd (gpu_tensorarray.torch) ---------------------------
_EXAMPLE = pathlib.Path("examples", "rnn_torch.py")


def _rnn_example():
    """examples/rnn_torch.py as a module, from the source checkout bench/ is in."""
    path = pathlib.Path(__file__).resolve().parents[1] / _EXAMPLE
    if not path.is_file():
        raise Skip(f"the torch rows time examples/rnn_torch.py, which is not at {path}")
    spec = importlib.util.spec_from_file_location("gpu_tensorarray_rnn_torch_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def torch_rnn_step(steps, batch):
    """One training step's forward+backward of examples/rnn_torch.py's GRU model (hidden
    32, float32, T=``steps``): "ours" keeps the per-step states and outputs in
    gpu_tensorarray.torch TensorArrays, "torch" the same model with a Python list and
    torch.stack. Same weights and batch; the gradients must agree (checked once)."""
    def build(tensor_arrays):
        def make(backend, peer):
            rnn = _rnn_example()
            torch = rnn.torch
            torch.manual_seed(0)
            where = rnn.torch_device(backend)
            model = rnn.RunningMeanModel().to(where)
            generator = torch.Generator().manual_seed(0)
            x, target = (v.to(where) for v in rnn.make_batch(generator, batch=batch, min_steps=steps,
                                                             max_steps=steps))
            forward = model if tensor_arrays else model.forward_list
            synchronize = (lambda: torch.cuda.synchronize(x.device)) if x.is_cuda else (lambda: None)

            def step():
                model.zero_grad()
                rnn.loss_of(*forward(x), target).backward()
                synchronize()

            def check():
                grads = []
                for candidate in (model, model.forward_list):
                    model.zero_grad()
                    rnn.loss_of(*candidate(x), target).backward()
                    grads.append([p.grad.clone() for p in model.parameters()])
                _expect(all(torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(*grads)),
                        "the TensorArray model's gradients differ from the list+stack model's")

            def run():
                with device(backend):
                    step()
            return Case(run, None, 1, None, check=check if tensor_arrays else None)
        return make
    return {"ours": build(True), "torch": build(False)}


def torch_elman_step(steps, batch):
    """One training step of bench/torch_elman.py's Elman RNN (hidden 32, 4 features, float32,
    T=``steps``): "ours" unstacks its inputs into a gpu_tensorarray.torch TensorArray, reads
    them step by step and writes its states to another, stacked for the loss; "torch" is the
    same model with a Python list and torch.stack."""
    def build(tensor_arrays):
        def make(backend, peer):
            from . import torch_elman
            torch = torch_elman.torch
            torch.manual_seed(0)
            where = _rnn_example().torch_device(backend)
            model = torch_elman.Elman().to(where)
            x = torch.randn(steps, batch, torch_elman.FEATURES).to(where)
            forward = model if tensor_arrays else model.forward_list

            def run():
                with device(backend):
                    model.zero_grad(set_to_none=True)
                    torch_elman.loss_of(forward(x)).backward()
            return Case(run, None, 1, None)
        return make
    return {"ours": build(True), "torch": build(False)}


# -- peers' arrays --------------------------------------------------------------------------------
def _peer_array(peer, host):
    """``host`` as the peer's array, on the peer's device."""
    module = peer.module
    if module.__name__ == "torch":
        return module.from_numpy(np.ascontiguousarray(host)).to(peer.device)
    return module.asarray(host)


def _peer_empty(peer, shape):
    module = peer.module
    if module.__name__ == "torch":
        return module.empty(shape, device=peer.device)
    return module.empty(shape, _F32)


# -- the table: op -> factory, providers, cases ---------------------------------------------------
def _shape(width):
    return f"({width},)"


def _copy_cases(sizes):
    nbytes = sizes["copy"]["nbytes"]
    yield f"{nbytes >> 20} MiB", {"nbytes": nbytes}


def _loop_cases(sizes):
    loop = sizes["write_loop"]
    yield f"{loop['steps']} x {_shape(loop['width'])}", dict(loop)


def _stack_cases(sizes):
    loop, stack = sizes["write_loop"], sizes["stack"]
    yield f"{loop['steps']} x {_shape(loop['width'])}", {"count": loop["steps"], "width": loop["width"]}
    for count in stack["counts"]:
        yield f"{count} x {_shape(stack['width'])}", {"count": count, "width": stack["width"]}


def _scatter_cases(sizes):
    scatter = sizes["scatter_add"]
    for width in scatter["widths"]:
        for multiple in scatter["multiples"]:
            for distribution in scatter["distributions"]:
                yield (f"S={scatter['rows']} E={width} n={multiple * scatter['rows']} {distribution}",
                       {"rows": scatter["rows"], "width": width, "multiple": multiple,
                        "distribution": distribution, "hot_fraction": scatter["hot_fraction"]})


def _gather_cases(sizes):
    gather = sizes["gather"]
    yield f"{gather['count']} of ({gather['rows']}, {gather['width']})", dict(gather)


def _tape_cases(sizes):
    loop = sizes["tape"]
    yield f"T={loop['steps']} {_shape(loop['width'])}", dict(loop)


def _torch_elman_cases(sizes):
    elman = sizes["torch_elman"]
    for steps in elman["steps"]:
        yield f"Elman T={steps} batch {elman['batch']}", {"steps": steps, "batch": elman["batch"]}


def _torch_rnn_cases(sizes):
    rnn = sizes["torch_rnn"]
    yield f"GRU T={rnn['steps']} batch {rnn['batch']}", dict(rnn)


def _memory_cases(sizes):
    memory = sizes["memory"]
    yield f"dynamic {memory['steps']} x {_shape(memory['width'])}", dict(memory)


# providers: the rows each case gets (peers only with --peers; the copy row always runs);
# modes: the accumulation modes of ours' rows (a "mode" param each), () for none.
# requires: an optional package every row of the op needs (then all of them skip without
# it, ours included), or None.
Op = namedtuple("Op", "factory cases providers modes requires", defaults=(None,))
_LOOPS = ("ours", "ours.positional", "ours.np_int32", "ours.class", "numpy", "torch", "tensorflow", "tf.raw_ops")

OPS = {
    "copy": Op(copy, _copy_cases, ("numpy",), ()),
    "write": Op(write_loop, _loop_cases, _LOOPS, ()),
    "read": Op(read_loop, _loop_cases, _LOOPS, ()),
    "stack": Op(stack_written, _stack_cases, ("ours", "ours.class", "ours.size", "numpy", "torch", "tensorflow"), ()),
    "scatter_add": Op(grad_scatter_add, _scatter_cases,
                      ("ours", "ours.int64", "ours.first", "ours.add_rows", "numpy", "torch", "tensorflow"), MODES),
    "gather": Op(gather_rows, _gather_cases, ("ours", "numpy", "torch", "tensorflow"), ()),
    "tape": Op(tape_loop, _tape_cases, ("ours",), ()),
    "memory": Op(dynamic_growth_memory, _memory_cases, ("ours",), ()),
    "torch_rnn": Op(torch_rnn_step, _torch_rnn_cases, ("ours", "torch"), (), requires="torch"),
    "torch_elman": Op(torch_elman_step, _torch_elman_cases, ("ours", "torch"), (), requires="torch"),
}


class Row(namedtuple("Row", "op case provider variant params")):
    """One benchmark row: OPS[op].factory(**params)[provider] builds its Case."""

    __slots__ = ()

    @property
    def id(self):
        return "/".join(part for part in (self.op, self.case, self.provider, self.variant) if part)

    @property
    def role(self):
        return "copy" if self.op == "copy" else PROVIDERS[self.provider].role

    def make(self, backend):
        """The row's Case; raises providers.Skip when its peer (or the op's required
        package) is not installed."""
        requires = OPS[self.op].requires
        if requires and importlib.util.find_spec(requires) is None:
            raise Skip(f"{requires} is not installed: every {self.op} row needs it")
        peer = PROVIDERS[self.provider].load(backend)
        return OPS[self.op].factory(**self.params)[self.provider](backend, peer)


def plan(sizes=SIZES, peers=False):
    """Every row, in the order OPS lists them; peers' rows only with ``peers``."""
    rows = []
    for op_name, op in OPS.items():
        for case, params in op.cases(sizes):
            for provider in op.providers:
                peer = PROVIDERS[provider].role == "peer"
                if peer and not peers and op_name != "copy":
                    continue
                for mode in (op.modes if op.modes and not peer else (None,)):
                    rows.append(Row(op_name, case, provider, mode,
                                    params if mode is None else dict(params, mode=mode)))
    return rows
