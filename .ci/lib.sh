# Shared by the two CI lanes; sourced, not run.
#
#   .ci/run    the landing lane: at every landing (at most 35 minutes with both cores busy)
#   .ci/full   the full lane: the landing lane's steps, then soak-sized stress, crash kills, the Ed25519
#              differential run (100,000 cases), fuzzing, the CryptoKit branch, the integration packages under
#              ThreadSanitizer, the load test, the middlewares under wrk, the whole callgrind gate and Benchmarks/'s
#              allocation thresholds
#              (at most 85 minutes with both cores busy)
#
# Every step is a function below, run by `ci_step NAME FUNCTION` in a subshell with `set -euo pipefail`; the
# lane prints each step's duration as it ends and, at the end, a table of all steps and the closing line
# `steps: N passed, N failed`. The landing lane stops at the first failed step; the full lane
# (CI_KEEP_GOING=1) runs every step and fails at the end.
#
# No step builds what an earlier step of its lane built with other flags. Each build folder has one set of flags:
#   .build                      debug, -warnings-as-errors (every debug step of the root package)
#   .build (release)            release (the callgrind gate and the release stress runs)
#   .build-tsan                 --sanitize=thread (the test suite and the stress run under ThreadSanitizer)
#   .build-integrations         every package under Integrations/ and Examples/TenantService, debug: SwiftNIO,
#                               Hummingbird, Vapor, grpc-swift, postgres-nio and their peers compile once
#   .build-integrations-tsan    the same packages under ThreadSanitizer (full lane)
#   .build-integrations-release Integrations/IdentityNIO's release bench, identity-nio-bench (the NIO callgrind
#                               gate, full lane), and Benchmarks/Edge's two servers (the wrk step, full lane)
#   Fuzz/.build-fuzz, Checks/SwiftCrypto/.build, Benchmarks/.build   their own packages (full lane)
#   .build-docs                 the DocC archives and the symbol graphs they are built from (scripts/build-docs.sh,
#                               which reads the debug build's modules with the same flags: it compiles nothing)
# Environment: IDENTITY_STRESS_SEED (the stress runs' and the Ed25519 differential run's seed; default random, printed), IDENTITY_FUZZ_SECONDS
# (per fuzz target, default 30), IDENTITY_LOAD_REQUESTS (default 20000).

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

debug_flags=(-Xswiftc -warnings-as-errors)
tsan_build="$PWD/.build-tsan"
integrations_build="$PWD/.build-integrations"
integrations_tsan_build="$PWD/.build-integrations-tsan"
integrations_release_build="$PWD/.build-integrations-release"
stress_seed="${IDENTITY_STRESS_SEED:-$RANDOM}"
# The Swift concurrency runtime's continuation hand-over, invisible to ThreadSanitizer (see the file).
export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}suppressions=$PWD/.ci/tsan-suppressions"

