#!/usr/bin/env python3
"""Writes a mutated copy of one core file for an oracle's mutant test.

    tools/make_mutant.py tests/mutants/NAME.mut SOURCE_ROOT OUT.c

A .mut file names the file, the exact text to replace (it must occur exactly
once, so a mutant that no longer applies fails the build instead of testing
nothing) and its replacement; the test driver reads the rest (run, expect).
Lines starting with '#' are comments; 'find:' / 'replace:' may repeat to
make one mutant of several edits of the same file."""
import sys


def parse(path):
    fields = {"find": [], "replace": []}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            key, sep, value = line.partition(":")
            if not sep:
                sys.exit(f"{path}:{n}: expected 'key: value', got {line!r}")
            key, value = key.strip(), value[1:] if value.startswith(" ") else value
            if key in ("find", "replace"):
                fields[key].append(value)
            else:
                fields[key] = value
    for key in ("file", "run", "expect"):
        if key not in fields:
            sys.exit(f"{path}: no '{key}:' line")
    if not fields["find"] or len(fields["find"]) != len(fields["replace"]):
        sys.exit(f"{path}: each 'find:' needs one 'replace:'")
    return fields


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    mut, root, out = sys.argv[1:]
    fields = parse(mut)
    with open(f"{root}/{fields['file']}", encoding="utf-8") as f:
        text = f.read()
    for old, new in zip(fields["find"], fields["replace"]):
        count = text.count(old)
        if count != 1:
            sys.exit(f"{mut}: 'find: {old}' occurs {count} times in {fields['file']} (must be once)")
        text = text.replace(old, new)
    with open(out, "w", encoding="utf-8") as f:
        f.write(f"/* mutant of {fields['file']} made by tools/make_mutant.py from {mut}; do not edit */\n")
        f.write(f'#line 1 "{fields["file"]}"\n')
        f.write(text)


if __name__ == "__main__":
    main()
