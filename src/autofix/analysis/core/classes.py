"""Classes and their attributes: methods and ``self``, the classes of the file a class derives
from, what its methods assign to ``self.<name>`` and read from it. Part of
:class:`~autofix.analysis.core.value_flow.Values`."""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from autofix.analysis.core.origins import Origin
from autofix.analysis.program import Program
from autofix.analysis.syntax import attribute_path, nodes_in


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

    def assigned_before(self, read: cst.Attribute) -> cst.BaseExpression | None:
        """The value of the ``self.<name> = value`` that a method runs before ``read`` (a
        ``self.<name>`` read in the same method) on every path to it, when no other assignment
        of the attribute can come in between: the value ``read`` reads, whatever other methods
        assign (``self.model = build()`` in the scope, then ``self.model.fit(...)``). None when
        that is not shown: no such assignment, one under a condition, in a loop or ``try`` the
        read is in, or a call between them that may assign it (a method of ``self``, a call
        given ``self``)."""
        owner = read.value
        if not isinstance(owner, cst.Name):
            return None
        bound = self.bindings(owner) or ()
        if not (len(bound) == 1 and isinstance(bound[0], cst.Param) and self.is_self(bound[0])):
            return None
        method = self.enclosing_function(bound[0])
        if method is None or self.program.enclosing_function(read) is not method:
            return None
        attribute = read.attr.value
        node: cst.CSTNode = read
        for ancestor in self.program.ancestors(read):
            if ancestor is method:
                return None
            if isinstance(ancestor, (cst.For, cst.While)) and self._assigns_attribute(ancestor, owner.value, attribute):
                return None  # a later turn of the loop may read what the loop assigns
            if isinstance(ancestor, cst.Try) and node is not ancestor.body and self._assigns_attribute(ancestor.body, owner.value, attribute):
                return None  # a handler runs after part of the body
            if isinstance(ancestor, (cst.IndentedBlock, cst.SimpleStatementSuite)):
                statements = list(ancestor.body)
                before = statements[: next(i for i, s in enumerate(statements) if s is node)]
                found = self._last_assignment(before, owner.value, attribute)
                if found is not None:
                    return found or None
            node = ancestor
        return None

    def _last_assignment(self, statements, owner: str, attribute: str):
        """The value the last of ``statements`` to assign ``owner.attribute`` gives it; False
        when that is not certain (an assignment under a condition, a call that may assign it
        after); None when none of them assigns it (nor may)."""
        for statement in reversed(statements):
            if self._assigns_attribute(statement, owner, attribute):
                if isinstance(statement, cst.SimpleStatementLine):
                    small = statement.body[-1] if len(statement.body) == 1 else None
                    if isinstance(small, cst.Assign) and not isinstance(small.value, cst.Yield):
                        if any(attribute_path(t.target) == (owner, attribute) for t in small.targets):
                            return small.value
                    return False
                if isinstance(statement, cst.With) and isinstance(statement.body, cst.IndentedBlock):
                    found = self._last_assignment(statement.body.body, owner, attribute)
                    return False if found is None else found
                return False
            if self._may_assign(statement, owner):
                return False
        return None

    def _assigns_attribute(self, node: cst.CSTNode, owner: str, attribute: str) -> bool:
        for target in nodes_in(node, (cst.AssignTarget, cst.AnnAssign, cst.AugAssign, cst.Del)):
            inner = target.target
            if any(attribute_path(t) == (owner, attribute) for t in nodes_in(inner, cst.Attribute)):
                return True
        return False

    def _may_assign(self, node: cst.CSTNode, owner: str) -> bool:
        """Whether code in ``node`` may assign attributes of ``owner`` by a call: a method
        called on it, or a call it is passed to."""
        for call in nodes_in(node, cst.Call):
            if isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name) and call.func.value.value == owner:
                return True
            if any(isinstance(arg.value, cst.Name) and arg.value.value == owner for arg in call.args):
                return True
        return False

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
