"""Precision, recall, fix quality and false parse errors of autofix on the real-world corpus.

    python bench/precision.py [--files DIR] [--autofix PATH] [--json OUT] [--part A|B|C|D|E|F|G|H]
                              [--in-repo CLONES]

Runs the autofix engine (default options) on every file of bench/realworld/manifest.json and
compares what it finds and fixes with the hand triage in bench/realworld/triage.json (format:
bench/realworld/README.md). The corpus files are not in the repository; get them with
``python bench/realworld/fetch.py``. DIR defaults to $AUTOFIX_CORPUS, else bench/realworld/files.
``--in-repo CLONES`` measures each file as a user running autofix on its repository meets it:
the file is analysed in place in a copy of its repository at the recorded commit, read from the
local clone ``CLONES/<owner>+<name>/repo`` (its Python modules, notebooks and the files that pin
a TensorFlow: requirements, setup files, Dockerfiles, shell scripts, READMEs), so that what the
analysis follows into the project's other modules and pins counts; only the findings in the
corpus file itself are compared with the triage. Without it each file is analysed alone.
``--autofix`` measures another autofix: a checkout (or its src/ folder) to import it from, or a
Python interpreter that has autofix installed (this script is then run again with it).

Exit status: 0 when there is no wrong fix, no false parse error, no corrupted or missing file
and nothing untriaged; 1 otherwise; 2 when the corpus cannot be found.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "realworld" / "manifest.json"
TRIAGE = HERE / "realworld" / "triage.json"
# The corpus grows in parts, each gathered from code unlike what the earlier parts hold; each is
# measured alone (a part added later is code the tool was not tuned on) and all together.
PARTS = {
    "A": "the first 178 files (tutorials, keras-io, research code, Kaggle, issue reproducers)",
    "B": "84 files from 43 other repositories (trainer classes, research loops, TPU notebooks, multi-worker launchers)",
    "C": "62 files from 48 other repositories, gathered and triaged before the tool was run on them (a blind part)",
    "D": "74 files from 62 other repositories, gathered and triaged before the tool was run on them (the second blind part)",
    "E": "62 files from 42 other repositories, gathered and triaged before the tool was run on them (the third blind part)",
    "F": "61 files from 47 other repositories, gathered and triaged before the tool was run on them (the fourth blind part)",
    "G": "60 files from 47 other repositories, gathered and triaged before the tool was run on them (the fifth blind part)",
    "H": "61 files from 47 other repositories, gathered and triaged before the tool was run on them (the sixth blind part)",
    "I": "63 files from 45 other repositories, gathered and triaged before the tool was run on them (the seventh blind part)",
    "J": "86 files from 51 other repositories, gathered and triaged before the tool was run on them (the eighth blind part)",
    "K": "89 files from 59 other repositories, gathered and triaged before the tool was run on them (the ninth blind part)",
    "L": "73 files from 50 other repositories, gathered and triaged before the tool was run on them (the tenth blind part)",
    "M": "61 files from 44 other repositories, gathered and triaged before the tool was run on them (the eleventh blind part)",
    "N": "72 files from 47 other repositories, gathered and triaged before the tool was run on them (the twelfth blind part)",
    "O": "65 files from 43 other repositories, gathered and triaged before the tool was run on them (the thirteenth blind part)",
    "P": "62 files from 46 other repositories, gathered and triaged before the tool was run on them (the fourteenth blind part)",
}
RULES = ("TFD001", "TFD002", "TFD003", "TFD004", "TFD005", "TFD006", "TFD007", "TFD008", "TFD009", "TFD011", "TFD012")


# --- What Python and Jupyter accept -------------------------------------------------------

def python_accepts(data: bytes) -> bool:
    try:
        compile(data, "<file>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        return True
    except (SyntaxError, ValueError):
        return False


_ASSIGN_SHELL = re.compile(r"^(\s*[\w.,\s\[\]]+=\s*)[!%]")
_NON_PYTHON_CELL_MAGICS = {"bash", "sh", "script", "html", "javascript", "js", "latex", "markdown",
                           "svg", "writefile", "file", "perl", "ruby", "sql", "bigquery", "system"}


def _open_brackets(text: str) -> int:
    """Bracket depth at the end of ``text`` (strings and comments skipped; good enough here)."""
    depth, i, n = 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif c in "'\"":
            quote = text[i:i + 3] if text[i:i + 3] in ('"""', "'''") else c
            j = i + len(quote)
            while j < n and text[j:j + len(quote)] != quote:
                j += 2 if text[j] == "\\" else 1
            i = j + len(quote)
            continue
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        i += 1
    return depth


