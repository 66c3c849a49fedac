#!/usr/bin/env python3
"""Registers many edge devices with a tracker, each reporting a load and announcing contents
(docs/benchmarks.md, "Tracker"). Every device is enrolled here with the operator key (its own
Ed25519 key and an operator-signed credential) and signs its requests, as `pcdn serve` does
(docs/tracker.md, "Authentication"). Keep-alive HTTP over several threads, so 100,000 devices
take a few minutes rather than the hours one curl per request would. Needs python3-cryptography.

    scripts/tracker-load.py URL OPERATOR_KEY_FILE COUNT CID [CID...] [--prefix edge]
"""
import argparse
import hashlib
import http.client
import json
import os
import threading
import time
import urllib.parse

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

CREDENTIAL_DOMAIN = b"pcdn/device-credential/v1\0"


def raw_public(key):
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def enroll(operator, device_id):
    """A fresh edge key and its credential in hex: the canonical encoding the operator signs."""
    key = Ed25519PrivateKey.generate()
    now_ms = int(time.time() * 1000)
    body = (bytes([1, 0, len(device_id)]) + device_id.encode() + raw_public(key) + raw_public(operator)
            + now_ms.to_bytes(8, "big") + (now_ms // 1000 + 86_400).to_bytes(8, "big"))
    return key, (body + operator.sign(CREDENTIAL_DOMAIN + body)).hex()


def authorization(key, credential, method, path, body):
    timestamp, nonce = int(time.time() * 1000), os.urandom(16).hex()
    text = (f"pcdn/request/v1\nPCDN-Device\n{method}\n{path}\n"
            f"{hashlib.sha256(body).hexdigest()}\n{timestamp}\n{nonce}")
    signature = key.sign(text.encode()).hex()
    return (f"PCDN-Device credential={credential}, timestamp={timestamp}, nonce={nonce}, "
            f"signature={signature}")


def load(url, operator, prefix, first, count, step, contents, errors):
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)

    def call(key, credential, method, path, body):
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json",
                   "Authorization": authorization(key, credential, method, path, data)}
        conn.request(method, path, data, headers)
        response = conn.getresponse()
        text = response.read()
        if response.status >= 300:
            errors.append(f"{method} {path}: {response.status} {text[:200]!r}")

    for i in range(first, count, step):
        device = f"{prefix}-{i}"
        key, credential = enroll(operator, device)
        call(key, credential, "POST", "/v1/devices", {
            "id": device, "addr": f"127.0.0.1:{20000 + i % 40000}", "origin": False,
            "upload_capacity_bps": 1_000_000 * (1 + i % 97),
        })
        call(key, credential, "POST", f"/v1/devices/{device}/heartbeat",
             {"sessions": i % 7, "upload_bps": 300_000 * (i % 5), "healthy": True})
        call(key, credential, "PUT", f"/v1/devices/{device}/contents", {"contents": contents})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("operator_key", help="operator.key from `pcdn operator init`")
    parser.add_argument("count", type=int)
    parser.add_argument("contents", nargs="+")
    parser.add_argument("--prefix", default="edge")
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    with open(args.operator_key) as file:
        operator = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(file.read().strip()))
    errors = []
    threads = [
        threading.Thread(target=load, args=(args.url, operator, args.prefix, t, args.count,
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
