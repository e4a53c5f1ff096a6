{{- define "maat.name" -}}{{ .Chart.Name }}{{- end }}
{{- define "maat.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{ end }}
{{- end }}
{{- define "maat.labels" -}}
app.kubernetes.io/name: {{ include "maat.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}
{{- define "maat.selector" -}}
app.kubernetes.io/name: {{ include "maat.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
{{- define "maat.secretName" -}}
{{ .Values.challengeSecret.existingSecret | default (printf "%s-secret" (include "maat.fullname" .)) }}
{{- end }}
