"""TFD004 unscaled-custom-loss: a custom step's loss not reduced correctly across replicas.

In a step passed to ``strategy.run`` (or the ``train_step`` of a Keras model made in the
scope, which ``fit`` runs that way) each replica sees 1/N of the global batch and the
optimizer sums the replicas' gradients. Each replica's loss must therefore be its share of the
global loss: a mean over its examples divided by the number of replicas (what Keras 3 does
for a default-reduction loss object, and what ``tf.nn.compute_average_loss`` does for one loss
per example), and regularization divided by it too (``tf.nn.scale_regularization_loss``).

Only the loss counts: what a step (or anything it calls in this file: helpers, methods,
lambdas, a loss object's own ``__call__``) differentiates with ``tape.gradient``,
``tf.gradients`` or ``optimizer.minimize``, followed backwards term by term
(:mod:`autofix.analysis.steps.losses`). A ``reduce_mean`` that only feeds a metric or a log is not a
finding. Found, with what it does (measured on TF 2.21, Keras 3.15 and tf_keras 2.21):

- ``tf.reduce_mean`` of a replica's values, not divided by the replica count on its way to the
  gradient (a division inside ``tf.grad_pass_through`` does not count): gradients N times too
  large, on every Keras. Also one returned by the ``__call__`` of a ``Loss`` subclass (which
  skips Keras's own scaling) or by its ``call`` (a scalar passes Keras's reduction unscaled).
- ``model.losses`` added unscaled: the regularization counts N times, on every Keras.
- a loss object with the default reduction: Keras 2 rejects it under a strategy, Keras before
  3.8 does not divide it by the replica count; Keras >= 3.8 does (correct there);
- the same divided by the replica count again: divided twice on Keras >= 3.8.

Fixed, rank by rank the same as Keras's own reduction (a per-token loss of shape (batch, T)
is averaged over every entry, never summed over T): a mean becomes ``tf.reduce_mean(x) /
<replicas>``, ``model.losses`` summed becomes ``tf.nn.scale_regularization_loss(...)``, a
default-reduction loss object gets ``reduction="none"`` and its call becomes
``tf.reduce_mean(loss(...)) / <replicas>`` (the replica count divided by hand is kept where
there is one). ``<replicas>`` is the strategy's ``num_replicas_in_sync`` where the strategy
that runs the step is in view, else ``tf.distribute.get_replica_context()``'s.

A loss is fixed whole or not at all: every unscaled term of it, or none, so that the balance
between its terms never changes; and only when every use of a value the fix changes is
accounted for (:mod:`autofix.analysis.steps.changed_values`: the gradient, ``strategy.reduce(SUM, ...)``
of what the step returns). When another use is not (a metric, a log, what ``train_step``
returns to Keras, a helper also used for evaluation, ``ReduceOp.MEAN``) and every term is a
per-replica mean (or the summed ``model.losses``), the loss is left as it is and the tape
differentiates its share instead: ``tape.gradient(loss / <replicas>, ...)``, computed in the
tape's ``with`` block (``replica_loss = loss / <replicas>`` at its end when the gradient is
taken after it), so every other use keeps the value it had.

A per-replica mean (or the summed ``model.losses``) added to every example of a per-example
loss (``tf.nn.compute_average_loss(per_example + 0.1 * tf.reduce_mean(reg), global_batch_size=GB)``,
or such a tensor divided by the global batch and differentiated unreduced) goes where the
examples go: each replica adds B_r / GB of it and the shares add up to it once (measured,
docs/losses.md); it is no finding.

A step that clips its gradients per replica (``tf.clip_by_global_norm``, ``tf.clip_by_norm``,
``tf.clip_by_value``) has the clip's threshold divided with the loss (``C / <replicas>``): its
update is then exactly the old one divided by N (measured); kept as it is, the clip would act N
times later. Refused where the clip cannot follow: a norm of its own (``use_norm=``), an
optimizer's own clip on Keras 3, a loss whose fix divides only some of its terms.

Not fixed (reported, or left alone):
- a value added both to every example of a global average (where it is right) and once more
  (where it is N times too large): dividing it would change the right use too;
- correct code: the TensorFlow guide's pattern (``reduction="none"`` + ``compute_average_loss``),
  a ``reduction="sum"`` loss divided by the global batch, a per-replica mean divided by the
  replica count (or multiplied by its inverse) before the gradient, losses used only through
  ``compile``/``fit``, any step under a one-replica strategy, and a step that averages its
  gradients across replicas itself (``all_reduce``, ``experimental_aggregate_gradients=False``),
  or returns them, unapplied, to another ``strategy.run`` step that does (gradient
  accumulation whose learning rate is divided by the replica count by hand);
- a loss with a term whose reduction is not known here (a model's output, a function of
  another module that cannot be followed, a mean over given axes, a product of two losses), or
  a term reached both divided by the replica count and not;
- a term made in another module of the project: a function there (``from losses import
  compute_loss``, or passed to the step as an argument by every call in this file:
  ``fit(ds, compute_loss)``), or the ``call`` of a Keras layer class there held by ``self``
  (``self.vq = VQ(...)``, its loss read as ``self.vq(z)["commitment"]``), that returns a
  per-replica mean (followed term by term in that module alone, through its own helpers, a
  dict entry read as ``loss_dict["total"]``, a tuple element unpacked; a function there that
  returns its argument as it is, ``record(loss, metric)``, is that argument) is reported at the mean in that module, naming the step that uses it (``used by
  trainer.py:26``), and never fixed: the function may also serve code that is right with it
  (an evaluation outside ``strategy.run``), and the rest of that loss is then not fixed either.
  A function whose mean depends on what its caller passes (a weight or divisor parameter), or
  that returns a loss object's call, is not judged from there;
- a value the fix would change that is also logged, fed to a metric, compared, stored, or
  averaged by the caller with ``ReduceOp.MEAN``, when its loss cannot be scaled at the tape
  instead (a term that is not a per-replica mean, a value also added up with
  ``ReduceOp.SUM``, a gradient not taken by a ``GradientTape`` made in a ``with`` block);
- a loss object also used outside custom steps (``compile``, evaluation) unless it is a
  default-reduction object held by a name that only Keras losses are bound to, each by a
  statement of its own (the name is kept for those uses, and the steps get one of their own,
  ``<name>_per_example = Loss(..., reduction="none")``, bound after each binding of it);
- a default-reduction loss whose predictions may carry a Keras mask (the default reduction
  averages over unmasked entries only), or a loss object made elsewhere, or a ``Loss``
  subclass (its reduction is its own).
"""

from __future__ import annotations

import os

import libcst as cst

