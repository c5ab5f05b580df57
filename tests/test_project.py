"""The project layer (autofix.analysis.project) and what `autofix migrate` does with it: training
in one file that uses a model made by another module of the project is migrated when the other
module's function only builds the model, and refused at the line, naming the other file and
line, when it cannot be shown so; never "it does not train", never "no findings".

The projects are fixtures/projects/<name>/ (its README says what each shows), copied into a
temporary folder for each test. No TensorFlow runs here.
"""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner

from autofix.analysis.program import Program
from autofix.analysis.project import layout
from autofix.analysis.project.imports import ProjectImports, reading
from autofix.analysis.project.summary import summary_of
from autofix.cli import main
from autofix.engine import Options, process_path, process_text
from fixturecases import FIXTURES

PROJECTS = FIXTURES / "projects"
MIGRATE = Options(migrate="mirrored")


def project(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(PROJECTS / name, target)
    return target


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def migrate(path: Path):
    return process_path(str(path), MIGRATE)


def reasons(result) -> list[str]:
    return [f"{f.line}: {f.reason}" for f in result.findings]


# --- layout -----------------------------------------------------------------------------------


def test_the_root_is_the_nearest_folder_with_a_marker_else_the_files_own(tmp_path):
    write(tmp_path, {"repo/pyproject.toml": "", "repo/scripts/train.py": "", "alone/train.py": ""})
    assert layout.project_root(str(tmp_path / "repo" / "scripts" / "train.py")) == str(tmp_path / "repo")
    assert layout.project_root(str(tmp_path / "alone" / "train.py")) == str(tmp_path / "alone")


def test_modules_are_found_as_python_finds_them_and_only_in_the_project(tmp_path):
    repo = write(tmp_path / "repo", {
        "setup.py": "",
        "train.py": "",
        "model.py": "",
        "pkg/__init__.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/layers.py": "",
        "pkg/nets.py": "",
        "src/lib/core.py": "",
    })
    (tmp_path / "outside.py").write_text("")
    train = str(repo / "train.py")
    assert layout.resolve_module(train, "model") == str(repo / "model.py")
    assert layout.resolve_module(train, "pkg") == str(repo / "pkg" / "__init__.py")
    assert layout.resolve_module(train, "pkg.sub.layers") == str(repo / "pkg" / "sub" / "layers.py")
    assert layout.resolve_module(train, "lib.core") == str(repo / "src" / "lib" / "core.py")
    nets = str(repo / "pkg" / "nets.py")
    assert layout.resolve_module(nets, "sub.layers", 1) == str(repo / "pkg" / "sub" / "layers.py")
    assert layout.resolve_module(nets, "model", 2) == str(repo / "model.py")
    assert layout.resolve_module(train, "numpy") is None
    assert layout.resolve_module(train, "outside", 2) is None  # above the root


# --- summaries --------------------------------------------------------------------------------


MODULE = '''\
import keras
import tensorflow as tf
from .layers import block

BATCH_SIZE = 64
RATE = 0.1


def build(classes=10):
    inputs = keras.Input((28, 28))
    x = keras.layers.Flatten()(inputs)
    outputs = keras.layers.Dense(classes)(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
    return model


def build_and_fit(x, y):
    model = build()
    model.fit(x, y)
    return model


def sequential():
    return keras.Sequential([keras.layers.Dense(1, batch_size=8)])


class GAN(keras.Model):
    def train_step(self, data):
        return {}


class Plain(keras.Model):
    def call(self, x):
        return x


def helper():
    return 3
'''


def test_a_module_summary_says_what_each_top_level_name_is():
    summary = summary_of(MODULE.encode())
    defs = summary.definitions
    assert defs["BATCH_SIZE"].kind == "assignment" and defs["BATCH_SIZE"].constant == 64
    assert defs["RATE"].constant is None
    assert defs["block"].kind == "import" and defs["block"].source == ("layers", 1, "block")
    build = defs["build"]
    assert build.returns_model == "keras.Model" and build.compiles and build.only_builds
    assert build.line == 9
    assert "Keras model built from keras.Model, which it compiles" in build.describe()
    fitted = defs["build_and_fit"]
    assert fitted.returns_model == "keras.Model" and fitted.trains and not fitted.only_builds
    assert any("fixed batch" in why for _, why in defs["sequential"].problems)
    assert defs["GAN"].keras_model and defs["GAN"].train_step == 29
    assert defs["Plain"].keras_model and defs["Plain"].train_step is None
    assert defs["helper"].returns_model is None
    assert summary_of(MODULE.encode()) is summary  # once per content


def test_a_module_that_does_not_parse_has_an_empty_summary():
    summary = summary_of(b"def broken(:\n")
    assert summary.error and not summary.definitions


# --- imports ----------------------------------------------------------------------------------


def resolve_all(path: Path) -> dict[str, tuple[str | None, str | None]]:
    text = path.read_text()
    program = Program(cst.parse_module(text), text, path=str(path))
    imports = ProjectImports.of(program)
    found = {}
    for call, resolved in imports.definitions_called():
        name = program.module.code_for_node(call.func)
        found[name] = (resolved.where(str(path)) if resolved.path else None, resolved.reason)
    return found


def test_every_form_of_import_of_a_project_module_resolves_to_its_definition(tmp_path):
    repo = write(tmp_path / "repo", {
        ".git/HEAD": "",
        "app/__init__.py": "",
        "app/models.py": "import keras\ndef build():\n    return keras.Sequential()\n",
        "app/losses.py": "def loss(a, b):\n    return a - b\n",
        "app/api/__init__.py": "from ..models import build as make\n",
        "app/train.py": """\
            import app.losses
            import app.models as m
            from . import losses
            from .models import build
            from app.api import make
            from app.models import *
            import numpy as np

            build()
            m.build()
            make()
            losses.loss(1, 2)
            app.losses.loss(1, 2)
            np.zeros(3)
            """,
    })
    found = resolve_all(repo / "app" / "train.py")
    assert found["build"] == ("models.py:2", None)
    assert found["m.build"] == ("models.py:2", None)
    assert found["make"] == ("models.py:2", None)
    assert found["losses.loss"] == ("losses.py:1", None)
    assert found["app.losses.loss"] == ("losses.py:1", None)
    assert "np.zeros" not in found


def test_a_star_import_and_an_unresolvable_import_are_told_apart(tmp_path):
    repo = write(tmp_path, {
        "model.py": "import keras\n__all__ = ['build']\ndef build():\n    return keras.Sequential()\ndef _hidden():\n    pass\n",
        "train.py": "from model import *\nfrom nowhere_to_be_found import make\nbuild()\nmake()\n_hidden()\n",
    })
    found = resolve_all(repo / "train.py")
    assert found["build"] == ("model.py:3", None)
    assert found["make"][0] is None and "nowhere_to_be_found" in found["make"][1]
    assert "_hidden" not in found


def test_the_files_read_are_recorded_with_their_digest_or_as_absent(tmp_path):
    write(tmp_path, {"model.py": "def build():\n    pass\n", "train.py": "from model import build\nfrom gone import thing\nbuild()\nthing()\n"})
    text = (tmp_path / "train.py").read_text()
    program = Program(cst.parse_module(text), text, path=str(tmp_path / "train.py"))
    with reading() as read:
        ProjectImports.of(program).definitions_called()
    assert read[str(tmp_path / "model.py")]
    assert read[str(tmp_path / "gone.py")] == ""


def test_callers_are_the_calls_other_modules_make_resolved_through_their_imports(tmp_path, monkeypatch):
    """Who calls a function, from which module, with what: every form of import, never a
    function of the same name defined elsewhere, and the files that spell the name recorded
    (by their digest) for the result cache."""
    from autofix.analysis.project import callers as project_callers

    root = write(tmp_path, {
        "pyproject.toml": "",
        "pkg/__init__.py": "",
        "pkg/fit.py": "def fit_dist(obj, steps):\n    return obj\n",
        "pkg/models.py": "from .fit import *\n\n\nclass Solver:\n    def fit(self):\n        fit_dist(self, 3)\n",
        "scripts/run.py": "import pkg.fit\n\npkg.fit.fit_dist(None, 1)\nprint(pkg.fit.fit_dist)\n",
        "other.py": "def fit_dist(a, b):\n    return a\n\n\nfit_dist(1, 2)\n",
        "notes.py": "X = 1\n",
    })
    monkeypatch.chdir(root)
    target = str(root / "pkg" / "fit.py")
    with reading() as read:
        found = project_callers.callers(target, "fit_dist")
    assert [(os.path.relpath(c.path, root), c.line) for c in found] == [("pkg/models.py", 6), ("scripts/run.py", 3)]
    assert [type(c.call).__name__ for c in found] == ["Call", "Call"]
    used = project_callers.users(target, "fit_dist")
    assert [(os.path.relpath(u.path, root), u.line, type(u.call).__name__) for u in used] == [
        ("pkg/models.py", 6, "Call"), ("scripts/run.py", 3, "Call"), ("scripts/run.py", 4, "Attribute"),
    ]
    key = str(root) + os.sep + layout.MENTION + "fit_dist"
    assert read[key] == layout.mentions_key(str(root), "fit_dist")
    assert layout.mentions_still(key, read[key])
    (root / "notes.py").write_text("X = 2\n")
    assert layout.mentions_still(key, read[key])  # a file that does not spell it
    (root / "other.py").write_text("fit_dist = None\n")
    assert not layout.mentions_still(key, read[key])
    monkeypatch.setattr(layout, "MAX_FILES", 3)
    assert project_callers.callers(target, "fit_dist") is None


def test_a_program_without_a_path_has_no_project():
    text = "from model import build\nbuild()\n"
    program = Program(cst.parse_module(text), text)
    assert not ProjectImports.of(program).active
    assert ProjectImports.of(program).definitions_called() == []


# --- migrate ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, script, made",
    [
        ("two_files", "train.py", "    model = model()\n    model.compile("),
        ("sibling_compiled", "train.py", "    model: keras.Model = build()\n"),
        ("package_relative", "pkg/train.py", "        model = build()\n        model.compile("),
        ("star_import", "train.py", "    model = build()\n"),
        ("src_layout", "scripts/train.py", "    model = build()\n"),
    ],
)
def test_a_model_built_by_another_module_is_made_in_the_scope(tmp_path, name, script, made):
    root = project(tmp_path, name)
    result = migrate(root / script)
    assert result.error is None and result.new_text is not None, reasons(result)
    assert "strategy = tf.distribute.MirroredStrategy()" in result.new_text
    assert "with strategy.scope():\n" + made in result.new_text
    assert "32 * strategy.num_replicas_in_sync" in result.new_text
    assert [f.code for f in result.findings] == ["TFD010"] and result.findings[0].fixable


