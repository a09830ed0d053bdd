"""Field tables for the kinds kubectl sends as protobuf, from the API's field numbers.

These cover what kubectl's typed commands build (`create namespace|deployment|configmap|
secret|job|cronjob|service|serviceaccount|poddisruptionbudget|priorityclass`,
`autoscale`, `drain`'s evictions and deletes) and the fields a user can set through
their flags. A field missing here makes the request fail with 415 rather than lose data;
`status` is skipped (not decoded) because the server drops it on create anyway.
"""

from __future__ import annotations

from typing import Any

from kubesim.protowire import DecodeError, Field, Message, decode, unwrap

Spec = tuple[Any, ...]


def _message(name: str, table: dict[int, Spec]) -> Message:
    """A table from `{number: (json name, kind[, flags][, message])}`.

    Flags: "r" repeated, "k" keep the zero value (pointer or non-omitempty fields).
    """
    out: dict[int, Field] = {}
    for number, spec in table.items():
        json_name, kind = spec[0], spec[1]
        flags = next((s for s in spec[2:] if isinstance(s, str)), "")
        sub = next((s for s in spec[2:] if isinstance(s, Message)), None)
        out[number] = Field(json_name, kind, "r" in flags, "k" in flags, sub)
    return Message(name, out)


STATUS: Spec = ("status", "skip")

# ----------------------------------------------------------------- meta/v1

OWNER_REFERENCE = _message(
    "OwnerReference",
    {
        1: ("kind", "string"),
        3: ("name", "string"),
        4: ("uid", "string"),
        5: ("apiVersion", "string"),
        6: ("controller", "bool", "k"),
        7: ("blockOwnerDeletion", "bool", "k"),
    },
)
OBJECT_META = _message(
    "ObjectMeta",
    {
        1: ("name", "string"),
        2: ("generateName", "string"),
        3: ("namespace", "string"),
        4: ("selfLink", "string"),
        5: ("uid", "string"),
        6: ("resourceVersion", "string"),
        7: ("generation", "int"),
        8: ("creationTimestamp", "time"),
        9: ("deletionTimestamp", "time"),
        10: ("deletionGracePeriodSeconds", "int", "k"),
        11: ("labels", "map"),
        12: ("annotations", "map"),
        13: ("ownerReferences", "message", "r", OWNER_REFERENCE),
        14: ("finalizers", "string", "r"),
    },
)
LABEL_SELECTOR = _message(
    "LabelSelector",
    {
        1: ("matchLabels", "map"),
        2: (
            "matchExpressions",
            "message",
            "r",
            _message(
                "LabelSelectorRequirement",
                {1: ("key", "string"), 2: ("operator", "string"), 3: ("values", "string", "r")},
            ),
        ),
    },
)
DELETE_OPTIONS = _message(
    "DeleteOptions",
    {
        1: ("gracePeriodSeconds", "int", "k"),
        2: (
            "preconditions",
            "message",
            _message(
                "Preconditions", {1: ("uid", "string", "k"), 2: ("resourceVersion", "string", "k")}
            ),
        ),
        3: ("orphanDependents", "bool", "k"),
        4: ("propagationPolicy", "string", "k"),
        5: ("dryRun", "string", "r"),
        6: ("ignoreStoreReadErrorWithClusterBreakingPotential", "bool", "k"),
    },
)

# ----------------------------------------------------------------- core/v1 pods

