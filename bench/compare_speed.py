"""How long ``autofix smoke MIGRATED --compare ORIGINAL`` takes for one pair (target: under 20 s
on 2 cores, TensorFlow's start-up included).

    python bench/compare_speed.py [--repeat 3] [--steps 3] [PAIR ...]

PAIR is a name of fixtures/smoke/compare (``loop`` for loop.migrated.py against loop.py); the
default is a fit script, a custom loop and a GAN trained with fit. Each pair is compared alone,
as a user runs it (a fresh process, TensorFlow started once for the pair's runs), ``--repeat``
times; the median wall time of each is printed with the verdict, then whether every median is
under the target. Exit status 0 when they all are, 1 otherwise.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAIRS = HERE.parent / "fixtures" / "smoke" / "compare"
TARGET = 20.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", nargs="*", default=["fit", "loop", "gan_fit"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    medians = {}
    for name in args.pairs:
        migrated, original = PAIRS / f"{name}.migrated.py", PAIRS / f"{name}.py"
        if not migrated.exists() or not original.exists():
            print(f"{name}: no such pair in {PAIRS}", file=sys.stderr)
            return 2
        times, verdict = [], ""
        for _ in range(args.repeat):
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "autofix.cli", "smoke", str(migrated), "--compare", str(original), "--steps", str(args.steps)],
                capture_output=True, text=True,
            )
            times.append(time.perf_counter() - started)
            verdict = next((line.split()[1] for line in done.stdout.splitlines() if line.startswith("compare:")), f"exit {done.returncode}")
        medians[name] = statistics.median(times)
        print(f"{name:12} {medians[name]:6.1f} s  (runs: {', '.join(f'{t:.1f}' for t in times)})  {verdict}")
    slowest = max(medians.values())
    print(f"slowest median {slowest:.1f} s: {'within' if slowest <= TARGET else 'OVER'} the {TARGET:g} s target")
    return 0 if slowest <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
