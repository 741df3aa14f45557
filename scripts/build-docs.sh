#!/usr/bin/env bash
# Builds the DocC catalog of every library module of the root package (Sources/M/M.docc) with the toolchain
# alone: no swift-docc-plugin, so the root package keeps no package dependencies.
#
#   scripts/build-docs.sh [MODULE...]     default: every module with a catalog
#
# 1. `swift package dump-symbol-graph` builds the package (with the landing lane's debug flags, so after the
#    lane's debug build it compiles nothing) and writes every module's symbol graphs to one folder.
# 2. For each module, `docc convert` reads its catalog and its own symbol graphs (M.symbols.json and the
#    graphs of its extensions of other modules, M@Other.symbols.json) and writes .build-docs/M.doccarchive
#    (git-ignored). Warnings are errors: a broken symbol link, `<doc:...>` link or topic fails the script.
#
# Environment: DOCC (default: the toolchain's docc next to swift), IDENTITY_DOCS_OUTPUT (default .build-docs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

modules=("$@")
if [ "${#modules[@]}" -eq 0 ]; then
    modules=(IdentityRuntime IdentityPolicy IdentityProtection IdentityAssertions IdentityHTTP IdentityTesting)
fi

if [ -z "${DOCC:-}" ]; then
    if command -v docc >/dev/null 2>&1; then
        DOCC="$(command -v docc)"
    else
        DOCC="$(dirname "$(readlink -f "$(command -v swift)")")/docc"
    fi
fi
[ -x "$DOCC" ] || { echo "docc not found (set DOCC)" >&2; exit 1; }

output="${IDENTITY_DOCS_OUTPUT:-$PWD/.build-docs}"
graphs="$output/symbol-graphs"
rm -rf "$output"
mkdir -p "$graphs"

# The landing lane's debug flags (.ci/lib.sh): the same build folder, nothing recompiled after its build.
swift package -Xswiftc -warnings-as-errors dump-symbol-graph --minimum-access-level public >"$output/dump-symbol-graph.log" 2>&1 \
    || { cat "$output/dump-symbol-graph.log" >&2; exit 1; }
all_graphs="$(sed -n 's/^Files written to //p' "$output/dump-symbol-graph.log" | tail -n 1)"
[ -d "$all_graphs" ] || all_graphs="$(swift build -Xswiftc -warnings-as-errors --show-bin-path)/../symbolgraph"

failed=0
for module in "${modules[@]}"; do
    catalog="Sources/$module/$module.docc"
    [ -d "$catalog" ] || { echo "$module: no catalog at $catalog" >&2; failed=1; continue; }
    mkdir -p "$graphs/$module"
    cp "$all_graphs/$module.symbols.json" "$graphs/$module/"
    for extension in "$all_graphs/$module"@*.symbols.json; do
        [ -e "$extension" ] && cp "$extension" "$graphs/$module/"
    done
    log="$output/$module.log"
    if "$DOCC" convert "$catalog" \
        --additional-symbol-graph-dir "$graphs/$module" \
        --fallback-display-name "$module" \
        --fallback-bundle-identifier "org.swift-identity-runtime.$module" \
        --output-path "$output/$module.doccarchive" \
        --warnings-as-errors >"$log" 2>&1 && ! grep -q "warning:" "$log"; then
        echo "$module: $output/$module.doccarchive"
    else
        cat "$log" >&2
        echo "$module: FAILED ($(grep -c "warning:" "$log" || true) warnings, $(grep -c "error:" "$log" || true) errors)" >&2
        failed=1
    fi
done
exit "$failed"
