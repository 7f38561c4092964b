import { formatDuration } from 'kube-runbook/internal/core/duration.js';
import type { FleetStats } from '../sim/fleet.js';
import { describeSettings } from '../host/settings.js';
import type { LabStatus } from './status.js';
import type { LabInfo } from '../host/info.js';
import { renderHa } from './ha-status.js';
import { realContainerLines } from './containers.js';

/** Text of `lab status`. */
export function renderStatus(s: LabStatus): string {
  const version = s.info.binaries ? `Kubernetes ${s.info.binaries.version}, ` : '';
  const prometheus = s.info.prometheus ? `, prometheus ${s.info.prometheus.url}` : '';
  const otel = s.info.otel ? `, otlp ${s.info.otel.endpoint}` : '';
  const lines = [
    `lab ${s.info.instance} (${s.info.phase}), ${version}apiserver ${s.info.apiserverUrl}${prometheus}${otel}, ${describeSettings(s.info.settings)}`,
    '',
    'COMPONENTS',
  ];
  for (const c of s.components)
    lines.push(
      `  ${c.node.padEnd(10)} ${c.service.padEnd(24)} ${c.running ? (c.healthy ? 'healthy' : 'running, not healthy') : 'stopped'}`,
    );
  lines.push('', 'NODES');
  if (!s.cluster) lines.push(`  (apiserver unreachable: ${s.clusterError ?? 'unknown'})`);
  for (const n of s.cluster?.nodes ?? [])
    lines.push(`  ${n.name.padEnd(12)} ${(n.ready ? 'Ready' : 'NotReady').padEnd(9)} ${(n.zone ?? '').padEnd(8)} ${n.taints.join(' ')}`);
  lines.push('', 'PODS');
  for (const p of s.cluster?.pods ?? [])
    lines.push(`  ${`${p.namespace}/${p.name}`.padEnd(36)} ${(p.node ?? '-').padEnd(10)} ${p.terminating ? 'Terminating' : p.phase}`);
  if (s.ha) lines.push(...renderHa(s.ha));
  if (s.runtimes.length) lines.push('', 'SIMULATED CONTAINERS');
  for (const r of s.runtimes) lines.push(`  ${r.node.padEnd(10)} ${r.containers.length} running, ${r.kills.length} killed`);
  if (s.realRuntimes.length) lines.push('', 'REAL CONTAINERS (containerd)');
  for (const r of s.realRuntimes) lines.push(...realContainerLines(r, `  ${r.node.padEnd(10)} `));
  return lines.join('\n');
}

/** One line of `lab fleet` progress. */
export function fleetLine(s: FleetStats): string {
  return `fleet ${formatDuration(s.elapsedMs)}: ${s.count} nodes, ${s.registered} registered, ${s.renewing} renewing, ${s.ready} Ready, ${s.flaps} flap(s), ${s.renewals} renewals${s.steadyRenewalsPerSecond !== undefined ? ` (${s.steadyRenewalsPerSecond}/s steady, longest gap ${formatDuration(s.maxRenewGapMs ?? 0)})` : ''}, ${s.cpuSeconds} CPU s, ${s.rssMiB} MiB`;
}

/**
 * The first line `lab up` prints: the release and the nodes of the cluster (`kubectl get nodes` counts a static-pod
 * lab's cp-1 and a kubeadm lab's every member too), each kind counted, and where the apiserver is.
 */
export function upLine(info: LabInfo): string {
  const s = info.settings;
  const members = s.kubeadm ? (info.members?.length ?? 1) : s.staticPods ? 1 : 0;
  const kinds = [
    [s.nodes, 'simulated'],
    [s.realNodes ?? 0, 'real'],
    [s.systemdNodes ?? 0, 'with systemd as PID 1'],
  ].filter(([n]) => n) as [number, string][];
  const workers = kinds.reduce((a, [n]) => a + n, 0);
  const parts = [
    `${workers} worker(s)${kinds.length > 1 || s.realNodes ? `: ${kinds.map(([n, what]) => `${n} ${what}`).join(', ')}` : ''}`,
    ...(members ? [`${members} control-plane`] : []),
  ];
  const where = info.members
    ? `${info.members.length} control-plane members behind the VIP ${info.apiserverUrl}`
    : `apiserver ${info.apiserverUrl}`;
  return `lab ${info.instance} is up in ${info.upSeconds}s: Kubernetes ${info.binaries?.version ?? '?'}, ${workers + members} node(s) Ready (${parts.join('; ')}), ${where}`;
}
