"""The real-world corpus benchmark's data stays consistent, and its notion of valid IPython holds.

The corpus files themselves are not in the repository (see bench/realworld/README.md); these
checks need only the manifest, the triage and bench/precision.py.
"""

import ast
import importlib.util
import json
import re
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
spec = importlib.util.spec_from_file_location("precision", BENCH / "precision.py")
precision = importlib.util.module_from_spec(spec)
spec.loader.exec_module(precision)

MANIFEST = json.loads((BENCH / "realworld" / "manifest.json").read_text(encoding="utf-8"))
TRIAGE = json.loads((BENCH / "realworld" / "triage.json").read_text(encoding="utf-8"))


def test_manifest_entries_are_complete_and_unique():
    ids = [e["id"] for e in MANIFEST]
    assert len(ids) == len(set(ids))
    for e in MANIFEST:
        assert e["id"] == e["repo"].replace("/", "__") + "__" + e["path"].replace("/", "__").replace(" ", "_")
        assert re.fullmatch(r"[0-9a-f]{40}", e["commit"]) and re.fullmatch(r"[0-9a-f]{64}", e["sha256"])
        assert e["kind"] == ("notebook" if e["path"].endswith(".ipynb") else "script")


def test_triage_refers_to_manifest_files_once_each():
    ids = {e["id"] for e in MANIFEST}
    keys = [(f["file"], f["cell"], f["line"], f["code"]) for f in TRIAGE["findings"]]
    assert len(keys) == len(set(keys))
    assert {f["verdict"] for f in TRIAGE["findings"]} <= {"true", "false"}
    assert {f["verdict"] for f in TRIAGE["fixes"]} <= {"correct", "wrong"}
    for item in TRIAGE["findings"] + TRIAGE["fixes"] + TRIAGE["misses"]:
        assert item["file"] in ids and item["why"]
    assert set(TRIAGE["notes"]) == ids


def accepted(source):
    python = precision.ipython_to_python(source)
    if python is None:
        return True
    try:
        ast.parse(python)
        return True
    except SyntaxError:
        return False


def test_ipython_syntax_that_jupyter_runs_is_accepted():
    assert accepted("try:\n  %tensorflow_version 2.x\nexcept Exception:\n  pass\n")
    assert accepted("if IS_COLAB:\n    !pip install -q x\n    %pip install y\n")
    assert accepted("print('%d'\n      %(3,))\n")  # `%` at a line start inside brackets is modulo
    assert accepted("!saved_model_cli show --dir x \\\n      --tag_set serve\n")
    assert accepted("files = !ls\n")
    assert accepted("%%writefile mnist.py\nthis is not python(\n")
    assert accepted("%%time\nx = 1\n")


def test_real_syntax_errors_are_not_accepted():
    assert not accepted("print 'python 2'\n")
    assert not accepted("%%time\nmodel = Model(...)\nmodel.fit(x, batch_size=1, ...)\nf(a=1, 2)\n")
