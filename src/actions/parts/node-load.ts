import { KR_FAIL, script } from '../../nodes/services/script.js';
import { type LoadRequest, type OwnObjects, callFor, weightedRoundRobin } from './api-load.js';

/**
 * load-apiserver `from: nodes`: each node sends its share of the load itself, so that the apiserver sees it coming
 * from the nodes' addresses, as it saw the kubelets' in incident 3.
 *
 * What sends it: curl, run on the node. Not this project's own binary: it is on a node only where the node agent runs
 * (ssh and the lab's nodes have none), while curl is on almost every node; curl 7.84 or newer, for `--rate` (it paces
 * the requests of one curl process, serially, keeping its connection). `concurrency` curl processes (the node's share),
 * each at an equal share of the node's qps, bound the load as the executor's workers do: at most `qps` requests start
 * a second, at most `concurrency` are unanswered at once. Preflight refuses a node without such a curl, naming it.
 *
 * As whom: the ServiceAccount `as`, with a short-lived token the executor asks the TokenRequest API for (no
 * impersonation right on the node, and nothing that outlives the token's expiry). The token reaches the node on the
 * script's input (stdin), never in the script's text or on a command line; the node keeps it in a file only root can
 * read, which curl reads as a header file (`-H @file`), and which the revert and the load's own deadline remove.
 *
 * How it stops: the load runs detached in a process group of its own (setsid), its leader's pid in `pid`; the revert
 * (and the dead-man, which runs the same script) kills the group and every process that runs its files. The load ends
 * by itself at its deadline too (faultTtl after the run's latest end by its maxDuration: a killer in the group kills
 * the group), so it never outlives the run by more than faultTtl even if the dead-man failed.
 *
 * Layout on the node: /var/lib/kube-runbook/load/<runId>/<key>/{auth, ca.crt, curl.conf, load.sh, pid, codes.N}
 */
const LOAD_ROOT = '/var/lib/kube-runbook/load';

/** How many requests one cycle of the curl config holds at most: weights are scaled to it (each stays at least 1). */
const CYCLE_MAX = 200;

export interface NodeLoadPlan {
  /** The node's directory, below LOAD_ROOT (ids checked by the caller). */
  dir: string;
  server: string;
  /** PEM of the apiserver's CA, or null: curl's own trust store (or `insecure`). */
  ca: string | null;
  insecure: boolean;
  userAgent: string;
  requests: LoadRequest[];
  own: OwnObjects;
  runId: string;
  /** The node's share. */
  qps: number;
  concurrency: number;
  /** When the load ends by itself, in seconds after it starts. */
  seconds: number;
  /**
   * The API path of the object whose deletion removes the run's identity (its ClusterRole), which that identity may
   * delete: the dead-man's stop deletes it with the node's token before it removes the token. Null: an existing account.
   */
  identityPath?: string | null;
}

/** A value in a curl config file: double-quoted, backslash and quote escaped (curl's own config syntax). */
const curlValue = (s: string): string => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;

/** The requests in proportion to their weights, scaled to at most CYCLE_MAX, in smooth weighted round-robin order. */
function cycle(requests: readonly LoadRequest[]): LoadRequest[] {
  const total = requests.reduce((n, r) => n + r.weight, 0);
  const scale = total > CYCLE_MAX ? CYCLE_MAX / total : 1;
  const scaled = requests.map((r) => ({ ...r, weight: Math.max(1, Math.round(r.weight * scale)) }));
  const next = weightedRoundRobin(scaled);
  return Array.from({ length: scaled.reduce((n, r) => n + r.weight, 0) }, () => next());
}

/** How many requests one curl process's config holds at most (its cycles repeated): about 250 bytes each. */
const CONFIG_MAX = 1000;

