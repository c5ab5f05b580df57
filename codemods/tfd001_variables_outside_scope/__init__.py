"""TFD001 variables-outside-scope: what is trained under a strategy, made outside its scope.

A model trained with ``fit`` / ``train_on_batch`` (or by a step that ``strategy.run`` runs and
that applies gradients) under a strategy with more than one replica must be made in
``strategy.scope()``, with the layers it is built from (pretrained ones too: a transformers
``TF*.from_pretrained``, a ``hub.KerasLayer``, ``keras.applications``), the optimizer and metric objects it is
compiled or trained with, a model loaded with ``load_model``, and a ``compile`` that makes its
optimizer from a name (``optimizer="adam"``, or none). Outside the scope, ``fit`` silently trains
on one replica, or fails: Keras 3 with "Mixing different tf.distribute.Strategy objects" (an
optimizer, or compile's own), Keras 2 for a metric. The fix moves those statements, and only
those, into ``with strategy.scope():`` right where they are (several small blocks of one
strategy train as one); statements that only work on the objects being made
(``base.trainable = False``, a ``compile`` given objects, ``load_weights``) join them.

Not findings (measured, or kept apart on purpose):
- what is only evaluated, predicted with or inspected; loss objects and ``keras.Input`` (they
  hold no variables: a model built in the scope from an Input made outside it is mirrored);
  ``compile`` given an optimizer object, and weights loaded or a checkpoint restored into a
  model made in the scope (both work outside it);
- Keras preprocessing layers that hold nothing to mirror (``Rescaling``, ``Resizing``,
  ``Hashing``, ``CategoryEncoding``, the ``Random*`` augmentation layers, a ``Sequential`` of
  them), and the adapted ones (``Normalization``, ``Discretization``, the lookups and
  ``TextVectorization``) in a file that runs on Keras 3, which trains with what ``adapt()``
  computed outside the scope; on tf_keras such a layer built into the model moves into the
  scope with its ``adapt()``, or is reported when its ``adapt()`` cannot move with it
  (docs/keras-versions.md, "Preprocessing layers"). A layer used only in the input pipeline
  is no part of what is trained;
- training kept apart from the strategy: nothing of it made or run in a scope of a file that
  enters one elsewhere (a baseline, a model reloaded "without a strategy"), or a branch whose
  other branch enters the scope (``if replicas == 1``), also where that branch only hands a
  model made earlier to a ``fit`` after the ``if`` (``else: trained = self.model``) and no
  strategy exists on it;
- single-replica strategies (``OneDeviceStrategy``, ``MirroredStrategy(devices=[one])``, the
  default strategy); code that runs before the strategy exists and is not trained under it;
- an optimizer (or ``compile``'s own) made outside the scope in a file that can only run on
  Keras 2 (it calls ``experimental_run_v2`` or ``fit_generator``, gives an optimizer ``lr=``,
  imports TensorFlow Addons, or its repository pins Keras 2: a ``requirements.txt`` on
  ``tensorflow==2.12``, a Dockerfile on ``tensorflow/tensorflow:2.11.0-gpu``...; see
  docs/keras-versions.md): Keras 2 trains with it, only Keras 3 refuses it. When such a pin is
  why an optimizer stays outside while a model made outside is moved in, the finding names the
  pin and its line.

Not fixed (reported with the reason):
- a training unit any part of which cannot be moved (suppressed, made in an ``if`` or ``while``
  condition, before a strategy that cannot move up, where no strategy is in view): the whole
  unit stays, since a model left outside with its compile moved in does not train;
- a model kept in an attribute of a trainer class (``self.model = self.build()``);
- a function that builds and trains, never called in the file but handed as a value to code
  autofix does not follow (``partial(create_model, ...)`` given to another module's class, a
  thread's target): where that code runs it, and what it does with the model, is decided there.
  It is said once, as a suggestion where the function is handed on, naming each object it
  makes, not as a finding per object: whether it is a bug is decided by code autofix did not read;
- a function that builds a model but is called both inside and outside a scope; two
  strategies in one block; a strategy that may be None where the scope would go (a
  ``strategy = None`` placeholder not yet overwritten there);
- a model whose ``fit`` is given a batch that does not split evenly over the replicas the file
  asks for (``CUDA_VISIBLE_DEVICES="0,1,2"`` or ``devices=[...]`` with three entries, a batch
  of 32): mirrored, the model would make Keras 3 fail on that batch, where it trained on one
  device before (:mod:`autofix.analysis.facts.devices`).

A strategy that is an optional parameter (``def __init__(self, model, strategy=None)``, a
trainer whose single-device path passes none) gets ``with (strategy or
tf.distribute.get_strategy()).scope():``, which changes nothing where it is None
(docs/optional-strategy.md); an object of such a class constructed without it, or a call of
such a function made without it, trains on one device on purpose and is neither moved nor
reported. A strategy bound only on some paths to the code (``if multi_gpu: strategy = ...``
before a model built after the ``if``) is reported without a fix: ``with strategy.scope():``
there would raise ``UnboundLocalError`` on the other paths.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from autofix.analysis.facts import ordering
from autofix.analysis.facts.callees import Callables
from autofix.analysis.facts.contexts import Context, Contexts, index_of, unbound_on_a_path
from autofix.analysis.facts.devices import replica_count
from autofix.analysis.facts.sizes import Sizes
from autofix.analysis.facts.keras_objects import BUILD, COMPILE, TRAIN
from autofix.analysis.facts.strategies import Strategy, may_be_none
from autofix.analysis.project import pins
from autofix.analysis.training.multiworker import MULTI_WORKER, MultiWorker
from autofix.analysis.syntax import argument_value, calls_in, is_wall, names_in, root_name
from autofix.analysis.training.handed_in import handed_in
from autofix.analysis.training.model import TrainingModel
from autofix.analysis.training.sites import Site
from autofix.codegen import BlockEdits, ScopeSpan, on_both_paths, reordered, wrap_spans
from autofix.rule import SUPPRESSED, Example, Rule
from autofix.tf.symbols import ADAPT_MAKES_VARIABLES, ADAPTED_PREPROCESSING, NO_VARIABLE_LAYERS, STATELESS_PREPROCESSING, Kind, preprocessing_layer

_WHAT = {
    Kind.MODEL: "model built",
    Kind.LOAD: "model or weights loaded",
    Kind.OPTIMIZER: "optimizer created",
    COMPILE: "compile() called",
    BUILD: "optimizer built",
    Kind.METRIC: "metric created",
    Kind.LOSS: "loss object created",
    Kind.LAYER: "layer created",
}
_PRIORITY = list(_WHAT)
_WHY = "so its variables are not mirrored across replicas"
# What goes wrong, where it is not (only) that the variables are not mirrored (measured on
# TF 2.21 with Keras 3.15 and tf-keras 2.21, two replicas: see tests/test_fixes_at_runtime.py).
_MIXING = 'Keras 3 fails with "Mixing different tf.distribute.Strategy objects"'
_MESSAGES = {
    Kind.OPTIMIZER: f"optimizer created outside strategy.scope() but trains under it: {_MIXING}",
    COMPILE: f"compile() makes its optimizer outside strategy.scope(): {_MIXING}",
    BUILD: 'optimizer built outside strategy.scope() but trains under it: Keras 3 fails with "Need to be inside `with strategy.scope()`"',
    Kind.METRIC: (
        "metric created outside strategy.scope() but used in training under it: Keras 2 rejects it "
        '("created inside a different distribution strategy")'
    ),
}
# A preprocessing layer adapted outside the scope and built into a model trained under it
# (measured: docs/keras-versions.md, "Preprocessing layers"); Keras 3 trains with it.
_PREPROCESSING = (
    "{} made outside strategy.scope() but built into a model trained under it: tf_keras fails "
    '("was not created in the distribution strategy scope"); make it, and adapt it, in the scope'
)
# Keras methods that fail on Keras 3 under a multi-worker strategy (measured; TFD006).
KERAS3_FAILING = frozenset({"fit", "fit_generator", "evaluate", "evaluate_generator", "train_on_batch", "test_on_batch"})
# Calls that load into objects that exist already: they need no scope of their own, but stay
# next to the objects they load into when those move.
_JOINING_LOADS = frozenset({"load_weights", "restore"})
_SEQUENTIAL = frozenset({"keras.Sequential", "keras.models.Sequential"})

NEEDS, TRAINS, MIXED, NEUTRAL, SCOPE, BLOCKED = "needs", "trains", "mixed", "neutral", "scope", "blocked"
# A statement that only compiles or loads into objects being moved: it joins their scope.
JOINS = "joins"
# A notebook cell boundary: a scope block never spans one.
WALL = "wall"


@dataclass
class _Statement:
    category: str
    # Calls in it that must run in the scope, with what they do.
    needing: list[tuple[cst.Call, object]] = field(default_factory=list)
    # Calls that should, but are left alone, with the reason.
    blocked: list[tuple[cst.Call, object, str]] = field(default_factory=list)
    reported: bool = False


class VariablesOutsideScope(Rule):
    CODE = "TFD001"
    NAME = "variables-outside-scope"
    DESCRIPTION = "Model, optimizer, metric or loss objects, load_model and compile outside strategy.scope()"
    EXAMPLES = (
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                'model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
            after=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
        ),
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "with strategy.scope():\n"
                "    model = tf.keras.Sequential([tf.keras.layers.Dense(10)])\n"
                '    model.compile(optimizer="adam", loss="mse")\n'
                "model.fit(dataset, epochs=3)\n"
            ),
        ),
    )

    def applies(self) -> bool:
        # A trainer class may keep its strategy in an attribute (``self.strategy``).
        return super().applies() or bool(TrainingModel.of(self.program).distributed_sites)

    def check(self) -> None:
        crashing = self._keras3_multi_worker_units()
        planner = _Planner(self, dict(crashing))
        planner.plan()
        units = planner.broken_units()
        if units:
            # Part of a training unit cannot be moved: plan again, leaving the whole unit
            # where it is (a model left outside with its compile moved in does not train).
            planner = _Planner(self, {**units, **crashing})
            planner.plan()
        planner.commit()
        self._handed_in()

    def _handed_in(self) -> None:
        """A model or optimizer handed to a function that makes its strategy itself, kept as
        it is (:mod:`autofix.analysis.training.handed_in`): made before that strategy
        existed, so outside its scope. Reported; the fix (building it in the scope) is the
        caller's. An optimizer only where the file may run Keras 3 (Keras 2 trains with it)."""
        for found in handed_in(self.program):
            if found.role == "optimizer" and self.facts.needs_keras2:
                continue
            name = found.parameter.name.value
            strategy = self.program.line(found.strategy)
            effect = (
                "its variables are not mirrored across the replicas" if found.role == "model"
                else 'Keras 3 fails with "Mixing different tf.distribute.Strategy objects"'
            )
            self.report(
                found.assignment,
                f"the {found.role} handed in as {name} was made by the caller before this strategy exists (line {strategy}), "
                f"so outside its scope, and is trained under it (line {self.program.line(found.use)}): {effect}",
                f"assigning it inside strategy.scope() does not move its variables: build the {found.role} in the scope "
                f"(hand in a function that makes it, called inside `with ...scope():`), or make the strategy before the "
                f"caller builds the {found.role} and hand it in too",
            )

    def _keras3_multi_worker_units(self) -> dict[cst.Call, str]:
        """Units trained by a Keras 3 ``fit`` / ``evaluate`` under a MultiWorkerMirroredStrategy:
        outside the scope they train unreplicated, but moved into it ``fit`` fails on every
        worker (keras-team/keras#20585, TFD006). A fix must not turn a running script into a
        crashing one: they are reported, not moved."""
        if not any(s.classes & MULTI_WORKER for s in self.facts.strategies):
            return {}
        workers = MultiWorker.of(self.program)
        if not workers.strategies or not workers.keras.keras3:
            return {}
        found: dict[cst.Call, str] = {}
        for site in TrainingModel.of(self.program).distributed_sites:
            func = site.call.func
            if (
                site.kind == "fit"
                and isinstance(func, cst.Attribute)
                and func.attr.value in KERAS3_FAILING
                and site.strategies
                and site.strategies <= MULTI_WORKER
            ):
                for member in site.members:
                    found.setdefault(
                        member,
                        "on Keras 3, fit cannot train under MultiWorkerMirroredStrategy (TFD006): in the scope it "
                        "fails on every worker; use tf_keras (TF_USE_LEGACY_KERAS=1) or a custom training loop, "
                        "then move it into strategy.scope()",
                    )
        return found


