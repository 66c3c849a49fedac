#!/usr/bin/env python3
"""weave's ablation table: each mechanism switched off in turn, over the scenario files and the
random suite, on fresh seeds, paired seed by seed against weave as it ships.

For every paths scenario in scenarios/ (not the fleets, not the emulator's links file), this runs

    pcdn sim --ablate scenarios/STEM.toml --json --seed SEED --repeat R [--point P ...] [--cc C ...]

and, in chunks of --chunk worlds (world i is drawn from SEED + i),

    pcdn sim --ablate --random N --seed SEED --json --repeat R [--cc C ...]

(`pcdn sim --ablate`: docs/weave.md), then writes docs/figures/weave-ablation.md (the tally per
switch, and every cell where switching it off is worse or better beyond the 95 % interval) and
the tally into docs/weave.md, between "<!-- BEGIN generated ablation -->" and
"<!-- END generated ablation -->", with the command that made it.

Usage (from anywhere; Python 3 standard library only):

    scripts/weave-ablation.py                            # the full table: hours on 2 cores
    scripts/weave-ablation.py --points 1 --cc default --random 20 --repeat 3
                                                         # a reduced one: the first sweep point
                                                         # and the default control of each file
    scripts/weave-ablation.py --no-build --bin /path/to/pcdn
    scripts/weave-ablation.py --switch tail_copies --random 0
                                                         # one switch, on the files alone
    scripts/weave-ablation.py --jobs 2 --cache DIR       # two commands at once, one thread
                                                         # each; each command's cells kept in
                                                         # DIR and reused when run again (a
                                                         # crashed run resumes where it stopped)

The binary is copied to a temporary file first, so a concurrent `cargo build` cannot swap it.
Each command's time goes to stderr as it ends, and every one into the figures page. Cells
whose every seed gave the same pair of runs (a world that draws nothing at random, such as
Pscheduler Figs. 15, 17 and 18) have an interval of zero: any difference there is beyond it,
and the tally marks how many of its cells are such (‡).
"""

import argparse
import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reproduce import sha256_file  # noqa: E402  (a sibling script, one digest for both)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BEGIN = "<!-- BEGIN generated ablation -->"
END = "<!-- END generated ablation -->"


def scenario_files():
    out = []
    for name in sorted(os.listdir(os.path.join(ROOT, "scenarios"))):
        if not name.endswith(".toml"):
            continue
        with open(os.path.join(ROOT, "scenarios", name), "rb") as f:
            doc = tomllib.load(f)
        if "server" not in doc:
            # A fleet, or an emulator's links file.
            continue
        out.append((name, doc))
    return out




