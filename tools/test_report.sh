#!/usr/bin/env bash
# kvsim report through a browser, as a reader opens it:
#  - a sweep with a bug switch in two shards (--shard 0/2, 1/2) and a clean
#    sweep: the sweep page's DOM, as headless Chromium renders it, has one
#    heatmap cell per fault kind x request phase of the documents, one bar
#    per invariant, the combined run count, and the reproduce line (none
#    when clean); a string from the data with markup in it stays text;
#  - the shards' findings databases merged, one case shrunk: the findings
#    page has one row per case (kvsim db list), a trace link per case whose
#    file parses as a Chrome trace, the shrunk scenario, the runs;
#  - usage errors exit 4, a document that is not a kvconn.sweep one exits 3;
#  - a screenshot of each page is a PNG of more than 20 KB (drawn, not blank).
# Without chromium (Debian package chromium; tools/deps.sh installs it), a
# non-root run prints SKIP for the browser checks and passes; as root (CI)
# a missing chromium fails. KVSIM and CHROMIUM override the binaries.
set -uo pipefail
cd "$(dirname "$0")/.."
K=${KVSIM:-build/bin/kvsim}
[ -x "$K" ] || { echo "report: FAILED — $K missing" >&2; exit 1; }
K=$(realpath "$K")
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail() { echo "report: FAILED — $*" >&2; exit 1; }

# ---- the documents -------------------------------------------------------------------------------
for i in 0 1; do
  "$K" sweep --seeds 1..200 --bug err_early_return --shard $i/2 --db s$i.db --json > s$i.json 2>/dev/null
  [ $? = 2 ] || fail "shard $i/2 of the err_early_return sweep did not exit 2 (liveness)"
done
"$K" sweep --seeds 1..100 --json > clean.json || fail "clean sweep exited $?"
"$K" db --db m.db merge s0.db s1.db > /dev/null || fail "db merge"
"$K" shrink db:m.db:1 > /dev/null || fail "shrink of case 1"
ncases=$("$K" db --db m.db list | sed -n 's/^\([0-9]*\) cases in .*/\1/p')
[ "${ncases:-0}" -ge 2 ] || fail "the merged database has ${ncases:-no} cases, want at least 2"

# a detail with markup: the page must show it as text
python3 - <<'PY' || fail "could not make the markup document"
import json
d = json.load(open("s0.json"))
d["first_violation"]["detail"] = "<script>document.title='owned'</script><b id=\"x\">&amp;</b>"
json.dump(d, open("markup.json", "w"))
PY

# ---- the pages -----------------------------------------------------------------------------------
"$K" report --sweep s0.json s1.json -o bug.html > out.txt || fail "report --sweep exited $?"
grep -q "200 runs" out.txt || fail "the combined report does not say 200 runs: $(cat out.txt)"
"$K" report --sweep clean.json -o clean.html > /dev/null || fail "report of the clean sweep exited $?"
"$K" report --sweep markup.json -o markup.html > /dev/null || fail "report of the markup document exited $?"
"$K" report --db m.db -o findings.html > /dev/null || fail "report --db exited $?"
[ "$(ls findings.d/case-*.json | wc -l)" = "$ncases" ] || fail "findings.d has $(ls findings.d | wc -l) traces, want $ncases"
"$K" report --sweep s0.json -o - > stdout.html 2>/dev/null && grep -q '</html>' stdout.html || fail "-o - does not write the page to stdout"
"$K" report -o x.html 2>/dev/null; [ $? = 4 ] || fail "report without --sweep or --db is not a usage error"
"$K" report --sweep s0.json 2>/dev/null; [ $? = 4 ] || fail "report without -o is not a usage error"
echo '{"schema":"kvconn.sweep","schema_version":2}' > v2.json
"$K" report --sweep v2.json -o x.html 2> err.txt; [ $? = 3 ] || fail "schema_version 2 does not exit 3"
grep -q "schema_version 2" err.txt || fail "the message does not name the schema version: $(cat err.txt)"
head -c 100 s0.json > cut.json
"$K" report --sweep cut.json -o x.html 2>/dev/null; [ $? = 3 ] || fail "a truncated document does not exit 3"
"$K" report --sweep s0.json clean.json -o x.html 2> err.txt; [ $? = 3 ] || fail "shards of two sweeps are combined"
echo "  pages written; usage 4, bad documents 3"

# ---- the browser ---------------------------------------------------------------------------------
C=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$C" ]; then
  [ "$(id -u)" = 0 ] && fail "chromium is not installed (apt-get install chromium; tools/deps.sh)"
  echo "report: SKIP the browser checks — chromium is not installed (apt-get install chromium)"
  echo "report: ok (without the browser)"
  exit 0
