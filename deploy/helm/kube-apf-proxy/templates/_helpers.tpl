{{/* The chart's name, or nameOverride. */}}
{{- define "kube-apf-proxy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name prefix: fullnameOverride, or the release name (followed by the chart's
name unless it already contains it), at most 63 characters. */}}
{{- define "kube-apf-proxy.fullname" -}}
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

{{/* The labels every object carries. */}}
{{- define "kube-apf-proxy.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "kube-apf-proxy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kube-apf-proxy
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The proxy pods' selector (component: proxy). */}}
{{- define "kube-apf-proxy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kube-apf-proxy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: proxy
{{- end }}

{{/* The webhook pods' selector. */}}
{{- define "kube-apf-proxy.webhookSelectorLabels" -}}
app.kubernetes.io/name: {{ include "kube-apf-proxy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: admission-webhook
{{- end }}

{{- define "kube-apf-proxy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kube-apf-proxy.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The flow-control ConfigMap's name. */}}
{{- define "kube-apf-proxy.configMapName" -}}
{{- if .Values.flowControl.configMap.create }}
{{- default (printf "%s-flowcontrol" (include "kube-apf-proxy.fullname" .)) .Values.flowControl.configMap.name }}
{{- else }}
{{- required "flowControl.configMap.name is required when flowControl.configMap.create is false" .Values.flowControl.configMap.name }}
{{- end }}
{{- end }}

{{/* Whether the proxy and the webhook mount the flow-control ConfigMap. */}}
{{- define "kube-apf-proxy.mountsConfigMap" -}}
{{- if eq .Values.flowControl.source "configMap" }}true{{ end }}
{{- end }}

{{- define "kube-apf-proxy.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "kube-apf-proxy.webhookTlsSecretName" -}}
{{- default (printf "%s-webhook-tls" (include "kube-apf-proxy.fullname" .)) .Values.webhook.tlsSecretName }}
{{- end }}

{{/* Seconds of a duration written as Kubernetes writes it (60s, 1m30s, 2m, 1h). */}}
{{- define "kube-apf-proxy.seconds" -}}
{{- $total := 0 }}
{{- range $part := regexFindAll "[0-9]+[hms]" . -1 }}
{{- $n := trimSuffix "h" (trimSuffix "m" (trimSuffix "s" $part)) | int }}
{{- if hasSuffix "h" $part }}{{ $total = add $total (mul $n 3600) }}
{{- else if hasSuffix "m" $part }}{{ $total = add $total (mul $n 60) }}
{{- else }}{{ $total = add $total $n }}{{ end }}
{{- end }}
{{- $total }}
{{- end }}