LOCAL_OBJECT_REFERENCE = _message("LocalObjectReference", {1: ("name", "string")})
LOCAL_REF_INLINE: Spec = ("", "inline", LOCAL_OBJECT_REFERENCE)
KEY_TO_PATH = _message(
    "KeyToPath", {1: ("key", "string"), 2: ("path", "string"), 3: ("mode", "int", "k")}
)
SECCOMP = _message(
    "SeccompProfile", {1: ("type", "string"), 2: ("localhostProfile", "string", "k")}
)
POD_SECURITY_CONTEXT = _message(
    "PodSecurityContext",
    {
        2: ("runAsUser", "int", "k"),
        3: ("runAsNonRoot", "bool", "k"),
        4: ("supplementalGroups", "int", "r"),
        5: ("fsGroup", "int", "k"),
        6: ("runAsGroup", "int", "k"),
        7: (
            "sysctls",
            "message",
            "r",
            _message("Sysctl", {1: ("name", "string"), 2: ("value", "string")}),
        ),
        9: ("fsGroupChangePolicy", "string", "k"),
        10: ("seccompProfile", "message", "k", SECCOMP),
    },
)
SECURITY_CONTEXT = _message(
    "SecurityContext",
    {
        1: (
            "capabilities",
            "message",
            "k",
            _message("Capabilities", {1: ("add", "string", "r"), 2: ("drop", "string", "r")}),
        ),
        2: ("privileged", "bool", "k"),
        4: ("runAsUser", "int", "k"),
        5: ("runAsNonRoot", "bool", "k"),
        6: ("readOnlyRootFilesystem", "bool", "k"),
        7: ("allowPrivilegeEscalation", "bool", "k"),
        8: ("runAsGroup", "int", "k"),
        9: ("procMount", "string", "k"),
        11: ("seccompProfile", "message", "k", SECCOMP),
    },
)
VOLUME_SOURCE = _message(
    "VolumeSource",
    {
        1: (
            "hostPath",
            "message",
            "k",
            _message("HostPathVolumeSource", {1: ("path", "string"), 2: ("type", "string", "k")}),
        ),
        2: (
            "emptyDir",
            "message",
            "k",
            _message(
                "EmptyDirVolumeSource",
                {1: ("medium", "string"), 2: ("sizeLimit", "quantity", "k")},
            ),
        ),
        6: (
            "secret",
            "message",
            "k",
            _message(
                "SecretVolumeSource",
                {
                    1: ("secretName", "string"),
                    2: ("items", "message", "r", KEY_TO_PATH),
                    3: ("defaultMode", "int", "k"),
                    4: ("optional", "bool", "k"),
                },
            ),
        ),
        10: (
            "persistentVolumeClaim",
            "message",
            "k",
            _message(
                "PersistentVolumeClaimVolumeSource",
                {1: ("claimName", "string"), 2: ("readOnly", "bool")},
            ),
        ),
        19: (
            "configMap",
            "message",
            "k",
            _message(
                "ConfigMapVolumeSource",
                {
                    1: LOCAL_REF_INLINE,
                    2: ("items", "message", "r", KEY_TO_PATH),
                    3: ("defaultMode", "int", "k"),
                    4: ("optional", "bool", "k"),
                },
            ),
        ),
    },
)
VOLUME = _message("Volume", {1: ("name", "string"), 2: ("", "inline", VOLUME_SOURCE)})
VOLUME_MOUNT = _message(
    "VolumeMount",
    {
        1: ("name", "string"),
        2: ("readOnly", "bool"),
        3: ("mountPath", "string"),
        4: ("subPath", "string"),
        5: ("mountPropagation", "string", "k"),
        6: ("subPathExpr", "string"),
        7: ("recursiveReadOnly", "string", "k"),
    },
)
KEY_SELECTOR: dict[int, Spec] = {
    1: LOCAL_REF_INLINE,
    2: ("key", "string"),
    3: ("optional", "bool", "k"),
}
ENV_VAR_SOURCE = _message(
    "EnvVarSource",
    {
        1: (
            "fieldRef",
            "message",
            "k",
            _message(
                "ObjectFieldSelector", {1: ("apiVersion", "string"), 2: ("fieldPath", "string")}
            ),
        ),
        2: (
            "resourceFieldRef",
            "message",
            "k",
            _message(
                "ResourceFieldSelector",
                {
                    1: ("containerName", "string"),
                    2: ("resource", "string"),
                    3: ("divisor", "quantity"),
                },
            ),
        ),
        3: ("configMapKeyRef", "message", "k", _message("ConfigMapKeySelector", KEY_SELECTOR)),
        4: ("secretKeyRef", "message", "k", _message("SecretKeySelector", KEY_SELECTOR)),
    },
)
ENV_SOURCE: dict[int, Spec] = {1: LOCAL_REF_INLINE, 2: ("optional", "bool", "k")}
ENV_FROM = _message(
    "EnvFromSource",
    {
        1: ("prefix", "string"),
        2: ("configMapRef", "message", "k", _message("ConfigMapEnvSource", ENV_SOURCE)),
        3: ("secretRef", "message", "k", _message("SecretEnvSource", ENV_SOURCE)),
    },
)
PROBE_HANDLER = _message(
    "ProbeHandler",
    {
        1: ("exec", "message", "k", _message("ExecAction", {1: ("command", "string", "r")})),
        2: (
            "httpGet",
            "message",
            "k",
            _message(
                "HTTPGetAction",
                {
                    1: ("path", "string"),
                    2: ("port", "intorstr", "k"),
                    3: ("host", "string"),
                    4: ("scheme", "string"),
                    5: (
                        "httpHeaders",
                        "message",
                        "r",
                        _message(
                            "HTTPHeader", {1: ("name", "string"), 2: ("value", "string", "k")}
                        ),
                    ),
                },
            ),
        ),
        3: (
            "tcpSocket",
            "message",
            "k",
            _message("TCPSocketAction", {1: ("port", "intorstr", "k"), 2: ("host", "string")}),
        ),
        4: (
            "grpc",
            "message",
            "k",
            _message("GRPCAction", {1: ("port", "int", "k"), 2: ("service", "string", "k")}),
        ),
    },
)
PROBE = _message(
    "Probe",
    {
        1: ("", "inline", PROBE_HANDLER),
        2: ("initialDelaySeconds", "int"),
        3: ("timeoutSeconds", "int"),
        4: ("periodSeconds", "int"),
        5: ("successThreshold", "int"),
        6: ("failureThreshold", "int"),
        7: ("terminationGracePeriodSeconds", "int", "k"),
    },
)
NODE_SELECTOR_REQUIREMENT = _message(
    "NodeSelectorRequirement",
    {1: ("key", "string"), 2: ("operator", "string"), 3: ("values", "string", "r")},
)
NODE_SELECTOR_TERM = _message(
    "NodeSelectorTerm",
    {
        1: ("matchExpressions", "message", "r", NODE_SELECTOR_REQUIREMENT),
        2: ("matchFields", "message", "r", NODE_SELECTOR_REQUIREMENT),
    },
)
POD_AFFINITY_TERM = _message(
    "PodAffinityTerm",
    {
        1: ("labelSelector", "message", "k", LABEL_SELECTOR),
        2: ("namespaces", "string", "r"),
        3: ("topologyKey", "string"),
        4: ("namespaceSelector", "message", "k", LABEL_SELECTOR),
        5: ("matchLabelKeys", "string", "r"),
        6: ("mismatchLabelKeys", "string", "r"),
    },
)
WEIGHTED_POD_AFFINITY_TERM = _message(
    "WeightedPodAffinityTerm",
    {1: ("weight", "int", "k"), 2: ("podAffinityTerm", "message", POD_AFFINITY_TERM)},
)
POD_AFFINITY: dict[int, Spec] = {
    1: ("requiredDuringSchedulingIgnoredDuringExecution", "message", "r", POD_AFFINITY_TERM),
    2: (
        "preferredDuringSchedulingIgnoredDuringExecution",
        "message",
        "r",
        WEIGHTED_POD_AFFINITY_TERM,
    ),
}
AFFINITY = _message(
    "Affinity",
    {
        1: (
            "nodeAffinity",
            "message",
            "k",
            _message(
                "NodeAffinity",
                {
                    1: (
                        "requiredDuringSchedulingIgnoredDuringExecution",
                        "message",
                        "k",
                        _message(
                            "NodeSelector",
                            {1: ("nodeSelectorTerms", "message", "r", NODE_SELECTOR_TERM)},
                        ),
                    ),
                    2: (
                        "preferredDuringSchedulingIgnoredDuringExecution",
                        "message",
                        "r",
                        _message(
                            "PreferredSchedulingTerm",
                            {
                                1: ("weight", "int", "k"),
                                2: ("preference", "message", NODE_SELECTOR_TERM),
                            },
                        ),
                    ),
                },
            ),
        ),
        2: ("podAffinity", "message", "k", _message("PodAffinity", POD_AFFINITY)),
        3: ("podAntiAffinity", "message", "k", _message("PodAntiAffinity", POD_AFFINITY)),
    },
)
TOPOLOGY_SPREAD = _message(
    "TopologySpreadConstraint",
    {
        1: ("maxSkew", "int", "k"),
        2: ("topologyKey", "string"),
        3: ("whenUnsatisfiable", "string"),
        4: ("labelSelector", "message", "k", LABEL_SELECTOR),
        5: ("minDomains", "int", "k"),
        6: ("nodeAffinityPolicy", "string", "k"),
        7: ("nodeTaintsPolicy", "string", "k"),
        8: ("matchLabelKeys", "string", "r"),
    },
)
RESOURCES = _message(
    "ResourceRequirements", {1: ("limits", "map_quantity"), 2: ("requests", "map_quantity")}
)
CONTAINER = _message(
    "Container",
    {
        1: ("name", "string"),
        2: ("image", "string"),
        3: ("command", "string", "r"),
        4: ("args", "string", "r"),
        5: ("workingDir", "string"),
        6: (
            "ports",
            "message",
            "r",
            _message(
                "ContainerPort",
                {
                    1: ("name", "string"),
                    2: ("hostPort", "int"),
                    3: ("containerPort", "int", "k"),
                    4: ("protocol", "string"),
                    5: ("hostIP", "string"),
                },
            ),
        ),
        7: (
            "env",
            "message",
            "r",
            _message(
                "EnvVar",
                {
                    1: ("name", "string"),
                    2: ("value", "string"),
                    3: ("valueFrom", "message", "k", ENV_VAR_SOURCE),
                },
            ),
        ),
        8: ("resources", "message", RESOURCES),
        9: ("volumeMounts", "message", "r", VOLUME_MOUNT),
        10: ("livenessProbe", "message", "k", PROBE),
        11: ("readinessProbe", "message", "k", PROBE),
        13: ("terminationMessagePath", "string"),
        14: ("imagePullPolicy", "string"),
        15: ("securityContext", "message", "k", SECURITY_CONTEXT),
        16: ("stdin", "bool"),
        17: ("stdinOnce", "bool"),
        18: ("tty", "bool"),
        19: ("envFrom", "message", "r", ENV_FROM),
        20: ("terminationMessagePolicy", "string"),
        22: ("startupProbe", "message", "k", PROBE),
        23: (
            "resizePolicy",
            "message",
            "r",
            _message(
                "ContainerResizePolicy",
                {1: ("resourceName", "string"), 2: ("restartPolicy", "string")},
            ),
        ),
        24: ("restartPolicy", "string", "k"),
    },
)
POD_SPEC = _message(
    "PodSpec",
    {
        1: ("volumes", "message", "r", VOLUME),
        2: ("containers", "message", "r", CONTAINER),
        3: ("restartPolicy", "string"),
        4: ("terminationGracePeriodSeconds", "int", "k"),
        5: ("activeDeadlineSeconds", "int", "k"),
        6: ("dnsPolicy", "string"),
        7: ("nodeSelector", "map"),
        8: ("serviceAccountName", "string"),
        9: ("serviceAccount", "string"),
        10: ("nodeName", "string"),
        11: ("hostNetwork", "bool"),
        12: ("hostPID", "bool"),
        13: ("hostIPC", "bool"),
        14: ("securityContext", "message", "k", POD_SECURITY_CONTEXT),
        15: ("imagePullSecrets", "message", "r", LOCAL_OBJECT_REFERENCE),
        16: ("hostname", "string"),
        17: ("subdomain", "string"),
        18: ("affinity", "message", "k", AFFINITY),
        19: ("schedulerName", "string"),
        20: ("initContainers", "message", "r", CONTAINER),
        21: ("automountServiceAccountToken", "bool", "k"),
        22: (
            "tolerations",
            "message",
            "r",
            _message(
                "Toleration",
                {
                    1: ("key", "string"),
                    2: ("operator", "string"),
                    3: ("value", "string"),
                    4: ("effect", "string"),
                    5: ("tolerationSeconds", "int", "k"),
                },
            ),
        ),
        24: ("priorityClassName", "string"),
        25: ("priority", "int", "k"),
        27: ("shareProcessNamespace", "bool", "k"),
        29: ("runtimeClassName", "string", "k"),
        30: ("enableServiceLinks", "bool", "k"),
        31: ("preemptionPolicy", "string", "k"),
        33: ("topologySpreadConstraints", "message", "r", TOPOLOGY_SPREAD),
        35: ("setHostnameAsFQDN", "bool", "k"),
        37: ("hostUsers", "bool", "k"),
    },
)
POD_TEMPLATE = _message(
    "PodTemplateSpec", {1: ("metadata", "message", OBJECT_META), 2: ("spec", "message", POD_SPEC)}
)

