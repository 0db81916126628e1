"""The command line's own behaviour (``python -m gpu_tensorarray`` and the
``gpu-tensorarray`` console script): --version, one-line user errors with a non-zero
exit, help that says what each subcommand does with an example, and a usage line that
names the program the user typed. The bench subcommand's own errors are
tests/tooling/test_bench_cli.py's."""

import io
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import selftest
from gpu_tensorarray.__main__ import main
from gpu_tensorarray.testing import load_backend

ROOT = Path(__file__).resolve().parents[2]


def _run(argv, capsys, monkeypatch, argv0="/some/bin/gpu-tensorarray"):
    monkeypatch.setattr(sys, "argv", [argv0, *argv])
    try:
        code = main(argv)
    except SystemExit as exit:
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def test_version(capsys, monkeypatch):
    code, out, err = _run(["--version"], capsys, monkeypatch)
    assert (code, out, err) == (0, f"gpu_tensorarray {gta.__version__}\n", "")


@pytest.mark.parametrize("argv, says", [
    ([], "the following arguments are required"),
    (["nope"], "invalid choice: 'nope'"),
    (["info", "extra"], "unrecognized arguments: extra"),
    (["demo", "--backend", "nope"], "Unknown device or backend 'nope'"),
    (["selftest", "--backend", "tpu"], "Unknown device or backend 'tpu'"),
    (["demo", "--backend"], "expected one argument"),
])
def test_a_user_error_is_one_line_and_a_non_zero_exit(capsys, monkeypatch, argv, says):
    code, out, err = _run(argv, capsys, monkeypatch)
    assert code != 0 and out == ""
    assert err.count("\n") == 1 and says in err, err
    assert err.startswith("gpu-tensorarray") and "(see gpu-tensorarray" in err


def test_a_backend_that_cannot_load_is_one_line_and_exit_1(capsys, monkeypatch):
    available = gta.available_backends()
    if available["cupy"] is None:
        pytest.skip("cupy is usable here")
    code, out, err = _run(["demo", "--backend", "cupy"], capsys, monkeypatch)
    assert code == 1 and err.count("\n") == 1 and err.startswith("gpu-tensorarray: error: "), err


@pytest.mark.parametrize("command", ["info", "demo", "selftest"])
def test_each_subcommand_says_what_it_does_and_shows_an_example(capsys, monkeypatch, command):
    code, out, _ = _run([command, "--help"], capsys, monkeypatch)
    assert code == 0
    assert out.startswith(f"usage: gpu-tensorarray {command}")
    description = out.split("\n\n")[1]
    assert len(description.split()) >= 4, out
    assert f"example:\n  gpu-tensorarray {command}" in out


@pytest.mark.parametrize("help_flag", ["--help", "-h"])
def test_bench_help_says_where_the_benchmarks_are_and_any_other_use_is_an_error(capsys, monkeypatch, help_flag):
    code, out, err = _run(["bench", help_flag], capsys, monkeypatch)
    assert (code, err) == (0, "") and "from a source checkout, run python -m bench --help" in out
    code, out, err = _run(["bench", "--rounds", "3"], capsys, monkeypatch)
    assert (code, out) == (2, "") and err.count("\n") == 1 and "python -m bench --help" in err


def test_the_top_level_help_lists_the_subcommands_and_an_example(capsys, monkeypatch):
    code, out, _ = _run(["--help"], capsys, monkeypatch)
    assert code == 0 and out.startswith("usage: gpu-tensorarray [-h] [--version] {")
    for command in ("info", "demo", "selftest"):
        assert f"    {command}" in out
    assert "example:\n  gpu-tensorarray demo" in out