def ipython_to_python(source: str) -> str | None:
    """The cell as plain Python, IPython syntax replaced by ``pass``; None for a non-Python cell."""
    lines = source.split("\n")
    if lines and lines[0].lstrip().startswith("%%"):
        magic = lines[0].lstrip()[2:].split()[0] if lines[0].strip() != "%%" else ""
        if magic in _NON_PYTHON_CELL_MAGICS:
            return None
        lines = lines[1:]
    out: list[str] = []
    magic_continues = False
    for line in lines:
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if magic_continues:  # `!cmd \` / `%magic \` goes on to the next line
            magic_continues = line.endswith("\\")
            out.append("")
        elif out and _open_brackets("\n".join(out)) > 0:
            out.append(line)  # a continuation line: `%` here is the modulo operator
        elif stripped.startswith(("%", "!")) or (stripped.endswith("?") and not stripped.startswith("#")):
            magic_continues = line.endswith("\\")
            out.append(indent + "pass")
        elif _ASSIGN_SHELL.match(line):
            out.append(_ASSIGN_SHELL.match(line).group(1) + "None")
        else:
            out.append(line)
    return "\n".join(out)


def jupyter_accepts(data: bytes) -> bool:
    try:
        nb = json.loads(data.decode("utf-8"))
        cells = nb["cells"] if "cells" in nb else nb["worksheets"][0]["cells"]
    except (ValueError, KeyError, IndexError, TypeError, UnicodeDecodeError):
        return False
    flags = ast.PyCF_ONLY_AST | getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", cell.get("input", ""))
        source = "".join(source) if isinstance(source, list) else source
        python = ipython_to_python(source)
        if python is None:
            continue
        try:
            compile(python, "<cell>", "exec", flags=flags, dont_inherit=True)
        except (SyntaxError, ValueError):
            return False
    return True


# --- Running autofix ----------------------------------------------------------------------

def run_autofix(paths: list[Path]) -> dict[str, object]:
    from autofix.engine import Options, process_path

    return {p.name: process_path(str(p), Options()) for p in paths}


# What a copy of a repository holds for ``--in-repo``: the code the analysis may follow and the
# files that say which TensorFlow runs it (autofix.analysis.project.pins); no data, no binaries.
_TREE_SUFFIXES = (".py", ".ipynb", ".txt", ".cfg", ".toml", ".yml", ".yaml", ".sh", ".md", ".rst", ".in")
_TREE_NAMES = ("Dockerfile", "Makefile", "README")
_TREE_LARGEST = 2_000_000


