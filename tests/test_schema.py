"""The JSON Schema of assessment.json (report/assessment.schema.json, report/schema.py): a valid
2020-12 schema of the format version assess() writes, that the assessments of real inputs
follow and that rejects broken ones naming where; and the check of every assessment the tests
make (IOASSESS_CHECK_SCHEMA=1, set by conftest.py), in this process and in those they start."""
import copy
import importlib
import json
import os
import re
import subprocess
import sys
import types

import jsonschema
import pytest

from conftest import _installed_cli
from ioassess.inputs.job import DIRECTIONS, LAYERS, META, META_KINDS, Flag
from ioassess.inputs.load import load_job
from ioassess.models.families import HEAD_FAMILIES, TAIL_FAMILIES
from ioassess.models.modelfile import DEFAULT_MODEL, load_model
from ioassess.models.slowdown import EXCLUSION_REASONS
from ioassess.report import make_report
from ioassess.report.assess import FORMAT, FORMAT_VERSION, assess
from ioassess.report.classify import ROW_CLASSES
from ioassess.report.ground_truth import KERNEL_STATES
from ioassess.report.metadata import UNKNOWN_KIND
from ioassess.report.model_choice import MATCHES
from ioassess.report.schema import CHECK_SCHEMA_ENV, SCHEMA_PATH, SchemaMismatch, check_assessment, load_schema
from ioassess.report.sections import SIZE_BIN_LABELS
from ioassess.site import epilog
from ioassess.site.probe.target import OPS as PROBE_OPS
from recorder_helpers import REPO, clean_env, shipped_darshan_logs

# The module (ioassess.report.assess is the function).
assess_module = importlib.import_module("ioassess.report.assess")


def test_the_schema_is_a_2020_12_schema_of_this_format_version():
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["properties"]["format"] == {"const": FORMAT}
    assert schema["properties"]["version"] == {"const": FORMAT_VERSION}
    assert schema["$id"].endswith(f":{FORMAT_VERSION}") and f"version {FORMAT_VERSION}" in schema["title"]
    sections = {key: value for key, value in schema["properties"].items() if key not in ("format", "version")}
    assert sections == {key: {"$ref": f"#/$defs/{key}"} for key in sections}   # each section: one entry of $defs
    assert set(schema["required"]) == set(schema["properties"])


def test_the_schema_is_in_the_package_data():
    assert os.path.dirname(SCHEMA_PATH) == os.path.dirname(assess_module.__file__)
    assert '"ioassess.report": ["templates/*.j2", "assessment.schema.json"]' in (REPO / "setup.py").read_text()


def test_the_schemas_closed_sets_are_the_codes():
    defs = load_schema()["$defs"]
    assert defs["class"]["enum"] == list(ROW_CLASSES)
    assert defs["op_class"]["enum"] == list(ROW_CLASSES[:-1])
    assert defs["direction"]["enum"] == list(DIRECTIONS[:META])
    assert defs["layer"]["enum"] == list(LAYERS)
    assert defs["metadata_kind"]["enum"] == [*META_KINDS, UNKNOWN_KIND]
    assert defs["family"]["enum"] == [family.name for family in HEAD_FAMILIES + TAIL_FAMILIES]
    assert list(defs["kernel_table"]["properties"]) == list(KERNEL_STATES)
    assert defs["model"]["properties"]["choice"]["properties"]["match"]["enum"] == list(MATCHES)
    assert defs["sizes"]["items"]["properties"]["bin"]["enum"] == list(SIZE_BIN_LABELS)
    assert list(defs["slowdown"]["properties"]["excluded"]["properties"]) == list(EXCLUSION_REASONS)
    assert list(defs["layer_amounts"]["properties"]["flagged"]["properties"]) == [flag.name.lower() for flag in Flag]
    assert list(defs["probe_target"]["properties"]["ops"]["properties"]) == list(PROBE_OPS)


def test_the_fields_table_of_the_docs_lists_the_schemas_sections():
    doc = (REPO / "docs" / "assessment.md").read_text()
    table = doc.split("## Fields", 1)[1].split("\n\n", 2)[1]
    documented = {name for row in table.splitlines()[2:] for name in re.findall(r"`(\w+)`", row.split("|")[1])}
    assert documented == set(load_schema()["properties"])


@pytest.mark.parametrize("log", shipped_darshan_logs(), ids=os.path.basename)
def test_the_assessments_of_pydarshans_logs_follow_the_schema(log, tmp_path):
    make_report([log], json_path=tmp_path / "a.json")
    with open(tmp_path / "a.json") as f:
        check_assessment(json.load(f))