fi
export HOME="$tmp/home"; mkdir -p "$HOME"
browse() { # MODE PAGE OUT: --dump-dom to OUT, or --screenshot=OUT
  local prof; prof=$(mktemp -d "$tmp/prof.XXXX")
  if [ "$1" = dom ]; then
    timeout 60 "$C" --headless --no-sandbox --disable-gpu --user-data-dir="$prof" --dump-dom "file://$tmp/$2" > "$3" 2> "$3.err"
  else
    timeout 60 "$C" --headless --no-sandbox --disable-gpu --user-data-dir="$prof" --window-size=1280,2000 \
      --screenshot="$3" "file://$tmp/$2" > /dev/null 2> "$3.err"
  fi
}
for p in bug clean markup findings; do
  browse dom $p.html $p.dom || fail "chromium --dump-dom $p.html exited $?: $(tail -3 $p.dom.err)"
  [ -s $p.dom ] || fail "chromium rendered nothing for $p.html"
done
# counts of elements by tag and class in a rendered DOM, as one JSON object
cat > count.py <<'PY'
import collections, html.parser, json, sys
class P(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(); self.n = collections.Counter(); self.hrefs = []; self.text = []; self.tags = set()
    def handle_starttag(self, tag, attrs):
        a = dict(attrs); self.tags.add(tag)
        for c in (a.get("class") or "").split(): self.n[f"{tag}.{c}"] += 1
        if tag == "a" and "trace" in (a.get("class") or ""): self.hrefs.append(a["href"])
    def handle_data(self, d): self.text.append(d)
p = P(); p.feed(open(sys.argv[1]).read())
print(json.dumps({"n": p.n, "hrefs": p.hrefs, "text": "".join(p.text), "tags": sorted(p.tags)}))
PY
python3 - <<'PY' || fail "the rendered pages do not have what the documents say (above)"
import collections, json, subprocess, sys
def dom(p):
    d = json.loads(subprocess.check_output(["python3", "count.py", p]))
    d["n"] = collections.Counter(d["n"])
    return d
ok = True
def check(cond, what):
    global ok
    if not cond: print("  not so:", what, file=sys.stderr); ok = False
for page, doc in (("bug", "s0.json"), ("clean", "clean.json")):
    d, j = dom(page + ".dom"), json.load(open(doc))
    cells = len(j["fault_phase"]["rows"]) * len(j["fault_phase"]["phases"])
    check(d["n"]["rect.cell"] == cells, f"{page}: {d['n']['rect.cell']} heatmap cells, want {cells}")
    check(d["n"]["g.inv"] == len(j["invariants"]), f"{page}: {d['n']['g.inv']} invariant bars, want {len(j['invariants'])}")
    check(d["n"]["rect.violated"] == len(j["invariants"]), f"{page}: violation bars")
bug, clean = dom("bug.dom"), dom("clean.dom")
check(bug["n"]["pre.reproduce"] == 1 and "--bug err_early_return" in bug["text"], "bug: the reproduce line")
check("2 of 2" in bug["text"] and "violations in 200 runs" in bug["text"], "bug: the shards and the combined runs")
check(clean["n"]["pre.reproduce"] == 0 and "clean: 100 runs" in clean["text"], "clean: no reproduce line, 100 runs")
m = dom("markup.dom")
check("script" not in m["tags"] and "b" not in m["tags"], "markup: an element from the data was made")
check("<script>document.title='owned'</script>" in m["text"], "markup: the detail is not shown as text")
sys.exit(0 if ok else 1)
PY
python3 - "$ncases" <<'PY' || fail "the rendered findings page does not have what the database says (above)"
import collections, json, subprocess, sys, urllib.parse
n = int(sys.argv[1])
f = json.loads(subprocess.check_output(["python3", "count.py", "findings.dom"]))
f["n"] = collections.Counter(f["n"])
ok = True
def check(cond, what):
    global ok
    if not cond: print("  not so:", what, file=sys.stderr); ok = False
check(f["n"]["tr.case"] == n, f"{f['n']['tr.case']} case rows, want {n}")
check(f["n"]["section.case-detail"] == n, "one section per case")
check(len(f["hrefs"]) == n, f"{len(f['hrefs'])} trace links, want {n}")
for h in f["hrefs"]:
    t = json.load(open(urllib.parse.unquote(h)))
    check(isinstance(t, dict) and len(t.get("traceEvents", [])) > 10, f"{h}: not a Chrome trace")
check(f["n"]["tr.run"] == 2, "the two shard runs")
check(f["n"]["tr.found"] >= n, "each case names the runs that found it")
check("Shrunk scenario (.kvs)" in f["text"] and f["n"]["pre.scenario"] == n, "the shrunk scenario and every case's scenario text")
sys.exit(0 if ok else 1)
PY
for p in bug findings; do
  browse shot $p.html "$tmp/$p.png" || fail "chromium --screenshot $p.html exited $?: $(tail -3 "$tmp/$p.png.err")"
  size=$(stat -c %s "$tmp/$p.png" 2>/dev/null || echo 0)
  [ "$(head -c 8 "$tmp/$p.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$p.png is not a PNG"
  [ "$size" -gt 20000 ] || fail "$p.png is $size bytes: a blank page?"
done
echo "  rendered: heatmap cells, invariant bars, reproduce line, escaped markup, case rows, trace files, screenshots"
echo "report: ok"
