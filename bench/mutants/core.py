"""What a mutant is, how operators are registered, and the program they edit.

A *kind* is one way of changing a migrated training script, labelled by the definition of a
right migration (bench/mutants/README.md): ``wrong`` (the result no longer trains as the
original does on N replicas) or ``right`` (it still does). An *operator* is a function that
takes a :class:`Program` and yields edits of one kind; the registry turns each edit into a
:class:`Mutant` whose text parses (edits that do not parse, or change nothing, are dropped).

Operators only emit where their label is certain: where a change could be a no-op in the file
at hand (a layer the step never trains, weights loaded over an initializer), they emit nothing.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

WRONG, RIGHT = "wrong", "right"

# The wall statements and IPython masks a notebook's program holds between and in its cells
# (autofix.notebooks): never moved, renamed or edited.
_CELL_WALL = re.compile(r"__autofix_cell__\(|^b[\"']ipy[0-9a-f]+", re.M)


@dataclass(frozen=True)
class Kind:
    name: str
    label: str
    family: str
    changes: str  # what it changes (one line, for the README's table)
    sees: str  # which part of the proof must see it
    heldout: bool = False


@dataclass(frozen=True)
class Mutant:
    kind: str
    label: str
    family: str
    what: str  # one line: what was changed, where
    text: str  # the whole mutated file
    line: int  # where: a line of the program
    where: str = ""  # where, as the file says it ("line 12", "cell 5, line 3")


@dataclass(frozen=True)
class Edit:
    """What an operator yields: the mutated program's text, one line saying what changed, and
    the line it changed."""

    text: str
    what: str
    line: int


Operator = Callable[["Program"], Iterable[Edit]]


@dataclass
class Registered:
    kind: Kind
    function: Operator


REGISTRY: list[Registered] = []


def operator(name: str, label: str, family: str, changes: str, sees: str) -> Callable[[Operator], Operator]:
    """Registers ``function`` as the operator of one kind. The family's module decides
    whether it is held out (modules under ``heldout/``)."""

    def register(function: Operator) -> Operator:
        heldout = ".heldout." in function.__module__ or function.__module__.startswith("heldout")
        kind = Kind(name, label, family, changes, sees, heldout)
        if any(r.kind.name == name for r in REGISTRY):
            raise ValueError(f"kind {name} registered twice")
        REGISTRY.append(Registered(kind, function))
        return function

    if label not in (WRONG, RIGHT):
        raise ValueError(label)
    return register


def parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def run_operators(program: "Program", registered: Sequence[Registered], max_per_kind: int | None = None) -> list[Mutant]:
    """Every mutant the operators make of ``program``: parsed, changed, not repeated."""
    found: list[Mutant] = []
    for entry in registered:
        seen: set[str] = set()
        count = 0
        for edit in entry.function(program):
            if edit.text == program.text or edit.text in seen or not parses(edit.text):
                continue
            seen.add(edit.text)
            found.append(Mutant(entry.kind.name, entry.kind.label, entry.kind.family, edit.what, edit.text, edit.line, f"line {edit.line}"))
            count += 1
            if max_per_kind is not None and count >= max_per_kind:
                break
    return found


class _Replacer(cst.CSTTransformer):
    """Replaces nodes by identity, visiting only the paths that lead to them."""

    def __init__(self, changes: dict[cst.CSTNode, object], paths: set[int]):
        super().__init__()
        self.changes = changes
        self.paths = paths

    def on_visit(self, node) -> bool:  # type: ignore[override]
        return id(node) in self.paths and node not in self.changes

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        if original_node in self.changes:
            return self.changes[original_node]
        return updated_node


@dataclass
class Program:
    """A migrated script (or a notebook's cells joined into one program) parsed once, with the
    positions and parents of its nodes, the facts the operators share, and the number of
    replicas its mutants are judged on."""

    text: str
    replicas: int = 2
    module: cst.Module = field(init=False)
    _facts: object = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.module = cst.parse_module(self.text)
        wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
        self.positions = wrapper.resolve(PositionProvider)
        self.parents = wrapper.resolve(ParentNodeProvider)

    @property
    def facts(self):
        if self._facts is None:
            from mutants.facts import Facts

            self._facts = Facts(self)
        return self._facts

    # --- reading ---------------------------------------------------------------------------
    def line(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self.parents.get(node)
        while current is not None:
            yield current
            current = self.parents.get(current)

    def statement_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The statement (a line of simple statements, or a compound one) holding ``node``."""
        current = node
        while not isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            current = self.parents[current]
        return current

    def function_of(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
        return None

    def class_of(self, node: cst.CSTNode) -> cst.ClassDef | None:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.ClassDef):
                return ancestor
        return None

    def dead(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` is in code that never runs: the ``else`` of an ``if True:``, the
        body of an ``if False:`` (a tutorial that keeps a second variant behind a constant
        test). A change there changes nothing the program does, whatever its kind says."""
        child = node
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.If):
                value = _constant_truth(ancestor.test)
                if value is True and ancestor.orelse is not None and child is ancestor.orelse:
                    return True
                if value is False and child is ancestor.body:
                    return True
            child = ancestor
        return False

    def is_wall(self, statement: cst.CSTNode) -> bool:
        """A notebook's wall between cells or an IPython line's mask."""
        return bool(_CELL_WALL.search(self.code(statement).strip()))

    def nodes(self, kind: type | tuple[type, ...]) -> list:
        cache = self.__dict__.setdefault("_nodes", {})
        if kind not in cache:
            cache[kind] = [n for n in self.positions if isinstance(n, kind)]
        return cache[kind]

    # --- writing ---------------------------------------------------------------------------
    def replace(self, changes: dict[cst.CSTNode, object]) -> str:
        if any(self.dead(node) for node in changes):
            return self.text  # no mutant: nothing that runs would change
        paths = {id(self.module)}
        for node in changes:
            paths.add(id(node))
            paths.update(id(a) for a in self.ancestors(node))
        return self.module.visit(_Replacer(changes, paths)).code

    def replace_one(self, node: cst.CSTNode, new: object) -> str:
        return self.replace({node: new})

    def remove_statement(self, statement: cst.CSTNode) -> str:
        body = self.parent(statement)
        siblings = getattr(body, "body", ())
        if isinstance(body, cst.IndentedBlock) and len(siblings) == 1:
            return self.replace_one(statement, cst.SimpleStatementLine([cst.Pass()]))
        return self.replace_one(statement, cst.RemoveFromParent())

    def insert_before(self, statement: cst.CSTNode, new: Sequence[cst.BaseStatement]) -> str:
        return self.replace_one(statement, cst.FlattenSentinel([*new, statement]))

    def insert_after(self, statement: cst.CSTNode, new: Sequence[cst.BaseStatement]) -> str:
        return self.replace_one(statement, cst.FlattenSentinel([statement, *new]))


def _constant_truth(test: cst.BaseExpression) -> bool | None:
    """True / False for a test written as a constant (``True``, ``False``, ``1``, ``0``), else None."""
    if isinstance(test, cst.Name) and test.value in ("True", "False"):
        return test.value == "True"
    if isinstance(test, cst.Integer):
        return test.evaluated_value != 0
    return None


# --- small builders shared by the operators ----------------------------------------------------
def expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def stmt(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code)


def dotted(node: cst.CSTNode) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base is not None else None
    return None


def callee(call: cst.Call) -> str | None:
    """The last name of what is called: ``Dense`` for ``keras.layers.Dense(...)``."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and not a.star]


def has_star(call: cst.Call) -> bool:
    return any(a.star for a in call.args)


def argument(call: cst.Call, name: str, index: int | None) -> cst.Arg | None:
    """The argument bound to parameter ``name`` (by keyword, or at position ``index``)."""
    found = keyword(call, name)
    if found is not None:
        return found
    args = positional(call)
    if index is not None and index < len(args):
        return args[index]
    return None


def with_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """``call`` with keyword ``name`` set to ``value`` (replaced if present, else added)."""
    existing = keyword(call, name)
    if existing is not None:
        return call.with_changes(args=[a.with_changes(value=value) if a is existing else a for a in call.args])
    args = list(call.args)
    new = cst.Arg(keyword=cst.Name(name), value=value, equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
    if args:
        last = args[-1]
        if last.comma is cst.MaybeSentinel.DEFAULT or last.comma is None:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        else:
            # A trailing comma (a call over several lines): the new argument goes after it.
            new = new.with_changes(comma=last.comma)
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(new)
    return call.with_changes(args=args)


def without_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """``call`` without ``arg``; the argument before a removed last one keeps its trailing
    comma only when the call spans lines."""
    args = [a for a in call.args if a is not arg]
    if args and call.args[-1] is arg:
        trailing = arg.comma
        spans_lines = isinstance(trailing, cst.Comma) and "\n" in cst.Module([]).code_for_node(trailing)
        args[-1] = args[-1].with_changes(comma=trailing if spans_lines else cst.MaybeSentinel.DEFAULT)
    return call.with_changes(args=args)


def number(node: cst.BaseExpression) -> float | None:
    """The value of a numeric literal (``-1e-3`` too), else None."""
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        inner = number(node.expression)
        return -inner if inner is not None else None
    if isinstance(node, (cst.Integer, cst.Float)):
        return float(node.evaluated_value)
    return None


def literal(value: float) -> cst.BaseExpression:
    """A short literal for ``value`` (an int when it is one)."""
    if float(value).is_integer() and abs(value) < 1e6:
        return expr(str(int(value)))
    return expr(repr(float(value)))


def string(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def true(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "True"


def false(node: cst.BaseExpression | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"
