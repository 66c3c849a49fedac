#!/usr/bin/env bash
# Tracker lookups per second under wrk (docs/benchmarks.md): a release `pcdn tracker` on
# SQLite (or --redis: on a local redis-server), DEVICES edges announcing one content and one
# more edge announcing another, then wrk against the first content's lookup route, and then
# against the second's while another wrk looks up the first. Installs wrk (and redis-server)
# if missing. PCDN=path/to/pcdn uses that binary instead of building one.
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
python3 -c 'import cryptography' 2>/dev/null || apt_install python3-cryptography

if [[ -z "${PCDN:-}" ]]; then
	cargo build --release --locked -p pcdn-cli
fi
pcdn=${PCDN:-${CARGO_TARGET_DIR:-target}/release/pcdn}

work=$(mktemp -d)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

"$pcdn" operator init "$work/operator" >/dev/null
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
RUST_LOG=warn "$pcdn" tracker --listen "127.0.0.1:$port" --store "$store_url" --operator-key "$work/operator/operator.pub" --ttl 7200 \
	--lookup-rate 0 --write-rate 0 --no-udp & # one source registers every device and floods: measure the store, not the limits;
# no rendezvous: the load script's devices send no UDP binding, so lookups would list them all as unreachable
pids+=($!)
for _ in $(seq 100); do curl -fs "$url/health" >/dev/null && break; sleep 0.1; done

cid=$(printf 'pcdn bench content' | sha256sum | cut -c1-64)
small=$(printf 'pcdn bench small content' | sha256sum | cut -c1-64)
python3 scripts/tracker-load.py "$url" "$work/operator/operator.key" "$devices" "$cid"
python3 scripts/tracker-load.py "$url" "$work/operator/operator.key" 1 "$small" --prefix lonely --threads 1
echo "store: $store_url; $devices devices announce $cid, one announces $small"
echo "one lookup: $(curl -fs "$url/v1/contents/$cid/servers?n=8" | head -c 200)..."
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "+ wrk -t2 -c$connections -d${seconds}s --latency $url/v1/contents/$cid/servers?n=8"
wrk -t2 -c"$connections" -d"${seconds}s" --latency "$url/v1/contents/$cid/servers?n=8"
echo "+ wrk -t2 -c$connections -d${seconds}s --latency .../$small/servers?n=8 (alone)"
wrk -t2 -c"$connections" -d"${seconds}s" --latency "$url/v1/contents/$small/servers?n=8"
echo "+ wrk -t1 -c$connections -d${seconds}s --latency .../$small/servers?n=8, while wrk -t1 -c$connections looks up $cid"
wrk -t1 -c"$connections" -d"${seconds}s" "$url/v1/contents/$cid/servers?n=8" >/dev/null &
pids+=($!)
wrk -t1 -c"$connections" -d"${seconds}s" --latency "$url/v1/contents/$small/servers?n=8"
wait "${pids[-1]}" || true
