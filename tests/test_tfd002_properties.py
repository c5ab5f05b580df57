"""Property tests of TFD002 on generated training scripts: however the batch constant is bound
(plain, tuple, list, augmented, annotated, re-assigned from itself, imported), wherever it and
the strategy live (module level, main(), a local of main()), and whatever else reads it (the
steps of an epoch, a log, validation data, a helper outside main(), a baseline trained without
the strategy, a second training set batched with twice the batch), a fix

- parses, and fixing again changes nothing;
- leaves every public module-level constant with its name and value (another module may import
  it);
- keeps what the file computed consistent: the steps of an epoch count batches of the size the
  training data is now batched with, which is the global batch, and a batch proportional to it
  (``BATCH * 2``) stays so;
- leaves the batch of a model trained without the strategy as it was;
- or is refused with a reason, the file left byte-identical.
"""

from __future__ import annotations

import ast

from hypothesis import given, settings
from hypothesis import strategies as st

from autofix.engine import Options, analyse

# The fix mechanics, as --unsafe-fixes applies them to a batch the file does not call per replica.
TFD002 = Options(select=("TFD002",), unsafe_fixes=True)

FORMS = {
    "plain": "{B} = 64\n",
    "tuple": "{B}, EPOCHS = 64, 2\n",
    "list": "[{B}, EPOCHS] = [64, 2]\n",
    "augmented": "{B} = 32\n{B} *= 2\n",
    "from itself": "{B} = 32\n{B} = {B} * 2\n",
    "annotated": "{B}: int = 64\n",
    "chained": "{B} = EVAL_{B} = 64\n",
    "imported": "from config import BATCH as {B}\n",
}
DATA = "train_ds = tf.data.Dataset.range(1024).map(lambda i: (tf.ones([4]), tf.ones([1]))).repeat().batch({B})\n"
# Another model trained on one device, built otherwise than the distributed one (a model built
# alike and fit at the same batch would be a comparison at one global batch: no finding).
BASELINE = (
    "base = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(8), tf.keras.layers.Dense(1)])\n"
    "base.compile(optimizer='adam', loss='mse')\n"
    "base_ds = tf.data.Dataset.range(64).map(lambda i: (tf.ones([4]), tf.ones([1]))).batch({B})\n"
    "base.fit(base_ds)\n"
)
MODEL = (
    "with strategy.scope():\n"
    "    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])\n"
    "    model.compile(optimizer='adam', loss='mse')\n"
)


@st.composite
def scripts(draw) -> str:
    form = draw(st.sampled_from(sorted(FORMS)))
    name = draw(st.sampled_from(["BATCH", "_BATCH", "batch_size"]))
    layout = draw(st.sampled_from(["module", "main", "local"] if form != "imported" else ["module", "main"]))
    uses = draw(st.sets(st.sampled_from(["steps", "log", "validation", "helper", "baseline", "double"])))
    if layout == "local":
        uses.discard("helper")
    strategy_first = draw(st.booleans())
    constant = FORMS[form].format(B=name)
    body = []
    if "baseline" in uses:
        body.append(BASELINE.format(B=name))
    data = DATA.format(B=name)
    strategy = "strategy = tf.distribute.MirroredStrategy()\n"
    body += [strategy, data] if strategy_first or layout != "module" else [data, strategy]
    if "log" in uses:
        body.append(f"print('batch size', {name})\n")
    if "validation" in uses:
        body.append(DATA.format(B=name).replace("train_ds", "val_ds").replace("range(1024)", "range(256)"))
    if "double" in uses:
        body.append(DATA.format(B=f"{name} * 2").replace("train_ds", "big_ds"))
    fit = ["train_ds", "epochs=1"]
    if "steps" in uses:
        body.append(f"steps = {'steps_for(1024)' if 'helper' in uses else f'1024 // {name}'}\n")
        fit.append("steps_per_epoch=steps")
    else:
        fit.append("steps_per_epoch=4")
    if "validation" in uses:
        fit += ["validation_data=val_ds", f"validation_steps=256 // {name}"]
    body.append(MODEL)
    body.append(f"model.fit({', '.join(fit)})\n")
    if "double" in uses:
        body.append("model.fit(big_ds, epochs=1, steps_per_epoch=2)\n")
    helper = f"def steps_for(n):\n    return n // {name}\n\n\n" if "helper" in uses else ""
    head = "import tensorflow as tf\n"
    if layout == "module":
        return head + constant + helper + "".join(body)
    inner = "".join(body) if layout == "main" else constant + "".join(body)
    main = "def main():\n" + "".join("    " + line + "\n" if line else "\n" for line in inner.splitlines())
    return head + (constant if layout == "main" else "") + helper + main + "\n\nmain()\n"


