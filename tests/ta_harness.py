"""Side-by-side runs of the TensorArray raw ops: the same call on several
implementations ("sides"), every output and every error compared with the
first side's (the reference).

Used by test_stateful.py (reference model vs gpu_tensorarray.raw_ops) and
test_tf_oracle.py (TensorFlow vs the TF-faithful model vs a target).

* A side adapts one implementation: the reference model, gpu_tensorarray.raw_ops,
  or tf.raw_ops (TFSide lives in test_tf_oracle.py; it needs TensorFlow).
* Array names differ between sides (TensorFlow's and the library's counters are
  process-wide), so every name is mapped to a placeholder (``TA3``,
  ``TA3@gradients``) before handles and messages are compared.
* One side is a ReferenceModel that the argument generators read (``gen``). When
  it runs TF-faithfully and a failed op changed its state, the array is
  "tainted": TensorFlow kept a partial effect the deviating sides (docs/semantics.md
  §6.1: a failed op changes nothing) must not have, so those sides stop being
  compared on that array (and on gradient arrays created from it later).
* ``build_machine`` turns a Runner factory into a hypothesis RuleBasedStateMachine
  that draws valid and invalid calls of all eleven ops.
"""

import collections
import re

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from reference_model import ReferenceModel, WouldCrash, errors

# -- sides ----------------------------------------------------------------------------------

_PAIRS = {  # ops with several outputs -> TF's output names
    "TensorArrayV3": ("handle", "flow"),
    "TensorArrayGradV3": ("grad_handle", "flow_out"),
    "TensorArrayGradWithShape": ("grad_handle", "flow_out"),
    "TensorArrayConcatV3": ("value", "lengths"),
}
_HANDLE_FIELDS = ("handle", "grad_handle")
# Outputs in host memory, as TensorFlow's (HostMemory): NumPy on every backend.
_HOST_OUTPUTS = {("TensorArraySizeV3", None), ("TensorArrayConcatV3", "lengths")}


class Side:
    """One implementation. ``call`` returns the normalised output:
    None, ("array", ndarray), ("handle", name, raw_handle) or ("tuple", fields, items)."""

    label = "side"
    exact_messages = True   # messages must equal the reference's (else: start with it)
    faithful = False        # keeps TensorFlow's partial effects of failed ops
    model = None            # the ReferenceModel, for model sides

    def invoke(self, op, kwargs):
        raise NotImplementedError

    def handle_name(self, handle):
        return handle.name

    def to_numpy(self, value, host=False):
        return np.asarray(value)

    def call(self, op, kwargs):
        out = self.invoke(op, kwargs)
        return self.normalise(op, out)

    def normalise(self, op, out):
        if op == "TensorArrayCloseV3":
            return None if out is None else ("array", self.to_numpy(out))
        fields = _PAIRS.get(op)
        if fields is None:
            return ("array", self.to_numpy(out, (op, None) in _HOST_OUTPUTS))
        items = []
        for field, item in zip(fields, tuple(out)):
            if field in _HANDLE_FIELDS:
                items.append(("handle", self.handle_name(item), item))
            else:
                items.append(("array", self.to_numpy(item, (op, field) in _HOST_OUTPUTS)))
        return ("tuple", getattr(out, "_fields", None), items)

    def message(self, error):
        return str(error)


class ModelSide(Side):
    def __init__(self, model=None, label=None):
        self.model = model if model is not None else ReferenceModel()
        self.faithful = self.model.tf_faithful
        self.label = label or ("model(tf)" if self.faithful else "model")

    def invoke(self, op, kwargs):
        return getattr(self.model, op)(**kwargs)


