"""Generate `docs/reference.md`, the user reference, from the code.

    python -m tools.refgen docs/reference.md       # what `make reference` runs

Every kind and field with its type, default and bounds comes from the CRD schemas that
`tools.crdgen` builds from `app/model/crd.py`; the built-in guardrail defaults from
`app.policy.guardrails`; the policy priorities from `app.model.crd`; the annotation keys from
`app.model.annotations`; the metrics from the collectors the services register: each of
`webhook.metrics`, `reconciler.metrics` and `recommender.metrics` that defines `reference_registry() ->
CollectorRegistry` (every collector of that service on a fresh registry) is listed.
`tests/app/test_reference.py` fails when the committed file differs from the output.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.decide.checks import CHECKS
from app.model import annotations as ann
from app.model.crd import (
    ARG_NAME_PATTERN,
    DEFAULT_PRECEDENCE,
    DURATION_PATTERN,
    END_TIME_PATTERN,
    KINDS,
    NOT_IMPLEMENTED,
    POSITIVE_QUANTITY_PATTERN,
    RATIO_PATTERN,
    STORED_KINDS,
    SUPPORTED,
    TIME_PATTERN,
    StoredKind,
    plural,
)
from app.policy.guardrails import BUILTIN_GUARDRAILS
from tools.crdgen import crd_for

Schema = dict[str, Any]
METRIC_MODULES = ("webhook.metrics", "reconciler.metrics", "recommender.metrics")
NAMED_PATTERNS = {
    DURATION_PATTERN: "duration (Go: `30s`, `1h30m`)",
    RATIO_PATTERN: 'ratio (string, `"0"`–`"1"`)',
    TIME_PATTERN: "time `HH:MM`",
    END_TIME_PATTERN: "time `HH:MM` or `24:00`",
    ARG_NAME_PATTERN: "argument name (`--flag` or `-f`)",
    POSITIVE_QUANTITY_PATTERN: "quantity > 0",
}

#: Every decision reason: outcome, and when it applies (SPEC §5-§7, in check order).
REASONS: tuple[tuple[str, str, str], ...] = (
    ("Unmanaged", "skipped", "the pod has no controller owner"),
    ("NoMatchingPolicy", "skipped", "no policy publishes values for the pod's workload"),
    (
        "InvalidRecommendation",
        "blocked",
        "every recommendation row of the workload is invalid (each named in the message)",
    ),
    (
        "KubexAutomationDisabled",
        "skipped",
        "Kubex's rows hold every container the workload has a row for (`KubexAutomation` "
        "false, GlobalConfiguration.respectKubexAutomation on); one held container among "
        "others is named in the message",
    ),
    ("NoSuchContainer", "skipped", "the values name only containers the pod does not have"),
    ("StrategyNotFound", "blocked", "a policy's automationStrategyRef names no strategy"),
    ("NotEnabled", "skipped", "the strategies enable none of the selected values"),
    (
        "Infeasible",
        "blocked",
        "a value to set is more CPU or memory than any node's allocatable (checked first)",
    ),
    ("Audit", "skipped", "the policy's mode is audit (until a proposal is approved once)"),
    ("AutomationDisabled", "skipped", "GlobalConfiguration.automationEnabled is false"),
    (
        "HubUnreachable",
        "blocked",
        "proactive values: a recommendation ConfigMap that feeds the workload did not load",
    ),
    ("Paused", "blocked", "a pause-until annotation on the pod, workload or namespace"),
    ("ProtectedNamespace", "skipped", "kerf's namespace or a protectedNamespacePatterns match"),
    ("StaleRecommendation", "blocked", "older than maxAnalysisAgeDays, or an older generation"),
    (
        "HPACoupled",
        "blocked",
        "an HPA scales on that resource's utilization (only if nothing is left)",
    ),
    (
        "VPACoupled",
        "blocked",
        "a VerticalPodAutoscaler sets that value: its updateMode is not Off and it recommends "
        "the resource, or (`blockResizeOnVpaControlledResources`) a container policy lists it "
        "in controlledResources (only if nothing is left)",
    ),
    ("LearningPeriod", "blocked", "proactive: coverageHours below learningPeriod"),
    ("LowConfidence", "blocked", "the lowest container confidence is below minConfidence"),
    ("FreezeWindow", "blocked", "an exclusion window is open"),
    ("Throttled", "dropped", "no lower CPU request for a throttled container"),
    ("OOMKilled", "dropped", "no lower memory for a container OOM-killed since its last change"),
    ("JVMFixedHeap", "dropped", "no memory below the fixed JVM heap x 1.25"),
    ("NoSignificantChange", "skipped", "every change is within tolerancePercent"),
    ("RequestsExceedLimits", "blocked", "a request would end above its limit (never clamped)"),
    ("GpuActionConflict", "blocked", "the GPU actions disagree"),
    (
        "LimitRangeViolation",
        "blocked",
        "a value past a LimitRange's min, max or ratio, per container or pod (filtered; "
        "safetyChecks.enableLimitRangeFilter, enablePodLimitRangeFilter)",
    ),
    (
        "ResourceQuotaExceeded",
        "blocked",
        "an increase past a ResourceQuota that applies to the pod, counting what is used "
        "(filtered; safetyChecks.enableResourceQuotaFilter)",
    ),
    ("NoCommonMethod", "blocked", "the contributing strategies share no method"),
    (
        "Cooldown",
        "blocked",
        "a new proposal within cooldown of the last change (a pod's values the change made go on, the others are filtered)",
    ),
    ("SingleReplicaUnsafe", "blocked", "one replica and the method would disrupt it"),
    ("InsufficientNodeCapacity", "blocked", "the increase does not fit the node (filtered)"),
    ("MaintenanceWindow", "blocked", "inclusion windows exist and none is open"),
    (
        "GuaranteedQoS",
        "dropped",
        "retainGuaranteedQoS: a request/limit pair that cannot stay equal (skipped if nothing is left)",
    ),
    (
        "NotScheduledByKai",
        "dropped",
        "a KAI gpu-fraction for a pod without one: kerf converts no workload to KAI "
        "(skipped if nothing is left)",
    ),
    (
        "WebhookUnavailable",
        "blocked",
        "reconciler: no eviction while the webhook Lease is older than webhookLeaseMaxAge",
    ),
    (
        "ResizeError",
        "blocked",
        "reconciler: the kubelet answered a resize with PodResizeInProgress Error (a memory "
        "limit below current usage) and retries it; kerf waits, then falls back after "
        "fallbackAfter",
    ),
    (
        "Deferred, Infeasible, Error, ResizeRejected",
        "blocked",
        "reconciler: an in-place resize could not finish and eviction is not allowed",
    ),
)

WORKLOAD_KEYS = (
    (
        "`<p>.rightsizing.kubex.ai/desired-resource-requests`, `…-limits`",
        "workload (written by the reconciler), copied to pods",
        'fixed key (multi-policy off): `{"<container or *>": {"cpu": "250m", …}}`',
    ),
    (
        "`<p>.rightsizing.kubex.ai/h<digest>-desired-resource-requests`, `…-limits`",
        "workload (written by the reconciler)",
        "policy-owned key (multi-policy on): policyKind, policyName, policyNamespace, "
        "policyGeneration, createdAt, containers",
    ),
    (f"`{ann.ARGS_KEY}`", "workload (written by the reconciler)", "the selected args operations"),
    (f"`{ann.ROLLBACK_STATE}`", "workload (written by the reconciler)", "rollback state JSON"),
    (f"`{ann.PAUSE_UNTIL}`", "pod, workload, namespace (yours)", "`infinite` or an RFC3339 time"),
    (
        f"`{ann.PAUSE_REASON}`",
        "pod, workload, namespace (yours)",
        "free text, shown in the Paused block of the pause beside it",
    ),
    (
        f"`{ann.SKIP_CONTAINERS}`",
        "pod, workload (yours)",
        "comma list; the pod's value wins, an empty pod value skips none",
    ),
    (
        f"`{ann.POD_INFO}`",
        "pod (written by the webhook)",
        '`{"fingerprint", "keys", "containers"}`; absent when nothing changed',
    ),
    (f"`{ann.APPROVE}`", "RightsizingRecommendation (yours)", "a proposal id to apply once"),
    (
        f"`{ann.APPROVE_TARGET}`",
        "RightsizingRecommendation (yours)",
        "a target id: every step toward that target, each a cooldown apart",
    ),
)


def _type(node: Schema) -> str:
    if node.get("pattern") in NAMED_PATTERNS:
        return NAMED_PATTERNS[node["pattern"]]
    if node.get("x-kubernetes-int-or-string"):
        return "quantity" if "pattern" in node else "int or string"
    kind = node.get("type", "object")
    if kind == "array":
        return f"[]{_type(node.get('items', {}))}"
    if kind == "object" and "additionalProperties" in node and "properties" not in node:
        return f"map[string]{_type(node['additionalProperties'])}"
    return str(kind)


def _notes(node: Schema, required: bool) -> str:
    notes = []
    if required:
        notes.append("required")
    if "enum" in node:
        notes.append(" \\| ".join(f"`{v}`" for v in node["enum"]))
    for key, word in (("minimum", "≥"), ("maximum", "≤")):
        if key in node:
            notes.append(f"{word} {node[key]}")
    if node.get("x-kubernetes-int-or-string") or node.get("type") != "string":
        return ", ".join(notes)
    if "pattern" in node and "enum" not in node and node["pattern"] not in NAMED_PATTERNS:
        notes.append(f"pattern `{node['pattern']}`".replace("|", "\\|"))
    return ", ".join(notes)


def _default(node: Schema) -> str:
    if "default" not in node:
        return ""
    value = node["default"]
    if value == {}:
        return "(its fields' defaults)"
    return f"`{json.dumps(value, separators=(', ', ': '))}`"


def _rows(node: Schema, path: str, required: bool = False) -> Iterator[str]:
    yield f"| `{path}` | {_type(node)} | {_default(node)} | {_notes(node, required)} |"
    target = node
    suffix = ""
    if node.get("type") == "array":
        target, suffix = node.get("items", {}), "[]"
    elif "additionalProperties" in node and isinstance(node["additionalProperties"], dict):
        target, suffix = node["additionalProperties"], ".<name>"
    needed = set(target.get("required", ()))
    for name, child in target.get("properties", {}).items():
        yield from _rows(child, f"{path}{suffix}.{name}", name in needed)


def kinds_section() -> list[str]:
    """One table per kind: every field of spec with type, default and constraints."""
    out = ["## Kinds and fields", ""]
    out.append(
        "Group `rightsizing.kubex.ai`, version `v1alpha1`. Defaults are what the API server "
        "fills in (from the CRDs, generated from the same models). `guardrails` and "
        "`guardrailDefaults` have no defaults on purpose: they are layered (built-in ← "
        "GlobalConfiguration ← policy), see [Guardrail defaults](#guardrail-defaults)."
    )
    for kind, cls in sorted(KINDS.items()):
        schema = crd_for(cls)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        scope = "cluster" if cls.cluster_scoped else "namespaced"
        out += ["", f"### {kind}", "", f"{scope}, plural `{plural(kind)}`", ""]
        if issubclass(cls, StoredKind):
            out += [
                f"Kubex's kind, stored and not acted on: {cls.not_done} "
                "([Kubex kinds kerf stores](#kubex-kinds-kerf-stores)).",
                "",
            ]
        out += ["| field | type | default | notes |", "|---|---|---|---|"]
        spec = schema["properties"].get("spec")
        if spec is None:
            continue
        needed = set(spec.get("required", ()))
        for name, child in spec.get("properties", {}).items():
            out.extend(_rows(child, f"spec.{name}", name in needed))
    return out


#: fields that went, with what replaces them: (kinds, removed fields, what to write instead)
CHANGED: tuple[tuple[str, str, str], ...] = (
    (
        "GpuReactivePolicy, ClusterGpuReactivePolicy",
        "`spec.metrics.source`, `spec.metrics.window`, `spec.upsize` "
        "(`utilizationThresholdPercent`, `step`, `maxGpus`), `spec.scaleBack` "
        "(`utilizationThresholdPercent`, `after`)",
        "Kubex's published format: `spec.metrics.{compute,memory}` (both required), each with "
        "`upsize`, `scaleBack` and `prometheus`, and `spec.minPodMetricsAge` (docs/gpu.md). "
        "An object with a removed field is refused as an unknown field.",
    ),
)


def changed_section() -> list[str]:
    """Fields removed from kerf's kinds, so an old object's refusal is explained."""
    out = ["## Changed", "", "| kinds | removed | instead |", "|---|---|---|"]
    out += [f"| {kinds} | {removed} | {instead} |" for kinds, removed, instead in CHANGED]
    return out


def guardrails_section() -> list[str]:
    """The built-in guardrail layer."""
    values = BUILTIN_GUARDRAILS.model_dump(by_alias=True, exclude_none=True, mode="json")
    out = ["## Guardrail defaults", ""]
    out.append(
        "The built-in layer; `GlobalConfiguration.spec.guardrailDefaults` overrides it, a "
        "policy's `guardrails` override both, field by field."
    )
    out += ["", "| field | built-in default |", "|---|---|"]
    for name, value in values.items():
        if isinstance(value, dict):
            out += [f"| `{name}.{k}` | `{json.dumps(v)}` |" for k, v in value.items()]
        else:
            out.append(f"| `{name}` | `{json.dumps(value)}` |")
    return out


def selection_section() -> list[str]:
    """Policy priorities and the ranking of candidates."""
    out = ["## Selection", ""]
    out.append(
        "Candidates are ranked per target (container, `requests`\\|`limits`, resource); the "
        "first difference wins:"
    )
    out += [
        "",
        "1. policy-type priority (PolicyEvaluation `precedence`, higher wins; an unlisted type is 0);",
        "2. policy `weight` (higher wins);",
        '3. an exact container name over `"*"`;',
        "4. older creation time, between policies of the same kind only (no timestamp ranks older);",
        "5. the lexically smaller annotation key.",
        "",
        "Default priorities:",
        "",
        "| policy type | priority |",
        "|---|---|",
    ]
    out += [f"| {kind} | {priority} |" for kind, priority in DEFAULT_PRECEDENCE]
    return out


def reasons_section() -> list[str]:
    """Every decision reason with its outcome, in the order the checks run."""
    out = ["## Decision reasons", ""]
    running_only = [r for check in CHECKS if "admission" not in check.paths for r in check.reasons]
    out.append(
        "*blocked*: a guardrail stopped a change the mode allows. *skipped*: nothing is wrong "
        "(kerf was told to leave the pod alone, or the change is too small). *dropped*: that "
        "value only is left out, the rest of the plan goes on. The checks run in this order "
        "and the first that holds decides; the admission path runs all but "
        f"{', '.join(running_only[:-1])} and {running_only[-1]}. "
        "Rollback restores are exempt from every check but Paused."
    )
    out += ["", "| reason | outcome | when |", "|---|---|---|"]
    out += [f"| `{reason}` | {outcome} | {when} |" for reason, outcome, when in REASONS]
    return out


#: What kerf does with each of Kubex's strategy safety checks (app/model/crd.py
#: StrategySafetyChecks; app/model/strategy_fields.py names the values kerf does not carry out).
SAFETY_CHECKS: tuple[tuple[str, str], ...] = (
    (
        "enablePauseUntilAnnotationCheck",
        "the Paused check (off: the strategy's changes pass a pause-until)",
    ),
    ("enableResourceQuotaFilter", "`ResourceQuotaExceeded`"),
    ("enableHpaFilter", "`HPACoupled`"),
    (
        "enableVpaFilter",
        "`VPACoupled`: the values a VPA whose updateMode is not Off recommends (its "
        "RecommendationProvided condition True); read only when the CRD is installed",
    ),
    (
        "blockResizeOnVpaControlledResources",
        "`VPACoupled` for the resources a container policy lists in controlledResources too, "
        "whatever the VPA's mode; only with `enableVpaFilter` on",
    ),
    ("enableLimitRangeFilter", "`LimitRangeViolation`, per container"),
    ("enablePodLimitRangeFilter", "`LimitRangeViolation`, for the pod's totals"),
    (
        "retainGuaranteedQOS",
        "Guaranteed QoS kept; kerf's default is `true` (Kubex's `false`), and `false` here or "
        "at `spec.retainGuaranteedQoS` turns it off",
    ),
    (
        "minCpuChangePercent, minMemoryChangePercent",
        "`NoSignificantChange`: the larger of this and GlobalConfiguration's tolerancePercent",
    ),
    (
        "minReadyDuration",
        "kerf waits for every pod to be Ready before the next disruption, for no set "
        "duration; another value than `10s` is told in an Event",
    ),
    ("requireOwnerPodsReady", "as above; `true` is told in an Event"),
    (
        "respectWorkloadMaxUnavailable",
        "kerf disrupts one pod of a workload at a time; `false` is told in an Event",
    ),
    ("resizeRetryInterval", "kerf's own retry schedule; another value than `30s` is told"),
    ("requireNodeAllocatable", "`InsufficientNodeCapacity` (off: increases are not filtered)"),
    ("nodeCpuHeadroom, nodeMemoryHeadroom", "the node room `InsufficientNodeCapacity` keeps free"),
    (
        "podEviction.retryPodDisruptionBudget",
        "kerf retries a refused eviction with backoff; `false` is told in an Event",
    ),
)


def safety_checks_section() -> list[str]:
    """Kubex's strategy safety checks and what kerf does with each."""
    out = [
        "## Kubex's safety checks",
        "",
        "A strategy's `spec.safetyChecks` applies unchanged, with Kubex's defaults. A filter "
        "that a switch turns off is off only when every strategy behind the change turns it "
        "off. A value kerf accepts but does not carry out is told once per generation in a "
        "Warning Event `UnsupportedField` on the strategy.",
        "",
        "| field | what kerf does |",
        "|---|---|",
    ]
    out += [f"| `{field}` | {what} |" for field, what in SAFETY_CHECKS]
    return out


