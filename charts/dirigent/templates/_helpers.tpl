{{/* Names, labels and the pod pieces every process shares. */}}

{{- define "dirigent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dirigent.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "dirigent.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "dirigent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: dirigent
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "api") */}}
{{- define "dirigent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dirigent.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "dirigent.componentLabels" -}}
{{ include "dirigent.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "dirigent.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* ServiceAccount name of one component: (dict "ctx" $ "component" "api") */}}
{{- define "dirigent.serviceAccountName" -}}
{{- $sa := (get .ctx.Values .component).serviceAccount -}}
{{- if $sa.create -}}
{{- default (printf "%s-%s" (include "dirigent.fullname" .ctx) .component) $sa.name -}}
{{- else -}}
{{- default "default" $sa.name -}}
{{- end -}}
{{- end -}}

{{/* One value of `settings` as the text of an environment variable. */}}
{{- define "dirigent.envValue" -}}
{{- if kindIs "slice" . -}}
{{- join "," . -}}
{{- else if and (kindIs "float64" .) (eq . (floor .)) -}}
{{- int64 . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

{{/* Metrics port of one component: (dict "ctx" $ "pod" .Values.api) */}}
{{- define "dirigent.metricsPort" -}}
{{- .pod.metricsPort | default .ctx.Values.metrics.port -}}
{{- end -}}

{{/* Environment every process gets: database, secret key, metrics port, settings:
     (dict "ctx" $ "pod" .Values.api) */}}
{{- define "dirigent.env" -}}
{{- $port := include "dirigent.metricsPort" . -}}
{{- with .ctx -}}
- name: DIRIGENT_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "database.existingSecret is required: the name of a Secret holding the PostgreSQL URL (see docs/install.md)" .Values.database.existingSecret }}
      key: {{ .Values.database.urlKey }}
- name: DIRIGENT_SECRET_KEY
  valueFrom:
    secretKeyRef:
      name: {{ required "secretKey.existingSecret is required: the name of a Secret holding a 32-byte key (openssl rand -base64 32; see docs/install.md)" .Values.secretKey.existingSecret }}
      key: {{ .Values.secretKey.key }}
- name: DIRIGENT_METRICS_PORT
  value: {{ $port | quote }}
{{- with .Values.artifacts.root }}
- name: DIRIGENT_ARTIFACT_ROOT
  value: {{ . | quote }}
{{- end }}
{{- with .Values.artifacts.connection }}
- name: DIRIGENT_ARTIFACT_CONNECTION
  value: {{ ternary . (printf "%s/%s" $.ctx.Release.Namespace .) (contains "/" .) | quote }}
{{- end }}
{{- range $key, $value := .Values.settings }}
{{- if not (kindIs "invalid" $value) }}
- name: DIRIGENT_{{ $key | snakecase | upper }}
  value: {{ include "dirigent.envValue" $value | quote }}
{{- end }}
{{- end }}
- name: DIRIGENT_KUBE_INSTALLATION
  value: {{ include "dirigent.installation" . | quote }}
- name: DIRIGENT_KUBE_PLACEMENT
  value: {{ include "dirigent.placement" . | quote }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end -}}
{{- end -}}

{{/* Pod-level fields shared by every workload: (dict "ctx" $ "pod" .Values.api) */}}
{{- define "dirigent.podCommon" -}}
{{- with .ctx.Values.image.pullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- if .ctx.Values.hostNetwork }}
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
{{- end }}
securityContext:
  {{- toYaml .ctx.Values.podSecurityContext | nindent 2 }}
{{- with .pod.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .pod.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .pod.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .pod.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
volumes:
  - name: tmp
    emptyDir: {}
  - name: data
    emptyDir: {}
{{- end -}}

{{/* Container fields shared by every workload: (dict "ctx" $ "pod" .Values.api) */}}
{{- define "dirigent.containerCommon" -}}
image: {{ include "dirigent.image" .ctx }}
imagePullPolicy: {{ .ctx.Values.image.pullPolicy }}
securityContext:
  {{- toYaml .ctx.Values.securityContext | nindent 2 }}
resources:
  {{- toYaml .pod.resources | nindent 2 }}
volumeMounts:
  - name: tmp
    mountPath: /tmp
  - name: data
    mountPath: /var/lib/dirigent
{{- end -}}

{{- define "dirigent.podMeta" -}}
labels:
  {{- include "dirigent.selectorLabels" (dict "ctx" .ctx "component" .component) | nindent 2 }}
  app.kubernetes.io/part-of: dirigent
  {{- with .pod.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  checksum/settings: {{ toJson .ctx.Values.settings | sha256sum | trunc 16 }}
  {{- with .pod.podAnnotations }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end -}}

{{/* This release's identity on every Job it creates: two installations sharing a namespace
     never adopt each other's Jobs. */}}
{{- define "dirigent.installation" -}}
{{- printf "%s.%s" .Release.Namespace .Release.Name | trunc 63 | trimSuffix "-" | trimSuffix "." -}}
{{- end -}}

{{/* The tenant namespaces, as a JSON list: tenants.namespaces, those matching
     tenants.namespaceSelector (lookup, at install and upgrade), else the release namespace. */}}
{{- define "dirigent.tenantNamespaces" -}}
{{- $t := .Values.tenants | default dict -}}
{{- $out := list -}}
{{- range ($t.namespaces | default list) }}{{ $out = append $out . }}{{ end -}}
{{- if $t.namespaceSelector -}}
{{- $found := lookup "v1" "Namespace" "" "" -}}
{{- range ($found.items | default list) -}}
{{- $labels := .metadata.labels | default dict -}}
{{- $match := true -}}
{{- range $k, $v := $t.namespaceSelector }}{{ if ne (get $labels $k) $v }}{{ $match = false }}{{ end }}{{ end -}}
{{- if $match }}{{ $out = append $out .metadata.name }}{{ end -}}
{{- end -}}
{{- end -}}
{{- if not $out }}{{ $out = list .Release.Namespace }}{{ end -}}
{{- toJson (uniq $out) -}}
{{- end -}}

{{/* DIRIGENT_KUBE_PLACEMENT: every tenant namespace runs its Jobs there, as the job
     ServiceAccount; tenants.placement adds to or overrides an entry. */}}
{{- define "dirigent.placement" -}}
{{- $t := .Values.tenants | default dict -}}
{{- $account := $t.jobServiceAccount | default "dirigent-job" -}}
{{- $placement := dict -}}
{{- range (include "dirigent.tenantNamespaces" . | fromJsonArray) -}}
{{- $_ := set $placement . (dict "serviceAccount" $account) -}}
{{- end -}}
{{- range $ns, $entry := ($t.placement | default dict) -}}
{{- $_ := set $placement $ns (merge (deepCopy $entry) (get $placement $ns | default dict)) -}}
{{- end -}}
{{- toJson $placement -}}
{{- end -}}