# ----------------------------------------------------------------- core/v1 kinds

NAMESPACE = _message(
    "Namespace",
    {
        1: ("metadata", "message", OBJECT_META),
        2: ("spec", "message", _message("NamespaceSpec", {1: ("finalizers", "string", "r")})),
        3: STATUS,
    },
)
CONFIG_MAP = _message(
    "ConfigMap",
    {
        1: ("metadata", "message", OBJECT_META),
        2: ("data", "map"),
        3: ("binaryData", "map_bytes"),
        4: ("immutable", "bool", "k"),
    },
)
SECRET = _message(
    "Secret",
    {
        1: ("metadata", "message", OBJECT_META),
        2: ("data", "map_bytes"),
        3: ("type", "string"),
        4: ("stringData", "map"),
        5: ("immutable", "bool", "k"),
    },
)
SERVICE_ACCOUNT = _message(
    "ServiceAccount",
    {
        1: ("metadata", "message", OBJECT_META),
        3: ("imagePullSecrets", "message", "r", LOCAL_OBJECT_REFERENCE),
        4: ("automountServiceAccountToken", "bool", "k"),
    },
)
SERVICE = _message(
    "Service",
    {
        1: ("metadata", "message", OBJECT_META),
        2: (
            "spec",
            "message",
            _message(
                "ServiceSpec",
                {
                    1: (
                        "ports",
                        "message",
                        "r",
                        _message(
                            "ServicePort",
                            {
                                1: ("name", "string"),
                                2: ("protocol", "string"),
                                3: ("port", "int", "k"),
                                4: ("targetPort", "intorstr"),
                                5: ("nodePort", "int"),
                                6: ("appProtocol", "string", "k"),
                            },
                        ),
                    ),
                    2: ("selector", "map"),
                    3: ("clusterIP", "string"),
                    4: ("type", "string"),
                    5: ("externalIPs", "string", "r"),
                    7: ("sessionAffinity", "string"),
                    8: ("loadBalancerIP", "string"),
                    9: ("loadBalancerSourceRanges", "string", "r"),
                    10: ("externalName", "string"),
                    11: ("externalTrafficPolicy", "string"),
                    12: ("healthCheckNodePort", "int"),
                    13: ("publishNotReadyAddresses", "bool"),
                    17: ("ipFamilyPolicy", "string", "k"),
                    18: ("clusterIPs", "string", "r"),
                    19: ("ipFamilies", "string", "r"),
                    20: ("allocateLoadBalancerNodePorts", "bool", "k"),
                    21: ("loadBalancerClass", "string", "k"),
                    22: ("internalTrafficPolicy", "string", "k"),
                    23: ("trafficDistribution", "string", "k"),
                },
            ),
        ),
        3: STATUS,
    },
)

