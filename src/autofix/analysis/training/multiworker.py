"""What a script does when it runs as several workers of one ``MultiWorkerMirroredStrategy``
cluster: where such a strategy is in effect, which Keras the file uses, which code runs on the
chief only, and which paths differ from worker to worker.

What it relies on was measured with two worker processes (TF 2.21, Keras 3.15, tf_keras 2.21;
docs/multiworker.md): Keras 3's ``fit`` / ``evaluate`` / ``train_on_batch`` / ``test_on_batch``
fail there while a custom loop works; ``TF_USE_LEGACY_KERAS=1`` turns every ``tf.keras``
spelling into tf_keras (also when set in the script before ``tf.keras`` is first used) but
never ``import keras``; ``MultiWorkerMirroredStrategy`` made while ``TF_CONFIG`` is unset is a
single worker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.contexts import Contexts
from autofix.analysis.facts.script import Facts
from autofix.analysis.facts.strategies import Strategy
from autofix.analysis.program import Program
from autofix.analysis.project import pins
from autofix.analysis.syntax import attribute_path, calls_in, names_in
from autofix.analysis.training.model import TrainingModel

MULTI_WORKER = frozenset({"MultiWorkerMirroredStrategy", "CollectiveAllReduceStrategy"})
LEGACY_KERAS = "TF_USE_LEGACY_KERAS"
TF_CONFIG = "TF_CONFIG"

# How a file names Keras: ``keras`` (Keras 3 from TF 2.16 on, whatever the environment says),
# ``tf.keras`` (``tf.keras``, ``from tensorflow import keras``, ``tensorflow.keras.*``: Keras 3
# unless TF_USE_LEGACY_KERAS=1), ``tf_keras`` (Keras 2), ``other`` (TF's old internal copies).
KERAS3, TF_KERAS, KERAS2, OTHER = "keras", "tf.keras", "tf_keras", "other"

# Words that make a condition a test of which worker runs it, or a path one that differs by
# worker: the multi-worker tutorial's ``_is_chief`` / ``write_filepath`` / ``task_id == 0``.
_WORKER_WORDS = re.compile(
    r"chief|task_?(id|index|idx|type|num|number|no)|worker_?(id|index|idx|rank|num|number|no)|write_?(file)?path|"
    r"workertemp|cluster_resolver|is_primary|is_master|\brank\b|local_rank|node_?rank|process_?(index|id)|"
    r"SLURM_PROCID|SLURM_NODEID|OMPI_COMM_WORLD_RANK|PMI_RANK|"
    # ``strategy.extended.should_checkpoint``: true on the chief (or worker 0) alone.
    r"should_checkpoint|should_save_summary",
    re.IGNORECASE,
)
# The task part of TF_CONFIG: ``["task"]`` or ``.get("task", {})``.
_TASK_ITEM = re.compile(r"""\[\s*['"]task['"]\s*\]|\.get\(\s*['"]task['"]""")
# Words of a name that numbers the task (``args.task == 0``, ``worker == 0``).
_TASK_NUMBER_WORDS = frozenset({"task", "worker"})


@dataclass
class KerasUse:
    """Which Keras a file uses: the nodes spelling each kind (imports, ``tf.keras`` attributes)."""

    nodes: dict[str, list[cst.CSTNode]]
    # The file names TF_USE_LEGACY_KERAS (sets it, or says to), or its repository's way of
    # running it sets it (``pins.legacy_keras``): ``tf.keras`` may be Keras 2.
    legacy_env: bool
    # Why the file can only run on Keras 2 whatever it imports (a pin in a ``pip install``
    # line, an API only Keras 2 has: ``Facts.needs_keras2``), or None.
    keras2_only: str | None = None

    @property
    def spellings(self) -> frozenset[str]:
        return frozenset(kind for kind, nodes in self.nodes.items() if nodes)

    @property
    def keras3(self) -> bool:
        """Whether every Keras the file names is Keras 3 on TensorFlow 2.16 and later."""
        spellings = self.spellings
        if self.keras2_only is not None:
            return False
        if not spellings or not spellings <= {KERAS3, TF_KERAS}:
            return False
        return not self.legacy_env or spellings == {KERAS3}

    @property
    def keras2(self) -> bool:
        """Whether every Keras the file names is Keras 2 (tf_keras)."""
        spellings = self.spellings
        if self.keras2_only is not None and spellings and spellings <= {KERAS2, TF_KERAS}:
            return True
        return spellings == {KERAS2} or (self.legacy_env and spellings == {TF_KERAS})


class MultiWorker(Derived):
    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts = Facts.of(program)
        self.training = TrainingModel.of(program)
        self.contexts = Contexts.of(program)

    # --- where a multi-worker strategy is in effect ------------------------------------------------

    @cached_property
    def strategies(self) -> list[Strategy]:
        """The strategies that are a MultiWorkerMirroredStrategy (whichever way they are made)
        that may have two or more workers. A strategy that may also be another kind (chosen
        by a flag, a helper with a mode) is not: what runs is not known."""
        return [s for s in self.facts.strategies if s.classes and s.classes <= MULTI_WORKER and not self._single_worker(s)]

    def classes_at(self, node: cst.CSTNode) -> frozenset[str]:
        return self.training.strategies_at(node)

    def runs_multi_worker(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` runs where a multi-worker strategy of more than one worker exists,
        and no strategy of another kind does (a notebook that shows several strategies)."""
        classes = self.classes_at(node)
        return bool(self.strategies) and bool(classes) and classes <= MULTI_WORKER

    def scope_classes(self, node: cst.CSTNode, _depth: int = 0) -> frozenset[str]:
        """The strategy classes of the ``with s.scope():`` blocks ``node`` runs in (through the
        callers of its function, a few levels up)."""
        classes: set[str] = set()
        previous = node
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, cst.With) and previous is ancestor.body:
                classes |= self.facts.entered_classes(ancestor)
            elif isinstance(ancestor, cst.FunctionDef):
                if _depth < 4:
                    for ref in self.facts.references(ancestor):
                        classes |= self.scope_classes(ref, _depth + 1)
                break
            elif isinstance(ancestor, (cst.ClassDef, cst.Lambda)):
                break
            previous = ancestor
        return frozenset(classes)

    def strategy_name_at(self, node: cst.CSTNode) -> str | None:
        """The name of the one multi-worker strategy that exists whenever ``node`` runs and
        that its name means there (for generated code), or None."""
        found = []
        scope = self.program.scope(node)
        for context in self.contexts.created:
            strategy = context.strategy
            if strategy not in self.strategies or context.conflict or not self.contexts.executes_after(node, context):
                continue
            if scope is None or strategy.name not in scope:
                continue
            if {b.node for b in scope[strategy.name]} != set(strategy.bindings):
                continue
            found.append(strategy.name)
        return found[0] if len(set(found)) == 1 else None

    def _single_worker(self, strategy: Strategy) -> bool:
        """The file removes TF_CONFIG before it makes the strategy (the tutorials do, to run
        one worker in a notebook): such a strategy has one worker."""
        creations = [self.program.line(c) for c in strategy.creations]
        if not creations or strategy.is_parameter:
            return False
        first = min(creations)
        before = [(line, removes) for line, removes in self._tf_config_changes if line < first]
        return bool(before) and max(before)[1]

    @cached_property
    def _tf_config_changes(self) -> list[tuple[int, bool]]:
        """``(line, removes)`` for each statement that removes or sets TF_CONFIG in
        ``os.environ``, at module level."""
        found: list[tuple[int, bool]] = []
        for statement in self.program.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                removes = _tf_config_change(self.facts, small)
                if removes is not None:
                    found.append((self.program.line(statement), removes))
        return found

    # --- which Keras -----------------------------------------------------------------------------

    @cached_property
    def keras(self) -> KerasUse:
        nodes: dict[str, list[cst.CSTNode]] = {KERAS3: [], TF_KERAS: [], KERAS2: [], OTHER: []}
        index = self.program.index
        for node, binding in index.bindings.items():
            if binding.kind != "import" or binding.path is None:
                continue
            kind = _keras_kind(binding.path)
            if kind is not None:
                nodes[kind].append(node)
        for node, access in index.accesses.items():
            # ``tf.keras.layers.Dense``: the module is imported, Keras reached as an attribute.
            parent = index.parents.get(node)
            if not (isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value == "keras"):
                continue
            paths = {b.path for b in access.referents if b.kind == "import" and b.path}
            for path in paths:
                kind = _keras_kind(f"{path}.keras")
                if kind is not None and kind != KERAS3:
                    nodes[kind].append(parent)
        # The file names TF_USE_LEGACY_KERAS, or its repository's way of running it sets it
        # (a Dockerfile's ENV, a script's export, .env, a manifest's env: project/pins.py).
        legacy = LEGACY_KERAS in self.program.source or pins.legacy_keras(self.program.path) is not None
        return KerasUse(nodes, legacy, self.facts.needs_keras2)

    # --- which worker runs what -------------------------------------------------------------------

    def chief_only(self, node: cst.CSTNode, _depth: int = 0) -> bool:
        """Whether ``node`` runs on some workers only: under an ``if`` (or after an early
        ``return``) that tests which worker this is, or in a function only called so."""
        previous = node
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, (cst.If, cst.While)) and previous is not ancestor.test and self._splits_workers(ancestor.test):
                return True
            if isinstance(ancestor, cst.IfExp) and previous is not ancestor.test and self.mentions_worker(ancestor.test):
                return True
            if isinstance(ancestor, cst.BooleanOperation) and previous is ancestor.right and self.mentions_worker(ancestor.left):
                return True
            if isinstance(ancestor, (cst.IndentedBlock, cst.Module)) and self._returned_early(ancestor, previous):
                return True
            if isinstance(ancestor, cst.FunctionDef):
                if _depth > 4:
                    return False
                references = self.facts.references(ancestor)
                return bool(references) and all(self.chief_only(ref, _depth + 1) for ref in references)
            if isinstance(ancestor, (cst.ClassDef, cst.Lambda)):
                return False
            previous = ancestor
        return False

    def _splits_workers(self, test: cst.BaseExpression) -> bool:
        """Whether a condition that depends on which task runs it holds on some workers and not
        on others. ``task_type != "ps"`` (or ``not in ("ps", "evaluator")``) holds on every
        worker: it only leaves out the parameter servers and the evaluator."""
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            operator = target.operator
            sides = [test.left, target.comparator]
            literals = [_strings(side) for side in sides]
            others = {"ps", "evaluator"}
            for strings in literals:
                if strings and strings <= others and isinstance(operator, (cst.NotEqual, cst.IsNot, cst.NotIn)):
                    return False
        return self.mentions_worker(test)

    def _returned_early(self, block: cst.IndentedBlock | cst.Module, statement: cst.CSTNode) -> bool:
        """``if not is_chief: return`` earlier in the block of ``statement``."""
        for other in block.body:
            if other is statement:
                return False
            if isinstance(other, cst.If) and self._splits_workers(other.test) and _leaves(other.body):
                return True
        return False

    def _reads_tf_config(self, expr: cst.BaseExpression, _depth: int = 0) -> bool:
        """Whether ``expr`` reads ``TF_CONFIG`` (itself, or through the names it reads)."""
        if _depth > 4:
            return False
        if "TF_CONFIG" in self.program.module.code_for_node(expr):
            return True
        for name in names_in(expr):
            for binding in self.facts.bindings(name) or ():
                value = self.facts.assigned_value(binding)
                if value is not None and value is not expr and self._reads_tf_config(value, _depth + 1):
                    return True
        return False

    def _compares_task_number(self, expr: cst.BaseExpression) -> bool:
        """``args.task == 0``, ``worker != 0``: a value named for the task or the worker, compared
        with 0 (the chief, or worker 0 of a cluster without one)."""
        comparisons = [expr] if isinstance(expr, cst.Comparison) else []
        if isinstance(expr, cst.BooleanOperation):
            comparisons = [side for side in (expr.left, expr.right) if isinstance(side, cst.Comparison)]
        elif isinstance(expr, cst.UnaryOperation) and isinstance(expr.expression, cst.Comparison):
            comparisons = [expr.expression]
        for comparison in comparisons:
            if len(comparison.comparisons) != 1:
                continue
            target = comparison.comparisons[0]
            if not isinstance(target.operator, (cst.Equal, cst.NotEqual)):
                continue
            for side, other in ((comparison.left, target.comparator), (target.comparator, comparison.left)):
                if _is_zero(other) and _identifier_words(side) & _TASK_NUMBER_WORDS:
                    return True
        return False

    def chosen_by_worker(self, expr: cst.BaseExpression | None, _depth: int = 0) -> bool:
        """Whether the value of ``expr`` (a path) differs by worker where no name in it says
        so: a name it reads is bound under a test of which worker runs it (``if
        resolver.task_type == "chief": model_dir = os.getenv("AIP_MODEL_DIR") else: model_dir =
        tmp / "model"``), or it is made in a folder or file ``tempfile`` makes (a name no other
        process gets); followed through the names it reads, a few levels deep."""
        if expr is None or _depth > 4:
            return False
        if _per_process(self.facts, expr):
            return True
        for name in names_in(expr):
            for binding in self.facts.reaching_bindings(name) or self.facts.bindings(name) or ():
                if isinstance(binding, (cst.Param, cst.FunctionDef, cst.ClassDef)):
                    continue
                if self.chief_only(binding):
                    return True
                value = self.facts.assigned_value(binding)
                holder = self.program.parent(self.program.parent(binding))
                if value is None and isinstance(holder, cst.WithItem):
                    value = holder.item  # ``with tempfile.TemporaryDirectory() as folder``
                if value is not None and value is not expr and self.chosen_by_worker(value, _depth + 1):
                    return True
        return False

    def mentions_worker(self, expr: cst.BaseExpression | None, _depth: int = 0) -> bool:
        """Whether ``expr`` depends on which worker runs it: it names the chief, a task id or
        type, a worker index, the tutorial's ``write_filepath``... (directly, or through the
        names and local functions it reads, a few levels deep)."""
        if expr is None or _depth > 4:
            return False
        code = self.program.module.code_for_node(expr)
        if _WORKER_WORDS.search(code) or ("TF_CONFIG" in code and _TASK_ITEM.search(code)):
            return True
        if _TASK_ITEM.search(code) and self._reads_tf_config(expr):
            return True  # ``tf_config.get("task", {})`` of ``tf_config = json.loads(os.environ[...])``
        if self._compares_task_number(expr):
            return True
        for origin in self.facts.values.origins(expr):
            # ``json.loads(os.environ["TF_CONFIG"])["task"]["index"]``: the task part of
            # TF_CONFIG differs by worker (its cluster part does not).
            node = origin.node
            if ("item", "task") in origin.path and "TF_CONFIG" in self.program.module.code_for_node(node):
                return True
            if node is not expr and isinstance(node, cst.BaseExpression) and not isinstance(node, cst.Param) and _WORKER_WORDS.search(self.program.module.code_for_node(node)):
                return True
        for name in names_in(expr):
            for binding in self.facts.bindings(name) or ():
                if isinstance(binding, cst.FunctionDef):
                    body = self.program.module.code_for_node(binding)
                    if _WORKER_WORDS.search(body) or ("TF_CONFIG" in body and _TASK_ITEM.search(body)):
                        return True
                    continue
                value = self.facts.assigned_value(binding)
                if value is not None and value is not expr and self.mentions_worker(value, _depth + 1):
                    return True
        return False


# Calls that make a name no other process gets: a path in one differs by worker.
_PER_PROCESS_PATHS = frozenset(
    {"tempfile.mkdtemp", "tempfile.mkstemp", "tempfile.TemporaryDirectory", "tempfile.NamedTemporaryFile", "tempfile.TemporaryFile"}
)


def _per_process(facts, expr: cst.BaseExpression) -> bool:
    return any(facts.names_of(call.func) & _PER_PROCESS_PATHS for call in calls_in(expr))


def _identifier_words(node: cst.CSTNode) -> set[str]:
    """``args.task_index`` -> {"task", "index"}; ``worker`` -> {"worker"}."""
    if isinstance(node, cst.Attribute):
        node = node.attr
    if not isinstance(node, cst.Name):
        return set()
    return {w for w in re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", node.value).lower().split("_") if w}


def _is_zero(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Integer) and expr.evaluated_value == 0


def _keras_kind(path: str) -> str | None:
    if path in ("keras", "keras_core") or path.startswith(("keras.", "keras_core.")):
        return KERAS3
    if path == "tf_keras" or path.startswith("tf_keras."):
        return KERAS2
    if path == "tensorflow.keras" or path.startswith("tensorflow.keras."):
        return TF_KERAS
    if re.match(r"tensorflow\.(python|compat\.v[12]|contrib)\.keras(\.|$)", path):
        return OTHER
    return None


def _tf_config_change(facts: Facts, small: cst.BaseSmallStatement) -> bool | None:
    """True for ``os.environ.pop("TF_CONFIG", ...)`` / ``del os.environ["TF_CONFIG"]``, False
    for ``os.environ["TF_CONFIG"] = ...``, None for anything else."""

    def environ_key(expr: cst.BaseExpression) -> bool:
        return (
            isinstance(expr, cst.Subscript)
            and "os.environ" in facts.names_of(expr.value)
            and len(expr.slice) == 1
            and isinstance(expr.slice[0].slice, cst.Index)
            and _is_string(expr.slice[0].slice.value, TF_CONFIG)
        )

    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        call = small.value
        if (
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "pop"
            and "os.environ" in facts.names_of(call.func.value)
            and call.args
            and _is_string(call.args[0].value, TF_CONFIG)
        ):
            return True
    if isinstance(small, cst.Del) and environ_key(small.target):
        return True
    if isinstance(small, cst.Assign) and any(environ_key(t.target) for t in small.targets):
        return False
    return None


def _is_string(expr: cst.BaseExpression, text: str) -> bool:
    return isinstance(expr, cst.SimpleString) and expr.evaluated_value == text


def _leaves(block: cst.BaseSuite) -> bool:
    """Whether a block ends by leaving its function or loop (``return``, ``continue``...) or
    the program (``sys.exit()``: the rest of the file runs on the other workers only)."""
    body = block.body if isinstance(block, cst.IndentedBlock) else [block]
    last = body[-1] if body else None
    smalls = last.body if isinstance(last, cst.SimpleStatementLine) else block.body if isinstance(block, cst.SimpleStatementSuite) else ()
    for small in smalls:
        if isinstance(small, (cst.Return, cst.Continue, cst.Raise)):
            return True
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            path = attribute_path(small.value.func)
            if path in (("sys", "exit"), ("os", "_exit"), ("exit",), ("quit",)):
                return True
    return False


def _strings(expr: cst.BaseExpression) -> set[str]:
    """The strings a literal (or a tuple, list or set of them) holds; empty otherwise."""
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return {value} if isinstance(value, str) else set()
    if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
        found: set[str] = set()
        for element in expr.elements:
            inner = _strings(element.value)
            if not inner:
                return set()
            found |= inner
        return found
    return set()