from autofix.analysis.facts.callees import Callables, tf_names
from autofix.analysis.facts.contexts import unbound_on_a_path
from autofix.analysis.facts.strategies import may_be_none
from autofix.analysis.migration.clipping import PER_TENSOR, Clipping
from autofix.analysis.steps.caller_objects import caller_gradients
from autofix.analysis.steps.lossobjects import keras_own, loss_objects, object_uses
from autofix.analysis.steps.losses import RemoteTerm, Term, is_batch_sum, loss_walk
from autofix.analysis.steps.masking import mask_source
from autofix.analysis.training.multiworker import MultiWorker
from autofix.analysis.steps.custom import Steps
from autofix.analysis.syntax import argument_value, attribute_path
from autofix.analysis.steps.changed_values import summed, unaccounted_use, unaccounted_uses
from autofix.codegen import BlockEdits, NotFound, fresh_name, module_alias, visible_at, with_reduction_none
from autofix.rule import Example, Rule
from autofix.tf.symbols import Kind

MEAN_MESSAGE = (
    "loss averaged over one replica's batch (reduce_mean, or divided by that batch's size): "
    "gradients are summed across replicas, so they come out N times too large; divide it by "
    "the number of replicas"
)
COUNT_MEAN_MESSAGE = (
    "loss normalised by a count of one replica's own examples (a mean over them): gradients are "
    "summed across replicas, so they come out about N times too large; divide it by that count "
    "summed over the replicas instead"
)
CALL_MEAN_MESSAGE = (
    "Loss subclass whose call() returns a mean: Keras passes a scalar through its reduction "
    "without dividing it by the replica count, so gradients come out N times too large"
)
SHARE_MESSAGE = (
    "loss divided by one replica's share of the batch (a size computed by dividing by the "
    "replica count, whatever its name says), not by the global batch: each replica returns its "
    "own mean and the summed gradients come out N times too large"
)
REGULARIZATION_MESSAGE = (
    "regularization losses (model.losses) added on every replica: gradients are summed across "
    "replicas, so the regularization counts N times; scale it with tf.nn.scale_regularization_loss"
)
DEFAULT_MESSAGE = (
    "loss object with the default reduction in a custom step: Keras 2 rejects it under a "
    "strategy and Keras 3 before 3.8 does not divide it by the replica count (3.8 and later "
    "do); use reduction='none' and divide its mean by the replica count"
)
TWICE_MESSAGE = (
    "loss divided by num_replicas_in_sync on top of a default-reduction loss: Keras >= 3.8 "
    "already divides by the replica count, so this divides twice"
)
SUM_MESSAGE = (
    "loss summed over the batch, migrated from one device: on N replicas the replicas' "
    "gradients are summed, N times the average of the original's gradients; divide it by "
    "the number of replicas"
)
BYPASSED_REASON = (
    "the division by the replica count on line {line} is inside tf.grad_pass_through: it "
    "scales the value but not the gradient; divide the loss itself"
)


