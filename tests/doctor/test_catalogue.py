"""The meta-test that keeps the catalogue honest."""

import os

import pytest

from gpudoctor.checks import CHECKS, CHECKS_BY_ID
from gpudoctor.knowledge import load_catalogue, load_tables

from rule_cases import FIXTURES, load_cases

CATALOGUE = load_catalogue()
DESIGN_IDS = """no-nvidia-driver no-gpu-visible driver-library-mismatch driver-too-old cuda-compat-lib-mismatch
libcuda-not-in-linker-cache libcuda-unversioned-missing libcuda-stub-at-runtime c-compiler-missing
nvcc-host-compiler-unsupported cuda-home-missing cuda-version-mismatch torch-arch-unsupported bf16-unsupported
flash-attn-arch-unsupported flash-attn-head-dim-unsupported triton-arch-unsupported torch-cpu-only triton-missing
triton-version-mismatch flash-attn-abi-mismatch bitsandbytes-cuda-setup duplicate-distributions
triton-cache-unwritable shm-too-small cuda-oom nccl-failure ld-library-path-insecure unsloth-layers-not-patched
transformers-removed-kwarg trl-sfttrainer-api-change triton-jit-failed kernel-numerics-mismatch
training-pass-diverged""".split()


def test_catalogue_holds_every_design_rule():
    assert sorted(set(DESIGN_IDS) - set(CATALOGUE)) == []


@pytest.mark.parametrize("rule_id", sorted(CATALOGUE))
def test_rule_is_documented(rule_id):
    rule = CATALOGUE[rule_id]
    assert rule.title and rule.what and rule.why and rule.fix, rule_id
    assert isinstance(rule.references, tuple)
    assert rule_id == rule_id.lower() and " " not in rule_id and "_" not in rule_id


@pytest.mark.parametrize("rule_id", sorted(r for r in CATALOGUE if "static" in CATALOGUE[r].detected_by))
def test_static_rule_has_a_check_and_pass_and_fail_fixtures(rule_id):
    assert rule_id in CHECKS_BY_ID, f"{rule_id} is detected_by static but has no check"
    cases = [c for c in load_cases() if c.rule_id == rule_id]
    assert any(c.expect == "fail" for c in cases), f"fixtures/rules/{rule_id}/fail/ is missing"
    assert any(c.expect == "pass" for c in cases), f"fixtures/rules/{rule_id}/pass/ is missing"


def test_every_check_decides_a_catalogue_rule():
    assert [c.id for c in CHECKS if c.id not in CATALOGUE] == []
    assert all("static" in CATALOGUE[c.id].detected_by for c in CHECKS)


def test_fixture_cases_name_real_snapshots_and_derived_ones_say_why():
    for case in load_cases():
        assert os.path.exists(os.path.join(FIXTURES, case.spec["snapshot"], "snapshot.json")), case.path
        if case.spec.get("patch"):
            assert case.spec.get("derived"), f"{case.path}: a patched case must say why and where its values come from"


def test_tables_cite_their_sources():
    text = open(os.path.join(os.path.dirname(__import__("gpudoctor").__file__), "rules", "tables.toml")).read()
    for table in load_tables():
        head = text.index(f"[{table}") if f"[{table}" in text else text.index(f"[[{table}")
        preceding = text[:head].rsplit("\n\n", 1)[-1]
        assert "Source" in preceding or "source" in preceding, f"table {table} does not cite its source"


def _signature_rule_ids():
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    path = os.path.join(os.path.dirname(__import__("gpudoctor").__file__), "rules", "signatures.toml")
    with open(path, "rb") as handle:
        return {s["rule"] for s in tomllib.load(handle)["signature"]}


@pytest.mark.parametrize("rule_id", sorted(r for r in CATALOGUE if "log" in CATALOGUE[r].detected_by))
def test_log_rule_has_a_signature_and_real_logs(rule_id):
    assert rule_id in _signature_rule_ids(), f"{rule_id} is detected_by log but has no signature"
    folder = os.path.join(FIXTURES, "logs", rule_id)
    logs = [f for f in os.listdir(folder) if not f.endswith(".source")] if os.path.isdir(folder) else []
    assert logs, f"fixtures/logs/{rule_id}/ has no log"
    assert all(os.path.exists(os.path.join(folder, os.path.splitext(f)[0] + ".source")) for f in logs)


def test_every_signature_names_a_catalogue_rule():
    assert sorted(_signature_rule_ids() - set(CATALOGUE)) == []


@pytest.mark.parametrize("rule_id", sorted(r for r in CATALOGUE if CATALOGUE[r].detected_by == ("train",)))
def test_training_pass_rule_is_produced_by_the_training_pass(rule_id):
    import importlib.util

    if importlib.util.find_spec("gpudoctor.train") is None:
        pytest.skip("the training pass (gpudoctor/train, issue 6) is not built yet")
    import pathlib

    source = "".join(p.read_text() for p in pathlib.Path(os.path.dirname(__import__("gpudoctor").__file__), "train").rglob("*.py"))
    assert f'"{rule_id}"' in source, f"nothing in gpudoctor/train produces {rule_id}"


@pytest.mark.parametrize("rule_id", sorted(CATALOGUE))
def test_one_rule_read_alone_equals_the_full_load(rule_id):
    # checks.base.finding reads one rule's table (knowledge.catalogue_rule) rather than parse the
    # whole catalogue on preflight's path: it must give the same Rule, field for field
    from gpudoctor.knowledge import read_catalogue_table

    assert read_catalogue_table(rule_id) == CATALOGUE[rule_id]


def test_a_rule_not_readable_alone_falls_back_to_the_full_load():
    from gpudoctor.knowledge import catalogue_rule, read_catalogue_table

    assert read_catalogue_table("no-such-rule") is None
    with pytest.raises(KeyError):
        catalogue_rule("no-such-rule")
    assert catalogue_rule("cuda-home-missing") == CATALOGUE["cuda-home-missing"]


def test_a_table_cut_by_a_rule_header_inside_a_string_is_not_read_alone(monkeypatch):
    """A "[[rule]]" line inside a multi-line string cuts the text read alone into TOML that does
    not parse: that is "not readable alone" (the full load reads it), not an error."""
    from gpudoctor import knowledge

    text = ('[[rule]]\nid = "x-rule"\narea = "a"\nseverity = "error"\ntitle = "t"\ndetected_by = []\n'
            'what = """two\n[[rule]]\nlines"""\nwhy = "w"\nfix = "f"\nreferences = []\n')
    monkeypatch.setattr(knowledge, "read_rules_file", lambda name: text)
    assert knowledge.read_catalogue_table("x-rule") is None
    assert knowledge.tomllib.loads(text)["rule"][0]["what"] == "two\n[[rule]]\nlines"
