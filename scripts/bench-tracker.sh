#!/usr/bin/env bash
# Tracker lookups per second under wrk (docs/benchmarks.md): a release `pcdn tracker` on
# SQLite (or --redis: on a local redis-server), DEVICES edges and an origin announcing one
# content, then wrk against the lookup route. Installs wrk (and redis-server) if missing.
#
#   scripts/bench-tracker.sh [--redis] [DEVICES] [SECONDS] [CONNECTIONS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

store=sqlite
if [[ "${1:-}" == "--redis" ]]; then
	store=redis
	shift
fi
devices=${1:-30}
seconds=${2:-15}
connections=${3:-32}

apt_install() {
	local sudo=""
	[[ $(id -u) -ne 0 ]] && sudo=sudo
	$sudo apt-get update -qq && $sudo apt-get install -y -qq "$@"
}
command -v wrk >/dev/null || apt_install wrk
[[ $store == redis ]] && { command -v redis-server >/dev/null || apt_install redis-server; }

cargo build --release --locked -p pcdn-cli
pcdn=${CARGO_TARGET_DIR:-target}/release/pcdn

work=$(mktemp -d)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

echo "bench-tracker-secret" >"$work/SECRET"
if [[ $store == redis ]]; then
	redis_port=$(free_port)
	redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" >/dev/null &
	pids+=($!)
	store_url="redis://127.0.0.1:$redis_port/0"
	sleep 0.5
else
	store_url="sqlite:$work/t.db"
fi
port=$(free_port)
url="http://127.0.0.1:$port"
RUST_LOG=warn "$pcdn" tracker --listen "127.0.0.1:$port" --store "$store_url" --secret-file "$work/SECRET" --ttl 600 &
pids+=($!)
for _ in $(seq 100); do curl -fs "$url/health" >/dev/null && break; sleep 0.1; done

auth="Authorization: Bearer bench-tracker-secret"
cid=$(printf 'pcdn bench content' | sha256sum | cut -c1-64)
for i in $(seq "$devices"); do
	curl -fs -H "$auth" -H 'content-type: application/json' -X POST "$url/v1/devices" \
		-d "{\"id\":\"edge-$i\",\"addr\":\"127.0.0.1:$((20000 + i))\",\"origin\":false,\"upload_capacity_bps\":$((1000000 * i))}" >/dev/null
	curl -fs -H "$auth" -H 'content-type: application/json' -X POST "$url/v1/devices/edge-$i/heartbeat" \
		-d "{\"sessions\":$((i % 7)),\"upload_bps\":$((300000 * (i % 5))),\"healthy\":true}" >/dev/null
	curl -fs -H "$auth" -H 'content-type: application/json' -X PUT "$url/v1/devices/edge-$i/contents" \
		-d "{\"contents\":[\"$cid\"]}" >/dev/null
done
echo "store: $store_url; $devices devices announce $cid"
echo "one lookup: $(curl -fs "$url/v1/contents/$cid/servers?n=8" | head -c 200)..."
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "+ wrk -t2 -c$connections -d${seconds}s --latency $url/v1/contents/$cid/servers?n=8"
wrk -t2 -c"$connections" -d"${seconds}s" --latency "$url/v1/contents/$cid/servers?n=8"
