# Shared by scripts/nemesis and scripts/soak. Sourced, never run.
# shellcheck shell=bash

NEMESIS_MOUNTS=()

nemesis_cleanup() {
    local m
    KAFKA_CLUSTER=nemesis KAFKA_NODES=3 KAFKA_BASE_PORT=24000 "$REPO_ROOT/scripts/kafka-cluster" stop >/dev/null 2>&1 || true
    HAPROXY_INSTANCE=nemesis HAPROXY_PORT=24050 "$REPO_ROOT/scripts/haproxy" stop >/dev/null 2>&1 || true
    REDIS_INSTANCE=nemesis REDIS_PORT=24060 "$REPO_ROOT/scripts/redis" stop >/dev/null 2>&1 || true
    for m in "${NEMESIS_MOUNTS[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
}

# Installs what the run needs, checks its ports, mounts the spools' file
# systems, builds the test and sets NEMESIS_TEST_BIN; cleans up on exit.
nemesis_prepare() {
    local out="$1" port busy="" i
    ensure_apt haproxy gnuplot-nox faketime kcat
    ensure_java
    "$REPO_ROOT/scripts/kafka" fetch
    for port in $(seq 24000 24008) 24020 24021 24022 24040 24041 24042 24050 24051 24052 24060; do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then busy="$busy $port"; fi
    done
    [ -z "$busy" ] || die "ports in use:$busy (another nemesis or soak running? stop it first)"
    trap nemesis_cleanup EXIT
    rm -rf "$out"
    mkdir -p "$out"
    export NEMESIS_SPOOL_ROOT="$STATE_DIR/nemesis/spool" NEMESIS_SPOOL_TMPFS=1
    export NEMESIS_KAFKA_LIBS="$CACHE_DIR/kafka-4.1.1/libs" EVENTGW_STATE="$STATE_DIR"
    for i in 1 2 3; do
        local dir="$NEMESIS_SPOOL_ROOT/gw$i"
        umount "$dir" 2>/dev/null || true
        rm -rf "$dir"
        mkdir -p "$dir"
        if mount -t tmpfs -o size=48m "nemesis-spool-gw$i" "$dir" 2>/dev/null; then
            NEMESIS_MOUNTS+=("$dir")
        else
            NEMESIS_SPOOL_TMPFS=0
        fi
    done
    [ "$NEMESIS_SPOOL_TMPFS" = 1 ] || log "cannot mount a tmpfs here: the disk-full fault is off"
    export NEMESIS_FAKETIME=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1
    cargo test -p eventgw --test nemesis --no-run 2>&1 | tee "$out/build.log" >&2 || die "the nemesis test does not build"
    NEMESIS_TEST_BIN="$(sed -n 's|.*Executable tests/nemesis.rs (\(.*\))$|\1|p' "$out/build.log" | tail -1)"
    [ -n "$NEMESIS_TEST_BIN" ] || die "no test executable in $out/build.log"
    NEMESIS_TEST_BIN="$REPO_ROOT/$NEMESIS_TEST_BIN"
    [ -x "$NEMESIS_TEST_BIN" ] || NEMESIS_TEST_BIN="${NEMESIS_TEST_BIN#"$REPO_ROOT/"}"
    # libfaketime 0.9.10 (Debian bookworm) makes the gateway segfault at start-up (seen: exit 139 on
    # `gateway check-config`); the clock step is on only where the gateway runs under it.
    # The gateway runs from a copy, as in scripts/faults: a build during a
    # long run must not swap the binary a restarted gateway starts.
    if [ -z "${EVENTGW_GATEWAY_BIN:-}" ]; then
        mkdir -p "$out/bin"
        cp "$REPO_ROOT/target/debug/gateway" "$out/bin/gateway"
        export EVENTGW_GATEWAY_BIN="$out/bin/gateway"
    fi
    local gw="$EVENTGW_GATEWAY_BIN" clock="$out/clock-probe"
    echo "+0" >"$clock"
    if [ ! -f "$NEMESIS_FAKETIME" ]; then
        log "no libfaketime: the clock-step fault is off"; NEMESIS_FAKETIME=""
    elif ! LD_PRELOAD="$NEMESIS_FAKETIME" FAKETIME_TIMESTAMP_FILE="$clock" DONT_FAKE_MONOTONIC=1 \
        "$gw" check-config --config "$REPO_ROOT/gateway/config/dev.toml" >/dev/null 2>&1; then
        log "the gateway does not run under libfaketime here (it crashes): the clock-step fault is off"
        NEMESIS_FAKETIME=""
    fi
}
