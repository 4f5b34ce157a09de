#!/usr/bin/env python3
"""tools/mutate.py — source mutants of C files, for the mutation benchmark
(bench/mutation.sh, docs/mutation.md). Standard library only.

    tools/mutate.py list [--files GLOB...] [--ops a,b] [--sample N --seed S] [--root DIR]
    tools/mutate.py apply ID --root DIR [--src DIR]   # writes DIR/FILE, the mutated file
    tools/mutate.py show ID [--src DIR]               # the mutant as a unified diff
    tools/mutate.py ops                               # the operator catalogue
    tools/mutate.py selftest

A mutant's id is FILE:LINE:COL:OP:N (FILE relative to the source root, LINE
and COL 1-based, of the token the operator anchors on; N numbers the
alternatives at that anchor). Ids are stable while FILE does not change.
`list` prints one mutant a line: id, function, description (tab-separated),
in file, line, column, operator, N order.

The generator is a C tokenizer plus a few structural rules, not a parser:
it skips comments, string and character literals, preprocessor lines (with
their continuations), `_Static_assert`/`static_assert`, `sizeof`,
`_Alignof` and `offsetof` operands, the arguments of the checker's own
calls (CHECKER_CALLS), the core's own checks (CHECKER_FUNCS: invariant
functions and walks, their bodies and every line calling one), every line
that carries a `nomutate` comment, and everything outside function bodies. Type-blind operators (swap) may give
mutants that do not compile: the benchmark counts those as "not compiled".
"""
import argparse
import difflib
import fnmatch
import glob
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ROOT = os.path.dirname(HERE)
DEFAULT_FILES = ["core/*.c"]

# ---- the catalogue ----------------------------------------------------------

OPS = {
    "ror": "relational/equality flips: < -> <= and >, <= -> < and >=, > -> >= and <, >= -> > and <=, == -> !=, != -> ==",
    "pm1": "+-1: 'E + 1' / 'E - 1' -> 'E'; an integer literal N -> N+1 and N-1 (N-1 only when N >= 1) where N is "
           "an operand of a comparison, the whole subscript of an expression, or the right operand of + - += -= "
           "(for a literal 1 there: 2 only; 'E' is the deletion above); x++ / ++x / x-- / --x -> the opposite "
           "operator, and deleted (a whole expression statement or for-increment becomes (void)0)",
    "call": "delete a call statement 'f(...);' (-> '(void)0;') whose callee matches CALL_PATTERNS: posts, "
            "transport calls, releases, frees, reports, finished/done/fail notices, replies, list adds and "
            "removes, timers, revocations",
    "callx": "delete any other call statement (callee not in CALL_PATTERNS; not in the default set)",
    "neg": "negated conditions: if (c) / while (c) -> (!(c)); c ? a : b -> !(c) ? a : b",
    "swap": "swap two adjacent call arguments that are both plain identifiers or field accesses (type-blind)",
    "ret": "early return as the first statement of a function body: void -> return; bool -> return false; and "
           "return true; kv_status -> return KV_OK; integer types -> return 0; pointers -> return NULL; "
           "other return types are skipped",
    "logic": "&& <-> ||, true <-> false",
}
DEFAULT_OPS = ["ror", "pm1", "call", "neg", "swap", "ret", "logic"]

# Callees whose call statements `call` deletes (fnmatch patterns on the
# callee's name: the last identifier before the call's parenthesis).
CALL_PATTERNS = [
    "kv_rt_post*",                 # runtime posts (messages between actors), timers (post_at)
    "kvt_*",                       # transport: send control, write, register, deregister, close
    "post_*", "*_post",            # local helpers that post
    "kv_release", "*release*",     # env release, pool/pin releases
    "free", "*_free", "free_*",    # frees (free_blocks, kv_pool_free, kv_*_free)
    "*report*",                    # reports (kv_pool_report_*, report_add, report)
    "*finished*", "*finish*",      # finished_* notices, finish_req
    "*done*",                      # job_done, task_done
    "fail*", "*_fail*", "*failed*",  # fail_now, fail_batch, task_failed
    "respond*", "reply*",          # answers to peers
    "*_add", "add_*",              # list adds (kv_id_list_add, step_add, send_add)
    "*remove*", "*unlink*",        # list removes
    "arm_*", "*timer*", "*timeout*",  # timers
    "*revoke*", "*cancel*", "*close*",
]
# The checker's own calls and logging: never deleted or swapped, and their
# arguments are never mutated (a mutant there only silences an alarm or
# rewrites a message).
CHECKER_CALLS = ["kv_violate", "*VIOLATE*", "kv_logf", "kv_owner_check", "check_owner", "*ASSERT*",
                 "snprintf", "vsnprintf", "va_start", "va_end"]
# The core's own checks (core/assert.h): invariant functions, their walks
# and the checks of our own wire messages. Their bodies are not mutated, nor
# any line that calls one: a mutant there can only weaken a check of the
# core, which a correct core never trips, so on the correct core it is
# equivalent by construction (it says nothing about the harness).
CHECKER_FUNCS = ["*invariants*", "*_walk", "*_walk_*", "kv_wire_encoded_ok", "kv_ids_distinct", "kv_pool_check",
                 "pool_check_*"]
