#!/usr/bin/env python3
"""Write docs/api.md, the API reference, from the public headers.

The headers are the contract (include/opends.h and the family headers it
includes, include/opends/*.h); this page is a digest of them so that it
cannot drift: per family, one line per call with its signature, the first
sentence of its comment and the errors the comment lists; then the types,
the flags and constants, the error codes and the configuration variables.

    tools/gen-api-doc.py            rewrite docs/api.md
    tools/gen-api-doc.py --check    exit 1 if docs/api.md is not current
                                    (the meson test api_doc runs this)
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = os.path.join(ROOT, "include")
OUT = os.path.join(ROOT, "docs", "api.md")


def included_families():
    """The family headers in the order opends.h includes them."""
    with open(os.path.join(INCLUDE, "opends.h")) as f:
        return re.findall(r'#include "(opends/\w+\.h)"', f.read())


def comment_text(c):
    """A /* ... */ comment as one line of prose."""
    c = re.sub(r"^/\*+|\*+/$", "", c.strip())
    lines = [re.sub(r"^\s*\*? ?", "", ln) for ln in c.split("\n")]
    return re.sub(r"\s+", " ", " ".join(lines)).strip()


def first_sentence(text):
    """Up to the first full stop outside parentheses that is not part of
    "e.g.", "i.e." or "..."."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch == "." and depth == 0 and (i + 1 == len(text) or text[i + 1] == " "):
            if text[max(0, i - 3):i + 1] in ("e.g.", "i.e.") or text[max(0, i - 2):i + 1] == "...":
                continue
            return text[: i + 1]
    return text


def errors_of(text):
    m = re.search(r"\bErrors?(?:, [^:]*| \([^)]*\))?: (.*)", text)
    if not m:
        return ""
    e = m.group(1)
    # the clause ends where a new sentence that is not about errors starts
    e = re.split(r"(?<!\.\.)\. (?=[A-Z][a-z])", e)[0]
    return e if e.endswith("...") else e.rstrip(".")


def family_title(text):
    m = re.search(r"^/\* -{10,} \*/\n/\* (.*?)\s*\*/\n/\* -{10,} \*/", text, re.M)
    return m.group(1) if m else "?"


def is_one_statement(t):
    """t ends with the ';' that closes its first statement (outside braces)."""
    t = re.sub(r"/\*.*?\*/", "", t, flags=re.S)
    depth = 0
    for i, ch in enumerate(t):
        depth += ch == "{"
        depth -= ch == "}"
        if ch == ";" and depth == 0:
            return i == len(t.rstrip()) - 1
    return False


def calls(text):
    """(comment, declaration) for each OPENDS_API function, in order. The
    comment is the one right above the declaration (#define lines between
    them allowed); a declaration right after another shares its comment."""
    out = []
    prev_end, prev_comment = -1, ""
    for m in re.finditer(r"^OPENDS_API[^;]*;", text, re.M):
        decl = re.sub(r"\s+", " ", m.group(0)[len("OPENDS_API "):])
        before = text[: m.start()]
        # drop the #define lines, typedefs and blank space just above it
        while True:
            stripped = before.rstrip()
            last_nl = stripped.rfind("\n")
            line = stripped[last_nl + 1:]
            if line.startswith("#define"):
                before = stripped[: last_nl + 1]
                continue
            td = stripped.rfind("\ntypedef ")
            if stripped.endswith(";") and td >= 0 and is_one_statement(stripped[td + 1:]):
                before = stripped[: td + 1]
                continue
            before = stripped
            break
        comment, shared = "", False
        if len(before) == prev_end:
            comment, shared = prev_comment, True
        elif before.endswith("*/"):
            start = before.rfind("/*")
            c = before[start:]
            if not re.match(r"/\* -{10,}", c):
                comment = comment_text(c)
        out.append((comment, decl, shared))
        prev_end, prev_comment = m.end(), comment
    return out


def call_name(decl):
    return re.search(r"(opends_\w+)\(", decl).group(1)


def md_escape(s):
    return s.replace("|", "\\|")


def typedefs(text):
    """The name each typedef statement declares, in order."""
    names = []
    for m in re.finditer(r"^typedef\b", text, re.M):
        depth, i = 0, m.end()
        while True:
            ch = text[i]
            depth += ch == "{"
            depth -= ch == "}"
            if ch == ";" and depth == 0:
                break
            i += 1
        stmt = text[m.start():i]
        fp = re.search(r"\(\s*\*\s*(\w+)\s*\)", stmt[stmt.rfind("}") + 1:])
        name = fp.group(1) if fp else re.findall(r"\w+", stmt)[-1]
        # an enum's values, except the error list's (a table of its own)
        body = re.search(r"^typedef enum \w*\s*\{(.*)\}", stmt, re.S)
        if body and "OPENDS_ERROR_LIST" not in body.group(1):
            vals = re.findall(r"(OPENDS_\w+)\s*=\s*(\w+)", re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S))
            name += " (" + ", ".join("`%s` %s" % v for v in vals) + ")"
        names.append(name)
    return names


