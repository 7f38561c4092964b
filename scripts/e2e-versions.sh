#!/bin/sh
# The end-to-end suites after the unit tests: the default release's files that measure the controller's timing
# (`e2e 1.37`) alone, and 1.20's forecast against its recorded controller (`e2e 1.20 alone`); then, beside each other, each with its own lab: the older releases' (`e2e 1.34`, `e2e 1.20` followed by `e2e 1.34 after 1.20`,
# whose forecast and guards keep margins of seconds) and the default release's files that measure no timing
# (`e2e 1.37 beside older`). vitest.config.ts says which files each runs. Each lane's output follows once all three
# have ended, then each failed lane's failures again, so that the end of the log names them; the exit code is 0 when
# all six passed.
set -u
dir=$(mktemp -d)
pids=
trap 'kill $pids 2>/dev/null; rm -rf "$dir"; exit 130' INT TERM
# POSIX sh has no pipefail: the exit code travels through the log.
{ vitest run --project "e2e 1.37" 2>&1; echo "e2e 1.37 exit: $?"; } | tee "$dir/e2e 1.37.log"
current=$(sed -n 's/^e2e 1.37 exit: //p' "$dir/e2e 1.37.log")
[ -n "$current" ] || current=1
{ vitest run --project "e2e 1.20 alone" 2>&1; echo "e2e 1.20 alone exit: $?"; } | tee "$dir/e2e 1.20 alone.log"
alone=$(sed -n 's/^e2e 1.20 alone exit: //p' "$dir/e2e 1.20 alone.log")
[ -n "$alone" ] || alone=1
# the 1.20 lane then runs 1.34's shorter files (`e2e 1.34 after 1.20`), its exit code the worse of the two
vitest run --project "e2e 1.34" >"$dir/e2e 1.34.log" 2>&1 &
pids="$pids $!"
{ vitest run --project "e2e 1.20"; a=$?; vitest run --project "e2e 1.34 after 1.20"; b=$?; [ "$a" -eq 0 ] && exit "$b"; exit "$a"; } >"$dir/e2e 1.20.log" 2>&1 &
pids="$pids $!"
vitest run --project "e2e 1.37 beside older" >"$dir/e2e 1.37 beside older.log" 2>&1 &
pids="$pids $!"
codes=
for pid in $pids; do
  wait "$pid"
  codes="$codes $?"
done
status=$current
[ "$alone" -eq 0 ] || status=1
summary="e2e 1.37: exit $current; e2e 1.20 alone: exit $alone"
failed=
[ "$current" -eq 0 ] || failed="e2e 1.37"
[ "$alone" -eq 0 ] || failed="$failed|e2e 1.20 alone"
set -- $codes
for project in "e2e 1.34" "e2e 1.20" "e2e 1.37 beside older"; do
  cat "$dir/$project.log"
  summary="$summary; $project: exit $1"
  [ "$1" -eq 0 ] || { status=1; failed="$failed|$project"; }
  shift
done
IFS='|'
for project in $failed; do
  [ -n "$project" ] || continue
  echo
  echo "── what failed in $project (its whole output is above) ──"
  sed -n '/Failed Tests/,/Test Files/p' "$dir/$project.log" | head -n 150
done
unset IFS
rm -rf "$dir"
echo "$summary"
exit "$status"