/** curl's config: `reps` cycles of the requests, each with the node's credentials and the load's User-Agent. */
export function curlConfig(p: NodeLoadPlan, now: number, reps = 1): string {
  const server = p.server.replace(/\/+$/, '');
  const one = cycle(p.requests);
  return Array.from({ length: reps }, () => one)
    .flat()
    .map((r) => {
      const call = callFor(r, p.own, p.runId, now);
      const query = call.query
        ? `?${new URLSearchParams(Object.entries(call.query).map(([k, v]): [string, string] => [k, String(v)])).toString()}`
        : '';
      const lines = [
        `url = ${curlValue(`${server}${call.path}${query}`)}`,
        `request = ${curlValue(call.method)}`,
        ...nodeCredentials(p),
        // to stderr, which curl does not buffer: the counts are on the node as the answers come
        `write-out = ${curlValue('%{stderr}%{http_code}\\n')}`,
      ];
      if (call.body !== undefined)
        lines.push(
          `header = ${curlValue(`Content-Type: ${call.contentType ?? 'application/json'}`)}`,
          `data-binary = ${curlValue(JSON.stringify(call.body))}`,
        );
      return `${lines.filter(Boolean).join('\n')}\n`;
    })
    .join('next\n');
}

/** curl's options every request of the node shares: the node's credentials and trust, a bound, no output. */
function nodeCredentials(p: NodeLoadPlan): string[] {
  return [
    `header = ${curlValue(`@${p.dir}/auth`)}`,
    `user-agent = ${curlValue(p.userAgent)}`,
    p.ca ? `cacert = ${curlValue(`${p.dir}/ca.crt`)}` : p.insecure ? 'insecure' : '',
    'max-time = 10',
    'silent',
    `output = ${curlValue('/dev/null')}`,
  ];
}

/** curl's config for the dead-man's one request: DELETE the identity's owner, with the node's credentials. */
function cleanupConfig(p: NodeLoadPlan): string {
  return [
    `url = ${curlValue(`${p.server.replace(/\/+$/, '')}${p.identityPath}`)}`,
    'request = "DELETE"',
    ...nodeCredentials(p),
    `write-out = ${curlValue('%{http_code}')}`,
  ]
    .filter(Boolean)
    .join('\n')
    .concat('\n');
}

/**
 * One curl process's pace: the node's qps shared by its curl processes, as curl's `--rate` takes it (a whole number
 * per hour, rounded down); `gap`, the seconds between two of its requests, which its loop waits between two runs of curl
 * (`--rate` paces one run only); `reps`, the cycles of requests one run holds: about 5 s of them, at most CONFIG_MAX
 * requests, so that curl is not started for every request.
 */
export function curlPace(qps: number, processes: number, cycleLength: number): { rate: string; gap: string; reps: number } {
  const perHour = Math.max(1, Math.floor((qps / processes) * 3600));
  const perSecond = perHour / 3600;
  const reps = Math.max(1, Math.min(Math.floor(CONFIG_MAX / cycleLength), Math.ceil((perSecond * 5) / cycleLength)));
  return { rate: `${perHour}/h`, gap: Math.max(0.001, 1 / perSecond).toFixed(3), reps };
}

/**
 * The load itself, run detached: `processes` loops of curl, a killer that ends the group at the deadline (removing
 * the token first). Arguments: the directory, the seconds, the processes, curl's rate, the gap between two runs of curl.
 */
const LOAD_SH = `d=$1; secs=$2; n=$3; rate=$4; gap=$5
end=$(( $(date +%s) + secs ))
( sleep "$secs"; rm -f "$d/auth"; kill -9 0 ) &
i=0
while [ "$i" -lt "$n" ]; do
  ( while [ "$(date +%s)" -lt "$end" ] && [ -f "$d/auth" ]; do
      curl --rate "$rate" --config "$d/curl.conf" >/dev/null 2>>"$d/codes.$i" || sleep 1
      sleep "$gap"
    done ) &
  i=$((i + 1))
done
wait
`;

/** sh: kills the load in directory "$d" (its process group, then anything still running its files). */
const KILL_LOAD = [
  'if [ -f "$d/pid" ]; then',
  '  p=$(cat "$d/pid")',
  // only our group: after a reboot the pid may be another process's
  '  if tr "\\000" " " <"/proc/$p/cmdline" 2>/dev/null | grep -qF "$d/load.sh"; then kill -9 -"$p" 2>/dev/null || true; fi',
  'fi',
  'for c in /proc/[0-9]*/cmdline; do',
  '  q=${c#/proc/}; q=${q%/cmdline}',
  '  [ "$q" = "$$" ] && continue',
  '  if tr "\\000" " " <"$c" 2>/dev/null | grep -qF -e "$d/load.sh" -e "$d/curl.conf"; then kill -9 "$q" 2>/dev/null || true; fi',
  'done',
];

