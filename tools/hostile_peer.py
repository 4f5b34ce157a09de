#!/usr/bin/env python3
"""tools/hostile_peer.py — a local process that speaks kvconn's wire protocols
but does not hold the cluster secret, run against live kvnode processes by
tools/test_hostile.sh (transport/README.md, "Threat model").

Attacks, all at once, for --seconds:
  silent    --silent connections to every target that never send a byte
  trickle   5 connections to every target sending a HELLO one byte per 200 ms
  bridge    the proxy's own HELLO replayed (magic, ABI and process copied from
            what the proxy sends in clear), with a nonce, then a guessed PROOF;
            or the HELLO then a POST (an ENGINE_DOWN-like forged message)
  transport a HELLO with a nonce, then a WRITE into region 1 or 2, a CTRL (a
            forged pull), or a guessed PROOF
  insider   with --secret-file (a rogue insider: it holds the cluster secret
            but was granted nothing): per transport target, --insider
            connections that pass the challenge-response, then WRITEs of 16
            bytes into grant ids 1025.. (the first ids a grant table gives)
            and a few random ones, with no key, a random key, or a key that
            only differs in one bit from another random one; every WRITE must
            be answered by a WRITE_ACK with n_ok 0 (refused by the grant
            check, transport/README.md "Write grants")
Every byte the targets send back is parsed into frames. The attacker must
learn nothing: from a transport endpoint only CHAL frames (a nonce and a MAC),
from the bridge only HELLO and PROOF frames (nonces and MACs), never a
WRITE_ACK, a CTRL, a DIR or a POST; an insider only CHAL and WRITE_ACK frames
whose n_ok is 0. Prints one JSON line with the counts; exits 1 if anything
else came back.
"""
import argparse
import hashlib
import hmac
import json
import os
import select
import socket
import struct
import sys
import time

TCP_HELLO, TCP_CTRL, TCP_WRITE, TCP_ACK, TCP_CHAL, TCP_PROOF = 1, 2, 3, 4, 5, 6
BR_HELLO, BR_DIR, BR_POST, BR_PROOF = 1, 2, 3, 4
ALLOWED = {"transport": {TCP_CHAL}, "bridge": {BR_HELLO, BR_PROOF}}


def frame(ftype, body):
    return struct.pack("<IB", 1 + len(body), ftype) + body


