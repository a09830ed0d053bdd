"""The resource types the simulator serves: built-in kinds and CRD-registered kinds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Verbs advertised in discovery; kubectl only needs them to be present.
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    """One REST resource: where it lives, what it is called, what it supports."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # For CRDs: the served version's schema, printer columns and whether spec
    # changes bump generation (always true for CRs with a status subresource).
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    printer_columns: tuple[dict[str, Any], ...] = field(default=(), compare=False, hash=False)
    crd_name: str = ""
    # For CRDs: the schema's compiled x-kubernetes-validations rules, by source text
    # (kubesim.crdrules.compile_rules), so a write does not recompile them.
    rules: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # Where the objects live when another resource owns the storage (events.k8s.io
    # Events are a view of v1 Events).
    storage: tuple[str, str] | None = None

    @property
    def singular(self) -> str:
        """Lower-case kind, as discovery reports it."""
        return self.kind.lower()

    @property
    def api_version(self) -> str:
        """`v1` or `group/version`."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: one bucket per group and plural, shared by all served versions."""
        return self.storage or (self.group, self.plural)

    @property
    def has_status(self) -> bool:
        """Whether the status subresource splits spec and status writes."""
        return "status" in self.subresources

    @property
    def is_custom(self) -> bool:
        """Whether the type comes from a CustomResourceDefinition."""
        return bool(self.crd_name)


def _rt(
    group: str,
    version: str,
    plural: str,
    kind: str,
    namespaced: bool = True,
    sub: tuple[str, ...] = ("status",),
    short: tuple[str, ...] = (),
    cats: tuple[str, ...] = (),
) -> ResourceType:
    return ResourceType(group, version, plural, kind, namespaced, sub, short, cats)


BUILTIN: tuple[ResourceType, ...] = (
    _rt(
        "",
        "v1",
        "pods",
        "Pod",
        sub=("status", "resize", "eviction", "binding"),
        short=("po",),
        cats=("all",),
    ),
    _rt("", "v1", "nodes", "Node", namespaced=False, short=("no",)),
    _rt(
        "",
        "v1",
        "namespaces",
        "Namespace",
        namespaced=False,
        sub=("status", "finalize"),
        short=("ns",),
    ),
    _rt("", "v1", "configmaps", "ConfigMap", sub=(), short=("cm",)),
    _rt("", "v1", "secrets", "Secret", sub=()),
    _rt("", "v1", "services", "Service", short=("svc",), cats=("all",)),
    _rt("", "v1", "serviceaccounts", "ServiceAccount", sub=(), short=("sa",)),
    _rt("", "v1", "events", "Event", sub=(), short=("ev",)),
    _rt("", "v1", "limitranges", "LimitRange", sub=(), short=("limits",)),
    _rt("", "v1", "resourcequotas", "ResourceQuota", short=("quota",)),
    _rt(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        sub=("status", "scale"),
        short=("deploy",),
        cats=("all",),
    ),
    _rt(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        sub=("status", "scale"),
        short=("rs",),
        cats=("all",),
    ),
    _rt(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        sub=("status", "scale"),
        short=("sts",),
        cats=("all",),
    ),
    _rt("apps", "v1", "daemonsets", "DaemonSet", short=("ds",), cats=("all",)),
    _rt("apps", "v1", "controllerrevisions", "ControllerRevision", sub=()),
    _rt("batch", "v1", "jobs", "Job", cats=("all",)),
    _rt("batch", "v1", "cronjobs", "CronJob", short=("cj",), cats=("all",)),
    _rt(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        short=("hpa",),
        cats=("all",),
    ),
    # Served after v2 so that v2 stays the preferred version.
    ResourceType(
        "autoscaling",
        "v1",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        True,
        ("status",),
        ("hpa",),
        ("all",),
        storage=("autoscaling", "horizontalpodautoscalers"),
    ),
    _rt("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", short=("pdb",)),
    _rt("coordination.k8s.io", "v1", "leases", "Lease", sub=()),
    ResourceType(
        "events.k8s.io", "v1", "events", "Event", True, (), ("ev",), storage=("", "events")
    ),
    _rt(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        namespaced=False,
        sub=(),
    ),
    _rt(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        namespaced=False,
        sub=(),
    ),
    _rt(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        namespaced=False,
        short=("crd", "crds"),
    ),
    _rt("rbac.authorization.k8s.io", "v1", "roles", "Role", sub=()),
    _rt("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", sub=()),
    _rt("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False, sub=()),
    _rt(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        namespaced=False,
        sub=(),
    ),
    _rt(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        namespaced=False,
        sub=(),
        short=("pc",),
    ),
)


class Registry:
    """Looks up served resource types; CRDs add and remove entries at runtime."""

    def __init__(self) -> None:
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        for rt in BUILTIN:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        """Serve `rt` (replacing an earlier definition of the same group/version/plural)."""
        self._types[(rt.group, rt.version, rt.plural)] = rt

    def remove_crd(self, crd_name: str) -> None:
        """Stop serving every version a CRD registered."""
        for key in [k for k, rt in self._types.items() if rt.crd_name == crd_name]:
            del self._types[key]

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The type served at group/version/plural, if any."""
        return self._types.get((group, version, plural))

    def by_kind(self, group: str, version: str, kind: str) -> ResourceType | None:
        """The type of an object's apiVersion and kind, if served."""
        for rt in self._types.values():
            if rt.group == group and rt.version == version and rt.kind == kind:
                return rt
        return None

    def group_versions(self) -> dict[str, list[str]]:
        """Served versions per group, in registration order (first is preferred)."""
        out: dict[str, list[str]] = {}
        for rt in self._types.values():
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        """Every type served under one group/version."""
        return [rt for rt in self._types.values() if rt.group == group and rt.version == version]

    def all(self) -> list[ResourceType]:
        """Every served type."""
        return list(self._types.values())


def split_api_version(api_version: str) -> tuple[str, str]:
    """`apps/v1` -> ("apps", "v1"); `v1` -> ("", "v1")."""
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return group, version
    return "", api_version