def stored_kinds_section() -> list[str]:
    """The Kubex kinds kerf accepts with Kubex's schema and does not act on."""
    out = [
        "## Kubex kinds kerf stores",
        "",
        "These kinds apply with Kubex's schema and defaults, so a migrated Kubex config "
        "syncs unchanged, and nothing in kerf acts on them: no decision reads them and the "
        "webhook does not watch them. The reconciler tells each object once: a Warning Event "
        f"`{NOT_IMPLEMENTED}` on it, and the condition `{SUPPORTED}=False`, reason "
        f"`{NOT_IMPLEMENTED}`, in its status (shown by `kubectl get`). The condition is "
        "written once and is what remembers: neither is written again on later passes, by "
        "another replica or after a restart. A cluster object's Event is in the `default` "
        "namespace.",
        "",
        "| kind | scope | the condition's message |",
        "|---|---|---|",
    ]
    for kind in STORED_KINDS:
        cls = KINDS[kind]
        assert issubclass(cls, StoredKind)
        scope = "cluster" if cls.cluster_scoped else "namespaced"
        out.append(f"| {kind} | {scope} | {cls.unsupported_message()} |")
    return out


def annotations_section() -> list[str]:
    """The annotations kerf reads and writes."""
    prefixes = ", ".join(f"`{p}` ({k})" for k, p in ann.PREFIX_BY_KIND.items())
    out = ["## Annotations", "", "| key | on | value |", "|---|---|---|"]
    out += [f"| {key} | {on} | {value} |" for key, on, value in WORKLOAD_KEYS]
    out += ["", f"`<p>` by policy kind: {prefixes}."]
    return out


