#!/bin/sh
# The end-to-end suites after the unit tests: the default release's files that measure the controller's timing
# (`e2e 1.37`) alone; then, beside each other, each with its own lab: the older releases' (`e2e 1.34`, `e2e 1.20`,
# whose forecast and guards keep margins of seconds) and the default release's files that measure no timing
# (`e2e 1.37 beside older`). vitest.config.ts says which files each runs. Each lane's output follows once all three
# have ended; the exit code is 0 when all four passed.
set -u
vitest run --project "e2e 1.37"
current=$?
dir=$(mktemp -d)
trap 'kill $pids 2>/dev/null; rm -rf "$dir"; exit 130' INT TERM
pids=
for project in "e2e 1.34" "e2e 1.20" "e2e 1.37 beside older"; do
  vitest run --project "$project" >"$dir/$project.log" 2>&1 &
  pids="$pids $!"
done
codes=
for pid in $pids; do
  wait "$pid"
  codes="$codes $?"
done
status=$current
summary="e2e 1.37: exit $current"
set -- $codes
for project in "e2e 1.34" "e2e 1.20" "e2e 1.37 beside older"; do
  cat "$dir/$project.log"
  summary="$summary; $project: exit $1"
  [ "$1" -eq 0 ] || status=1
  shift
done
rm -rf "$dir"
echo "$summary"
exit "$status"
