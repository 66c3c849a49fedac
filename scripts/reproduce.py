#!/usr/bin/env python3
"""Re-run the paper-reproduction scenarios and regenerate docs/figures/ (or --out DIR).

For every scenarios/pscheduler-*.toml, scenarios/mprd-*.toml and scenarios/kondo-*.toml this
runs

    pcdn sim scenarios/STEM.toml --json [--plot docs/figures/STEM]

(--plot only for files with a [sweep]) and keeps the JSON rows in
docs/figures/STEM/rows.json. It then writes

    docs/figures/transports/STEM/rows.json
                                 the papers' files on their testbeds' transport and on pull
                                 (scripts/transports.py; `--only transports` runs these alone)
    docs/figures/manifest.json   date, git commit, uncommitted files, binary hash, and per
                                 scenario the exact command, wall time, exit status, warnings
    docs/figures/tables.md       every table, every scheduler, built from the rows.json files
                                 (MPRD Fig. 7 and Pscheduler Fig. 18 grouped into one table per
                                 panel, with the server/path count)

    docs/figures/fleet/STEM.txt  the fleet files (scenarios/pscheduler-ab-day.toml, Pscheduler's
                                 A/B test, and scenarios/fleet-placements.toml), one run each,
                                 with their charts in docs/figures/fleet/STEM/
                                 (`--only ab-day --only fleet-placements` runs these alone)

and refills the generated blocks of docs/reproduction.md (between
"<!-- BEGIN generated KEY -->" and "<!-- END generated KEY -->"): short tables as in tables.md,
long ones cut to the papers' schedulers and weave or to their commands, with a link to the full
table (page_block). The prose around them is written by hand and must be re-checked when the
numbers move.

Extra runs that are not paper figures live in docs/figures/extra/*.toml (stems "extra/NAME").

and prints a warning for every row that looks broken (aggregation > 1, incomplete repeats).

Usage (from anywhere; Python 3 standard library only):

    scripts/reproduce.py                  # build, run every scenario, write tables
    scripts/reproduce.py --only fig15     # only scenarios whose stem contains "fig15"
    scripts/reproduce.py --tables-only    # only rebuild tables.md from the rows.json files
    scripts/reproduce.py --replot         # only redraw the sweeps' charts from their rows.json
    scripts/reproduce.py --no-build --bin /path/to/pcdn
    scripts/reproduce.py --out ~/pcdn-figures   # write everything into a folder of your own

A full run takes two to four hours on 2 cores (each scenario's progress is passed on to stderr
every few seconds); --only takes a few minutes a file.

The binary is copied to a temporary file before the runs, so a concurrent `cargo build`
cannot swap it halfway through.
"""

import argparse
import datetime
import functools
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import types
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIOS = os.path.join(ROOT, "scenarios")
DEFAULT_FIGURES = os.path.join(ROOT, "docs", "figures")
# Where rows, plots, the manifest and tables.md are written (--out); the repository's own by default.
FIGURES = DEFAULT_FIGURES
# The extra runs' scenario files (inputs, whatever --out says).
EXTRA = os.path.join(DEFAULT_FIGURES, "extra")