def connect(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(("127.0.0.1", port))
    s.setblocking(False)
    return s


class Conn:
    def __init__(self, kind, port):
        self.kind, self.sock, self.buf, self.types, self.closed = kind, connect(port), b"", [], False

    def send(self, b):
        try:
            self.sock.sendall(b)
        except OSError:
            self.closed = True

    def pump(self):
        while not self.closed:
            try:
                d = self.sock.recv(65536)
            except BlockingIOError:
                return
            except OSError:
                self.closed = True
                return
            if not d:
                self.closed = True
                return
            self.buf += d
            while len(self.buf) >= 5:
                n = struct.unpack_from("<I", self.buf)[0]
                if len(self.buf) < 4 + n:
                    break
                self.types.append(self.buf[4])
                self.buf = self.buf[4 + n:]


def transport_attack(port, i):
    c = Conn("transport", port)
    nonce = os.urandom(32)
    c.send(frame(TCP_HELLO, nonce + b"127.0.0.1:%d" % (1000 + i)))
    what = i % 3
    if what == 0:  # a WRITE of 16 bytes into region 1 or 2 at offset 0
        hdr = struct.pack("<QIIIQI", 77, 0, 1, 1 + i % 2, 0, 16)
        c.send(frame(TCP_WRITE, hdr + b"\xee" * 16))
    elif what == 1:  # a forged pull: control bytes
        c.send(frame(TCP_CTRL, os.urandom(64)))
    else:
        c.send(frame(TCP_PROOF, bytes(32)))
    return c


def mac(secret, label, *parts):
    """transport/auth/auth.c kv_auth_mac: HMAC-SHA-256 over the label with
    its NUL, then each part as len:u32le bytes."""
    m = hmac.new(secret, label + b"\0", hashlib.sha256)
    for p in parts:
        m.update(struct.pack("<I", len(p)) + p)
    return m.digest()


def read_frame(sock, timeout=2.0):
    """One frame (type, payload) off a blocking socket; None on EOF/timeout."""
    sock.settimeout(timeout)
    buf = b""
    try:
        while len(buf) < 4:
            d = sock.recv(4 - len(buf))
            if not d:
                return None
            buf += d
        n = struct.unpack("<I", buf)[0]
        body = b""
        while len(body) < n:
            d = sock.recv(n - len(body))
            if not d:
                return None
            body += d
    except OSError:
        return None
    return body[0], body[1:]


def insider_attack(port, secret, i, writes):
    """Handshake with the secret, then `writes` WRITEs no grant lets in.
    Returns (writes sent, acks, entries landed, forbidden frame types)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(("127.0.0.1", port))
    addr = b"127.0.0.1:%d" % (1 + i % 2)  # two claimed addresses: two peer slots on the target
    nonce_d = os.urandom(32)
    s.sendall(frame(TCP_HELLO, nonce_d + addr))
    f = read_frame(s)
    if not f or f[0] != TCP_CHAL or len(f[1]) != 64:
        s.close()
        return 0, 0, 0, [] if not f else [f[0]]
    nonce_a = f[1][:32]
    s.sendall(frame(TCP_PROOF, mac(secret, b"kvconn tcp dial", nonce_a, nonce_d, addr)))
    sent = acks = landed = 0
    bad = []
    for k in range(writes):
        grant = 1025 + k % 4 if k % 3 else struct.unpack("<I", os.urandom(4))[0]
        key = bytes(16) if k % 2 == 0 else os.urandom(16)
        hdr = struct.pack("<QIIIQI", 9000 + k, 0, 1, grant, 0, 16) + key
        s.sendall(frame(TCP_WRITE, hdr + b"\xee" * 16))
        sent += 1
    while acks < sent:
        f = read_frame(s)
        if f is None:
            break
        if f[0] != TCP_ACK:
            bad.append(f[0])
            continue
        acks += 1
        landed += struct.unpack_from("<I", f[1], 8)[0]
    s.close()
    return sent, acks, landed, bad


def bridge_attack(port, i):
    c = Conn("bridge", port)
    # the proxy's HELLO comes first, in clear: copy its magic and ABI
    t0 = time.time()
    while len(c.buf) < 5 + 12 and time.time() - t0 < 2 and not c.closed:
        select.select([c.sock], [], [], 0.05)
        c.pump()
    magic, abi = (struct.unpack_from("<II", c.buf, 5) if len(c.buf) >= 13 else (0x3142564B, 0))
    hello = struct.pack("<III", magic, abi, 2 + i % 8) + os.urandom(32)
    c.send(frame(BR_HELLO, hello))
    if i % 2 == 0:
        c.send(frame(BR_PROOF, bytes(32)))
    else:  # a POST to actor 0 kind 1 before any proof
        c.send(frame(BR_POST, struct.pack("<III", 0, 0, 1) + bytes(16)))
    return c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bridge", type=int, required=True)
    ap.add_argument("--transport", required=True, help="comma-separated ports")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--silent", type=int, default=100)
    ap.add_argument("--secret-file", help="the cluster secret (64 hex digits): also attack as an insider")
    ap.add_argument("--insider", type=int, default=4, help="insider connections per transport target")
    ap.add_argument("--insider-writes", type=int, default=8, help="WRITEs per insider connection")
    a = ap.parse_args()
    secret = bytes.fromhex(open(a.secret_file).read().strip()) if a.secret_file else None
    tports = [int(p) for p in a.transport.split(",") if p]
    targets = [("bridge", a.bridge)] + [("transport", p) for p in tports]
    # first, while the targets' requests run: the insider, before the
    # outsiders' connections hold the targets' slots for connections in
    # their HELLO
    ins = {"writes": 0, "acks": 0, "landed": 0, "handshakes_failed": 0}
    bad = []
    if secret:
        for port in tports:
            for j in range(a.insider):
                try:
                    sent, acks, landed, fb = insider_attack(port, secret, j, a.insider_writes)
                except OSError:
                    sent, acks, landed, fb = 0, 0, 0, []
                ins["writes"] += sent
                ins["acks"] += acks
                ins["landed"] += landed
                ins["handshakes_failed"] += sent == 0
                bad += [("insider", t) for t in fb]
    conns, trickle, errors = [], [], 0
    for kind, port in targets:
        for _ in range(a.silent):
            try:
                conns.append(Conn(kind, port))
            except OSError:
                errors += 1
        for _ in range(5):
            try:
                trickle.append(Conn(kind, port))
            except OSError:
                errors += 1
    trickle_hello = frame(TCP_HELLO, os.urandom(32) + b"127.0.0.1:9")
    end, i, k = time.time() + a.seconds, 0, 0
    while time.time() < end:
        for kind, port in targets:
            try:
                conns.append(bridge_attack(port, i) if kind == "bridge" else transport_attack(port, i))
            except OSError:
                errors += 1
        i += 1
        if k < len(trickle_hello):
            for c in trickle:
                c.send(trickle_hello[k:k + 1])
            k += 1
        t1 = time.time() + 0.2
        while time.time() < t1:
            for c in conns + trickle:
                c.pump()
            time.sleep(0.01)
    for c in conns + trickle:
        c.pump()
    bad += [(c.kind, t) for c in conns + trickle for t in c.types if t not in ALLOWED[c.kind]]
    out = {"connections": len(conns) + len(trickle), "attacks": i * len(targets), "connect_errors": errors,
           "closed_by_target": sum(c.closed for c in conns + trickle),
           "frames_received": sum(len(c.types) for c in conns + trickle), "forbidden_frames": len(bad),
           "insider": ins}
    print(json.dumps(out))
    if bad:
        print("hostile_peer: the targets sent frames an outsider must never see: %s" % bad[:10], file=sys.stderr)
        return 1
    if ins["landed"] or ins["acks"] != ins["writes"]:
        print("hostile_peer: an insider's WRITE landed or went unanswered: %s" % ins, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
