"""The real kubectl against the simulator, one test per verb kerf's users need.

kubectl 1.35 (the project's) runs every test; the tests of what changed between kubectl
releases (protobuf bodies, eviction discovery, watch tables, events) also run kubectl
1.32, the oldest supported. scripts/get-kubectl.sh installs both (CI runs it first);
these tests fail, never skip, when one is missing.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
from pathlib import Path

import pytest
import yaml

from kubesim.sim import Simulator
from tests.kubesim.test_leases_crds import CRD

ROOT = Path(__file__).resolve().parents[2]


# version -> (environment variable overriding the path, default path)
KUBECTLS = {
    "1.35": ("KUBECTL", ROOT / ".tools" / "bin" / "kubectl"),
    "1.32": ("KUBECTL_OLDEST", ROOT / ".tools" / "bin" / "kubectl-1.32"),
}


def kubectl_binary(version: str = "1.35") -> str:
    variable, default = KUBECTLS[version]
    path = os.environ.get(variable) or str(default)
    if not os.access(path, os.X_OK):
        pytest.fail(
            f"kubectl {version} not found at {path}: run scripts/get-kubectl.sh (or set ${variable})",
            pytrace=False,
        )
    return path


class Kubectl:
    def __init__(self, sim: Simulator, tmp_path: Path, version: str = "1.35") -> None:
        self.binary = kubectl_binary(version)
        self.version = version
        self.kubeconfig = str(sim.kubeconfig_path)
        self.cache = str(tmp_path / "kube-cache")
        self.tmp = tmp_path

    async def run(
        self, *args: str, ok: bool = True, stdin: str | None = None
    ) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            self.binary,
            "--kubeconfig",
            self.kubeconfig,
            "--cache-dir",
            self.cache,
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode() if stdin else None), 60)
        code = proc.returncode or 0
        if ok:
            assert code == 0, f"kubectl {' '.join(args)} failed ({code}): {err.decode()}"
        return code, out.decode(), err.decode()

    async def start(self, *args: str) -> asyncio.subprocess.Process:
        """A long-running kubectl (`get -w`); the caller stops it."""
        return await asyncio.create_subprocess_exec(
            self.binary,
            "--kubeconfig",
            self.kubeconfig,
            "--cache-dir",
            self.cache,
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )

    def file(self, name: str, doc: dict) -> str:
        path = self.tmp / name
        path.write_text(yaml.safe_dump(doc))
        return str(path)


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "nginx:1.27",
                "resources": {
                    "requests": {"cpu": "100m", "memory": "64Mi"},
                    "limits": {"cpu": "500m", "memory": "128Mi"},
                },
            }
        ]
    },
}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "shop"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "shop"}},
        "template": {
            "metadata": {"labels": {"app": "shop"}},
            "spec": {
                "containers": [
                    {
                        "name": "app",
                        "image": "nginx:1.27",
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    }
                ]
            },
        },
    },
}

# A pod spec using most of what a workload manifest sets: `create job --from` sends it back
# as protobuf, so it checks kubesim's field numbers against kubectl's own encoder.
RICH_POD_SPEC = {
    "securityContext": {
        "runAsUser": 1000,
        "runAsNonRoot": True,
        "fsGroup": 2000,
        "supplementalGroups": [3000, 4000],
        "seccompProfile": {"type": "RuntimeDefault"},
    },
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 5,
                    "preference": {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}
                        ]
                    },
                }
            ],
        },
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": "rich"}},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        },
    },
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "rich"}},
        }
    ],
    "volumes": [
        {"name": "scratch", "emptyDir": {}},
        {
            "name": "cfg",
            "configMap": {
                "name": "cfg",
                "items": [{"key": "a", "path": "a.txt"}],
                "defaultMode": 420,
            },
        },
        {"name": "pw", "secret": {"secretName": "pw", "optional": False}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}},
    ],
    "restartPolicy": "OnFailure",
    "containers": [
        {
            "name": "app",
            "image": "busybox:1.36",
            "command": ["sh", "-c"],
            "args": ["echo hi"],
            "workingDir": "/work",
            "env": [
                {"name": "PLAIN", "value": "x"},
                {
                    "name": "NODE",
                    "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}},
                },
                {
                    "name": "KEY",
                    "valueFrom": {"secretKeyRef": {"name": "pw", "key": "pw", "optional": True}},
                },
                {"name": "CFG", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a"}}},
                {
                    "name": "MEM",
                    "valueFrom": {
                        "resourceFieldRef": {
                            "containerName": "app",
                            "resource": "limits.memory",
                            "divisor": "1Mi",
                        }
                    },
                },
            ],
            "envFrom": [
                {"prefix": "C_", "configMapRef": {"name": "cfg"}},
                {"secretRef": {"name": "pw", "optional": True}},
            ],
            "resources": {
                "requests": {"cpu": "100m", "memory": "64Mi"},
                "limits": {"memory": "128Mi"},
            },
            "volumeMounts": [
                {"name": "scratch", "mountPath": "/scratch"},
                {"name": "cfg", "mountPath": "/etc/cfg", "readOnly": True, "subPath": "a.txt"},
            ],
            "livenessProbe": {
                "httpGet": {
                    "path": "/healthz",
                    "port": 8080,
                    "httpHeaders": [{"name": "X", "value": "1"}],
                },
                "periodSeconds": 7,
                "failureThreshold": 4,
            },
            "readinessProbe": {"tcpSocket": {"port": "http"}, "initialDelaySeconds": 3},
            "startupProbe": {"exec": {"command": ["true"]}, "timeoutSeconds": 2},
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                "runAsGroup": 3000,
            },
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        }
    ],
}


@pytest.fixture
async def kubectl(sim: Simulator, tmp_path: Path) -> Kubectl:
    await sim.add_node("node-1")
    return Kubectl(sim, tmp_path)


@pytest.fixture(params=sorted(KUBECTLS))
async def each_kubectl(request: pytest.FixtureRequest, sim: Simulator, tmp_path: Path) -> Kubectl:
    """kubectl 1.35 and the oldest supported, 1.32, in turn."""
    await sim.add_node("node-1")
    return Kubectl(sim, tmp_path, request.param)


async def test_create_and_get(sim, kubectl: Kubectl) -> None:
    _, out, _ = await kubectl.run("create", "-f", kubectl.file("pod.yaml", POD))
    assert out.strip() == "pod/web created"
    await sim.settle()
    _, out, _ = await kubectl.run("get", "pods")
    header, row = out.strip().splitlines()
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert row.split()[:4] == ["web", "1/1", "Running", "0"]
    code, _, err = await kubectl.run("get", "pod", "missing", ok=False)
    assert code == 1 and 'pods "missing" not found' in err


async def test_get_yaml(sim, kubectl: Kubectl) -> None:
    await kubectl.run("create", "-f", kubectl.file("pod.yaml", POD))
    await sim.settle()
    _, out, _ = await kubectl.run("get", "pod", "web", "-o", "yaml")
    pod = yaml.safe_load(out)
    assert (
        pod["kind"] == "Pod"
        and pod["status"]["phase"] == "Running"
        and pod["spec"]["nodeName"] == "node-1"
    )


async def test_apply_creates_updates_and_removes_fields(sim, kubectl: Kubectl) -> None:
    path = kubectl.file("deploy.yaml", DEPLOYMENT)
    _, out, _ = await kubectl.run("apply", "-f", path)
    assert out.strip() == "deployment.apps/shop created"
    changed = json.loads(json.dumps(DEPLOYMENT))
    changed["spec"]["replicas"] = 3
    changed["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "B", "value": "2"}]
    _, out, _ = await kubectl.run("apply", "-f", kubectl.file("deploy.yaml", changed))
    assert out.strip() == "deployment.apps/shop configured"
    await sim.settle()
    stored = sim.store.get(("apps", "deployments"), "default", "shop")
    assert stored["spec"]["replicas"] == 3
    assert stored["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "B", "value": "2"}
    ]
    assert "kubectl.kubernetes.io/last-applied-configuration" in stored["metadata"]["annotations"]
    assert (
        len(
            [
                p
                for p in sim.store.list(("", "pods"), "default")
                if p["metadata"]["name"].startswith("shop-")
            ]
        )
        == 3
    )
    _, out, _ = await kubectl.run("apply", "-f", kubectl.file("deploy.yaml", changed))
    assert out.strip() == "deployment.apps/shop unchanged"


async def test_apply_custom_resources(sim, kubectl: Kubectl) -> None:
    await kubectl.run("apply", "-f", kubectl.file("crd.yaml", CRD))
    cr = {
        "apiVersion": "rightsizing.kubex.ai/v1alpha1",
        "kind": "StaticPolicy",
        "metadata": {"name": "p"},
        "spec": {"automationStrategyRef": {"name": "s"}, "weight": 2},
    }
    await kubectl.run("apply", "-f", kubectl.file("cr.yaml", cr))
    cr["spec"]["weight"] = 5
    await kubectl.run("apply", "-f", kubectl.file("cr.yaml", cr))
    _, out, _ = await kubectl.run("get", "staticpolicies")
    assert out.split() == ["NAME", "MODE", "AGE", "p", "auto", "0s"]
    cr["spec"]["weight"] = -1
    code, _, err = await kubectl.run("apply", "-f", kubectl.file("cr.yaml", cr), ok=False)
    assert code == 1
    assert (
        'The StaticPolicy "p" is invalid: spec.weight: Invalid value: -1: spec.weight in body should be greater than or equal to 0'
        in err
    )


async def test_annotate_label_patch_delete(sim, kubectl: Kubectl) -> None:
    await kubectl.run("create", "-f", kubectl.file("pod.yaml", POD))
    _, out, _ = await kubectl.run(
        "annotate", "pod", "web", "rightsizing.kubex.ai/pause-until=infinite"
    )
    assert out.strip() == "pod/web annotated"
    _, out, _ = await kubectl.run("label", "pod", "web", "tier=front")
    assert out.strip() == "pod/web labeled"
    _, out, _ = await kubectl.run(
        "patch", "pod", "web", "--type", "merge", "-p", '{"metadata":{"labels":{"x":"y"}}}'
    )
    assert out.strip() == "pod/web patched"
    _, out, _ = await kubectl.run(
        "patch",
        "pod",
        "web",
        "--type",
        "json",
        "-p",
        '[{"op":"remove","path":"/metadata/labels/x"}]',
    )
    pod = sim.store.get(("", "pods"), "default", "web")
    assert pod["metadata"]["annotations"] == {"rightsizing.kubex.ai/pause-until": "infinite"}
    assert pod["metadata"]["labels"] == {"app": "web", "tier": "front"}
    _, out, _ = await kubectl.run("delete", "pod", "web")
    assert out.strip() == 'pod "web" deleted from default namespace'
    assert sim.store.get(("", "pods"), "default", "web") is None


async def test_patch_resize_subresource(sim, kubectl: Kubectl) -> None:
    await kubectl.run("create", "-f", kubectl.file("pod.yaml", POD))
    await sim.settle()
    _, out, _ = await kubectl.run(
        "patch",
        "pod",
        "web",
        "--subresource",
        "resize",
        "-p",
        '{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"200m"}}}]}}',
    )
    assert out.strip() == "pod/web patched"
    await sim.settle()
    pod = sim.store.get(("", "pods"), "default", "web")
    assert pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "200m"
    assert pod["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "200m"
    code, _, err = await kubectl.run(
        "patch",
        "pod",
        "web",
        "--subresource",
        "resize",
        "-p",
        '{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"1"}}}]}}',
        ok=False,
    )
    assert code == 1
    assert (
        'The Pod "web" is invalid: spec.containers[0].resources.requests: Invalid value: "1": must be less than or equal to cpu limit of 500m'
        in err
    )


async def test_sidecar_resize_and_fault_annotations_with_kubectl(sim, kubectl: Kubectl) -> None:
    """What docs/devcluster.md's e2e test does on the real control plane, on kubesim."""
    pod = copy.deepcopy(POD)
    pod["spec"]["initContainers"] = [
        {
            "name": "proxy",
            "image": "envoy:1.31",
            "restartPolicy": "Always",
            "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},
        }
    ]
    await kubectl.run("create", "-f", kubectl.file("pod.yaml", pod))
    await sim.settle()

    async def row() -> list[str]:
        _, out, _ = await kubectl.run("get", "pod", "web", "--no-headers")
        return out.split()[:4]

    assert await row() == ["web", "2/2", "Running", "0"]
    code, _, err = await kubectl.run(
        "patch",
        "pod",
        "web",
        "--subresource",
        "resize",
        "-p",
        '{"spec":{"containers":[{"name":"proxy","resources":{"requests":{"cpu":"60m"}}}]}}',
        ok=False,
    )
    assert code == 1 and "containers may not be added or removed on resize" in err
    await kubectl.run(
        "patch",
        "pod",
        "web",
        "--subresource",
        "resize",
        "-p",
        '{"spec":{"initContainers":[{"name":"proxy","resources":{"requests":{"cpu":"60m"}}}]}}',
    )
    await sim.settle()
    stored = sim.store.get(("", "pods"), "default", "web")
    assert stored["status"]["initContainerStatuses"][0]["resources"]["requests"]["cpu"] == "60m"
    await kubectl.run("annotate", "pod", "web", "sim.kerf.dev/unready=proxy")
    await sim.settle()
    assert await row() == ["web", "1/2", "Running", "0"]
    await kubectl.run("annotate", "pod", "web", "sim.kerf.dev/crash-loop=proxy")
    await sim.settle()
    assert await row() == ["web", "1/2", "Init:CrashLoopBackOff", "1"]
    await kubectl.run("annotate", "pod", "web", "sim.kerf.dev/crash-loop-", "sim.kerf.dev/unready-")
    await kubectl.run("annotate", "pod", "web", "sim.kerf.dev/oom-kill=app")
    await sim.settle()
    assert await row() == ["web", "2/2", "Running", "2"]


