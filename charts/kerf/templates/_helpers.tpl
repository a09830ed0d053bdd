{{/* The image every kerf container runs. */}}
{{- define "kerf.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Labels on every object of the release. */}}
{{- define "kerf.labels" -}}
app.kubernetes.io/part-of: kerf
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{/* The webhook Service's DNS names (the serving certificate's SANs). */}}
{{- define "kerf.webhookNames" -}}
- kerf-webhook
- kerf-webhook.{{ .Release.Namespace }}
- kerf-webhook.{{ .Release.Namespace }}.svc
- kerf-webhook.{{ .Release.Namespace }}.svc.cluster.local
{{- end }}

{{/* The restricted pod security context every kerf pod runs with. */}}
{{- define "kerf.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "kerf.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end }}

{{/* POD_NAME and POD_NAMESPACE: the Lease holder identity and kerf's own namespace. */}}
{{- define "kerf.podEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end }}

{{/* Read access to everything the cluster view holds (SPEC §7). */}}
{{- define "kerf.viewRules" -}}
- apiGroups: [""]
  resources: [namespaces, pods, nodes, configmaps]
  verbs: [get, list, watch]
- apiGroups: [apps]
  resources: [replicasets, deployments, statefulsets, daemonsets]
  verbs: [get, list, watch]
- apiGroups: [batch]
  resources: [jobs, cronjobs]
  verbs: [get, list, watch]
- apiGroups: [autoscaling]
  resources: [horizontalpodautoscalers]
  verbs: [get, list, watch]
- apiGroups: [argoproj.io]
  resources: [rollouts]
  verbs: [get, list, watch]
- apiGroups: [rightsizing.kubex.ai]
  resources:
    - policyevaluations
    - globalconfigurations
    - automationstrategies
    - clusterautomationstrategies
    - staticpolicies
    - clusterstaticpolicies
    - proactivepolicies
    - clusterproactivepolicies
    - gpureactivepolicies
    - clustergpureactivepolicies
    - containerargspolicies
    - rollbackpolicies
    - clusterrollbackpolicies
    - rightsizingrecommendations
  verbs: [get, list, watch]
{{- end }}

{{/* A Role and RoleBinding for the Leases of one service: its one named Lease (create
cannot be limited to a name); sharded (`shards` above 1), its member and bucket Leases too;
a shardable service at `shards: 1` lists its shard set's Leases too. */}}
{{- define "kerf.leaseRole" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .name }}-lease
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "kerf.labels" .root | nindent 4 }}
rules:
  {{- if gt (int (.shards | default 1)) 1 }}
  # Its member Leases `{{ .name }}-member-<pod>` and bucket Leases `{{ .name }}-bucket-NN`
  # (docs/reconciler.md, Shards): listed by label each round, created, renewed, and given
  # up by an update that empties the holder; a member Lease is deleted on shutdown, or
  # by bucket 00's holder once long silent; `{{ .name }}`, a previous version's leader,
  # is read. A member Lease is named after its pod, which a resourceName cannot say in
  # advance, so the grant covers the Leases of this namespace.
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [get, list, create, update, delete]
  {{- else }}
  {{- if .shards }}
  # Its Lease `{{ .name }}`, created, read and renewed; before taking it, the shard set's
  # Leases are listed by label (sharded replicas of a previous `shards` still running).
  {{- end }}
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [create{{ if .shards }}, list{{ end }}]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    resourceNames: [{{ .name }}]
    verbs: [get, update]
  {{- end }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .name }}-lease
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "kerf.labels" .root | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ .name }}-lease
subjects:
  - kind: ServiceAccount
    name: {{ .name }}
    namespace: {{ .root.Release.Namespace }}
{{- end }}

{{/* The namespace bounds a decision keeps to (app/namespace_bounds.py) and the
VerticalPodAutoscalers that hold values (VPACoupled), read as a watch: the webhook's and the
reconciler's view, not the recommender's. */}}
{{- define "kerf.boundRules" -}}
- apiGroups: [""]
  resources: [limitranges, resourcequotas]
  verbs: [list, watch]
- apiGroups: [autoscaling.k8s.io]
  resources: [verticalpodautoscalers]
  verbs: [list, watch]
{{- end }}