class UnscaledCustomLoss(Rule):
    CODE = "TFD004"
    NAME = "unscaled-custom-loss"
    DESCRIPTION = "Custom training step whose loss is not averaged over the global batch"
    EXAMPLES = (
        Example(
            before=(
                "import keras\n"
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "\n"
                "\n"
                "def train_step(inputs):\n"
                "    x, y = inputs\n"
                "    with tf.GradientTape() as tape:\n"
                "        loss = tf.reduce_mean(keras.losses.mean_squared_error(y, model(x, training=True)))\n"
                "    grads = tape.gradient(loss, model.trainable_variables)\n"
                "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
                "\n"
                "\n"
                "strategy.run(train_step, args=(batch,))\n"
            ),
            after=(
                "import keras\n"
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                "\n"
                "\n"
                "def train_step(inputs):\n"
                "    x, y = inputs\n"
                "    with tf.GradientTape() as tape:\n"
                "        loss = tf.reduce_mean(keras.losses.mean_squared_error(y, model(x, training=True))) / strategy.num_replicas_in_sync\n"
                "    grads = tape.gradient(loss, model.trainable_variables)\n"
                "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
                "\n"
                "\n"
                "strategy.run(train_step, args=(batch,))\n"
            ),
        ),
        Example(
            before=(
                "import tensorflow as tf\n"
                "\n"
                "strategy = tf.distribute.MirroredStrategy()\n"
                'loss_object = tf.keras.losses.MeanSquaredError(reduction="none")\n'
                "\n"
                "\n"
                "def train_step(inputs):\n"
                "    x, y = inputs\n"
                "    with tf.GradientTape() as tape:\n"
                "        per_example = loss_object(y, model(x, training=True))\n"
                "        loss = tf.nn.compute_average_loss(per_example, global_batch_size=64)\n"
                "    grads = tape.gradient(loss, model.trainable_variables)\n"
                "    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
                "\n"
                "\n"
                "strategy.run(train_step, args=(batch,))\n"
            ),
        ),
    )

    def applies(self) -> bool:
        """A file that makes a strategy, or runs a step with ``strategy.run`` on one made
        elsewhere (``self.distribute_strategy.run(self._train_step, ...)`` in a model class,
        ``self.strategy.run`` in a trainer handed its strategy by another module)."""
        return bool(self.facts.strategies) or bool(Steps.of(self.program).runs)

    def check(self) -> None:
        self.steps = Steps.of(self.program)
        if not self.steps.roots:
            return
        self.callables = Callables.of(self.program)
        self.tf = module_alias(self.program, "tensorflow")
        # Loss objects already given reduction="none" by an earlier fix in this file.
        self.reconstructed: set[int] = set()
        # Names given to replicas' shares of losses in this run.
        self.reserved: set[str] = set()
        # Loss objects given a twin with reduction="none" for the steps (by construction).
        self.twins: dict[tuple, str] = {}
        # Calls of a loss object outside the steps given the steps' rewrite in this run.
        self.rewritten: set[int] = set()
        # Values added to what a sum or a global average of the loss reduces (by node), with
        # that call.
        self.under: dict[int, cst.Call] = {}
        # Losses whose gradients are clipped in a way the fix cannot make follow (by gradient
        # call), and the clips already made to follow a loss's scaling (by id).
        self.clip_refused: dict[cst.Call, str] = {}
        self.clips_done: set[int] = set()
        # Each differentiated value (by its gradient call), with the steps that reach it and
        # its terms.
        losses: dict[cst.Call, tuple[list[cst.FunctionDef], list[Term]]] = {}
        for root in self.steps.roots:
            if self.steps.aggregates_itself(root) or self.steps.combined_by_hand(root):
                continue  # gradients averaged by hand: a per-replica mean is what that wants
            for call, target in self.steps.gradient_targets(root):
                if call in losses:
                    losses[call][0].append(root)
                else:
                    walk = loss_walk(self.steps, target)
                    losses[call] = ([root], walk.terms)
                    for term, reducing in walk.under:
                        self.under.setdefault(id(term.node), reducing)
            # What a method of an object given by another module's caller differentiates
            # (``loss_value, grads = obj.grad()``): its terms are that module's.
            for call, terms in caller_gradients(self.steps, root):
                if call in losses:
                    losses[call][0].append(root)
                else:
                    losses[call] = ([root], terms)
        findings: dict[object, _Finding] = {}
        for gradient, (roots, terms) in losses.items():
            for term in terms:
                key = term.node if term.remote is None else (term.node, term.remote)
                finding = findings.setdefault(key, _Finding(term.node, term.remote))
                finding.paths.append(term)
                finding.roots.extend(r for r in roots if r not in finding.roots)
                finding.losses.append(gradient)
        for finding in findings.values():
            finding.message = self._message(finding)
            if finding.remote is not None and finding.message is not None and finding.why is None:
                # Not fixed in the other module, so no term of its loss is fixed here alone.
                finding.why = (
                    f"{finding.remote.function}() may also serve code that is right with it (an evaluation "
                    "outside strategy.run); divide its value by the replica count in the step that uses it"
                )
                if finding.remote.detail == "count":
                    finding.why = (
                        f"{finding.remote.function}() may also serve code that is right with it (an evaluation "
                        "outside strategy.run); what divides it counts this replica's own examples: sum that "
                        "count over the replicas (tf.distribute.get_replica_context().all_reduce('sum', count)) "
                        "for the step, or divide its value by the replica count in the step that uses it (each "
                        "replica then weighs alike, not each example)"
                    )
                finding.final = True
        self._decide(findings, losses)
        at_tape = self._at_the_tape(findings, losses)
        if self._migrating:
            self._shown_shares(findings)
        if self._one_reduction(findings):
            at_tape = {g: plan for g, plan in at_tape.items() if all(f.why is None for f in findings.values() if g in f.losses and f.message is not None)}
            for finding in findings.values():
                finding.at_tape = finding.at_tape and finding.why is None
        for finding in findings.values():
            if finding.message is None:
                continue
            if finding.remote is not None:
                self._report_elsewhere(finding)
            elif finding.why is not None:
                self.report(finding.node, finding.message, finding.why)
            elif finding.at_tape and finding.kind == "default":
                # Its mean (reduction="none") is the replica's; the tape takes the share.
                self.fix(finding.node, finding.message, lambda edits, f=finding: self._plan(f, edits, at_tape=True))
            elif finding.at_tape:
                self.report(finding.node, finding.message)
            else:
                self.fix(finding.node, finding.message, lambda edits, f=finding: self._plan(f, edits))
        for plan in at_tape.values():
            self.edits.extend(plan)

    def _report_elsewhere(self, finding: "_Finding") -> None:
        """A term made in another module of the project (``losses.py``'s ``reduce_mean``): reported
        at its place there, naming where this file's step uses it. Never fixed there (the
        function may serve code that is right with it: an evaluation outside ``strategy.run``);
        nor is the rest of the loss here (that would change the balance between its terms)."""
        remote = finding.remote
        assert remote is not None and finding.message is not None and finding.why is not None
        here = self.program.path or "<stdin>"
        used = f"used by {os.path.basename(here)}:{self.program.line(finding.node)}"
        place = (remote.path, remote.line, remote.column, remote.end_line, remote.end_column, remote.suppressed(self.CODE))
        self.report_elsewhere(finding.node, finding.message, finding.why, place, used)

    # --- what each term is ---------------------------------------------------------------------

    def _message(self, finding: "_Finding") -> str | None:
        """The finding's message, or None when the term is right as it is. Sets ``why`` when it
        cannot be fixed on its own account."""
        paths = finding.paths
        kind = paths[0].kind
        detail = paths[0].detail
        scaled = [t for t in paths if t.scaling]
        if kind == "mean" or kind == "regularization":
            if len(scaled) == len(paths):
                return None  # divided by the replica count on every way to the gradient
            message = (
                REGULARIZATION_MESSAGE if kind == "regularization"
                else CALL_MEAN_MESSAGE if detail == "call"
                else COUNT_MEAN_MESSAGE if detail == "count"
                else SHARE_MESSAGE if detail == "share"
                else MEAN_MESSAGE
            )
            bypassed = [t for t in paths if t.bypassed and not t.scaling]
            if scaled:
                finding.why = _mixed(self.program, scaled[0])
            elif bypassed:
                finding.why = BYPASSED_REASON.format(line=self.program.line(bypassed[0].bypassed[0]))
            elif detail == "axes":
                finding.why = (
                    "it reduces over given axes, so what it averages is not known to be one loss per "
                    "example; if it averages over the batch, divide it by the replica count"
                )
            elif detail == "call":
                finding.why = "the mean is in the Loss subclass's call(), which Keras calls wherever the object is used"
            elif detail == "share":
                finding.why = self._share_reason(paths[0].node)
            elif detail == "count" and finding.remote is None:
                finding.why = (
                    "what divides it counts this replica's own examples: dividing by the replica count "
                    "would weigh each replica alike, not each example; divide by the count summed over "
                    "the replicas (tf.distribute.get_replica_context().all_reduce('sum', count))"
                )
            elif kind == "regularization" and not isinstance(finding.node, cst.Call):
                finding.why = "the regularization losses are not summed where they are added; sum them and scale the sum"
            finding.kind = kind
            return message
        if self._migrating and is_batch_sum(paths[0]):
            # A migration makes each replica's update the average of the original's: its sum
            # over the batch is divided by the replica count (code written for N replicas
            # that sums means the global sum, and is left alone).
            if len(scaled) == len(paths):
                return None
            finding.kind = "sum"
            if scaled:
                finding.why = _mixed(self.program, scaled[0])
            return SUM_MESSAGE
        if kind == "loss" and detail == "default":
            finding.kind = "twice" if scaled else "default"
            if scaled and len(scaled) != len(paths):
                finding.why = _mixed(self.program, scaled[0])
            return TWICE_MESSAGE if scaled else DEFAULT_MESSAGE
        return None

    def _share_reason(self, node: cst.CSTNode) -> str:
        """Why a loss divided by one replica's share is not fixed: which global batch was meant
        (the divisor times the replica count, or the batch the data is cut into) is the
        author's to say, and TFD002 may be asking to change that batch too."""
        divisor = node.right if isinstance(node, cst.BinaryOperation) else argument_value(node, "global_batch_size", 2)  # type: ignore[arg-type]
        code = self.program.module.code_for_node(divisor) if divisor is not None else "the divisor"
        return (
            f"{code} is computed by dividing by the replica count (one replica's share of the batch); "
            "divide the loss by the global batch instead, the per-replica batch times "
            "num_replicas_in_sync, and batch the dataset with that same global batch"
        )

    def _decide(self, findings: dict, losses: dict) -> None:
        """A loss is fixed whole or not at all: a finding is fixed only if every loss it is part
        of can be (every unscaled term fixable, no term of unknown reduction)."""
        for finding in findings.values():
            if finding.message is not None and finding.why is None:
                finding.why = self._unsafe(finding)
        blocked: dict[cst.Call, str] = {}
        for gradient, (_roots, terms) in losses.items():
            # (Migrating, a sum divided by the batch is divided by the global batch once the
            # migration has made it global: its own share, checked in the migrated code.)
            unknown = next((t for t in terms if t.kind == "unknown" and not (self._migrating and t.detail == "normalized")), None)
            if unknown is not None:
                blocked[gradient] = (
                    f"the loss also adds {_short(self.program, unknown.node)} (line "
                    f"{self.program.line(unknown.node)}), whose reduction over the replicas is not "
                    "known here; scale every term of the loss the same way"
                )
        for gradient in losses:
            if gradient not in blocked:
                why = self._clip_refusal(gradient, findings)
                if why is not None:
                    blocked[gradient] = self.clip_refused[gradient] = why
        self._spread(findings, blocked)

    def _spread(self, findings: dict, blocked: dict) -> None:
        """Every finding of a loss that cannot be fixed (``blocked``: by its gradient call) is
        not fixed, and every loss with a finding that is not fixed cannot be, until nothing
        changes."""
        changed = True
        while changed:
            changed = False
            for finding in findings.values():
                if finding.message is None or finding.why is not None:
                    continue
                why = next((blocked[g] for g in finding.losses if g in blocked), None)
                if why is not None:
                    finding.why = why
                    changed = True
            for finding in findings.values():
                if finding.message is None or finding.why is None:
                    continue
                for gradient in finding.losses:
                    if gradient not in blocked:
                        blocked[gradient] = (
                            f"{_short(self.program, finding.node)} (line {self.program.line(finding.node)}) "
                            "in the same loss cannot be fixed, and fixing the rest alone would change "
                            "the balance between its terms"
                        )
                        changed = True

    def _shown_shares(self, findings: dict) -> bool:
        """Migrating, a default-reduction loss whose value is also shown (a metric, a log, a
        clip) and cannot be scaled at the tape: rewritten where it is made, every use would
        see each replica's share (``loss / N``, which Keras 3 also gives a default-reduction
        loss under a strategy) instead of the loss the original computed. Refused, with the
        use named."""
        program = self.program
        refused = []
        for finding in findings.values():
            use = finding.logged
            if finding.message is None or finding.why is not None or finding.at_tape or use is None:
                continue
            if program.enclosing_function(use.node) not in self.steps.functions:
                continue  # (what the caller shows is the shares added up over the replicas)
            finding.why = (
                f"its value is also used on line {program.line(use.node)} ({_short(program, use.node)}), which "
                "would see each replica's share of the loss (the loss divided by the replica count) instead of "
                "the loss the original computed, and the loss cannot be divided where it is differentiated instead"
            )
            refused.append(finding)
        return bool(refused)

    def _one_reduction(self, findings: dict) -> bool:
        """A loss object's reduction is changed for every call of it or for none: a call of a
        default-reduction object that is not fixed, and can run no other object, leaves every
        other call of it unfixed too (and so the losses they are part of). Whether any finding
        was left unfixed so."""
        program = self.program

        def objects(finding) -> set[int]:
            call = finding.paths[0].loss_call if finding.paths else None
            if finding.message is None or finding.kind not in ("default", "twice") or call is None:
                return set()
            return {id(c) for c in loss_objects(self.facts, call.func)}

        any_left = False
        changed = True
        while changed:
            changed = False
            for finding in findings.values():
                mine = objects(finding) if finding.why is not None else set()
                for other in findings.values():
                    # (Only a call that can run no other object: one that may also run an
                    # object made elsewhere, a notebook's name bound again in a later cell,
                    # is left as the file runs it.)
                    if mine and other.why is None and mine <= objects(other):
                        other.why = (
                            f"{_short(program, other.paths[0].loss_call.func)} is also called on line "
                            f"{program.line(finding.node)}, where it cannot be fixed, and its reduction is the object's"
                        )
                        changed = any_left = True
            if changed:
                self._spread(findings, {})
        return any_left

    # --- a loss scaled where it is differentiated ----------------------------------------------

    def _at_the_tape(self, findings: dict, losses: dict) -> dict[cst.Call, BlockEdits]:
        """Losses that cannot be rewritten term by term only because a value that would change
        is used elsewhere too (a metric, a log, a helper also used for evaluation, what
        train_step returns to Keras): when every term is a per-replica mean (or the summed
        regularization), the whole loss is the replica's mean, and dividing what the tape
        differentiates by the replica count gives each replica its share of the global loss
        while every other use keeps the value it had. Not when a changed value is also added
        up over the replicas (``strategy.reduce(SUM, ...)``: that wants the shares)."""
        candidates: dict[cst.Call, BlockEdits] = {}
        for gradient, (roots, terms) in losses.items():
            mine = [f for f in findings.values() if gradient in f.losses and f.message is not None]
            if not mine or all(f.why is None and not f.logged for f in mine) or self.tf is None:
                continue
            if any(f.why is not None and f.final or f.remote is not None for f in mine) or gradient in self.clip_refused:
                continue  # what stands against the change is not a use of the loss's value
            if not all(_per_replica(t, self._migrating) for t in terms) or not any(t.kind != "constant" for t in terms):
                continue
            if any(self.suppressed(f.node) for f in mine):
                continue
            returned: list[cst.Name] = []
            if any(summed(self.steps, f.node) for f in mine):
                # Added up over the replicas: only a migration's ``return loss``, which can
                # return the share instead.
                returned = self._returned_loss(gradient, roots, mine) if self._migrating else []
                if not returned:
                    continue
            edits = BlockEdits()
            try:
                self._plan_at_tape(gradient, roots, edits, returned)
            except NotFound:
                continue
            if not any(f.kind in ("default", "twice") for f in mine):
                self._follow_clips(gradient, roots, edits)
            candidates[gradient] = edits
        # A term reached from several losses is left alone only if each of them is scaled.
        changed = True
        while changed:
            changed = False
            for gradient in list(candidates):
                mine = [f for f in findings.values() if gradient in f.losses and f.message is not None]
                if any(g not in candidates for f in mine for g in f.losses):
                    del candidates[gradient]
                    changed = True
        for finding in findings.values():
            if finding.message is not None and finding.losses and all(g in candidates for g in finding.losses):
                finding.why, finding.at_tape = None, True
        return candidates

    def _plan_at_tape(self, gradient: cst.Call, roots: list[cst.FunctionDef], edits: BlockEdits, returned: list[cst.Name] = ()) -> None:
        """``tape.gradient(loss, ...)`` -> ``tape.gradient(loss / <replicas>, ...)`` inside the
        tape's ``with`` block; after it, the share is computed at the block's end. The reads
        of the loss in ``returned`` (``return loss``, which the caller adds up over the
        replicas) return the share."""
        program = self.program
        target = self.steps.differentiated(gradient)
        func = gradient.func
        if target is None or not (isinstance(func, cst.Attribute) and func.attr.value == "gradient"):
            raise NotFound("the loss is not differentiated by a GradientTape")
        block = _tape_block(self.facts, program, func.value)
        if block is None:
            raise NotFound("the tape is not made by a with statement")
        replicas = self._replica_count(target, roots)
        if any(a is block for a in program.ancestors(gradient)):
            code = program.module.code_for_node(target)
            edits.replace(target, lambda _n: _parsed(f"{code} / {replicas}", False))
            for read in returned:
                edits.replace(read, lambda _n: _parsed(f"{code} / {replicas}", False))
            return
        if not isinstance(target, cst.Name):
            raise NotFound("the differentiated value is computed after the tape's block")
        bindings = self.facts.reaching_bindings(target) or []
        if not bindings or not all(any(a is block for a in program.ancestors(b)) for b in bindings):
            raise NotFound("the differentiated value is not computed in the tape's block")
        if isinstance(block, cst.IndentedBlock) and unbound_on_a_path(program, target.value, block, len(block.body) - 1) is not None:
            # ``if mixed_precision: scaled = opt.get_scaled_loss(loss)``: its share, computed
            # at the block's end, would read a name some paths never bind.
            raise NotFound(f"{target.value} is not computed on every path through the tape's block")
        taken = self.facts.names() | self.reserved
        name = fresh_name(taken, f"replica_{target.value}")
        self.reserved.add(name)
        statement = cst.parse_statement(f"{name} = {target.value} / {replicas}\n")
        edits.add(block, lambda body: [*body, statement])
        edits.replace(target, lambda _n: cst.Name(name))
        for read in returned:
            if not any(a is block for a in program.ancestors(read)) and program.position(read).start.line > program.position(block).end.line:
                edits.replace(read, lambda _n: cst.Name(name))
            else:
                raise NotFound("the loss is returned before the tape's block ends")

    def _returned_loss(self, gradient: cst.Call, roots: list[cst.FunctionDef], mine: list["_Finding"]) -> list[cst.Name]:
        """Migrating: the reads of the differentiated loss that a step returns (``return loss``)
        to a caller that adds them up over the replicas (``strategy.reduce(SUM, ...)``), when
        that is the only way the loss is added up: the loss is a name bound, in the step, by
        the statements that make its terms. Returning its share instead, the sum is the
        loss the original returned while every other use keeps the replica's loss. Empty
        otherwise."""
        program = self.program
        target = self.steps.differentiated(gradient)
        if not isinstance(target, cst.Name):
            return []
        bindings = self.facts.reaching_bindings(target) or []
        if not bindings or not all(isinstance(b, cst.Name) for b in bindings):
            return []
        statements = {id(program.statement_of(b)) for b in bindings}
        if not all(id(program.statement_of(f.node)) in statements for f in mine):
            return []
        returned: list[cst.Name] = []
        for binding in bindings:
            for read in self.facts.uses(binding):
                if read is target:
                    continue
                parent = program.parent(read)
                if isinstance(read, cst.Name) and isinstance(parent, cst.Return) and program.enclosing_function(read) in roots:
                    returned.append(read)
                elif summed(self.steps, read):
                    return []
        return returned

    def _unsafe(self, finding: "_Finding") -> str | None:
        """Why rewriting this term would change more than the gradient, if it would."""
        program = self.program
        if self.tf is None:
            return "the script does not import tensorflow as a module"
        owner = self._outside_steps(finding.node)
        if owner is not None:
            return owner
        reducing = self.under.get(id(finding.node))
        if reducing is not None and finding.kind in ("mean", "regularization"):
            finding.final = True
            return (
                f"its value is also added to every example of what {_short(program, reducing.func)} reduces on "
                f"line {program.line(reducing)}, where it is right as it is (each replica adds its share, and the "
                "shares add up to it once); dividing it would change that use too"
            )
        if finding.kind in ("default", "twice"):
            call = finding.paths[0].loss_call
            # What stands against changing the loss object's reduction stands whichever way
            # the loss is scaled (at the tape too, which also makes the object's reduction "none").
            finding.final = True
            constructions = loss_objects(self.facts, call.func) if call is not None else []
            if not constructions:
                return "the loss object is not made in this file (or is a Loss subclass with its own reduction)"
            outside = [u for u in object_uses(self.facts, constructions) if program.enclosing_function(u) not in self.steps.functions]
            for use in outside:
                why = (
                    f"{program.module.code_for_node(call.func)} is also used outside the training step (line "
                    f"{program.line(use)}); changing its reduction would change that use too"
                )
                if finding.kind == "default" and self._twin_possible(call, constructions):
                    finding.twin = True
                elif finding.kind == "default" and _per_example_possible(self.facts, call, constructions) and (
                    self._keras3 or self._migrating and self._replicated(use) is not None
                ):
                    # (Keras 2 rejects the object in a replica wherever it is called: on a file
                    # that may run on it, every other use must be given the steps' rewrite.)
                    finding.per_example = True
                else:
                    return why
            if self._migrating and (finding.twin or finding.per_example):
                # Migrating, the model's test_step, which Keras runs per replica too, computes
                # the loss as the steps do: left alone, Keras 3 shows each replica's share of
                # it there (the original showed the loss) and Keras 2 rejects it.
                finding.replicated = [c for c in map(self._replicated, outside) if c is not None]
            source = next((s for s in (mask_source(self.facts, c) for c in [call, *finding.replicated]) if s is not None), None)
            if source is not None:
                return (
                    f"the predictions may carry a Keras mask ({_short(program, source)}, line {program.line(source)}): "
                    "the default reduction averages over the unmasked entries only, reduction='none' does not"
                )
        finding.final = False
        if finding.kind == "default":
            # The same value as Keras >= 3.8 computes: its uses see no change there. A use
            # that shows it (a metric, a log) prefers the loss scaled at the tape, which keeps
            # the value it had on one device (see _at_the_tape).
            # (The first one the replicas show, where there is one: a metric, a print in the step.)
            uses = unaccounted_uses(self.steps, call) if call is not None else []
            finding.logged = next((u for u in uses if program.enclosing_function(u.node) in self.steps.functions), uses[0] if uses else None)
            return None
        use = unaccounted_use(self.steps, finding.node if finding.kind != "twice" else finding.paths[0].loss_call)
        if use is None:
            return None
        if use.kind == "mean":
            return (
                f"the step returns this loss and its caller averages it over the replicas with "
                f"ReduceOp.MEAN (line {program.line(use.node)}); once each replica's loss is its "
                "share of the global average that must be SUM: change both together"
            )
        if use.kind == "divided":
            return (
                f"the step returns this loss, its caller adds it up over the replicas with ReduceOp.SUM and divides "
                f"the sum on line {program.line(use.node)} ({_short(program, use.node)}), an average made by hand: once "
                "each replica's loss is its share of the global average, the sum is that average, and the division "
                "would show it N times too small: change both together"
            )
        if use.kind == "returned":
            return f"it is returned on line {program.line(use.node)} to callers that are not in this file"
        return (
            f"its value is also used on line {program.line(use.node)} ({_short(program, use.node)}), "
            "which would see it divided by the replica count too"
        )

    @property
    def _migrating(self) -> bool:
        """Whether this is ``autofix migrate`` on a file written for one device."""
        return self.program.migration is not None

    @property
    def _keras3(self) -> bool:
        """Whether every Keras the file names is Keras 3: Keras 2 rejects a default-reduction
        loss object under a strategy wherever it is called (evaluation too), so keeping it for
        the other uses keeps nothing there."""
        return MultiWorker.of(self.program).keras.keras3

    def _outside_steps(self, node: cst.CSTNode) -> str | None:
        """Why the code holding ``node`` also runs outside custom steps, if it does."""
        program = self.program
        function = next((a for a in program.ancestors(node) if isinstance(a, (cst.FunctionDef, cst.Lambda))), None)
        if function is None:
            return "it is not in a function run by the step"
        outside = self.steps.called_only_in_steps(function)
        if outside is None:
            return None
        what = f"{function.name.value}()" if isinstance(function, cst.FunctionDef) else "the lambda"
        if outside is function:
            return f"{what} is called by code that is not in this file; changing its loss would change those calls too"
        return f"{what} is also used outside the training step (line {program.line(outside)}); changing its loss would change that use too"

    # --- clipping ------------------------------------------------------------------------------

    def _clip_refusal(self, gradient: cst.Call, findings: dict) -> str | None:
        """Why the clip of the gradients of the loss ``gradient`` differentiates cannot follow
        the fix, if it cannot. Divided by the replica count, each replica's gradient is 1/N of
        what it was, and a clip by a threshold C would act N times later: ``tf.clip_by_global_norm``
        and ``tf.clip_by_norm`` with C / N (``tf.clip_by_value`` with both bounds / N) give
        exactly the step's old update / N (measured, docs/losses.md), so the clip follows where
        the whole of the loss's gradient is divided (every term fixed is a per-replica mean, the
        summed ``model.losses`` or a migrated sum). A default-reduction loss's fix leaves the
        value Keras >= 3.8 computes (its clip stays), so a clip of a loss mixing it with a
        divided term cannot follow; nor one given a norm of its own (``use_norm=``), nor an
        optimizer's own clip on Keras 3 (it clips each replica's share). Migrating, the clips
        are the migration's (:mod:`autofix.analysis.migration.clipping` makes a step's clip
        global, by the norm of the all-reduced gradient, and refuses the rest)."""
        program = self.program
        if self._migrating:
            return None
        kinds = {f.kind for f in findings.values() if gradient in f.losses and f.message is not None}
        clips = Clipping.of(program).clips_of(gradient)
        if clips and "twice" in kinds:
            return (
                f"the step clips the loss's gradients (line {program.line(clips[0])}) and the fix multiplies "
                "the loss by the replica count on Keras >= 3.8 only: no one threshold follows that"
            )
        if not kinds & {"mean", "regularization", "sum"}:
            return None
        optimizers = Clipping.of(program).optimizer_clips
        if optimizers and any(self.steps.trains(r) for r in self.steps.roots):
            call, keyword = optimizers[0]
            return (
                f"the optimizer clips the gradients ({keyword}=, line {program.line(call)}): Keras 3 clips each "
                "replica's share of them, which the fix divides by the replica count, so the clip would act at N "
                "times its threshold; clip in the step (tf.clip_by_global_norm) instead"
            )
        if not clips:
            return None
        line = program.line(clips[0])
        if kinds - {"mean", "regularization", "sum"}:
            return (
                f"the step clips the loss's gradients (line {line}) and the fix divides only some of its terms "
                "by the replica count: no one threshold follows that"
            )
        for clip in clips:
            if "tensorflow.clip_by_global_norm" in tf_names(self.facts, clip.func) and argument_value(clip, "use_norm", 2) is not None:
                return (
                    f"the step clips the loss's gradients by a norm of its own (use_norm=, line {program.line(clip)}): "
                    "divided by the replica count, the gradients would be clipped by a norm that does not follow"
                )
            if not self._clip_thresholds(clip):
                return f"the threshold of the clip on line {program.line(clip)} is not given where it can be divided"
        return None

    def _clip_thresholds(self, clip: cst.Call) -> list[cst.BaseExpression]:
        names = tf_names(self.facts, clip.func)
        if names & {"tensorflow.clip_by_value"}:
            bounds = [argument_value(clip, "clip_value_min", 1), argument_value(clip, "clip_value_max", 2)]
            return bounds if all(b is not None for b in bounds) else []
        threshold = argument_value(clip, "clip_norm", 1)
        return [threshold] if threshold is not None else []

    def _follow_clips(self, gradient: cst.Call, roots: list[cst.FunctionDef], edits: BlockEdits) -> None:
        """``tf.clip_by_global_norm(grads, C)`` -> ``tf.clip_by_global_norm(grads, C / <replicas>)``
        for the clips of the gradients of the loss the fix divides by the replica count (see
        :meth:`_clip_refusal`)."""
        program = self.program
        if self._migrating:
            return
        for clip in Clipping.of(program).clips_of(gradient):
            if id(clip) in self.clips_done:
                continue
            self.clips_done.add(id(clip))
            replicas = self._replica_count(clip, roots)
            for threshold in self._clip_thresholds(clip):
                code = program.module.code_for_node(threshold)
                signed = isinstance(threshold, cst.UnaryOperation) and isinstance(threshold.operator, (cst.Minus, cst.Plus))
                if not signed and not isinstance(threshold, (cst.Name, cst.Attribute, cst.Integer, cst.Float, cst.Call, cst.Subscript)):
                    code = f"({code})"
                edits.replace(threshold, lambda _n, code=code, t=threshold: _parsed(f"{code} / {replicas}", _needs_parens(program, t)))

    # --- the fix -------------------------------------------------------------------------------

    def _plan(self, finding: "_Finding", edits: BlockEdits, at_tape: bool = False) -> None:
        program = self.program
        node = finding.node
        if not at_tape and finding.kind in ("mean", "regularization", "sum"):
            for gradient in finding.losses:
                self._follow_clips(gradient, finding.roots, edits)
        # Scaled at the tape: the term is only made the replica's mean.
        replicas = None if at_tape else self._replica_count(node, finding.roots)
        if finding.kind == "regularization":
            code = program.module.code_for_node(node)
            edits.replace(node, lambda _n: _parsed(f"{self.tf}.nn.scale_regularization_loss({code})", False))
            return
        if finding.kind in ("mean", "sum"):
            code = program.module.code_for_node(node)
            edits.replace(node, lambda _n: _parsed(f"{code} / {replicas}", _needs_parens(program, node)))
            return
        call = finding.paths[0].loss_call
        twin = None
        if finding.twin:
            twin = self._make_twin(call, edits)
            edits.replace(call.func, lambda _n: cst.Name(twin))
        elif finding.per_example:
            edits.replace(call.func, lambda n: cst.Attribute(value=n, attr=cst.Name("call")))
        else:
            self._make_none(call, edits)
        replicated = [c for c in finding.replicated if id(c) not in self.rewritten]
        for site in replicated:
            # ``loss(y, p)`` -> ``tf.reduce_mean(<the steps' per-example loss>(y, p))``: the mean
            # the default reduction takes, computed by the replica on its examples.
            def per_example(node: cst.Call, twin=twin) -> cst.BaseExpression:
                func = cst.Name(twin) if twin is not None else cst.Attribute(value=node.func, attr=cst.Name("call"))
                return _parsed(f"{self.tf}.reduce_mean({program.module.code_for_node(node.with_changes(func=func))})", _needs_parens(program, site))

            edits.replace(site, per_example)
        self.rewritten.update(id(c) for c in replicated)
        if node is not call:  # ``tf.reduce_mean(loss(...))``: only the division may be missing
            if finding.kind == "default" and replicas is not None:
                code = program.module.code_for_node(node)
                edits.replace(node, lambda _n: _parsed(f"{code} / {replicas}", _needs_parens(program, node)))
            return
        suffix = f" / {replicas}" if finding.kind == "default" and replicas is not None else ""
        parens = bool(suffix) and _needs_parens(program, call)
        # (Written from the call as edited so far: its loss object may be the steps' own now.)
        edits.replace(call, lambda n: _parsed(f"{self.tf}.reduce_mean({program.module.code_for_node(n)}){suffix}", parens))

    def _replicated(self, use: cst.CSTNode) -> cst.Call | None:
        """The call ``use`` makes of a loss object, when Keras runs it per replica as it runs
        the steps: in the ``test_step`` of a model class whose ``train_step`` is a step
        (``evaluate`` and ``fit``'s validation run it in each replica under the strategy),
        with ``y_true`` and ``y_pred`` alone."""
        program = self.program
        call = program.parent(use)
        function = program.enclosing_function(use)
        if not (isinstance(call, cst.Call) and call.func is use and function is not None and function.name.value == "test_step"):
            return None
        if len(call.args) != 2 or any(a.keyword is not None or a.star for a in call.args):
            return None
        cls = _class_of(program, function)
        if cls is None or not any(s in self.steps.fit_steps for s in cls.body.body):
            return None
        return call

    def _twin_possible(self, call: cst.Call, constructions: list[cst.Call]) -> bool:
        """Whether the step can get a loss object of its own (``reduction="none"``) made right
        after each shared one: a plain name whose every binding is a Keras loss made by a
        statement of its own (so the twin is rebound whenever the name is, and always mirrors
        it); evaluation keeps the original."""
        return self._twin_sites(call) is not None

    def _twin_sites(self, call: cst.Call) -> list[tuple[cst.Call, cst.SimpleStatementLine]] | None:
        """Each binding of the loss object's name, as (construction, its statement)."""
        func = call.func
        if not isinstance(func, cst.Name):
            return None
        sites = []
        for binding in self.facts.bindings(func) or []:
            value = self.facts.assigned_value(binding)
            statement = self.program.statement_of(binding)
            if not (
                isinstance(value, cst.Call)
                and self.facts.call_kind(value) is Kind.LOSS
                and isinstance(statement, cst.SimpleStatementLine)
                and len(statement.body) == 1
                and self.program.block_of(statement) is not None
            ):
                return None
            sites.append((value, statement))
        return sites or None

    def _make_twin(self, call: cst.Call, edits: BlockEdits) -> str:
        """``loss_object = Loss(...)`` shared with evaluation: ``loss_object_per_example =
        Loss(..., reduction="none")`` made after every binding of the name, for the steps (once
        per file and name; the one an earlier run made is used again)."""
        sites = self._twin_sites(call)
        assert sites is not None and isinstance(call.func, cst.Name)
        key = tuple(id(statement) for _, statement in sites)
        name = self.twins.get(key) or self._existing_twin(sites)
        if name is not None:
            return name
        taken = self.facts.names() | self.reserved
        name = fresh_name(taken, f"{call.func.value}_per_example")
        self.reserved.add(name)
        self.twins[key] = name
        for construction, statement in sites:
            made = cst.parse_statement(f"{name} = {self.program.module.code_for_node(with_reduction_none(construction))}\n")
            # After the statement as rewritten (its loss may be given reduction="none" too).
            edits.replace(statement, lambda node, made=made: cst.FlattenSentinel([*_statements(node), made]))
        return name

    def _existing_twin(self, sites: list[tuple[cst.Call, cst.SimpleStatementLine]]) -> str | None:
        """The twin a fix made before: the same name bound right after every binding, to the
        same loss with ``reduction="none"``."""
        names = set()
        for construction, statement in sites:
            block = self.program.block_of(statement)
            body = list(block.body) if block is not None else []
            index = next((i for i, s in enumerate(body) if s is statement), None)
            following = body[index + 1] if index is not None and index + 1 < len(body) else None
            assign = following.body[0] if isinstance(following, cst.SimpleStatementLine) and len(following.body) == 1 else None
            if not (
                isinstance(assign, cst.Assign)
                and len(assign.targets) == 1
                and isinstance(assign.targets[0].target, cst.Name)
                and assign.value.deep_equals(with_reduction_none(construction))
            ):
                return None
            names.add(assign.targets[0].target.value)
        return names.pop() if len(names) == 1 else None

    def _make_none(self, call: cst.Call, edits: BlockEdits) -> None:
        constructions = loss_objects(self.facts, call.func)
        if not constructions:
            raise NotFound("the loss object is not made in this file")
        for construction in constructions:
            if id(construction) not in self.reconstructed:
                self.reconstructed.add(id(construction))
                edits.replace(construction, with_reduction_none)

    def _replica_count(self, site: cst.CSTNode, roots: list[cst.FunctionDef]) -> str:
        """The replica count, spelled with the strategy that runs the step when that is in view
        at ``site``, else read from the replica context."""
        program = self.program
        receivers = [run.func.value for root in roots for run in self.steps.roots[root]]  # type: ignore[union-attr]
        codes = {program.module.code_for_node(r) for r in receivers}
        if len(codes) == 1 and may_be_none(program, next(iter(codes)), receivers[0]) is None:
            receiver = receivers[0]
            if isinstance(receiver, cst.Name) and visible_at(program, receiver, site):
                return f"{receiver.value}.num_replicas_in_sync"
            path = attribute_path(receiver)
            if path is not None and len(path) == 2 and path[0] == "self" and _same_class(program, receiver, site):
                return f"self.{path[1]}.num_replicas_in_sync"
        if receivers == [] and all(root in self.steps.fit_steps for root in roots) and _in_method_of(program, site, roots):
            # A model's own train_step, which fit runs under the model's strategy.
            return "self.distribute_strategy.num_replicas_in_sync"
        return f"{self.tf}.distribute.get_replica_context().num_replicas_in_sync"


