"""The TensorFlow or Keras version a file checks for itself, and the Keras that check leaves.

A script written for an older TensorFlow often says so in code that stops it elsewhere:
``assert tf.__version__.startswith("2.3")``, ``assert version.parse(tf.__version__) <
version.parse("2.4")``, or ``if tf.__version__ >= "2.16": raise RuntimeError(...)``. Where that
check lets only versions whose Keras is Keras 2 run on (TensorFlow before 2.16, Keras before 3),
the file runs on Keras 2: what fails only on Keras 3 is not its bug. Checks that allow both
(``assert tf.__version__.startswith("2.")``, the usual "TensorFlow 2 or later") say nothing.

Read at the top level of the module only (a notebook's cells are its top level): a check in a
function may never run. The version is read from ``tf.__version__``, ``tf.version.VERSION``
or ``keras.__version__`` (``tf.keras.__version__`` is Keras's), directly or through the one
argument of a version parser (``version.parse``, ``LooseVersion``, ``parse_version``...);
compared with a string, or a parser of a string (a string compares as text, as Python does:
``tf.__version__ < "2.4"`` holds for "2.16.0", so it says nothing); or tested with
``startswith`` of a string or a tuple of strings, by whole parts ("2.3" is 2.3.x).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

import operator as op

from packaging.version import InvalidVersion, Version

from autofix.analysis.project.pins import keras_of_versions
from autofix.analysis.syntax import nodes_in, words

# What each name is the version of.
_VERSIONS = {
    "tensorflow.__version__": "tensorflow",
    "tensorflow.version.VERSION": "tensorflow",
    "keras.__version__": "keras",
    "tf_keras.__version__": "keras",
}
_OPERATORS = {cst.LessThan: "<", cst.LessThanEqual: "<=", cst.GreaterThan: ">", cst.GreaterThanEqual: ">=", cst.Equal: "==", cst.NotEqual: "!="}
_COMPARE = {"<": op.lt, "<=": op.le, ">": op.gt, ">=": op.ge, "==": op.eq, "!=": op.ne}
# The operator that reads the same comparison from the other side (``"2.4" > v`` is ``v < "2.4"``).
_MIRRORED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
# What holds when the comparison does not (``if v >= "2.16": raise`` lets ``v < "2.16"`` run on).
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
# Calls that stop the program.
_EXITS = frozenset({"sys.exit", "builtins.exit", "builtins.quit", "os._exit"})


@dataclass(frozen=True)
class VersionCheck:
    """A check that lets the file run on only one Keras."""

    node: cst.CSTNode
    keras: int
    subject: str


def version_check(facts, module: cst.Module) -> VersionCheck | None:
    """The first top-level check of ``module`` that lets it run on only one Keras (2 or 3)."""
    for statement in module.body:
        test, holds = _checked(facts, statement)
        if test is None:
            continue
        found = _keras_of_test(facts, test, holds)
        if found is not None:
            return VersionCheck(statement, found[0], found[1])
    return None


def _checked(facts, statement: cst.CSTNode) -> tuple[cst.BaseExpression | None, bool]:
    """The condition ``statement`` requires, and whether it must hold (an ``assert``) or must
    not (``if <test>: raise ...``)."""
    if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(statement.body[0], cst.Assert):
        return statement.body[0].test, True
    if isinstance(statement, cst.If) and statement.orelse is None and isinstance(statement.body, cst.IndentedBlock):
        last = statement.body.body[-1] if statement.body.body else None
        if isinstance(last, cst.SimpleStatementLine) and any(_stops(facts, small) for small in last.body):
            return statement.test, False
    return None, True


def _stops(facts, small: cst.BaseSmallStatement) -> bool:
    if isinstance(small, cst.Raise):
        return True
    return isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and bool(facts.names_of(small.value.func) & _EXITS)


def _keras_of_test(facts, test: cst.BaseExpression, holds: bool) -> tuple[int, str] | None:
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _keras_of_test(facts, test.expression, not holds)
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And) and holds:
        # ``assert a and b``: both hold; either one that decides is enough.
        return _keras_of_test(facts, test.left, True) or _keras_of_test(facts, test.right, True)
    if isinstance(test, cst.Call):
        return _startswith(facts, test) if holds else None
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        operator = _OPERATORS.get(type(target.operator))
        if operator is None:
            return None
        left, right = test.left, target.comparator
        subject, parsed = _version_of(facts, left)
        written = _written(right)
        if subject is None:
            (subject, parsed), written, operator = _version_of(facts, right), _written(left), _MIRRORED[operator]
        if subject is None or written is None:
            return None
        if not holds:
            operator = _NEGATED[operator]
        compare = _COMPARE[operator]
        if parsed:
            # A parser compares versions (2.16 > 2.4); a string compares as text ("2.16" < "2.4").
            try:
                bound = Version(written)
            except InvalidVersion:
                return None
            keras = keras_of_versions(subject, lambda v: compare(Version(v), bound))
        else:
            keras = keras_of_versions(subject, lambda v: compare(v, written))
        return (keras, subject) if keras is not None else None
    return None


def _startswith(facts, call: cst.Call) -> tuple[int, str] | None:
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "startswith" and len(call.args) == 1):
        return None
    subject, parsed = _version_of(facts, func.value)
    if subject is None or parsed:
        return None
    value = call.args[0].value
    prefixes = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
    if not all(isinstance(p, cst.SimpleString) and isinstance(p.evaluated_value, str) for p in prefixes):
        return None
    texts = tuple(p.evaluated_value for p in prefixes)  # type: ignore[union-attr]
    keras = keras_of_versions(subject, lambda v: any(_starts(v, text) for text in texts))
    return (keras, subject) if keras is not None else None


def _starts(version: str, prefix: str) -> bool:
    """``version.startswith(prefix)`` read as its author means it, by whole parts: "2.3" is
    2.3.x, not a TensorFlow 2.30 that does not exist (the probes reach 2.39)."""
    if not version.startswith(prefix):
        return False
    rest = version[len(prefix):]
    return prefix.endswith(".") or not rest or not rest[0].isdigit()


def tests_a_version(facts, test: cst.BaseExpression) -> bool:
    """Whether an ``if`` test reads a TensorFlow or Keras version: the package's own
    (``tf.__version__``, ``keras.__version__``, parsed or not) or a name kept for one
    (``if keras_version == 2:``, ``if TF_VERSION < (2, 16):``). A branch under such a test is
    code written for one Keras of several, not a sign of which one runs."""
    for node in nodes_in(test, (cst.Name, cst.Attribute)):
        if isinstance(node, cst.Attribute) and _version_of(facts, node)[0] is not None:
            return True
        name = node.attr.value if isinstance(node, cst.Attribute) else node.value
        if "version" in words(name):
            return True
    return False


def _version_of(facts, expr: cst.BaseExpression) -> tuple[str | None, bool]:
    """("tensorflow" or "keras", False) when ``expr`` is that package's version string;
    (..., True) when it is a call of one argument given it (a version parser); (None, False)
    otherwise."""
    parsed = False
    if isinstance(expr, cst.Call) and len(expr.args) == 1 and not expr.args[0].keyword:
        expr, parsed = expr.args[0].value, True
    if not isinstance(expr, cst.Attribute):
        return None, False
    subjects = {_VERSIONS[name] for name in facts.names_of(expr) if name in _VERSIONS}
    return (subjects.pop(), parsed) if len(subjects) == 1 else (None, False)


def _written(expr: cst.BaseExpression) -> str | None:
    """The version a string (or a parser given one string) spells."""
    if isinstance(expr, cst.Call) and len(expr.args) == 1 and not expr.args[0].keyword:
        expr = expr.args[0].value
    if isinstance(expr, cst.SimpleString) and isinstance(expr.evaluated_value, str):
        text = expr.evaluated_value.strip()
        return text if text and all(part.isdigit() for part in text.split(".")) else None
    return None


# ``# tested with TensorFlow 2.0.0-rc0``, ``Requires: tensorflow==2.3``: what a file's header
# says it was made for. Only a version stated as the one it ran with (not "2.4+" or "2.4 or
# later", which allow a Keras 3 TensorFlow too).
_STATED = re.compile(
    r"\b(?:tested|developed|written|built|made)\s+(?:with|on|for|using|under)\s+"
    r"(?P<what>tensorflow|tf|keras)(?:[\s=:-]*|\s+version\s+)v?(?P<version>\d+\.\d+(?:\.\d+)?(?:-?rc\d+)?)"
    r"(?P<after>\s*(?:\+|or\s+(?:later|newer|above|higher)|and\s+(?:later|newer|above|higher)|>|\.x\b)?)",
    re.IGNORECASE,
)
# How far into a file its header is read (lines).
_HEADER_LINES = 40


def stated_version(source: str) -> tuple[int, str, str] | None:
    """The TensorFlow (or Keras) version a file's header comment or docstring says it was tested
    or written with, when that version's Keras is Keras 2 (TensorFlow before 2.16, Keras before
    3): its line, what ("TensorFlow") and the version. None otherwise."""
    lines = source.splitlines()[:_HEADER_LINES]
    docstring = _docstring_lines(lines)
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped.startswith(("#", '"', "'")) and number not in docstring:
            continue
        for match in _STATED.finditer(stripped):
            if match.group("after").strip():
                continue
            what = "keras" if match.group("what").lower() == "keras" else "tensorflow"
            version = match.group("version").replace("-rc", "rc")
            try:
                parsed = Version(version)
            except InvalidVersion:
                continue
            if parsed < (Version("2.16") if what == "tensorflow" else Version("3")):
                return number, "TensorFlow" if what == "tensorflow" else "Keras", match.group("version")
    return None


def _docstring_lines(lines: list[str]) -> range:
    """The line numbers (from 1) of the module's docstring among ``lines``: a string first in
    the file (after comments), to its closing quotes; empty when there is none."""
    first = next((i for i, l in enumerate(lines) if l.strip() and not l.strip().startswith("#")), None)
    if first is None or not lines[first].lstrip().startswith(('"""', "'''", 'r"""', "r'''")):
        return range(0)
    quote = '"""' if '"""' in lines[first] else "'''"
    end = first
    if lines[first].count(quote) < 2:
        end = next((i for i in range(first + 1, len(lines)) if quote in lines[i]), len(lines) - 1)
    return range(first + 1, end + 2)