class _Planner:
    """Plans TFD001's edits for one file. Nothing reaches the rule until :meth:`commit`, so
    that a plan can be made, looked at (:meth:`broken_units`) and made again."""

    def __init__(self, rule: Rule, units: dict[cst.Call, str] | None = None) -> None:
        self.rule = rule
        self.program = rule.program
        self.facts = rule.facts
        self.contexts = Contexts.of(rule.program)
        self.training = TrainingModel.of(rule.program)
        self.edits = BlockEdits()
        self.reports: list[tuple[cst.Call, object, str | None]] = []
        # Calls that the plan wraps in a scope, and calls it leaves outside (with why).
        self.wrapped: set[cst.Call] = set()
        # Statements the plan wraps in a scope (by id).
        self.wrapped_statements: set[int] = set()
        self.blocked: dict[cst.Call, str] = {}
        # Members of training units that cannot be fixed whole, with the reason.
        self.units = units or {}
        self._done: set[int] = set()
        # Functions whose body gets its own scope: calls of them need no wrapping.
        self.internal: set[cst.FunctionDef] = set()
        # Statements the plan moves down to where they are used (by id).
        self.moved_down: set[int] = set()
        # Optimizers (and compiles making one) left outside the scope because the file runs
        # Keras 2, which trains with them.
        self.kept_for_keras2: set[cst.Call] = set()
        # Functions never called here but handed as a value to code autofix does not follow,
        # each with the reference that hands it on and why it is not changed.
        self.handed: dict[cst.FunctionDef, tuple[cst.CSTNode, str]] = {}

    def commit(self) -> None:
        reported = {id(self.program.statement_of(call)) for call, _kind, _why in self.reports}
        # Members the plan never reached (made where no strategy is in view), one per statement.
        unreached: dict[int, list[tuple[cst.Call, object, str]]] = {}
        for call, why in self.units.items():
            statement = id(self.program.statement_of(call))
            if statement not in reported and self._needs_scope(call):
                unreached.setdefault(statement, []).append((call, self._kind(call), why))
        self.reports.extend(min(calls, key=lambda ck: _rank(ck[1])) for calls in unreached.values())
        related = self._keras2_pin()
        handed: dict[cst.FunctionDef, list[tuple[cst.Call, object]]] = {}
        for call, kind, why in self.reports:
            function = self._handed_function(call)
            if function is not None:
                handed.setdefault(function, []).append((call, kind))
                continue
            layer = preprocessing_layer(self.facts.names_of(call.func)) if kind is Kind.LAYER else None
            message = _PREPROCESSING.format(layer) if layer else _message(call, kind)
            self.rule.report(call, message, why, related)
        for function, made in handed.items():
            self._suggest_handed(function, made)
        self.rule.edits.extend(self.edits)

    def _handed_function(self, call: cst.Call) -> cst.FunctionDef | None:
        """The handed-on function (see :meth:`_handed_on`) whose code makes ``call``, if any."""
        for ancestor in self.program.ancestors(call):
            if ancestor in self.handed:
                return ancestor  # type: ignore[return-value]
        return None

    def _suggest_handed(self, function: cst.FunctionDef, made: list[tuple[cst.Call, object]]) -> None:
        """One note for a function that builds (and trains) outside any scope but is handed to
        code autofix does not follow: whether that code runs it under a strategy cannot be
        told here, so it is neither a finding per object nor changed, but said once, where the
        function is handed on, with each object it makes as a related place."""
        ref, why = self.handed[function]
        made = sorted(made, key=lambda ck: self.program.line(ck[0]))
        lines = [self.program.line(call) for call, _kind in made]
        related = tuple((None, line, f"{_callee(self.program, call)}() made here") for (call, _kind), line in zip(made, lines))
        span = f"line {lines[0]}" if len(set(lines)) == 1 else f"lines {lines[0]}-{lines[-1]}"
        message = (
            f"{function.name.value}() makes {len(made)} Keras object{'s' if len(made) > 1 else ''} outside strategy.scope() "
            f"({span}) and is handed on here: if the code it is handed to trains them under the strategy, "
            "build them in strategy.scope() there or here"
        )
        self.rule.suggest(ref, message, related=related, reason=why)

    def _keras2_pin(self) -> tuple[tuple[str | None, int, str], ...]:
        """Where the repository pins Keras 2, when that pin is why an optimizer made outside
        the scope (and used under it) is left there: the place the findings name."""
        path = self.program.path
        pin = pins.keras2_pin(path)
        if pin is None or self.facts.needs_keras2 != pin.reason(path):
            return ()
        kept = sorted(
            self.program.line(call)
            for call in self.kept_for_keras2
            if not self.training.under_scope_where_distributed(call) and self.training.takes_part(call)
            and (self._kind(call) is Kind.OPTIMIZER or self.training.creates_optimizer(call))
        )
        if not kept:
            return ()
        lines = ", ".join(str(line) for line in dict.fromkeys(kept))
        return ((pin.path, pin.line, f"{pin.where(path)} {pin.verb} {pin.text}: Keras 2, which trains with the optimizer made "
                 f"outside the scope (line {lines}), so it stays there"),)

    def broken_units(self) -> dict[cst.Call, str]:
        """Members of training units that this plan would fix only in part, each with why the
        unit is left as it is."""
        broken: dict[cst.Call, str] = {}
        for site in self.training.distributed_sites:
            needing = [m for m in site.members if self._needs_scope(m)]
            missing = [m for m in needing if m not in self.wrapped and not self._covered(m)]
            left = {m: why for m in needing if m in self.wrapped for why in [self._adapt_left_outside(m)] if why}
            missing += [m for m in left if m not in missing]
            if not missing:
                continue
            first = missing[0]
            why = left.get(first) or self.blocked.get(first) or self._unreached(first, site)
            if len(needing) == 1:
                reason = why
            else:
                kind = self._kind(first)
                what = f"{kind.name.value}() call" if isinstance(kind, cst.FunctionDef) else _WHAT.get(kind, "Keras object")
                reason = (
                    f"part of a training unit that cannot be fixed whole: the {what} (line "
                    f"{self.program.line(first)}) stays outside strategy.scope() ({why})"
                )
            for member in needing:
                broken.setdefault(member, why if member is first else reason)
        return broken

    def _covered(self, call: cst.Call, seen: frozenset = frozenset()) -> bool:
        """Whether ``call`` is made in a local function every call of which the plan wraps (or
        that runs under a scope already): wrapping ``unfreeze(model)`` puts what ``unfreeze``
        makes in the scope."""
        function = self.program.enclosing_function(call)
        if function is None or function in seen or self.facts.functions[function].is_method:
            return False
        calls = self.facts.direct_calls(function)
        if calls is None:
            return False
        return all(c in self.wrapped or self.facts.under_scope(c) or self._covered(c, seen | {function}) for c in calls)

    def _unreached(self, call: cst.Call, site: Site) -> str:
        """Why a call that needs the scope was neither wrapped nor blocked by the plan."""
        if site.held_in is not None:
            return (
                f"the model is kept in {site.held_in} and made in a method, which autofix does not rewrite; "
                f"build and compile it inside `with {site.holder}.scope():`"
            )
        found = self.contexts.at(call)
        if found is not None and (found[0].index is None or found[1] > found[0].index):
            statement = self.program.statement_of(call)
            return f"it is made inside {_describe(statement)}, where a with block cannot be added around it alone"
        return "it is made where no strategy is in view"

    def _kind(self, call: cst.Call):
        kind = self.facts.call_kind(call)
        if kind is None and self.training.is_model_maker(call):
            return Kind.MODEL  # ``self.build_model()``
        return kind

    def _needs_scope(self, call: cst.Call) -> bool:
        """Whether ``call`` must run inside strategy.scope() and does not."""
        kind = self._kind(call)
        if isinstance(kind, cst.FunctionDef):
            effects = self.facts.effects.get(kind)
            if effects is None or not effects.creates or self.contexts.skip_function(kind):
                return False
        elif not self._makes_variables(call, kind):
            return False
        return not self.training.under_scope_where_distributed(call) and self.training.takes_part(call)

    def _makes_variables(self, call: cst.Call, kind: object) -> bool:
        """Whether ``call`` (a Keras call of ``kind``) makes variables, so that where it runs
        decides their strategy. Loss objects hold none; ``compile`` makes only an optimizer it
        is given by name; loading weights into a model assigns what exists."""
        if kind in (COMPILE, BUILD, Kind.OPTIMIZER) and self.facts.needs_keras2:
            # Keras 2 trains with an optimizer made outside the scope; only Keras 3 refuses it,
            # and this file cannot run on Keras 3.
            self.kept_for_keras2.add(call)
            return False
        if kind == COMPILE:
            return self.training.creates_optimizer(call)
        if kind == BUILD:
            return True  # the optimizer's slots (Keras 3: "Need to be inside `with strategy.scope()`" outside it)
        made = call.func if isinstance(call.func, cst.Call) else call  # ``Dropout(0.5)(x)``: the layer made inline
        if kind is Kind.LAYER and self._holds_no_variables(made):
            return False  # ``keras.Input``: a symbolic tensor; ``Dropout``, pooling: no variables
        if kind is Kind.LAYER and not self._preprocessing_needs_scope(made):
            return False
        if kind is Kind.MODEL and self._preprocessing_only(call):
            return False  # ``Sequential([RandomFlip(), RandomRotation(0.1)])``
        if kind is Kind.LOAD:
            return not (isinstance(call.func, cst.Attribute) and call.func.attr.value in _JOINING_LOADS)
        return isinstance(kind, Kind) and kind is not Kind.LOSS

    # --- preprocessing layers (measured: docs/keras-versions.md, "Preprocessing layers") ------

    @property
    def _keras3(self) -> bool:
        """Whether every Keras the file names is Keras 3 (which keeps what ``adapt()``
        computes where training with it made outside the scope works)."""
        return MultiWorker.of(self.program).keras.keras3

    def _holds_no_variables(self, call: cst.Call) -> bool:
        """Whether ``call`` makes, or calls, a layer of :data:`NO_VARIABLE_LAYERS`: made here
        (``Dropout(0.5)``), or called through a name every binding of which makes one
        (``pool = MaxPooling2D()`` ... ``pool(x)``)."""
        if self.facts.no_variable_layer(call):
            return True
        if not isinstance(call.func, cst.Name):
            return False
        values = [self.facts.assigned_value(node) for node in self.facts.bindings(call.func) or ()]
        return bool(values) and all(isinstance(v, cst.Call) and self.facts.names_of(v.func) & NO_VARIABLE_LAYERS for v in values)

    def _preprocessing_needs_scope(self, call: cst.Call) -> bool:
        """A Keras preprocessing layer holds variables a model built in the scope must get
        from the scope only when ``adapt()`` fills them and the file may run on tf_keras;
        the others hold none (a lookup table, or nothing), or none that training updates."""
        layer = preprocessing_layer(self.facts.names_of(call.func))
        if layer is None:
            return True
        return layer in ADAPTED_PREPROCESSING and not self._keras3

    def _preprocessing_only(self, call: cst.Call) -> bool:
        """``Sequential([...])`` of preprocessing layers that hold no variables to mirror."""
        if not self.facts.names_of(call.func) & _SEQUENTIAL:
            return False
        layers = argument_value(call, "layers", 0)
        if not isinstance(layers, (cst.List, cst.Tuple)) or not layers.elements:
            return False
        for element in layers.elements:
            value = element.value
            if not isinstance(value, cst.Call) or isinstance(element, cst.StarredElement):
                return False
            names = self.facts.names_of(value.func)
            if names & NO_VARIABLE_LAYERS:
                continue
            if preprocessing_layer(names) is None or self._preprocessing_needs_scope(value):
                return False
        return True

    def _adapt_calls(self, call: cst.Call) -> list[cst.Call]:
        """The ``adapt()`` calls of the adapted preprocessing layer ``call`` makes (through the
        name it is bound to)."""
        if preprocessing_layer(self.facts.names_of(call.func)) not in ADAPTED_PREPROCESSING:
            return []
        target = self.facts.assigned_name(call)
        found = []
        for use in self.facts.uses(target) if target is not None else ():
            attribute = self.program.parent(use)
            if isinstance(attribute, cst.Attribute) and attribute.value is use and attribute.attr.value == "adapt":
                adapt = self.program.parent(attribute)
                if isinstance(adapt, cst.Call) and adapt.func is attribute:
                    found.append(adapt)
        return found

    def _adapts_layer_moved(self, call: cst.Call) -> bool:
        """``norm.adapt(x)`` where ``norm`` is made outside the scope and must move into it:
        on tf_keras its variables are made by ``adapt()``, so it moves with the layer."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "adapt" and isinstance(func.value, cst.Name)):
            return False
        for binding in self.facts.bindings(func.value) or ():
            value = None if isinstance(binding, cst.Param) else self.facts.assigned_value(binding)
            if isinstance(value, cst.Call) and call in self._adapt_calls(value) and self._needs_scope(value):
                return True
        return False

    def _adapt_left_outside(self, call: cst.Call) -> str | None:
        """Why moving the preprocessing layer ``call`` makes would change nothing: one of its
        ``adapt()`` calls stays outside the scope, and tf_keras makes its variables there."""
        if preprocessing_layer(self.facts.names_of(call.func)) not in ADAPT_MAKES_VARIABLES:
            return None
        for adapt in self._adapt_calls(call):
            if any(id(a) in self.wrapped_statements for a in self.program.ancestors(adapt)) or self.training.under_scope_where_distributed(adapt):
                continue
            return (
                f"its adapt() (line {self.program.line(adapt)}) cannot move into strategy.scope() with it: tf_keras "
                "makes the layer's variables where adapt() runs, so moving the layer alone changes nothing; make and "
                "adapt it in the scope"
            )
        return None

    def plan(self) -> None:
        contexts = list(self.contexts.created)
        # Functions that build and train, run where a strategy made earlier is visible, get a
        # scope in their body; functions that only build (factories) are wrapped where called.
        for function, effects in self.facts.effects.items():
            if not (effects.creates and effects.trains) or self.contexts.skip_function(function):
                continue
            if any(self.contexts.function_of(c.block) is function for c in contexts):
                continue
            context = self.contexts.function_context(function)
            if context is not None:
                contexts.append(context)
        for context in contexts:
            function = self.contexts.function_of(context.block)
            if function is not None:
                self.internal.add(function)
        for context in contexts:
            self._process(context)

    # --- what each statement does --------------------------------------------------------------

    def _classify(self, statement: cst.BaseStatement, strategy: Strategy) -> _Statement:
        if is_wall(statement):
            return _Statement(WALL)
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            return _Statement(NEUTRAL)
        if self.facts.scope_with_strategy_name(statement) is not None and self.facts.enters_same_strategy(statement, strategy):
            return _Statement(SCOPE)
        needing: list[tuple[cst.Call, object]] = []
        blocked: list[tuple[cst.Call, object, str]] = []
        trains = joins = False
        # Objects only looked at, with everything made inside them (``Sequential([Dense(1)])``).
        inspected: list[cst.Call] = []
        for call in self.facts.calls_in(statement):
            if inspected and any(a is c for c in inspected for a in self.program.ancestors(call)):
                continue
            kind = self.facts.call_kind(call)
            if kind == TRAIN:
                trains = True
                continue
            if self._adapts_layer_moved(call):
                joins = True  # ``norm.adapt(x)``: tf_keras makes the layer's variables here
                continue
            if isinstance(kind, cst.FunctionDef):
                effects = self.facts.effects.get(kind)
                if effects is None or self.contexts.skip_function(kind):
                    continue
                if effects.trains:
                    trains = True
                if not effects.creates or kind in self.internal:
                    continue
            elif not (isinstance(kind, Kind) or kind in (COMPILE, BUILD)):
                continue
            if self.training.under_scope_where_distributed(call) or not self.training.takes_part(call):
                continue
            if not isinstance(kind, cst.FunctionDef) and not self._makes_variables(call, kind):
                joins = True
                continue
            if self.facts.inspection_only(call):
                inspected.append(call)
                continue
            why = self._called_inside_too(kind) if isinstance(kind, cst.FunctionDef) else None
            if self.rule.suppressed(call):
                why = SUPPRESSED
            why = self.units.get(call) or why
            if why:
                blocked.append((call, kind, why))
                self.blocked.setdefault(call, why)
            else:
                needing.append((call, kind))
        if blocked:
            return _Statement(BLOCKED, needing, blocked)
        if needing and trains:
            return _Statement(MIXED, needing)
        if needing:
            return _Statement(NEEDS, needing)
        if trains:
            return _Statement(TRAINS)
        return _Statement(JOINS if joins else NEUTRAL)

    def _called_inside_too(self, function: cst.FunctionDef) -> str | None:
        for ref in self.facts.references(function):
            call = self.program.parent(ref)
            if isinstance(call, cst.Call) and call.func is ref and self.facts.under_scope(call):
                return (
                    f"{function.name.value}() is also called inside strategy.scope() (line {self.program.line(call)}); "
                    "wrap the calls that should be distributed yourself"
                )
        return None

    # --- the plan ------------------------------------------------------------------------------

    def _process(self, context: Context) -> None:
        block = context.block
        if id(block) in self._done:
            return
        self._done.add(id(block))
        body = list(block.body)
        info = [self._classify(s, context.strategy) for s in body]
        order = list(range(len(body)))
        start = 0
        if context.index is not None:
            order = self._order(body, info, context)
            start = order.index(context.index) + 1
        conflict = (
            context.conflict or self._maybe_none(context) or self._maybe_unbound(context) or self._handed_on(context)
            or self._uneven_batch(context) or self._shared_with_a_call_left_outside(context, body, info, order[start:])
        )
        spelled = on_both_paths(self.program, context.strategy.name, block, placeholders=False)
        if conflict is None and spelled is None:
            conflict = (
                f"{context.strategy.name} may be None (line {self.program.line(may_be_none(self.program, context.strategy.name, block, False))}), "
                "and the file does not import tensorflow by name to write a scope that works without it"
            )
        if conflict is None and any(i.category == BLOCKED for i in info[: context.index or 0]):
            # A model that stays outside leaves anything compiled or loaded into it broken:
            # a partial fix would not train, so the rest is reported, not changed.
            conflict = "a Keras object it depends on is made before the strategy and stays outside"
        if conflict:
            for position in order[start:]:
                for call, _kind in info[position].needing:
                    self.blocked.setdefault(call, conflict)
                self._report(info[position], conflict)
            return
        spans: list[ScopeSpan] = []
        first = last = None
        # Statements since the last one that needs the scope, which join the span only if
        # the next one needs it too and they belong with the objects being made.
        between: list[int] = []
        for position in range(start, len(order)):
            index = order[position]
            category = info[index].category
            if category == MIXED and _sub_blocks(body[index]):
                # Its blocks are fixed (and reported) one by one.
                info[index].reported = True
                for sub in _sub_blocks(body[index]):
                    self._process(Context(sub, context.strategy, None, context.conflict))
                category = TRAINS
            self._report(info[index])
            if category in (NEEDS, MIXED) or (category == JOINS and first is not None):
                # A JOINS statement (``model.compile(optimizer=opt)``) goes with the objects it
                # uses, but never starts a scope of its own.
                if first is not None and between:
                    joining = self._belonging(body, info, order, first, between, index)
                    if joining < len(between):
                        if joining:
                            last = between[joining - 1]
                        spans.append(self._span(order, info, first, last))
                        first = None
                if first is None and category != JOINS:
                    first = position
                if first is not None:
                    last = position
                between = []
            elif first is not None and (category in (TRAINS, SCOPE, BLOCKED, WALL) or not _simple(body[index])):
                spans.append(self._span(order, info, first, last))
                first = last = None
                between = []
            elif first is not None:
                between.append(position)
        if first is not None:
            spans.append(self._span(order, info, first, last))
        for span in spans:
            for position in range(span.first, span.last + 1):
                self.wrapped.update(call for call, _kind in info[order[position]].needing)
                self.wrapped_statements.add(id(body[order[position]]))
        if spans or order != sorted(order):
            up = {context.index} if context.index is not None and order.index(context.index) < context.index else set()
            down = {i for i, statement in enumerate(body) if id(statement) in self.moved_down}
            self.edits.add(block, _reorder_and_wrap(order, _merge(spans), spelled or context.strategy.name, up, down))

    def _belonging(self, body, info: list[_Statement], order: list[int], first: int, between: list[int], following: int) -> int:
        """How many of the statements ``between`` (positions after ``first``), from the first
        on, work on the objects the span makes: each reads a name the span binds before it, or
        binds a name the statements from ``following`` on that need the scope read
        (``base.trainable = False``, ``x = tf.concat(...)``, a loss object given to
        ``compile``). Anything else (prints, hyperparameters, file operations) stays outside
        the scope."""
        bound: set[str] = set()
        for position in range(first, between[0]):
            bound |= _names(self.program, body[order[position]])[0]
        later: set[str] = set()
        for index in order[order.index(following):]:
            if info[index].category in (NEEDS, MIXED, JOINS):
                later |= _names(self.program, body[index])[1]
        for count, position in enumerate(between):
            binds, reads = _names(self.program, body[order[position]])
            if not (reads & bound or binds & later):
                return count
            bound |= binds
        return len(between)

    def _maybe_none(self, context: Context) -> str | None:
        """Why the strategy may be None where the context's code runs (a ``strategy = None``
        placeholder that is not overwritten first in the same block), else None."""
        strategy = context.strategy
        for binding in strategy.bindings:
            if binding in strategy.creations or isinstance(binding, cst.Param):
                continue
            statement = self.program.statement_of(binding)
            if (
                context.index is not None
                and self.program.block_of(statement) is context.block
                and (index_of(context.block.body, statement) or 0) < context.index
            ):
                continue
            return (
                f"{strategy.name} may be None here (line {self.program.line(binding)}), so an unconditional "
                f"`with {strategy.name}.scope():` could fail; enter the scope where the strategy is known to exist"
            )
        return None

    def _shared_with_a_call_left_outside(self, context: Context, body, info: list[_Statement], positions: list[int]) -> str | None:
        """Why the fix is refused when a metric or optimizer it would move into the scope is
        also read by a function called where the fix leaves the call outside every scope
        (``METRICS = [...]`` read by ``init_model()``, called once in the scope to train and once
        outside to check a shape): that call would then compile a model made outside the scope
        with objects made in it, which fails ("... was created inside a different distribution
        strategy scope than the model")."""
        moved = {id(call) for p in positions if info[p].category in (NEEDS, MIXED) for call, _kind in info[p].needing}
        fixed = self.contexts.function_of(context.block)  # its own reads move with it
        for p in positions:
            statement = body[p]
            if info[p].category not in (NEEDS, MIXED) or not isinstance(statement, cst.SimpleStatementLine):
                continue
            shared = {id(call) for call, kind in info[p].needing if kind in (Kind.METRIC, Kind.OPTIMIZER)}
            if not shared:
                continue
            for small in statement.body:
                if not (isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)):
                    continue
                value = small.value
                made = [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple)) else [value]
                if not made or not all(id(v) in shared for v in made):
                    continue  # not a metric or optimizer (or a list of them) itself
                name = small.targets[0].target
                for use in self.facts.uses(name):
                    function = self.program.enclosing_function(use)
                    effects = self.facts.effects.get(function) if function is not None else None
                    if function is None or function is fixed or effects is None or not effects.creates:
                        continue  # only a function that makes a model pairs it with the object
                    for ref in self.facts.references(function):
                        call = self.program.parent(ref)
                        if not (isinstance(call, cst.Call) and call.func is ref):
                            continue
                        if id(call) in moved or self.facts.under_scope(call):
                            continue
                        return (
                            f"{name.value} is also read by {function.name.value}(), called outside strategy.scope() on line "
                            f"{self.program.line(call)}: made in the scope, it would be used there with a model made outside it"
                        )
        return None

    def _handed_on(self, context: Context) -> str | None:
        """Why the code of a function that builds and trains is not changed when the function
        is never called in this file but handed, as a value, to code that autofix does not
        follow (``partial(create_model, ...)`` given to another module's class, a thread's
        target): where that code runs it, in a scope or not, and what it does with what it
        returns, is decided there."""
        function = self.contexts.function_of(context.block)
        if function is None or context.index is not None or Callables.of(self.program).call_sites(function):
            return None
        for ref in self.facts.references(function):
            parent = self.program.parent(ref)
            if isinstance(parent, cst.Call) and parent.func is ref or isinstance(parent, cst.Decorator):
                continue
            if isinstance(parent, cst.Arg):
                holder = self.program.parent(parent)
                named = self.program.module.code_for_node(holder.func) if isinstance(holder, cst.Call) else "code"  # type: ignore[union-attr]
                why = (
                    f"{function.name.value}() is never called here but handed to {named}() (line {self.program.line(ref)}), "
                    "which autofix does not follow: whether it runs in strategy.scope(), and what is done with what it "
                    "makes, is decided there"
                )
                self.handed.setdefault(function, (ref, why))
                return why
        return None

    def _uneven_batch(self, context: Context) -> str | None:
        """Why mirroring the model would break the file's ``fit``: the file says how many
        replicas its strategy has (``devices=[...]``, ``CUDA_VISIBLE_DEVICES``) and a ``fit``
        of it is given a batch that does not split evenly over them, which Keras 3 fails on
        once the model is mirrored (it trained, on one device, before the fix)."""
        count = replica_count(self.program, context.strategy.constructions)
        if count is None or count.replicas < 2:
            return None
        sizes = Sizes.of(self.program)
        for call, _owner in self.facts.calls:
            if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "fit"):
                continue
            batch = argument_value(call, "batch_size", 2)
            size = sizes.number(batch) if batch is not None else None
            if isinstance(size, int) and size > 0 and size % count.replicas:
                return (
                    f"the strategy has {count.replicas} replicas (line {self.program.line(count.where)}) and fit's batch of "
                    f"{size} (line {self.program.line(call)}) does not split evenly over them: once the model is mirrored, "
                    "Keras 3 fails on that batch; scale the batch by the replica count (TFD002) first"
                )
        return None

    def _maybe_unbound(self, context: Context) -> str | None:
        """Why the strategy's name may be unbound where the context's code runs (a local bound
        only in a branch: ``if multi_gpu: strategy = ...`` before code after the ``if``), else
        None: entering its scope there would fail on the other paths."""
        name = context.strategy.name
        if not name.isidentifier():
            return None
        where = unbound_on_a_path(self.program, name, context.block, context.index)
        if where is None:
            return None
        return (
            f"{name} is bound only on some paths to here (line {self.program.line(where)}): `with {name}.scope():` "
            "would raise UnboundLocalError on the others; enter the scope where the strategy is made"
        )

    def _order(self, body: list[cst.BaseStatement], info: list[_Statement], context: Context) -> list[int]:
        """The statement order after moving Keras objects made before the strategy: cheap
        ones down to where they are used, and the strategy up above the rest."""
        creation = context.index
        assert creation is not None
        early = [k for k in range(creation) if info[k].category in (NEEDS, MIXED)]
        down: dict[int, int] = {}
        stay: list[int] = []
        for k in early:
            dest = self._down_target(body, info, k, creation)
            if dest is None:
                stay.append(k)
            else:
                down[k] = dest
        order = list(range(len(body)))
        if stay:
            first = stay[0]
            if any(info[j].category in (TRAINS, MIXED) for j in range(first, creation)):
                why = "it is trained before the strategy is created"
            else:
                why = ordering.why_not_move_up(self.program, body, creation, first)
            if why:
                reason = f"made before the strategy is created, which cannot be moved above it: {why}"
                for k in stay:
                    for call, _kind in info[k].needing:
                        self.blocked.setdefault(call, reason)
                    info[k] = _Statement(BLOCKED, [], [(c, kind, reason) for c, kind in info[k].needing])
                    self._report(info[k])
            else:
                order = order[:first] + [creation] + order[first:creation] + order[creation + 1 :]
        for k, dest in sorted(down.items()):
            order.remove(k)
            order.insert(order.index(dest), k)
        self.moved_down.update(id(body[k]) for k in down)
        return order

    def _down_target(self, body, info: list[_Statement], k: int, creation: int) -> int | None:
        """Where the optimizer, loss or metric object made by ``body[k]`` can move to (the
        statement that first uses it, after the strategy), or None."""
        statement = body[k]
        needing = info[k].needing
        if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and len(needing) == 1):
            return None
        call, kind = needing[0]
        if kind not in (Kind.OPTIMIZER, Kind.LOSS, Kind.METRIC) or not self._pure(call):
            return None
        target = self.facts.assigned_name(call)
        if target is None:
            return None
        uses = [self.program.top_statement_in(u, self.program.block_of(statement)) for u in self.facts.uses(target)]
        indexes = [index_of(body, u) for u in uses if u is not None]
        if not indexes or len(indexes) != len(uses) or min(indexes) <= creation:
            return None
        dest = min(indexes)
        if ordering.why_not_move_down(self.program, body, k, dest):
            return None
        return dest

    def _pure(self, call: cst.Call) -> bool:
        """Whether making the object runs no code but Keras constructors (so making it later
        changes nothing else)."""
        for inner in calls_in(call):
            if inner is call:
                continue
            if not any(n.startswith("keras.") for n in self.facts.names_of(inner.func)):
                return False
        return True

    def _span(self, order: list[int], info: list[_Statement], first: int, last: int) -> ScopeSpan:
        hosts = []
        if first > 0 and info[order[first - 1]].category == SCOPE and first - 1 >= 0:
            first -= 1
            hosts.append(first)
        if last + 1 < len(order) and info[order[last + 1]].category == SCOPE:
            last += 1
            hosts.append(last)
        return ScopeSpan(first, last, tuple(hosts))

    def _report(self, statement: _Statement, reason: str | None = None) -> None:
        if statement.reported:
            return
        statement.reported = True
        by_statement: dict[int, list[tuple[cst.Call, object, str | None]]] = {}
        entries = [(c, k, reason) for c, k in statement.needing] + list(statement.blocked)
        for call, kind, why in entries:
            owner = self.program.statement_of(call)
            by_statement.setdefault(id(owner), []).append((call, kind, why))
        for calls in by_statement.values():
            self.reports.append(min(calls, key=lambda ck: _rank(ck[1])))



