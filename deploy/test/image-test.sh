#!/usr/bin/env bash
# The image against the local Kafka (127.0.0.1:9092), as scripts/image test
# runs it after building: `gateway topics` with the baked configuration;
# `gateway check-config` on the pod of the chart's secure values
# (secure-config.sh); then the gateway as the chart's default values run it (its ConfigMaps
# laid out as the kubelet mounts them, its environment, the write key as
# its Secret would give it, only the brokers and the listener pointed at
# this machine): the container's user and read-only root, the health check,
# one event read back with kcat, then SIGTERM during load: every request
# sent is answered, the load (like a load balancer) stops sending when
# /readyz turns red, and every messageId answered 200 is read back.
# Needs IMAGE and CONTAINERS_CONF from scripts/image.
set -euo pipefail
source "$(dirname "$0")/../../scripts/lib.sh"
cd "$REPO_ROOT"

: "${IMAGE:?run through scripts/image test}"
PORT="${IMAGE_TEST_PORT:-18480}"
RUN="img$(date +%s)$$"
NAME="eventgw-image-test-$RUN"
KEY="image-test-key-$RUN"
BROKERS="127.0.0.1:9092"
TOPIC="web.tracking"
podman_cmd() {
    podman --runtime runc --storage-driver vfs --cgroup-manager cgroupfs --events-backend file "$@"
}
fail() { podman_cmd logs "$NAME" 2>&1 | tail -30 >&2 || true; die "$*"; }

"$REPO_ROOT/scripts/kafka" status >/dev/null 2>&1 || "$REPO_ROOT/scripts/kafka" start
command -v kcat >/dev/null || ensure_apt kcat

ENV=(-e EVENTGW__KAFKA__BROKERS="$BROKERS" -e EVENTGW__KAFKA__REPLICATION_FACTOR=1
    -e EVENTGW__SERVER__LISTEN="127.0.0.1:$PORT" -e EVENTGW__SERVER__DRAIN_GRACE_SECS=3
    -e EVENTGW__SOURCES__0__WRITE_KEY="$KEY")
start=$SECONDS
log "gateway topics (the image's CLI, read-only, as eventgw)"
podman_cmd run --rm --network host --read-only --no-healthcheck "${ENV[@]}" "$IMAGE" topics

log "the pod of the chart's secure values (TLS, JWT, dedupe, privacy keys) passes check-config"
"$REPO_ROOT/deploy/test/secure-config.sh"

log "the pod of the chart's default values (helm template), in this image"
POD="$STATE_DIR/image/pod-$RUN"
"$REPO_ROOT/scripts/helm" template eventgw deploy/helm/eventgw --kube-version 1.34.3 >"$POD.yaml" 2>/dev/null
python3 deploy/test/pod_from_chart.py "$POD.yaml" "$POD" --secret EVENTGW__SOURCES__0__WRITE_KEY="$KEY" \
    --set EVENTGW__KAFKA__BROKERS="$BROKERS" --set EVENTGW__SERVER__LISTEN="127.0.0.1:$PORT" \
    --set EVENTGW__KAFKA__REPLICATION_FACTOR=1 --set EVENTGW__SERVER__DRAIN_GRACE_SECS=3
MOUNTS=()
while IFS= read -r mount; do MOUNTS+=(-v "$mount:ro"); done <"$POD/mounts"

cleanup() { podman_cmd rm -f "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT
since_ms=$(( $(date +%s) * 1000 - 1000 ))
podman_cmd run -d --name "$NAME" --network host --read-only --env-file "$POD/env" "${MOUNTS[@]}" \
    "$IMAGE" serve 2>&1 >/dev/null | grep -v 'systemd connection' >&2 || true
# (No systemd here to time the health check: `podman healthcheck run` below runs it.)
for _ in $(seq 1 100); do
    curl -fsS -o /dev/null "http://127.0.0.1:$PORT/readyz" 2>/dev/null && break
    sleep 0.2
done
curl -fsS -o /dev/null "http://127.0.0.1:$PORT/readyz" || fail "the container never became ready"
log "ready after $((SECONDS - start)) s (including the topics run)"

log "non-root, read-only root filesystem, health check"
pid="$(podman_cmd inspect --format '{{.State.Pid}}' "$NAME")"
uid="$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")"
[ "$uid" = "10001" ] || fail "the gateway runs as uid $uid, not 10001"
root_opts="$(awk '$5 == "/" {print $6}' "/proc/$pid/mountinfo" | tail -1)"
case ",$root_opts," in *,ro,*) ;; *) fail "root filesystem mounted $root_opts, not ro" ;; esac
# A real write attempt from inside: the key store creates its directory.
if written="$(podman_cmd exec -e EVENTGW__PRIVACY__USER_KEYS_DIR=/etc/eventgw/written "$NAME" \
    /usr/local/bin/gateway keys rotate 2>&1)"; then
    fail "the container could write /etc/eventgw"