async def test_typed_create_commands_send_protobuf(sim, each_kubectl: Kubectl) -> None:
    kubectl = each_kubectl
    commands = [
        (["create", "namespace", "team"], "namespace/team created"),
        (
            ["create", "deployment", "shop", "--image=nginx:1.27", "--replicas=0", "--port=80"],
            "deployment.apps/shop created",
        ),
        (
            ["create", "configmap", "cfg", "--from-literal=a=1", "--from-literal=b=two"],
            "configmap/cfg created",
        ),
        (["create", "secret", "generic", "pw", "--from-literal=pw=hunter2"], "secret/pw created"),
        (
            ["create", "job", "once", "--image=busybox", "--", "echo", "hi"],
            "job.batch/once created",
        ),
        (
            ["create", "cronjob", "tick", "--image=busybox", "--schedule=*/5 * * * *"],
            "cronjob.batch/tick created",
        ),
        (["create", "service", "clusterip", "web", "--tcp=80:8080"], "service/web created"),
        (["create", "serviceaccount", "robot"], "serviceaccount/robot created"),
        (
            ["create", "pdb", "shop", "--selector=app=shop", "--max-unavailable=25%"],
            "poddisruptionbudget.policy/shop created",
        ),
        (
            ["create", "priorityclass", "high", "--value=0", "--description=first"],
            "priorityclass.scheduling.k8s.io/high created",
        ),
        (
            ["autoscale", "deployment", "shop", "--min=2", "--max=5", "--cpu-percent=70"],
            "horizontalpodautoscaler.autoscaling/shop autoscaled",
        ),
    ]
    for args, expected in commands:
        _, out, _ = await kubectl.run(*args)
        assert out.strip() == expected
    store = sim.store
    assert store.get(("", "namespaces"), "", "team")["status"]["phase"] == "Active"
    shop = store.get(("apps", "deployments"), "default", "shop")
    # replicas=0 is a pointer field sent as 0: dropping it would default to 1.
    assert shop["spec"]["replicas"] == 0
    container = shop["spec"]["template"]["spec"]["containers"][0]
    assert (container["name"], container["image"], container["ports"]) == (
        "nginx",
        "nginx:1.27",
        [{"containerPort": 80}],
    )
    assert store.get(("", "configmaps"), "default", "cfg")["data"] == {"a": "1", "b": "two"}
    secret = store.get(("", "secrets"), "default", "pw")
    assert secret["data"] == {"pw": "aHVudGVyMg=="}
    job = store.get(("batch", "jobs"), "default", "once")
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["echo", "hi"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert store.get(("batch", "cronjobs"), "default", "tick")["spec"]["schedule"] == "*/5 * * * *"
    port = store.get(("", "services"), "default", "web")["spec"]["ports"][0]
    assert (port["port"], port["targetPort"], port["protocol"]) == (80, 8080, "TCP")
    assert store.get(("", "serviceaccounts"), "default", "robot") is not None
    pdb = store.get(("policy", "poddisruptionbudgets"), "default", "shop")
    assert pdb["spec"] == {"maxUnavailable": "25%", "selector": {"matchLabels": {"app": "shop"}}}
    priority = store.get(("scheduling.k8s.io", "priorityclasses"), "", "high")
    assert (priority["value"], priority["description"]) == (0, "first")
    hpa = store.get(("autoscaling", "horizontalpodautoscalers"), "default", "shop")
    assert (hpa["apiVersion"], hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (
        "autoscaling/v2",
        2,
        5,
    )
    assert hpa["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 70},
            },
        }
    ]
    # A typed command kubesim has no field table for is refused with a way out.
    code, _, err = await kubectl.run("create", "quota", "q", "--hard=pods=3", ok=False)
    assert code == 1
    assert "kubesim has no protobuf field table for ResourceQuota" in err
    assert "kubectl create -f" in err
    assert store.get(("", "resourcequotas"), "default", "q") is None


