#!/usr/bin/env bash
# The pod of deploy/helm/ci/values-secure.yaml (TLS, a JWT issuer with an
# HMAC secret and an RS256 public key, dedupe in Redis, the hash key and
# per-user encryption keys) passes `gateway check-config` in the image:
# the chart's ConfigMaps and environment, the Secrets' values and files
# made up here (a self-signed certificate, a fresh RSA key). Proves the
# chart's way of giving secrets (environment overrides of array elements,
# files named in extraConfig) is one the gateway's loader accepts.
# Needs IMAGE and CONTAINERS_CONF (scripts/image test runs it).
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
cd "$REPO_ROOT"
: "${IMAGE:?run through scripts/image test}"

DIR="$STATE_DIR/image/secure-$$"
rm -rf "$DIR"
mkdir -p "$DIR"/{tls,jwt,user-keys,erased-users}
# The key store's first master key, as `gateway keys rotate` writes it: the
# Secret is read-only in the pod, so the gateway must not need to write there.
head -c 32 /dev/urandom >"$DIR/user-keys/1"
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=eventgw -days 1 \
    -keyout "$DIR/tls/tls.key" -out "$DIR/tls/tls.crt" 2>/dev/null
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$DIR/issuer.key" 2>/dev/null
openssl pkey -in "$DIR/issuer.key" -pubout -out "$DIR/jwt/issuer.pub.pem"
# Secret volumes are world-readable files by default (defaultMode 0644).
chmod -R a+rX "$DIR"
scripts/helm template eventgw deploy/helm/eventgw --kube-version 1.34.3 \
    -f deploy/helm/ci/values-secure.yaml >"$DIR/manifest.yaml" 2>/dev/null
python3 deploy/test/pod_from_chart.py "$DIR/manifest.yaml" "$DIR/pod" \
    --secret-dir tls="$DIR/tls" --secret-dir jwt-keys="$DIR/jwt" --secret-dir user-keys="$DIR/user-keys" \
    --secret-dir erased-users="$DIR/erased-users" \
    --secret EVENTGW__SOURCES__0__WRITE_KEY="secure-write-key-$$" \
    --secret EVENTGW__DEDUPE__REDIS_URL="redis://:password@127.0.0.1:6390/0" \
    --secret EVENTGW__JWT__ISSUERS__0__KEYS__0__SECRET="$(openssl rand -hex 32)" \
    --secret EVENTGW__PRIVACY__HASH_KEY="$(openssl rand -hex 32)" \
    --set EVENTGW__KAFKA__BROKERS=127.0.0.1:9092
mounts=()
while IFS= read -r mount; do mounts+=(-v "$mount:ro"); done <"$DIR/pod/mounts"
podman --runtime runc --storage-driver vfs --cgroup-manager cgroupfs --events-backend file \
    run --rm --network host --read-only --no-healthcheck --env-file "$DIR/pod/env" "${mounts[@]}" \
    "$IMAGE" check-config
rm -rf "$DIR"