SKIP_OPERANDS = {"sizeof", "_Alignof", "alignof", "offsetof", "_Static_assert", "static_assert", "__attribute__",
                 "_Generic"}
KEYWORDS = {"if", "while", "for", "switch", "return", "sizeof", "case", "default", "do", "else", "goto", "break",
            "continue", "typedef", "struct", "union", "enum", "static", "const", "volatile", "extern", "inline",
            "register", "_Alignof", "_Static_assert", "_Generic", "__attribute__", "void", "char", "short", "int",
            "long", "float", "double", "signed", "unsigned", "bool", "_Bool", "restrict", "_Atomic",
            "_Thread_local", "_Noreturn", "offsetof", "alignof", "static_assert"}
INT_TYPES = {"int", "unsigned", "long", "short", "signed", "size_t", "ssize_t", "uint8_t", "uint16_t", "uint32_t",
             "uint64_t", "int8_t", "int16_t", "int32_t", "int64_t", "uintptr_t", "intptr_t", "char", "double",
             "float"}
QUALIFIERS = {"static", "inline", "extern", "const", "volatile", "_Noreturn", "register", "__inline__",
              "__inline"}

PUNCTS = [">>=", "<<=", "...", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=", "-=", "*=",
          "/=", "%=", "&=", "^=", "|=", "##"]
RELOPS = {"<", ">", "<=", ">=", "==", "!="}
ROR = {"<": ["<=", ">"], "<=": ["<", ">="], ">": [">=", "<"], ">=": [">", "<="], "==": ["!="], "!=": ["=="]}
ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "^=", "|=", "<<=", ">>="}
INT_RE = re.compile(r"^(0[xX][0-9a-fA-F]+|[0-9]+)([uUlL]*)$")


class Tok:
    __slots__ = ("kind", "text", "start", "end", "line", "col", "skip")

    def __init__(self, kind, text, start, end, line, col):
        self.kind, self.text, self.start, self.end, self.line, self.col = kind, text, start, end, line, col
        self.skip = False

    def __repr__(self):
        return "%s:%r@%d:%d" % (self.kind, self.text, self.line, self.col)


def tokenize(src):
    """Tokens of C source (ids, numbers, punctuators; strings and chars as
    single tokens), without comments and preprocessor lines. Returns
    (tokens, nomutate_lines)."""
    toks, nomutate = [], set()
    i, n, line, lstart = 0, len(src), 1, 0
    at_line_start = True

    def skip_comment(i, line, lstart):
        # i at "/*"; returns position after "*/"
        j = src.find("*/", i + 2)
        j = n if j < 0 else j + 2
        text = src[i:j]
        if "nomutate" in text:
            nomutate.add(line)
        for k in range(i, j):
            if src[k] == "\n":
                line, lstart = line + 1, k + 1
        return j, line, lstart

    while i < n:
        c = src[i]
        if c == "\n":
            i, line, lstart, at_line_start = i + 1, line + 1, i + 1, True
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if c == "\\" and i + 1 < n and src[i + 1] == "\n":
            i, line, lstart = i + 2, line + 1, i + 2
            continue
        if src.startswith("/*", i):
            i, line, lstart = skip_comment(i, line, lstart)
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            if "nomutate" in src[i:j]:
                nomutate.add(line)
            i = j
            continue
        if c == "#" and at_line_start:
            # a directive: to the end of the line, following continuations
            while i < n and src[i] != "\n":
                if src[i] == "\\" and i + 1 < n and src[i + 1] == "\n":
                    i, line, lstart = i + 2, line + 1, i + 2
                elif src.startswith("/*", i):
                    i, line, lstart = skip_comment(i, line, lstart)
                elif src.startswith("//", i):
                    while i < n and src[i] != "\n":
                        i += 1
                else:
                    i += 1
            continue
        at_line_start = False
        col = i - lstart + 1
        if c == '"' or c == "'":
            j = i + 1
            while j < n and src[j] != c:
                if src[j] == "\\":
                    j += 1
                if j < n and src[j] == "\n":
                    line, lstart = line + 1, j + 1
                j += 1
            j = min(j + 1, n)
            toks.append(Tok("str" if c == '"' else "chr", src[i:j], i, j, line, col))
            i = j
            continue
        if c.isalpha() or c == "_":
            j = i + 1
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            if j < n and src[j] in "\"'" and src[i:j] in ("L", "u", "U", "u8"):
                i = j  # the prefix of a string/char literal: lexed with it
                continue
            toks.append(Tok("id", src[i:j], i, j, line, col))
            i = j
            continue
        if c.isdigit() or (c == "." and i + 1 < n and src[i + 1].isdigit()):
            j = i + 1
            while j < n:
                if src[j] in "eEpP" and j + 1 < n and src[j + 1] in "+-":
                    j += 2
                elif src[j].isalnum() or src[j] in "._":
                    j += 1
                else:
                    break
            toks.append(Tok("num", src[i:j], i, j, line, col))
            i = j
            continue
        for p in PUNCTS:
            if src.startswith(p, i):
                toks.append(Tok("punct", p, i, i + len(p), line, col))
                i += len(p)
                break
        else:
            toks.append(Tok("punct", c, i, i + 1, line, col))
            i += 1
    return toks, nomutate


