import os
import sys
from pathlib import Path

# The fixture helpers live next to the tests.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The result cache stays off in tests (and in the autofix processes they start): many tests
# change the engine or the rules in-process, which the cache's key (the tool's source files)
# cannot see. tests/test_cache.py turns it on where it is what is tested.
os.environ["AUTOFIX_NO_CACHE"] = "1"

BROKEN = (
    "import tensorflow as tf\n"
    "\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
    "model.compile(optimizer='adam', loss='mse')\n"
    "model.fit(x, y)\n"
)
FIXED = (
    "import tensorflow as tf\n"
    "\n"
    "strategy = tf.distribute.MirroredStrategy()\n"
    "with strategy.scope():\n"
    "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
    "    model.compile(optimizer='adam', loss='mse')\n"
    "model.fit(x, y)\n"
)