def _per_example_possible(facts, call: cst.Call, constructions: list[cst.Call]) -> bool:
    """Whether the step can take the shared loss object's losses per example from its ``call``
    method (Keras's ``Loss.call``: what ``__call__`` reduces, with no reduction, replica scaling,
    sample weights or mask): every object is one of Keras's own loss classes, called with
    ``y_true`` and ``y_pred`` alone."""
    if len(call.args) != 2 or any(a.keyword is not None or a.star for a in call.args):
        return False
    # (``ignore_class=``: ``call`` masks the ignored entries, which only ``__call__`` leaves out.)
    ignoring = any(a.keyword is not None and a.keyword.value == "ignore_class" for c in constructions for a in c.args)
    return keras_own(facts, constructions) and not ignoring


class _Finding:
    """One place where a loss term is made, with every path from it to a gradient."""

    def __init__(self, node: cst.CSTNode, remote: RemoteTerm | None = None) -> None:
        self.node = node
        # A term of a function of another module that ``node`` (here) calls: the finding is
        # placed there.
        self.remote = remote
        self.paths: list[Term] = []
        self.roots: list[cst.FunctionDef] = []
        self.losses: list[cst.Call] = []
        self.message: str | None = None
        self.why: str | None = None
        # Fixed where its loss is differentiated (see ``_at_the_tape``), not where it is made.
        self.at_tape = False
        # A default-reduction loss object also used outside the steps: the steps get one of
        # their own (``reduction="none"``), the other uses keep it.
        self.twin = False
        # A default-reduction loss object also used outside the steps, held where no twin can
        # be bound (``self.loss_fn`` set by ``compile``): the steps call its ``call`` (one loss
        # per example, Keras's reduction skipped), the other uses keep ``__call__``.
        self.per_example = False
        # Calls of that loss object in a model's test_step (run per replica too), given the
        # steps' rewrite as well.
        self.replicated: list[cst.Call] = []
        # A default-reduction loss whose value is also shown (a metric, a log): that use.
        self.logged = None
        # ``why`` is about the loss object itself (shared, masked, made elsewhere), which scaling
        # the loss at the tape would change all the same.
        self.final = False
        # "mean", "regularization", "default", "twice" or (migrating) "sum".
        self.kind: str | None = None


