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


def might_need_analysis(text: str) -> bool:
    return PREFILTER in text or any(use in text for use in PREFILTER_USES)


# Why a file the prefilter passes over is not analysed.
NOT_USED = "it does not use tf.distribute"