# ----------------------------------------------------------------- apps, batch

DEPLOYMENT = _message(
    "Deployment",
    {
        1: ("metadata", "message", OBJECT_META),
        2: (
            "spec",
            "message",
            _message(
                "DeploymentSpec",
                {
                    1: ("replicas", "int", "k"),
                    2: ("selector", "message", "k", LABEL_SELECTOR),
                    3: ("template", "message", POD_TEMPLATE),
                    4: (
                        "strategy",
                        "message",
                        _message(
                            "DeploymentStrategy",
                            {
                                1: ("type", "string"),
                                2: (
                                    "rollingUpdate",
                                    "message",
                                    _message(
                                        "RollingUpdateDeployment",
                                        {
                                            1: ("maxUnavailable", "intorstr", "k"),
                                            2: ("maxSurge", "intorstr", "k"),
                                        },
                                    ),
                                ),
                            },
                        ),
                    ),
                    5: ("minReadySeconds", "int"),
                    6: ("revisionHistoryLimit", "int", "k"),
                    7: ("paused", "bool"),
                    9: ("progressDeadlineSeconds", "int", "k"),
                },
            ),
        ),
        3: STATUS,
    },
)
JOB_SPEC = _message(
    "JobSpec",
    {
        1: ("parallelism", "int", "k"),
        2: ("completions", "int", "k"),
        3: ("activeDeadlineSeconds", "int", "k"),
        4: ("selector", "message", "k", LABEL_SELECTOR),
        5: ("manualSelector", "bool", "k"),
        6: ("template", "message", POD_TEMPLATE),
        7: ("backoffLimit", "int", "k"),
        8: ("ttlSecondsAfterFinished", "int", "k"),
        9: ("completionMode", "string", "k"),
        10: ("suspend", "bool", "k"),
        12: ("backoffLimitPerIndex", "int", "k"),
        13: ("maxFailedIndexes", "int", "k"),
        14: ("podReplacementPolicy", "string", "k"),
        15: ("managedBy", "string", "k"),
    },
)
JOB = _message(
    "Job",
    {1: ("metadata", "message", OBJECT_META), 2: ("spec", "message", JOB_SPEC), 3: STATUS},
)
CRON_JOB = _message(
    "CronJob",
    {
        1: ("metadata", "message", OBJECT_META),
        2: (
            "spec",
            "message",
            _message(
                "CronJobSpec",
                {
                    1: ("schedule", "string"),
                    2: ("startingDeadlineSeconds", "int", "k"),
                    3: ("concurrencyPolicy", "string"),
                    4: ("suspend", "bool", "k"),
                    5: (
                        "jobTemplate",
                        "message",
                        _message(
                            "JobTemplateSpec",
                            {
                                1: ("metadata", "message", OBJECT_META),
                                2: ("spec", "message", JOB_SPEC),
                            },
                        ),
                    ),
                    6: ("successfulJobsHistoryLimit", "int", "k"),
                    7: ("failedJobsHistoryLimit", "int", "k"),
                    8: ("timeZone", "string", "k"),
                },
            ),
        ),
        3: STATUS,
    },
)

