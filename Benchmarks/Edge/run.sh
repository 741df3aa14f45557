#!/usr/bin/env bash
# The identity middlewares under wrk: the light route of identity-edge-hummingbird and identity-edge-vapor (a
# handler that returns a small JSON body) with IdentityMiddleware in front (reusable bearer tokens, 64 accounts in
# 8 tenants: every token verified once, then answered from the cache) and without it. The server runs on one core
# and wrk on another (taskset), the two routes alternate round by round (which goes first alternates too), and
# each figure is the median of the rounds. Prints one table; figures are compared within the run only.
#
#     Benchmarks/Edge/run.sh                       # both frameworks, 5 rounds of 10 s per route
#     EDGE_FRAMEWORKS=vapor EDGE_SECONDS=5 Benchmarks/Edge/run.sh
#
# Environment: EDGE_FRAMEWORKS (default "hummingbird vapor"), EDGE_ROUNDS (5), EDGE_SECONDS (10 per round and
# route), EDGE_CONNECTIONS (32), EDGE_SERVER_CPU / EDGE_WRK_CPU (0 / 1), EDGE_PORT (18080),
# EDGE_MIN_THROUGHPUT_RATIO (default 0: report only; else exit 1 when a framework's ratio is below it),
# EDGE_SCRATCH_PATH (the release build folder, default .build-integrations-release), EDGE_BUILD=0 (run the servers
# already built there).
# Exit status 1 also when any request failed (a refused token answers fast: it must never count as throughput).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
frameworks="${EDGE_FRAMEWORKS:-hummingbird vapor}"
rounds="${EDGE_ROUNDS:-5}"
seconds="${EDGE_SECONDS:-10}"
connections="${EDGE_CONNECTIONS:-32}"
server_cpu="${EDGE_SERVER_CPU:-0}"
wrk_cpu="${EDGE_WRK_CPU:-1}"
port="${EDGE_PORT:-18080}"
floor="${EDGE_MIN_THROUGHPUT_RATIO:-0}"
scratch="${EDGE_SCRATCH_PATH:-$root/.build-integrations-release}"

if ! command -v wrk >/dev/null 2>&1; then
    echo "wrk missing: installing it"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi
pin_server=() pin_wrk=()
if command -v taskset >/dev/null 2>&1 && [ "$(nproc)" -ge 2 ]; then
    pin_server=(taskset -c "$server_cpu") pin_wrk=(taskset -c "$wrk_cpu")
else
    echo "warning: fewer than 2 cores or no taskset: server and wrk share the machine unpinned" >&2
fi

bin="$scratch/release"
work="$(mktemp -d)"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# The server's CPU time so far (user + system), in clock ticks.
server_ticks() { awk '{ print $14 + $15 }' "/proc/$server_pid/stat"; }

# One wrk run: prints "rps p50 p99 cpu" (latencies in microseconds; cpu: the server's CPU time per request, in
# microseconds, which other load on the machine moves much less than throughput); fails when a request failed.
measure() {
    local path="$1" duration="$2" line before after
    before="$(server_ticks)"
    line="$(EDGE_TOKENS="$work/tokens" EDGE_PATH="$path" "${pin_wrk[@]}" wrk -t1 -c"$connections" -d"${duration}s" \
        --timeout 5s -s "$here/requests.lua" "http://127.0.0.1:$port" | grep '^EDGE ')"
    after="$(server_ticks)"
    case "$line" in
        *" bad=0") ;;
        *) echo "failed requests on $path: $line" >&2; return 1 ;;
    esac
    echo "$line" | sed -E 's/.*requests=([0-9]+) rps=([0-9.]+) p50=([0-9]+) p99=([0-9]+).*/\1 \2 \3 \4/' |
        awk -v ticks="$((after - before))" -v hz="$(getconf CLK_TCK)" '{ printf "%s %s %s %.1f\n", $2, $3, $4, ticks / hz * 1e6 / $1 }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

rows=() below=0
for framework in $frameworks; do
    if [ "${EDGE_BUILD:-1}" = 1 ]; then
        swift build -c release --package-path "$here" --scratch-path "$scratch" --product "identity-edge-$framework"
    fi
    rm -f "$work/tokens"
    "${pin_server[@]}" "$bin/identity-edge-$framework" --port "$port" --tokens "$work/tokens" &
    server_pid=$!
    for _ in $(seq 100); do
        if [ -s "$work/tokens" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
        sleep 0.1
    done
    # Warm-up: the token cache fills, the allocator and the branch predictors settle, on both routes.
    measure /identity/hello 2 >/dev/null
    measure /baseline/hello 2 >/dev/null
    : >"$work/baseline" ; : >"$work/identity"
    for round in $(seq "$rounds"); do
        if [ $((round % 2)) -eq 1 ]; then order="baseline identity"; else order="identity baseline"; fi
        for route in $order; do
            result="$(measure "/$route/hello" "$seconds")"
            echo "$framework round $round /$route/hello: $result (req/s, p50 µs, p99 µs, server CPU µs per request)"
            echo "$result" >>"$work/$route"
        done
    done
    kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""
    declare -A m=()
    for route in baseline identity; do
        for column in 1 2 3 4; do m[$route.$column]="$(cut -d' ' -f"$column" "$work/$route" | median)"; done
    done
    ratio="$(awk -v a="${m[identity.1]}" -v b="${m[baseline.1]}" 'BEGIN { printf "%.2f", a / b }')"
    rows+=("$(awk -v f="$framework" -v pr="${m[baseline.1]}" -v ir="${m[identity.1]}" -v p5="${m[baseline.2]}" \
        -v i5="${m[identity.2]}" -v p9="${m[baseline.3]}" -v i9="${m[identity.3]}" -v pc="${m[baseline.4]}" \
        -v ic="${m[identity.4]}" 'BEGIN {
        printf "| %s | %.0f | %.0f | %.2f | %d / %d µs (%.2fx) | %d / %d µs (%.2fx) | %.1f / %.1f µs (+%.1f) |", f, pr, ir,
            ir / pr, p5, i5, i5 / p5, p9, i9, i9 / p9, pc, ic, ic - pc }')")
    if awk -v r="$ratio" -v f="$floor" 'BEGIN { exit !(r < f) }'; then
        echo "$framework: throughput ratio $ratio below the floor $floor" >&2
        below=1
    fi
    unset m
done

echo
echo "wrk -t1 -c$connections, ${seconds} s per round and route, median of $rounds rounds; server on CPU $server_cpu, wrk on CPU $wrk_cpu"
echo "| framework | without (req/s) | with (req/s) | throughput ratio | p50 without / with | p99 without / with | server CPU per request without / with |"
echo "|---|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
exit "$below"
