#!/usr/bin/env python3
"""tools/check_trace.py — checks a Chrome/Perfetto trace-event JSON file.

    python3 tools/check_trace.py TRACE.json [...]

kvsim writes these (`kvsim run --trace-json`, docs/traces.md); the checks
are what makes such a trace read right in ui.perfetto.dev:

  - the file is JSON: an object with a "traceEvents" array (or the array);
  - every event has a phase, and every event other than metadata a numeric
    "ts", a "pid" and a "tid";
  - every pid used has a process_name and every (pid, tid) a thread_name;
  - flows: per (cat, id) one start ("s") and one finish ("f"), the finish
    not before the start; a start without a finish or a finish without a
    start fails;
  - complete slices ("X") on one thread nest or are apart: none overlaps
    another without lying inside it;
  - async slices ("b"/"e") match per (pid, cat, id): no end without a
    begin, no begin left open, no end before its begin.

Exit 0 when every file passes; 1 with "FILE: FAILED: reason" on the first
failure of a file; 2 on usage errors.
"""
import json
import sys


class Bad(Exception):
    pass


def ns(ev, key="ts"):
    """Microseconds (float) to integer ns, so equal times compare equal."""
    v = ev.get(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise Bad(f"event {short(ev)}: '{key}' is not a number")
    return round(v * 1000)


def short(ev):
    keys = ("name", "ph", "ts", "pid", "tid", "id", "cat")
    return "{" + ", ".join(f"{k}={ev[k]!r}" for k in keys if k in ev) + "}"


def load(path):
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise Bad(f"cannot read: {e}")
    except json.JSONDecodeError as e:
        raise Bad(f"invalid JSON: {e}")
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise Bad('no "traceEvents" array')
    for ev in events:
        if not isinstance(ev, dict) or not isinstance(ev.get("ph"), str):
            raise Bad(f"an event without a phase: {str(ev)[:120]}")
    return events


def check_names(events):
    procs, threads, used_p, used_t = set(), set(), {}, {}
    for ev in events:
        ph = ev["ph"]
        if ph == "M":
            args = ev.get("args") or {}
            if ev.get("name") == "process_name" and isinstance(args.get("name"), str):
                procs.add(ev.get("pid"))
            if ev.get("name") == "thread_name" and isinstance(args.get("name"), str):
                threads.add((ev.get("pid"), ev.get("tid")))
            continue
        if "pid" not in ev or "tid" not in ev:
            raise Bad(f"event {short(ev)} has no pid or tid")
        ns(ev)
        used_p.setdefault(ev["pid"], ev)
        used_t.setdefault((ev["pid"], ev["tid"]), ev)
    for pid, ev in used_p.items():
        if pid not in procs:
            raise Bad(f"pid {pid} has no process_name (first used by {short(ev)})")
    for key, ev in used_t.items():
        if key not in threads:
            raise Bad(f"pid {key[0]} tid {key[1]} has no thread_name (first used by {short(ev)})")


def check_flows(events):
    start, finish = {}, {}
    for ev in events:
        if ev["ph"] not in ("s", "f"):
            continue
        if "id" not in ev:
            raise Bad(f"flow event {short(ev)} has no id")
        key = (ev.get("cat"), ev["id"])
        side = start if ev["ph"] == "s" else finish
        if key in side:
            raise Bad(f"flow {key} has two '{ev['ph']}' events: {short(side[key])} and {short(ev)}")
        side[key] = ev
    for key, ev in start.items():
        if key not in finish:
            raise Bad(f"flow {key} starts ({short(ev)}) and never finishes")
        if ns(finish[key]) < ns(ev):
            raise Bad(f"flow {key} finishes before it starts: {short(ev)} -> {short(finish[key])}")
    for key, ev in finish.items():
        if key not in start:
            raise Bad(f"flow {key} finishes ({short(ev)}) without a start")
    return len(start)


def check_slices(events):
    by_thread = {}
    for ev in events:
        if ev["ph"] == "X":
            dur = ns(ev, "dur") if "dur" in ev else 0
            if dur < 0:
                raise Bad(f"slice {short(ev)} has a negative duration")
            by_thread.setdefault((ev["pid"], ev["tid"]), []).append((ns(ev), dur, ev))
    for key, slices in by_thread.items():
        slices.sort(key=lambda s: (s[0], -s[1]))  # outer slices first
        stack = []  # (end, event) of the slices open at this time
        for ts, dur, ev in slices:
            while stack and stack[-1][0] <= ts:
                stack.pop()
            if stack and ts + dur > stack[-1][0]:
                raise Bad(f"slices overlap without nesting on pid {key[0]} tid {key[1]}: "
                          f"{short(stack[-1][1])} and {short(ev)}")
            stack.append((ts + dur, ev))


def check_async(events):
    open_, n = {}, 0
    for ev in sorted((e for e in events if e["ph"] in ("b", "e")), key=lambda e: (ns(e), e["ph"] == "e")):
        if "id" not in ev:
            raise Bad(f"async event {short(ev)} has no id")
        key = (ev.get("pid"), ev.get("cat"), ev["id"])
        if ev["ph"] == "b":
            open_.setdefault(key, []).append(ev)
            n += 1
        elif not open_.get(key):
            raise Bad(f"async end {short(ev)} without a begin")
        else:
            open_[key].pop()
    for key, evs in open_.items():
        if evs:
            raise Bad(f"async begin {short(evs[-1])} is never ended")
    return n


def check(path):
    events = load(path)
    check_names(events)
    flows = check_flows(events)
    check_slices(events)
    spans = check_async(events)
    return f"{len(events)} events, {flows} flows, {spans} async slices"


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    for path in argv[1:]:
        try:
            print(f"{path}: ok ({check(path)})")
        except Bad as e:
            print(f"{path}: FAILED: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
