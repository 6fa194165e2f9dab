{{/* The pod, shared by the Deployment (spool off) and the StatefulSet (spool on). */}}
{{- define "eventgw.env" -}}
- name: EVENTGW_CONFIG
  value: /etc/eventgw/config/gateway.toml
- name: RUST_LOG
  value: {{ .Values.logLevel | quote }}
- name: EVENTGW__KAFKA__BROKERS
  value: {{ required "kafka.brokers is required" .Values.kafka.brokers | quote }}
- name: EVENTGW__KAFKA__REPLICATION_FACTOR
  value: {{ .Values.kafka.replicationFactor | quote }}
- name: EVENTGW__SERVER__LISTEN
  value: {{ printf "0.0.0.0:%v" .Values.gateway.port | quote }}
- name: EVENTGW__SERVER__DRAIN_GRACE_SECS
  value: {{ .Values.gateway.drainGraceSecs | quote }}
- name: EVENTGW__SERVER__SHUTDOWN_TIMEOUT_SECS
  value: {{ .Values.gateway.shutdownTimeoutSecs | quote }}
- name: EVENTGW__CATALOG__DIR
  value: /etc/eventgw/catalog
{{- if .Values.writeKey.enabled }}
- name: EVENTGW__SOURCES__0__WRITE_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "eventgw.writeKeySecret" . }}
      key: {{ .Values.writeKey.secretKey }}
{{- end }}
{{- if .Values.spool.enabled }}
- name: EVENTGW__SPOOL__ENABLED
  value: "true"
- name: EVENTGW__SPOOL__DIR
  value: /var/lib/eventgw/spool
- name: EVENTGW__SPOOL__MAX_BYTES
  value: {{ .Values.spool.maxBytes | int64 | quote }}
{{- end }}
{{- if .Values.dedupe.enabled }}
- name: EVENTGW__DEDUPE__ENABLED
  value: "true"
- name: EVENTGW__DEDUPE__STORE
  value: redis
- name: EVENTGW__DEDUPE__ON_STORE_ERROR
  value: {{ .Values.dedupe.onStoreError | quote }}
- name: EVENTGW__DEDUPE__REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ required "dedupe.redisUrlSecret.name: the Redis URL (it may hold a password) comes from a Secret" .Values.dedupe.redisUrlSecret.name }}
      key: {{ .Values.dedupe.redisUrlSecret.key }}
{{- end }}
{{- if .Values.tls.enabled }}
- name: EVENTGW__SERVER__TLS__CERT_FILE
  value: /etc/eventgw/tls/tls.crt
- name: EVENTGW__SERVER__TLS__KEY_FILE
  value: /etc/eventgw/tls/tls.key
{{- end }}
{{- if .Values.encryption.userKeysSecret }}
- name: EVENTGW__PRIVACY__USER_KEYS_DIR
  value: /etc/eventgw/user-keys
{{- end }}
{{- range $name, $value := .Values.env }}
{{- if regexMatch "(?i)((^|__)(WRITE_KEY|HASH_KEY|REDIS_URL|SECRET)$|PASSWORD|TOKEN)" $name }}
{{- fail (printf "env.%s looks like a secret: give it through secretEnv (a Secret), never in values" $name) }}
{{- end }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- range .Values.secretEnv }}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .secretName }}
      key: {{ .key }}
{{- end }}
{{- end -}}