async def test_drain_evicts_then_deletes_when_told(sim, each_kubectl: Kubectl) -> None:
    kubectl = each_kubectl
    await kubectl.run("create", "-f", kubectl.file("deploy.yaml", DEPLOYMENT))
    await sim.settle()
    await sim.add_node("node-2")

    def nodes_of_pods() -> list[str]:
        return sorted(p["spec"]["nodeName"] for p in sim.store.list(("", "pods"), "default"))

    assert nodes_of_pods() == ["node-1", "node-1"]
    _, out, _ = await kubectl.run("drain", "node-1", "--ignore-daemonsets")
    # Discovery names policy/v1 for pods/eviction, so kubectl evicts instead of deleting.
    assert len([line for line in out.splitlines() if line.startswith("evicting pod")]) == 2
    assert out.strip().endswith("node/node-1 drained")
    _, nodes, _ = await kubectl.run("get", "nodes")
    rows = {line.split()[0]: line.split()[1] for line in nodes.strip().splitlines()[1:]}
    assert rows == {"node-1": "Ready,SchedulingDisabled", "node-2": "Ready"}
    await sim.settle()
    assert nodes_of_pods() == ["node-2", "node-2"]
    await kubectl.run("uncordon", "node-1")
    # --disable-eviction takes the DELETE path, whose DeleteOptions body is protobuf.
    _, out, _ = await kubectl.run("drain", "node-2", "--disable-eviction")
    assert len([line for line in out.splitlines() if line.endswith(" deleted")]) == 2
    assert "evicting" not in out
    await sim.settle()
    assert nodes_of_pods() == ["node-1", "node-1"]