def stems():
    """Reproduction scenarios, in the order of docs/reproduction.md, then the extra runs
    (docs/figures/extra/*.toml, stems "extra/NAME")."""
    names = sorted(
        f[:-5]
        for f in os.listdir(SCENARIOS)
        if f.endswith(".toml")
        and f.startswith(("pscheduler-", "mprd-", "kondo-"))
        and f[:-5] not in FLEET_BLOCKS
    )

    def key(stem):
        # Pscheduler before MPRD, then figure number, then numeric suffix (2servers < 10servers).
        paper = 0 if stem.startswith("pscheduler") else 1 if stem.startswith("mprd") else 2
        parts = [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", stem)]
        return (paper, parts)

    extra = sorted(
        "extra/" + f[:-5] for f in os.listdir(EXTRA) if f.endswith(".toml")
    ) if os.path.isdir(EXTRA) else []
    return sorted(names, key=key) + extra


# Fleet files (one run each, a text table and charts in FIGURES/fleet/) and the generated
# block of docs/reproduction.md each fills.
FLEET_BLOCKS = {"pscheduler-ab-day": "fleet-ab", "fleet-placements": "fleet-placements"}


def run_fleet(binary, selected, commit):
    """Runs each selected fleet file once (`pcdn sim FILE --plot FIGURES/fleet/STEM`) into
    FIGURES/fleet/STEM.txt, under a header with the command, the commit and the run time.
    Returns failures."""
    failures = []
    outdir = os.path.join(FIGURES, "fleet")
    os.makedirs(outdir, exist_ok=True)
    for stem in selected:
        plots = shown_path(os.path.join(outdir, stem))
        cmd = ["target/release/pcdn", "sim", toml_of(stem), "--plot", plots]
        shown = " ".join(["pcdn"] + cmd[1:])
        proc, wall = timed_run(binary, cmd, shown)
        if proc.returncode != 0:
            failures.append(f"{stem}: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
            continue
        day = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
        header = f"$ {shown}\n# commit {commit}, {day}, {wall:.0f} s wall on {os.cpu_count()} cores\n\n"
        with open(os.path.join(outdir, stem + ".txt"), "w", encoding="utf-8") as f:
            f.write(header + proc.stdout.rstrip() + "\n")
        manifest_path = os.path.join(FIGURES, "manifest.json")
        manifest = {}
        if os.path.exists(manifest_path):
            with open(manifest_path, encoding="utf-8") as f:
                manifest = json.load(f)
        manifest.setdefault("scenarios", {})["fleet/" + stem] = {
            "command": shown,
            "wall_s": round(wall, 1),
            "exit": proc.returncode,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": commit,
            "binary_sha256": sha256_file(binary),
        }
        with open(manifest_path, "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2)
            f.write("\n")
    return failures


def fleet_blocks():
    """The fleet tables for docs/reproduction.md's generated blocks, from FIGURES/fleet/*.txt."""
    out = {}
    for stem, key in FLEET_BLOCKS.items():
        path = os.path.join(FIGURES, "fleet", stem + ".txt")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                out[key] = "```text\n" + f.read().rstrip("\n") + "\n```\n"
    return out


def toml_of(stem):
    """The scenario file of a stem, relative to the repository root."""
    if stem.startswith("extra/"):
        return os.path.join("docs", "figures", stem + ".toml")
    return os.path.join("scenarios", stem + ".toml")


def shown_path(path):
    """`path` relative to the repository root when it lies inside it, absolute otherwise (the
    runs start in the root, so either works in a command line)."""
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


def has_sweep(path):
    with open(path, encoding="utf-8") as f:
        return any(line.strip() == "[sweep]" for line in f)


def git(*args):
    try:
        return subprocess.run(
            ["git", "-C", ROOT, *args], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def row_warnings(stem, rows):
    out = []
    for r in rows:
        label = f"{stem}: {r['scheduler']}/{r['cc']}" + (
            f" @ {r['sweep']}" if r.get("sweep") is not None else ""
        )
        # Fleet rows (an A/B file's) carry neither aggregation nor repeats.
        if r.get("aggregation", 0.0) > 1.0 + 1e-9:
            out.append(f"{label}: aggregation {r['aggregation']:.3f} > 1")
        if r.get("completed", 0) < r.get("repeats", 0):
            out.append(f"{label}: only {r['completed']}/{r['repeats']} repeats completed")
    return out


def timed_run(binary, cmd, shown, label="=="):
    """Runs `cmd` (its first word stands for `binary`) from the repository root, printing
    `shown` before and the wall time and exit status after, and passing on the run's progress
    lines (stderr) as they come; returns the finished run (returncode, stdout, stderr) and its
    seconds."""
    print(f"{label} {shown}", flush=True)
    start = time.monotonic()
    child = subprocess.Popen(
        [binary] + cmd[1:], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    err_lines = []

    def relay():
        for line in child.stderr:
            err_lines.append(line)
            print("   " + line.rstrip(), file=sys.stderr, flush=True)

    relayer = threading.Thread(target=relay, daemon=True)
    relayer.start()
    stdout = child.stdout.read()
    child.wait()
    relayer.join()
    wall = time.monotonic() - start
    print(f"   {wall:.1f} s, exit {child.returncode}", flush=True)
    return types.SimpleNamespace(returncode=child.returncode, stdout=stdout, stderr="".join(err_lines)), wall


def run_all(binary, selected, built, fresh):
    """Runs the selected files into FIGURES/STEM/rows.json and records each run in
    manifest.json; `fresh` (a full run) forgets the runs recorded before. Returns failures."""
    manifest_path = os.path.join(FIGURES, "manifest.json")
    manifest = {}
    if os.path.exists(manifest_path) and not fresh:
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    manifest.setdefault("scenarios", {})
    status = git("status", "--short", "--untracked-files=no").splitlines()
    manifest.update(
        {
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": git("rev-parse", "--short", "HEAD").strip(),
            "uncommitted": [s.strip() for s in status],
            "diff_sha256": hashlib.sha256(git("diff").encode()).hexdigest(),
            "binary_sha256": sha256_file(binary),
            # With --no-build the working tree may not be what the binary was built from.
            "built_just_before": built,
        }
    )
    failures = []
    for stem in selected:
        toml = toml_of(stem)
        outdir = shown_path(os.path.join(FIGURES, stem))
        os.makedirs(os.path.join(ROOT, outdir), exist_ok=True)
        cmd = ["target/release/pcdn", "sim", toml, "--json"]
        if not stem.startswith("extra/"):
            # Each run's own metrics, for the scorecard's paired comparison over seeds.
            cmd += ["--runs"]
        if has_sweep(os.path.join(ROOT, toml)) and not stem.startswith("extra/"):
            cmd += ["--plot", outdir]
        shown = " ".join(cmd) + f" > {outdir}/rows.json"
        proc, wall = timed_run(binary, cmd, shown)
        entry = {
            "command": shown,
            "wall_s": round(wall, 1),
            "exit": proc.returncode,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "commit": manifest["commit"],
            "binary_sha256": manifest["binary_sha256"],
        }
        if proc.returncode != 0:
            entry["stderr"] = proc.stderr[-2000:]
            failures.append(f"{stem}: exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
            print(proc.stderr, file=sys.stderr)
        else:
            rows = json.loads(proc.stdout)
            with open(os.path.join(ROOT, outdir, "rows.json"), "w", encoding="utf-8") as f:
                f.write(proc.stdout)
            # An A/B file's output is {"ab": ..., "rows": [...]}; a plain file's, the rows.
            entry["warnings"] = row_warnings(stem, rows["rows"] if isinstance(rows, dict) else rows)
            for w in entry["warnings"]:
                print("WARNING " + w, flush=True)
        manifest["scenarios"][stem] = entry
        with open(manifest_path, "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=2)
            f.write("\n")
    return failures


# ---------------------------------------------------------------- markdown tables


def load_rows(stem):
    path = os.path.join(FIGURES, stem, "rows.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def fmt(v, spec, scale=1.0):
    return "—" if v is None else format(v / scale, spec)


COLUMNS = [
    ("goodput Mbit/s", lambda r: fmt(r["goodput_mbps"], ".2f")),
    ("capacity Mbit/s", lambda r: fmt(r["capacity_mbps"], ".2f")),
    ("aggregation", lambda r: fmt(r["aggregation"], ".3f")),
    ("OFO mean kB", lambda r: fmt(r["ofo_mean_bytes"], ".1f", 1e3)),
    ("OFO max kB", lambda r: fmt(r["ofo_max_bytes"], ".1f", 1e3)),
    ("wait mean ms", lambda r: fmt(r["wait_mean_ms"], ".2f")),
    ("wait p99 ms", lambda r: fmt(r["wait_p99_ms"], ".2f")),
    ("completion s", lambda r: fmt(r["completion_s"], ".2f")),
    ("waste", lambda r: fmt(r["waste"], ".4f")),
    ("req waste", lambda r: fmt(r["request_waste"], ".4f")),
]
CDN = ("CDN share", lambda r: fmt(r["cdn_share"], ".3f"))
ISOLATED = ("goodput ÷ isolated sum", lambda r: fmt(r.get("of_isolated"), ".3f"))
DONE = ("completed", lambda r: f"{r['completed']}/{r['repeats']}")


def md(head, body):
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines)


def md_table(rows, group=None, cdn=False, isolated=False):
    """GROUP: (field, header) of a column after cc: the sweep value or a server/path count."""
    cols = COLUMNS + ([CDN] if cdn else []) + ([ISOLATED] if isolated else []) + [DONE]
    head = ["scheduler", "cc"] + ([group[1]] if group else []) + [c[0] for c in cols]
    body = []
    for r in rows:
        cells = [r["scheduler"], r["cc"]] + ([str(r[group[0]])] if group else [])
        body.append(cells + [c[1](r) for c in cols])
    return md(head, body)


PLAYER_COLUMNS = [
    ("goodput Mbit/s", lambda r: fmt(r["goodput_mbps"], ".2f")),
    ("first frame s", lambda r: fmt(r["player"]["first_frame_s"], ".2f")),
    ("rebuffers", lambda r: fmt(r["player"]["rebuffer_count"], ".1f")),
    ("rebuffer ratio", lambda r: fmt(r["player"]["rebuffer_ratio"], ".3f")),
    ("stall %", lambda r: fmt(r["player"]["stall_percentage"], ".1f")),
    ("GOP pause %", lambda r: fmt(r["player"]["gop_pause_percentage"], ".1f")),
    ("frames discarded", lambda r: fmt(r["player"]["frames_discarded"], ".1f")),
    ("jump rate", lambda r: fmt(r["player"]["jump_to_cdn_rate"], ".3f")),
    ("CDN share", lambda r: fmt(r["cdn_share"], ".3f")),
    ("req waste", lambda r: fmt(r["request_waste"], ".4f")),
]


def player_table(rows, group=None):
    """The player's QoE per row (scenarios with a [video]); GROUP as in md_table."""
    head = ["scheduler", "cc"] + ([group[1]] if group else []) + [c[0] for c in PLAYER_COLUMNS] + [DONE[0]]
    body = []
    for r in rows:
        if r.get("player") is None:
            continue
        cells = [r["scheduler"], r["cc"]] + ([str(r[group[0]])] if group else [])
        body.append(cells + [c[1](r) for c in PLAYER_COLUMNS] + [DONE[1](r)])
    return md(head, body)


def pivot(rows, metric, columns, label, digits=".1f"):
    """One line per scheduler, one column per value of COLUMNS (a row field): METRIC of the
    player, for the per-scheduler × per-cc or per-bitrate views of the papers' figures."""
    values = []
    for r in rows:
        if r[columns] not in values:
            values.append(r[columns])
    # One line per scheduler and cc, unless the cc is the columns or there is only one.
    by_cc = columns != "cc" and len({r["cc"] for r in rows}) > 1
    lines = {}
    for r in rows:
        line = f"{r['scheduler']} ({r['cc']})" if by_cc else r["scheduler"]
        lines.setdefault(line, {})[r[columns]] = r["player"][metric]
    head = ["scheduler"] + [f"{label} {v}" if label else str(v) for v in values]
    body = [[s] + [fmt(cells.get(v), digits) for v in values] for s, cells in lines.items()]
    return md(head, body)


def rel(a, b):
    """Change of a against b in percent, or None."""
    if a is None or b is None or b == 0:
        return None
    return 100.0 * (a - b) / b


VS_METRICS = [
    ("goodput", "goodput_mbps"),
    ("OFO mean", "ofo_mean_bytes"),
    ("wait mean", "wait_mean_ms"),
    ("wait p99", "wait_p99_ms"),
    ("completion", "completion_s"),
]
VS_MPRD = [("goodput", "goodput_mbps"), ("completion", "completion_s"), ("CDN share", "cdn_share")]


def vs_minrtt(rows, group, metrics):
    """Each scheduler's change against minrtt with the same cc (and group value), in percent.
    default is left out: it is weave (docs/reproduction.md checks that every default row
    equals its weave row), so its changes are weave's."""
    key = (lambda r: (r["cc"], str(r[group[0]]))) if group else (lambda r: r["cc"])
    base = {key(r): r for r in rows if r["scheduler"] == "minrtt"}
    head = ["scheduler", "cc"] + ([group[1]] if group else []) + [m[0] for m in metrics]
    body = []
    for r in rows:
        b = base.get(key(r))
        if r["scheduler"] in ("minrtt", "default") or b is None:
            continue
        cells = [r["scheduler"], r["cc"]] + ([str(r[group[0]])] if group else [])
        for _, field in metrics:
            d = rel(r[field], b[field])
            cells.append("—" if d is None else f"{d:+.1f}%")
        body.append(cells)
    return md(head, body)


def by_scheduler(rows, label=None):
    order = []
    for r in rows:
        if r["scheduler"] not in order:
            order.append(r["scheduler"])
    return sorted(rows, key=lambda r: (order.index(r["scheduler"]), r["cc"], r.get(label) or 0))


def grouped(prefix, suffix, label):
    """Rows of files PREFIX-N{suffix}.toml, N = 1..9, each tagged with N, by scheduler then N."""
    rows = []
    for n in range(1, 10):
        for r in load_rows(f"{prefix}-{n}{suffix}") or []:
            r = dict(r)
            r[label] = n
            rows.append(r)
    return by_scheduler(rows, label)


# MPRD Fig. 7: which isolated run (index into extra/isolated-{low,high} rows) each server of
# an N-server file is, in file order (CDN first). "L" marks edge 1 with 10% loss.
ISOLATED_SERVERS = {
    "mprd-fig7-low": [0, 1, 1, 3, 4],
    "mprd-fig7-low-loss": [0, 2, 1, 3, 4],
    "mprd-fig7-high": [0, 1, 1, 3, 3],
    "mprd-fig7-high-loss": [0, 2, 1, 3, 3],
}


def isolated_sum(prefix, n):
    rows = load_rows("extra/isolated-" + ("high" if "high" in prefix else "low"))
    if rows is None:
        return None
    return sum(rows[i]["goodput_mbps"] for i in ISOLATED_SERVERS[prefix][:n])


DEFAULT_IS = "weave"  # the scheduler `default` maps to (crates/core/src/scheduler/mod.rs)


def default_check():
    """Every `default` row must equal its `weave` row (default is currently weave).
    Returns (rows compared, files with a differing row, files with a default row that has
    no weave row to compare with)."""
    compared, differ, unmatched = 0, [], []
    for path in sorted(glob.glob(os.path.join(FIGURES, "**", "rows.json"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            rows = json.load(f)
        base = {(r["cc"], str(r.get("sweep"))): r for r in rows if r["scheduler"] == DEFAULT_IS}
        name = os.path.relpath(path, ROOT)
        for r in rows:
            if r["scheduler"] != "default":
                continue
            b = base.get((r["cc"], str(r.get("sweep"))))
            if b is None:
                if name not in unmatched:
                    unmatched.append(name)
                continue
            compared += 1
            if any(r.get(k) != b.get(k) for k in set(r) | set(b) if k != "scheduler"):
                if name not in differ:
                    differ.append(name)
    return compared, differ, unmatched


@functools.cache
def video_seconds(stem):
    """Length in seconds of the video in scenarios/STEM.toml (`[video] duration`, "624s"),
    or None: no video, another unit, or a sweep that changes it."""
    path = os.path.join(SCENARIOS, f"{stem}.toml")
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        scenario = tomllib.load(f)
    duration = str(scenario.get("video", {}).get("duration", ""))
    swept = scenario.get("sweep", {}).get("key") == "video.duration"
    m = re.fullmatch(r"(\d+(?:\.\d+)?)s", duration)
    return float(m.group(1)) if m and not swept else None


def viewer_wait(row, stem):
    """What a viewer waits through, first frame plus stalls (seconds), from a row whose every
    run played the video to its end: the rebuffer ratio is stalled time ÷ play time, and the
    play time is then the video's length. Stalled time alone counts from the first frame, so
    a first frame shown sooner, while the download's rate is below the video's, returns as
    stall later (Kondo's C and E under the coupled controls). Of one run (a `runs` entry of
    `pcdn sim --json --runs`), its first frame plus its stalled time."""
    p = row.get("player")
    if "seed" in row:
        if p is None or not p.get("finished"):
            return None
        return p["first_frame_latency"] + p["stalled_time"]
    length = video_seconds(stem)
    if p is None or length is None or p.get("finished") != row.get("repeats"):
        return None
    return p["first_frame_s"] + p["rebuffer_ratio"] * length


# Per-cell metrics the scorecard weighs, lower is better: (field, or a function of the row
# and the file's stem; label; from the player's stats; the files whose paper reports it: a
# stem prefix, "" for all).
SCORE_METRICS = [
    ("completion_s", "completion time", False, ""),
    ("rebuffer_count", "underflows", True, ""),
    ("stall_percentage", "stalled time", True, ""),
    (viewer_wait, "first frame + stalls", False, ""),
    ("frames_discarded", "discarded pictures", True, "kondo"),
    ("gop_pause_percentage", "GOP pauses", True, "mprd"),
]
# Differences within this share of the best other are ties: completion times of 2-core runs
# that differ by a few milliseconds in minutes say nothing.
SCORE_TIE = 0.001
# Student's t at 97.5 % (two-sided 95 %) for 1..30 degrees of freedom, 1.96 past them: the
# table of `pcdn sim --against` (crates/sim/src/scenario/paired.rs).
T_975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
         2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
         2.052, 2.048, 2.045, 2.042]


def t_975(df):
    """Student's t quantile for `df` ≥ 1 degrees of freedom.

    >>> t_975(19), t_975(2), t_975(40)
    (2.093, 4.303, 1.96)
    """
    return T_975[df - 1] if df <= len(T_975) else 1.96


def paired(ours, theirs, value):
    """Ours minus theirs, seed by seed (every scheduler of a file runs the same seeds, so the
    links draw the same losses and jitter): (seeds, mean difference, half-width of its 95 %
    confidence interval), or None without per-run results for both (`pcdn sim --runs`) or
    with fewer than two seeds.

    >>> ours = {"runs": [{"seed": 1, "x": 1.0}, {"seed": 2, "x": 2.0}, {"seed": 3, "x": 3.0}]}
    >>> theirs = {"runs": [{"seed": 1, "x": 0.0}, {"seed": 2, "x": 1.0}, {"seed": 3, "x": 2.5}]}
    >>> n, mean, half = paired(ours, theirs, lambda r: r["x"])
    >>> n, round(mean, 4), round(half, 4)  # differences 1, 1, 0.5: sd 0.2887, t(2) = 4.303
    (3, 0.8333, 0.7172)
    >>> paired(ours, {"runs": theirs["runs"][:1]}, lambda r: r["x"]) is None  # one seed in common
    True
    >>> paired(ours, {}, lambda r: r["x"]) is None  # no runs listed
    True
    """
    mine = {r["seed"]: value(r) for r in ours.get("runs", [])}
    other = {r["seed"]: value(r) for r in theirs.get("runs", [])}
    seeds = sorted(set(mine) & set(other))
    diffs = [mine[s] - other[s] for s in seeds if mine[s] is not None and other[s] is not None]
    if len(diffs) < 2 or len(diffs) != len(seeds):
        return None
    n = len(diffs)
    mean = sum(diffs) / n
    sd = (sum((d - mean) ** 2 for d in diffs) / (n - 1)) ** 0.5
    return n, mean, t_975(n - 1) * sd / n**0.5


# Cells behind on the means of a file's own seeds are run again, every scheduler of the cell,
# on seeds no file uses: the best of several schedulers' means over 20 seeds is biased low
# (it picks whichever drew the kindest seeds), and fresh seeds measure the selected cells
# without that bias.
CONFIRM_SEED = 101
CONFIRM_REPEAT = 100


def metric_value(field, player, stem):
    """The function of a row (or of one of its runs) giving a `SCORE_METRICS` entry's value."""

    def value(r):
        if callable(field):
            return field(r, stem)
        src = r.get("player") if player else r
        return None if src is None else src.get(field)

    return value


def standings(stem, rows):
    """`DEFAULT_IS` against the best other scheduler in every cell (congestion control × sweep
    point) of one file's rows, on the metrics its paper reports: one dict per cell and metric
    with the cell, the label, `mine`, `best`, `who`, the `verdict` ("better", "level" or
    "behind", `SCORE_TIE` apart) and `pair`, the paired comparison (`paired`) with the best.

    >>> row = lambda s, t: {"scheduler": s, "cc": "cubic", "completion_s": t, "runs": []}
    >>> [(x["verdict"], x["who"]) for x in standings("f", [row("weave", 10.0), row("lrf", 9.0), row("lpc", 11.0)])]
    [('behind', 'lrf')]
    >>> [x["verdict"] for x in standings("f", [row("weave", 10.0), row("lrf", 10.005)])]
    ['level']
    """
    out = []
    for ours in (r for r in rows if r["scheduler"] == DEFAULT_IS):
        cell = (ours["cc"], ours.get("sweep"))
        others = [
            r
            for r in rows
            if (r["cc"], r.get("sweep")) == cell and r["scheduler"] not in (DEFAULT_IS, "default")
        ]
        for field, label, player, prefix in SCORE_METRICS:
            if not stem.startswith(prefix):
                continue
            value = metric_value(field, player, stem)
            mine = value(ours)
            theirs = [(v, r["scheduler"], r) for r in others if (v := value(r)) is not None]
            if mine is None or not theirs:
                continue
            best, who, best_row = min(theirs, key=lambda t: (t[0], t[1]))
            slack = SCORE_TIE * abs(best)
            verdict = "better" if mine < best - slack else "level" if mine <= best + slack else "behind"
            out.append(
                {
                    "cc": cell[0],
                    "sweep": cell[1],
                    "label": label,
                    "mine": mine,
                    "best": best,
                    "who": who,
                    "verdict": verdict,
                    "pair": paired(ours, best_row, value),
                }
            )
    return out


def behind_cells(stem, rows):
    """The cells (congestion control, sweep point) where `DEFAULT_IS` is behind the best other
    on some metric's mean, in the rows' order, each once."""
    cells = []
    for s in standings(stem, rows):
        if s["verdict"] == "behind" and (s["cc"], s["sweep"]) not in cells:
            cells.append((s["cc"], s["sweep"]))
    return cells


def confirm_path(stem):
    return os.path.join(FIGURES, stem, "confirm.json")


def confirm_all(binary, selected):
    """Runs every cell behind on the means again, all its schedulers, on `CONFIRM_REPEAT`
    fresh seeds from `CONFIRM_SEED`, into docs/figures/STEM/confirm.json (with the binary's
    hash: the scorecard uses it only beside rows of the same binary). Returns failures."""
    with open(os.path.join(FIGURES, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    digest = sha256_file(binary)
    failures = []
    for stem in selected:
        rows = load_rows(stem)
        if stem.startswith("extra/") or rows is None:
            continue
        entry = manifest["scenarios"].get(stem, {})
        if entry.get("binary_sha256") != digest:
            print(f"WARNING {stem}: rows.json is from another binary; run the file again before confirming it")
            continue
        with open(os.path.join(ROOT, toml_of(stem)), "rb") as f:
            spec = tomllib.load(f)
        if spec.get("seed", 0) + spec.get("repeat", 1) > CONFIRM_SEED:
            failures.append(f"{stem}: its own seeds reach {CONFIRM_SEED}, the confirmation's first")
            continue
        cells = []
        for cc, sweep in behind_cells(stem, rows):
            cmd = ["target/release/pcdn", "sim", toml_of(stem), "--json", "--runs", "--cc", cc]
            cmd += ["--seed", str(CONFIRM_SEED), "--repeat", str(CONFIRM_REPEAT)]
            if sweep is not None:
                cmd += ["--point", sweep]
            shown = " ".join(cmd)
            proc, wall = timed_run(binary, cmd, shown, "== confirm:")
            if proc.returncode != 0:
                failures.append(f"{stem} (confirm {cc} {sweep}): exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
                continue
            cells.append({"command": shown, "wall_s": round(wall, 1), "rows": json.loads(proc.stdout)})
        path = confirm_path(stem)
        if cells:
            with open(path, "w", encoding="utf-8") as f:
                json.dump({"binary_sha256": digest, "cells": cells}, f, indent=1)
                f.write("\n")
        elif os.path.exists(path):
            os.remove(path)
    return failures


def confirmed_standings(stem, manifest):
    """`standings` of a file's confirmation rows, by (congestion control, sweep point,
    metric label), if they come from the binary of its rows.json (`manifest` says which)."""
    path = confirm_path(stem)
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        confirm = json.load(f)
    if manifest.get("scenarios", {}).get(stem, {}).get("binary_sha256") != confirm["binary_sha256"]:
        return {}
    return {
        (x["cc"], x["sweep"], x["label"]): x
        for cell in confirm["cells"]
        for x in standings(stem, cell["rows"])
    }


def scorecard():
    """`DEFAULT_IS` against the best other scheduler in every cell (file × congestion control ×
    sweep point) of the paper scenarios, on the metrics each file's paper reports: how many
    cells it is better, level (within `SCORE_TIE`) or behind in, per metric, and the cells it
    is behind in. Beside the means, the paired comparison over seeds against the best other:
    how many of the better and behind cells differ by more than the 95 % confidence interval
    of the seed-by-seed difference (the rest could be the draw of the seeds). Each cell behind
    is shown again as measured on fresh seeds (`confirm_all`), where that run exists."""
    counts = {label: [0, 0, 0] for _, label, _, _ in SCORE_METRICS}
    beyond = {label: [0, 0] for _, label, _, _ in SCORE_METRICS}
    behind = []
    fresh = {"better": 0, "level": 0, "behind": 0, "not run": 0}

    def interval(pair):
        n, diff, half = pair
        verdict = "beyond" if abs(diff) > half else "within"
        return f"paired over {n} seeds {diff:+.3g} ± {half:.3g}, {verdict} the 95 % interval"

    manifest_path = os.path.join(FIGURES, "manifest.json")
    manifest = {}
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    for path in sorted(glob.glob(os.path.join(FIGURES, "*", "rows.json"))):
        stem = os.path.basename(os.path.dirname(path))
        with open(path, encoding="utf-8") as f:
            rows = json.load(f)
        again = confirmed_standings(stem, manifest)
        for s in standings(stem, rows):
            pair, label = s["pair"], s["label"]
            clear = pair is not None and abs(pair[1]) > pair[2]
            index = ("better", "level", "behind").index(s["verdict"])
            counts[label][index] += 1
            if index != 1:
                beyond[label][index // 2] += clear
            if s["verdict"] != "behind":
                continue
            sweep = "" if s["sweep"] is None else f" {s['sweep']}"
            line = f"{stem} {s['cc']}{sweep}: {label} {s['mine']:.4g} against {s['who']}'s {s['best']:.4g}"
            if pair is not None:
                line += "; " + interval(pair)
            x = again.get((s["cc"], s["sweep"], label))
            if x is not None:
                fresh[x["verdict"]] += 1
                line += (
                    f". On seeds {CONFIRM_SEED}–{CONFIRM_SEED + CONFIRM_REPEAT - 1}: {x['mine']:.4g} "
                    f"against {x['who']}'s {x['best']:.4g}, **{x['verdict']}**"
                )
                if x["pair"] is not None:
                    line += " (" + interval(x["pair"]) + ")"
            else:
                fresh["not run"] += 1
            behind.append(line)
    lines = [
        f"`{DEFAULT_IS}` against the best other scheduler of each cell (file × control × sweep point, "
        f"every `rows.json` under `docs/figures/*/`; lower is better; within {SCORE_TIE:.1%} of "
        "the best is level; discarded pictures in Kondo's files, GOP pauses in MPRD's). Of the "
        "cells better or behind, *paired* counts those whose seed-by-seed difference from the "
        "best other (same seeds, same draws of the links) has a 95 % confidence interval "
        "that excludes zero:",
        "",
        "| metric | better | level | behind | better, paired | behind, paired |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {label} | {b} | {t} | {k} | {beyond[label][0]} | {beyond[label][1]} |"
        for label, (b, t, k) in counts.items()
        if b + t + k
    ]
    if behind:
        lines += [
            "",
            f"Each cell behind on the means was run again with every scheduler of the cell on "
            f"{CONFIRM_REPEAT} seeds no file uses ({CONFIRM_SEED}–{CONFIRM_SEED + CONFIRM_REPEAT - 1}, "
            "`docs/figures/STEM/confirm.json`), against the best other there: "
            f"better in {fresh['better']}, level in {fresh['level']}, behind in {fresh['behind']}"
            + (f", not run in {fresh['not run']}" if fresh["not run"] else "")
            + ".",
            "",
            "Behind on the means of the files' own seeds in:",
            "",
        ] + [f"- {b}" for b in behind]
    else:
        lines += ["", "Behind in: none."]
    return "\n".join(lines) + "\n"


def blocks():
    """The generated markdown blocks, by key: "STEM" (commands and table; default rows left
    out, see default_check) and "STEM:vs" (changes against minrtt)."""
    with open(os.path.join(FIGURES, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)

    def cmd(stem):
        e = manifest["scenarios"].get(stem)
        return f"`{e['command']}`" if e else "(not run)"

    def cmds(stems):
        return "  \n".join(cmd(s) for s in stems) + "\n"

    def no_default(rows):
        return [r for r in rows if r["scheduler"] != "default"]

    out = {}
    single = [
        ("pscheduler-fig5", ("sweep", "reorder buffer"), False),
        ("pscheduler-fig15", ("sweep", "path2 one-way delay"), False),
        ("pscheduler-fig16", ("sweep", "path2 jitter ±"), False),
        ("pscheduler-fig17", None, False),
        ("mprd-fig8c-1edges", ("sweep", "file size"), True),
        ("mprd-fig8c-2edges", ("sweep", "file size"), True),
        ("extra/packets-pick-paths", None, False),
        ("extra/fig17-queue1000", None, False),
        ("extra/fig17-whole", None, False),
    ]
    for stem, group, cdn in single:
        rows = load_rows(stem)
        if rows is None:
            out[stem] = cmds([stem]) + "\n(no rows)\n"
            continue
        out[stem] = cmds([stem]) + "\n" + md_table(no_default(by_scheduler(rows)), group, cdn=cdn) + "\n"
        out[stem + ":vs"] = vs_minrtt(rows, group, VS_MPRD if cdn else VS_METRICS) + "\n"

    for stem, header in [
        ("extra/isolated-low", "server link"),
        ("extra/isolated-high", "server link"),
        ("extra/lossy-alone", "content size"),
    ]:
        rows = load_rows(stem)
        if rows is not None:
            out[stem] = cmds([stem]) + "\n" + md_table(by_scheduler(rows), ("sweep", header)) + "\n"

    # The player scenarios: full QoE tables, and the papers' views of them.
    for stem, group in [
        ("mprd-fig8a", ("sweep", "bitrate")),
        ("mprd-fig8a-small-buffer", ("sweep", "bitrate")),
        ("pscheduler-player", ("sweep", "bitrate")),
    ]:
        rows = load_rows(stem)
        if rows is None:
            out[stem] = cmds([stem]) + "\n(no rows)\n"
            continue
        out[stem] = cmds([stem]) + "\n" + player_table(no_default(by_scheduler(rows)), group) + "\n"
        out[stem + ":pauses"] = pivot(rows, "gop_pause_percentage", "sweep", "") + "\n"
    kondo = [f"kondo-{x}" for x in "abcde"]
    kondo_rows = {k: load_rows(k) for k in kondo}
    if all(v is not None for v in kondo_rows.values()):
        out["kondo"] = cmds(kondo) + "\n"
        for k, rows in kondo_rows.items():
            letter = k[-1].upper()
            out["kondo"] += (
                f"\n**Scenario {letter}: buffer underflows** (rebuffer count; rows: scheduler, columns: cc)\n\n"
                + pivot(rows, "rebuffer_count", "cc", "")
                + f"\n\n**Scenario {letter}: stalled time** (% of play + stalled time)\n\n"
                + pivot(rows, "stall_percentage", "cc", "", ".2f")
                + f"\n\n**Scenario {letter}: picture discard** (frames)\n\n"
                + pivot(rows, "frames_discarded", "cc", "")
                + "\n"
            )

    fig18 = grouped("pscheduler-fig18", "paths", "paths")
    out["pscheduler-fig18"] = (
        cmds([f"pscheduler-fig18-{n}paths" for n in range(2, 6)]) + "\n"
        + md_table(no_default(fig18), ("paths", "paths")) + "\n"
    )
    out["pscheduler-fig18:vs"] = vs_minrtt(fig18, ("paths", "paths"), VS_METRICS) + "\n"

    for prefix in ["mprd-fig7-low", "mprd-fig7-low-loss", "mprd-fig7-high", "mprd-fig7-high-loss"]:
        rows = grouped(prefix, "servers", "servers")
        for r in rows:
            iso = isolated_sum(prefix, r["servers"])
            r["of_isolated"] = r["goodput_mbps"] / iso if iso else None
        out[prefix] = (
            cmds([f"{prefix}-{n}servers" for n in range(2, 6)]) + "\n"
            + md_table(no_default(rows), ("servers", "servers"), cdn=True, isolated=True) + "\n"
        )
        out[prefix + ":vs"] = vs_minrtt(rows, ("servers", "servers"), VS_MPRD) + "\n"
    out["scorecard"] = scorecard()
    import transports  # the papers' transport against pull (scripts/transports.py)

    out["transports"] = transports.table(FIGURES)
    out.update(fleet_blocks())
    out["run"] = run_record(manifest)
    return manifest, out


def run_record(manifest):
    """The provenance of the rows: which commits and binaries produced them, and the wall time."""
    by = {}
    for e in manifest.get("scenarios", {}).values():
        k = (e.get("commit"), e.get("binary_sha256") or "")
        d = by.setdefault(k, [0, 0.0, e.get("date")])
        d[0] += 1
        d[1] += e.get("wall_s") or 0.0
        d[2] = max(d[2] or "", e.get("date") or "")
    lines = ["| commit | binary sha256 | scenario files | wall time | last run |", "|---|---|---|---|---|"]
    for (commit, sha), (n, wall, date) in sorted(by.items(), key=lambda x: -x[1][0]):
        lines.append(f"| `{commit}` | `{sha[:16]}…` | {n} | {wall / 60:.0f} min | {date} |")
    total = sum(v[1] for v in by.values())
    return "\n".join(lines) + f"\n\nTotal wall time of the recorded runs: {total / 60:.0f} min on 2 cores.\n"


# The page shows, per figure, the papers' schedulers and weave (against minRTT); the full
# tables, every scheduler and metric, are in docs/figures/tables.md, which the page links.
FEATURED = {
    "pscheduler": ("minrtt", "pscheduler", "pscheduler-nr", "blest", "ecf", "weave"),
    "mprd": ("minrtt", "pscheduler", "mprd", "weave"),
    "extra": ("minrtt", "pscheduler", "pscheduler-nr", "blest", "ecf", "mprd", "weave"),
}
KONDO_FEATURED = ("lrf", "lpc", "let", "gr-sty", "tp-sty", "tr-sty", "xlink", "weave")
# Blocks longer than this (lines) are left to tables.md, with a link from the page.
PAGE_LINES = 40


def anchor(key):
    """GitHub's anchor of the tables.md heading "## KEY".

    >>> anchor("pscheduler-fig5:vs"), anchor("extra/fig17-whole")
    ('pscheduler-fig5vs', 'extrafig17-whole')
    """
    return re.sub(r"[^a-z0-9 _-]", "", key.lower()).replace(" ", "-")


def page_block(key, text):
    """The block of docs/reproduction.md for KEY: short blocks as they are; the per-scheduler
    views (":vs", ":pauses", Kondo's underflows) cut to the featured schedulers; the full tables
    as their commands. Each cut block links its full version in tables.md."""
    link = f"\nEvery scheduler: [tables.md, {key}](figures/tables.md#{anchor(key)}).\n"
    lines = text.rstrip("\n").split("\n")
    if key in ("scorecard", "transports", *FLEET_BLOCKS.values()) or (len(lines) <= PAGE_LINES and not key.endswith(":pauses")):
        return text
    if key == "kondo":
        keep, on = [], True  # the commands, before the first table
        for line in lines:
            if line.startswith("**Scenario"):
                on = "underflows" in line
            if on and not (line.startswith("| ") and line.split(" | ")[0][2:] not in KONDO_FEATURED + ("scheduler",)):
                keep.append(line)
        return "\n".join(keep) + "\n" + link
    if key.endswith(":vs") or key.endswith(":pauses"):
        def shown(line):
            if not line.startswith("| ") or line.startswith("| scheduler "):
                return True
            return line.split(" | ")[0][2:].split(" (")[0] in featured

        featured = FEATURED[key.split("-")[0].split("/")[0]]

        return "\n".join(x for x in lines if shown(x)) + "\n" + link
    return "\n".join(x for x in lines if not x.startswith("|")).rstrip("\n") + "\n" + link


def write_tables():
    manifest, out = blocks()
    compared, differ, unmatched = default_check()
    head = (
        "<!-- generated by scripts/reproduce.py from docs/figures/**/rows.json; "
        f"runs of {manifest.get('date')} at commit {manifest.get('commit')} -->\n\n"
        f"`default` rows compared with their `{DEFAULT_IS}` rows: {compared}; differing: "
        + (", ".join(differ) if differ else "none")
        + ("; without a `" + DEFAULT_IS + "` row: " + ", ".join(unmatched) if unmatched else "")
        + ". Tables leave `default` out.\n"
    )
    parts = [head] + [f"## {key}\n\n{text}" for key, text in out.items()]
    with open(os.path.join(FIGURES, "tables.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(parts))
    print(f"wrote {os.path.relpath(os.path.join(FIGURES, 'tables.md'), ROOT)}")
    if differ:
        print(f"WARNING default rows differ from {DEFAULT_IS} in: " + ", ".join(differ))
    if unmatched:
        print(f"WARNING default rows without a {DEFAULT_IS} row in: " + ", ".join(unmatched))

    # Fill the generated blocks of docs/reproduction.md, if it has them:
    # <!-- BEGIN generated KEY --> ... <!-- END generated KEY -->
    doc = os.path.join(ROOT, "docs", "reproduction.md")
    if os.path.exists(doc) and FIGURES == DEFAULT_FIGURES:
        with open(doc, encoding="utf-8") as f:
            text = f.read()

        def fill(m):
            key = m.group(1)
            if key not in out:
                print(f"WARNING docs/reproduction.md: no generated block {key!r}")
                return m.group(0)
            return f"<!-- BEGIN generated {key} -->\n{page_block(key, out[key])}<!-- END generated {key} -->"

        new = re.sub(
            r"<!-- BEGIN generated (\S+) -->.*?<!-- END generated \1 -->", fill, text, flags=re.S
        )
        if new != text:
            with open(doc, "w", encoding="utf-8") as f:
                f.write(new)
            print("filled the generated tables of docs/reproduction.md")


def replot(selected, binary):
    """Redraws each selected sweep's charts from its rows.json, so that the charts show the
    numbers of the tables (the scenario file's [plot] says what they show)."""
    failures = 0
    for stem in selected:
        toml = toml_of(stem)
        outdir = os.path.join(FIGURES, stem)
        rows = os.path.join(outdir, "rows.json")
        if stem.startswith("extra/") or not has_sweep(os.path.join(ROOT, toml)) or not os.path.exists(rows):
            continue
        cmd = [binary, "sim", toml, "--plot", shown_path(outdir), "--from-rows", shown_path(rows)]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            failures += 1
            print(f"FAILED {stem}: {proc.stderr.strip()}", file=sys.stderr)
        else:
            print(f"{stem}: charts redrawn", file=sys.stderr)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", default=[], help="run stems containing this (repeatable)")
    ap.add_argument("--no-build", action="store_true", help="skip cargo build")
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "pcdn"))
    ap.add_argument("--tables-only", action="store_true", help="only rewrite tables.md")
    ap.add_argument(
        "--replot",
        action="store_true",
        help="only redraw the sweeps' charts from their rows.json with --bin (pcdn sim --from-rows)",
    )
    ap.add_argument(
        "--out",
        metavar="DIR",
        default=DEFAULT_FIGURES,
        help="write rows, plots, manifest.json and tables.md into DIR (default: the repository's "
        "docs/figures, whose generated blocks in docs/reproduction.md are then refilled too)",
    )
    ap.add_argument(
        "--confirm-only",
        action="store_true",
        help="only run the cells behind on the means again on fresh seeds (rows.json must be from --bin)",
    )
    args = ap.parse_args()

    global FIGURES
    FIGURES = os.path.abspath(args.out)
    os.makedirs(FIGURES, exist_ok=True)
    failures = []
    if args.replot:
        return replot([s for s in stems() if not args.only or any(o in s for o in args.only)], args.bin)
    if not args.tables_only:
        if not args.no_build:
            subprocess.run(["cargo", "build", "--release", "-p", "pcdn-cli"], cwd=ROOT, check=True)
        selected = [s for s in stems() if not args.only or any(o in s for o in args.only)]
        with tempfile.TemporaryDirectory() as tmp:
            binary = os.path.join(tmp, "pcdn")
            shutil.copy2(args.bin, binary)
            if not args.confirm_only:
                failures = run_all(binary, selected, not args.no_build, not args.only)
                if not args.only or any(o in "transports" for o in args.only):
                    import transports  # each paper's file on its testbed's transport and on pull

                    failures += transports.run_all(binary, FIGURES)
                fleet = [s for s in FLEET_BLOCKS if not args.only or any(o in s for o in args.only)]
                failures += run_fleet(binary, fleet, git("rev-parse", "--short", "HEAD").strip())
            failures += confirm_all(binary, selected)
    write_tables()

    with open(os.path.join(FIGURES, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    warnings = [w for e in manifest["scenarios"].values() for w in e.get("warnings", [])]
    for w in warnings:
        print("WARNING " + w)
    for fl in failures:
        print("FAILED " + fl)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
