"""Which files a run picks up."""

from __future__ import annotations

import os

from autofix.discovery import Discovery


def tree(root, files):
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x = 1\n")


def found(root, **kw):
    d = Discovery(**kw)
    return sorted(os.path.relpath(p, root) for p in d.files([str(root)]))


def test_recurses_and_picks_python_files(tmp_path):
    tree(tmp_path, ["a.py", "pkg/b.py", "pkg/deep/c.py", "notes.txt", "pkg/data.json"])
    assert found(tmp_path) == ["a.py", "pkg/b.py", "pkg/deep/c.py"]


def test_skips_virtualenvs_site_packages_and_build_dirs(tmp_path):
    tree(
        tmp_path,
        [
            "train.py",
            ".venv/lib/x.py",
            "env/lib/python3.11/site-packages/keras/y.py",
            "myenv/bin/z.py",
            "build/lib/w.py",
            "dist/v.py",
            "__pycache__/u.py",
            ".git/hooks/t.py",
        ],
    )
    (tmp_path / "myenv" / "pyvenv.cfg").write_text("home = /usr\n")
    assert found(tmp_path) == ["train.py"]


def test_honours_gitignore_including_nested_and_negation(tmp_path):
    tree(tmp_path, ["keep.py", "generated/a.py", "sub/skip_me.py", "sub/keep_me.py", "sub/x_special.py"])
    (tmp_path / ".gitignore").write_text("generated/\nskip_*.py\nx_*.py\n")
    (tmp_path / "sub" / ".gitignore").write_text("!x_special.py\n")
    assert found(tmp_path) == ["keep.py", "sub/keep_me.py", "sub/x_special.py"]
    assert found(tmp_path, respect_gitignore=False) == [
        "generated/a.py",
        "keep.py",
        "sub/keep_me.py",
        "sub/skip_me.py",
        "sub/x_special.py",
    ]


def test_exclude_and_include_globs(tmp_path):
    tree(tmp_path, ["a.py", "legacy/b.py", "tests/test_c.py", "scripts/run.pyw"])
    assert found(tmp_path, exclude=["legacy/", "test_*.py"]) == ["a.py"]
    assert found(tmp_path, include=["*.py", "*.pyw"]) == ["a.py", "legacy/b.py", "scripts/run.pyw", "tests/test_c.py"]


def test_explicit_files_are_taken_unless_force_excluded(tmp_path):
    tree(tmp_path, ["ignored.py", "other.txt"])
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    d = Discovery()
    files = list(d.files([str(tmp_path / "ignored.py"), str(tmp_path / "other.txt")]))
    assert files == [str(tmp_path / "ignored.py"), str(tmp_path / "other.txt")]
    named = str(tmp_path / "ignored.py")
    assert list(Discovery(exclude=["ignored.py"]).files([named])) == [named]
    assert list(Discovery(exclude=["ignored.py"], force_exclude=True).files([named])) == []


def test_excludes_are_relative_to_their_root_and_a_named_folder_overrides_them(tmp_path):
    tree(tmp_path, ["src/app.py", "src/legacy/old.py", "examples/demo/train.py", "examples/demo/gen/x.py"])
    d = Discovery(exclude=["/src/legacy/", "/examples/", "gen/"], root=str(tmp_path))
    only_src = Discovery(exclude=["/src/legacy/"], root=str(tmp_path)).files([str(tmp_path / "src")])
    assert [os.path.relpath(p, tmp_path) for p in only_src] == ["src/app.py"]
    assert sorted(os.path.relpath(p, tmp_path) for p in d.files([str(tmp_path)])) == ["src/app.py"]
    # Naming an excluded folder overrides the globs that exclude it, not the others.
    assert [os.path.relpath(p, tmp_path) for p in d.files([str(tmp_path / "examples" / "demo")])] == ["examples/demo/train.py"]


def test_symlinks_never_leave_the_tree_and_loops_end(tmp_path):
    outside = tmp_path / "outside"
    tree(outside, ["secret.py"])
    root = tmp_path / "repo"
    tree(root, ["a.py", "pkg/b.py"])
    (root / "escape").symlink_to(outside, target_is_directory=True)
    (root / "escape_file.py").symlink_to(outside / "secret.py")
    (root / "pkg" / "loop").symlink_to(root, target_is_directory=True)
    (root / "alias.py").symlink_to(root / "a.py")
    files = found(root)
    # Each real file once, nothing from outside, and the loop does not recurse forever.
    assert files == ["a.py", "pkg/b.py"]


def test_missing_paths_are_recorded(tmp_path):
    d = Discovery()
    assert list(d.files([str(tmp_path / "nope")])) == []
    assert d.missing == [str(tmp_path / "nope")]
