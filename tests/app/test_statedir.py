"""Loading state files (`app/store/statedir.py`): the fast loaders, and the errors a wrong path
gets instead of an empty view."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from app.store import yamlload
from app.store.statedir import LoadError, load_objects
from kerf.cli import main

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web"}},
    "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "250m"}}}]},
}
POLICY = {
    "apiVersion": "rightsizing.kubex.ai/v1alpha1",
    "kind": "StaticPolicy",
    "metadata": {"name": "p", "namespace": "shop"},
    "spec": {
        "automationStrategyRef": {"name": "default"},
        "resources": {"containers": {"app": {"requests": {"cpu": "100m"}}}},
    },
}


def exit_and_error(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, str]:
    code = main(["explain", "-f", str(path)])
    return code, capsys.readouterr().err


def test_the_c_loader_is_used_when_libyaml_is_there() -> None:
    expected = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
    assert yamlload.LOADER is expected


def test_json_and_yaml_files_load_the_same_objects(tmp_path: Path) -> None:
    listed = {"apiVersion": "v1", "kind": "List", "items": [POD, POLICY]}
    (tmp_path / "a.json").write_text(json.dumps(listed))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump_all([POD, POLICY]))
    from_json, from_yaml = load_objects([tmp_path / "a.json"]), load_objects([tmp_path / "b.yaml"])
    assert from_json == from_yaml
    assert from_json[0] == POD


def test_a_yaml_flow_mapping_that_is_not_json_still_loads(tmp_path: Path) -> None:
    flow = tmp_path / "flow.yaml"
    flow.write_text("{apiVersion: v1, kind: Namespace, metadata: {name: shop}}\n")
    assert load_objects([flow]) == [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}
    ]


def test_broken_json_is_reported_with_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"apiVersion": "v1",\n "kind": "Pod",\n "metadata": {"name": "x"\n')
    with pytest.raises(LoadError, match=r"bad\.json: line \d+: invalid YAML"):
        load_objects([bad])


@pytest.mark.parametrize("content", [None, "notes.txt"])
def test_a_directory_without_yaml_files_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None
) -> None:
    if content:
        (tmp_path / content).write_text("not a manifest\n")
    code, err = exit_and_error(capsys, tmp_path)
    assert code == 2
    assert f"no YAML files in {tmp_path}" in err and err.count("\n") == 1


def test_a_symlink_loop_named_directly_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    code, err = exit_and_error(capsys, loop)
    assert code == 2
    assert f"{loop}: symbolic link loop" in err and "no such file" not in err


def test_a_dangling_symlink_names_its_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = tmp_path / "state"
    os.symlink(tmp_path / "gone", link)
    code, err = exit_and_error(capsys, link)
    assert code == 2
    assert f"{link}: dangling symbolic link to {tmp_path / 'gone'}" in err


def test_a_value_its_explicit_tag_refuses_is_invalid_yaml(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: !!int shop}\n")
    with pytest.raises(LoadError, match=r"bad\.yaml: invalid YAML: invalid literal for int"):
        load_objects([bad])


RATIOS = """\
apiVersion: rightsizing.kubex.ai/v1alpha1
kind: StaticPolicy
metadata: {name: p, namespace: shop}
spec:
  automationStrategyRef: {name: default}
  scope: {workloadTypes: [Deployment]}
  guardrails: {minConfidence: CONFIDENCE, rollback: {throttlingRatio: RATIO}}
  resources: {containers: {app: {requests: {cpu: 100m}}}}
"""


@pytest.mark.parametrize(
    ("confidence", "ratio", "noted"),
    [('"0.8"', '"0.25"', 0), ("0.8", '"0.25"', 1), ("0.8", "0.25", 2), ("1", "0", 2)],
)
def test_a_ratio_written_as_a_number_is_read_and_noted_to_quote(
    tmp_path: Path, confidence: str, ratio: str, noted: int
) -> None:
    """The CRD keeps Kubex's string (the API server refuses a number there); offline,
    explain reads either and says to quote a number."""
    path = tmp_path / "policy.yaml"
    path.write_text(RATIOS.replace("CONFIDENCE", confidence).replace("RATIO", ratio))
    notes: list[str] = []
    [policy] = load_objects([path], notes=notes)
    guardrails = policy.spec.guardrails
    assert guardrails.min_confidence == confidence.strip('"')
    assert guardrails.rollback.throttling_ratio == ratio.strip('"')
    assert len(notes) == noted
    if noted:
        assert notes[0] == (
            f"{path} (document 1): StaticPolicy shop/p: spec.guardrails.minConfidence: "
            f"{confidence} is a number; the API server takes only a string, quote it: "
            f'minConfidence: "{confidence}"'
        )


def test_explain_warns_once_per_unquoted_ratio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "policy.yaml").write_text(
        RATIOS.replace("CONFIDENCE", "0.8").replace("RATIO", '"0.25"')
    )
    assert main(["explain", "-f", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'quote it: minConfidence: "0.8"' in err
