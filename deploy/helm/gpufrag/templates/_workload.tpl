{{/*
One hardened workload running one gpufrag command; every Deployment and the DaemonSet come from
here so none can miss the security context, the resources or the probes.
dict keys: root, component, kind (Deployment | DaemonSet), replicas, args (list), env (YAML
text), mounts and volumes (YAML text, beside the /tmp emptyDir and the Kafka TLS Secrets'),
resources, ports (YAML text: container ports beside the metrics one), token (bool: mount
the ServiceAccount token; only components that call the API server do), pod (YAML text merged
into the pod spec: nodeSelector, tolerations, ...), recreate (bool: a PVC-bound single writer).
*/}}
{{- define "gpufrag.workload" -}}
{{- $root := .root }}
apiVersion: apps/v1
kind: {{ .kind }}
metadata:
  name: {{ include "gpufrag.component.fullname" . }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "gpufrag.componentLabels" . | nindent 4 }}
spec:
  {{- if eq .kind "Deployment" }}
  replicas: {{ .replicas }}
  strategy:
    {{- if .recreate }}
    type: Recreate
    {{- else }}
    type: RollingUpdate
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
    {{- end }}
  {{- else }}
  updateStrategy:
    type: RollingUpdate
    rollingUpdate: {maxUnavailable: 1}
  {{- end }}
  selector:
    matchLabels:
      {{- include "gpufrag.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "gpufrag.componentLabels" . | nindent 8 }}
    spec:
      serviceAccountName: {{ include "gpufrag.component.fullname" . }}
      automountServiceAccountToken: {{ .token }}
      enableServiceLinks: false
      securityContext:
        {{- include "gpufrag.podSecurityContext" $root | nindent 8 }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .pod }}
      {{- . | nindent 6 }}
      {{- end }}
      containers:
        - name: {{ .component }}
          image: {{ include "gpufrag.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args:
            {{- range .args }}
            - {{ . | quote }}
            {{- end }}
            - --metrics-port
            - {{ $root.Values.metricsPort | quote }}
          env:
            {{- include "gpufrag.env.common" $root | trim | nindent 12 }}
            {{- with .env }}
            {{- . | trim | nindent 12 }}
            {{- end }}
          ports:
            - name: metrics
              containerPort: {{ $root.Values.metricsPort }}
              protocol: TCP
            {{- with .ports }}
            {{- . | trim | nindent 12 }}
            {{- end }}
          {{- include "gpufrag.probes" $root | nindent 10 }}
          resources:
            {{- toYaml .resources | nindent 12 }}
          securityContext:
            {{- include "gpufrag.containerSecurityContext" $root | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- with .mounts }}
            {{- . | trim | nindent 12 }}
            {{- end }}
            {{- with include "gpufrag.kafka.mounts" $root }}
            {{- . | trim | nindent 12 }}
            {{- end }}
      volumes:
        # Python, chDB and Faust write temporary files; the root filesystem is read-only.
        - name: tmp
          emptyDir:
            sizeLimit: 1Gi
        {{- with .volumes }}
        {{- . | trim | nindent 8 }}
        {{- end }}
        {{- with include "gpufrag.kafka.volumes" $root }}
        {{- . | trim | nindent 8 }}
        {{- end }}
{{- end }}

{{/* The chDB store's claim; dict: root, component. */}}
{{- define "gpufrag.storeClaim" -}}
{{- $p := .root.Values.store.persistence }}
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: {{ include "gpufrag.component.fullname" . }}-store
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "gpufrag.componentLabels" . | nindent 4 }}
  annotations:
    # History outlives an uninstall; delete the claim by hand to drop it.
    helm.sh/resource-policy: keep
spec:
  accessModes:
    {{- toYaml $p.accessModes | nindent 4 }}
  {{- if $p.storageClassName }}
  storageClassName: {{ $p.storageClassName | quote }}
  {{- end }}
  resources:
    requests:
      storage: {{ $p.size }}
{{- end }}

{{/* Mount and volume of the chDB store at /data; dict: root, component. */}}
{{- define "gpufrag.storeMount" -}}
- name: store
  mountPath: /data
{{- end }}
{{- define "gpufrag.storeVolume" -}}
- name: store
  persistentVolumeClaim:
    claimName: {{ include "gpufrag.component.fullname" . }}-store
{{- end }}
