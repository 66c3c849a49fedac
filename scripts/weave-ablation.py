#!/usr/bin/env python3
"""weave's ablation table: each mechanism switched off in turn, over the scenario files and the
random suite, on fresh seeds, paired seed by seed against weave as it ships.

For every paths scenario in scenarios/ (not the fleets, not the emulator's links file), this runs

    pcdn sim --ablate scenarios/STEM.toml --json --seed SEED --repeat R [--point P ...] [--cc C ...]

and once

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

The binary is copied to a temporary file first, so a concurrent `cargo build` cannot swap it.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

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


def run(cmd):
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    result = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(cmd)}")
    return json.loads(result.stdout)


def tally(cells, switches):
    rows = []
    for s in switches:
        mine = [c for c in cells if c["switch"] == s]
        count = {e: sum(1 for c in mine if c["effect"] == e) for e in ("worse", "level", "better")}
        rows.append((s, count["worse"], count["level"], count["better"]))
    return rows


def tally_table(title, cells, switches):
    lines = [
        f"| {title}: switched off | worse | level | better |",
        "|---|---:|---:|---:|",
    ]
    for s, worse, level, better in tally(cells, switches):
        lines.append(f"| `{s}` | {worse} | {level} | {better} |")
    return "\n".join(lines)


def cell_lines(cells):
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
            f"| {c['on']:.4f} | {c['off']:.4f} | {c['diff']:+.4f} ± {c['half_width']:.4f} | {c['effect']} |"
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
    ap.add_argument("--only", help="only scenario files whose stem contains this")
    ap.add_argument("--skip", action="append", default=[], help="no scenario file whose stem contains this (repeatable)")
    ap.add_argument("--no-files", action="store_true", help="the random worlds only")
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

    started = time.time()
    common = ["--json", "--seed", str(args.seed), "--repeat", str(args.repeat)]
    ccs = [x for c in args.cc for x in ("--cc", c)]
    file_cells = []
    if not args.no_files:
        for name, doc in scenario_files():
            if args.only and args.only not in name:
                continue
            if any(s in name for s in args.skip):
                continue
            cmd = [exe, "sim", "--ablate", f"scenarios/{name}"] + common
            doc_ccs = doc.get("client", {}).get("cc", ["default"])
            if doc_ccs == "all":
                doc_ccs = None
            wanted = [c for c in args.cc if doc_ccs is None or c in doc_ccs]
            if args.cc and not wanted:
                # The file does not run the control asked for: its own first one.
                wanted = [doc_ccs[0]] if doc_ccs else []
            cmd += [x for c in wanted for x in ("--cc", c)]
            values = doc.get("sweep", {}).get("values", [])
            if args.points and values:
                cmd += [x for v in values[: args.points] for x in ("--point", str(v))]
            file_cells += run(cmd)
    random_cells = []
    if args.random:
        cmd = [exe, "sim", "--ablate", "--random", str(args.random)] + common + ccs
        if args.quick:
            cmd.append("--quick")
        random_cells = run(cmd)
    elapsed = time.time() - started
    shutil.rmtree(tmp)

    switches = []
    for c in file_cells + random_cells:
        if c["switch"] not in switches:
            switches.append(c["switch"])
    # The command as anyone would type it: without this machine's binary.
    argv, shown = sys.argv[1:], []
    while argv:
        arg = argv.pop(0)
        if arg == "--bin":
            argv = argv[1:]
        elif not arg.startswith("--bin=") and arg != "--no-build":
            shown.append(arg)
    command = "scripts/weave-ablation.py " + " ".join(shown)
    summary = "\n\n".join(
        part
        for part in [
            f"`{command.strip()}` ({elapsed / 60:.0f} min; seeds from {args.seed}, {args.repeat} runs per cell; "
            "metric: aggregation for downloads, first frame + stalled seconds for videos; a cell is a "
            "file's sweep point × control, or a random world × control):",
            tally_table("scenario files", file_cells, switches) if file_cells else "",
            tally_table(f"{args.random} random worlds", random_cells, switches) if random_cells else "",
            "Every cell beyond its interval: [figures/weave-ablation.md](figures/weave-ablation.md).",
        ]
        if part
    )
    figures = os.path.join(ROOT, "docs", "figures")
    os.makedirs(figures, exist_ok=True)
    with open(os.path.join(figures, "weave-ablation.md"), "w") as f:
        f.write("# weave's ablation, cell by cell\n\n")
        f.write("Generated by `" + command.strip() + "`; the tally is in [../weave.md](../weave.md).\n\n")
        f.write("## Scenario files\n\n" + cell_lines(file_cells) + "\n\n")
        f.write("## Random worlds\n\n" + cell_lines(random_cells) + "\n")
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
