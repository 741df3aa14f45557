#!/usr/bin/env bash
# Counts the public API of the root package's library modules from their symbol graphs: per module, the
# public declarations written in Sources/ (synthesized conformances and inherited defaults excluded), how many
# have no doc comment, and how many are deprecated. Declarations behind `@_spi(NAME)` are counted apart, one
# column per SPI name, and are not in the public column. Needs the debug build (`swift build`).
#
#   scripts/public-api.sh            # the table
#   scripts/public-api.sh --list M   # every public declaration of module M without a doc comment
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

modules=(IdentityRuntime IdentityPolicy IdentityProtection IdentityAssertions IdentityHTTP IdentityTesting)
modules_dir="$(swift build --show-bin-path)/Modules"
graphs="$(mktemp -d)"
trap 'rm -rf "$graphs"' EXIT
for module in "${modules[@]}"; do
    swift symbolgraph-extract -module-name "$module" -I "$modules_dir" -target "$(uname -m)-unknown-linux-gnu" \
        -minimum-access-level public -include-spi-symbols -output-dir "$graphs" \
        -Xcc -fmodule-map-file="$PWD/Sources/CIdentityCrypto/module.modulemap" \
        -Xcc -fmodule-map-file="$PWD/Sources/CIdentityTask/include/module.modulemap" >/dev/null
done

python3 - "$graphs" "${1:-}" "${2:-}" <<'PY'
import collections, functools, glob, json, re, sys

@functools.cache
def source_lines(path):
    return open(path).read().splitlines()

def spi_name(location):
    # The graph flags SPI symbols but does not name the SPI: read it off the declaration's line, else the
    # nearest `@_spi(...)` above it (a member of an SPI type or extension).
    lines = source_lines(location["uri"].removeprefix("file://"))[: location["position"]["line"] + 1]
    for line in reversed(lines):
        found = re.search(r"@_spi\((\w+)\)", line)
        if found:
            return found.group(1)
    return "SPI"

graphs, mode, wanted = sys.argv[1], sys.argv[2], sys.argv[3]
count, undocumented, deprecated = collections.Counter(), collections.Counter(), collections.Counter()
spi = collections.defaultdict(collections.Counter)
missing = []
for path in sorted(glob.glob(f"{graphs}/*.symbols.json")):
    module = path.rsplit("/", 1)[1].split(".")[0].split("@")[0]
    for symbol in json.load(open(path))["symbols"]:
        if symbol["accessLevel"] not in ("public", "open"):
            continue
        location = symbol.get("location", {})
        if "/Sources/" not in location.get("uri", ""):
            continue
        if symbol.get("spi"):
            spi[spi_name(location)][module] += 1
        else:
            count[module] += 1
        if not symbol.get("docComment"):
            undocumented[module] += 1
            missing.append((module, location["uri"].split("/Sources/", 1)[1], location["position"]["line"] + 1,
                            ".".join(symbol["pathComponents"])))
        if any(a.get("isUnconditionallyDeprecated") for a in symbol.get("availability", [])):
            deprecated[module] += 1
if mode == "--list":
    for module, file, line, name in missing:
        if module == wanted:
            print(f"Sources/{file}:{line}: {name}")
    sys.exit(0)
names = sorted(spi)
header = "".join(f" {'spi ' + name:>18}" for name in names)
print(f"{'module':<20} {'public':>7}{header} {'no doc':>7} {'deprecated':>10}")
# A module whose declarations are all SPI still gets its row (Counter addition would drop its zero).
modules = set(count) | {module for counts in spi.values() for module in counts}
for module in sorted(modules, key=lambda module: (-count[module], module)):
    cells = "".join(f" {spi[name][module]:>18}" for name in names)
    print(f"{module:<20} {count[module]:>7}{cells} {undocumented[module]:>7} {deprecated[module]:>10}")
cells = "".join(f" {sum(spi[name].values()):>18}" for name in names)
print(f"{'total':<20} {sum(count.values()):>7}{cells} {sum(undocumented.values()):>7} {sum(deprecated.values()):>10}")
PY
