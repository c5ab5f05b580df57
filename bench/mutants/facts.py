"""What the operators need to know of a migrated program to be sure of their labels: which
models are trained (and so which layers are), and which run with ``training=True``
(uses.py asks further questions of these facts).

A static, conservative reading: names are followed to the last assignment before their use in
the same function (or at module level, before the first statement that runs the function using
them), through parameters, constructors and the functions that build a model. What it cannot
follow is not trained as far as the operators know, and they emit nothing there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from mutants.core import Program, callee, dotted, keyword, positional, true
from mutants.vocabulary import LAYERS, LOADS, names_in, walk


@dataclass
class Entry:
    """A statement of a scope, in source order: a small statement or a compound one's header."""

    node: cst.CSTNode
    index: int
    scope: cst.CSTNode  # the Module or the FunctionDef it runs in
    assigns: dict[str, cst.BaseExpression | None] = field(default_factory=dict)


class Facts:
    def __init__(self, program: Program):
        self.p = program
        self.module = program.module
        self.entries: dict[cst.CSTNode, list[Entry]] = {}
        self.entry_of: dict[cst.CSTNode, Entry] = {}
        self.functions: dict[str, cst.FunctionDef] = {}
        self.classes: dict[str, cst.ClassDef] = {}
        self.module_functions: set[cst.FunctionDef] = set()
        self._collect()
        self.strategies = {n for e in self.entries.get(self.module, []) for n, v in e.assigns.items() if isinstance(v, cst.Call) and callee(v) in ("MirroredStrategy", "MultiWorkerMirroredStrategy")}
        for entries in self.entries.values():
            for e in entries:
                for n, v in e.assigns.items():
                    if isinstance(v, cst.Call) and callee(v) in ("MirroredStrategy", "MultiWorkerMirroredStrategy"):
                        self.strategies.add(n)
        self.module_names = {n for e in self.entries[self.module] for n in e.assigns}
        self.steps = self._step_functions()
        self.first_use = self._first_uses()
        self.trained: set[int] = set()  # ids of trained assignment values
        self.regions: dict[int, list[cst.CSTNode]] = {}
        self.active: set[int] = set()
        self.fit_trained: set[int] = set()
        self._trace()
        self.trained_nodes = self._region_nodes(self.trained)
        self.active_nodes = self._region_nodes(self.active)

    # --- statements and scopes ---------------------------------------------------------------
    def _collect(self) -> None:
        def visit_block(statements, scope, out: list[Entry]):
            for statement in statements:
                if isinstance(statement, cst.SimpleStatementLine):
                    for small in statement.body:
                        add(small, scope, out)
                elif isinstance(statement, cst.FunctionDef):
                    entry = add(statement, scope, out)
                    entry.assigns[statement.name.value] = None
                    if not isinstance(scope, cst.ClassDef):
                        self.functions.setdefault(statement.name.value, statement)
                        self.module_functions.add(statement)
                    inner: list[Entry] = []
                    params = statement.params
                    holder = Entry(statement, -1, statement)
                    for param in [*params.posonly_params, *params.params, *params.kwonly_params]:
                        holder.assigns[param.name.value] = None
                    inner.append(holder)
                    self.entries[statement] = inner
                    visit_body(statement.body, statement, inner)
                elif isinstance(statement, cst.ClassDef):
                    entry = add(statement, scope, out)
                    entry.assigns[statement.name.value] = None
                    self.classes.setdefault(statement.name.value, statement)
                    for item in statement.body.body:
                        if isinstance(item, cst.FunctionDef):
                            visit_block([item], statement, [])
                else:
                    add(statement, scope, out)
                    for body in _bodies(statement):
                        visit_body(body, scope, out)

        def visit_body(body, scope, out):
            if isinstance(body, cst.IndentedBlock):
                visit_block(body.body, scope, out)
            elif isinstance(body, cst.SimpleStatementSuite):
                for small in body.body:
                    add(small, scope, out)

        def add(node, scope, out) -> Entry:
            entry = Entry(node, len(out), scope)
            _assignments(node, entry.assigns)
            out.append(entry)
            self.entry_of[node] = entry
            return entry

        self.entries[self.module] = []
        visit_block(self.module.body, self.module, self.entries[self.module])
        for scope, entries in self.entries.items():
            for e in entries:
                e.scope = scope

    def entry(self, node: cst.CSTNode) -> Entry | None:
        current: cst.CSTNode | None = node
        while current is not None:
            if current in self.entry_of:
                return self.entry_of[current]
            current = self.p.parent(current)
        return None

    def scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        function = self.p.function_of(node)
        return function if function is not None and function in self.entries else self.module

    def reaching(self, name: str, node: cst.CSTNode) -> list[Entry]:
        """The assignment of ``name`` that reaches ``node``: the last one before it in its
        function (a parameter's holder, index -1, when it is one); for a global, the last one
        at module level before the statement that first runs the function (a method: the
        module's last)."""
        entry = self.entry(node)
        if entry is None:
            return []
        scope, index = entry.scope, entry.index
        while True:
            entries = self.entries.get(scope, [])
            for candidate in reversed(entries):
                if 0 <= candidate.index < index and name in candidate.assigns:
                    return [candidate]
            if entries and entries[0].index == -1 and name in entries[0].assigns:
                return [entries[0]]
            if scope is self.module:
                return []
            outer = self.p.function_of(scope)
            if outer is not None and outer in self.entries:
                own = self.entry_of.get(scope)
                scope, index = outer, own.index if own is not None else len(self.entries[outer])
                continue
            use = self.first_use.get(scope.name.value) if scope in self.module_functions else None
            scope, index = self.module, use if use is not None else len(self.entries[self.module])

    def value_of(self, name: str, node: cst.CSTNode) -> cst.BaseExpression | None:
        found = self.reaching(name, node)
        if len(found) == 1 and found[0].index >= 0:
            return found[0].assigns.get(name)
        return None

    def resolve(self, node: cst.BaseExpression, depth: int = 0) -> cst.BaseExpression:
        """Follows a name to the value assigned to it (a few times), else returns ``node``."""
        while isinstance(node, cst.Name) and depth < 6:
            value = self.value_of(node.value, node)
            if value is None:
                return node
            node, depth = value, depth + 1
        return node

    # --- what runs a training step ---------------------------------------------------------
    def _step_functions(self) -> set[cst.FunctionDef]:
        found = set()
        for function in self.p.nodes(cst.FunctionDef):
            for n in walk(function.body):
                if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value in ("gradient", "apply_gradients", "minimize"):
                    found.add(function)
                    break
                if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "apply" and "optimizer" in (dotted(n.func.value) or ""):
                    found.add(function)
                    break
        return found

    def _first_uses(self) -> dict[str, int]:
        """For each function, the index of the first module-level statement that runs it
        (directly, through strategy.run, or through another function)."""
        users: dict[str, set[str]] = {name: set() for name in self.functions}
        for name, function in self.functions.items():
            for used in names_in(function.body) & set(self.functions):
                if used != name:
                    users[used].add(name)
        direct: dict[str, int] = {}
        for entry in self.entries[self.module]:
            if isinstance(entry.node, (cst.FunctionDef, cst.ClassDef)):
                continue
            for used in _names_outside_bodies(entry.node) & set(self.functions):
                direct.setdefault(used, entry.index)
        first = dict(direct)
        for _ in range(len(self.functions) + 1):
            changed = False
            for name, callers in users.items():
                for caller in callers:
                    if caller in first and (name not in first or first[caller] < first[name]):
                        first[name] = first[caller]
                        changed = True
            if not changed:
                break
        return first

    def _trace(self) -> None:
        work: list[tuple[cst.BaseExpression, bool, bool]] = []  # (value, active, fit)

        def mark(name_node: cst.CSTNode, name: str, active: bool, fit: bool) -> None:
            for entry in self.reaching(name, name_node):
                if entry.index == -1:
                    self._through_parameter(entry.scope, name, active, fit, mark)
                    continue
                value = entry.assigns.get(name)
                if value is not None:
                    work.append((value, active, fit))

        for call in self.p.nodes(cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("fit", "train_on_batch") and isinstance(func.value, cst.Name):
                mark(func.value, func.value.value, True, True)
        for step in self.steps:
            for n in walk(step.body):
                target = None
                if isinstance(n, cst.Call):
                    target = n.func
                elif isinstance(n, cst.Attribute) and n.attr.value in ("trainable_variables", "trainable_weights", "variables"):
                    target = n.value
                if isinstance(target, cst.Name) and target.value not in self.functions:
                    active = isinstance(n, cst.Call) and true(getattr(keyword(n, "training"), "value", None))
                    mark(target, target.value, active, False)
        seen: dict[int, tuple[bool, bool]] = {}
        while work:
            value, active, fit = work.pop()
            cls = self.model_class(value)
            step = self.custom_train_step(cls)
            if fit and step is not None and "self" not in self.flagged_attributes(step):
                active = False  # its own train_step does not run it with training=True
            was_active, was_fit = seen.get(id(value), (False, False))
            if id(value) in seen and (was_active or not active) and (was_fit or not fit):
                continue
            seen[id(value)] = (was_active or active, was_fit or fit)
            self.trained.add(id(value))
            if active:
                self.active.add(id(value))
            if fit:
                self.fit_trained.add(id(value))
            region = self.regions.setdefault(id(value), [value])
            # What the value is built from: the names it reads, the functions and classes it calls.
            for n in walk(value):
                if isinstance(n, cst.Name) and n.value not in ("self", "True", "False", "None"):
                    if n.value in self.functions and isinstance(self.p.parent(n), cst.Call):
                        function = self.functions[n.value]
                        region.append(function.body)
                        for ret in walk(function.body):
                            if isinstance(ret, cst.Return) and ret.value is not None:
                                work.append((ret.value, active, fit))
                        continue
                    if n.value in self.classes:
                        cls = self.classes[n.value]
                        region.extend(self._class_layers(cls))
                        call = self.p.parent(n)
                        if isinstance(call, cst.Call):
                            self._class_arguments(cls, call, active, fit, mark)
                        continue
                    mark(n, n.value, active, fit)
            # Layers added with model.add(...) after the assignment.
            entry = self.entry(value)
            if entry is not None:
                names = [n for n, v in entry.assigns.items() if v is value]
                for later in self.entries[entry.scope][entry.index + 1 :]:
                    if any(n in later.assigns for n in names):
                        break
                    for n in walk(later.node):
                        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and n.func.attr.value == "add" and isinstance(n.func.value, cst.Name) and n.func.value.value in names:
                            region.append(n)

    def _through_parameter(self, function, name, active, fit, mark) -> None:
        if not isinstance(function, cst.FunctionDef):
            return
        params = [p.name.value for p in function.params.params]
        if name not in params:
            return
        position = params.index(name)
        for call in self.p.nodes(cst.Call):
            if isinstance(call.func, cst.Name) and call.func.value == function.name.value:
                arg = keyword(call, name)
                args = positional(call)
                if arg is None and position < len(args):
                    arg = args[position]
                if arg is not None and isinstance(arg.value, cst.Name):
                    mark(arg.value, arg.value.value, active, fit)

    def _class_layers(self, cls: cst.ClassDef) -> list[cst.CSTNode]:
        """The parts of a model class that hold its layers: every method but ``__init__``, and
        in ``__init__`` the assignments to attributes read elsewhere in the class."""
        parts: list[cst.CSTNode] = []
        methods = [m for m in cls.body.body if isinstance(m, cst.FunctionDef)]
        read = set()
        for m in methods:
            if m.name.value == "__init__":
                continue
            for n in walk(m.body):
                if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and n.value.value == "self":
                    read.add(n.attr.value)
        for m in methods:
            if m.name.value != "__init__":
                parts.append(m.body)
                continue
            for n in walk(m.body):
                if isinstance(n, cst.Assign):
                    for t in n.targets:
                        if isinstance(t.target, cst.Attribute) and isinstance(t.target.value, cst.Name) and t.target.value.value == "self" and t.target.attr.value in read:
                            parts.append(n.value)
        return parts

    def _class_arguments(self, cls, call, active, fit, mark) -> None:
        """The models handed to a class's constructor are trained with it; they run with
        ``training=True`` when its train_step calls them so (or the class runs itself so)."""
        init = next((m for m in cls.body.body if isinstance(m, cst.FunctionDef) and m.name.value == "__init__"), None)
        step = next((m for m in cls.body.body if isinstance(m, cst.FunctionDef) and m.name.value == "train_step"), None)
        flagged = self.flagged_attributes(step) if step is not None else set()
        params = [p.name.value for p in init.params.params][1:] if init is not None else []
        attribute_of: dict[str, str] = {}
        if init is not None:
            for n in walk(init.body):
                if isinstance(n, cst.Assign) and isinstance(n.value, cst.Name):
                    for t in n.targets:
                        if isinstance(t.target, cst.Attribute) and isinstance(t.target.value, cst.Name) and t.target.value.value == "self":
                            attribute_of[n.value.value] = t.target.attr.value
        args = positional(call)
        for i, arg in enumerate(call.args):
            if not isinstance(arg.value, cst.Name):
                continue
            param = arg.keyword.value if arg.keyword is not None else (params[i] if i < len(params) and arg in args else None)
            attribute = attribute_of.get(param or "", param)
            runs_active = fit and (step is None or attribute in flagged)
            mark(arg.value, arg.value.value, active and runs_active, fit)

    def flagged_attributes(self, step: cst.FunctionDef) -> set[str]:
        """``X`` for every ``self.X(..., training=True)`` in a train_step (``self`` for
        ``self(..., training=True)``)."""
        found = set()
        for n in walk(step.body):
            if isinstance(n, cst.Call) and true(getattr(keyword(n, "training"), "value", None)):
                if isinstance(n.func, cst.Name) and n.func.value == "self":
                    found.add("self")
                elif isinstance(n.func, cst.Attribute) and isinstance(n.func.value, cst.Name) and n.func.value.value == "self":
                    found.add(n.func.attr.value)
        return found

    def _region_nodes(self, ids: set[int]) -> set[int]:
        nodes: set[int] = set()
        for key in ids:
            for part in self.regions.get(key, []):
                nodes.add(id(part))
        return nodes

    # --- questions the operators ask -------------------------------------------------------
    def in_trained_model(self, node: cst.CSTNode) -> bool:
        return self._inside(node, self.trained_nodes)

    def in_active_model(self, node: cst.CSTNode) -> bool:
        """In a model trained with ``training=True`` (Dropout and noise layers act)."""
        return self._inside(node, self.active_nodes)

    def _inside(self, node: cst.CSTNode, region: set[int]) -> bool:
        if id(node) in region:
            return True
        return any(id(a) in region for a in self.p.ancestors(node))

    def layers(self, names: set[str] | None = None) -> list[cst.Call]:
        """Layer constructions in trained models (of the given classes)."""
        found = []
        for call in self.p.nodes(cst.Call):
            name = callee(call)
            if name in LAYERS and (names is None or name in names) and self.in_trained_model(call):
                found.append(call)
        return found

    def loads_weights(self) -> bool:
        """Whether the program sets weights from elsewhere (then initializers do not count)."""
        for call in self.p.nodes(cst.Call):
            if callee(call) in LOADS:
                return True
            if callee(call) in ("ResNet50", "VGG16", "MobileNetV2", "EfficientNetB0", "InceptionV3"):
                weights = keyword(call, "weights")
                if weights is None or not (isinstance(weights.value, cst.Name) and weights.value.value == "None"):
                    return True
        return False

    def custom_train_step(self, cls_name: str | None) -> cst.FunctionDef | None:
        cls = self.classes.get(cls_name or "")
        if cls is None:
            return None
        return next((m for m in cls.body.body if isinstance(m, cst.FunctionDef) and m.name.value == "train_step"), None)

    def compiled_models(self) -> list[tuple[cst.Call, cst.BaseExpression]]:
        """``(model.compile(...) call, the model's value)`` for the models trained with fit."""
        found = []
        for call in self.p.nodes(cst.Call):
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "compile" and isinstance(call.func.value, cst.Name):
                for entry in self.reaching(call.func.value.value, call):
                    value = entry.assigns.get(call.func.value.value)
                    if value is not None and id(value) in self.fit_trained:
                        found.append((call, value))
        return found

    def model_class(self, value: cst.BaseExpression) -> str | None:
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in self.classes:
            return value.func.value
        return None

def _bodies(statement: cst.CSTNode) -> list:
    bodies = []
    for attr in ("body", "orelse", "finalbody"):
        part = getattr(statement, attr, None)
        if isinstance(part, (cst.IndentedBlock, cst.SimpleStatementSuite)):
            bodies.append(part)
        elif isinstance(part, (cst.Else, cst.If, cst.Finally)):
            bodies.extend(_bodies(part) if isinstance(part, cst.If) else [part.body])
    for handler in getattr(statement, "handlers", ()):
        bodies.append(handler.body)
    return bodies


def _names_outside_bodies(node: cst.CSTNode) -> set[str]:
    """Names a statement reads, without the bodies of a compound one (those are statements of
    their own)."""
    if isinstance(node, cst.BaseCompoundStatement):
        found = set()
        for attr in ("test", "iter", "items", "target"):
            part = getattr(node, attr, None)
            if isinstance(part, cst.CSTNode):
                found |= names_in(part)
            elif isinstance(part, (list, tuple)):
                for item in part:
                    found |= names_in(item)
        return found
    return names_in(node)


def _assignments(node: cst.CSTNode, into: dict[str, cst.BaseExpression | None]) -> None:
    if isinstance(node, cst.Assign):
        for target in node.targets:
            _targets(target.target, node.value, into)
    elif isinstance(node, cst.AnnAssign) and node.value is not None:
        _targets(node.target, node.value, into)
    elif isinstance(node, cst.AugAssign):
        _targets(node.target, None, into)
    elif isinstance(node, (cst.For,)):
        _targets(node.target, None, into)
    elif isinstance(node, cst.With):
        for item in node.items:
            if item.asname is not None:
                _targets(item.asname.name, None, into)
    elif isinstance(node, (cst.Import, cst.ImportFrom)) and not isinstance(node.names, cst.ImportStar):
        for alias in node.names:
            bound = alias.asname.name if alias.asname is not None else alias.name
            if isinstance(bound, cst.Name):
                into[bound.value] = None
            elif isinstance(bound, cst.Attribute):
                into[(dotted(bound) or "").split(".")[0]] = None


def _targets(target: cst.CSTNode, value, into) -> None:
    if isinstance(target, cst.Name):
        into[target.value] = value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            _targets(element.value, None, into)


def _self_attributes(function: cst.FunctionDef) -> set[str]:
    return {n.attr.value for n in walk(function.body) if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and n.value.value == "self"}


