"""What shows that a batch size is already the global batch, so that scaling it again would
change what a correct script computes.

Evidence is read off the value's derivation (followed through names and the arguments
helpers are called with) and off where the value goes:

- it involves the replica or device count: ``num_replicas_in_sync``, a device list's length,
  a multiplication by a count of workers, replicas, GPUs, devices or cores
  (``per_worker_batch * num_workers``), also multiplied in place (``BATCH *= n_gpus``) or
  returned by a local function (``def batch_size(): return 64 * len(gpus)``);
- a name or flag says so: a name with the word ``global`` or ``total`` in it, or a command-line
  flag whose help text says "global" or "total"; or one device's batch by its name times a
  number written by hand (``PER_GPU_BATCH * 2``: the batch of the devices counted);
- a comment on the value says it is the batch of all devices (``BATCH = 128  # double the
  batch size for the two GPUs``, on its line or in the comment block above it; read by
  :func:`.comments.meaning`, which takes "per GPU" alone as the opposite);
- it is a helper's parameter and every call whose data is trained on passes a global batch
  (a validation set the same helper makes with its default batch says nothing);
- it is not written in the file but chosen when it runs (a command-line flag, a hyperparameter
  search, a configuration, an entry point's parameter): nothing says it is per replica;
- the file writes out, as numbers, how many steps an epoch of the trained arrays takes at this
  batch (``50000/391``, ``assert steps == 391``-style arithmetic of literals: the examples
  over the steps, 391 being 50000 / 128 rounded): a step is that whole batch whatever the
  device count (:meth:`Evidence.steps_written_out`; a step count *computed* from the batch,
  ``N // BATCH``, is what per-replica code computes too and says nothing);
- the script treats it as global: it divides it by the replica count
  (``PER_REPLICA = GLOBAL // strategy.num_replicas_in_sync``) or checks that it divides evenly
  by it (``assert BATCH % strategy.num_replicas_in_sync == 0``), passes it as
  ``global_batch_size=`` (``tf.nn.compute_average_loss``), or divides a loss by it in code that
  runs on every replica (``tf.reduce_sum(per_example) / BATCH``).

A count of this machine's devices (a device list, its length, a name bound to one) is every
replica under ``MirroredStrategy`` but one worker's under ``MultiWorkerMirroredStrategy``:
``counts_local_devices_only`` tells the planner when that is all the evidence there is.

The other way round, what says a constant batch is one replica's (the planner fixes it by
default only then): a name or comment it comes through (``BATCH_SIZE_PER_REPLICA``, ``BATCH =
64  # per GPU``, also in the project module that writes it: :meth:`Evidence.said_per_replica`,
:meth:`Evidence.imported_said_per_device`), or a learning rate the file scales with the
replicas or workers (:attr:`Evidence.rate_follows_replicas`).

Evidence from names, flags and the file's words gives way to its code: a value the file
multiplies by the replica count (``GLOBAL = BATCH * strategy.num_replicas_in_sync``) is per
replica whatever it is called (``already_global(..., by_name=False)``).
"""

from __future__ import annotations

import os
import re
from functools import cached_property
from typing import Callable

import libcst as cst

from autofix.analysis.facts.dataflow import DataFlow
from autofix.analysis.facts.flags import Flags
from autofix.analysis.facts.script import Facts
from autofix.analysis.facts.sizes import Sizes
from autofix.analysis.program import Program
from autofix.analysis.project.imports import ProjectImports, program_of
from autofix.analysis.steps.custom import Steps
from autofix.analysis.syntax import argument_value, parameter_argument
from autofix.tf.symbols import IN_BATCH_OBJECTIVES, Kind

from . import comments

_DEVICE_COUNTS = frozenset(
    {
        "tensorflow.config.list_physical_devices",
        "tensorflow.config.list_logical_devices",
        "tensorflow.config.experimental.list_physical_devices",
        "tensorflow.config.experimental.list_logical_devices",
    }
)
_GLOBAL_HELP = re.compile(r"\b(global|total)\b", re.IGNORECASE)
# What a batch can be one of, by its name (``BATCH_PER_GPU``, ``BATCH_SIZE_PER_COPY``,
# ``batch_per_tower`` of TF1's multi-GPU code) and what a count can count (``NUM_TOWERS``).
_COUNTED = frozenset({"worker", "replica", "gpu", "device", "core", "tpu", "host", "node", "copy", "tower", "chip", "accelerator"})


