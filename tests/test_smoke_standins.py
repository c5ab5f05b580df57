"""The smoke test's stand-ins for display-only packages this Python lacks: a tutorial that
imports matplotlib at its top still trains, and the report says what was stood in for. Run in
a child Python (the finder is installed on sys.meta_path), without TensorFlow."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import pytest

from autofix.smoke.standins import DISPLAY_ONLY

PROBE = textwrap.dedent(
    """
    import sys
    from autofix.smoke import standins

    notes = []
    standins.install(notes.append)
    import {name}
    {body}
    print("NOTES", notes)
    """
)


def _run(name: str, body: str) -> subprocess.CompletedProcess:
    code = PROBE.format(name=name, body=textwrap.indent(textwrap.dedent(body), "").strip())
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def _missing(name: str) -> bool:
    return importlib.util.find_spec(name) is None


@pytest.mark.skipif(not _missing("matplotlib"), reason="matplotlib is installed: the real one is used")
def test_a_missing_plotting_package_is_stood_in_for_and_noted():
    body = """
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(2, 2)
        for a in ax.flat:
            a.imshow([[0]], cmap="gray")
        plt.figure(figsize=(4, 4))
        plt.savefig("x.png")
        print(f"{plt.show()}done")
    """
    result = _run("matplotlib", body)
    assert result.returncode == 0, result.stderr
    assert "done" in result.stdout
    assert "matplotlib is not installed: a stand-in that draws and shows nothing was used" in result.stdout


@pytest.mark.skipif(not _missing("tqdm"), reason="tqdm is installed: the real one is used")
def test_tqdm_hands_back_what_it_wraps():
    body = "from tqdm.autonotebook import tqdm\nbar = tqdm(range(4))\nprint(sum(bar), len(bar))\nbar.set_description('x')\nbar.close()\n"
    result = _run("tqdm", body)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "6 4"


def test_an_installed_package_and_a_package_that_computes_are_never_stood_in_for():
    result = _run("json", "import importlib\ntry:\n    importlib.import_module('pandas_like_missing')\nexcept ImportError:\n    print('missing')\n")
    assert "missing" in result.stdout and "NOTES []" in result.stdout
    assert "pandas" not in DISPLAY_ONLY and "scipy" not in DISPLAY_ONLY
