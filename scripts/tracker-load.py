#!/usr/bin/env python3
"""Registers many edge devices with a tracker, each reporting a load and announcing contents
(docs/benchmarks.md, "Tracker"). Keep-alive HTTP over several threads, so 100,000 devices take
a minute or two rather than the hours one curl per request would.

    scripts/tracker-load.py URL SECRET COUNT CID [CID...] [--prefix edge]
"""
import argparse
import http.client
import json
import threading
import urllib.parse


def load(url, secret, prefix, first, count, step, contents, errors):
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}

    def call(method, path, body):
        conn.request(method, path, json.dumps(body), headers)
        response = conn.getresponse()
        text = response.read()
        if response.status >= 300:
            errors.append(f"{method} {path}: {response.status} {text[:200]!r}")

    for i in range(first, count, step):
        device = f"{prefix}-{i}"
        call("POST", "/v1/devices", {
            "id": device, "addr": f"127.0.0.1:{20000 + i % 40000}", "origin": False,
            "upload_capacity_bps": 1_000_000 * (1 + i % 97),
        })
        call("POST", f"/v1/devices/{device}/heartbeat",
             {"sessions": i % 7, "upload_bps": 300_000 * (i % 5), "healthy": True})
        call("PUT", f"/v1/devices/{device}/contents", {"contents": contents})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("secret")
    parser.add_argument("count", type=int)
    parser.add_argument("contents", nargs="+")
    parser.add_argument("--prefix", default="edge")
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    errors = []
    threads = [
        threading.Thread(target=load, args=(args.url, args.secret, args.prefix, t, args.count,
                                            args.threads, args.contents, errors))
        for t in range(args.threads)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise SystemExit(f"{len(errors)} requests failed, first: {errors[0]}")


if __name__ == "__main__":
    main()
