{{/* Names: <release>-gpufrag unless the release name already holds "gpufrag". */}}
{{- define "gpufrag.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gpufrag.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* A component's object name; dict: root, component. */}}
{{- define "gpufrag.component.fullname" -}}
{{- printf "%s-%s" (include "gpufrag.fullname" .root | trunc 52 | trimSuffix "-") .component }}
{{- end }}

{{- define "gpufrag.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "gpufrag.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gpufrag
{{- end }}

{{/* dict: root, component */}}
{{- define "gpufrag.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpufrag.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "gpufrag.componentLabels" -}}
{{ include "gpufrag.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "gpufrag.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Whether history goes to an existing ClickHouse server (else chDB on a PVC). */}}
{{- define "gpufrag.clickhouse" -}}
{{- if .Values.store.clickhouse.existingSecret }}true{{ end }}
{{- end }}

{{/* Whether the actuator may touch the cluster: only with guardrails.mode enforce. */}}
{{- define "gpufrag.enforce" -}}
{{- if eq .Values.guardrails.mode "enforce" }}true{{ end }}
{{- end }}

{{/* The settings every gpufrag container gets (GPUFRAG_*; names in models/settings.py). */}}
{{- define "gpufrag.env.common" -}}
- name: HOME
  value: /tmp
- name: GPUFRAG_GUARDRAILS__MODE
  value: {{ .Values.guardrails.mode | quote }}
{{- with .Values.guardrails }}
- name: GPUFRAG_GUARDRAILS__PROTECTED_NAMESPACES
  value: {{ append (without .protectedNamespaces $.Release.Namespace) $.Release.Namespace | toJson | quote }}
- name: GPUFRAG_GUARDRAILS__EXEMPT_LABEL
  value: {{ .exemptLabel | quote }}
- name: GPUFRAG_GUARDRAILS__MIN_PRIORITY_GAP
  value: {{ .minPriorityGap | quote }}
- name: GPUFRAG_GUARDRAILS__WINDOW_S
  value: {{ .windowS | quote }}
- name: GPUFRAG_GUARDRAILS__MAX_EVICTIONS_CLUSTER
  value: {{ .maxEvictionsCluster | quote }}
- name: GPUFRAG_GUARDRAILS__MAX_EVICTIONS_NODE
  value: {{ .maxEvictionsNode | quote }}
- name: GPUFRAG_GUARDRAILS__MAX_EVICTIONS_NAMESPACE
  value: {{ .maxEvictionsNamespace | quote }}
- name: GPUFRAG_GUARDRAILS__COOLDOWN_POD_S
  value: {{ .cooldownPodS | quote }}
- name: GPUFRAG_GUARDRAILS__COOLDOWN_NODE_S
  value: {{ .cooldownNodeS | quote }}
- name: GPUFRAG_GUARDRAILS__COOLDOWN_JOB_S
  value: {{ .cooldownJobS | quote }}
- name: GPUFRAG_GUARDRAILS__BREAKER_FAILURES
  value: {{ .breakerFailures | quote }}
- name: GPUFRAG_GUARDRAILS__BREAKER_NO_IMPROVEMENT
  value: {{ .breakerNoImprovement | quote }}
- name: GPUFRAG_GUARDRAILS__BREAKER_SETTLE_S
  value: {{ .breakerSettleS | quote }}
- name: GPUFRAG_GUARDRAILS__BREAKER_OPEN_S
  value: {{ .breakerOpenS | quote }}
{{- end }}
- name: GPUFRAG_STORE__DATABASE
  value: {{ .Values.store.database | quote }}
{{- if eq .Values.mode "distributed" }}
- name: GPUFRAG_KAFKA__BOOTSTRAP
  value: {{ .Values.kafka.bootstrap | quote }}
- name: GPUFRAG_KAFKA__TOPIC_PREFIX
  value: {{ .Values.kafka.topicPrefix | quote }}
- name: GPUFRAG_KAFKA__REPLICATION
  value: {{ .Values.kafka.replication | quote }}
{{- include "gpufrag.env.kafkaSecurity" . }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* What the Kafka listener speaks (GPUFRAG_KAFKA__SECURITY_PROTOCOL), from kafka.tls.enabled
and kafka.sasl.enabled. */}}
{{- define "gpufrag.kafka.protocol" -}}
{{- $k := .Values.kafka }}
{{- if $k.sasl.enabled }}
{{- ternary "SASL_SSL" "SASL_PLAINTEXT" $k.tls.enabled }}
{{- else }}
{{- ternary "SSL" "PLAINTEXT" $k.tls.enabled }}
{{- end }}
{{- end }}

{{/* Kafka TLS and SASL for every component that talks to Kafka: the user and password from
their Secret (secretKeyRef: never a value in the rendered objects), the CA and client
certificate as files of read-only Secret volumes (gpufrag.kafka.mounts, .volumes). */}}
{{- define "gpufrag.env.kafkaSecurity" }}
- name: GPUFRAG_KAFKA__SECURITY_PROTOCOL
  value: {{ include "gpufrag.kafka.protocol" . | quote }}
{{- with .Values.kafka.tls }}
{{- if .enabled }}
{{- if .caSecret.name }}
- name: GPUFRAG_KAFKA__TLS_CA_FILE
  value: /etc/gpufrag/kafka/ca/ca.crt
{{- end }}
{{- if .clientSecret.name }}
- name: GPUFRAG_KAFKA__TLS_CERT_FILE
  value: /etc/gpufrag/kafka/client/tls.crt
- name: GPUFRAG_KAFKA__TLS_KEY_FILE
  value: /etc/gpufrag/kafka/client/tls.key
{{- end }}
- name: GPUFRAG_KAFKA__TLS_CHECK_HOSTNAME
  value: {{ .checkHostname | quote }}
{{- end }}
{{- end }}
{{- with .Values.kafka.sasl }}
{{- if .enabled }}
- name: GPUFRAG_KAFKA__SASL_MECHANISM
  value: {{ .mechanism | quote }}
- name: GPUFRAG_KAFKA__SASL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .usernameKey }}
- name: GPUFRAG_KAFKA__SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .passwordKey }}
{{- end }}
{{- end }}
{{- end }}

{{/* The Kafka TLS Secrets' mounts and volumes (mode distributed, kafka.tls.enabled). */}}
{{- define "gpufrag.kafka.mounts" -}}
{{- if and (eq .Values.mode "distributed") .Values.kafka.tls.enabled }}
{{- with .Values.kafka.tls }}
{{- if .caSecret.name }}
- name: kafka-ca
  mountPath: /etc/gpufrag/kafka/ca
  readOnly: true
{{- end }}
{{- if .clientSecret.name }}
- name: kafka-client
  mountPath: /etc/gpufrag/kafka/client
  readOnly: true
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gpufrag.kafka.volumes" -}}
{{- if and (eq .Values.mode "distributed") .Values.kafka.tls.enabled }}
{{- with .Values.kafka.tls }}
{{- if .caSecret.name }}
- name: kafka-ca
  secret:
    secretName: {{ .caSecret.name }}
    items:
      - key: {{ .caSecret.key }}
        path: ca.crt
    # 0440: readable by the pod's fsGroup (the gpufrag user's group), no one else
    defaultMode: 288
{{- end }}
{{- if .clientSecret.name }}
- name: kafka-client
  secret:
    secretName: {{ .clientSecret.name }}
    items:
      - key: {{ .clientSecret.certKey }}
        path: tls.crt
      - key: {{ .clientSecret.keyKey }}
        path: tls.key
    defaultMode: 288
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The history store: a ClickHouse DSN from its Secret, or the chDB store on the PVC. */}}
{{- define "gpufrag.env.store" -}}
{{- if include "gpufrag.clickhouse" . }}
- name: GPUFRAG_STORE__DSN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.store.clickhouse.existingSecret }}
      key: {{ .Values.store.clickhouse.dsnKey }}
{{- else }}
- name: GPUFRAG_STORE__DSN
  value: chdb:///data/store
{{- end }}
{{- end }}

