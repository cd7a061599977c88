{{- define "olm-rs.name" -}}olm-rs{{- end -}}

{{- define "olm-rs.labels" -}}
app.kubernetes.io/name: olm-rs
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "olm-rs.selectorLabels" -}}
app.kubernetes.io/name: olm-rs
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "olm-rs.serviceAccountName" -}}olm-rs-controller{{- end -}}
