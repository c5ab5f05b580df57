"""One pass over a module that records what the rules ask of it: the parent of every node,
the scopes, every binding and every read of a name (and which bindings each read can see),
and the calls, functions, classes and assignments of the module.

This is what libcst's ParentNodeProvider + ScopeProvider (+ QualifiedNameProvider) compute,
done in a single walk that skips whitespace nodes: those providers visit the whole tree once
each through libcst's generic visitor, which made them four to six times as slow as parsing
(measured on the fixtures: parse 7 ms, ScopeProvider 40 ms, ParentNodeProvider 29 ms for a
35-line script), the bulk of autofix's time. tests/test_index.py checks that the bindings and
qualified names found here agree with libcst's ScopeProvider on every fixture.

Resolution follows Python's rules, as libcst does: a read sees the bindings of the innermost
scope that binds the name (class bodies are skipped by nested functions; ``global`` and
``nonlocal`` redirect); within one scope, only bindings made earlier in the source; from a
nested function, every binding of the enclosing scope (it may run at any time).
"""

from __future__ import annotations

import builtins
import dataclasses

import libcst as cst

_BUILTINS = frozenset(dir(builtins))
# The aliases every TensorFlow script writes for its libraries: in a file that star-imports
# another module (``from layers.embedding_layer import *``) and never binds them itself, they are
# the library that module imported under that alias.
_CONVENTIONAL = {"tf": "tensorflow", "np": "numpy"}

# Node types that never matter to a rule: whitespace, punctuation, operators.
_SKIP = (
    cst.SimpleWhitespace,
    cst.ParenthesizedWhitespace,
    cst.TrailingWhitespace,
    cst.EmptyLine,
    cst.Newline,
    cst.Comment,
    cst.Comma,
    cst.Dot,
    cst.Colon,
    cst.Semicolon,
    cst.AssignEqual,
    cst.LeftParen,
    cst.RightParen,
    cst.LeftSquareBracket,
    cst.RightSquareBracket,
    cst.LeftCurlyBrace,
    cst.RightCurlyBrace,
    cst.BaseBinaryOp,
    cst.BaseBooleanOp,
    cst.BaseCompOp,
    cst.BaseUnaryOp,
    cst.BaseAugOp,
    cst.ImportStar,
)
_NOT_CHILDREN = frozenset(
    {
        "lpar",
        "rpar",
        "leading_lines",
        "lines_after_decorators",
        "header",
        "footer",
        "trailing_whitespace",
        "semicolon",
        "comma",
        "dot",
        "equal",
        "colon",
        "operator",
        "newline",
        "indent",
        "encoding",
        "default_newline",
        "default_indent",
        "has_trailing_newline",
        "value",  # kept below for the nodes where ``value`` is a child (most of them)
    }
)
_FIELD_CACHE: dict[type, tuple[str, ...]] = {}
# What a value found in a node's field is, by its type (isinstance on libcst's ABCs is slow
# enough to dominate a walk otherwise).
_OTHER, _WALK, _SEQUENCE = 0, 1, 2
_KINDS: dict[type, int] = {}


def _kind(kind: type) -> int:
    if issubclass(kind, cst.CSTNode):
        value = _OTHER if issubclass(kind, _SKIP) else _WALK
    elif kind in (list, tuple):
        value = _SEQUENCE
    else:
        value = _OTHER
    _KINDS[kind] = value
    return value


def _fields(kind: type) -> tuple[str, ...]:
    names = _FIELD_CACHE.get(kind)
    if names is None:
        names = tuple(
            f.name
            for f in dataclasses.fields(kind)
            if (f.name not in _NOT_CHILDREN or f.name == "value") and not f.name.startswith("whitespace")
        )
        if kind in (cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.Comment):
            names = ()
        _FIELD_CACHE[kind] = names
    return names


