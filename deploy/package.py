"""Build the deployment package: `dist/functionapp.zip`, and the same files unpacked in `dist/functionapp/`.

What goes in is what `func azure functionapp publish` and azd would upload: the repository minus `.funcignore`
(gitignore syntax). One difference on purpose: the package's `requirements.txt` is `requirements.lock` (every
dependency pinned with its hashes, environment markers for Python 3.11-3.13), so the remote build on Azure installs
exactly the versions the tests ran against; the ranges in the repository's `requirements.txt` stay the source of the
lock (`make lock`).

    python -m deploy.package [--root .] [--out dist]
"""

from __future__ import annotations

import argparse
import os
import shutil
import zipfile
from pathlib import Path

import pathspec

ROOT = Path(__file__).resolve().parent.parent
LOCK = "requirements.lock"
REQUIREMENTS = "requirements.txt"
# A fixed timestamp: the same sources give the same zip, byte for byte.
ZIP_DATE = (2020, 1, 1, 0, 0, 0)


def ignore_spec(root: Path) -> pathspec.PathSpec:
    lines = (root / ".funcignore").read_text(encoding="utf-8").splitlines()
    return pathspec.GitIgnoreSpec.from_lines(lines)


def packaged_files(root: Path = ROOT) -> list[str]:
    """Paths (POSIX, relative to `root`) of the files a deployment ships, sorted."""
    spec = ignore_spec(root)
    found: list[str] = []
    for directory, subdirs, files in os.walk(root):
        relative_dir = Path(directory).relative_to(root)
        kept = []
        for name in sorted(subdirs):
            path = (relative_dir / name).as_posix()
            if not (Path(directory) / name).is_symlink() and not spec.match_file(path + "/"):
                kept.append(name)
        subdirs[:] = kept
        for name in files:
            path = (relative_dir / name).as_posix()
            if not (Path(directory) / name).is_symlink() and not spec.match_file(path):
                found.append(path)
    if REQUIREMENTS not in found:
        found.append(REQUIREMENTS)
    return sorted(found)


def build(root: Path = ROOT, out: Path | None = None) -> Path:
    """Stage the package in `out/functionapp/` and zip it to `out/functionapp.zip`; returns the zip's path."""
    out = out or root / "dist"
    lock = root / LOCK
    if not lock.is_file():
        raise SystemExit(f"{lock} is missing: run `make lock`")
    stage = out / "functionapp"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    files = packaged_files(root)
    for relative in files:
        target = stage / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        source = lock if relative == REQUIREMENTS else root / relative
        shutil.copyfile(source, target)
    archive = out / "functionapp.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zipped:
        for relative in files:
            info = zipfile.ZipInfo(relative, date_time=ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zipped.writestr(info, (stage / relative).read_bytes())
    return archive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: ROOT/dist)")
    args = parser.parse_args()
    archive = build(args.root.resolve(), args.out)
    with zipfile.ZipFile(archive) as zipped:
        names = zipped.namelist()
    print(f"{archive}: {len(names)} files, {archive.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
