{{/* Names, labels and the pieces every pod shares. */}}

{{- define "tandem.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "tandem.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
tandem.dev/job: {{ .Values.job.id }}
{{- end -}}

{{/* Selector labels of one component: include "tandem.selector" (list $ "worker") */}}
{{- define "tandem.selector" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ $.Chart.Name }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "tandem.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "tandem.cudaImage" -}}
{{- printf "%s:%s" .Values.cudaImage.repository (default .Chart.AppVersion .Values.cudaImage.tag) -}}
{{- end -}}

{{- define "tandem.tokenSecret" -}}
{{- default (printf "%s-token" (include "tandem.fullname" .)) .Values.job.token.existingSecret -}}
{{- end -}}

{{/* Environment every container gets: the job token (from the Secret;
     $TANDEM_TOKEN is what every service reads when --token_file is not
     given), the pod's address and name (for --host). */}}
{{- define "tandem.env" -}}
- name: TANDEM_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "tandem.tokenSecret" . }}
      key: {{ .Values.job.token.key }}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end -}}

{{- define "tandem.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
automountServiceAccountToken: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Host:port of the coordinator (its headless Service resolves to the pod). */}}
{{- define "tandem.coordinatorAddress" -}}
{{- printf "%s-coordinator:%d" (include "tandem.fullname" .) (int .Values.coordinator.port) -}}
{{- end -}}

{{- define "tandem.dataServers" -}}
{{- $fn := include "tandem.fullname" . -}}
{{- $out := list -}}
{{- range $i := until (int .Values.dataserver.replicas) -}}
{{- $out = append $out (printf "%s-dataserver-%d.%s-dataserver:%d" $fn $i $fn (int $.Values.dataserver.port)) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{- define "tandem.shardServers" -}}
{{- $fn := include "tandem.fullname" . -}}
{{- $out := list -}}
{{- range $i := until (int .Values.shardserver.replicas) -}}
{{- $out = append $out (printf "%s-shardserver-%d.%s-shardserver:%d" $fn $i $fn (int $.Values.shardserver.port)) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{- define "tandem.minWorkers" -}}
{{- if gt (int .Values.coordinator.minWorkers) 0 }}{{ .Values.coordinator.minWorkers }}{{ else }}{{ .Values.workers.replicas }}{{ end -}}
{{- end -}}
{{- define "tandem.maxWorkers" -}}
{{- if gt (int .Values.coordinator.maxWorkers) 0 }}{{ .Values.coordinator.maxWorkers }}{{ else }}{{ .Values.workers.replicas }}{{ end -}}
{{- end -}}

{{/* TLS (job.tls.secretName): the flags every service gets, the mount and
     the volume. The Secret holds tls.crt, tls.key and ca.crt (the layout
     cert-manager writes). */}}
{{- define "tandem.tlsArgs" -}}
{{- with .Values.job.tls }}
{{- if .secretName }}
- --tls_cert=/etc/tandem/tls/tls.crt
- --tls_key=/etc/tandem/tls/tls.key
- --tls_ca=/etc/tandem/tls/ca.crt
{{- if .mutual }}
- --tls_mutual
{{- end }}
{{- if .serverName }}
- --tls_server_name={{ .serverName }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "tandem.tlsMount" -}}
{{- if .Values.job.tls.secretName }}
- name: tls
  mountPath: /etc/tandem/tls
  readOnly: true
{{- end }}
{{- end -}}

{{- define "tandem.tlsVolume" -}}
{{- if .Values.job.tls.secretName }}
- name: tls
  secret:
    secretName: {{ .Values.job.tls.secretName }}
    defaultMode: 0400
{{- end }}
{{- end -}}

{{/* --trace: the flags, the traces folder's mount and its volume (values.trace). */}}
{{- define "tandem.traceArgs" -}}
{{- if .Values.trace.enabled }}
- --trace
- --trace_steps={{ .Values.trace.steps }}
- --trace_file=/var/lib/tandem/traces/
{{- end }}
{{- end -}}

{{- define "tandem.traceMount" -}}
{{- if .Values.trace.enabled }}
- name: traces
  mountPath: /var/lib/tandem/traces
{{- end }}
{{- end -}}

{{- define "tandem.traceVolume" -}}
{{- if .Values.trace.enabled }}
- name: traces
{{- if .Values.trace.volume }}
{{- toYaml .Values.trace.volume | nindent 2 }}
{{- else }}
  emptyDir: {}
{{- end }}
{{- end }}
{{- end -}}