def test_python_dash_m_names_itself():
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONWARNINGS="ignore")
    done = subprocess.run([sys.executable, "-m", "gpu_tensorarray", "info", "extra"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 2
    assert done.stderr == ("python -m gpu_tensorarray: error: unrecognized arguments: extra "
                           "(see python -m gpu_tensorarray --help)\n")


# -- selftest: JSON, its output file, and what it says of backends it could not check ---------------
def _only_emulated(monkeypatch):
    """available_backends as on a machine with emulated alone, and no ml_dtypes: each
    backend left out and bfloat16 get a "not checked" line."""
    load_backend("emulated")
    monkeypatch.setattr(selftest, "available_backends",
                        lambda: {"numpy": None, "emulated": None, "cupy": "no GPU (this test)"})
    monkeypatch.setattr(selftest, "_bfloat16_problem", lambda: "no ml_dtypes (this test)")


def test_selftest_json_to_stdout_is_json_alone(capsys, monkeypatch):
    _only_emulated(monkeypatch)
    code, out, err = _run(["selftest", "--json"], capsys, monkeypatch)
    rows = json.loads(out)
    assert code == 0 and rows and {(row["backend"], row["ok"]) for row in rows} == {("emulated", True)}
    assert "selftest: cupy not checked: no GPU (this test)\n" in err
    assert "selftest: bfloat16 not checked: no ml_dtypes (this test)\n" in err
    assert f"selftest: {len(rows)} of {len(rows)} checks passed" in err


def test_selftest_with_nothing_to_check_says_so_and_exits_1(capsys, monkeypatch):
    # Not a kernel's failure, but a selftest that checked nothing has not passed (README: exit 1).
    monkeypatch.setattr(selftest, "available_backends",
                        lambda: {"numpy": None, "emulated": "not built (this test)", "cupy": "no GPU (this test)"})
    code, out, err = _run(["selftest", "--json"], capsys, monkeypatch)
    assert (code, json.loads(out)) == (1, [])
    assert "emulated not checked: not built (this test)" in err and "cupy not checked: no GPU (this test)" in err
    assert "nothing was checked" in err.splitlines()[-1]


def test_info_with_an_unknown_backend_in_the_environment_reports_it_and_goes_on(capsys, monkeypatch):
    """The diagnostic command: every line, the default backend's naming the problem, exit 1 (it
    stopped half-way with an error)."""
    monkeypatch.setenv("GPU_TENSORARRAY_BACKEND", "bogus")
    code, out, err = _run(["info"], capsys, monkeypatch)
    assert code == 1 and err == ""
    assert "default backend: none (Unknown device or backend 'bogus'" in out and "accumulation:" in out, out


def test_selftest_refuses_an_unwritable_json_file_before_checking(capsys, monkeypatch, tmp_path):
    ran = []
    passed = selftest.Check("numpy", "cpu", "load", "-", "-", "-", "works", True)
    monkeypatch.setattr(selftest, "check_backend", lambda spec: ran.append(spec) or [passed])
    for path in (tmp_path / "no-such-folder" / "x.json", tmp_path):           # a missing folder; a folder
        code, out, err = _run(["selftest", "--backend", "numpy", "--json", str(path)], capsys, monkeypatch)
        assert (code, out, err.count("\n")) == (2, "", 1), err
        assert err.startswith("gpu-tensorarray selftest: error: ") and repr(str(path)) in err, err
    assert ran == []
    never = tmp_path / "never.json"             # a refused command leaves no file behind (an empty one was)
    code, out, err = _run(["selftest", "--backend", "tpu", "--json", str(never)], capsys, monkeypatch)
    assert code == 2 and not never.exists()
    written = tmp_path / "x.json"
    code, out, err = _run(["selftest", "--backend", "numpy", "--json", str(written)], capsys, monkeypatch)
    assert code == 0 and ran == ["numpy"] and json.loads(written.read_text()) == [asdict(passed)]


@pytest.mark.parametrize("spec, backend, device", [("emulated", "emulated", "cpu"), ("cpu", "numpy", "cpu"),
                                                    ("cuda", "cupy", "cuda"), ("cuda:1", "cupy", "cuda:1"),
                                                    ("no-such-backend", "no-such-backend", None)])
def test_a_backend_that_does_not_load_is_reported_on_the_device_asked_for(monkeypatch, spec, backend, device):
    def get_backend(asked):
        raise gta.errors.UnavailableError(f"{asked} does not load (this test)")
    monkeypatch.setattr(selftest, "get_backend", get_backend)
    out = io.StringIO()
    assert selftest.run([spec], out=out) == 1
    header = out.getvalue().splitlines()[0]
    where = f" on {device}" if device else ""
    assert header == f"selftest: {backend}{where} (reference: numpy)", header
    assert "does not load (this test)" in out.getvalue()


# -- demo -------------------------------------------------------------------------------------------
def test_the_demo_names_the_grad_arrays_each_computation_made(capsys, monkeypatch):
    """Line #2 names the two gradient computations' grad arrays as the registry made them, and
    how many the forward array still holds (what was open when computation #3 began)."""
    made, open_when_made = {}, {}
    real = gta.registry.grad

    def grad(handle, source, shape_to_prepend=None):
        if source not in made:
            open_when_made[source] = sum(not gta.registry.lookup(h).closed for h in made.values())
        made[source] = real(handle, source, shape_to_prepend)
        return made[source]
    monkeypatch.setattr(gta.registry, "grad", grad)
    code, out, _ = _run(["demo", "--backend", "numpy"], capsys, monkeypatch)
    assert code == 0 and sorted(made) == ["gradients", "gradients_1", "gradients_2"], out
    line = next(line for line in out.splitlines() if line.startswith("tape.gradient #2"))
    assert made["gradients"].name in line and made["gradients_1"].name in line, line
    assert made["gradients"].name != made["gradients_1"].name
    assert int(re.search(r"now holds (\d+) gradient arrays\)", line).group(1)) == open_when_made["gradients_2"], line


# -- info from a source checkout, whose package has no extensions until built there -----------------
_WITHOUT_EDITABLE_FINDERS = """
import runpy, sys
# An editable install's finder would find the extensions built in the original checkout.
sys.meta_path[:] = [finder for finder in sys.meta_path if "editable" not in repr(finder).lower()]
sys.argv[0] = "gpu-tensorarray"
runpy.run_module("gpu_tensorarray", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("checkout", [True, False], ids=["source-checkout", "installed"])
def test_info_says_where_the_package_without_extensions_is(tmp_path, checkout):
    package = tmp_path / "gpu_tensorarray"
    shutil.copytree(Path(gta.__file__).parent, package, ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    if checkout:
        shutil.copy(ROOT / "setup.py", tmp_path / "setup.py")
    env = dict(os.environ, PYTHONWARNINGS="ignore", GPU_TENSORARRAY_BACKEND="numpy")
    env.pop("PYTHONPATH", None)
    env.pop("GPU_TENSORARRAY_CPU_KERNELS", None)
    done = subprocess.run([sys.executable, "-c", _WITHOUT_EDITABLE_FINDERS, "info"], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = {line.split(":")[0].strip(): line for line in done.stdout.splitlines()}
    for line in (lines["emulated  unavailable"], lines["compiled scatter-add (numpy backend)"]):
        assert str(package) in line, line
        assert ("build_ext --inplace" in line) == checkout, line
        assert ("when gpu_tensorarray was installed" in line) != checkout, line
