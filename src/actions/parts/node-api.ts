import { posix } from 'node:path';

/**
 * Reading the cluster from a control-plane node, for node-side reverts that must check the cluster before they undo
 * a remediation while the executor is gone: with a kubeconfig the node keeps, through curl (no kubectl needed), else
 * kubectl (or `k3s kubectl`). No JSON tool is needed either: the answer is squeezed onto one line and searched.
 */

/** Where a control-plane node keeps a kubeconfig that may read nodes and Leases, by layout. */
export function controlPlaneKubeconfigs(layout: 'kubeadm' | 'k3s' | 'lab', dir?: string): string[] {
  const labServiceDir = dir;
  switch (layout) {
    case 'kubeadm': {
      // `dir`: kubeadm's directory when not /etc/kubernetes (the inventory's spec.kubeadm.dir)
      const k = dir ?? '/etc/kubernetes';
      return [`${k}/admin.conf`, `${k}/super-admin.conf`, `${k}/controller-manager.conf`];
    }
    case 'k3s':
      return ['/etc/rancher/k3s/k3s.yaml', '/var/lib/rancher/k3s/server/cred/admin.kubeconfig'];
    case 'lab':
      // the component's own (<state>/nodes/<node>/<service>/kubeconfig), then the lab's admin one (<state>/kubeconfig)
      return labServiceDir ? [`${labServiceDir}/kubeconfig`, posix.join(labServiceDir, '..', '..', '..', 'kubeconfig')] : [];
  }
}

/**
 * `kr_api_get PATH KIND`: GETs PATH with the first kubeconfig listed in `$kr_tmp/kubeconfigs` that answers with a
 * `KIND`, through curl with the kubeconfig's credentials (a token goes in a header file, never on the command line),
 * else kubectl; 0 with the answer on one line, without blanks, in `$kr_tmp/body.min` (an apiserver pretty-prints for
 * a client it takes for curl), 1 when none answered. Needs `$kr_tmp`.
 */
export const KR_API_GET = `kr_kv() {
  sed -n "s/^[[:space:]]*$1:[[:space:]]*//p" "$2" | head -n 1 | tr -d "\\"'"
}
kr_curl_get() {
  command -v curl >/dev/null 2>&1 && [ -r "$2" ] || return 1
  kr_server=$(kr_kv server "$2")
  [ -n "$kr_server" ] || return 1
  kr_path=$1
  set -- "$2" -sS --fail --max-time 10 -A kube-runbook-deadman
  v=$(kr_kv certificate-authority-data "$1"); if [ -n "$v" ]; then printf '%s' "$v" | base64 -d >"$kr_tmp/ca" && set -- "$@" --cacert "$kr_tmp/ca"; else v=$(kr_kv certificate-authority "$1"); [ -z "$v" ] || set -- "$@" --cacert "$v"; fi
  v=$(kr_kv client-certificate-data "$1"); if [ -n "$v" ]; then printf '%s' "$v" | base64 -d >"$kr_tmp/crt" && set -- "$@" --cert "$kr_tmp/crt"; else v=$(kr_kv client-certificate "$1"); [ -z "$v" ] || set -- "$@" --cert "$v"; fi
  v=$(kr_kv client-key-data "$1"); if [ -n "$v" ]; then printf '%s' "$v" | base64 -d >"$kr_tmp/key" && set -- "$@" --key "$kr_tmp/key"; else v=$(kr_kv client-key "$1"); [ -z "$v" ] || set -- "$@" --key "$v"; fi
  v=$(kr_kv token "$1"); if [ -n "$v" ]; then printf 'Authorization: Bearer %s\\n' "$v" >"$kr_tmp/auth" && set -- "$@" -H "@$kr_tmp/auth"; fi
  shift
  curl "$@" "\${kr_server%/}$kr_path"
}
kr_kubectl_get() {
  [ -r "$2" ] || return 1
  if command -v kubectl >/dev/null 2>&1; then kubectl --kubeconfig="$2" --request-timeout=10s get --raw "$1"
  elif command -v k3s >/dev/null 2>&1; then k3s kubectl --kubeconfig="$2" --request-timeout=10s get --raw "$1"
  else return 1; fi
}
kr_api_get() {
  while IFS= read -r kc; do
    [ -n "$kc" ] || continue
    if kr_curl_get "$1" "$kc" >"$kr_tmp/body" 2>/dev/null || kr_kubectl_get "$1" "$kc" >"$kr_tmp/body" 2>/dev/null; then
      tr -d ' \\t\\r\\n' <"$kr_tmp/body" >"$kr_tmp/body.min"
      if grep -q "\\"kind\\":\\"$2\\"" "$kr_tmp/body.min"; then return 0; fi
    fi
  done <"$kr_tmp/kubeconfigs"
  return 1
}`;