def defines(text):
    out = []
    for m in re.finditer(r"^#define (OPENDS_[A-Z0-9_]+) (\S+)(?:[ \t]*/\*(.*?)\*/)?", text, re.M | re.S):
        name, value = m.group(1), m.group(2)
        note = comment_text("/*" + m.group(3) + "*/") if m.group(3) else ""
        if name.endswith("_H") or name == "OPENDS_API":
            continue
        out.append((name, value, note))
    return out


def settings(text):
    """The variables opends_driver_open's comment lists: name and the first
    sentence of what it says (an entry runs on over its indented lines)."""
    out = []
    lines = text.split("\n")
    for i, ln in enumerate(lines):
        m = re.match(r"^ \*   (OPENDS_[A-Z_]+)\s+(.*)$", ln)
        if not m:
            continue
        body = [m.group(2).strip()]
        for nxt in lines[i + 1:]:
            if not re.match(r"^ \*\s{6,}\S", nxt):
                break
            body.append(nxt.lstrip(" *").strip())
        out.append((m.group(1), first_sentence(" ".join(body))))
    return out


def errors_table(text):
    return re.findall(r'X\((\w+), (\d+), "([^"]*)"\)', text)


def render():
    fams = included_families()
    texts = {}
    for rel in fams:
        with open(os.path.join(INCLUDE, rel)) as f:
            texts[rel] = f.read()
    with open(os.path.join(INCLUDE, "opends.h")) as f:
        top = f.read()
    o = []
    o.append("# OpenDS API reference")
    o.append("")
    o.append("<!-- Generated by tools/gen-api-doc.py from include/opends.h and include/opends/*.h;")
    o.append("     do not edit: change the header comment and run the script. The meson test")
    o.append("     api_doc fails while this page is not current. -->")
    o.append("")
    o.append("One entry point, `#include <opends.h>`, which includes one header per family")
    o.append("(below). The conventions that hold for every call (how errors are returned,")
    o.append("threads, fork, accelerator contexts) and the table for porting from cuFile are")
    o.append("the comment at the top of `include/opends.h`. Each line gives the call, the")
    o.append("first sentence of its comment and the errors the comment lists; the header")
    o.append("has the whole comment. Calls returning `ssize_t` return the negated codes;")
    o.append("`-errno` there is an error the operating system reported.")
    o.append("")
    n_calls = 0
    for rel in fams:
        text = texts[rel]
        o.append("## %s (`include/%s`)" % (family_title(text), rel))
        o.append("")
        prev = None
        for comment, decl, shared in calls(text):
            n_calls += 1
            name = call_name(decl)
            line = "- `%s`" % decl.rstrip(";")
            summary = first_sentence(comment) if comment else ""
            if shared:
                summary = "As `%s` (one comment covers both)." % prev
                comment = ""
            prev = name
            errs = errors_of(comment)
            if summary and not summary.startswith("Errors"):
                line += " — " + summary
            if errs:
                line += " **Errors:** " + errs + "."
            o.append(line)
            assert name
        o.append("")
    o.append("## Types")
    o.append("")
    for rel in fams:
        names = typedefs(texts[rel])
        if names:
            o.append("- `include/%s`: %s" % (rel, ", ".join(re.sub(r"^(\w+)", r"`\1`", n) for n in names)))
    o.append("")
    o.append("## Flags and constants")
    o.append("")
    o.append("| name | value | header | note |")
    o.append("|---|---|---|---|")
    for rel in ["opends.h"] + fams:
        text = top if rel == "opends.h" else texts[rel]
        for name, value, note in defines(text):
            o.append("| `%s` | `%s` | `%s` | %s |" % (name, value, rel, md_escape(note)))
    o.append("")
    o.append("## Error codes (`OPENDS_ERROR_LIST`, `include/opends/errors.h`)")
    o.append("")
    o.append("Values equal cuFile's `CU_FILE_*` codes. `opends_op_status_error()` gives the")
    o.append("message, `opends_err_name()` the name; below `OPENDS_ERRNO_MAX` (5000) a code")
    o.append("is an errno value.")
    o.append("")
    o.append("| value | name | message |")
    o.append("|---|---|---|")
    for name, value, msg in errors_table(texts["opends/errors.h"]):
        o.append("| %s | `OPENDS_%s` | %s |" % (value, name, md_escape(msg)))
    o.append("")
    o.append("## Configuration (read by `opends_driver_open`, `include/opends/driver.h`)")
    o.append("")
    o.append("An empty value means unset; every variable is validated at every open")
    o.append("(`OPENDS_DRIVER_INVALID_PROPS` with a detail naming it). The header has each")
    o.append("variable's whole text; the first line is here.")
    o.append("")
    for name, first in settings(texts["opends/driver.h"]):
        o.append("- `%s` %s" % (name, first))
    o.append("")
    return "\n".join(o), n_calls


def main():
    text, n = render()
    if "--check" in sys.argv[1:]:
        try:
            with open(OUT) as f:
                cur = f.read()
        except OSError:
            cur = ""
        if cur != text:
            print("docs/api.md is not current with the headers: run tools/gen-api-doc.py")
            return 1
        print("docs/api.md is current (%d calls)" % n)
        return 0
    with open(OUT, "w") as f:
        f.write(text)
    print("wrote docs/api.md (%d calls)" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