def test_the_assessment_of_a_recorded_run_follows_the_schema(ioassess, tmp_path):
    script = (f"dd if=/dev/zero of={tmp_path}/data bs=4k count=256 conv=fsync 2>/dev/null; "
              f"cat {tmp_path}/data > /dev/null; ls {tmp_path}/missing 2>/dev/null; true")
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", "sh", "-c", script)
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "t" / "assessment.json") as f:
        assessment = json.load(f)
    check_assessment(assessment)
    # the sections that are null or empty without reads, writes, syncs and metadata calls are there
    assert assessment["flushes"]["syncs"] >= 1 and assessment["metadata"]["missing"]["calls"] >= 1
    assert {row["direction"] for row in assessment["classes"]} >= {"read", "write", "sync"}


@pytest.fixture(scope="module")
def written():
    """An assessment as written (json_safe, then JSON) of a Darshan log, that follows the schema."""
    log = next(path for path in shipped_darshan_logs() if path.endswith("sample-dxt-simple.darshan"))
    assessment = json.loads(json.dumps(make_report([log], DEFAULT_MODEL)))
    check_assessment(assessment)
    assert assessment["classes"] and assessment["tier"] == "ops"
    return assessment


def _without(data, *keys):
    del data[keys[0]][keys[1]]


def _set(*keys, value):
    def change(data):
        for key in keys[:-1]:
            data = data[key]
        data[keys[-1]] = value
    return change


@pytest.mark.parametrize("change, path, problem", [
    (lambda a: _without(a, "headline", "io_s"), "$.headline", "'io_s' is a required property"),
    (_set("job", "nprocs", value="4"), "$.job.nprocs", "'4' is not of type 'integer'"),
    (_set("headline", "io_s", value=None), "$.headline.io_s", "None is not of type 'number'"),
    (_set("headline", "io_s", value=float("nan")), "$.headline.io_s", "None is not of type 'number'"),
    (_set("classes", 0, "colour", value="red"), "$.classes[0]", "('colour' was unexpected)"),
    (_set("classes", 0, "class", value="fast"), "$.classes[0].class", "'fast' is not one of"),
    (_set("tier", value="partial"), "$.tier", "'partial' is not one of"),
    (_set("version", value=2), "$.version", "1 was expected"),
    (_set("surprise", value=1), "$", "('surprise' was unexpected)"),
], ids=["missing key", "wrong type", "null", "NaN written as null", "unknown key", "class outside the enum",
        "tier outside the enum", "another version", "unknown section"])
def test_the_schema_rejects_a_broken_assessment_naming_where(written, change, path, problem):
    broken = copy.deepcopy(written)
    change(broken)
    with pytest.raises(SchemaMismatch) as raised:
        check_assessment(broken)
    assert f" at {path}: " in str(raised.value) and problem in str(raised.value), raised.value


def test_assess_checks_its_result_when_asked_and_only_then(monkeypatch):
    job = load_job([next(iter(shipped_darshan_logs()))])
    model = load_model(DEFAULT_MODEL)
    monkeypatch.setattr(assess_module, "tier_of", lambda job: "partial")
    assert os.environ[CHECK_SCHEMA_ENV] == "1"
    with pytest.raises(SchemaMismatch, match=re.escape(" at $.tier: 'partial' is not one of")):
        assess(job, model)
    monkeypatch.delenv(CHECK_SCHEMA_ENV)
    assert assess(job, model)["tier"] == "partial"


def test_a_report_without_the_check_does_not_import_jsonschema(tmp_path):
    program = ("import sys; from ioassess.report import make_report; "
               f"make_report([{next(iter(shipped_darshan_logs()))!r}], json_path={str(tmp_path / 'a.json')!r}); "
               "print('jsonschema' in sys.modules)")
    env = {name: value for name, value in os.environ.items() if name != CHECK_SCHEMA_ENV}
    result = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout == "False\n", result.stderr


def test_the_processes_the_tests_start_check_their_assessments_too():
    assert _installed_cli([], None)[1][CHECK_SCHEMA_ENV] == "1"                      # ioassess, start_ioassess
    assert clean_env()[CHECK_SCHEMA_ENV] == "1"                                      # recorder_helpers.run
    assert epilog._worker_environment(types.SimpleNamespace(user="x"))[CHECK_SCHEMA_ENV] == "1"  # the epilog's worker
