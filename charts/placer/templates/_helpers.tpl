{{/* Names are those of the kustomize base (k8s/): one placer per cluster. */}}
{{- define "placer.labels" -}}
app.kubernetes.io/name: placer
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The configuration placer runs with: values.config, with the release's namespace for the
Lease when none is given and the namespaced mode's list. */}}
{{- define "placer.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $election := get $config "leaderElection" | default dict -}}
{{- if not (get $election "namespace") -}}
{{- $_ := set $election "namespace" .Release.Namespace -}}
{{- end -}}
{{- $_ := set $config "leaderElection" $election -}}
{{- if .Values.namespaces -}}
{{- $_ := set $config "namespaces" .Values.namespaces -}}
{{- end -}}
{{- toYaml $config -}}
{{- end }}
