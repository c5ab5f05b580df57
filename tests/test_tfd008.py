"""TFD008 unsharded-input: auto-sharding OFF with no shard(), fixed to DATA; unsharded dataset functions reported."""

from __future__ import annotations

import pytest

from autofix.engine import Options, analyse
from fixturecases import assert_fixed_is_clean, assert_fixes_to_expected, assert_left_alone, params

OPTIONS = Options(select=("TFD008",))


@pytest.mark.parametrize("case", params("tfd008", "fixed"))
def test_fixes_to_expected(case):
    assert_fixes_to_expected(case, OPTIONS)


@pytest.mark.parametrize("case", params("tfd008", "fixed"))
def test_fixed_code_is_stable(case):
    assert_fixed_is_clean(case, OPTIONS)


@pytest.mark.parametrize("case", params("tfd008", "unchanged"))
def test_leaves_alone_or_reports(case):
    assert_left_alone(case, OPTIONS)


def _off(feed: str, strategy: str = "tf.distribute.MultiWorkerMirroredStrategy()") -> str:
    return (
        "import tensorflow as tf\n"
        f"strategy = {strategy}\n"
        "options = tf.data.Options()\n"
        "options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF\n"
        "dataset = tf.data.Dataset.range(8).batch(2).with_options(options)\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "    model.compile(optimizer='sgd', loss='mse')\n"
        f"{feed}\n"
    )


def test_only_training_counts():
    assert analyse(_off("model.evaluate(dataset)"), OPTIONS).findings == []
    assert analyse(_off("model.fit(other, validation_data=dataset)"), OPTIONS).findings == []
    assert [f.line for f in analyse(_off("model.fit(x=dataset)"), OPTIONS).findings] == [4]


def test_mirrored_strategy_is_one_worker():
    assert analyse(_off("model.fit(dataset)", "tf.distribute.MirroredStrategy()"), OPTIONS).findings == []


def test_a_dataset_from_an_unknown_place_is_not_judged():
    source = _off("model.fit(dataset.concatenate(make_more()))").replace(
        "dataset = tf.data.Dataset.range(8)", "dataset = loader.load()"
    )
    assert analyse(source, OPTIONS).findings == []


def test_shard_after_with_options_counts_as_sharded():
    source = _off("model.fit(dataset.shard(2, strategy.cluster_resolver.task_id))")
    assert analyse(source, OPTIONS).findings == []


def _old(value: str, pipeline: str = "tf.data.Dataset.range(8).batch(2)", strategy: str = "tf.distribute.MultiWorkerMirroredStrategy()") -> str:
    return (
        "import tensorflow as tf\n"
        f"strategy = {strategy}\n"
        "options = tf.data.Options()\n"
        f"options.experimental_distribute.auto_shard = {value}\n"
        f"dataset = {pipeline}.with_options(options)\n"
        "with strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "    model.compile(optimizer='sgd', loss='mse')\n"
        "model.fit(dataset)\n"
    )


def test_tf1_auto_shard_is_reported_at_its_line():
    for value in ("True", "False", "flags.shard"):
        (finding,) = analyse(_old(value), OPTIONS).findings
        assert finding.line == 4 and "AttributeError" in finding.message
    assert analyse(_old("False", strategy="tf.distribute.MirroredStrategy()"), OPTIONS).findings == []


def test_tf1_auto_shard_false_becomes_off_only_where_every_dataset_is_sharded():
    sharded = analyse(_old("False", "tf.data.Dataset.range(8).shard(2, 0).batch(2)"), OPTIONS)
    assert "auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF\n" in sharded.new_text
    # The same options also given to a dataset that is not sharded: every worker would read it whole.
    both = _old("False", "tf.data.Dataset.range(8).shard(2, 0).batch(2)").replace(
        "model.fit(dataset)\n", "extra = tf.data.Dataset.range(8).batch(2).with_options(options)\nmodel.fit(dataset)\nmodel.fit(extra)\n"
    )
    analysis = analyse(both, OPTIONS)
    assert analysis.new_text is None
    assert "every worker train on the same examples" in analysis.findings[0].reason


def test_tf1_auto_shard_true_keeps_the_files_tensorflow_name():
    source = _old("True").replace("import tensorflow as tf\n", "import tensorflow as tflib\n").replace("tf.", "tflib.")
    fixed = analyse(source, OPTIONS).new_text
    assert fixed is not None and "auto_shard_policy = tflib.data.experimental.AutoShardPolicy.AUTO\n" in fixed