{{- define "eventgw.podTemplate" -}}
metadata:
  labels:
    {{- include "eventgw.selectorLabels" . | nindent 4 }}
  annotations:
    # A new configuration or catalog rolls the pods (the gateway reads the
    # catalog at start; keys and quotas also reload on SIGHUP).
    checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  terminationGracePeriodSeconds: {{ include "eventgw.terminationGracePeriod" . }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 10001
    runAsGroup: 10001
    fsGroup: 10001
    seccompProfile:
      type: RuntimeDefault
  {{- if .Values.topics.create }}
  initContainers:
    # Creates the catalog's and the gateway's topics where missing (idempotent).
    - name: topics
      image: {{ printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args: ["topics"]
      env:
        {{- include "eventgw.env" . | nindent 8 }}
      securityContext:
        {{- include "eventgw.containerSecurity" . | nindent 8 }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      volumeMounts:
        {{- include "eventgw.mounts" . | nindent 8 }}
  {{- end }}
  containers:
    - name: gateway
      image: {{ printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args: ["serve"]
      ports:
        - name: http
          containerPort: {{ .Values.gateway.port }}
          protocol: TCP
      env:
        {{- include "eventgw.env" . | nindent 8 }}
      startupProbe:
        httpGet: {path: /healthz, port: http, scheme: {{ include "eventgw.scheme" . }}}
        periodSeconds: 2
        failureThreshold: 30
      livenessProbe:
        httpGet: {path: /healthz, port: http, scheme: {{ include "eventgw.scheme" . }}}
        periodSeconds: 10
        timeoutSeconds: 2
        failureThreshold: 3
      readinessProbe:
        # Red while Kafka (and the spool) cannot take events, or draining.
        httpGet: {path: /readyz, port: http, scheme: {{ include "eventgw.scheme" . }}}
        periodSeconds: {{ .Values.readiness.periodSeconds }}
        timeoutSeconds: 2
        failureThreshold: {{ .Values.readiness.failureThreshold }}
      lifecycle:
        # Endpoints are removed while this runs: load balancers stop sending
        # before SIGTERM starts the gateway's own drain.
        preStop:
          sleep:
            seconds: {{ .Values.preStopSleepSeconds }}
      securityContext:
        {{- include "eventgw.containerSecurity" . | nindent 8 }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      volumeMounts:
        {{- include "eventgw.mounts" . | nindent 8 }}
        {{- if .Values.spool.enabled }}
        - name: spool
          mountPath: /var/lib/eventgw/spool
        {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "eventgw.fullname" . }}
    - name: catalog
      configMap:
        name: {{ include "eventgw.fullname" . }}-catalog
        items:
          {{- range $path, $_ := .Files.Glob "files/catalog/*/catalog.toml" }}
          {{- $rel := trimPrefix "files/catalog/" $path }}
          - {key: {{ $rel | replace "/" "__" }}, path: {{ $rel }}}
          {{- end }}
          {{- range $path, $_ := .Files.Glob "files/catalog/*/*/*.json" }}
          {{- $rel := trimPrefix "files/catalog/" $path }}
          - {key: {{ $rel | replace "/" "__" }}, path: {{ $rel }}}
          {{- end }}
    - name: tmp
      emptyDir: {medium: Memory, sizeLimit: 16Mi}
    {{- if .Values.tls.enabled }}
    - name: tls
      secret:
        secretName: {{ required "tls.secretName: a kubernetes.io/tls Secret" .Values.tls.secretName }}
    {{- end }}
    {{- if .Values.encryption.userKeysSecret }}
    # The key store's master keys (one Secret key per generation: `1`, `2`, ...)
    # and its erased users (one Secret key per erasure, written by
    # `gateway keys forget`; optional, so an absent Secret is an empty list).
    # Both read-only: clients can make the gateway store nothing here.
    - name: user-keys
      secret:
        secretName: {{ .Values.encryption.userKeysSecret }}
    - name: erased-users
      secret:
        secretName: {{ .Values.encryption.erasedUsersSecret | default (printf "%s-erased" .Values.encryption.userKeysSecret) }}
        optional: true
    {{- end }}
    {{- range .Values.secretFiles }}
    - name: {{ .name }}
      secret:
        secretName: {{ .secretName }}
    {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  affinity:
    {{- if .Values.affinity }}
    {{- toYaml .Values.affinity | nindent 4 }}
    {{- else }}
    # Spread copies over nodes, so one node's loss is one copy's.
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels:
                {{- include "eventgw.selectorLabels" . | nindent 16 }}
    {{- end }}
{{- end -}}

{{- define "eventgw.containerSecurity" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- define "eventgw.mounts" -}}
# A directory, not a subPath: an edited ConfigMap reaches the file, and
# SIGHUP reloads keys, sources and quotas from it.
- name: config
  mountPath: /etc/eventgw/config
  readOnly: true
- name: catalog
  mountPath: /etc/eventgw/catalog
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if .Values.tls.enabled }}
- name: tls
  mountPath: /etc/eventgw/tls
  readOnly: true
{{- end }}
{{- if .Values.encryption.userKeysSecret }}
- name: user-keys
  mountPath: /etc/eventgw/user-keys/master
  readOnly: true
- name: erased-users
  mountPath: /etc/eventgw/user-keys/erased
  readOnly: true
{{- end }}
{{- range .Values.secretFiles }}
- name: {{ .name }}
  mountPath: {{ .mountPath }}
  readOnly: true
{{- end }}
{{- end -}}
