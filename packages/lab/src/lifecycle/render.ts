import { formatDuration } from 'kube-runbook/internal/core/duration.js';
import type { FleetStats } from '../sim/fleet.js';
import { describeSettings } from '../host/settings.js';
import type { LabStatus } from './status.js';
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
