"""Names, bindings and definitions: which bindings of a name reach a read, what a binding
assigns, what a name defines, where a bound value is read. Part of
:class:`~autofix.analysis.core.value_flow.Values`."""

from __future__ import annotations

import libcst as cst

from autofix.analysis.program import Program


class Bindings:
    """The names section of :class:`~autofix.analysis.core.value_flow.Values`."""

    # --- names, bindings and definitions ----------------------------------------------------------

    def assigned_value(self, binding: cst.CSTNode) -> cst.BaseExpression | None:
        """The value bound by a simple assignment ``name = value``, or by the item of a tuple
        written beside it (``epochs, loss = 100, MeanSquaredError()``: ``loss``'s value is the
        call); None for anything else."""
        parent = self.program.parent(binding)
        if isinstance(parent, cst.AssignTarget):
            assign = self.program.parent(parent)
            if isinstance(assign, cst.Assign):
                return assign.value
        elif isinstance(parent, cst.Element) and isinstance(binding, cst.Name):
            return self._item_bound(binding, parent)
        elif isinstance(parent, cst.AnnAssign) and parent.target is binding:
            return parent.value
        elif isinstance(parent, cst.NamedExpr) and parent.target is binding:
            return parent.value
        return None

    def _item_bound(self, name: cst.Name, element: cst.Element) -> cst.BaseExpression | None:
        """``b``'s value in ``a, b = x, y`` (``y``): a tuple or list of names unpacking a
        tuple or list literal of as many items, nothing starred on either side."""
        target = self.program.parent(element)
        if not isinstance(target, (cst.Tuple, cst.List)):
            return None
        holder = self.program.parent(target)
        assign = self.program.parent(holder) if isinstance(holder, cst.AssignTarget) else None
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
            return None
        value = assign.value
        if not isinstance(value, (cst.Tuple, cst.List)) or len(value.elements) != len(target.elements):
            return None
        if any(isinstance(e, cst.StarredElement) for e in (*value.elements, *target.elements)):
            return None
        position = next(i for i, e in enumerate(target.elements) if e is element)
        return value.elements[position].value

    def bindings(self, name: cst.Name) -> list[cst.CSTNode] | None:
        """The nodes that bind a name where it is used (for a name being assigned: every
        binding of that name in its scope), or None if any of them is an import, a builtin or
        unknown. In source order."""
        access = self.program.access(name)
        if access is not None:
            referents = access.referents
        else:
            # A name being bound: every binding of it in the scope that owns it (a ``global``
            # name assigned in a function belongs to the module).
            binding = self.program.assignment(name)
            scope = binding.scope if binding is not None else self.program.scope(name)
            referents = scope.assignments(name.value) if scope is not None else []
        if not referents:
            return None
        if access is not None and any(r.kind == "import" for r in referents) and self._import_replaced(name, access, referents):
            # ``from model import model`` then ``model = model()`` at the top of the module:
            # a read further down reads the model, not the import.
            referents = [r for r in referents if r.kind != "import"]
        pairs = []
        for referent in referents:
            if referent.kind in ("import", "builtin"):
                return None
            pairs.append((referent.index, referent.node))
        pairs.sort(key=lambda pair: pair[0])
        return [node for _, node in pairs]

    def _import_replaced(self, name: cst.Name, access, referents) -> bool:
        """Whether every import of the name read at ``name`` (module code) is made by a
        statement of the module's body, and a later statement binds the name again before the
        read, in a block the read is in (or in a ``with`` body there): the read never sees
        the import (``from model import model`` then ``model = model()``)."""
        program = self.program
        module = program.module
        if access.scope is None or access.scope.kind != "module" or any(r.kind == "builtin" for r in referents):
            return False
        top = {id(s): i for i, s in enumerate(module.body)}

        def top_index(node: cst.CSTNode) -> int | None:
            for ancestor in [node, *program.ancestors(node)]:
                if id(ancestor) in top:
                    return top[id(ancestor)]
            return None

        imports = []
        for referent in referents:
            if referent.kind == "import":
                statement = program.statement_of(referent.node)
                if statement is None or id(statement) not in top:
                    return False
                imports.append(top[id(statement)])
        for referent in referents:
            if referent.kind == "import":
                continue
            statement = program.statement_of(referent.node)
            # Out of ``with`` bodies: they run whenever the ``with`` does.
            while statement is not None:
                block = program.block_of(statement)
                owner = program.parent(block) if block is not None else None
                if isinstance(block, cst.IndentedBlock) and isinstance(owner, cst.With):
                    statement = owner
                    continue
                break
            block = program.block_of(statement) if statement is not None else None
            at = top_index(statement) if statement is not None else None
            if block is None or at is None or at <= max(imports):
                continue
            ids = {id(s): i for i, s in enumerate(block.body)}
            mine = ids[id(statement)]
            read = next((ids[id(a)] for a in program.ancestors(name) if id(a) in ids), None)
            if read is not None and read > mine:
                return True
        return False

    def reaching_bindings(self, name: cst.Name) -> list[cst.CSTNode] | None:
        """:meth:`bindings` of a name that is read, without those that a later binding
        certainly replaces first: one made by a statement of a block that the read is in (or
        in a ``with`` body there), before the read (``model = a(); model = b(); model.fit()``
        reaches ``b()`` only)."""
        nodes = self.bindings(name)
        access = self.program.access(name)
        if not nodes or len(nodes) == 1 or access is None:
            return nodes
        memo = self._reaching
        if name in memo:
            return memo[name]
        memo[name] = nodes
        closure = self._closure_reaching(name, nodes)
        if closure is not None:
            memo[name] = closure
            return closure
        path = {id(a): a for a in self.program.ancestors(name)}
        bindings = self.program.index.bindings
        for position in range(len(nodes) - 1, -1, -1):
            binding = bindings.get(nodes[position])
            # Bindings and reads are numbered in source order by the index.
            if binding is None or binding.index > access.index:
                continue
            loop = _loop_of_target(self.program, nodes[position])
            if loop is not None and _inside(self.program, name, loop.body):
                # A loop's target is bound again before each pass of its body.
                memo[name] = nodes[position:]
                return memo[name]
            statement = self.program.statement_of(nodes[position])
            while statement is not None:
                block = self.program.block_of(statement)
                if block is None:
                    break
                if id(block) in path:
                    # A ``for`` loop binds its target before each run of its body.
                    if not _inside(self.program, name, statement) or _loop_body_read(self.program, statement, nodes[position], name):
                        memo[name] = nodes[position:]
                        return memo[name]
                    break
                # The body of a ``with`` runs whenever the ``with`` does.
                holder = self.program.parent(block)
                statement = holder if isinstance(holder, cst.With) else None
        return nodes

    def _closure_reaching(self, name: cst.Name, nodes: list[cst.CSTNode]) -> list[cst.CSTNode] | None:
        """For a read in a function nested in the one that binds the name (a step defined in
        ``main``), the bindings that can precede a run of it: made before one of the places
        ``main`` uses the nested function (calls it, or hands it to ``strategy.run`` or
        ``tf.function``), or in a loop around one. A model rebuilt for evaluation after
        training is not the one the step trained. None when that cannot be told (the nested
        function is also used elsewhere, or the name is bound in other scopes)."""
        bindings = [self.program.index.bindings.get(n) for n in nodes]
        if any(b is None for b in bindings) or len({id(b.scope) for b in bindings}) != 1:  # type: ignore[union-attr]
            return None
        owner = bindings[0].scope.node  # type: ignore[union-attr]
        if isinstance(owner, cst.Module):
            return self._global_reaching(name, nodes, bindings)
        if not isinstance(owner, cst.FunctionDef):
            return None
        # The function nested directly in ``owner`` that the read is in.
        nested = None
        for ancestor in self.program.ancestors(name):
            if ancestor is owner:
                break
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                nested = ancestor
        if not isinstance(nested, cst.FunctionDef):
            return None
        uses = self.references(nested)
        if not uses or any(self.enclosing_function(u) is not owner for u in uses):
            return None
        reaching = []
        for node, binding in zip(nodes, bindings):
            for use in uses:
                access = self.program.access(use)
                if access is not None and (binding.index < access.index or self._loop_around(node, use, owner)):  # type: ignore[union-attr]
                    reaching.append(node)
                    break
        return reaching or None

    def _global_reaching(self, name: cst.Name, nodes: list[cst.CSTNode], bindings: list) -> list[cst.CSTNode] | None:
        """For a read, in a function defined at module level, of a name the module binds more
        than once (a notebook rebinding ``loss_fn`` cell after cell): the bindings that reach
        the module-level statements that call the function (or hand it to ``strategy.run``),
        as they would reach a read there. Every binding when the function is also used
        otherwise (passed on, called from another function): it may run after any of them.
        None when the read is not in such a function, or a binding is a ``global`` write."""
        function = None
        for ancestor in self.program.ancestors(name):
            if isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
                return None
            if isinstance(ancestor, cst.FunctionDef):
                function = ancestor
        if function is None or self.program.scope(function) is not self.program.scope(nodes[0]):
            return None
        if any(self.enclosing_function(node) is not None for node in nodes):
            return None  # a ``global`` write: made when its function runs, not where it is written
        module = self.program.module
        calls = self._module_calls(function)
        if calls is None:
            return nodes
        if not calls:
            return None
        reaching: dict[int, cst.CSTNode] = {}
        for use in calls:
            access = self.program.access(use)
            if access is None:
                return None
            for node, binding in sorted(zip(nodes, bindings), key=lambda pair: pair[1].index, reverse=True):
                if binding.index > access.index:
                    if self._loop_around(node, use, module):
                        reaching[id(node)] = node
                    continue
                reaching[id(node)] = node
                statement = self.program.statement_of(node)
                while statement is not None:
                    # The body of a ``with`` (a model made in ``strategy.scope()``) runs whenever the ``with`` does.
                    block = self.program.block_of(statement)
                    holder = self.program.parent(block) if block is not None else None
                    if not isinstance(holder, cst.With):
                        break
                    statement = holder
                if statement is not None and self.program.block_of(statement) is module and not isinstance(statement, (cst.For, cst.While)):
                    break  # a module-level statement before the call: what it binds is what the call sees
        return [n for n in nodes if id(n) in reaching] or None

    def _module_calls(self, function: cst.FunctionDef, depth: int = 0) -> list[cst.CSTNode] | None:
        """The module-level statements' uses that run ``function`` (a function defined at
        module level): its calls there and its hand-overs to ``strategy.run``, and, for a use
        inside another module-level function that only runs it (a ``distributed_step`` that
        hands the step to ``strategy.run``), the module-level uses that run that one. None
        when it may run at any time (passed on, called from a nested or a method's body)."""
        calls = []
        for use in self.references(function):
            if function not in (self.reaching_bindings(use) or ()):  # another ``def`` of the name
                continue
            parent = self.program.parent(use)
            called = isinstance(parent, cst.Call) and parent.func is use or self._run_of(parent) is not None
            if not called:
                return None
            outer = self.enclosing_function(use)
            if outer is None:
                calls.append(use)
                continue
            if (
                depth >= 2
                or outer is function
                or self.program.scope(outer) is not self.program.scope(function)
                or any(isinstance(a, (cst.ClassDef, cst.Lambda)) for a in self.program.ancestors(use) if a is not outer)
            ):
                return None
            through = self._module_calls(outer, depth + 1)
            if through is None:
                return None
            calls.extend(through)
        return calls

    def _loop_around(self, a: cst.CSTNode, b: cst.CSTNode, stop: cst.CSTNode) -> bool:
        """Whether a loop inside ``stop`` contains both ``a`` and ``b``."""
        loops_a = set()
        for ancestor in self.program.ancestors(a):
            if ancestor is stop:
                break
            if isinstance(ancestor, (cst.For, cst.While)):
                loops_a.add(id(ancestor))
        for ancestor in self.program.ancestors(b):
            if ancestor is stop:
                break
            if id(ancestor) in loops_a:
                return True
        return False

    def local_definition(self, expr: cst.BaseExpression) -> cst.FunctionDef | cst.ClassDef | None:
        """The function or class of this module that ``expr`` (a name) refers to."""
        if not isinstance(expr, cst.Name):
            return None
        nodes = self.bindings(expr)
        if not nodes or len(nodes) != 1:
            return None
        node = nodes[0]
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return node
        return None

    def is_module_reference(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` is an imported name or an attribute path starting at one."""
        while isinstance(expr, cst.Attribute):
            expr = expr.value
        if not (isinstance(expr, cst.Name) and self.program.is_import(expr)):
            return False
        access = self.program.access(expr)
        # (Not an import that the module's code binds again before the read: see bindings.)
        return access is None or not self._import_replaced(expr, access, access.referents)

    def references(self, definition: cst.FunctionDef | cst.ClassDef) -> list[cst.CSTNode]:
        """Every use of a function's or class's name in this module."""
        assignment = self.program.assignment(definition)
        return [access.node for access in assignment.references] if assignment is not None else []

    def direct_calls(self, definition: cst.FunctionDef | cst.ClassDef) -> list[cst.Call] | None:
        """The calls of a function's (or class's) name when every use of it in this module is
        a call of it; None when it is never used or is also used as a value (passed on, stored)."""
        references = self.references(definition)
        calls = [self.program.parent(ref) for ref in references]
        if not references or not all(isinstance(c, cst.Call) and c.func is ref for c, ref in zip(calls, references)):
            return None
        return calls  # type: ignore[return-value]

    def assigned_name(self, value: cst.BaseExpression) -> cst.Name | None:
        """``name`` in ``name = value`` (or ``name: T = value``)."""
        parent = self.program.parent(value)
        target = None
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
        elif isinstance(parent, cst.AnnAssign):
            target = parent.target
        return target if isinstance(target, cst.Name) else None

    def unpacked_name(self, value: cst.CSTNode, position: int) -> cst.Name | None:
        """``b`` in ``a, b = value`` for ``position`` 1: the name the item of ``value`` at
        ``position`` is unpacked to, when that item is a plain name."""
        assign = self.program.parent(value)
        if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1):
            return None
        target = assign.targets[0].target
        if isinstance(target, (cst.Tuple, cst.List)) and position < len(target.elements):
            name = target.elements[position].value
            return name if isinstance(name, cst.Name) else None
        return None

    def uses(self, name: cst.Name | cst.Param) -> list[cst.CSTNode]:
        """The later reads of the value bound at ``name`` (an assignment target, or a
        parameter or its name)."""
        assignment = self.program.assignment(name)
        if assignment is None:
            parent = self.program.parent(name)
            if isinstance(parent, cst.Param) and parent.name is name:
                assignment = self.program.assignment(parent)
        if assignment is None:
            return []
        node = assignment.node
        # Not the reads that a later binding certainly replaces first (see reaching_bindings).
        return [
            access.node
            for access in assignment.references
            if not isinstance(access.node, cst.Name) or node in (self.reaching_bindings(access.node) or (node,))
        ]

    def names_of(self, expr: cst.BaseExpression) -> frozenset[str]:
        return self.program.qualified_names(expr)


def _loop_of_target(program: Program, node: cst.CSTNode) -> cst.For | None:
    """The ``for`` loop whose target binds ``node`` (a name, or one unpacked from it)."""
    child, parent = node, program.parent(node)
    while isinstance(parent, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
        child, parent = parent, program.parent(parent)
    return parent if isinstance(parent, cst.For) and parent.target is child else None


def _inside(program: Program, node: cst.CSTNode, statement: cst.CSTNode) -> bool:
    return any(a is statement for a in program.ancestors(node))


def _loop_body_read(program: Program, statement: cst.CSTNode, binding: cst.CSTNode, read: cst.CSTNode) -> bool:
    """Whether ``binding`` is (in) the target of the ``for`` loop ``statement`` and ``read``
    is in its body."""
    if not isinstance(statement, cst.For):
        return False
    target = statement.target
    return (binding is target or _inside(program, binding, target)) and _inside(program, read, statement.body)
