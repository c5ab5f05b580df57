"""The measured facts the migration's clipping and loss rules rest on (docs/migrate.md), measured
again: each form's first update on 2 replicas as a multiple of the update the definition of a
right migration makes (the original's gradients on each replica's shard, averaged, applied by
the original's optimizer), on Keras 3 and tf_keras."""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import measure_script

pytestmark = [
    pytest.mark.tf,
    pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed"),
]
SCRIPT = Path(__file__).resolve().parent / "data" / "migrate_forms.py"


@lru_cache(maxsize=None)
def measured(keras: int) -> dict[str, str]:
    return measure_script(SCRIPT, keras, "the migration's forms")


RIGHT = "1.000 same"
# form: (Keras 3, Keras 2); "ratio same" is the definition's update, "ratio apart" is not.
FORMS = {
    "step: clip_by_global_norm per replica": ("1.141 apart", "1.141 apart"),
    "step: all_reduce, clip_by_global_norm, apply_gradients": ("2.000 apart", "2.000 apart"),
    "step: all_reduce, clip_by_global_norm, / N, apply_gradients": (RIGHT, RIGHT),
    "step: clip_by_global_norm(use_norm=global_norm(all_reduce))": (RIGHT, RIGHT),
    "step: all_reduce, clip_by_global_norm, apply_gradients(skip_gradients_aggregation=True)": ("fails: TypeError", RIGHT),
    "step: all_reduce, clip_by_global_norm, apply_gradients(experimental_aggregate_gradients=False)": ("fails: TypeError", RIGHT),
    "step: clip_by_norm per replica": ("1.016 apart", "1.016 apart"),
    "step: clip_by_norm by the all-reduced norm": (RIGHT, RIGHT),
    "step: optimizer global_clipnorm": ("1.141 apart", RIGHT),
    "step: optimizer clipnorm": ("1.016 apart", RIGHT),
    "step: optimizer clipvalue": ("1.261 apart", RIGHT),
    "step: reduce_sum": ("2.000 apart", "2.000 apart"),
    "step: reduce_sum / N": (RIGHT, RIGHT),
    "step: compute_average_loss(global_batch_size=B)": ("2.000 apart", "2.000 apart"),
    "step: compute_average_loss(global_batch_size=N * B)": (RIGHT, RIGHT),
    "step: reduce_sum / B": ("2.000 apart", "2.000 apart"),
    "step: reduce_sum / (N * B)": (RIGHT, RIGHT),
    "fit: global_clipnorm": ("1.141 apart", RIGHT),
    "fit: clipnorm": ("1.016 apart", RIGHT),
    "fit: clipvalue": ("1.261 apart", RIGHT),
    "fit: default reduction": (RIGHT, RIGHT),
    "fit: a loss function averaging over the last axis": (RIGHT, RIGHT),
    "fit: a loss function returning reduce_mean": ("2.000 apart", RIGHT),
    "fit: a loss function returning reduce_sum": ("2.000 apart", RIGHT),
    "fit: a loss function averaging each row of its reshape": (RIGHT, RIGHT),
    'fit: reduction="sum"': ("2.000 apart", "2.000 apart"),
    "fit: add_loss (a kernel regularizer)": (RIGHT, RIGHT),
    'fit: reduction="sum", loss_weights=1 / N': (RIGHT, RIGHT),
}


@pytest.mark.parametrize("keras", [3, 2])
@pytest.mark.parametrize("form", FORMS)
def test_a_form_makes_the_measured_update(form, keras):
    assert measured(keras)[form] == FORMS[form][0 if keras == 3 else 1]