def test_the_sibling_module_repro_is_migrated_not_skipped(tmp_path):
    root = project(tmp_path, "sibling_compiled")
    result = migrate(root / "train.py")
    assert result.skipped is None
    assert result.new_text.splitlines()[-3:] == [
        "with strategy.scope():",
        "    model: keras.Model = build()",
        "model.fit(ds, epochs=2)",
    ]


@pytest.mark.parametrize(
    "name, line, wanted",
    [
        ("unresolved", 9, "made by build_model (line 8), which autofix cannot follow: nets.factory is imported as a module of this project, but autofix cannot find it"),
        ("custom_loss", 8, "the model is made by build in models.py:9, which autofix does not follow: it compiles with the loss mean_error (line 11)"),
        ("trainer_module", 10, "fit_model() trains in trainer.py:1 (fit_model: calls fit, line 3), another module of the project"),
    ],
)
def test_what_cannot_be_followed_is_refused_at_the_line_naming_the_other_file(tmp_path, name, line, wanted):
    root = project(tmp_path, name)
    result = migrate(root / "train.py")
    assert result.skipped is None and result.new_text is None
    found = [f for f in result.findings if f.code == "TFD010"]
    assert [f.line for f in found] == [line], reasons(result)
    assert wanted in found[0].reason
    assert found[0].message == "trains on one device: not migrated" and not found[0].fixable


def test_a_factory_that_trains_or_distributes_is_not_called_in_the_scope_blind(tmp_path):
    root = write(tmp_path, {
        "models.py": """\
            import keras
            import tensorflow as tf

            def build(x, y):
                strategy = tf.distribute.MirroredStrategy()
                model = keras.Sequential([keras.layers.Dense(1)])
                model.compile(optimizer=keras.optimizers.Adam(1e-3, clipnorm=1.0), loss="mse")
                model.fit(x, y)
                return model
            """,
        "train.py": """\
            import numpy as np
            import tensorflow as tf
            from models import build

            x = np.zeros((64, 3), "float32")
            model = build(x, x)
            model.fit(tf.data.Dataset.from_tensor_slices((x, x)).batch(8))
            """,
    })
    result = migrate(root / "train.py")
    assert result.new_text is None
    (finding,) = result.findings
    assert finding.line == 6
    assert "models.py:4" in finding.reason
    assert "it uses tf.distribute itself (line 5)" in finding.reason
    assert "clipnorm" in finding.reason and "it trains (fit, line 8)" in finding.reason


def test_a_factory_that_calls_another_module_of_the_project_is_not_followed_blind(tmp_path):
    root = write(tmp_path, {
        "blocks.py": "import keras\ndef head():\n    return keras.layers.Dense(3)\n",
        "models.py": "import keras\nfrom blocks import head\ndef build():\n    return keras.Sequential([keras.Input((4,)), head()])\n",
        "train.py": """\
            import numpy as np
            import tensorflow as tf
            from models import build

            x = np.zeros((64, 4), "float32")
            model = build()
            model.compile(optimizer="adam", loss="mse")
            model.fit(tf.data.Dataset.from_tensor_slices((x, x)).batch(8))
            """,
    })
    result = migrate(root / "train.py")
    assert result.new_text is None
    (finding,) = result.findings
    assert finding.line == 6 and "it calls blocks.head (line 4) from blocks.py" in finding.reason


def test_a_factory_compiling_with_a_per_example_loss_of_its_own_module_is_called_in_the_scope(tmp_path):
    """The loss functions nets.py compiles with (one at its top level, one nested in the
    factory) return one loss per example: fit divides them by the replicas itself, so the
    factories are called in the scope as factories compiling with a Keras loss are."""
    root = project(tmp_path, "per_example_loss")
    result = migrate(root / "train.py")
    assert result.error is None and result.new_text is not None, reasons(result)
    assert "with strategy.scope():\n    model = build(width=8)\n" in result.new_text
    assert "with strategy.scope():\n    robust = build_robust()\n" in result.new_text
    assert ".batch(16 * strategy.num_replicas_in_sync)" in result.new_text
    assert "batch_size=16 * strategy.num_replicas_in_sync" in result.new_text
    assert [f.code for f in result.findings] == ["TFD010"] and result.findings[0].fixable
    assert (root / "nets.py").read_text() == (PROJECTS / "per_example_loss" / "nets.py").read_text()


LOSS_FACTORY = """\
    import keras
    import tensorflow as tf

    def other(a, b):
        return a

    def the_loss(y_true, y_pred):
        {body}

    def build():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        model.compile(optimizer="adam", loss=the_loss)
        return model
    """


@pytest.mark.parametrize(
    "body, wanted",
    [
        ("return tf.reduce_sum(tf.square(y_true - y_pred))", "whose function the_loss returns a sum over the whole batch (line 8)"),
        ("loss = tf.reduce_mean(tf.abs(y_true - y_pred)); return loss", "whose function the_loss returns a mean over the whole batch (line 8)"),
        ("return tf.reduce_mean(tf.square(y_true - y_pred), axis=-1) + tf.reduce_mean(y_pred)", "returns a mean over the whole batch (line 8)"),
        ("return tf.reduce_mean(tf.square(y_true - y_pred), axis=0)", "returns a value on line 8 that autofix cannot show to be one loss per example"),
        ("return other(y_true, y_pred)", "returns a value on line 8 that autofix cannot show to be one loss per example"),
    ],
)
def test_a_factory_compiling_with_a_loss_reduced_over_the_batch_by_its_own_module_is_refused(tmp_path, body, wanted):
    root = write(tmp_path, {
        "models.py": LOSS_FACTORY.replace("{body}", body),
        "train.py": """\
            import numpy as np
            from models import build

            x = np.zeros((64, 4), "float32")
            model = build()
            model.fit(x, x[:, :1], batch_size=8)
            """,
    })
    result = migrate(root / "train.py")
    assert result.new_text is None
    (finding,) = result.findings
    assert finding.line == 5, reasons(result)
    assert "the model is made by build in models.py:10, which autofix does not follow: it compiles with the loss the_loss (line 12), " in finding.reason
    assert wanted in finding.reason


def test_a_batch_constant_of_a_configuration_module_stays_per_replica(tmp_path):
    """``config.BATCH_SIZE`` (an integer of config.py) is the batch of one replica: the global
    batch fit is given is derived from it where training is fed; config.py is left as it is.
    The factory's ``SGD(config.LEARNING_RATE)`` is a number written in config.py: no schedule."""
    root = project(tmp_path, "config_batch")
    result = migrate(root / "train.py")
    assert result.error is None and result.new_text is not None, reasons(result)
    assert "with strategy.scope():\n    model = make_model()\n" in result.new_text
    assert "batch_size=config.BATCH_SIZE * strategy.num_replicas_in_sync, epochs=config.EPOCHS)" in result.new_text
    again = process_text(result.new_text, str(root / "train.py"), MIGRATE)
    assert again.new_text is None