class Binding:
    """A name bound in a scope: assignment target, parameter, def, class or import."""

    __slots__ = ("name", "node", "scope", "index", "kind", "path", "references")

    def __init__(self, name: str, node: cst.CSTNode, scope: "Scope", index: int, kind: str, path: str | None = None) -> None:
        self.name = name
        self.node = node
        self.scope = scope
        self.index = index
        self.kind = kind  # "assign", "param", "def", "class", "import", "builtin"
        self.path = path  # for imports: the qualified name the binding stands for
        self.references: list[Access] = []

    _index = property(lambda self: self.index)


class Access:
    """A read of a name, and the bindings it may see."""

    __slots__ = ("name", "node", "scope", "index", "referents")

    def __init__(self, name: str, node: cst.CSTNode, scope: "Scope", index: int) -> None:
        self.name = name
        self.node = node
        self.scope = scope
        self.index = index
        self.referents: list[Binding] = []


class Scope:
    __slots__ = ("kind", "node", "parent", "bindings", "globals", "nonlocals")

    def __init__(self, kind: str, node: cst.CSTNode, parent: "Scope | None") -> None:
        self.kind = kind  # "module", "function", "class", "lambda", "comprehension"
        self.node = node
        self.parent = parent
        self.bindings: dict[str, list[Binding]] = {}
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()

    @property
    def module(self) -> "Scope":
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    def owner_of(self, name: str) -> "Scope":
        """The scope a binding of ``name`` made here belongs to."""
        if name in self.globals:
            return self.module
        if name in self.nonlocals:
            scope = self.parent
            while scope is not None and (scope.kind == "class" or name not in scope.bindings):
                if scope.parent is None:
                    break
                scope = scope.parent
            return scope or self.module
        return self

    def assignments(self, name: str) -> list[Binding]:
        return list(self.bindings.get(name, ()))

    def lookup(self, name: str) -> list[Binding]:
        """Every binding of ``name`` visible from code running in this scope."""
        scope: Scope | None = self.owner_of(name)
        first = True
        while scope is not None:
            if (first or scope.kind != "class") and name in scope.bindings:
                return list(scope.bindings[name])
            first = False
            scope = scope.parent
        return []

    def __contains__(self, name: str) -> bool:
        return bool(self.lookup(name))

    def __getitem__(self, name: str) -> set[Binding]:
        return set(self.lookup(name))


