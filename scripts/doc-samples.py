#!/usr/bin/env python3
"""Extracts every ```swift sample of the README and the DocC articles for scripts/check-doc-samples.sh.

    doc-samples.py OUT_DIR

Writes, for each sample, OUT_DIR/NNN/main.swift (the sample, byte for byte) and, when the sample's article has
declared placeholders, OUT_DIR/NNN/Placeholders.swift; then OUT_DIR/samples.tsv, one line per sample:
NNN, its kind (root, integration or manifest), ARTICLE:LINE (the line of the opening fence) and the modules it
imports that the root package does not build. A sample is `main.swift` so that it may have top-level
statements, as a reader would paste it.

Placeholders: scripts/doc-samples/<article file name without .md>.swift declares what an article's prose stands
for (`let manager: PolicyManager = placeholder()`). Its text before the first `// sample N` line is given to
every sample of the article; the text after `// sample N` (or `// samples N, M`) only to the article's Nth
(Mth) ```swift sample, counted from 1. Declarations only: a placeholder that made a wrong sample compile
would hide the very mistakes this check exists for.

scripts/doc-samples/not-checked.txt names samples that are listed, not compiled: one a line, the page, the
sample's ordinal on it and why (`PAGE N REASON`). The check prints each of them.

Also checks the quick start (exit 1 when the copies differ): the sample opening with `QUICK_START_MARK` in
the README and in the IdentityPolicy landing page, and the lines between `// quick start: begin` and
`// quick start: end` of Tests/IdentityPolicyTests/QuickStartTests.swift, must be the same text.
"""

import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PLACEHOLDERS = os.path.join(ROOT, "scripts", "doc-samples")

# What a sample of the root package may import: its own modules and the toolchain's.
ROOT_MODULES = {
    "IdentityRuntime", "IdentityPolicy", "IdentityProtection", "IdentityAssertions", "IdentityHTTP",
    "IdentityTesting", "Foundation", "FoundationEssentials", "Dispatch", "Synchronization", "Testing",
    "Glibc", "Musl", "Darwin",
}

QUICK_START_MARK = "// Quick start:"
QUICK_START_PAGES = ["README.md", "Sources/IdentityPolicy/IdentityPolicy.docc/IdentityPolicy.md"]
QUICK_START_TEST = "Tests/IdentityPolicyTests/QuickStartTests.swift"

IMPORT = re.compile(r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*import\s+(?:(?:struct|class|enum|protocol|func|var|let|typealias)\s+)?([A-Za-z_][A-Za-z0-9_]*)", re.M)
SECTION = re.compile(r"^// samples? (\d+(?:\s*,\s*\d+)*)\s*$")


def documents():
    pages = ["README.md"]
    sources = os.path.join(ROOT, "Sources")
    for module in sorted(os.listdir(sources)):
        module_dir = os.path.join(sources, module)
        if not os.path.isdir(module_dir):
            continue
        for catalog in sorted(os.listdir(module_dir)):
            if not catalog.endswith(".docc"):
                continue
            for name in sorted(os.listdir(os.path.join(module_dir, catalog))):
                if name.endswith(".md"):
                    pages.append(os.path.join("Sources", module, catalog, name))
    return pages


def samples(page):
    """Yields (line of the opening fence, text) for each ```swift block of `page`."""
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        lines = f.read().split("\n")
    start, body = None, []
    for number, line in enumerate(lines, 1):
        if start is None:
            if line.strip() == "```swift":
                start, body = number, []
        elif line.strip() == "```":
            yield start, "\n".join(body) + "\n"
            start = None
        else:
            body.append(line)
    if start is not None:
        sys.exit(f"{page}:{start}: ```swift block never closed")


def placeholders(page):
    """The article's placeholders: (text for every sample, {ordinal: text for that sample only})."""
    path = os.path.join(PLACEHOLDERS, os.path.splitext(os.path.basename(page))[0] + ".swift")
    if not os.path.exists(path):
        return "", {}
    common, sections, current = [], {}, None
    with open(path, encoding="utf-8") as f:
        for line in f.read().split("\n"):
            match = SECTION.match(line)
            if match:
                current = [int(n) for n in match.group(1).split(",")]
                for n in current:
                    sections.setdefault(n, [])
                continue
            if current is None:
                common.append(line)
            else:
                for n in current:
                    sections[n].append(line)
    return "\n".join(common) + "\n", {n: "\n".join(text) + "\n" for n, text in sections.items()}


def not_checked():
    """{(page, ordinal): reason} from scripts/doc-samples/not-checked.txt."""
    path = os.path.join(PLACEHOLDERS, "not-checked.txt")
    listed = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                page, ordinal, reason = line.split(None, 2)
                listed[(page, int(ordinal))] = reason
    return listed


def check_quick_start(found):
    copies = []
    for page in QUICK_START_PAGES:
        texts = [text for (p, _, text) in found if p == page and text.startswith(QUICK_START_MARK)]
        if len(texts) != 1:
            return [f"{page}: {len(texts)} samples open with '{QUICK_START_MARK}', expected 1"]
        copies.append((page, texts[0]))
    test = os.path.join(ROOT, QUICK_START_TEST)
    with open(test, encoding="utf-8") as f:
        text = f.read()
    match = re.search(r"^// quick start: begin\n(.*?)^// quick start: end\n", text, re.S | re.M)
    if not match:
        return [f"{QUICK_START_TEST}: no '// quick start: begin' ... '// quick start: end' region"]
    copies.append((QUICK_START_TEST, match.group(1)))
    problems = []
    for page, copy in copies[1:]:
        if copy != copies[0][1]:
            problems.append(f"quick start: {page} differs from {copies[0][0]} (keep the copies identical)")
    return problems


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    found = []
    for page in documents():
        for line, text in samples(page):
            found.append((page, line, text))
    rows = []
    ordinals = {}
    listed = not_checked()
    for index, (page, line, text) in enumerate(found, 1):
        ordinal = ordinals[page] = ordinals.get(page, 0) + 1
        common, sections = placeholders(page)
        declared = common + sections.get(ordinal, "")
        imports = set(IMPORT.findall(text)) | set(IMPORT.findall(declared))
        if "PackageDescription" in imports:
            kind, foreign = "manifest", []
        else:
            foreign = sorted(imports - ROOT_MODULES)
            kind = "integration" if foreign else "root"
        reason = listed.pop((page, ordinal), "")
        if reason:
            kind = "unchecked"
        directory = os.path.join(out, f"{index:03d}")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "main.swift"), "w", encoding="utf-8") as f:
            f.write(text)
        if declared.strip():
            with open(os.path.join(directory, "Placeholders.swift"), "w", encoding="utf-8") as f:
                f.write(declared)
        rows.append(f"{index:03d}\t{kind}\t{page}:{line}\t{' '.join(foreign)}\t{reason}")
    with open(os.path.join(out, "samples.tsv"), "w", encoding="utf-8") as f:
        f.write("\n".join(rows) + "\n")
    problems = check_quick_start(found)
    for (page, ordinal) in listed:
        problems.append(f"scripts/doc-samples/not-checked.txt: {page} has no sample {ordinal}")
    for problem in problems:
        print(problem, file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
