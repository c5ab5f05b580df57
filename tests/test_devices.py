"""How many replicas a strategy has, where the file says it (analysis/facts/devices.py)."""

from __future__ import annotations

import libcst as cst
import pytest

from autofix.analysis.facts.devices import replica_count
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program


def count(source: str) -> int | None:
    program = Program(cst.parse_module(source))
    constructions = [c for s in Facts.of(program).strategies for c in s.constructions]
    found = replica_count(program, constructions)
    return None if found is None else found.replicas


HEAD = "import os\nimport tensorflow as tf\n"


@pytest.mark.parametrize(
    "setup, strategy, expected",
    [
        ('os.environ["CUDA_VISIBLE_DEVICES"] = "0,1,2"\n', "tf.distribute.MirroredStrategy()", 3),
        ('os.environ["CUDA_VISIBLE_DEVICES"] = "1, 3"\n', "tf.distribute.MirroredStrategy()", 2),
        ('os.environ.setdefault("CUDA_VISIBLE_DEVICES", "0,1,2,3")\n', "tf.distribute.MirroredStrategy()", 4),
        ('os.environ["CUDA_VISIBLE_DEVICES"] = "-1"\n', "tf.distribute.MirroredStrategy()", 1),
        ("", 'tf.distribute.MirroredStrategy(devices=["/gpu:0", "/gpu:1"])', 2),
        ("", 'tf.distribute.MirroredStrategy(["/gpu:0", "/gpu:1", "/gpu:2"])', 3),
        # Not said by the file: a flag, an environment it does not set, several values, a
        # value set inside a function, devices built at run time, another strategy class.
        ("", "tf.distribute.MirroredStrategy()", None),
        ('os.environ["CUDA_VISIBLE_DEVICES"] = args.gpus\n', "tf.distribute.MirroredStrategy()", None),
        ('os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"\nos.environ["CUDA_VISIBLE_DEVICES"] = "0,1,2"\n', "tf.distribute.MirroredStrategy()", None),
        ('def setup():\n    os.environ["CUDA_VISIBLE_DEVICES"] = "0,1,2"\n', "tf.distribute.MirroredStrategy()", None),
        ("", "tf.distribute.MirroredStrategy(devices=[f'/gpu:{i}' for i in range(4)])", None),
        ('os.environ["CUDA_VISIBLE_DEVICES"] = "0,1,2"\n', "tf.distribute.MultiWorkerMirroredStrategy()", None),
        # Set after TensorFlow listed the GPUs (it reads the variable then), or with a GPU split
        # into logical devices: the count is not the variable's.
        ('print(tf.config.list_physical_devices("GPU"))\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n', "tf.distribute.MirroredStrategy()", None),
        (
            'os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n'
            'gpu = tf.config.list_physical_devices("GPU")[0]\n'
            "tf.config.set_logical_device_configuration(gpu, [tf.config.LogicalDeviceConfiguration(1024)] * 2)\n",
            "tf.distribute.MirroredStrategy()",
            None,
        ),
    ],
)
def test_the_replica_count_is_what_the_file_says_or_unknown(setup, strategy, expected):
    assert count(HEAD + setup + f"strategy = {strategy}\n") == expected


def test_one_visible_gpu_makes_a_one_replica_strategy_for_every_rule():
    """What the variable leaves one replica is read as MirroredStrategy(devices=[one]) is."""
    from autofix.tf.symbols import ONE_DEVICE_MIRRORED

    def classes(setup: str) -> set[str]:
        program = Program(cst.parse_module(HEAD + setup + "strategy = tf.distribute.MirroredStrategy()\n"))
        (strategy,) = Facts.of(program).strategies
        return strategy.classes

    assert classes('os.environ["CUDA_VISIBLE_DEVICES"] = "0"\n') == {ONE_DEVICE_MIRRORED}
    assert classes('os.environ["CUDA_VISIBLE_DEVICES"] = "-1"\n') == {ONE_DEVICE_MIRRORED}
    assert classes('os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"\n') == {"MirroredStrategy"}
    assert classes('print(tf.config.list_physical_devices("GPU"))\nos.environ["CUDA_VISIBLE_DEVICES"] = "0"\n') == {"MirroredStrategy"}
