"""Classes and their attributes: methods and ``self``, the classes of the file a class derives
from, what its methods assign to ``self.<name>`` and read from it. Part of
:class:`~autofix.analysis.core.value_flow.Values`."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from autofix.analysis.core.origins import Origin
from autofix.analysis.program import Program
from autofix.analysis.syntax import attribute_path


class Classes:
    """The classes section of :class:`~autofix.analysis.core.value_flow.Values`."""

    # --- classes and their attributes --------------------------------------------------------

    def is_self(self, param: cst.Param) -> bool:
        """Whether ``param`` is the first parameter of a method (not a static method)."""
        function = self.enclosing_function(param)
        if function is None or not self.functions.get(function) or not self.functions[function].is_method:
            return False
        params = function.params.params
        if not params or params[0] is not param:
            return False
        return not any(
            isinstance(d.decorator, cst.Name) and d.decorator.value in ("staticmethod", "classmethod")
            for d in function.decorators
        )

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The function whose parameters or body ``node`` is in (not a lambda's)."""
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, cst.Lambda):
                return None
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
        return None

    def class_of(self, function: cst.FunctionDef) -> cst.ClassDef | None:
        block = self.program.parent(function)
        cls = self.program.parent(block) if block is not None else None
        return cls if isinstance(cls, cst.ClassDef) else None

    def bases(self, cls: cst.ClassDef) -> list[cst.ClassDef]:
        """The classes of this module ``cls`` derives from, directly or not."""
        found: list[cst.ClassDef] = []
        pending = [cls]
        while pending:
            current = pending.pop()
            for base in current.bases:
                local = self.local_definition(base.value)
                if isinstance(local, cst.ClassDef) and local not in found and local is not cls:
                    found.append(local)
                    pending.append(local)
        return found

    def family(self, cls: cst.ClassDef) -> list[cst.ClassDef]:
        """``cls``, the classes of this module it derives from and those deriving from it:
        every class whose methods may run on an object ``self`` of ``cls`` is."""
        found = [cls, *self.bases(cls)]
        for other in self.classes:
            if other not in found and cls in self.bases(other):
                found.append(other)
        return found

    def attribute_values(self, cls: cst.ClassDef) -> dict[str, list[cst.BaseExpression]]:
        """``{"model": [value, ...]}``: every ``self.model = value`` in the class's own methods
        (tuple targets unpacked when the value is a tuple literal), and ``model = value`` in
        its body."""
        return self._attributes[cls][0]

    def attribute_targets(self, cls: cst.ClassDef) -> dict[str, list[cst.CSTNode]]:
        """The targets (``self.model``) that the values of :meth:`attribute_values` are
        assigned to, in the same order."""
        return self._attributes[cls][1]

    @cached_property
    def _attributes(self) -> dict[cst.ClassDef, tuple[dict, dict]]:
        found: dict[cst.ClassDef, tuple[dict, dict]] = {cls: ({}, {}) for cls in self.classes}
        for cls in self.classes:
            values, targets = found[cls]
            body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
            for statement in body:
                if isinstance(statement, cst.SimpleStatementLine):
                    for small in statement.body:
                        if isinstance(small, cst.Assign):
                            for target in small.targets:
                                if isinstance(target.target, cst.Name):
                                    values.setdefault(target.target.value, []).append(small.value)
                                    targets.setdefault(target.target.value, []).append(target.target)
        # The assignments in each method's own body (the index lists every assignment: no walk
        # of the tree is needed).
        parents = self.program.index.parents
        for assign in self.assigns:
            function = parents.get(assign)
            while function is not None and not isinstance(function, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                function = parents.get(function)
            if not isinstance(function, cst.FunctionDef) or not function.params.params:
                continue
            info = self.functions.get(function)
            cls = self.class_of(function) if info is not None and info.is_method else None
            if cls not in found:
                continue
            values, targets = found[cls]  # type: ignore[index]
            for attribute, target, value in self._attribute_pairs(assign, function.params.params[0].name.value):
                values.setdefault(attribute, []).append(value)
                targets.setdefault(attribute, []).append(target)
        for cls in self.classes:
            values, targets = found[cls]
            for keyword, value in self._keyword_attributes(cls):
                values.setdefault(keyword.value, []).append(value)
                targets.setdefault(keyword.value, []).append(keyword)
        return found

    def _keyword_attributes(self, cls: cst.ClassDef) -> list[tuple[cst.Name, cst.BaseExpression]]:
        """``def __init__(self, **kwargs): self.__dict__.update(kwargs)``: every keyword that
        a construction of the class passes becomes an attribute. Nothing when a construction
        passes ``**`` (what it sets is not known) or the class is made elsewhere too."""
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        init = next((s for s in body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
        star = init.params.star_kwarg if init is not None else None
        if init is None or star is None or not init.params.params or init not in self.functions or self._subclassed(cls):
            return []
        owner = init.params.params[0].name.value
        updates = [
            call
            for call in self.functions[init].calls
            if isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "update"
            and attribute_path(call.func.value) == (owner, "__dict__")
            and len(call.args) == 1
            and isinstance(call.args[0].value, cst.Name)
            and call.args[0].value.value == star.name.value
        ]
        if not updates:
            return []
        found = []
        for ref in self.references(cls):
            call = self.program.parent(ref)
            if not (isinstance(call, cst.Call) and call.func is ref):
                if self._is_base(ref) or _inside(self.program, ref, cls):  # ``super(Model, self)``
                    continue
                return []
            if any(arg.star for arg in call.args):
                return []
            found.extend((arg.keyword, arg.value) for arg in call.args if arg.keyword is not None)
        return found

    def self_reads(self, cls: cst.ClassDef) -> dict[str, list[cst.Attribute]]:
        """Every ``self.<name>`` read in the class's body (its methods, and functions nested in
        them; ``self`` being the method's first parameter, whatever it is called), by name;
        assignment targets left out."""
        return self._self_reads.get(cls, {})

    @cached_property
    def _self_reads(self) -> dict[cst.ClassDef, dict[str, list[cst.Attribute]]]:
        found: dict[cst.ClassDef, dict[str, list[cst.Attribute]]] = {}
        parents = self.program.index.parents
        for name, attributes in self._attributes_named.items():
            for attribute in attributes:
                receiver = attribute.value
                if not isinstance(receiver, cst.Name):
                    continue
                bound = self.bindings(receiver) or ()
                if not (len(bound) == 1 and isinstance(bound[0], cst.Param) and self.is_self(bound[0])):
                    continue
                if isinstance(parents.get(attribute), cst.AssignTarget):
                    continue
                node = parents.get(attribute)
                while node is not None and not isinstance(node, cst.ClassDef):
                    node = parents.get(node)
                if node is not None:
                    found.setdefault(node, {}).setdefault(name, []).append(attribute)
        return found

    def _attribute_pairs(self, assign, owner: str) -> list[tuple[str, cst.CSTNode, cst.BaseExpression]]:
        if isinstance(assign, cst.AnnAssign):
            pairs = [(assign.target, assign.value)] if assign.value is not None else []
        else:
            pairs = []
            for target in assign.targets:
                if isinstance(target.target, (cst.Tuple, cst.List)) and isinstance(assign.value, (cst.Tuple, cst.List)):
                    if len(target.target.elements) == len(assign.value.elements):
                        pairs.extend((t.value, v.value) for t, v in zip(target.target.elements, assign.value.elements))
                else:
                    pairs.append((target.target, assign.value))
        found = []
        for target, value in pairs:
            path = attribute_path(target)
            if path is not None and len(path) == 2 and path[0] == owner and value is not None:
                found.append((path[1], target, value))
        return found

    def _class_attribute(self, classes: list[cst.ClassDef], path, depth: int) -> list[Origin]:
        """The origins of ``obj.<attr>`` for an object of one of ``classes``: what their
        methods assign to ``self.<attr>``; a method of that name is itself the origin."""
        attribute = path[0][1]
        found: list[Origin] = []
        for cls in {c: None for klass in classes for c in self.family(klass)}:
            for value in self.attribute_values(cls).get(attribute, ()):
                found.extend(self._follow(value, path[1:], (), depth))
            body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
            for statement in body:
                if isinstance(statement, cst.FunctionDef) and statement.name.value == attribute:
                    found.append(Origin(statement, path[1:]))
        return found


def _inside(program: Program, node: cst.CSTNode, statement: cst.CSTNode) -> bool:
    return any(a is statement for a in program.ancestors(node))