def _singular(word: str) -> str:
    """``copies`` -> copy, ``gpus`` -> gpu."""
    return word[:-3] + "y" if word.endswith("ies") else word.rstrip("s")


def _words(name: str) -> list[str]:
    """``GLOBAL_BATCH_SIZE`` -> global, batch, size; ``numGpus`` -> num, gpus."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [w for w in spaced.lower().split("_") if w]


def per_device_name(name: str) -> bool:
    """A name for one device's batch: ``PER_GPU_BATCH``, ``batch_size_per_replica``,
    ``batch_per_device``."""
    words = _words(name)
    return any(w == "per" and i + 1 < len(words) and _singular(words[i + 1]) in _COUNTED for i, w in enumerate(words))


def _per_device_times_count(node: cst.BinaryOperation) -> bool:
    """``PER_GPU_BATCH * 2``: one device's batch, by its name, times a number written by hand
    (the devices it is meant for): the batch of all of them."""
    sides = (node.left, node.right)
    named = [s for s in sides if isinstance(s, cst.Name) and per_device_name(s.value) or isinstance(s, cst.Attribute) and per_device_name(s.attr.value)]
    counted = [s for s in sides if isinstance(s, cst.Integer) and int(s.value, 0) > 1]
    return bool(named) and bool(counted)


def _products(expr: cst.CSTNode) -> list[cst.BinaryOperation]:
    found: list[cst.BinaryOperation] = []

    class _Products(cst.CSTVisitor):
        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            if isinstance(node.operator, cst.Multiply):
                found.append(node)

    expr.visit(_Products())
    return found


def _comment_meaning(source: str, line: int) -> str | None:
    """What the comment on ``line`` of ``source`` says (:func:`comments.meaning`), or, when it
    says nothing, the comment block right above that line."""
    texts = comments.comments_by_line(source)
    found = comments.meaning(texts.get(line, ""))
    if found is None:
        above = comments.comment_lines_above(source.splitlines(), line)
        found = comments.meaning(" ".join(texts.get(n, "") for n in reversed(above)))
    return found


def _says_global(name: str) -> bool:
    return any(w in ("global", "total") for w in _words(name))


def _counts(name: str) -> bool:
    """A name for a count of workers, replicas, GPUs, devices or cores (``NUM_WORKERS``,
    ``n_gpus``, ``ngpus``, ``gpu_count``)."""
    words = _words(name)
    if "batch" in words or "size" in words:
        return False
    for word in words:
        for stem in (word, word[1:] if word.startswith("n") else "", word[3:] if word.startswith("num") else ""):
            if _singular(stem) in _COUNTED:
                return True
    return False


# The file's own words (comments, docstrings) that its batch is the global one.
_GLOBAL_TEXT = re.compile(
    r"partial batch|\bbatch(es)? (is|are|will be|gets|get) (split|divided|sharded|distributed) "
    r"(evenly )?(across|among|between|over)",
    re.IGNORECASE,
)


class Evidence:
    """Asks, for one program, whether a batch-size expression is already global."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.facts = Facts.of(program)
        # While False, a count of this machine's devices (a device list, its length, a name
        # bound to one) is not a count of replicas: see ``counts_local_devices_only``.
        self._local_counts = True

    @cached_property
    def in_batch_objective(self) -> bool:
        """Whether the file trains an in-batch objective (retrieval, contrastive), where the
        batch is part of what is trained."""
        return any(self.facts.names_of(call.func) & IN_BATCH_OBJECTIVES for call, _owner in self.facts.calls)

    @cached_property
    def text_says_global(self) -> bool:
        """Whether the file's text (comments, docstrings) says it thinks in global batches."""
        # The words are looked for in the whole text: code does not spell them.
        return bool(_GLOBAL_TEXT.search(self.program.source))

    def already_global(self, expr: cst.CSTNode, seen: dict[int, bool | None] | None = None, by_name: bool = True) -> bool:
        """Whether ``expr`` is a global batch: by its derivation (it counts replicas or
        devices, or it is divided by the replica count or given as ``global_batch_size=``
        somewhere), or, with ``by_name``, by what it or a flag it comes from is called."""
        seen = seen if seen is not None else {}
        if id(expr) in seen:
            # Known (one default read for several calls), or in a cycle, which shows nothing.
            return bool(seen[id(expr)])
        seen[id(expr)] = None
        seen[id(expr)] = found = self._already_global(expr, seen, by_name)
        return found

    def _already_global(self, expr: cst.CSTNode, seen: dict[int, bool | None], by_name: bool) -> bool:
        finder = _Finder(self)
        expr.visit(finder)
        if finder.found:
            return True
        if by_name and self.comment_says(expr) == comments.GLOBAL:
            return True
        if by_name and isinstance(expr, cst.BaseExpression) and self.chosen_at_run_time(expr) and self.run_time_said_per_replica(expr):
            return False  # chosen when it runs, as each replica's batch: what the callers pass says no more
        if by_name and any(_per_device_times_count(node) for node in _products(expr)):
            return True
        if by_name and isinstance(expr, cst.BaseExpression) and self.chosen_at_run_time(expr):
            return True
        if by_name:
            for attribute in finder.attributes:
                if _says_global(attribute.attr.value) or self._flag_says_global(attribute.attr.value):
                    return True
        for name in finder.names:
            if (by_name and _says_global(name.value)) or self._treated_as_global(name):
                return True
            if by_name and self.program.is_import(name) and self.imported_says_global(name):
                return True
            for binding in self.facts.bindings(name) or ():
                if isinstance(binding, cst.Param):
                    if self._parameter_global(binding, seen, by_name):
                        return True
                    continue
                value = self.facts.assigned_value(binding)
                if value is not None and self.already_global(value, seen, by_name):
                    return True
                if self._multiplied_in_place(binding, seen, by_name):
                    return True
        for call in finder.calls:
            if self._returns_global(call, seen, by_name):
                return True
        return False

    def steps_written_out(self, fit: cst.Call, batch: cst.BaseExpression) -> bool:
        """Whether the file writes out the steps of an epoch of the arrays ``fit`` trains on
        at ``batch``: a division of two numbers written in the code (``50000/391``, as a
        notebook shows it, or in a ``print`` or an ``assert``) whose dividend is the number of
        training examples and whose divisor is that number over the batch, rounded up or
        down. The author counted an epoch in steps of the whole batch: scaled with the
        replicas, the epoch would no longer take those steps."""
        sizes = Sizes.of(self.program)
        value = sizes.number(batch)
        data = argument_value(fit, "x", 0)
        rows = sizes.rows(data) if data is not None else None
        if not isinstance(value, int) or value <= 0 or rows is None or rows <= value:
            return False
        steps = {rows // value, -(-rows // value)}
        for node in self._written_divisions:
            if int(node.left.value, 0) == rows and int(node.right.value, 0) in steps:  # type: ignore[attr-defined]
                return True
        return False

    @cached_property
    def _written_divisions(self) -> list[cst.BinaryOperation]:
        """``a / b`` and ``a // b`` of two integers written out, where the file shows or
        checks them: a bare expression statement, a ``print``'s argument, an ``assert``."""
        found = []
        for node in _walk(self.program.module):
            if not (isinstance(node.operator, (cst.Divide, cst.FloorDivide)) and isinstance(node.left, cst.Integer) and isinstance(node.right, cst.Integer)):
                continue
            if int(node.right.value, 0) == 0:
                continue
            if self._shown_or_checked(node):
                found.append(node)
        return found

    def _shown_or_checked(self, node: cst.CSTNode) -> bool:
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, (cst.Expr, cst.Assert)):
                return True
            if isinstance(ancestor, cst.Call) and "builtins.print" in self.facts.names_of(ancestor.func):
                return True
            if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
        return False

    def counts_local_devices_only(self, expr: cst.BaseExpression, by_name: bool = True) -> bool:
        """Whether ``expr`` is a global batch only because it counts this machine's devices
        (``64 * len(tf.config.list_physical_devices("GPU"))``, ``BATCH *= len(gpus)`` with
        ``gpus`` such a list): nothing else (the replica count, a name, a flag, a comment, a
        division by the replica count) says so. Under ``MirroredStrategy`` that is every
        replica; under ``MultiWorkerMirroredStrategy`` it is one worker's share, the global
        batch being the sum over the workers."""
        if not self.already_global(expr, by_name=by_name):
            return False
        self._local_counts = False
        try:
            return not self.already_global(expr, by_name=by_name)
        finally:
            self._local_counts = True

    def local_device_count(self, expr: cst.BaseExpression, seen: set[int] | None = None) -> bool:
        """Whether ``expr`` counts this machine's devices: a device list
        (``tf.config.list_physical_devices("GPU")``), its length, or a name bound only to
        such values (``gpus = tf.config.list_logical_devices("GPU")``, ``n_gpus = len(gpus)``)."""
        seen = seen if seen is not None else set()
        if id(expr) in seen:
            return False
        seen.add(id(expr))
        if isinstance(expr, cst.Call):
            names = self.facts.names_of(expr.func)
            if names & _DEVICE_COUNTS:
                return True
            if "builtins.len" in names and expr.args:
                return self.local_device_count(expr.args[0].value, seen)
            return False
        if isinstance(expr, cst.Name):
            values = [self.facts.assigned_value(b) for b in self.facts.bindings(expr) or ()]
            return bool(values) and all(v is not None and self.local_device_count(v, seen) for v in values)
        return False

    @cached_property
    def _comments(self) -> dict[int, str]:
        return comments.comments_by_line(self.program.source)

    def comment_says(self, expr: cst.CSTNode) -> str | None:
        """What the comments on ``expr`` say it is (:func:`comments.meaning`): for a value
        assigned to a name (``BATCH = 128  # 64 per GPU x 2``), the comment on its statement's
        lines or, when that says nothing, the comment block right above it; for any other
        expression (``.batch(128)  # total batch``), the comment on its own lines."""
        if not self._comments:
            return None
        parent = self.program.parent(expr)
        statement = self.program.statement_of(expr)
        if statement is None:
            return None
        assigned = isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is expr
        where = self.program.position(statement if assigned else expr)
        said = " ".join(self._comments.get(n, "") for n in range(where.start.line, where.end.line + 1))
        found = comments.meaning(said)
        if found is None and assigned:
            lines = self.program.source.splitlines()
            above = comments.comment_lines_above(lines, where.start.line)
            found = comments.meaning(" ".join(self._comments.get(n, "") for n in reversed(above)))
        return found

    def _multiplied_in_place(self, binding: cst.CSTNode, seen: dict[int, bool | None], by_name: bool) -> bool:
        """``BATCH_SIZE *= strategy.num_replicas_in_sync`` (or ``*= n_gpus``): the name holds
        the batch times the device count from there on."""
        statement = self.program.parent(binding)
        if not (isinstance(statement, cst.AugAssign) and statement.target is binding):
            return False
        if not isinstance(statement.operator, cst.MultiplyAssign):
            return False
        return self.counts_replicas(statement.value) or self.already_global(statement.value, seen, by_name)

    def _returns_global(self, call: cst.Call, seen: dict[int, bool | None], by_name: bool) -> bool:
        """A local function whose every ``return`` gives a global batch
        (``def batch_size(): return 64 * len(tf.config.list_physical_devices("GPU"))``)."""
        function = self.facts.local_definition(call.func)
        info = self.facts.values.functions.get(function) if isinstance(function, cst.FunctionDef) else None
        returned = [r.value for r in info.returns if r.value is not None] if info is not None else []
        return bool(returned) and all(self.already_global(value, seen, by_name) for value in returned)

    def chosen_at_run_time(self, expr: cst.BaseExpression) -> bool:
        """Whether the batch is not written in this file but chosen when it runs: a
        command-line flag (``args.batch_size``, ``FLAGS.batch_size``), a hyperparameter search
        or a configuration read at run time, an environment variable, a parameter of a function
        nothing here calls, or what a method of such a parameter returns (a job's
        ``context.get_property(BATCH_SIZE)``). Whoever chooses it may mean the global batch (a paper's 4096):
        nothing here says it is per replica."""
        origins = self.facts.values.origins(expr)
        return bool(origins) and all(self._run_time(o.node, bool(o.path)) for o in origins)

    def run_time_said_per_replica(self, expr: cst.BaseExpression) -> bool:
        """Whether the code says a batch chosen at run time is one replica's: a comment on its
        use (``fit(..., batch_size=batch_size)  # per-replica batch size``), the docstring of
        the function whose parameter it is (``batch_size: batch size for training (per
        replica)``), or the help of the flag it is read from (``help="batch size per GPU"``).
        Whoever chooses it then chooses each replica's batch, which is fed unscaled."""
        if self.comment_says(expr) == comments.PER_DEVICE:
            return True
        if isinstance(expr, cst.Name):
            for binding in self.facts.bindings(expr) or ():
                if isinstance(binding, cst.Param) and _docstring_says_per_device(self.program, binding):
                    return True
        for origin in self.facts.values.origins(expr) or ():
            node = origin.node
            if isinstance(node, cst.Param) and not origin.path and _docstring_says_per_device(self.program, node):
                return True
            flag = node.attr.value if isinstance(node, cst.Attribute) else None
            if origin.path and origin.path[-1][0] in ("attr", "key"):
                flag = str(origin.path[-1][1])  # ``args.batch_size``: what parse_args() returns
            if flag is not None and comments.meaning(self._flag_help(flag)) == comments.PER_DEVICE:
                return True
        return False

    def _run_time(self, node: cst.CSTNode, projected: bool) -> bool:
        if isinstance(node, cst.Param):
            return True  # an entry point's parameter (the value flow found no caller)
        if isinstance(node, cst.Attribute) and self.facts.is_module_reference(node) and self.project_constant(node) is not None:
            return False  # ``config.BATCH_SIZE``: a number written in a module of the project
        if isinstance(node, (cst.Attribute, cst.Subscript)) and self.facts.is_module_reference(node):
            return True  # ``FLAGS.batch_size``, ``os.environ["BATCH"]``
        if isinstance(node, cst.Subscript) and self.facts.is_module_reference(node.value):
            return True
        if isinstance(node, cst.Dict) and projected:
            return True  # an item the file does not write (filled in at run time)
        if isinstance(node, cst.Call):
            names = self.facts.names_of(node.func)
            if names & {"builtins.int", "builtins.float", "builtins.round"} and node.args:
                return self.chosen_at_run_time(node.args[0].value)
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("getenv", "get") and names & {"os.getenv", "os.environ.get"}:
                return True
            if isinstance(node.func, cst.Attribute) and not self.facts.is_module_reference(node.func.value):
                # ``context.get_property(BATCH_SIZE)``, ``cfg.getint("train", "batch")``: asked of
                # an object the program is handed when it runs (an entry point's parameter).
                # Not ``self``: a method of the file's own class computes what the file writes.
                receiver = self.facts.values.origins(node.func.value)
                if receiver and all(isinstance(o.node, cst.Param) and not o.path and not self.facts.values.is_self(o.node) for o in receiver):
                    return True
            # An attribute or item of what a call made elsewhere returns: parsed arguments, a
            # configuration, a tuner's parameters.
            return projected and self.facts.local_definition(node.func) is None
        return False

    def constants_in(self, expr: cst.BaseExpression) -> tuple[tuple[str, int, str], ...]:
        """Where the numbers of other modules of the project that ``expr`` is made from are
        written (``config.BATCH_SIZE``: ``("config.py", 3, "BATCH_SIZE = 64 in config.py:3")``),
        as a finding's related places."""
        found = []
        for origin in self.facts.values.origins(expr) or ():
            node = origin.node
            if isinstance(node, cst.Attribute) and self.facts.is_module_reference(node) or isinstance(node, cst.Name) and self.program.is_import(node):
                constant = self.project_constant(node)
                if constant is not None:
                    path, line, value, name = constant
                    found.append((path, line, f"{name} = {value} in {os.path.basename(path)}:{line}"))
        return tuple(dict.fromkeys(found))

    def project_constant(self, node: cst.Attribute | cst.Name) -> tuple[str, int, int, str] | None:
        """``config.BATCH_SIZE`` where ``config`` is a module of the project that binds it
        once, at its top level, to an integer written there, with nothing on its line or
        the comment lines above it saying it is global or counted over devices: (path, line,
        value, its name there). None otherwise (a name of another module is read as it is in this file)."""
        resolved = ProjectImports.of(self.program).resolve(node)
        definition = resolved.definition if resolved is not None else None
        if resolved is None or resolved.path is None or definition is None:
            return None
        if definition.kind != "assignment" or definition.constant is None or resolved.name is None:
            return None
        if self._said_global(resolved.path, definition.name, definition.line):
            return None
        return resolved.path, definition.line, definition.constant, definition.name

    def imported_says_global(self, name: cst.Name) -> bool:
        """``from config import BATCH`` where config.py (a module of the project) calls it
        global, or says so on its line or in the comment lines above it."""
        resolved = ProjectImports.of(self.program).resolve(name)
        definition = resolved.definition if resolved is not None else None
        if resolved is None or resolved.path is None or definition is None or definition.kind != "assignment":
            return False
        return self._said_global(resolved.path, definition.name, definition.line)

    def imported_said_per_device(self, node: cst.BaseExpression) -> bool:
        """``config.BATCH_SIZE`` (or ``from config import BATCH``) where the module of the
        project that writes it calls it one device's (``BATCH_PER_GPU = 64``) or says so in
        its comment (``BATCH_SIZE = 64  # per GPU``, or the comment lines above it)."""
        if not isinstance(node, (cst.Name, cst.Attribute)):
            return False
        resolved = ProjectImports.of(self.program).resolve(node)
        definition = resolved.definition if resolved is not None else None
        if resolved is None or resolved.path is None or definition is None or definition.kind != "assignment":
            return False
        if per_device_name(definition.name):
            return True
        program = program_of(resolved.path)
        return program is not None and _comment_meaning(program.source, definition.line) == comments.PER_DEVICE

    def said_per_replica(self, value: cst.BaseExpression, operands: Callable[[cst.BaseExpression], list[cst.BaseExpression]]) -> bool:
        """Whether a name or comment the batch ``value`` comes through says it is one replica's
        (``BATCH_SIZE_PER_REPLICA``, ``per_gpu_batch``, ``BATCH = 64  # per GPU``), followed
        through the names and paths ``operands`` says it carries, their assignments and what
        the calls of a helper pass its parameter."""
        values: list[cst.CSTNode] = [value]
        seen: set[int] = set()
        while values:
            value = values.pop()  # type: ignore[assignment]
            if id(value) in seen:
                continue
            seen.add(id(value))
            if self.comment_says(value) == comments.PER_DEVICE:
                return True
            for node in operands(value) if isinstance(value, cst.BaseExpression) else ():
                name = node.value if isinstance(node, cst.Name) else node.attr.value if isinstance(node, cst.Attribute) else None
                if name is not None and per_device_name(name):
                    return True
                if self.imported_said_per_device(node):
                    return True  # config.BATCH_SIZE, written "= 64  # per GPU" in config.py
                for binding in (self.facts.bindings(node) or ()) if isinstance(node, cst.Name) else ():
                    target = binding.name if isinstance(binding, cst.Param) else None
                    if target is not None and per_device_name(target.value):
                        return True
                    assigned = None if isinstance(binding, cst.Param) else self.facts.assigned_value(binding)
                    if assigned is not None:
                        values.append(assigned)
                    elif isinstance(binding, cst.Param):
                        values.extend(self.arguments(binding))
        return False

    def arguments(self, param: cst.Param) -> list[cst.BaseExpression]:
        """What the calls of ``param``'s function pass it, then its default."""
        function = self.program.enclosing_function(param)
        found: list[cst.BaseExpression] = []
        for ref in self.facts.references(function) if function is not None else ():
            call = self.program.parent(ref)
            if isinstance(call, cst.Call) and call.func is ref:
                arg = parameter_argument(function, call, param)
                if arg is not None:
                    found.append(arg.value)
        if param.default is not None:
            found.append(param.default)
        return found

    @cached_property
    def rate_follows_replicas(self) -> bool:
        """Whether the file scales an optimizer's learning rate with the replicas or workers
        (``Adam(learning_rate=0.001 * world_size)``): it takes its global batch to be its
        constant batch times that count, so the constant is meant per replica."""
        for call, _owner in self.facts.calls:
            if self.facts.call_kind(call) is not Kind.OPTIMIZER:
                continue
            rate = argument_value(call, "learning_rate", 0) or argument_value(call, "lr")
            if rate is not None and self._times_a_count(rate, 0):
                return True
        return False

    def _times_a_count(self, expr: cst.CSTNode, depth: int) -> bool:
        """``expr`` is a product one of whose factors counts replicas, devices or workers."""
        if depth > 4:
            return False
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
            return any(self._a_count(side, depth) for side in (expr.left, expr.right)) or any(
                self._times_a_count(side, depth + 1) for side in (expr.left, expr.right)
            )
        if isinstance(expr, cst.Name):
            for binding in self.facts.bindings(expr) or ():
                value = None if isinstance(binding, cst.Param) else self.facts.assigned_value(binding)
                if value is not None and self._times_a_count(value, depth + 1):
                    return True
        return False

    def _a_count(self, expr: cst.BaseExpression, depth: int) -> bool:
        if self.counts_replicas(expr):
            return True
        if isinstance(expr, cst.Name):
            if "world" in expr.value.lower().split("_"):
                return True  # world_size: the number of workers (or replicas)
            for binding in self.facts.bindings(expr) or ():
                value = None if isinstance(binding, cst.Param) else self.facts.assigned_value(binding)
                if value is not None and depth < 4 and self._a_count(value, depth + 1):
                    return True
        return False

    def _said_global(self, path: str, name: str, line: int) -> bool:
        if _says_global(name):
            return True
        program = program_of(path)
        if program is None:
            return True  # (nothing can be said of it)
        if _GLOBAL_TEXT.search(program.source):
            return True
        # Its comment, or the comment block above it, read as in this file (a value "per GPU"
        # is per device; "for 2 GPUs", "total", "64 per GPU x 2" say it is global).
        return _comment_meaning(program.source, line) == comments.GLOBAL

    def _parameter_global(self, param: cst.Param, seen: dict[int, bool | None], by_name: bool) -> bool:
        """Every call of the parameter's function passes a global batch (or the default is)."""
        function = self.program.enclosing_function(param)
        if function is None:
            return False
        calls = [self.program.parent(r) for r in self.facts.references(function)]
        calls = [c for c in calls if isinstance(c, cst.Call)]
        # Only the calls whose data is trained on say what the training batch is: a
        # validation set made by the same helper with its default batch says nothing.
        flows = DataFlow.of(self.program)
        training = [c for c in calls if flows.flow(c).trains]
        calls = training or calls
        if not calls:
            return param.default is not None and self.already_global(param.default, seen, by_name)
        for call in calls:
            arg = parameter_argument(function, call, param)
            value = arg.value if arg is not None else param.default
            if value is None or not self.already_global(value, seen, by_name):
                return False
        return True

    def _treated_as_global(self, name: cst.Name) -> bool:
        """The value bound where ``name`` is read is divided by the replica count, or checked
        to divide evenly by it (``assert BATCH % strategy.num_replicas_in_sync == 0``), given as a
        ``global_batch_size``, or divides a loss in code that runs on every replica (``loss =
        tf.reduce_sum(per_example) / BATCH``: each replica's share of the global mean),
        somewhere in the file. Not for a file migrated from one device, where its one batch
        is both (a migration makes those uses follow the global batch)."""
        if self.program.migration is not None:
            return False
        for binding in self.facts.bindings(name) or ():
            if not isinstance(binding, cst.Name):
                continue
            for use in self.facts.uses(binding):
                parent = self.program.parent(use)
                if (
                    isinstance(parent, cst.BinaryOperation)
                    and parent.left is use
                    and isinstance(parent.operator, (cst.Divide, cst.FloorDivide, cst.Modulo))
                    and self.counts_replicas(parent.right)
                ):
                    return True
                if isinstance(parent, cst.Arg) and parent.keyword is not None and parent.keyword.value == "global_batch_size":
                    return True
                if (
                    isinstance(parent, cst.BinaryOperation)
                    and parent.right is use
                    and isinstance(parent.operator, cst.Divide)
                    and self._on_replicas(use)
                ):
                    return True
        return False

    def _on_replicas(self, node: cst.CSTNode) -> bool:
        functions = Steps.of(self.program).functions
        return any(isinstance(a, cst.FunctionDef) and a in functions for a in self.program.ancestors(node))

    def counts_devices(self, arg: cst.Arg) -> bool:
        """Whether a call's argument gives the number of devices, workers or replicas
        (``num_devices=n``, ``strategy.num_replicas_in_sync``)."""
        if arg.keyword is not None and _counts(arg.keyword.value):
            return True
        return self.counts_replicas(arg.value)

    def counts_replicas(self, expr: cst.BaseExpression) -> bool:
        finder = _Finder(self)
        expr.visit(finder)
        return finder.found or any(_counts(n.value) and not finder._local(n) for n in finder.names)

    def _flag_says_global(self, name: str) -> bool:
        """``parser.add_argument("--batch_size", help="Global batch size")`` or
        ``flags.DEFINE_integer("batch_size", 512, "Total batch size")``."""
        return bool(_GLOBAL_HELP.search(self._flag_help(name)))

    def _flag_help(self, name: str) -> str:
        """The help text of the command-line flag ``name`` declared in this file, or ""."""
        flag = Flags.of(self.program).get(name)
        return flag.help if flag is not None else ""


