#!/usr/bin/env bash
# What IdentityMiddleware adds to one request of the light route, in instructions (valgrind's callgrind, which a
# loaded machine does not move, unlike wrk's figures): identity-edge-calls-FRAMEWORK drives the router of the wrk
# benchmark's server in process (route lookup, the middleware on /identity, the handler; no sockets), and each
# route is counted as (total(N) - total(0)) / N, as scripts/callgrind-pairs.sh counts the harness's pairs.
#
#     Benchmarks/Edge/callgrind.sh                       # print the table
#     Benchmarks/Edge/callgrind.sh --check FILE          # also fail when a middleware adds more than FILE allows
#
# FILE holds lines `FRAMEWORK-middleware ours MAX` (instructions the middleware may add per request).
# Environment: EDGE_FRAMEWORKS (default "hummingbird vapor"), EDGE_CALLGRIND_COUNT (requests per run, default
# 5000), EDGE_SCRATCH_PATH (the release build folder, default .build-integrations-release), EDGE_BUILD=0 (use the
# identity-edge-calls-* executables already built there).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
scratch="${EDGE_SCRATCH_PATH:-$root/.build-integrations-release}"
count="${EDGE_CALLGRIND_COUNT:-5000}"
frameworks="${EDGE_FRAMEWORKS:-hummingbird vapor}"
limits=""
case "${1:-}" in
    --check) limits="$2" ;;
    "") ;;
    *) echo "usage: $0 [--check FILE]" >&2; exit 64 ;;
esac
command -v valgrind >/dev/null || { echo "valgrind is required (apt-get install valgrind)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

total() {
    SWIFT_DETERMINISTIC_HASHING=1 valgrind --tool=callgrind --callgrind-out-file="$work/out" -q "$work/calls" "$1" "$2" \
        >/dev/null 2>"$work/err" || { cat "$work/err" >&2; return 1; }
    awk '/^(summary|totals):/ { print $2; exit }' "$work/out"
}
per_request() { echo $(( ($(total "$1" "$count") - $(total "$1" 0)) / count )); }

over=0
echo "| framework | the route alone | behind IdentityMiddleware | added by the middleware |"
echo "|---|---:|---:|---:|"
for framework in $frameworks; do
    if [ "${EDGE_BUILD:-1}" = 1 ]; then
        swift build -c release --package-path "$here" --scratch-path "$scratch" --product "identity-edge-calls-$framework" >&2
    fi
    # valgrind 3.19 cannot read the DWARF 5 of a binary this size and gives up: count a copy without debug info
    # (the symbol table stays, so callgrind_annotate still names every function).
    cp "$scratch/release/identity-edge-calls-$framework" "$work/calls"
    strip --strip-debug "$work/calls"
    baseline="$(per_request baseline)"
    identity="$(per_request identity)"
    added=$((identity - baseline))
    echo "| $framework | $baseline | $identity | $added |"
    if [ -n "$limits" ]; then
        limit="$(awk -v p="$framework-middleware" '$1 == p && $2 == "ours" { print $3 }' "$limits")"
        if [ -z "$limit" ]; then
            echo "no $framework-middleware limit in $limits" >&2
            over=1
        elif [ "$added" -gt "$limit" ]; then
            echo "$framework: the middleware adds $added instructions per request, over the limit $limit ($limits)" >&2
            over=1
        fi
    fi
done
exit "$over"