class LibrarySide(Side):
    """gpu_tensorarray.raw_ops; outputs are backend arrays, compared via to_numpy.
    With ``backend`` given, every array output must be of that backend's array type,
    except the host-memory ones (_HOST_OUTPUTS), which must be NumPy arrays."""

    exact_messages = False
    label = "library"

    def __init__(self, backend=None):
        import gpu_tensorarray
        import gpu_tensorarray.raw_ops
        self.raw_ops = gpu_tensorarray.raw_ops
        self._to_numpy = gpu_tensorarray.to_numpy
        self.array_type = getattr(backend, "array_type", None)

    def invoke(self, op, kwargs):
        return getattr(self.raw_ops, op)(**kwargs)

    def to_numpy(self, value, host=False):
        if host and self.array_type is not None:
            if type(value) is not np.ndarray:
                raise Mismatch(f"library output {value!r} is a {type(value).__name__}, not a host NumPy array")
            return value
        if self.array_type is not None and not isinstance(value, self.array_type):
            raise Mismatch(f"library output {value!r} is a {type(value).__name__}, not the backend's "
                           f"{self.array_type.__name__}")
        return self._to_numpy(value)


# -- entries, names ---------------------------------------------------------------------------

class Entry:
    """One array as every side sees it. ``handles[i]`` is None where side i never got it."""

    def __init__(self, canon, handles, forward=None):
        self.canon = canon
        self.handles = handles
        self.forward = forward  # the forward Entry of a gradient array

    def __repr__(self):
        return self.canon


class Skip:
    """A side was not run for this call."""

    def __init__(self, why):
        self.why = why

    def __repr__(self):
        return f"<skipped: {self.why}>"


_SKIP_TAINTED = Skip("array tainted by a partial effect TensorFlow keeps")
_SKIP_NO_HANDLE = Skip("side has no handle for this array")


def _describe(value):
    if isinstance(value, Entry):
        return value.canon
    if isinstance(value, np.ndarray):
        if value.size <= 8:
            return f"np.array({value.tolist()!r}, {value.dtype.name})"
        return f"<{value.dtype.name} array {value.shape}>"
    if isinstance(value, np.dtype):
        return value.name
    return repr(value)


def _show(result):
    if isinstance(result, BaseException):
        return f"{type(result).__name__}: {result}"
    if result is None or isinstance(result, Skip):
        return repr(result)
    kind = result[0]
    if kind == "array":
        a = result[1]
        return f"{a.dtype.name}{list(a.shape)} {a.tolist()!r}"
    if kind == "handle":
        return f"handle {result[1]}"
    return "(" + ", ".join(f"{f}={_show(i)}" for f, i in zip(result[1] or ("?",) * 9, result[2])) + ")"


COVERAGE = collections.Counter()  # (op, outcome) over the whole process: see coverage_report()


def _outcome(result):
    if isinstance(result, BaseException):
        text = re.sub(r"(TensorArrayV3|foo)_[0-9]+(@[A-Za-z_0-9]*)?", "<name>", str(result))
        text = re.sub(r"[0-9]+", "N", text)
        text = re.sub(r"\[[N,?]*\]|<unknown>", "S", text)
        return f"{type(result).__name__}: {text[:90]}"
    return "ok"


def coverage_report():
    """Which op outcomes (ok, each error message template) the runs reached."""
    lines = [f"{count:7d}  {op}  {outcome}" for (op, outcome), count in sorted(COVERAGE.items())]
    return "\n".join(lines)


class Mismatch(AssertionError):
    pass


def _base(name):
    match = re.fullmatch(r"(.+)_[0-9]+", name)
    return match.group(1) if match else f"<malformed name {name!r}>"