class Index:
    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.accesses: dict[cst.CSTNode, Access] = {}
        self.bindings: dict[cst.CSTNode, Binding] = {}
        self.scopes: dict[cst.CSTNode, Scope] = {}
        # What the TF facts start from.
        self.calls: list[tuple[cst.Call, cst.CSTNode]] = []
        self.functions: list[tuple[cst.FunctionDef, bool]] = []
        self.function_calls: dict[cst.FunctionDef, list[cst.Call]] = {}
        self.returns: dict[cst.FunctionDef, list[cst.Return]] = {}
        self.classes: list[cst.ClassDef] = []
        self.assigns: list[cst.Assign | cst.AnnAssign] = []
        self.with_items: list[cst.WithItem] = []
        self.attributes: list[cst.Attribute] = []
        self._count = 0
        # Whether the module has a ``from x import *`` (names it reads may come from there),
        # and the modules it star-imports (as written, with their level).
        self.star_import = False
        self.star_modules: list[tuple[str, int]] = []
        # The aliases read as their library by convention only (see ``_CONVENTIONAL``).
        self.conventional: set[str] = set()
        # The modules (as written, with their level) that ``from m import tf`` takes one from.
        self.conventional_modules: list[tuple[str, int]] = []
        self._owners: list[cst.CSTNode] = [module]
        self._all_accesses: list[Access] = []
        root = Scope("module", module, None)
        self.scopes[module] = root
        self._walk_children(module, root)
        self._resolve()

    # --- walking -------------------------------------------------------------------------------

    def _next(self) -> int:
        self._count += 1
        return self._count

    def _child(self, child: object, parent: cst.CSTNode, scope: Scope) -> None:
        kind = _KINDS.get(type(child))
        if kind is None:
            kind = _kind(type(child))
        if kind == _WALK:
            self.parents[child] = parent  # type: ignore[index]
            self._walk(child, scope)  # type: ignore[arg-type]
        elif kind == _SEQUENCE:
            for item in child:  # type: ignore[attr-defined]
                item_kind = _KINDS.get(type(item))
                if item_kind is None:
                    item_kind = _kind(type(item))
                if item_kind == _WALK:
                    self.parents[item] = parent
                    self._walk(item, scope)

    def _walk_children(self, node: cst.CSTNode, scope: Scope, skip: tuple[str, ...] = ()) -> None:
        for name in _fields(type(node)):
            if name in skip:
                continue
            self._child(getattr(node, name), node, scope)

    def _walk(self, node: cst.CSTNode, scope: Scope) -> None:
        handler = _HANDLERS.get(type(node))
        if handler is not None:
            handler(self, node, scope)
        else:
            self._walk_children(node, scope)

    def _bind_target(self, target: cst.CSTNode, scope: Scope, kind: str = "assign") -> None:
        """Bind the names of an assignment target (a name, or names in tuples/lists/stars);
        attributes and subscripts only read their base."""
        if isinstance(target, cst.Name):
            self._bind(target.value, target, scope, kind)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self.parents[element] = target
                value = element.value
                self.parents[value] = element
                if isinstance(element, cst.StarredElement):
                    self._bind_target(value, scope, kind)
                else:
                    self._bind_target(value, scope, kind)
        elif isinstance(target, cst.StarredElement):
            self.parents[target.value] = target
            self._bind_target(target.value, scope, kind)
        else:
            self._walk(target, scope)

    def _bind(self, name: str, node: cst.CSTNode, scope: Scope, kind: str, path: str | None = None) -> Binding:
        owner = scope.owner_of(name)
        binding = Binding(name, node, owner, self._next(), kind, path)
        owner.bindings.setdefault(name, []).append(binding)
        self.bindings[node] = binding
        return binding

    def _read(self, node: cst.Name, scope: Scope) -> None:
        access = Access(node.value, node, scope, self._next())
        self.accesses[node] = access
        self._all_accesses.append(access)

    # --- resolving -----------------------------------------------------------------------------

    def _resolve(self) -> None:
        module = self.scopes[self.module]
        for access in self._all_accesses:
            name = access.name
            scope: Scope | None = access.scope.owner_of(name)
            first = True
            found: list[Binding] = []
            while scope is not None:
                if (first or scope.kind != "class") and name in scope.bindings:
                    bindings = scope.bindings[name]
                    if scope is access.scope:
                        # In one scope, a read sees only what was bound before it.
                        found = [b for b in bindings if b.index < access.index]
                        if found or scope.kind in ("function", "lambda", "comprehension"):
                            break
                    else:
                        found = list(bindings)
                        break
                first = False
                scope = scope.parent
            if not found and name in _BUILTINS and not module.bindings.get(name):
                found = [Binding(name, access.node, module, 0, "builtin", f"builtins.{name}")]
            elif not found and self.star_import and name in _CONVENTIONAL and not module.bindings.get(name):
                found = [Binding(name, access.node, module, 0, "import", _CONVENTIONAL[name])]
                self.conventional.add(name)
            access.referents = found
            for binding in found:
                binding.references.append(access)

    # --- queries -------------------------------------------------------------------------------

    def scope_of(self, node: cst.CSTNode) -> Scope:
        """The scope the code at ``node`` runs in."""
        previous = node
        current = self.parents.get(node)
        while current is not None:
            if isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and previous is current.body:
                return self.scopes[current]
            if isinstance(current, cst.FunctionDef) and previous is current.params:
                return self.scopes[current]
            if isinstance(current, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)) and current in self.scopes:
                return self.scopes[current]
            previous = current
            current = self.parents.get(current)
        return self.scopes[self.module]

    def qualified_names(self, expr: cst.CSTNode) -> set[str]:
        """``tf.keras.Sequential`` -> {"tensorflow.keras.Sequential"}, through imports (and
        builtins); names bound otherwise have none."""
        suffix: list[str] = []
        while isinstance(expr, cst.Attribute):
            suffix.append(expr.attr.value)
            expr = expr.value
        if isinstance(expr, cst.Call):
            return set()
        if not isinstance(expr, cst.Name):
            return set()
        access = self.accesses.get(expr)
        if access is None:
            return set()
        tail = "".join("." + part for part in reversed(suffix))
        return {b.path + tail for b in access.referents if b.path is not None}


