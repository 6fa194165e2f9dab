{{/* Names and labels. */}}
{{- define "eventgw.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "eventgw.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "eventgw.labels" -}}
{{ include "eventgw.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The write-key Secret: the user's, or the one the chart generates. */}}
{{- define "eventgw.writeKeySecret" -}}
{{- .Values.writeKey.existingSecret | default (printf "%s-write-key" (include "eventgw.fullname" .)) -}}
{{- end -}}

{{/*
The longest a stop can take, so Kubernetes never SIGKILLs a gateway that is
still draining: the preStop pause, then the gateway's drain grace (/readyz
red, requests served), then in-flight requests (shutdown_timeout_secs), then
the producer's flush (shutdown_timeout_secs again), plus a margin.
*/}}
{{- define "eventgw.terminationGracePeriod" -}}
{{- $g := .Values.gateway -}}
{{- $stop := add .Values.preStopSleepSeconds $g.drainGraceSecs (mul 2 $g.shutdownTimeoutSecs) -}}
{{- if .Values.terminationGracePeriodSeconds -}}
{{- if le (int .Values.terminationGracePeriodSeconds) (int $stop) -}}
{{- fail (printf "terminationGracePeriodSeconds (%v) must exceed preStop + drain + 2 x shutdown (%v)" .Values.terminationGracePeriodSeconds $stop) -}}
{{- end -}}
{{- .Values.terminationGracePeriodSeconds -}}
{{- else -}}
{{- add $stop .Values.terminationGraceMarginSeconds -}}
{{- end -}}
{{- end -}}

{{- define "eventgw.scheme" -}}
{{- if .Values.tls.enabled }}HTTPS{{ else }}HTTP{{ end -}}
{{- end -}}
