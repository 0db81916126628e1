"""``python -m gpu_tensorarray selftest``: is this machine's backend right?

For each backend checked (default: every available one but numpy, the reference):
1. load: create the backend and launch once (on cupy this compiles every kernel
   for this GPU, on emulated it loads the library built at install);
2. every row primitive (take_rows, put_rows, add_rows in both accumulation
   modes) for every dtype (bfloat16 where ml_dtypes is installed), on random
   data, against the numpy backend: bitwise where docs/guide.md promises it (copies,
   deterministic scatter-add), else within the error bound of a reordered sum
   (float atomics), with its time;
3. placement, on every device the backend has (each visible GPU on cupy): an
   array created there is written, grown, scattered, read, gathered and
   scatter-added through the public ops, and every result must live there.
Prints a table (or JSON); the exit code is 1 when anything failed, or when nothing could be checked.
"""

import itertools
import json
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np

from . import accumulation, available_backends, device, dtypes, get_accumulation, get_backend
from .backends import _parse as parse_backend
from .errors import InvalidArgumentError, UnavailableError, UnimplementedError
from .tensor_array import TensorArray

__all__ = ["run", "check_backend", "Check"]

REFERENCE = "numpy"
MODES = ("deterministic", "atomic")
N_DESTINATIONS, N_ROWS, ROW_SHAPE = 256, 4096, (7,)
REPEATS = 5
_KERNELS = {"take_rows": "gather_rows", "put_rows": "put_rows"}


@dataclass
class Check:
    backend: str
    device: str
    check: str          # "load", "take_rows", "put_rows", "add_rows", "placement"
    mode: str           # accumulation mode, or "-"
    dtype: str
    kernel: str         # the instantiation it ran, "numpy", or "-"
    compared: str       # "bitwise", "reorder bound", ...
    ok: bool
    detail: str = ""
    seconds: float | None = None


def run(specs=None, as_json=None, out=None, err=None):
    """Check each backend in ``specs`` (names or devices; default: every available
    one but numpy); print a table to ``out`` (default stdout), or JSON to the file
    ``as_json`` ("-": to ``out``, every other line then to ``err``, default stderr, so
    that ``out`` parses). 0 when all passed; 1 on a failure, and when nothing could be
    checked (no backend but the numpy reference is usable: a machine whose kernels no
    check reached has not passed)."""
    out = sys.stdout if out is None else out
    notes = (sys.stderr if err is None else err) if as_json == "-" else out
    # Opened before the checks (minutes on a new GPU): a path that cannot be written fails first;
    # for appending, so that an interrupted run leaves an earlier run's results as they were.
    file = open(as_json, "a") if as_json and as_json != "-" else None
    try:
        if specs is None:
            found = available_backends()
            specs = [name for name, problem in found.items() if problem is None and name != REFERENCE]
            for name, problem in found.items():
                if problem is not None:
                    print(f"selftest: {name} not checked: {problem}", file=notes)
        bfloat16_problem = _bfloat16_problem()
        if bfloat16_problem:
            print(f"selftest: bfloat16 not checked: {bfloat16_problem}", file=notes)
        checks = [check for spec in specs for check in check_backend(spec)]
        if as_json:
            text = json.dumps([asdict(check) for check in checks], indent=1)
            if file is not None:
                file.seek(0)
                file.truncate()
            print(text, file=out if file is None else file)
    finally:
        if file is not None:
            file.close()
    if as_json != "-":
        _print_table(checks, out)
    failed = [check for check in checks if not check.ok]
    if not checks:
        print(f"selftest: nothing was checked: no backend besides the {REFERENCE} reference is usable here", file=notes)
    else:
        print(f"selftest: {len(checks) - len(failed)} of {len(checks)} checks passed"
              + (f"; FAILED: {', '.join(sorted({c.check + '/' + c.dtype for c in failed}))}" if failed else ""),
              file=notes)
    return 1 if failed or not checks else 0


def check_backend(spec):
    """Every check for one backend, as a list of Check."""
    start = time.perf_counter()
    try:
        backend = get_backend(spec)
        probe = backend.asarray(np.arange(6, dtype=np.float32).reshape(3, 2))
        first = backend.to_numpy(backend.take_rows(probe, np.array([2, 0], np.int64)))
        loaded = np.array_equal(first, [[4, 5], [0, 1]])
        load = Check(backend.name, backend.device, "load", "-", "-", "-", "works", loaded,
                     "" if loaded else f"a first gather returned {first.tolist()}", time.perf_counter() - start)
    except Exception as error:     # the report names whatever went wrong; nothing more can run
        return [Check(*_requested(spec), "load", "-", "-", "-", "works", False, _describe(error))]
    reference = get_backend(REFERENCE)
    checks = [load]
    rng = np.random.default_rng(0)
    _bfloat16_problem()                 # bfloat16 joins SUPPORTED where ml_dtypes is installed
    for dtype in sorted(dtypes.SUPPORTED, key=lambda d: d.name):
        for primitive in ("take_rows", "put_rows"):
            checks.append(_check_primitive(backend, reference, primitive, "-", dtype, rng))
        if dtype in dtypes.AGGREGATABLE:
            for mode in MODES:
                checks.append(_check_primitive(backend, reference, "add_rows", mode, dtype, rng))
    for placed in _every_device(backend):
        for mode in MODES:
            checks.append(_check_placement(placed, mode))
    return checks