def _handle_function(index: Index, node: cst.FunctionDef, scope: Scope) -> None:
    index.functions.append((node, scope.kind == "class"))
    index.function_calls[node] = []
    index.returns[node] = []
    for decorator in node.decorators:
        index.parents[decorator] = node
        index._walk(decorator, scope)
    params = node.params
    index.parents[params] = node
    inner = Scope("function", node, scope)
    index.scopes[node] = inner
    _handle_params(index, params, scope, inner)
    if node.returns is not None:
        index.parents[node.returns] = node
        index._walk(node.returns, scope)
    index._bind(node.name.value, node, scope, "def")
    index.parents[node.name] = node
    index.parents[node.body] = node
    index._owners.append(node)
    index._walk_children(node.body, inner)
    index._owners.pop()


def _handle_params(index: Index, params: cst.Parameters, outer: Scope, inner: Scope) -> None:
    for group in (params.posonly_params, params.params, params.kwonly_params):
        for param in group:
            _one_param(index, param, params, outer, inner)
    for param in (params.star_arg, params.star_kwarg):
        if isinstance(param, cst.Param):
            _one_param(index, param, params, outer, inner)


def _one_param(index: Index, param: cst.Param, params: cst.Parameters, outer: Scope, inner: Scope) -> None:
    index.parents[param] = params
    if param.default is not None:
        index.parents[param.default] = param
        index._walk(param.default, outer)
    if param.annotation is not None:
        index.parents[param.annotation] = param
        index._walk(param.annotation, outer)
    index.parents[param.name] = param
    index._bind(param.name.value, param, inner, "param")


def _handle_lambda(index: Index, node: cst.Lambda, scope: Scope) -> None:
    inner = Scope("lambda", node, scope)
    index.scopes[node] = inner
    index.parents[node.params] = node
    _handle_params(index, node.params, scope, inner)
    index.parents[node.body] = node
    index._owners.append(node)
    index._walk(node.body, inner)
    index._owners.pop()


def _handle_class(index: Index, node: cst.ClassDef, scope: Scope) -> None:
    index.classes.append(node)
    for decorator in node.decorators:
        index.parents[decorator] = node
        index._walk(decorator, scope)
    for arg in (*node.bases, *node.keywords):
        index.parents[arg] = node
        index._walk(arg, scope)
    inner = Scope("class", node, scope)
    index.scopes[node] = inner
    index.parents[node.body] = node
    index.parents[node.name] = node
    index._owners.append(node)
    index._walk_children(node.body, inner)
    index._owners.pop()
    index._bind(node.name.value, node, scope, "class")


def _handle_comprehension(index: Index, node: cst.CSTNode, scope: Scope) -> None:
    inner = Scope("comprehension", node, scope)
    index.scopes[node] = inner
    for_in = node.for_in  # type: ignore[attr-defined]
    index.parents[for_in] = node
    # The first iterable is evaluated in the enclosing scope, before the comprehension's own.
    index.parents[for_in.iter] = for_in
    index._walk(for_in.iter, scope)
    _handle_comp_for(index, for_in, inner, outer_iter_done=True)
    for name in ("elt", "key", "value"):
        child = getattr(node, name, None)
        if isinstance(child, cst.CSTNode):
            index.parents[child] = node
            index._walk(child, inner)