def test_a_batch_a_data_builder_of_another_module_is_given_is_scaled_where_it_is_passed(tmp_path):
    """loaders.training_data batches with its parameter batch_size and reads it nowhere else:
    what train.py passes it is the batch, scaled there; loaders.py is left as it is."""
    root = project(tmp_path, "data_builder")
    result = migrate(root / "train.py")
    assert result.error is None and result.new_text is not None, reasons(result)
    assert "train_ds = training_data(320, BATCH * strategy.num_replicas_in_sync)\n" in result.new_text
    assert "with strategy.scope():\n    model = keras.Sequential(" in result.new_text
    assert [f.code for f in result.findings] == ["TFD010"] and result.findings[0].fixable
    again = process_text(result.new_text, str(root / "train.py"), MIGRATE)
    assert again.new_text is None


def test_a_migration_through_a_data_builder_follows_edits_of_the_builder_with_the_cache_on(tmp_path, monkeypatch):
    """train.py's migration holds while loaders.py has the bytes it had: once the builder
    reads its batch for something else too, a warm run refuses, as a cold one does."""
    from autofix import cache

    monkeypatch.delenv(cache.ENV_OFF, raising=False)
    monkeypatch.delenv(cache.ENV_DIR, raising=False)
    root = project(tmp_path, "data_builder")
    monkeypatch.chdir(root)

    def run(*args: str):
        result = CliRunner().invoke(main, ["migrate", *args, "-j", "1", "train.py"], catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    cold = run()
    assert "BATCH * strategy.num_replicas_in_sync" in cold[1] and run() == cold == run("--no-cache")
    loaders = root / "loaders.py"
    loaders.write_text(loaders.read_text().replace("    return dataset.batch(", "    print(examples // batch_size)\n    return dataset.batch("))
    edited = run()
    assert "BATCH * strategy.num_replicas_in_sync" not in edited[1] and edited == run("--no-cache")
    assert "is set by training_data (line 7) in loaders.py:9, another module of the project" in edited[1] + edited[2]


def test_a_data_builder_handing_its_batch_to_another_function_of_its_module_is_followed(tmp_path):
    root = write(tmp_path, {
        "data.py": """\
            import tensorflow as tf


            def pair(i):
                x = tf.cast(tf.fill([4], i), tf.float32)
                return x, x[:1]


            def get_ds(batch_size):
                ds = tf.data.Dataset.range(256).map(pair).cache().shuffle(256).batch(batch_size)
                return ds.prefetch(2)


            def make(size):
                return get_ds(batch_size=size)
            """,
        "train.py": """\
            import keras
            from data import make

            ds = make(32)
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
            model.fit(ds, epochs=1)
            """,
    })
    result = migrate(root / "train.py")
    assert result.new_text is not None, reasons(result)
    assert "ds = make(32 * strategy.num_replicas_in_sync)\n" in result.new_text


@pytest.mark.parametrize(
    "builder",
    [
        # the batch is read for something else too
        "def make(batch_size):\n    print(256 // batch_size)\n    return tf.data.Dataset.range(256).map(pair).batch(batch_size)\n",
        # batched with a number of its own
        "def make(batch_size):\n    return tf.data.Dataset.range(256).map(pair).batch(32)\n",
        # half of it, through another function of the module (N x an odd batch is not 2 x N x half of it)
        "def batched(ds, size):\n    return ds.batch(size)\n\n\ndef make(batch_size):\n    return batched(tf.data.Dataset.range(256).map(pair), batch_size // 2)\n",
        # not what it returns that is batched
        "def make(batch_size):\n    batched = tf.data.Dataset.range(256).map(pair).batch(batch_size)\n    return tf.data.Dataset.range(256).map(pair)\n",
    ],
)
def test_a_data_builder_whose_batch_cannot_be_shown_to_be_its_parameter_is_refused_naming_it(tmp_path, builder):
    root = write(tmp_path, {
        "data.py": "import tensorflow as tf\n\n\ndef pair(i):\n    x = tf.cast(tf.fill([4], i), tf.float32)\n    return x, x[:1]\n\n\n" + builder,
        "train.py": """\
            import keras
            from data import make

            ds = make(32)
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
            model.compile(optimizer="sgd", loss="mse")
            model.fit(ds, epochs=1)
            """,
    })
    result = migrate(root / "train.py")
    assert result.new_text is None
    line_of_make = next(n for n, text in enumerate((root / "data.py").read_text().splitlines(), 1) if text.startswith("def make("))
    assert any(
        f.line == 7 and f"the batch fit trains on (line 7) is set by make (line 4) in data.py:{line_of_make}, another module of the project" in f.reason
        for f in result.findings
    ), reasons(result)


@pytest.mark.parametrize(
    "config, wanted",
    [
        ("LEARNING_RATE = 0.05\nif FAST:\n    LEARNING_RATE = 0.5\n", "its learning rate config.LEARNING_RATE (compiled on line 8) is read from another module"),
        ("import keras\nLEARNING_RATE = keras.optimizers.schedules.ExponentialDecay(0.1, 100, 0.9)\n", "its learning rate config.LEARNING_RATE (compiled on line 8)"),
        ("", "its learning rate config.LEARNING_RATE (compiled on line 8)"),
    ],
)
def test_a_learning_rate_of_a_configuration_module_that_is_not_one_number_is_refused(tmp_path, config, wanted):
    root = project(tmp_path, "config_batch")
    (root / "config.py").write_text("FAST = False\nBATCH_SIZE = 24\nEPOCHS = 2\n" + config)
    result = migrate(root / "train.py")
    assert result.new_text is None
    (finding,) = result.findings
    assert finding.line == 8 and "the model is made by make_model in model.py:6" in finding.reason and wanted in finding.reason


def test_a_file_given_alone_or_on_stdin_is_analysed_as_today(tmp_path):
    """Without its path (standard input), the file's imports are not followed: a model made
    elsewhere that this file does not compile is not known to be one."""
    root = project(tmp_path, "sibling_compiled")
    text = (root / "train.py").read_text()
    alone = process_text(text, "-", MIGRATE)
    assert alone.skipped == "it does not train (no fit, train_on_batch or optimizer update)"
    assert alone.findings == ()
    assert migrate(root / "train.py").new_text is not None


def test_a_script_whose_imports_are_all_libraries_reads_no_project_file(tmp_path):
    root = write(tmp_path, {"train.py": (FIXTURES / "tfd010" / "custom_loop.py").read_text()})
    result = migrate(root / "train.py")
    # (Absent files looked for, and the folder's list of files that may pin a TensorFlow:
    # project/pins.py.)
    assert all(digest == "" or path.endswith(os.sep) for path, digest in result.read)
    assert result.new_text == (FIXTURES / "tfd010" / "custom_loop.fixed.py").read_text()


def test_migrate_on_the_command_line_names_the_other_file(tmp_path, monkeypatch):
    root = project(tmp_path, "custom_loss")
    monkeypatch.chdir(root)
    result = CliRunner().invoke(main, ["migrate", "--no-cache", "-j", "1", "."], catch_exceptions=False)
    # (migrate writes its diff to stdout, and what it found to stderr.)
    assert "no findings" not in result.stdout + result.stderr
    assert "train.py:8:9: TFD010" in result.stderr and "models.py:9" in result.stderr


def test_check_sees_a_model_made_by_another_module_outside_the_scope(tmp_path):
    root = write(tmp_path, {
        "models.py": (
            "import keras\ndef build():\n    model = keras.Sequential([keras.layers.Dense(1)])\n"
            "    model.compile(optimizer='adam', loss='mse')\n    return model\n"
        ),
        "train.py": """\
            import tensorflow as tf
            from models import build

            strategy = tf.distribute.MirroredStrategy()
            model = build()
            model.fit(tf.data.Dataset.range(8).batch(4))
            """,
    })
    result = process_path(str(root / "train.py"), Options())
    assert any(f.code == "TFD001" and f.line == 5 for f in result.findings), reasons(result)
    alone = process_text((root / "train.py").read_text(), "-", Options())
    assert not any(f.code == "TFD001" and f.line == 5 for f in alone.findings)


@pytest.mark.tf
def test_a_migrated_two_file_project_trains_on_every_replica(tmp_path):  # pragma: no cover - runs TensorFlow
    """The migrated sibling-module project runs, its fit under the strategy (smoke)."""
    import subprocess
    import sys

    root = project(tmp_path, "sibling_compiled")
    migrated = migrate(root / "train.py").new_text
    (root / "train.py").write_text(migrated)
    outcome = subprocess.run(
        [sys.executable, "-m", "autofix", "smoke", "train.py", "--steps", "1"],
        cwd=root, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert outcome.returncode == 0, outcome.stdout + outcome.stderr


@pytest.mark.tf
@pytest.mark.parametrize("name", ["per_example_loss", "data_builder"])
def test_a_migrated_project_is_proven_by_compare(tmp_path, name):  # pragma: no cover - runs TensorFlow
    """The per_example_loss and data_builder projects, migrated, make the original's
    data-parallel steps on 2 replicas (smoke --compare, each tree in its own folder with its
    own modules)."""
    import json
    import subprocess
    import sys

    original = project(tmp_path / "original", name)
    migrated = project(tmp_path / "migrated", name)
    (migrated / "train.py").write_text(migrate(migrated / "train.py").new_text)
    outcome = subprocess.run(
        [sys.executable, "-m", "autofix", "smoke", str(migrated / "train.py"), "--compare", str(original / "train.py"), "--json", str(tmp_path / "report.json")],
        cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert outcome.returncode == 0, outcome.stdout + outcome.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    report = report[0] if isinstance(report, list) else report
    assert report["compare"]["status"] == "equivalent", report["compare"]["message"]


def test_a_trainer_class_of_another_module_is_named_where_its_method_is_called(tmp_path):
    root = write(tmp_path, {
        "trainer.py": """\
            class Trainer:
                def __init__(self, model):
                    self.model = model

                def train(self, dataset):
                    self.model.compile(optimizer="adam", loss="mse")
                    self.model.fit(dataset, epochs=2)

                def report(self):
                    print(self.model.summary())
            """,
        "train.py": """\
            import keras
            import tensorflow as tf
            from trainer import Trainer

            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
            trainer = Trainer(model)
            trainer.train(tf.data.Dataset.range(8).batch(4))
            trainer.report()
            """,
    })
    result = migrate(root / "train.py")
    assert result.skipped is None and result.new_text is None
    (finding,) = result.findings
    assert finding.line == 7, reasons(result)
    assert "trainer.train() trains in trainer.py:5 (Trainer.train: calls fit, line 7)" in finding.reason


def test_a_trainer_method_that_trains_through_another_method_is_named_at_its_call(tmp_path):
    """Not at the first call of the object's methods (``prepare()`` does not train), but at
    ``run()``, which trains through ``self._fit()``: the line the training happens from."""
    root = write(tmp_path, {
        "lib/runner.py": """\
            class Runner:
                def prepare(self, model):
                    model.compile(optimizer="adam", loss="mse")
                    self.model = model

                def _fit(self, data):
                    return self.model.fit(data, epochs=1)

                def run(self, data):
                    history = self._fit(data)
                    return history.history
            """,
        "train.py": """\
            import keras
            import tensorflow as tf
            from lib.runner import Runner

            runner = Runner()
            runner.prepare(keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)]))
            print(runner.run(tf.data.Dataset.range(8).batch(4)))
            """,
    })
    (root / "pyproject.toml").write_text("")
    result = migrate(root / "train.py")
    assert result.new_text is None
    (finding,) = result.findings
    assert finding.line == 7, reasons(result)
    assert "runner.run() trains in lib/runner.py:9 (Runner.run: through self._fit(): calls fit, line 7)" in finding.reason


def test_without_a_marker_the_folder_autofix_runs_in_is_the_root(tmp_path, monkeypatch):
    """A checkout without pyproject.toml, setup.py or .git, migrated as `autofix migrate .`
    from its top: a package at the top is found from a script two folders down."""
    root = write(tmp_path / "checkout", {
        "nets/__init__.py": "from nets.factory import build  # noqa\n",
        "nets/factory.py": "import keras\ndef build():\n    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])\n",
        "tasks/toy/main.py": """\
            import numpy as np
            from nets import build

            def run():
                x = np.zeros((64, 4), "float32")
                model = build()
                model.compile(optimizer="adam", loss="mse")
                model.fit(x, x[:, :1], batch_size=16)

            if __name__ == "__main__":
                run()
            """,
    })
    monkeypatch.chdir(root)
    result = migrate(Path("tasks/toy/main.py"))
    assert result.new_text is not None, reasons(result)
    assert "    with strategy.scope():\n        model = build()" in result.new_text
    monkeypatch.chdir(tmp_path)
    elsewhere = migrate(root / "tasks" / "toy" / "main.py")
    assert elsewhere.new_text is not None  # (tmp_path is under no marker either: it is the root)


def test_under_migrate_a_file_of_a_project_that_imports_is_not_passed_over_unread():
    from autofix.prefilter import might_need_analysis

    text = "from trainer import Trainer\nTrainer().train()\n"
    assert might_need_analysis(text, migrating=True, project=True)
    assert not might_need_analysis(text, migrating=True)
    assert not might_need_analysis(text, project=True)


def test_check_leaves_a_setup_function_another_module_may_call_in_the_scope(tmp_path):
    """``train_setup(strategy)`` is called by the entry script in ``strategy.scope()``: in its
    own module nothing calls it, so a model it gets from another module is not reported as
    built outside the scope there (a local construction is judged as before)."""
    root = write(tmp_path, {
        "models.py": "import keras\ndef build():\n    return keras.Sequential([keras.layers.Dense(1)])\n",
        "setup.py": "",
        "lib/train.py": """\
            import tensorflow as tf
            from models import build

            class Trainer:
                def __init__(self, model, strategy):
                    self.model = model
                    self.optimizer = tf.keras.optimizers.Adam()
                    self.strategy = strategy

                def step(self, x):
                    with tf.GradientTape() as tape:
                        loss = tf.reduce_sum(self.model(x)) / 64
                    grads = tape.gradient(loss, self.model.trainable_variables)
                    self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
                    return loss

                def distributed_step(self, x):
                    return self.strategy.run(self.step, args=(x,))

            def train_setup(strategy):
                model = build()
                return Trainer(model, strategy)
            """,
    })
    result = process_path(str(root / "lib" / "train.py"), Options())
    assert not [f for f in result.findings if f.code == "TFD001" and f.line == 21], reasons(result)


# --- a migration that edits two files ---------------------------------------------------------


def test_a_model_class_of_another_module_with_a_mean_loss_train_step_is_migrated_in_both_files(tmp_path):
    root = project(tmp_path, "own_train_step")
    result = migrate(root / "train.py")
    assert "with strategy.scope():\n    model = Regressor()" in result.new_text, reasons(result)
    ((path, _digest, _old, new),) = result.also
    assert path == str(root / "models.py")
    assert "grads = tape.gradient(replica_loss, self.trainable_variables)" in new
    assert 'return {"loss": loss}' in new


def test_a_train_step_of_another_module_is_divided_there_and_both_files_are_one_fix(tmp_path):
    root = project(tmp_path, "vae_train_step")
    result = migrate(root / "test.py")
    assert "with strategy.scope():\n    vae = VAE()" in result.new_text
    assert "batch_size=64 * strategy.num_replicas_in_sync" in result.new_text
    ((path, digest, old, new),) = result.also
    assert path == str(root / "model.py") and old == (root / "model.py").read_text() and digest
    assert "replica_loss = total_loss / tf.distribute.get_strategy().num_replicas_in_sync\n" in new
    assert "tape.gradient(replica_loss, self.trainable_weights)" in new
    # What the step reports keeps the undivided loss.
    assert "self.total_loss_tracker.update_state(total_loss)" in new
    (finding,) = [f for f in result.findings if f.fixable]
    assert any("1 outside any strategy" in message for _p, _l, message in finding.related)


def _git_applies(root, diff: bytes, *options: str) -> None:
    """``git apply`` (with ``options``, e.g. ``--check``) takes ``diff`` in a repository made at
    ``root``, as a user applies what ``autofix migrate`` shows."""
    import subprocess

    (root / "patch.diff").write_bytes(diff)
    subprocess.run(["git", "init", "-q", "."], cwd=root, check=True)
    applies = subprocess.run(["git", "apply", *options, "patch.diff"], cwd=root, capture_output=True, text=True)
    assert applies.returncode == 0, applies.stderr
    (root / "patch.diff").unlink()


def test_a_two_file_migration_is_one_diff_git_applies_and_is_written_whole(tmp_path, monkeypatch):
    root = project(tmp_path, "vae_train_step")
    monkeypatch.chdir(root)
    shown = CliRunner().invoke(main, ["migrate", "--no-cache", "-j", "1", "."], catch_exceptions=False)
    assert shown.exit_code == 1
    assert "--- a/test.py" in shown.stdout and "--- a/model.py" in shown.stdout
    _git_applies(root, shown.stdout_bytes, "--check")
    written = CliRunner().invoke(main, ["migrate", "--no-cache", "-j", "1", "--write", "."], catch_exceptions=False)
    assert written.exit_code == 0, written.stderr
    assert "num_replicas_in_sync" in (root / "test.py").read_text()
    assert "replica_loss" in (root / "model.py").read_text()
    # Idempotent: a second migrate changes nothing in either file.
    again = CliRunner().invoke(main, ["migrate", "--no-cache", "-j", "1", "."], catch_exceptions=False)
    assert again.exit_code == 0 and again.stdout == "", again.stdout


def test_a_model_module_whose_train_step_another_module_fits_is_not_a_decline(tmp_path, monkeypatch):
    """model.py's only training is VAE.train_step, which test.py fits: given alone it names the
    module whose migration migrates it (not "not migrated", which would make `migrate .` fail
    after writing both); with nothing of the project using VAE, it is a decline with the reason."""
    root = project(tmp_path, "vae_train_step")
    monkeypatch.chdir(root)
    (finding,) = [f for f in migrate(root / "model.py").findings if f.code == "TFD010"]
    assert finding.message == "trains on one device where another module trains it"
    assert "where test.py:5 uses VAE: migrate test.py, which migrates this module with it" in finding.reason
    alone = CliRunner().invoke(main, ["migrate", "--no-cache", "model.py"], catch_exceptions=False)
    assert alone.exit_code == 0 and alone.stdout == ""
    (root / "test.py").unlink()
    (finding,) = [f for f in migrate(root / "model.py").findings if f.code == "TFD010"]
    assert finding.message == "trains on one device: not migrated"
    assert "nothing in this file trains one" in finding.reason


def test_a_two_file_migration_whose_other_file_is_excluded_is_refused(tmp_path, monkeypatch):
    root = project(tmp_path, "vae_train_step")
    monkeypatch.chdir(root)
    before = {p.name: p.read_text() for p in root.iterdir()}
    result = CliRunner().invoke(main, ["migrate", "--no-cache", "-j", "1", "--write", "--exclude", "model.py", "."], catch_exceptions=False)
    assert "it must also edit model.py, which is excluded" in result.stderr
    assert {p.name: p.read_text() for p in root.iterdir()} == before


def test_a_train_step_loss_with_a_term_that_is_not_a_mean_is_refused_naming_the_line(tmp_path):
    root = project(tmp_path, "vae_summed_loss")
    result = migrate(root / "test.py")
    assert result.new_text is None and result.also == ()
    (finding,) = result.findings
    assert "the loss total_loss of its train_step (model.py:26)" in finding.reason, reasons(result)
    assert "is not a mean over the batch (line 24)" in finding.reason


@pytest.mark.parametrize("spoil", ["changed", "read-only"])
def test_a_two_file_fix_is_not_written_when_its_other_file_cannot_be(tmp_path, spoil):
    """Its other file edited after the analysis read it (digests compared again before
    writing), or read-only: neither file is written, and the result says why."""
    from autofix import crossfile
    from autofix.sourcefile import read_source

    root = project(tmp_path, "vae_train_step")
    shown = process_path(str(root / "test.py"), MIGRATE)
    assert shown.also
    other = root / "model.py"
    if spoil == "changed":
        other.write_text(other.read_text() + "\n# edited\n")
    else:
        other.chmod(0o444)
    before = (root / "test.py").read_text(), other.read_text()
    result = crossfile.written(shown, read_source(str(root / "test.py")), write=True)
    assert not result.written and result.new_text is None
    assert ((root / "test.py").read_text(), other.read_text()) == before
    wanted = "changed since it was read" if spoil == "changed" else "is read-only"
    assert f"it must also edit model.py, which {wanted}" in result.refused
    assert all(not f.fixable for f in result.findings)


def test_write_all_writes_every_file_or_none(tmp_path):
    from autofix.sourcefile import ChangedOnDisk, digest, write_all

    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_bytes(b"a\n")
    b.write_bytes(b"b\n")
    with pytest.raises(ChangedOnDisk):
        write_all([(str(a), b"A\n", digest(b"a\n")), (str(b), b"B\n", digest(b"not b\n"))])
    assert (a.read_bytes(), b.read_bytes()) == (b"a\n", b"b\n")
    write_all([(str(a), b"A\n", digest(b"a\n")), (str(b), b"B\n", digest(b"b\n"))])
    assert (a.read_bytes(), b.read_bytes()) == (b"A\n", b"B\n")


@pytest.mark.tf
@pytest.mark.parametrize("name, entry", [("vae_train_step", "test.py"), ("model_method", "train.py")])
def test_a_two_file_migration_is_proven_by_compare(tmp_path, name, entry):  # pragma: no cover - runs TensorFlow
    """A project migrated in both files (vae_train_step: test.py and model.py's train_step;
    model_method: train.py and classes/Model.py's training method) makes the original's
    data-parallel steps on 2 replicas (smoke --compare)."""
    import json
    import subprocess
    import sys

    original = project(tmp_path / "original", name)
    migrated = project(tmp_path / "migrated", name)
    result = process_path(str(migrated / entry), MIGRATE, write=True)
    assert result.written and result.also, reasons(result)
    outcome = subprocess.run(
        [sys.executable, "-m", "autofix", "smoke", str(migrated / entry), "--compare", str(original / entry), "--replicas", "2", "--json", str(tmp_path / "report.json")],
        cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert outcome.returncode == 0, outcome.stdout + outcome.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    report = report[0] if isinstance(report, list) else report
    assert report["compare"]["status"] == "equivalent", report["compare"]["message"]


# --- a training method of another module's class (a fix that spans files) ---------------------

MODEL_PY = """\
    import keras


    class Model:
        def create_model(self):
            self.model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(4)])
            self.model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

        def train_network(self, x, y{params}):
            {body}
    """
TRAIN_PY = """\
    import numpy as np

    from classes.Model import Model

    x = np.random.rand(64, 10).astype("float32")
    y = np.random.randint(0, 4, size=(64,))
    m = Model()
    m.create_model()
    {call}
    """


def model_project(root: Path, params: str, body: str, call: str) -> Path:
    return write(root, {
        "classes/Model.py": MODEL_PY.format(params=params, body=body),
        "train.py": TRAIN_PY.format(call=call),
    })


def test_a_method_of_another_module_that_fits_is_migrated_in_both_files(tmp_path):
    root = project(tmp_path, "model_method")
    result = migrate(root / "train.py")
    assert result.new_text is not None, reasons(result)
    assert "strategy = tf.distribute.MirroredStrategy()\n" in result.new_text
    assert "m = Model()\nwith strategy.scope():\n    m.create_model()\n" in result.new_text
    replicas = "strategy.num_replicas_in_sync"
    assert (
        f"m.train_network(x_train, y_train, x_test, y_test, batch_size=32 * {replicas}, "
        f"validation_batch_size=min(32 * {replicas}, len(x_test) // {replicas} * {replicas}))\n"
    ) in result.new_text
    ((path, _digest, old, new),) = result.also
    assert path == str(root / "classes" / "Model.py") and old == (root / "classes" / "Model.py").read_text()
    assert "    def train_network(self, x, y, xv, yv, batch_size=None, validation_batch_size=None):\n" in new
    assert "validation_data=(xv, yv), batch_size=batch_size, validation_batch_size=validation_batch_size)\n" in new
    # Nothing else of the other module changes.
    assert [line for line in old.splitlines() if "train_network" not in line and "fit(" not in line] == [
        line for line in new.splitlines() if "train_network" not in line and "fit(" not in line
    ]
    (finding,) = [f for f in result.findings if f.fixable]
    assert any("Model.train_network takes batch_size=None, validation_batch_size=None, handed to its fit" in message for _p, _l, message in finding.related)


def test_a_two_file_method_migration_is_one_diff_git_applies_written_whole_and_idempotent(tmp_path, monkeypatch):
    root = project(tmp_path, "model_method")
    monkeypatch.chdir(root)
    shown = CliRunner().invoke(main, ["migrate", "--no-cache", "-j", "1", "train.py"], catch_exceptions=False)
    assert shown.exit_code == 1
    assert "--- a/train.py" in shown.stdout and "--- a/classes/Model.py" in shown.stdout
    _git_applies(root, shown.stdout_bytes, "--check")
    written = CliRunner().invoke(main, ["migrate", "--no-cache", "-j", "1", "--write", "train.py"], catch_exceptions=False)
    assert written.exit_code == 0, written.stderr
    assert "migrated classes/Model.py (with train.py)" in written.stderr
    assert "batch_size=batch_size" in (root / "classes" / "Model.py").read_text()
    assert "strategy.scope()" in (root / "train.py").read_text()
    again = CliRunner().invoke(main, ["migrate", "--no-cache", "-j", "1", "train.py"], catch_exceptions=False)
    assert again.exit_code == 0 and again.stdout == "", again.stdout


def test_a_second_script_training_the_same_method_follows_the_parameters_the_first_added(tmp_path, monkeypatch):
    """Two scripts of the project train Model.train_network: the first migrated edits
    Model.py, the second (analysed after) passes the global batch to the parameters it finds."""
    root = project(tmp_path, "model_method")
    shutil.copy(root / "train.py", root / "again.py")
    monkeypatch.chdir(root)
    written = CliRunner().invoke(main, ["migrate", "--no-cache", "-j", "1", "--write", "train.py", "again.py"], catch_exceptions=False)
    assert written.exit_code == 0, written.stderr
    assert (root / "train.py").read_text() == (root / "again.py").read_text()
    assert "strategy.scope()" in (root / "train.py").read_text()
    assert (root / "classes" / "Model.py").read_text().count("batch_size=None") == 2


@pytest.mark.parametrize("batch, default, passed", [
    ("batch_size=64", "batch_size=64", "batch_size=64 * strategy.num_replicas_in_sync"),
    ("batch_size=None", "batch_size=None", "batch_size=32 * strategy.num_replicas_in_sync"),
])
def test_a_literal_batch_of_the_method_is_its_new_parameters_default(tmp_path, batch, default, passed):
    root = model_project(tmp_path, "", f"self.model.fit(x, y, epochs=1, {batch})", "m.train_network(x, y)")
    result = migrate(root / "train.py")
    assert f"m.train_network(x, y, {passed})" in result.new_text, reasons(result)
    ((_path, _digest, _old, new),) = result.also
    assert f"def train_network(self, x, y, {default}):" in new
    assert "self.model.fit(x, y, epochs=1, batch_size=batch_size)" in new


@pytest.mark.parametrize("params, call, passed", [
    (", batch_size=16", "m.train_network(x, y)", "m.train_network(x, y, batch_size=16 * strategy.num_replicas_in_sync)"),
    (", bs=None", "m.train_network(x, y, bs=BATCH)", "m.train_network(x, y, bs=BATCH * strategy.num_replicas_in_sync)"),
    (", bs=None", "m.train_network(x, y, BATCH + 1)", "m.train_network(x, y, (BATCH + 1) * strategy.num_replicas_in_sync)"),
])
def test_a_batch_the_method_takes_as_a_parameter_is_passed_scaled_and_its_module_left_alone(tmp_path, params, call, passed):
    name = params.split("=")[0].strip(", ")
    root = model_project(tmp_path, params, f"self.model.fit(x, y, epochs=1, batch_size={name})", call)
    (root / "train.py").write_text((root / "train.py").read_text().replace("m = Model()", "BATCH = 8\nm = Model()"))
    result = migrate(root / "train.py")
    assert result.new_text is not None, reasons(result)
    assert passed in result.new_text
    assert result.also == ()


@pytest.mark.parametrize("params, body, call, wanted", [
    ("", "self.model.fit(x, epochs=1)", "m.train_network(x, y)", "its fit (line 10) is given no y, so it trains on a dataset or generator"),
    ("", "self.model.fit(x, y, batch_size=self.batch)", "m.train_network(x, y)", "neither a number nor a parameter of train_network"),
    ("", "self.model.compile(optimizer='sgd', loss='mse'); self.model.fit(x, y)", "m.train_network(x, y)", "it compiles the model too (line 10)"),
    ("", "self.model.fit(x, y, validation_split=0.2)", "m.train_network(x, y)", "its fit is given validation_split"),
    ("", "self.model.fit(x, y, steps_per_epoch=4)", "m.train_network(x, y)", "steps_per_epoch"),
    (", *rest", "self.model.fit(x, y)", "m.train_network(x, y)", "its parameters (*args"),
    (", bs=None", "self.model.fit(x, y, batch_size=bs)", "m.train_network(x, y, *[8])", "unpacked arguments"),
    (", xv=None, yv=None", "self.model.fit(x, y, validation_data=(xv, yv))", "m.train_network(x, y, x[:8], y[:8])", "not one name whose size can be read again"),
])
def test_a_training_method_that_cannot_be_shown_right_is_refused_naming_its_line(tmp_path, params, body, call, wanted):
    root = model_project(tmp_path, params, body, call)
    before = (root / "classes" / "Model.py").read_text()
    result = migrate(root / "train.py")
    assert result.new_text is None and result.also == ()
    (finding,) = result.findings
    assert finding.line == 9 and "m.train_network() trains in classes/Model.py:9 (Model.train_network: calls fit, line 10)" in finding.reason, reasons(result)
    assert wanted in finding.reason
    assert (root / "classes" / "Model.py").read_text() == before


BUILT_IN_INIT = """\
    import keras


    class Model:
        def __init__(self):
            self.model = keras.Sequential([keras.Input((10,)), keras.layers.Dense(4)])

        def setup(self, rate):
            self.model.compile(optimizer=keras.optimizers.SGD(rate), loss="mse")

        def train_network(self, x, y):
            {first}self.model.fit(x, y, epochs=1)
    """
TRAINED_IN_MAIN = """\
    import numpy as np

    from classes.Model import Model


    def main():
        x = np.random.rand(64, 10).astype("float32")
        y = np.random.rand(64, 4)
        m = Model()
        m.setup(0.1)
        m.train_network(x, y)


    if __name__ == "__main__":
        main()
    """


def test_a_model_the_construction_makes_and_another_method_compiles_is_made_in_the_scope(tmp_path):
    """``__init__`` makes the model and ``setup()`` compiles it: both calls go into the scope,
    in main(), where the strategy is made."""
    root = write(tmp_path, {"classes/Model.py": BUILT_IN_INIT.format(first=""), "train.py": TRAINED_IN_MAIN})
    result = migrate(root / "train.py")
    assert result.new_text is not None, reasons(result)
    assert "    with strategy.scope():\n        m = Model()\n        m.setup(0.1)\n    m.train_network(x, y, batch_size=32 * strategy.num_replicas_in_sync)\n" in result.new_text
    ((_path, _digest, _old, new),) = result.also
    assert "def train_network(self, x, y, batch_size=None):" in new


def test_a_training_method_that_compiles_through_another_method_is_refused(tmp_path):
    root = write(tmp_path, {"classes/Model.py": BUILT_IN_INIT.format(first="self.setup(0.1)\n            "), "train.py": TRAINED_IN_MAIN})
    result = migrate(root / "train.py")
    assert result.new_text is None and result.also == ()
    (finding,) = result.findings
    assert "it makes or compiles the model it fits (self.model, Model.setup, line 8) itself" in finding.reason, reasons(result)


@pytest.mark.parametrize("name, line, wanted", [
    ("model_method_dataset", 10, "its fit (line 10) is given no y, so it trains on a dataset or generator whose batch is fixed where it is made"),
    ("model_method_twice", 12, "the object is trained on lines 12, 13"),
])
def test_the_refused_method_projects_are_named_at_the_call(tmp_path, name, line, wanted):
    root = project(tmp_path, name)
    result = migrate(root / "train.py")
    assert result.new_text is None and result.also == ()
    (finding,) = result.findings
    assert finding.line == line and wanted in finding.reason, reasons(result)


def test_the_other_files_diff_and_write_keep_its_own_encoding_and_newlines(tmp_path, monkeypatch):
    """classes/Model.py in Latin-1 with CRLF lines, train.py in UTF-8: the diff is in each
    file's bytes (git applies it) and --write keeps each file's encoding and newlines."""
    root = project(tmp_path, "model_method")
    other = root / "classes" / "Model.py"
    # A Latin-1 character next to the edit: in the diff's context lines.
    text = "# -*- coding: latin-1 -*-\n# Modèle\n" + other.read_text().replace("    def train_network", "    # entraîne le modèle\n    def train_network")
    other.write_bytes(text.replace("\n", "\r\n").encode("latin-1"))
    (root / "train.py").write_text("# entraîné\n" + (root / "train.py").read_text(), encoding="utf-8")
    monkeypatch.chdir(root)
    shown = CliRunner().invoke(main, ["migrate", "--no-cache", "-j", "1", "train.py"], catch_exceptions=False)
    assert shown.exit_code == 1
    _git_applies(root, shown.stdout_bytes, "--check")
    written = CliRunner().invoke(main, ["migrate", "--no-cache", "-j", "1", "--write", "train.py"], catch_exceptions=False)
    assert written.exit_code == 0, written.stderr
    data = other.read_bytes()
    assert "# Modèle\r\n".encode("latin-1") in data and b"batch_size=None, validation_batch_size=None):\r\n" in data
    assert data.count(b"\n") == data.count(b"\r\n")
    assert (root / "train.py").read_text(encoding="utf-8").startswith("# entraîné\n")


def test_a_two_file_fix_is_shown_and_written_whole_with_the_result_cache_on(tmp_path, monkeypatch):
    """Two diff runs, then --write, with the cache on: the second run's diff still has the
    other file's edit, and both files are written (a cached result would hold only the
    migrated file's text)."""
    root = project(tmp_path, "model_method")
    monkeypatch.chdir(root)
    monkeypatch.delenv("AUTOFIX_NO_CACHE", raising=False)
    monkeypatch.setenv("AUTOFIX_CACHE_DIR", str(tmp_path / "cache"))
    for _ in range(2):
        shown = CliRunner().invoke(main, ["migrate", "-j", "1", "train.py"], catch_exceptions=False)
        assert shown.exit_code == 1 and "--- a/classes/Model.py" in shown.stdout, shown.stdout
    written = CliRunner().invoke(main, ["migrate", "-j", "1", "--write", "train.py"], catch_exceptions=False)
    assert written.exit_code == 0, written.stderr
    assert "batch_size=batch_size" in (root / "classes" / "Model.py").read_text()
    assert "strategy.scope()" in (root / "train.py").read_text()


def test_two_scripts_training_the_same_method_show_its_edit_once_and_the_run_diff_applies(tmp_path, monkeypatch):
    root = project(tmp_path, "model_method")
    shutil.copy(root / "train.py", root / "again.py")
    monkeypatch.chdir(root)
    shown = CliRunner().invoke(main, ["migrate", "--no-cache", "-j", "1", "train.py", "again.py"], catch_exceptions=False)
    assert shown.exit_code == 1
    assert shown.stdout.count("--- a/classes/Model.py") == 1 and "--- a/again.py" in shown.stdout
    assert "its edit of classes/Model.py is" in shown.stderr
    _git_applies(root, shown.stdout_bytes)
    again = CliRunner().invoke(main, ["migrate", "--no-cache", "-j", "1", "train.py", "again.py"], catch_exceptions=False)
    assert again.exit_code == 0 and again.stdout == "", again.stdout


def test_migrate_interactive_writes_the_other_file_in_its_own_encoding(tmp_path, monkeypatch):
    """-i, the fix accepted: both files written, classes/Model.py (Latin-1, CRLF) in its own
    encoding and newlines, not train.py's."""
    root = project(tmp_path, "model_method")
    other = root / "classes" / "Model.py"
    text = "# -*- coding: latin-1 -*-\n# Modèle\n" + other.read_text()
    other.write_bytes(text.replace("\n", "\r\n").encode("latin-1"))
    monkeypatch.chdir(root)
    result = CliRunner().invoke(main, ["migrate", "--interactive", "--no-cache", "-j", "1", "train.py"], input="a\n", catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    data = other.read_bytes()
    assert "# Modèle\r\n".encode("latin-1") in data and b"batch_size=batch_size" in data
    assert data.count(b"\n") == data.count(b"\r\n")
    assert "strategy.scope()" in (root / "train.py").read_text()


REBOUND_KL = (
    "            kl_loss = -0.5 * (1 + log_var - tf.square(mean) - tf.exp(log_var))\n"
    "            kl_loss = tf.reduce_mean(tf.reduce_sum(kl_loss, axis=1))\n"
    "            total_loss = reconstruction_loss + 0.5 * kl_loss\n"
)
KL_REBOUND_AFTER_USE = (
    "            kl_loss = -0.5 * (1 + log_var - tf.square(mean) - tf.exp(log_var))\n"
    "            total_loss = reconstruction_loss + 0.5 * kl_loss\n"
    "            kl_loss = tf.reduce_mean(tf.reduce_sum(kl_loss, axis=1))\n"
)


@pytest.mark.parametrize("lines, migrated", [(REBOUND_KL, True), (KL_REBOUND_AFTER_USE, False)])
def test_a_term_bound_again_in_the_tape_block_is_read_as_it_is_where_the_loss_is_summed(tmp_path, lines, migrated):
    """A term computed in two steps (``kl = ...; kl = tf.reduce_mean(...)``, as real VAEs
    write it) is the mean its last binding before the sum makes; bound to a mean only after
    the sum, it is what the sum read, not a mean, and the migration is refused."""
    root = project(tmp_path, "vae_train_step")
    model = root / "model.py"
    text = model.read_text()
    old = (
        "            kl_loss = tf.reduce_mean(-0.5 * (1 + log_var - tf.square(mean) - tf.exp(log_var)))\n"
        "            total_loss = reconstruction_loss + 0.5 * kl_loss\n"
    )
    assert old in text
    model.write_text(text.replace(old, lines))
    result = migrate(root / "test.py")
    if migrated:
        ((_path, _digest, _old, new),) = result.also
        assert "replica_loss = total_loss / tf.distribute.get_strategy().num_replicas_in_sync\n" in new
    else:
        assert result.new_text is None and result.also == ()
        (finding,) = result.findings
        # The sum read the first binding (line 25), which is not a mean.
        assert "has a term that is not a mean over the batch (line 25)" in finding.reason, reasons(result)


def test_a_train_step_wrapper_of_another_module_with_no_call_is_refused(tmp_path):
    """A model class of another module with a train_step but neither call() nor build() (a
    VAE wrapping layers it has never called): Keras 3 builds a model before fit under a
    strategy by calling it, which fails there ("Unable to automatically build the model"),
    so the two-file migration is refused, naming the class's train_step."""
    root = project(tmp_path, "vae_train_step")
    model = root / "model.py"
    text = model.read_text()
    call = (
        "    def call(self, x):\n"
        "        mean, _ = tf.split(self.encoder(x), 2, axis=-1)\n"
        "        return self.decoder(mean)\n\n"
    )
    assert call in text
    model.write_text(text.replace(call, ""))
    result = migrate(root / "test.py")
    assert result.new_text is None and result.also == ()
    (finding,) = result.findings
    assert "has a train_step (model.py:" in finding.reason and "but no call() or build()" in finding.reason, reasons(result)


# --- a step's values unpacked from helper methods; a training loop of another module ----------


def test_what_a_step_unpacks_from_its_helper_methods_is_combined_by_what_each_element_is(tmp_path):
    """gan_helper_returns: ``d_loss, d_acc = self.train_d(...)``; each helper returns the loss
    it differentiates and a mean over its batch (an accuracy): the losses are summed over the
    replicas, the accuracies averaged. (Without ls_gan.py, which uses what the migration
    changes: see below.)"""
    root = project(tmp_path, "gan_helper_returns")
    (root / "ls_gan.py").unlink()
    result = migrate(root / "gan.py")
    assert result.new_text is not None, reasons(result)
    assert (
        "d_loss, d_acc, g_loss, g_acc = strategy.run(gan.step, args=(img,))\n"
        "        return strategy.reduce(tf.distribute.ReduceOp.SUM, d_loss, axis=None), "
        "strategy.reduce(tf.distribute.ReduceOp.MEAN, d_acc, axis=None), "
        "strategy.reduce(tf.distribute.ReduceOp.SUM, g_loss, axis=None), "
        "strategy.reduce(tf.distribute.ReduceOp.MEAN, g_acc, axis=None)"
    ) in result.new_text
    assert migrate_text(result.new_text, root / "gan.py") == result.new_text  # idempotent


def migrate_text(text: str, path: Path) -> str:
    path.write_text(text)
    again = migrate(path)
    return again.new_text if again.new_text is not None else text


def test_an_accuracy_kept_in_a_module_global_of_another_module_is_refused_naming_it(tmp_path):
    """gan_shared_metric: the accuracy each helper returns is utils.binary_accuracy's metric,
    made on its first call in a module global: every replica would share it."""
    root = project(tmp_path, "gan_shared_metric")
    result = migrate(root / "gan.py")
    assert result.new_text is None
    (found,) = [f for f in result.findings if f.code == "TFD010"]
    assert found.line == 52, reasons(result)
    assert "binary_accuracy(label, pred) (line 35)" in found.reason
    assert "binary_accuracy() (utils.py:8) keeps state in the module global _b_acc (utils.py:9)" in found.reason


@pytest.mark.parametrize(
    "returned, wanted",
    [
        ("loss, tf.reduce_max(pred)", "it is a maximum, minimum or product over the batch"),
        ("loss", "does not return a tuple of which the step's line 17 unpacks element 1"),
        ("loss, helpers.accuracy(label, pred)", "accuracy() is defined in helpers.py:4, and autofix does not follow what it returns into another module"),
    ],
)
def test_what_a_helper_returns_that_cannot_be_combined_is_refused_at_its_line(tmp_path, returned, wanted):
    root = write(tmp_path, {
        "helpers.py": """\
            import tensorflow as tf


            def accuracy(label, pred):
                return tf.reduce_mean(tf.cast(tf.equal(label, tf.round(pred)), tf.float32))
            """,
        "train.py": f"""\
            import tensorflow as tf
            from tensorflow import keras

            import helpers


            class Net(keras.Model):
                def __init__(self):
                    super().__init__()
                    self.d = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
                    self.opt = keras.optimizers.Adam()

                def call(self, x, training=None):
                    return self.d(x, training=training)

                def step(self, x, label):
                    loss, acc = self.update(x, label)
                    return loss, acc

                def update(self, x, label):
                    with tf.GradientTape() as tape:
                        pred = self.d(x, training=True)
                        loss = tf.reduce_mean(tf.square(label - pred))
                    grads = tape.gradient(loss, self.d.trainable_variables)
                    self.opt.apply_gradients(zip(grads, self.d.trainable_variables))
                    return {returned}


            def train(net, ds):
                for x, y in ds:
                    loss, acc = net.step(x, y)
                print(float(loss), float(acc))


            if __name__ == "__main__":
                ds = tf.data.Dataset.from_tensor_slices((tf.random.uniform((64, 4)), tf.zeros((64, 1)))).batch(16)
                train(Net(), ds)
            """,
    })
    result = migrate(root / "train.py")
    assert result.new_text is None
    found = [f for f in result.findings if f.code == "TFD010"]
    assert found and any(wanted in f.reason for f in found), reasons(result)


def test_a_training_loop_of_another_module_given_an_object_that_trains_through_its_base_is_refused(tmp_path):
    """ls_gan.py: an LSGAN (a subclass of gan.GAN, whose helpers train) handed to gan.train():
    named at that call with the loop's and the base class's file and line, never "it does not
    train"."""
    root = project(tmp_path, "gan_helper_returns")
    result = migrate(root / "ls_gan.py")
    assert result.skipped is None and result.new_text is None
    (found,) = [f for f in result.findings if f.code == "TFD010"]
    assert found.line == 27, reasons(result)
    assert "m is given to train() of gan.py:58 on line 27" in found.reason
    assert "LSGAN's base class GAN of gan.py:19 (train_d() (line 32), train_g() (line 40), step() (line 49) train)" in found.reason


# --- a migration that would break another module of the project that imports it ---------------


def test_a_migration_that_would_break_an_importer_is_refused_naming_it(tmp_path):
    """gan_helper_returns: migrated, gan.py's train() and GAN's helpers would read the strategy
    its ``__main__`` block makes; ls_gan.py imports both and runs them without that block
    (NameError). Refused at each definition, naming ls_gan.py's use; nothing written."""
    root = project(tmp_path, "gan_helper_returns")
    result = migrate(root / "gan.py")
    assert result.new_text is None and not result.also
    found = {f.line: f.reason for f in result.findings if f.code == "TFD010" and "NameError" in (f.reason or "")}
    assert sorted(found) == [19, 58], reasons(result)
    assert found[19].startswith("no automatic fix: ls_gan.py:11 uses GAN of this module (line 19), which the migration makes read strategy (line 35)")
    assert "ls_gan.py:27 uses train() of this module (line 58)" in found[58]
    assert "gan.py makes it only when it runs as a script" in found[58]


@pytest.mark.parametrize("importer", [
    # Uses nothing the migration changes.
    "from gan import accuracy, LATENT\n\nprint(accuracy, LATENT)\n",
    # Spells the names, imports nothing of gan.py.
    "def train(GAN):\n    return GAN\n",
])
def test_an_importer_of_what_the_migration_leaves_alone_does_not_stop_it(tmp_path, importer):
    root = project(tmp_path, "gan_helper_returns")
    (root / "ls_gan.py").write_text(importer)
    result = migrate(root / "gan.py")
    assert result.new_text is not None, reasons(result)


def test_an_importer_added_later_refuses_the_migration_with_the_cache_on(tmp_path, monkeypatch, cached):
    root = project(tmp_path, "gan_helper_returns")
    importer = (root / "ls_gan.py").read_text()
    (root / "ls_gan.py").unlink()
    monkeypatch.chdir(root)

    def diff():
        result = CliRunner().invoke(main, ["migrate", "-j", "1", "gan.py"], catch_exceptions=False)
        return result.exit_code, result.stdout + result.stderr

    code, out = diff()
    assert code == 1 and "+    strategy = tf.distribute.MirroredStrategy()" in out
    assert diff() == (code, out)
    (root / "ls_gan.py").write_text(importer)
    code, out = diff()
    assert code == 1 and "+++ b/gan.py" not in out and "ls_gan.py:27 uses train()" in out



def test_what_functions_return_datasets_is_summarised():
    text = (
        "import tensorflow as tf\n"
        "import tensorflow_datasets as tfds\n\n"
        "def make(batch):\n"
        "    ds = tf.data.TFRecordDataset('f').map(parse)\n"
        "    ds = ds.shuffle(10)\n"
        "    return ds.batch(batch).prefetch(2)\n\n"
        "def pair(b):\n"
        "    return make(b), tfds.load('mnist', split='test').batch(b), 3\n\n"
        "def distributed(strategy):\n"
        "    return strategy.experimental_distribute_dataset(make(8))\n\n"
        "def handed(ds):\n"
        "    ds = ds.shuffle(3)\n"
        "    return ds\n\n"
        "def parse(record):\n"
        "    return record\n\n"
        "class Reader:\n"
        "    def dataset(self, b):\n"
        "        return tf.data.Dataset.range(8).batch(b)\n"
        "    def size(self):\n"
        "        return 8\n"
    )
    definitions = summary_of(text.encode()).definitions
    assert definitions["make"].returns_dataset and not definitions["make"].datasets_at
    assert not definitions["pair"].returns_dataset and definitions["pair"].datasets_at == (0, 1)
    assert not definitions["distributed"].returns_dataset  # it distributes what it makes
    assert not definitions["handed"].returns_dataset  # made from a parameter only: not known
    assert not definitions["parse"].returns_dataset
    assert definitions["Reader"].dataset_methods == ("dataset",)


def test_a_name_rebound_many_times_is_summarised_once_per_name():
    """``ds = ds.map(f)`` forty times over: each binding read once (it was read again for every
    read of the name, which never ended on a real model module of 40 rebindings)."""
    lines = ["import tensorflow as tf", "", "def make():", "    ds = tf.data.Dataset.range(8)"]
    lines += [f"    ds = ds.map(lambda v: v + {i})" for i in range(40)]
    lines += ["    x = ds", "    x = x.batch(2) if ds else x.repeat()", "    return ds.batch(4)", ""]
    assert summary_of("\n".join(lines).encode()).definitions["make"].returns_dataset


def test_a_trainer_with_its_own_strategy_is_judged_by_the_modules_that_use_it(tmp_path):
    """A class that makes its own strategy and feeds strategy.run what its callers hand in:
    in a project where no module uses it, or only modules that distribute nothing, no caller
    can have distributed that data with its strategy (TFD003); used by a module that
    distributes data (it may do it with ``trainer.strategy``), or in a folder that is not
    marked as a project (code autofix has not read may drive it), it is not judged."""
    trainer = (PROJECTS / "own_strategy_trainer" / "trainer.py").read_text()
    plain = "from trainer import Trainer\n\ntrainer = Trainer(make_model, 0.01)\ntrainer.fit(batches, epochs=2)\n"
    distributing = plain.replace("trainer.fit(batches", "trainer.fit(trainer.strategy.experimental_distribute_dataset(batches)")
    for caller, reported in ((None, True), (plain, True), (distributing, False)):
        root = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
        files = {".git/HEAD": "", "trainer.py": trainer}
        if caller is not None:
            files["train.py"] = caller
        write(root, files)
        result = process_path(str(root / "trainer.py"), Options(select=("TFD003",)))
        assert [f.line for f in result.findings] == ([26] if reported else [])
        if reported:
            assert "handed to fit() while the strategy is this class's own (line 9)" in result.findings[0].message
    loose = write(tmp_path / "loose", {"trainer.py": trainer})
    assert not process_path(str(loose / "trainer.py"), Options(select=("TFD003",))).findings


_REEXPORTING_LEARNER = '''\
import numpy as np
from lib import tf, tk


class Learner:
    def __init__(self, model, strategy):
        self.model = model
        self.strategy = strategy
        with strategy.scope():
            self.optimizer = tk.optimizers.Adam(1e-3)
        self.mse = tk.losses.MeanSquaredError()

    def forward(self, x, y):
        with tf.GradientTape() as tape:
            loss = self.mse(y, self.model(x))
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return loss

    @tf.function
    def learn(self, x, y):
        return self.strategy.run(self.forward, args=(x, y))
'''


def test_a_library_re_exported_by_a_project_module_is_read_as_that_library(tmp_path):
    """``from lib import tf, tk`` where the project's ``lib`` does ``import tensorflow.keras as
    tk``: ``tk.losses.MeanSquaredError()`` is Keras's loss object (a default reduction in a step
    strategy.run runs: TFD004). Where ``lib`` is not the project's, or binds ``tk`` to something
    of its own, nothing is assumed of it."""
    cases = {
        "import tensorflow as tf\nimport tensorflow.keras as tk\n": [15],
        "import tensorflow as tf\nfrom tensorflow import keras as tk\n": [15],
        "import tensorflow as tf\nfrom .inner import tk\n": [15],
        "import tensorflow as tf\n\n\nclass tk:\n    losses = None\n    optimizers = None\n": [],
        None: [],
    }
    for init, lines in cases.items():
        root = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
        files = {".git/HEAD": "", "learner.py": _REEXPORTING_LEARNER}
        if init is not None:
            files["lib/__init__.py"] = init
            files["lib/inner.py"] = "import tensorflow.keras as tk\n"
        write(root, files)
        result = process_path(str(root / "learner.py"), Options(select=("TFD004",)))
        assert [f.line for f in result.findings] == lines, init


def test_library_reexport_names_what_a_project_module_imports(tmp_path):
    from autofix.analysis.project.imports import library_reexport

    root = write(tmp_path / "p", {
        ".git/HEAD": "",
        "lib/__init__.py": "import tensorflow.keras as tk\nfrom tensorflow.keras import layers\n\n\ndef build():\n    return None\n",
        "pkg/__init__.py": "",
        "pkg/util.py": "from tensorflow.keras import layers\n",
        "pkg/train.py": "",
        "train.py": "",
    })
    importer = str(root / "train.py")
    assert library_reexport(importer, "lib.tk.losses.MeanSquaredError") == "tensorflow.keras.losses.MeanSquaredError"
    assert library_reexport(importer, "lib.layers.Dense") == "tensorflow.keras.layers.Dense"
    assert library_reexport(importer, "lib.build") is None
    assert library_reexport(importer, "tensorflow.keras.layers.Dense") is None
    assert library_reexport(importer, "missing.tk.losses") is None
    assert library_reexport(str(root / "pkg" / "train.py"), ".util.layers.Conv2D") == "tensorflow.keras.layers.Conv2D"
