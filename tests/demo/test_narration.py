"""The demo's narration on values recorded from a `make demo` run: kubectl's notation with
before → after columns, no Python reprs or JSON, Event notes wrapped under their column or
ended with `…`, never cut mid-word."""

from __future__ import annotations

import io
from typing import Any

from app.model.annotations import POD_INFO
from demo.narration import (
    NOTE_LINES,
    WIDTH,
    Narrator,
    applied_rows,
    counted,
    event_columns,
    pod_rows,
    rollback_line,
)
from tests.integration.narration import leaks

#: web's Deployment template and its status's lastApplied after the in-place resize.
WEB_MANIFEST = {
    "app": {"requests": {"cpu": "400m", "memory": "384Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
}
WEB_APPLIED = {
    "app": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
}
#: cart's Events as the reconciler wrote them (notes the demo once cut at 90 and 110
#: characters: `(adoption thresh`, `(last failure oom`).
EVENTS = [
    {
        "type": "Normal",
        "reason": "RollbackMonitoringStarted",
        "regarding": {"name": "cart"},
        "note": "turn 1: recommendation 1c6027f520d1aa13 applied; watching 2 pod(s) until "
        "2026-12-06T01:22:09Z (adoption threshold 50%)",
    },
    {
        "type": "Warning",
        "reason": "RollbackFailedPermanent",
        "regarding": {"name": "cart"},
        "note": "gave up after 1 turn(s) of 1; the recommendation is not retried until a new "
        "one is published (last failure oomKilled: 0 of 2 pod(s) adopted the recommendation "
        "and are healthy; the adoption threshold of 50% needs 1 (unhealthy: "
        "cart-665c6df84b-5mq6r: container app OOM-killed 9 time(s); container app is in "
        "CrashLoopBackOff; container app restarted 9 time(s)))",
    },
    {
        "type": "Warning",
        "reason": "Blocked",
        "regarding": {"name": "checkout"},
        "note": "SingleReplicaUnsafe: one replica and method evict would disrupt it",
    },
]


def pod(name: str, requests: dict[str, str], sized: bool = False) -> dict[str, Any]:
    annotations = {POD_INFO: "{}"} if sized else {}
    return {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"containers": [{"name": "app", "resources": {"requests": requests}}]},
    }


def told(write: Any) -> str:
    out = io.StringIO()
    write(Narrator(out))
    return out.getvalue()


def test_pods_read_manifest_arrow_pod_where_they_differ() -> None:
    rows = pod_rows(
        [
            pod("web-1", {"cpu": "250m", "memory": "268435456"}),
            pod("web-2", {"cpu": "0.4", "memory": "384Mi"}, sized=True),
        ],
        WEB_MANIFEST,
    )
    assert rows == [
        ["web-1", "400m → 250m", "384Mi → 256Mi", "no"],
        ["web-2", "400m", "384Mi", "yes"],
    ]


def test_last_applied_reads_as_before_and_after_columns() -> None:
    assert applied_rows(WEB_MANIFEST, WEB_APPLIED) == [
        ["CONTAINER", "VALUE", "BEFORE", "AFTER"],
        ["app", "requests.cpu", "400m", "250m"],
        ["app", "requests.memory", "384Mi", "256Mi"],
        ["app", "limits.cpu", "1", "1"],
        ["app", "limits.memory", "1Gi", "1Gi"],
    ]


def test_a_value_the_manifest_did_not_set_reads_as_a_dash_before() -> None:
    rows = applied_rows({"app": {}}, {"app": {"limits": {"memory": "768Mi"}}})
    assert rows[1:] == [["app", "limits.memory", "-", "768Mi"]]


def test_rollback_states_read_the_pods_limits_against_the_manifest() -> None:
    monitoring = {"mode": "monitoring", "turn": 1}
    backing_off = {"mode": "backingOff", "turn": 1, "failureReason": "oomKilled"}
    assert rollback_line(monitoring, ["256Mi", "268435456"], "512Mi") == (
        "rollback-state monitoring (turn 1); memory limit 512Mi → 256Mi (2 pods)"
    )
    assert rollback_line(backing_off, ["256Mi", "512Mi"], "512Mi") == (
        "rollback-state backingOff (turn 1, oomKilled); memory limit 512Mi → 256Mi (1 pod), "
        "512Mi (1 pod)"
    )
    assert counted([]) == ""


def test_event_notes_wrap_under_their_column_or_end_with_an_ellipsis() -> None:
    columns = event_columns(EVENTS)
    assert columns[0] == ("  TYPE     REASON                     OBJECT    ", "NOTE")

    def write(narrator: Narrator) -> None:
        for prefix, note in columns:
            narrator.wrapped(prefix, note, NOTE_LINES)

    out = told(write)
    lines = out.splitlines()
    assert all(len(line) <= WIDTH for line in lines)
    assert leaks(out) == []
    indent = len(columns[0][0])
    assert {len(prefix) for prefix, _ in columns} == {indent}
    # Each note again from its lines: whole, or a prefix of it ended by … after a word.
    notes, current = [], ""
    for line in lines:
        if line[:indent].strip():
            notes.append(current)
            current = line[indent:]
        else:
            current += " " + line[indent:]
    notes = [*notes[2:], current]  # before the first line, and the header
    for note, event in zip(notes, EVENTS, strict=True):
        if note != event["note"]:
            assert note.endswith("…") and len(note.splitlines()) <= NOTE_LINES
            kept = note[:-1]
            assert event["note"].startswith(kept)
            assert event["note"][len(kept)] in " ,;:", note
    assert "(adoption threshold 50%)" in out


def test_a_long_line_wraps_with_its_next_lines_under_the_text() -> None:
    text = "checkout: SingleReplicaUnsafe: " + "one replica and method evict " * 6
    out = told(lambda n: n.wrapped("  ", text)).splitlines()
    assert len(out) > 1 and all(len(line) <= WIDTH for line in out)
    assert all(line.startswith("  ") and line[2] != " " for line in out)
    assert " ".join(line.strip() for line in out) == " ".join(text.split())


def test_a_long_sentence_wraps_under_its_indentation_and_a_table_stays_whole() -> None:
    sentence = "  kerf webhook and kerf reconciler as local processes, " * 4
    wide_row = "  " + "COLUMN  " * 20

    def write(narrator: Narrator) -> None:
        narrator.step("Policies applied: web by a StaticPolicy, api by recommendations, " * 2)
        narrator.say(sentence.rstrip())
        narrator.write(wide_row)

    out = told(write).splitlines()
    assert out[0] == "" and out[1].startswith("==> ") and out[2].startswith("    ")
    prose = [line for line in out[1:] if line != wide_row]
    assert all(len(line) <= WIDTH for line in prose)
    assert all(line.startswith("  ") for line in prose[2:])
    assert out[-1] == wide_row  # a table's line is not wrapped
