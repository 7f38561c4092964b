#!/bin/sh
# The end-to-end suites per release: the default release's (`e2e 1.37`) alone, as its files measure the controller's
# timing on a machine that runs nothing else of ours; then the older releases' (`e2e 1.34`, `e2e 1.20`) beside each
# other: each runs its own lab, and what they measure (the forecast never late, the guards ahead of the first eviction)
# has margins of seconds that two labs on one machine keep (vitest.config.ts says which files each runs). Each older
# release's output follows once both have ended; the exit code is 0 when all three passed.
set -u
vitest run --project "e2e 1.37"
current=$?
log34=$(mktemp)
log20=$(mktemp)
trap 'kill "$p34" "$p20" 2>/dev/null; rm -f "$log34" "$log20"; exit 130' INT TERM
vitest run --project "e2e 1.34" >"$log34" 2>&1 &
p34=$!
vitest run --project "e2e 1.20" >"$log20" 2>&1 &
p20=$!
wait "$p34"
e34=$?
wait "$p20"
e20=$?
cat "$log34" "$log20"
rm -f "$log34" "$log20"
echo "e2e 1.37: exit $current; e2e 1.34: exit $e34; e2e 1.20: exit $e20"
[ "$current" -eq 0 ] && [ "$e34" -eq 0 ] && [ "$e20" -eq 0 ]
