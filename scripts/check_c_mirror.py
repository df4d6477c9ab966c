#!/usr/bin/env python3
"""Checks that nothing restates parla.h wrongly, for scripts/check-c:

- the Python package's ctypes mirror (python/parla/_lib.py): every enum value of the header
  (statuses, event and chunk kinds, priorities, boundaries) has its Python name with the same
  number, and every struct has the header's fields at the offsets the C compiler gives them,
  and the same size;
- the internal C headers (Sources/C*/include other than parla.h's) declare no name parla.h
  declares and use none of its enum prefixes, so no internal constant can be mistaken for a
  public one (as PARLA_EVENT_WORD once was 1 inside and 2 outside).

Usage: check_c_mirror.py CC (a C compiler)
"""
import ctypes
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
header = os.path.join(root, "Sources/CParlaAPI/include/parla.h")
text = open(header, encoding="utf-8").read()
spec = importlib.util.spec_from_file_location("parla_lib", os.path.join(root, "python/parla/_lib.py"))
lib = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lib)  # declares; libparla is only opened by load()
problems = []

# Enums: the header's numbers against the mirror's.
values = {name: int(value) for name, value in re.findall(r"\b(PARLA_[A-Z0-9_]+) = (\d+)", text)}
mirrors = {
    "PARLA_ERROR_": {v: k for k, v in lib.STATUS.items()},
    "PARLA_EVENT_": lib.EVENT_KINDS,
    "PARLA_CHUNK_": lib.CHUNK_KINDS,
    "PARLA_PRIORITY_": {v: k for k, v in lib.PRIORITIES.items()},
    "PARLA_BOUNDARY_": {v: k for k, v in lib.BOUNDARIES.items()},
}
compared = 0
for name, value in values.items():
    if name == "PARLA_OK":
        compared += 1
        if lib.PARLA_OK != value:
            problems.append(f"PARLA_OK is {value}, _lib.PARLA_OK {lib.PARLA_OK}")
        continue
    prefix = next((p for p in mirrors if name.startswith(p)), None)
    if prefix is None:
        problems.append(f"{name}: no Python mirror for its enum (add one to _lib.py and here)")
        continue
    compared += 1
    want = name[len(prefix):].lower()
    got = mirrors[prefix].get(value)
    if got != want:
        problems.append(f"{name} = {value}: _lib.py has {got!r} for {value}, not {want!r}")
for prefix, mirror in mirrors.items():
    for value, name in mirror.items():
        if values.get(prefix + name.upper()) != value:
            problems.append(f"_lib.py's {name!r} = {value} is not {prefix}{name.upper()} in parla.h")

# Structs: offsets and sizes as the C compiler lays them out.
structs = {"parla_event": lib.Event, "parla_timed_range": lib.TimedRange, "parla_chunk": lib.Chunk,
           "parla_voice": lib.Voice, "parla_segment": lib.Segment}
declared = {}
for body, name in re.findall(r"typedef struct \{(.*?)\} (parla_[a-z_]+);", text, re.S):
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    fields = []
    for line in body.split(";"):
        parts = [part.strip() for part in line.strip().split(",")]
        if parts[0]:
            fields += [parts[0].split()[-1].lstrip("*")] + [part.lstrip("*") for part in parts[1:]]
    declared[name] = fields
program = ["#include <parla.h>", "#include <stddef.h>", "#include <stdio.h>", "int main(void) {"]
for name, fields in declared.items():
    program.append(f'    printf("{name} sizeof %zu\\n", sizeof({name}));')
    program += [f'    printf("{name} {f} %zu %zu\\n", offsetof({name}, {f}), sizeof((({name} *)0)->{f}));' for f in fields]
program += ["    return 0;", "}"]
with tempfile.TemporaryDirectory() as work:
    source, binary = os.path.join(work, "layout.c"), os.path.join(work, "layout")
    open(source, "w").write("\n".join(program) + "\n")
    subprocess.run([sys.argv[1] if len(sys.argv) > 1 else "cc", "-std=c11", "-I", os.path.dirname(header), "-o", binary, source], check=True)
    layout = subprocess.run([binary], check=True, capture_output=True, text=True).stdout.split("\n")
c_layout = {tuple(line.split()[:2]): tuple(int(n) for n in line.split()[2:]) for line in layout if line}
for name, mirror in structs.items():
    if name not in declared:
        problems.append(f"{name} is not in parla.h")
        continue
    ours = [f[0] for f in mirror._fields_]
    if ours != declared[name]:
        problems.append(f"{name}: parla.h's fields {declared[name]}, _lib.py's {ours}")
    if c_layout[(name, "sizeof")] != (ctypes.sizeof(mirror),):
        problems.append(f"{name}: {c_layout[(name, 'sizeof')][0]} bytes in C, {ctypes.sizeof(mirror)} in _lib.py")
    for field in ours:
        theirs = (getattr(mirror, field).offset, getattr(mirror, field).size)
        if (name, field) in c_layout and theirs != c_layout[(name, field)]:
            problems.append(f"{name}.{field}: offset and size {c_layout[(name, field)]} in C, {theirs} in _lib.py")
missing = set(declared) - set(structs)
problems += [f"{name}: a struct of parla.h with no Python mirror" for name in sorted(missing)]

# Internal headers: no public name, no public enum prefix.
public = set(re.findall(r"\b(?:parla|PARLA)_[A-Za-z0-9_]+", text))
prefixes = ("PARLA_EVENT_", "PARLA_ERROR_", "PARLA_CHUNK_", "PARLA_PRIORITY_", "PARLA_BOUNDARY_", "PARLA_VERSION_", "PARLA_OK")
internal = 0
for directory, _, files in os.walk(os.path.join(root, "Sources")):
    for file in files:
        path = os.path.join(directory, file)
        if not file.endswith(".h") or path == header:
            continue
        internal += 1
        for name in set(re.findall(r"\b(?:parla|PARLA)_[A-Za-z0-9_]+", open(path, encoding="utf-8").read())):
            if name in public or name.startswith(prefixes):
                problems.append(f"{os.path.relpath(path, root)} uses {name}, a name of parla.h's: give it an internal name (parla_engine_…)")

if problems:
    print("check_c_mirror: " + "\n  ".join(["parla.h is restated wrongly:"] + problems), file=sys.stderr)
    sys.exit(1)
print(f"check_c_mirror: _lib.py mirrors parla.h's {compared} enum values and {len(structs)} structs "
      f"({sum(len(f) for f in declared.values())} fields, offsets from the C compiler); "
      f"{internal} internal headers use none of its names")
