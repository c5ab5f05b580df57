"""The value flow (analysis/core/value_flow.py) on the shapes that real files take: a module-level name
bound again and again (a notebook, cell after cell) read in a function, and a value handed to a
custom ``compile()`` and read back from ``self`` in the step."""

from __future__ import annotations

import libcst as cst

from autofix.analysis.facts.script import Facts
from autofix.analysis.steps.lossobjects import loss_objects, object_uses
from autofix.analysis.program import Program
from autofix.analysis.syntax import nodes_in
from autofix.engine import _parsed


def _program(source: str) -> Program:
    return Program(*_parsed(source))


def _values_read(source: str, name: str, function: str) -> list[str]:
    """What the reads of ``name`` inside ``function`` may be bound to, as source."""
    program = _program(source)
    facts = Facts.of(program)
    found = []
    for definition in nodes_in(program.module, cst.FunctionDef):
        if definition.name.value != function:
            continue
        for read in nodes_in(definition.body, cst.Name):
            if read.value == name and program.access(read) is not None:
                found.extend(program.module.code_for_node(facts.assigned_value(b)) for b in facts.reaching_bindings(read) or [])
    return sorted(set(found))


CELLS = (
    "import keras\n"
    "\n"
    "loss_fn = keras.losses.MeanSquaredError()\n"
    "\n"
    "def step(y, p):\n"
    "    return loss_fn(y, p)\n"
    "\n"
    "step(1, 2)\n"
    "loss_fn = keras.losses.MeanAbsoluteError()\n"
)


def test_a_function_sees_the_binding_made_before_its_call_not_a_later_one():
    assert _values_read(CELLS, "loss_fn", "step") == ["keras.losses.MeanSquaredError()"]


def test_a_function_called_after_the_name_is_bound_again_sees_that_binding():
    source = CELLS + "step(3, 4)\n"
    assert _values_read(source, "loss_fn", "step") == ["keras.losses.MeanAbsoluteError()", "keras.losses.MeanSquaredError()"]


def test_a_binding_after_the_function_but_before_its_only_call_is_the_one_it_sees():
    source = CELLS.replace("step(1, 2)\nloss_fn = keras.losses.MeanAbsoluteError()\n", "loss_fn = keras.losses.MeanAbsoluteError()\nstep(1, 2)\n")
    assert _values_read(source, "loss_fn", "step") == ["keras.losses.MeanAbsoluteError()"]


def test_a_call_in_a_loop_sees_a_binding_made_later_in_the_loop():
    source = CELLS.replace("step(1, 2)\n", "for i in range(2):\n    step(1, 2)\n    loss_fn = keras.losses.Huber()\n")
    assert "keras.losses.Huber()" in _values_read(source, "loss_fn", "step")


def test_a_function_handed_on_may_run_after_any_binding():
    source = CELLS.replace("step(1, 2)\n", "train = tf.function(step)\n") + "train(1, 2)\n"
    assert _values_read(source, "loss_fn", "step") == ["keras.losses.MeanAbsoluteError()", "keras.losses.MeanSquaredError()"]


def test_a_global_write_in_a_helper_is_not_placed_by_where_it_is_written():
    source = CELLS.replace("step(1, 2)\n", "def reset():\n    global loss_fn\n    loss_fn = keras.losses.Huber()\n\nreset()\nstep(1, 2)\n")
    assert "keras.losses.Huber()" in _values_read(source, "loss_fn", "step")


GAN = (
    "import keras\n"
    "import tensorflow as tf\n"
    "\n"
    "class GAN(keras.Model):\n"
    "    def compile(self, optimizer, loss_fn):\n"
    "        super().compile(optimizer=optimizer)\n"
    "        self.loss_fn = loss_fn\n"
    "\n"
    "    def train_step(self, data):\n"
    "        x, y = data\n"
    "        return {'loss': self.loss_fn(y, self(x))}\n"
    "\n"
    "gan = GAN()\n"
    "gan.compile(optimizer='adam', loss_fn=keras.losses.BinaryCrossentropy(from_logits=True))\n"
)


def _step_loss_objects(source: str) -> tuple[Program, list[cst.Call]]:
    program = _program(source)
    facts = Facts.of(program)
    call = next(c for c in nodes_in(program.module, cst.Call) if program.module.code_for_node(c.func) == "self.loss_fn")
    return program, loss_objects(facts, call.func)


def test_a_loss_given_to_a_custom_compile_is_what_the_step_calls():
    program, found = _step_loss_objects(GAN)
    assert [program.module.code_for_node(c) for c in found] == ["keras.losses.BinaryCrossentropy(from_logits=True)"]
    uses = object_uses(Facts.of(program), found)
    assert [program.module.code_for_node(u) for u in uses] == ["self.loss_fn"]


def test_a_file_that_loads_a_saved_model_lets_keras_call_compile_so_the_loss_is_not_known():
    source = GAN + "gan = keras.models.load_model('gan.keras', custom_objects={'GAN': GAN})\n"
    assert _step_loss_objects(source)[1] == []


def test_a_loss_stored_elsewhere_too_is_a_use_that_is_not_followed():
    source = GAN.replace("        self.loss_fn = loss_fn\n", "        self.loss_fn = loss_fn\n        register(loss_fn)\n")
    program, found = _step_loss_objects(source)
    uses = object_uses(Facts.of(program), found)
    assert sorted(program.module.code_for_node(u) for u in uses) == ["loss_fn", "self.loss_fn"]


