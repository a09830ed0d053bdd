"""Validation of Mutating/ValidatingWebhookConfigurations, as the real server's
`admissionregistration.k8s.io/v1` validation answers for the fields admission reads:
`sideEffects` and `matchConditions`."""

from __future__ import annotations

from typing import Any

from kubesim.cel import CelSyntaxError, compile_expression
from kubesim.errors import Cause
from kubesim.store import Obj

SIDE_EFFECTS = ("None", "NoneOnDryRun")
KINDS = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")


def validate_webhook_configuration(obj: Obj) -> list[Cause]:
    """Field errors of a webhook configuration: each webhook's sideEffects must be None or
    NoneOnDryRun, and each matchCondition a named expression kubesim can evaluate."""
    causes: list[Cause] = []
    for i, hook in enumerate(obj.get("webhooks") or []):
        where = f"webhooks[{i}]"
        causes += _side_effects(hook.get("sideEffects"), f"{where}.sideEffects")
        for j, condition in enumerate(hook.get("matchConditions") or []):
            causes += _condition(condition, f"{where}.matchConditions[{j}]")
    return causes


def _side_effects(value: Any, field: str) -> list[Cause]:
    if value is None:
        message = "Required value: must specify one of " + ", ".join(SIDE_EFFECTS)
        return [Cause("FieldValueRequired", message, field)]
    if value not in SIDE_EFFECTS:
        supported = ", ".join(f'"{v}"' for v in SIDE_EFFECTS)
        message = f'Unsupported value: "{value}": supported values: {supported}'
        return [Cause("FieldValueNotSupported", message, field)]
    return []


def _condition(condition: Any, field: str) -> list[Cause]:
    if not isinstance(condition, dict) or not condition.get("name"):
        return [Cause("FieldValueRequired", "Required value", f"{field}.name")]
    expression = condition.get("expression")
    if not isinstance(expression, str) or not expression.strip():
        return [Cause("FieldValueRequired", "Required value", f"{field}.expression")]
    try:
        compile_expression(expression)
    except CelSyntaxError as exc:
        # The real server compiles full CEL; kubesim refuses what it could not evaluate.
        message = f'Invalid value: "{expression}": compilation failed: {exc} (kubesim evaluates a CEL subset, see docs/kubesim.md)'
        return [Cause("FieldValueInvalid", message, f"{field}.expression")]
    return []
