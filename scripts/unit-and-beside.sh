#!/bin/sh
# The unit tests, and beside them the default release's end-to-end files that measure none of the controller's
# timing, in three lanes (vitest.config.ts says which files each project runs): the unit tests then `e2e 1.37 beside`;
# `e2e 1.37 light`; `e2e 1.37 demo`, the longest. Each is a process of its own, so that the unit tests never wait for
# a lab build (`vitest` runs a project's global setup before any test) and no lane waits for another. The unit tests'
# output comes as it runs; the end-to-end output follows once all have ended, then what failed in each, so that the
# end of the log names it; the exit code is 0 when all passed.
set -u
dir=$(mktemp -d)
vitest run --project "e2e 1.37 light" >"$dir/light.log" 2>&1 &
light=$!
vitest run --project "e2e 1.37 demo" >"$dir/demo.log" 2>&1 &
demo=$!
beside=
trap 'kill "$light" "$demo" $beside 2>/dev/null; rm -rf "$dir"; exit 130' INT TERM
{ vitest run --project unit --project "unit root" 2>&1; echo "unit exit: $?"; } | tee "$dir/unit.log"
unit=$(sed -n 's/^unit exit: //p' "$dir/unit.log")
[ -n "$unit" ] || unit=1
vitest run --project "e2e 1.37 beside" >"$dir/beside.log" 2>&1 &
beside=$!
wait "$beside"
beside_code=$?
wait "$light"
light_code=$?
wait "$demo"
demo_code=$?
cat "$dir/beside.log" "$dir/light.log" "$dir/demo.log"
for lane in unit:$unit beside:$beside_code light:$light_code demo:$demo_code; do
  name=${lane%%:*}
  [ "${lane##*:}" -eq 0 ] && continue
  echo
  echo "── what failed in $name (its whole output is above) ──"
  sed -n '/Failed Tests/,/Test Files/p' "$dir/$name.log" | head -n 150
done
rm -rf "$dir"
echo "unit: exit $unit; e2e 1.37 beside: exit $beside_code; e2e 1.37 light: exit $light_code; e2e 1.37 demo: exit $demo_code"
[ "$unit" -eq 0 ] && [ "$beside_code" -eq 0 ] && [ "$light_code" -eq 0 ] && [ "$demo_code" -eq 0 ]
