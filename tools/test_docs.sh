#!/usr/bin/env bash
# Every short kvsim command in README.md and docs/*.md runs as written.
# The ```sh blocks are read in order, file by file; each line that starts
# with build/bin/kvsim is run from a scratch directory that looks like the
# repository (build*/ and tools/ linked, corpus/ copied, so an export into
# corpus/scenarios/ stays in the scratch copy), one block's lines in order
# (a later line may read what an earlier one wrote). A line passes when it
# exits 0, 1 or 2 (clean, or the violation it is there to show); 3 (bad
# input), 4 (usage) or any other code fails the test and names the file
# and the line. Skipped, and counted: lines with placeholders ([...],
# <...>, NAME, I/N, A..B), sweeps longer than the limits below, and lines
# that need what only a fuzzer run leaves (afl-out/, crash-*) or a build
# directory that is not there (build-fuzz/ before make build-fuzz).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
K=${KVSIM:-build/bin/kvsim}
[ -x "$K" ] || { echo "docs: FAILED — no $K" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 - "$root" "$tmp" <<'PY'
import os, re, shutil, subprocess, sys
root, tmp = sys.argv[1], sys.argv[2]
files = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
MAX_SEEDS = {"faults": 10000, "steady": 2000, "load": 300}
ran = skipped = 0
failures = []

def skip_reason(cmd):
    if re.search(r"\[|<|\.\.\.|\bNAME\b|\bI/N\b|\bA\.\.B\b|\bFILE\b", cmd):
        return "placeholder"
    if "afl-out" in cmd or "crash-" in cmd:
        return "needs a fuzzer run"
    for b in re.findall(r"\b(build-[a-z]+)/", cmd):
        if not os.path.isdir(os.path.join(root, b)):
            return "no %s here" % b
    m = re.search(r"--seeds[ =](\d+)\.\.(\d+)", cmd)
    if m:
        w = re.search(r"--workload[ =](\w+)", cmd)
        n = int(m.group(2)) - int(m.group(1)) + 1
        if n > MAX_SEEDS.get(w.group(1) if w else "faults", 0):
            return "long sweep (%d seeds)" % n
    return None

for f in files:
    text = open(os.path.join(root, f)).read()
    for bi, m in enumerate(re.finditer(r"```(?:sh|bash)\n(.*?)```", text, re.S)):
        work = os.path.join(tmp, "%s-%d" % (f.replace("/", "_"), bi))
        os.makedirs(work)
        for d in ["tools"] + [b for b in os.listdir(root) if b.startswith("build")]:
            os.symlink(os.path.join(root, d), os.path.join(work, d))
        shutil.copytree(os.path.join(root, "corpus"), os.path.join(work, "corpus"))
        line_no = text[: m.start(1)].count("\n") + 1
        for i, line in enumerate(m.group(1).splitlines()):
            cmd = re.split(r"\s+#\s", line, maxsplit=1)[0].strip()
            if not cmd.startswith("build/bin/kvsim"):
                continue
            why = skip_reason(cmd)
            if why:
                skipped += 1
                print("  skip %s:%d (%s): %s" % (f, line_no + i, why, cmd))
                continue
            r = subprocess.run(["bash", "-c", "set -o pipefail; " + cmd], cwd=work,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
            ran += 1
            if r.returncode not in (0, 1, 2):
                failures.append("%s:%d: exit %d: %s\n%s" % (f, line_no + i, r.returncode, cmd,
                                                           r.stderr.decode(errors="replace")[-600:]))
for x in failures:
    print("docs: FAILED — " + x, file=sys.stderr)
print("  %d commands from README.md and docs/ ran as written, %d skipped" % (ran, skipped))
sys.exit(1 if failures or ran == 0 else 0)
PY
rc=$?
[ "$rc" = 0 ] && echo "docs: ok"
exit "$rc"