class Mutant:
    __slots__ = ("file", "line", "col", "op", "n", "func", "edits", "desc")

    def __init__(self, file, tok, op, n, func, edits, desc):
        self.file, self.line, self.col, self.op, self.n = file, tok.line, tok.col, op, n
        self.func, self.edits, self.desc = func, edits, desc

    @property
    def id(self):
        return "%s:%d:%d:%s:%d" % (self.file, self.line, self.col, self.op, self.n)

    def key(self):
        return (self.file, self.line, self.col, self.op, self.n)

    def apply(self, src):
        out, pos = [], 0
        for s, e, text in sorted(self.edits):
            out.append(src[pos:s])
            out.append(text)
            pos = e
        out.append(src[pos:])
        return "".join(out)


def squeeze(s, limit=90):
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def fnmatch_any(name, pats):
    return any(fnmatch.fnmatchcase(name, p) for p in pats)


class Analysis:
    """One file's tokens with the structure the operators need."""

    def __init__(self, path, src):
        self.path, self.src = path, src
        self.toks, self.nomutate = tokenize(src)
        t = self.toks
        self.match = {}      # index of ( [ { -> index of the closer, and back
        stack = []
        for i, tok in enumerate(t):
            if tok.kind != "punct":
                continue
            if tok.text in "([{":
                stack.append(i)
            elif tok.text in ")]}" and stack:
                j = stack.pop()
                self.match[i], self.match[j] = j, i
        # function bodies: a { at depth 0 right after a )
        self.func_of = [None] * len(t)     # function name for tokens in a body
        self.bodies = []                   # (open, close, name, rettype tokens)
        depth, i = 0, 0
        decl_start = 0
        while i < len(t):
            tok = t[i]
            if tok.kind == "punct" and tok.text == "{" and depth == 0:
                close = self.match.get(i)
                if close is not None and i > 0 and t[i - 1].text == ")":
                    name_i = self._func_name(i - 1)
                    if name_i is not None:
                        name = t[name_i].text
                        self.bodies.append((i, close, name, t[decl_start:name_i], name_i))
                        for k in range(i + 1, close):
                            self.func_of[k] = name
                if close is None:
                    break
                i = close + 1
                decl_start = i
                continue
            if tok.kind == "punct" and tok.text == ";" and depth == 0:
                decl_start = i + 1
            elif tok.kind == "punct" and tok.text in "([":
                depth += 1
            elif tok.kind == "punct" and tok.text in ")]":
                depth -= 1
            i += 1
        # skipped regions: the core's own checks (CHECKER_FUNCS), their
        # bodies and every line that calls one
        check_lines = set()
        for i, tok in enumerate(t):
            if tok.kind == "id" and i + 1 < len(t) and t[i + 1].text == "(" and fnmatch_any(tok.text, CHECKER_FUNCS):
                check_lines.add(tok.line)
        for i, tok in enumerate(t):
            if tok.line in self.nomutate or tok.line in check_lines or (
                    self.func_of[i] is not None and fnmatch_any(self.func_of[i], CHECKER_FUNCS)):
                tok.skip = True
            if tok.kind == "id" and i + 1 < len(t) and t[i + 1].text == "(":
                close = self.match.get(i + 1)
                if close is None:
                    continue
                if tok.text in SKIP_OPERANDS or fnmatch_any(tok.text, CHECKER_CALLS):
                    for k in range(i, close + 1):
                        t[k].skip = True
        # a statement that spans lines is skipped when any of its lines is marked
        # (only for the tokens on the marked line: kept simple)

    def _func_name(self, close_paren):
        """Index of the function's name for the ')' closing its parameters."""
        t = self.toks
        op = self.match.get(close_paren)
        if op is None or op == 0:
            return None
        j = op - 1
        if t[j].kind == "id" and t[j].text not in KEYWORDS:
            return j
        return None

    # -- helpers -------------------------------------------------------------
    def in_body(self, i):
        return self.func_of[i] is not None

    def ok(self, *idx):
        return all(self.in_body(i) and not self.toks[i].skip for i in idx)

    def text(self, a, b):
        """Source text of tokens a..b inclusive."""
        return self.src[self.toks[a].start:self.toks[b].end]

    def ctrl_header_close(self, i):
        """True when token i is the ')' closing an if/while/for/switch header."""
        t = self.toks
        if t[i].text != ")":
            return False
        op = self.match.get(i)
        return op is not None and op > 0 and t[op - 1].text in ("if", "while", "for", "switch")

    def stmt_start(self, i):
        """True when a statement may start at token i."""
        t = self.toks
        if i == 0:
            return False
        p = t[i - 1]
        if p.text in (";", "{", "}") and p.kind == "punct":
            # ';' inside a for header is not a statement boundary
            if p.text == ";" and self._in_for_header(i - 1):
                return False
            return True
        if p.text in ("else", "do"):
            return True
        if p.text == ")" and self.ctrl_header_close(i - 1):
            return True
        if p.text == ":":
            # case X: / default: / label:
            k = i - 2
            while k >= 0 and t[k].text not in (";", "{", "}"):
                k -= 1
            first = t[k + 1]
            if first.text in ("case", "default"):
                return True
            if k + 2 == i - 1 and first.kind == "id":
                return True
        return False

    def _in_for_header(self, i):
        t = self.toks
        # walk out to the enclosing '(' (if any) at this nesting
        depth = 0
        k = i
        while k >= 0:
            x = t[k].text
            if t[k].kind == "punct" and x in ")]}":
                depth += 1
            elif t[k].kind == "punct" and x in "([{":
                if depth == 0:
                    return x == "(" and k > 0 and t[k - 1].text == "for"
                depth -= 1
            k -= 1
        return False

    def postfix_start(self, i):
        """Start index of the postfix expression ending at token i."""
        t = self.toks
        k = i
        while True:
            if t[k].kind == "punct" and t[k].text in (")", "]"):
                op = self.match.get(k)
                if op is None:
                    return None
                if t[k].text == ")" and not (op > 0 and (t[op - 1].kind == "id" or t[op - 1].text in (")", "]"))):
                    return op  # a parenthesized primary
                k = op - 1
                continue
            if t[k].kind == "id" and t[k].text not in KEYWORDS:
                if k > 0 and t[k - 1].text in (".", "->"):
                    k -= 2
                    continue
                return k
            return None

    def postfix_end(self, i):
        """End index of the postfix expression starting at token i."""
        t = self.toks
        if t[i].kind == "punct" and t[i].text == "(":
            k = self.match.get(i)
        elif t[i].kind == "id" and t[i].text not in KEYWORDS:
            k = i
        else:
            return None
        while k is not None and k + 1 < len(t):
            nx = t[k + 1].text
            if nx in ("(", "["):
                k = self.match.get(k + 1)
            elif nx in (".", "->") and k + 2 < len(t) and t[k + 2].kind == "id":
                k += 2
            else:
                break
        return k

    def plain(self, a, b):
        """Tokens a..b are ident ((.|->) ident)*."""
        t = self.toks
        if (b - a) % 2:
            return False
        for k in range(a, b + 1):
            if (k - a) % 2 == 0:
                if t[k].kind != "id" or t[k].text in KEYWORDS or t[k].text in ("true", "false", "NULL"):
                    return False
            elif t[k].text not in (".", "->"):
                return False
        return True


