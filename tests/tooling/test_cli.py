"""The command line's own behaviour (``python -m gpu_tensorarray`` and the
``gpu-tensorarray`` console script): --version, one-line user errors with a non-zero
exit, help that says what each subcommand does with an example, and a usage line that
names the program the user typed. The bench subcommand's own errors are
tests/tooling/test_bench_cli.py's."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import gpu_tensorarray as gta
from gpu_tensorarray.__main__ import main

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
