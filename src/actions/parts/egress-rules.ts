import { shCommand, shq } from '../../core/shell.js';
import { KR_FAIL, script } from '../../nodes/services/script.js';

export type EgressRule = { ip: string; port: number; v6: boolean };

/** Everything block-kubelet-egress needs to add and remove its rules; plain JSON. */
export type EgressState = {
  node: string;
  tool: 'iptables' | 'nft';
  /** iptables chain (same name in ip6tables). */
  chain: string;
  /** nftables table (family inet). */
  table: string;
  rules: EgressRule[];
  /** cgroup v2 path of the kubelet, without the leading slash; null = the whole node. */
  cgroup: string | null;
  /** Packets from this source port (the ssh transport's) are let through before any drop. */
  keepSourcePort: number | null;
  /** Packets of processes of this group (the lab's node agents) are let through before any drop; absent in older journals. */
  keepGid?: number | null;
};

const families = (s: EgressState) => (s.rules.some((r) => r.v6) ? ['iptables', 'ip6tables'] : ['iptables']);

function iptablesApply(s: EgressState): string[] {
  const lines: string[] = [];
  for (const t of families(s)) {
    const v6 = t === 'ip6tables';
    lines.push(
      `${shCommand(t, '-w', '-N', s.chain)} 2>/dev/null || ${shCommand(t, '-w', '-F', s.chain)} || kr_fail "cannot create chain $chain"`,
    );
    if (s.keepSourcePort !== null)
      lines.push(
        `${shCommand(t, '-w', '-A', s.chain, '-p', 'tcp', '--sport', s.keepSourcePort, '-j', 'RETURN')} || kr_fail "cannot add rule"`,
      );
    if (s.keepGid != null)
      lines.push(
        `${shCommand(t, '-w', '-A', s.chain, '-p', 'tcp', '-m', 'owner', '--gid-owner', s.keepGid, '-j', 'RETURN')} || kr_fail "cannot add rule"`,
      );
    for (const r of s.rules.filter((x) => x.v6 === v6)) {
      const scope = s.cgroup ? ['-m', 'cgroup', '--path', s.cgroup] : [];
      lines.push(
        `${shCommand(t, '-w', '-A', s.chain, '-p', 'tcp', '-d', r.ip, '--dport', r.port, ...scope, '-j', 'DROP')} || kr_fail "cannot add rule"`,
      );
    }
    lines.push(
      `${shCommand(t, '-w', '-C', 'OUTPUT', '-j', s.chain)} 2>/dev/null || ${shCommand(t, '-w', '-I', 'OUTPUT', '1', '-j', s.chain)} || kr_fail "cannot jump to $chain from OUTPUT"`,
    );
  }
  return lines;
}

/** The nftables ruleset text; every value in it is an IP, a port or a checked cgroup path. */
export function nftRuleset(s: EgressState): string {
  const scope = s.cgroup ? ` socket cgroupv2 level ${s.cgroup.split('/').length} ${JSON.stringify(s.cgroup)}` : '';
  const rules = s.rules.map((r) => `    ${r.v6 ? 'ip6' : 'ip'} daddr ${r.ip} tcp dport ${r.port}${scope} counter drop`);
  const keep = [
    ...(s.keepSourcePort !== null ? [`    tcp sport ${s.keepSourcePort} return`] : []),
    ...(s.keepGid != null ? [`    meta skgid ${s.keepGid} return`] : []),
  ];
  return [
    `table inet ${s.table} {`,
    '  chain output {',
    '    type filter hook output priority 0; policy accept;',
    ...keep,
    ...rules,
    '  }',
    '}',
  ].join('\n');
}

/** The script of `step` on this state's chain or table: `body`, then `done` said. */
function egressScript(s: EgressState, step: 'apply' | 'revert', body: string[], done: string): string {
  return script(`block-kubelet-egress ${step} ${s.tool}`, { chain: s.chain, table: s.table }, KR_FAIL, ...body, `echo "${done}"`);
}

/** Adds the rules; safe to run again (the chain is flushed and refilled, the jump added once). */
export function applyRules(s: EgressState): string {
  const body =
    s.tool === 'iptables'
      ? iptablesApply(s)
      : [
          'nft list table inet "$table" >/dev/null 2>&1 && { nft delete table inet "$table" || kr_fail "cannot replace table $table"; }',
          `printf '%s\\n' ${shq(nftRuleset(s))} | nft -f - || kr_fail "cannot add table $table"`,
        ];
  return egressScript(s, 'apply', body, 'egress to the apiservers blocked');
}

/** Removes every trace of the rules; idempotent, and correct after a half-done apply. */
export function egressRevert(s: EgressState): string {
  const body: string[] = [];
  if (s.tool === 'iptables')
    for (const t of families(s)) {
      body.push(
        `if command -v ${t} >/dev/null 2>&1; then`,
        `  i=0; while [ "$i" -lt 100 ] && ${shCommand(t, '-w', '-D', 'OUTPUT', '-j', s.chain)} 2>/dev/null; do i=$((i + 1)); done`,
        `  if ${shCommand(t, '-w', '-S', s.chain)} >/dev/null 2>&1; then`,
        `    ${shCommand(t, '-w', '-F', s.chain)} && ${shCommand(t, '-w', '-X', s.chain)} || kr_fail "cannot delete chain $chain"`,
        '  fi',
        'fi',
      );
    }
  else
    body.push(
      'if command -v nft >/dev/null 2>&1 && nft list table inet "$table" >/dev/null 2>&1; then',
      '  nft delete table inet "$table" || kr_fail "cannot delete table $table"',
      'fi',
    );
  return egressScript(s, 'revert', body, 'egress rules removed');
}
