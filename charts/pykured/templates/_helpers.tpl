{{/*
Names and labels. The application is named "kured" (not the chart's name), so every object, label and
selector is the one kured's chart 6.1.0 renders for the same release: `helm upgrade` from kured's chart keeps
the DaemonSet (whose selector cannot change), its ServiceAccount, RBAC and Service.
*/}}

{{- define "pykured.name" -}}
{{- .Values.nameOverride | default "kured" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* <release>-<name>, or the release name alone when it already contains the name. */}}
{{- define "pykured.fullname" -}}
{{- $name := include "pykured.name" . -}}
{{- $full := printf "%s-%s" .Release.Name $name -}}
{{- if .Values.fullnameOverride -}}
{{- $full = .Values.fullnameOverride -}}
{{- else if contains (.Values.nameOverride | default "kured") .Release.Name -}}
{{- $full = .Release.Name -}}
{{- end -}}
{{- $full | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "pykured.chartLabel" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "pykured.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pykured.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "pykured.labels" -}}
{{ include "pykured.selectorLabels" . }}
helm.sh/chart: {{ include "pykured.chartLabel" . }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "pykured.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "pykured.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/*
The agent's arguments: kured's flags from `configuration` (kured's chart's order and conditions), then
pykured's from `pykured`, then `extraArgs`. Each line is "- <arg>". The notification URLs (notifyUrl,
slackHookUrl) and the Prometheus and Alertmanager URLs (configuration.prometheusUrl, pykured.alertmanager.url)
are not arguments: they may carry tokens or user:password, and arguments show in the pod spec and, with
hostPID, in every process list on the host. They come from a Secret (pykured.notifySecret) through the
environment.
*/}}
{{- define "pykured.kuredArgs" -}}
{{- $c := .Values.configuration -}}
- --ds-name={{ include "pykured.fullname" . }}
- --ds-namespace={{ .Release.Namespace }}
{{- range $pair := list (list "metrics-host" $c.metricsHost) (list "metrics-port" $c.metricsPort) (list "lock-ttl" $c.lockTtl) (list "lock-release-delay" $c.lockReleaseDelay) (list "alert-filter-regexp" $c.alertFilterRegexp) (list "alert-firing-only" $c.alertFiringOnly) (list "alert-filter-match-only" $c.alertFilterMatchOnly) }}
{{- if index $pair 1 }}
- --{{ index $pair 0 }}={{ index $pair 1 }}
{{- end }}
{{- end }}
{{- range $c.blockingPodSelector }}
- --blocking-pod-selector={{ . }}
{{- end }}
{{- range $pair := list (list "end-time" $c.endTime) (list "lock-annotation" $c.lockAnnotation) (list "period" $c.period) }}
{{- if index $pair 1 }}
- --{{ index $pair 0 }}={{ index $pair 1 }}
{{- end }}
{{- end }}
{{- if $c.forceReboot }}
- --force-reboot
{{- end }}
{{- range $pair := list (list "drain-grace-period" $c.drainGracePeriod) (list "drain-pod-selector" $c.drainPodSelector) (list "drain-delay" $c.drainDelay) (list "drain-timeout" $c.drainTimeout) (list "skip-wait-for-delete-timeout" $c.skipWaitForDeleteTimeout) }}
{{- if index $pair 1 }}
- --{{ index $pair 0 }}={{ index $pair 1 }}
{{- end }}
{{- end }}
{{- range $pair := list (list "reboot-days" $c.rebootDays) (list "pre-reboot-node-labels" $c.preRebootNodeLabels) (list "post-reboot-node-labels" $c.postRebootNodeLabels) }}
{{- range index $pair 1 }}
- --{{ index $pair 0 }}={{ . }}
{{- end }}
{{- end }}
{{- if $c.rebootSentinel }}
{{- if $c.useRebootSentinelHostPath }}
- --reboot-sentinel=/sentinel/{{ base $c.rebootSentinel }}
{{- else }}
- --reboot-sentinel={{ $c.rebootSentinel }}
{{- end }}
{{- end }}
{{- if and $c.rebootSentinelCommand (not $c.useRebootSentinelHostPath) }}
- --reboot-sentinel-command={{ $c.rebootSentinelCommand }}
{{- end }}
{{- range $pair := list (list "reboot-command" $c.rebootCommand) (list "reboot-delay" $c.rebootDelay) (list "reboot-method" $c.rebootMethod) (list "reboot-signal" $c.rebootSignal) }}
{{- if index $pair 1 }}
- --{{ index $pair 0 }}={{ index $pair 1 }}
{{- end }}
{{- end }}
{{- range $pair := list (list "slack-channel" $c.slackChannel) (list "slack-username" $c.slackUsername) }}
{{- if index $pair 1 }}
- --{{ index $pair 0 }}={{ tpl (index $pair 1) $ }}
{{- end }}
{{- end }}
{{- range $pair := list (list "message-template-drain" $c.messageTemplateDrain) (list "message-template-reboot" $c.messageTemplateReboot) (list "message-template-uncordon" $c.messageTemplateUncordon) (list "start-time" $c.startTime) (list "time-zone" $c.timeZone) (list "annotate-nodes" $c.annotateNodes) (list "prefer-no-schedule-taint" $c.preferNoScheduleTaint) (list "log-format" $c.logFormat) (list "concurrency" $c.concurrency) }}
{{- if index $pair 1 }}
- --{{ index $pair 0 }}={{ index $pair 1 }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "pykured.signalRelay" -}}
{{- if and (eq (toString .Values.configuration.rebootMethod) "signal") (ne .Values.pykured.signalRelay false) -}}
true
{{- end -}}
{{- end -}}