def int_literal(text):
    m = INT_RE.match(text)
    if not m:
        return None
    digits, suffix = m.group(1), m.group(2)
    value = int(digits, 16) if digits[:2] in ("0x", "0X") else int(digits, 10)
    if digits != "0" and digits.startswith("0") and digits[:2] not in ("0x", "0X"):
        return None  # octal: left alone
    return value, digits[:2] in ("0x", "0X"), suffix


def fmt_literal(value, hexa, suffix):
    return ("0x%X" % value if hexa else str(value)) + suffix


def ret_kind(rtoks):
    """The early return for a return type given as tokens, or None."""
    words, ptr, k = [], False, 0
    while k < len(rtoks):
        x = rtoks[k]
        if x.text == "__attribute__":
            # skip __attribute__((...)): the next two '(' groups are balanced
            depth, k = 0, k + 1
            while k < len(rtoks):
                if rtoks[k].text == "(":
                    depth += 1
                elif rtoks[k].text == ")":
                    depth -= 1
                    if depth == 0:
                        break
                k += 1
        elif x.text == "*":
            ptr = True
        elif x.kind == "id" and x.text not in QUALIFIERS:
            words.append(x.text)
        k += 1
    if ptr:
        return ["NULL"]
    if not words:
        return None
    if words == ["void"]:
        return [""]
    if words == ["bool"] or words == ["_Bool"]:
        return ["false", "true"]
    if words == ["kv_status"]:
        return ["KV_OK"]
    if all(w in INT_TYPES for w in words):
        return ["0"]
    return None


