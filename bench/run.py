"""Benchmark: autofix against the floor (libcst's no-op codemod) and tf_upgrade_v2.

    python bench/run.py [--jobs N] [--out DIR] [--skip-tf-upgrade] [--realworld DIR] [--only-realworld]
                        [--repos DIR] [--only-repos]

Builds these corpora in DIR (default: a new temporary folder):

- tf-only: the project's fixtures and example repo copied into folders until there are at
  least 400 TensorFlow training scripts (about 1 kB each: start-up costs weigh heavily);
- tf-real-size: 400 training scripts of about 10 kB, the size of real ones (the issue's
  reference corpus: 390 scripts, 3.9 MB), each made of a dozen fixtures one after another;
- mixed: Python's own standard library plus a few dozen of those scripts (a typical repo in
  which few files use tf.distribute);
- realworld-x2 and realworld-py-x2, when the real-world corpus is at hand (``--realworld DIR``,
  else ``$AUTOFIX_CORPUS``, else ``bench/realworld/files`` once ``bench/realworld/fetch.py``
  has fetched it; the files are never part of the repository): its scripts and notebooks
  twice, the second copy with one more newline at the end of each file so that no two files
  have the same bytes (the result cache finds entries by content); and its scripts alone
  twice, which libcst's no-op codemod can read (it does not read notebooks);
- repos-x2, when the repository corpus is at hand (``--repos DIR``, else
  ``bench/repos/files`` once ``bench/repos/fetch.py`` has fetched it): every program's tree
  (its entry and the project modules it imports, with the pins beside them) twice, the second
  copy with one more newline at the end of each Python file; ``check`` follows each entry's
  imports into the modules of its own tree, as it does on a repository.

Then times, one after another on the same files with the same number of processes: ``autofix
check`` and ``autofix diff`` (``--no-cache``: the analysis itself); ``python -m libcst.tool
codemod noop.NOOPCommand`` (parse + print, the floor for any libcst tool); ``tf_upgrade_v2``
on the tf-only corpus (one process, as it runs); and, on realworld-x2, ``autofix check`` with
the result cache cold (an empty cache folder each run) and warm (the same folder again). Each is the median wall time of ``--repeat`` runs; peak memory is the
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
    # tf_upgrade_v2's parser (pasta) crashes on assignment expressions; every tool runs on the
    # same files, so those fixtures are left out of the corpora.
    and ":=" not in p.read_text(encoding="utf-8")
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


def build_realworld_corpus(source: Path, target: Path, notebooks: bool = True) -> int:
    """The real-world files twice: ``a/`` as they are, ``b/`` each with one more trailing
    newline (the same code, other bytes)."""
    count = 0
    for path in sorted(source.iterdir()):
        if path.suffix not in ((".py", ".ipynb") if notebooks else (".py",)):
            continue
        for copy, extra in (("a", b""), ("b", b"\n")):
            destination = target / copy / path.name
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(path.read_bytes() + extra)
            count += 1
    return count


def build_repos_corpus(source: Path, target: Path) -> int:
    """Each tree of the repository corpus twice (``a/<id>``, ``b/<id>``: one more newline at
    the end of each Python file); notebooks are left out, as libcst's no-op codemod skips them.
    Returns the number of Python files."""
    count = 0
    for tree in sorted(p for p in source.iterdir() if p.is_dir()):
        for path in sorted(p for p in tree.rglob("*") if p.is_file() and p.suffix != ".ipynb"):
            for copy, extra in (("a", b""), ("b", b"\n")):
                destination = target / copy / tree.name / path.relative_to(tree)
                destination.parent.mkdir(parents=True, exist_ok=True)
                python = path.suffix == ".py"
                destination.write_bytes(path.read_bytes() + (extra if python else b""))
                count += python
    return count


def corpus_folder(*candidates: Path | str | None) -> Path | None:
    """The first of ``candidates`` that is a folder holding something."""
    for candidate in candidates:
        if candidate and Path(candidate).is_dir() and any(Path(candidate).iterdir()):
            return Path(candidate)
    return None


def realworld_folder(given: Path | None) -> Path | None:
    return corpus_folder(given, os.environ.get("AUTOFIX_CORPUS"), ROOT / "bench" / "realworld" / "files")


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
# autofix check/diff exit 1 when they find something, and 2 when a file cannot be read (real
# code has syntax errors) after checking the others; tf_upgrade_v2 only exits 0 on success.
allowed = (0,) if "tf_upgrade_v2" in sys.argv[1] else (0, 1, 2) if "autofix" in sys.argv[1] else (0, 1)
if done.returncode not in allowed or (done.returncode == 2 and "Checked" not in done.stderr):
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
    parser.add_argument("--realworld", type=Path, default=None, help="folder of the real-world corpus")
    parser.add_argument("--only-realworld", action="store_true", help="measure the real-world corpus only")
    parser.add_argument("--repos", type=Path, default=None, help="folder of the repository corpus (bench/repos/files)")
    parser.add_argument("--only-repos", action="store_true", help="measure the repository corpus only")
    args = parser.parse_args()

    out = args.out or Path(tempfile.mkdtemp(prefix="autofix-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    bin_dir = Path(sys.executable).parent
    jobs = str(args.jobs)
    autofix = [str(bin_dir / "autofix")]
    check = [*autofix, "check", "--isolated", "--no-cache", "-j", jobs]
    diff = [*autofix, "diff", "--isolated", "--no-cache", "-j", jobs]
    noop = [sys.executable, "-m", "libcst.tool", "codemod", "noop.NOOPCommand", "--no-format", "--hide-progress", "-j", jobs]
    rows = []
    walls: dict[tuple[str, str], float] = {}
    cpus: dict[tuple[str, str], float] = {}
    sizes: dict[str, float] = {}

    def run(label: str, corpus: Path, files: int, command: list[str], clean: Path | None = None) -> float:
        seconds, peak, cpu = measure(label, command, corpus.parent, args.repeat, clean)
        rows.append((label, corpus.name, files, seconds, files / seconds, peak, cpu))
        walls[(label, corpus.name)] = seconds
        cpus[(label, corpus.name)] = cpu
        sizes[corpus.name] = sum(p.stat().st_size for p in corpus.rglob("*") if p.is_file()) / 1e6
        return seconds

    def fresh(name: str) -> Path:
        folder = out / name
        shutil.rmtree(folder, ignore_errors=True)
        return folder

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

    if not (args.only_realworld or args.only_repos):
        tf_corpus, real_corpus, mixed_corpus, big_corpus = (fresh(n) for n in ("tf-only", "tf-real-size", "mixed", "tf-only-x4"))
        tf_files = build_tf_corpus(tf_corpus, args.minimum)
        real_files = build_real_size_corpus(real_corpus, args.minimum)
        big_files = build_tf_corpus(big_corpus, 4 * args.minimum)
        mixed_files = build_mixed_corpus(mixed_corpus, 40)
        for corpus, files in ((tf_corpus, tf_files), (real_corpus, real_files)):
            run("libcst no-op codemod", corpus, files, [*noop, corpus.name])
            run("autofix check", corpus, files, [*check, corpus.name])
            run("autofix diff", corpus, files, [*diff, corpus.name])
            run_upgrade(corpus, files)
        run("libcst no-op codemod", mixed_corpus, mixed_files, [*noop, mixed_corpus.name])
        run("autofix check", mixed_corpus, mixed_files, [*check, mixed_corpus.name])
        run("autofix diff", mixed_corpus, mixed_files, [*diff, mixed_corpus.name])
        run("autofix check", big_corpus, big_files, [*check, big_corpus.name])

    repos = corpus_folder(args.repos, ROOT / "bench" / "repos" / "files")
    if repos is not None and not args.only_realworld:
        trees = fresh("repos-x2")
        tree_files = build_repos_corpus(repos, trees)
        run("libcst no-op codemod", trees, tree_files, [*noop, trees.name])
        run("autofix check", trees, tree_files, [*check, trees.name])

    source = realworld_folder(args.realworld)
    if source is not None and not args.only_repos:
        both, scripts = fresh("realworld-x2"), fresh("realworld-py-x2")
        both_files = build_realworld_corpus(source, both)
        script_files = build_realworld_corpus(source, scripts, notebooks=False)
        run("libcst no-op codemod", scripts, script_files, [*noop, scripts.name])
        run("autofix check", scripts, script_files, [*check, scripts.name])
        run("autofix diff", scripts, script_files, [*diff, scripts.name])
        cached = [*autofix, "check", "--isolated", "-j", jobs]
        cold_cache = out / "cache-cold"
        run("autofix check, cache cold", both, both_files, [*cached, "--cache-dir", str(cold_cache), both.name], clean=cold_cache)
        warm_cache = fresh("cache-warm")
        subprocess.run([*cached, "--cache-dir", str(warm_cache), both.name], cwd=out, capture_output=True)
        run("autofix check, cache warm", both, both_files, [*cached, "--cache-dir", str(warm_cache), both.name])

    print(f"jobs={jobs}, median of {args.repeat} runs; " + ", ".join(f"{name} {mb:.1f} MB" for name, mb in sizes.items()) + "\n")
    print("| tool | corpus | files | wall s | files/s | CPU s | peak MiB |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for label, corpus, files, seconds, rate, peak, cpu in rows:
        print(f"| {label} | {corpus} | {files} | {seconds:.2f} | {rate:.0f} | {cpu:.2f} | {peak:.0f} |")
    print()
    print("| ratio | wall | CPU | target |")
    print("| --- | ---: | ---: | ---: |")

    def ratio(what: str, a: tuple[str, str], b: tuple[str, str], target: str = "") -> None:
        if a in walls and b in walls:
            print(f"| {what} | {walls[a] / walls[b]:.2f}x | {cpus[a] / cpus[b]:.2f}x | {target} |")

    floor = "libcst no-op codemod"
    for corpus, target in (("tf-only", "<= 1.0x"), ("tf-real-size", ""), ("realworld-py-x2", "<= 0.6x"), ("repos-x2", "<= 0.7x")):
        ratio(f"{corpus}: `check` / no-op codemod", ("autofix check", corpus), (floor, corpus), target)
    for corpus in ("tf-only", "tf-real-size", "realworld-py-x2"):
        ratio(f"{corpus}: `diff` / no-op codemod", ("autofix diff", corpus), (floor, corpus), "<= 1.5x")
    for corpus in ("tf-only", "tf-real-size"):
        ratio(f"{corpus}: `tf_upgrade_v2` / `check` (times faster)", ("tf_upgrade_v2 (1 process)", corpus), ("autofix check", corpus), ">= 3x")
    ratio("mixed: no-op codemod / `check` (times faster)", (floor, "mixed"), ("autofix check", "mixed"), ">= 5x")
    ratio(
        "realworld-x2: cache cold / warm (times faster)",
        ("autofix check, cache cold", "realworld-x2"),
        ("autofix check, cache warm", "realworld-x2"),
        ">= 10x",
    )
    peaks = {corpus: peak for label, corpus, _f, _s, _r, peak, _c in rows if label == "autofix check"}
    if "tf-only" in peaks and "tf-only-x4" in peaks:
        print(f"\npeak memory of `check`: {peaks['tf-only']:.0f} MiB on tf-only, {peaks['tf-only-x4']:.0f} MiB on tf-only-x4 (flat)")


if __name__ == "__main__":
    main()
