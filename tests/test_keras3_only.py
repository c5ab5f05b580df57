"""The Keras 3-only names TFD006 refuses to switch are what the installed Keras 3 and tf_keras say."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autofix.tf.keras3_only import KERAS3_ONLY, keras3_only

pytestmark = pytest.mark.tf

_WALK = r"""
import importlib, json, sys, types
def names(root):
    module = importlib.import_module(root)
    found = set()
    def walk(m, prefix, depth):
        for attr in dir(m):
            if attr.startswith("_"):
                continue
            try:
                value = getattr(m, attr)
            except Exception:
                continue
            full = prefix + "." + attr
            found.add(full)
            if isinstance(value, types.ModuleType) and depth < 4 and value.__name__.startswith((root, "keras")):
                walk(value, full, depth + 1)
    walk(module, "keras", 0)
    return {n for n in found if ".src" not in n and ".api" not in n}
only = sorted(names("keras") - names("tf_keras"))
kept = []
for name in only:
    if not any(name.startswith(p + ".") for p in kept):
        kept.append(name)
print(json.dumps(kept))
"""


def test_the_list_matches_the_installed_apis():
    pytest.importorskip("tf_keras")
    pytest.importorskip("keras")
    out = subprocess.run([sys.executable, "-c", _WALK], capture_output=True, text=True, timeout=300, check=True)
    assert set(json.loads(out.stdout.strip().splitlines()[-1])) == set(KERAS3_ONLY)


def test_prefixes_stand_for_what_is_under_them():
    assert keras3_only("keras.ops.mean")
    assert keras3_only("keras.random.normal")
    assert not keras3_only("keras.layers.Dense")
    assert not keras3_only("keras.optimizers.Adam")
