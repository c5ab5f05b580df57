"""TFD007 every-worker-writes: saves every worker makes to one path, fixed with the tutorial's pattern."""

from __future__ import annotations

import ast
import types

import pytest

from autofix.engine import Options, analyse
from fixturecases import assert_fixed_is_clean, assert_fixes_to_expected, assert_left_alone, params, read

OPTIONS = Options(select=("TFD007",))


@pytest.mark.parametrize("case", params("tfd007", "fixed"))
def test_fixes_to_expected(case):
    assert_fixes_to_expected(case, OPTIONS)


@pytest.mark.parametrize("case", params("tfd007", "fixed"))
def test_fixed_code_is_stable(case):
    assert_fixed_is_clean(case, OPTIONS)


@pytest.mark.parametrize("case", params("tfd007", "unchanged"))
def test_leaves_alone_or_reports(case):
    assert_left_alone(case, OPTIONS)


@pytest.mark.parametrize("case", params("tfd007", "fixed"))
def test_every_worker_still_saves(case):
    """The fix keeps each save where it was, unconditional: saving may use collectives."""
    before, after = ast.parse(read(case.before)), ast.parse(read(case.after))

    def saves(tree):
        return sorted(
            (node.func.attr, type(parent).__name__)
            for parent in ast.walk(tree)
            for node in ast.iter_child_nodes(parent)
            if isinstance(node, ast.Expr)
            for node in [node.value]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("save", "save_weights")
        )

    assert saves(before) == saves(after)


def test_savers_that_are_reported():
    source = (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "tf.saved_model.save(model, '/shared/export')\n"
        "tf.keras.models.save_model(model, '/shared/model.keras')\n"
        "tf.train.Checkpoint(model=model).write('/shared/ckpt')\n"
        "numbers = [1, 2]\n"
        "numbers.save = None\n"
    )
    analysis = analyse(source, OPTIONS)
    assert [(f.line, f.fixable) for f in analysis.findings] == [(5, True), (6, True), (7, True)]
    assert analysis.new_text.count("def _is_chief(") == 1


def test_two_saves_in_one_block_keep_their_order():
    source = (
        "import tensorflow as tf\n"
        "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "print('a')\n"
        "model.save_weights('w1.weights.h5')\n"
        "print('b')\n"
        "model.save_weights('w2.weights.h5')\n"
        "print('c')\n"
    )
    new = analyse(source, OPTIONS).new_text
    # The helpers go before the first statement that uses them, after what ran before.
    assert new.index("print('a')") < new.index("def _is_chief(") < new.index("write_path = ")
    tail = new[new.index("write_path = "):]
    assert tail == (
        "write_path = _write_path('w1.weights.h5', strategy)\n"
        "model.save_weights(write_path)\n"
        "if not _is_chief(strategy):\n"
        "    tf.io.gfile.rmtree(os.path.dirname(write_path))\n"
        "print('b')\n"
        "write_path_2 = _write_path('w2.weights.h5', strategy)\n"
        "model.save_weights(write_path_2)\n"
        "if not _is_chief(strategy):\n"
        "    tf.io.gfile.rmtree(os.path.dirname(write_path_2))\n"
        "print('c')\n"
    )


def test_generated_helpers_pick_the_chief_and_a_temporary_folder():
    """Run the generated helpers against stand-ins for the cluster resolver."""
    new = analyse(read_case("save_in_main"), OPTIONS).new_text
    tree = ast.parse(new)
    helpers = ast.Module([n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("_")], [])
    made: list[str] = []
    gfile = types.SimpleNamespace(makedirs=made.append)
    namespace: dict = {"os": __import__("os"), "tf": types.SimpleNamespace(io=types.SimpleNamespace(gfile=gfile))}
    exec(compile(helpers, "<helpers>", "exec"), namespace)

    class Spec:
        def __init__(self, jobs):
            self.jobs = jobs

        def as_dict(self):
            return self.jobs

    class Resolver:
        def __init__(self, task_type, task_id, jobs):
            self.task_type, self.task_id, self._jobs = task_type, task_id, jobs

        def cluster_spec(self):
            return Spec(self._jobs)

    class Strategy:
        def __init__(self, resolver):
            self.cluster_resolver = resolver

    workers = {"worker": ["a:1", "b:2"]}
    with_chief = {"chief": ["c:0"], "worker": ["a:1", "b:2"]}
    write_path, is_chief = namespace["_write_path"], namespace["_is_chief"]
    assert write_path("out/model.keras", Strategy(Resolver("worker", 0, workers))) == "out/model.keras"
    assert write_path("out/model.keras", Strategy(Resolver("worker", 1, workers))) == "out/workertemp_1/model.keras"
    assert write_path("out/saved/", Strategy(Resolver("worker", 1, workers))) == "out/workertemp_1/saved"
    assert made == ["out/workertemp_1", "out/workertemp_1"]
    assert is_chief(Strategy(Resolver(None, None, {})))
    assert is_chief(Strategy(Resolver("chief", 0, with_chief)))
    assert not is_chief(Strategy(Resolver("worker", 0, with_chief)))