def _callee(program, call: cst.Call) -> str:
    """What ``call`` calls, as written (``Dense`` for ``Dense(10)(x)``)."""
    func = call.func
    while isinstance(func, cst.Call):
        func = func.func
    return program.module.code_for_node(func)


def _describe(statement: cst.CSTNode | None) -> str:
    names = {cst.If: "an if condition", cst.While: "a while condition", cst.For: "a for header", cst.With: "a with header"}
    for kind, name in names.items():
        if isinstance(statement, kind):
            return name
    return "a statement"


def _simple(statement: cst.BaseStatement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine)


def _names(program, statement: cst.CSTNode) -> tuple[set[str], set[str]]:
    """The names ``statement`` binds and the names it reads."""
    binds: set[str] = set()
    reads: set[str] = set()
    for name in names_in(statement):
        if program.assignment(name) is not None:
            binds.add(name.value)
        else:
            reads.add(name.value)
    if isinstance(statement, cst.SimpleStatementLine):
        # ``base.trainable = False`` changes ``base``: it binds nothing, but writes to it.
        for small in statement.body:
            if isinstance(small, (cst.Assign, cst.AugAssign)):
                targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                for target in targets:
                    if isinstance(target, (cst.Attribute, cst.Subscript)):
                        root = root_name(target)
                        if root is not None:
                            reads.add(root.value)
    return binds, reads


