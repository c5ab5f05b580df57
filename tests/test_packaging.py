"""The wheel installs one top-level package, ``autofix``, with the rules inside it as
``autofix.codemods`` (the repository keeps them in its top-level ``codemods/``)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fixturecases import ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (found,) = out.glob("autofix-*.whl")
    return found


def test_the_only_top_level_package_is_autofix(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == {"autofix"}
    rules = {Path(n).parts[2] for n in names if n.startswith("autofix/codemods/tfd")}
    assert {r.split(".")[0] for r in rules} == {p.stem for p in (ROOT / "codemods").iterdir() if p.name.startswith("tfd")}
    # The checkout's pointer is not shipped: the wheel's codemods/__init__.py is the real one.
    init = zipfile.ZipFile(wheel).read("autofix/codemods/__init__.py").decode()
    assert init == (ROOT / "codemods" / "__init__.py").read_text()


def test_the_installed_wheel_finds_every_rule(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )
    code = (
        "import autofix, autofix.registry as r\n"
        "assert autofix.__file__.startswith(%r), autofix.__file__\n"
        "print(' '.join(rule.CODE for rule in r.all_rules()))\n" % str(target)
    )
    # PYTHONPATH comes before site-packages and the editable install of this checkout.
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    from autofix import registry

    assert out.stdout.split() == [rule.CODE for rule in registry.all_rules()]
