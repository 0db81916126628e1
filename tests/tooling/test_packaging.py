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