def _reorder_and_wrap(order: list[int], spans: list[ScopeSpan], strategy: str, up: set[int], down: set[int]):
    wrap = wrap_spans(spans, strategy)

    def edit(body):
        return wrap(reordered(body, order, up, down))

    return edit


def _rank(kind: object) -> int:
    if isinstance(kind, cst.FunctionDef):
        return -1
    return _PRIORITY.index(kind) if kind in _PRIORITY else len(_PRIORITY)


def _message(call: cst.Call, kind: object) -> str:
    if isinstance(kind, cst.FunctionDef):
        return f"{kind.name.value}() builds Keras objects outside strategy.scope(), {_WHY}"
    return _MESSAGES.get(kind) or f"{_WHAT.get(kind, 'Keras object created')} outside strategy.scope(), {_WHY}"


def _merge(spans: list[ScopeSpan]) -> list[ScopeSpan]:
    spans = sorted(spans, key=lambda s: s.first)
    merged: list[ScopeSpan] = []
    for span in spans:
        if merged and span.first <= merged[-1].last:
            prev = merged.pop()
            span = ScopeSpan(prev.first, max(prev.last, span.last), tuple(sorted(set(prev.hosts) | set(span.hosts))))
        merged.append(span)
    return merged


def _sub_blocks(statement: cst.BaseStatement) -> list[cst.IndentedBlock]:
    """The indented bodies of a compound statement (if/else, for, while, try, with), or []
    when one of them is a one-line suite that cannot hold a ``with``."""
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)) or not isinstance(statement, cst.BaseCompoundStatement):
        return []
    blocks: list = []

    def add(suite) -> bool:
        if suite is None:
            return True
        if isinstance(suite, cst.IndentedBlock):
            blocks.append(suite)
            return True
        return False

    ok = add(statement.body)
    orelse = getattr(statement, "orelse", None)
    while ok and isinstance(orelse, cst.If):
        ok = add(orelse.body)
        orelse = orelse.orelse
    if ok and orelse is not None:
        ok = add(orelse.body)
    for handler in getattr(statement, "handlers", ()):
        ok = ok and add(handler.body)
    final = getattr(statement, "finalbody", None)
    if ok and final is not None:
        ok = add(final.body)
    if isinstance(statement, cst.Match):
        for case in statement.cases:
            ok = ok and add(case.body)
    return blocks if ok else []
