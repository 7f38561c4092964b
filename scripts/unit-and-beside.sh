#!/bin/sh
# The unit tests, and beside them the default release's end-to-end files that measure none of the controller's
# timing (`e2e 1.37 beside`, vitest.config.ts): two processes, so that the unit tests never wait for a lab build
# (`vitest` runs a project's global setup before any test). The end-to-end output follows the unit tests' once both
# have ended; the exit code is 0 when both passed.
set -u
log=$(mktemp)
vitest run --project "e2e 1.37 beside" >"$log" 2>&1 &
beside=$!
trap 'kill "$beside" 2>/dev/null; rm -f "$log"; exit 130' INT TERM
vitest run --project unit --project "unit root"
unit=$?
wait "$beside"
e2e=$?
cat "$log"
rm -f "$log"
echo "unit: exit $unit; e2e 1.37 beside: exit $e2e"
[ "$unit" -eq 0 ] && [ "$e2e" -eq 0 ]