/** Read-only: the node can run the load (root, curl with --rate, setsid). */
export function nodeLoadCheckScript(): string {
  return script(
    'load-apiserver check',
    {},
    KR_FAIL,
    '[ "$(id -u 2>/dev/null)" = 0 ] || kr_fail "the load keeps a token where only root reads it: run as root, or set transport.sudo in the inventory"',
    'command -v curl >/dev/null 2>&1 || kr_fail "no curl: load-apiserver from: nodes sends its requests with curl (7.84 or newer)"',
    'curl --help all 2>/dev/null | grep -q -- "--rate" || kr_fail "curl is older than 7.84 (no --rate): $(curl --version 2>/dev/null | head -n 1)"',
    'command -v setsid >/dev/null 2>&1 || kr_fail "no setsid (util-linux): the load runs detached with it"',
  );
}

/**
 * Starts the load: writes its files (the token from stdin, as the `Authorization` header line), starts it detached
 * and prints `started <pid>`. Refuses a directory that exists (an apply is never repeated over a running load).
 */
export function nodeLoadStartScript(p: NodeLoadPlan, now: number): string {
  const processes = p.concurrency;
  const pace = curlPace(p.qps, processes, cycle(p.requests).length);
  return script(
    'load-apiserver start',
    {
      d: p.dir,
      secs: p.seconds,
      n: processes,
      rate: pace.rate,
      gap: pace.gap,
      conf: curlConfig(p, now, pace.reps),
      cleanup: p.identityPath ? cleanupConfig(p) : '',
      ca: p.ca ?? '',
      load: LOAD_SH,
    },
    KR_FAIL,
    'umask 077',
    '[ -e "$d" ] && kr_fail "$d exists: a load of this fault was started already"',
    'mkdir -p "$d" || kr_fail "cannot make $d"',
    // the token arrives on stdin; a builtin writes the rest, so no value is on a command line
    'cat >"$d/auth"',
    '[ -s "$d/auth" ] || { rm -rf "$d"; kr_fail "no credentials came on the input"; }',
    'printf "%s" "$conf" >"$d/curl.conf"',
    '[ -z "$cleanup" ] || printf "%s" "$cleanup" >"$d/cleanup.conf"',
    '[ -z "$ca" ] || printf "%s" "$ca" >"$d/ca.crt"',
    'printf "%s" "$load" >"$d/load.sh"',
    'setsid sh "$d/load.sh" "$d" "$secs" "$n" "$rate" "$gap" </dev/null >/dev/null 2>&1 &',
    'echo $! >"$d/pid"',
    'sleep 0.2',
    'tr "\\000" " " <"/proc/$(cat "$d/pid")/cmdline" 2>/dev/null | grep -qF "$d/load.sh" || { rm -rf "$d"; kr_fail "the load did not start"; }',
    'echo "started $(cat "$d/pid")"',
  );
}

/**
 * Stops the load and removes its directory (the token with it): the revert, and the dead-man's. Prints what curl
 * got, by status (`answers 200=1200 429=3`), when it ran. Idempotent. `removeIdentity` (the dead-man's: no executor
 * is left to do it): first deletes the run's identity with the token, while it is still there (`identity <status>`).
 */
export function nodeLoadStopScript(dir: string, removeIdentity = false): string {
  return script(
    'load-apiserver stop',
    { d: dir },
    ...KILL_LOAD,
    'if [ -d "$d" ]; then',
    ...(removeIdentity
      ? ['  if [ -f "$d/cleanup.conf" ] && [ -f "$d/auth" ]; then echo "identity $(curl --config "$d/cleanup.conf" 2>/dev/null)"; fi']
      : []),
    '  rm -f "$d/auth"',
    '  a=$(cat "$d"/codes.* 2>/dev/null | sort | uniq -c | awk \'{ printf "%s%s=%s", (NR > 1 ? " " : ""), $2, $1 }\')',
    '  [ -z "$a" ] || echo "answers $a"',
    'fi',
    'rm -rf "$d"',
    'rmdir "$(dirname "$d")" 2>/dev/null || true',
    'exit 0',
  );
}

/** The load's directory on a node. */
export const nodeLoadDir = (runId: string, key: string): string => `${LOAD_ROOT}/${runId}/${key}`;