# ----------------------------------------------------------------- policy, scheduling, autoscaling

PDB = _message(
    "PodDisruptionBudget",
    {
        1: ("metadata", "message", OBJECT_META),
        2: (
            "spec",
            "message",
            _message(
                "PodDisruptionBudgetSpec",
                {
                    1: ("minAvailable", "intorstr", "k"),
                    2: ("selector", "message", "k", LABEL_SELECTOR),
                    3: ("maxUnavailable", "intorstr", "k"),
                    4: ("unhealthyPodEvictionPolicy", "string", "k"),
                },
            ),
        ),
        3: STATUS,
    },
)
EVICTION = _message(
    "Eviction",
    {1: ("metadata", "message", OBJECT_META), 2: ("deleteOptions", "message", DELETE_OPTIONS)},
)
PRIORITY_CLASS = _message(
    "PriorityClass",
    {
        1: ("metadata", "message", OBJECT_META),
        2: ("value", "int", "k"),
        3: ("globalDefault", "bool"),
        4: ("description", "string"),
        5: ("preemptionPolicy", "string", "k"),
    },
)
SCALE_TARGET = _message(
    "CrossVersionObjectReference",
    {1: ("kind", "string"), 2: ("name", "string"), 3: ("apiVersion", "string")},
)
METRIC_TARGET = _message(
    "MetricTarget",
    {
        1: ("type", "string"),
        2: ("value", "quantity"),
        3: ("averageValue", "quantity"),
        4: ("averageUtilization", "int", "k"),
    },
)
HPA_V2 = _message(
    "HorizontalPodAutoscaler",
    {
        1: ("metadata", "message", OBJECT_META),
        2: (
            "spec",
            "message",
            _message(
                "HorizontalPodAutoscalerSpec",
                {
                    1: ("scaleTargetRef", "message", SCALE_TARGET),
                    2: ("minReplicas", "int", "k"),
                    3: ("maxReplicas", "int", "k"),
                    4: (
                        "metrics",
                        "message",
                        "r",
                        _message(
                            "MetricSpec",
                            {
                                1: ("type", "string"),
                                4: (
                                    "resource",
                                    "message",
                                    _message(
                                        "ResourceMetricSource",
                                        {
                                            1: ("name", "string"),
                                            2: ("target", "message", METRIC_TARGET),
                                        },
                                    ),
                                ),
                            },
                        ),
                    ),
                },
            ),
        ),
        3: STATUS,
    },
)

