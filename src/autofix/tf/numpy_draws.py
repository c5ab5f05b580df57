"""NumPy's random draws of a distribution ``tf.random`` draws too: the migration rewrites a
step's draw as its ``tf.random`` twin (analysis/migration/host_draws.py), and the proof holds the
two equal (smoke/noise.py). One table for both, so that they cannot disagree. And the calls that
seed the generators (the migration's placement, TFD008's per-worker data)."""

from __future__ import annotations

# NumPy's draw -> (the tf.random draw, its parameters as NumPy names them, in order, with the
# names tf.random gives them; whether the shape is given as separate numbers, randn's way).
NUMPY_DRAWS: dict[str, tuple[str, tuple[tuple[str, str], ...], bool]] = {
    "normal": ("normal", (("loc", "mean"), ("scale", "stddev")), False),
    "standard_normal": ("normal", (), False),
    "randn": ("normal", (), True),
    "uniform": ("uniform", (("low", "minval"), ("high", "maxval")), False),
    "random": ("uniform", (), False),
    "random_sample": ("uniform", (), False),
    "rand": ("uniform", (), True),
}

# Calls that seed the generators a script draws from (NumPy's, Python's, TensorFlow's, Keras's),
# as the analysis names them (``tf.keras`` and ``tf_keras`` read as ``keras``): after one, every
# process that runs the script draws the same numbers.
SEEDS = frozenset({"numpy.random.seed", "random.seed", "tensorflow.random.set_seed", "keras.utils.set_random_seed"})
