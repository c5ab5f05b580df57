"""TFD007 every-worker-writes: a save that every worker of a MultiWorkerMirroredStrategy makes to
the same path.

Every worker runs the whole script, so ``model.save(path)``, ``model.save_weights(path)``,
``tf.saved_model.save(obj, path)``, ``tf.train.Checkpoint(...).save(prefix)`` / ``.write`` and
``tf.train.CheckpointManager(ckpt, directory).save()`` run once per worker, all on one path.
On a shared file system the workers race (measured with two workers in one folder: h5py's
``unable to lock file``, one worker crashed). Saving must still run on every worker (it may use
collective ops: measured, a Keras 2 ``model.save`` to SavedModel or ``.keras`` on the chief
alone gives the other workers wrong values in their next collective, or fails). The multi-worker
tutorial's pattern, which the fix writes: the chief writes the real path, every other worker a
temporary folder beside it (``workertemp_<task id>``), which it deletes right after::

    write_path = _write_path(path, strategy)
    model.save(write_path)
    if not _is_chief(strategy):
        tf.io.gfile.rmtree(os.path.dirname(write_path))

(``_is_chief`` and ``_write_path`` are generated once per file; a ``CheckpointManager`` gets
``directory=_write_path(directory, strategy)`` and its temporary folder is removed after each
``save()``.)

Not findings: saves under a test of which worker runs them (``if is_chief:``, ``task_id ==
0``, ``strategy.extended.should_checkpoint``, the task part of ``TF_CONFIG`` read with
``["task"]`` or ``.get("task", {})``, directly or through a helper, a flag or name for the task
or worker number compared with 0 such as ``args.task == 0``, an early ``return``), to a path that differs by worker (the tutorial's
``write_filepath(...)``, a path naming the task id, a path chosen by a chief test: ``if
resolver.task_type == "chief": model_dir = ... else: model_dir = <a temporary folder>``, a
path in a folder ``tempfile.mkdtemp()`` or ``TemporaryDirectory()`` makes for this process), a strategy with one worker (``TF_CONFIG``
removed before it is made), Keras callbacks (Keras 2's ``ModelCheckpoint`` and
``BackupAndRestore`` already write this way, measured; Keras 3's do not, but Keras 3 ``fit``
fails under this strategy anyway, see TFD006), and writes of other kinds (logs, plots).

Not fixed (reported with the reason): a save whose result is used (``path = ckpt.save(...)``),
a file that reads the saved path back (the other workers would find nothing there on a file
system they do not share), a save where the strategy's name is not visible, a manager made
before the strategy exists. Also reported without a fix: a Keras 2 model saved as SavedModel or
``.keras`` by the chief alone (move the save out of the chief's branch and use the pattern).
"""

from __future__ import annotations

import libcst as cst

from autofix.analysis.training.multiworker import MULTI_WORKER, MultiWorker
from autofix.analysis.syntax import argument, argument_value
from autofix.analysis.training.model import TrainingModel
from autofix.analysis.facts.strategies import may_be_none
from autofix.codegen import BlockEdits, NotFound, fresh_name, module_alias
from autofix.rule import Example, Rule

_MODEL_SAVES = frozenset({"save", "save_weights", "export"})
_CHECKPOINT_SAVES = frozenset({"save", "write"})
# Functions that save their first argument to the path in their second.
_SAVE_FUNCTIONS = frozenset({"tensorflow.saved_model.save", "keras.models.save_model", "keras.saving.save_model"})
_CHECKPOINT = "tensorflow.train.Checkpoint"
_MANAGER = "tensorflow.train.CheckpointManager"
# Calls that read a saved path back.
_READS = frozenset({"load_model", "load_weights", "restore", "latest_checkpoint", "load", "read", "restore_or_initialize", "exists"})

MESSAGE = (
    "every worker writes {what} to the same path; on a shared file system they race: let the "
    "chief write it and the other workers a temporary folder they delete (saving must still run "
    "on every worker)"
)
CHIEF_ONLY = (
    "only the chief saves this Keras 2 model as {what}, which uses collective ops: the other "
    "workers' next collective gets wrong values or fails (measured); save on every worker, the "
    "chief to the real path and the others to a temporary folder"
)