def _docstring_says_per_device(program, param: cst.Param) -> bool:
    """Whether the docstring of ``param``'s function documents it as one replica's or device's
    (an ``Args:`` line ``batch_size: batch size (per replica)``, ``:param batch_size: per GPU``;
    the entry's continuation lines count)."""
    function = program.enclosing_function(param)
    docstring = function.get_docstring() if function is not None else None
    if not docstring:
        return False
    name = param.name.value
    lines = docstring.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not re.match(rf"(:param\s+)?{re.escape(name)}\b\s*(\([^)]*\))?\s*:", stripped):
            continue
        indent = len(line) - len(line.lstrip())
        entry = [stripped]
        for more in lines[i + 1 :]:
            if not more.strip() or len(more) - len(more.lstrip()) <= indent:
                break
            entry.append(more.strip())
        return comments.meaning(" ".join(entry)) == comments.PER_DEVICE
    return False


class _Finder(cst.CSTVisitor):
    """Reads an expression: does it count replicas or devices, and which names and
    attributes does it read."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self.found = False
        self.names: list[cst.Name] = []
        self.attributes: list[cst.Attribute] = []
        self.calls: list[cst.Call] = []

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        if node.attr.value == "num_replicas_in_sync":
            self.found = True
        self.attributes.append(node)
        return True

    def _local(self, node: cst.BaseExpression) -> bool:
        """A count of this machine's devices, while those are not counted as replicas."""
        return not self.evidence._local_counts and self.evidence.local_device_count(node)

    def visit_Call(self, node: cst.Call) -> None:
        self.calls.append(node)
        names = self.evidence.facts.names_of(node.func)
        if names & _DEVICE_COUNTS:
            if not self._local(node):
                self.found = True
        elif "builtins.len" in names and node.args:
            counted = _Finder(self.evidence)
            node.args[0].value.visit(counted)
            if (counted.found or any(_counts(n.value) for n in counted.names)) and not self._local(node):
                self.found = True

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Multiply):
            for side in (node.left, node.right):
                if isinstance(side, cst.Name) and _counts(side.value) and not self._local(side):
                    self.found = True
                elif isinstance(side, cst.Attribute) and _counts(side.attr.value):
                    self.found = True

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append(node)


def _walk(module: cst.Module) -> list[cst.BinaryOperation]:
    found: list[cst.BinaryOperation] = []

    class _Divisions(cst.CSTVisitor):
        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            found.append(node)

    module.visit(_Divisions())
    return found
