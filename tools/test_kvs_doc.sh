#!/usr/bin/env bash
# docs/kvs-format.md stays true to the .kvs parser:
#  - every directive keyword, every key=value key and every named value the
#    parser accepts (fault kinds, bug switches, connector kinds, policies,
#    group kinds), and the comment lines tools read ('# expect-bug', ...),
#    read from the code's own tables (sim/scenario.c, sim/world.c,
#    core/engine.c, core/connector.c, replay/input.c, apps/kvsim/common.c),
#    is mentioned in the doc as `name` (in backticks); each one missing is
#    named;
#  - the tables are cross-checked against what `kvsim gen` writes over a few
#    seeds of each workload (a key gen writes that the extraction missed
#    fails the test: the extraction would be stale);
#  - every ```kvs block of the doc that is a complete scenario (has a
#    'kvs N' line) parses: `kvsim run FILE` exits 0, 1 or 2, not 3.
# KVSIM overrides the kvsim binary (default build/bin/kvsim).
set -uo pipefail
cd "$(dirname "$0")/.."
K=${KVSIM:-build/bin/kvsim}
DOC=${KVS_DOC:-docs/kvs-format.md}
[ -x "$K" ] || { echo "kvs-doc: FAILED — no $K" >&2; exit 1; }
[ -f "$DOC" ] || { echo "kvs-doc: FAILED — no $DOC" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

for w in faults steady load; do
  for s in 1 2 3 4 5 6 7 8; do
    "$K" gen --seed "$s" --workload "$w" > "$tmp/gen-$w-$s.kvs" || { echo "kvs-doc: FAILED — kvsim gen --seed $s --workload $w" >&2; exit 1; }
  done
done

python3 - "$K" "$DOC" "$tmp" <<'PY'
import glob, os, re, subprocess, sys
K, DOC, tmp = sys.argv[1:4]
src = lambda p: open(p).read()
scn = src("sim/scenario.c")
fail = []

def section(text, start, end="};"):
    i = text.find(start)
    if i < 0:
        fail.append("cannot find %r in the code (update tools/test_kvs_doc.sh)" % start)
        return ""
    return text[i:text.find(end, i)]

# directive keywords: the parser's dispatch table
directives = re.findall(r'\{"(\w+)",\s*d_\w+\}', section(scn, "} directives[] = {"))
# key=value keys: every keydef table (topology_keys, req_keys, fault_keys, timeout_keys, window_key)
keys = {}
for m in re.finditer(r"static const keydef (\w+)\[[^\]]*\] = \{(.*?)\n\};", scn, re.S):
    for k in re.findall(r'\{"(\w+)",', m.group(2)):
        keys.setdefault(k, m.group(1))
# named values
faults = re.findall(r'\] = "(\w+)"', section(src("sim/world.c"), "const char *sim_fault_name("))
bugs = re.findall(r'KV_BUG_\w+, "(\w+)"', section(src("core/engine.c"), "bug_names[] = {"))
conns = re.findall(r'\] = "([^"]+)"', section(src("core/connector.c"), "kind_names[KV_CONN_KIND_COUNT] = {"))
policies = re.findall(r'"(\w+)"', section(scn, "static const char *policy_name(", "}"))
policies = [p for p in policies if p != "?"]
groups = [g for g in re.findall(r'"(\w+)"', section(scn, "static const char *group_kind_name(", "}")) if g != "?"]
# comment lines tools read
comments = []
for f, pat in [("apps/kvsim/common.c", r'"(# expect-bug) %'), ("replay/input.c", r'"(# signature) "'),
               ("replay/input.c", r'"(# trace-hash) "')]:
    comments += re.findall(pat, src(f))

expect_min = {"directives": (directives, 9), "keys": (list(keys), 25), "fault kinds": (faults, 16),
              "bug switches": (bugs, 5), "connector kinds": (conns, 4), "policies": (policies, 2),
              "group kinds": (groups, 3), "comment lines": (comments, 3)}
for what, (lst, n) in expect_min.items():
    if len(set(lst)) < n:
        fail.append("extracted only %d %s from the code (%s); the extraction is stale" % (len(set(lst)), what, lst))

# cross-check with what gen writes
gen_dirs, gen_keys, gen_vals = set(), set(), set()
for p in glob.glob(os.path.join(tmp, "gen-*.kvs")):
    for line in open(p):
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        gen_dirs.add(line[0])
        for t in line[1:]:
            if "=" in t:
                k, v = t.split("=", 1)
                gen_keys.add(k)
                if not v.isdigit():
                    gen_vals.add(v)
        if line[0] == "group":
            gen_vals.add(line[1])
for d in sorted(gen_dirs - set(directives)):
    fail.append("kvsim gen writes directive '%s' that the extraction from sim/scenario.c missed" % d)
for k in sorted(gen_keys - set(keys)):
    fail.append("kvsim gen writes key '%s=' that the extraction from sim/scenario.c missed" % k)
for v in sorted(gen_vals - set(faults) - set(conns) - set(policies) - set(groups)):
    fail.append("kvsim gen writes value '%s' that the extraction missed" % v)

doc = src(DOC)
mentioned = set(re.findall(r"`([^`\n]+)`", doc))
def need(what, names):
    for n in sorted(set(names)):
        if n not in mentioned:
            fail.append("%s: %s `%s` is not mentioned (as `%s`)" % (DOC, what, n, n))
need("directive", directives)
for k, table in sorted(keys.items()):
    if k not in mentioned:
        fail.append("%s: key `%s` (%s in sim/scenario.c) is not mentioned (as `%s`)" % (DOC, k, table, k))
need("fault kind", faults)
need("bug switch", bugs)
need("connector kind", conns)
need("policy", policies)
need("group kind", groups)
for c in comments:  # as the start of a backticked span: `# expect-bug NAME INV`
    if not any(m.startswith(c) for m in mentioned):
        fail.append("%s: comment line `%s` is not mentioned" % (DOC, c))

# every complete ```kvs example parses
blocks = re.findall(r"```kvs\n(.*?)```", doc, re.S)
complete = 0
for i, b in enumerate(blocks):
    if not re.search(r"^\s*kvs\s+\d+", b, re.M):
        continue
    complete += 1
    path = os.path.join(tmp, "example-%d.kvs" % i)
    open(path, "w").write(b)
    r = subprocess.run([K, "run", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode not in (0, 1, 2):
        fail.append("%s: ```kvs block %d does not parse (exit %d): %s" % (DOC, i + 1, r.returncode,
                                                                       r.stderr.decode(errors="replace").strip()))
if complete == 0:
    fail.append("%s: no complete ```kvs example found" % DOC)

for f in fail:
    print("kvs-doc: FAILED — " + f, file=sys.stderr)
print("  %d directives, %d keys, %d fault kinds, %d bug switches, %d connector kinds, %d policies, "
      "%d group kinds, %d comment lines checked; %d kvs examples parsed"
      % (len(directives), len(keys), len(faults), len(bugs), len(conns), len(policies), len(groups),
         len(comments), complete))
sys.exit(1 if fail else 0)
PY
rc=$?
[ "$rc" = 0 ] && echo "kvs-doc: ok"
exit "$rc"