def read_case(name: str) -> str:
    from fixturecases import FIXTURES

    return read(FIXTURES / "tfd007" / f"{name}.py")


_SAVER = (
    "import json\nimport os\nimport sys\nimport tensorflow as tf\n"
    "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
    "with strategy.scope():\n"
    "    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\n"
    "    model.compile(optimizer='sgd', loss='mse')\n"
)


@pytest.mark.parametrize(
    "guard, reported",
    [
        ("if strategy.extended.should_checkpoint:", False),
        ("if not strategy.extended.should_save_summary:\n    pass\nelse:", False),
        ("tf_config = json.loads(os.environ['TF_CONFIG'])\nif tf_config.get('task', {}).get('index', 0) == 0:", False),
        ("cfg = json.loads(os.environ.get('TF_CONFIG', '{}'))\nwho = cfg.get('task', {})\nif who.get('index') == 0:", False),
        ("task = int(sys.argv[1])\nif task == 0:", False),
        ("worker = int(sys.argv[1])\nif 0 != worker:\n    pass\nelse:", False),
        # Not a test of which worker runs it: every worker saves.
        ("task = sys.argv[1]\nif task == 'regression':", True),
        ("cfg = json.loads(os.environ.get('TF_CONFIG', '{}'))\nif len(cfg.get('cluster', {})) == 1:", True),
        ("if len(sys.argv) > 1:", True),
    ],
)
def test_chief_tests_written_other_ways(guard, reported):
    source = _SAVER + guard + "\n    model.save_weights('weights.weights.h5')\n"
    findings = [f for f in analyse(source, Options(select=("TFD007",))).findings if f.code == "TFD007"]
    assert bool(findings) is reported


@pytest.mark.parametrize(
    "choice, reported",
    [
        ("if strategy.cluster_resolver.task_type == 'chief':\n    path = 'out/w.h5'\nelse:\n    path = 'tmp/w.h5'\n", False),
        ("resolver = strategy.cluster_resolver\nif resolver.task_id == 0:\n    path = 'out/w.h5'\nelse:\n    path = 'tmp/w.h5'\n", False),
        ("is_chief = strategy.cluster_resolver.task_id == 0\nfolder = 'out' if is_chief else 'tmp'\npath = os.path.join(folder, 'w.h5')\n", False),
        ("import tempfile\npath = os.path.join(tempfile.mkdtemp(), 'w.h5')\n", False),
        ("import tempfile\nwith tempfile.TemporaryDirectory() as scratch:\n    pass\npath = os.path.join(scratch, 'w.h5')\n", False),
        # Chosen by something else than the worker: every worker writes the one path.
        ("if len(sys.argv) > 1:\n    path = 'a/w.h5'\nelse:\n    path = 'b/w.h5'\n", True),
        ("import tempfile\npath = os.path.join(tempfile.gettempdir(), 'w.h5')\n", True),
    ],
)
def test_a_path_chosen_by_which_worker_runs_is_not_one_path(choice, reported):
    """A path bound under a chief test (or made in a folder only this process gets) differs by
    worker: no finding."""
    source = _SAVER + choice + "model.save_weights(path)\n"
    findings = [f for f in analyse(source, Options(select=("TFD007",))).findings if f.code == "TFD007"]
    assert bool(findings) is reported
