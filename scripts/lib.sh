# Shared helpers for the project's scripts. Sourced, never run.
# shellcheck shell=bash

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Downloads (Kafka jars) live outside the work tree so a fresh clone reuses them.
CACHE_DIR="${EVENTGW_CACHE:-$HOME/.cache/eventgw}"
# Run-time state (broker data, logs, pids) lives inside the clone, ignored by git.
STATE_DIR="${EVENTGW_STATE:-$REPO_ROOT/.cache}"

log() { printf '%s %s\n' "[$(basename "$0")]" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Installs the named Debian packages that are not installed yet, and nothing else.
ensure_apt() {
    local missing=()
    local pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    log "installing Debian packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Everything needed to build the Rust workspace (librdkafka builds from source).
ensure_build_deps() {
    ensure_apt build-essential cmake pkg-config libcurl4-openssl-dev zlib1g-dev kcat curl
    command -v cargo >/dev/null || die "cargo is not on PATH; install Rust with rustup first"
}

# The dev config as the benchmarks run it: no quotas (they measure cost, not
# limits), the catalog and spool at absolute paths (the copy lives elsewhere).
#   bench_config OUT [PORT] [SPOOL_DIR]   PORT: listen on 127.0.0.1:PORT (else
#   dev's address); SPOOL_DIR: else the clone's target/spool
bench_config() {
    local out="$1" port="${2:-}" spool="${3:-$REPO_ROOT/target/spool}"
    local listen=()
    [ -n "$port" ] && listen=(-e "s#^listen = .*#listen = \"127.0.0.1:$port\"#")
    sed -e 's/^auth_failures = .*//' -e 's/^source = .*//' "${listen[@]}" \
        -e "s#dir = \"../../schemas\"#dir = \"$REPO_ROOT/schemas\"#" \
        -e "s#dir = \"../../target/spool\"#dir = \"$spool\"#" "$REPO_ROOT/gateway/config/dev.toml" > "$out"
}

# CPU ticks (user + system, all threads) process PID has used.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# A Java runtime and Maven, to fetch and run the Kafka broker.
ensure_java() {
    command -v java >/dev/null || ensure_apt openjdk-17-jre-headless
    command -v mvn >/dev/null || ensure_apt maven
}
