"""Overhead of `autofix smoke` against running the same script plainly with the same step cap.

For each script, measured in the same run (wall time of the whole process, TensorFlow's
start-up included, median of --repeat runs):

- plain:        ``python SCRIPT --steps K`` (one replica: all a CPU-only machine gives);
- plain x2:     the same, with the CPU split into the same 2 logical devices and
                ``ReductionToOneDevice`` the harness provides, so that both do the same
                distributed work (the baseline for the ratio);
- smoke:        ``run_smoke(SCRIPT, replicas=2, steps=K, args=("--steps", K))``.

Then all scripts together: one ``run_many`` process against one plain x2 process per script.

    python bench/smoke_overhead.py [--steps 3] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from autofix.smoke import SmokeJob, run_many, run_smoke

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = [ROOT / "fixtures" / "smoke" / "fit_steps.py", ROOT / "fixtures" / "smoke" / "custom_loop.py"]
TARGET = 1.3

# What a plain script would see on a machine with 2 devices, written out by hand.
TWO_DEVICES = """
import runpy, sys
import tensorflow as tf
cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
init = tf.distribute.MirroredStrategy.__init__
def two(self, devices=None, cross_device_ops=None):
    devices = devices or [d.name for d in tf.config.list_logical_devices("CPU")]
    init(self, devices, cross_device_ops or tf.distribute.ReductionToOneDevice())
tf.distribute.MirroredStrategy.__init__ = two
sys.argv = sys.argv[1:]
sys.path[0] = sys.argv[0].rpartition("/")[0]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def timed(run) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def plain(script: Path, steps: int, two_devices: bool) -> None:
    prefix = [sys.executable, "-c", TWO_DEVICES] if two_devices else [sys.executable]
    subprocess.run([*prefix, str(script), "--steps", str(steps)], cwd=script.parent, check=True, capture_output=True)


def smoke(script: Path, steps: int) -> None:
    report = run_smoke(script, replicas=2, steps=steps, args=("--steps", str(steps)), offline=True)
    if not report.ok:
        raise SystemExit(f"{script.name} failed its smoke test: {report.failures}")


def median(run, repeat: int) -> float:
    return statistics.median(timed(run) for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    steps, repeat = options.steps, options.repeat

    print(f"{'script':<16} {'plain':>8} {'plain x2':>9} {'smoke':>8} {'smoke/plain x2':>15} {'smoke/plain':>12}")
    totals = {"plain x2": 0.0, "smoke": 0.0}
    for script in SCRIPTS:
        one = median(lambda script=script: plain(script, steps, False), repeat)
        two = median(lambda script=script: plain(script, steps, True), repeat)
        harness = median(lambda script=script: smoke(script, steps), repeat)
        totals["plain x2"] += two
        totals["smoke"] += harness
        print(f"{script.name:<16} {one:7.2f}s {two:8.2f}s {harness:7.2f}s {harness / two:14.2f}x {harness / one:11.2f}x")

    jobs = [SmokeJob(str(s), ("--steps", str(steps))) for s in SCRIPTS]

    def batch() -> None:
        reports = run_many(jobs, replicas=2, steps=steps, offline=True)
        if not all(r.ok for r in reports):
            raise SystemExit(f"run_many failed: {[r.failures for r in reports]}")

    together = median(batch, repeat)
    ratio = totals["smoke"] / totals["plain x2"]
    print(f"\nall scripts, one process each:  plain x2 {totals['plain x2']:.2f}s  smoke {totals['smoke']:.2f}s  ratio {ratio:.2f}x")
    print(f"all scripts, run_many (1 process): {together:.2f}s  ratio {together / totals['plain x2']:.2f}x against plain x2")
    print(f"target: smoke/plain x2 under {TARGET}x -> {'met' if ratio < TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