_HELPERS = '''def {is_chief}(strategy):
    """Whether this worker writes the real paths: the chief, or worker 0 of a cluster without one."""
    resolver = strategy.cluster_resolver
    if resolver is None or resolver.task_type in (None, "chief"):
        return True
    return resolver.task_type == "worker" and resolver.task_id == 0 and "chief" not in resolver.cluster_spec().as_dict()


def {write_path}(path, strategy):
    """Where this worker writes ``path``: the chief the path itself, the other workers a
    temporary folder beside it that they delete after writing (every worker must save)."""
    if {is_chief}(strategy):
        return path
    dirname, basename = {os}.path.split({os}.path.normpath(path))
    dirname = {os}.path.join(dirname, "workertemp_" + str(strategy.cluster_resolver.task_id))
    {tf}.io.gfile.makedirs(dirname)
    return {os}.path.join(dirname, basename)
'''


class EveryWorkerWrites(Rule):
    CODE = "TFD007"
    NAME = "every-worker-writes"
    DESCRIPTION = "model.save / save_weights / checkpoint saves every multi-worker worker makes to one path"
    EXAMPLES = (
        Example(
            before=(
                "import os\n"
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
                'model.save("saved/model.keras")\n'
            ),
            after=(
                "import os\n"
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
                "\n"
                "\n"
                + _HELPERS.format(is_chief="_is_chief", write_path="_write_path", os="os", tf="tf")
                + "\n"
                "\n"
                'write_path = _write_path("saved/model.keras", strategy)\n'
                "model.save(write_path)\n"
                "if not _is_chief(strategy):\n"
                "    tf.io.gfile.rmtree(os.path.dirname(write_path))\n"
            ),
        ),
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
                "if strategy.cluster_resolver.task_id == 0:\n"
                '    model.save_weights("saved/weights.h5")\n'
            ),
        ),
    )

    def applies(self) -> bool:
        return bool(MultiWorker.of(self.program).strategies)

    def check(self) -> None:
        workers = MultiWorker.of(self.program)
        self._taken = self.facts.names()
        self._helpers: dict[str, str] | None = None
        self._first: list[cst.BaseStatement] = []
        self._inserted: dict[int, list[tuple[int, int]]] = {}
        for call, _owner in self.facts.calls:
            write = self._write(call)
            if write is None or not (workers.runs_multi_worker(call) or self._saves_a_multi_worker_model(workers, call)):
                continue
            what, path, manager = write
            if workers.chief_only(call):
                self._chief_only(workers, call, what, path)
                continue
            if path is None or workers.mentions_worker(path) or workers.chosen_by_worker(path):
                continue
            self.fix(call, MESSAGE.format(what=what), lambda edits, c=call, p=path, m=manager: self._plan(edits, workers, c, p, m))
        if self._first:
            self._add_helpers()

    # --- what a call writes -----------------------------------------------------------------------

    def _write(self, call: cst.Call) -> tuple[str, cst.BaseExpression | None, cst.Call | None] | None:
        """``(what, path, manager)`` when ``call`` saves a model or a checkpoint; ``manager`` is
        the CheckpointManager construction for ``manager.save()``."""
        func = call.func
        names = self.facts.names_of(func)
        if names & _SAVE_FUNCTIONS:
            what = "a SavedModel" if "tensorflow.saved_model.save" in names else "the model"
            return what, argument_value(call, "export_dir" if "tensorflow.saved_model.save" in names else "filepath", 1), None
        if not isinstance(func, cst.Attribute) or self.facts.is_module_reference(func.value):
            return None
        method = func.attr.value
        made = self._made_by(func.value)
        if made is not None and _MANAGER in self.facts.names_of(made.func) and method == "save":
            return "checkpoints", argument_value(made, "directory", 1), made
        if made is not None and _CHECKPOINT in self.facts.names_of(made.func) and method in _CHECKPOINT_SAVES:
            return "a checkpoint", argument_value(call, "file_prefix", 0), None
        if method in _MODEL_SAVES:
            training = TrainingModel.of(self.program)
            if any(training.is_model_maker(m) for m in training.makers(func.value)):
                what = "the model's weights" if method == "save_weights" else "the model"
                return what, argument_value(call, "filepath", 0), None
        return None

    def _saves_a_multi_worker_model(self, workers: MultiWorker, call: cst.Call) -> bool:
        """Whether ``call`` saves a model that is trained under a multi-worker strategy (where
        the save runs, the workers run: a method of a trainer class, a helper)."""
        func = call.func
        saved = argument_value(call, "obj", 0) if self.facts.names_of(func) & _SAVE_FUNCTIONS else func.value if isinstance(func, cst.Attribute) else None
        if saved is None or not workers.strategies:
            return False
        training = TrainingModel.of(self.program)
        models = set(training.makers(saved))
        sites = [site for site in training.sites if site.kind == "fit" and models & set(site.members)]
        return bool(sites) and all(site.strategies and site.strategies <= MULTI_WORKER for site in sites)

    def _made_by(self, expr: cst.BaseExpression) -> cst.Call | None:
        if isinstance(expr, cst.Call):
            return expr
        if isinstance(expr, cst.Name):
            values = [self.facts.assigned_value(b) for b in self.facts.bindings(expr) or ()]
            if len(values) == 1 and isinstance(values[0], cst.Call):
                return values[0]
        return None

    def _chief_only(self, workers: MultiWorker, call: cst.Call, what: str, path: cst.BaseExpression | None) -> None:
        """A Keras 2 model saved in a format that uses collectives, by the chief alone."""
        if not workers.keras.keras2 or what not in ("the model", "a SavedModel"):
            return
        if isinstance(call.func, cst.Attribute) and call.func.attr.value != "save" and what == "the model":
            return
        text = self._literal(path)
        if text is None or text.lower().endswith((".h5", ".hdf5")):
            return
        fmt = ".keras" if text.lower().endswith(".keras") else "SavedModel"
        self.report(call, CHIEF_ONLY.format(what=fmt), "move the save out of the chief's branch and write a temporary folder on the other workers")

    def _literal(self, expr: cst.BaseExpression | None) -> str | None:
        if isinstance(expr, cst.SimpleString):
            return str(expr.evaluated_value)
        if isinstance(expr, cst.Name):
            values = [self.facts.assigned_value(b) for b in self.facts.bindings(expr) or ()]
            if len(values) == 1 and values[0] is not None:
                return self._literal(values[0])
        return None

    # --- the fix ------------------------------------------------------------------------------------

    def _plan(self, edits: BlockEdits, workers: MultiWorker, call: cst.Call, path: cst.BaseExpression, manager: cst.Call | None) -> None:
        program = self.program
        statement = _expression_statement(program, call)
        if statement is None:
            raise NotFound("its result is used; write the tutorial's pattern by hand")
        strategy = workers.strategy_name_at(call)
        tf = module_alias(program, "tensorflow")
        if strategy is None or tf is None:
            raise NotFound("the strategy (or TensorFlow) is not known by one name here")
        none = may_be_none(program, strategy, call)
        if none is not None:
            # The helpers read its cluster resolver, which neither None nor the default strategy has.
            raise NotFound(f"{strategy} may be None (line {program.line(none)}): the chief test the fix writes reads its cluster_resolver")
        if self._read_back(path, manager):
            raise NotFound("the file reads the saved path back, which workers that do not share the chief's file system would not find")
        block = program.parent(statement)
        index = list(block.body).index(statement)
        names = self._names()
        if manager is not None:
            if workers.strategy_name_at(manager) != strategy:
                raise NotFound("the CheckpointManager is made where the strategy does not exist")
            arg = argument(manager, "directory", 1)
            assert arg is not None
            directory = _template(f"{names['write_path']}(__path__, {strategy})", arg.value)
            edits.replace(arg, lambda node: node.with_changes(value=directory))
            receiver = program.module.code_for_node(call.func.value)  # type: ignore[attr-defined]
            cleanup = cst.parse_statement(f"if not {names['is_chief']}({strategy}):\n    {tf}.io.gfile.rmtree({receiver}.directory)\n")
            self._insert(edits, block, index, [], [cleanup])
            self._first.append(_top(program, program.statement_of(manager)))
        else:
            target = fresh_name(self._taken, "write_path")
            arg = next(a for a in call.args if a.value is path)
            assign = cst.SimpleStatementLine(
                [cst.Assign([cst.AssignTarget(cst.Name(target))], _template(f"{names['write_path']}(__path__, {strategy})", path))]
            )
            cleanup = cst.parse_statement(
                f"if not {names['is_chief']}({strategy}):\n    {tf}.io.gfile.rmtree({names['os']}.path.dirname({target}))\n"
            )
            edits.replace(arg, lambda node, t=target: node.with_changes(value=cst.Name(t)))
            self._insert(edits, block, index, [assign], [cleanup])
        self._first.append(_top(program, statement))

    def _insert(self, edits: BlockEdits, block, index: int, before: list, after: list) -> None:
        """Put statements before and after statement ``index`` of ``block`` (counted in the
        original tree: edits of one block run in the order planned, each shifting the next)."""
        done = self._inserted.setdefault(id(block), [])
        shift = sum(count for at, count in done if at < index)
        done.append((index, len(before) + len(after)))

        def edit(body):
            body = list(body)
            at = index + shift
            current = body[at]
            if before:
                first = before[0].with_changes(leading_lines=current.leading_lines)
                body[at] = current.with_changes(leading_lines=())
                return body[:at] + [first, *before[1:], body[at], *after] + body[at + 1 :]
            return body[: at + 1] + after + body[at + 1 :]

        edits.add(block, edit)

    def _names(self) -> dict[str, str]:
        if self._helpers is None:
            os_name = module_alias(self.program, "os")
            self._helpers = {
                "tf": module_alias(self.program, "tensorflow") or "tf",
                "is_chief": fresh_name(self._taken, "_is_chief"),
                "write_path": fresh_name(self._taken, "_write_path"),
                "os": os_name or "os",
                "import_os": "" if os_name else "yes",
            }
        return self._helpers

    def _add_helpers(self) -> None:
        """The generated functions, once, before the first top-level statement that uses them
        (and ``import os`` beside the import of TensorFlow when the file has none)."""
        program = self.program
        names = self._names()
        body = list(program.module.body)
        done = self._inserted.get(id(program.module), ())

        def shifted(index: int) -> int:
            return index + sum(count for at, count in done if at < index)

        first = shifted(min(body.index(s) for s in self._first))
        tf_import = _import_of(program, "tensorflow")
        os_at = shifted(body.index(tf_import)) if names["import_os"] and tf_import is not None else None
        helpers = list(cst.parse_module(_HELPERS.format(**names)).body)
        blank = cst.EmptyLine(indent=False)
        helpers[0] = helpers[0].with_changes(leading_lines=[blank, blank])

        def edit(statements):
            statements = list(statements)
            anchor = statements[first]
            statements[first] = anchor.with_changes(leading_lines=[blank, blank, *_comments(anchor.leading_lines)])
            statements = statements[:first] + helpers + statements[first:]
            if os_at is not None:
                statements.insert(os_at, cst.parse_statement("import os\n"))
            return statements

        edits = BlockEdits()
        edits.add(program.module, edit)
        self.edits.extend(edits)

    def _read_back(self, path: cst.BaseExpression, manager: cst.Call | None) -> bool:
        """Whether the file reads what it saves: a load of the same name or literal, or the
        manager's latest checkpoint."""
        if manager is not None:
            target = self.facts.assigned_name(manager)
            for use in self.facts.uses(target) if target is not None else ():
                parent = self.program.parent(use)
                if isinstance(parent, cst.Attribute) and parent.attr.value in ("latest_checkpoint", "restore_or_initialize", "checkpoints"):
                    return True
        key = self._key(path)
        if key is None:
            return False
        for other, _owner in self.facts.calls:
            func = other.func
            method = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
            if method not in _READS:
                continue
            if any(self._key(arg.value) == key for arg in other.args):
                return True
        return False

    def _key(self, expr: cst.BaseExpression):
        if isinstance(expr, cst.SimpleString):
            return ("text", expr.evaluated_value)
        if isinstance(expr, cst.Name):
            bindings = self.facts.bindings(expr)
            return ("name", frozenset(map(id, bindings))) if bindings else None
        return None


def _template(code: str, path: cst.BaseExpression) -> cst.BaseExpression:
    """``code`` with the original path expression where it says ``__path__``."""
    return cst.parse_expression(code).visit(_Fill(path))


class _Fill(cst.CSTTransformer):
    """Puts the original path expression where the template says ``__path__``."""

    def __init__(self, path: cst.BaseExpression) -> None:
        self.path = path

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        return self.path if original_node.value == "__path__" else updated_node


def _expression_statement(program, call: cst.Call) -> cst.SimpleStatementLine | None:
    """The statement ``call`` is, when it is a line of its own whose result is not used."""
    expr = program.parent(call)
    line = program.parent(expr) if isinstance(expr, cst.Expr) else None
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and isinstance(program.parent(line), (cst.Module, cst.IndentedBlock)):
        return line
    return None


def _top(program, statement: cst.BaseStatement) -> cst.BaseStatement:
    top = program.top_statement_in(statement, program.module)
    return top if top is not None else statement


def _import_of(program, module: str) -> cst.BaseStatement | None:
    for statement in program.module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Import) and any(program.module.code_for_node(a.name) == module for a in small.names):
                    return statement
    return None


def _comments(lines):
    return [line for line in lines if line.comment is not None]
