import os
import subprocess
import sys
from pathlib import Path

import pytest

# The fixture helpers live next to the tests.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The result cache stays off in tests (and in the autofix processes they start): many tests
# change the engine or the rules in-process, which the cache's key (the tool's source files)
# cannot see. tests/test_cache.py turns it on where it is what is tested.
os.environ["AUTOFIX_NO_CACHE"] = "1"

# --- progress while TensorFlow runs --------------------------------------------------------
# The tests marked `tf` train scripts for real and take minutes; with -q their dots come
# seconds or minutes apart. Each one gets a line of its own (its name as it starts, its result
# letter after it), and a batch of scripts trained in one process says so (announce()).

_config = None
_TF_TESTS: set[str] = set()


def pytest_configure(config):
    global _config
    _config = config


def pytest_collection_finish(session):
    _TF_TESTS.update(item.nodeid for item in session.items if item.get_closest_marker("tf"))


def _reporter():
    if _config is None:
        return None
    reporter = _config.pluginmanager.getplugin("terminalreporter")
    # -v already prints one line per test.
    return reporter if reporter is not None and reporter.verbosity <= 0 else None


def pytest_runtest_logstart(nodeid, location):
    reporter = _reporter()
    if reporter is None or nodeid not in _TF_TESTS:
        return
    if reporter._tw.width_of_current_line:
        reporter._tw.line()
    reporter._tw.write(f"{nodeid} ", flush=True)


@pytest.hookimpl(trylast=True)
def pytest_runtest_logfinish(nodeid, location):
    # After the terminal reporter's own, which may already have ended the line with "[ 45%]".
    reporter = _reporter()
    if reporter is not None and nodeid in _TF_TESTS and reporter._tw.width_of_current_line:
        reporter._tw.line()


def announce(message: str) -> None:
    """Say on the terminal, while a test runs, what takes long (e.g. a batch of scripts)."""
    reporter = _reporter()
    if reporter is None:
        return
    capture = _config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        reporter._tw.write(f"[{message}] ", flush=True)

def measure_script(script, keras: int, what: str, timeout: float = 300) -> dict[str, str]:
    """Run one of tests/data's measuring scripts on Keras 3 (``keras=3``) or tf_keras
    (``keras=2``: ``TF_USE_LEGACY_KERAS=1`` and its ``keras2`` argument) and read the
    ``name<TAB>value`` lines it prints."""
    announce(f"measuring {what} on Keras {keras}")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    args = [sys.executable, str(script)]
    if keras == 2:
        env["TF_USE_LEGACY_KERAS"] = "1"
        args.append("keras2")
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, check=True).stdout
    return dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)


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


def dead(pid: int) -> bool:
    """Whether process ``pid`` has ended (gone, or a zombie waiting for its parent)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


@pytest.fixture
def cached(monkeypatch):
    """The cache on (the test session turns it off), and a count of files analysed."""
    from autofix import cache, engine

    monkeypatch.delenv(cache.ENV_OFF, raising=False)
    monkeypatch.delenv(cache.ENV_DIR, raising=False)
    analysed: list[int] = []
    real = engine.analyse_as_written

    def counting(text, options, path=None):
        analysed.append(1)
        return real(text, options, path)

    monkeypatch.setattr(engine, "analyse_as_written", counting)
    return analysed