def public_constants(tree: ast.Module) -> dict[str, list[str]]:
    """What each public name is set to at module level, where that is a constant (a literal,
    or an expression of literals and the name itself, ``BATCH = BATCH * 2``), or imported."""
    found: dict[str, list[str]] = {}

    def pair(target: ast.expr, value: ast.expr, how: str) -> None:
        if isinstance(target, ast.Name):
            read = {n.id for n in ast.walk(value) if isinstance(n, ast.Name)}
            if read <= {target.id} and not any(isinstance(n, ast.Call) for n in ast.walk(value)):
                if not target.id.startswith("_"):
                    found.setdefault(target.id, []).append(how + ast.unparse(value))
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) and len(target.elts) == len(value.elts):
            for element, part in zip(target.elts, value.elts):
                pair(element, part, how)

    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom):
            for alias in statement.names:
                found.setdefault(alias.asname or alias.name, []).append(ast.unparse(statement))
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                pair(target, statement.value, "= ")
        elif isinstance(statement, ast.AugAssign):
            pair(statement.target, statement.value, type(statement.op).__name__ + "= ")
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            pair(statement.target, statement.value, "= ")
    return found


def assignments(tree: ast.Module) -> dict[str, ast.expr]:
    """The value each name is last assigned, anywhere (names are unique in these scripts
    but for the batch constant's own bindings)."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            found[node.targets[0].id] = node.value
    return found


def batch_of(tree: ast.Module, dataset: str) -> str:
    value = assignments(tree)[dataset]
    assert isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "batch"
    return ast.unparse(value.args[0])


def steps_divisor(tree: ast.Module) -> str | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv) and ast.unparse(node.left) in ("1024", "n"):
            return ast.unparse(node.right)
    return None


@settings(max_examples=150, deadline=None)
@given(scripts())
def test_a_fixed_batch_keeps_everything_derived_from_it_consistent(source):
    analysis = analyse(source, TFD002)
    assert analysis.findings, source
    # Never a fix the engine has to throw away (unstable, or not parsing).
    assert analysis.refused is None, (analysis.refused, source)
    if analysis.new_text is None:
        # Refused: said why, changed nothing.
        assert all(f.reason for f in analysis.findings if not f.fixable)
        return
    fixed = analysis.new_text
    after = ast.parse(fixed)
    before = ast.parse(source)
    assert analyse(fixed, TFD002).new_text is None, fixed
    # Public module-level constants keep their names and values.
    kept = public_constants(after)
    for name, statements in public_constants(before).items():
        assert kept.get(name) == statements, (name, fixed)
    # The training data is batched with the global batch, and the steps count those batches.
    batch = batch_of(after, "train_ds")
    divisor = steps_divisor(after)
    if divisor is not None:
        assert divisor == batch, fixed
    values = assignments(after)
    defined = ast.unparse(values[batch]) if batch in values else batch
    assert "num_replicas_in_sync" in defined, fixed
    # A batch proportional to the constant stays so.
    if "big_ds" in values:
        assert batch_of(after, "big_ds") in (f"{batch} * 2", f"{batch_of(before, 'train_ds')} * 2 * strategy.num_replicas_in_sync"), fixed
    # A model trained without the strategy keeps its batch.
    if "base_ds" in values:
        assert batch_of(after, "base_ds") == batch_of(before, "base_ds"), fixed
