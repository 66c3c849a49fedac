#!/usr/bin/env bash
# Re-runs the fleet reproductions and regenerates docs/figures/fleet/ and the generated
# blocks "fleet-ab" and "fleet-placements" of docs/reproduction.md:
#
#   scenarios/pscheduler-ab-day.toml   Pscheduler's online A/B test (Figs. 10-14) on a
#                                      simulated day: minRTT, Pscheduler and weave groups
#   scenarios/fleet-placements.toml    CDN share and billed rate per placement policy,
#                                      against the CDN-only fleet (placement none)
#
# Each runs once (`pcdn sim FILE --plot docs/figures/fleet/STEM`); its table goes to
# docs/figures/fleet/STEM.txt under a header with the command, the commit and the run time.
# About 15 minutes on 2 cores. PCDN_BIN=path uses that binary instead of building one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -z "${PCDN_BIN:-}" ]; then
    cargo build --release -p pcdn-cli
    PCDN_BIN=target/release/pcdn
fi
bin=$(mktemp)
trap 'rm -f "$bin"' EXIT
# A copy, so that a concurrent build cannot swap the binary halfway.
cp "$PCDN_BIN" "$bin"
chmod +x "$bin"
out=docs/figures/fleet
mkdir -p "$out"
commit=$(git rev-parse --short HEAD)
dirty=$(git status --porcelain --untracked-files=no | wc -l)
for stem in pscheduler-ab-day fleet-placements; do
    start=$(date +%s)
    table=$("$bin" sim "scenarios/$stem.toml" --plot "$out/$stem")
    took=$(($(date +%s) - start))
    {
        echo "\$ pcdn sim scenarios/$stem.toml --plot $out/$stem"
        echo "# commit $commit ($dirty files uncommitted), $(date -u +%Y-%m-%d), ${took} s wall on $(nproc) cores"
        echo
        echo "$table"
    } > "$out/$stem.txt"
    # The block between the markers in docs/reproduction.md becomes the table, verbatim.
    python3 - "$stem" "$out/$stem.txt" <<'PY'
import pathlib, re, sys
stem, table = sys.argv[1], pathlib.Path(sys.argv[2]).read_text()
key = {"pscheduler-ab-day": "fleet-ab", "fleet-placements": "fleet-placements"}[stem]
doc = pathlib.Path("docs/reproduction.md")
text = doc.read_text()
begin, end = f"<!-- BEGIN generated {key} -->", f"<!-- END generated {key} -->"
if begin not in text:
    sys.exit(f"docs/reproduction.md has no {begin} block")
block = f"{begin}\n```text\n{table.rstrip()}\n```\n{end}"
text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
doc.write_text(text)
PY
    echo "wrote $out/$stem.txt and $out/$stem/*.png (${took} s)" >&2
done