/**
 * \`kr_leases_renewed\`: reads the node Leases (\`kr_api_get\`) and compares each node's renewTime with what the previous
 * call read: 0 when every node that had a Lease then has renewed it since (every kubelet heartbeats), 1 when not (or
 * on the first call), 2 when the Leases cannot be read; \`$kr_why\` says which. Two reads and no clock: the node's clock
 * is never compared with the kubelets', as the node lifecycle controller counts from when it saw a renewal, not from
 * the time written in it. Call it at least one renew interval apart (10 s on a default kubelet).
 */
export const KR_LEASES_RENEWED = `kr_leases_renewed() {
  printf '%s\\n' "$kubeconfigs" >"$kr_tmp/kubeconfigs"
  if ! kr_api_get /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases LeaseList; then
    kr_why="the node Leases cannot be read (no kubeconfig of this node answered)"
    rm -f "$kr_tmp/leases.before"
    return 2
  fi
  grep -o '"holderIdentity":"[^"]*"[^}]*"renewTime":"[^"]*"' "$kr_tmp/body.min" | sed 's/^"holderIdentity":"\\([^"]*\\)".*"renewTime":"\\([^"]*\\)"$/\\1 \\2/' | LC_ALL=C sort >"$kr_tmp/leases.now"
  if [ ! -f "$kr_tmp/leases.before" ]; then
    mv "$kr_tmp/leases.now" "$kr_tmp/leases.before"
    kr_why="$(wc -l <"$kr_tmp/leases.before") node Lease(s) read; checking that each is renewed"
    return 1
  fi
  # a node whose renewTime then is still there now has not renewed since (a Lease gone is no node to wait for)
  kr_was=$(wc -l <"$kr_tmp/leases.before")
  LC_ALL=C comm -12 "$kr_tmp/leases.before" "$kr_tmp/leases.now" >"$kr_tmp/leases.same"
  kr_stale=$(wc -l <"$kr_tmp/leases.same")
  kr_names=$(head -n 5 "$kr_tmp/leases.same" | cut -d' ' -f1 | tr '\\n' ' ')
  mv "$kr_tmp/leases.now" "$kr_tmp/leases.before"
  if [ "$kr_stale" -eq 0 ] && [ "$kr_was" -gt 0 ]; then kr_why="all $kr_was node Lease(s) renewed since the last check"; return 0; fi
  kr_why="$kr_stale of $kr_was node Lease(s) not renewed since the last check\${kr_names:+: $kr_names}"
  return 1
}`;

/**
 * The lines of a node-side revert that waits for the cluster before it acts: `$kr_tmp` (removed at exit), then
 * `check` (a shell function: 0 when safe, `$kr_why` saying what it saw) every `$every_s` seconds until it passes, or
 * until `$cap_s` seconds have passed, when it acts anyway. Each line it says is time-stamped: they go to the
 * dead-man's revert.log. `ready` says what passing means, `act` what it then does ("starting it").
 */
export function waitBeforeActing(check: string, ready: string, act: string): string[] {
  return [
    'kr_tmp=$(mktemp -d) || kr_fail "cannot make a temporary directory"',
    'chmod 700 "$kr_tmp"',
    'trap \'rm -rf "$kr_tmp"\' EXIT',
    'kr_say() { printf \'%s %s\\n\' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"; }',
    // counted in checks, not read from the clock, so that it ends whatever `date` says
    'kr_left=$cap_s',
    'while :; do',
    `  if ${check}; then kr_say "${ready} ($kr_why): ${act}"; break; fi`,
    `  if [ "$kr_left" -le 0 ]; then kr_say "still $kr_why after $cap_s s: ${act} anyway (the hard cap)"; break; fi`,
    `  kr_say "not ${act} yet: $kr_why; checking again in $every_s s"`,
    '  sleep "$every_s"',
    '  kr_left=$((kr_left - every_s))',
    'done',
  ];
}