class Runner:
    """Runs each call on every side and compares with side 0."""

    def __init__(self, sides, gen_index=0):
        self.sides = sides
        self.gen_side = sides[gen_index]
        self.gen = self.gen_side.model
        assert isinstance(self.gen, ReferenceModel)
        self.entries = []        # every array, once (a repeated grad call returns the same entry)
        self.by_canon = {}
        self.forward_count = 0
        self.names = [dict() for _ in sides]   # per side: its forward name -> placeholder
        self._patterns = [None for _ in sides]
        self.tainted = set()     # canon names
        self.log = []
        self.counts = {"calls": 0, "errors": 0, "skipped_crash": 0, "tainted_skips": 0}
        self.reference_faithful = sides[0].faithful
        self.failed = False      # a mismatch was reported: the sides' states may differ now

    # -- names -------------------------------------------------------------------------------
    def _canon(self, i, text):
        pattern = self._patterns[i]
        if pattern is None:
            return text
        return pattern.sub(lambda m: self.names[i][m.group(0)], text)

    def _register_forward(self, i, name, canon):
        self.names[i][name] = canon
        alternatives = sorted(self.names[i], key=len, reverse=True)
        self._patterns[i] = re.compile("(?:" + "|".join(re.escape(n) for n in alternatives) + r")(?![0-9])")

    # -- running -------------------------------------------------------------------------------
    def _skipped_for(self, i, entry):
        if entry is None:
            return None
        if entry.handles[i] is None:
            return _SKIP_NO_HANDLE
        if self.reference_faithful and not self.sides[i].faithful and entry.canon in self.tainted:
            return _SKIP_TAINTED
        return None

    def call(self, op, _probe=True, **kwargs):
        """Run ``op`` everywhere; returns (per-side results, gen side's result or exception).
        Raises Mismatch on any disagreement. After a failed op on an array, every side's
        size of that array is compared too (unless ``_probe`` is false)."""
        entry = kwargs.get("handle")
        line = f"{op}(" + ", ".join(f"{k}={_describe(v)}" for k, v in kwargs.items()) + ")"
        gen_i = self.sides.index(self.gen_side)
        before = self.gen.snapshot(entry.handles[gen_i]) if entry is not None else None
        self.counts["calls"] += 1

        results = [None] * len(self.sides)
        order = [gen_i] + [i for i in range(len(self.sides)) if i != gen_i]
        for i in order:
            skip = self._skipped_for(i, entry)
            if skip is not None:
                results[i] = skip
                continue
            side_kwargs = {k: (v.handles[i] if isinstance(v, Entry) else v) for k, v in kwargs.items()}
            try:
                results[i] = self.sides[i].call(op, side_kwargs)
            except Mismatch:
                self.failed = True
                raise
            except WouldCrash as crash:
                assert i == gen_i, "only the generating model may predict a crash"
                self.counts["skipped_crash"] += 1
                self.log.append(f"{line}  -> skipped: {crash}")
                return None, crash
            except Exception as error:  # noqa: BLE001 - every exception is compared
                results[i] = error
        self.log.append(line + "  -> " + _show(results[0]))
        COVERAGE[(op, _outcome(results[0]))] += 1
        self._compare(op, line, results)

        gen_result = results[gen_i]
        if isinstance(gen_result, errors.OpError):
            self.counts["errors"] += 1
            if entry is not None:
                after = self.gen.snapshot(entry.handles[gen_i])
                if after != before:
                    if not self.gen.tf_faithful:
                        self.failed = True
                        raise Mismatch(f"the model changed the array on a failed op: {line}\n"
                                       f"before: {before}\nafter:  {after}")
                    self.tainted.add(entry.canon)
                    self.log.append(f"   (tainted {entry.canon}: TensorFlow keeps a partial effect)")
                if _probe:
                    self.call("TensorArraySizeV3", _probe=False, handle=entry, flow_in=0.0)
        elif op == "TensorArrayV3":
            self._new_entry(results, forward=None)
        elif op in ("TensorArrayGradV3", "TensorArrayGradWithShape"):
            self._new_entry(results, forward=entry)
        return results, gen_result

    def _new_entry(self, results, forward):
        handles = []
        canon = None
        for i, result in enumerate(results):
            if isinstance(result, Skip) or isinstance(result, BaseException) or result is None:
                handles.append(None)
                continue
            _, name, raw = result[2][0]
            handles.append(raw)
            if forward is None:
                if canon is None:
                    canon = f"TA{self.forward_count}"
                    self.forward_count += 1
                self._register_forward(i, name, canon)
        for i, result in enumerate(results):
            if handles[i] is not None and forward is not None:
                canon = self._canon(i, result[2][0][1])
                break
        existing = self.by_canon.get(canon)
        if existing is not None:  # a gradient array returned as is: one entry per array
            for i, handle in enumerate(handles):
                if existing.handles[i] is None:
                    existing.handles[i] = handle
            return
        if forward is not None and forward.canon in self.tainted:
            self.tainted.add(canon)  # made from a forward array whose state differs on deviating sides
        entry = Entry(canon, handles, forward)
        self.entries.append(entry)
        self.by_canon[canon] = entry

    # -- comparing ------------------------------------------------------------------------------
    def _fail(self, line, why, results):
        self.failed = True
        report = [f"MISMATCH in {line}", why]
        for side, result in zip(self.sides, results):
            report.append(f"  {side.label:>10}: {_show(result)}")
        report.append("recent calls (reference's result):")
        report.extend("  " + entry for entry in self.log[-40:])
        raise Mismatch("\n".join(report))

    def _compare(self, op, line, results):
        ref = results[0]
        assert not isinstance(ref, Skip)
        for i in range(1, len(self.sides)):
            got = results[i]
            if isinstance(got, Skip):
                self.counts["tainted_skips"] += got is _SKIP_TAINTED
                continue
            side = self.sides[i]
            if isinstance(ref, BaseException) or isinstance(got, BaseException):
                if not (isinstance(ref, BaseException) and isinstance(got, BaseException)):
                    self._fail(line, f"{side.label}: one side raised, the other did not", results)
                if type(got) is not type(ref):
                    self._fail(line, f"{side.label}: error class {type(got).__name__} != {type(ref).__name__}", results)
                if getattr(ref, "tf_text", True) is False or getattr(got, "tf_text", True) is False:
                    continue  # a deviation with no TensorFlow text: class only
                want = self._canon(0, self.sides[0].message(ref))
                have = self._canon(i, side.message(got))
                ok = have == want if side.exact_messages else have.startswith(want)
                if not ok:
                    self._fail(line, f"{side.label}: message differs\n   want: {want!r}\n   have: {have!r}", results)
                continue
            self._compare_outputs(line, i, ref, got, results)

    def _compare_outputs(self, line, i, ref, got, results):
        side = self.sides[i]
        if ref is None or got is None:
            if ref is not got:
                self._fail(line, f"{side.label}: output {_show(got)} != {_show(ref)}", results)
            return
        if ref[0] != got[0]:
            self._fail(line, f"{side.label}: output kind {got[0]} != {ref[0]}", results)
        if ref[0] == "tuple":
            if got[1] != ref[1]:
                self._fail(line, f"{side.label}: output fields {got[1]} != {ref[1]}", results)
            for a, b in zip(ref[2], got[2]):
                self._compare_outputs(line, i, a, b, results)
        elif ref[0] == "handle":
            want, have = self._canon(0, ref[1]), self._canon(i, got[1])
            if "@" not in want:  # a new forward array: "<tensor_array_name or TensorArrayV3>_<counter>"
                want, have = _base(want), _base(have)
            if have != want:
                self._fail(line, f"{side.label}: handle name {have!r} != {want!r}", results)
        else:
            a, b = ref[1], got[1]
            if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(a, b):
                self._fail(line, f"{side.label}: value {_show(got)} != {_show(ref)}", results)

    # -- end of a run ----------------------------------------------------------------------------
    def readback(self):
        """Destructive final comparison of every array: size, then every slot read."""
        gen_i = self.sides.index(self.gen_side)
        for entry in self.entries:
            handle = entry.handles[gen_i]
            state = self.gen.state(handle)
            size = len(state.slots)
            self.call("TensorArraySizeV3", _probe=False, handle=entry, flow_in=0.0)
            if state.closed:
                continue
            for index in range(size + (1 if state.is_grad else 0)):
                self.call("TensorArrayReadV3", _probe=False, handle=entry, index=index, flow_in=0.0,
                          dtype=state.dtype)


