"""fit fed by a Python-side batcher (fixtures/tfd010/fit_image_data_generator_flow,
fit_generator_function, fit_pydataset and their report_ twins): under MirroredStrategy each
batch a batcher yields is the global batch, split over the replicas (measured, docs/migrate.md),
so the migration asks it for N x the original's batch, or says why it cannot."""

from __future__ import annotations

import pytest
from fixturecases import FIXTURES, read

from autofix.engine import Options, analyse


def _migrate(source: str):
    return analyse(source, Options(migrate="mirrored"))


@pytest.mark.parametrize(
    ("case", "scaled"),
    [
        ("fit_image_data_generator_flow", "datagen.flow(x_train, y_train, batch_size=GLOBAL_BATCH_SIZE)"),
        ("fit_generator_function", "batches(features, labels, 32 * strategy.num_replicas_in_sync)"),
        ("fit_pydataset", "ArrayBatches(x, y, BATCH * strategy.num_replicas_in_sync)"),
    ],
)
def test_the_batcher_is_asked_for_the_global_batch(case, scaled):
    migrated = _migrate(read(FIXTURES / "tfd010" / f"{case}.py")).new_text
    assert migrated is not None and scaled in migrated
    # Applied twice, nothing changes.
    assert _migrate(migrated).new_text is None


def test_what_is_computed_from_the_flows_batch_follows_it_and_a_log_keeps_the_per_replica_batch():
    flow = _migrate(read(FIXTURES / "tfd010" / "fit_image_data_generator_flow.py")).new_text
    assert "steps_per_epoch=len(x_train) // GLOBAL_BATCH_SIZE" in flow
    dataset = _migrate(read(FIXTURES / "tfd010" / "fit_pydataset.py")).new_text
    assert 'print("trained on batches of", BATCH)' in dataset


FLOW_DEFAULT = (
    "import numpy as np\n"
    "import keras\n"
    "from tensorflow.keras.preprocessing.image import ImageDataGenerator\n"
    "\n"
    "x = np.random.rand(64, 4, 4, 1).astype('float32')\n"
    "y = np.random.rand(64, 1).astype('float32')\n"
    "model = keras.Sequential([keras.Input((4, 4, 1)), keras.layers.Flatten(), keras.layers.Dense(1)])\n"
    "model.compile(optimizer='sgd', loss='mse')\n"
    "model.fit(ImageDataGenerator().flow(x, y), epochs=1)\n"
)


def test_a_flow_given_no_batch_gets_kerass_default_written_out_global():
    migrated = _migrate(FLOW_DEFAULT).new_text
    assert migrated is not None
    assert "flow(x, y, batch_size=32 * strategy.num_replicas_in_sync)" in migrated


def test_a_flow_given_a_seed_with_random_transforms_is_migrated_and_without_one_refused():
    unseeded = FLOW_DEFAULT.replace("ImageDataGenerator()", "ImageDataGenerator(horizontal_flip=True)")
    refused = _migrate(unseeded)
    assert refused.new_text is None
    assert any("horizontal_flip=" in (f.reason or "") and "no seed given to flow" in (f.reason or "") for f in refused.findings)
    seeded = unseeded.replace("flow(x, y)", "flow(x, y, seed=3)")
    assert "batch_size=32 * strategy.num_replicas_in_sync" in (_migrate(seeded).new_text or "")


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("report_fit_flow_unseeded_augmentation", "it transforms each image at random (rotation_range=, line 14) with no seed given to flow"),
        ("report_fit_generator_unseeded", "sample() (line 10) draws np.random.randint() with NumPy's or Python's global generator"),
        ("report_fit_generator_batch_read_elsewhere", "batches() (line 11) yields on line 15 something other than slices"),
    ],
)
def test_a_batcher_whose_batch_cannot_be_followed_or_held_equal_is_named_at_fit(case, why):
    source = read(FIXTURES / "tfd010" / f"{case}.py")
    analysis = _migrate(source)
    assert analysis.new_text is None
    assert any(why in (f.reason or "") for f in analysis.findings), [f.reason for f in analysis.findings]


def test_a_generator_reading_its_batch_elsewhere_is_refused():
    source = read(FIXTURES / "tfd010" / "fit_generator_function.py").replace(
        "        for start in range", "        print(batch_size)\n        for start in range"
    )
    analysis = _migrate(source)
    assert analysis.new_text is None
    assert any("reads its batch batch_size on line" in (f.reason or "") for f in analysis.findings)


def test_a_pydataset_whose_getitem_reads_its_batch_otherwise_is_refused():
    source = read(FIXTURES / "tfd010" / "fit_pydataset.py").replace(
        "    def __getitem__(self, index):\n", "    def __getitem__(self, index):\n        assert self.batch_size > 0\n"
    )
    analysis = _migrate(source)
    assert analysis.new_text is None
    assert any("__getitem__ reads self.batch_size" in (f.reason or "") for f in analysis.findings)


@pytest.mark.tf
def test_a_flow_migration_is_proven_on_two_replicas():
    """fit_image_data_generator_flow: its migration computes what the original does at N x its
    batch (smoke --compare, which asks the original's flow for N x its batch too); the migration
    with the flow's batch left per replica is told apart."""
    pytest.importorskip("tensorflow")
    from autofix.smoke.compare import ComparePair, compare_many

    original = FIXTURES / "tfd010" / "fit_image_data_generator_flow.py"
    fixed = FIXTURES / "tfd010" / "fit_image_data_generator_flow.fixed.py"
    (proven,) = compare_many([ComparePair(str(fixed), str(original))], replicas=2, offline=True)
    assert proven.compare.status == "equivalent", proven.compare.message


@pytest.mark.tf
def test_a_flow_left_per_replica_is_told_apart(tmp_path):
    pytest.importorskip("tensorflow")
    from autofix.smoke.compare import ComparePair, compare_many

    original = FIXTURES / "tfd010" / "fit_image_data_generator_flow.py"
    unscaled = tmp_path / "unscaled.py"
    text = read(FIXTURES / "tfd010" / "fit_image_data_generator_flow.fixed.py")
    unscaled.write_text(text.replace("batch_size=GLOBAL_BATCH_SIZE", "batch_size=BATCH_SIZE"))
    assert unscaled.read_text() != text
    (told,) = compare_many([ComparePair(str(unscaled), str(original))], replicas=2, offline=True)
    assert told.compare.status != "equivalent", told.compare.message
