#!/usr/bin/env bash
# Fuzzes the wire decoder (fuzz target `decode`) with cargo-fuzz for RUNS executions.
#
# Usage: scripts/fuzz.sh [RUNS]      RUNS defaults to 10000000
#
# Needs rustup. Installs cargo-fuzz if missing; uses the nightly toolchain when rustup has one,
# else stable with RUSTC_BOOTSTRAP=1 (cargo-fuzz needs nightly-only flags such as -Zsanitizer).
# FUZZ_TOOLCHAIN=<toolchain> overrides the choice. The build goes to $CARGO_TARGET_DIR if set.
# Crashes land in fuzz/artifacts/decode/; the corpus grows in fuzz/corpus/decode/.
set -euo pipefail

runs="${1:-10000000}"
case "$runs" in
'' | *[!0-9]*)
	echo "usage: $0 [RUNS]" >&2
	exit 2
	;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if ! command -v rustup >/dev/null 2>&1; then
	echo "fuzz.sh: rustup is required (https://rustup.rs)" >&2
	exit 1
fi

export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"

toolchains="$(rustup toolchain list)"
toolchain="${FUZZ_TOOLCHAIN:-}"
if [ -z "$toolchain" ]; then
	if grep -q '^nightly' <<<"$toolchains"; then
		toolchain=nightly
	else
		toolchain=stable
	fi
fi
case "$toolchain" in
nightly*) ;;
*) export RUSTC_BOOTSTRAP=1 ;;
esac

if ! cargo fuzz --version >/dev/null 2>&1; then
	echo "fuzz.sh: installing cargo-fuzz" >&2
	cargo install cargo-fuzz --locked
fi

# libFuzzer and the sanitizer runtime link against the C++ standard library.
if ! command -v c++ >/dev/null 2>&1 && ! command -v g++ >/dev/null 2>&1; then
	echo "fuzz.sh: a C++ toolchain is needed (Debian: apt-get install build-essential)" >&2
	exit 1
fi

cd "$root/fuzz"
mkdir -p corpus/decode artifacts/decode
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

echo "fuzz.sh: cargo +$toolchain fuzz run decode -- -runs=$runs (RUSTC_BOOTSTRAP=${RUSTC_BOOTSTRAP:-unset})"
start=$(date +%s)
status=0
cargo "+$toolchain" fuzz run decode -- -runs="$runs" -max_len=1600 -print_final_stats=1 2>&1 |
	tee "$log" || status=$?
end=$(date +%s)

executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
fuzz_time=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)
echo "fuzz.sh: ${executed:-unknown} executions of target decode; libFuzzer ${fuzz_time:-?} s," \
	"$((end - start)) s wall time including the build; exit status $status"
exit "$status"