def test_cloning_another_kind_of_model_does_not_compile_this_one_but_cloning_it_does():
    other = GAN + "student = keras.Sequential([keras.layers.Dense(1)])\ncopy = keras.models.clone_model(student)\n"
    assert len(_step_loss_objects(other)[1]) == 1
    itself = GAN + "copy = keras.models.clone_model(gan)\n"
    assert _step_loss_objects(itself)[1] == []


def test_the_class_named_to_an_old_style_super_is_not_an_object_handed_on():
    """``super(GAN, self).__init__()`` names the class without making an object of it: what
    ``__init__`` stores still comes from the file's one construction."""
    source = (
        "import keras\n"
        "\n"
        "class GAN(keras.Model):\n"
        "    def __init__(self, discriminator):\n"
        "        super(GAN, self).__init__()\n"
        "        self.discriminator = discriminator\n"
        "\n"
        "    def train_step(self, data):\n"
        "        return self.discriminator(data)\n"
        "\n"
        "gan = GAN(keras.Sequential([keras.layers.Dense(1)]))\n"
    )
    program = _program(source)
    facts = Facts.of(program)
    read = next(a for a in nodes_in(program.module, cst.Attribute) if program.module.code_for_node(a) == "self.discriminator" and program.line(a) == 9)
    assert [program.module.code_for_node(o.node) for o in facts.values.origins(read)] == ["keras.Sequential([keras.layers.Dense(1)])"]


def test_a_decorators_first_parameter_is_the_function_it_decorates():
    """``@distributed`` over ``def step``: the decorator's ``fn`` is ``step``; a class used as a
    decorator gets it in ``__init__``."""
    for decorator in (
        "def distributed(fn, retries=2):\n    return lambda *a: fn(*a)\n",
        "class distributed:\n    def __init__(self, fn):\n        self.fn = fn\n",
    ):
        source = decorator + "@distributed\ndef step(x):\n    return x\n"
        program = _program(source)
        values = Facts.of(program).values
        param = next(p for p in nodes_in(program.module, cst.Param) if p.name.value == "fn")
        origins = values.binding_origins(param)
        assert [type(o.node).__name__ for o in origins] == ["FunctionDef"]
        assert origins[0].node.name.value == "step"


# A step handed to strategy.run by a wrapper the loop calls (what a migration writes), in a file
# that binds the model again and again, some of them in strategy.scope().
WRAPPED = (
    "import keras\n"
    "import tensorflow as tf\n"
    "\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "model = keras.Sequential([keras.layers.Dense(1)])\n"
    "with strategy.scope():\n"
    "    model = keras.Sequential([keras.layers.Dense(2)])\n"
    "with strategy.scope():\n"
    "    model = keras.Sequential([keras.layers.Dense(3)])\n"
    "\n"
    "def step(x):\n"
    "    return model(x)\n"
    "\n"
    "def distributed_step(x):\n"
    "    return strategy.run(step, args=(x,))\n"
    "\n"
    "for x in [1.0]:\n"
    "    distributed_step(x)\n"
    "{after}"
)


def test_a_step_run_through_a_wrapper_reads_what_reaches_the_wrappers_calls():
    """The wrapper is called once, after the last model made in a ``with`` block (which runs
    whenever the ``with`` does): the step reads that one model."""
    assert _values_read(WRAPPED.format(after=""), "model", "step") == ["keras.Sequential([keras.layers.Dense(3)])"]


def test_a_wrapper_also_handed_on_may_run_the_step_after_any_binding():
    source = WRAPPED.format(after="callbacks = [distributed_step]\n")
    assert len(_values_read(source, "model", "step")) == 3


def _assigned_before(source: str, function: str) -> list[str | None]:
    """What each ``self.model`` read in ``function`` reads by :meth:`assigned_before`, as
    source (None: not shown)."""
    program = _program(source)
    values = Facts.of(program).values
    found: list[str | None] = []
    for definition in nodes_in(program.module, cst.FunctionDef):
        if definition.name.value != function:
            continue
        for read in nodes_in(definition.body, cst.Attribute):
            if read.attr.value == "model" and isinstance(program.parent(read), cst.Attribute):
                value = values.assigned_before(read)
                found.append(None if value is None else program.module.code_for_node(value))
    return found


METHOD = (
    "class T:\n"
    "    def __init__(self):\n"
    "        self.model = old()\n"
    "    def train(self, flag, items):\n"
    "{body}"
)


def test_an_attribute_assigned_earlier_in_the_method_is_what_it_reads():
    body = "        with scope():\n            self.model = new()\n        self.model.fit()\n"
    assert _assigned_before(METHOD.format(body=body), "train") == ["new()"]
    body = "        self.model = new()\n        if flag:\n            self.model.fit()\n        else:\n            self.model.evaluate()\n"
    assert _assigned_before(METHOD.format(body=body), "train") == ["new()", "new()"]


def test_an_attribute_assigned_where_it_may_not_run_is_not_followed():
    shapes = [
        "        if flag:\n            self.model = new()\n        self.model.fit()\n",  # a condition
        "        self.model = new()\n        self.reset()\n        self.model.fit()\n",  # a method may assign it
        "        self.model = new()\n        helper(self)\n        self.model.fit()\n",  # so may a call given self
        "        self.model = new()\n        for i in items:\n            self.model.fit()\n            self.model = other()\n",
        "        try:\n            self.model = new()\n            run()\n        except E:\n            self.model.fit()\n",
        "        self.model.fit()\n        self.model = new()\n",  # assigned after the read
    ]
    for body in shapes:
        assert _assigned_before(METHOD.format(body=body), "train")[0] is None, body
