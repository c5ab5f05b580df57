"""The report formats of `autofix check`: json (with fixes), sarif, suggestions, and what every
format shares (--output, --exit-zero). Fixes are checked on the real fixture pairs: applying
what a format says must give exactly the fixed file."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from autofix import __version__, registry
from autofix.cli import main
from autofix.engine import Options
from autofix.runner import Runner
from autofix.output import FORMATS
from autofix.output.fixes import Hunk, hunks, owners
from autofix.output.sarif import information_uri
from autofix.registry import rule_doc
from autofix.output.suggestions import SuggestionsFormatter
from autofix.results import FileResult, Finding
from conftest import BROKEN, FIXED
from fixturecases import FIXTURES, cases, read

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"
RULE_DIRS = ("tfd001", "tfd002")


def run(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def offsets(text: str) -> list[int]:
    """Offsets of line starts, plus the end of the text (so both spellings of "end of file",
    (last line, past its end) and (line after the last, column 1), resolve)."""
    return [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"] + [len(text)]


def apply(text: str, edits: list[tuple[int, int, int, int, str]]) -> str:
    """Apply (start_line, start_column, end_line, end_column, content) replacements, given in
    positions of ``text`` itself; they must not overlap."""
    starts = offsets(text)

    def at(line: int, column: int) -> int:
        position = starts[line - 1] + column - 1
        assert position <= len(text)
        return position

    spans = sorted((at(a, b), at(c, d), content) for a, b, c, d, content in edits)
    out, position = [], 0
    for start, end, content in spans:
        assert start >= position, "replacements overlap"
        out.append(text[position:start])
        out.append(content)
        position = end
    out.append(text[position:])
    return "".join(out)


def apply_lines(text: str, edits: list[tuple[int, int, str]]) -> str:
    """Replace whole lines first..last (1-based, inclusive) by the given text."""
    lines = text.splitlines(keepends=True)
    out, position = [], 0
    for first, last, replacement in sorted(edits):
        assert first - 1 >= position, "suggestions overlap"
        out.extend(lines[position : first - 1])
        out.append(replacement)
        position = last
    out.extend(lines[position:])
    return "".join(out)


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory):
    """Every case of RULE_DIRS copied into a git work tree (`<rule>_<case>.py`), and the
    output of each format run on it with only that rule selected, from the tree's root (with
    --unsafe-fixes for TFD002, as test_tfd002 fixes its cases: most of them leave unsaid
    whether their batch is per replica)."""
    root = tmp_path_factory.mktemp("fixtures")
    (root / ".git").mkdir()
    expected: dict[str, str] = {}
    originals: dict[str, str] = {}
    for rule in RULE_DIRS:
        for case in cases(rule):
            name = f"{rule}/{case.name}.py"
            (root / rule).mkdir(exist_ok=True)
            shutil.copyfile(case.before, root / name)
            originals[name] = read(case.before)
            expected[name] = read(case.after) if case.after else originals[name]
    # Analysing the fixtures is the slow part: do it once and give the same results to each
    # format (the command line's own plumbing is tested below on small files).
    outputs: dict[str, dict] = {fmt: {} for fmt in ("json", "sarif", "suggestions")}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        for rule in RULE_DIRS:
            files = sorted(str(p.relative_to(root)) for p in (root / rule).glob("*.py"))
            with Runner(Options(select=(rule.upper(),), unsafe_fixes=rule == "tfd002")) as runner:
                results = list(runner.process(files))
            for fmt in outputs:
                formatter = FORMATS[fmt]()
                for result in results:
                    formatter.result(result)
                outputs[fmt][rule] = json.loads(formatter.finish())
    return root, originals, expected, outputs


# --- json --------------------------------------------------------------------------------


def test_json_fixes_of_all_findings_give_the_fixed_file(fixture_run):
    _, originals, expected, outputs = fixture_run
    edits: dict[str, list] = {name: [] for name in originals}
    seen_paths = set()
    for items in outputs["json"].values():
        for item in items:
            assert "error" not in item, item
            seen_paths.add(item["path"])
            if not item["fixable"]:
                assert item["fix"] is None
                continue
            assert isinstance(item["fix"]["replacements"], list)
            for r in item["fix"]["replacements"]:
                edits[item["path"]].append((r["start_line"], r["start_column"], r["end_line"], r["end_column"], r["content"]))
    assert seen_paths, "the fixtures must produce findings"
    changed = 0
    for name, original in originals.items():
        assert apply(original, edits[name]) == expected[name], name
        changed += expected[name] != original
    assert changed >= 20


def test_json_divides_a_fix_among_several_findings(fixture_run):
    """Some fixtures have several fixable findings whose fixes are separate hunks: each then
    carries only its own."""
    _, _, _, outputs = fixture_run
    per_file: dict[str, int] = {}
    for items in outputs["json"].values():
        for item in items:
            if item["fixable"] and item["fix"]["replacements"]:
                per_file[item["path"]] = per_file.get(item["path"], 0) + 1
    assert max(per_file.values()) >= 2


def test_json_fix_of_the_readme_example(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(BROKEN)
    monkeypatch.chdir(tmp_path)
    items = json.loads(run("check", "--format", "json", "--select", "TFD001,TFD005", "train.py").stdout)
    first, second, suggestion = items
    # One hunk (lines 4-5 become the `with` block) fixes both TFD001 findings: it goes to the
    # first, and the second has no replacement of its own.
    assert first["fix"] == {
        "replacements": [
            {
                "start_line": 4,
                "start_column": 1,
                "end_line": 6,
                "end_column": 1,
                "content": "".join(FIXED.splitlines(keepends=True)[3:6]),
            }
        ]
    }
    assert second["fix"] == {"replacements": []}
    assert suggestion["code"] == "TFD005" and suggestion["fix"] is None


def _finding(line, end_line=None, fixable=True, code="TFD001"):
    return Finding(code, "name", "message", line, 1, end_line or line, 5, fixable)


def test_hunks_go_to_overlapping_then_closest_findings():
    findings = [
        _finding(10, 12),                 # 0
        _finding(11),                     # 1: inside 0's range
        _finding(20, fixable=False),      # 2: not fixable: never gets a hunk
        _finding(30),                     # 3
    ]
    assignments = owners(
        findings,
        [
            Hunk(0, 2, ("x\n",)),   # lines 1-2: nothing above, closest below is 0
            Hunk(9, 12, ()),        # lines 10-12: overlaps 0 and 1, the first wins
            Hunk(12, 12, ("y\n",)), # insertion right after line 12: next to 0
            Hunk(19, 20, ("z\n",)), # line 20: only the unfixable 2 there; closest above is 0
            Hunk(28, 28, ("w\n",)), # insertion before line 29: closest above is 0
            Hunk(29, 29, ("v\n",)), # insertion right before line 30: next to 3
            Hunk(40, 41, ()),       # line 41: closest above is 3
        ],
    )
    assert assignments == [0, 0, 0, 0, 0, 3, 3]
    assert owners([_finding(5, fixable=False)], [Hunk(0, 1, ())]) == [None]


def test_hunks_are_difflib_opcodes_without_junk_heuristics():
    # Over 200 lines, difflib's autojunk would treat the frequent blank line as junk.
    old = "".join(f"x{i}\n\n" for i in range(150))
    new = old.replace("x75\n", "y75\n")
    assert hunks(old, new) == [Hunk(150, 151, ("y75\n",))]


# --- sarif -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sarif_validator():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)


def test_the_validator_rejects_invalid_sarif(sarif_validator):
    """The schema check below has teeth: it rejects what SARIF 2.1.0 forbids."""
    good = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": []}]}
    sarif_validator.validate(good)
    bad_region = {
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "x"}},
                "results": [
                    {
                        "message": {"text": "m"},
                        "locations": [{"physicalLocation": {"artifactLocation": {"uri": "a.py"}, "region": {"startLine": 0}}}],
                    }
                ],
            }
        ],
    }
    for bad in ({"runs": []}, {**good, "version": "2.0.0"}, bad_region, {**good, "$schema": "not a uri"}):
        assert list(sarif_validator.iter_errors(bad)), bad


def test_sarif_is_valid_and_describes_every_rule(fixture_run, sarif_validator):
    _, _, _, outputs = fixture_run
    for log in outputs["sarif"].values():
        sarif_validator.validate(log)
        assert log["version"] == "2.1.0"
        (run_,) = log["runs"]
        driver = run_["tool"]["driver"]
        assert driver["name"] == "autofix" and driver["version"] == __version__
        rules = driver["rules"]
        assert [r["id"] for r in rules] == [r.CODE for r in registry.all_rules()]
        for descriptor, rule in zip(rules, registry.all_rules()):
            summary, body = rule_doc(rule)
            assert descriptor["name"] == rule.NAME
            assert descriptor["shortDescription"]["text"] == rule.DESCRIPTION
            assert descriptor["fullDescription"]["text"] == summary and len(summary) <= 1024
            # The rule's docstring (what it will not fix included) and its examples are the help.
            assert body.splitlines()[-1] in descriptor["help"]["text"]
            assert "```diff" in descriptor["help"]["markdown"] or "```python" in descriptor["help"]["markdown"]
            assert descriptor["defaultConfiguration"]["level"] == ("warning" if rule.SAFE else "note")
        assert run_["invocations"][0]["executionSuccessful"] is True
        for result in run_["results"]:
            assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
            location = result["locations"][0]["physicalLocation"]
            assert location["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
            assert not location["artifactLocation"]["uri"].startswith(("/", "file:"))


def test_sarif_results_match_json_findings(fixture_run):
    _, _, _, outputs = fixture_run
    for rule in RULE_DIRS:
        results = outputs["sarif"][rule]["runs"][0]["results"]
        items = outputs["json"][rule]
        assert len(results) == len(items)
        for result, item in zip(results, items):
            region = result["locations"][0]["physicalLocation"]["region"]
            assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == item["path"]
            assert (result["ruleId"], region["startLine"], region["startColumn"], region["endLine"], region["endColumn"]) == (
                item["code"], item["line"], item["column"], item["end_line"], item["end_column"]
            )
            assert result["message"]["text"].startswith(item["message"])
            assert ("fixes" in result) == bool(item["fix"] and item["fix"]["replacements"])


def test_sarif_fixes_give_the_fixed_file(fixture_run):
    _, originals, expected, outputs = fixture_run
    edits: dict[str, list] = {name: [] for name in originals}
    by_offset: dict[str, list] = {name: [] for name in originals}
    for log in outputs["sarif"].values():
        for result in log["runs"][0]["results"]:
            for fix in result.get("fixes", []):
                (change,) = fix["artifactChanges"]
                path = change["artifactLocation"]["uri"]
                for r in change["replacements"]:
                    region, content = r["deletedRegion"], r.get("insertedContent", {}).get("text", "")
                    edits[path].append((region["startLine"], region["startColumn"], region["endLine"], region["endColumn"], content))
                    by_offset[path].append((region["charOffset"], region["charLength"], content))
    for name, original in originals.items():
        assert apply(original, edits[name]) == expected[name], name
        # The offset/length spelling of each region is the same region.
        out, position = [], 0
        for offset, length, content in sorted(by_offset[name]):
            out += [original[position:offset], content]
            position = offset + length
        assert "".join(out) + original[position:] == expected[name], name


def test_sarif_errors_are_notifications_and_uris_are_relative_to_the_repository(tmp_path, monkeypatch, sarif_validator):
    (tmp_path / ".git").mkdir()
    project = tmp_path / "sub dir"
    project.mkdir()
    (project / "train.py").write_text(BROKEN)
    (project / "broken.py").write_text("import tensorflow.distribute\ndef (\n")
    monkeypatch.chdir(project)
    result = run("check", "--format", "sarif", "--select", "TFD001,TFD005", "--unsafe-fixes", ".")
    assert result.exit_code == 2
    log = json.loads(result.stdout)
    sarif_validator.validate(log)
    (run_,) = log["runs"]
    (invocation,) = run_["invocations"]
    assert invocation["executionSuccessful"] is False
    (notification,) = invocation["toolExecutionNotifications"]
    assert notification["level"] == "error" and notification["message"]["text"].startswith("line 2")
    assert notification["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "sub%20dir/broken.py"
    assert run_["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in run_["results"]}
    assert uris == {"sub%20dir/train.py"}
    # With --unsafe-fixes the learning-rate rule reports a finding it cannot fix: a warning.
    levels = {(r["ruleId"], r["level"]) for r in run_["results"]}
    assert levels == {("TFD001", "warning"), ("TFD005", "warning")}


def test_sarif_suggestions_are_notes(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(BROKEN)
    monkeypatch.chdir(tmp_path)
    results = json.loads(run("check", "--format", "sarif", "--select", "TFD001,TFD005", "train.py").stdout)["runs"][0]["results"]
    assert [(r["ruleId"], r["level"]) for r in results] == [("TFD001", "warning"), ("TFD001", "warning"), ("TFD005", "note")]


def test_sarif_without_findings_has_an_empty_result_list(tmp_path, monkeypatch, sarif_validator):
    (tmp_path / "ok.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    result = run("check", "--format", "sarif", ".")
    assert result.exit_code == 0
    log = json.loads(result.stdout)
    sarif_validator.validate(log)
    assert log["runs"][0]["results"] == []


def test_information_uri_comes_from_the_package_metadata(monkeypatch):
    class Meta:
        def __init__(self, urls, home=None):
            self.urls, self.home = urls, home

        def get_all(self, key):
            return self.urls if key == "Project-URL" else None

        def get(self, key, default=None):
            return self.home if key == "Home-page" else default

    from autofix.output import sarif

    monkeypatch.setattr(sarif.metadata, "metadata", lambda name: Meta(["Source, https://example.org/src", "Homepage, https://example.org"]))
    assert information_uri() == "https://example.org"
    monkeypatch.setattr(sarif.metadata, "metadata", lambda name: Meta([], "not a url"))
    assert information_uri() is None


# --- suggestions -------------------------------------------------------------------------


SUGGESTION = re.compile(r"\n\n(`{3,})suggestion\n(.*?)\1\n\Z", re.S)


def _block(body: str) -> str:
    match = SUGGESTION.search(body)
    assert match, body
    return match.group(2)


def _as_block(replacement: str) -> str:
    """What a suggestion block holds for these replacement lines: each line ends with a line
    feed, including a last line that has no newline at the end of the file."""
    text = replacement.replace("\r\n", "\n")
    return text if not text or text.endswith("\n") else text + "\n"


def test_suggestions_reproduce_the_fixed_file(fixture_run):
    _, originals, expected, outputs = fixture_run
    edits: dict[str, list] = {name: [] for name in originals}
    for items in outputs["suggestions"].values():
        for item in items:
            original = originals[item["path"]]
            lines = original.splitlines(keepends=True)
            assert 1 <= item["start_line"] <= item["end_line"] <= len(lines)
            assert item["original"] == "".join(lines[item["start_line"] - 1 : item["end_line"]])
            assert item["findings"], item
            # The block GitHub applies holds exactly the replacement lines.
            assert _block(item["body"]) == _as_block(item["replacement"])
            for f in item["findings"]:
                assert f"**{f['code']}** (line {f['line']}) {f['message']}" in item["body"]
            edits[item["path"]].append((item["start_line"], item["end_line"], item["replacement"]))
    for name, original in originals.items():
        assert apply_lines(original, edits[name]) == expected[name], name
    assert sum(map(len, edits.values())) >= 20


def test_suggestions_match_the_hunks_of_the_fix(fixture_run):
    """Each hunk of the real diff is in exactly one suggestion, and a suggestion holds one hunk
    or neighbouring hunks with only blank lines between them."""
    _, originals, expected, outputs = fixture_run

    def lines_of(h: Hunk) -> range:
        # A pure insertion is anchored to the line above it (the first line at the top).
        return range(h.start + 1, h.end + 1) if not h.insertion else range(h.start or 1, (h.start or 1) + 1)

    for items in outputs["suggestions"].values():
        for path in {item["path"] for item in items}:
            entries = [item for item in items if item["path"] == path]
            original = originals[path].splitlines(keepends=True)
            file_hunks = hunks(originals[path], expected[path])
            for h in file_hunks:
                holders = [e for e in entries if e["start_line"] <= lines_of(h)[0] and lines_of(h)[-1] <= e["end_line"]]
                assert len(holders) == 1, (path, h)
            for e in entries:
                span = set(range(e["start_line"], e["end_line"] + 1))
                covered = set().union(*(set(lines_of(h)) for h in file_hunks if set(lines_of(h)) <= span))
                assert covered, (path, e)
                assert all(not original[n - 1].strip() for n in span - covered), (path, e)


def _suggest(old: str, new: str, findings=()) -> list[dict]:
    formatter = SuggestionsFormatter()
    formatter.result(FileResult("x.py", tuple(findings), old, new))
    return json.loads(formatter.finish())


def test_insertion_is_anchored_to_the_line_above():
    (item,) = _suggest("a\nb\nc\n", "a\nb\nNEW\nc\n", [_finding(2)])
    assert (item["start_line"], item["end_line"], item["original"], item["replacement"]) == (2, 2, "b\n", "b\nNEW\n")
    assert _block(item["body"]) == "b\nNEW\n"


def test_insertion_at_the_top_is_anchored_to_the_first_line():
    (item,) = _suggest("a\nb\n", "NEW\na\nb\n", [_finding(1)])
    assert (item["start_line"], item["end_line"], item["replacement"]) == (1, 1, "NEW\na\n")


def test_deletion_is_an_empty_suggestion():
    (item,) = _suggest("a\nb\nc\n", "a\nc\n", [_finding(2)])
    assert (item["start_line"], item["end_line"], item["replacement"]) == (2, 2, "")
    assert item["body"].endswith("\n\n```suggestion\n```\n")


def test_backticks_in_the_code_lengthen_the_fence_and_crlf_is_shown_as_lf():
    (item,) = _suggest("a\r\nx = 1\r\n", "a\r\nx = '```'\r\n", [_finding(2)])
    assert item["replacement"] == "x = '```'\r\n"
    assert item["body"].endswith("\n\n````suggestion\nx = '```'\n````\n")


def test_parts_of_one_fix_say_they_belong_together():
    old = "a\nb\nc\nd\ne\n"
    new = "A\nb\nc\nD\ne\n"
    first, second = _suggest(old, new, [_finding(2, 3)])
    assert "Commit together with the suggestions on line 4" in first["body"]
    assert "Commit together with the suggestions on line 1" in second["body"]


def test_hunks_only_blank_lines_apart_are_one_suggestion():
    (item,) = _suggest("a\n\nb\n", "    a\n\n    b\n", [_finding(1, 3)])
    assert (item["start_line"], item["end_line"], item["replacement"]) == (1, 3, "    a\n\n    b\n")


def test_unchanged_files_give_no_suggestions(tmp_path, monkeypatch):
    (tmp_path / "ok.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    assert json.loads(run("check", "--format", "suggestions", ".").stdout) == []


# --- every format ------------------------------------------------------------------------


@pytest.fixture
def broken(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(BROKEN)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _parse(fmt: str, text: str):
    if fmt in ("json", "sarif", "suggestions"):
        return json.loads(text)
    return text.splitlines()


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_writes_to_output_and_honours_exit_zero(broken, fmt):
    to_stdout = run("check", "--format", fmt, "train.py")
    assert to_stdout.exit_code == 1
    assert _parse(fmt, to_stdout.stdout)
    to_file = run("check", "--format", fmt, "--output", "report.out", "train.py")
    assert to_file.exit_code == 1 and to_file.stdout == ""
    assert (broken / "report.out").read_text(encoding="utf-8") == to_stdout.stdout
    zero = run("check", "--format", fmt, "--exit-zero", "-o", "zero.out", "train.py")
    assert zero.exit_code == 0 and zero.stdout == ""
    assert (broken / "zero.out").read_text(encoding="utf-8") == to_stdout.stdout


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_exit_zero_does_not_hide_errors(broken, fmt):
    (broken / "bad.py").write_text("import tensorflow.distribute\ndef (\n")
    result = run("check", "--format", fmt, "--exit-zero", "-o", "report.out", ".")
    assert result.exit_code == 2
    assert "error: bad.py: line 2" in result.stderr
    report = (broken / "report.out").read_text(encoding="utf-8")
    assert "train.py" in report
    # Machine-read reports carry the error too; text and suggestions leave it to stderr.
    assert ("bad.py" in report) == (fmt in ("json", "github", "sarif"))


def test_rule_docs_are_used_for_help():
    for rule in registry.all_rules():
        summary, body = rule_doc(rule)
        assert summary and body.startswith(summary.split()[0])
        assert "``" not in body


# --- the GitHub Action and the review workflow in docs/ci.md -----------------------------


def _action_step(name: str) -> dict:
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    return next(step for step in action["runs"]["steps"] if step.get("name") == name)


def _run_check_step(project: Path, **env: str) -> tuple[subprocess.CompletedProcess, str]:
    outputs = project.parent / "github_output"
    outputs.write_text("")
    step = _action_step("Run autofix check")
    environment = {
        **os.environ,
        "AUTOFIX_BIN": str(Path(sys.executable).parent),
        "AUTOFIX_PATHS": ".",
        "AUTOFIX_ARGS": "",
        "AUTOFIX_FORMAT": "sarif",
        "AUTOFIX_OUTPUT": "autofix.sarif",
        "GITHUB_OUTPUT": str(outputs),
        **env,
    }
    # How GitHub runs a `shell: bash` step.
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        cwd=project, env=environment, capture_output=True, text=True,
    )
    return done, outputs.read_text()


def test_the_action_writes_the_sarif_report_and_its_exit_code(tmp_path, sarif_validator):
    if not (Path(sys.executable).parent / "autofix").exists():
        pytest.skip("the autofix script is not installed next to this Python")
    project = tmp_path / "repo"
    (project / ".git").mkdir(parents=True)
    (project / "train.py").write_text(BROKEN)
    done, outputs = _run_check_step(project, AUTOFIX_ARGS="--select TFD001")
    assert done.returncode == 0, done.stderr
    assert outputs == "exit-code=0\n"
    log = json.loads((project / "autofix.sarif").read_text(encoding="utf-8"))
    sarif_validator.validate(log)
    assert {r["ruleId"] for r in log["runs"][0]["results"]} == {"TFD001"}
    # An unreadable file: the report is still written (and uploaded); the exit code says so.
    (project / "bad.py").write_text("import tensorflow.distribute\ndef (\n")
    done, outputs = _run_check_step(project, AUTOFIX_FORMAT="suggestions", AUTOFIX_OUTPUT="s.json")
    assert done.returncode == 0, done.stderr
    assert outputs == "exit-code=2\n"
    assert json.loads((project / "s.json").read_text(encoding="utf-8"))[0]["path"] == "train.py"


def test_the_action_uploads_only_sarif():
    upload = _action_step("Upload SARIF to code scanning")
    assert upload["uses"] == "github/codeql-action/upload-sarif@v4"
    assert upload["with"]["sarif_file"] == "${{ inputs.output }}"
    assert "inputs.format == 'sarif'" in upload["if"]


def _review_script() -> str:
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    for block in re.findall(r"```yaml\n(.*?)```", text, re.S):
        if "actions/github-script" in block:
            steps = yaml.safe_load(block)["jobs"]["suggest"]["steps"]
            return next(s for s in steps if s.get("uses", "").startswith("actions/github-script"))["with"]["script"]
    raise AssertionError("docs/ci.md has no review workflow")


NODE_HARNESS = r"""
const calls = [];
const github = {
  rest: { pulls: { listFiles: 'listFiles', createReview: async (args) => { calls.push({ review: args }); } } },
  paginate: async (method, args) => {
    if (method !== 'listFiles' || args.pull_number !== 7 || args.owner !== 'o') throw new Error('unexpected call');
    return JSON.parse(process.env.FILES);
  },
};
const context = { repo: { owner: 'o', repo: 'r' }, payload: { pull_request: { number: 7, head: { sha: 'abc123' } } } };
const core = { info: (message) => calls.push({ info: message }) };
const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
new AsyncFunction('github', 'context', 'core', 'require', process.env.SCRIPT)(github, context, core, require)
  .then(() => console.log(JSON.stringify(calls)))
  .catch((error) => { console.error(error); process.exit(1); });
