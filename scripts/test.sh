#!/usr/bin/env bash
# The test command (README.md): formatting, lints, every test, and a short fuzz run of the
# wire decoder. Installs what it needs on a fresh Debian machine with rustup.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

step() { printf '\n== %s\n' "$*"; }

if ! command -v cargo >/dev/null 2>&1; then
	echo "test.sh: cargo is required (install Rust with rustup)" >&2
	exit 1
fi
for component in rustfmt clippy; do
	if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
		rustup component add "$component"
	fi
done

# Programs the tests run for real: redis-server (crates/tracker/tests/redis_cluster.rs), ffmpeg
# and Chromium (crates/cli/tests/video.rs). Those tests fail, never skip, without them.
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# systemd-analyze checks the example units of deploy/ (crates/cli/tests/deploy_units.rs).
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
{ command -v ffmpeg && command -v ffprobe; } >/dev/null 2>&1 || missing+=(ffmpeg)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# ip (iproute2: netns, veth, tc) and nft (nftables) build the NATed homes of
# crates/cli/tests/deploy.rs; it needs root, and fails, never skips, without them.
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v tc >/dev/null 2>&1 || missing+=(iproute2)
command -v nft >/dev/null 2>&1 || missing+=(nftables)
# nginx and curl: the other server and its clients of `pcdn bench serve-cost`
# (crates/cli/tests/bench_serve_cost.rs), which fails, never skips, without them.
{ command -v nginx || [ -x /usr/sbin/nginx ]; } >/dev/null 2>&1 || missing+=(nginx-light)
command -v curl >/dev/null 2>&1 || missing+=(curl)
# scripts/reproduce.py (its doctests below) reads TOML with tomllib: Python 3.11 or later.
python3 -c 'import tomllib' >/dev/null 2>&1 || missing+=(python3)
if [ "${#missing[@]}" -gt 0 ]; then
	step "installing ${missing[*]}"
	sudo_if_needed=()
	if [ "$(id -u)" -ne 0 ]; then sudo_if_needed=(sudo); fi
	"${sudo_if_needed[@]}" apt-get update -qq
	"${sudo_if_needed[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

mkdir -p target
step "fuzz smoke run (the 10-million run is recorded in docs/testing.md)"
scripts/fuzz.sh "${PCDN_FUZZ_RUNS:-200000}" >target/fuzz-smoke.log 2>&1 || {
	tail -n 40 target/fuzz-smoke.log
	exit 1
}
tail -n 1 target/fuzz-smoke.log

step "scripts/reproduce.py doctests (the scorecard's paired statistics)"
python3 -m doctest scripts/reproduce.py

step "cargo test"
cargo test --workspace --locked
