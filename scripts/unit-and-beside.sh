#!/bin/sh
# The unit tests, and beside them the default release's end-to-end files that measure none of the controller's
# timing (`e2e 1.37 beside` then `e2e 1.37 light` in one lane, and the demo, the longest of them, as `e2e 1.37 demo`;
# vitest.config.ts): three processes, so that the unit tests never wait for a lab build (`vitest` runs a project's
# global setup before any test) and the demo does not wait for the other files. The end-to-end output follows the unit tests' once all have
# ended, then what failed in each, so that the end of the log names it; the exit code is 0 when all passed.
set -u
dir=$(mktemp -d)
# POSIX sh has no pipefail: the light project's exit code travels through the log.
{
  vitest run --project "e2e 1.37 beside"
  beside_code=$?
  vitest run --project "e2e 1.37 light"
  echo "e2e 1.37 light exit: $?"
  exit "$beside_code"
} >"$dir/beside.log" 2>&1 &
beside=$!
vitest run --project "e2e 1.37 demo" >"$dir/demo.log" 2>&1 &
demo=$!
trap 'kill "$beside" "$demo" 2>/dev/null; rm -rf "$dir"; exit 130' INT TERM
{ vitest run --project unit --project "unit root" 2>&1; echo "unit exit: $?"; } | tee "$dir/unit.log"
unit=$(sed -n 's/^unit exit: //p' "$dir/unit.log")
[ -n "$unit" ] || unit=1
wait "$beside"
e2e=$?
wait "$demo"
demo_code=$?
light=$(sed -n 's/^e2e 1.37 light exit: //p' "$dir/beside.log")
[ -n "$light" ] || light=1
cat "$dir/beside.log" "$dir/demo.log"
[ "$e2e" -eq 0 ] && [ "$light" -ne 0 ] && e2e=1
for lane in unit:$unit beside:$e2e demo:$demo_code; do
  name=${lane%%:*}
  [ "${lane##*:}" -eq 0 ] && continue
  echo
  echo "── what failed in $name (its whole output is above) ──"
  sed -n '/Failed Tests/,/Test Files/p' "$dir/$name.log" | head -n 150
done
rm -rf "$dir"
echo "unit: exit $unit; e2e 1.37 beside and light: exit $e2e (light $light); e2e 1.37 demo: exit $demo_code"
[ "$unit" -eq 0 ] && [ "$e2e" -eq 0 ] && [ "$demo_code" -eq 0 ]