def _statements(node) -> list:
    """A statement as rewritten so far: itself, or those it became."""
    return list(node.nodes) if isinstance(node, cst.FlattenSentinel) else [node]


def _per_replica(term: Term, migrating: bool = False) -> bool:
    """A term that is each replica's own (unscaled) mean: a per-replica mean of everything
    (or a default-reduction loss object's, once it is made ``reduction="none"`` and averaged),
    the summed regularization, or a constant weight; migrating, a sum over the batch too
    (each replica's share of the original's update is its sum divided by the replica count)."""
    if term.scaling or term.bypassed:
        return False
    if migrating and is_batch_sum(term):
        return True
    if term.kind == "mean":
        return term.detail is None
    if term.kind == "loss":
        return term.detail == "default"
    if term.kind == "regularization":
        return isinstance(term.node, cst.Call)
    return term.kind == "constant"


def _tape_block(facts, program, tape: cst.BaseExpression) -> cst.IndentedBlock | None:
    """The body of the ``with tf.GradientTape() as tape:`` that makes ``tape``."""
    if not isinstance(tape, cst.Name):
        return None
    bindings = facts.reaching_bindings(tape) or []
    if len(bindings) != 1:
        return None
    holder = program.parent(program.parent(bindings[0]))
    with_statement = program.parent(holder) if isinstance(holder, cst.WithItem) else None
    if not isinstance(with_statement, cst.With) or not isinstance(with_statement.body, cst.IndentedBlock):
        return None
    return with_statement.body


