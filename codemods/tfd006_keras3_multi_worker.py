"""TFD006 keras-multi-worker-fit (unsafe): Keras 3 training under MultiWorkerMirroredStrategy.

On TensorFlow 2.16 and later, Keras 3's ``fit``, ``evaluate``, ``train_on_batch`` and
``test_on_batch`` fail under a ``MultiWorkerMirroredStrategy`` of two or more workers, on every
worker: ``ValueError: Attempt to convert a value (PerReplica:{...}) with an unsupported type``
(keras-team/keras#20585, tensorflow/tensorflow#72388). ``predict`` works, and so does a custom
training loop (``strategy.run`` in a ``tf.function``) on Keras 3; Keras 2 (tf_keras) trains
in sync. Measured with two worker processes on TF 2.21 / Keras 3.15 / tf_keras 2.21:

- ``import keras``: Keras 3, whatever ``TF_USE_LEGACY_KERAS`` says. Fails.
- ``tf.keras``, ``from tensorflow import keras``, ``tensorflow.keras.*``: Keras 3, unless
  ``TF_USE_LEGACY_KERAS=1`` (then tf_keras). Fails without it.
- ``import tf_keras``: Keras 2. Works.

So a ``fit`` (and the others) of a model that this file builds with Keras 3 spellings in the
scope of a ``MultiWorkerMirroredStrategy`` is reported, and fails ``check``: with TensorFlow 2.16
and later (Keras 3) it crashes on every worker (2.15 and older shipped Keras 2). The ways
out: tf_keras (``pip install tf-keras``, then ``import tf_keras as keras``, or
``TF_USE_LEGACY_KERAS=1`` for ``tf.keras``), or a custom training loop.

The fix (``--unsafe-fixes``) switches the whole file to Keras 2: ``import keras`` becomes
``import tf_keras as keras`` (``from keras... import`` likewise), and a file that spells
``tf.keras`` sets ``os.environ["TF_USE_LEGACY_KERAS"] = "1"`` before its first import of a module
outside the standard library (measured: every ``tf.keras`` spelling is then tf_keras). It needs
tf-keras installed, and Keras 2 is not Keras 3 (saved files, defaults): prove it with
``autofix smoke --workers 2``.

Not findings: a file whose strategy has one worker (it removes ``TF_CONFIG`` before making
it, as the tutorials' notebooks do), a strategy that may also be another kind (chosen by a flag
or a helper's mode), a model made in no scope or in another strategy's scope, a file that names
``TF_USE_LEGACY_KERAS``, or whose repository sets it where the program runs (``ENV
TF_USE_LEGACY_KERAS=1`` in a ``Dockerfile`` of the file's folder or the project's root, a
``.env`` or compose file there), and spells only ``tf.keras``, a file that uses tf_keras (alone or mixed
with Keras 3), a model built in another module whose Keras is not known (a library's, or a
function of the project that calls out of its module), ``predict``, custom training loops. A
model built by a function or model class of another module of the project that uses Keras 3
alone is reported like one built here, naming where it is built; the switch to tf_keras is then
not made (it would have to change that module too). A model made by a module the file imports
as one of its project's that autofix cannot find (``from mypkg.models import build_model``,
``mypkg`` not found from the file) is reported without a fix, naming it and saying so, where
the file names Keras 3 alone or no Keras and nothing says Keras 2 (no tf_keras, no
``TF_USE_LEGACY_KERAS``, no pin): the question does not depend on where the model is made,
only on which Keras makes it, which autofix then cannot read.

Nor is a file whose repository pins Keras 2 outside it, as it runs it: a ``requirements*.txt``
(``tensorflow==2.12``, ``tensorflow<2.16``, ``keras<3``), the dependencies of ``setup.py``,
``setup.cfg`` or ``pyproject.toml``, a conda ``environment.yml``, a Dockerfile's ``FROM
tensorflow/tensorflow:2.11.0-gpu`` or ``pip install tensorflow==2.x``, a shell script's or
Makefile's ``pip install``, or a Python older than 3.9 they run it with (``python3.7 main.py``,
``FROM python:3.8``): the nearest folder from the file's own up to the project's root whose
files pin a version decides, and nothing does when they disagree. Where a pin says Keras 3
(``tensorflow>=2.16``, ``keras>=3``), the finding names it (``requirements.txt:2``).

Not fixed (reported with the reason): a file that uses a Keras 3-only API (``keras.ops``,
``keras.random``...; the list is the measured difference of the two APIs), imports a module
that may make Keras objects of its own (``keras_cv``, a local module...), or imports Keras
inside a function.
"""