HPA_V1 = _message(
    "HorizontalPodAutoscaler",
    {
        1: ("metadata", "message", OBJECT_META),
        2: (
            "spec",
            "message",
            _message(
                "HorizontalPodAutoscalerSpec",
                {
                    1: ("scaleTargetRef", "message", SCALE_TARGET),
                    2: ("minReplicas", "int", "k"),
                    3: ("maxReplicas", "int", "k"),
                    4: ("targetCPUUtilizationPercentage", "int", "k"),
                },
            ),
        ),
        3: STATUS,
    },
)

# (apiVersion, kind) -> table. DeleteOptions comes under several apiVersions.
KINDS: dict[tuple[str, str], Message] = {
    ("v1", "Namespace"): NAMESPACE,
    ("v1", "ConfigMap"): CONFIG_MAP,
    ("v1", "Secret"): SECRET,
    ("v1", "ServiceAccount"): SERVICE_ACCOUNT,
    ("v1", "Service"): SERVICE,
    ("apps/v1", "Deployment"): DEPLOYMENT,
    ("batch/v1", "Job"): JOB,
    ("batch/v1", "CronJob"): CRON_JOB,
    ("policy/v1", "PodDisruptionBudget"): PDB,
    ("policy/v1", "Eviction"): EVICTION,
    ("scheduling.k8s.io/v1", "PriorityClass"): PRIORITY_CLASS,
    ("autoscaling/v2", "HorizontalPodAutoscaler"): HPA_V2,
    ("autoscaling/v1", "HorizontalPodAutoscaler"): HPA_V1,
}


def table_for(api_version: str, kind: str) -> Message | None:
    """The field table for an envelope's apiVersion and kind, or None if kubesim has none."""
    if kind == "DeleteOptions":
        return DELETE_OPTIONS
    return KINDS.get((api_version, kind))


def decode_object(body: bytes) -> dict[str, Any]:
    """A protobuf request body (envelope and object) as the JSON object it encodes.

    Raises DecodeError naming what kubesim could not read.
    """
    envelope = unwrap(body)
    table = table_for(envelope.api_version, envelope.kind)
    if table is None:
        raise DecodeError(
            f"kubesim has no protobuf field table for {envelope.kind} ({envelope.api_version})"
        )
    obj = decode(table, envelope.raw)
    return {"apiVersion": envelope.api_version, "kind": envelope.kind, **obj}