# -- argument generators ------------------------------------------------------------------------
#
# Each rule draws one seed from hypothesis and makes every choice with a NumPy generator
# seeded by it: one hypothesis draw per step keeps a run cheap (the per-draw overhead
# dominated), hypothesis still chooses and shrinks the sequence of rules, and the
# runner's log shows every call concretely.

DTYPES = tuple(np.dtype(d) for d in ("float32", "int32", "int64", "bool", "float16", "complex64"))
_DTYPE_WEIGHTS = (3, 3, 1, 1, 1, 1)
SOURCES = ("gradients", "gradients_1", "")
FLOWS = (0.0, 1.0, 5.5)
PREPENDS = (np.array([], np.int32), np.array([2], np.int32), np.array([1, 3], np.int32),
            np.int32(2), np.array([-1], np.int32), np.array([[1]], np.int32))
_PREPEND_WEIGHTS = (3, 3, 2, 1, 1, 1)


class Chooser:
    """The random choices of one step."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def chance(self, p):
        return self.rng.random() < p

    def int(self, low, high):
        """Uniform in [low, high]."""
        return int(self.rng.integers(low, high + 1))

    def pick(self, items, weights=None):
        if weights is None:
            return items[int(self.rng.integers(len(items)))]
        p = np.asarray(weights, float)
        return items[int(self.rng.choice(len(items), p=p / p.sum()))]

    def dim(self):
        return self.pick((0, 1, 2, 3), (1, 3, 3, 2))

    def shape(self, max_rank=2):
        return tuple(self.dim() for _ in range(self.int(0, max_rank)))

    def partial_shape(self):
        kind = self.pick(("unknown", "partial", "full"), (1, 1, 2))
        if kind == "unknown":
            return None
        dims = self.shape()
        if kind == "partial":
            dims = tuple(None if self.chance(0.5) else d for d in dims)
        return dims

    def shape_like(self, partial):
        """A concrete shape compatible with ``partial``."""
        if partial is None:
            return self.shape()
        return tuple(self.dim() if d is None else d for d in partial)

    def dtype(self, right, p_right=0.85):
        return right if self.chance(p_right) else self.pick(DTYPES)

    def values(self, dtype, shape):
        """Integer-valued data: sums stay exact in every dtype. Sometimes not a plain
        contiguous array: a broadcast view (rows share memory, read-only), a reversed or
        strided view, Fortran order: callers' arrays come in every layout."""
        if dtype.kind == "b":
            value = self.rng.integers(0, 2, size=shape).astype(bool)
        else:
            value = self.rng.integers(-3, 4, size=shape).astype(dtype)
        if not value.ndim or not self.chance(0.2):
            return value
        form = self.pick(("broadcast", "reversed", "strided", "fortran"))
        if form == "broadcast" and value.shape[0]:
            return np.broadcast_to(value[:1], value.shape)
        if form == "reversed":
            return value[::-1]
        if form == "strided":
            return np.repeat(value, 2, axis=-1)[..., ::2]
        return np.asfortranarray(value)

    def element_shape(self, state, index):
        """A shape for a write at ``index``: mostly compatible with the array's element
        shape, or the slot's own shape (what aggregation needs), sometimes anything."""
        options, weights = ["compatible", "any"], [6, 1]
        if 0 <= index < len(state.slots) and state.slots[index].written:
            options.append("slot")
            weights.append(8 if state.is_grad else 2)
        choice = self.pick(options, weights)
        if choice == "slot":
            return tuple(state.slots[index].shape)
        if choice == "any":
            return self.shape(max_rank=3)
        return self.shape_like(state.element_shape)

    def attr_shape(self, state):
        """An element_shape attr: unknown, derived from the array's, or anything."""
        kind = self.pick(("none", "derived", "any"), (3, 2, 1))
        if kind == "none":
            return None
        es = state.element_shape
        if kind == "any" or es is None:
            return self.partial_shape()
        return tuple(None if self.chance(0.3) else d for d in es)

    def index(self, state, extra=1):
        index = self.int(-1, len(state.slots) + extra)
        if not (state.dynamic_size or state.is_grad) and self.chance(0.02):
            index = self.pick((2**31 - 1, -(2**31)))     # huge: out of bounds, never grown to
        if self.chance(0.04):
            return np.array([index], np.int32)
        return index