from __future__ import annotations

import os
import sys

import libcst as cst

from autofix.analysis.facts.keras_objects import COMPILE
from autofix.analysis.project import pins
from autofix.analysis.project.imports import ProjectImports, program_of
from autofix.analysis.training.multiworker import KERAS3, LEGACY_KERAS, MULTI_WORKER, TF_KERAS, MultiWorker
from autofix.analysis.syntax import argument_value
from autofix.analysis.training.model import TrainingModel
from autofix.codegen import BlockEdits, NotFound
from autofix.rule import Example, Rule
from autofix.tf.keras3_only import keras3_only
from autofix.tf.symbols import Kind

# Keras methods that fail on Keras 3 under a multi-worker strategy (measured; predict works).
FAILING = frozenset({"fit", "fit_generator", "evaluate", "evaluate_generator", "train_on_batch", "test_on_batch"})
# Modules a file may import and still be switched to tf_keras: they make no Keras objects.
_NEUTRAL = frozenset(
    {
        "tensorflow", "keras", "tf_keras", "numpy", "pandas", "scipy", "sklearn", "matplotlib",
        "seaborn", "PIL", "cv2", "absl", "tqdm", "tensorflow_datasets", "h5py", "yaml", "requests", "packaging",
    }
)
ISSUES = "keras-team/keras#20585, tensorflow/tensorflow#72388"


def message(method: str) -> str:
    return (
        f"Keras 3 {method}() fails under MultiWorkerMirroredStrategy with two or more workers "
        f"(ValueError: Attempt to convert a value (PerReplica...); {ISSUES}): use Keras 2 "
        f"(pip install tf-keras; import tf_keras as keras, or {LEGACY_KERAS}=1 for tf.keras) "
        f"or a custom training loop"
    )