{{- define "gpufrag.env.kube" -}}
{{- with .Values.kube }}
{{- if .namespace }}
- name: GPUFRAG_KUBE__NAMESPACE
  value: {{ .namespace | quote }}
{{- end }}
{{- if .poolLabel }}
- name: GPUFRAG_KUBE__POOL_LABEL
  value: {{ .poolLabel | quote }}
{{- end }}
{{- if .resources }}
- name: GPUFRAG_KUBE__RESOURCES
  value: {{ .resources | toJson | quote }}
{{- end }}
{{- end }}
{{- with .Values.dcgm }}
{{- if .endpoints }}
- name: GPUFRAG_DCGM__ENDPOINTS
  value: {{ .endpoints | toJson | quote }}
{{- end }}
- name: GPUFRAG_DCGM__DISCOVER
  value: {{ .discover | quote }}
- name: GPUFRAG_DCGM__DISCOVER_SELECTOR
  value: {{ .discoverSelector | quote }}
{{- if .discoverNamespace }}
- name: GPUFRAG_DCGM__DISCOVER_NAMESPACE
  value: {{ .discoverNamespace | quote }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gpufrag.env.actuator" -}}
- name: GPUFRAG_ACTUATOR__NAMESPACE
  value: {{ .Release.Namespace | quote }}
- name: GPUFRAG_ACTUATOR__LEASE_NAME
  value: {{ .Values.actuator.leaseName | quote }}
{{- end }}

{{- define "gpufrag.env.alerts" -}}
{{- with .Values.alerts }}
- name: GPUFRAG_ALERTS__CLUSTER
  value: {{ .cluster | quote }}
{{- if .alertmanagerUrl }}
- name: GPUFRAG_ALERTS__ALERTMANAGER_URL
  value: {{ .alertmanagerUrl | quote }}
{{- end }}
{{- if .runbookBaseUrl }}
- name: GPUFRAG_ALERTS__RUNBOOK_BASE_URL
  value: {{ .runbookBaseUrl | quote }}
{{- end }}
{{- if .existingSecret }}
- name: GPUFRAG_ALERTS__SLACK_WEBHOOK_URL
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .slackWebhookUrlKey }}
      optional: true