{{- define "pykured.ownArgs" -}}
{{- $p := .Values.pykured -}}
{{- if include "pykured.signalRelay" . }}
- --reboot-signal-relay=/relay/reboot
{{- end }}
{{- range $pair := list (list "lock-backend" $p.lockBackend) (list "lease-prefix" $p.leasePrefix) (list "policy-configmap" $p.policyConfigMap) (list "concurrency-label" $p.concurrencyLabel) (list "concurrency-per-label" $p.concurrencyPerLabel) (list "settle-prometheus-query" $p.settle.prometheusQuery) (list "settle-timeout" $p.settle.timeout) (list "reboot-hook-timeout" $p.hooks.timeout) (list "fleetlock-listen" $p.fleetlock.listen) (list "fleetlock-group" $p.fleetlock.group) (list "log-level" $p.logLevel) }}
{{- if index $pair 1 }}
- --{{ index $pair 0 }}={{ index $pair 1 }}
{{- end }}
{{- end }}
{{- with $p.maxUnavailable }}
- --max-unavailable={{ . }}
{{- end }}
{{- with $p.drainEscalation }}
- --drain-escalation={{ join "," . }}
{{- end }}
{{- with $p.rebootConditions }}
{{- range .conditions }}
- --reboot-condition={{ . }}
{{- end }}
{{- with .max }}
- --reboot-condition-max={{ . }}
{{- end }}
{{- with .period }}
- --reboot-condition-period={{ . }}
{{- end }}
{{- with .fleetMax }}
- --reboot-condition-fleet-max={{ . }}
{{- end }}
{{- end }}
{{- range $pair := list (list "maintenance-window" $p.maintenanceWindows) (list "blackout" $p.blackouts) (list "settle-pod-selector" $p.settle.podSelectors) (list "blocking-node-label" $p.blockingNodeLabels) (list "blocking-node-annotation" $p.blockingNodeAnnotations) }}
{{- range index $pair 1 }}
- --{{ index $pair 0 }}={{ . }}
{{- end }}
{{- end }}
{{- range $pair := list (list "before-reboot-annotations" $p.hooks.beforeReboot) (list "after-reboot-annotations" $p.hooks.afterReboot) }}
{{- with index $pair 1 }}
- --{{ index $pair 0 }}={{ join "," . }}
{{- end }}
{{- end }}
{{- range $pair := list (list "resume-rolls" $p.resumeRolls) (list "settle-pdbs" $p.settle.pdbs) (list "settle-nodes-ready" $p.settle.nodesReady) }}
{{- if index $pair 1 }}
- --{{ index $pair 0 }}
{{- end }}
{{- end }}
{{- with $p.alertmanager }}
{{- range $pair := list (list "silence-during-reboot" .silenceDuringReboot) (list "silence-max" .silenceMax) }}
{{- if index $pair 1 }}
- {{ printf "--%s=%s" (index $pair 0) (index $pair 1) | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- if not $p.events }}
- --events=false
{{- end }}
{{- with $p.autoscalerAnnotations }}
{{- range $pair := list (list "cluster-autoscaler-annotation" .clusterAutoscaler "cluster-autoscaler.kubernetes.io/scale-down-disabled") (list "karpenter-annotation" .karpenter "karpenter.sh/do-not-disrupt") }}
{{- if ne (index $pair 1) (index $pair 2) }}
- {{ printf "--%s=%s" (index $pair 0) (index $pair 1) | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "pykured.extraArgs" -}}
{{- range $key, $value := .Values.extraArgs }}
{{- if $value }}
- --{{ $key }}={{ $value }}
{{- else }}
- --{{ $key }}
{{- end }}
{{- end }}
{{- end -}}

