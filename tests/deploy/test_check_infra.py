"""The `make check-infra` gate itself: what it counts as a problem in checkov's report (synthetic reports here; the
real checkov run over infra/ is `make check-infra`, which `make test` runs)."""

from __future__ import annotations

from pathlib import Path

from deploy.check_infra import evaluate

TEMPLATE = """resource store 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  #checkov:skip=CKV_AZURE_1:a reason
  name: 'x'
}
"""


def check(check_id: str, reason: str | None = None) -> dict:
    result = {"check_id": check_id, "check_name": "a check", "resource": "Microsoft.Storage/storageAccounts.store",
              "file_path": "/main.bicep", "file_line_range": [1, 4]}
    if reason is not None:
        result["check_result"] = {"result": "SKIPPED", "suppress_comment": reason}
    return result


def report(**results: list) -> list[dict]:
    return [{"check_type": "bicep", "results": {"passed_checks": [check("CKV_AZURE_2")], **results}}]


def templates(tmp_path: Path, text: str = TEMPLATE) -> Path:
    (tmp_path / "main.bicep").write_text(text)
    return tmp_path


def test_clean(tmp_path: Path) -> None:
    found = evaluate(report(skipped_checks=[check("CKV_AZURE_1", "a reason")]), "", templates(tmp_path))
    assert (found.problems, found.passed, found.skipped) == ([], 1, 1)


def test_failed_checks_parse_errors_and_crashes_fail(tmp_path: Path) -> None:
    found = evaluate(report(failed_checks=[check("CKV_AZURE_3")], parsing_errors=["/x/main.bicep"],
                            skipped_checks=[check("CKV_AZURE_1", "a reason")]),
                     "ERROR Failed to run check CKV_AZURE_9 on main.bicep:store", templates(tmp_path))
    assert [p.split()[0] for p in found.problems] == ["cannot", "FAILED", "CHECK"]


def test_a_skip_needs_a_reason_and_must_still_apply(tmp_path: Path) -> None:
    found = evaluate(report(skipped_checks=[check("CKV_AZURE_1", "No comment provided")]), "",
                     templates(tmp_path, TEMPLATE + TEMPLATE.replace("store", "other")))
    assert found.problems == [
        "SKIPPED WITHOUT A REASON CKV_AZURE_1: Microsoft.Storage/storageAccounts.store",
        "STALE SKIP CKV_AZURE_1 on other in main.bicep: the check does not apply",
    ]


def test_a_template_no_check_ran_on_fails(tmp_path: Path) -> None:
    lonely = TEMPLATE.replace("store", "lonely").replace("  #checkov:skip=CKV_AZURE_1:a reason\n", "")
    (tmp_path / "unscanned.bicep").write_text(lonely)
    found = evaluate(report(skipped_checks=[check("CKV_AZURE_1", "a reason")]), "", templates(tmp_path))
    assert found.problems == ["NOT SCANNED unscanned.bicep: no check ran on its resources"]