fi
grep -q 'Read-only file system' <<<"$written" || fail "the write to /etc failed for another reason: $written"
# The image's HEALTHCHECK (`gateway healthcheck`, the container's own
# configuration, so the test's port) passes, and fails where nothing listens.
podman_cmd healthcheck run "$NAME" >/dev/null || fail "the image's health check failed"
if podman_cmd exec -e EVENTGW__SERVER__LISTEN=127.0.0.1:1 "$NAME" /usr/local/bin/gateway healthcheck >/dev/null 2>&1; then
    fail "the health check passed with nothing listening"
fi
echo "uid $uid, root mount $root_opts, writing /etc refused, health check healthy"

log "one event in, read back from $TOPIC"
id="$RUN-single"
answer="$(curl -fsS -u "$KEY:" -H 'Content-Type: application/json' "http://127.0.0.1:$PORT/v1/track" \
    -d "{\"type\":\"track\",\"event\":\"Link Clicked\",\"messageId\":\"$id\",\"anonymousId\":\"anon-$RUN\",\"properties\":{\"href\":\"https://example.com/image\"}}")"
echo "answer: $answer"
found="$(kcat -b "$BROKERS" -C -t "$TOPIC" -o "s@$since_ms" -e -q -f '%h %s\n' 2>/dev/null | grep -c "\"$id\"" || true)"
[ "$found" = "1" ] || fail "expected 1 record of $id on $TOPIC, read $found"
echo "read back 1 record of $id"

log "SIGTERM during load: drain"
python3 "$REPO_ROOT/deploy/test/drain_load.py" --url "http://127.0.0.1:$PORT" --key "$KEY" --run "$RUN" \
    --out "$STATE_DIR/image/acked-$RUN.txt" --kill "podman --runtime runc --storage-driver vfs --cgroup-manager cgroupfs --events-backend file kill --signal TERM $NAME"
status="$(podman_cmd wait "$NAME")"
podman_cmd logs "$NAME" 2>&1 | grep -E 'Shutting down|Draining|Closing the listener|Producer flushed|bye' | sed 's/\x1b\[[0-9;]*m//g; s/^/  gateway: /' | cut -c1-160
[ "$status" = "0" ] || fail "the gateway exited $status after SIGTERM"
kcat -b "$BROKERS" -C -t "$TOPIC" -o "s@$since_ms" -e -q -f '%s\n' 2>/dev/null \
    | grep -o "\"messageId\":\"$RUN-load-[0-9-]*\"" | sed 's/.*:"\(.*\)"/\1/' | sort >"$STATE_DIR/image/read-$RUN.txt"
sort -o "$STATE_DIR/image/acked-$RUN.txt" "$STATE_DIR/image/acked-$RUN.txt"
acked=$(wc -l <"$STATE_DIR/image/acked-$RUN.txt")
read_back=$(sort -u "$STATE_DIR/image/read-$RUN.txt" | wc -l)
lost=$(comm -23 "$STATE_DIR/image/acked-$RUN.txt" <(sort -u "$STATE_DIR/image/read-$RUN.txt") | wc -l)
echo "acknowledged $acked, distinct read back $read_back, acknowledged but missing $lost"
[ "$acked" -gt 0 ] || fail "no event was acknowledged during the load"
[ "$lost" = "0" ] || fail "$lost acknowledged events are missing from $TOPIC"
rm -rf "$POD" "$POD.yaml" "$STATE_DIR/image/acked-$RUN.txt" "$STATE_DIR/image/read-$RUN.txt"
log "image test passed in $((SECONDS - start)) s (exit $status after SIGTERM)"