def _requested(spec):
    """(backend, device) that ``spec`` asks for, for the row of one that did not load:
    "-" for the device of a spec that names none."""
    try:
        parsed = parse_backend(spec)
    except InvalidArgumentError:
        return str(spec), "-"
    if not isinstance(parsed, tuple):        # a Backend object
        return parsed.name, parsed.device
    name, index = parsed
    if name != "cupy":
        return name, "cpu"
    return name, "cuda" if index is None else f"cuda:{index}"


def _bfloat16_problem():
    """None once bfloat16 is usable (and in dtypes.SUPPORTED), else why not."""
    try:
        dtypes.bfloat16()
    except UnimplementedError as error:
        return str(error)
    return None


def _inexact(dtype):
    return dtype.kind in "fc" or dtype.name == dtypes.BFLOAT16


# -- the primitives against numpy ---------------------------------------------------------------
def _check_primitive(backend, reference, primitive, mode, dtype, rng):
    kernel, compared = _expectation(backend, primitive, mode, dtype)
    check = Check(backend.name, backend.device, primitive, mode, dtype.name, kernel, compared, False)
    dst = _values(dtype, (N_DESTINATIONS,) + ROW_SHAPE, rng)
    if primitive == "put_rows":
        indices = rng.permutation(N_DESTINATIONS)[:N_DESTINATIONS // 2].astype(np.int64)
    else:
        indices = rng.integers(0, N_DESTINATIONS, N_ROWS).astype(np.int64)
        indices[rng.random(N_ROWS) < 0.5] = N_DESTINATIONS // 3        # one long chain of adds
    rows = _values(dtype, (len(indices),) + ROW_SHAPE, rng)
    try:
        expected = _apply(reference, primitive, mode, dst, indices, rows)
        actual = _apply(backend, primitive, mode, dst, indices, rows)
        check.detail = _compare(actual, expected, compared, dst, indices, rows)
        check.ok = not check.detail
        check.seconds = _time(backend, primitive, mode, dst, indices, rows)
    except Exception as error:
        check.detail = _describe(error)
    return check


def _expectation(backend, primitive, mode, dtype):
    """(what runs, how its result must compare): docs/guide.md, "What is bitwise across backends"."""
    compiled = getattr(backend, "atomic_dtypes", None)   # the kernel backends (cupy, emulated)
    if primitive == "add_rows":
        atomic = mode == "atomic" and (compiled is None or dtype.name in compiled)
        kernel = "add_rows_atomic" if atomic and compiled is not None else "add_rows_deterministic"
        compared = "reorder bound" if atomic and _inexact(dtype) else "bitwise"
    else:
        kernel, compared = _KERNELS[primitive], "bitwise"
    return (f"{kernel}<{dtypes.c_type(dtype)}>" if compiled is not None else REFERENCE), compared


def _apply(backend, primitive, mode, dst, indices, rows):
    """The primitive's result on ``backend``, as a host array (inputs are copied there)."""
    if primitive == "take_rows":
        return backend.to_numpy(backend.take_rows(backend.asarray(dst.copy()), indices))
    target = backend.asarray(dst.copy())
    if primitive == "put_rows":
        backend.put_rows(target, indices, backend.asarray(rows))
    else:
        with accumulation(mode), np.errstate(all="ignore"):
            backend.add_rows(target, indices, backend.asarray(rows), get_accumulation())
    return backend.to_numpy(target)


def _time(backend, primitive, mode, dst, indices, rows):
    """Best of REPEATS calls, waiting for the device each time."""
    target, device_rows = backend.asarray(dst.copy()), backend.asarray(rows)
    best = float("inf")
    with accumulation(mode if mode != "-" else "deterministic"), np.errstate(all="ignore"):
        for _ in range(REPEATS):
            backend.synchronize()
            start = time.perf_counter()
            if primitive == "take_rows":
                backend.take_rows(target, indices)
            elif primitive == "put_rows":
                backend.put_rows(target, indices, device_rows)
            else:
                backend.add_rows(target, indices, device_rows, get_accumulation())
            backend.synchronize()
            best = min(best, time.perf_counter() - start)
    return best


def _compare(actual, expected, compared, dst, indices, rows):
    """"" when ``actual`` passes, else what differs."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return f"got {actual.dtype}{list(actual.shape)}, expected {expected.dtype}{list(expected.shape)}"
    if compared == "bitwise":
        differ = _bits(actual) != _bits(expected)
    else:
        # Any order of the adds: each rounds, so within 2 * (adds) * (eps * magnitude + tiny);
        # Atomics flush subnormals or keep them by dtype (float32's flush, float64's and
        # bfloat16's keep them), unlike the deterministic adds: the tiny term allows either.
        magnitudes = np.abs(dst).astype(np.float64)
        np.add.at(magnitudes, indices, np.abs(rows).astype(np.float64))
        adds = np.bincount(indices, minlength=len(dst)).max() + 1
        info = dtypes.finfo(actual.dtype)
        bound = 2 * adds * (float(info.eps) * magnitudes + float(info.tiny))
        differ = ~(np.abs(actual.astype(np.complex128) - expected.astype(np.complex128)) <= bound)
    differ = differ.reshape(len(actual), -1).any(axis=1)
    if not differ.any():
        return ""
    rows_differing = np.flatnonzero(differ)
    first = int(rows_differing[0])
    return (f"{len(rows_differing)} of {len(actual)} rows differ ({compared}); row {first}: "
            f"{actual[first].tolist()[:3]}... != {expected[first].tolist()[:3]}...")


def _bits(array):
    flat = np.ascontiguousarray(array).reshape(len(array), -1)
    return flat.view(np.uint8)


def _values(dtype, shape, rng):
    """Random values that exercise rounding: spread magnitudes, subnormals, signed zeros,
    full-range integers (which wrap when added). No NaN: its payload is not bitwise."""
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    info = dtypes.finfo(dtype)                  # complex: its parts' float type
    scales = [1.0, 1e-3, 30.0, float(info.smallest_subnormal) * 7, 0.0]

    def part():
        scale = rng.choice(scales, shape)
        signs = np.where(rng.random(shape) < 0.5, -1.0, 1.0)
        return np.where(scale == 0.0, signs * 0.0, rng.standard_normal(shape) * scale).astype(info.dtype)

    if dtype.kind != "c":
        return part()
    values = np.empty(shape, dtype)
    values.real, values.imag = part(), part()
    return values


# -- placement -----------------------------------------------------------------------------------
def _every_device(backend):
    """The backend on each device of its kind: every visible GPU for cupy."""
    if not backend.device.startswith("cuda"):
        return [backend]
    found = []
    for index in itertools.count():
        try:
            found.append(get_backend(f"cuda:{index}"))
        except UnavailableError:
            return found


def _placement(array):
    where = getattr(array, "device", None)
    return f"cuda:{where.id}" if hasattr(where, "id") else "cpu"


def _check_placement(backend, mode):
    """Public ops on an array created on ``backend``'s device (while another may be
    current): each result must live there and hold the right values. Small integers
    in float32 add exactly in any order, so both modes compare exactly."""
    check = Check(backend.name, backend.device, "placement", mode, "float32", "-", "exact, on its device", False)
    values = np.arange(24, dtype=np.float32).reshape(6, 4)
    start = time.perf_counter()
    try:
        with device(backend), accumulation(mode):
            ta = TensorArray("float32", size=0, dynamic_size=True, clear_after_read=False)
            for index in range(4):                                    # grows the slab twice
                ta = ta.write(index, backend.asarray(values[index]))
            ta = ta.scatter([4, 5], backend.asarray(values[4:]))
            grad = ta.grad("selftest")
            grad = grad.scatter([0, 2, 0], backend.asarray(values[:3]))   # slot 0 adds
            grad = grad.write(2, backend.asarray(values[5]))              # an aggregated write
            results = {"read": (ta.read(5), values[5]),
                       "gather": (ta.gather([3, 0, 5]), values[[3, 0, 5]]),
                       "stack": (ta.stack(), values),
                       "scatter-add": (grad.gather([0, 2]), np.stack([values[0] + values[2], values[1] + values[5]]))}
            grad.close()
            ta.close()
        problems = [f"{what} is on {_placement(result)}" for what, (result, _) in results.items()
                    if _placement(result) != backend.device]
        problems += [f"{what} holds {backend.to_numpy(result).tolist()}, expected {expected.tolist()}"
                     for what, (result, expected) in results.items()
                     if not np.array_equal(backend.to_numpy(result), expected)]
        check.detail = "; ".join(problems)
        check.ok = not problems
    except Exception as error:
        check.detail = _describe(error)
    check.seconds = time.perf_counter() - start
    return check


# -- output --------------------------------------------------------------------------------------
def _describe(error):
    return f"{type(error).__name__}: {error}"


def _print_table(checks, out):
    for (name, where), group in itertools.groupby(checks, key=lambda check: (check.backend, check.device)):
        print(f"selftest: {name}{'' if where == '-' else ' on ' + where} (reference: {REFERENCE})", file=out)
        print(f"  {'check':10s} {'mode':13s} {'dtype':10s} {'kernel':42s} {'compared':21s} {'time':>11s}  result",
              file=out)
        for check in group:
            seconds = _duration(check.seconds)
            result = "ok" if check.ok else f"FAILED: {check.detail}"
            print(f"  {check.check:10s} {check.mode:13s} {check.dtype:10s} {check.kernel:42s} {check.compared:21s} "
                  f"{seconds:>11s}  {result}", file=out)


def _duration(seconds):
    if seconds is None:
        return ""
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} us"
