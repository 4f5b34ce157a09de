#!/usr/bin/env python3
"""bench/mutation_util.py — helpers of bench/mutation.sh (standard library only).

    mutation_util.py sync SRC DST...     # NUL-separated relative paths on stdin: copy each SRC/PATH to every
                                         # DST/PATH whose bytes differ (new mtime: the build sees the change),
                                         # delete files under each DST that are not listed; prints a fingerprint
                                         # of the contents (but of --unprinted PREFIX paths)
    mutation_util.py report OUT [--equiv FILE] [--title T]
                                         # OUT/results.tsv -> the summary table (stdout, OUT/report.md) and the
                                         # per-mutant rows with their verdict (OUT/report.tsv)
"""
import argparse
import hashlib
import os
import statistics
import sys

RESULT_COLS = ["id", "file", "func", "op", "status", "how", "workload", "seed", "hashes", "fuzz",
               "build_s", "kill_s", "wall_s", "desc", "note"]


def cmd_sync(args):
    names = [p for p in sys.stdin.buffer.read().decode().split("\0") if p]
    keep = set()
    h = hashlib.sha256()
    for rel in sorted(names):
        src = os.path.join(args.src, rel)
        if not os.path.isfile(src) or os.path.islink(src):
            continue
        keep.add(rel)
        with open(src, "rb") as fh:
            data = fh.read()
        if not any(rel.startswith(x) for x in args.unprinted):
            h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
        for root in args.dst:
            dst = os.path.join(root, rel)
            try:
                with open(dst, "rb") as fh:
                    if fh.read() == data:
                        continue
            except OSError:
                pass
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            tmp = dst + ".sync-tmp"
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, os.stat(src).st_mode & 0o777)
            os.replace(tmp, dst)
    for root in args.dst:
        for d, _dirs, files in os.walk(root):
            for f in files:
                rel = os.path.relpath(os.path.join(d, f), root)
                if rel not in keep:
                    os.unlink(os.path.join(d, f))
    print(h.hexdigest()[:16])


# -Werror diagnostics that are type errors in all but name (a swapped argument)
TYPE_WARNINGS = {"int-conversion", "incompatible-pointer-types", "conversion", "sign-conversion", "pointer-sign",
                 "discarded-qualifiers", "enum-conversion", "int-to-pointer-cast", "pointer-to-int-cast",
                 "float-conversion", "format="}


def read_results(path):
    rows = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            parts = line.split("\t")
            if parts[0] == "id":
                continue
            parts += [""] * (len(RESULT_COLS) - len(parts))
            r = dict(zip(RESULT_COLS, parts))
            rows[r["id"]] = r  # a resumed mutant's later row wins
    return list(rows.values())


def read_equiv(path):
    eq = {}
    if not path or not os.path.exists(path):
        return eq
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 1)
            eq[parts[0]] = parts[1] if len(parts) > 1 else ""
    return eq


def verdict(r, eq):
    s = r["status"]
    if s == "survived" and r["fuzz"] == "not built" and "fuzz build:" in r["note"] and "error:" in r["note"]:
        return "not_compiled"  # clang (the fuzz, clang and asan presets) rejects what gcc took
    if s == "survived" and r["id"] in eq:
        return "equivalent"
    return s


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fnum(s):
    try:
        return float(s)
    except ValueError:
        return None


def pct(a, b):
    return "%.1f%%" % (100.0 * a / b) if b else "-"