def mutants_of(path, src, ops):
    a = Analysis(path, src)
    t = a.toks
    out = []

    def add(op, anchor, n, edits, before, after):
        out.append(Mutant(path, t[anchor], op, n, a.func_of[anchor] or "?", edits,
                          "%s: %s -> %s" % (op, squeeze(before), squeeze(after))))

    def ctx(i, j=None, repl=None):
        """(before, after) text for replacing tokens i..j with repl, with two tokens around
        (within the line's statement: not across ; { })."""
        j = i if j is None else j
        lo, hi = i, j
        for _ in range(2):
            if lo > 0 and t[lo - 1].text not in (";", "{", "}"):
                lo -= 1
            if hi + 1 < len(t) and t[hi + 1].text not in (";", "{", "}"):
                hi += 1
        before = src[t[lo].start:t[hi].end]
        after = src[t[lo].start:t[i].start] + repl + src[t[j].end:t[hi].end]
        return before, after

    for i, tok in enumerate(t):
        if not a.ok(i):
            continue
        x = tok.text
        # ror
        if "ror" in ops and tok.kind == "punct" and x in ROR:
            for n, alt in enumerate(ROR[x]):
                b, f = ctx(i, repl=alt)
                add("ror", i, n, [(tok.start, tok.end, alt)], b, f)
        # logic
        if "logic" in ops:
            if tok.kind == "punct" and x in ("&&", "||"):
                alt = "||" if x == "&&" else "&&"
                b, f = ctx(i, repl=alt)
                add("logic", i, 0, [(tok.start, tok.end, alt)], b, f)
            elif tok.kind == "id" and x in ("true", "false"):
                alt = "false" if x == "true" else "true"
                b, f = ctx(i, repl=alt)
                add("logic", i, 0, [(tok.start, tok.end, alt)], b, f)
        # neg
        if "neg" in ops:
            if tok.kind == "id" and x in ("if", "while") and i + 1 < len(t) and t[i + 1].text == "(":
                close = a.match.get(i + 1)
                if close is not None and close > i + 2 and a.ok(*range(i + 1, close + 1)):
                    cond = a.text(i + 2, close - 1)
                    edits = [(t[i + 2].start, t[i + 2].start, "!("), (t[close - 1].end, t[close - 1].end, ")")]
                    add("neg", i, 0, edits, "%s (%s)" % (x, cond), "%s (!(%s))" % (x, cond))
            elif tok.kind == "punct" and x == "?":
                s = cond_start(a, i)
                if s is not None and s < i and a.ok(*range(s, i)):
                    cond = a.text(s, i - 1)
                    edits = [(t[s].start, t[s].start, "!("), (t[i - 1].end, t[i - 1].end, ")")]
                    add("neg", i, 0, edits, "%s ?" % cond, "!(%s) ?" % cond)
        # pm1
        if "pm1" in ops:
            pm1_at(a, i, add, ctx)
        # call, callx, swap
        if tok.kind == "id" and x not in KEYWORDS and i + 1 < len(t) and t[i + 1].text == "(":
            if ("call" in ops or "callx" in ops):
                call_stmt_at(a, i, ops, add)
            if "swap" in ops:
                swap_at(a, i, add)
    # ret
    if "ret" in ops:
        for (open_, close, name, rtoks, name_i) in a.bodies:
            if t[open_].skip or t[name_i].skip:
                continue
            kinds = ret_kind(rtoks)
            if not kinds:
                continue
            for n, v in enumerate(kinds):
                stmt = "return%s;" % ((" " + v) if v else "")
                after = src[t[open_ + 1].start:t[open_ + 1].end] if open_ + 1 < close else "}"
                edits = [(t[open_].end, t[open_].end, " " + stmt)]
                a.func_of[open_] = name
                add("ret", open_, n, edits, "%s() { %s" % (name, after), "%s() { %s %s" % (name, stmt, after))
    out.sort(key=Mutant.key)
    return out


def cond_start(a, q):
    """First token of the condition of the '?' at index q."""
    t = a.toks
    k = q - 1
    while k >= 0:
        x = t[k]
        if x.kind == "punct" and x.text in (")", "]"):
            op = a.match.get(k)
            if op is None:
                return None
            k = op - 1
            continue
        if x.kind == "punct" and x.text in ("(", "[", "{", "}", ";", ",", "?", ":") or x.text in ASSIGN \
                or x.text in ("return", "case"):
            return k + 1
        k -= 1
    return None


def pm1_at(a, i, add, ctx):
    t = a.toks
    tok = t[i]
    x = tok.text
    nt = len(t)
    # 'E + 1' / 'E - 1' -> 'E'
    if tok.kind == "punct" and x in ("+", "-") and i + 1 < nt and i > 0:
        lit = int_literal(t[i + 1].text) if t[i + 1].kind == "num" else None
        prev = t[i - 1]
        binary = prev.kind in ("id", "num") and prev.text not in KEYWORDS or prev.text in (")", "]", "++", "--")
        nxt = t[i + 2].text if i + 2 < nt else ""
        if lit and lit[0] == 1 and binary and nxt not in ("*", "/", "%") and a.ok(i + 1):
            before = a.text(i - 1, i + 1)
            add("pm1", i, 0, [(t[i - 1].end, t[i + 1].end, "")], before, prev.text)
    # literal N -> N+1, N-1
    if tok.kind == "num":
        lit = int_literal(x)
        if lit is not None:
            value, hexa, suffix = lit
            prev = t[i - 1].text if i > 0 else ""
            nxt = t[i + 1].text if i + 1 < nt else ""
            arith = prev in ("+", "-", "+=", "-=") and i > 1 and (
                t[i - 2].kind in ("id", "num") and t[i - 2].text not in KEYWORDS or t[i - 2].text in (")", "]"))
            cmp_ = (prev in RELOPS or nxt in RELOPS) and nxt not in ("*", "/", "%", "<<", ">>") and \
                prev not in ("*", "/", "%", "<<", ">>", "-")
            subscript = prev == "[" and nxt == "]" and subscript_expr(a, i - 1)
            if arith or cmp_ or subscript:
                alts = [value + 1]
                if value >= 1 and not (arith and prev in ("+", "-") and value == 1):
                    alts.append(value - 1)
                for n, v in enumerate(alts):
                    new = fmt_literal(v, hexa, suffix)
                    b, f = ctx(i, repl=new)
                    add("pm1", i, n, [(tok.start, tok.end, new)], b, f)
    # ++ / --
    if tok.kind == "punct" and x in ("++", "--"):
        other = "--" if x == "++" else "++"
        post = i > 0 and (t[i - 1].kind == "id" and t[i - 1].text not in KEYWORDS or t[i - 1].text in (")", "]"))
        if post:
            s, e = a.postfix_start(i - 1), i
        else:
            s, e = i, (a.postfix_end(i + 1) if i + 1 < nt else None)
        if s is None or e is None or not a.ok(*range(s, e + 1)):
            return
        b, f = ctx(i, repl=other)
        add("pm1", i, 0, [(tok.start, tok.end, other)], b, f)
        whole = a.text(s, e)
        nxt = t[e + 1].text if e + 1 < nt else ""
        stmt = nxt == ";" and a.stmt_start(s) or (
            nxt == ")" and s > 0 and t[s - 1].text == ";" and a.ctrl_header_close(e + 1)
            and t[a.match[e + 1] - 1].text == "for")
        if stmt:
            add("pm1", i, 1, [(t[s].start, t[e].end, "(void)0")], whole, "(void)0")
        else:
            operand = a.text(s, i - 1) if post else a.text(i + 1, e)
            add("pm1", i, 1, [(tok.start, tok.end, "")], whole, operand)


