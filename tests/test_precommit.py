"""The hooks in .pre-commit-hooks.yaml, run by pre-commit itself.

pre-commit installs a hook repository from git at a revision, so this repository's working tree
(uncommitted changes included) is committed into a scratch git repository first; a second
scratch repository uses its hooks from its .pre-commit-config.yaml. Building the hook
environment installs autofix and its dependencies with pip: this takes tens of seconds and needs
the package index (or a pip cache holding them).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import BROKEN, FIXED

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

# What pip prints when it cannot reach the package index.
OFFLINE = re.compile(
    r"Could not find a version that satisfies|No matching distribution found|Failed to establish a new connection"
    r"|Temporary failure in name resolution|Network is unreachable|ProxyError|Max retries exceeded",
)
COPY_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "venv", "__pycache__", "*.pyc", ".pytest_cache", ".ruff_cache", "*.egg-info", "build", "dist"
)


def git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def hooks_repo(tmp_path_factory) -> tuple[Path, str]:
    if not shutil.which("git"):
        pytest.skip("git is not installed")
    repo = tmp_path_factory.mktemp("hooks") / "autofix"
    shutil.copytree(ROOT, repo, ignore=COPY_IGNORE, symlinks=True)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "snapshot")
    return repo, git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


def run_pre_commit(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "NO_COLOR": "1", "PRE_COMMIT_COLOR": "never"}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args], cwd=project, env=env, capture_output=True, text=True, timeout=600
    )


@pytest.fixture
def project(tmp_path, hooks_repo, pre_commit_home) -> Path:
    repo, rev = hooks_repo
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q")
    (project / ".pre-commit-config.yaml").write_text(
        yaml.safe_dump(
            {"repos": [{"repo": str(repo), "rev": rev, "hooks": [{"id": "autofix-check"}, {"id": "autofix-fix"}]}]}
        )
    )
    (project / "train.py").write_text(BROKEN)
    (project / "clean.py").write_text("import tensorflow as tf\nx = tf.constant(1)\n")
    (project / "notes.txt").write_text("model = tf.keras.Sequential()\n")
    # pre-commit tells that a hook modified files from `git diff`, which sees tracked files only.
    git(project, "add", "-A")
    installed = run_pre_commit(project, pre_commit_home, "install-hooks")
    if installed.returncode != 0:
        log = installed.stdout + installed.stderr
        home_log = pre_commit_home / "pre-commit.log"
        if home_log.exists():
            log += home_log.read_text(errors="replace")
        if OFFLINE.search(log):
            pytest.skip("pre-commit could not build the hook environment: the package index is unreachable")
        pytest.fail(f"pre-commit install-hooks failed:\n{log}")
    return project


def test_the_manifest_declares_both_hooks():
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"autofix-check", "autofix-fix"}
    for hook in hooks.values():
        assert hook["language"] == "python" and hook["types_or"] == ["python", "jupyter"]
        assert hook.get("pass_filenames", True) is True


def test_check_hook_fails_on_findings_and_passes_clean_files(project, pre_commit_home):
    failed = run_pre_commit(project, pre_commit_home, "run", "autofix-check", "--files", "train.py", "clean.py", "notes.txt")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "train.py:4:9: TFD001 [*] model built outside strategy.scope()" in failed.stdout
    assert "notes.txt" not in failed.stdout
    assert (project / "train.py").read_text() == BROKEN
    passed = run_pre_commit(project, pre_commit_home, "run", "autofix-check", "--files", "clean.py")
    assert passed.returncode == 0, passed.stdout + passed.stderr


def test_fix_hook_rewrites_the_files_it_is_given(project, pre_commit_home):
    fixed = run_pre_commit(project, pre_commit_home, "run", "autofix-fix", "--files", "train.py", "clean.py")
    # pre-commit fails a hook that modified files, so the fix can be reviewed and staged.
    assert fixed.returncode == 1, fixed.stdout + fixed.stderr
    assert "files were modified by this hook" in fixed.stdout
    assert (project / "train.py").read_text() == FIXED
    again = run_pre_commit(project, pre_commit_home, "run", "autofix-fix", "--files", "train.py", "clean.py")
    assert again.returncode == 0, again.stdout + again.stderr
    checked = run_pre_commit(project, pre_commit_home, "run", "autofix-check", "--files", "train.py")
    assert checked.returncode == 0, checked.stdout + checked.stderr
