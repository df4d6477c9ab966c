#!/usr/bin/env python3
"""Generates Parla's lazy bindings to libpulse, libespeak-ng and libdbus-1.

Parla's programs used to name these libraries in their ELF headers, so the dynamic loader
mapped and relocated them, and the ~30 libraries they pull in (X11, xcb, libsndfile and its
codecs, libsystemd, libgcrypt, ...), before any code ran: about 2.8 ms of every start,
`parla say -o` and `parla --version` included. Now each library is opened with dlopen() the
first time one of its functions is called, so a process loads only what it uses:
`parla say -o` never loads libpulse, and the engine host loads libespeak-ng once it has
forked.

For every function Parla calls, the generated C file defines a function of the same name and
type, hidden (never exported, so it cannot interpose on the real library for anyone else
that loads it), which loads the library once and calls the real function. If the library
cannot be loaded, it returns a failure value (-1 for pulse's and espeak-ng's ints, else
zero or NULL), and `parla_<lib>_load()` / `parla_<lib>_load_error()` say why, for callers
to turn into a message a user can act on. dbus_message_append_args and
dbus_message_get_args are variadic: their wrappers call the *_valist variants.

The products also link with --as-needed, so the linker drops the libraries that no code
references any more (Package.swift).

Run after using a new function of one of these libraries (the link fails with "undefined
reference" until then, when the library is not linked):
    scripts/generate-lazy-libraries.py
Needs clang (in the Swift toolchain) and the libraries' -dev packages (scripts/setup).
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LIBRARIES = [
    {
        "name": "pulse",
        "target": "CPulseAudioLazy",
        "soname": "libpulse.so.0",
        "package": "libpulse0",
        "headers": ["pulse/pulseaudio.h", "pulse/thread-mainloop.h"],
        "pkgconfig": "libpulse",
        "int_failure": "-1",
    },
    {
        "name": "espeak",
        "target": "CESpeakNGLazy",
        "soname": "libespeak-ng.so.1",
        "package": "libespeak-ng1",
        "headers": ["espeak-ng/speak_lib.h"],
        "pkgconfig": "espeak-ng",
        "int_failure": "-1",
        # Loads Parla's stand-in for libpcaudio first, when the program has one, and finds a
        # bundled espeak-ng (espeak_locate.c, beside the generated file).
        "before_load": "parla_espeak_before_load",
        "before_load_header": "parla_espeak_locate.h",
    },
    {
        "name": "dbus",
        "target": "CDBusLazy",
        "soname": "libdbus-1.so.3",
        "package": "libdbus-1-3",
        "headers": ["dbus/dbus.h"],
        "pkgconfig": "dbus-1",
        "int_failure": "0",
    },
]

PREFIX = {"pulse": "pa_", "espeak": "espeak_", "dbus": "dbus_"}


def used_functions(prefix):
    """Every identifier prefix* in Sources and Tests (Swift and C): called, or taken as a
    function pointer (piper_espeak.c); the caller keeps those the library declares as functions."""
    found = set()
    pattern = re.compile(r"\b(" + re.escape(prefix) + r"[A-Za-z0-9_]+)\b")
    for top in ("Sources", "Tests"):
        for directory, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".swift", ".c")) and not f.startswith("lazy_"):
                    with open(os.path.join(directory, f), encoding="utf-8") as fh:
                        found.update(pattern.findall(fh.read()))
    return found


def declarations(library):
    cflags = subprocess.run(
        ["pkg-config", "--cflags", library["pkgconfig"]], check=True, capture_output=True, text=True
    ).stdout.split()
    source = "".join(f"#include <{h}>\n" for h in library["headers"])
    out = subprocess.run(
        ["clang", "-x", "c", "-fsyntax-only", "-Xclang", "-ast-dump=json", *cflags, "-"],
        input=source, check=True, capture_output=True, text=True,
    ).stdout
    functions = {}
    for node in json.loads(out).get("inner", []):
        if node.get("kind") != "FunctionDecl" or "name" not in node:
            continue
        params = [p["type"]["qualType"] for p in node.get("inner", []) if p.get("kind") == "ParmVarDecl"]
        qual = node["type"]["qualType"]
        # The return type is the text before the parameter list's opening parenthesis.
        depth, cut = 0, None
        for i in range(len(qual) - 1, -1, -1):
            if qual[i] == ")":
                depth += 1
            elif qual[i] == "(":
                depth -= 1
                if depth == 0:
                    cut = i
                    break
        functions[node["name"]] = {
            "returns": qual[:cut].strip(),
            "params": params,
            "variadic": bool(node.get("variadic")),
        }
    return functions


def parameter(type_, name):
    if "(*)" in type_:
        return type_.replace("(*)", f"(*{name})", 1)
    if "(" in type_ or "[" in type_:
        sys.exit(f"cannot declare a parameter of type {type_!r}")
    return f"{type_}{'' if type_.endswith('*') else ' '}{name}"


def generate(library):
    name = library["name"]
    decls = declarations(library)
    # Names called like functions that are not functions are types (Swift initialisers).
    wanted = sorted(f for f in used_functions(PREFIX[name]) if f in decls)
    real = []  # the functions looked up with dlsym (variadic ones: their *_valist variant)
    for f in wanted:
        if decls[f]["variadic"]:
            real.append(f + "_valist")
        else:
            real.append(f)
    for f in real:
        if f not in decls:
            sys.exit(f"{name}: {f} is not declared")
    lines = [
        f"// Generated by scripts/generate-lazy-libraries.py: do not edit. Lazy bindings to",
        f"// {library['soname']}: see the script for why and how.",
        '#include "parla_lazy_' + name + '.h"',
        "#include <dlfcn.h>",
        "#include <pthread.h>",
        "#include <stdarg.h>",
        "#include <stdio.h>",
        "",
        "static struct {",
    ]
    for f in real:
        lines.append(f"    __typeof__({f}) *{f};")
    lines += [
        "} real;",
        "static int loaded;",
        "static char error[512];",
        "static pthread_once_t once = PTHREAD_ONCE_INIT;",
        "",
    ]
    if library.get("before_load"):
        lines += [
            f"// Prepares the library's loading ({library['before_load_header']}).",
            f'#include "{library["before_load_header"]}"',
            "",
        ]
    lines += [
        "static void load(void) {",
    ]
    if library.get("before_load"):
        lines.append(f"    {library['before_load']}();")
    lines += [
        f'    void *library = dlopen("{library["soname"]}", RTLD_NOW | RTLD_LOCAL);',
        "    if (!library) {",
        "        const char *why = dlerror();",
        f'        snprintf(error, sizeof error, "%s (install the {library["package"]} package)", why ? why : "{library["soname"]} could not be loaded");',
        "        return;",
        "    }",
        "    const char *absent = NULL;",
    ]
    for f in real:
        lines.append(f'    if (!(real.{f} = (__typeof__({f}) *)dlsym(library, "{f}")) && !absent) absent = "{f}";')
    lines += [
        "    if (absent) {",
        f'        snprintf(error, sizeof error, "{library["soname"]} has no %s (install a newer {library["package"]})", absent);',
        "        return;",
        "    }",
        "    loaded = 1;",
        "}",
        "",
        f"int parla_{name}_load(void) {{",
        "    pthread_once(&once, load);",
        "    return loaded;",
        "}",
        "",
        f"const char *parla_{name}_load_error(void) {{",
        f"    return parla_{name}_load() ? NULL : error;",
        "}",
        "",
        "#pragma GCC visibility push(hidden)",
    ]
    for f in wanted:
        d = decls[f]
        args = [f"a{i}" for i in range(len(d["params"]))]
        params = ", ".join(parameter(t, a) for t, a in zip(d["params"], args)) or "void"
        returns = d["returns"]
        is_void = returns == "void"
        if returns.endswith("*"):
            failure = "NULL"
        elif returns == "int":
            failure = library["int_failure"]
        elif returns == "espeak_ERROR":
            failure = "EE_INTERNAL_ERROR"
        else:
            failure = f"({returns})0"
        head = f"{returns} {f}({params}{', ...' if d['variadic'] else ''})"
        if returns.endswith("*"):
            head = f"{returns}{f}({params}{', ...' if d['variadic'] else ''})"
        lines.append(head + " {")
        lines.append(f"    if (!parla_{name}_load()) return{'' if is_void else ' ' + failure};")
        if d["variadic"]:
            last = args[-1]
            lines += [
                "    va_list rest;",
                f"    va_start(rest, {last});",
                f"    {'' if is_void else returns + ' result = '}real.{f}_valist({', '.join(args)}, rest);",
                "    va_end(rest);",
            ]
            if not is_void:
                lines.append("    return result;")
        else:
            lines.append(f"    {'' if is_void else 'return '}real.{f}({', '.join(args)});")
        lines.append("}")
    lines += ["#pragma GCC visibility pop", ""]
    path = os.path.join(ROOT, "Sources", library["target"], f"lazy_{name}.c")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
    print(f"{path}: {len(wanted)} functions")


def main():
    for library in LIBRARIES:
        generate(library)


if __name__ == "__main__":
    main()