async def test_apply_crd_directory(sim, each_kubectl: Kubectl) -> None:
    code, out, err = await each_kubectl.run(
        "apply", "-f", str(ROOT / "manifests" / "crds"), ok=False
    )
    crds = sorted(p.name for p in (ROOT / "manifests" / "crds").glob("rightsizing.kubex.ai_*.yaml"))
    assert out.count("customresourcedefinition.apiextensions.k8s.io/") == len(crds)
    assert len(sim.store.list(("apiextensions.k8s.io", "customresourcedefinitions"))) == len(crds)
    # kustomization.yaml is not an API object: the same refusal a real cluster gives.
    assert code == 1 and 'no matches for kind "Kustomization"' in err and "mime" not in err


async def test_get_watch_prints_table_rows(sim, each_kubectl: Kubectl) -> None:
    kubectl = each_kubectl
    proc = await kubectl.start("get", "pods", "-w")
    assert proc.stdout is not None
    try:
        # The first line comes from the initial list; "No resources found" goes to stderr.
        await kubectl.run("create", "-f", kubectl.file("pod.yaml", POD))
        lines: list[str] = []
        while not lines or "Running" not in lines[-1]:
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
            assert line, f"kubectl get -w ended early: {lines}"
            lines.append(line.decode().rstrip())
    finally:
        proc.terminate()
        await proc.wait()
    assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    # Every event is a full row (server-side printing), not a degraded NAME/AGE pair.
    assert [line.split()[:4] for line in lines[1:]][-1] == ["web", "1/1", "Running", "0"]
    assert all(len(line.split()) == 5 for line in lines[1:])