- name: GPUFRAG_ALERTS__WEBHOOK_URL
  valueFrom:
    secretKeyRef:
      name: {{ .existingSecret }}
      key: {{ .webhookUrlKey }}
      optional: true
{{- end }}
{{- end }}
{{- end }}

{{/* Pod-level hardening, the same for every workload. */}}
{{- define "gpufrag.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.securityContext.runAsUser }}
runAsGroup: {{ .Values.securityContext.runAsGroup }}
fsGroup: {{ .Values.securityContext.fsGroup }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "gpufrag.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.securityContext.runAsUser }}
runAsGroup: {{ .Values.securityContext.runAsGroup }}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* The probes every command serves on its metrics port (streams/app/lifecycle/probes.py). */}}
{{- define "gpufrag.probes" -}}
startupProbe:
  httpGet: {path: /livez, port: metrics}
  periodSeconds: 5
  failureThreshold: 60
livenessProbe:
  httpGet: {path: /livez, port: metrics}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
readinessProbe:
  httpGet: {path: /readyz, port: metrics}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 3
{{- end }}

{{/* A metrics Service per component, for the ServiceMonitor; dict: root, component. */}}
{{- define "gpufrag.metricsService" -}}
apiVersion: v1
kind: Service
metadata:
  name: {{ include "gpufrag.component.fullname" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "gpufrag.componentLabels" . | nindent 4 }}
    gpufrag.io/metrics: "true"
spec:
  type: ClusterIP
  selector:
    {{- include "gpufrag.selectorLabels" . | nindent 4 }}
  ports:
    - name: metrics
      port: {{ .root.Values.metricsPort }}
      targetPort: metrics
      protocol: TCP
{{- end }}

{{- define "gpufrag.serviceAccount" -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "gpufrag.component.fullname" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "gpufrag.componentLabels" . | nindent 4 }}
automountServiceAccountToken: false
{{- end }}

{{- define "gpufrag.pdb" -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "gpufrag.component.fullname" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "gpufrag.componentLabels" . | nindent 4 }}
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      {{- include "gpufrag.selectorLabels" . | nindent 6 }}
{{- end }}
