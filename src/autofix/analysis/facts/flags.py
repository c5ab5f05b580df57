"""The command-line flags a file declares: ``parser.add_argument("--batch_size", type=int,
help="...")`` (argparse) and ``flags.DEFINE_integer("batch_size", 64, "...")`` (absl), by the
name the program reads them under (``args.batch_size``, ``FLAGS.batch_size``): its help text,
and whether it holds an integer. What a flag's help says of a batch (global, per replica) and
whether a value is an integer (a Keras input shape) are read from here."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.syntax import argument_value


@dataclass(frozen=True)
class Flag:
    call: cst.Call
    help: str
    integer: bool


class Flags(Derived):
    """``Flags.of(program).get("batch_size")``: the flag the file reads under that name."""

    def get(self, name: str) -> Flag | None:
        return self._declared.get(name)

    @cached_property
    def _declared(self) -> dict[str, Flag]:
        found: dict[str, Flag] = {}
        for call, _owner in self.program.index.calls:
            func = call.func
            method = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            if method == "add_argument":
                help_text = argument_value(call, "help")
                kind = argument_value(call, "type")
                integer = isinstance(kind, cst.Name) and kind.value == "int"
                dest = argument_value(call, "dest")
                names = [s.lstrip("-").replace("-", "_") for s in _strings(a.value for a in call.args if a.keyword is None)]
                if isinstance(dest, cst.SimpleString) and isinstance(dest.evaluated_value, str):
                    names.append(dest.evaluated_value)
            elif method.startswith("DEFINE_"):
                help_text = argument_value(call, "help", 2)
                integer = method == "DEFINE_integer"
                first = argument_value(call, "name", 0)
                names = _strings([first]) if first is not None else []
            else:
                continue
            text = help_text.evaluated_value if isinstance(help_text, cst.SimpleString) else ""
            flag = Flag(call, str(text or ""), integer)
            for name in names:
                found.setdefault(name, flag)
        return found


def _strings(values) -> list[str]:
    return [v.evaluated_value for v in values if isinstance(v, cst.SimpleString) and isinstance(v.evaluated_value, str)]