def run(exe, build, args, cache):
    """The cells of `pcdn ARGS` and the seconds it took; from `cache` (a folder, or None) when
    the same binary (`build`, its digest) ran the same arguments there before (`--threads`
    aside: the output does not depend on it)."""
    same = [a for i, a in enumerate(args) if a != "--threads" and (i == 0 or args[i - 1] != "--threads")]
    key = hashlib.sha256("\0".join([build] + same).encode()).hexdigest()[:16]
    path = os.path.join(cache, key + ".json") if cache else None
    if path and os.path.exists(path):
        with open(path) as f:
            kept = json.load(f)
        if kept["build"] == build and kept["args"] == same:
            print(f"(kept) pcdn {' '.join(args)}", file=sys.stderr, flush=True)
            return kept["cells"], kept["seconds"]
    started = time.time()
    result = subprocess.run([exe] + args, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    seconds = time.time() - started
    if result.returncode != 0:
        raise RuntimeError(f"failed ({result.returncode}): pcdn {' '.join(args)}")
    cells = json.loads(result.stdout)
    print(f"{seconds / 60:6.1f} min  pcdn {' '.join(args)}", file=sys.stderr, flush=True)
    if path:
        with open(path + ".part", "w") as f:
            json.dump({"build": build, "args": same, "seconds": seconds, "cells": cells}, f)
        os.replace(path + ".part", path)
    return cells, seconds


def fixed(cell):
    """Whether every seed gave the cell the same pair of runs: a world that draws nothing at
    random, whose interval is zero (any difference is the world's own, not a draw's)."""
    return cell["half_width"] == 0


def tally(cells, switches):
    """Per switch: the cells worse, level and better, each beside how many of them are `fixed`."""
    rows = []
    for s in switches:
        mine = [c for c in cells if c["switch"] == s]
        count = {e: sum(1 for c in mine if c["effect"] == e) for e in ("worse", "level", "better")}
        same = {e: sum(1 for c in mine if c["effect"] == e and fixed(c)) for e in ("worse", "better")}
        rows.append((s, count["worse"], same["worse"], count["level"], count["better"], same["better"]))
    return rows


def tally_table(title, cells, switches):
    def n(count, same):
        return f"{count} ({same}‡)" if same else str(count)

    lines = [
        f"| {title}: switched off | worse | level | better |",
        "|---|---:|---:|---:|",
    ]
    for s, worse, worse_fixed, level, better, better_fixed in tally(cells, switches):
        lines.append(f"| `{s}` | {n(worse, worse_fixed)} | {level} | {n(better, better_fixed)} |")
    return "\n".join(lines)


def cell_lines(cells):
    """Every cell beyond its interval. ‡: an interval of zero, every seed gave the same pair of
    runs (a world that draws nothing at random); the difference is the world's, not a draw's."""
    if not cells:
        return "(not in this run)"
    lines = [
        "| switch off | world | point | cc | metric | on | off | off − on (95 %) | effect |",
        "|---|---|---|---|---|---:|---:|---:|---|",
    ]
    for c in cells:
        if c["effect"] == "level":
            continue
        lines.append(
            f"| `{c['switch']}` | {c['world']} | {c['point'] or ''} | {c['cc']} | {c['metric']} "
            f"| {c['on']:.4f} | {c['off']:.4f} | {c['diff']:+.4f} ± {c['half_width']:.4f}{' ‡' if c['half_width'] == 0 else ''} "
            f"| {c['effect']} |"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", help="the pcdn binary (default: target/release/pcdn, built first)")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--seed", type=int, default=9001, help="first seed of every file and world (fresh: no file uses it)")
    ap.add_argument("--repeat", type=int, default=5, help="runs per cell")
    ap.add_argument("--random", type=int, default=100, help="random worlds")
    ap.add_argument("--quick", action="store_true", help="the random worlds in miniature")
    ap.add_argument("--points", type=int, default=0, help="only the first K sweep points of each file (0: all)")
    ap.add_argument("--cc", action="append", default=[], help="only this control (repeatable; default: each file's own)")
    ap.add_argument(
        "--all-points", action="append", default=[], help="every sweep point of files whose stem contains this, --points aside (repeatable)"
    )
    ap.add_argument("--only", help="only scenario files whose stem contains this")
    ap.add_argument("--skip", action="append", default=[], help="no scenario file whose stem contains this (repeatable)")
    ap.add_argument("--no-files", action="store_true", help="the random worlds only")
    ap.add_argument("--switch", action="append", default=[], help="only this switch (repeatable; default: every one)")
    ap.add_argument(
        "--random-cc", action="append", default=[], help="the random worlds' control (repeatable; default: --cc's, else the default)"
    )
    ap.add_argument("--chunk", type=int, default=10, help="random worlds per command (a resumed run keeps finished chunks)")
    ap.add_argument("--jobs", type=int, default=1, help="commands at once, each on cores ÷ jobs threads")
    ap.add_argument("--cache", help="folder keeping each command's cells, reused when the same command runs again")
    args = ap.parse_args()

    if args.bin:
        binary = args.bin
    else:
        if not args.no_build:
            subprocess.run(["cargo", "build", "--release", "-p", "pcdn-cli"], cwd=ROOT, check=True)
        binary = os.path.join(ROOT, "target", "release", "pcdn")
    tmp = tempfile.mkdtemp()
    exe = os.path.join(tmp, "pcdn")
    shutil.copy2(binary, exe)
    build = sha256_file(exe)

    threads = ["--threads", str(max(1, (os.cpu_count() or 1) // args.jobs))] if args.jobs > 1 else []
    only_switches = [x for s in args.switch for x in ("--switch", s)]
    common = ["--json", "--seed", str(args.seed), "--repeat", str(args.repeat)] + threads + only_switches
    if args.cache:
        os.makedirs(args.cache, exist_ok=True)
    # (kind, arguments): the random worlds in chunks first (world i is drawn from seed + i, so
    # a chunk from seed + k draws the same worlds as one command; they are the quickest), then
    # the files in order.
    commands = []
    random_ccs = args.random_cc or args.cc
    for first in range(0, args.random, max(1, args.chunk)):
        count = min(args.chunk, args.random - first)
        cmd = ["sim", "--ablate", "--random", str(count), "--json", "--seed", str(args.seed + first)]
        cmd += ["--repeat", str(args.repeat)] + threads + only_switches
        cmd += [x for c in random_ccs for x in ("--cc", c)]
        if args.quick:
            cmd.append("--quick")
        commands.append(("random", cmd))
    if not args.no_files:
        for name, doc in scenario_files():
            if args.only and args.only not in name:
                continue
            if any(s in name for s in args.skip):
                continue
            cmd = ["sim", "--ablate", f"scenarios/{name}"] + common
            doc_ccs = doc.get("client", {}).get("cc", ["default"])
            if doc_ccs == "all":
                doc_ccs = None
            wanted = [c for c in args.cc if doc_ccs is None or c in doc_ccs]
            if args.cc and not wanted:
                # The file does not run the control asked for: its own first one.
                wanted = [doc_ccs[0]] if doc_ccs else []
            if doc_ccs is None or set(wanted) != set(doc_ccs):
                cmd += [x for c in wanted for x in ("--cc", c)]
            values = doc.get("sweep", {}).get("values", [])
            if args.points and len(values) > args.points and not any(a in name for a in args.all_points):
                # As the file writes them: TOML's booleans are lower case.
                shown = [str(v).lower() if isinstance(v, bool) else str(v) for v in values[: args.points]]
                cmd += [x for v in shown for x in ("--point", v)]
            commands.append(("file", cmd))
    file_cells, random_cells, timings = [], [], []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(run, exe, build, cmd, args.cache) for _, cmd in commands]
        for (kind, cmd), fut in zip(commands, futures):
            cells, seconds = fut.result()
            (file_cells if kind == "file" else random_cells).extend(cells)
            timings.append((seconds, cmd))
    # The commands' own times (kept ones at what they took when they ran): the run's cost,
    # whether or not a cache held part of it.
    elapsed = sum(seconds for seconds, _ in timings) / max(1, args.jobs)
    shutil.rmtree(tmp)

    switches = []
    for c in file_cells + random_cells:
        if c["switch"] not in switches:
            switches.append(c["switch"])
    # The command as anyone would type it: without this machine's binary.
    argv, shown = sys.argv[1:], []
    while argv:
        arg = argv.pop(0)
        if arg in ("--bin", "--cache"):
            argv = argv[1:]
        elif not arg.startswith(("--bin=", "--cache=")) and arg != "--no-build":
            shown.append(arg)
    command = "scripts/weave-ablation.py " + " ".join(shown)
    summary = "\n\n".join(
        part
        for part in [
            f"`{command.strip()}` ({elapsed / 60:.0f} min, {max(1, args.jobs)} at once on {os.cpu_count()} cores; seeds from {args.seed}, {args.repeat} runs per cell; "
            "metric: aggregation for downloads, first frame + stalled seconds for videos; a cell is a "
            "file's sweep point × control, or a random world × control):",
            tally_table("scenario files", file_cells, switches) if file_cells else "",
            tally_table(f"{args.random} random worlds", random_cells, switches) if random_cells else "",
            "‡: cells whose every seed gave the same pair of runs (a world that draws nothing at random: "
            "an interval of zero, the difference the world's own). Every cell beyond its interval: "
            "[figures/weave-ablation.md](figures/weave-ablation.md).",
        ]
        if part
    )
    figures = os.path.join(ROOT, "docs", "figures")
    os.makedirs(figures, exist_ok=True)
    with open(os.path.join(figures, "weave-ablation.md"), "w") as f:
        f.write("# weave's ablation, cell by cell\n\n")
        f.write("Generated by `" + command.strip() + "`; the tally is in [../weave.md](../weave.md).\n\n")
        f.write("## Scenario files\n\n" + cell_lines(file_cells) + "\n\n")
        f.write("## Random worlds\n\n" + cell_lines(random_cells) + "\n\n")
        f.write(
            "‡: an interval of zero: every seed gave the same pair of runs (the world draws nothing "
            "at random), so the difference is the world's own, counted as beyond its interval.\n\n"
        )
        f.write("## Time per command\n\n| minutes | command |\n|---:|---|\n")
        for seconds, cmd in sorted(timings, key=lambda t: -t[0]):
            f.write(f"| {seconds / 60:.1f} | `pcdn {' '.join(cmd)}` |\n")
    path = os.path.join(ROOT, "docs", "weave.md")
    with open(path) as f:
        text = f.read()
    a, b = text.index(BEGIN), text.index(END)
    text = text[: a + len(BEGIN)] + "\n" + summary + "\n" + text[b:]
    with open(path, "w") as f:
        f.write(text)
    print(summary)


if __name__ == "__main__":
    main()
