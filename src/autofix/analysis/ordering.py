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
from autofix.analysis.syntax import is_wall

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


@dataclass
class StatementEffects:
    """Names a statement reads and writes (including inside nested functions), and whether
    it touches what must happen before the runtime starts."""

    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)
    barrier: str | None = None


class _Collect(cst.CSTVisitor):
    def __init__(self, program: Program, effects: StatementEffects) -> None:
        self.program = program
        self.effects = effects

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

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.effects.writes.add(node.name.value)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.effects.writes.add(node.name.value)

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
    for index in range(dest, source):
        if is_wall(body[index]):
            return f"it would move into another notebook cell (above line {program.line(body[index + 1])})"
        between = effects_of(program, body[index])
        if between.barrier:
            return f"it would move above {_describe(between.barrier)} (line {program.line(body[index])}), which must run before the strategy is created"
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
    for index in range(source + 1, dest):
        if is_wall(body[index]):
            return "it would move into another notebook cell"
        between = effects_of(program, body[index])
        if moved.reads & between.writes:
            return "what it is made from changes before it is used"
        if moved.writes & (between.reads | between.writes):
            return "it is used before the strategy is created"
    return None


def _passing(barrier: str) -> str:
    return f"it calls {_describe(barrier)}"


def _describe(barrier: str) -> str:
    if barrier == "os.environ":
        return "the change to os.environ"
    return barrier.replace("tensorflow.", "tf.") + "()"