class Keras3MultiWorker(Rule):
    CODE = "TFD006"
    NAME = "keras-multi-worker-fit"
    DESCRIPTION = "Keras 3 fit/evaluate under MultiWorkerMirroredStrategy, which fails (unsafe fix: switch to tf_keras)"
    SAFE = False
    # The crash is real; only the fix (a switch to Keras 2) may change what the script does.
    SUGGESTION = False
    EXAMPLES = (
        Example(
            before=(
                "import keras\n"
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = keras.Sequential([keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
            after=(
                "import tf_keras as keras\n"
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = keras.Sequential([keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
        ),
        Example(
            before=(
                "import tf_keras as keras\n"
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = keras.Sequential([keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
        ),
    )

    def applies(self) -> bool:
        return bool(MultiWorker.of(self.program).strategies)

    def check(self) -> None:
        workers = MultiWorker.of(self.program)
        self.workers = workers
        if not workers.keras.keras3 and (workers.keras.spellings or workers.keras.keras2_only is not None):
            return
        # The models made by another module of the project, by call: (path, line, message).
        self.imported: dict[cst.Call, tuple[str, int, str]] = {}
        # The imported models each failing call trains.
        self.sources: dict[cst.Call, list[tuple[str, int, str]]] = {}
        # Failing calls on a model made by a module autofix cannot read: why it is reported.
        self.unseen: dict[cst.Call, str] = {}
        sites = [call for call, _owner in self.facts.calls if self._fails(workers, call)]
        for call in [c for c in sites if c in self.unseen]:
            self.report(call, message(call.func.attr.value), self.unseen[call], self._related(call))
        sites = [c for c in sites if c not in self.unseen]
        if not sites:
            return
        try:
            plan = self._switch(workers)
        except NotFound as why:
            for call in sites:
                self.report(call, message(call.func.attr.value), str(why), self._related(call))
            return
        if any(self.suppressed(call) for call in sites):
            for call in sites:
                self.report(call, message(call.func.attr.value), "another place this fix would change is suppressed", self._related(call))
            return
        for index, call in enumerate(sites):
            self.fix(call, message(call.func.attr.value), plan if index == 0 else _nothing, self._related(call))

    def _fails(self, workers: MultiWorker, call: cst.Call) -> bool:
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in FAILING:
            return False
        if self.facts.is_module_reference(func.value) or not workers.strategies:
            return False
        training = TrainingModel.of(self.program)
        models = [m for m in training.makers(func.value) if training.is_model_maker(m)]
        if not models:
            return False
        elsewhere = [m for m in models if not self._made_here(training, m, 0)]
        if elsewhere:
            unseen = [self._unseen(workers, m) for m in elsewhere]
            if any(u is None for u in unseen):
                return False
            self.unseen[call] = (
                f"the model is made by {', '.join(dict.fromkeys(unseen))}, which autofix cannot read: made with Keras 3 "
                "(tf.keras on TensorFlow 2.16 and later, or keras), as this file's Keras is, this call fails on every "
                "worker; made with tf_keras, it trains (not fixed: which Keras makes it is not known)"
            )
        self.sources[call] = [self.imported[m] for m in models if m in self.imported]
        # The model is distributed by the strategy whose scope it is made in (a model made
        # in no scope trains under the default strategy, which works).
        classes = workers.scope_classes(call).union(*(workers.scope_classes(m) for m in models)) | training.made_under(models)
        return bool(classes) and classes <= MULTI_WORKER

    def _made_here(self, training: TrainingModel, maker: cst.Call, depth: int) -> bool:
        """Whether the model is made by this file's Keras (a Keras constructor or loader, or a
        function or class of this file that makes it so), not by code imported from elsewhere."""
        kind = self.facts.call_kind(maker)
        if isinstance(kind, cst.FunctionDef):
            returns = self.facts.functions[kind].returns
            made = [m for r in returns for m in training.makers(r.value) if training.is_model_maker(m)]
            return depth < 4 and bool(made) and all(self._made_here(training, m, depth + 1) for m in made)
        if isinstance(self.facts.local_definition(maker.func), cst.ClassDef):
            return self.workers.keras.keras3
        if isinstance(kind, Kind) and any(n.startswith("keras.") for n in self.facts.names_of(maker.func)):
            return self.workers.keras.keras3
        if self._imported_keras3(maker):
            return True
        if not self.workers.keras.keras3:
            return False
        # A model made elsewhere (``get_model()``) but compiled here with an optimizer this
        # file's Keras makes: Keras takes only its own optimizers, so it is this Keras's model.
        for call, _factory in training.method_calls_on([maker]):
            if self.facts.call_kind(call) == COMPILE:
                optimizer = argument_value(call, "optimizer", 0)
                made = training.makers(optimizer) if optimizer is not None else []
                if any(self.facts.call_kind(m) is Kind.OPTIMIZER and any(n.startswith("keras.") for n in self.facts.names_of(m.func)) for m in made):
                    return True
        return False

    def _unseen(self, workers: MultiWorker, maker: cst.Call) -> str | None:
        """``module.function()`` (``models.build_model``) when ``maker`` is made by a module
        the file imports as one of its project's that autofix cannot find, and this file names
        Keras 3 alone or no Keras (no tf_keras, no ``TF_USE_LEGACY_KERAS``, no pin or API of
        Keras 2): the question (Keras 3's
        ``fit`` under the strategy) does not depend on where the model is made, only on which
        Keras makes it, which the file's own says most likely. None otherwise."""
        keras = workers.keras
        if keras.keras2_only is not None or keras.legacy_env or not keras.spellings <= {KERAS3, TF_KERAS}:
            return None  # (no spelling at all: TensorFlow 2.16 and later run Keras 3)
        resolved = ProjectImports.of(self.program).resolve(maker.func)
        if resolved is None or resolved.path is not None or resolved.name is None:
            return None
        return f"{resolved.module}.{resolved.name}() (not found from this file)"

    def _imported_keras3(self, maker: cst.Call) -> bool:
        """A model made by a function or model class of another module of the project
        (:mod:`autofix.analysis.project`) that builds it with Keras 3 alone: the question is
        the same wherever the model is made. Not when that function calls out of its module
        (its Keras is not known), or that module's ``tf.keras`` may be Keras 2 (it, or this
        file, names TF_USE_LEGACY_KERAS)."""
        resolved = ProjectImports.of(self.program).resolve(maker.func)
        definition = resolved.definition if resolved is not None else None
        if resolved is None or resolved.path is None or definition is None or definition.calls_out:
            return False
        if not (definition.kind == "function" and definition.returns_model or definition.kind == "class" and definition.keras_model):
            return False
        program = program_of(resolved.path)
        if program is None:
            return False
        theirs = MultiWorker.of(program).keras
        if not theirs.keras3:
            return False
        mine = self.workers.keras
        if mine.legacy_env and theirs.spellings != {KERAS3}:
            return False
        shown = os.path.basename(resolved.path)
        self.imported[maker] = (resolved.path, definition.line, f"the model is built by {definition.name}{'()' if definition.kind == 'function' else ''} in {shown}:{definition.line}, with Keras 3")
        return True

    def _related(self, call: cst.Call) -> tuple[tuple[str, int, str], ...]:
        related = list(self.sources.get(call, ()))
        pin = pins.keras_pin(self.program.path)
        if pin is not None and pin.keras == 3:
            related.append((pin.path, pin.line, f"{pin.where(self.program.path)} {pin.verb} {pin.text}: Keras 3"))
        return tuple(dict.fromkeys(related))

    # --- the switch to tf_keras ------------------------------------------------------------------

    def _switch(self, workers: MultiWorker):
        """The edits that switch the whole file to Keras 2, or NotFound with why not."""
        program = self.program
        index = program.index
        for node, binding in index.bindings.items():
            if binding.kind != "import" or binding.path is None:
                continue
            top = binding.path.split(".")[0]
            if binding.path.startswith("."):  # ``from .base_model import BaseModel``
                raise NotFound("the file imports a module of its own, which may make Keras 3 objects; switch it to tf_keras too")
            if top not in _NEUTRAL and top not in sys.stdlib_module_names:
                raise NotFound(f"the file imports {top}, which may make Keras 3 objects of its own")
        for name in self._keras_names():
            if keras3_only(name):
                raise NotFound(f"{name} exists in Keras 3 only")
        imports: list[cst.CSTNode] = []
        for node in workers.keras.nodes[KERAS3]:
            statement = program.statement_of(node)
            if statement is None or program.parent(statement) is not program.module:
                raise NotFound("Keras is imported inside a function or block")
            holder = program.parent(node)
            if isinstance(holder, cst.Import) and isinstance(node, cst.ImportAlias) and isinstance(node.name, cst.Name):
                imports.append(node)
            elif isinstance(holder, cst.ImportFrom) and holder.module is not None and not holder.relative:
                module = program.module.code_for_node(holder.module)
                if ".src" in module or ".api" in module:
                    raise NotFound(f"the file imports Keras internals ({module})")
                if holder not in imports:
                    imports.append(holder)
            else:
                raise NotFound("an import of Keras autofix cannot rewrite")
        needs_env = bool(workers.keras.nodes[TF_KERAS])
        env_before = self._first_import() if needs_env else None
        if needs_env and env_before is None:
            raise NotFound("the file imports TensorFlow inside a function or block")
        os_name = self._os_before(env_before) if env_before is not None else None

        def plan(edits: BlockEdits) -> None:
            for node in imports:
                edits.replace(node, _to_tf_keras)
            if env_before is not None:
                edits.add(program.module, _insert_env(list(program.module.body).index(env_before), os_name))

        return plan

    def _keras_names(self) -> set[str]:
        """The canonical Keras names the file reads or imports."""
        found: set[str] = set()
        index = self.program.index
        for binding in index.bindings.values():
            if binding.kind == "import" and binding.path:
                found |= {n for n in self.program.qualified_names(binding.node) if n.startswith("keras.")}
                path = binding.path
                for prefix in ("tensorflow.keras.", "tf_keras."):
                    if path.startswith(prefix):
                        path = "keras." + path[len(prefix):]
                if path.startswith("keras."):
                    found.add(path)
        for node in index.accesses:
            top = node
            while True:
                parent = index.parents.get(top)
                if isinstance(parent, cst.Attribute) and parent.value is top:
                    top = parent
                else:
                    break
            if top is not node:
                found |= {n for n in self.facts.names_of(top) if n.startswith("keras.")}
        return found

    def _first_import(self) -> cst.BaseStatement | None:
        """The first module-level statement importing a module outside the standard library:
        the environment variable must be set before TensorFlow (or what uses it) is imported."""
        for statement in self.program.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.Import):
                    tops = [self.program.module.code_for_node(a.name).split(".")[0] for a in small.names]
                elif isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
                    tops = [self.program.module.code_for_node(small.module).split(".")[0]]
                else:
                    continue
                if any(top not in sys.stdlib_module_names for top in tops):
                    return statement
        return None

    def _os_before(self, statement: cst.BaseStatement) -> str | None:
        """The name ``os`` is imported under before ``statement`` (None: import it there)."""
        for node, binding in self.program.index.bindings.items():
            if binding.name == "os" and not (binding.kind == "import" and binding.path == "os"):
                raise NotFound("the name os is used for something else; set TF_USE_LEGACY_KERAS=1 by hand")
            if binding.kind == "import" and binding.path == "os" and binding.scope.kind == "module":
                bound = self.program.statement_of(node)
                if bound is not None and self.program.parent(bound) is self.program.module and self.program.line(bound) < self.program.line(statement):
                    return binding.name
        return None


def _nothing(edits: BlockEdits) -> None:
    """The file-wide switch is planned once, with the first finding."""


def _to_tf_keras(node: cst.CSTNode) -> cst.CSTNode:
    if isinstance(node, cst.ImportAlias):
        asname = node.asname or cst.AsName(name=cst.Name("keras"))
        return node.with_changes(name=cst.Name("tf_keras"), asname=asname)
    assert isinstance(node, cst.ImportFrom) and node.module is not None
    return node.with_changes(module=_renamed(node.module))


def _renamed(module: cst.Attribute | cst.Name) -> cst.Attribute | cst.Name:
    if isinstance(module, cst.Name):
        return cst.Name("tf_keras") if module.value == "keras" else module
    return module.with_changes(value=_renamed(module.value))  # type: ignore[arg-type]


def _insert_env(index: int, os_name: str | None):
    """An edit of the module's body that sets TF_USE_LEGACY_KERAS before statement ``index``
    (the body's length is the same when it runs: the rule's other edits rewrite imports in
    place)."""

    def edit(body):
        lines: list[cst.BaseStatement] = []
        name = os_name or "os"
        if os_name is None:
            lines.append(cst.parse_statement("import os\n"))
        lines.append(
            cst.parse_statement(
                f'{name}.environ["{LEGACY_KERAS}"] = "1"  # Keras 2 (tf_keras): Keras 3 cannot fit under MultiWorkerMirroredStrategy\n'
            )
        )
        first = body[index]
        lines[0] = lines[0].with_changes(leading_lines=first.leading_lines)
        body = list(body)
        body[index] = first.with_changes(leading_lines=())
        return body[:index] + lines + body[index:]

    return edit