def configmap_section() -> list[str]:
    """The recommendation source format."""
    return [
        "## Recommendation ConfigMap",
        "",
        'A ConfigMap labelled `rightsizing.kubex.ai/recommendations: "true"` in any '
        "namespace, key `recommendations.json`. Every field but `limits` and "
        "`cpuThrottlingRatio` is required; a bad row is skipped with a warning naming it.",
        "",
        "```json",
        '{"recommendations": [',
        ' {"namespace": "shop", "ownerKind": "Deployment", "ownerName": "web", "container": "app",',
        '  "requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "500m", "memory": "512Mi"},',
        '  "analyzedAt": "2026-11-28T10:00:00Z", "coverageHours": 240, "samples": 20160,',
        '  "confidence": 0.93, "cpuThrottlingRatio": 0.02}',
        "]}",
        "```",
    ]


def _metric_rows(module_name: str) -> list[str]:
    if importlib.util.find_spec(module_name) is None:
        return []
    module = importlib.import_module(module_name)
    build = getattr(module, "reference_registry", None)
    if build is None:
        return []
    rows = []
    # prometheus_client has no public accessor for a collector's label names.
    collectors = build()._collector_to_names  # noqa: SLF001
    families = [(family, c) for c in collectors for family in c.describe()]
    for family, collector in sorted(families, key=lambda fc: fc[0].name):
        name = family.name + ("_total" if family.type == "counter" else "")
        # Collectors of prometheus_client keep them in `_labelnames`, kerf's own in `labelnames`.
        names: tuple[str, ...] = getattr(collector, "_labelnames", ()) or getattr(
            collector, "labelnames", ()
        )
        labels = ", ".join(f"`{label}`" for label in names)
        rows.append(f"| `{name}` | {family.type} | {labels} | {family.documentation} |")
    return rows