async def test_rollout_undo_reuses_the_old_replicaset(sim, each_kubectl: Kubectl) -> None:
    kubectl = each_kubectl
    await kubectl.run("apply", "-f", kubectl.file("deploy.yaml", DEPLOYMENT))
    await sim.settle()
    (first,) = sim.store.list(("apps", "replicasets"), "default")
    await kubectl.run("set", "image", "deployment/shop", "app=nginx:1.28")
    await sim.settle()
    _, out, _ = await kubectl.run("rollout", "undo", "deployment/shop")
    assert out.strip() == "deployment.apps/shop rolled back"
    await sim.settle()
    sets = {rs["metadata"]["name"]: rs for rs in sim.store.list(("apps", "replicasets"), "default")}
    # kubectl 1.32 sends the template back with `creationTimestamp: null`: still the same one.
    assert len(sets) == 2
    reused = sets[first["metadata"]["name"]]
    assert reused["spec"]["replicas"] == 2
    assert reused["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    _, out, _ = await kubectl.run("rollout", "history", "deployment/shop")
    assert [line.split()[0] for line in out.strip().splitlines()[2:]] == ["2", "3"]


async def test_events_in_get_and_describe(sim, each_kubectl: Kubectl) -> None:
    kubectl = each_kubectl
    await kubectl.run("create", "deployment", "shop", "--image=nginx:1.27")
    big = json.loads(json.dumps(POD))
    big["metadata"]["name"] = "big"
    big["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "64"}}
    await kubectl.run("create", "-f", kubectl.file("big.yaml", big))
    await sim.settle()
    (pod,) = [p for p in sim.store.list(("", "pods"), "default") if p["spec"].get("nodeName")]
    sim.kubelet.oom_kill("default", pod["metadata"]["name"], "nginx")
    _, out, _ = await kubectl.run("get", "events")
    header, *rows = out.strip().splitlines()
    assert header.split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    seen = {(row.split()[1], row.split()[2], row.split()[3].split("/")[0]) for row in rows}
    assert {
        ("Normal", "ScalingReplicaSet", "deployment"),
        ("Normal", "SuccessfulCreate", "replicaset"),
        ("Normal", "Scheduled", "pod"),
        ("Normal", "Started", "pod"),
        ("Warning", "OOMKilling", "pod"),
        ("Warning", "FailedScheduling", "pod"),
    } <= seen
    _, out, _ = await kubectl.run("describe", "pod", "big")
    events = out[out.index("Events:") :].splitlines()
    assert events[1].split() == ["Type", "Reason", "Age", "From", "Message"]
    assert events[3].split()[:2] == ["Warning", "FailedScheduling"]
    assert "default-scheduler" in events[3] and "Insufficient cpu" in events[3]
    _, out, _ = await kubectl.run("describe", "pod", pod["metadata"]["name"])
    assert "OOMKilling" in out[out.index("Events:") :]


async def test_create_job_from_cronjob_round_trips_a_full_pod_spec(
    sim, each_kubectl: Kubectl
) -> None:
    kubectl = each_kubectl
    cronjob = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "rich"},
        "spec": {
            "schedule": "0 * * * *",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "metadata": {"labels": {"app": "rich"}},
                        "spec": RICH_POD_SPEC,
                    }
                }
            },
        },
    }
    await kubectl.run("create", "-f", kubectl.file("cronjob.yaml", cronjob))
    _, out, _ = await kubectl.run("create", "job", "manual", "--from=cronjob/rich")
    assert out.strip() == "job.batch/manual created"
    stored = sim.store.get(("batch", "cronjobs"), "default", "rich")
    job = sim.store.get(("batch", "jobs"), "default", "manual")
    assert (
        job["spec"]["template"]["spec"] == stored["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    )
    assert job["metadata"]["ownerReferences"][0]["name"] == "rich"
    assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual"
