import sys
from pathlib import Path

# The fixture helpers live next to the tests.
sys.path.insert(0, str(Path(__file__).resolve().parent))

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