def metrics_section() -> list[str]:
    """Every collector of each service's registry."""
    out = ["## Metrics", ""]
    out.append(
        "Prometheus text on `/metrics`: the webhook's on its HTTPS port (8443), the "
        "reconciler's on its metrics port (8080), the recommender's (`kerf recommend`) on its "
        "metrics port (8082)."
    )
    out += ["", "| metric | type | labels | meaning |", "|---|---|---|---|"]
    for module in METRIC_MODULES:
        out += _metric_rows(module)
    return out


def generate() -> str:
    """The whole of docs/reference.md."""
    lines = [
        "<!-- generated by tools/refgen.py (make reference) — do not edit -->",
        "# kerf reference",
        "",
        "Everything a user of kerf sets, reads or sees: the kinds and their fields with "
        "defaults, selection, decision reasons, annotations, the recommendation ConfigMap "
        "and the metrics. Installing: [install.md](install.md).",
        "",
    ]
    for section in (
        kinds_section,
        changed_section,
        guardrails_section,
        selection_section,
        reasons_section,
        safety_checks_section,
        stored_kinds_section,
        annotations_section,
        configmap_section,
        metrics_section,
    ):
        lines += [*section(), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`python -m tools.refgen FILE`: (re)generate the reference into FILE."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tools.refgen FILE", file=sys.stderr)
        return 2
    Path(args[0]).write_text(generate(), encoding="utf-8")
    print(args[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