def subscript_expr(a, lb):
    """The '[' at lb subscripts an expression (not a declarator)."""
    t = a.toks
    if lb < 2:
        return False
    base = t[lb - 1]
    if base.text in ("]", ")"):
        return True
    if base.kind != "id":
        return False
    before = t[lb - 2]
    if before.kind == "id" and before.text not in ("return", "case", "sizeof"):
        return False  # 'type name[N]'
    if before.text == "*" and lb >= 3 and t[lb - 3].kind == "id" and a.stmt_start(lb - 3):
        return False  # 'type *name[N]'
    return True


def call_stmt_at(a, i, ops, add):
    """A call statement whose callee name is token i: f(...);  p->f(...);  (void)f(...);"""
    t = a.toks
    name = t[i].text
    close = a.match.get(i + 1)
    if close is None or close + 1 >= len(t) or t[close + 1].text != ";":
        return
    # walk back over the callee chain and an optional (void)
    s = i
    while s >= 2 and t[s - 1].text in (".", "->") and t[s - 2].kind == "id":
        s -= 2
    if s >= 3 and t[s - 1].text == ")" and t[s - 2].text == "void" and t[s - 3].text == "(":
        s -= 3
    if not a.stmt_start(s) or not a.ok(*range(s, close + 2)):
        return
    if fnmatch_any(name, CHECKER_CALLS):
        return
    op = "call" if fnmatch_any(name, CALL_PATTERNS) else "callx"
    if op not in ops:
        return
    stmt = a.text(s, close + 1)
    add(op, s, 0, [(t[s].start, t[close + 1].end, "(void)0;")], stmt, "(void)0;")


def swap_at(a, i, add):
    t = a.toks
    name = t[i].text
    if fnmatch_any(name, CHECKER_CALLS):
        return
    # a declaration 'type name(...)' inside a body is not a call
    if i > 0 and t[i - 1].kind == "id" and t[i - 1].text not in ("return", "else", "case", "do"):
        return
    open_, close = i + 1, a.match.get(i + 1)
    if close is None or close == open_ + 1 or not a.ok(*range(open_, close + 1)):
        return
    args, k, start = [], open_ + 1, open_ + 1
    while k < close:
        x = t[k].text
        if t[k].kind == "punct" and x in "([{":
            k = a.match.get(k, close)
        elif t[k].kind == "punct" and x == ",":
            args.append((start, k - 1))
            start = k + 1
        k += 1
    args.append((start, close - 1))
    for n in range(len(args) - 1):
        (s1, e1), (s2, e2) = args[n], args[n + 1]
        if s1 > e1 or s2 > e2 or not a.plain(s1, e1) or not a.plain(s2, e2):
            continue
        x1, x2 = a.text(s1, e1), a.text(s2, e2)
        if x1 == x2:
            continue
        edits = [(t[s1].start, t[e1].end, x2), (t[s2].start, t[e2].end, x1)]
        before = "%s(..%s, %s..)" % (name, x1, x2)
        after = "%s(..%s, %s..)" % (name, x2, x1)
        add("swap", s1, 0, edits, before, after)


# ---- files, ids, sampling ----------------------------------------------------

def expand_files(root, globs):
    files = set()
    for g in globs:
        for p in glob.glob(os.path.join(root, g)):
            if os.path.isfile(p):
                files.add(os.path.relpath(p, root))
    return sorted(files)


