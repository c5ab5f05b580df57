"""Where batched data goes: from a ``.batch(n)`` (or a ``batch_size=``) to the ``fit``,
``evaluate``, ``predict`` or ``strategy.experimental_distribute_dataset`` that consumes it.

Data is followed through method chains (``.prefetch()``, ``.repeat()``...), names, tuples
(``train, val = make()``, a batch unpacked ``x, y = batch`` or a part of it given on,
``step(batch[0])``), ``return`` and the call sites of
local functions, into the parameters of local functions (also of a function a local factory
made and returned: ``step = make_step(...)``; ``step(batch)``), and through what iterates it unchanged
(``iter``, ``next``, ``zip``, ``enumerate``, a progress bar: ``tqdm(dataset)``). Anything else (attributes, containers, other modules) ends
the trail: such data is not claimed to reach training.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from autofix.analysis import Derived
from autofix.analysis.facts.callees import Callables
from autofix.analysis.facts.script import Facts
from autofix.analysis.program import Program
from autofix.analysis.syntax import argument_value, parameter_for

# Dataset methods that return a dataset carrying the same batches.
PASSTHROUGH = frozenset(
    {
        "prefetch",
        "repeat",
        "cache",
        "map",
        "shuffle",
        "take",
        "skip",
        "filter",
        "apply",
        "with_options",
        "ignore_errors",
        "enumerate",
        "concatenate",
        "shard",
    }
)
TRAIN_SINKS = frozenset({"fit", "fit_generator", "train_on_batch"})
EVALUATE_SINKS = frozenset({"evaluate", "evaluate_generator", "test_on_batch"})
PREDICT_SINKS = frozenset({"predict", "predict_generator", "predict_on_batch"})
DISTRIBUTE_SINKS = frozenset({"experimental_distribute_dataset"})
# Keras loaders that batch what they load (batch_size defaults to 32).
LOADERS = frozenset(
    {
        "keras.utils.image_dataset_from_directory",
        "keras.preprocessing.image_dataset_from_directory",
        "keras.utils.text_dataset_from_directory",
        "keras.preprocessing.text_dataset_from_directory",
        "keras.utils.audio_dataset_from_directory",
        "keras.utils.timeseries_dataset_from_array",
        "keras.preprocessing.timeseries_dataset_from_array",
    }
)
LOADER_DEFAULT_BATCH = 32
# Progress bars: iterating one iterates what it wraps, item by item, unchanged (a
# distributed dataset too, measured: ``tqdm`` then shows no total, as it has no ``len``).
PROGRESS_BARS = frozenset(
    {"tqdm.tqdm", "tqdm.std.tqdm", "tqdm.auto.tqdm", "tqdm.autonotebook.tqdm", "tqdm.notebook.tqdm", "tqdm.tqdm_notebook", "tqdm.notebook.tqdm_notebook"}
)
# Calls whose result carries the batches of their arguments.
_SAME_BATCHES = frozenset({"builtins.iter", "builtins.next", "builtins.enumerate", "builtins.zip", "tensorflow.data.Dataset.zip"}) | PROGRESS_BARS


def progress_bar_iterable(facts: Facts, call: cst.Call) -> cst.BaseExpression | None:
    """What the progress bar ``call`` iterates (``tqdm(dataset, total=n)``: ``dataset``), when
    ``call`` makes one."""
    if not facts.names_of(call.func) & PROGRESS_BARS:
        return None
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None or arg.keyword.value == "iterable":
            return arg.value
    return None


@dataclass(frozen=True, eq=False)
class Sink:
    call: cst.Call
    # "train" (what fit trains on), "evaluate" (evaluate, validation_data=), "predict",
    # "distribute" (strategy.experimental_distribute_dataset, followed on), or "step" (given
    # to strategy.run: ``call`` is that run call).
    kind: str


@dataclass
class Flow:
    sinks: list[Sink] = field(default_factory=list)
    # Calls of local functions the data was returned through (their call sites are where
    # a batch-size parameter enters).
    through: list[cst.Call] = field(default_factory=list)

    @property
    def trains(self) -> bool:
        """Whether the data may reach training (a step run by strategy.run may be one)."""
        return any(s.kind in ("train", "step") for s in self.sinks)


class DataFlow(Derived):
    def __init__(self, program: Program) -> None:
        super().__init__(program)
        self.facts: Facts = Facts.of(program)

    def flow(self, expr: cst.CSTNode) -> Flow:
        flow = Flow()
        self._follow(expr, flow, set())
        return flow

    def _follow(self, expr: cst.CSTNode, flow: Flow, seen: set[int]) -> None:
        if id(expr) in seen:
            return
        seen.add(id(expr))
        parent = self.program.parent(expr)
        if isinstance(parent, cst.Attribute) and parent.value is expr:
            call = self.program.parent(parent)
            if isinstance(call, cst.Call) and call.func is parent and parent.attr.value in PASSTHROUGH:
                self._follow(call, flow, seen)
            return
        if isinstance(parent, cst.For) and parent.iter is expr:
            # ``for batch in dataset:``: each batch goes where the loop variable goes; ``for x,
            # y in dataset:``: each part of it (features, labels) is part of the same batch.
            for target in _unpacked_names(parent.target):
                for use in self.facts.uses(target):
                    self._follow(use, flow, seen)
            return
        if isinstance(parent, cst.Arg):
            self._argument(parent, flow, seen)
            return
        if isinstance(parent, cst.Subscript) and parent.value is expr and isinstance(self.program.parent(parent), cst.Arg):
            # ``step(batch[0], batch[1])``: a part of the batch, given on.
            self._follow(parent, flow, seen)
            return
        if isinstance(parent, (cst.Element,)) and isinstance(self.program.parent(parent), cst.Tuple):
            self._tuple_element(parent, flow, seen)
            return
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) or isinstance(parent, cst.AssignTarget):
            target = self.facts.assigned_name(expr) if isinstance(expr, cst.BaseExpression) else None
            if target is not None:
                for use in self.facts.uses(target):
                    self._follow(use, flow, seen)
            elif isinstance(parent, cst.Assign) and parent.value is expr:
                # ``x, y = batch``: each part of it is part of the same batch, as in a loop target.
                for name in (n for t in parent.targets if isinstance(t.target, (cst.Tuple, cst.List)) for n in _unpacked_names(t.target)):
                    for use in self.facts.uses(name):
                        self._follow(use, flow, seen)
            return
        if isinstance(parent, cst.Return):
            function = self._function(parent)
            if function is not None:
                for ref in self.facts.references(function):
                    call = self.program.parent(ref)
                    if isinstance(call, cst.Call) and call.func is ref:
                        flow.through.append(call)
                        self._follow(call, flow, seen)
            return

    def _argument(self, arg: cst.Arg, flow: Flow, seen: set[int]) -> None:
        call = self.program.parent(arg)
        if not isinstance(call, cst.Call):
            return
        func = call.func
        names = self.facts.names_of(func)
        if names & _SAME_BATCHES:
            # ``it = iter(dist_dataset)``, ``next(it)``, ``zip(a, b)``: the same batches (of a
            # progress bar, only what it iterates: not ``total=``).
            if not names & PROGRESS_BARS or progress_bar_iterable(self.facts, call) is arg.value:
                self._follow(call, flow, seen)
            return
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            keyword = arg.keyword.value if arg.keyword else None
            first = call.args and call.args[0] is arg and keyword is None
            if method in TRAIN_SINKS and (first or keyword == "x"):
                flow.sinks.append(Sink(call, "train"))
                return
            if (method in EVALUATE_SINKS and (first or keyword == "x")) or (method in TRAIN_SINKS and keyword == "validation_data"):
                flow.sinks.append(Sink(call, "evaluate"))
                return
            if method in PREDICT_SINKS and (first or keyword == "x"):
                flow.sinks.append(Sink(call, "predict"))
                return
            if method in ("run", "experimental_run_v2") and keyword == "args":
                # ``strategy.run(step, args=inputs)``: the values a run computed per replica.
                flow.sinks.append(Sink(call, "step"))
                return
            if method in DISTRIBUTE_SINKS and self.facts.is_strategy_expr(func.value):
                flow.sinks.append(Sink(call, "distribute"))
                self._follow(call, flow, seen)
                return
        if isinstance(func, cst.Name) and call.args[0] is arg and arg.keyword is None and self._inference(call):
            # ``model(x_batch_val, training=False)``: the batch is only predicted on, each
            # example's output its own whatever the batch (what a metric then accumulates
            # over the examples is the same).
            flow.sinks.append(Sink(call, "predict"))
            return
        definition = self.facts.local_definition(func)
        if isinstance(definition, cst.FunctionDef):
            param = parameter_for(definition, call, arg)
            if param is not None:
                for use in self.facts.uses(param.name):
                    self._follow(use, flow, seen)
        elif definition is None and isinstance(func, cst.Name):
            # A function a local factory made (``step = make_step(strategy)``, ``train_step,
            # test_step = make_steps(...)``): into the functions it may be.
            for callee in Callables.of(self.program).of_call(func)[0]:
                if isinstance(callee.function, cst.FunctionDef) and not callee.bound:
                    param = parameter_for(callee.function, call, arg)
                    if param is not None:
                        for use in self.facts.uses(param.name):
                            self._follow(use, flow, seen)
        elif isinstance(func, cst.Attribute) and not self.facts.is_module_reference(func.value):
            # ``self.train_step(x, y)`` / ``trainer.step(batch)``: into the methods of this
            # file's classes the call runs (its instance passes ``self``).
            callees, _complete = Callables.of(self.program).of_call(func)
            for callee in callees:
                if isinstance(callee.function, cst.FunctionDef) and callee.bound:
                    param = parameter_for(callee.function, call, arg, bound=True)
                    if param is not None:
                        for use in self.facts.uses(param.name):
                            self._follow(use, flow, seen)

    def _inference(self, call: cst.Call) -> bool:
        """A Keras model of the file called with ``training=False`` (said, not defaulted: a
        model called in a training loop without it may be training)."""
        training = argument_value(call, "training")
        return (
            isinstance(training, cst.Name)
            and training.value == "False"
            and isinstance(call.func, cst.Name)
            and self.facts.is_model_name(call.func)
        )

    def _tuple_element(self, element: cst.Element, flow: Flow, seen: set[int]) -> None:
        """``return train, val`` / ``a, b = x, y``: follow the element to the matching name."""
        tuple_node = self.program.parent(element)
        position = list(tuple_node.elements).index(element)  # type: ignore[union-attr]
        holder = self.program.parent(tuple_node)
        if isinstance(holder, cst.Arg) and self.facts.names_of(self.program.parent(holder).func) & _SAME_BATCHES:
            # ``tf.data.Dataset.zip((a, b))``
            self._follow(self.program.parent(holder), flow, seen)
            return
        if isinstance(holder, cst.Arg) and holder.keyword is not None and holder.keyword.value == "args":
            run = self.program.parent(holder)
            if isinstance(run, cst.Call) and isinstance(run.func, cst.Attribute) and run.func.attr.value in ("run", "experimental_run_v2"):
                flow.sinks.append(Sink(run, "step"))
                # What each replica computes from its share (``inputs = strategy.run(
                # step_inputs, args=(x, y))``) goes on where the result goes (the step's run).
                self._follow(run, flow, seen)
            return
        if isinstance(holder, cst.Return):
            function = self._function(holder)
            if function is None:
                return
            for ref in self.facts.references(function):
                call = self.program.parent(ref)
                if isinstance(call, cst.Call) and call.func is ref:
                    flow.through.append(call)
                    target = self.facts.unpacked_name(call, position)
                    if target is not None:
                        for use in self.facts.uses(target):
                            self._follow(use, flow, seen)
        elif isinstance(holder, cst.Assign):
            target = self.facts.unpacked_name(tuple_node, position)
            if target is not None:
                for use in self.facts.uses(target):
                    self._follow(use, flow, seen)

    def _function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        for ancestor in self.program.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
            if isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
                return None
        return None


def _unpacked_names(target: cst.BaseExpression) -> list[cst.Name]:
    """The names a loop target binds: itself, or those of a tuple or list it unpacks into
    (nested ones too: ``for step, (x, y) in enumerate(dataset)``)."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in _unpacked_names(element.value)]
    return []