# Installs Debian packages the lane needs when a command is missing: ci_need COMMAND PACKAGE...
ci_need() {
    local command="$1"; shift
    command -v "$command" >/dev/null 2>&1 && return 0
    echo "$command missing: installing $*"
    if ! command -v apt-get >/dev/null 2>&1; then echo "install $* first" >&2; return 1; fi
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Installs nothing: the root package builds and tests with the machine's own packages, as the README's two
# commands do on a fresh machine (libcrypto's development files, OpenSSL 3's libssl-dev, are on the project's
# Debian machines with the Swift toolchain; libsodium is loaded at run time when libsodium23 is there, never needed
# to build).
# What a later step needs from outside (valgrind, PyJWT, PostgreSQL) that step installs, after the root
# package's build and tests. Prints what the machine has, for the log.
ci_setup() {
    echo "stress seed: $stress_seed"
    if pkg-config --exists libcrypto 2>/dev/null; then
        echo "libcrypto: $(pkg-config --modversion libcrypto)"
    else
        echo "libcrypto: pkg-config does not find it (the build needs OpenSSL 3's development files: libssl-dev)"
    fi
    local sodium
    sodium="$(ldconfig -p 2>/dev/null | grep -o 'libsodium\.so[.0-9]*' | sort -u | paste -sd ' ' || true)"
    echo "libsodium at run time: ${sodium:-none (Ed25519 verification uses libcrypto)}"
}

# MARK: - Step runner

ci_start=$SECONDS
ci_passed=0
ci_failed=0
ci_rows=()

# ci_step NAME FUNCTION [ARGS...]: runs the function in a subshell (errexit, pipefail), times it, records it.
ci_step() {
    local name="$1"; shift
    local start=$SECONDS status outcome
    echo
    echo "== $name"
    set +e
    ( set -euo pipefail; "$@" )
    status=$?
    set -e
    if [ "$status" -eq 0 ]; then
        ci_passed=$((ci_passed + 1)); outcome="passed"
    else
        ci_failed=$((ci_failed + 1)); outcome="FAILED (exit $status)"
    fi
    ci_rows+=("$(printf '| %s | %d | %s |' "$name" "$((SECONDS - start))" "$outcome")")
    echo "-- $name: $((SECONDS - start)) s, $outcome"
    if [ "$status" -ne 0 ] && [ -z "${CI_KEEP_GOING:-}" ]; then
        echo "== stopping at the first failed step (the full lane goes on: CI_KEEP_GOING=1)"
        ci_finish
    fi
}

# Prints the step table and the closing line; exits 0 only when every step passed.
ci_finish() {
    echo
    echo "== steps (seconds)"
    echo "| step | s | result |"
    echo "|---|---:|---|"
    printf '%s\n' "${ci_rows[@]}"
    echo "== $((ci_passed + ci_failed)) steps in $((SECONDS - ci_start)) s (stress seed $stress_seed)"
    echo "steps: $ci_passed passed, $ci_failed failed"
    [ "$ci_failed" -eq 0 ] && exit 0
    exit 1
}

# MARK: - Landing lane: the root package

step_build() {
    swift build --build-tests "${debug_flags[@]}"
}

# The DocC catalogs (Sources/M/M.docc), built with the toolchain's docc; any docc warning fails the step.
step_docs() {
    scripts/build-docs.sh
}

step_verify() {
    swift run "${debug_flags[@]}" identity-harness verify
}

step_examples() {
    swift run "${debug_flags[@]}" LegacyBridge
    swift run "${debug_flags[@]}" MultiTenantService
    swift run "${debug_flags[@]}" MultiIdentityClient
}

# The README's test command, with the lane's flags (the build above made everything it runs).
step_test() {
    swift test "${debug_flags[@]}"
}

# A machine without libsodium, on this one: every file of the system's libsodium hidden behind /dev/null in a
# private mount namespace (root's `unshare -m`), then the signed-identity suites and the harness's backend tests
# on the build above. The harness must say libcrypto, and the answers must hold (the differential suite, which
# crafts its cases with libsodium, is skipped there, as on such a machine).
step_without_libsodium() {
    local harness files
    harness="$(swift build --show-bin-path)/identity-harness"
    files="$(ldconfig -p | awk '/libsodium\.so/ { print $NF }' | xargs -r readlink -f | sort -u)"
    if [ -z "$files" ]; then
        echo "this machine has no libsodium: the suite above already ran without it"
        return 0
    fi
    if ! unshare -m true 2>/dev/null; then
        # No mount namespace here (an unprivileged container): the runtime's own switch keeps libsodium out.
        echo "unshare -m is not allowed here: running with IDENTITY_SODIUM=off instead of hiding the library"
        [ "$(IDENTITY_SODIUM=off "$harness" bench --backend)" = libcrypto ]
        IDENTITY_SODIUM=off swift test --skip-build --filter "IdentityAssertionsTests|HarnessBackendTests"
        return 0
    fi
    # shellcheck disable=SC2016
    unshare -m bash -c '
        set -euo pipefail
        harness="$1"; shift
        for file in "$@"; do mount --bind /dev/null "$file"; done
        # (Not `tee /dev/stderr`: reopening a log file that stderr goes to truncates it.)
        backend="$("$harness" bench --backend)"
        echo "backend: $backend"
        [ "$backend" = libcrypto ]
        swift test --skip-build --filter "IdentityAssertionsTests|HarnessBackendTests"
    ' _ "$harness" $files
}

step_test_tsan() {
    swift test --sanitize=thread --scratch-path "$tsan_build"
}

release_harness() {
    echo "$(swift build -c release --show-bin-path)/identity-harness"
}

step_release_build() {
    swift build -c release --product identity-harness
}

# Instructions per operation (valgrind's callgrind): repeatable on a loaded machine, unlike wall clock.
step_callgrind() {
    ci_need valgrind valgrind
    IDENTITY_HARNESS="$(release_harness)" IDENTITY_CALLGRIND_PAIRS="$1" \
        scripts/callgrind-pairs.sh --check .ci/instruction-limits
}

# IdentityNIO's execute(flow:), submit(flow:), scheduleTask(in:flow:) and whenSuccess(flow:) against NIO's own calls,
# in instructions per operation
# (the script builds the release bench in the shared release folder of the integration packages).
step_nio_callgrind() {
    ci_need valgrind valgrind
    SCRATCH="$integrations_release_build" \
        Integrations/IdentityNIO/scripts/callgrind-execute.sh --check .ci/nio-instruction-limits
}

step_pyjwt() {
    python3 -m pip install --quiet --disable-pip-version-check "pyjwt>=2.8" "cryptography>=41" 2>&1 \
        | grep -v "Running pip as the 'root' user" || true
    python3 scripts/jwt-interop.py "$(swift build --show-bin-path)/identity-harness"
}

# MARK: - Landing lane: the integration packages, in one build folder

# PyJWT's PyJWKClient fetches our published JWKS from a loopback http.server and verifies our token; our
# RemoteKeySet fetches a JWKS PyJWT wrote and verifies PyJWT's tokens (the script starts and stops the servers;
# step_pyjwt installed PyJWT, the step before built identity-jwks-check).
step_jwks_interop() {
    python3 Integrations/IdentityJWKS/scripts/jwks-interop.py "$(swift build --show-bin-path)/identity-harness" \
        "$(swift build --package-path Integrations/IdentityJWKS --scratch-path "$integrations_build" --show-bin-path)/identity-jwks-check"
}

step_package_test() {
    swift test --package-path "$1" --scratch-path "$integrations_build"
}

# The throwaway PostgreSQL of scripts/with-postgres.sh (installed from Debian's packages when missing, on
# 127.0.0.1, removed afterwards even on failure). Warnings in the package's own sources fail the step;
# dependencies build with their warnings suppressed.
# Every ```swift sample of the README and the DocC articles, typechecked on its own with its article's declared
# placeholders, and the quick start's three copies compared (scripts/check-doc-samples.sh). The samples that
# import integration packages are checked against the modules the steps above leave in .build-integrations; one
# whose modules are missing fails the step (those listed in scripts/doc-samples/not-checked.txt are named, not
# checked).
#
# The shared scratch path keeps one checkouts folder, which each package's resolution prunes to its own graph, and
# a C module that ships its own module map (Vapor's CVaporBcrypt) is found only in its checkout. Vapor's graph is
# resolved again first: it holds every such module the samples import (the NIO, SSL and crypto packages), and the
# rest of the samples' modules are built products, which resolving does not touch.
step_doc_samples() {
    swift package resolve --package-path Integrations/IdentityVapor --scratch-path "$integrations_build"
    scripts/check-doc-samples.sh --require-integrations
}

step_postgres() {
    local log="$integrations_build/identity-postgres-build.log"
    mkdir -p "$integrations_build"
    (cd Integrations/IdentityPostgres && INTEGRATIONS_BUILD="$integrations_build" LOG="$log" scripts/with-postgres.sh bash -c '
        set -euo pipefail
        swift build --build-tests --scratch-path "$INTEGRATIONS_BUILD" 2>&1 | tee "$LOG"
        if grep -E "IdentityPostgres/(Sources|Tests)/.*(warning|error):" "$LOG"; then
            echo "warnings in IdentityPostgres" >&2; exit 1
        fi
        swift test --scratch-path "$INTEGRATIONS_BUILD"
        if [ -n "${IDENTITY_PG_BENCH:-}" ]; then
            IDENTITY_KEK="bench:$(head -c 32 /dev/urandom | base64)" swift run -c release identity-postgres-node bench
        fi
    ')
}

# The example's tests under the throwaway PostgreSQL of Integrations/IdentityPostgres/scripts/with-postgres.sh
# (installed from Debian's packages when missing), so that its documents-in-PostgreSQL suite runs instead of being
# skipped: a database per test, a few seconds in all on the same build folder.
step_tenant_service_test() {
    Integrations/IdentityPostgres/scripts/with-postgres.sh \
        swift test --package-path "$PWD/Examples/TenantService" --scratch-path "$integrations_build"
}

# The landing lane's steps, in order; the full lane runs them first.
landing_lane() {
    ci_step "debug build (warnings are errors; every later debug step uses the same flags)" step_build
    ci_step "DocC catalogs: scripts/build-docs.sh (docc warnings are errors)" step_docs
    ci_step "identity-harness verify: the propagation table, live" step_verify
    ci_step "examples: LegacyBridge, MultiTenantService, MultiIdentityClient" step_examples
    ci_step "swift test (the README's test command)" step_test
    ci_step "without libsodium: the signed-identity tests with the system's libsodium hidden" step_without_libsodium
    ci_step "swift test --sanitize=thread (own build folder)" step_test_tsan
    ci_step "release build of identity-harness" step_release_build
    ci_step "callgrind gate: the headline pairs (dispatch, reads)" step_callgrind headline
    ci_step "signed identity assertions: interoperability with PyJWT" step_pyjwt
    # The packages share one build folder, and each resolution removes the checkouts its graph does not hold; a
    # checkout fetched again has new files, so every module built from it is compiled again. Each package below
    # comes while the checkouts it needs are still there: the small graphs first, then Hummingbird, whose graph
    # TenantService and IdentityPostgres keep (SwiftNIO, BoringSSL, async-http-client, Hummingbird are compiled once),
    # Vapor and the NIO-only graphs after them, gRPC (which keeps none of the others) last.
    ci_step "Integrations/IdentityTracing: swift test" step_package_test Integrations/IdentityTracing
    ci_step "Integrations/IdentityLogging: swift test" step_package_test Integrations/IdentityLogging
    ci_step "Integrations/IdentityServiceLifecycle: swift test" step_package_test Integrations/IdentityServiceLifecycle
    ci_step "Integrations/IdentityMetrics: swift test" step_package_test Integrations/IdentityMetrics
    ci_step "Integrations/IdentityHummingbird: swift test" step_package_test Integrations/IdentityHummingbird
    ci_step "Examples/TenantService: swift test against a throwaway PostgreSQL" step_tenant_service_test
    ci_step "Integrations/IdentityPostgres: swift test against a throwaway PostgreSQL" step_postgres
    ci_step "Integrations/IdentityVapor: swift test" step_package_test Integrations/IdentityVapor
    ci_step "Integrations/IdentityJWKS: swift test" step_package_test Integrations/IdentityJWKS
    ci_step "JWKS over loopback HTTP: interoperability with PyJWT's PyJWKClient, both ways" step_jwks_interop
    ci_step "Integrations/IdentityNIO: swift test" step_package_test Integrations/IdentityNIO
    ci_step "Integrations/IdentityGRPC: swift test" step_package_test Integrations/IdentityGRPC
    ci_step "docs: every swift sample typechecks" step_doc_samples
}

# MARK: - Full lane only

step_stress() {
    swift run -c release identity-harness stress --duration 60 --seed "$stress_seed"
}

# 1,000,000 operations with every fault class (slow and silent key store, cancellation, broken and deleted
# policy documents, unwalkable entries, wipes under open handles; see the ServiceBoundary article, "Testing it",
# and IsolationStressFaultTests.kept): the runtime keeps each class's invariants.
step_stress_isolation() {
    # Every fault class at once: key stores that answer late or never, cancellations, policy documents broken
    # and withdrawn, unwalkable entries and wipes under open handles.
    swift run -c release identity-harness stress --isolation --operations 1000000 --faults all --seed "$stress_seed"
}

# Each fault self-check of the isolation program on 20,000 operations: each must fail (exit 1) on its invariant.
step_stress_isolation_self_checks() {
    local check status
    for check in truncate-before-key forget-recorded-isolation keep-destroyed-keys hide-wipe-leftovers ignore-broken-policy; do
        status=0
        swift run -c release identity-harness stress --isolation --operations 20000 --isolation-fault "$check" \
            --seed "$stress_seed" || status=$?
        if [ "$status" -ne 1 ]; then
            echo "self-check $check: exit $status, expected 1 (violations caught)" >&2
            return 1
        fi
        echo "self-check $check: caught"
    done
}

step_stress_tsan() {
    swift run --sanitize=thread --scratch-path "$tsan_build" identity-harness stress \
        --duration 30 --in-flight 16 --seed "$stress_seed"
}

step_crash_kills() {
    IDENTITY_LONG_TESTS=1 swift test "${debug_flags[@]}" --filter CrashConsistencyTests
}

# libsodium against libcrypto against our verifier (on both of its backends), 100,000 Ed25519 cases (the default
# run: 10,000), from the lane's seed; the suite is skipped where the machine has no libsodium to craft the cases.
step_ed25519_differential() {
    IDENTITY_LONG_TESTS=1 IDENTITY_STRESS_SEED="$stress_seed" swift test "${debug_flags[@]}" --filter Ed25519DifferentialTests
}

step_fuzz() {
    Fuzz/run.sh "${IDENTITY_FUZZ_SECONDS:-30}"
}

# The check package's tests, then identity-harness built on the same branch (the test build made it): every
# member of the protect pairs, whose raw side seals and opens with AES.GCM there, and fails on a wrong tag.
step_swift_crypto() {
    swift test --package-path Checks/SwiftCrypto
    local pair side
    for pair in protect-1k unprotect-1k; do
        for side in raw peer ours; do
            swift run --package-path Checks/SwiftCrypto identity-harness bench --pair "$pair" --side "$side" --count 100
        done
    done
}

step_package_test_tsan() {
    swift test --package-path "$1" --scratch-path "$integrations_tsan_build" --sanitize=thread
}

# The suites that exercise the stores from many threads; the eight-process fleet tests stay in the debug run.
step_postgres_tsan() {
    (cd Integrations/IdentityPostgres && INTEGRATIONS_TSAN_BUILD="$integrations_tsan_build" scripts/with-postgres.sh \
        swift test --scratch-path "$integrations_tsan_build" --sanitize=thread \
            --filter "KeyStoreTests|PolicySourceTests|OfflineTests|KillRestartTests|TenantDatabase|TenantRole")
}

# The debug build the tests made (a release build would build Hummingbird, async-http-client and BoringSSL
# again): every response is still checked; throughput and latency are compared within the run only. With
# --database, under a throwaway PostgreSQL: half the requests go to the documents in PostgreSQL, and every row of
# every database read and unscoped listing is audited (one of another tenant fails the step). The full run in
# release: Sources/IdentityRuntime/IdentityRuntime.docc/UsingTheRuntimeInAService.md.
step_load() {
    Integrations/IdentityPostgres/scripts/with-postgres.sh \
        swift run --package-path "$PWD/Examples/TenantService" --scratch-path "$integrations_build" \
        tenant-load --requests "${IDENTITY_LOAD_REQUESTS:-20000}" --rounds 4 --database
}

# The identity middlewares under wrk (Benchmarks/Edge/run.sh): a light route with and without IdentityMiddleware,
# Hummingbird and Vapor, in release, server and wrk pinned to different cores. It prints the table of the
# Performance article; it fails only when a request fails or the throughput ratio falls below the generous floor
# (a middleware that stopped caching tokens would be at about a tenth of the route), never on a figure of a run.
step_edge() {
    EDGE_SCRATCH_PATH="$integrations_release_build" EDGE_MIN_THROUGHPUT_RATIO="${IDENTITY_EDGE_FLOOR:-0.5}" \
        Benchmarks/Edge/run.sh
}

# What IdentityMiddleware adds to a request of the light route, in instructions (Benchmarks/Edge/callgrind.sh: the
# Hummingbird router and the Vapor application driven in process under callgrind), against
# .ci/edge-instruction-limits. Builds in the release folder step_edge filled.
step_edge_callgrind() {
    EDGE_SCRATCH_PATH="$integrations_release_build" Benchmarks/Edge/callgrind.sh --check .ci/edge-instruction-limits
}

# Benchmarks/: allocations per operation against Benchmarks/Thresholds (the gate); wall clock is printed only.
step_benchmarks() {
    (cd Benchmarks && swift package --disable-sandbox benchmark thresholds check --no-progress)
}

full_lane() {
    landing_lane
    ci_step "identity-harness stress, release, 60 s" step_stress
    ci_step "identity-harness stress --isolation, release, 1,000,000 operations" step_stress_isolation
    ci_step "identity-harness stress --isolation: each fault self-check must fail" step_stress_isolation_self_checks
    ci_step "identity-harness stress under ThreadSanitizer, 30 s" step_stress_tsan
    ci_step "crash harness: 1,200 SIGKILLs (writeFile, encryptFile, ProtectedFile)" step_crash_kills
    ci_step "Ed25519: libsodium, libcrypto and our verifier on 100,000 cases" step_ed25519_differential
    ci_step "fuzzing: each libFuzzer target for ${IDENTITY_FUZZ_SECONDS:-30} s" step_fuzz
    ci_step "Checks/SwiftCrypto: the CryptoKit branch on apple/swift-crypto" step_swift_crypto
    ci_step "callgrind gate: the other pairs (operations, tasks, switches, protect, assertions)" step_callgrind rest
    ci_step "callgrind gate: IdentityNIO execute, submit, scheduleTask and whenSuccess with flow:, release" step_nio_callgrind
    # The same order as the landing lane's, for the same reason (one build folder, checkouts kept while needed).
    ci_step "Integrations/IdentityTracing under ThreadSanitizer" step_package_test_tsan Integrations/IdentityTracing
    ci_step "Integrations/IdentityLogging under ThreadSanitizer" step_package_test_tsan Integrations/IdentityLogging
    ci_step "Integrations/IdentityServiceLifecycle under ThreadSanitizer" step_package_test_tsan Integrations/IdentityServiceLifecycle
    ci_step "Integrations/IdentityMetrics under ThreadSanitizer" step_package_test_tsan Integrations/IdentityMetrics
    ci_step "Integrations/IdentityHummingbird under ThreadSanitizer" step_package_test_tsan Integrations/IdentityHummingbird
    ci_step "Integrations/IdentityPostgres under ThreadSanitizer (stores, offline, kill and restart, tenant isolation)" step_postgres_tsan
    ci_step "Integrations/IdentityVapor under ThreadSanitizer" step_package_test_tsan Integrations/IdentityVapor
    ci_step "Integrations/IdentityJWKS under ThreadSanitizer" step_package_test_tsan Integrations/IdentityJWKS
    ci_step "Integrations/IdentityNIO under ThreadSanitizer" step_package_test_tsan Integrations/IdentityNIO
    ci_step "Integrations/IdentityGRPC under ThreadSanitizer" step_package_test_tsan Integrations/IdentityGRPC
    ci_step "Examples/TenantService: tenant-load, with and without the middleware and a bare check, documents in PostgreSQL" step_load
    ci_step "Benchmarks/Edge: IdentityMiddleware under wrk, Hummingbird and Vapor, release" step_edge
    ci_step "callgrind gate: what IdentityMiddleware adds to a request, Hummingbird and Vapor, release" step_edge_callgrind
    ci_step "Benchmarks/: allocation thresholds" step_benchmarks
}
