"""Download the real-world corpus listed in manifest.json and check every file's sha256.

    python bench/realworld/fetch.py [--files DIR] [--force] [--from-git CLONES] [--manifest FILE]

Each file comes from https://raw.githubusercontent.com/<repo>/<commit>/<path>, pinned to the
commit it was triaged at, and is saved as DIR/<id> (DIR: $AUTOFIX_CORPUS, else
bench/realworld/files, which git ignores). Files already present with the right sha256 are
kept. Needs network access (it cannot run in CI); standard library only. Exits 1 and names
every file that could not be downloaded or whose content differs from the manifest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
RAW = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"


def url_of(entry: dict) -> str:
    return RAW.format(repo=entry["repo"], commit=entry["commit"], path=urllib.parse.quote(entry["path"]))


def download(url: str, attempts: int = 3) -> bytes:
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                return response.read()
        except (urllib.error.URLError, TimeoutError) as exc:
            if isinstance(exc, urllib.error.HTTPError) and exc.code == 404 or attempt == attempts - 1:
                raise
            time.sleep(2 ** attempt)
    raise AssertionError("unreachable")


def from_git(folder: Path, entry: dict) -> bytes:
    """The file at its commit from a local clone ``folder/<owner>+<name>/repo`` (a git
    directory, or a work tree holding ``.git``)."""
    base = folder / entry["repo"].replace("/", "+") / "repo"
    git_dir = base / ".git" if (base / ".git").is_dir() else base
    if not git_dir.is_dir():
        raise OSError(f"no clone at {base}")
    result = subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{entry['commit']}:{entry['path']}"], capture_output=True
    )
    if result.returncode:
        raise OSError(result.stderr.decode("utf-8", "replace").strip() or "git show failed")
    return result.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", help="where to put the files (default: $AUTOFIX_CORPUS, else bench/realworld/files)")
    parser.add_argument("--force", action="store_true", help="download again even when a file is present and intact")
    parser.add_argument("--from-git", metavar="DIR", help="read the files from local clones DIR/<owner>+<name>/repo instead of downloading them")
    parser.add_argument("--manifest", help="another corpus's manifest (bench/migrate/manifest.json); its files go beside it, in files/")
    args = parser.parse_args(argv)
    manifest_path = Path(args.manifest) if args.manifest else HERE / "manifest.json"
    default = manifest_path.parent / "files"
    folder = Path(args.files or (None if args.manifest else os.environ.get("AUTOFIX_CORPUS")) or default)
    folder.mkdir(parents=True, exist_ok=True)
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))

    failed: list[tuple[str, str]] = []
    fetched = kept = 0
    for n, entry in enumerate(manifest, 1):
        target = folder / entry["id"]
        if not args.force and target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == entry["sha256"]:
            kept += 1
            continue
        url = url_of(entry)
        try:
            data = from_git(Path(args.from_git), entry) if args.from_git else download(url)
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            failed.append((entry["id"], f"{'reading' if args.from_git else 'download'} failed ({exc}) from {url}"))
            continue
        digest = hashlib.sha256(data).hexdigest()
        if digest != entry["sha256"]:
            failed.append((entry["id"], f"sha256 {digest} differs from the manifest's {entry['sha256']} ({url}); not saved"))
            continue
        target.write_bytes(data)
        fetched += 1
        print(f"[{n}/{len(manifest)}] {entry['id']}")

    print(f"\n{fetched} {'read from clones' if args.from_git else 'downloaded'}, {kept} already present, {len(failed)} failed; files in {folder}")
    for file_id, why in failed:
        print(f"FAILED {file_id}: {why}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
