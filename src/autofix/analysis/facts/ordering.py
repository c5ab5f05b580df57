"""When statements of a block may change places.

Two moves are used by the rules: the strategy statement moved up (so that it exists before the
model or dataset that needs it), and a cheap Keras object (optimizer, loss, metric) moved down
to where it is first used. A move is allowed only when it cannot change what the program
computes: what the moved statement reads is not written in between, what it writes is not read
or written in between, and it never crosses a statement that must run before the TensorFlow
runtime starts: creating a strategy starts it, after which device setup fails ("RuntimeError:
Physical devices cannot be modified after being initialized"), a mixed precision policy no
longer applies to what is built, and environment variables such as CUDA_VISIBLE_DEVICES are
not read again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from autofix.analysis.program import Program
from autofix.analysis.syntax import is_wall, nodes_in

# Calls that must stay before the strategy is created (they configure the runtime, which
# creating a strategy starts), as canonical qualified-name prefixes.
_BARRIER_PREFIXES = (
    "keras.mixed_precision.set_",
    "keras.mixed_precision.experimental.set_",
    "tensorflow.debugging.set_log_device_placement",
    "tensorflow.tpu.experimental.initialize_tpu_system",
    "tensorflow.compat.v1.enable_eager_execution",
    "tensorflow.compat.v1.disable_eager_execution",
    "os.putenv",
)
_ENVIRON_WRITES = frozenset({"update", "setdefault", "pop", "clear", "__setitem__"})


# Calls that end the program (or the thread of control) where they run.
_EXITS = frozenset({"sys.exit", "os._exit", "builtins.exit", "builtins.quit", "os.abort"})


@dataclass
class StatementEffects:
    """Names a statement reads and writes (including inside nested functions, and the
    module-level names the local functions it calls read and write), whether it touches what
    must happen before the runtime starts (there or in a local function it calls), and whether
    it can leave the block early (``return``, ``raise``, ``break``, ``continue``, ``assert``,
    ``sys.exit()``)."""

    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)
    barrier: str | None = None
    # The local function through which the statement reaches the barrier, if not directly.
    barrier_via: str | None = None
    exit: str | None = None
    # A call that ends the program (``sys.exit()``), also through local functions.
    exit_call: str | None = None


class _Collect(cst.CSTVisitor):
    def __init__(self, program: Program, effects: StatementEffects, root: cst.CSTNode | None = None, seen: set | None = None) -> None:
        self.program = program
        self.effects = effects
        self.root = root
        # Local functions already looked into (calls may recurse).
        self.seen: set = seen if seen is not None else set()
        # Loops and functions entered below the statement: a ``break`` inside its own loop, a
        # ``return`` inside a function it defines, do not leave the statement's block.
        self._loops = 0
        self._functions = 0

    def visit_Name(self, node: cst.Name) -> None:
        # ``x += 1`` both reads and writes x.
        if self.program.access(node) is not None:
            self.effects.reads.add(node.value)
        if self.program.assignment(node) is not None:
            self.effects.writes.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._barrier(node)

    def visit_Call(self, node: cst.Call) -> None:
        self._barrier(node.func)
        if self._functions:
            return
        if self.effects.exit_call is None and self.program.qualified_names(node.func) & _EXITS:
            self.effects.exit_call = f"{self.program.module.code_for_node(node.func)}() (line {self.program.line(node)})"
            self.effects.exit = self.effects.exit or self.effects.exit_call
        self._callee(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.effects.writes.add(node.name.value)
        self._functions += 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._functions -= 1

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._functions += 1

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self._functions -= 1

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.effects.writes.add(node.name.value)
        self._functions += 1

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._functions -= 1

    def visit_For(self, node: cst.For) -> None:
        self._loops += 1

    def leave_For(self, original_node: cst.For) -> None:
        self._loops -= 1

    def visit_While(self, node: cst.While) -> None:
        self._loops += 1

    def leave_While(self, original_node: cst.While) -> None:
        self._loops -= 1

    def visit_Return(self, node: cst.Return) -> None:
        self._leaves(node, "a return")

    def visit_Raise(self, node: cst.Raise) -> None:
        self._leaves(node, "a raise")

    def visit_Assert(self, node: cst.Assert) -> None:
        self._leaves(node, "an assert")

    def visit_Break(self, node: cst.Break) -> None:
        if not self._loops:
            self._leaves(node, "a break")

    def visit_Continue(self, node: cst.Continue) -> None:
        if not self._loops:
            self._leaves(node, "a continue")

    def _leaves(self, node: cst.CSTNode, what: str) -> None:
        if not self._functions and self.effects.exit is None:
            self.effects.exit = f"{what} (line {self.program.line(node)})"

    def _callee(self, call: cst.Call) -> None:
        """What a local function the statement calls does: its device setup is a barrier,
        its ``sys.exit()`` an exit, the module-level names it reads and writes are read and
        written by the call."""
        from autofix.analysis.facts.script import Facts

        function = Facts.of(self.program).local_definition(call.func)
        if not isinstance(function, cst.FunctionDef) or function in self.seen:
            return
        self.seen.add(function)
        inner = StatementEffects()
        collector = _Collect(self.program, inner, function, self.seen)
        function.body.visit(collector)
        if self.effects.barrier is None and inner.barrier is not None:
            self.effects.barrier = inner.barrier
            self.effects.barrier_via = function.name.value
        if self.effects.exit_call is None and inner.exit_call is not None:
            # (A ``return`` or ``raise`` in the function does not leave the caller's block by
            # itself; ending the program does.)
            self.effects.exit_call = f"{function.name.value}(), which calls {inner.exit_call}"
            self.effects.exit = self.effects.exit or self.effects.exit_call
        outer = _outer_names(self.program, function)
        self.effects.reads |= inner.reads & outer
        self.effects.writes |= inner.writes & outer

    def _barrier(self, expr: cst.BaseExpression) -> None:
        if self.effects.barrier is not None:
            return
        for name in self.program.qualified_names(expr):
            if (
                name.startswith(_BARRIER_PREFIXES)
                or _configures_runtime(name)
                or (name == "os.environ" and self._writes_environ(expr))
            ):
                self.effects.barrier = name
                return

    def _writes_environ(self, expr: cst.BaseExpression) -> bool:
        """``os.environ[k] = v``, ``del os.environ[k]``, ``os.environ.update(...)``: a
        variable such as CUDA_VISIBLE_DEVICES or TF_CONFIG that the strategy reads."""
        parent = self.program.parent(expr)
        if isinstance(parent, cst.Subscript) and parent.value is expr:
            return isinstance(self.program.parent(parent), (cst.AssignTarget, cst.Del, cst.AugAssign))
        if isinstance(parent, cst.Attribute) and parent.value is expr:
            return parent.attr.value in _ENVIRON_WRITES
        return False


def _outer_names(program: Program, function: cst.FunctionDef) -> set[str]:
    """The names ``function`` reads or writes that are not its own locals (module-level
    names, ``global`` ones)."""
    found: set[str] = set()
    for name in nodes_in(function.body, cst.Name):
        access = program.access(name)
        bindings = access.referents if access is not None else []
        assignment = program.assignment(name)
        if assignment is not None:
            bindings = [*bindings, assignment]
        if any(b.scope.node is not function and b.kind != "builtin" for b in bindings):
            found.add(name.value)
    return found


def _configures_runtime(name: str) -> bool:
    """``tf.config`` calls that change the runtime (``set_memory_growth``,
    ``set_visible_devices``, ``experimental_connect_to_cluster``...); reading it is harmless."""
    if not name.startswith("tensorflow.config."):
        return False
    last = name.rpartition(".")[2]
    return last.startswith(("set_", "enable_", "disable_", "experimental_connect_to"))


def effects_of(program: Program, statement: cst.CSTNode) -> StatementEffects:
    effects = StatementEffects()
    statement.visit(_Collect(program, effects))
    if isinstance(statement, (cst.Import, cst.ImportFrom, cst.SimpleStatementLine)):
        for small in getattr(statement, "body", [statement]):
            if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
                for alias in small.names:
                    bound = alias.asname.name if alias.asname else alias.name
                    while isinstance(bound, cst.Attribute):
                        bound = bound.value
                    if isinstance(bound, cst.Name):
                        effects.writes.add(bound.value)
    return effects


def why_not_move_up(program: Program, body: list[cst.BaseStatement], source: int, dest: int) -> str | None:
    """Why ``body[source]`` cannot be moved up to index ``dest`` (before ``body[dest]``), or None."""
    moved = effects_of(program, body[source])
    if moved.barrier:
        return None if dest == source else _passing(moved.barrier)
    if moved.exit and dest != source:
        return f"it can leave the block ({moved.exit})"
    for index in range(dest, source):
        if is_wall(body[index]):
            return f"it would move into another notebook cell (above line {program.line(body[index + 1])})"
        between = effects_of(program, body[index])
        if between.exit:
            return f"it would move above {between.exit}, which may leave before it runs"
        if between.barrier:
            return f"it would move above {_barrier(between)} (line {program.line(body[index])}), which must run before the strategy is created"
        if moved.reads & between.writes:
            name = sorted(moved.reads & between.writes)[0]
            return f"it uses {name!r}, which is only set on line {program.line(body[index])}"
        if moved.writes & (between.reads | between.writes):
            name = sorted(moved.writes & (between.reads | between.writes))[0]
            return f"{name!r} is used on line {program.line(body[index])} before the strategy is created"
    return None


def why_not_move_down(program: Program, body: list[cst.BaseStatement], source: int, dest: int) -> str | None:
    """Why ``body[source]`` cannot be moved down to just before ``body[dest]``, or None."""
    moved = effects_of(program, body[source])
    if moved.barrier:
        return _passing(moved.barrier)
    if moved.exit:
        return f"it can leave the block ({moved.exit})"
    for index in range(source + 1, dest):
        if is_wall(body[index]):
            return "it would move into another notebook cell"
        between = effects_of(program, body[index])
        if between.exit:
            return f"it would move below {between.exit}, which may leave before it runs"
        if between.barrier:
            return f"it would move below {_barrier(between)} (line {program.line(body[index])})"
        if moved.reads & between.writes:
            return "what it is made from changes before it is used"
        if moved.writes & (between.reads | between.writes):
            return "it is used before the strategy is created"
    return None


def _passing(barrier: str) -> str:
    return f"it calls {_describe(barrier)}"


def _barrier(effects: StatementEffects) -> str:
    described = _describe(effects.barrier or "")
    return f"{effects.barrier_via}(), which calls {described}" if effects.barrier_via else described


def _describe(barrier: str) -> str:
    if barrier == "os.environ":
        return "the change to os.environ"
    return barrier.replace("tensorflow.", "tf.") + "()"