def cmd_report(args):
    out = args.out
    rows = read_results(os.path.join(out, "results.tsv"))
    eq = read_equiv(args.equiv)
    meta = {}
    mp = os.path.join(out, "meta.env")
    if os.path.exists(mp):
        with open(mp, encoding="utf-8") as fh:
            for line in fh:
                if "=" in line:
                    k, v = line.rstrip("\n").split("=", 1)
                    meta[k] = v.strip("'")
    order = {}
    mt = os.path.join(out, "mutants.tsv")
    planned = 0
    if os.path.exists(mt):
        with open(mt, encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                order[line.split("\t", 1)[0]] = i
                planned += 1
    rows.sort(key=lambda r: order.get(r["id"], 1 << 30))
    for r in rows:
        r["verdict"] = verdict(r, eq)
        r["equiv_reason"] = eq.get(r["id"], "") if r["verdict"] == "equivalent" else ""
    # listed ids that did not survive: the list is wrong (or the code moved)
    listed_wrong = [r for r in rows if r["id"] in eq and r["status"] != "survived"]

    def count(pred):
        return sum(1 for r in rows if pred(r))

    n = len(rows)
    nc = count(lambda r: r["verdict"] == "not_compiled")
    tce = count(lambda r: r["verdict"] == "equivalent_tce")
    eqv = count(lambda r: r["verdict"] == "equivalent")
    err = count(lambda r: r["verdict"] == "error")
    killed = [r for r in rows if r["verdict"] == "killed"]
    surv = [r for r in rows if r["verdict"] == "survived"]
    s_same = sum(1 for r in surv if r["hashes"] == "identical")
    s_chg = len(surv) - s_same
    denom = len(killed) + len(surv)
    by_how = {}
    for r in killed:
        how = r["how"]
        cat = ("fuzz" if how.startswith("fuzz:") else "unit test" if how.startswith("unit:")
               else "invariant" if how.startswith(("INV-", "SCHED-")) else how)
        by_how.setdefault(cat, {}).setdefault(how, 0)
        by_how[cat][how] += 1

    L = []
    title = args.title or "Mutation benchmark"
    L.append("## %s" % title)
    L.append("")
    if meta:
        L.append("- command: `%s`" % meta.get("command", "?"))
        L.append("- commit: `%s`, sources fingerprint `%s`" % (meta.get("commit", "?"), meta.get("fingerprint", "?")))
        staged = meta.get("seeds_staged")
        L.append("- budget `%s`: faults seeds %s, load seeds %s, steady seeds %s%s, sweep time limit %s; fuzz %s" % (
            meta.get("budget", "?"), meta.get("seeds_faults", "?"), meta.get("seeds_load", "?"),
            meta.get("seeds_steady", "?"), ", staged (fault seeds, --kvmem staged) %s" % staged if staged else "",
            meta.get("limits", "?"), meta.get("fuzz", "?")))
        if meta.get("unit"):
            L[-1] += "; unit tests: %s" % meta["unit"]
        L.append("- mutants in the listing (files `%s`, operators `%s`): %s; this run: %s" % (
            meta.get("files", "?"), meta.get("ops", "?"), meta.get("listed", "?"), planned or n))
        if meta.get("started"):
            L.append("- started %s, on %s (%s cores)" % (meta.get("started"), meta.get("host", "?"),
                                                         meta.get("cores", "?")))
    L.append("")
    L.append("| | mutants | |")
    L.append("|---|---:|---|")
    if meta.get("listed"):
        L.append("| generated | %s | the listing (files %s, operators %s) |" % (
            meta["listed"], meta.get("files", "?"), meta.get("ops", "?")))
    L.append("| run | %d | %s |" % (n, "of %d planned (the sample)" % planned if planned and planned != n
                                   else ("the sample" if meta.get("sample", "all") != "all" else "")))
    warns = {}
    nc_clang = count(lambda r: r["verdict"] == "not_compiled" and r["status"] == "survived")
    for r in rows:
        if r["verdict"] == "not_compiled" and r["status"] == "not_compiled":
            w = r["note"].split("-Werror=")[1].split("]")[0] if "-Werror=" in r["note"] else ""
            if w and w not in TYPE_WARNINGS:
                warns[w] = warns.get(w, 0) + 1
    nw = sum(warns.values())
    L.append("| not compiled | %d | gcc (the checked build, -Werror): %d type errors (type conversions included), "
             "%d other warnings%s; clang only (the fuzz build): %d |" % (
                 nc, nc - nw - nc_clang, nw,
                 " (%s)" % ", ".join("%s %d" % kv for kv in sorted(warns.items())) if warns else "", nc_clang))
    L.append("| equivalent: identical object code | %d | the mutated file compiles to the same code (debug info aside) |" % tce)
    L.append("| equivalent: listed | %d | bench/mutation_equivalent.txt, with the reason |" % eqv)
    if err:
        L.append("| harness error | %d | see the note column |" % err)
    L.append("| **killed** | **%d** | |" % len(killed))
    cats = ("invariant", "crash", "timeout", "sim-error", "fuzz", "unit test")
    for cat in cats:
        if cat in by_how:
            total = sum(by_how[cat].values())
            detail = ", ".join("%s %d" % (k, v) for k, v in sorted(by_how[cat].items(), key=lambda kv: (-kv[1], kv[0])))
            if list(by_how[cat]) == [cat]:
                detail = ""
            L.append("| &nbsp;&nbsp;by %s | %d | %s |" % (cat, total, detail))
    for cat in sorted(set(by_how) - set(cats)):
        L.append("| &nbsp;&nbsp;by %s | %d | |" % (cat, sum(by_how[cat].values())))
    L.append("| **survived** | **%d** | |" % len(surv))
    L.append("| &nbsp;&nbsp;hash-identical (candidate equivalent) | %d | every trace hash of the budget equals the unmutated build's |" % s_same)
    L.append("| &nbsp;&nbsp;hash-changed | %d | |" % s_chg)
    L.append("| **kill rate** | **%s** | killed / (killed + survived): compiled, non-equivalent mutants |"
             % pct(len(killed), denom))
    by_unit = sum(by_how.get("unit test", {}).values())
    if by_unit:
        L.append("| kill rate of the harness alone | %s | the same without the unit-test stage: the sweeps and the "
                 "fuzzer (%d killed) |" % (pct(len(killed) - by_unit, denom), len(killed) - by_unit))
    L.append("")
    kill_t = [fnum(r["kill_s"]) for r in killed]
    wall_t = [fnum(r["wall_s"]) for r in rows]
    wall_c = [fnum(r["wall_s"]) for r in rows if r["verdict"] in ("killed", "survived")]
    mk, mw, mc = median(kill_t), median(wall_t), median(wall_c)
    L.append("Median time to kill %s s (from the first sweep's start to the verdict); median wall time per mutant %s s "
             "(all), %s s (compiled, non-equivalent: build, sweeps, hashes, fuzz); total %s s." % (
                 "%.1f" % mk if mk is not None else "-", "%.1f" % mw if mw is not None else "-",
                 "%.1f" % mc if mc is not None else "-", "%.0f" % sum(x for x in wall_t if x)))
    L.append("")
    for key, label in (("file", "file"), ("op", "operator")):
        L.append("| %s | run | not compiled | equivalent | killed | survived | kill rate |" % label)
        L.append("|---|---:|---:|---:|---:|---:|---:|")
        groups = {}
        for r in rows:
            groups.setdefault(r[key], []).append(r)
        for g in sorted(groups):
            rs = groups[g]
            k = sum(1 for r in rs if r["verdict"] == "killed")
            s = sum(1 for r in rs if r["verdict"] == "survived")
            L.append("| %s | %d | %d | %d | %d | %d | %s |" % (
                g, len(rs), sum(1 for r in rs if r["verdict"] == "not_compiled"),
                sum(1 for r in rs if r["verdict"] in ("equivalent", "equivalent_tce")), k, s, pct(k, k + s)))
        L.append("")
    if surv:
        L.append("Survivors:")
        L.append("")
        L.append("| mutant | function | mutation | hashes | fuzz |")
        L.append("|---|---|---|---|---|")
        for r in surv:
            L.append("| `%s` | %s | `%s` | %s | %s |" % (r["id"], r["func"], r["desc"].replace("|", "\\|"),
                                                      r["hashes"], r["fuzz"]))
        L.append("")
    eqs = [r for r in rows if r["verdict"] == "equivalent"]
    if eqs:
        L.append("Equivalent (listed):")
        L.append("")
        for r in eqs:
            L.append("- `%s` (%s): %s" % (r["id"], r["func"], r["equiv_reason"]))
        L.append("")
    if listed_wrong:
        L.append("**Listed as equivalent but not a survivor here** (fix bench/mutation_equivalent.txt):")
        L.append("")
        for r in listed_wrong:
            L.append("- `%s`: %s %s" % (r["id"], r["status"], r["how"]))
        L.append("")
    text = "\n".join(L)
    with open(os.path.join(out, "report.md"), "w", encoding="utf-8") as fh:
        fh.write(text + "\n")
    cols = ["id", "file", "func", "op", "verdict", "how", "workload", "seed", "hashes", "fuzz", "build_s", "kill_s",
            "wall_s", "desc", "note"]
    with open(os.path.join(out, "report.tsv"), "w", encoding="utf-8") as fh:
        fh.write("\t".join(cols) + "\n")
        for r in rows:
            note = r["note"] or r["equiv_reason"]
            vals = [r["verdict"] if c == "verdict" else (note if c == "note" else r[c]) for c in cols]
            fh.write("\t".join(v.replace("\t", " ") for v in vals) + "\n")
    print(text)


def main():
    ap = argparse.ArgumentParser(prog="mutation_util.py")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("sync")
    p.add_argument("src")
    p.add_argument("dst", nargs="+")
    p.add_argument("--unprinted", action="append", default=[],
                   help="path prefix left out of the fingerprint (copied all the same)")
    p = sub.add_parser("report")
    p.add_argument("out")
    p.add_argument("--equiv")
    p.add_argument("--title")
    args = ap.parse_args()
    return cmd_sync(args) if args.cmd == "sync" else cmd_report(args)


if __name__ == "__main__":
    sys.exit(main() or 0)
