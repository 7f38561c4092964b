import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from 'kube-runbook/internal/core/clock.js';
import { KrError } from 'kube-runbook/internal/core/errors.js';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { sh } from '../host/host.js';
import { labPaths, LB_NODE, OTEL_NODE, PROMETHEUS_NODE } from '../host/paths.js';
import { controlPlaneNodes, type LabSettings } from '../host/settings.js';

/** Runs a service's `start` script. */
export async function start(dir: string): Promise<void> {
  const r = await sh(shq(join(dir, 'start')));
  if (r.code !== 0) throw new KrError('LAB_START_FAILED', `${join(dir, 'start')} failed (exit ${r.code}): ${r.stderr.trim()}`);
}

export async function startAndWait(dir: string, timeoutMs: number, clock: Clock, signal?: AbortSignal): Promise<void> {
  await start(dir);
  const deadline = clock.now() + timeoutMs;
  for (;;) {
    if ((await sh(shq(join(dir, 'health')))).code === 0) return;
    if ((await sh(shq(join(dir, 'status')))).code !== 0)
      throw new KrError('LAB_START_FAILED', `${dir.split('/').pop()} exited at start`, { details: await logTail(dir) });
    if (clock.now() > deadline)
      throw new KrError('LAB_START_FAILED', `${dir.split('/').pop()} was not healthy within ${timeoutMs / 1000}s`, {
        details: await logTail(dir),
      });
    await clock.sleep(200, signal);
  }
}

/** The last `n` non-empty lines of a program's output or log, indented and cut at 300 characters, for an error. */
export const lastLines = (text: string, n: number): string[] =>
  text
    .trim()
    .split('\n')
    .filter(Boolean)
    .slice(-n)
    .map((l) => `  ${l.slice(0, 300)}`);

/** The last lines of a service's `log`, naming the file, for an error about it. */
async function logTail(dir: string, lines = 12): Promise<string[]> {
  const file = join(dir, 'log');
  const text = await readFile(file, 'utf8').catch(() => undefined);
  if (text === undefined) return [`${file}: no log`];
  const tail = lastLines(text, lines);
  return [`${file}${tail.length ? ', last lines:' : ': empty'}`, ...tail];
}

/** The last lines of each component's log, for an error report. */
export async function logTails(instance: string, settings: LabSettings): Promise<string[]> {
  const paths = labPaths(instance);
  const out: string[] = [];
  const svcs: [string, string][] = [
    ...controlPlaneNodes(settings).flatMap((cp): [string, string][] =>
      settings.staticPods
        ? [
            [cp, 'containerd'],
            [cp, 'kubelet'],
          ]
        : [
            [cp, 'etcd'],
            [cp, 'kube-apiserver'],
            [cp, 'kube-controller-manager'],
            [cp, 'kube-scheduler'],
          ],
    ),
    ...((settings.controlPlanes ?? 1) > 1 ? [[LB_NODE, 'haproxy'] as [string, string]] : []),
    ...(settings.prometheus ? [[PROMETHEUS_NODE, 'prometheus'] as [string, string]] : []),
    ...(settings.otel ? [[OTEL_NODE, 'otelcol'] as [string, string]] : []),
    ...Array.from({ length: Math.min(settings.nodes, 3) }, (_, i): [string, string] => [`node-${i + 1}`, 'kubelet']),
    ...Array.from({ length: Math.min(settings.realNodes ?? 0, 2) }, (_, i): [string, string][] => [
      [`rnode-${i + 1}`, 'containerd'],
      [`rnode-${i + 1}`, 'kubelet'],
    ]).flat(),
  ];
  for (const [node, svc] of svcs) {
    const lines = lastLines(await readFile(join(paths.serviceDir(node, svc), 'log'), 'utf8').catch(() => ''), 4);
    if (lines.length) out.push(`${node}/${svc} log:`, ...lines);
  }
  return out;
}