def _handle_comp_for(index: Index, node: cst.CompFor, scope: Scope, outer_iter_done: bool = False) -> None:
    if not outer_iter_done:
        index.parents[node.iter] = node
        index._walk(node.iter, scope)
    index.parents[node.target] = node
    index._bind_target(node.target, scope)
    for condition in node.ifs:
        index.parents[condition] = node
        index._walk(condition, scope)
    if node.inner_for_in is not None:
        index.parents[node.inner_for_in] = node
        index._walk(node.inner_for_in, scope)


def _handle_name(index: Index, node: cst.Name, scope: Scope) -> None:
    index._read(node, scope)


def _handle_attribute(index: Index, node: cst.Attribute, scope: Scope) -> None:
    index.attributes.append(node)
    index.parents[node.value] = node
    index._walk(node.value, scope)
    index.parents[node.attr] = node  # a member, not a name read


def _handle_arg(index: Index, node: cst.Arg, scope: Scope) -> None:
    if node.keyword is not None:
        index.parents[node.keyword] = node
    index.parents[node.value] = node
    index._walk(node.value, scope)


def _handle_call(index: Index, node: cst.Call, scope: Scope) -> None:
    owner = index._owners[-1]
    index.calls.append((node, owner))
    if isinstance(owner, cst.FunctionDef):
        index.function_calls[owner].append(node)
    index._walk_children(node, scope)


def _handle_return(index: Index, node: cst.Return, scope: Scope) -> None:
    owner = index._owners[-1]
    if isinstance(owner, cst.FunctionDef):
        index.returns[owner].append(node)
    index._walk_children(node, scope)


def _handle_assign(index: Index, node: cst.Assign, scope: Scope) -> None:
    index.assigns.append(node)
    index.parents[node.value] = node
    index._walk(node.value, scope)
    for target in node.targets:
        index.parents[target] = node
        index.parents[target.target] = target
        index._bind_target(target.target, scope)


def _handle_ann_assign(index: Index, node: cst.AnnAssign, scope: Scope) -> None:
    index.assigns.append(node)
    index.parents[node.annotation] = node
    index._walk(node.annotation, scope)
    if node.value is not None:
        index.parents[node.value] = node
        index._walk(node.value, scope)
    index.parents[node.target] = node
    index._bind_target(node.target, scope)


def _handle_aug_assign(index: Index, node: cst.AugAssign, scope: Scope) -> None:
    index.parents[node.value] = node
    index._walk(node.value, scope)
    index.parents[node.target] = node
    if isinstance(node.target, cst.Name):
        # Reads the old value, then binds the new one.
        index._read(node.target, scope)
        index._bind(node.target.value, node.target, scope, "assign")
    else:
        index._walk(node.target, scope)


def _handle_named_expr(index: Index, node: cst.NamedExpr, scope: Scope) -> None:
    index.parents[node.value] = node
    index._walk(node.value, scope)
    index.parents[node.target] = node
    target_scope = scope
    while target_scope.kind == "comprehension" and target_scope.parent is not None:
        target_scope = target_scope.parent  # PEP 572: binds in the enclosing scope
    index._bind_target(node.target, target_scope)


def _handle_for(index: Index, node: cst.For, scope: Scope) -> None:
    index.parents[node.iter] = node
    index._walk(node.iter, scope)
    index.parents[node.target] = node
    index._bind_target(node.target, scope)
    index.parents[node.body] = node
    index._walk(node.body, scope)
    if node.orelse is not None:
        index.parents[node.orelse] = node
        index._walk(node.orelse, scope)


def _handle_with_item(index: Index, node: cst.WithItem, scope: Scope) -> None:
    index.with_items.append(node)
    index.parents[node.item] = node
    index._walk(node.item, scope)
    if node.asname is not None:
        index.parents[node.asname] = node
        index.parents[node.asname.name] = node.asname
        index._bind_target(node.asname.name, scope)


def _handle_except(index: Index, node: cst.ExceptHandler, scope: Scope) -> None:
    if node.type is not None:
        index.parents[node.type] = node
        index._walk(node.type, scope)
    if node.name is not None:
        index.parents[node.name] = node
        index.parents[node.name.name] = node.name
        index._bind_target(node.name.name, scope)
    index.parents[node.body] = node
    index._walk(node.body, scope)