def parse_ops(s):
    ops = [o.strip() for o in s.split(",") if o.strip()] if s else list(DEFAULT_OPS)
    for o in ops:
        if o not in OPS:
            sys.exit("mutate.py: unknown operator '%s' (known: %s)" % (o, ", ".join(OPS)))
    return set(ops)


def all_mutants(root, files, ops):
    out = []
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8") as fh:
            src = fh.read()
        out.extend(mutants_of(f, src, ops))
    return out


def parse_id(mid):
    parts = mid.rsplit(":", 4)
    if len(parts) != 5 or parts[3] not in OPS:
        sys.exit("mutate.py: bad mutant id '%s' (FILE:LINE:COL:OP:N)" % mid)
    return parts[0], int(parts[1]), int(parts[2]), parts[3], int(parts[4])


def find_mutant(src_root, mid):
    f, line, col, op, n = parse_id(mid)
    path = os.path.join(src_root, f)
    if not os.path.isfile(path):
        sys.exit("mutate.py: %s: no such file under %s" % (f, src_root))
    with open(path, encoding="utf-8") as fh:
        src = fh.read()
    for m in mutants_of(f, src, {op}):
        if m.key() == (f, line, col, op, n):
            return m, src
    sys.exit("mutate.py: no mutant %s in %s (has the file changed?)" % (mid, path))


def cmd_list(args):
    files = expand_files(args.root, args.files or DEFAULT_FILES)
    if not files:
        sys.exit("mutate.py: no file matches %s under %s" % (" ".join(args.files or DEFAULT_FILES), args.root))
    ms = all_mutants(args.root, files, parse_ops(args.ops))
    if args.sample is not None and args.sample < len(ms):
        ms = sorted(random.Random(args.seed).sample(ms, args.sample), key=Mutant.key)
    for m in ms:
        print("%s\t%s\t%s" % (m.id, m.func, m.desc))
    if args.count:
        print("%d mutants in %d files" % (len(ms), len(files)), file=sys.stderr)


def cmd_apply(args):
    m, src = find_mutant(args.src, args.id)
    dst = os.path.join(args.root, m.file)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    tmp = dst + ".mutate-tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(m.apply(src))
    os.replace(tmp, dst)
    print("%s\t%s\t%s" % (m.id, m.func, m.desc))


def cmd_show(args):
    m, src = find_mutant(args.src, args.id)
    new = m.apply(src)
    sys.stdout.writelines(difflib.unified_diff(src.splitlines(True), new.splitlines(True),
                                               "a/" + m.file, "b/" + m.file, n=3))
    print("# %s  (%s)  %s" % (m.id, m.func, m.desc))


def cmd_ops(_args):
    for k, v in OPS.items():
        print("%-6s %s%s" % (k, v, "" if k in DEFAULT_OPS else "  [not default]"))
    print("\ncall patterns: " + " ".join(CALL_PATTERNS))
    print("never mutated (checker calls, their arguments): " + " ".join(CHECKER_CALLS))


# ---- self-test ----------------------------------------------------------------

SELFTEST_SRC = r'''/* header comment: if (a < b) return x + 1; */
#include <stdio.h>
#define MAXV(a, b) ((a) > (b) ? (a) : (b))
#define LONG_MACRO(x) \
    do { if ((x) < 3) free(x); } while (0)
_Static_assert(4 < 5, "static asserts are skipped");
static const int table[4] = {1, 2, 3, 4};
struct s { int a[8]; };

static void drop(int *p) {
    // line comment: while (x == y) kv_rt_post(rt);
    const char *s = "if (a < b && c) free(p);";
    char c = '<';
    if (p != NULL && s[0] == c) free_blocks(p);
    kv_violate(p, 1 < 2, "x");
    int z = 1; /* nomutate */ if (z > 3) z++;
}

static bool full(const int *n, int cap) {
    int buf[4];
    buf[0] = n[1];
    for (int i = 0; i < cap; i++) buf[i] = i;
    return *n >= cap - 1 ? true : false;
}

static int count(int a, int b) {
    report_add(a, b);
    helper(a);
    a++;
    return sizeof(int[3]) + a + 1;
}
'''

