"""A strategy that may be None (a trainer or a function whose strategy is an optional
parameter, with a single-device path that runs the same code): what the file shows about it
(``facts.strategies.may_be_none``), and fixes that work on both paths or are refused.

The fixtures' fixes are checked by tests/test_rules-style fixture tests of each rule; the
``tf`` test here runs the fixed scripts, distributed path and single-device path, for real."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import libcst as cst
import pytest

from autofix.analysis.facts.strategies import may_be_none
from autofix.analysis.program import Program
from autofix.engine import Options, analyse
from fixturecases import FIXTURES, ROOT


def _program(source: str) -> Program:
    source = textwrap.dedent(source)
    return Program(cst.parse_module(source), source)


def _first(program: Program, code: str) -> cst.CSTNode:
    """The first node whose code is ``code`` (where a plain name is looked up from)."""
    found: list[cst.CSTNode] = []

    class Finder(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if not found and isinstance(node, (cst.Name, cst.Attribute)) and program.module.code_for_node(node) == code:
                found.append(node)
            return not found

    program.module.visit(Finder())
    return found[0]


TRAINER = """
import tensorflow as tf

class Trainer:
    def __init__(self, model, strategy=None):
        self.strategy = strategy

    def size(self):
        return self.strategy.num_replicas_in_sync
"""


def test_an_attribute_bound_from_a_parameter_defaulting_to_none_may_be_none():
    program = _program(TRAINER)
    node = may_be_none(program, "self.strategy")
    assert isinstance(node, cst.Assign) and program.line(node) == 6


def test_an_attribute_bound_from_a_required_parameter_is_not():
    program = _program(TRAINER.replace("strategy=None", "strategy"))
    assert may_be_none(program, "self.strategy") is None


def test_an_attribute_compared_with_none_may_be_none():
    program = _program(TRAINER.replace("strategy=None", "strategy") + "\n    def fit(self):\n        if self.strategy is None:\n            pass\n")
    assert isinstance(may_be_none(program, "self.strategy"), cst.Comparison)


def test_or_get_strategy_is_never_none():
    program = _program(TRAINER.replace("self.strategy = strategy", "self.strategy = strategy or tf.distribute.get_strategy()"))
    assert may_be_none(program, "self.strategy") is None


def test_a_guard_that_rebinds_it_is_no_sign():
    program = _program(
        """
        import tensorflow as tf

        def train(strategy=None):
            if strategy is None:
                strategy = tf.distribute.get_strategy()
            with strategy.scope():
                pass
        """
    )
    assert may_be_none(program, "strategy", _first(program, "strategy.scope")) is None


def test_a_plain_name_is_looked_up_in_its_own_function():
    program = _program(
        """
        import tensorflow as tf

        def helper(strategy=None):
            return strategy

        def main():
            strategy = tf.distribute.MirroredStrategy()
            with strategy.scope():
                pass
        """
    )
    assert may_be_none(program, "strategy", _first(program, "strategy.scope")) is None
    assert isinstance(may_be_none(program, "strategy", _return_of(program)), cst.Param)


def _return_of(program: Program) -> cst.CSTNode:
    helper = program.module.body[1]
    assert isinstance(helper, cst.FunctionDef)
    return helper.body.body[0]


def test_placeholders_left_to_the_caller():
    program = _program(
        """
        import tensorflow as tf

        strategy = None

        def init():
            global strategy
            strategy = tf.distribute.MirroredStrategy()
        """
    )
    assert may_be_none(program, "strategy") is not None
    assert may_be_none(program, "strategy", placeholders=False) is None


def test_tfd001_writes_a_scope_that_works_without_the_strategy():
    """Before: ``with strategy.scope():`` in ``__init__``, AttributeError on the single-device
    path; and the baseline made without a strategy moved into the distributed scope."""
    source = (FIXTURES / "tfd001" / "trainer_optional_strategy.py").read_text()
    result = analyse(source, Options(select=("TFD001",)))
    assert result.new_text is not None
    assert "with (strategy or tf.distribute.get_strategy()).scope():" in result.new_text
    assert "with strategy.scope():\n        Trainer" not in result.new_text
    assert "with strategy.scope():\n        baseline" not in result.new_text
    assert len(result.findings) == 1


@pytest.mark.tf
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed")
def test_fixed_scripts_train_on_both_paths():
    """Each fixed script runs its distributed trainer under a MirroredStrategy of two logical
    CPUs and its baseline without a strategy; the code a fix wrote that reads a strategy that
    is None would fail there (AttributeError)."""
    scripts = [
        FIXTURES / "tfd001" / "trainer_optional_strategy.fixed.py",
        FIXTURES / "tfd002" / "optional_strategy_parameter.fixed.py",
        FIXTURES / "tfd003" / "trainer_optional_strategy.fixed.py",
    ]
    child = textwrap.dedent(
        """
        import runpy, sys
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        # One strategy for every script (several MirroredStrategy objects in one process
        # share collective keys badly).
        shared = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        made = []
        def two_cpus(*args, **kwargs):
            made.append(shared)
            return shared
        tf.distribute.MirroredStrategy = two_cpus
        for path in sys.argv[1:]:
            runpy.run_path(path, run_name="__main__")
            assert made and shared.num_replicas_in_sync == 2
            print("ran", path)
        """
    )
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", child, *map(str, scripts)], capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("ran ") == len(scripts)


def test_a_global_read_in_a_function_is_looked_up_where_it_is_bound():
    program = _program(
        """
        import tensorflow as tf

        strategy = None

        def step():
            return strategy.num_replicas_in_sync
        """
    )
    read = _first(program, "strategy.num_replicas_in_sync")
    assert isinstance(may_be_none(program, "strategy", read), cst.Assign)
