"""assessment.json as written: the assessment with every non-finite number as null (json_safe),
and its JSON Schema (assessment.schema.json beside this file, shipped with the package;
docs/assessment.md, "The schema").

With IOASSESS_CHECK_SCHEMA=1 in the environment, assess() checks every assessment it makes
against the schema (check_assessment): the tests set it for the whole session and for every
process they start. jsonschema is imported only then: a report never pays for the check.
"""
import json
import math
import os

from ioassess.jsonfile import parse_json

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assessment.schema.json")
CHECK_SCHEMA_ENV = "IOASSESS_CHECK_SCHEMA"


class SchemaMismatch(Exception):
    """An assessment that does not follow the schema; str() names the JSON path and the problem."""


def json_safe(value):
    """The value with every non-finite float replaced by None (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


def load_schema():
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        return parse_json(f.read())


def check_assessment(assessment):
    """Raise SchemaMismatch when the assessment, as make_report writes it (json_safe, then JSON),
    breaks the schema: its message names the JSON path and the problem of jsonschema's best
    match, and how many other problems there are."""
    import jsonschema  # only when checking: the report itself does not need it
    as_written = json.loads(json.dumps(json_safe(assessment), allow_nan=False))
    problems = list(jsonschema.Draft202012Validator(load_schema()).iter_errors(as_written))
    if problems:
        best = jsonschema.exceptions.best_match(problems)
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SchemaMismatch(f"the assessment breaks {SCHEMA_PATH} at {best.json_path}: {best.message}{more}")


class RuleBroken(SchemaMismatch):
    """An assessment that breaks a rule of report/invariants.py; str() lists them."""


def check_rules(assessment):
    """Raise RuleBroken when the assessment breaks a rule of report/invariants.py."""
    from .invariants import violations
    broken = violations(assessment)
    if broken:
        raise RuleBroken(f"the assessment breaks {len(broken)} rule(s): " + "; ".join(broken[:5]))


def check_if_asked(assessment):
    """check_assessment and check_rules when IOASSESS_CHECK_SCHEMA=1 (the tests set it)."""
    if os.environ.get(CHECK_SCHEMA_ENV) == "1":
        check_assessment(assessment)
        check_rules(assessment)
