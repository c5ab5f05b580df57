"""Benchmark: a warm `autofix check` (every file answered by the result cache), against the
start-up it cannot avoid.

    python bench/warm.py [--files 300] [--runs 20] [--out DIR] [--against SRC]

Copies the project's fixtures and example scripts into DIR (default: a new temporary folder)
until there are ``--files`` of them, runs `autofix check` once to fill a fresh cache folder,
then times, alternating, ``--runs`` runs each of:

- ``python -c pass``: the interpreter's own start-up, the floor;
- ``autofix --version``: the command line loaded, nothing done;
- ``autofix check``: the warm run (reading every file, finding its entry, printing the
  findings to a pipe);
- ``autofix check`` with ONE file changed before each run (its own copy of the corpus and
  cache), twice: a file nothing imports (only it is analysed again), and ``losses.py`` of a
  small project in the corpus (fixtures/repo_findings/shared_loss: a loss module two
  trainers import), which is analysed again with its two importers and nothing else. Each
  of these also counts the files answered anew (cache entries written by the run).

With ``--against SRC`` (the ``src`` folder of another checkout, say of the main branch), the
two autofix commands are also run from there (``PYTHONPATH=SRC``, its own cache folder), in the
same rounds, so that both are measured under the same load.

Python's bytecode is written once (into a folder under DIR, ``PYTHONPYCACHEPREFIX``) and read
by every timed run, as an installed autofix has it, whatever ``PYTHONDONTWRITEBYTECODE`` says.

Prints the median and the fastest run of each, and the warm check against the target of
0.15 s (for 300 files on the 2-core machine the project is developed on); exits 1 when the
median is over it. Timings are wall times of whole processes, output going to a pipe, as in CI
or pre-commit; on a machine shared with other work, the fastest run is the steadier figure.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.15
SOURCES = sorted(
    p for folder in ("fixtures", "examples") for p in (ROOT / folder).rglob("*.py") if "smoke" not in p.parts
)


def autofix_command() -> list[str]:
    script = Path(sys.executable).parent / "autofix"
    return [str(script)] if script.exists() else [sys.executable, "-m", "autofix"]


def build(target: Path, files: int) -> None:
    for index in range(files):
        source = SOURCES[index % len(SOURCES)]
        text = source.read_text(encoding="utf-8")
        # Copies differ by a comment: the cache finds entries by content.
        (target / f"f{index:04}_{source.name}").write_text(text + f"\n# copy {index}\n", encoding="utf-8")


PROJECT = ROOT / "fixtures" / "repo_findings" / "shared_loss"
# The module of PROJECT that its trainers import, and how many files import it.
SHARED, IMPORTERS = "losses.py", 2


def timed(command: list[str], cwd: Path, env: dict | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    return time.perf_counter() - started


class Edited:
    """A warm run after one file of its own corpus was changed (a comment added: new bytes
    every run); ``analysed`` counts, per run, the cache entries it wrote: the files it did
    not answer from the cache."""

    def __init__(self, corpus: Path, cache: Path, target: str) -> None:
        self.corpus, self.cache, self.target = corpus, cache, corpus / target
        self.analysed: list[int] = []
        self.runs = 0

    def before(self) -> None:
        self.runs += 1
        with open(self.target, "a", encoding="utf-8") as fh:
            fh.write(f"# edit {self.runs}\n")
        self.started = time.time()

    def after(self) -> None:
        self.analysed.append(sum(1 for p in self.cache.rglob("*.json") if p.name != "rules.json" and p.stat().st_mtime >= self.started))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--against", type=Path, default=None, help="the src folder of another checkout")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="autofix-warm-"))
    corpus = out / "corpus"
    cache = out / "cache"
    shutil.rmtree(corpus, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    corpus.mkdir(parents=True)
    build(corpus, args.files - len(list(PROJECT.glob("*.py"))))
    shutil.copytree(PROJECT, corpus / "project")
    edited_corpus = out / "corpus-edited"
    shutil.rmtree(edited_corpus, ignore_errors=True)
    shutil.copytree(corpus, edited_corpus)
    autofix = [sys.executable, "-m", "autofix"] if args.against else autofix_command()
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base["PYTHONPYCACHEPREFIX"] = str(out / "bytecode")
    warm = f"autofix check, warm ({args.files} files)"
    runs = {
        "python -c pass": ([sys.executable, "-c", "pass"], base),
        "autofix --version": ([*autofix, "--version"], base),
        warm: ([*autofix, "check", "--cache-dir", str(cache), "."], base),
    }
    if args.against:
        env = {**base, "PYTHONPATH": str(args.against.resolve())}
        runs[f"autofix --version ({args.against})"] = ([*autofix, "--version"], env)
        runs[f"{warm} ({args.against})"] = ([*autofix, "check", "--cache-dir", str(out / "cache-against"), "."], env)
    edited_cache = out / "cache-edited"
    leaf = sorted(p.name for p in edited_corpus.glob("f*.py"))[0]
    edits = {
        f"autofix check, warm, 1 file changed ({leaf}, imported by none)": Edited(edited_corpus, edited_cache, leaf),
        f"autofix check, warm, 1 file changed (project/{SHARED}, imported by {IMPORTERS})": Edited(edited_corpus, edited_cache, f"project/{SHARED}"),
    }
    for command, env in runs.values():
        # Fills the cache folders (and the OS's file cache).
        subprocess.run(command, cwd=corpus, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    edit_command = [*autofix, "check", "--cache-dir", str(edited_cache), "."]
    subprocess.run(edit_command, cwd=edited_corpus, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=base)
    times: dict[str, list[float]] = {name: [] for name in [*runs, *edits]}
    for _ in range(args.runs):
        for name, (command, env) in runs.items():
            times[name].append(timed(command, corpus, env))
        for name, edit in edits.items():
            edit.before()
            times[name].append(timed(edit_command, edited_corpus, base))
            edit.after()
    print("| what | median s | fastest s | files analysed again (per run) |\n| --- | ---: | ---: | ---: |")
    for name, found in times.items():
        counted = edits[name].analysed if name in edits else None
        again = "" if counted is None else f"{min(counted)}-{max(counted)}" if min(counted) != max(counted) else str(counted[0])
        print(f"| {name} | {statistics.median(found):.3f} | {min(found):.3f} | {again} |")
    median = statistics.median(times[warm])
    verdict = "within" if median <= TARGET else "over"
    print(f"\nwarm check: {median:.3f} s median, {verdict} the target of {TARGET:.2f} s")
    if args.against:
        theirs = statistics.median(times[f"{warm} ({args.against})"])
        print(f"warm check against {args.against}: {theirs / median:.2f}x faster (medians)")
    if args.out is None:
        shutil.rmtree(out, ignore_errors=True)
    sys.exit(0 if median <= TARGET else 1)


if __name__ == "__main__":
    main()
