"""Benchmark: autofix against the floor (libcst's no-op codemod) and tf_upgrade_v2.

    python bench/run.py [--jobs N] [--copies K] [--out DIR] [--skip-tf-upgrade]

Builds two corpora in DIR (default bench/out, git-ignored):

- tf-only: the project's fixtures and example repo copied into folders until there are at
  least 400 TensorFlow training scripts (about 1 kB each: start-up costs weigh heavily);
- tf-real-size: 400 training scripts of about 10 kB, the size of real ones (the issue's
  reference corpus: 390 scripts, 3.9 MB), each made of a dozen fixtures one after another;
- mixed: Python's own standard library plus a few dozen of those scripts (a typical repo in
  which few files use tf.distribute).

Then times, one after another on the same files with the same number of processes: ``autofix
check`` and ``autofix diff``; ``python -m libcst.tool codemod noop.NOOPCommand`` (parse +
print, the floor for any libcst tool); and ``tf_upgrade_v2`` on the tf-only corpus (one
process, as it runs). Each is the median wall time of ``--repeat`` runs; peak memory is the
largest resident set of any process of the tool. Also checks that autofix's peak memory stays
flat when the corpus grows (results are streamed, not collected). Prints a Markdown table
(README's is made with this script).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TF_SOURCES = sorted(
    p
    for folder in ("fixtures", "examples")
    for p in (ROOT / folder).rglob("*.py")
    if "smoke" not in p.parts  # the smoke fixtures include a script that sleeps on purpose
)


def build_tf_corpus(target: Path, minimum: int) -> int:
    count = 0
    copy = 0
    while count < minimum:
        copy += 1
        for source in TF_SOURCES:
            relative = source.relative_to(ROOT)
            destination = target / f"copy{copy:02}" / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, destination)
            count += 1
    return count


def build_real_size_corpus(target: Path, files: int, per_file: int = 12) -> int:
    scripts = [p for p in TF_SOURCES if "fixtures" in p.parts]
    for index in range(files):
        parts = [scripts[(index * 7 + k * 13) % len(scripts)] for k in range(per_file)]
        text = "\n\n".join(p.read_text() for p in parts)
        destination = target / f"group{index // 50:02}" / f"train_{index:03}.py"
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_text(text)
    return files


def build_mixed_corpus(target: Path, tf_scripts: int) -> int:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    count = 0
    for source in stdlib.rglob("*.py"):
        relative = source.relative_to(stdlib)
        if relative.parts[0] in ("site-packages", "lib2to3", "test", "idlelib") or "tests" in relative.parts:
            continue  # installed packages are not the standard library; test data holds broken files
        destination = target / "stdlib" / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)
        count += 1
    for index, source in enumerate(TF_SOURCES[:tf_scripts]):
        destination = target / "training" / f"{index:03}_{source.name}"
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)
        count += 1
    return count


def measure(name: str, command: list[str], cwd: Path, repeat: int, clean: Path | None = None) -> tuple[float, float, float]:
    """Median wall time, peak memory and median CPU time (all processes, user + system) of
    ``repeat`` runs; ``clean`` (an output folder) is removed before each run (tf_upgrade_v2
    refuses to write into an existing one). CPU time varies much less than wall time on a
    machine shared with other work."""
    runner = [sys.executable, "-c", _MEASURE, *command]
    results = []
    for _ in range(repeat):
        if clean is not None:
            shutil.rmtree(clean, ignore_errors=True)
        completed = subprocess.run(runner, cwd=cwd, capture_output=True, text=True)
        if completed.returncode != 0:
            raise SystemExit(f"{name} failed:\n{completed.stderr[-3000:]}")
        seconds, peak, cpu = map(float, completed.stdout.split())
        results.append((seconds, peak, cpu))
    return (
        statistics.median(r[0] for r in results),
        max(r[1] for r in results),
        statistics.median(r[2] for r in results),
    )


# Runs one tool in a fresh interpreter so that its peak memory is its own.
_MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
seconds = time.perf_counter() - start
# autofix check/diff exit 1 when they find something; tf_upgrade_v2 only exits 0 on success.
allowed = (0,) if "tf_upgrade_v2" in sys.argv[1] else (0, 1)
if done.returncode not in allowed:
    sys.stderr.write(done.stderr[-3000:])
    sys.exit(done.returncode)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(seconds, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--minimum", type=int, default=400, help="TF scripts in the tf-only corpus")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--skip-tf-upgrade", action="store_true")
    args = parser.parse_args()

    out = args.out or Path(tempfile.mkdtemp(prefix="autofix-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    tf_corpus, mixed_corpus, big_corpus = out / "tf-only", out / "mixed", out / "tf-only-x4"
    real_corpus = out / "tf-real-size"
    for folder in (tf_corpus, mixed_corpus, big_corpus, real_corpus):
        shutil.rmtree(folder, ignore_errors=True)
    tf_files = build_tf_corpus(tf_corpus, args.minimum)
    real_files = build_real_size_corpus(real_corpus, args.minimum)
    big_files = build_tf_corpus(big_corpus, 4 * args.minimum)
    mixed_files = build_mixed_corpus(mixed_corpus, 40)
    size = lambda folder: sum(p.stat().st_size for p in folder.rglob("*.py")) / 1e6  # noqa: E731

    bin_dir = Path(sys.executable).parent
    autofix = [str(bin_dir / "autofix")]
    jobs = str(args.jobs)
    noop = [sys.executable, "-m", "libcst.tool", "codemod", "noop.NOOPCommand", "--no-format", "--hide-progress", "-j", jobs]
    rows = []
    cpus: dict[tuple[str, str], float] = {}

    def run(label: str, corpus: Path, files: int, command: list[str], clean: Path | None = None) -> float:
        seconds, peak, cpu = measure(label, command, corpus.parent, args.repeat, clean)
        rows.append((label, corpus.name, files, seconds, files / seconds, peak, cpu))
        cpus[(label, corpus.name)] = cpu
        return seconds

    floor_tf = run("libcst no-op codemod", tf_corpus, tf_files, [*noop, tf_corpus.name])
    check_tf = run("autofix check", tf_corpus, tf_files, [*autofix, "check", "--isolated", "-j", jobs, tf_corpus.name])
    diff_tf = run("autofix diff", tf_corpus, tf_files, [*autofix, "diff", "--isolated", "-j", jobs, tf_corpus.name])
    upgrade = shutil.which("tf_upgrade_v2", path=str(bin_dir)) or shutil.which("tf_upgrade_v2")

    def run_upgrade(corpus: Path, files: int) -> float | None:
        if not upgrade or args.skip_tf_upgrade:
            return None
        outtree = out / "tf-upgraded"
        seconds = run(
            "tf_upgrade_v2 (1 process)",
            corpus,
            files,
            [upgrade, "--intree", corpus.name, "--outtree", outtree.name, "--reportfile", str(out / "tf-upgrade.txt")],
            clean=outtree,
        )
        shutil.rmtree(outtree, ignore_errors=True)
        return seconds

    upgrade_tf = run_upgrade(tf_corpus, tf_files)
    floor_real = run("libcst no-op codemod", real_corpus, real_files, [*noop, real_corpus.name])
    check_real = run("autofix check", real_corpus, real_files, [*autofix, "check", "--isolated", "-j", jobs, real_corpus.name])
    diff_real = run("autofix diff", real_corpus, real_files, [*autofix, "diff", "--isolated", "-j", jobs, real_corpus.name])
    upgrade_real = run_upgrade(real_corpus, real_files)
    floor_mixed = run("libcst no-op codemod", mixed_corpus, mixed_files, [*noop, mixed_corpus.name])
    check_mixed = run("autofix check", mixed_corpus, mixed_files, [*autofix, "check", "--isolated", "-j", jobs, mixed_corpus.name])
    run("autofix diff", mixed_corpus, mixed_files, [*autofix, "diff", "--isolated", "-j", jobs, mixed_corpus.name])
    run("autofix check", big_corpus, big_files, [*autofix, "check", "--isolated", "-j", jobs, big_corpus.name])

    print(
        f"jobs={jobs}, median of {args.repeat} runs; tf-only {size(tf_corpus):.1f} MB, "
        f"tf-real-size {size(real_corpus):.1f} MB, mixed {size(mixed_corpus):.1f} MB\n"
    )
    print("| tool | corpus | files | wall s | files/s | CPU s | peak MiB |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for label, corpus, files, seconds, rate, peak, cpu in rows:
        print(f"| {label} | {corpus} | {files} | {seconds:.2f} | {rate:.0f} | {cpu:.2f} | {peak:.0f} |")
    print()
    noop_cpu = cpus[("libcst no-op codemod", "tf-only")]
    print(
        f"- tf-only: autofix check / no-op = {check_tf / floor_tf:.2f}x wall, "
        f"{cpus[('autofix check', 'tf-only')] / noop_cpu:.2f}x CPU (target <= 1.0x); diff / no-op = {diff_tf / floor_tf:.2f}x"
    )
    real_cpu = cpus[("libcst no-op codemod", "tf-real-size")]
    print(
        f"- tf-real-size: autofix check / no-op = {check_real / floor_real:.2f}x wall, "
        f"{cpus[('autofix check', 'tf-real-size')] / real_cpu:.2f}x CPU; diff / no-op = {diff_real / floor_real:.2f}x"
    )
    if upgrade_tf:
        print(f"- tf-only: tf_upgrade_v2 / autofix check = {upgrade_tf / check_tf:.1f}x faster (target >= 3x)")
    if upgrade_real:
        print(f"- tf-real-size: tf_upgrade_v2 / autofix check = {upgrade_real / check_real:.1f}x faster (target >= 3x)")
    print(f"- mixed: no-op / autofix check = {floor_mixed / check_mixed:.1f}x faster (target >= 5x)")
    peaks = {corpus: peak for label, corpus, _f, _s, _r, peak, _c in rows if label == "autofix check"}
    print(
        f"- memory: autofix check peak {peaks.get('tf-only', 0):.0f} MiB on {tf_files} files, "
        f"{peaks.get('tf-only-x4', 0):.0f} MiB on {big_files} files"
    )


if __name__ == "__main__":
    main()