def _handle_import(index: Index, node: cst.Import, scope: Scope) -> None:
    for alias in node.names:
        index.parents[alias] = node
        full = index.module.code_for_node(alias.name) if isinstance(alias.name, cst.Attribute) else alias.name.value
        if alias.asname is not None:
            target = alias.asname.name
            index.parents[alias.asname] = alias
            index.parents[target] = alias.asname
            if isinstance(target, cst.Name):
                index._bind(target.value, alias, scope, "import", full)
        else:
            first = full.split(".")[0]
            index._bind(first, alias, scope, "import", first)


def _handle_import_from(index: Index, node: cst.ImportFrom, scope: Scope) -> None:
    if isinstance(node.names, cst.ImportStar):
        index.star_import = True
        index.star_modules.append((index.module.code_for_node(node.module) if node.module is not None else "", len(node.relative)))
        return
    base = "." * len(node.relative)
    if node.module is not None:
        base += index.module.code_for_node(node.module)
    for alias in node.names:
        index.parents[alias] = node
        name = alias.name.value if isinstance(alias.name, cst.Name) else index.module.code_for_node(alias.name)
        path = f"{base}.{name}" if base and not base.endswith(".") else f"{base}{name}"
        target = alias.asname.name if alias.asname is not None else alias.name
        if alias.asname is not None:
            index.parents[alias.asname] = alias
        if isinstance(target, cst.Name):
            library = _CONVENTIONAL.get(name) if alias.asname is None else None
            if library is not None and base.split(".")[0] != library and scope.kind == "module":
                # ``from xuance.tensorflow import tf``: the project's module re-exports the
                # library under its usual alias; read as the library by convention.
                path = library
                index.conventional.add(name)
                index.conventional_modules.append((base.lstrip("."), len(node.relative)))
            index._bind(target.value, alias, scope, "import", path)


def _handle_global(index: Index, node: cst.Global, scope: Scope) -> None:
    scope.globals.update(item.name.value for item in node.names)


def _handle_nonlocal(index: Index, node: cst.Nonlocal, scope: Scope) -> None:
    scope.nonlocals.update(item.name.value for item in node.names)


def _handle_match_as(index: Index, node: cst.CSTNode, scope: Scope) -> None:
    for name in ("pattern",):
        child = getattr(node, name, None)
        if isinstance(child, cst.CSTNode):
            index.parents[child] = node
            index._walk(child, scope)
    target = getattr(node, "name", None)
    if isinstance(target, cst.Name):
        index.parents[target] = node
        index._bind(target.value, target, scope, "assign")


def _handle_del(index: Index, node: cst.Del, scope: Scope) -> None:
    index._walk_children(node, scope)


_HANDLERS = {
    cst.FunctionDef: _handle_function,
    cst.Lambda: _handle_lambda,
    cst.ClassDef: _handle_class,
    cst.ListComp: _handle_comprehension,
    cst.SetComp: _handle_comprehension,
    cst.GeneratorExp: _handle_comprehension,
    cst.DictComp: _handle_comprehension,
    cst.CompFor: _handle_comp_for,
    cst.Name: _handle_name,
    cst.Attribute: _handle_attribute,
    cst.Arg: _handle_arg,
    cst.Call: _handle_call,
    cst.Return: _handle_return,
    cst.Assign: _handle_assign,
    cst.AnnAssign: _handle_ann_assign,
    cst.AugAssign: _handle_aug_assign,
    cst.NamedExpr: _handle_named_expr,
    cst.For: _handle_for,
    cst.WithItem: _handle_with_item,
    cst.ExceptHandler: _handle_except,
    cst.Import: _handle_import,
    cst.ImportFrom: _handle_import_from,
    cst.Global: _handle_global,
    cst.Nonlocal: _handle_nonlocal,
    cst.MatchAs: _handle_match_as,
    cst.MatchStar: _handle_match_as,
    cst.Del: _handle_del,
}
