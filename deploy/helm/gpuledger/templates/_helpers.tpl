{{- define "gpuledger.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gpuledger.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "gpuledger.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gpuledger.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "gpuledger.clickhouseSecret" -}}
{{- .Values.clickhouse.existingSecret | default (printf "%s-clickhouse" (include "gpuledger.fullname" .)) -}}
{{- end -}}

{{- define "gpuledger.tokensSecret" -}}
{{- .Values.auth.existingSecret | default (printf "%s-tokens" (include "gpuledger.fullname" .)) -}}
{{- end -}}

{{/* The ledger flags and, for ClickHouse, the DSN from its Secret. */}}
{{- define "gpuledger.ledgerArgs" -}}
- -ledger.store={{ .Values.ledger.store }}
{{- if eq .Values.ledger.store "embedded" }}
- -ledger.path=/var/lib/gpuledger/ledger
{{- else }}
- -clickhouse.dsn=$(GPULEDGER_CLICKHOUSE_DSN)
- -clickhouse.spoolDir=/var/lib/gpuledger/spool
{{- end }}
{{- end -}}

{{- define "gpuledger.ledgerEnv" -}}
{{- if eq .Values.ledger.store "clickhouse" }}
- name: GPULEDGER_CLICKHOUSE_DSN
  valueFrom:
    secretKeyRef:
      name: {{ include "gpuledger.clickhouseSecret" . }}
      key: {{ .Values.clickhouse.existingSecretKey }}
{{- end }}
{{- end -}}

{{- define "gpuledger.checks" -}}
{{- if not .Values.config }}{{ fail "config is required: the configuration file (teams, queues, prices) as YAML; see examples/cluster.yaml" }}{{ end }}
{{- if and (eq .Values.ledger.store "clickhouse") (not .Values.clickhouse.existingSecret) (not .Values.clickhouse.dsn) }}{{ fail "ledger.store=clickhouse needs clickhouse.existingSecret or clickhouse.dsn" }}{{ end }}
{{- if and .Values.controller.enabled (ne .Values.ledger.store "clickhouse") }}{{ fail "controller.enabled needs ledger.store=clickhouse: the controller reads the ledger serve writes, and the embedded ledger is a file on serve's volume" }}{{ end }}
{{- if and (gt (int .Values.serve.replicas) 1) (ne .Values.ledger.store "clickhouse") }}{{ fail "serve.replicas above 1 needs ledger.store=clickhouse: replicas share the ledger (active-active), and the embedded ledger is a file on one pod's volume" }}{{ end }}
{{- if and (not .Values.auth.disabled) (not .Values.auth.existingSecret) (not .Values.auth.tokens) }}{{ fail "serve needs API tokens: set auth.existingSecret or auth.tokens (gpuledger token -name NAME -scope SCOPE makes one), or auth.disabled=true for a trial" }}{{ end }}
{{- end -}}

{{- /* The scheme serve's port speaks: HTTPS with serve.tls. */ -}}
{{- define "gpuledger.scheme" -}}
{{- if .Values.serve.tls.secretName }}HTTPS{{ else }}HTTP{{ end -}}
{{- end -}}

{{- /* How the operators' scrape objects reach serve with serve.tls: HTTPS,
the certificate checked against the Secret's ca.crt (cert-manager writes
it) for the Service's name. */ -}}
{{- define "gpuledger.scrapeTLS" -}}
{{- with .Values.serve.tls.secretName -}}
scheme: https
tlsConfig:
  ca: {secret: {name: {{ . }}, key: ca.crt}}
  serverName: {{ include "gpuledger.fullname" $ }}.{{ $.Release.Namespace }}.svc
{{- end -}}
{{- end -}}
