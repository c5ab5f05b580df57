"""Which files cannot have a finding, known from their text without parsing them.

Light on purpose (no libcst): a run whose files all come from the result cache, or are passed
over here, never loads the analysis.
"""

from __future__ import annotations

# Every rule needs a tf.distribute strategy, and every way of naming one (``tf.distribute.X``,
# ``from tensorflow.distribute import X``, ``tensorflow.python.distribute``...) spells this
# word, or the strategy is made elsewhere and used here as ``with strategy.scope():``; so a
# file with neither has nothing to find. This is checked on every fixture and on generated
# variants (tests/test_prefilter.py).
PREFILTER = "distribute"
# A strategy made in another module is known by its use: ``with strategy.scope():``,
# ``strategy.num_replicas_in_sync``, ``strategy.experimental_run_v2(...)`` (the other members
# that show a strategy, ``experimental_distribute_dataset``..., spell the word above).
PREFILTER_USES = (".scope()", "num_replicas_in_sync", "experimental_run_v2")


# ``autofix migrate`` looks for training on one device: every training site spells one of
# these (``fit``, ``fit_generator``, ``train_on_batch``; an optimizer's ``apply_gradients``,
# ``minimize`` or ``apply``).
MIGRATE_USES = ("fit", "train_on_batch", "minimize", "apply")


def might_need_analysis(text: str, migrating: bool = False, project: bool = False) -> bool:
    """Whether ``text`` may have a finding. ``project``: it is read from a file whose
    project's modules are followed; under ``autofix migrate`` a file that imports may then
    train through them (``Trainer(model).train(ds)``, with ``fit`` in ``trainer.py``), which
    must be said, not passed over."""
    if migrating and any(use in text for use in MIGRATE_USES):
        return True
    if migrating and project and "import" in text:
        return True
    return PREFILTER in text or any(use in text for use in PREFILTER_USES)


def skip_reason(migrating: bool = False) -> str:
    """Why a file the prefilter passes over is not analysed."""
    return NOT_TRAINING if migrating else NOT_USED


NOT_USED = "it does not use tf.distribute"
NOT_TRAINING = "it does not train (no fit, train_on_batch or optimizer update)"