{{/* The Lease lock's name prefix: --lease-prefix, default <ds-name>-lock. */}}
{{- define "pykured.leasePrefix" -}}
{{- .Values.pykured.leasePrefix | default (printf "%s-lock" (include "pykured.fullname" .)) -}}
{{- end -}}

{{/* The number of lock slots (--concurrency; 0 or unset is 1). */}}
{{- define "pykured.concurrency" -}}
{{- max 1 (int (.Values.configuration.concurrency | default 1)) -}}
{{- end -}}

{{/* The user name the agents' ServiceAccount tokens authenticate as. */}}
{{/*
The release's id in the admission policies: the agents' ClusterRole carries the marker permission `use` on
`agents.pykured.dev` with this resource name (it grants nothing), and the policies apply to the tokens that
hold it, so two releases in one cluster each narrow only their own agents.
*/}}
{{- define "pykured.installId" -}}
{{ .Release.Namespace }}/{{ include "pykured.fullname" . }}
{{- end -}}

{{/* The matchConditions of the agents' policies: the release's marker, and not a cluster admin. */}}
{{- define "pykured.agentMatch" -}}
- name: pykured-agent
  expression: >-
    request.userInfo.username.startsWith('system:serviceaccount:')
    && authorizer.group('pykured.dev').resource('agents').name('{{ include "pykured.installId" . }}').check('use').allowed()
- name: not-a-cluster-admin
  expression: >-
    !request.userInfo.username.startsWith('system:serviceaccount:')
    || !authorizer.group('pykured.dev').resource('agents').check('never').allowed()
{{- end -}}

{{/* A list of strings as a CEL list literal: ['a', 'b']. */}}
{{- define "pykured.celList" -}}
[{{- range $i, $v := . }}{{ if $i }}, {{ end }}'{{ $v | replace "\\" "\\\\" | replace "'" "\\'" }}'{{ end -}}]
{{- end -}}

{{/* The Secret the agent's URLs come from: notifications, Prometheus, Alertmanager ("" when there is none). */}}
{{- define "pykured.notifySecret" -}}
{{- $c := .Values.configuration -}}
{{- if .Values.pykured.notificationSecret -}}
{{- .Values.pykured.notificationSecret -}}
{{- else if or $c.notifyUrl $c.slackHookUrl $c.prometheusUrl (.Values.pykured.alertmanager).url -}}
{{- printf "%s-notify" (include "pykured.fullname" . | trunc 56 | trimSuffix "-") -}}
{{- end -}}
{{- end -}}
