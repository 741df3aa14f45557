#!/usr/bin/env bash
# Instructions per operation of IdentityNIO's `flow:` overloads against NIO's own calls, counted with
# valgrind's callgrind (repeatable on a loaded machine, unlike wall clock): for `execute`, `submit`,
# `scheduleTask(in: .zero)` (`schedule`) and a future's `whenSuccess` (`future`), runs
# `identity-nio-bench --what W --side S --count N` and `--count 0` and prints (total(N) - total(0)) / N.
#
#   scripts/callgrind-execute.sh                  # from Integrations/IdentityNIO; builds the release bench first
#   scripts/callgrind-execute.sh --check FILE     # also fail when `ours` exceeds its limit in FILE
#   scripts/callgrind-execute.sh --write FILE     # write measured `ours` + 6% + 20 as the limits
#
# The limits are kept in git at .ci/nio-instruction-limits (FILE is relative to where the script is called
# from); the full lane checks them (.ci/lib.sh, step_nio_callgrind). `future` repeats within a few
# instructions; `execute` takes one of two values, about 5% apart (seen: raw 1,654 or 1,726, ours 3,121 or
# 3,273): in some runs glibc's free consolidates the fastbins the 20,000 queued units' frees filled
# (malloc_consolidate, unlink_chunk: +152 per operation), depending on thread timing; `submit` the same way
# (ours 8,460 or 8,760), and `schedule` moves by up to 1.5% (25,192 to 25,558). The 6% headroom covers the
# higher values.
#
# Environment: IDENTITY_CALLGRIND_COUNT (operations per run, default 20000), SCRATCH (the build folder,
# default ../../.build-integrations-release).
set -euo pipefail
mode="print"
limits=""
case "${1:-}" in
    --check|--write)
        [ -n "${2:-}" ] || { echo "usage: $0 [--check FILE | --write FILE]" >&2; exit 64; }
        mode="${1#--}"; limits="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")" ;;
    "") ;;
    *) echo "usage: $0 [--check FILE | --write FILE]" >&2; exit 64 ;;
esac
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is required (apt-get install valgrind)" >&2; exit 1; }
count="${IDENTITY_CALLGRIND_COUNT:-20000}"
scratch="${SCRATCH:-$PWD/../../.build-integrations-release}"
swift build -c release --scratch-path "$scratch" --product identity-nio-bench >&2
export SWIFT_DETERMINISTIC_HASHING=1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# valgrind 3.19 gives up on the debug information of SwiftNIO's C modules: count a copy without it.
bench="$work/identity-nio-bench"
strip --strip-debug -o "$bench" "$(swift build -c release --scratch-path "$scratch" --show-bin-path)/identity-nio-bench"

instructions() {
    valgrind --tool=callgrind --callgrind-out-file="$work/out" -q "$bench" --what "$1" --side "$2" --count "$3" \
        >/dev/null 2>"$work/err" || { cat "$work/err" >&2; return 1; }
    awk '/^(summary|totals):/ { print $2; exit }' "$work/out"
}

failures=0
[ "$mode" = "write" ] && : > "$work/limits"
printf '| operation | raw | ours | ours/raw |\n|---|---:|---:|---:|\n'
for what in execute submit schedule future; do
    declare -A per=()
    for side in raw ours; do
        base=$(instructions "$what" "$side" 0)
        full=$(instructions "$what" "$side" "$count")
        per[$side]=$(( (full - base) / count ))
    done
    printf '| %s | %d | %d | %s |\n' "$what" "${per[raw]}" "${per[ours]}" \
        "$(awk -v a="${per[ours]}" -v b="${per[raw]}" 'BEGIN { printf "%.2fx", a / (b > 0 ? b : 1) }')"
    if [ "$mode" = "write" ]; then
        echo "$what ours $(( per[ours] * 106 / 100 + 20 ))" >> "$work/limits"
    elif [ "$mode" = "check" ]; then
        limit=$(awk -v w="$what" '$1 == w && $2 == "ours" { print $3 }' "$limits")
        if [ -z "$limit" ]; then
            echo "  no limit for $what in $limits" >&2; failures=$((failures + 1))
        elif [ "${per[ours]}" -gt "$limit" ]; then
            echo "  $what: ours ${per[ours]} instructions/op exceeds the limit $limit" >&2; failures=$((failures + 1))
        fi
    fi
    unset per
done
if [ "$mode" = "write" ]; then
    { echo "# operation side max-instructions-per-op (Integrations/IdentityNIO/scripts/callgrind-execute.sh --write: measured + 6% + 20; SWIFT_DETERMINISTIC_HASHING=1)"
      cat "$work/limits"; } > "$limits"
    echo "wrote $limits"
fi
if [ "$failures" -gt 0 ]; then
    echo "$failures instruction limit(s) exceeded" >&2
    exit 1
fi
