"""TFD011 multi-worker-strategy-late: a MultiWorkerMirroredStrategy made too late to join its cluster.

``MultiWorkerMirroredStrategy()`` reads ``TF_CONFIG`` and configures TensorFlow's collective ops
when it is made, and that must happen before the TensorFlow runtime starts. Measured with two
worker processes on loopback ports (TF 2.21; docs/multiworker.md, "When the strategy is made"):

- made after the script ran TensorFlow ops (``tf.constant``, a ``tf.Variable``, a ``tf.data``
  dataset, a Keras model or optimizer, ``tf.config.list_logical_devices()``): every worker
  fails there, ``RuntimeError: Collective ops must be configured at program startup``;
- made before the script sets ``os.environ["TF_CONFIG"]``: no error, but each worker is a
  cluster of one (``num_replicas_in_sync`` 1; an all-reduce of ``index + 1`` gives 1.0 and 2.0
  instead of 3.0 on both): every worker trains alone, on its own copy of the model.

The fix moves the statement that makes the strategy: up, to just before the first statement of
its block that runs TensorFlow ops, or down, to just after the statement that sets
``TF_CONFIG``. It moves only when the move changes nothing else: it crosses no statement that
may leave the block (``return``, ``raise``, ``sys.exit()``...), no device setup
(``tf.config.set_visible_devices``...) nor any other change to ``os.environ``, nothing that
reads or writes a name the statement reads or writes; moved down, it crosses no statement
that runs ops either (which would make it too late again).

Ops run before the strategy's block (before the ``if __name__ == "__main__":`` it is in, or
before the module-level call of the one function that makes it) are reported without a fix.

A file may hold several programs one after another (a bug report that repeats the tutorial
three times, a guide that shows each strategy in turn); each strategy is judged with its own
program. A ``TF_CONFIG`` set after a multi-worker strategy is not what that strategy waits for
when another multi-worker strategy is made after it (before ``TF_CONFIG`` is set again): it is
that strategy's setup; nor, at module level, when nothing after it uses the strategy or what was
made with it. The ops counted before a strategy leave out those of an earlier program: all
that ran after an earlier multi-worker strategy of the block (it configured the collective ops,
and a second strategy does not fail on them, measured) up to a ``TF_CONFIG`` set after it, which
starts the next program; and at module level the section of a strategy of another kind (from it
to the last statement that uses what it made).

Not findings: a strategy whose ``TF_CONFIG`` the script removes first (one worker, as the
tutorials' notebooks do), a ``TF_CONFIG`` set in another block than the strategy's, ops in a
function called from several places or from another function, calls that do not start the runtime (measured:
``tf.config.list_physical_devices``, ``tf.config.set_visible_devices``, ``tf.random.set_seed``,
``keras.utils.set_random_seed``, ``tf.data.Options()``, a mixed precision policy, an unbuilt
Keras layer, ``tf.test.is_gpu_available()``, ``tf.function(f)`` not called), and calls autofix
does not know to start it (only those measured, and their kin, count).

Not fixed (reported with the reason): a move that would cross any of the above, ops that run
outside the block that makes the strategy.
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts.ordering import effects_of, why_not_move_down, why_not_move_up
from autofix.analysis.syntax import is_wall
from autofix.analysis.training.multiworker import MULTI_WORKER, MultiWorker, _tf_config_change
from autofix.codegen import NotFound, reordered
from autofix.rule import Example, Rule
from autofix.tf.input_shapes import gives_input_shape

# Calls that start TensorFlow's runtime (measured on TF 2.21 in a fresh process, one call each,
# with fixtures/multiworker/measure/starts_runtime.py: after them the eager context exists, and a
# MultiWorkerMirroredStrategy can no longer configure collectives). Canonical qualified names;
# the Keras ones under ``keras.``, ``tensorflow.keras.`` and ``tf_keras.``. The file-reading
# datasets and the loaders are the ``tf.data.Dataset`` constructors' kin (not measured one by one).
_STARTS = frozenset(
    {
        "tensorflow.constant", "tensorflow.Variable", "tensorflow.convert_to_tensor",
        "tensorflow.config.list_logical_devices", "tensorflow.config.experimental.list_logical_devices",
        "tensorflow.distribute.MirroredStrategy", "tensorflow.distribute.OneDeviceStrategy",
        "tensorflow.summary.create_file_writer",
        "tensorflow.data.TFRecordDataset", "tensorflow.data.TextLineDataset", "tensorflow.data.FixedLengthRecordDataset",
        # TensorFlow Datasets' loader returns tf.data datasets (a loader: kin of their constructors).
        "tensorflow_datasets.load",
    }
)
_STARTS_PREFIXES = ("tensorflow.data.Dataset.",)
_KERAS_STARTS = frozenset(
    {
        "models.load_model",
        # Keras's dataset utilities make tf.data datasets (measured: the three first; the audio
        # one is their kin, and ``preprocessing.`` is their older home).
        "utils.image_dataset_from_directory", "utils.text_dataset_from_directory", "utils.timeseries_dataset_from_array",
        "utils.audio_dataset_from_directory",
        "preprocessing.image_dataset_from_directory", "preprocessing.text_dataset_from_directory",
        "preprocessing.timeseries_dataset_from_array",
    }
)
# A model starts it once it has variables: a Sequential given its input shape (an ``Input``
# first, or ``input_shape=``), a functional Model (its layers were called on an Input before).
# ``keras.Input`` alone, an unbuilt Sequential or layer: not (measured).
_KERAS_MODELS = frozenset({"Sequential", "models.Sequential", "Model", "models.Model"})
_KERAS_STARTS_PREFIXES = ("optimizers.", "applications.")
_KERAS_ROOTS = ("keras.", "tensorflow.keras.", "tf_keras.")

AFTER_OPS = (
    "MultiWorkerMirroredStrategy made after TensorFlow ran ops ({what}, line {line}): every worker "
    "fails here with RuntimeError: Collective ops must be configured at program startup; make the "
    "strategy before the first op"
)
BEFORE_CONFIG = (
    "MultiWorkerMirroredStrategy made before TF_CONFIG is set (line {line}): it reads TF_CONFIG "
    "when it is made, so each worker runs as a cluster of one and trains alone; make the strategy "
    "after TF_CONFIG is set"
)


def _keras_name(name: str) -> str | None:
    """``Sequential`` for ``keras.Sequential`` / ``tensorflow.keras.Sequential``..., else None."""
    for root in _KERAS_ROOTS:
        if name.startswith(root):
            return name[len(root):]
    return None


def starts_runtime(names: frozenset[str], call: cst.Call | None = None, names_of=None) -> bool:
    for name in names:
        if name in _STARTS or name.startswith(_STARTS_PREFIXES):
            return True
        rest = _keras_name(name)
        if rest is None:
            continue
        if rest in _KERAS_STARTS or rest.startswith(_KERAS_STARTS_PREFIXES):
            return True
        if rest in _KERAS_MODELS and call is not None and names_of is not None and _built(rest, call, names_of):
            return True
    return False


def _built(model: str, call: cst.Call, names_of) -> bool:
    """Whether a Keras model call makes a model with variables."""
    if model.endswith("Model"):
        return bool(call.args)
    layers = call.args[0].value if call.args and call.args[0].keyword is None else None
    if not isinstance(layers, (cst.List, cst.Tuple)):
        return False
    for element in layers.elements:
        layer = element.value
        if not isinstance(layer, cst.Call):
            continue
        # (Read as Keras 3 reads it: an Embedding's input_dim is no input shape there.)
        if gives_input_shape([n for n in names_of(layer.func) if _keras_name(n)], layer):
            return True
    return False


class MultiWorkerStrategyLate(Rule):
    CODE = "TFD011"
    NAME = "multi-worker-strategy-late"
    DESCRIPTION = "MultiWorkerMirroredStrategy made after TensorFlow ran ops, or before the script sets TF_CONFIG"
    EXAMPLES = (
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)\n"
                "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
            after=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
                "dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
        ),
        Example(
            before=(
                "import json, os\n"
                "import tensorflow as tf\n"
                "\n"
                'os.environ["TF_CONFIG"] = json.dumps(config)\n'
                "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
                "dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(64)\n"
            ),
        ),
    )

    def applies(self) -> bool:
        return bool(MultiWorker.of(self.program).strategies)

    def check(self) -> None:
        seen: set[int] = set()
        for strategy in MultiWorker.of(self.program).strategies:
            for call in strategy.constructions:
                if id(call) in seen or not (self._class_names(call) & MULTI_WORKER):
                    continue
                seen.add(id(call))
                self._construction(call)

    def _class_names(self, call: cst.Call) -> set[str]:
        return {name.rpartition(".")[2] for name in self.facts.names_of(call.func) if name.startswith("tensorflow.distribute.")}

    def _construction(self, call: cst.Call) -> None:
        statement = self.program.statement_of(call)
        block = self.program.block_of(statement) if statement is not None else None
        if statement is None or block is None:
            return
        body = list(block.body)
        source = next(i for i, s in enumerate(body) if s is statement)
        start = self._program_start(block, body, source)
        first = self._first_op(body[start:source])
        if first is not None:
            index, op = first
            index += start
            what = self.program.module.code_for_node(op.func) + "()"
            message = AFTER_OPS.format(what=what, line=self.program.line(op))
            self.fix(call, message, lambda edits: self._move(edits, block, body, source, index, up=True))
            return
        outer = self._op_before_block(statement)
        if outer is not None:
            what = self.program.module.code_for_node(outer.func) + "()"
            message = AFTER_OPS.format(what=what, line=self.program.line(outer))
            self.report(call, message, f"the op runs outside the block that makes the strategy (line {self.program.line(outer)}): make the strategy before it by hand")
            return
        later = self._strategies_in(body)[0]
        for index in range(source + 1, len(body)):
            if is_wall(body[index]) or index in later:
                # A later multi-worker strategy: what follows is its program's setup.
                break
            if self._sets_tf_config(body[index]):
                if self._sets_up_next(body, index, later) or (block is self.program.module and self._section_end(body, source, len(body)) < index):
                    # Another program's setup, or nothing after it in the file uses the
                    # strategy (nor what was made with it): not what the strategy waits for.
                    break
                message = BEFORE_CONFIG.format(line=self.program.line(body[index]))
                self.fix(call, message, lambda edits, i=index: self._move(edits, block, body, source, i, up=False))
                return

    # --- a file of several programs --------------------------------------------------------------

    def _strategies_in(self, body: list[cst.BaseStatement]) -> tuple[set[int], set[int]]:
        """The indexes of the statements of ``body`` that make a multi-worker strategy, and of
        those that make a strategy of another kind (outside the functions they define)."""
        multi: set[int] = set()
        other: set[int] = set()
        for index, statement in enumerate(body):
            finder = _Calls()
            statement.visit(finder)
            for call in finder.calls:
                classes = self._class_names(call)
                if classes & MULTI_WORKER:
                    multi.add(index)
                elif any(name.endswith("Strategy") for name in classes):
                    other.add(index)
        return multi, other

    def _program_start(self, block, body: list[cst.BaseStatement], source: int) -> int:
        """The index of the first statement of ``body`` whose ops count against the strategy
        made at ``source``, when the file holds several programs one after another (a
        reproducer that repeats a tutorial, a guide that shows each strategy in turn):

        - after an earlier multi-worker strategy of the block, none: it configured the
          collective ops, and a second one does not fail on what ran since (measured:
          fixtures/multiworker/measure/second_strategy.py); the ops before it are its own
          finding;
        - unless TF_CONFIG is set after it: that starts the next program, whose ops are those
          after the write;
        - at module level, not those of the section of a strategy of another kind (a guide's
          ``MirroredStrategy`` section): the statements from it to the last one that uses
          what the section made (its strategy, the model built in its scope, that model's
          ``fit``...)."""
        multi, other = self._strategies_in(body[:source])
        if block is not self.program.module:
            other = set()
        first = min(multi | other, default=source)
        writes = [i for i in range(first + 1, source) if self._sets_tf_config(body[i])]
        start = max(writes, default=0)
        if multi and max(multi) > start:
            start = source
        for index in other:
            start = max(start, self._section_end(body, index, source) + 1)
        return start

    def _section_end(self, body: list[cst.BaseStatement], first: int, stop: int) -> int:
        """The last statement before ``stop`` that uses what ``body[first]`` made, directly or
        through what the statements using it made (a name bound again in between is not)."""
        live = set(effects_of(self.program, body[first]).writes)
        end = first
        for index in range(first + 1, stop):
            effects = effects_of(self.program, body[index])
            if effects.reads & live:
                live |= effects.writes
                end = index
            else:
                live -= effects.writes
        return end

    def _sets_up_next(self, body: list[cst.BaseStatement], index: int, multi: set[int]) -> bool:
        """Whether the TF_CONFIG set at ``index`` is the setup of a later multi-worker strategy:
        one is made after it before TF_CONFIG is set again. A strategy reads TF_CONFIG once,
        when it is made: that write starts another program, not the one of a strategy made
        before it."""
        for later in range(index + 1, len(body)):
            if later in multi:
                return True
            if self._sets_tf_config(body[later]):
                return False
        return False

    # --- what runs before ------------------------------------------------------------------------

    def _first_op(self, statements: list[cst.BaseStatement]) -> tuple[int, cst.Call] | None:
        for index, statement in enumerate(statements):
            call = self._op_in(statement, 0)
            if call is not None:
                return index, call
        return None

    def _op_before_block(self, statement: cst.BaseStatement) -> cst.Call | None:
        """The first call that starts the runtime before ``statement``'s block runs: in the
        blocks around it (before the ``if``, ``with``, ``try`` it is in), and for a function's
        body, before the one module-level statement that calls the function."""
        current: cst.CSTNode = statement
        for _ in range(8):
            owner = self._owner(current)
            if owner is None:
                return None
            if isinstance(owner, cst.FunctionDef):
                calls = [r for r in self.facts.references(owner) if isinstance(self.program.parent(r), cst.Call)]
                if len(calls) != 1 or self.program.enclosing_function(calls[0]) is not None:
                    return None
                owner = self.program.statement_of(calls[0])
                if owner is None:
                    return None
                # The calling statement itself may run ops before the call (its arguments).
            elif isinstance(owner, cst.ClassDef):
                return None
            outer = self.program.block_of(owner)
            if outer is None:
                return None
            statements = list(outer.body)
            index = next(i for i, s in enumerate(statements) if s is owner)
            start = self._program_start(outer, statements, index)
            first = self._first_op(statements[start:index])
            if first is not None:
                return first[1]
            current = owner
        return None

    def _owner(self, statement: cst.CSTNode) -> cst.BaseStatement | None:
        """The compound statement (or function) whose block holds ``statement``."""
        for ancestor in self.program.ancestors(statement):
            if isinstance(ancestor, cst.BaseCompoundStatement):
                return ancestor
        return None

    def _op_in(self, node: cst.CSTNode, depth: int) -> cst.Call | None:
        """The first call in ``node`` (outside the functions and classes it defines, through
        the local functions it calls) that starts TensorFlow's runtime."""
        finder = _Calls()
        node.visit(finder)
        for call in finder.calls:
            if starts_runtime(self.facts.names_of(call.func), call, self.facts.names_of):
                return call
            if depth < 3:
                function = self.facts.local_definition(call.func)
                if isinstance(function, cst.FunctionDef) and self._op_in(function.body, depth + 1) is not None:
                    return call
        return None

    def _sets_tf_config(self, statement: cst.BaseStatement) -> bool:
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        return any(_tf_config_change(self.facts, small) is False for small in statement.body)

    # --- the fix ---------------------------------------------------------------------------------

    def _move(self, edits, block, body: list[cst.BaseStatement], source: int, target: int, up: bool) -> None:
        statement = body[source]
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            raise NotFound("the strategy is not made by a statement of its own")
        if up:
            why = why_not_move_up(self.program, body, source, target)
            if why is not None:
                raise NotFound(f"the strategy cannot move before line {self.program.line(body[target])}: {why}")
            order = [*range(target), source, *(i for i in range(target, len(body)) if i != source)]
            edits.add(block, lambda current: reordered(current, order, up=(source,)))
            return
        # Down: to just after the statement that sets TF_CONFIG (at ``target``).
        why = why_not_move_down(self.program, body, source, target)
        if why is None:
            moved = effects_of(self.program, statement)
            setter = effects_of(self.program, body[target])
            if setter.exit:
                why = f"it would move below {setter.exit}"
            elif moved.writes & (setter.reads | setter.writes) or moved.reads & setter.writes:
                why = "the statement that sets TF_CONFIG uses what it makes"
        if why is None:
            for index in range(source + 1, target + 1):
                if self._op_in(body[index], 0) is not None:
                    why = f"line {self.program.line(body[index])} runs TensorFlow ops, after which the strategy fails"
                    break
        if why is not None:
            raise NotFound(f"the strategy cannot move after line {self.program.line(body[target])}: {why}")
        order = [*(i for i in range(target + 1) if i != source), source, *range(target + 1, len(body))]
        edits.add(block, lambda current: reordered(current, order, down=(source,)))


class _Calls(cst.CSTVisitor):
    """The calls a statement makes when it runs, in order (not those in the functions, lambdas
    and classes it defines)."""

    def __init__(self) -> None:
        self.calls: list[cst.Call] = []

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False
