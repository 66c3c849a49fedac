#!/usr/bin/env python3
"""The papers' transport against pcdn's: each paper's scenario run on the transport its testbed
used and on pcdn's `pull`, for the papers' schedulers and weave, under CUBIC (the papers' TCP).

MPRD (Srinivasan and Aryafar, ICDCS 2025) runs a TCP connection per server: `subflow`. Kondo et
al. (INTERNET 2021) run Linux MPTCP, whose default scheduler retransmits opportunistically and
penalises slow subflows: `subflow-or`. For each file in RUNS this runs

    pcdn sim scenarios/STEM.toml --json --runs --cc cubic --scheduler S ... \\
        --transport PAPERS --transport pull [ARGS]

into docs/figures/transports/STEM/rows.json (the command and its wall time go to
docs/figures/manifest.json under "transports/STEM"), and builds the table of
docs/reproduction.md's "Transports" section: per file and scheduler, the metric on the paper's
transport, on pull, and their difference seed by seed with its 95 % confidence interval.
scripts/reproduce.py runs this too, with the same binary; alone:

    scripts/transports.py                 # run (target/release/pcdn, built first) and print the table
    scripts/transports.py --tables-only   # only print the table from the rows.json files
    scripts/transports.py --no-build --bin /path/to/pcdn

About 15 minutes on 2 cores (release build).
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile

import reproduce as rp

MPRD = ["minrtt", "pscheduler", "mprd", "weave"]
KONDO = ["minrtt", "lpc", "let", "gr-sty", "tp-sty", "tr-sty", "weave"]
GOODPUT = ("goodput Mbit/s", lambda r: r["goodput_mbps"], ".2f")
STALLS = ("stalled time %", lambda r: (r.get("player") or {}).get("stall_percentage"), ".2f")
# (stem, the paper's transport, schedulers, metric, extra arguments). The MPRD files with loss
# on one edge are the ones whose results the paper explains by head-of-line blocking; the
# 8 GB file runs twice rather than once for an interval.
RUNS = [
    ("mprd-fig7-low-loss-2servers", "subflow", MPRD, GOODPUT, []),
    ("mprd-fig7-high-loss-2servers", "subflow", MPRD, GOODPUT, ["--repeat", "2"]),
    ("mprd-fig8c-2edges", "subflow", MPRD, GOODPUT, ["--point", "200MB", "--repeat", "3"]),
] + [(f"kondo-{x}", "subflow-or", KONDO, STALLS, []) for x in "abcde"]


def command(stem, transport, schedulers, extra):
    cmd = ["target/release/pcdn", "sim", rp.toml_of(stem), "--json", "--runs", "--cc", "cubic"]
    for s in schedulers:
        cmd += ["--scheduler", s]
    return cmd + ["--transport", transport, "--transport", "pull"] + extra


def run_all(binary, figures):
    """Runs every file of RUNS with `binary`, writing rows.json files under `figures` and their
    commands into its manifest.json; returns the failures."""
    manifest_path = os.path.join(figures, "manifest.json")
    manifest = {}
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    scenarios = manifest.setdefault("scenarios", {})
    commit = rp.git("rev-parse", "--short", "HEAD").strip()
    sha = rp.sha256_file(binary)
    failures = []
    for stem, transport, schedulers, _, extra in RUNS:
        outdir = os.path.join(figures, "transports", stem)
        os.makedirs(outdir, exist_ok=True)
        cmd = command(stem, transport, schedulers, extra)
        shown = " ".join(cmd) + f" > {rp.shown_path(outdir)}/rows.json"
        proc, wall = rp.timed_run(binary, cmd, shown)
        entry = {
            "command": shown,
            "wall_s": round(wall, 1),
            "exit": proc.returncode,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": commit,
            "binary_sha256": sha,
        }
        if proc.returncode != 0:
            entry["stderr"] = proc.stderr[-2000:]
            failures.append(f"transports/{stem}: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
        else:
            with open(os.path.join(outdir, "rows.json"), "w", encoding="utf-8") as f:
                f.write(proc.stdout)
        scenarios["transports/" + stem] = entry
        with open(manifest_path, "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2)
            f.write("\n")
    return failures


def table(figures):
    """The markdown table: per file and scheduler, the paper's transport against pull."""
    manifest_path = os.path.join(figures, "manifest.json")
    scenarios = {}
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as f:
            scenarios = json.load(f).get("scenarios", {})
    lines = []
    body = [
        "| file | scheduler | metric | paper's transport | on it | on pull | difference (95 % CI) |",
        "|---|---|---|---|---|---|---|",
    ]
    for stem, transport, schedulers, (label, value, digits), _ in RUNS:
        path = os.path.join(figures, "transports", stem, "rows.json")
        entry = scenarios.get("transports/" + stem)
        lines.append(f"`{entry['command']}`" if entry else f"{stem}: (not run)")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            rows = json.load(f)
        for s in schedulers:
            on = next((r for r in rows if r["scheduler"] == s and r["transport"] == transport), None)
            pull = next((r for r in rows if r["scheduler"] == s and r["transport"] == "pull"), None)
            if on is None or pull is None:
                continue
            a, b = value(on), value(pull)
            pair = rp.paired(on, pull, value)
            if pair is None:
                diff = "-" if a is None or b is None else f"{a - b:+{digits}}"
            else:
                n, mean, half = pair
                star = "*" if abs(mean) > half else ""
                diff = f"{mean:+{digits}} ± {half:{digits}}{star} ({n} seeds)"
            done = "" if on["completed"] == on["repeats"] else f" ({on['completed']}/{on['repeats']} done)"
            body.append(
                f"| {stem} | {s} | {label} | {transport} | {rp.fmt(a, digits)}{done} | {rp.fmt(b, digits)} | {diff} |"
            )
    return "  \n".join(lines) + "\n\n" + "\n".join(body) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-build", action="store_true", help="skip cargo build")
    ap.add_argument("--bin", default=os.path.join(rp.ROOT, "target", "release", "pcdn"))
    ap.add_argument("--tables-only", action="store_true", help="only print the table")
    args = ap.parse_args()
    failures = []
    if not args.tables_only:
        if not args.no_build:
            subprocess.run(["cargo", "build", "--release", "-p", "pcdn-cli"], cwd=rp.ROOT, check=True)
        with tempfile.TemporaryDirectory() as tmp:
            binary = os.path.join(tmp, "pcdn")
            shutil.copy2(args.bin, binary)
            failures = run_all(binary, rp.DEFAULT_FIGURES)
    print(table(rp.DEFAULT_FIGURES))
    for fl in failures:
        print("FAILED " + fl)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
