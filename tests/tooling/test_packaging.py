"""The package's metadata: one version source, a license shipped with it, a setuptools
floor that can build that metadata, and py.typed for the type hints."""

import re
from pathlib import Path

import pytest

import gpu_tensorarray as gta

tomllib = pytest.importorskip("tomllib")        # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_is_written_once():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "gpu_tensorarray.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", gta.__version__)
    literal = re.compile(re.escape(f'"{gta.__version__}"'))
    written = [path.relative_to(ROOT) for path in (ROOT / "gpu_tensorarray").rglob("*.py")
               if literal.search(path.read_text())]
    assert written == [Path("gpu_tensorarray/__init__.py")]


def test_the_license_is_apache_and_ships():
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_setuptools_floor_reads_an_spdx_license():
    # A string `license` (PEP 639) needs setuptools 77; older ones fail to build the metadata.
    floors = [re.fullmatch(r"setuptools>=(\d+)(?:\.\d+)*", requirement)
              for requirement in PYPROJECT["build-system"]["requires"]]
    floor = [int(match.group(1)) for match in floors if match]
    assert floor and floor[0] >= 77, PYPROJECT["build-system"]["requires"]


def test_py_typed_ships_and_the_classifiers_say_so():
    assert (ROOT / "gpu_tensorarray" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["gpu_tensorarray"]
    classifiers = PYPROJECT["project"]["classifiers"]
    assert "Typing :: Typed" in classifiers
    assert not any(c.startswith("License ::") for c in classifiers)      # PEP 639: the expression says it


# -- what the dependencies must be -----------------------------------------------------------------
Requirement = pytest.importorskip("packaging.requirements").Requirement
Version = pytest.importorskip("packaging.version").Version


def _requirements(names):
    """name -> Requirement, for the requirement strings ``names``."""
    return {(parsed := Requirement(text)).name: parsed for text in names}


def _floor(requirement):
    """The version of ``requirement``'s ">=" (None without one)."""
    floors = [Version(spec.version) for spec in requirement.specifier if spec.operator == ">="]
    return floors[0] if floors else None


def test_the_numpy_floor_has_the_dtype_codes_host_py_uses():
    # np.dtype("n") / ("N") (intp, uintp), by which host.py names NumPy's integer types, exist from NumPy 2.0.
    numpy = _requirements(PYPROJECT["project"]["dependencies"])["numpy"]
    assert _floor(numpy) is not None and _floor(numpy) >= Version("2.0"), numpy


def test_every_ml_dtypes_floor_imports_under_numpy_2():
    # ml_dtypes 0.3.2's extension fails to import under NumPy 2; 0.4.0 is the first built against it.
    extras = PYPROJECT["project"]["optional-dependencies"]
    floors = {name: _requirements(extra)["ml_dtypes"] for name, extra in extras.items()
              if "ml_dtypes" in _requirements(extra)}
    assert set(floors) >= {"bfloat16", "test"}
    assert all((_floor(requirement) or Version("0")) >= Version("0.4.0") for requirement in floors.values()), floors


def _ci_installs():
    """The requirements .ci/run installs with pip after the test extra, each line's."""
    lines = [line.split("install", 1)[1] for line in (ROOT / ".ci" / "run").read_text().splitlines()
             if re.match(r"\s*python -m pip install --quiet [^.]", line)]
    return [Requirement(word.strip('"')) for line in lines for word in line.split()
            if not word.startswith("-") and not word.startswith("http")]


def test_the_test_extra_installs_what_the_cupy_standin_tests_need():
    # The README's test command installs ".[test]" alone; .ci/run adds CuPy and NVRTC for the
    # [cupy] tests on the stand-in, torch (whose tests skip without it outside CI) and CI's tools.
    test = _requirements(PYPROJECT["project"]["optional-dependencies"]["test"])
    cuda = _requirements(PYPROJECT["project"]["optional-dependencies"]["cuda"])
    needed = [requirement for requirement in _ci_installs() if requirement.name in cuda]
    assert {requirement.name for requirement in needed} == {"cupy-cuda12x", "cuda-toolkit"}, needed
    for requirement in needed:
        assert requirement.name in test, requirement
        assert test[requirement.name].specifier == cuda[requirement.name].specifier, requirement.name
        assert requirement.extras <= test[requirement.name].extras, requirement
    assert "torch" not in test
