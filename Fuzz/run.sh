#!/usr/bin/env bash
# Builds the libFuzzer targets (with AddressSanitizer) and runs each for SECONDS (default 30).
#
#     Fuzz/run.sh [SECONDS] [TARGET...]      targets: FuzzEnvelope FuzzEncryptedFile FuzzPolicyDocument FuzzSettings FuzzJWKS
#
# Seeds come from Corpus/<target>/ (committed; regenerate with `swift run make-seeds`); what the fuzzer adds
# goes to artifacts/corpus/<target>/, and a crashing input to artifacts/<target>-crash-*. Exits non-zero when
# a target finds a crash, a leak or a timeout; turn such an input into a regression test.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-30}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(FuzzEnvelope FuzzEncryptedFile FuzzPolicyDocument FuzzSettings FuzzJWKS); fi

# SwiftPM's --sanitize=fuzzer (so that it leaves main to libFuzzer) plus one -sanitize=fuzzer,address for the
# compiler, which keeps only its last -sanitize option: with SwiftPM's `--sanitize=fuzzer --sanitize=address`
# the two arrive in either order, and a build got ASan without coverage instrumentation.
flags=(--scratch-path .build-fuzz --sanitize=fuzzer -Xswiftc -sanitize=fuzzer,address)
for target in "${targets[@]}"; do
    swift build "${flags[@]}" --product "$target"
done
bin="$(swift build "${flags[@]}" --show-bin-path)"
# A build without coverage instrumentation would fuzz blindly: refuse it.
for target in "${targets[@]}"; do
    sections="$(readelf -S "$bin/$target")"
    if [[ "$sections" != *__sancov* ]]; then
        echo "!! $bin/$target has no coverage instrumentation" >&2
        exit 1
    fi
done

mkdir -p artifacts
status=0
for target in "${targets[@]}"; do
    mkdir -p "artifacts/corpus/$target"
    echo "== fuzzing $target for ${seconds}s"
    if ! ASAN_OPTIONS=detect_leaks=0 "$bin/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="artifacts/$target-" "artifacts/corpus/$target" "Corpus/$target" \
        2> "artifacts/$target.log"; then
        echo "!! $target found a problem: see Fuzz/artifacts/$target.log"
        tail -40 "artifacts/$target.log"
        status=1
    fi
    grep -E "^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb)" "artifacts/$target.log" || true
done
exit $status
