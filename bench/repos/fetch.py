"""Materialise the multi-module repository corpus listed in manifest.json and check every sha256.

    python bench/repos/fetch.py [--files DIR] [--force] [--from-git CLONES] [--manifest FILE]

Each record names a repository, a commit, a folder (``root``) and the files of one training
program under it. Every file is read from ``https://raw.githubusercontent.com/<repo>/<commit>/
<root>/<path>`` (or, with ``--from-git DIR``, from a local clone ``DIR/<owner>+<name>/repo``, a git
directory or a work tree holding ``.git``, as a snapshot or ``git clone --mirror`` leaves it) and
saved as ``DIR/<id>/<path>`` (DIR: $AUTOFIX_REPOS_CORPUS, else bench/repos/files, which git
ignores). Files already present with the right sha256 are kept. Standard library only. Exits 1
and names every file that could not be read or whose content differs from the manifest.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import sys
import urllib.error
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _realworld_fetch():
    """bench/realworld/fetch.py (its download and its reader of local clones)."""
    spec = importlib.util.spec_from_file_location("realworld_fetch", HERE.parent / "realworld" / "fetch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def repo_path(record: dict, path: str) -> str:
    """A file's path in its repository: the record's ``root`` and the file's path under it."""
    root = record.get("root", "").strip("/")
    return f"{root}/{path}" if root else path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", help="where to put the trees (default: $AUTOFIX_REPOS_CORPUS, else bench/repos/files)")
    parser.add_argument("--force", action="store_true", help="read again even when a file is present and intact")
    parser.add_argument("--from-git", metavar="DIR", help="read the files from local clones DIR/<owner>+<name>/repo instead of downloading them")
    parser.add_argument("--manifest", default=str(HERE / "manifest.json"), help="the manifest (default: bench/repos/manifest.json)")
    args = parser.parse_args(argv)
    folder = Path(args.files or os.environ.get("AUTOFIX_REPOS_CORPUS") or HERE / "files")
    manifest = json.loads(Path(args.manifest).read_text(encoding="utf-8"))
    realworld = _realworld_fetch()

    failed: list[tuple[str, str]] = []
    read = kept = 0
    for number, record in enumerate(manifest, 1):
        for item in record["files"]:
            target = folder / record["id"] / item["path"]
            if not args.force and target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == item["sha256"]:
                kept += 1
                continue
            entry = {"repo": record["repo"], "commit": record["commit"], "path": repo_path(record, item["path"])}
            url = realworld.url_of(entry)
            try:
                data = realworld.from_git(Path(args.from_git), entry) if args.from_git else realworld.download(url)
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                failed.append((f"{record['id']}/{item['path']}", f"{'reading' if args.from_git else 'download'} failed ({exc}) from {url}"))
                continue
            digest = hashlib.sha256(data).hexdigest()
            if digest != item["sha256"]:
                failed.append((f"{record['id']}/{item['path']}", f"sha256 {digest} differs from the manifest's {item['sha256']} ({url}); not saved"))
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            read += 1
        print(f"[{number}/{len(manifest)}] {record['id']}")

    print(f"\n{read} files {'read from clones' if args.from_git else 'downloaded'}, {kept} already present, {len(failed)} failed; trees in {folder}")
    for name, why in failed:
        print(f"FAILED {name}: {why}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