def build_machine(make_runner, name="TensorArrayMachine"):
    """A RuleBasedStateMachine whose runs compare the sides of ``make_runner()``."""

    seeds = st.integers(0, 2**32 - 1)

    class Machine(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.runner = make_runner()

        def _pick(self, c):
            entry = c.pick(self.runner.entries)
            gen_i = self.runner.sides.index(self.runner.gen_side)
            return entry, self.runner.gen.state(entry.handles[gen_i])

        def teardown(self):
            if not self.runner.failed:  # after a mismatch, report that one alone
                self.runner.readback()

        @precondition(lambda self: len(self.runner.entries) < 8)
        @rule(seed=seeds)
        def create(self, seed):
            c = Chooser(seed)
            size = c.pick((c.int(0, 6), -1, np.array([2], np.int32)), (18, 1, 1))
            self.runner.call(
                "TensorArrayV3", size=size, dtype=c.pick(DTYPES, _DTYPE_WEIGHTS),
                element_shape=c.partial_shape(), dynamic_size=c.chance(0.4),
                clear_after_read=c.chance(0.6), identical_element_shapes=c.chance(0.5),
                tensor_array_name=c.pick(("", "foo"), (2, 1)))

        @precondition(lambda self: self.runner.entries)
        @rule(seed=seeds)
        def write(self, seed):
            c = Chooser(seed)
            entry, state = self._pick(c)
            index = c.index(state, extra=2 if state.dynamic_size else 1)
            shape = c.element_shape(state, int(np.asarray(index).reshape(-1)[0]))
            value = c.values(c.dtype(state.dtype), shape)
            self.runner.call("TensorArrayWriteV3", handle=entry, index=index, value=value, flow_in=c.pick(FLOWS))

        @precondition(lambda self: self.runner.entries)
        @rule(seed=seeds)
        def read(self, seed):
            c = Chooser(seed)
            entry, state = self._pick(c)
            self.runner.call("TensorArrayReadV3", handle=entry, index=c.index(state, extra=2 if state.is_grad else 1),
                             flow_in=c.pick(FLOWS), dtype=c.dtype(state.dtype, 0.9))

        @precondition(lambda self: self.runner.entries)
        @rule(seed=seeds)
        def gather(self, seed):
            c = Chooser(seed)
            entry, state = self._pick(c)
            size = len(state.slots)
            if c.chance(0.5) and size:
                indices = list(range(size))  # a stack
            else:
                # More than 8 indices take the vectorised checks.
                count = c.int(9, 14) if c.chance(0.15) else c.int(0, 4)
                far = (2**31 - 1) if not state.is_grad and c.chance(0.05) else size + 1
                indices = [c.int(-1, far) if c.chance(0.15) else c.int(0, max(size - 1, 0))
                           for _ in range(count)]
            indices = np.array(indices, np.int32)
            if c.chance(0.04):
                indices = np.int32(indices[0] if indices.size else 0)
            self.runner.call("TensorArrayGatherV3", handle=entry, indices=indices, flow_in=c.pick(FLOWS),
                             dtype=c.dtype(state.dtype, 0.9), element_shape=c.attr_shape(state))

        @precondition(lambda self: self.runner.entries)
        @rule(seed=seeds)
        def scatter(self, seed):
            c = Chooser(seed)
            entry, state = self._pick(c)
            size = len(state.slots)
            top = size + (3 if state.dynamic_size else 0)
            if c.chance(0.3) and size:
                indices = list(c.rng.permutation(size))  # an unstack
            else:
                indices = [c.int(-1, top) if c.chance(0.15) else c.int(0, max(top - 1, 0))
                           for _ in range(c.int(9, 12) if c.chance(0.1) else c.int(0, 4))]
            element = c.element_shape(state, indices[0] if indices else -1)
            rows = c.int(0, 4) if c.chance(0.05) else len(indices)
            shape = () if c.chance(0.03) else (rows,) + element
            value = c.values(c.dtype(state.dtype), shape)
            indices = np.array(indices, np.int32)
            if c.chance(0.03):
                indices = np.int32(indices[0] if indices.size else 0)
            self.runner.call("TensorArrayScatterV3", handle=entry, indices=indices, value=value,
                             flow_in=c.pick(FLOWS))

        @precondition(lambda self: self.runner.entries)
        @rule(seed=seeds)
        def split(self, seed):
            c = Chooser(seed)
            entry, state = self._pick(c)
            n = len(state.slots) if c.chance(0.8) else c.int(0, 6)
            lengths = [c.int(0, 3) for _ in range(n)]
            if lengths and c.chance(0.05):
                lengths[c.int(0, n - 1)] = -1
            elif lengths and c.chance(0.03):
                lengths[c.int(0, n - 1)] = 2**40          # huge: the lengths cannot add up
            es = state.element_shape
            if 0 < n and c.chance(0.6) and state.slots and state.slots[0].written and len(state.slots[0].shape):
                rest = tuple(state.slots[0].shape[1:])  # shaped like what is there (aggregation)
            else:
                rest = c.shape_like(None if es is None or len(es) == 0 else es[1:])
            total = c.int(0, 6) if c.chance(0.05) or sum(lengths) > 64 else sum(lengths)
            shape = () if c.chance(0.03) else (max(total, 0),) + rest
            value = c.values(c.dtype(state.dtype), shape)
            lengths = np.array(lengths, np.int64)
            if c.chance(0.03):
                lengths = np.int64(lengths[0] if lengths.size else 0)
            self.runner.call("TensorArraySplitV3", handle=entry, value=value, lengths=lengths,
                             flow_in=c.pick(FLOWS))

        @precondition(lambda self: self.runner.entries)
        @rule(seed=seeds)
        def concat(self, seed):
            c = Chooser(seed)
            entry, state = self._pick(c)
            es = state.element_shape
            attr = c.attr_shape(state)
            if attr is not None and es is not None and len(es) >= 1 and c.chance(0.5):
                attr = tuple(es[1:])
            self.runner.call("TensorArrayConcatV3", handle=entry, flow_in=c.pick(FLOWS),
                             dtype=c.dtype(state.dtype, 0.9), element_shape_except0=attr)

        @precondition(lambda self: any(e.forward is not None for e in self.runner.entries))
        @rule(seed=seeds)
        def accumulate(self, seed):
            """Writes into a gradient array shaped like its slots: aggregation, duplicates."""
            c = Chooser(seed)
            entry = c.pick([e for e in self.runner.entries if e.forward is not None])
            gen_i = self.runner.sides.index(self.runner.gen_side)
            state = self.runner.gen.state(entry.handles[gen_i])
            size = len(state.slots)
            if not size:
                return
            indices = [c.int(0, size - 1) for _ in range(c.int(9, 24) if c.chance(0.15) else c.int(1, 4))]
            slot = state.slots[indices[0]]
            element = tuple(slot.shape) if slot.written and c.chance(0.9) else c.shape_like(state.element_shape)
            dtype = c.dtype(state.dtype, 0.95)
            if c.chance(0.5):
                value = c.values(dtype, element)
                self.runner.call("TensorArrayWriteV3", handle=entry, index=indices[0], value=value,
                                 flow_in=c.pick(FLOWS))
            else:
                value = c.values(dtype, (len(indices),) + element)
                self.runner.call("TensorArrayScatterV3", handle=entry, indices=np.array(indices, np.int32),
                                 value=value, flow_in=c.pick(FLOWS))

        @precondition(lambda self: self.runner.entries)
        @rule(seed=seeds)
        def size_or_close(self, seed):
            c = Chooser(seed)
            entry, _ = self._pick(c)
            if c.chance(0.3):
                self.runner.call("TensorArrayCloseV3", handle=entry)
            else:
                self.runner.call("TensorArraySizeV3", handle=entry, flow_in=c.pick(FLOWS))

        @precondition(lambda self: self.runner.entries)
        @rule(seed=seeds)
        def grad(self, seed):
            c = Chooser(seed)
            entry, _ = self._pick(c)
            source = c.pick(SOURCES, (3, 2, 1))
            if c.chance(0.35):
                self.runner.call("TensorArrayGradWithShape", handle=entry, flow_in=c.pick(FLOWS),
                                 shape_to_prepend=c.pick(PREPENDS, _PREPEND_WEIGHTS), source=source)
            else:
                self.runner.call("TensorArrayGradV3", handle=entry, flow_in=c.pick(FLOWS), source=source)

    Machine.__name__ = Machine.__qualname__ = name
    return Machine


__all__ = [
    "COVERAGE", "coverage_report", "Side", "ModelSide", "LibrarySide", "Runner", "Entry", "Mismatch",
    "Chooser", "build_machine", "DTYPES",
]
