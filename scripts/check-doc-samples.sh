#!/bin/bash
# Typechecks every ```swift sample of README.md and Sources/*/*.docc/*.md, each on its own with swiftc, as a
# reader would paste it: the sample is main.swift, given only the placeholders its article declares in
# scripts/doc-samples/<Article>.swift (see scripts/doc-samples.py). Prints ARTICLE:LINE and the compiler's
# errors for each sample that fails, and exits 1 when any fails or the quick start's copies differ.
#
#   scripts/check-doc-samples.sh                        root-package samples against .build/debug (build it
#                                                        first: swift build --build-tests -Xswiftc
#                                                        -warnings-as-errors); samples importing integration
#                                                        packages are checked when .build-integrations holds
#                                                        their modules, else listed as not checked
#   scripts/check-doc-samples.sh --require-integrations  the same, but a sample that could not be checked fails
#                                                        (the landing lane, after the integration packages built)
#   scripts/check-doc-samples.sh --root-only            the root-package samples only; lists every other one as
#                                                        not checked
#
# Samples that import an integration package (IdentityVapor, Hummingbird, PostgresNIO, ...) are checked against
# .build-integrations/debug/Modules, where the landing lane's `swift test --package-path Integrations/...
# --scratch-path .build-integrations` steps leave every integration module and its dependencies, with the C
# module maps those dependencies need. A `// Package.swift` sample (import PackageDescription) is checked
# against the toolchain's PackageDescription.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$PWD"
work="$root/.build/doc-samples"
integrations="${DOC_SAMPLES_INTEGRATIONS_BUILD:-$root/.build-integrations}"

# One sample: check_one NNN KIND ARTICLE:LINE MODULES REASON. Writes NNN/result (ok, fail or skipped) and
# NNN/log.
check_one() {
    local id="$1" kind="$2" directory="$work/$1" flags=() module
    local files=("$directory/main.swift")
    [ -f "$directory/Placeholders.swift" ] && files+=("$directory/Placeholders.swift")
    case "$kind" in
        unchecked)
            echo "listed in scripts/doc-samples/not-checked.txt: $5" >"$directory/log"
            echo skipped >"$directory/result"
            return 0
            ;;
        root)
            flags=(-I "$root/.build/debug/Modules" -Xcc "-fmodule-map-file=$root/Sources/CIdentityCrypto/module.modulemap"
                -Xcc "-fmodule-map-file=$root/Sources/CIdentityTask/include/module.modulemap")
            ;;
        integration)
            if [ "${DOC_SAMPLES_ROOT_ONLY:-0}" = 1 ]; then
                echo "--root-only: samples that import integration packages are not checked" >"$directory/log"
                echo skipped >"$directory/result"
                return 0
            fi
            for module in $4; do
                if [ ! -e "$integrations/debug/Modules/$module.swiftmodule" ]; then
                    echo "no $module.swiftmodule in $integrations/debug/Modules (build the integration packages" \
                        "that provide it with --scratch-path .build-integrations first)" >"$directory/log"
                    echo skipped >"$directory/result"
                    return 0
                fi
            done
            flags=(-I "$integrations/debug/Modules")
            while IFS= read -r map; do flags+=(-Xcc "-fmodule-map-file=$map"); done <"$work/integration-module-maps"
            ;;
        manifest)
            flags=(-I "$(dirname "$(command -v swiftc)")/../lib/swift/pm/ManifestAPI" -package-description-version 6.1)
            ;;
    esac
    if swiftc -typecheck -swift-version 6 -module-name DocSample -module-cache-path "$root/.build/doc-samples-module-cache" \
        "${flags[@]}" "${files[@]}" >"$directory/log" 2>&1; then
        echo ok >"$directory/result"
    else
        echo fail >"$directory/result"
    fi
}

if [ "${1:-}" = "--one" ]; then
    shift
    check_one "$@"
    exit 0
fi

require_integrations=0
export DOC_SAMPLES_ROOT_ONLY=0
case "${1:-}" in
    --require-integrations) require_integrations=1 ;;
    --root-only) DOC_SAMPLES_ROOT_ONLY=1 ;;
    "") ;;
    *) echo "usage: $0 [--require-integrations | --root-only]" >&2; exit 2 ;;
esac

if [ ! -d "$root/.build/debug/Modules" ]; then
    echo "no .build/debug/Modules: run swift build --build-tests -Xswiftc -warnings-as-errors first" >&2
    exit 1
fi
rm -rf "$work"
mkdir -p "$work"
status=0
python3 scripts/doc-samples.py "$work" || status=1

# The C module maps of the integration packages' dependencies: SwiftPM's generated ones and the packages' own.
: >"$work/integration-module-maps"
if [ -d "$integrations/debug" ]; then
    {
        ls "$integrations"/debug/*.build/module.modulemap 2>/dev/null || true
        ls "$integrations"/checkouts/*/Sources/*/include/module.modulemap 2>/dev/null || true
        echo "$root/Sources/CIdentityCrypto/module.modulemap"
        echo "$root/Sources/CIdentityTask/include/module.modulemap"
    } >"$work/integration-module-maps"
fi

# Two at a time: each swiftc loads the modules it imports, mostly waiting on one core.
tr '\t' '\n' <"$work/samples.tsv" | xargs -d '\n' -n 5 -P 2 "$0" --one

total=0; passed=0; failed=0; skipped=0; unbuilt=0
while IFS=$'\t' read -r id kind place missing reason; do
    total=$((total + 1))
    case "$(cat "$work/$id/result")" in
        ok) passed=$((passed + 1)) ;;
        fail)
            failed=$((failed + 1))
            echo "FAIL $place ($kind sample; compiled as $work/$id/main.swift)"
            sed 's/^/    /' "$work/$id/log"
            ;;
        skipped)
            skipped=$((skipped + 1))
            [ "$kind" = unchecked ] || unbuilt=$((unbuilt + 1))
            echo "NOT CHECKED $place (imports ${missing}): $(cat "$work/$id/log")"
            ;;
    esac
done <"$work/samples.tsv"
echo "doc samples: $total, $passed compile, $failed fail, $skipped not checked"
[ "$failed" -eq 0 ] || status=1
# Listed samples are declared; a sample skipped because a module was not built fails the landing lane.
if [ "$unbuilt" -gt 0 ] && [ "$require_integrations" -eq 1 ]; then status=1; fi
exit "$status"