def selftest(_args=None):
    ms = mutants_of("t.c", SELFTEST_SRC, set(OPS))
    by = {}
    for m in ms:
        by.setdefault(m.op, []).append(m)
    got = {op: [m.desc for m in lst] for op, lst in by.items()}
    fails = []

    def expect(op, descs):
        have = got.get(op, [])
        if have != descs:
            fails.append("%s:\n  want %r\n  got  %r" % (op, descs, have))

    # Nothing from comments, strings, chars, directives, _Static_assert,
    # file-scope tables, the checker's call or the nomutate line.
    for m in ms:
        if m.line in (1, 2, 3, 4, 5, 6, 7, 8, 11, 15, 16):
            fails.append("mutant on a skipped line: %s %s" % (m.id, m.desc))
    expect("ror", [
        "ror: (p != NULL && -> (p == NULL &&",
        "ror: 0] == c) -> 0] != c)",
        "ror: i < cap -> i <= cap",
        "ror: i < cap -> i > cap",
        "ror: *n >= cap - -> *n > cap -",
        "ror: *n >= cap - -> *n <= cap -",
    ])
    expect("logic", [
        "logic: != NULL && s[ -> != NULL || s[",
        "logic: 1 ? true : false -> 1 ? false : false",
        "logic: true : false -> true : true",
    ])
    expect("neg", [
        "neg: if (p != NULL && s[0] == c) -> if (!(p != NULL && s[0] == c))",
        "neg: *n >= cap - 1 ? -> !(*n >= cap - 1) ?",
    ])
    # not buf[4] (a declarator), not sizeof(int[3]), not 'int z = 1'
    expect("pm1", [
        "pm1: s[0] == -> s[1] ==",
        "pm1: buf[0] = -> buf[1] =",
        "pm1: n[1] -> n[2]",
        "pm1: n[1] -> n[0]",
        "pm1: i++) buf -> i--) buf",
        "pm1: i++ -> (void)0",
        "pm1: cap - 1 -> cap",
        "pm1: cap - 1 ? true -> cap - 2 ? true",
        "pm1: a++ -> a--",
        "pm1: a++ -> (void)0",
        "pm1: a + 1 -> a",
        "pm1: a + 1 -> a + 2",
    ])
    expect("call", [
        "call: free_blocks(p); -> (void)0;",
        "call: report_add(a, b); -> (void)0;",
    ])
    expect("callx", ["callx: helper(a); -> (void)0;"])
    expect("swap", ["swap: report_add(..a, b..) -> report_add(..b, a..)"])
    expect("ret", [
        "ret: drop() { const -> drop() { return; const",
        "ret: full() { int -> full() { return false; int",
        "ret: full() { int -> full() { return true; int",
        "ret: count() { report_add -> count() { return 0; report_add",
    ])
    # every mutant applies to compilable-looking text and changes it
    for m in ms:
        new = m.apply(SELFTEST_SRC)
        if new == SELFTEST_SRC:
            fails.append("mutant changes nothing: %s" % m.id)
    # ids are unique and the listing is sorted
    ids = [m.id for m in ms]
    if len(set(ids)) != len(ids):
        fails.append("duplicate ids")
    if ms != sorted(ms, key=Mutant.key):
        fails.append("listing not sorted")
    # a concrete apply: the negated condition
    neg = [m for m in ms if m.op == "neg" and m.line == 14][0]
    line14 = neg.apply(SELFTEST_SRC).splitlines()[13]
    if line14.strip() != "if (!(p != NULL && s[0] == c)) free_blocks(p);":
        fails.append("neg apply: %r" % line14)
    if neg.id != "t.c:14:5:neg:0":
        fails.append("neg id: %s" % neg.id)
    # tokenizer: strings, chars and comments are single tokens or gone
    toks, nom = tokenize(SELFTEST_SRC)
    if not any(tk.kind == "str" and "free(p)" in tk.text for tk in toks):
        fails.append("string literal not one token")
    if any(tk.text == "kv_rt_post" for tk in toks):
        fails.append("comment text tokenized")
    if any(tk.text in ("MAXV", "LONG_MACRO") for tk in toks):
        fails.append("preprocessor line tokenized")
    if nom != {16}:
        fails.append("nomutate lines: %r" % nom)
    if fails:
        print("mutate.py selftest: FAILED")
        for f in fails:
            print("  " + f)
        print("all mutants:")
        for m in ms:
            print("  %s\t%s" % (m.id, m.desc))
        return 1
    print("mutate.py selftest: ok (%d mutants, %d operators)" % (len(ms), len(by)))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="mutate.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("list", help="list mutants: id, function, description")
    p.add_argument("--files", nargs="+", help="globs relative to --root (default core/*.c)")
    p.add_argument("--ops", help="comma-separated operators (default: %s)" % ",".join(DEFAULT_OPS))
    p.add_argument("--sample", type=int, help="a random sample of N mutants (of the listing)")
    p.add_argument("--seed", type=int, default=1, help="the sample's seed (default 1)")
    p.add_argument("--root", default=DEFAULT_ROOT, help="source root (default: this repository)")
    p.add_argument("--count", action="store_true", help="print the count to stderr")
    p = sub.add_parser("apply", help="write the mutated file into --root")
    p.add_argument("id")
    p.add_argument("--root", required=True, help="where to write FILE (a scratch copy of the tree)")
    p.add_argument("--src", default=DEFAULT_ROOT, help="where the original FILE is read (default: this repository)")
    p = sub.add_parser("show", help="the mutant as a diff")
    p.add_argument("id")
    p.add_argument("--src", default=DEFAULT_ROOT)
    sub.add_parser("ops", help="the operator catalogue")
    sub.add_parser("selftest", help="test the generator on an embedded snippet")
    args = ap.parse_args(argv)
    if args.cmd == "list":
        if args.sample is not None and args.sample < 0:
            sys.exit("mutate.py: --sample needs N >= 0")
        return cmd_list(args)
    if args.cmd == "apply":
        return cmd_apply(args)
    if args.cmd == "show":
        return cmd_show(args)
    if args.cmd == "ops":
        return cmd_ops(args)
    return selftest(args)


if __name__ == "__main__":
    sys.exit(main() or 0)
