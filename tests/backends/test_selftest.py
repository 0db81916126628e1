"""``python -m gpu_tensorarray selftest`` on the CPU backends (numpy against itself,
emulated against numpy): it passes, checks every primitive, mode and dtype, and
fails, naming the culprit, when a primitive is made to return a wrong result."""

import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gpu_tensorarray
from gpu_tensorarray import dtypes, errors, selftest
from gpu_tensorarray.backends.emulated import EmulatedBackend
from gpu_tensorarray.testing import load_backend

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(gpu_tensorarray.__file__)))


def _checked_dtypes():
    """dtypes.SUPPORTED, with bfloat16 where ml_dtypes is installed (the selftest checks it there)."""
    try:
        dtypes.bfloat16()
    except errors.UnimplementedError:
        pass
    return dtypes.SUPPORTED


def _planned():
    """(check, mode, dtype) of every check the selftest must report for one device."""
    planned = {("load", "-", "-"), ("placement", "deterministic", "float32"), ("placement", "atomic", "float32")}
    for dtype in _checked_dtypes():
        planned |= {("take_rows", "-", dtype.name), ("put_rows", "-", dtype.name)}
        if dtype in dtypes.AGGREGATABLE:
            planned |= {("add_rows", "deterministic", dtype.name), ("add_rows", "atomic", dtype.name)}
    return planned


@pytest.mark.parametrize("name", ["numpy", "emulated"])
def test_selftest_passes_and_prints_its_table(name, tmp_path):
    load_backend(name)                                   # skips (fails in CI) where it cannot load
    out = tmp_path / "selftest.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-m", "gpu_tensorarray", "selftest", "--backend", name, "--json", str(out)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    checks = json.loads(out.read_text())
    assert {(c["check"], c["mode"], c["dtype"]) for c in checks} == _planned()
    assert len(checks) == len(_planned())
    assert all(c["ok"] and c["backend"] == name and c["device"] == "cpu" for c in checks)
    assert all(c["seconds"] > 0 for c in checks)
    # The table: a header, then one line per check, each ending in "ok".
    assert f"selftest: {name} on cpu (reference: numpy)" in done.stdout
    lines = [line for line in done.stdout.splitlines() if line.startswith("  ") and "compared" not in line]
    assert len(lines) == len(checks) and all(line.endswith("  ok") for line in lines)
    assert f"selftest: {len(checks)} of {len(checks)} checks passed" in done.stdout
    if name == "emulated":          # the kernel each row ran, atomic fallbacks included
        assert any(line.split()[:4] == ["add_rows", "atomic", "float32", "add_rows_atomic<float>"] for line in lines)
        assert any(line.split()[:4] == ["add_rows", "atomic", "int8", "add_rows_deterministic<signed"]
                   for line in lines)


def _corrupted(original, primitive):
    """``primitive`` made wrong where it is easy to miss: one element of one row."""
    def take_rows(self, src, indices):
        out = original(self, src, indices)
        out.reshape(-1).view(np.uint8)[-1] ^= 1         # one bit of the last element
        return out

    def put_rows(self, dst, indices, rows):
        original(self, dst, indices[:-1], rows[:-1])    # drops the last row

    def add_rows(self, dst, indices, rows, mode):
        original(self, dst, indices, rows, mode)
        target = dst[indices[0]].reshape(-1)
        if dst.dtype.kind in "fc" or dst.dtype.name == "bfloat16":
            target[0] = np.nan                          # outside any rounding bound
        else:
            target[0] += 1
    return {"take_rows": take_rows, "put_rows": put_rows, "add_rows": add_rows}[primitive]


@pytest.mark.parametrize("primitive", ["take_rows", "put_rows", "add_rows"])
def test_selftest_reports_a_corrupted_primitive(monkeypatch, primitive):
    load_backend("emulated")
    monkeypatch.setattr(EmulatedBackend, primitive, _corrupted(getattr(EmulatedBackend, primitive), primitive))
    out = io.StringIO()
    with np.errstate(all="ignore"):
        code = selftest.run(["emulated"], out=out)
    text = out.getvalue()
    assert code == 1
    failed = {tuple(line.split()[:3]) for line in text.splitlines() if "FAILED:" in line and line.startswith("  ")}
    assert {check for check, _, _ in failed} <= {primitive, "placement", "load"}   # the culprit (load gathers)
    culprits = {"float16", "complex128", "uint64"} | {d.name for d in _checked_dtypes() if d.name == "bfloat16"}
    if primitive == "add_rows":
        assert {("add_rows", mode, name) for mode in ("deterministic", "atomic")
                for name in culprits | {"float32", "int8"}} <= failed
    else:
        assert {(primitive, "-", name) for name in culprits | {"bool"}} <= failed
    assert "selftest: " in text and "FAILED: " in text.splitlines()[-1]


def test_selftest_reports_a_backend_that_cannot_load():
    out = io.StringIO()
    assert selftest.run(["no-such-backend"], out=out) == 1
    assert "FAILED: InvalidArgumentError: Unknown device or backend 'no-such-backend'" in out.getvalue()


def test_an_interrupted_run_leaves_an_earlier_json_file_as_it_was(tmp_path, monkeypatch):
    """The file is opened before the checks (a path that cannot be written fails first), but
    written only once they are done."""
    earlier = tmp_path / "checks.json"
    earlier.write_text('[{"earlier": true}]')

    def interrupted(spec):
        raise KeyboardInterrupt
    monkeypatch.setattr(selftest, "check_backend", interrupted)
    with pytest.raises(KeyboardInterrupt):
        selftest.run(["emulated"], as_json=str(earlier), out=io.StringIO(), err=io.StringIO())
    assert earlier.read_text() == '[{"earlier": true}]'
    monkeypatch.undo()
    assert selftest.run(["numpy"], as_json=str(earlier), out=io.StringIO(), err=io.StringIO()) in (0, 1)
    assert "earlier" not in earlier.read_text() and isinstance(json.loads(earlier.read_text()), list)
