"""TFD012 keras-backend-not-tensorflow: Keras told to run on JAX (or another backend) in a tf.distribute scope.

Keras 3 picks its backend from ``KERAS_BACKEND`` when it is first imported. A script that sets
``os.environ["KERAS_BACKEND"] = "jax"`` before that and then builds and trains its Keras model
in a ``tf.distribute`` strategy's scope trains on one device: the strategy distributes
TensorFlow variables and functions, and Keras makes none. Measured (TF 2.21, Keras 3.15, jax
0.10.2, MirroredStrategy on 2 logical CPUs; docs/keras-versions.md, "KERAS_BACKEND"):
``tf.keras`` is then Keras 3 on JAX as well (``keras._tf_keras.keras``, backend ``jax``); the
model's variables hold ``jax`` arrays, none is a ``tf.distribute.DistributedValues``; the model
has no ``distribute_strategy``; ``keras.distribution.distribution()`` is None; and ``fit`` in the
scope ends with weights identical, byte for byte, to ``fit`` with no strategy. Nothing fails.

Reported at each ``with strategy.scope():`` that calls Keras, when the file sets
``KERAS_BACKEND`` to a literal other than ``"tensorflow"`` at module level before it first
imports Keras (``import keras``, ``from keras ...``, ``tf.keras``) or TensorFlow (``import
tensorflow`` imports Keras: set after it, the variable is not read, measured): ``os.environ[...] = ...``,
or a notebook's ``%env KERAS_BACKEND=jax`` line in a cell before. Only JAX was measured; the
other backends (``torch``, ``numpy``) are reported on the same ground, that Keras makes no
TensorFlow variables on them.

The fix (``--unsafe-fixes``: it changes the backend the whole file runs on) sets the variable to
``"tensorflow"``, so that the strategy distributes the training. The other way out, JAX's own
data parallelism (``keras.distribution.set_distribution(keras.distribution.DataParallel())``,
without the strategy), is the author's to choose.

Not fixed (reported with the reason): a backend set by a ``%env`` line (autofix leaves IPython
lines as they are), a file that imports the backend itself (``jax``,
``flax``, ``optax``, ``torch``...: its own code would then be handed TensorFlow tensors) or uses
``keras.distribution`` (JAX's distribution API).

Not findings: ``KERAS_BACKEND`` set to ``"tensorflow"``, set after Keras or TensorFlow was
imported (Keras has chosen by then), or to a value autofix cannot read; a file that uses tf_keras (Keras 2,
which runs on TensorFlow only) or names ``TF_USE_LEGACY_KERAS`` with ``tf.keras``; a scope that
calls no Keras. Not covered: a backend set in ``~/.keras/keras.json``, by the environment,
or by a ``%env`` line inside a block (a cell's ``if``).
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis import environment
from autofix.analysis.syntax import calls_in, nodes_in
from autofix.analysis.training.multiworker import KERAS2, KERAS3, TF_KERAS, MultiWorker
from autofix.codegen import NotFound
from autofix.rule import Example, Rule

BACKEND = "KERAS_BACKEND"
MESSAGE = (
    "Keras runs on {backend} here (KERAS_BACKEND, line {line}): the tf.distribute strategy does "
    "not distribute it, and training runs on one device"
)
FIX = "KERAS_BACKEND='tensorflow' (the strategy then distributes the training), or JAX's data parallelism without the strategy"
# Modules whose use means the file's own code runs on the backend it names.
_BACKEND_MODULES = ("jax", "jaxlib", "flax", "optax", "haiku", "torch", "torchvision")


class KerasBackendNotTensorflow(Rule):
    CODE = "TFD012"
    NAME = "keras-backend-not-tensorflow"
    DESCRIPTION = "Keras set to a backend other than TensorFlow (KERAS_BACKEND=jax) and trained in a tf.distribute scope, which does nothing"
    SAFE = False
    # Keras really runs on one device; only the fix (another backend) may change what runs.
    SUGGESTION = False
    EXAMPLES = (
        Example(
            before=(
                "import os\n"
                'os.environ["KERAS_BACKEND"] = "jax"\n'
                "import keras\n"
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = keras.Sequential([keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(x, y, epochs=3)\n"
            ),
            after=(
                "import os\n"
                'os.environ["KERAS_BACKEND"] = "tensorflow"\n'
                "import keras\n"
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = keras.Sequential([keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(x, y, epochs=3)\n"
            ),
        ),
        Example(
            before=(
                "import keras\n"
                "import os\n"
                "import tensorflow as tf\n"
                "\n"
                'os.environ["KERAS_BACKEND"] = "jax"  # too late: Keras is imported\n'
                "strategy = tf.distribute.MirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = keras.Sequential([keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(x, y, epochs=3)\n"
            ),
        ),
    )

    def applies(self) -> bool:
        named = BACKEND in self.program.source or any(name == BACKEND for _, name, _ in environment.current().env)
        return named and bool(self.facts.strategies)

    def check(self) -> None:
        setting = self._backend()
        if setting is None:
            return
        line, backend, value = setting
        message = MESSAGE.format(backend=backend, line=line)
        for block in nodes_in(self.program.module, cst.With):
            if not self.facts.entered_classes(block):
                continue
            if not any(self._keras(call) for call in calls_in(block.body)):
                continue
            if value is None:
                self.report(block, message, f"the backend is set by a %env line: set it to tensorflow there, or choose: {FIX}")
            else:
                self.fix(block, message, lambda edits: self._plan(edits, value))

    def _plan(self, edits, value: cst.SimpleString) -> None:
        why = self._why_not()
        if why is not None:
            raise NotFound(f"{why}; choose: {FIX}")
        quote = value.quote
        edits.replace(value, lambda node: node.with_changes(value=f"{value.prefix}{quote}tensorflow{quote}"))

    def _why_not(self) -> str | None:
        for binding in self.program.index.bindings.values():
            path = binding.path if binding.kind == "import" else None
            if path and path.split(".")[0] in _BACKEND_MODULES:
                return f"the file imports {path.split('.')[0]}, whose code would be handed TensorFlow tensors"
        for attribute in nodes_in(self.program.module, cst.Attribute):
            if any(n.startswith(("keras.distribution", "tensorflow.keras.distribution")) for n in self.facts.names_of(attribute)):
                return "the file uses keras.distribution, JAX's distribution API"
        return None

    def _keras(self, call: cst.Call) -> bool:
        return any(name.startswith(("keras.", "tensorflow.keras.")) for name in self.facts.names_of(call.func))

    def _backend(self) -> tuple[int, str, cst.SimpleString | None] | None:
        """(line, backend, the string that names it: None for a notebook's ``%env`` line) of the module-level statement that sets KERAS_BACKEND to another
        backend than TensorFlow before Keras is first imported; None otherwise."""
        keras = MultiWorker.of(self.program).keras
        spellings = keras.spellings
        if not spellings or KERAS2 in spellings or not spellings <= {KERAS3, TF_KERAS}:
            return None
        if keras.legacy_env and TF_KERAS in spellings:
            return None
        # ``import tensorflow`` imports Keras too (measured: KERAS_BACKEND set after it is not read).
        imports = [node for node, b in self.program.index.bindings.items() if b.kind == "import" and b.path and b.path.split(".")[0] == "tensorflow"]
        first_keras = min(self.program.line(node) for node in [*keras.nodes[KERAS3], *keras.nodes[TF_KERAS], *imports])
        magics = {mask: value for mask, name, value in environment.current().env if name == BACKEND}
        found = None
        for statement in self.program.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if self._sets_backend(small):
                    value = small.value  # type: ignore[attr-defined]
                    found = (self.program.line(statement), _string(value), value if isinstance(value, cst.SimpleString) else None)
                elif isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString) and small.value.evaluated_value in magics:
                    # ``%env KERAS_BACKEND=jax`` in a notebook (masked in the program).
                    found = (self.program.line(statement), magics[small.value.evaluated_value], None)
        if found is None or found[0] > first_keras or found[1] in (None, "tensorflow"):
            return None
        return found

    def _sets_backend(self, small: cst.BaseSmallStatement) -> bool:
        """Whether ``small`` is ``os.environ["KERAS_BACKEND"] = ...`` (not ``setdefault``: the
        environment may already name another backend)."""
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
            return False
        target = small.targets[0].target
        return (
            isinstance(target, cst.Subscript)
            and "os.environ" in self.facts.names_of(target.value)
            and len(target.slice) == 1
            and isinstance(target.slice[0].slice, cst.Index)
            and _string(target.slice[0].slice.value) == BACKEND
        )


def _string(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None