"""


def _post_review(suggestions: Path, files: list[dict]) -> list[dict]:
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        pytest.skip("node is not installed (the workflow's script runs on actions/github-script)")
    env = {**os.environ, "SCRIPT": _review_script(), "FILES": json.dumps(files), "SUGGESTIONS": str(suggestions)}
    done = subprocess.run([node, "-e", NODE_HARNESS], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _patch(*hunks_: tuple[int, int]) -> str:
    return "".join(f"@@ -{start},{count} +{start},{count} @@ context\n" + " x\n" * count for start, count in hunks_)


def test_the_review_workflow_posts_suggestions_on_the_lines_of_the_diff(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(BROKEN)
    # A private constant: its fix renames it (line 4) as well as moving lines 7-8 below the
    # strategy (a public one would keep its name and value). Its comment says it is each GPU's
    # batch, so that the fix is made by default.
    private = (FIXTURES / "tfd002" / "constant_before_strategy.py").read_text().replace("BATCH_SIZE", "_BATCH_SIZE")
    private = private.replace("_BATCH_SIZE = 32\n", "_BATCH_SIZE = 32  # per GPU\n")
    (tmp_path / "batch.py").write_text(private)
    (tmp_path / "untouched.py").write_text(BROKEN)
    monkeypatch.chdir(tmp_path)
    assert run("check", "--format", "suggestions", "--exit-zero", "-o", "s.json", ".").exit_code == 0
    suggestions = json.loads((tmp_path / "s.json").read_text())
    batch = [(s["start_line"], s["end_line"]) for s in suggestions if s["path"] == "batch.py"]
    assert batch == [(4, 4), (6, 6), (9, 10)]
    files = [
        {"filename": "train.py", "patch": "@@ -0,0 +1,6 @@\n" + "".join("+" + line for line in BROKEN.splitlines(True))},
        # The diff shows lines 3-7 of batch.py: the fix on lines 9-10 cannot be a comment.
        {"filename": "batch.py", "patch": _patch((3, 5))},
        {"filename": "README.md"},
    ]
    (call,) = _post_review(tmp_path / "s.json", files)
    review = call["review"]
    assert (review["commit_id"], review["event"], review["pull_number"]) == ("abc123", "COMMENT", 7)
    by_path = {s["path"]: [] for s in suggestions}
    for s in suggestions:
        by_path[s["path"]].append(s)
    expected = [
        {"path": "batch.py", "line": 4, "side": "RIGHT", "body": by_path["batch.py"][0]["body"]},
        {"path": "batch.py", "line": 6, "side": "RIGHT", "body": by_path["batch.py"][1]["body"]},
        {"path": "train.py", "line": 5, "side": "RIGHT", "body": by_path["train.py"][0]["body"], "start_line": 4, "start_side": "RIGHT"},
    ]
    assert review["comments"] == expected
    assert "batch.py lines 9-10" in review["body"] and "untouched.py" not in review["body"]


def test_the_review_workflow_is_quiet_without_suggestions(tmp_path):
    (tmp_path / "s.json").write_text("[]")
    calls = _post_review(tmp_path / "s.json", [{"filename": "train.py", "patch": _patch((1, 3))}])
    assert calls == [{"info": "autofix has no suggestions for the files of this pull request"}]


def _notebook(*cells: list[str]) -> str:
    data = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [], "source": src}
            for i, src in enumerate(cells)
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(data, indent=1) + "\n"


def test_notebook_fixes_apply_to_the_notebook_file(tmp_path, monkeypatch, sarif_validator):
    """Findings in notebooks are placed by cell; their fixes are edits of the notebook's JSON,
    each carried by the finding it fixes, and give the notebook `autofix fix` writes."""
    text = _notebook(
        ["import tensorflow as tf\n", "\n", "strategy = tf.distribute.MirroredStrategy()"],
        ["model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n", "model.compile(optimizer='adam', loss='mse')"],
        ["model.fit(x, y)"],
    )
    (tmp_path / "nb.ipynb").write_text(text)
    (tmp_path / "fixed.ipynb").write_text(text)
    monkeypatch.chdir(tmp_path)
    assert run("fix", "fixed.ipynb").exit_code == 0
    fixed = (tmp_path / "fixed.ipynb").read_text()
    assert fixed != text
    items = json.loads(run("check", "--format", "json", "--select", "TFD001", "nb.ipynb").stdout)
    # Cells are numbered as the text says them (from 1); cell_index is the index into `cells`.
    assert [(i["cell"], i["cell_index"], i["line"], len(i["fix"]["replacements"])) for i in items] == [(2, 1, 1, 1), (2, 1, 2, 0)]
    edits = [(r["start_line"], r["start_column"], r["end_line"], r["end_column"], r["content"]) for i in items for r in i["fix"]["replacements"]]
    assert apply(text, edits) == fixed
    suggestions = json.loads(run("check", "--format", "suggestions", "--select", "TFD001", "nb.ipynb").stdout)
    assert apply_lines(text, [(s["start_line"], s["end_line"], s["replacement"]) for s in suggestions]) == fixed
    log = json.loads(run("check", "--format", "sarif", "--select", "TFD001", "nb.ipynb").stdout)
    sarif_validator.validate(log)
    results = log["runs"][0]["results"]
    assert [r["locations"][0]["properties"] for r in results] == [
        {"cell": 2, "cellIndex": 1, "cellLine": 1, "cellColumn": 9},
        {"cell": 2, "cellIndex": 1, "cellLine": 2, "cellColumn": 1},
    ]
    # The region is where code scanning shows it: the flagged code in the notebook's JSON text.
    lines = text.split("\n")
    for result, flagged in zip(results, ("tf.keras.Sequential(", "model.compile(")):
        region = result["locations"][0]["physicalLocation"]["region"]
        assert lines[region["startLine"] - 1][region["startColumn"] - 1 :].startswith(flagged)
    annotations = run("check", "--format", "github", "--select", "TFD001", "nb.ipynb").stdout.splitlines()
    for annotation, flagged in zip(annotations, ("tf.keras.Sequential(", "model.compile(")):
        line, column = (int(re.search(rf",{key}=(\d+)", annotation).group(1)) for key in ("line", "col"))
        assert lines[line - 1][column - 1 :].startswith(flagged), annotation
        assert "::cell 2, line " in annotation
    # In a review comment, a notebook finding is named by its cell.
    assert "autofix: **TFD001** (cell 2, line 1) model built outside strategy.scope()" in suggestions[0]["body"]


def test_each_notebook_finding_carries_its_own_cells_fix(tmp_path, monkeypatch, sarif_validator):
    """The fix of a notebook is divided among its findings as a script's is: each fixable
    finding gets the hunks of its own cell (the hunks are lines of the notebook's JSON, where
    the findings are placed first), in JSON, SARIF and suggestions alike."""
    text = _notebook(
        ["import tensorflow as tf\n", "strategy = tf.distribute.MirroredStrategy()"],
        ["Some prose."],
        ["ds = tf.data.Dataset.range(64).batch(32)  # per replica"],
        ["model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n", "model.compile(optimizer='adam', loss='mse')"],
        ["model.fit(ds)"],
    )
    data = json.loads(text)
    data["cells"][1]["cell_type"] = "markdown"
    del data["cells"][1]["outputs"], data["cells"][1]["execution_count"]
    text = json.dumps(data, indent=1) + "\n"
    (tmp_path / "nb.ipynb").write_text(text)
    (tmp_path / "fixed.ipynb").write_text(text)
    monkeypatch.chdir(tmp_path)
    assert run("fix", "fixed.ipynb").exit_code == 0
    fixed = (tmp_path / "fixed.ipynb").read_text()
    lines = text.split("\n")

    def cell_of(line: int) -> int:
        # The cell whose JSON object holds this line of the file.
        return max(i for i, c in enumerate(data["cells"]) if f'"id": "c{i}"' in "\n".join(lines[: line - 1]))

    items = json.loads(run("check", "--format", "json", "nb.ipynb").stdout)
    assert [(i["code"], i["cell"], i["line"]) for i in items] == [("TFD002", 3, 1), ("TFD001", 4, 1), ("TFD001", 4, 2)]
    for item in items:
        for r in (item["fix"] or {}).get("replacements", []):
            assert cell_of(r["start_line"]) == item["cell_index"], item
    assert [bool(i["fix"]["replacements"]) for i in items] == [True, True, False]
    edits = [(r["start_line"], r["start_column"], r["end_line"], r["end_column"], r["content"]) for i in items for r in i["fix"]["replacements"]]
    assert apply(text, edits) == fixed
    log = json.loads(run("check", "--format", "sarif", "nb.ipynb").stdout)
    sarif_validator.validate(log)
    results = log["runs"][0]["results"]
    sarif_fixes = [[x for f in r.get("fixes", []) for c in f["artifactChanges"] for x in c["replacements"]] for r in results]
    assert [len(f) for f in sarif_fixes] == [len(i["fix"]["replacements"]) for i in items]
    for result, replacements in zip(results, sarif_fixes):
        for x in replacements:
            assert cell_of(x["deletedRegion"]["startLine"]) == result["locations"][0]["properties"]["cellIndex"]
    suggestions = json.loads(run("check", "--format", "suggestions", "nb.ipynb").stdout)
    assert [[(f["code"], f["cell"]) for f in s["findings"]] for s in suggestions] == [[("TFD002", 3)], [("TFD001", 4), ("TFD001", 4)]]
    assert apply_lines(text, [(s["start_line"], s["end_line"], s["replacement"]) for s in suggestions]) == fixed
