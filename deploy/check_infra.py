"""`make check-infra`: checkov over the Bicep templates in `infra/`, strict.

The Bicep compiler is not available on these machines, so this is the offline gate for the templates. It fails when:
- a template cannot be parsed, or a file with resources was not scanned at all;
- a check fails;
- a check crashed on a resource (its verdict is unknown);
- a check is skipped without a reason (`#checkov:skip=CKV_...:reason` inside the resource), or a skip comment names a
  check that no longer applies to that resource (stale skips hide nothing and mislead readers).

    python -m deploy.check_infra [--checkov PATH] [infra]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SKIP_COMMENT = re.compile(r"#checkov:skip=(?P<check>[A-Z0-9_]+)(?::(?P<reason>.*))?")
RESOURCE_LINE = re.compile(r"^\s*(resource|module)\s+(?P<name>\w+)\s+'")


@dataclass
class Findings:
    problems: list[str] = field(default_factory=list)
    passed: int = 0
    skipped: int = 0


def run_checkov(checkov: str, directory: Path) -> tuple[list[dict[str, Any]], str]:
    completed = subprocess.run(
        [checkov, "--directory", str(directory), "--framework", "bicep", "--output", "json", "--skip-download",
         "--compact"],
        capture_output=True, text=True,
    )
    if completed.returncode not in (0, 1):  # 1 = some check failed; anything else = checkov itself failed
        raise SystemExit(f"checkov exited with {completed.returncode}:\n{completed.stderr[-4000:]}")
    try:
        report: Any = json.loads(completed.stdout)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"checkov printed no JSON report ({exc}):\n{completed.stdout[-2000:]}") from exc
    reports = report if isinstance(report, list) else [report]
    return [r for r in reports if isinstance(r, dict) and "results" in r], completed.stderr


def skip_comments(directory: Path) -> dict[tuple[str, str, str], str]:
    """(file, resource symbol, check id) -> reason, for every skip comment in the templates."""
    found: dict[tuple[str, str, str], str] = {}
    for path in sorted(directory.rglob("*.bicep")):
        resource = ""
        for line in path.read_text().splitlines():
            declared = RESOURCE_LINE.match(line)
            if declared:
                resource = declared.group("name")
            comment = SKIP_COMMENT.search(line)
            if comment:
                relative = path.relative_to(directory).as_posix()
                found[(relative, resource, comment.group("check"))] = (comment.group("reason") or "").strip()
    return found


def evaluate(reports: list[dict[str, Any]], stderr: str, directory: Path) -> Findings:
    findings = Findings()
    scanned: set[str] = set()
    applied: set[tuple[str, str, str]] = set()
    for report in reports:
        results = report["results"]
        for error in results.get("parsing_errors", []):
            findings.problems.append(f"cannot parse {error}")
        for check in results.get("failed_checks", []):
            findings.problems.append(
                f"FAILED {check['check_id']} {check['check_name']}: {check['resource']} "
                f"({check['file_path'].lstrip('/')}:{check['file_line_range'][0]})"
            )
        for check in results.get("passed_checks", []):
            findings.passed += 1
            scanned.add(check["file_path"].lstrip("/"))
        for check in results.get("skipped_checks", []):
            findings.skipped += 1
            file_path = check["file_path"].lstrip("/")
            scanned.add(file_path)
            symbol = check["resource"].rsplit(".", 1)[-1]
            applied.add((file_path, symbol, check["check_id"]))
            reason = (check.get("check_result") or {}).get("suppress_comment", "").strip()
            if not reason or reason == "No comment provided":
                findings.problems.append(f"SKIPPED WITHOUT A REASON {check['check_id']}: {check['resource']}")
        scanned.update(check["file_path"].lstrip("/") for check in results.get("failed_checks", []))
    for crashed in re.findall(r"Failed to run check (\S+) on (\S+)", stderr):
        findings.problems.append(f"CHECK CRASHED {crashed[0]} on {crashed[1]} (its verdict is unknown)")
    for (file_path, symbol, check_id), _reason in skip_comments(directory).items():
        if (file_path, symbol, check_id) not in applied:
            findings.problems.append(f"STALE SKIP {check_id} on {symbol} in {file_path}: the check does not apply")
    for path in sorted(directory.rglob("*.bicep")):
        relative = path.relative_to(directory).as_posix()
        if RESOURCE_LINE.search(path.read_text()) and relative not in scanned and f"{directory.name}/{relative}" \
                not in scanned:
            findings.problems.append(f"NOT SCANNED {relative}: no check ran on its resources")
    return findings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path, nargs="?", default=Path("infra"))
    parser.add_argument("--checkov", default="checkov", help="the checkov executable (make uses .venv-checkov)")
    args = parser.parse_args()
    directory = args.directory.resolve()
    reports, stderr = run_checkov(args.checkov, directory)
    findings = evaluate(reports, stderr, directory)
    for problem in findings.problems:
        print(problem)
    print(f"checkov over {args.directory}: {findings.passed} passed, {findings.skipped} skipped with a reason, "
          f"{len(findings.problems)} problems")
    sys.exit(1 if findings.problems else 0)


if __name__ == "__main__":
    main()