def repository_tree(clones: Path, entry: dict, trees: Path) -> Path:
    """A copy of ``entry``'s repository at its commit under ``trees`` (made once per repository
    and commit), read from the local clone ``clones/<owner>+<name>/repo``; returns its root."""
    root = trees / entry["repo"].replace("/", "+") / entry["commit"][:12]
    done = root / ".autofix-tree"
    if done.is_file():
        return root
    base = clones / entry["repo"].replace("/", "+") / "repo"
    git_dir = base / ".git" if (base / ".git").is_dir() else base
    if not git_dir.is_dir():
        raise OSError(f"no clone at {base}")
    listing = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-l", "-z", entry["commit"]],
                             capture_output=True, check=True).stdout.decode("utf-8", "surrogateescape")
    wanted: list[tuple[str, str]] = []
    for item in listing.split("\0"):
        if not item:
            continue
        meta, path = item.split("\t", 1)
        _mode, kind, sha, size = meta.split()
        name = path.rsplit("/", 1)[-1]
        if kind != "blob":
            continue
        # (a size that is not a number: the blob is absent from a partial snapshot)
        small = size.isdigit() and int(size) <= _TREE_LARGEST
        if path == entry["path"] or (small and (name.endswith(_TREE_SUFFIXES) or name.startswith(_TREE_NAMES))):
            wanted.append((sha, path))
    batch = subprocess.Popen(["git", "--git-dir", str(git_dir), "cat-file", "--batch"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert batch.stdin is not None and batch.stdout is not None
    for sha, path in wanted:
        batch.stdin.write(sha.encode() + b"\n")
        batch.stdin.flush()
        header = batch.stdout.readline().split()
        if len(header) < 3 or header[1] != b"blob":
            continue  # absent from the snapshot
        data = batch.stdout.read(int(header[2]))
        batch.stdout.read(1)
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    batch.stdin.close()
    batch.wait()
    # A checkout's root holds .git: where autofix finds the project (and its pins) from.
    (root / ".git").mkdir(parents=True, exist_ok=True)
    done.write_text(entry["commit"] + "\n")
    return root


def run_autofix_in_repositories(entries: list[dict], clones: Path, trees: Path) -> dict[str, object]:
    """autofix on each corpus file in place in a copy of its repository (``--in-repo``)."""
    from autofix.engine import Options, process_path

    results = {}
    for entry in entries:
        path = repository_tree(clones, entry, trees) / entry["path"]
        if hashlib.sha256(path.read_bytes()).hexdigest() != entry["sha256"]:
            raise OSError(f"{entry['id']}: the repository's copy of {entry['path']} at {entry['commit'][:12]} is not the corpus file")
        results[entry["id"]] = as_seen_from(process_path(str(path), Options()), path)
    return results


def as_seen_from(result, path: Path):
    """``result`` with only the findings about ``path``: its own, and each finding placed in
    another module of the repository (a loss module's per-replica mean) at every line of
    ``path`` it names as related (the step that uses it), where the triage records such a bug;
    the rest is about files the corpus does not hold."""
    from dataclasses import replace

    def here(where: str | None) -> bool:
        return where is None or os.path.samefile(where, path)

    seen, placed = [], set()
    for finding in result.findings:
        if here(finding.path):
            seen.append(finding)
            continue
        for where, line, _text in finding.related:
            key = (finding.code, line)
            if here(where) and key not in placed:
                placed.add(key)
                seen.append(replace(finding, path=None, line=line, end_line=line, related=()))
    return replace(result, findings=tuple(seen))


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- Comparing with the triage ------------------------------------------------------------

def evaluate(manifest: list[dict], triage: dict, files: Path, results: dict | None = None) -> dict:
    """Compare autofix's results on the files of ``manifest`` with the triage (``results``:
    already computed, by file id; else autofix is run here)."""
    report: dict = {"files": len(manifest), "missing": [], "corrupted": [], "false_parse_errors": [],
                    "parse_errors": [], "rules": {}, "untriaged_findings": [], "fixes": {},
                    "untriaged_fixes": [], "wrong_fixes": [], "false_findings": [], "misses": {}, "recall": {}}
    present = []
    for entry in manifest:
        path = files / entry["id"]
        if not path.is_file():
            report["missing"].append(entry["id"])
            continue
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            report["corrupted"].append(entry["id"])
            continue
        present.append((entry, path, data))
    if results is None:
        results = run_autofix([path for _, path, _ in present])

    verdicts = {(f["file"], f["cell"], f["line"], f["code"]): f for f in triage["findings"]}
    # A recorded miss is a bug judged real at its line before autofix reported it: a finding
    # there later is true by that judgement (a verdict written for the finding comes first).
    for miss in triage["misses"]:
        verdicts.setdefault((miss["file"], miss["cell"], miss["line"], miss["code"]), dict(miss, verdict="true"))
    fix_verdicts = {(f["file"], f["sha256"]): f for f in triage["fixes"]}
    counts: dict[str, Counter] = defaultdict(Counter)
    reported: set[tuple] = set()
    changed = 0
    for entry, path, data in present:
        fid, result = entry["id"], results[entry["id"]]
        if result.error:
            accepted = jupyter_accepts(data) if entry["kind"] == "notebook" else python_accepts(data)
            item = {"file": fid, "error": result.error}
            report["false_parse_errors" if accepted else "parse_errors"].append(item)
        for f in result.findings:
            key = (fid, f.cell, f.line, f.code)
            c = counts[f.code]
            if f.unsafe:
                # A suggestion (correct code that could be better, or an opt-in heuristic)
                # claims no bug: shown, not counted in precision or recall.
                c["suggestions"] += 1
                continue
            reported.add(key)
            c["findings"] += 1
            c["fixable"] += bool(f.fixable)
            verdict = verdicts.get(key)
            if verdict is None:
                c["untriaged"] += 1
                report["untriaged_findings"].append(
                    {"file": fid, "cell": f.cell, "line": f.line, "code": f.code, "message": f.message})
            else:
                c[verdict["verdict"]] += 1
                if verdict["verdict"] == "false":
                    report["false_findings"].append({"file": fid, "cell": f.cell, "line": f.line, "code": f.code,
                                                     "why": verdict.get("why", "")})
        if result.changed:
            changed += 1
            digest = sha256_text(result.new_text)
            verdict = fix_verdicts.get((fid, digest))
            if verdict is None:
                report["untriaged_fixes"].append({"file": fid, "sha256": digest,
                                                  "findings": [[f.cell, f.line, f.code] for f in result.findings if f.fixable]})
            elif verdict["verdict"] == "wrong":
                report["wrong_fixes"].append({"file": fid, "sha256": digest, "why": verdict["why"]})
            counts["fixes"]["correct" if verdict and verdict["verdict"] == "correct" else
                            "wrong" if verdict else "untriaged"] += 1

    for code in sorted(set(RULES) | {c for c in counts if c != "fixes"}):
        c = counts.get(code, Counter())
        judged = c["true"] + c["false"]
        report["rules"][code] = {"findings": c["findings"], "true": c["true"], "false": c["false"],
                                 "untriaged": c["untriaged"], "fixable": c["fixable"], "suggestions": c["suggestions"],
                                 "precision": round(c["true"] / judged, 3) if judged else None}
    report["fixes"] = {"files_changed": changed, "correct": counts["fixes"]["correct"],
                       "wrong": counts["fixes"]["wrong"], "untriaged": counts["fixes"]["untriaged"]}

    # Real bugs: findings triaged true plus the triaged misses. Recall: how many are reported now.
    present_ids = {entry["id"] for entry, _, _ in present}
    real = [dict(f, source="finding") for f in triage["findings"] if f["verdict"] == "true"]
    real += [dict(m, source="miss") for m in triage["misses"]]
    found, missed = defaultdict(int), defaultdict(list)
    counted: set[tuple] = set()  # a miss found later is also a true finding: one bug
    for bug in real:
        if bug["file"] not in present_ids:
            continue
        key = (bug["file"], bug["cell"], bug["line"], bug["code"])
        if key in counted:
            continue
        counted.add(key)
        if key in reported:
            found[bug["code"]] += 1
        else:
            missed[bug["code"]].append({k: bug[k] for k in ("file", "cell", "line", "code", "why", "source")})
    for code in sorted(set(found) | set(missed)):
        total = found[code] + len(missed[code])
        report["recall"][code] = {"real_bugs": total, "reported": found[code], "not_reported": len(missed[code]),
                                  "recall": round(found[code] / total, 3) if total else None}
    report["misses"] = {code: missed[code] for code in sorted(missed) if missed[code]}
    return report


# --- Output -------------------------------------------------------------------------------

def show(report: dict) -> None:
    print(f"corpus: {report['files']} files; missing {len(report['missing'])}, corrupted {len(report['corrupted'])}")
    print("\nper rule:   findings  true  false  untriaged  precision  fixable  suggestions")
    for code, r in report["rules"].items():
        p = "-" if r["precision"] is None else f"{r['precision']:.0%}"
        print(f"  {code}     {r['findings']:6d} {r['true']:5d} {r['false']:6d} {r['untriaged']:10d} {p:>10} {r['fixable']:8d} {r['suggestions']:12d}")
    fx = report["fixes"]
    print(f"\nfixes: {fx['files_changed']} files changed; correct {fx['correct']}, wrong {fx['wrong']}, untriaged {fx['untriaged']}")
    print("\nrecall:    real bugs  reported  not reported  recall")
    for code, r in report["recall"].items():
        print(f"  {code}      {r['real_bugs']:6d} {r['reported']:9d} {r['not_reported']:13d} {r['recall']:7.0%}")
    print(f"\nfalse parse errors: {len(report['false_parse_errors'])}; "
          f"parse errors on files Python/Jupyter reject too: {len(report['parse_errors'])}")
    sections = [("false parse errors (valid for Python / Jupyter)", report["false_parse_errors"], "{file}: {error}"),
                ("missing files", [{"file": f} for f in report["missing"]], "{file}"),
                ("corrupted files (sha256 differs from the manifest)", [{"file": f} for f in report["corrupted"]], "{file}"),
                ("wrong fixes", report["wrong_fixes"], "{file}: {why}"),
                ("false findings (the triage's reason)", report.get("false_findings", []), "{file}:{where}: {code} {why}"),
                ("untriaged fixes", report["untriaged_fixes"], "{file} sha256={sha256} fixable findings={findings}"),
                ("untriaged findings", report["untriaged_findings"], "{file}:{where}: {code} {message}")]
    for title, items, fmt in sections:
        if items:
            print(f"\n{title}:")
            for item in items:
                where = f"cell[{item['cell']}]:{item['line']}" if item.get("cell") is not None else item.get("line")
                print("  " + fmt.format(where=where, **item))
    for code, bugs in report["misses"].items():
        print(f"\nreal {code} bugs not reported:")
        for b in bugs:
            where = f"cell[{b['cell']}]:{b['line']}" if b["cell"] is not None else b["line"]
            print(f"  {b['file']}:{where} ({b['source']}): {b['why']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", help="folder holding the corpus files (default: $AUTOFIX_CORPUS, else bench/realworld/files)")
    parser.add_argument("--autofix", help="autofix to measure: a checkout or src/ folder, or a Python interpreter")
    parser.add_argument("--json", help="also write the whole report as JSON to this file")
    parser.add_argument("--in-repo", metavar="CLONES", help="analyse each file in a copy of its repository read from the clones CLONES/<owner>+<name>/repo")
    parser.add_argument("--trees", help="where --in-repo puts the copies (default: a temporary folder)")
    parser.add_argument("--part", action="append", help="measure only this part of the corpus (repeatable; default: every part, each alone, then all)")
    args = parser.parse_args(argv)

    if args.autofix:
        target = Path(args.autofix)
        if target.is_dir():  # a checkout: its src/ (the engine) and its root (codemods/) go first
            for folder in (target, target / "src"):
                sys.path.insert(0, str(folder.resolve()))
        else:
            rest = [a for a in sys.argv[1:] if a != args.autofix and not a.startswith("--autofix")]
            return subprocess.call([args.autofix, __file__, *rest])

    files = Path(args.files or os.environ.get("AUTOFIX_CORPUS") or HERE / "realworld" / "files")
    if not files.is_dir():
        print(f"corpus folder {files} not found; get the files with: python bench/realworld/fetch.py "
              "(or point --files / $AUTOFIX_CORPUS at them)", file=sys.stderr)
        return 2
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    triage = json.loads(TRIAGE.read_text(encoding="utf-8"))
    parts = sorted({entry.get("part", "A") for entry in manifest})
    if args.part:
        manifest = [entry for entry in manifest if entry.get("part", "A") in args.part]
        parts = [p for p in parts if p in args.part]
    if args.in_repo:
        trees = Path(args.trees) if args.trees else Path(tempfile.mkdtemp(prefix="autofix-trees-"))
        intact = [e for e in manifest if (files / e["id"]).is_file()]
        results = run_autofix_in_repositories(intact, Path(args.in_repo), trees)
    else:
        present = [files / e["id"] for e in manifest if (files / e["id"]).is_file()]
        results = run_autofix(present)
    reports = {}
    for part in parts:
        subset = [entry for entry in manifest if entry.get("part", "A") == part]
        print(f"=== part {part}: {PARTS.get(part, '')}")
        reports[part] = evaluate(subset, triage, files, results)
        show(reports[part])
        print()
    report = evaluate(manifest, triage, files, results)
    if len(parts) > 1:
        print("=== all parts")
        show(report)
    report["parts"] = reports
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    bad = (report["wrong_fixes"] or report["false_parse_errors"] or report["untriaged_findings"]
           or report["untriaged_fixes"] or report["missing"] or report["corrupted"])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