def _mixed(program, scaled: Term) -> str:
    return (
        f"it reaches the gradients both divided by the replica count (line "
        f"{program.line(scaled.scaling[-1])}) and not, so no one rewrite is right for both"
    )


def _short(program, node: cst.CSTNode) -> str:
    code = " ".join(program.module.code_for_node(node).split())
    return code if len(code) <= 60 else code[:57] + "..."


def _parsed(code: str, parens: bool) -> cst.BaseExpression:
    return cst.parse_expression(f"({code})" if parens else code)


def _needs_parens(program, node: cst.CSTNode) -> bool:
    """Whether ``node / n`` written in place of ``node`` would bind to more than ``node``."""
    parent = program.parent(node)
    if isinstance(parent, cst.BinaryOperation):
        right_bound = (cst.Divide, cst.FloorDivide, cst.Modulo, cst.MatrixMultiply)
        return isinstance(parent.operator, cst.Power) or parent.right is node and isinstance(parent.operator, right_bound)
    return isinstance(parent, (cst.Attribute, cst.Subscript)) or isinstance(parent, cst.Call) and parent.func is node


def _in_method_of(program, site: cst.CSTNode, methods: list[cst.FunctionDef]) -> bool:
    """Whether ``site`` is code of one of ``methods`` itself, whose first parameter is ``self``."""
    function = program.enclosing_function(site)
    params = function.params.params if function is not None else ()
    return function in methods and bool(params) and params[0].name.value == "self"


def _same_class(program, receiver: cst.CSTNode, site: cst.CSTNode) -> bool:
    """Whether ``site`` is in a method of the class ``receiver`` (``self.x``) is written in,
    whose ``self`` is the instance."""
    def owner(node):
        function = program.enclosing_function(node)
        cls = program.parent(program.parent(function)) if function is not None else None
        return function, cls if isinstance(cls, cst.ClassDef) else None

    function, cls = owner(site)
    _, receiver_cls = owner(receiver)
    params = function.params.params if function is not None else ()
    return cls is not None and cls is receiver_cls and bool(params) and params[0].name.value == "self"


def _class_of(program, method: cst.FunctionDef) -> cst.ClassDef | None:
    owner = program.parent(program.parent(method))
    return owner if isinstance(owner, cst.ClassDef) else None
