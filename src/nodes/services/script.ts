import { shq } from '../../core/shell.js';

/**
 * Building blocks of the scripts actions send to nodes. Every script starts with a `# kube-runbook: <purpose>`
 * line (tests and node logs can tell scripts apart by it), assigns every outside value once, quoted with `shq`,
 * and uses only "$variables" after that. Loops count seconds, so no script can run forever.
 */
export function script(purpose: string, vars: Record<string, string | number>, ...body: string[]): string {
  if (/[\r\n]/.test(purpose)) throw new Error('a script purpose is one line');
  const assigns = Object.entries(vars).map(([k, v]) => {
    if (!/^[a-z_][a-z0-9_]*$/.test(k)) throw new Error(`bad shell variable name ${k}`);
    return `${k}=${shq(v)}`;
  });
  return [`# kube-runbook: ${purpose}`, 'set -u', ...assigns, ...body].join('\n') + '\n';
}

/** `kr_wait SECONDS FN [ARGS]`: runs FN once a second until it succeeds (0) or SECONDS have passed (1). */
export const KR_WAIT = `kr_wait() {
  kr_left=$1
  shift
  while :; do
    "$@" && return 0
    [ "$kr_left" -le 0 ] && return 1
    sleep 1
    kr_left=$((kr_left - 1))
  done
}`;

/** `kr_http_ok URL`: true when the URL answers 200 (or 401/403: serving, only not to anonymous), or when curl is absent. */
export const KR_HTTP_OK = `kr_http_ok() {
  command -v curl >/dev/null 2>&1 || return 0
  kr_code=$(curl -ks -o /dev/null -w '%{http_code}' --max-time 3 "$1" 2>/dev/null)
  case $kr_code in
    200 | 401 | 403) return 0 ;;
  esac
  return 1
}`;

/** `kr_fail MESSAGE`: prints the message and exits 1. */
export const KR_FAIL = `kr_fail() {
  printf '%s\\n' "$*" >&2
  exit 1
}`;

/**
 * The exit code of a script whose wait has not yet succeeded (a component not healthy yet, a process not gone yet):
 * trying again can help, unlike any other failure. `runOnNode` turns it into a transient error ("health wait").
 */
export const NOT_YET_EXIT = 75;

/** `kr_not_yet MESSAGE`: prints the message and exits NOT_YET_EXIT (a wait that has not succeeded yet). */
export const KR_NOT_YET = `kr_not_yet() {
  printf '%s\\n' "$*" >&2
  exit ${NOT_YET_EXIT}
}`;

/**
 * A script that waits up to `waitS` seconds for what it did to take hold: `$wait_s`, and `kr_fail`, `kr_wait` and
 * `kr_not_yet` defined before `body`.
 */
export function waitingScript(purpose: string, vars: Record<string, string | number>, waitS: number, ...body: string[]): string {
  return script(purpose, { ...vars, wait_s: waitS }, KR_FAIL, KR_WAIT, KR_NOT_YET, ...body);
}

/** `kr_is_root`: true when the script runs as root. */
export const KR_IS_ROOT = `kr_is_root() {
  [ "$(id -u 2>/dev/null)" = 0 ]
}`;

/** Seconds as a whole number, at least 1. */
export const seconds = (ms: number): number => Math.max(1, Math.ceil(ms / 1000));

/** A transport timeout for a script that waits `waitS` seconds itself. */
export const execTimeoutMs = (waitS: number): number => (waitS + 30) * 1000;
